/* SPDX-License-Identifier: MIT */
/*
 * main.c - rkv-bench-ps: parameter-server push and pull throughput beside
 * raw transport WRITE and READ of the same bytes, in one run.
 *
 *   rkv-bench-ps --servers ADDR[,ADDR] [--sizes 4K,64K,1M,16M]
 *                [--seconds S] [--shard ELEMS] [--rule sum|assign|sgd]
 *                [--warm BYTES] [--json FILE]
 *
 * For each size: a float32 tensor of that many bytes (shards of --shard
 * elements, default 16384 = 64 KiB) is created on the servers; pull and
 * push run back to back for --seconds each (at least 3 times), and the
 * figure is bytes moved per second of the tensor's payload.
 *
 * --warm BYTES first pushes a tensor of the largest size, with the rule
 * measured, until BYTES have gone, then waits while the old blocks come
 * back.  Every push writes new blocks, and on a server's fresh region each
 * of their pages is faulted in on first touch (11 us a 4 KiB page on a VM
 * that shadows page tables, where that is most of a push); warmed with
 * ASSIGN instead, the first SUM point still ran at a third of the next
 * run's speed.  With --warm as large as the server's --memory, the points
 * measure a server that has run a while, as the raw rows' buffers are
 * written before they are measured.
 *
 * The raw rows use the transport directly: an in-process target context
 * of the servers' provider (listener, accept in a thread, one registered
 * region of the largest size; on tcp its transport thread serves the
 * requests, as the server's does) and an initiator context that moves the
 * same bytes in WRs of the shard size with as many in flight as the
 * client's op slots (32), every WR signaled.  That is the same work a
 * pull's READs do minus the KV layer (bucket or slot reads, checksums,
 * copies); a SUM or SGD push moves each shard twice (READ old block, WRITE
 * new one), an ASSIGN push once (the write-only path of client/ps.c).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "msg.h"
#include "rkv.h"
#include "rkv_ps.h"
#include "rtime.h"
#include "size.h"
#include "transport.h"
#include "version.h"

#define MAX_SIZES 16
#define RAW_DEPTH 32
#define CONNECT_MS 10000

struct opts {
	const char *servers;
	const char *json;
	double seconds;
	uint64_t warm;
	uint32_t shard;
	enum rkv_ps_rule rule;
	size_t sizes[MAX_SIZES];
	unsigned nsizes;
};

struct row {
	size_t bytes;
	double pull, push, rread, rwrite; /* MB/s (10^6 bytes) */
	int err;
};

/* ---------------------------------------------------------------- raw */

struct raw {
	struct rkv_tp *stp, *ctp;
	struct rkv_cq *scq, *ccq;
	struct rkv_listener *l;
	struct rkv_ep *sep, *cep;
	void *smem, *cmem;
	size_t len;
	struct rkv_mr *smr, *cmr;
	int accept_rc;
};

static void *accept_fn(void *arg)
{
	struct raw *r = arg;

	r->accept_rc = rkv_accept(r->l, r->scq, CONNECT_MS, &r->sep);
	return NULL;
}

static void raw_close(struct raw *r)
{
	rkv_ep_destroy(r->cep);
	rkv_ep_destroy(r->sep);
	rkv_listener_destroy(r->l);
	rkv_mr_dereg(r->cmr);
	rkv_mr_dereg(r->smr);
	if (r->cmem)
		rkv_tp_mem_free(r->ctp, r->cmem, r->len);
	if (r->smem)
		rkv_tp_mem_free(r->stp, r->smem, r->len);
	rkv_cq_destroy(r->ccq);
	rkv_cq_destroy(r->scq);
	rkv_tp_destroy(r->ctp);
	rkv_tp_destroy(r->stp);
	memset(r, 0, sizeof(*r));
}

