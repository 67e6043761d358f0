/* SPDX-License-Identifier: MIT */
/*
 * op.c - an op slot's life (op.h): start, rounds and their completions,
 * timers, retries, the finish.  What a round does is up to the machine
 * its step belongs to; invariants every machine keeps:
 *   - a block is immutable once a slot names it; a reader accepts it only
 *     if checksum and key match, and only if its attempt took less than
 *     the grace period (after which the block could have been reused);
 *   - a slot is changed only by CAS, and every change but taking a lock
 *     bumps its version, so an expected value that went stale never
 *     matches again;
 *   - a lock holder writes only a private block until its releasing CAS;
 *     if its lock was stolen (lease expired) that CAS fails and it retries;
 *   - at most one committed copy of a key exists (op_ins.c);
 *   - the server frees a returned block only while its grant still owns
 *     it, so every return names the grant from the block's header.
 */
#include "client.h"

#include <errno.h>
#include <string.h>

#include "hash.h"
#include "rtime.h"

/* ------------------------------------------------------------ words */

uint64_t bucket_word(const struct opslot *o, unsigned pos)
{
	uint64_t w;

	memcpy(&w, o->buf + OB_BUCKETS + pos * 8u, 8);
	return w;
}

uint64_t word_at(const struct opslot *o, unsigned off)
{
	uint64_t w;

	memcpy(&w, o->buf + off, 8);
	return w;
}

uint64_t pos_addr(const struct opslot *o, unsigned pos)
{
	return peer_pos_addr(o->p, o->b, pos);
}

uint64_t data_addr(const struct opslot *o, uint64_t slot)
{
	return o->p->g.data_addr + rkv_slot_offset(slot);
}

/* ------------------------------------------------------------- rounds */

void round_begin(struct opslot *o)
{
	o->round_nwr = 0;
}

void rd(struct opslot *o, unsigned local_off, uint64_t raddr, uint32_t rkey,
	uint32_t len)
{
	o->wr[o->round_nwr++] = (struct rkv_wr){
		.opcode = RKV_WR_READ, .local = o->buf + local_off,
		.length = len, .lkey = o->lkey, .remote_addr = raddr,
		.rkey = rkey };
}

void rd_to(struct opslot *o, void *local, uint32_t lkey, uint64_t raddr,
	   uint32_t len)
{
	o->wr[o->round_nwr++] = (struct rkv_wr){
		.opcode = RKV_WR_READ, .local = local, .length = len,
		.lkey = lkey, .remote_addr = raddr,
		.rkey = o->p->ctrl.keys.data };
}

/* READ a block to op buffer offset local_off (device ops: the same offset
 * of the device staging). */
void rd_blk(struct opslot *o, unsigned local_off, uint64_t raddr,
	    uint32_t len)
{
	op_read_block(o, len);
	if (o->d)
		rd_to(o, o->d->rd + (local_off - OB_BLOCKS), o->d->mr->lkey,
		      raddr, len);
	else
		rd(o, local_off, raddr, o->p->ctrl.keys.data, len);
}

/* READ both buckets into OB_BUCKETS, then the key's partition word into
 * OB_PART: RC executes them in order, so a bucket that shows a moved
 * slot is followed by a word that shows the move (op_mig.c). */
void rd_buckets(struct opslot *o)
{
	uint32_t k = o->p->ctrl.keys.index;
	uint32_t n = peer_bucket_bytes(o->p);

	for (unsigned i = 0; i < o->nbk; i++)
		rd(o, OB_BUCKETS + i * n, peer_slot_addr(o->p, o->b[i], 0), k,
		   n);
	rd(o, OB_PART, peer_part_addr(o->p, o->part), k, 8);
	if (o->p->g.levels_max > 1)
		rd(o, OB_LEVEL, peer_level_addr(o->p), k, 8);
}

void op_buckets(struct opslot *o)
{
	o->levels = o->p->g.levels;
	o->nbk = peer_key_buckets(o->p, &o->kh, o->b);
	o->npos = o->nbk * o->p->g.bucket_slots;
}

int op_level_stale(struct opslot *o)
{
	if (!peer_levels_seen(o->p, word_at(o, OB_LEVEL), o->levels))
		return 0;
	o->c->st.level_news++;
	return 1;
}

