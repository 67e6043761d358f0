/* SPDX-License-Identifier: MIT */
/*
 * op_ext.c - the extension kinds of rkv_ext.h: split get and head put.
 * Each tries one fast round from a cached location and otherwise runs as
 * the kind it extends (get, rmw), whose steps it shares.
 */
#include "client.h"

#include <errno.h>
#include <string.h>

/* ---------------------------------------------------------- split get */

/*
 * Cached location: READ the slot word, the block's header, key and value
 * head into the op buffer, and the rest of the value straight into the
 * caller's tail buffer, in one doorbell.  Returns 1 when posted, 0 when
 * the cached block cannot have the expected shape (plain get instead).
 */
static int split_round(struct opslot *o, struct cache_ent *ce)
{
	const struct rkv_ext_op *x = o->x;
	size_t pre = RKV_BLOCK_HDR_SIZE + o->op->key_len + x->head;
	uint64_t a = data_addr(o, ce->slot);

	if (pre > o->c->op_buf_size - OB_BLOCKS ||
	    pre + x->tail_len > ce->blk_size || x->head > o->op->buf_cap) {
		o->x_try = 0;
		return 0;
	}
	get_cached_begin(o, ce); /* split_deliver refreshes ce */
	rd(o, OB_BLOCKS, a, o->p->ctrl.keys.data, (uint32_t)pre);
	op_read_block(o, ce->blk_size);
	if (x->tail_len)
		rd_to(o, x->tail, x->tail_lkey, a + pre, (uint32_t)x->tail_len);
	round_post(o, GET_SPLIT);
	return 1;
}

static void split_attempt(struct opslot *o)
{
	struct cache_ent *ce = o->x_try ? cache_find_any(o->c, o) : NULL;

	if (ce && split_round(o, ce))
		return;
	get_attempt(o);
}

/*
 * The split read came back and the slot still names the block: check the
 * header's shape, then key and checksum over the two pieces.  Only then is
 * the op a success; a torn block is retried (the retry overwrites the
 * tail, and the caller sees success only with a verified value).
 */
static void split_deliver(struct opslot *o, uint64_t slot)
{
	struct rkv_ext_op *x = o->x;
	const char *blk = o->buf + OB_BLOCKS;
	const struct rkv_block_hdr *h = (const void *)blk;
	size_t kl = o->op->key_len, pre = RKV_BLOCK_HDR_SIZE + kl + x->head;
	struct blk_info bi;

	if (h->key_len != kl || h->val_len != x->head + x->tail_len ||
	    blk_deleted(blk)) {
		/* another shape, or torn: let the plain get decide */
		o->x_try = 0;
		op_attempt(o);
		return;
	}
	if (rkv_block_checksum_split(blk, pre, x->tail, x->tail_len) !=
		    h->checksum ||
	    rkv_block_key_match(blk, o->op->key, kl) != 0) {
		cache_drop(o->c, o);
		op_retry(o);
		return;
	}
	cache_store(o->c, o, o->slot_pos, slot & ~RKV_SLOT_LOCK,
		    rkv_slot_size(slot), blk_info_of(&bi, blk, pre));
	if (x->head)
		memcpy(o->op->buf, blk + RKV_BLOCK_HDR_SIZE + kl, x->head);
	x->split = 1;
	o->op->out_len = h->val_len;
	op_finish(o, 0);
}

static void split_get_round(struct opslot *o)
{
	uint64_t w = word_at(o, OB_WORD);

	if (o->step != GET_SPLIT) {
		get_round(o);
		return;
	}
	if (!op_too_slow(o) && !rkv_slot_empty(w) && !rkv_slot_moved(w) &&
	    rkv_slot_same_block(w, o->expect)) {
		split_deliver(o, w);
		return;
	}
	cache_drop(o->c, o);
	loc_start(o, 0, 0);
}

/* ----------------------------------------------------------- head put */

/*
 * Cached location whose block is known: build the new value from the old
 * one's head, then WRITE the block and CAS the slot from the cached word
 * in one doorbell.  Returns 1 when the op went on (posted, parked for
 * space, or finished), 0 to run it as an RMW instead.
 */
static int head_round(struct opslot *o, struct cache_ent *ce)
{
	char *val = new_blk_buf(o) + RKV_BLOCK_HDR_SIZE + o->op->key_len;
	struct rkv_ext_head old = { .version = ce->info.version,
				    .val_len = ce->info.val_len };
	size_t len = 0;
	int act, rc;

	_Static_assert(sizeof(old.head) == sizeof(ce->info.head),
		       "one head size");
	memcpy(old.head, ce->info.head, sizeof(old.head));
	act = o->x->put_fn(&old, val, nb_value_cap(o), &len, o->x->put_arg);
	if (act != RKV_RMW_WRITE || len > nb_value_cap(o)) {
		o->x_try = 0;
		return 0;
	}
	rc = nb_make(o, val, len, ce->info.version + 1);
	if (rc == -EAGAIN)
		return 1; /* parked: attempt again when space comes */
	if (rc) {
		op_finish(o, rc);
		return 1;
	}
	o->c->st.cache_hits++;
	o->cached = 1;
	o->slot_pos = ce->pos;
	o->expect = ce->slot;
	o->newslot = nb_slot_word(o, ce->slot);
	o->old_grant = ce->info.grant;
	round_begin(o);
	wr_block(o);
	cas(o, o->slot_pos, o->expect, o->newslot);
	round_post(o, RMW_HEAD_PUT);
	return 1;
}

static void head_attempt(struct opslot *o)
{
	struct cache_ent *ce = o->x_try ? cache_find(o->c, o) : NULL;

	if (ce && ce->info_known && head_round(o, ce))
		return;
	rmw_attempt(o);
}

static void head_done(struct opslot *o)
{
	uint64_t w = word_at(o, OB_WORD);
	struct blk_info bi;

	if (w == o->expect) {
		unlink_block(o, o->expect);
		nb_published(o);
		cache_store(o->c, o, o->slot_pos, o->newslot, o->nb.pub_size,
			    nb_info(o, &bi));
		op_finish(o, 0);
		return;
	}
	/* lost (locked, changed or gone): our block was never published;
	 * go on as an RMW from the word seen */
	nb_drop(o);
	o->x_try = 0;
	if (rkv_slot_empty(w))
		cache_drop(o->c, o);
	else
		cache_store(o->c, o, o->slot_pos, w & ~RKV_SLOT_LOCK,
			    rkv_slot_size(w), NULL);
	op_retry(o);
}

static void head_put_round(struct opslot *o)
{
	if (o->step == RMW_HEAD_PUT)
		head_done(o);
	else
		rmw_round(o);
}

/* The rest of their tables is the kinds they extend. */
const struct op_kind op_split_get = {
	.name = "split get",
	.attempt = split_attempt,
	.round = split_get_round,
	.found = get_found,
	.absent = get_absent,
	.timer = op_no_timer,
	.stats = get_stats,
};

const struct op_kind op_head_put = {
	.name = "head put",
	.writes = 1,
	.attempt = head_attempt,
	.round = head_put_round,
	.found = rmw_found,
	.absent = rmw_absent,
	.space = rmw_space,
	.timer = rmw_timer,
	.stats = rmw_stats,
};