static int raw_open(struct raw *r, const char *server, size_t len)
{
	struct rkv_tp_addr a;
	struct rkv_tp_opts to;
	char addr[300];
	pthread_t th;
	int rc;

	memset(r, 0, sizeof(*r));
	r->len = len;
	rc = rkv_tp_addr_parse(server, &a);
	if (rc)
		return rc;
	rkv_tp_opts_init(&to);
	to.provider = a.provider;
	to.max_send_wr = 4 * RAW_DEPTH;
	rc = rkv_tp_create(&to, &r->stp);
	if (!rc)
		rc = rkv_tp_create(&to, &r->ctp);
	if (!rc)
		rc = rkv_cq_create(r->stp, 256, &r->scq);
	if (!rc)
		rc = rkv_cq_create(r->ctp, 256, &r->ccq);
	if (!rc)
		rc = rkv_tp_mem_alloc(r->stp, len, &r->smem);
	if (!rc)
		rc = rkv_tp_mem_alloc(r->ctp, len, &r->cmem);
	if (!rc)
		rc = rkv_mr_reg(r->stp, r->smem, len, RKV_ACCESS_ALL, &r->smr);
	if (!rc)
		rc = rkv_mr_reg(r->ctp, r->cmem, len, RKV_ACCESS_LOCAL_WRITE,
				&r->cmr);
	if (rc)
		goto fail;
	if (a.provider == RKV_TP_SHM)
		snprintf(addr, sizeof(addr), "shm:///rkv-bench-ps-%ld",
			 (long)getpid());
	else
		snprintf(addr, sizeof(addr), "%s://%s:0",
			 rkv_tp_provider_str(a.provider), a.host);
	rc = rkv_listen(r->stp, addr, &r->l);
	if (rc)
		goto fail;
	rc = -pthread_create(&th, NULL, accept_fn, r);
	if (rc)
		goto fail;
	rc = rkv_connect(r->ctp, rkv_listener_addr(r->l), r->ccq, CONNECT_MS,
			 &r->cep);
	pthread_join(th, NULL);
	if (!rc)
		rc = r->accept_rc;
	if (rc)
		goto fail;
	return 0;
fail:
	raw_close(r);
	return rc;
}

/* Move bytes in WRs of chunk bytes, RAW_DEPTH in flight.  Returns 0. */
static int raw_pass(struct raw *r, enum rkv_wr_opcode opc, size_t bytes,
		    size_t chunk)
{
	struct rkv_wr wr;
	struct rkv_wc wc[32];
	size_t off = 0, n = (bytes + chunk - 1) / chunk, posted = 0, done = 0;

	while (done < n) {
		while (posted < n && posted - done < RAW_DEPTH) {
			size_t len = bytes - off < chunk ? bytes - off : chunk;

			wr = (struct rkv_wr){
				.wr_id = posted, .opcode = opc,
				.flags = RKV_WR_SIGNALED,
				.local = (char *)r->cmem + off,
				.length = (uint32_t)len, .lkey = r->cmr->lkey,
				.remote_addr = (uint64_t)(uintptr_t)r->smem +
					       off,
				.rkey = r->smr->rkey };
			int rc = rkv_post(r->cep, &wr, NULL);

			if (rc)
				return rc;
			off += len;
			posted++;
		}
		int k = rkv_cq_poll(r->ccq, wc, 32);

		if (k < 0)
			return k;
		for (int i = 0; i < k; i++)
			if (wc[i].status != RKV_WC_SUCCESS)
				return -EIO;
		done += (size_t)k;
	}
	return 0;
}

static double raw_rate(struct raw *r, enum rkv_wr_opcode opc, size_t bytes,
		       size_t chunk, double seconds)
{
	uint64_t t0 = rkv_now_ns(), t;
	unsigned it = 0;

	do {
		if (raw_pass(r, opc, bytes, chunk))
			return -1;
		it++;
		t = rkv_now_ns() - t0;
	} while (it < 3 || t < seconds * 1e9);
	return (double)bytes * it / ((double)t / 1e9) / 1e6;
}

/* ----------------------------------------------------------------- ps */

static double ps_rate(struct rkv_ps_tensor *t, int push, enum rkv_ps_rule rule,
		      float *buf, uint64_t n, double seconds, int *err)
{
	uint64_t t0 = rkv_now_ns(), t1;
	unsigned it = 0;

	do {
		int rc = push ? rkv_ps_push(t, rule, buf, n, 1e-3f) :
				rkv_ps_pull(t, buf, n, NULL, NULL);

		if (rc) {
			*err = rc;
			return -1;
		}
		it++;
		t1 = rkv_now_ns() - t0;
	} while (it < 3 || t1 < seconds * 1e9);
	return (double)n * 4 * it / ((double)t1 / 1e9) / 1e6;
}

#define WARM_PAUSE_MS 1000u /* after --warm's pushes: a grace and more */

/* --warm: pushes (o->rule) of an n-float tensor until o->warm bytes have
 * gone, then the pause (polled: the client hands its old blocks back).
 * 0 or -errno. */
static int warm_up(struct rkv_client *c, struct rkv_ps *ps,
		   const struct opts *o, float *buf, uint64_t n)
{
	struct rkv_ps_tensor *t = NULL;
	uint64_t done = 0, t0 = rkv_now_ns(), until;
	char name[64];
	int rc;

	snprintf(name, sizeof(name), "bench-%d-warm", (int)getpid());
	rc = rkv_ps_tensor_create(ps, name, RKV_PS_FLOAT32, n, o->shard, buf);
	if (!rc)
		rc = rkv_ps_tensor_open(ps, name, RKV_PS_FLOAT32, n, &t);
	while (!rc && done < o->warm) {
		rc = rkv_ps_push(t, o->rule, buf, n, 1e-3f);
		done += n * 4;
	}
	if (t)
		rkv_ps_tensor_close(t);
	(void)rkv_ps_tensor_delete(ps, name);
	if (rc)
		return rc;
	printf("warm-up: %llu MiB pushed in %.1f s\n",
	       (unsigned long long)(done >> 20),
	       (double)(rkv_now_ns() - t0) / 1e9);
	until = rkv_now_ms() + WARM_PAUSE_MS;
	while (rkv_now_ms() < until) {
		(void)rkv_poll(c, NULL, 0);
		usleep(1000);
	}
	return 0;
}

