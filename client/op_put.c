/* SPDX-License-Identifier: MIT */
/*
 * op_put.c - put and delete.
 *
 * Put: carve and encode the new block, then WRITE it and READ both
 * buckets in one doorbell (a big block: WRITE it first, alone).  A key
 * found (or a trusted cached slot still unchanged) is replaced by one CAS
 * from the word seen; an absent key is inserted (op_ins.c).  The replaced block goes back to the server under
 * the grant its header names.
 *
 * Delete: with a trusted cached location, CAS the slot to empty in one
 * round (READing the old block's header in the same doorbell when its
 * grant is unknown); otherwise locate, then CAS.
 */
#include "client.h"

#include <errno.h>

/* ---------------------------------------------------------------- put */

static void put_attempt(struct opslot *o)
{
	struct cache_ent *ce = cache_find(o->c, o);

	if (ce)
		o->slot_pos = ce->pos;
	if (!o->nb.size) {
		int rc = nb_make_put(o);

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
	/* a cached location whose block's grant is unknown: READ its header
	 * too, so the block can be returned if we replace it */
	loc_start(o, !o->nb.written, ce && !ce->info_known ? ce->slot : 0);
}

/* The buckets came back: a trusted cached slot still unchanged since we
 * saw our key in it is replaced at once. */
static int put_buckets(struct opslot *o)
{
	struct cache_ent *ce = cache_find(o->c, o);

	if (!ce || bucket_word(o, ce->pos) != ce->slot)
		return 0;
	o->old_grant = ce->info_known ? ce->info.grant :
		       o->hdr_slot == ce->slot ? grant_at(o, OB_HDR) : 0;
	o->slot_pos = ce->pos;
	cas_round(o, ce->slot, nb_slot_word(o, ce->slot), PUT_CAS);
	return 1;
}

static void put_found(struct opslot *o, struct cand *cd)
{
	cas_round(o, cd->slot, nb_slot_word(o, cd->slot), PUT_CAS);
}

static void put_round(struct opslot *o)
{
	struct blk_info bi;

	/* PUT_CAS */
	if (word_at(o, OB_WORD) != o->expect) {
		op_retry(o);
		return;
	}
	unlink_block(o, o->expect);
	nb_published(o);
	cache_store(o->c, o, o->slot_pos, o->newslot, o->nb.pub_size,
		    nb_info(o, &bi));
	op_finish(o, 0);
}

struct rkv_op_stats *put_stats(struct rkv_client_stats *st)
{
	return &st->put;
}

const struct op_kind op_put = {
	.name = "put",
	.writes = 1,
	.attempt = put_attempt,
	.round = put_round,
	.found = put_found,
	.absent = ins_start,
	.buckets = put_buckets,
	.timer = op_no_timer,
	.stats = put_stats,
};

/* ------------------------------------------------------------- delete */

static void del_attempt(struct opslot *o)
{
	struct cache_ent *ce = cache_find(o->c, o);

	if (!ce) {
		o->c->st.cache_misses++;
		loc_start(o, 0, 0);
		return;
	}
	o->c->st.cache_hits++;
	o->cached = 1;
	o->slot_pos = ce->pos;
	o->expect = ce->slot;
	o->newslot = 0;
	o->old_grant = ce->info_known ? ce->info.grant : 0;
	o->hdr_slot = ce->info_known ? 0 : ce->slot;
	round_begin(o);
	/* the header READ executes before the CAS; if the CAS wins, the
	 * slot named that block all along */
	if (!ce->info_known)
		rd(o, OB_HDR, data_addr(o, ce->slot), o->p->ctrl.keys.data,
		   RKV_BLOCK_HDR_SIZE);
	cas(o, o->slot_pos, ce->slot, 0);
	round_post(o, DEL_CACHED);
}

static void del_found(struct opslot *o, struct cand *cd)
{
	cas_round(o, cd->slot, 0, DEL_CAS);
}

static void del_absent(struct opslot *o)
{
	op_finish(o, -ENOENT);
}

static void del_round(struct opslot *o)
{
	uint64_t w = word_at(o, OB_WORD);

	cache_drop(o->c, o);
	if (o->step == DEL_CACHED) {
		if (w != o->expect) {
			loc_start(o, 0, 0);
			return;
		}
		if (o->hdr_slot == w)
			o->old_grant = grant_at(o, OB_HDR);
	} else if (w != o->expect) { /* DEL_CAS lost */
		op_retry(o);
		return;
	}
	unlink_block(o, w);
	op_finish(o, 0);
}

struct rkv_op_stats *del_stats(struct rkv_client_stats *st)
{
	return &st->del;
}

const struct op_kind op_del = {
	.name = "delete",
	.writes = 1,
	.attempt = del_attempt,
	.round = del_round,
	.found = del_found,
	.absent = del_absent,
	.timer = op_no_timer,
	.stats = del_stats,
};
