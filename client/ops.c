/* SPDX-License-Identifier: MIT */
/*
 * ops.c - the operation state machines: get, put, delete, read-modify-write.
 *
 * Each operation is a sequence of rounds; a round is a list of WRs posted in
 * one doorbell whose last WR is signaled, i.e. one round trip.  The step
 * (enum op_step) says what the round in flight was; op_round_done() looks
 * at what came back and builds the next round.  Invariants:
 *   - a block is immutable once a slot names it; a reader accepts it only
 *     if checksum and key match, and only if its attempt took less than
 *     the grace period (after which the block could have been reused);
 *   - a slot is changed only by CAS, and every change but taking a lock
 *     bumps its version, so an expected value that went stale never
 *     matches again;
 *   - a lock holder writes only a private block until its releasing CAS;
 *     if its lock was stolen (lease expired) that CAS fails and it retries;
 *   - at most one committed copy of a key exists: an insert CASes an
 *     empty slot to a tentative word (readers skip it), re-reads both
 *     buckets in the same doorbell and commits only when it sees no other
 *     copy; it withdraws when it sees a committed copy or a tentative one
 *     earlier in scan order, and waits for tentative copies later in scan
 *     order (docs/DESIGN.md §6 has the argument);
 *   - the server frees a returned block only while its grant still owns
 *     it, so every return names the grant from the block's header.
 */
#include "client_internal.h"

#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "gpu/gpu.h"
#include "rtime.h"

#define MAX_RETRIES 100000

static void attempt(struct opslot *o);
static void rmw_commit(struct opslot *o);

static uint64_t bucket_word(const struct opslot *o, unsigned pos)
{
	uint64_t w;

	memcpy(&w, o->buf + OB_BUCKETS + pos * 8u, 8);
	return w;
}

static uint64_t word_at(const struct opslot *o, unsigned off)
{
	uint64_t w;

	memcpy(&w, o->buf + off, 8);
	return w;
}

static uint64_t pos_addr(const struct opslot *o, unsigned pos)
{
	return slot_addr(o->srv, o->b[pos / RKV_SLOTS_PER_BUCKET],
			 pos % RKV_SLOTS_PER_BUCKET);
}

static char *new_blk_buf(const struct opslot *o)
{
	struct rkv_client *c = o->c;

	if (o->d)
		return o->d->nb; /* device staging */
	return c->new_blk + (size_t)(o - c->slots) * c->new_blk_size;
}

/* Checksum and key of a block read (device ops: checked on the GPU). */
static int blk_decode(struct opslot *o, const char *blk, size_t size,
		      const void **v, uint32_t *vl,
		      const struct rkv_block_hdr **h)
{
	if (o->d)
		return gpu_block_decode(o, (char *)blk, size, v, vl, h);
	return rkv_block_decode(blk, size, o->op->key, o->op->key_len, v, vl,
				h);
}

/* ------------------------------------------------------------- rounds */

/* WRs of the round being built live in o->wr[0 .. o->round_nwr). */
static void rd(struct opslot *o, unsigned local_off, uint64_t raddr,
	       uint32_t rkey, uint32_t len)
{
	o->wr[o->round_nwr++] = (struct rkv_wr){
		.opcode = RKV_WR_READ, .local = o->buf + local_off,
		.length = len, .lkey = o->lkey, .remote_addr = raddr,
		.rkey = rkey };
}

/* READ into memory outside the op buffer (an XGET's tail). */
static void rd_to(struct opslot *o, void *local, uint32_t lkey, uint64_t raddr,
		  uint32_t len)
{
	o->wr[o->round_nwr++] = (struct rkv_wr){
		.opcode = RKV_WR_READ, .local = local, .length = len,
		.lkey = lkey, .remote_addr = raddr, .rkey = o->srv->data_rkey };
}

/* READ a block to op buffer offset local_off (device ops: the same offset
 * of the device staging). */
static void rd_blk(struct opslot *o, unsigned local_off, uint64_t raddr,
		   uint32_t len)
{
	if (o->d)
		rd_to(o, o->d->rd + (local_off - OB_BLOCKS), o->d->mr->lkey,
		      raddr, len);
	else
		rd(o, local_off, raddr, o->srv->data_rkey, len);
}

static void cas(struct opslot *o, uint64_t raddr, uint64_t expect,
		uint64_t swap)
{
	o->wr[o->round_nwr++] = (struct rkv_wr){
		.opcode = RKV_WR_CAS, .local = o->buf + OB_WORD, .length = 8,
		.lkey = o->lkey, .remote_addr = raddr,
		.rkey = o->srv->index_rkey, .compare_add = expect,
		.swap = swap };
}

static void wr_block(struct opslot *o)
{
	o->wr[o->round_nwr++] = (struct rkv_wr){
		.opcode = RKV_WR_WRITE, .local = new_blk_buf(o),
		.length = o->blk_size, .lkey = o->d ? o->d->mr->lkey : o->lkey,
		.remote_addr = o->srv->data_addr + o->blk_off,
		.rkey = o->srv->data_rkey };
	o->blk_written = 1;
}

static void round_begin(struct opslot *o)
{
	o->round_nwr = 0;
}

static void post_round(struct opslot *o, enum op_step step)
{
	uint64_t tag = ((uint64_t)(++o->round & 31)) << 1;
	unsigned n = o->round_nwr;

	for (unsigned i = 0; i < n; i++) {
		o->wr[i].wr_id = (uint64_t)(uintptr_t)o | tag;
		o->wr[i].flags = 0;
	}
	o->wr[n - 1].wr_id |= 1;
	o->wr[n - 1].flags = RKV_WR_SIGNALED;
	o->step = step;
	o->state = OP_IO;
	o->op->rtts++;
	srv_queue_wrs(o->srv, o->wr, n);
}

/* READ both buckets into OB_BUCKETS (appended to the round being built). */
static void rd_buckets(struct opslot *o)
{
	rd(o, OB_BUCKETS, slot_addr(o->srv, o->b[0], 0), o->srv->index_rkey,
	   RKV_BUCKET_SIZE);
	rd(o, OB_BUCKETS + RKV_BUCKET_SIZE, slot_addr(o->srv, o->b[1], 0),
	   o->srv->index_rkey, RKV_BUCKET_SIZE);
}

