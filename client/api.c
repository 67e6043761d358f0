/* SPDX-License-Identifier: MIT */
/*
 * api.c - librkv's public entry points: the pipelined interface (submit,
 * poll), the synchronous calls built on it, batches, the device calls,
 * and the extension point of rkv_ext.h.  A synchronous call submits one
 * op and drives progress until that op is done; ops of the pipelined
 * interface that finish meanwhile stay queued for rkv_poll.
 */
#include "client.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "rtime.h"

/* The kind of a public op type (NULL: not one). */
static const struct op_kind *kind_of(enum rkv_op_type t)
{
	switch (t) {
	case RKV_OP_GET: return &op_get;
	case RKV_OP_PUT: return &op_put;
	case RKV_OP_DELETE: return &op_del;
	case RKV_OP_RMW: return &op_rmw;
	}
	return NULL;
}

/* Check op's arguments for kind k (x: its extension descriptor). */
static int check_op(const struct rkv_client *c, const struct rkv_op *op,
		    const struct op_kind *k, const struct rkv_ext_op *x)
{
	if (!k)
		return -EINVAL;
	if (!op->key || op->key_len == 0)
		return -EINVAL;
	if (op->key_len > RKV_KEY_MAX)
		return -EMSGSIZE;
	if (k == &op_get || k == &op_split_get) {
		if (op->buf_cap && !op->buf)
			return -EINVAL;
		return k == &op_split_get && (!x || (x->tail_len && !x->tail)) ?
			       -EINVAL : 0;
	}
	if (k == &op_put) {
		if (op->val_len && !op->val)
			return -EINVAL;
		return op->val_len > c->opts.max_value ? -EMSGSIZE : 0;
	}
	if (k == &op_rmw || k == &op_head_put)
		return op->fn && (k == &op_rmw || (x && x->put_fn)) ? 0
								    : -EINVAL;
	return k == &op_del ? 0 : -EINVAL;
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

/* Occupy slot o with op. */
static void slot_take(struct rkv_client *c, struct opslot *o,
		      struct rkv_op *op, const struct op_kind *k,
		      struct rkv_ext_op *x, struct cgpu *d, int timed)
{
	o->op = op;
	o->kind = k;
	o->x = x;
	o->x_try = x != NULL;
	o->direct_no = 0;
	o->bad_word = 0;
	if (x)
		x->split = 0;
	o->d = d;
	o->state = OP_START;
	o->timed = timed;
	o->t_start_ns = timed ? rkv_now_ns() : 0;
	op->status = -EINPROGRESS;
	op->rtts = 0;
	c->inflight++;
}

/* Idle until now: what happened meanwhile (a link closed by a failover's
 * fence) is seen, and healed, before an op posts. */
static int catch_up(struct rkv_client *c)
{
	int rc = eng_poll_idle(&c->eng);

	if (rc <= 0)
		return rc; /* not idle */
	/* an endpoint the peer disconnected (verbs: the CM's DISCONNECTED,
	 * seen by the poll) with nothing posted on it gives no completion */
	client_links_check(c);
	if (c->eng.links_failed != c->links_failed_seen)
		peers_heal(c);
	return 0;
}

int client_submit(struct rkv_client *c, struct rkv_op *op,
		  const struct op_kind *k, struct rkv_ext_op *x)
{
	struct opslot *o;
	int rc;

	if (!c || !op)
		return -EINVAL;
	rc = check_op(c, op, k, x);
	if (rc)
		return rc;
	o = slot_get(c);
	if (!o)
		return -EAGAIN;
	rc = catch_up(c);
	if (rc < 0)
		return rc;
	slot_take(c, o, op, k, x, NULL, 1);
	return 0;
}

int rkv_submit(struct rkv_client *c, struct rkv_op *op)
{
	if (!op)
		return -EINVAL;
	return client_submit(c, op, kind_of(op->type), NULL);
}

static void slot_release(struct rkv_client *c, struct opslot *o)
{
	op_big_release(o);
	o->state = OP_FREE;
	o->op = NULL;
	c->inflight--;
}

int client_progress(struct rkv_client *c)
{
	/* a link that died while we were idle is healed before an op posts
	 * on it (a failover closes the survivors' links: reconnecting then
	 * reads the new map) */
	int rc = catch_up(c);

	if (rc < 0)
		return rc;
	peers_heal(c); /* here, never inside a progress pass */
	mig_route(c);  /* likewise: it may read etcd and connect */
	return eng_progress(&c->eng);
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
		eng_progressed(&c->eng);
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
 * average of this client's idle periods (engine.c): below 40 us (a quick
 * peer with a core of its own) it spins up to 50 us, since a wake-up
 * costs more than the rest of the wait; above 60 us (typically more busy
 * threads than cores, where the spinning thread keeps the peer that must
 * answer off the CPU) it blocks after 2 us.  In between it keeps its
 * mode: blocking itself adds a wake-up to every wait, and without the gap
 * one slow moment would keep a quick client blocking for good.  On 2
 * cores, tcp, one op in flight per thread: 1 thread is as fast as before,
 * 2 and 4 threads 1.2-1.9x faster (figures in docs/DESIGN.md §2).  Should
 * a wait fail, callers sleep briefly instead, so that they never spin hot.
 */
#define RKV_IDLE_WAIT_US 1000u
#define RKV_IDLE_SLEEP_NS 20000L
/* An op that waits on a timer (lock back-off, chunk retry) is looked at
 * again after about this long at most. */
#define RKV_WAIT_TIMER_US 500u

int rkv_wait(struct rkv_client *c, unsigned timeout_us)
{
	if (!c)
		return -EINVAL;
	/* spinning: the caller polls again (checked first, it is the
	 * common case) */
	if (eng_spinning(&c->eng))
		return 0;
	/* before blocking: is there work for rkv_poll? */
	if (c->done_head)
		return 0;
	for (unsigned i = 0; i < c->nslots; i++) {
		enum op_state st = c->slots[i].state;

		if (st == OP_START || st == OP_DONE)
			return 0;
		if ((st == OP_WAIT_TIMER || st == OP_WAIT_SPACE) &&
		    timeout_us > RKV_WAIT_TIMER_US)
			timeout_us = RKV_WAIT_TIMER_US;
	}
	return eng_block(&c->eng, timeout_us);
}

int client_read_only(const struct rkv_client *c)
{
	if (c->opts.read_only)
		return 1;
	for (unsigned i = 0; i < c->nsrv; i++)
		if (c->peer[i].g.read_only)
			return 1;
	return 0;
}

void client_idle(struct rkv_client *c, int progressed)
{
	if (progressed) {
		eng_progressed(&c->eng);
	} else if (rkv_wait(c, RKV_IDLE_WAIT_US) < 0) {
		struct timespec ts = { 0, RKV_IDLE_SLEEP_NS };

		nanosleep(&ts, NULL);
	}
}

/* Run the ops to completion (they must all fit in free slots), of kind
 * k (NULL: by their types), extension descriptor x and device staging d
 * (n 1 when either is given); timed: the caller's own ops, whose
 * latency_ns it may read (else the library's, untimed). */
static int run_ops(struct rkv_client *c, struct rkv_op *ops, size_t n,
		   const struct op_kind *k, struct rkv_ext_op *x,
		   struct cgpu *d, int timed)
{
	struct opslot *slots[64];
	size_t i, left;
	int rc;

	if (n > 64)
		return -EINVAL;
	rc = catch_up(c);
	if (rc < 0)
		return rc;
	for (i = 0; i < n; i++) {
		struct opslot *o;

		const struct op_kind *ki = k ? k : kind_of(ops[i].type);

		rc = check_op(c, &ops[i], ki, x);
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
		slot_take(c, o, &ops[i], ki, x, d, timed);
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

int client_run(struct rkv_client *c, struct rkv_op *op,
	       const struct op_kind *k, struct rkv_ext_op *x)
{
	return run_ops(c, op, 1, k, x, NULL, 1);
}

int rkv_get(struct rkv_client *c, const void *key, size_t key_len, void *buf,
	    size_t cap, size_t *val_len)
{
	struct rkv_op op = { .type = RKV_OP_GET, .key = key,
			     .key_len = key_len, .buf = buf, .buf_cap = cap };
	int rc;

	if (!c)
		return -EINVAL;
	rc = run_ops(c, &op, 1, NULL, NULL, NULL, 0);
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
	rc = run_ops(c, &op, 1, NULL, NULL, NULL, 0);
	return rc ? rc : op.status;
}

int rkv_delete(struct rkv_client *c, const void *key, size_t key_len)
{
	struct rkv_op op = { .type = RKV_OP_DELETE, .key = key,
			     .key_len = key_len };
	int rc;

	if (!c)
		return -EINVAL;
	rc = run_ops(c, &op, 1, NULL, NULL, NULL, 0);
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
	rc = run_ops(c, &op, 1, NULL, NULL, NULL, 0);
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
		rc = run_ops(c, ops, m, NULL, NULL, NULL, 0);
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

/* A device get on prepared staging (c->gpu). */
static int dev_get(struct rkv_client *c, const void *key, size_t key_len,
		   void *head_buf, size_t head, void *dev_buf, size_t cap,
		   size_t *val_len)
{
	struct rkv_op op = { .type = RKV_OP_GET, .key = key,
			     .key_len = key_len, .buf = dev_buf,
			     .buf_cap = cap };
	int rc;

	c->gpu->head = head;
	c->gpu->head_buf = head_buf;
	rc = run_ops(c, &op, 1, &op_get, NULL, c->gpu, 0);
	c->gpu->head = 0;
	c->gpu->head_buf = NULL;
	if (rc)
		return rc;
	if (val_len && (op.status == 0 || op.status == -ENOBUFS))
		*val_len = op.out_len;
	return op.status;
}

int rkv_get_dev(struct rkv_client *c, const void *key, size_t key_len,
		void *dev_buf, size_t cap, size_t *val_len, int gpu)
{
	int rc;

	if (!c)
		return -EINVAL;
	rc = gpu_prepare(c, gpu, dev_buf, cap, "rkv_get_dev");
	return rc ? rc : dev_get(c, key, key_len, NULL, 0, dev_buf, cap,
				 val_len);
}

int rkv_ext_get_dev_split(struct rkv_client *c, const void *key,
			  size_t key_len, void *head_buf, size_t head,
			  void *dev_buf, size_t cap, size_t *val_len, int gpu)
{
	/* the caller's rkv_ext_dev_prepare checked the whole buffer once */
	if (!c || (head && !head_buf) || !c->gpu || c->gpu->gpu != gpu)
		return -EINVAL;
	return dev_get(c, key, key_len, head_buf, head, dev_buf, cap,
		       val_len);
}

int rkv_put_dev(struct rkv_client *c, const void *key, size_t key_len,
		const void *dev_val, size_t val_len, int gpu)
{
	struct rkv_op op = { .type = RKV_OP_PUT, .key = key,
			     .key_len = key_len, .val = dev_val,
			     .val_len = val_len };
	int rc;

	if (!c)
		return -EINVAL;
	if (c->opts.read_only)
		return -EACCES;
	rc = gpu_prepare(c, gpu, dev_val, val_len, "rkv_put_dev");
	if (!rc)
		rc = run_ops(c, &op, 1, &op_put, NULL, c->gpu, 0);
	return rc ? rc : op.status;
}

int rkv_rmw_dev(struct rkv_client *c, const void *key, size_t key_len,
		rkv_rmw_fn fn, void *arg, int gpu)
{
	struct rkv_op op = { .type = RKV_OP_RMW, .key = key,
			     .key_len = key_len, .fn = fn, .fn_arg = arg };
	int rc;

	if (!c)
		return -EINVAL;
	if (c->opts.read_only)
		return -EACCES;
	rc = gpu_prepare(c, gpu, NULL, 0, "rkv_rmw_dev");
	if (!rc)
		rc = run_ops(c, &op, 1, &op_rmw, NULL, c->gpu, 0);
	return rc ? rc : op.status;
}

int rkv_ext_dev_prepare(struct rkv_client *c, int gpu, const void *ptr,
			size_t len, const char *what)
{
	return c ? gpu_prepare(c, gpu, ptr, len, what) : -EINVAL;
}

/* ------------------------------------------------- the extension point */

static const struct op_kind *ext_kind(const struct rkv_op *op,
				      const struct rkv_ext_op *x)
{
	if (!x)
		return kind_of(op->type);
	switch (x->kind) {
	case RKV_EXT_SPLIT_GET: return &op_split_get;
	case RKV_EXT_HEAD_PUT: return &op_head_put;
	}
	return NULL;
}

int rkv_ext_submit(struct rkv_client *c, struct rkv_op *op,
		   struct rkv_ext_op *x)
{
	if (!op)
		return -EINVAL;
	return client_submit(c, op, ext_kind(op, x), x);
}

int rkv_ext_run(struct rkv_client *c, struct rkv_op *op,
		struct rkv_ext_op *x)
{
	if (!c || !op)
		return -EINVAL;
	return run_ops(c, op, 1, ext_kind(op, x), x, NULL, 1);
}

void rkv_ext_idle(struct rkv_client *c, int progressed)
{
	client_idle(c, progressed);
}

int rkv_ext_buf_reg(struct rkv_client *c, void *addr, size_t len,
		    struct rkv_ext_buf *b)
{
	struct rkv_mr *mr;
	int rc;

	if (!c || !b)
		return -EINVAL;
	rc = rkv_mr_reg(c->eng.tp, addr, len, RKV_ACCESS_LOCAL_WRITE, &mr);
	if (rc)
		return rc;
	*b = (struct rkv_ext_buf){ .addr = addr, .len = len,
				   .lkey = mr->lkey, .mr = mr };
	return 0;
}

void rkv_ext_buf_dereg(struct rkv_ext_buf *b)
{
	if (b && b->mr) {
		rkv_mr_dereg(b->mr);
		b->mr = NULL;
	}
}

int rkv_ext_buf_cheap(const struct rkv_client *c)
{
	return rkv_tp_provider(c->eng.tp) != RKV_TP_VERBS;
}

_Static_assert(INLINE_VALUE == 261024,
	       "rkv_ext.h and rkv_ps.h give this limit as 261,024 bytes");

void rkv_ext_info(const struct rkv_client *c, struct rkv_ext_info *out)
{
	*out = (struct rkv_ext_info){ .max_inflight = c->nslots,
				      .max_value = c->opts.max_value <
							   INLINE_VALUE ?
							   c->opts.max_value :
							   INLINE_VALUE,
				      .timeout_ms = c->opts.timeout_ms,
				      .read_only = client_read_only(c) };
}