/* READ the slot word at pos into OB_WORD. */
void rd_word(struct opslot *o, unsigned pos)
{
	rd(o, OB_WORD, pos_addr(o, pos), o->p->ctrl.keys.index, 8);
}

void cas(struct opslot *o, unsigned pos, uint64_t expect, uint64_t swap)
{
	o->wr[o->round_nwr++] = (struct rkv_wr){
		.opcode = RKV_WR_CAS, .local = o->buf + OB_WORD, .length = 8,
		.lkey = o->lkey, .remote_addr = pos_addr(o, pos),
		.rkey = o->p->ctrl.keys.index, .compare_add = expect,
		.swap = swap };
}

/* A block whose value is the caller's (nb_make_put): header (checksum
 * 0) and key, then the value from the caller's buffer feeding o->dh; its
 * padding is left as it was.  wr_block_sum writes the checksum next. */
static void wr_block_zc(struct opslot *o)
{
	size_t pre = RKV_BLOCK_HDR_SIZE + o->op->key_len;
	uint64_t a = o->p->g.data_addr + o->nb.ref.off;

	o->wr[o->round_nwr++] = (struct rkv_wr){
		.opcode = RKV_WR_WRITE, .local = new_blk_buf(o),
		.length = (uint32_t)pre,
		.lkey = o->wbig ? o->wbig->mr->lkey : o->own_lkey,
		.remote_addr = a, .rkey = o->p->ctrl.keys.data };
	o->wr[o->round_nwr++] = (struct rkv_wr){
		.opcode = RKV_WR_WRITE, .flags = RKV_WR_DIGEST,
		.local = (void *)o->op->val,
		.length = (uint32_t)o->op->val_len, .lkey = o->umr->lkey,
		.remote_addr = a + pre, .rkey = o->p->ctrl.keys.data,
		.digest = o->dh };
	o->nb.written = 1;
	o->nb.sum_due = 1;
}

void wr_block_sum(struct opslot *o)
{
	struct rkv_block_hdr *h = (void *)new_blk_buf(o);

	h->checksum = rkv_hash_digest(o->dh);
	o->wr[o->round_nwr++] = (struct rkv_wr){
		.opcode = RKV_WR_WRITE, .local = &h->checksum,
		.length = sizeof(h->checksum),
		.lkey = o->wbig ? o->wbig->mr->lkey : o->own_lkey,
		.remote_addr = o->p->g.data_addr + o->nb.ref.off +
			       offsetof(struct rkv_block_hdr, checksum),
		.rkey = o->p->ctrl.keys.data };
	o->nb.sum_due = 0;
}

void wr_block(struct opslot *o)
{
	if (o->nb.zc) {
		wr_block_zc(o);
		return;
	}
	o->wr[o->round_nwr++] = (struct rkv_wr){
		.opcode = RKV_WR_WRITE, .local = new_blk_buf(o),
		.length = o->nb.size,
		.lkey = o->d ? o->d->mr->lkey :
			o->wbig ? o->wbig->mr->lkey : o->own_lkey,
		.remote_addr = o->p->g.data_addr + o->nb.ref.off,
		.rkey = o->p->ctrl.keys.data };
	o->nb.written = 1;
}

/*
 * The lease word (proto/layout.h) of a cluster member, at r > 1 where a
 * failover can replace a server: a READ completed before its value (on
 * our clock) read current memory.  A round READs it too when the value
 * we hold has less than LEASE_ASK_MS left (the server renews every
 * second, so about once a second per server), at most one round per
 * LEASE_ASK_GAP_MS.
 */
#define LEASE_ASK_MS 2500u
#define LEASE_ASK_GAP_MS 20u
#define LEASE_WAIT_MS 20u

static int lease_checked(const struct opslot *o)
{
	return o->p->g.leased && o->c->r > 1;
}

static void lease_ask(struct opslot *o)
{
	struct peer *p = o->p;
	uint64_t now;

	o->lease_rd = 0;
	if (!lease_checked(o) || o->round_nwr >= ROUND_MAX_WR ||
	    rkv_wall_coarse_ms() + LEASE_ASK_MS < p->lease_until)
		return;
	now = rkv_coarse_ms();
	if (now - p->lease_asked_ms < LEASE_ASK_GAP_MS)
		return;
	p->lease_asked_ms = now;
	o->lease_rd = 1;
	rd(o, OB_LEASE, peer_lease_addr(p), p->ctrl.keys.index, 8);
}