/* READ both buckets (a put WRITEs its block first; hdr_of: also READ the
 * header of the block that slot word names, behind the buckets, for its
 * grant id; 0: none). */
static void read_buckets(struct opslot *o, int with_block, uint64_t hdr_of)
{
	round_begin(o);
	if (with_block)
		wr_block(o);
	rd_buckets(o);
	o->hdr_slot = hdr_of;
	if (hdr_of)
		rd(o, OB_HDR, o->srv->data_addr + rkv_slot_offset(hdr_of),
		   o->srv->data_rkey, RKV_BLOCK_HDR_SIZE);
	o->t_round_ms = rkv_coarse_ms();
	post_round(o, ST_BUCKETS);
}

static void cas_round(struct opslot *o, uint64_t expect, uint64_t swap,
		      enum op_step step)
{
	o->expect = expect;
	o->newslot = swap;
	round_begin(o);
	cas(o, pos_addr(o, o->slot_pos), expect, swap);
	post_round(o, step);
}

/* -------------------------------------------------------- completion */

static struct rkv_op_stats *stats_of(struct opslot *o)
{
	struct rkv_client_stats *st = &o->c->st;

	switch (o->type) {
	case RKV_OP_GET: return &st->get;
	case RKV_OP_PUT: return &st->put;
	case RKV_OP_DELETE: return &st->del;
	default: return &st->rmw;
	}
}

/* Our new block will never be published: give its space back. */
static void drop_new_block(struct opslot *o)
{
	if (!o->blk_size)
		return;
	if (o->tent) {
		/* our tentative slot may still name it (the connection broke
		 * before the withdrawal): the server's reclaim pass clears
		 * that slot and frees the block */
		o->tent = 0;
		o->blk_size = 0;
		o->blk_written = 0;
		return;
	}
	srv_block_return(o->srv, o->blk_off, o->blk_size, o->blk_grant);
	srv_block_settle(o->srv, o->blk_chunk);
	o->blk_size = 0;
	o->blk_written = 0;
}