/* -------------------------------------------------------------- main */

static void size_str(size_t b, char *s, size_t n)
{
	if (b >= (1u << 20) && b % (1u << 20) == 0)
		snprintf(s, n, "%zuM", b >> 20);
	else if (b >= 1024 && b % 1024 == 0)
		snprintf(s, n, "%zuK", b >> 10);
	else
		snprintf(s, n, "%zu", b);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: rkv-bench-ps --servers ADDR[,ADDR] "
		   "[--sizes 4K,64K,1M,16M] [--seconds S]\n"
		   "                    [--shard ELEMS] "
		   "[--rule sum|assign|sgd] [--warm BYTES] [--json FILE]\n"
		   "       rkv-bench-ps --help | --version\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "servers", required_argument, NULL, 's' },
		{ "sizes", required_argument, NULL, 'z' },
		{ "seconds", required_argument, NULL, 't' },
		{ "shard", required_argument, NULL, 'e' },
		{ "rule", required_argument, NULL, 'r' },
		{ "json", required_argument, NULL, 'j' },
		{ "warm", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .seconds = 1.0, .shard = RKV_PS_SHARD_DEFAULT,
			  .rule = RKV_PS_SUM };
	const char *sizes = "4K,64K,1M,16M";
	struct row rows[MAX_SIZES];
	struct rkv_client_opts co;
	struct rkv_client *c = NULL;
	struct rkv_ps *ps = NULL;
	struct raw raw;
	size_t maxb = 0;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 's': o.servers = optarg; break;
		case 'z': sizes = optarg; break;
		case 't': o.seconds = atof(optarg); break;
		case 'e': o.shard = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'j': o.json = optarg; break;
		case 'w':
			if (rkv_parse_size(optarg, &o.warm) || !o.warm) {
				fprintf(stderr, "rkv-bench-ps: --warm: want a "
					"size (bytes, K, M or G), got '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'r':
			if (!strcmp(optarg, "sum"))
				o.rule = RKV_PS_SUM;
			else if (!strcmp(optarg, "assign"))
				o.rule = RKV_PS_ASSIGN;
			else if (!strcmp(optarg, "sgd"))
				o.rule = RKV_PS_SGD;
			else {
				usage(stderr);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		case 'V':
			return rkv_version_print("rkv-bench-ps",
						 RKV_PROTO_VERSION) ? 2 : 0;
		default: usage(stderr); return 2;
		}
	}
	if (!o.servers || o.seconds <= 0 || !o.shard) {
		usage(stderr);
		return 2;
	}
	uint64_t bytes[MAX_SIZES];

	/* tensor sizes: 4 bytes to 256 MiB, whole floats */
	rc = rkv_parse_size_list(sizes, 4, 256ull << 20, bytes, MAX_SIZES,
				 &o.nsizes);
	for (unsigned i = 0; !rc && i < o.nsizes; i++) {
		if (bytes[i] % 4)
			rc = -EINVAL;
		o.sizes[i] = (size_t)bytes[i];
		if (bytes[i] > maxb)
			maxb = (size_t)bytes[i];
	}
	if (rc) {
		fprintf(stderr, "rkv-bench-ps: bad --sizes '%s' (4 B to 256 "
			"MiB each, whole floats, at most %d)\n", sizes,
			MAX_SIZES);
		return 2;
	}

	rkv_client_opts_init(&co);
	co.servers = o.servers;
	co.timeout_ms = 20000;
	rc = rkv_client_create(&co, &c);
	if (!rc)
		rc = rkv_ps_create(c, &ps);
	if (rc) {
		fprintf(stderr, "rkv-bench-ps: cannot connect to %s: %s\n",
			o.servers, strerror(-rc));
		return 1;
	}
	char first[300];

	snprintf(first, sizeof(first), "%s", o.servers);
	first[strcspn(first, ",")] = '\0';
	rc = raw_open(&raw, first, maxb);
	if (rc)
		fprintf(stderr, "rkv-bench-ps: raw transport pair: %s "
			"(raw rows left out)\n", strerror(-rc));
	float *buf = calloc(maxb / 4, sizeof(float));

	if (!buf)
		return 1;
	for (size_t i = 0; i < maxb / 4; i++)
		buf[i] = (float)(i % 100) * 1e-3f;
	printf("rkv-bench-ps: %s, shards of %u floats (%u KiB), push rule %s, "
	       "%.1f s per point\n", o.servers, o.shard, o.shard * 4 / 1024,
	       rkv_ps_rule_str(o.rule), o.seconds);
	if (o.warm && (rc = warm_up(c, ps, &o, buf, maxb / 4))) {
		fprintf(stderr, "rkv-bench-ps: --warm: %s\n", strerror(-rc));
		return 1;
	}
	printf("%-6s %7s %10s %10s %10s %10s %7s %7s\n", "size", "shards",
	       "pull MB/s", "READ MB/s", "push MB/s", "WRITE MB/s",
	       "pull/R", "push/W");
	for (unsigned i = 0; i < o.nsizes; i++) {
		struct row *r = &rows[i];
		struct rkv_ps_tensor *t = NULL;
		char name[64], sz[32];
		uint64_t n = o.sizes[i] / 4;

		memset(r, 0, sizeof(*r));
		r->bytes = o.sizes[i];
		snprintf(name, sizeof(name), "bench-%d-%u", (int)getpid(), i);
		rc = rkv_ps_tensor_create(ps, name, RKV_PS_FLOAT32, n, o.shard,
					  buf);
		if (!rc)
			rc = rkv_ps_tensor_open(ps, name, RKV_PS_FLOAT32, n, &t);
		if (rc) {
			fprintf(stderr, "rkv-bench-ps: tensor of %zu bytes: %s\n",
				o.sizes[i], strerror(-rc));
			r->err = rc;
			continue;
		}
		struct rkv_client_stats st;

		r->pull = ps_rate(t, 0, o.rule, buf, n, o.seconds, &r->err);
		rkv_client_stats_reset(c);
		r->push = ps_rate(t, 1, o.rule, buf, n, o.seconds, &r->err);
		rkv_client_stats(c, &st);
		rkv_ps_tensor_close(t);
		rkv_ps_tensor_delete(ps, name);
		if (raw.cep) {
			size_t chunk = (size_t)o.shard * 4;

			r->rread = raw_rate(&raw, RKV_WR_READ, o.sizes[i], chunk,
					    o.seconds);
			r->rwrite = raw_rate(&raw, RKV_WR_WRITE, o.sizes[i],
					     chunk, o.seconds);
		}
		size_str(o.sizes[i], sz, sizeof(sz));
		printf("%-6s %7llu %10.1f %10.1f %10.1f %10.1f %7.2f %7.2f%s%s%s\n",
		       sz, (unsigned long long)((n + o.shard - 1) / o.shard),
		       r->pull, r->rread, r->push, r->rwrite,
		       r->rread > 0 ? r->pull / r->rread : 0,
		       r->rwrite > 0 ? r->push / r->rwrite : 0,
		       r->err ? "  (error: " : "",
		       r->err ? strerror(-r->err) : "", r->err ? ")" : "");
		if (getenv("RKV_BENCH_PS_DEBUG"))
			printf("       push: %llu rmw, %.2f RTTs each, %llu "
			       "retries, %llu lock waits, %llu chunks, %llu "
			       "doorbells\n",
			       (unsigned long long)st.rmw.ops,
			       st.rmw.ops ? (double)st.rmw.rtts / st.rmw.ops : 0,
			       (unsigned long long)st.rmw.retries,
			       (unsigned long long)st.lock_waits,
			       (unsigned long long)st.chunks,
			       (unsigned long long)st.doorbells);
		fflush(stdout);
	}
	printf("goal: pull and push >= 0.8x raw READ / WRITE for 1 MiB and "
	       "more\n");
	if (o.json) {
		FILE *f = fopen(o.json, "w");

		if (!f) {
			fprintf(stderr, "rkv-bench-ps: %s: %s\n", o.json,
				strerror(errno));
		} else {
			fprintf(f, "{\"servers\":\"%s\",\"shard_elems\":%u,"
				   "\"rule\":\"%s\",\"rows\":[",
				o.servers, o.shard, rkv_ps_rule_str(o.rule));
			for (unsigned i = 0; i < o.nsizes; i++)
				fprintf(f, "%s{\"bytes\":%zu,\"pull_mbs\":%.1f,"
					   "\"read_mbs\":%.1f,\"push_mbs\":%.1f,"
					   "\"write_mbs\":%.1f,\"error\":%d}",
					i ? "," : "", rows[i].bytes,
					rows[i].pull, rows[i].rread,
					rows[i].push, rows[i].rwrite,
					rows[i].err);
			fprintf(f, "]}\n");
			fclose(f);
		}
	}
	if (raw.stp)
		raw_close(&raw);
	free(buf);
	rkv_ps_destroy(ps);
	rkv_client_destroy(c);
	return 0;
}
