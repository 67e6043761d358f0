/* SPDX-License-Identifier: MIT */
/*
 * ps.c - the parameter-server API (rkv_ps.h): tensors split into
 * shards stored as KV values, pulled with GETs and pushed with
 * read-modify-writes, through the pipelined interface (rkv_submit /
 * rkv_poll) so that every shard of every request in flight shares
 * doorbells.
 *
 * The engine (struct rkv_ps) owns max_inflight shard ops, each with a
 * staging buffer of max_value bytes (a GET lands there; a create's PUT is
 * encoded there).  Requests wait in FIFO order; ps_fill() gives free shard
 * ops to the oldest request that still has shards to start, and complete()
 * accounts a finished shard.  A request is finished when each of its
 * shards finished (or was skipped after the request's first error: the
 * shards not yet started are not started).  Nothing blocks except
 * rkv_ps_wait and the synchronous calls built on it, which poll with a
 * short sleep once idle, like librkv's synchronous calls.
 *
 * A push's callback (push_fn) runs under the shard's slot lock; it checks
 * the stored header (magic, incarnation, length) and writes the new
 * header (version + 1) and elements into the output block.  It may run
 * more than once (lost race, stolen lock); only the last run is applied.
 * Elements in a block are not 4-byte aligned (they follow the key), so
 * they are processed through an aligned stack buffer.
 *
 * The parameter server sits above librkv's KV core and talks to it only
 * through the extension point, client/rkv_ext.h: its op kinds (split
 * get, head put), registered buffers, completions and counter words.
 *
 * ASSIGN does not need the old elements, so it goes through the head put
 * kind (RKV_EXT_HEAD_PUT): with a trusted cached location whose block the
 * cache describes, assign_xfn builds the new shard from the old
 * one's 16-byte header alone, and one doorbell WRITEs the new block and
 * CASes the slot from the cached word (1 RTT, the shard's bytes moved
 * once).  Why this keeps the push properties:
 *   - versions: the shard version lives in the value's header, so a blind
 *     write must know the old one.  The location cache keeps, beside the
 *     slot word W it saw, the first 16 value bytes of the block W names
 *     (magic, incarnation, version).  A block is immutable while a slot
 *     names it, so if the CAS from W succeeds, the block replaced is
 *     exactly the one whose header we used, and the new version is its
 *     version + 1 - the same chain push_fn builds under the lock.  (ABA
 *     on W is the put path's: W carries a 9-bit slot version and a block
 *     offset that is reused only after the grace period; the cache entry
 *     is trusted only when younger than the grace period.)
 *   - serialization: the CAS expects the unlocked word W.  A SUM holding
 *     the lock has W|LOCK in the slot, so the ASSIGN's CAS fails; one that
 *     released has a new word.  Conversely a SUM whose lock CAS expected W
 *     fails once the ASSIGN published.  Either order, never a mixture, and
 *     unlike a plain put a head put never CASes over a lock (no lost SUM).
 *   - a lost CAS publishes nothing (the block is returned) and the shard
 *     op carries on as an RMW with push_fn, which also reports -ENOENT /
 *     -ESTALE properly; assign_xfn declines (RMW path) whenever the cached
 *     header is not this incarnation's shard of the right length.
 *
 * A pull into a buffer registered by the engine (tcp and shm only: there
 * a registration is bookkeeping, see mr_get) uses a split get
 * (RKV_EXT_SPLIT_GET): each shard's
 * elements are READ straight into the caller's buffer and the checksum is
 * verified over the pieces before the shard counts as read.
 */
#include "ps_engine.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "rtime.h"

/* ---------------------------------------------------- registrations */

/*
 * A registration covering [p, p + len), from the cache or new (evicting
 * the least recently used idle entry).  NULL when none can be had: the
 * pull then goes through the staging buffers.  On tcp and shm a
 * registration only records the range (nothing is pinned), so an entry
 * that outlives the caller's buffer is harmless: it is used only for a
 * range the caller passes again.  Verbs would pin pages and need
 * invalidation on free (what RDMA libraries hook munmap for), so the
 * engine does not register caller memory there (ps->direct is 0).
 */
static struct ps_mr *mr_get(struct rkv_ps *ps, void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p;
	struct ps_mr *victim = NULL;

	for (unsigned i = 0; i < PS_MR_CACHE; i++) {
		struct ps_mr *e = &ps->mrc[i];
		uintptr_t ea;

		if (!e->live) {
			if (!victim || victim->live)
				victim = e;
			continue;
		}
		ea = (uintptr_t)e->buf.addr;
		if (a >= ea && len <= e->buf.len && a - ea <= e->buf.len - len) {
			e->refs++;
			e->used = ++ps->mr_clock;
			return e;
		}
		if (!e->refs && (!victim || (victim->live && e->used < victim->used)))
			victim = e;
	}
	if (!victim)
		return NULL;
	if (victim->live) {
		rkv_ext_buf_dereg(&victim->buf);
		victim->live = 0;
	}
	if (rkv_ext_buf_reg(ps->c, p, len, &victim->buf))
		return NULL;
	victim->live = 1;
	victim->refs = 1;
	victim->used = ++ps->mr_clock;
	return victim;
}

