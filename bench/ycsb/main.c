/* SPDX-License-Identifier: MIT */
/*
 * rkv-ycsb - YCSB core workloads against rkv, Redis or memcached.
 *
 *   rkv-ycsb -P workloads/workloada [-p name=value]... [--phase load|run|both]
 *            [--db rkv|redis|memcached] [--servers ADDRS]
 *            [--provider tcp|shm|verbs|auto] [--threads N] [--batch N]
 *            [--target OPS] [--seed N] [--label TEXT] [--json FILE]
 *            [--plot FILE.png] [--progress] [--dump-ops N]
 *   rkv-ycsb --json FILE --plot FILE.png      (only draw the CDFs)
 *   rkv-ycsb --summary FILE.json              (markdown table of a file)
 *
 * The load phase inserts records insertstart .. insertstart+insertcount-1
 * (each thread a contiguous share); the run phase does operationcount
 * operations chosen as YCSB's CoreWorkload chooses them.  Every thread has
 * its own connection and generator (seeded from --seed and its number), and
 * keeps --batch operations in flight.  A record is fieldcount fields
 * stored as one value; an update writes one field of it (YCSB's default
 * writeallfields=false: each driver says how its store does that) or, with
 * writeallfields=true, the whole record.
 *
 * Exit status: 0 done, 1 some operations failed, 2 bad input, a store that
 * cannot be reached, or a client-wide failure (a thread's connection lost:
 * the server stopped; it ends that thread's phase).  Each is told in one
 * line on stderr: the first failed operation of the run (the report counts
 * them all), or the first client-wide failure, naming the store and its
 * servers.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "msg.h"
#include "rtime.h"
#include "version.h"
#include "ycsb.h"

struct ctx;

struct worker {
	pthread_t th;
	unsigned tid;
	struct ctx *ctx;
	struct ycsb_drv *d;
	struct ycsb_gen gen;
	struct ycsb_op *ops;        /* --batch slots */
	struct ycsb_op **freel;     /* free slots */
	struct ycsb_op **done;
	char *mem;                  /* val and buf of every slot */
	char *scratch;              /* record check */
	unsigned *lens;             /* field lengths of a record written */
	uint64_t nops, first;       /* this phase's share; load: first key */
	uint64_t count[YCSB_NTYPES], errors[YCSB_NTYPES];
	uint64_t skipped[YCSB_NTYPES], rtts[YCSB_NTYPES];
	uint64_t records[YCSB_NTYPES];
	struct rkv_hist hist[YCSB_NTYPES];
	int failed;                 /* client-wide failure */
	char err[512];
	uint64_t op_errors;         /* this phase's failed operations */
	char first_err[512];        /* the first of them */
};

struct ctx {
	const struct ycsb_props *p;
	uint64_t seed;
	const struct ycsb_drv_ops *drv;
	struct ycsb_wl wl;
	struct ycsb_acked acked;
	unsigned threads, batch;
	int load;                   /* this phase is the load phase */
	int skip[YCSB_NTYPES];      /* unsupported by the store */
	uint64_t stop_ns;           /* maxexecutiontime deadline; 0: none */
	_Atomic uint64_t progress;  /* operations finished, all threads */
	_Atomic unsigned running;
	const char *servers;        /* as the report names them */
	int op_err_told;            /* the first failed op's line is out */
};

/* A status that means the connection is gone (the server stopped): no
 * later operation of the thread can succeed. */
static int conn_lost(int status)
{
	return status == -ECONNRESET || status == -ENOTCONN ||
	       status == -EPIPE || status == -ECONNABORTED ||
	       status == -ESHUTDOWN;
}

static void die_oom(void)
{
	fprintf(stderr, "%s: out of memory\n", YCSB_PROG);
	exit(2);
}

/* Make the next operation in op (deterministic per thread).  The field
 * choice and lengths are drawn even when no bytes are made (a skipped
 * type, --dump-ops), from the thread's field stream. */