int op_lease_ok(struct opslot *o)
{
	struct rkv_client *c = o->c;

	if (!lease_checked(o) ||
	    rkv_wall_coarse_ms() + RKV_COARSE_SLACK_MS < o->p->lease_until)
		return 1;
	/* the server is paused or cut off from etcd (or replaced): answer
	 * nothing it returned; read the word again in a while, and etcd's
	 * map meanwhile (peers_heal) */
	c->st.lease_waits++;
	c->lease_lapsed_ms = rkv_coarse_ms();
	o->p->lease_asked_ms = 0;
	op_wait(o, LEASE_WAIT);
	return 0;
}

void round_post(struct opslot *o, unsigned step)
{
	unsigned n, par = (++o->round & 1) * 2;

	lease_ask(o);
	n = o->round_nwr;

	for (unsigned i = 0; i < n; i++) {
		o->wr[i].wr_id = wr_ctx_id(&o->ctx[par]);
		o->wr[i].flags &= RKV_WR_DIGEST; /* op_get.c's direct get */
	}
	o->wr[n - 1].wr_id = wr_ctx_id(&o->ctx[par + 1]);
	o->wr[n - 1].flags |= RKV_WR_SIGNALED;
	o->step = step;
	o->state = OP_IO;
	o->err = 0;
	o->op->rtts++;
	link_queue(&o->p->link, o->wr, n);
}

void cas_round(struct opslot *o, uint64_t expect, uint64_t swap,
	       unsigned step)
{
	o->expect = expect;
	o->newslot = swap;
	round_begin(o);
	cas(o, o->slot_pos, expect, swap);
	round_post(o, step);
}

/* ------------------------------------------------------- completions */

static void round_done(struct opslot *o)
{
	if (o->lease_rd) {
		uint64_t w = rkv_lease_until(word_at(o, OB_LEASE));

		o->lease_rd = 0;
		/* a promise stays true: keep the latest (0: the server
		 * stopped promising, which changes no earlier promise) */
		if (w > o->p->lease_until)
			o->p->lease_until = w;
	}
	switch (OP_MACHINE(o->step)) {
	case OP_MACHINE(LOC_BUCKETS):
		loc_round(o);
		return;
	case OP_MACHINE(INS_CAS):
		ins_round(o);
		return;
	default:
		o->kind->round(o);
	}
}

/*
 * A server of the op closed us for a newer map (a fence: a failover,
 * join or drain), or refused us for one: the op waits for that map
 * rather than fail (nothing of it was posted there, or it only read).
 * err: the op's error on peer p.  1 if it waits.
 */
static int op_refenced(struct opslot *o, const struct peer *p, int err)
{
	struct rkv_client *c = o->c;

	if (!c->moved)
		return 0; /* a static map: nothing newer will come */
	/* the fence is of a map newer than the connection's */
	if (p->link.fenced && c->newer_epoch <= p->hello_epoch)
		c->newer_epoch = p->hello_epoch + 1;
	if (c->newer_epoch > c->map->epoch) {
		op_wait(o, MIG_EPOCH);
		return 1;
	}
	/* refused before the map was read anew, or an rkey revoked by the
	 * fence before its close came in: again in a moment, where the
	 * map then says (the deadline bounds it) */
	if (err == -ESTALE || err == -EACCES || p->link.fenced) {
		op_wait(o, LEASE_WAIT);
		return 1;
	}
	return 0;
}

int op_fence_err(const struct rkv_client *c, int err)
{
	return err == -EACCES && c->moved ? -ECONNRESET : err;
}

/* A WR of round parity par (signaled: its last) completed. */
static void wr_done(struct opslot *o, unsigned par, int last,
		    const struct rkv_wc *wc)
{
	if (o->state != OP_IO || (o->round & 1) * 2 != par ||
	    (wc->ep && wc->ep != o->p->link.ep))
		return; /* a completion of an earlier round, or of an earlier
			 * op of this slot on another (failed) link */
	if (wc->status != RKV_WC_SUCCESS) {
		int e = wc_errno(wc->status);

		if (!o->err)
			o->err = e;
		link_wc_error(&o->p->link, e);
	}
	if (!last)
		return;
	if (!o->err) {
		round_done(o);
		return;
	}
	if (!o->kind->writes && op_refenced(o, o->p, o->err))
		return; /* a read: it changed nothing */
	op_finish(o, op_fence_err(o->c, o->err));
}