static void mr_put(struct ps_mr *e)
{
	if (e && e->refs)
		e->refs--;
}

/* ----------------------------------------------------------- engine */

static void req_unlink(struct rkv_ps *ps, struct rkv_ps_req *r)
{
	struct rkv_ps_req **pp = &ps->head, *prev = NULL;

	while (*pp && *pp != r) {
		prev = *pp;
		pp = &(*pp)->qnext;
	}
	if (!*pp)
		return;
	*pp = r->qnext;
	if (ps->tail == r)
		ps->tail = prev;
	r->qnext = NULL;
}

static void req_account(struct rkv_ps_req *r, int status)
{
	if (status && !r->err) {
		r->err = status;
		/* do not start the rest */
		r->ndone += r->nitems - r->next;
		r->next = r->nitems;
	}
	r->ndone++;
	if (r->ndone >= r->nitems && !r->finished) {
		r->finished = 1;
		mr_put(r->mr); /* no shard op of r is in flight now */
		r->mr = NULL;
		req_unlink(r->ps, r);
	}
}

/* Check a pulled shard in so->stage and copy its elements out. */
static int pull_done(struct shard_op *so)
{
	struct rkv_ps_req *r = so->req;
	const struct rkv_ps_tensor *t = r->t;
	uint64_t n = shard_len(t, so->shard);
	struct ps_shard_hdr h;
	int rc = shard_hdr(t, so->shard, so->op.out_len, so->stage, &h);

	if (rc)
		return rc;
	if (!(so->xp && so->x.split))
		memcpy(r->buf + so->shard * t->shard_elems,
		       so->stage + RKV_PS_SHARD_HDR, (size_t)n * 4);
	so->version = h.version;
	return 0;
}

static void complete(struct rkv_ps *ps, struct shard_op *so)
{
	struct rkv_ps_req *r = so->req;
	int st = so->op.status;

	if (st == 0 && r->kind == REQ_PULL)
		st = pull_done(so);
	if (r->kind == REQ_EMB_PULL)
		st = emb_pull_done(so, st);
	if ((r->kind == REQ_DELETE || r->kind == REQ_EMB_DELETE) &&
	    st == -ENOENT)
		st = 0;
	if (st == 0 && (r->kind == REQ_PULL || r->kind == REQ_PUSH)) {
		if (so->version < r->vmin)
			r->vmin = so->version;
		if (so->version > r->vmax)
			r->vmax = so->version;
	}
	so->req = NULL;
	ps->busy--;
	req_account(r, st);
}

/* Build shard op so for shard i of r. */
static void build(struct rkv_ps *ps, struct shard_op *so,
		  struct rkv_ps_req *r, uint64_t i)
{
	const struct rkv_ps_tensor *t = r->t;
	uint64_t id = r->uids ? r->uids[i] : i;
	int kl = snprintf(so->key, sizeof(so->key), "%s%" PRIu64, t->prefix, id);
	uint64_t n = r->emb ? 0 : shard_len(t, i);

	so->req = r;
	so->shard = i;
	so->version = 0;
	so->xp = NULL;
	so->op = (struct rkv_op){ .key = so->key, .key_len = (size_t)kl,
				  .user = so };
	switch (r->kind) {
	case REQ_PULL:
		so->op.type = RKV_OP_GET;
		so->op.buf = so->stage;
		so->op.buf_cap = ps->stage_size;
		if (r->mr) {
			so->x = (struct rkv_ext_op){
				.kind = RKV_EXT_SPLIT_GET,
				.head = RKV_PS_SHARD_HDR,
				.tail = r->buf + i * t->shard_elems,
				.tail_len = (size_t)n * 4,
				.tail_lkey = r->mr->buf.lkey };
			so->xp = &so->x;
		}
		break;
	case REQ_PUSH:
		so->op.type = RKV_OP_RMW;
		so->op.fn = push_fn;
		so->op.fn_arg = so;
		if (r->rule == RKV_PS_ASSIGN) {
			so->x = (struct rkv_ext_op){ .kind = RKV_EXT_HEAD_PUT,
						     .put_fn = assign_xfn,
						     .put_arg = so };
			so->xp = &so->x;
		}
		break;
	case REQ_CREATE: {
		struct ps_shard_hdr h = { .magic = PS_SHARD_MAGIC,
					  .nonce = t->nonce, .version = 0 };

		memcpy(so->stage, &h, sizeof(h));
		if (r->src)
			memcpy(so->stage + RKV_PS_SHARD_HDR,
			       r->src + i * t->shard_elems, (size_t)n * 4);
		else
			memset(so->stage + RKV_PS_SHARD_HDR, 0, (size_t)n * 4);
		so->op.type = RKV_OP_PUT;
		so->op.val = so->stage;
		so->op.val_len = RKV_PS_SHARD_HDR + (size_t)n * 4;
		break;
	}
	case REQ_DELETE:
		so->op.type = RKV_OP_DELETE;
		break;
	case REQ_EMB_PULL:
		so->op.type = RKV_OP_GET;
		so->op.buf = so->stage;
		so->op.buf_cap = ps->stage_size;
		break;
	case REQ_EMB_PUSH:
	case REQ_EMB_DELETE:
		so->op.type = RKV_OP_RMW;
		so->op.fn = r->kind == REQ_EMB_PUSH ? emb_push_fn : emb_delete_fn;
		so->op.fn_arg = so;
		break;
	}
}