static void gen_op(struct worker *w, struct ycsb_op *op, uint64_t i)
{
	struct ctx *c = w->ctx;
	const struct ycsb_props *p = c->p;
	enum ycsb_op_type t;

	if (c->load) {
		op->type = YCSB_INSERT;
		op->keynum = w->first + i;
		op->version = 0;
	} else {
		op->type = ycsb_gen_next_type(&w->gen);
		if (op->type == YCSB_INSERT)
			op->keynum = ycsb_acked_next(&c->acked);
		else
			op->keynum = ycsb_gen_next_keynum(&w->gen);
		if (op->type == YCSB_SCAN)
			op->scan_len = ycsb_gen_scan_len(&w->gen);
		op->version = ((uint64_t)(w->tid + 1) << 40) | w->gen.seq;
	}
	op->key_len = ycsb_key_name(p, op->keynum, op->key);
	op->one_field = 0;
	op->val_len = 0;
	t = op->type;
	if (t != YCSB_UPDATE && t != YCSB_INSERT && t != YCSB_RMW)
		return;
	if (t != YCSB_INSERT && !p->writeallfields) {
		/* CoreWorkload.buildSingleValue: a field, then its length */
		size_t fl;

		op->one_field = 1;
		op->field = ycsb_gen_field(&w->gen);
		fl = ycsb_gen_field_len(&w->gen);
		if (!c->skip[t])
			ycsb_field_fill(op->key, op->key_len, op->field,
					op->version, fl, op->val);
		op->val_len = fl;
		return;
	}
	/* buildValues: every field, each its own length */
	for (unsigned f = 0; f < p->fieldcount; f++)
		w->lens[f] = ycsb_gen_field_len(&w->gen);
	if (!c->skip[t])
		op->val_len = ycsb_record_fill(p, op->key, op->key_len,
					       op->version, w->lens, op->val);
}

