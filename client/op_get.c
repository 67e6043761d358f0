/* SPDX-License-Identifier: MIT */
/*
 * op_get.c - get.  With a cached location (of any age): one round READs
 * the slot word and the block together; if the word still names the
 * block and the attempt was quick, the block is the value (1 RTT).
 * Otherwise locate (2 RTTs: buckets, then candidate blocks).
 *
 * A big value (a block over the op buffer's INLINE_BLOCK) whose cached
 * location knows its length is READ straight into the caller's buffer
 * where registering that buffer costs a table entry (tcp, shm; verbs
 * pins, so it reads into a registered big buffer and copies): the same
 * round READs the slot word, the header and key into the op buffer, and
 * the value into op->buf (its head is copied after the key for the
 * cache).  The checksum is verified over the two pieces before the op
 * succeeds (a torn value is read again over the same bytes); the
 * transport hashes them as it places them (RKV_WR_DIGEST), so the value
 * is not read a second time.  A block of
 * another shape goes the plain way.
 */
#include "client.h"

#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "hash.h"

/* Answer the op from blk (size bytes), read from slot word slot at pos;
 * verified: the locate round checked it (loc_check_cands: header,
 * checksum, key), so a host op copies it out without hashing it again. */
static void deliver(struct opslot *o, const char *blk, uint32_t size,
		    unsigned pos, uint64_t slot, int verified)
{
	const void *v;
	uint32_t vl;
	struct blk_info bi;
	int rc, copied = 0;

	if (!op_lease_ok(o))
		return;
	if (verified && !o->d) {
		const struct rkv_block_hdr *h = (const void *)blk;

		v = blk + RKV_BLOCK_HDR_SIZE + h->key_len;
		vl = h->val_len;
		rc = 0;
	} else if (!o->d && size > INLINE_BLOCK) {
		/* a big value is copied out as it is verified */
		rc = rkv_block_decode_copy(blk, size, o->op->key,
					   o->op->key_len, o->op->buf,
					   o->op->buf_cap, &vl, &copied);
		v = blk + RKV_BLOCK_HDR_SIZE + o->op->key_len;
	} else {
		rc = blk_decode(o, blk, size, &v, &vl, NULL);
	}
	if (rc == -EIO) { /* device op: CUDA failed (logged) */
		op_finish(o, rc);
		return;
	}
	if (rc) {
		/* (-ESTALE: the block is another key's now, not corrupt) */
		cache_drop(o->c, o);
		if (rc == -EBADMSG && op_corrupt(o, slot))
			op_finish(o, -EIO);
		else
			op_retry(o);
		return;
	}
	if (o->x)
		o->x->split = 0;
	if (o->cached)
		cache_hit(o->c, o, o->ce, o->ce_gen, slot & ~RKV_SLOT_LOCK,
			  size, o->d ? NULL : blk);
	else
		cache_store(o->c, o, pos, slot & ~RKV_SLOT_LOCK, size,
			    o->d ? NULL : blk_info_of(&bi, blk, size));
	if (blk_deleted(blk)) {
		op_finish(o, -ENOENT); /* a tombstone (r > 1) */
		return;
	}
	o->op->out_len = vl;
	if (o->d) {
		op_finish(o, gpu_deliver(o, v, vl));
		return;
	}
	if (vl > o->op->buf_cap) {
		op_finish(o, -ENOBUFS);
		return;
	}
	if (vl && !copied)
		memcpy(o->op->buf, v, vl);
	op_finish(o, 0);
}

void get_deliver(struct opslot *o, const char *blk, uint32_t size,
		 unsigned pos, uint64_t slot)
{
	deliver(o, blk, size, pos, slot, 0);
}

void get_cached_begin(struct opslot *o, struct cache_ent *ce)
{
	o->c->st.cache_hits++;
	o->cached = 1;
	o->ce = ce;
	o->ce_gen = ce->gen;
	o->slot_pos = ce->pos;
	o->expect = ce->slot;
	round_begin(o);
	rd(o, OB_WORD, ce->slot_addr, o->p->ctrl.keys.index, 8);
}

/* Whether o may READ ce's block's value straight into op->buf: where
 * the transport hashes what it READs (tcp, shm: there registering the
 * caller's buffer is a table entry too). */
static int direct_ok(const struct opslot *o, const struct cache_ent *ce)
{
	size_t pre = RKV_BLOCK_HDR_SIZE + o->op->key_len;

	return !o->d && !o->x && !o->direct_no && ce->info_known &&
	       rkv_tp_digests(o->c->eng.tp) &&
	       ce->blk_size > INLINE_BLOCK && ce->info.val_len > BLK_HEAD &&
	       ce->info.val_len <= o->op->buf_cap &&
	       pre + ce->info.val_len <= ce->blk_size &&
	       pre + BLK_HEAD <= o->room;
}

/* The round's last WR feeds o->dh from byte off on (RKV_WR_DIGEST); the
 * first starts it afresh. */
