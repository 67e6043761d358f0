/* SPDX-License-Identifier: MIT */
/*
 * api.c - librkv's public entry points: the pipelined interface (submit,
 * poll), the synchronous calls built on it, and batches.  A synchronous
 * call submits one op and drives progress until that op is done; ops of
 * the pipelined interface that finish meanwhile stay queued for rkv_poll.
 */
#include "client_internal.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "rtime.h"

static int check_op(const struct rkv_client *c, const struct rkv_op *op)
{
	if (!op->key || op->key_len == 0)
		return -EINVAL;
	if (op->key_len > RKV_KEY_MAX)
		return -EMSGSIZE;
	switch (op->type) {
	case RKV_OP_GET:
		if (op->buf_cap && !op->buf)
			return -EINVAL;
		return 0;
	case RKV_OP_PUT:
		if (op->val_len && !op->val)
			return -EINVAL;
		if (op->val_len > c->opts.max_value)
			return -EMSGSIZE;
		return 0;
	case RKV_OP_DELETE:
		return 0;
	case RKV_OP_RMW:
		return op->fn ? 0 : -EINVAL;
	}
	/* internal kinds (client_internal.h, submitted by ps.c) */
	if (op->type == RKV_OP_XGET)
		return op->val && (op->buf || !op->buf_cap) ? 0 : -EINVAL;
	if (op->type == RKV_OP_XPUT)
		return op->val && op->fn ? 0 : -EINVAL;
	/* device ops: only the *_dev calls below make them */
	if (!c->gpu)
		return -EINVAL;
	if (op->type == RKV_OP_DGET)
		return op->buf || !op->buf_cap ? 0 : -EINVAL;
	if (op->type == RKV_OP_DPUT) {
		if (op->val_len && !op->val)
			return -EINVAL;
		return op->val_len > c->opts.max_value ? -EMSGSIZE : 0;
	}
	if (op->type == RKV_OP_DRMW)
		return op->fn ? 0 : -EINVAL;
	return -EINVAL;
}

static struct opslot *slot_get(struct rkv_client *c)
{
	for (unsigned i = 0; i < c->nslots; i++)
		if (c->slots[i].state == OP_FREE)
			return &c->slots[i];
	return NULL;
}

static int all_done(const struct rkv_client *c)
{
	for (unsigned i = 0; i < c->nslots; i++)
		if (c->slots[i].state != OP_DONE)
			return 0;
	return 1;
}

int rkv_submit(struct rkv_client *c, struct rkv_op *op)
{
	struct opslot *o;
	int rc;

	if (!c || !op)
		return -EINVAL;
	rc = check_op(c, op);
	if (rc)
		return rc;
	o = slot_get(c);
	if (!o)
		return -EAGAIN;
	o->op = op;
	o->state = OP_START;
	o->t_start_ns = rkv_now_ns();
	op->status = -EINPROGRESS;
	op->rtts = 0;
	c->inflight++;
	return 0;
}

static void slot_release(struct rkv_client *c, struct opslot *o)
{
	o->state = OP_FREE;
	o->op = NULL;
	c->inflight--;
}

int rkv_poll(struct rkv_client *c, struct rkv_op **done, int max)
{
	int n = 0, rc;

	if (!c || (max > 0 && !done))
		return -EINVAL;
	if (!c->done_head) {
		rc = client_progress(c);
		if (rc < 0)
			return rc;
	}
	if (c->done_head)
		client_progressed(c);
	while (c->done_head && n < max) {
		struct opslot *o = c->done_head;

		c->done_head = o->done_next;
		if (!c->done_head)
			c->done_tail = NULL;
		done[n++] = o->op;
		slot_release(c, o);
	}
	return n;
}

unsigned rkv_inflight(const struct rkv_client *c)
{
	return c->inflight;
}

/* Remove o from the done list (it is there: state OP_DONE). */
static void unlink_done(struct rkv_client *c, struct opslot *o)
{
	struct opslot **pp = &c->done_head, *prev = NULL;

	while (*pp && *pp != o) {
		prev = *pp;
		pp = &(*pp)->done_next;
	}
	if (!*pp)
		return;
	*pp = o->done_next;
	if (c->done_tail == o)
		c->done_tail = prev;
}

/*
 * Waiting.  A thread with ops in flight polls; when a poll finds nothing
 * it calls rkv_wait, which first lets it spin (return at once, poll again)
 * and then blocks in rkv_cq_wait.  How long to spin adapts to a moving
 * average of this client's idle periods: below RKV_WAIT_FAST_NS (a quick
 * peer with a core of its own) it spins up to RKV_SPIN_LONG_NS, since a
 * wake-up costs more than the rest of the wait; above RKV_WAIT_SLOW_NS
 * (typically more busy threads than cores, where the spinning thread keeps
 * the peer that must answer off the CPU) it blocks after
 * RKV_SPIN_SHORT_NS.  In between it keeps its mode: blocking itself adds
 * a wake-up to every wait, and without the gap one slow moment would keep
 * a quick client blocking for good.  On 2 cores, tcp, one op in flight per
 * thread: 1 thread is as fast as before, 2 and 4 threads 1.2-1.9x faster
 * (figures in docs/DESIGN.md §2).  Should a wait fail, callers
 * sleep briefly instead, so that they never spin hot.
 */