/* Start shards of waiting requests on free shard ops. */
static void ps_fill(struct rkv_ps *ps)
{
	struct rkv_ps_req *r = ps->head;

	for (unsigned k = 0; k < ps->nops && ps->busy < ps->nops; k++) {
		struct shard_op *so = &ps->ops[k];
		int rc;

		if (so->req)
			continue;
		while (r && r->next >= r->nitems)
			r = r->qnext;
		if (!r)
			return;
		build(ps, so, r, r->next);
		rc = rkv_ext_submit(ps->c, &so->op, so->xp);
		if (rc == -EAGAIN) {
			so->req = NULL;
			return; /* the client's slots are taken */
		}
		r->next++;
		ps->busy++;
		if (rc) {
			so->op.status = rc;
			complete(ps, so);
		}
	}
}

/* One pass: start what can start, reap what finished.  Returns the number
 * of shard ops reaped, or -errno from rkv_poll. */
static int progress(struct rkv_ps *ps)
{
	struct rkv_op *done[PS_POLL_MAX];
	int n, got = 0;

	ps_fill(ps);
	n = rkv_poll(ps->c, done, PS_POLL_MAX);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		struct shard_op *so = done[i]->user;

		if (so < ps->ops || so >= ps->ops + ps->nops || so->req == NULL)
			continue; /* not ours: see rkv_ps.h */
		complete(ps, so);
		got++;
	}
	if (got)
		ps_fill(ps);
	return got;
}

int req_new(struct rkv_ps_tensor *t, enum req_kind kind,
		   struct rkv_ps_req **out)
{
	struct rkv_ps *ps = t->ps;
	struct rkv_ps_req *r = rkv_calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->ps = ps;
	r->t = t;
	r->kind = kind;
	r->nitems = t->nshards;
	r->vmin = UINT64_MAX;
	if (ps->tail)
		ps->tail->qnext = r;
	else
		ps->head = r;
	ps->tail = r;
	t->outstanding++;
	*out = r;
	return 0;
}

void req_start(struct rkv_ps_req *r)
{
	if (r->nitems == 0) {
		r->finished = 1;
		req_unlink(r->ps, r);
		return;
	}
	ps_fill(r->ps);
}

int req_run(struct rkv_ps_req *r)
{
	while (!r->finished) {
		int rc = progress(r->ps);

		if (rc < 0)
			return rc;
		rkv_ext_idle(r->ps->c, rc);
	}
	return r->err;
}

void req_free(struct rkv_ps_req *r)
{
	r->t->outstanding--;
	rkv_free(r->mem);
	rkv_free(r);
}

/* ------------------------------------------------------------ engine */

