/* SPDX-License-Identifier: MIT */
/*
 * peer_libfabric.c - the libfabric peer of rkv-bench-transport: fi_read,
 * fi_write and fi_compare_atomic (FI_UINT64, FI_CSWAP) between two RDM
 * endpoints in this process, measured exactly as the rkv providers are, so
 * the rows land in the same table as "libfabric <prov>".
 *
 * Setup: fi_getinfo(FI_RMA | FI_ATOMIC, FI_EP_RDM) for each provider name
 * ("tcp;ofi_rxm", "shm"); one fabric, and per side its own domain, AV, CQ,
 * endpoint and registered buffer, as two processes would have.  Each side
 * inserts the other's name into its AV.  MR modes the provider asks for are
 * honoured: FI_MR_LOCAL (descriptors on local buffers), FI_MR_VIRT_ADDR
 * (remote addresses are virtual, else offsets), FI_MR_PROV_KEY (keys from
 * fi_mr_key), FI_MR_ENDPOINT (bind the MR to the endpoint and enable it);
 * FI_MR_RAW is not supported and yields a note.
 *
 * Progress: libfabric's tcp and shm providers progress the target side of
 * one-sided operations only when the target calls into the library, so a
 * target thread spins on fi_cq_read (like rkv's tcp transport thread, and
 * like the target process of a two-process run).  --lf-progress inline
 * instead has the initiator poll both CQs in one thread.
 *
 * Chains: libfabric has no post list; chain K posts K operations back to
 * back (each completes) and waits for all K, latency per chain.
 */
#include "bench_internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "alloc.h"
#include "hist.h"
#include "rtime.h"

#define LF_SLOT 64
#define LF_CQ_DEPTH 256

struct lf_side {
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	void *buf;
	size_t len;
	void *desc;     /* local descriptor (FI_MR_LOCAL) */
	uint64_t key;   /* remote key of buf */
	uint64_t base;  /* what the peer uses as the address of buf[0] */
	fi_addr_t peer; /* the other side, in this side's AV */
};

struct lf_pair {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct lf_side a; /* initiator */
	struct lf_side b; /* target */
	pthread_t th;
	int th_on;
	atomic_int stop;  /* target thread: relaxed flag, no data */
	int inline_progress;
	unsigned done;    /* initiator completions reaped, not yet consumed */
	char err[128];    /* first completion error */
};

static void *target_fn(void *arg)
{
	struct lf_pair *lp = arg;
	struct fi_cq_entry e[16];

	while (!atomic_load_explicit(&lp->stop, memory_order_relaxed)) {
		ssize_t n = fi_cq_read(lp->b.cq, e, 16);

		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };

			fi_cq_readerr(lp->b.cq, &err, 0);
		}
	}
	return NULL;
}

static void side_close(struct lf_side *s)
{
	if (s->mr)
		fi_close(&s->mr->fid);
	if (s->ep)
		fi_close(&s->ep->fid);
	if (s->av)
		fi_close(&s->av->fid);
	if (s->cq)
		fi_close(&s->cq->fid);
	if (s->domain)
		fi_close(&s->domain->fid);
	rkv_free(s->buf);
	memset(s, 0, sizeof(*s));
}

static void pair_close(struct lf_pair *lp)
{
	if (lp->th_on) {
		atomic_store_explicit(&lp->stop, 1, memory_order_relaxed);
		pthread_join(lp->th, NULL);
	}
	side_close(&lp->a);
	side_close(&lp->b);
	if (lp->fabric)
		fi_close(&lp->fabric->fid);
	if (lp->info)
		fi_freeinfo(lp->info);
	memset(lp, 0, sizeof(*lp));
}