static void digest_last(struct opslot *o, uint32_t off)
{
	struct rkv_wr *w = &o->wr[o->round_nwr - 1];

	if (off == RKV_BLOCK_SUM_OFF)
		rkv_block_hash_start(o->dh);
	w->flags = RKV_WR_DIGEST;
	w->digest = o->dh;
	w->digest_off = off;
}

/* Post the direct round for ce; 0 when the buffer cannot be registered
 * (the plain get then). */
static int direct_round(struct opslot *o, struct cache_ent *ce)
{
	size_t pre = RKV_BLOCK_HDR_SIZE + o->op->key_len;
	size_t vl = ce->info.val_len;
	uint64_t a = data_addr(o, ce->slot);

	if (!o->dh)
		o->dh = rkv_aligned_alloc(64, sizeof(*o->dh));
	if (!o->dh ||
	    (!o->umr && rkv_mr_reg(o->c->eng.tp, o->op->buf, o->op->buf_cap,
				   RKV_ACCESS_LOCAL_WRITE, &o->umr))) {
		o->umr = NULL;
		o->direct_no = 1;
		return 0;
	}
	get_cached_begin(o, ce);
	o->direct_len = vl;
	rd(o, OB_BLOCKS, a, o->p->ctrl.keys.data, (uint32_t)pre);
	digest_last(o, RKV_BLOCK_SUM_OFF);
	op_read_block(o, ce->blk_size);
	rd_to(o, o->op->buf, o->umr->lkey, a + pre, (uint32_t)vl);
	digest_last(o, 0);
	round_post(o, GET_DIRECT);
	return 1;
}

/* The direct round came back and the slot still names the block. */
static void direct_deliver(struct opslot *o, uint64_t slot)
{
	const char *blk = o->buf + OB_BLOCKS;
	const struct rkv_block_hdr *h = (const void *)blk;
	size_t kl = o->op->key_len;
	int sum_ok;

	if (!op_lease_ok(o))
		return;
	if (h->key_len != kl || h->val_len != o->direct_len ||
	    blk_deleted(blk)) {
		/* another shape, or torn: the plain get decides */
		o->direct_no = 1;
		op_attempt(o);
		return;
	}
	sum_ok = rkv_hash_digest(o->dh) == h->checksum;
	if (!sum_ok || rkv_block_key_match(blk, o->op->key, kl) != 0) {
		cache_drop(o->c, o);
		if (!sum_ok && op_corrupt(o, slot))
			op_finish(o, -EIO);
		else
			op_retry(o);
		return;
	}
	/* the entry's info: the value's head after the key, as it is in
	 * the block (direct_ok left room for it) */
	memcpy((char *)blk + RKV_BLOCK_HDR_SIZE + kl, o->op->buf, BLK_HEAD);
	cache_hit(o->c, o, o->ce, o->ce_gen, slot & ~RKV_SLOT_LOCK,
		  rkv_slot_size(o->expect), blk);
	o->op->out_len = h->val_len;
	op_finish(o, 0);
}

void get_attempt(struct opslot *o)
{
	struct cache_ent *ce = cache_find_any(o->c, o);

	if (ce && direct_ok(o, ce) && direct_round(o, ce))
		return;
	if (ce && ce->blk_size > o->room && op_room(o, ce->blk_size))
		ce = NULL; /* no buffer for it: locate (and fail there) */
	if (ce) {
		get_cached_begin(o, ce);
		rd_blk(o, OB_BLOCKS, data_addr(o, ce->slot), ce->blk_size);
		round_post(o, GET_CACHED);
		return;
	}
	if (ce)
		o->slot_pos = ce->pos;
	o->c->st.cache_misses++;
	loc_start(o, 0, 0);
}

void get_round(struct opslot *o)
{
	uint64_t w = word_at(o, OB_WORD);

	/* GET_CACHED, GET_DIRECT */
	/* a moved slot still names the block, but the key's value is on
	 * another server now (op_mig.c) */
	if (!op_too_slow(o) && !rkv_slot_empty(w) && !rkv_slot_moved(w) &&
	    rkv_slot_same_block(w, o->expect)) {
		if (o->step == GET_DIRECT) {
			direct_deliver(o, w);
			return;
		}
		get_deliver(o, o->buf + OB_BLOCKS, rkv_slot_size(o->expect),
			    o->slot_pos, w);
		return;
	}
	cache_drop(o->c, o);
	o->cached = 0;
	loc_start(o, 0, 0);
}

void get_found(struct opslot *o, struct cand *cd)
{
	deliver(o, o->buf + cd->buf_off, rkv_slot_size(cd->slot), cd->pos,
		cd->slot, 1);
}

void get_absent(struct opslot *o)
{
	if (!op_lease_ok(o))
		return;
	op_finish(o, -ENOENT);
}

struct rkv_op_stats *get_stats(struct rkv_client_stats *st)
{
	return &st->get;
}

const struct op_kind op_get = {
	.name = "get",
	.attempt = get_attempt,
	.round = get_round,
	.found = get_found,
	.absent = get_absent,
	.timer = op_no_timer,
	.stats = get_stats,
};