int rkv_ps_create(struct rkv_client *c, struct rkv_ps **out)
{
	struct rkv_ps *ps;

	if (!c || !out)
		return -EINVAL;
	*out = NULL;
	ps = rkv_calloc(1, sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	ps->c = c;
	rkv_ext_info(c, &ps->info);
	ps->nops = ps->info.max_inflight;
	ps->stage_size = ps->info.max_value;
	ps->ops = rkv_calloc(ps->nops, sizeof(*ps->ops));
	ps->stage_mem = rkv_malloc(ps->nops * ps->stage_size);
	ps->row = rkv_malloc(ps->stage_size);
	if (!ps->ops || !ps->stage_mem || !ps->row) {
		rkv_ps_destroy(ps);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < ps->nops; i++)
		ps->ops[i].stage = ps->stage_mem + i * ps->stage_size;
	ps->direct = !ps->info.read_only && rkv_ext_buf_cheap(c) &&
		     !getenv("RKV_PS_NO_DIRECT");
	*out = ps;
	return 0;
}

void rkv_ps_destroy(struct rkv_ps *ps)
{
	uint64_t end;

	if (!ps)
		return;
	/* each shard op ends by the client's timeout: wait for them all */
	end = rkv_now_ms() + 2ull * ps->info.timeout_ms + 1000;
	while (ps->busy && rkv_now_ms() < end) {
		int rc = progress(ps);

		if (rc < 0)
			break;
		rkv_ext_idle(ps->c, rc);
	}
	for (unsigned i = 0; i < PS_MR_CACHE; i++)
		if (ps->mrc[i].live)
			rkv_ext_buf_dereg(&ps->mrc[i].buf);
	rkv_free(ps->stage_mem);
	rkv_free(ps->row);
	rkv_free(ps->ops);
	rkv_free(ps);
}

/* ------------------------------------------------------- pull / push */

int rkv_ps_pull_async(struct rkv_ps_tensor *t, float *buf, uint64_t n,
		      struct rkv_ps_req **out)
{
	struct rkv_ps_req *r;
	int rc;

	if (!t || !buf || !out)
		return -EINVAL;
	*out = NULL;
	if (n < t->len)
		return -ENOBUFS;
	rc = req_new(t, REQ_PULL, &r);
	if (rc)
		return rc;
	r->buf = buf;
	if (t->ps->direct)
		r->mr = mr_get(t->ps, buf, (size_t)t->len * 4);
	ps_fill(t->ps);
	*out = r;
	return 0;
}

int rkv_ps_push_async(struct rkv_ps_tensor *t, enum rkv_ps_rule rule,
		      const float *src, uint64_t n, float lr,
		      struct rkv_ps_req **out)
{
	struct rkv_ps_req *r;
	int rc;

	if (!t || !src || !out)
		return -EINVAL;
	*out = NULL;
	if (n != t->len)
		return -EINVAL;
	if (rule != RKV_PS_SUM && rule != RKV_PS_ASSIGN && rule != RKV_PS_SGD)
		return -EINVAL;
	rc = req_new(t, REQ_PUSH, &r);
	if (rc)
		return rc;
	r->rule = rule;
	r->lr = lr;
	r->src = src;
	ps_fill(t->ps);
	*out = r;
	return 0;
}

int rkv_ps_test(struct rkv_ps_req *r)
{
	int rc;

	if (!r)
		return -EINVAL;
	if (!r->finished) {
		rc = progress(r->ps);
		if (rc < 0)
			return rc;
	}
	return r->finished ? r->err : -EINPROGRESS;
}

int rkv_ps_wait(struct rkv_ps_req *r, uint64_t *vmin, uint64_t *vmax)
{
	int rc;

	if (!r)
		return -EINVAL;
	rc = req_run(r);
	if (!r->finished)
		return rc; /* the client failed under it: shard ops still
			    * name r, so it stays allocated */
	if (rc == 0) {
		if (vmin)
			*vmin = r->vmin == UINT64_MAX ? 0 : r->vmin;
		if (vmax)
			*vmax = r->vmax;
	}
	req_free(r);
	return rc;
}

int rkv_ps_pull(struct rkv_ps_tensor *t, float *buf, uint64_t n,
		uint64_t *vmin, uint64_t *vmax)
{
	struct rkv_ps_req *r;
	int rc = rkv_ps_pull_async(t, buf, n, &r);

	return rc ? rc : rkv_ps_wait(r, vmin, vmax);
}

int rkv_ps_push(struct rkv_ps_tensor *t, enum rkv_ps_rule rule,
		const float *src, uint64_t n, float lr)
{
	struct rkv_ps_req *r;
	int rc = rkv_ps_push_async(t, rule, src, n, lr, &r);

	return rc ? rc : rkv_ps_wait(r, NULL, NULL);
}

int rkv_ps_pull_many(struct rkv_ps *ps, struct rkv_ps_io *io, size_t count)
{
	struct rkv_ps_req **reqs;
	int first = 0;

	if (!ps || (count && !io))
		return -EINVAL;
	reqs = rkv_calloc(count ? count : 1, sizeof(*reqs));
	if (!reqs)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++) {
		io[i].vmin = io[i].vmax = 0;
		io[i].status = io[i].t && io[i].t->ps != ps ?
				       -EINVAL :
				       rkv_ps_pull_async(io[i].t, io[i].buf,
							 io[i].n, &reqs[i]);
	}
	for (size_t i = 0; i < count; i++) {
		if (reqs[i])
			io[i].status = rkv_ps_wait(reqs[i], &io[i].vmin,
						   &io[i].vmax);
		if (io[i].status && !first)
			first = io[i].status;
	}
	rkv_free(reqs);
	return first;
}