static int side_open(struct lf_pair *lp, struct lf_side *s, size_t len,
		     uint64_t req_key, const char **step)
{
	struct fi_info *fi = lp->info;
	uint64_t mode = fi->domain_attr->mr_mode;
	struct fi_cq_attr cq_attr = {
		.format = FI_CQ_FORMAT_CONTEXT,
		.size = LF_CQ_DEPTH,
		.wait_obj = FI_WAIT_NONE,
	};
	struct fi_av_attr av_attr = {
		.type = fi->domain_attr->av_type == FI_AV_UNSPEC ?
				FI_AV_TABLE : fi->domain_attr->av_type,
		.count = 4,
	};
	int rc;

	*step = "fi_domain";
	rc = fi_domain(lp->fabric, fi, &s->domain, NULL);
	if (rc)
		return rc;
	*step = "fi_cq_open";
	rc = fi_cq_open(s->domain, &cq_attr, &s->cq, NULL);
	if (rc)
		return rc;
	*step = "fi_av_open";
	rc = fi_av_open(s->domain, &av_attr, &s->av, NULL);
	if (rc)
		return rc;
	*step = "fi_endpoint";
	rc = fi_endpoint(s->domain, fi, &s->ep, NULL);
	if (rc)
		return rc;
	*step = "fi_ep_bind";
	rc = fi_ep_bind(s->ep, &s->av->fid, 0);
	if (!rc)
		rc = fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV);
	if (rc)
		return rc;
	*step = "fi_enable";
	rc = fi_enable(s->ep);
	if (rc)
		return rc;
	*step = "buffer";
	s->len = len;
	s->buf = rkv_aligned_alloc(4096, len);
	if (!s->buf)
		return -FI_ENOMEM;
	memset(s->buf, 0, len);
	*step = "fi_mr_reg";
	rc = fi_mr_reg(s->domain, s->buf, len,
		       FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
		       req_key, 0, &s->mr, NULL);
	if (rc)
		return rc;
	if (mode & FI_MR_ENDPOINT) {
		*step = "fi_mr_bind";
		rc = fi_mr_bind(s->mr, &s->ep->fid, 0);
		if (rc)
			return rc;
		*step = "fi_mr_enable";
		rc = fi_mr_enable(s->mr);
		if (rc)
			return rc;
	}
	s->desc = fi_mr_desc(s->mr);
	s->key = fi_mr_key(s->mr);
	if (s->key == FI_KEY_NOTAVAIL) {
		*step = "fi_mr_key (FI_MR_RAW keys are not supported)";
		return -FI_ENOSYS;
	}
	s->base = mode & FI_MR_VIRT_ADDR ? (uint64_t)(uintptr_t)s->buf : 0;
	return 0;
}

static int av_peer(struct lf_side *self, struct lf_side *other,
		   const char **step)
{
	char name[256];
	size_t namelen = sizeof(name);
	int rc;

	*step = "fi_getname";
	rc = fi_getname(&other->ep->fid, name, &namelen);
	if (rc)
		return rc;
	*step = "fi_av_insert";
	rc = fi_av_insert(self->av, name, 1, &self->peer, 0, NULL);
	if (rc != 1)
		return rc < 0 ? rc : -FI_EADDRNOTAVAIL;
	return 0;
}

static int pair_open(struct lf_pair *lp, const char *prov, size_t len,
		     int target_thread, char *why, size_t whylen)
{
	struct fi_info *hints;
	const char *step = "fi_allocinfo";
	const char *node = NULL;
	uint64_t flags = 0;
	int rc = -FI_ENOMEM;

	memset(lp, 0, sizeof(*lp));
	hints = fi_allocinfo();
	if (!hints)
		goto fail;
	hints->caps = FI_RMA | FI_ATOMIC;
	hints->mode = FI_CONTEXT;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				      FI_MR_ENDPOINT;
	hints->fabric_attr->prov_name = strdup(prov);
	if (!hints->fabric_attr->prov_name) {
		fi_freeinfo(hints);
		goto fail;
	}
	/* Bind tcp to loopback only. */
	if (strstr(prov, "tcp")) {
		node = "127.0.0.1";
		flags = FI_SOURCE;
	}
	step = "fi_getinfo";
	rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), node,
			NULL, flags, hints, &lp->info);
	fi_freeinfo(hints);
	if (rc)
		goto fail;
	step = "fi_fabric";
	rc = fi_fabric(lp->info->fabric_attr, &lp->fabric, NULL);
	if (rc)
		goto fail;
	rc = side_open(lp, &lp->a, len, 1, &step);
	if (rc)
		goto fail;
	rc = side_open(lp, &lp->b, len, 2, &step);
	if (rc)
		goto fail;
	rc = av_peer(&lp->a, &lp->b, &step);
	if (rc)
		goto fail;
	rc = av_peer(&lp->b, &lp->a, &step);
	if (rc)
		goto fail;
	lp->inline_progress = !target_thread;
	if (target_thread) {
		step = "target thread";
		rc = -pthread_create(&lp->th, NULL, target_fn, lp);
		if (rc)
			goto fail;
		lp->th_on = 1;
	}
	return 0;