#define CTX_FNS(i, par, last)                                                  \
	static void ctx_done_##i(struct wr_ctx *w, const struct rkv_wc *wc)    \
	{                                                                      \
		wr_done(container_of(w, struct opslot, ctx[i]), par, last,     \
			wc);                                                   \
	}
CTX_FNS(0, 0, 0)
CTX_FNS(1, 0, 1)
CTX_FNS(2, 2, 0)
CTX_FNS(3, 2, 1)

static void ctx_unposted(struct wr_ctx *w, int err)
{
	/* only signaled WRs (ctx 1 and 3) get here; find the slot from
	 * either */
	struct opslot *o = w->done == ctx_done_1 ?
				   container_of(w, struct opslot, ctx[1]) :
				   container_of(w, struct opslot, ctx[3]);

	if (o->state != OP_IO)
		return;
	/* as a completion with that error (wr_done): a read waits for the
	 * map a fence implies; a cluster client's write reports a revoked
	 * rkey as the connection the fence closes (shm refuses it at post) */
	if (!o->kind->writes && op_refenced(o, o->p, err))
		return;
	op_finish(o, op_fence_err(o->c, err));
}

void op_slot_init(struct opslot *o, struct rkv_client *c, char *buf,
		  uint32_t lkey)
{
	static void (*const done[4])(struct wr_ctx *, const struct rkv_wc *) = {
		ctx_done_0, ctx_done_1, ctx_done_2, ctx_done_3 };

	memset(o, 0, sizeof(*o));
	o->c = c;
	o->buf = o->own_buf = buf;
	o->lkey = o->own_lkey = lkey;
	o->room = c->op_buf_size - OB_BLOCKS;
	for (unsigned i = 0; i < 4; i++)
		o->ctx[i] = (struct wr_ctx){ .done = done[i],
					     .unposted = ctx_unposted };
}

/* ------------------------------------------------------------ finish */

void op_finish(struct opslot *o, int status)
{
	struct rkv_client *c = o->c;
	struct rkv_op_stats *st = o->kind->stats(&c->st);

	if (o->state == OP_DONE || o->state == OP_FREE)
		return;
	if (o->repl.nlegs)
		repl_end(o);
	nb_drop(o);
	o->op->status = status;
	/* an op of a synchronous call is the library's own: nobody reads
	 * its latency, so it costs no clock read */
	o->op->latency_ns = o->timed ? rkv_now_ns() - o->t_start_ns : 0;
	st->ops++;
	st->rtts += o->op->rtts;
	st->retries += o->retries;
	if (status && status != -ENOENT)
		st->errors++;
	o->state = OP_DONE;
	o->done_next = NULL;
	if (c->done_tail)
		c->done_tail->done_next = o;
	else
		c->done_head = o;
	c->done_tail = o;
}

void op_retry(struct opslot *o)
{
	uint64_t now = rkv_coarse_ms();

	o->retries++;
	if (o->retries > MAX_RETRIES || now > o->deadline_ms) {
		op_finish(o, -ETIMEDOUT);
		return;
	}
	op_attempt_at(o, now);
}

int op_too_slow(const struct opslot *o)
{
	uint32_t grace = o->rd_big && !o->rd_small ? o->p->g.big_grace_ms :
						      o->p->g.grace_ms;

	return rkv_coarse_ms() - o->t_round_ms + RKV_COARSE_SLACK_MS >= grace;
}

int op_corrupt(struct opslot *o, uint64_t w)
{
	w &= ~RKV_SLOT_LOCK;
	if (w && o->bad_word == w)
		return 1;
	o->bad_word = w;
	return 0;
}

void op_attempt(struct opslot *o)
{
	op_attempt_at(o, rkv_coarse_ms());
}

