/* SPDX-License-Identifier: MIT */
/*
 * rkv_tp.c - the rkv side of rkv-bench-transport: for each provider, an
 * in-process server context (listener, accept in a thread, one region with
 * remote access) and a client context that connects to it, then for each
 * point posts READ / WRITE / CAS from the client and polls its CQ.
 *
 * (a) unchained: one signaled WR per rkv_post, poll until it completes;
 * (b) chained: K WRs in one rkv_post, only the last signaled (its slots
 *     free the earlier ones, K <= max_send_wr / 2), latency per chain.
 * --same-context runs both sides on one context (one set of provider
 * threads instead of two, which matters on a 2-core machine).
 * Each WR of a chain has its own local and remote slot.  CAS always
 * succeeds: slot words count rounds (compare = round, swap = round + 1) and
 * the returned original value is checked after every post, so a provider
 * that mis-executes CAS shows up as a note instead of a figure.
 */
#include "bench_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hist.h"
#include "rtime.h"
#include "transport.h"

#define CONNECT_TIMEOUT_MS 10000
#define SLOT_ALIGN 64

struct pair {
	enum rkv_tp_provider prov;
	struct rkv_tp *stp;        /* server context */
	struct rkv_tp *ctp;        /* client context */
	struct rkv_listener *l;
	struct rkv_cq *scq, *ccq;
	struct rkv_ep *sep, *cep;
	void *smem, *cmem;         /* from rkv_tp_mem_alloc */
	size_t len;                /* the client's */
	size_t slen;               /* the server's: len, or --spread's */
	struct rkv_mr *smr, *cmr;
};

struct accept_arg {
	struct pair *pp;
	int rc;
};

static void *accept_fn(void *arg)
{
	struct accept_arg *a = arg;

	a->rc = rkv_accept(a->pp->l, a->pp->scq, CONNECT_TIMEOUT_MS,
			   &a->pp->sep);
	return NULL;
}

static size_t slot_of(size_t size)
{
	return (size + SLOT_ALIGN - 1) & ~(size_t)(SLOT_ALIGN - 1);
}

static void pair_close(struct pair *pp)
{
	/* Client first: its disconnect is what the server side waits for. */
	rkv_ep_destroy(pp->cep);
	rkv_ep_destroy(pp->sep);
	rkv_listener_destroy(pp->l);
	if (pp->cmr)
		rkv_mr_dereg(pp->cmr);
	if (pp->smr)
		rkv_mr_dereg(pp->smr);
	if (pp->cmem)
		rkv_tp_mem_free(pp->ctp, pp->cmem, pp->len);
	if (pp->smem)
		rkv_tp_mem_free(pp->stp, pp->smem, pp->slen);
	rkv_cq_destroy(pp->ccq);
	rkv_cq_destroy(pp->scq);
	if (pp->ctp != pp->stp)
		rkv_tp_destroy(pp->ctp);
	rkv_tp_destroy(pp->stp);
	memset(pp, 0, sizeof(*pp));
}

/* Returns 0, or -errno with a reason in why. */
static int pair_open(struct pair *pp, const struct bench_opts *o,
		     enum rkv_tp_provider prov, size_t len, char *why,
		     size_t whylen)
{
	struct rkv_tp_opts to;
	struct accept_arg aa = { .pp = pp, .rc = -EINVAL };
	char addr[300];
	pthread_t th;
	const char *step;
	int rc;

	memset(pp, 0, sizeof(*pp));
	pp->prov = prov;
	pp->len = len;
	pp->slen = o->spread > len ? (o->spread + 4095) & ~(size_t)4095 : len;
	rkv_tp_opts_init(&to);
	to.provider = prov;
	step = "server context";
	rc = rkv_tp_create(&to, &pp->stp);
	if (rc)
		goto fail;
	step = "client context";
	if (o->same_ctx)
		pp->ctp = pp->stp;
	else
		rc = rkv_tp_create(&to, &pp->ctp);
	if (rc)
		goto fail;
	step = "cq";
	rc = rkv_cq_create(pp->stp, 256, &pp->scq);
	if (!rc)
		rc = rkv_cq_create(pp->ctp, 256, &pp->ccq);
	if (rc)
		goto fail;
	step = "memory";
	rc = rkv_tp_mem_alloc(pp->stp, pp->slen, &pp->smem);
	if (rc)
		goto fail;
	if (o->spread) /* written once, as a store's region is */
		memset(pp->smem, 0, pp->slen);
	rc = rkv_tp_mem_alloc(pp->ctp, len, &pp->cmem);
	if (rc)
		goto fail;
	step = "mr_reg";
	rc = rkv_mr_reg(pp->stp, pp->smem, pp->slen, RKV_ACCESS_ALL,
			&pp->smr);
	if (rc)
		goto fail;
	rc = rkv_mr_reg(pp->ctp, pp->cmem, len, RKV_ACCESS_LOCAL_WRITE,
			&pp->cmr);
	if (rc)
		goto fail;
	switch (prov) {
	case RKV_TP_TCP:
		snprintf(addr, sizeof(addr), "tcp://127.0.0.1:0");
		break;
	case RKV_TP_SHM:
		snprintf(addr, sizeof(addr), "shm:///rkv-bench-%ld",
			 (long)getpid());
		break;
	default:
		snprintf(addr, sizeof(addr), "%s", o->addr);
		break;
	}
	step = "listen";
	rc = rkv_listen(pp->stp, addr, &pp->l);
	if (rc)
		goto fail;
	step = "accept thread";
	rc = -pthread_create(&th, NULL, accept_fn, &aa);
	if (rc)
		goto fail;
	rc = rkv_connect(pp->ctp, rkv_listener_addr(pp->l), pp->ccq,
			 CONNECT_TIMEOUT_MS, &pp->cep);
	pthread_join(th, NULL);
	step = "connect";
	if (rc)
		goto fail;
	step = "accept";
	rc = aa.rc;
	if (rc)
		goto fail;
	return 0;
fail:
	snprintf(why, whylen, "%s: %s", step, strerror(-rc));
	pair_close(pp);
	return rc;
}