static void finish_op(struct worker *w, struct ycsb_op *op, uint64_t now)
{
	struct ctx *c = w->ctx;
	enum ycsb_op_type t = op->type;

	/* a read (and the read half of an RMW) must give back a record of
	 * this key: its length, and the header's lengths when fields vary,
	 * always; dataintegrity checks every byte of every field */
	if (!op->status && (t == YCSB_READ || t == YCSB_RMW)) {
		if (op->out_len > op->buf_cap ||
		    ycsb_record_shape(c->p, op->buf, op->out_len))
			op->status = -EBADMSG;
		else if (c->p->dataintegrity)
			op->status = ycsb_record_check(c->p, op->key,
						       op->key_len, op->buf,
						       op->out_len,
						       w->scratch);
	}
	w->count[t]++;
	if (op->status)
		w->errors[t]++;
	w->rtts[t] += op->rtts;
	w->records[t] += op->records;
	rkv_hist_add(&w->hist[t], now - op->t_submit);
	if (t == YCSB_INSERT && !c->load &&
	    ycsb_acked_ack(&c->acked, op->keynum)) {
		w->failed = 1;
		snprintf(w->err, sizeof(w->err), "insert acknowledgement "
			 "window overflow");
	}
	if (!op->status)
		return;
	if (conn_lost(op->status) && !w->failed) {
		w->failed = 1;
		snprintf(w->err, sizeof(w->err),
			 "%s at %s: %s (the connection is lost: did the server "
			 "stop?)", c->drv->name, c->servers,
			 strerror(-op->status));
	}
	if (!w->op_errors++)
		snprintf(w->first_err, sizeof(w->first_err),
			 "thread %u: %s %.*s: %s (%s at %s)", w->tid,
			 ycsb_op_str(t), (int)op->key_len, op->key,
			 op->status == -EBADMSG ? "value is not the record written"
						: strerror(-op->status),
			 c->drv->name, c->servers);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct ctx *c = w->ctx;
	const struct ycsb_drv_ops *drv = c->drv;
	double per_thread = c->p->target / c->threads;
	uint64_t period = per_thread > 0 ? (uint64_t)(1e9 / per_thread) : 0;
	uint64_t issued = 0, t0 = rkv_now_ns();
	unsigned nfree = c->batch, inflight = 0;
	struct ycsb_op *pending = NULL;

	for (unsigned i = 0; i < c->batch; i++)
		w->freel[i] = &w->ops[i];
	while (!w->failed) {
		int throttled = 0, n;
		uint64_t now;

		/* submit: until the batch is full, the share done, the
		 * deadline passed or the throttle says wait */
		for (;;) {
			struct ycsb_op *op = pending;

			if (w->failed)
				break;
			if (!op) {
				if (issued >= w->nops || !nfree)
					break;
				if (c->stop_ns && rkv_now_ns() > c->stop_ns) {
					w->nops = issued;
					break;
				}
				if (period && rkv_now_ns() < t0 + issued * period) {
					throttled = 1;
					break;
				}
				op = w->freel[--nfree];
				gen_op(w, op, issued);
				if (c->skip[op->type]) {
					w->skipped[op->type]++;
					w->freel[nfree++] = op;
					issued++;
					continue;
				}
			}
			op->status = 0;
			op->rtts = 0;
			op->records = 0;
			op->out_len = 0;
			op->t_submit = rkv_now_ns();
			int rc = drv->submit(w->d, op);

			if (rc == -EAGAIN) {
				pending = op;
				break;
			}
			pending = NULL;
			issued++;
			if (rc) {
				op->status = rc;
				finish_op(w, op, rkv_now_ns());
				w->freel[nfree++] = op;
				continue;
			}
			inflight++;
		}
		if (!inflight) {
			if (!pending && issued >= w->nops)
				break;
			if (throttled) {
				uint64_t due = t0 + issued * period;

				now = rkv_now_ns();
				if (due > now) {
					struct timespec ts = {
						.tv_sec = (time_t)((due - now) / 1000000000u),
						.tv_nsec = (long)((due - now) % 1000000000u),
					};

					nanosleep(&ts, NULL);
				}
			}
			continue;
		}
		n = drv->poll(w->d, w->done, (int)c->batch + 64);
		if (n < 0) {
			w->failed = 1;
			snprintf(w->err, sizeof(w->err), "%s at %s: %s",
				 drv->name, c->servers, strerror(-n));
			break;
		}
		now = rkv_now_ns();
		for (int i = 0; i < n; i++) {
			finish_op(w, w->done[i], now);
			w->freel[nfree++] = w->done[i];
		}
		inflight -= (unsigned)n;
		if (n)
			atomic_fetch_add_explicit(&c->progress, (uint64_t)n,
						  memory_order_relaxed);
	}
	atomic_fetch_sub_explicit(&c->running, 1, memory_order_release);
	return NULL;
}

static int worker_alloc(struct worker *w, struct ctx *c, unsigned tid)
{
	size_t rl = c->wl.record_len;

	w->tid = tid;
	w->ctx = c;
	w->ops = calloc(c->batch, sizeof(*w->ops));
	w->freel = calloc(c->batch, sizeof(*w->freel));
	w->done = calloc(c->batch + 64, sizeof(*w->done));
	w->mem = malloc(2 * rl * c->batch);
	w->scratch = malloc(rl);
	w->lens = calloc(c->p->fieldcount, sizeof(*w->lens));
	if (!w->ops || !w->freel || !w->done || !w->mem || !w->scratch ||
	    !w->lens)
		return -ENOMEM;
	for (unsigned i = 0; i < c->batch; i++) {
		w->ops[i].val = w->mem + 2 * rl * i;
		w->ops[i].buf = w->mem + 2 * rl * i + rl;
		w->ops[i].buf_cap = rl;
	}
	return 0;
}