void op_finish(struct opslot *o, int status)
{
	struct rkv_client *c = o->c;
	struct rkv_op_stats *st = stats_of(o);

	if (o->state == OP_DONE || o->state == OP_FREE)
		return;
	drop_new_block(o);
	o->op->status = status;
	o->op->latency_ns = rkv_now_ns() - o->t_start_ns;
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

/* Restart the operation after a lost race or a stale read. */
static void retry(struct opslot *o)
{
	o->retries++;
	if (o->retries > MAX_RETRIES || rkv_coarse_ms() > o->deadline_ms) {
		op_finish(o, -ETIMEDOUT);
		return;
	}
	attempt(o);
}

/* The attempt has run longer than the grace period: what it read may
 * have been freed and reused since. */
static int too_slow(struct opslot *o)
{
	return rkv_coarse_ms() - o->t_round_ms + RKV_COARSE_SLACK_MS >=
	       o->srv->grace_ms;
}

/* --------------------------------------------------------- candidates */

/* Slots whose fingerprint matches, in scan order, skipping position skip
 * (or -1); tentative slots (inserts in progress, invisible) only when
 * with_tent. */
static void collect(struct opslot *o, int skip, int with_tent)
{
	o->ncand = 0;
	for (unsigned pos = 0; pos < o->npos; pos++) {
		uint64_t w = bucket_word(o, pos);

		if ((int)pos == skip || rkv_slot_empty(w) ||
		    rkv_slot_fp(w) != o->kh.fp ||
		    (!with_tent && rkv_slot_tentative(w)))
			continue;
		o->cand[o->ncand++] = (struct cand){ .pos = pos, .slot = w };
	}
}

/*
 * Post a round reading candidate blocks from index from on, as many as fit
 * the op buffer.  Returns 1 when posted, 0 when nothing is left to read,
 * -EMSGSIZE when a block is larger than this client's buffers.
 */
static int read_cands(struct opslot *o, unsigned from, enum op_step step)
{
	uint32_t room = (uint32_t)(o->c->op_buf_size - OB_BLOCKS), off = 0;
	unsigned i;

	round_begin(o);
	for (i = from; i < o->ncand; i++) {
		struct cand *cd = &o->cand[i];
		uint32_t sz = rkv_slot_size(cd->slot);

		cd->match = 0;
		if (rkv_slot_offset(cd->slot) + sz > o->srv->data_len) {
			cd->buf_off = UINT32_MAX; /* names no valid block */
			continue;
		}
		if (sz > room - off || o->round_nwr == ROUND_MAX_WR)
			break;
		cd->buf_off = OB_BLOCKS + off;
		rd_blk(o, OB_BLOCKS + off,
		       o->srv->data_addr + rkv_slot_offset(cd->slot), sz);
		off += sz;
	}
	o->vfrom = from;
	o->vend = i;
	if (o->round_nwr == 0)
		return i < o->ncand ? -EMSGSIZE : 0;
	post_round(o, step);
	return 1;
}

/* Check candidates [vfrom, vend).  Returns the first match's index, -1 for
 * none, -2 when a block is torn or garbage (the attempt must restart). */
static int check_cands(struct opslot *o)
{
	int first = -1;

	for (unsigned i = o->vfrom; i < o->vend; i++) {
		struct cand *cd = &o->cand[i];
		int rc;

		if (cd->buf_off == UINT32_MAX)
			continue;
		rc = blk_decode(o, o->buf + cd->buf_off,
				rkv_slot_size(cd->slot), NULL, NULL, NULL);
		if (rc == -EBADMSG || rc == -EIO)
			return -2;
		if (rc == 0) {
			cd->match = 1;
			if (first < 0)
				first = (int)i;
		}
	}
	return first;
}

/* ------------------------------------------------------------- blocks */

/* Carve space for our new block and encode it.  Returns 0, -EAGAIN (the
 * op is parked until a chunk arrives), or -errno. */
static int make_block(struct opslot *o, const void *val, size_t val_len,
		      uint64_t version)
{
	uint32_t size = rkv_block_size(o->op->key_len, val_len);
	int rc;

	if (!size)
		return -EMSGSIZE;
	if (o->blk_size && o->blk_size != size)
		drop_new_block(o);
	if (!o->blk_size) {
		rc = srv_block_alloc(o->srv, size, &o->blk_off, &o->blk_chunk,
				     &o->blk_grant);
		if (rc == -EAGAIN) {
			o->state = OP_WAIT_SPACE;
			return rc;
		}
		if (rc)
			return rc;
		o->blk_size = size;
	}
	if (o->d) {
		if (!gpu_block_encode(o, new_blk_buf(o), val, val_len, version,
				      &rc))
			return rc;
	} else {
		rkv_block_encode(new_blk_buf(o), o->op->key, o->op->key_len,
				 val, val_len, o->srv->client_id, o->blk_grant,
				 version);
	}
	o->blk_version = version;
	o->blk_written = 0;
	return 0;
}

static uint64_t new_slot_word(const struct opslot *o, uint64_t prev)
{
	return rkv_slot_make(o->blk_off / RKV_BLOCK_ALIGN,
			     o->blk_size / RKV_BLOCK_ALIGN, o->kh.fp,
			     rkv_slot_version(prev) + 1);
}

/* What the location cache keeps about a block in memory (verified, or
 * built by us): header version, value length, the value's first bytes. */
static const struct blk_info *info_of(struct blk_info *bi, const char *blk,
				      size_t avail)
{
	const struct rkv_block_hdr *h = (const void *)blk;
	size_t voff = RKV_BLOCK_HDR_SIZE + h->key_len;
	size_t n = h->val_len < BLK_HEAD ? h->val_len : BLK_HEAD;

	memset(bi, 0, sizeof(*bi));
	bi->version = h->version;
	bi->grant = h->grant;
	bi->val_len = h->val_len;
	if (voff + n > avail)
		return NULL;
	memcpy(bi->head, blk + voff, n);
	return bi;
}

/* The block named by a slot we replaced is unlinked: return it, naming
 * its grant (o->old_grant, from its header).  Unknown (0): the server
 * could not accept it, so it waits for a reclaim pass instead. */
static void unlink_block(struct opslot *o, uint64_t old)
{
	if (!rkv_slot_empty(old) && o->old_grant)
		srv_block_return(o->srv, rkv_slot_offset(old),
				 rkv_slot_size(old), o->old_grant);
	o->old_grant = 0;
}

/* Grant id in the header of a block read to op buffer offset off. */
static uint32_t grant_at(const struct opslot *o, unsigned off)
{
	const struct rkv_block_hdr *h = (const void *)(o->buf + off);

	return h->grant;
}

/* What the cache keeps about the block we published (o->pub_size bytes,
 * still in our new-block buffer). */
static const struct blk_info *own_info(const struct opslot *o,
				       struct blk_info *bi)
{
	if (o->d)
		return NULL; /* the value's head is on the GPU */
	return info_of(bi, new_blk_buf(o), o->pub_size);
}

/* Our block is now named by a slot. */
static void published(struct opslot *o)
{
	srv_block_settle(o->srv, o->blk_chunk);
	o->pub_size = o->blk_size;
	o->blk_size = 0;
	o->blk_written = 0;
}

/*
 * Insert, step 1: CAS the first empty slot in scan order to our block's
 * tentative word (chaining the block WRITE before it when not written
 * yet) and READ both buckets behind it: RC order makes that READ see
 * every copy of the key that was in place before our CAS.
 */
static void insert(struct opslot *o)
{
	int pos = -1, tent = 0;

	for (unsigned p = 0; p < o->npos; p++) {
		uint64_t w = bucket_word(o, p);

		if (rkv_slot_empty(w)) {
			pos = (int)p;
			break;
		}
		tent |= rkv_slot_tentative(w);
	}
	if (pos < 0) {
		/* full; an insert in progress may withdraw and free its slot:
		 * look again for up to a lease before saying so */
		uint64_t now = rkv_coarse_ms();

		if (!tent || (o->full_since_ms &&
			      now - o->full_since_ms >= o->srv->lease_ms)) {
			op_finish(o, -ENOSPC);
			return;
		}
		if (!o->full_since_ms)
			o->full_since_ms = now;
		o->ins_waiting = 3;
		o->t_round_ms = now;
		o->state = OP_WAIT_TIMER;
		return;
	}
	o->slot_pos = (unsigned)pos;
	o->expect = 0;
	o->newslot = new_slot_word(o, 0) | RKV_SLOT_TENT;
	o->tent_seen = 0;
	o->t_round_ms = rkv_coarse_ms();
	round_begin(o);
	if (!o->blk_written)
		wr_block(o);
	cas(o, pos_addr(o, o->slot_pos), 0, o->newslot);
	rd_buckets(o);
	post_round(o, ST_INS_CAS);
}

/* Step 2, and after every wait: look at the other copies of the key. */
#define INS_COMMITTED 1u /* a committed copy: ours must go */
#define INS_LOWER 2u     /* a tentative copy before ours in scan order */
#define INS_HIGHER 4u    /* a tentative copy after ours: wait for it */

static void ins_withdraw(struct opslot *o)
{
	cas_round(o, o->newslot, 0, ST_INS_WITHDRAW);
}

static void ins_decide(struct opslot *o)
{
	int rc;

	o->ins_seen = 0;
	o->t_round_ms = rkv_coarse_ms();
	collect(o, (int)o->slot_pos, 1);
	rc = o->ncand ? read_cands(o, 0, ST_INS_VERIFY) : 0;
	if (rc < 0) {
		o->tent_abort = 1;
		o->tent_err = rc;
		ins_withdraw(o);
		return;
	}
	if (rc == 0) /* nobody else: commit */
		cas_round(o, o->newslot, o->newslot & ~RKV_SLOT_TENT,
			  ST_INS_COMMIT);
}

/* Wait for the tentative copy at tent_seen_pos (lease/8 between looks);
 * one unchanged for a whole lease belongs to a dead or stopped inserter
 * and is cleared (its owner's commit then fails, and it retries). */
/* Withdrawn for an earlier tentative copy (tent_seen at tent_seen_pos):
 * look at its slot again after lease/8; when it changed, start again;
 * when it stayed for a whole lease, clear it (its inserter is dead or
 * stopped; its commit will fail). */
static void ins_wait_lower(struct opslot *o)
{
	o->c->st.lock_waits++;
	o->ins_waiting = 2;
	o->t_round_ms = rkv_coarse_ms();
	o->state = OP_WAIT_TIMER;
}

static void ins_wait(struct opslot *o, unsigned pos, uint64_t w)
{
	uint64_t now = rkv_coarse_ms();

	if (o->tent_seen != w || o->tent_seen_pos != pos) {
		o->tent_seen = w;
		o->tent_seen_pos = pos;
		o->tent_seen_ms = now;
	} else if (now - o->tent_seen_ms >= o->srv->lease_ms) {
		o->c->st.lock_steals++;
		o->tent_seen = 0;
		o->t_round_ms = now;
		round_begin(o);
		cas(o, pos_addr(o, pos), w, 0);
		rd_buckets(o);
		post_round(o, ST_INS_STEAL);
		return;
	}
	o->c->st.lock_waits++;
	o->ins_waiting = 1;
	o->t_round_ms = now;
	o->state = OP_WAIT_TIMER;
}

/* The verify round of step 2 came back. */
static void ins_verified(struct opslot *o)
{
	int rc;

	/* too slow (blocks may have been reused) or torn: look again */
	if (too_slow(o) || check_cands(o) == -2) {
		round_begin(o);
		rd_buckets(o);
		o->t_round_ms = rkv_coarse_ms();
		post_round(o, ST_INS_REREAD);
		return;
	}
	for (unsigned i = o->vfrom; i < o->vend; i++) {
		const struct cand *cd = &o->cand[i];

		if (!cd->match)
			continue;
		if (!rkv_slot_tentative(cd->slot)) {
			o->ins_seen |= INS_COMMITTED;
		} else if (cd->pos < o->slot_pos) {
			if (!(o->ins_seen & INS_LOWER)) {
				o->tent_seen = cd->slot;
				o->tent_seen_pos = cd->pos;
				o->tent_seen_ms = rkv_coarse_ms();
			}
			o->ins_seen |= INS_LOWER;
		} else if (!(o->ins_seen & INS_HIGHER)) {
			o->ins_seen |= INS_HIGHER;
			o->target = (int)i;
		}
	}
	if (o->vend < o->ncand && !(o->ins_seen & (INS_COMMITTED | INS_LOWER))) {
		rc = read_cands(o, o->vend, ST_INS_VERIFY);
		if (rc > 0)
			return;
		if (rc < 0) {
			o->tent_abort = 1;
			o->tent_err = rc;
			ins_withdraw(o);
			return;
		}
	}
	if (o->ins_seen & (INS_COMMITTED | INS_LOWER)) {
		/* a committed copy (update it instead), or an earlier insert
		 * of the key: let it finish first, holding nothing (it may
		 * be waiting for us), then start again */
		o->ins_lower = !(o->ins_seen & INS_COMMITTED);
		ins_withdraw(o);
		return;
	}
	if (o->ins_seen & INS_HIGHER) {
		const struct cand *cd = &o->cand[o->target];

		ins_wait(o, cd->pos, cd->slot);
		return;
	}
	cas_round(o, o->newslot, o->newslot & ~RKV_SLOT_TENT, ST_INS_COMMIT);
}

/* Run the rmw callback; its value lands where our new block's value goes. */
static void call_fn(struct opslot *o, const void *old, uint32_t old_len)
{
	int act;

	o->rmw_len = 0;
	act = o->op->fn(old, old_len,
			new_blk_buf(o) + RKV_BLOCK_HDR_SIZE + o->op->key_len,
			o->c->opts.max_value, &o->rmw_len, o->op->fn_arg);
	if (act > RKV_RMW_DELETE)
		act = -EINVAL;
	o->rmw_action = act;
}

/* The key is absent (the buckets, and candidates if any, were read). */
static void absent(struct opslot *o)
{
	switch (o->type) {
	case RKV_OP_PUT:
		insert(o);
		return;
	case RKV_OP_RMW:
		o->locked = 0;
		o->rmw_version = 1;
		call_fn(o, NULL, 0);
		rmw_commit(o);
		return;
	default:
		op_finish(o, -ENOENT);
	}
}

/* -------------------------------------------------------------- steps */

static void deliver_get(struct opslot *o, const char *blk, uint32_t size,
			unsigned pos, uint64_t slot)
{
	const void *v;
	uint32_t vl;
	struct blk_info bi;

	int rc = blk_decode(o, blk, size, &v, &vl, NULL);

	if (rc == -EIO) { /* device op: CUDA failed (logged) */
		op_finish(o, rc);
		return;
	}
	if (rc) {
		cache_drop(o->c, o);
		retry(o);
		return;
	}
	if (o->x)
		o->x->split = 0;
	cache_store(o->c, o, pos, slot & ~RKV_SLOT_LOCK, size,
		    o->d ? NULL : info_of(&bi, blk, size));
	o->op->out_len = vl;
	if (o->d) {
		size_t hd = o->d->head < vl ? o->d->head : vl;

		if (vl - hd > o->op->buf_cap) {
			op_finish(o, -ENOBUFS);
			return;
		}
		/* device to device: the value never reaches the host (a PS
		 * shard's 16-byte header does) */
		if (rkv_cuda_copy(o->d->gpu, o->d->head_buf, v, hd) ||
		    rkv_cuda_copy(o->d->gpu, o->op->buf, (const char *)v + hd,
				  vl - hd)) {
			clog_(o->c, 3, "get into GPU %d memory: copy failed: %s",
			      o->d->gpu, rkv_cuda_strerror());
			op_finish(o, -EIO);
			return;
		}
		op_finish(o, 0);
		return;
	}
	if (vl > o->op->buf_cap) {
		op_finish(o, -ENOBUFS);
		return;
	}
	if (vl)
		memcpy(o->op->buf, v, vl);
	op_finish(o, 0);
}

/* CAS the slot at o->slot_pos from expect to lockval; with read_block,
 * READ expect's block in the same doorbell (valid if the CAS succeeds). */
static void lock_round(struct opslot *o, uint64_t expect, uint64_t lockval,
		       int read_block)
{
	uint32_t sz = rkv_slot_size(expect);

	if (read_block && sz > o->c->op_buf_size - OB_BLOCKS) {
		op_finish(o, -EMSGSIZE);
		return;
	}
	o->expect = expect;
	o->lockval = lockval;
	o->lock_read = read_block;
	round_begin(o);
	cas(o, pos_addr(o, o->slot_pos), expect, lockval);
	if (read_block)
		rd_blk(o, OB_BLOCKS, o->srv->data_addr + rkv_slot_offset(expect),
		       sz);
	post_round(o, ST_LOCK);
}

static void wait_lock(struct opslot *o, uint64_t seen)
{
	o->c->st.lock_waits++;
	o->lock_seen = seen;
	o->lock_seen_ms = rkv_coarse_ms();
	o->t_round_ms = o->lock_seen_ms;
	o->state = OP_WAIT_TIMER;
}

/*
 * XGET, cached location: READ the slot word, the block's header, key and
 * value head into the op buffer, and the rest of the value straight into
 * the caller's tail buffer, in one doorbell.  Returns 1 when posted, 0 when
 * the cached block cannot have the expected shape (plain get instead).
 */
static int xget_round(struct opslot *o, struct cache_ent *ce)
{
	const struct rkv_xop *x = o->x;
	size_t pre = RKV_BLOCK_HDR_SIZE + o->op->key_len + x->head;

	if (pre > o->c->op_buf_size - OB_BLOCKS ||
	    pre + x->tail_len > ce->blk_size || x->head > o->op->buf_cap) {
		o->xget = 0;
		return 0;
	}
	o->c->st.cache_hits++;
	o->cached = 1;
	o->xround = 1;
	o->expect = ce->slot;
	round_begin(o);
	rd(o, OB_WORD, ce->slot_addr, o->srv->index_rkey, 8);
	rd(o, OB_BLOCKS, o->srv->data_addr + rkv_slot_offset(ce->slot),
	   o->srv->data_rkey, (uint32_t)pre);
	if (x->tail_len)
		rd_to(o, x->tail, x->tail_lkey,
		      o->srv->data_addr + rkv_slot_offset(ce->slot) + pre,
		      (uint32_t)x->tail_len);
	post_round(o, ST_GET_CACHED);
	return 1;
}

/*
 * The split read came back and the slot still names the block: check the
 * header's shape, then key and checksum over the two pieces.  Only then is
 * the op a success; a torn block is retried (the retry overwrites the
 * tail, and the caller sees success only with a verified value).
 */
static void deliver_xget(struct opslot *o, unsigned pos, uint64_t slot)
{
	struct rkv_xop *x = o->x;
	const char *blk = o->buf + OB_BLOCKS;
	const struct rkv_block_hdr *h = (const void *)blk;
	size_t kl = o->op->key_len, pre = RKV_BLOCK_HDR_SIZE + kl + x->head;
	struct blk_info bi;

	if (h->key_len != kl || h->val_len != x->head + x->tail_len) {
		/* another shape, or torn: let the plain get decide */
		o->xget = 0;
		attempt(o);
		return;
	}
	if (rkv_block_checksum_split(blk, pre, x->tail, x->tail_len) !=
		    h->checksum ||
	    rkv_block_key_match(blk, o->op->key, kl) != 0) {
		cache_drop(o->c, o);
		retry(o);
		return;
	}
	cache_store(o->c, o, pos, slot & ~RKV_SLOT_LOCK, rkv_slot_size(slot),
		    info_of(&bi, blk, pre));
	if (x->head)
		memcpy(o->op->buf, blk + RKV_BLOCK_HDR_SIZE + kl, x->head);
	x->split = 1;
	o->op->out_len = h->val_len;
	op_finish(o, 0);
}

/*
 * XPUT, cached location whose block is known: build the new value from
 * the old one's head, then WRITE the block and CAS the slot from the
 * cached word in one doorbell.  Returns 1 when the op went on (posted,
 * parked for space, or finished), 0 to run it as an RMW instead.
 */
static int xput_round(struct opslot *o, struct cache_ent *ce)
{
	char *val = new_blk_buf(o) + RKV_BLOCK_HDR_SIZE + o->op->key_len;
	size_t len = 0;
	int act, rc;

	act = o->x->put_fn(&ce->info, val, o->c->opts.max_value, &len,
			   o->x->put_arg);
	if (act != RKV_RMW_WRITE || len > o->c->opts.max_value) {
		o->xput = 0;
		return 0;
	}
	rc = make_block(o, val, len, ce->info.version + 1);
	if (rc == -EAGAIN)
		return 1; /* parked: attempt() again when space comes */
	if (rc) {
		op_finish(o, rc);
		return 1;
	}
	o->c->st.cache_hits++;
	o->cached = 1;
	o->slot_pos = ce->pos;
	o->expect = ce->slot;
	o->newslot = new_slot_word(o, ce->slot);
	o->old_grant = ce->info.grant;
	round_begin(o);
	wr_block(o);
	cas(o, pos_addr(o, o->slot_pos), o->expect, o->newslot);
	post_round(o, ST_XPUT);
	return 1;
}

static void after_xput(struct opslot *o)
{
	uint64_t w = word_at(o, OB_WORD);
	struct blk_info bi;

	if (w == o->expect) {
		unlink_block(o, o->expect);
		published(o);
		cache_store(o->c, o, o->slot_pos, o->newslot, o->pub_size,
			    own_info(o, &bi));
		op_finish(o, 0);
		return;
	}
	/* lost (locked, changed or gone): our block was never published;
	 * go on as an RMW from the word seen */
	drop_new_block(o);
	o->xput = 0;
	if (rkv_slot_empty(w))
		cache_drop(o->c, o);
	else
		cache_store(o->c, o, o->slot_pos, w & ~RKV_SLOT_LOCK,
			    rkv_slot_size(w), NULL);
	retry(o);
}

static void attempt(struct opslot *o)
{
	struct cache_ent *ce;

	o->ncand = 0;
	o->target = -1;
	o->hdr_slot = 0;
	o->locked = 0;
	o->cached = 0;
	o->release_retry = 0;
	o->rmw_parked = 0;
	o->t_round_ms = rkv_coarse_ms();
	ce = o->type == RKV_OP_GET ? cache_find_any(o->c, o) :
					 cache_find(o->c, o);
	if (ce)
		o->slot_pos = ce->pos;
	switch (o->type) {
	case RKV_OP_GET:
		if (ce && o->xget && xget_round(o, ce))
			return;
		if (ce && ce->blk_size <= o->c->op_buf_size - OB_BLOCKS) {
			o->c->st.cache_hits++;
			o->cached = 1;
			o->expect = ce->slot;
			round_begin(o);
			rd(o, OB_WORD, ce->slot_addr, o->srv->index_rkey, 8);
			rd_blk(o, OB_BLOCKS,
			       o->srv->data_addr + rkv_slot_offset(ce->slot),
			       ce->blk_size);
			post_round(o, ST_GET_CACHED);
			return;
		}
		break;
	case RKV_OP_PUT:
		if (!o->blk_size) {
			int rc = make_block(o, o->op->val, o->op->val_len, 0);

			if (rc == -EAGAIN)
				return;
			if (rc) {
				op_finish(o, rc);
				return;
			}
		}
		if (ce)
			o->c->st.cache_hits++;
		else
			o->c->st.cache_misses++;
		/* a cached location whose block's grant is unknown: READ
		 * its header too, so the block can be returned if we
		 * replace it */
		read_buckets(o, !o->blk_written,
			     ce && !ce->info_known ? ce->slot : 0);
		return;
	case RKV_OP_DELETE:
		if (ce) {
			o->c->st.cache_hits++;
			o->cached = 1;
			o->slot_pos = ce->pos;
			o->expect = ce->slot;
			o->newslot = 0;
			o->old_grant = ce->info_known ? ce->info.grant : 0;
			o->hdr_slot = ce->info_known ? 0 : ce->slot;
			round_begin(o);
			/* the header READ executes before the CAS; if the CAS
			 * wins, the slot named that block all along */
			if (!ce->info_known)
				rd(o, OB_HDR, o->srv->data_addr +
					rkv_slot_offset(ce->slot),
				   o->srv->data_rkey, RKV_BLOCK_HDR_SIZE);
			cas(o, pos_addr(o, o->slot_pos), ce->slot, 0);
			post_round(o, ST_DEL_CACHED);
			return;
		}
		break;
	case RKV_OP_RMW:
		if (ce && o->xput && ce->info_known && xput_round(o, ce))
			return;
		if (ce) {
			o->c->st.cache_hits++;
			o->cached = 1;
			lock_round(o, ce->slot, ce->slot | RKV_SLOT_LOCK, 1);
			return;
		}
		break;
	}
	o->c->st.cache_misses++;
	read_buckets(o, 0, 0);
}

void op_start(struct opslot *o)
{
	struct rkv_op *op = o->op;
	struct rkv_client *c = o->c;

	o->type = op->type;
	o->x = NULL;
	o->d = NULL;
	o->xget = o->xput = o->xround = 0;
	if (op->type == RKV_OP_DGET || op->type == RKV_OP_DPUT ||
	    op->type == RKV_OP_DRMW) {
		o->d = c->gpu;
		o->type = op->type == RKV_OP_DGET   ? RKV_OP_GET :
			  op->type == RKV_OP_DPUT   ? RKV_OP_PUT :
						      RKV_OP_RMW;
	}
	if (op->type == RKV_OP_XGET || op->type == RKV_OP_XPUT) {
		o->x = (struct rkv_xop *)(uintptr_t)op->val;
		o->xget = op->type == RKV_OP_XGET;
		o->xput = op->type == RKV_OP_XPUT;
		o->type = o->xget ? RKV_OP_GET : RKV_OP_RMW;
		o->x->split = 0;
	}
	rkv_key_hash(op->key, op->key_len, &o->kh);
	o->srv = &c->srv[rkv_jump_hash(o->kh.route, c->nsrv)];
	o->t_op_ms = rkv_coarse_ms();
	o->deadline_ms = o->t_op_ms + c->opts.timeout_ms;
	o->retries = 0;
	o->blk_size = 0;
	o->blk_written = 0;
	op->rtts = 0;
	op->out_len = 0;
	o->state = OP_IO;
	if (o->srv->dead) {
		op_finish(o, o->srv->dead);
		return;
	}
	rkv_key_buckets(&o->kh, o->srv->nbuckets, &o->b[0], &o->b[1]);
	o->npos = o->b[0] == o->b[1] ? RKV_SLOTS_PER_BUCKET : MAX_CAND;
	o->tent = o->tent_abort = o->ins_waiting = o->ins_lower = 0;
	o->full_since_ms = 0;
	o->old_grant = 0;
	attempt(o);
}

void op_space_ready(struct opslot *o)
{
	o->state = OP_IO;
	if (o->rmw_parked)
		rmw_commit(o);
	else
		attempt(o);
}

void op_timer(struct opslot *o, uint64_t now_ms)
{
	if (now_ms > o->deadline_ms) {
		o->state = OP_IO;
		if (o->tent) {
			/* withdraw our tentative slot first */
			o->ins_waiting = 0;
			o->tent_abort = 1;
			o->tent_err = -ETIMEDOUT;
			ins_withdraw(o);
			return;
		}
		op_finish(o, -ETIMEDOUT);
		return;
	}
	if (o->state == OP_WAIT_SPACE) {
		if (!o->srv->chunk_req)
			op_space_ready(o);
		return;
	}
	/* OP_WAIT_TIMER: look at the locked slot (or, for an insert, both
	 * buckets) again after ~lease/8 */
	uint32_t step = o->srv->lease_ms / 8 ? o->srv->lease_ms / 8 : 1;

	if (now_ms - o->t_round_ms < step)
		return;
	o->t_round_ms = now_ms;
	round_begin(o);
	if (o->ins_waiting == 3) { /* a full pair of buckets: again */
		o->ins_waiting = 0;
		o->state = OP_IO;
		retry(o);
		return;
	}
	if (o->ins_waiting == 2) {
		o->ins_waiting = 0;
		rd(o, OB_WORD, pos_addr(o, o->tent_seen_pos),
		   o->srv->index_rkey, 8);
		post_round(o, ST_INS_LOWER);
		return;
	}
	if (o->ins_waiting) {
		o->ins_waiting = 0;
		rd_buckets(o);
		post_round(o, ST_INS_REREAD);
		return;
	}
	rd(o, OB_WORD, pos_addr(o, o->slot_pos), o->srv->index_rkey, 8);
	post_round(o, ST_LOCK_POLL);
}

/* --------------------------------------------------------------- rmw */

/*
 * Apply the callback's decision (o->rmw_action, value already in place in
 * our new-block buffer): with the lock held, post the releasing round
 * (WRITE new block + CAS lockval -> new slot, or CAS to empty, or CAS to
 * the same block with the version bumped); for an absent key, insert.
 */
static void rmw_commit(struct opslot *o)
{
	int act = o->rmw_action;

	o->rmw_parked = 0;
	if (act == RKV_RMW_WRITE) {
		int rc = o->rmw_len > o->c->opts.max_value ? -EMSGSIZE :
			 make_block(o, new_blk_buf(o) + RKV_BLOCK_HDR_SIZE +
					       o->op->key_len,
				    o->rmw_len, o->rmw_version);

		if (rc == -EAGAIN) {
			o->rmw_parked = 1;
			return;
		}
		if (rc)
			act = o->rmw_action = rc;
	}
	if (!o->locked) {
		if (act == RKV_RMW_WRITE)
			insert(o);
		else
			op_finish(o, act < 0 ? act : 0);
		return;
	}
	round_begin(o);
	if (act == RKV_RMW_WRITE) {
		o->newslot = new_slot_word(o, o->lockval);
		wr_block(o);
	} else if (act == RKV_RMW_DELETE) {
		o->newslot = 0;
	} else {
		o->newslot = rkv_slot_bump(o->lockval);
	}
	o->expect = o->lockval;
	cas(o, pos_addr(o, o->slot_pos), o->lockval, o->newslot);
	post_round(o, ST_RELEASE);
}

static void rmw_locked(struct opslot *o, const char *blk, uint32_t size)
{
	const void *v;
	uint32_t vl;
	const struct rkv_block_hdr *h;

	o->locked = 1;
	if (blk_decode(o, blk, size, &v, &vl, &h)) {
		/* not our key after all (stale cache): unlock and retry */
		o->release_retry = 1;
		o->rmw_action = RKV_RMW_KEEP;
		rmw_commit(o);
		return;
	}
	o->rmw_version = h->version + 1;
	o->old_grant = h->grant;
	call_fn(o, v, vl);
	if (o->rmw_action < 0) {
		/* abort: release unchanged, then report the error */
		int err = o->rmw_action;

		o->rmw_action = RKV_RMW_KEEP;
		rmw_commit(o);
		o->rmw_action = err;
		return;
	}
	rmw_commit(o);
}

/* -------------------------------------------------------- dispatcher */

static void after_buckets(struct opslot *o)
{
	int rc;

	if (o->type == RKV_OP_PUT) {
		struct cache_ent *ce = cache_find(o->c, o);

		if (ce && bucket_word(o, ce->pos) == ce->slot) {
			/* slot unchanged since we saw our key in it */
			o->old_grant = ce->info_known ? ce->info.grant :
				       o->hdr_slot == ce->slot ?
					       grant_at(o, OB_HDR) : 0;
			o->slot_pos = ce->pos;
			cas_round(o, ce->slot, new_slot_word(o, ce->slot),
				  ST_CAS);
			return;
		}
	}
	collect(o, -1, 0);
	rc = o->ncand ? read_cands(o, 0, ST_VERIFY) : 0;
	if (rc < 0)
		op_finish(o, rc);
	else if (rc == 0)
		absent(o);
}

static void after_verify(struct opslot *o)
{
	int first, rc;

	if (too_slow(o)) {
		retry(o);
		return;
	}
	first = check_cands(o);
	if (first == -2) {
		retry(o);
		return;
	}
	if (first < 0) {
		rc = o->vend < o->ncand ? read_cands(o, o->vend, ST_VERIFY) : 0;
		if (rc < 0)
			op_finish(o, rc);
		else if (rc == 0)
			absent(o);
		return;
	}
	struct cand *cd = &o->cand[first];

	o->slot_pos = cd->pos;
	o->target = first;
	o->old_grant = grant_at(o, cd->buf_off);
	switch (o->type) {
	case RKV_OP_GET:
		deliver_get(o, o->buf + cd->buf_off, rkv_slot_size(cd->slot),
			    cd->pos, cd->slot);
		return;
	case RKV_OP_PUT:
		cas_round(o, cd->slot, new_slot_word(o, cd->slot), ST_CAS);
		return;
	case RKV_OP_DELETE:
		cas_round(o, cd->slot, 0, ST_CAS);
		return;
	case RKV_OP_RMW:
		if (rkv_slot_locked(cd->slot)) {
			wait_lock(o, cd->slot);
			return;
		}
		/* the verified block stays valid if the lock CAS succeeds */
		lock_round(o, cd->slot, cd->slot | RKV_SLOT_LOCK, 0);
		return;
	}
}

static void after_cas(struct opslot *o)
{
	uint64_t w = word_at(o, OB_WORD);
	struct blk_info bi;

	if (w != o->expect) {
		if (o->type == RKV_OP_DELETE)
			cache_drop(o->c, o);
		retry(o);
		return;
	}
	unlink_block(o, o->expect);
	if (o->type != RKV_OP_DELETE) {
		published(o);
		cache_store(o->c, o, o->slot_pos, o->newslot, o->pub_size,
			    own_info(o, &bi));
		op_finish(o, 0);
		return;
	}
	cache_drop(o->c, o);
	op_finish(o, 0);
}

void op_round_done(struct opslot *o)
{
	struct blk_info bi;
	uint64_t w;

	switch (o->step) {
	case ST_GET_CACHED:
		w = word_at(o, OB_WORD);
		if (o->xround) {
			o->xround = 0;
			if (!too_slow(o) && !rkv_slot_empty(w) &&
			    rkv_slot_same_block(w, o->expect)) {
				deliver_xget(o, o->slot_pos, w);
				return;
			}
			cache_drop(o->c, o);
			read_buckets(o, 0, 0);
			return;
		}
		if (!too_slow(o) && !rkv_slot_empty(w) &&
		    rkv_slot_same_block(w, o->expect)) {
			deliver_get(o, o->buf + OB_BLOCKS,
				    rkv_slot_size(o->expect), o->slot_pos, w);
			return;
		}
		cache_drop(o->c, o);
		read_buckets(o, 0, 0);
		return;

	case ST_BUCKETS:
		after_buckets(o);
		return;

	case ST_XPUT:
		after_xput(o);
		return;

	case ST_VERIFY:
		after_verify(o);
		return;

	case ST_CAS:
		after_cas(o);
		return;

	case ST_DEL_CACHED:
		w = word_at(o, OB_WORD);
		cache_drop(o->c, o);
		if (w == o->expect) {
			if (o->hdr_slot == w)
				o->old_grant = grant_at(o, OB_HDR);
			unlink_block(o, w);
			op_finish(o, 0);
			return;
		}
		read_buckets(o, 0, 0);
		return;

	case ST_INS_CAS:
		if (word_at(o, OB_WORD) != 0) {
			/* the slot was taken: the buckets just read are
			 * fresh, decide again from them */
			o->expect = 0;
			if (too_slow(o) || ++o->retries > MAX_RETRIES ||
			    rkv_coarse_ms() > o->deadline_ms) {
				retry(o); /* (it finishes the op when over) */
				return;
			}
			after_buckets(o);
			return;
		}
		o->tent = 1;
		ins_decide(o);
		return;

	case ST_INS_REREAD:
		ins_decide(o);
		return;

	case ST_INS_STEAL:
		/* cleared or not, the buckets behind it are fresh */
		ins_decide(o);
		return;

	case ST_INS_VERIFY:
		ins_verified(o);
		return;

	case ST_INS_COMMIT:
		w = word_at(o, OB_WORD);
		o->tent = 0;
		if (w != o->expect) {
			/* our tentative slot was cleared (we were slower than
			 * a lease): nobody ever saw the block as the value */
			drop_new_block(o);
			retry(o);
			return;
		}
		o->newslot &= ~RKV_SLOT_TENT;
		published(o);
		cache_store(o->c, o, o->slot_pos, o->newslot, o->pub_size,
			    own_info(o, &bi));
		op_finish(o, 0);
		return;

	case ST_INS_WITHDRAW:
		/* withdrawn, or cleared by a waiter: the block was never a
		 * value; it goes back through the grace period (inserters
		 * may be reading it) */
		o->tent = 0;
		drop_new_block(o);
		if (o->tent_abort) {
			o->tent_abort = 0;
			op_finish(o, o->tent_err);
			return;
		}
		if (o->ins_lower) {
			o->ins_lower = 0;
			ins_wait_lower(o);
			return;
		}
		retry(o);
		return;

	case ST_INS_LOWER:
		w = word_at(o, OB_WORD);
		if (w != o->tent_seen) {
			retry(o); /* committed, withdrawn or replaced */
			return;
		}
		if (rkv_coarse_ms() - o->tent_seen_ms >= o->srv->lease_ms) {
			o->c->st.lock_steals++;
			round_begin(o);
			cas(o, pos_addr(o, o->tent_seen_pos), w, 0);
			post_round(o, ST_INS_CLEAR);
			return;
		}
		ins_wait_lower(o);
		return;

	case ST_INS_CLEAR:
		retry(o);
		return;

	case ST_LOCK:
		w = word_at(o, OB_WORD);
		if (w == o->expect) {
			if (o->lock_read) {
				rmw_locked(o, o->buf + OB_BLOCKS,
					   rkv_slot_size(o->expect));
			} else {
				struct cand *cd = &o->cand[o->target];

				rmw_locked(o, o->buf + cd->buf_off,
					   rkv_slot_size(cd->slot));
			}
			return;
		}
		if (rkv_slot_locked(w) && rkv_slot_same_block(w, o->expect)) {
			wait_lock(o, w);
			return;
		}
		if (o->cached)
			cache_drop(o->c, o);
		retry(o);
		return;

	case ST_LOCK_POLL:
		w = word_at(o, OB_WORD);
		if (w == o->lock_seen) {
			if (rkv_coarse_ms() - o->lock_seen_ms >= o->srv->lease_ms) {
				/* lease over: take the lock over */
				o->c->st.lock_steals++;
				lock_round(o, w,
					   rkv_slot_bump(w) | RKV_SLOT_LOCK, 1);
				return;
			}
			o->state = OP_WAIT_TIMER;
			return;
		}
		if (rkv_slot_same_block(w, o->lock_seen) && !rkv_slot_empty(w)) {
			if (!rkv_slot_locked(w)) {
				/* released unchanged: lock it, read block */
				lock_round(o, w, w | RKV_SLOT_LOCK, 1);
				return;
			}
			/* locked again by someone else: new lease */
			wait_lock(o, w);
			return;
		}
		retry(o);
		return;

	case ST_RELEASE:
		w = word_at(o, OB_WORD);
		o->locked = 0;
		if (o->release_retry) {
			cache_drop(o->c, o);
			retry(o);
			return;
		}
		if (w != o->expect) {
			/* our lock was stolen: nothing of ours was published */
			drop_new_block(o);
			retry(o);
			return;
		}
		if (o->rmw_action == RKV_RMW_WRITE) {
			unlink_block(o, o->expect);
			published(o);
			cache_store(o->c, o, o->slot_pos, o->newslot,
				    o->pub_size, own_info(o, &bi));
			op_finish(o, 0);
		} else if (o->rmw_action == RKV_RMW_DELETE) {
			unlink_block(o, o->expect);
			cache_drop(o->c, o);
			op_finish(o, 0);
		} else {
			cache_store(o->c, o, o->slot_pos, o->newslot,
				    rkv_slot_size(o->newslot), NULL);
			op_finish(o, o->rmw_action < 0 ? o->rmw_action : 0);
		}
		return;
	}
}