/* Wait for the completion of wr_id `want`.  Returns 0, or -EIO / -ETIMEDOUT
 * with the reason in why. */
static int wait_wc(struct pair *pp, uint64_t want, char *why, size_t whylen)
{
	struct rkv_wc wc[16];
	uint64_t deadline = 0;
	unsigned spins = 0;

	for (;;) {
		int n = rkv_cq_poll(pp->ccq, wc, 16);

		if (n < 0) {
			snprintf(why, whylen, "cq_poll: %s", strerror(-n));
			return n;
		}
		for (int i = 0; i < n; i++) {
			if (wc[i].status != RKV_WC_SUCCESS) {
				snprintf(why, whylen, "completion: %s",
					 rkv_wc_status_str(wc[i].status));
				return -EIO;
			}
			if (wc[i].wr_id == want)
				return 0;
		}
		if (n == 0 && ++spins % 4096 == 0) {
			uint64_t now = rkv_now_ns();

			if (!deadline) {
				deadline = now + BENCH_OP_TIMEOUT_NS;
			} else if (now > deadline) {
				snprintf(why, whylen, "no completion in %llu s",
					 BENCH_OP_TIMEOUT_NS / 1000000000ull);
				return -ETIMEDOUT;
			}
		}
	}
}

static const enum rkv_wr_opcode g_opcode[BENCH_OP_NR] = {
	[BENCH_OP_READ] = RKV_WR_READ,
	[BENCH_OP_WRITE] = RKV_WR_WRITE,
	[BENCH_OP_CAS] = RKV_WR_CAS,
};