#define RKV_SPIN_LONG_NS 50000ull
#define RKV_SPIN_SHORT_NS 2000ull
#define RKV_WAIT_FAST_NS 40000ull
#define RKV_WAIT_SLOW_NS 60000ull
#define RKV_IDLE_WAIT_US 1000u
#define RKV_IDLE_SLEEP_NS 20000L
/* An op that waits on a timer (lock back-off, chunk retry) is looked at
 * again after about this long at most. */
#define RKV_WAIT_TIMER_US 500u

void client_progressed(struct rkv_client *c)
{
	if (c->idle_t0) {
		uint64_t d = rkv_now_ns() - c->idle_t0;

		c->wait_avg_ns = (7 * c->wait_avg_ns + d) / 8;
		c->idle_t0 = 0;
		if (c->wait_avg_ns < RKV_WAIT_FAST_NS)
			c->spin_short = 0;
		else if (c->wait_avg_ns > RKV_WAIT_SLOW_NS)
			c->spin_short = 1;
	}
}

int rkv_wait(struct rkv_client *c, unsigned timeout_us)
{
	uint64_t now, spin;

	if (!c)
		return -EINVAL;
	/* spinning: the caller polls again (checked first, it is the
	 * common case) */
	now = rkv_now_ns();
	if (!c->idle_t0)
		c->idle_t0 = now;
	spin = c->spin_short ? RKV_SPIN_SHORT_NS : RKV_SPIN_LONG_NS;
	if (now - c->idle_t0 < spin)
		return 0;
	/* before blocking: is there work for rkv_poll? */
	if (c->done_head)
		return 0;
	for (unsigned i = 0; i < c->nsrv; i++)
		if (c->srv[i].pend_head)
			return 0; /* WRs for the next doorbell: poll posts them */
	for (unsigned i = 0; i < c->nslots; i++) {
		enum op_state st = c->slots[i].state;

		if (st == OP_START || st == OP_DONE)
			return 0;
		if ((st == OP_WAIT_TIMER || st == OP_WAIT_SPACE) &&
		    timeout_us > RKV_WAIT_TIMER_US)
			timeout_us = RKV_WAIT_TIMER_US;
	}
	return rkv_cq_wait(c->cq, timeout_us);
}

void client_idle(struct rkv_client *c, int progressed)
{
	if (progressed) {
		client_progressed(c);
	} else if (rkv_wait(c, RKV_IDLE_WAIT_US) < 0) {
		struct timespec ts = { 0, RKV_IDLE_SLEEP_NS };

		nanosleep(&ts, NULL);
	}
}

/* Run the ops to completion (they must all fit in free slots). */
static int run_ops(struct rkv_client *c, struct rkv_op *ops, size_t n)
{
	struct opslot *slots[64];
	size_t i, left;
	int rc;

	if (n > 64)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		struct opslot *o;

		rc = check_op(c, &ops[i]);
		if (rc) {
			ops[i].status = rc;
			slots[i] = NULL;
			continue;
		}
		o = slot_get(c);
		while (!o) {
			/* every slot holds a finished pipelined op that only
			 * rkv_poll can hand back: waiting would never end */
			if (all_done(c))
				return -EBUSY;
			rc = client_progress(c);
			if (rc < 0)
				return rc;
			o = slot_get(c);
		}
		o->op = &ops[i];
		o->state = OP_START;
		o->t_start_ns = rkv_now_ns();
		ops[i].status = -EINPROGRESS;
		c->inflight++;
		slots[i] = o;
	}

	for (;;) {
		left = 0;
		for (i = 0; i < n; i++) {
			if (!slots[i])
				continue;
			if (slots[i]->state == OP_DONE) {
				unlink_done(c, slots[i]);
				slot_release(c, slots[i]);
				slots[i] = NULL;
			} else {
				left++;
			}
		}
		if (!left)
			return 0;
		rc = client_progress(c);
		if (rc < 0)
			return rc;
		client_idle(c, rc);
	}
}

int client_run_op(struct rkv_client *c, struct rkv_op *op)
{
	return run_ops(c, op, 1);
}

int rkv_get(struct rkv_client *c, const void *key, size_t key_len, void *buf,
	    size_t cap, size_t *val_len)
{
	struct rkv_op op = { .type = RKV_OP_GET, .key = key,
			     .key_len = key_len, .buf = buf, .buf_cap = cap };
	int rc;

	if (!c)
		return -EINVAL;
	rc = run_ops(c, &op, 1);
	if (rc)
		return rc;
	if (val_len && (op.status == 0 || op.status == -ENOBUFS))
		*val_len = op.out_len;
	return op.status;
}