void op_attempt_at(struct opslot *o, uint64_t now_ms)
{
	if (o->levels != o->p->g.levels)
		op_buckets(o); /* a level was added since */
	o->ncand = 0;
	o->target = -1;
	o->hdr_slot = 0;
	o->rmw.locked = 0;
	o->cached = 0;
	o->rmw.release_retry = 0;
	op_clock(o, now_ms);
	if (o->repl.nlegs) {
		int rc = repl_begin(o);

		if (rc) {
			/* a backup down: nothing of this attempt posted; one
			 * that fenced us (or revoked our rkeys: the fence
			 * before its close) has a newer map */
			if ((rc == -ESTALE || rc == -EACCES) &&
			    op_refenced(o, o->p, rc))
				return;
			op_finish(o, rc);
			return;
		}
	}
	o->kind->attempt(o);
}

void op_wait(struct opslot *o, unsigned step)
{
	o->step = step;
	op_clock(o, rkv_coarse_ms());
	o->state = OP_WAIT_TIMER;
}

void op_no_timer(struct opslot *o)
{
	op_retry(o);
}

/* ------------------------------------------------------------- start */

unsigned op_route(const struct rkv_client *c, const void *key,
		  size_t key_len)
{
	struct rkv_key_hash kh;

	rkv_key_hash(key, key_len, &kh);
	return c->owner[rkv_map_part(kh.route)];
}

/* The op's server: si.  0, or the error that server is down with. */
static int op_place(struct opslot *o, unsigned si)
{
	struct rkv_client *c = o->c;

	o->p = &c->peer[si];
	o->sp = &c->space[si];
	if (o->p->down || o->p->link.dead)
		return o->p->down ? o->p->down : o->p->link.dead;
	op_buckets(o);
	return 0;
}

void op_redirect(struct opslot *o, unsigned si)
{
	int rc;

	nb_drop(o); /* a block of the old server's chunks goes back there */
	o->nb = (struct newblk){ 0 };
	o->ins = (struct ins_state){ 0 };
	o->rmw = (struct rmw_state){ 0 };
	o->old_grant = 0;
	rc = op_place(o, si);
	if (rc && op_refenced(o, o->p, rc))
		return;
	if (!rc && o->p->g.read_only && o->kind->writes)
		rc = -EACCES;
	if (rc) {
		op_finish(o, rc);
		return;
	}
	op_retry(o);
}

static void op_start(struct opslot *o)
{
	struct rkv_op *op = o->op;
	struct rkv_client *c = o->c;
	int rc;

	rkv_key_hash(op->key, op->key_len, &o->kh);
	o->part = rkv_map_part(o->kh.route);
	o->p = &c->peer[c->owner[o->part]];
	o->sp = &c->space[c->owner[o->part]];
	/* started from ops_run: the pass's clock is fresh (and no later
	 * than now, so the deadline is never late) */
	o->t_op_ms = c->eng.pass_ms;
	o->deadline_ms = o->t_op_ms + c->opts.timeout_ms;
	o->retries = 0;
	o->nb = (struct newblk){ 0 };
	o->ins = (struct ins_state){ 0 };
	o->rmw = (struct rmw_state){ 0 };
	o->old_grant = 0;
	o->repl = (struct repl_state){ 0 };
	op->rtts = 0;
	op->out_len = 0;
	o->state = OP_IO;
	if ((c->opts.read_only || o->p->g.read_only) && o->kind->writes) {
		/* its rkeys allow remote read only (asked for, or the
		 * server's choice: a read-only secret): fail here rather
		 * than break the connection with a refused WR */
		op_finish(o, -EACCES);
		return;
	}
	if (c->r > 1 && o->kind->writes) {
		if (o->d) {
			/* device buffers are not replicated yet */
			op_finish(o, -EOPNOTSUPP);
			return;
		}
		/* every write is an rmw with its legs (op_repl.c) */
		o->kind = repl_kind(o->kind);
		o->repl.nlegs = c->nlegs;
		o->x_try = 0;
	}
	if (c->newer_epoch > c->map->epoch) {
		/* the cluster fenced our map: nothing is served by it, a
		 * paused old primary included; wait for the new one */
		op_wait(o, MIG_EPOCH);
		return;
	}
	rc = op_place(o, c->owner[o->part]);
	if (rc) {
		/* a dead server costs its own keys only (peers.c); one
		 * that fenced us has a newer map */
		if (!op_refenced(o, o->p, rc))
			op_finish(o, rc);
		return;
	}
	op_attempt_at(o, o->t_op_ms);
}