static void worker_free(struct worker *w)
{
	if (w->ctx && w->ctx->drv)
		w->ctx->drv->destroy(w->d);
	free(w->ops);
	free(w->freel);
	free(w->done);
	free(w->mem);
	free(w->scratch);
	free(w->lens);
}

static void progress_line(struct ctx *c, const char *phase, uint64_t total,
			  uint64_t t0, uint64_t *last_ns, uint64_t *last_done,
			  int tty)
{
	uint64_t now = rkv_now_ns(), done = atomic_load(&c->progress);
	double dt = (double)(now - *last_ns) / 1e9;
	double rate = dt > 0 ? (double)(done - *last_done) / dt : 0;
	double left = rate > 0 && total > done ? (double)(total - done) / rate
					       : 0;

	fprintf(stderr, "%s%s: %.0f s: %" PRIu64 "/%" PRIu64 " ops, %.0f "
			"ops/s, ~%.0f s left%s",
		tty ? "\r" : "", phase, (double)(now - t0) / 1e9, done, total,
		rate, left, tty ? "   " : "\n");
	*last_ns = now;
	*last_done = done;
}

/* Run one phase on every worker; fill r.  Returns 0 or 2. */
static int run_phase(struct ctx *c, struct worker *ws, int load,
		     int progress, int tty, struct ycsb_result *r)
{
	const struct ycsb_props *p = c->p;
	uint64_t total = load ? c->wl.insertcount : p->operationcount;
	uint64_t t0, last_ns, last_done = 0, next_print;
	int rc = 0;

	c->load = load;
	atomic_store(&c->progress, 0);
	atomic_store(&c->running, c->threads);
	for (unsigned i = 0; i < c->threads; i++) {
		struct worker *w = &ws[i];
		uint64_t share = total / c->threads +
				 (i < total % c->threads ? 1 : 0);

		w->nops = share;
		w->first = p->insertstart + i * (total / c->threads) +
			   (i < total % c->threads ? i : total % c->threads);
		memset(w->count, 0, sizeof(w->count));
		memset(w->errors, 0, sizeof(w->errors));
		memset(w->skipped, 0, sizeof(w->skipped));
		memset(w->rtts, 0, sizeof(w->rtts));
		memset(w->records, 0, sizeof(w->records));
		w->op_errors = 0;
		for (int t = 0; t < YCSB_NTYPES; t++)
			rkv_hist_init(&w->hist[t]);
		ycsb_gen_fields_seed(&w->gen, c->seed, load);
		c->drv->stats_reset(w->d);
	}
	t0 = last_ns = rkv_now_ns();
	next_print = t0 + 1000000000ull;
	c->stop_ns = !load && p->maxexecutiontime ?
		     t0 + p->maxexecutiontime * 1000000000ull : 0;
	for (unsigned i = 0; i < c->threads; i++)
		if (pthread_create(&ws[i].th, NULL, worker_main, &ws[i])) {
			fprintf(stderr, "%s: cannot start thread %u of %u\n",
				YCSB_PROG, i, c->threads);
			exit(2);
		}
	while (atomic_load_explicit(&c->running, memory_order_acquire)) {
		struct timespec ts = { .tv_nsec = 20000000 };

		nanosleep(&ts, NULL);
		if (progress && rkv_now_ns() >= next_print) {
			progress_line(c, load ? "load" : "run", total, t0,
				      &last_ns, &last_done, tty);
			next_print += 1000000000ull;
		}
	}
	uint64_t t1 = rkv_now_ns();

	if (progress && tty && t1 - t0 >= 1000000000ull)
		fprintf(stderr, "\r%72s\r", "");
	r->phase = load ? "load" : "run";
	r->seconds = (double)(t1 - t0) / 1e9;
	r->ops = 0;
	memset(r->count, 0, sizeof(r->count));
	memset(r->errors, 0, sizeof(r->errors));
	memset(r->skipped, 0, sizeof(r->skipped));
	memset(r->rtts, 0, sizeof(r->rtts));
	memset(r->records, 0, sizeof(r->records));
	memset(&r->ds, 0, sizeof(r->ds));
	for (int t = 0; t < YCSB_NTYPES; t++) {
		rkv_hist_init(&r->hist[t]);
		r->skip_why[t] = c->skip[t] ? c->drv->unsupported(t) : NULL;
	}
	struct worker *first_failed = NULL, *first_err = NULL;
	unsigned nfailed = 0;
	uint64_t op_errors = 0;

	for (unsigned i = 0; i < c->threads; i++) {
		struct worker *w = &ws[i];
		struct ycsb_drv_stats ds;

		pthread_join(w->th, NULL);
		if (w->failed) {
			first_failed = first_failed ? first_failed : w;
			nfailed++;
			rc = 2;
		}
		if (w->op_errors) {
			first_err = first_err ? first_err : w;
			op_errors += w->op_errors;
		}
		for (int t = 0; t < YCSB_NTYPES; t++) {
			r->count[t] += w->count[t];
			r->errors[t] += w->errors[t];
			r->skipped[t] += w->skipped[t];
			r->rtts[t] += w->rtts[t];
			r->records[t] += w->records[t];
			r->ops += w->count[t];
			rkv_hist_merge(&r->hist[t], &w->hist[t]);
		}
		c->drv->stats(w->d, w->count, &ds);
		r->ds.has_rtts = ds.has_rtts;
		r->ds.has_retries = ds.has_retries;
		for (int t = 0; t < YCSB_NTYPES; t++)
			r->ds.retries[t] += ds.retries[t];
		r->ds.cache_hits += ds.cache_hits;
		r->ds.cache_misses += ds.cache_misses;
		r->ds.lock_waits += ds.lock_waits;
		r->ds.lock_steals += ds.lock_steals;
		r->ds.doorbells += ds.doorbells;
	}
	/* one line: the client-wide failure, else the first failed op */
	if (first_failed) {
		fprintf(stderr, "%s: %s phase: thread %u: %s", YCSB_PROG,
			r->phase, first_failed->tid, first_failed->err);
		if (nfailed > 1)
			fprintf(stderr, " (%u of %u threads failed)", nfailed,
				c->threads);
		fputc('\n', stderr);
		c->op_err_told = 1;
	} else if (first_err && !c->op_err_told) {
		fprintf(stderr, "%s: %s phase: %" PRIu64 " operation%s failed, "
				"the first: %s\n", YCSB_PROG, r->phase,
			op_errors, op_errors == 1 ? "" : "s",
			first_err->first_err);
		c->op_err_told = 1;
	}
	return rc;
}