/* One point.  Returns 0 with row filled, or -errno with row->note set. */
static int run_point(void *pair, const struct bench_opts *o, enum bench_op op,
		     size_t size, unsigned chain, struct bench_row *row)
{
	struct pair *pp = pair;
	static struct rkv_hist h; /* large; one point at a time */
	struct rkv_wr wrs[BENCH_MAX_CHAIN];
	size_t slot = slot_of(size);
	/* --spread: each post's WRs at the next place of the server's memory */
	size_t places = o->spread ? pp->slen / (slot * chain) : 1;
	uint64_t total = (uint64_t)o->warmup + o->iters;
	uint64_t t_start = 0, t_end = 0;
	struct rkv_wr *bad;
	int rc;

	rkv_hist_init(&h);
	if (op == BENCH_OP_CAS) /* round counters start at 0 */
		memset(pp->smem, 0, slot * chain);
	memset(wrs, 0, sizeof(wrs));
	for (unsigned i = 0; i < chain; i++) {
		struct rkv_wr *w = &wrs[i];

		w->next = i + 1 < chain ? &wrs[i + 1] : NULL;
		w->wr_id = i;
		w->opcode = g_opcode[op];
		w->flags = i + 1 == chain ? RKV_WR_SIGNALED : 0;
		w->local = (char *)pp->cmem + i * slot;
		w->length = (uint32_t)size;
		w->lkey = pp->cmr->lkey;
		w->remote_addr = (uint64_t)(uintptr_t)pp->smem + i * slot;
		w->rkey = pp->smr->rkey;
	}
	for (uint64_t it = 0; it < total; it++) {
		uint64_t t0, t1;

		if (op == BENCH_OP_CAS) {
			for (unsigned i = 0; i < chain; i++) {
				wrs[i].compare_add = it;
				wrs[i].swap = it + 1;
			}
		} else if (places > 1) {
			uint64_t base = (uintptr_t)pp->smem +
					it % places * slot * chain;

			for (unsigned i = 0; i < chain; i++)
				wrs[i].remote_addr = base + i * slot;
		}
		t0 = rkv_now_ns();
		rc = rkv_post(pp->cep, wrs, &bad);
		if (rc) {
			snprintf(row->note, sizeof(row->note), "post: %s",
				 strerror(-rc));
			return rc;
		}
		rc = wait_wc(pp, chain - 1, row->note, sizeof(row->note));
		if (rc)
			return rc;
		t1 = rkv_now_ns();
		if (it == o->warmup)
			t_start = t0;
		if (it >= o->warmup)
			rkv_hist_add(&h, t1 - t0);
		t_end = t1;
		if (op == BENCH_OP_CAS) {
			uint64_t got = *(uint64_t *)wrs[chain - 1].local;

			if (bench_check_cas(row, got, it))
				return -EIO;
		}
	}
	bench_row_finish(row, &h, o->iters, chain, t_start, t_end);
	return 0;
}

/*
 * --spread: WRITE the whole server region once through the client's
 * endpoint before measuring, so that the client's view of it (on shm its
 * own mapping) has every page in place, as a store's client has after it
 * has written its region once.
 */
static int spread_touch(struct pair *pp, char *why, size_t whylen)
{
	struct rkv_wr w = { .opcode = RKV_WR_WRITE,
			    .flags = RKV_WR_SIGNALED,
			    .local = pp->cmem,
			    .lkey = pp->cmr->lkey,
			    .rkey = pp->smr->rkey };
	struct rkv_wr *bad;
	int rc;

	memset(pp->cmem, 0, pp->len);
	for (size_t off = 0; off < pp->slen; off += pp->len) {
		size_t n = pp->slen - off < pp->len ? pp->slen - off : pp->len;

		w.length = (uint32_t)n;
		w.remote_addr = (uint64_t)(uintptr_t)pp->smem + off;
		rc = rkv_post(pp->cep, &w, &bad);
		if (!rc)
			rc = wait_wc(pp, 0, why, whylen);
		if (rc)
			return rc;
	}
	return 0;
}

static const char *rkv_unsupported(void *pair, enum bench_op op)
{
	struct pair *pp = pair;

	if (op == BENCH_OP_CAS && !rkv_tp_has_atomics(pp->ctp))
		return "no atomics on this device";
	return NULL;
}

static void run_provider(const struct bench_opts *o, struct bench_report *r,
			 enum rkv_tp_provider prov)
{
	const char *name = rkv_tp_provider_str(prov);
	size_t maxsize = 8, len;
	char why[160];
	struct pair pp;
	int rc;

	for (unsigned i = 0; i < o->nsizes; i++)
		if (o->sizes[i] > maxsize)
			maxsize = o->sizes[i];
	len = slot_of(maxsize) * (o->chain > 1 ? o->chain : 1);
	len = (len + 4095) & ~(size_t)4095;
	rc = pair_open(&pp, o, prov, len, why, sizeof(why));
	if (rc) {
		if (o->all && prov == RKV_TP_VERBS && rc == -ENODEV)
			bench_row_note(r, name, BENCH_OP_READ, 0, 0,
				       "skipped: no RDMA device");
		else
			bench_row_note(r, name, BENCH_OP_READ, 0, 0,
				       "unavailable: %s", why);
		return;
	}
	if (o->spread && (rc = spread_touch(&pp, why, sizeof(why)))) {
		bench_row_note(r, name, BENCH_OP_READ, 0, 0,
			       "writing the --spread region: %s", why);
		pair_close(&pp);
		return;
	}
	bench_run_points(r, name, o, run_point, &pp, rkv_unsupported);
	pair_close(&pp);
}

void bench_rkv_run(const struct bench_opts *o, struct bench_report *r)
{
	static const enum rkv_tp_provider order[] = { RKV_TP_TCP, RKV_TP_SHM,
						      RKV_TP_VERBS };

	for (unsigned i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (o->providers & (1u << order[i]))
			run_provider(o, r, order[i]);
}