fail:
	snprintf(why, whylen, "%s: %s", step, fi_strerror(rc < 0 ? -rc : rc));
	pair_close(lp);
	return rc < 0 ? rc : -rc;
}

/* Reap what the initiator's CQ holds into lp->done (and drive the
 * target's progress inline when asked).  Returns 0 or -EIO with lp->err. */
static int lf_progress(struct lf_pair *lp)
{
	struct fi_cq_entry e[16];
	ssize_t got = fi_cq_read(lp->a.cq, e, 16);

	if (lp->inline_progress)
		fi_cq_read(lp->b.cq, e + 8, 8);
	if (got > 0) {
		lp->done += (unsigned)got;
		return 0;
	}
	if (got == -FI_EAGAIN)
		return 0;
	if (got == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };

		fi_cq_readerr(lp->a.cq, &err, 0);
		snprintf(lp->err, sizeof(lp->err), "completion: %s",
			 fi_strerror(err.err));
	} else {
		snprintf(lp->err, sizeof(lp->err), "fi_cq_read: %s",
			 fi_strerror((int)-got));
	}
	return -EIO;
}

/* Wait until n completions were reaped, and consume them.  Returns 0 or a
 * negative error with the reason in why. */
static int lf_wait(struct lf_pair *lp, unsigned n, char *why, size_t whylen)
{
	uint64_t deadline = 0;
	unsigned spins = 0;

	while (lp->done < n) {
		unsigned before = lp->done;

		if (lf_progress(lp)) {
			snprintf(why, whylen, "%s", lp->err);
			return -EIO;
		}
		if (lp->done == before && ++spins % 4096 == 0) {
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
	lp->done -= n;
	return 0;
}

/* Post one operation, driving progress while the provider says EAGAIN. */
static ssize_t lf_post(struct lf_pair *lp, enum bench_op op, size_t size,
		       unsigned i, uint64_t round, struct fi_context *ctx)
{
	struct lf_side *a = &lp->a, *b = &lp->b;
	char *local = (char *)a->buf + (size_t)i * ((size + LF_SLOT - 1) &
						    ~(size_t)(LF_SLOT - 1));
	uint64_t remote = b->base + (uint64_t)(local - (char *)a->buf);
	uint64_t *w = (uint64_t *)(void *)local;
	uint64_t deadline = 0;
	ssize_t rc;

	for (;;) {
		switch (op) {
		case BENCH_OP_READ:
			rc = fi_read(a->ep, local, size, a->desc, a->peer,
				     remote, b->key, ctx);
			break;
		case BENCH_OP_WRITE:
			rc = fi_write(a->ep, local, size, a->desc, a->peer,
				      remote, b->key, ctx);
			break;
		default:
			/* result at +0, swap operand at +8, compare at +16 */
			w[1] = round + 1;
			w[2] = round;
			rc = fi_compare_atomic(a->ep, &w[1], 1, a->desc, &w[2],
					       a->desc, &w[0], a->desc,
					       a->peer, remote, b->key,
					       FI_UINT64, FI_CSWAP, ctx);
			break;
		}
		if (rc != -FI_EAGAIN)
			return rc;
		/* Queue full or a connection in progress: drive progress. */
		if (lf_progress(lp))
			return -FI_EIO;
		if (!deadline)
			deadline = rkv_now_ns() + BENCH_OP_TIMEOUT_NS;
		else if (rkv_now_ns() > deadline)
			return -FI_ETIMEDOUT;
	}
}

static int lf_point(void *pair, const struct bench_opts *o, enum bench_op op,
		    size_t size, unsigned chain, struct bench_row *row)
{
	struct lf_pair *lp = pair;
	static struct rkv_hist h;
	struct fi_context ctx[BENCH_MAX_CHAIN];
	size_t slot = (size + LF_SLOT - 1) & ~(size_t)(LF_SLOT - 1);
	uint64_t total = (uint64_t)o->warmup + o->iters;
	uint64_t t_start = 0, t_end = 0;
	int rc;

	rkv_hist_init(&h);
	if (op == BENCH_OP_CAS)
		memset(lp->b.buf, 0, slot * chain);
	for (uint64_t it = 0; it < total; it++) {
		uint64_t t0, t1;

		t0 = rkv_now_ns();
		for (unsigned i = 0; i < chain; i++) {
			ssize_t prc = lf_post(lp, op, size, i, it, &ctx[i]);

			if (prc) {
				snprintf(row->note, sizeof(row->note),
					 "post: %s",
					 prc == -FI_EIO && lp->err[0] ?
						 lp->err :
						 fi_strerror((int)-prc));
				return -EIO;
			}
		}
		rc = lf_wait(lp, chain, row->note, sizeof(row->note));
		if (rc)
			return rc;
		t1 = rkv_now_ns();
		if (it == o->warmup)
			t_start = t0;
		if (it >= o->warmup)
			rkv_hist_add(&h, t1 - t0);
		t_end = t1;
		if (op == BENCH_OP_CAS) {
			char *res = (char *)lp->a.buf + (chain - 1) * slot;
			uint64_t got = *(uint64_t *)(void *)res;

			if (bench_check_cas(row, got, it))
				return -EIO;
		}
	}
	bench_row_finish(row, &h, o->iters, chain, t_start, t_end);
	return 0;
}

static const char *lf_unsupported(void *pair, enum bench_op op)
{
	struct lf_pair *lp = pair;
	size_t cnt;

	if (op == BENCH_OP_CAS &&
	    fi_compare_atomicvalid(lp->a.ep, FI_UINT64, FI_CSWAP, &cnt))
		return "FI_CSWAP on FI_UINT64 not supported";
	return NULL;
}

static void run_prov(const struct bench_opts *o, struct bench_report *r,
		     const char *prov)
{
	char name[48], why[160];
	size_t maxsize = 8, len;
	struct lf_pair lp;
	int rc;

	snprintf(name, sizeof(name), "libfabric %s", prov);
	for (unsigned i = 0; i < o->nsizes; i++)
		if (o->sizes[i] > maxsize)
			maxsize = o->sizes[i];
	len = ((maxsize + LF_SLOT - 1) & ~(size_t)(LF_SLOT - 1)) *
	      (o->chain > 1 ? o->chain : 1);
	len = (len + 4095) & ~(size_t)4095;
	rc = pair_open(&lp, prov, len, o->lf_target_thread, why, sizeof(why));
	if (rc) {
		bench_row_note(r, name, BENCH_OP_READ, 0, 0, "unavailable: %s",
			       why);
		return;
	}
	bench_run_points(r, name, o, lf_point, &lp, lf_unsupported);
	pair_close(&lp);
}

void bench_libfabric_run(const struct bench_opts *o, struct bench_report *r)
{
	char buf[256], *save = NULL, *t;

	snprintf(buf, sizeof(buf), "%s", o->lf_provs);
	for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		run_prov(o, r, t);
}