int rkv_put(struct rkv_client *c, const void *key, size_t key_len,
	    const void *val, size_t val_len)
{
	struct rkv_op op = { .type = RKV_OP_PUT, .key = key,
			     .key_len = key_len, .val = val,
			     .val_len = val_len };
	int rc;

	if (!c)
		return -EINVAL;
	rc = run_ops(c, &op, 1);
	return rc ? rc : op.status;
}

int rkv_delete(struct rkv_client *c, const void *key, size_t key_len)
{
	struct rkv_op op = { .type = RKV_OP_DELETE, .key = key,
			     .key_len = key_len };
	int rc;

	if (!c)
		return -EINVAL;
	rc = run_ops(c, &op, 1);
	return rc ? rc : op.status;
}

int rkv_rmw(struct rkv_client *c, const void *key, size_t key_len,
	    rkv_rmw_fn fn, void *arg)
{
	struct rkv_op op = { .type = RKV_OP_RMW, .key = key,
			     .key_len = key_len, .fn = fn, .fn_arg = arg };
	int rc;

	if (!c)
		return -EINVAL;
	rc = run_ops(c, &op, 1);
	return rc ? rc : op.status;
}

static int batch(struct rkv_client *c, struct rkv_kv *items, size_t n,
		 enum rkv_op_type type)
{
	struct rkv_op ops[64];
	int first_err = 0;

	if (!c || (n && !items))
		return -EINVAL;
	size_t m;

	for (size_t base = 0; base < n; base += m) {
		size_t room = c->nslots - c->inflight;
		unsigned rounds = 0;
		int rc;

		m = n - base < 64 ? n - base : 64;
		if (m > c->nslots)
			m = c->nslots;
		if (m > room && room > 0)
			m = room; /* pipelined ops hold some slots */
		for (size_t i = 0; i < m; i++) {
			struct rkv_kv *it = &items[base + i];

			ops[i] = (struct rkv_op){ .type = type, .key = it->key,
						  .key_len = it->key_len };
			if (type == RKV_OP_GET) {
				ops[i].buf = it->val;
				ops[i].buf_cap = it->val_cap;
			} else {
				ops[i].val = it->val;
				ops[i].val_len = it->val_len;
			}
		}
		rc = run_ops(c, ops, m);
		if (rc)
			return rc;
		for (size_t i = 0; i < m; i++) {
			struct rkv_kv *it = &items[base + i];

			it->status = ops[i].status;
			if (type == RKV_OP_GET)
				it->val_len = ops[i].out_len;
			if (ops[i].rtts > rounds)
				rounds = ops[i].rtts;
			if (ops[i].status && !first_err)
				first_err = ops[i].status;
		}
		if (type == RKV_OP_GET) {
			c->st.mget_batches++;
			c->st.mget_rtts += rounds;
		}
	}
	return first_err;
}

int rkv_mget(struct rkv_client *c, struct rkv_kv *items, size_t n)
{
	return batch(c, items, n, RKV_OP_GET);
}

int rkv_mput(struct rkv_client *c, struct rkv_kv *items, size_t n)
{
	return batch(c, items, n, RKV_OP_PUT);
}

/* ------------------------------------------------------ device buffers */

int rkv_get_dev(struct rkv_client *c, const void *key, size_t key_len,
		void *dev_buf, size_t cap, size_t *val_len, int gpu)
{
	struct rkv_op op = { .type = RKV_OP_DGET, .key = key,
			     .key_len = key_len, .buf = dev_buf,
			     .buf_cap = cap };
	int rc;

	if (!c)
		return -EINVAL;
	rc = gpu_prepare(c, gpu, dev_buf, cap, "rkv_get_dev");
	if (!rc)
		rc = run_ops(c, &op, 1);
	if (rc)
		return rc;
	if (val_len && (op.status == 0 || op.status == -ENOBUFS))
		*val_len = op.out_len;
	return op.status;
}

int rkv_put_dev(struct rkv_client *c, const void *key, size_t key_len,
		const void *dev_val, size_t val_len, int gpu)
{
	struct rkv_op op = { .type = RKV_OP_DPUT, .key = key,
			     .key_len = key_len, .val = dev_val,
			     .val_len = val_len };
	int rc;

	if (!c)
		return -EINVAL;
	if (c->opts.read_only)
		return -EACCES;
	rc = gpu_prepare(c, gpu, dev_val, val_len, "rkv_put_dev");
	if (!rc)
		rc = run_ops(c, &op, 1);
	return rc ? rc : op.status;
}

int rkv_rmw_dev(struct rkv_client *c, const void *key, size_t key_len,
		rkv_rmw_fn fn, void *arg, int gpu)
{
	struct rkv_op op = { .type = RKV_OP_DRMW, .key = key,
			     .key_len = key_len, .fn = fn, .fn_arg = arg };
	int rc;

	if (!c)
		return -EINVAL;
	if (c->opts.read_only)
		return -EACCES;
	rc = gpu_prepare(c, gpu, NULL, 0, "rkv_rmw_dev");
	if (!rc)
		rc = run_ops(c, &op, 1);
	return rc ? rc : op.status;
}