static void space_ready(struct opslot *o)
{
	o->state = OP_IO;
	if (o->kind->space)
		o->kind->space(o);
	else
		op_attempt(o);
}

void ops_space_ready(void *client, struct space *sp)
{
	struct rkv_client *c = client;

	for (unsigned i = 0, left = c->inflight; left && i < c->nslots; i++) {
		struct opslot *o = &c->slots[i];

		if (o->state == OP_FREE)
			continue;
		left--;
		if (o->state == OP_WAIT_SPACE && o->sp == sp)
			space_ready(o);
		else if (o->state == OP_IO && o->step == REPL_INSTALL)
			repl_space_ready(o, sp);
	}
}

/* An op waiting on space or a timer: is it due? */
static void op_timer(struct opslot *o, uint64_t now_ms)
{
	if (now_ms > o->deadline_ms) {
		o->state = OP_IO;
		if (o->ins.tent) {
			ins_abort(o, -ETIMEDOUT); /* withdraw it first */
			return;
		}
		op_finish(o, -ETIMEDOUT);
		return;
	}
	if (o->state == OP_WAIT_SPACE) {
		if (!space_asking(o->sp))
			space_ready(o);
		return;
	}
	/* OP_WAIT_TIMER: look again after ~lease/8; a frozen partition
	 * (a migration moving it) every millisecond */
	uint32_t step = o->p->g.lease_ms / 8 ? o->p->g.lease_ms / 8 : 1;

	if (o->step == MIG_MOVED)
		return; /* mig_route's, at the top of a progress call */
	if (o->step == MIG_EPOCH) {
		if (o->c->newer_epoch > o->c->map->epoch)
			return; /* peers_heal reads the map meanwhile */
		o->state = OP_IO;
		op_redirect(o, o->c->owner[o->part]);
		return;
	}
	if (o->step == LEASE_WAIT) {
		/* again, where the map (perhaps a newer one) says */
		if (now_ms - o->t_round_ms < LEASE_WAIT_MS)
			return;
		o->state = OP_IO;
		op_redirect(o, o->c->owner[o->part]);
		return;
	}
	if (o->step == INS_WAIT_GROW) {
		/* the GROW's reply, for up to a lease, then look again */
		if (o->grow_p->grow_busy &&
		    o->grow_p->g.levels == o->grow_levels &&
		    now_ms - o->t_round_ms < o->p->g.lease_ms)
			return;
		o->state = OP_IO;
		op_retry(o);
		return;
	}
	if (OP_MACHINE(o->step) == OP_MACHINE(MIG_WAIT))
		step = 1;
	/* a lock held by a live writer is released within a few round
	 * trips: look every millisecond for the first lease/4, then every
	 * lease/8 (at r > 1 every write takes the lock, so a hot key's
	 * writers queue on it; lease/8 from the start made each wait 12 ms
	 * with the default lease) */
	if (o->step == RMW_WAIT_LOCK &&
	    now_ms - o->rmw.lock_seen_ms < o->p->g.lease_ms / 4)
		step = 1;
	if (now_ms - o->t_round_ms < step)
		return;
	op_clock(o, now_ms);
	o->state = OP_IO;
	if (OP_MACHINE(o->step) == OP_MACHINE(INS_CAS))
		ins_timer(o);
	else if (OP_MACHINE(o->step) == OP_MACHINE(MIG_WAIT))
		op_attempt(o); /* not a retry: the deadline bounds it */
	else
		o->kind->timer(o);
}

void ops_run(void *client, uint64_t *now_ms)
{
	struct rkv_client *c = client;

	/* c->inflight slots are taken: stop after the last of them (one
	 * synchronous call looks at one slot, not max_inflight) */
	for (unsigned i = 0, left = c->inflight; left && i < c->nslots; i++) {
		struct opslot *o = &c->slots[i];

		if (o->state == OP_FREE)
			continue;
		left--;
		if (o->state == OP_START) {
			op_start(o);
		} else if (o->state == OP_IO && o->step == REPL_INSTALL) {
			repl_space_ready(o, NULL);
		} else if (o->state == OP_WAIT_TIMER ||
			   o->state == OP_WAIT_SPACE) {
			if (!*now_ms)
				*now_ms = rkv_now_ms();
			op_timer(o, *now_ms);
		}
	}
}