/* --dump-ops: the first n run-phase operations of thread 0, no store. */
static void dump_ops(struct ctx *c, uint64_t seed, uint64_t n)
{
	struct ycsb_op op;
	struct worker w;

	memset(&w, 0, sizeof(w));
	memset(&op, 0, sizeof(op));
	w.ctx = c;
	w.lens = calloc(c->p->fieldcount, sizeof(*w.lens));
	if (!w.lens)
		die_oom();
	ycsb_gen_init(&w.gen, &c->wl, seed, 0);
	c->load = 0;
	/* no record bytes: skip[] only stops gen_op filling values here */
	c->skip[YCSB_UPDATE] = c->skip[YCSB_INSERT] = c->skip[YCSB_RMW] = 1;
	for (uint64_t i = 0; i < n; i++) {
		gen_op(&w, &op, i);
		if (op.type == YCSB_SCAN)
			printf("%" PRIu64 " %s %.*s %u\n", i,
			       ycsb_op_str(op.type), (int)op.key_len, op.key,
			       op.scan_len);
		else
			printf("%" PRIu64 " %s %.*s\n", i,
			       ycsb_op_str(op.type), (int)op.key_len, op.key);
		/* as if every insert finished at once */
		if (op.type == YCSB_INSERT)
			ycsb_acked_ack(&c->acked, op.keynum);
	}
	free(w.lens);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s -P WORKLOAD [-p name=value]... [--phase load|run|both]\n"
		"         [--db rkv|redis|memcached] [--servers ADDRS] "
		"[--provider tcp|shm|verbs|auto]\n"
		"         [--threads N] [--batch N] [--target OPS] [--seed N] "
		"[--label TEXT]\n"
		"         [--json FILE] [--plot FILE.png] [--progress] "
		"[--dump-ops N]\n"
		"       %s --json FILE --plot FILE.png\n"
		"       %s --summary FILE.json\n"
		"       %s --help | --version\n"
		"Defaults: --db rkv, --servers tcp://127.0.0.1:7000 (rkv), "
		"127.0.0.1:6379 (redis),\n"
		"127.0.0.1:11211 (memcached); --phase both, --threads "
		"threadcount (1), --batch 1.\n"
		"rkv --servers may be a cluster in etcd: "
		"etcd://HOST:PORT/CLUSTER, or a cluster file's path\n"
		"(starting with / or .; its 'replicas R' line is kept).\n",
		YCSB_PROG, YCSB_PROG, YCSB_PROG, YCSB_PROG);
}

