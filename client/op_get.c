/* SPDX-License-Identifier: MIT */
/*
 * op_get.c - get.  With a cached location (of any age): one round READs
 * the slot word and the block together; if the word still names the
 * block and the attempt was quick, the block is the value (1 RTT).
 * Otherwise locate (2 RTTs: buckets, then candidate blocks).
 */
#include "client.h"

#include <errno.h>
#include <string.h>

void get_deliver(struct opslot *o, const char *blk, uint32_t size,
		 unsigned pos, uint64_t slot)
{
	const void *v;
	uint32_t vl;
	struct blk_info bi;
	int rc;

	if (!op_lease_ok(o))
		return;
	rc = blk_decode(o, blk, size, &v, &vl, NULL);
	if (rc == -EIO) { /* device op: CUDA failed (logged) */
		op_finish(o, rc);
		return;
	}
	if (rc) {
		cache_drop(o->c, o);
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
	if (vl)
		memcpy(o->op->buf, v, vl);
	op_finish(o, 0);
}

void get_attempt(struct opslot *o)
{
	struct cache_ent *ce = cache_find_any(o->c, o);

	if (ce && ce->blk_size > o->room && op_room(o, ce->blk_size))
		ce = NULL; /* no buffer for it: locate (and fail there) */
	if (ce) {
		o->c->st.cache_hits++;
		o->cached = 1;
		o->ce = ce;
		o->ce_gen = ce->gen;
		o->slot_pos = ce->pos;
		o->expect = ce->slot;
		round_begin(o);
		rd(o, OB_WORD, ce->slot_addr, o->p->ctrl.keys.index, 8);
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

	/* GET_CACHED */
	/* a moved slot still names the block, but the key's value is on
	 * another server now (op_mig.c) */
	if (!op_too_slow(o) && !rkv_slot_empty(w) && !rkv_slot_moved(w) &&
	    rkv_slot_same_block(w, o->expect)) {
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
	get_deliver(o, o->buf + cd->buf_off, rkv_slot_size(cd->slot), cd->pos,
		    cd->slot);
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