static int parse_num(const char *opt, const char *s, uint64_t min,
		     uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (!*s || *s == '-' || errno || *end || v < min || v > max) {
		fprintf(stderr, "%s: %s: bad value '%s' (want %llu..%llu)\n",
			YCSB_PROG, opt, s, (unsigned long long)min,
			(unsigned long long)max);
		return -1;
	}
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "phase", required_argument, NULL, 'f' },
		{ "db", required_argument, NULL, 'd' },
		{ "servers", required_argument, NULL, 's' },
		{ "provider", required_argument, NULL, 'r' },
		{ "threads", required_argument, NULL, 't' },
		{ "batch", required_argument, NULL, 'b' },
		{ "target", required_argument, NULL, 'T' },
		{ "seed", required_argument, NULL, 'S' },
		{ "label", required_argument, NULL, 'l' },
		{ "json", required_argument, NULL, 'j' },
		{ "plot", required_argument, NULL, 'g' },
		{ "summary", required_argument, NULL, 'M' },
		{ "progress", no_argument, NULL, 'o' },
		{ "dump-ops", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *files[16], *sets[128];
	unsigned nfiles = 0, nsets = 0;
	const char *phase = "both", *db = "rkv", *servers = NULL;
	const char *provider = NULL, *label = NULL, *json = NULL, *plot = NULL;
	const char *summary = NULL;
	uint64_t threads = 0, batch = 1, seed = 1, dump = 0, v;
	double target = -1;
	int progress = 0, ch, rc = 0;
	struct ycsb_props p;
	struct ctx c;

	opterr = 0; /* one line of ours instead of getopt's and the usage */
	while ((ch = getopt_long(argc, argv, ":P:p:h", lo, NULL)) != -1) {
		switch (ch) {
		case 'P':
			if (nfiles == 16) {
				fprintf(stderr, "%s: too many -P\n", YCSB_PROG);
				return 2;
			}
			files[nfiles++] = optarg;
			break;
		case 'p':
			if (nsets == 128) {
				fprintf(stderr, "%s: too many -p\n", YCSB_PROG);
				return 2;
			}
			sets[nsets++] = optarg;
			break;
		case 'f': phase = optarg; break;
		case 'd': db = optarg; break;
		case 's': servers = optarg; break;
		case 'r': provider = optarg; break;
		case 't':
			if (parse_num("--threads", optarg, 1, 1024, &threads))
				return 2;
			break;
		case 'b':
			if (parse_num("--batch", optarg, 1, 4096, &batch))
				return 2;
			break;
		case 'T':
			if (parse_num("--target", optarg, 0, 1ull << 40, &v))
				return 2;
			target = (double)v;
			break;
		case 'S':
			if (parse_num("--seed", optarg, 0, UINT64_MAX, &seed))
				return 2;
			break;
		case 'l': label = optarg; break;
		case 'j': json = optarg; break;
		case 'g': plot = optarg; break;
		case 'M': summary = optarg; break;
		case 'o': progress = 1; break;
		case 'D':
			if (parse_num("--dump-ops", optarg, 1, 1ull << 32,
				      &dump))
				return 2;
			break;
		case 'h': usage(stdout); return 0;
		case 'V':
			return rkv_version_print(YCSB_PROG, RKV_PROTO_VERSION)
				       ? 2 : 0;
		case ':':
			fprintf(stderr, "%s: option '%s' needs a value (try "
					"--help)\n", YCSB_PROG, argv[optind - 1]);
			return 2;
		default:
			if (optopt && strncmp(argv[optind - 1], "--", 2))
				fprintf(stderr, "%s: unknown option '-%c' (try "
						"--help)\n", YCSB_PROG, optopt);
			else
				fprintf(stderr, "%s: unknown option '%s' (try "
						"--help)\n", YCSB_PROG,
					argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s' (try --help)\n",
			YCSB_PROG, argv[optind]);
		return 2;
	}
	if (summary)
		return ycsb_report_summary(summary, stdout) ? 2 : 0;
	if (!nfiles && plot && json)
		return ycsb_report_plot(json, plot) ? 2 : 0;
	if (!nfiles) {
		fprintf(stderr, "%s: no workload: give -P FILE (e.g. -P "
				"workloads/workloada; try --help)\n", YCSB_PROG);
		return 2;
	}
	if (plot && !json) {
		fprintf(stderr, "%s: --plot draws the runs of a --json file: "
				"give --json FILE too\n", YCSB_PROG);
		return 2;
	}
	if (strcmp(phase, "load") && strcmp(phase, "run") &&
	    strcmp(phase, "both")) {
		fprintf(stderr, "%s: --phase: bad value '%s' (want load, run "
				"or both)\n", YCSB_PROG, phase);
		return 2;
	}
	memset(&c, 0, sizeof(c));
	if (!strcmp(db, "rkv"))
		c.drv = &ycsb_drv_rkv;
	else if (!strcmp(db, "redis"))
		c.drv = &ycsb_drv_redis;
	else if (!strcmp(db, "memcached"))
		c.drv = &ycsb_drv_memcached;
	else {
		fprintf(stderr, "%s: --db: unknown store '%s' (want rkv, "
				"redis or memcached)\n", YCSB_PROG, db);
		return 2;
	}
	if (provider && strcmp(provider, "tcp") && strcmp(provider, "shm") &&
	    strcmp(provider, "verbs") && strcmp(provider, "auto")) {
		fprintf(stderr, "%s: --provider: bad value '%s' (want tcp, "
				"shm, verbs or auto)\n", YCSB_PROG, provider);
		return 2;
	}
	if (provider && c.drv != &ycsb_drv_rkv) {
		fprintf(stderr, "%s: --provider is for --db rkv\n", YCSB_PROG);
		return 2;
	}
	if (!servers)
		servers = c.drv == &ycsb_drv_rkv ?
			  (provider && !strcmp(provider, "shm") ?
			   "shm:///rkv" : "127.0.0.1:7000") :
			  c.drv == &ycsb_drv_redis ? "127.0.0.1:6379" :
			  "127.0.0.1:11211";

	ycsb_props_init(&p);
	for (unsigned i = 0; i < nfiles; i++)
		if (ycsb_props_load(&p, files[i]))
			return 2;
	for (unsigned i = 0; i < nsets; i++)
		if (ycsb_props_set_arg(&p, sets[i]))
			return 2;
	if (threads)
		p.threads = (unsigned)threads;
	if (target >= 0)
		p.target = target;
	if (ycsb_props_check(&p))
		return 2;
	c.p = &p;
	c.seed = seed;
	c.threads = p.threads;
	c.batch = (unsigned)batch;
	if (ycsb_acked_init(&c.acked, p.recordcount))
		die_oom();
	ycsb_wl_init(&c.wl, &p, &c.acked);
	if (dump) {
		dump_ops(&c, seed, dump);
		ycsb_acked_fini(&c.acked);
		return 0;
	}
	for (int t = 0; t < YCSB_NTYPES; t++)
		c.skip[t] = c.drv->unsupported(t) != NULL;

	int do_load = strcmp(phase, "run") != 0;
	int do_run = strcmp(phase, "load") != 0;
	int tty = isatty(2);
	struct worker *ws = calloc(c.threads, sizeof(*ws));
	struct ycsb_result *r = calloc(1, sizeof(*r));

	if (!ws || !r)
		die_oom();
	if (progress || tty)
		progress = 1;
	/* scan index for Redis: kept only when the workload scans */
	for (unsigned i = 0; i < c.threads; i++) {
		struct ycsb_drv_cfg dc = {
			.servers = servers, .provider = provider,
			.batch = c.batch, .record_len = c.wl.record_len,
			.p = &p,
			.scan_index = p.prop[YCSB_SCAN] > 0, .tid = i,
		};
		char err[512];
		int e;

		if (worker_alloc(&ws[i], &c, i))
			die_oom();
		ycsb_gen_init(&ws[i].gen, &c.wl, seed, i);
		e = c.drv->create(&dc, &ws[i].d, err, sizeof(err));
		if (e) {
			fprintf(stderr, "%s: %s\n", YCSB_PROG, err);
			rc = 2;
			goto out;
		}
	}
	c.servers = servers;
	r->db = c.drv->name;
	r->label = label ? label : c.drv->name;
	r->servers = servers;
	r->workload = p.workload_name;
	r->threads = c.threads;
	r->batch = c.batch;
	r->target = p.target;
	r->seed = seed;
	r->p = &p;
	printf("%s: %s at %s, workload %s, %u record(s) of %s%zu bytes, "
	       "updates write %s, %u thread(s), batch %u, seed %" PRIu64
	       "%s\n", YCSB_PROG, r->label, servers, p.workload_name,
	       (unsigned)(do_load ? c.wl.insertcount : p.recordcount),
	       p.flendist == YCSB_FLEN_CONSTANT ? "" : "at most ",
	       c.wl.record_len, p.writeallfields ? "every field" : "one field",
	       c.threads, c.batch, seed, p.target > 0 ? ", throttled" : "");
	for (int t = 0; t < YCSB_NTYPES; t++)
		if (do_run && c.skip[t] && p.prop[t] > 0)
			printf("%s: %s: scan: %s; the %.0f%% %s operations "
			       "are skipped\n", YCSB_PROG, c.drv->name,
			       c.drv->unsupported(t), p.prop[t] * 100,
			       ycsb_op_str(t));
	for (int ph = 0; ph < 2; ph++) {
		int e;

		if ((ph == 0 && !do_load) || (ph == 1 && !do_run))
			continue;
		e = run_phase(&c, ws, ph == 0, progress,
			      tty, r);
		ycsb_report_print(stdout, r);
		fflush(stdout);
		if (json && ycsb_report_json(json, r)) {
			fprintf(stderr, "%s: cannot append to %s: %s\n",
				YCSB_PROG, json, strerror(errno));
			rc = 2;
			goto out;
		}
		if (e) {
			rc = e;
			goto out;
		}
		for (int t = 0; t < YCSB_NTYPES; t++)
			if (r->errors[t])
				rc = 1;
	}
	if (plot && ycsb_report_plot(json, plot))
		rc = 2;
out:
	for (unsigned i = 0; i < c.threads; i++)
		worker_free(&ws[i]);
	free(ws);
	free(r);
	ycsb_acked_fini(&c.acked);
	return rc;
}
