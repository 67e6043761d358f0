/* SPDX-License-Identifier: MIT */
/*
 * op_rmw.c - read-modify-write under the slot's CAS lock.
 *
 * Lock: CAS the key's slot from the word seen to the same word with the
 * lock bit (with a trusted cached location, READ the block in the same
 * doorbell: valid if the CAS wins).  The callback builds the new value in
 * our private new block; the releasing round WRITEs it and CASes the lock
 * word to the new slot (RC order: block first), or to empty (delete), or
 * back with the version bumped (keep).  A lock held longer than a lease
 * is taken over; its holder's release then fails and it retries.  An
 * absent key is inserted (op_ins.c) with the callback's value.
 *
 * At r > 1 put and delete run here too (op_rput, op_rdel: their wmode
 * says what to write), the lock's sequence goes into the new block, the
 * value is installed on the backups between the callback and the
 * release (op_repl.c), a delete writes a tombstone, and an absent key is
 * first inserted as a locked tombstone, then written like a present one.
 */
#include "client.h"

#include <errno.h>

#include "rtime.h"

/* Run the rmw callback; its value lands where our new block's value goes:
 * room for max(old_len, INLINE_VALUE), or for the length a callback
 * asked for with -ENOBUFS (it runs once more). */
void rmw_call_fn(struct opslot *o, const void *old, uint32_t old_len)
{
	size_t want = old_len;
	int act = 0;

	for (int run = 0; run < 2 && !act; run++) {
		act = want > INLINE_VALUE ?
			      op_nb_room(o, rkv_block_size(o->op->key_len,
							   want)) :
			      0;
		if (act)
			break;
		o->rmw.len = 0;
		act = o->op->fn(old, old_len,
				new_blk_buf(o) + RKV_BLOCK_HDR_SIZE +
					o->op->key_len,
				nb_value_cap(o), &o->rmw.len, o->op->fn_arg);
		if (act != -ENOBUFS || run || o->rmw.len <= nb_value_cap(o) ||
		    o->rmw.len > op_value_max(o))
			break;
		want = o->rmw.len;
		act = 0;
	}
	if (act > RKV_RMW_DELETE)
		act = -EINVAL;
	o->rmw.action = act;
}

/* CAS the slot at o->slot_pos from expect to lockval; with read_block,
 * READ expect's block in the same doorbell (valid if the CAS succeeds). */
static void lock_round(struct opslot *o, uint64_t expect, uint64_t lockval,
		       int read_block)
{
	uint32_t sz = rkv_slot_size(expect);
	int rc = read_block && sz > o->room ? op_room(o, sz) : 0;

	if (rc) {
		op_finish(o, rc);
		return;
	}
	o->expect = expect;
	o->rmw.lockval = lockval;
	o->rmw.lock_read = read_block;
	o->rmw.may_restore = !rkv_slot_locked(expect);
	round_begin(o);
	cas(o, o->slot_pos, expect, lockval);
	if (read_block)
		rd_blk(o, OB_BLOCKS, data_addr(o, expect), sz);
	round_post(o, RMW_LOCK);
}

static void wait_lock(struct opslot *o, uint64_t seen)
{
	o->c->st.lock_waits++;
	o->rmw.lock_seen = seen;
	o->rmw.lock_seen_ms = rkv_coarse_ms();
	op_wait(o, RMW_WAIT_LOCK);
}

/*
 * Apply the callback's decision (o->rmw.action, value already in place in
 * our new-block buffer): with the lock held, post the releasing round; for
 * an absent key, insert.
 */
void rmw_commit(struct opslot *o)
{
	int act = o->rmw.action, repl = o->repl.nlegs > 0, rc = 0;

	if (act == RKV_RMW_WRITE) {
		const void *src = o->kind->wmode == WM_PUT ?
				  o->op->val :
				  new_blk_buf(o) + RKV_BLOCK_HDR_SIZE +
					  o->op->key_len;

		/* a callback's value must fit the room it was given */
		rc = o->kind->wmode != WM_PUT && o->rmw.len > nb_value_cap(o) ?
			     -EMSGSIZE :
			     nb_make(o, src, o->rmw.len, o->rmw.version);
	} else if (act == RKV_RMW_DELETE && repl && o->rmw.locked) {
		rc = nb_make_tomb(o, o->rmw.version);
	}
	if (rc == -EAGAIN) {
		o->step = RMW_PARKED;
		return;
	}
	if (rc) {
		if (o->rmw.locked) {
			rmw_abort(o, rc);
			return;
		}
		act = o->rmw.action = rc;
	}
	if (!o->rmw.locked) {
		if (act == RKV_RMW_WRITE)
			ins_start(o);
		else
			op_finish(o, act < 0 ? act : 0);
		return;
	}
	if (repl && (act == RKV_RMW_WRITE || act == RKV_RMW_DELETE)) {
		repl_install(o); /* then rmw_release */
		return;
	}
	rmw_release(o);
}

void rmw_release(struct opslot *o)
{
	int act = o->rmw.action;

	round_begin(o);
	if (act == RKV_RMW_WRITE ||
	    (act == RKV_RMW_DELETE && o->repl.nlegs)) {
		o->newslot = nb_slot_word(o, o->rmw.lockval);
		wr_block(o);
	} else if (act == RKV_RMW_DELETE) {
		o->newslot = 0;
	} else if (o->repl.nlegs && o->rmw.may_restore) {
		/* nothing written anywhere under our lock: the word as it
		 * was.  A bump here moves the lock's sequence one further
		 * from the header's each time (docs/DESIGN.md §9.7), and 255
		 * of them in a row wrapped it: the next taker got h + 256,
		 * a thief h + 1, and the taker's install overwrote the
		 * thief's value on the backups. */
		o->newslot = o->rmw.lockval & ~RKV_SLOT_LOCK;
	} else {
		/* a stolen lock's holder, or backups that may hold our
		 * sequence: the next lock must take a higher one */
		o->newslot = rkv_slot_bump(o->rmw.lockval);
	}
	o->expect = o->rmw.lockval;
	cas(o, o->slot_pos, o->rmw.lockval, o->newslot);
	round_post(o, RMW_RELEASE);
}

void rmw_abort(struct opslot *o, int err)
{
	o->rmw.action = RKV_RMW_KEEP;
	rmw_release(o);
	o->rmw.action = err;
}

/* Under the lock: what the write does with the value found (v NULL: the
 * key is absent or a tombstone), the callback's choice or a put's or
 * delete's given one; then go on to commit it, or abort (release
 * unchanged, report the error). */
static void rmw_decide(struct opslot *o, const void *v, uint32_t vl)
{
	switch (o->kind->wmode) {
	case WM_PUT:
		o->rmw.action = RKV_RMW_WRITE;
		o->rmw.len = o->op->val_len;
		break;
	case WM_DEL:
		o->rmw.action = v ? RKV_RMW_DELETE : -ENOENT;
		break;
	case WM_FN:
		rmw_call_fn(o, v, vl);
		break;
	}
	if (!v && o->rmw.action == RKV_RMW_DELETE)
		o->rmw.action = RKV_RMW_KEEP; /* absent already */
	if (o->rmw.action < 0) {
		/* abort: release unchanged, then report the error */
		rmw_abort(o, o->rmw.action);
		return;
	}
	rmw_commit(o);
}

/* We hold the lock; blk (size bytes) is the block it covers. */
static void locked(struct opslot *o, const char *blk, uint32_t size)
{
	const void *v;
	uint32_t vl;
	const struct rkv_block_hdr *h;

	o->rmw.locked = 1;
	if (blk_decode(o, blk, size, &v, &vl, &h)) {
		/* not our key after all (stale cache, or a lock taken with
		 * the verify READ on a fingerprint twin): unlock and retry,
		 * the next attempt verifying before it locks */
		o->rmw.release_retry = 1;
		o->rmw.no_fold = !o->cached;
		o->rmw.action = RKV_RMW_KEEP;
		rmw_commit(o);
		return;
	}
	o->old_grant = h->grant;
	if (o->repl.nlegs) {
		o->rmw.version = o->repl.seq = repl_seq(h->version,
							 o->rmw.lockval);
		if (blk_deleted(blk))
			v = NULL, vl = 0;
	} else {
		o->rmw.version = h->version + 1;
	}
	rmw_decide(o, v, vl);
}

void rmw_locked_new(struct opslot *o)
{
	o->rmw.locked = 1;
	o->rmw.may_restore = 0;
	o->repl.fresh = 1;
	o->rmw.version = o->repl.seq = repl_seq(0, o->rmw.lockval);
	rmw_decide(o, NULL, 0);
}

void rmw_attempt(struct opslot *o)
{
	struct cache_ent *ce = cache_find(o->c, o);

	if (ce) {
		o->c->st.cache_hits++;
		o->cached = 1;
		o->slot_pos = ce->pos;
		lock_round(o, ce->slot, ce->slot | RKV_SLOT_LOCK, 1);
		return;
	}
	o->c->st.cache_misses++;
	loc_start(o, 0, 0);
}

/*
 * The buckets came back (not cached): when exactly one slot carries the
 * key's fingerprint, committed and unlocked, lock it and READ its block
 * in one doorbell instead of verifying the block first and locking in
 * the next round (locked() checks the key; on a fingerprint twin it
 * unlocks and the op starts again, verifying first).  Saves the cold
 * write's verify round.  The block READ after the CAS is valid when the
 * CAS wins: our lock keeps the block from being unlinked.
 */
static int rmw_buckets(struct opslot *o)
{
	struct cand *cd;

	if (o->rmw.no_fold)
		return 0;
	loc_collect(o, -1, 1);
	if (o->ncand != 1)
		return 0;
	cd = &o->cand[0];
	if (rkv_slot_locked(cd->slot) || rkv_slot_tentative(cd->slot) ||
	    rkv_slot_offset(cd->slot) + rkv_slot_size(cd->slot) >
		    o->p->g.data_len)
		return 0;
	o->slot_pos = cd->pos;
	o->target = 0;
	lock_round(o, cd->slot, cd->slot | RKV_SLOT_LOCK, 1);
	return 1;
}

void rmw_found(struct opslot *o, struct cand *cd)
{
	if (rkv_slot_locked(cd->slot)) {
		wait_lock(o, cd->slot);
		return;
	}
	/* the verified block stays valid if the lock CAS succeeds */
	lock_round(o, cd->slot, cd->slot | RKV_SLOT_LOCK, 0);
}

void rmw_absent(struct opslot *o)
{
	int rc;

	o->rmw.locked = 0;
	if (!o->repl.nlegs) {
		o->rmw.version = 1;
		rmw_call_fn(o, NULL, 0);
		rmw_commit(o);
		return;
	}
	/* r > 1: nothing to do for a delete; anything else first inserts
	 * a tombstone that commits locked (op_ins.c), then goes on as a
	 * write of a present key (rmw_locked_new) */
	if (o->kind->wmode == WM_DEL) {
		if (op_lease_ok(o))
			op_finish(o, -ENOENT);
		return;
	}
	rc = nb_make_tomb(o, 0);
	if (rc == -EAGAIN) {
		/* parked: inserted when space comes, from the buckets read
		 * (the insert re-reads them after its CAS anyway) */
		o->step = RMW_PARKED_INS;
		return;
	}
	if (rc) {
		op_finish(o, rc);
		return;
	}
	ins_start(o);
}

static void lock_done(struct opslot *o)
{
	uint64_t w = word_at(o, OB_WORD);

	if (w == o->expect) {
		if (o->rmw.lock_read) {
			locked(o, o->buf + OB_BLOCKS, rkv_slot_size(o->expect));
		} else {
			struct cand *cd = &o->cand[o->target];

			locked(o, o->buf + cd->buf_off,
			       rkv_slot_size(cd->slot));
		}
		return;
	}
	if (rkv_slot_locked(w) && !rkv_slot_moved(w) &&
	    rkv_slot_same_block(w, o->expect)) {
		wait_lock(o, w);
		return;
	}
	if (o->cached)
		cache_drop(o->c, o);
	op_retry(o);
}

static void lock_polled(struct opslot *o)
{
	uint64_t w = word_at(o, OB_WORD);

	if (rkv_slot_moved(w)) {
		/* not a lock: the key moved away; locate sees where */
		op_retry(o);
		return;
	}
	if (w == o->rmw.lock_seen) {
		if (rkv_coarse_ms() - o->rmw.lock_seen_ms >= o->p->g.lease_ms) {
			/* lease over: take the lock over */
			o->c->st.lock_steals++;
			lock_round(o, w, rkv_slot_bump(w) | RKV_SLOT_LOCK, 1);
			return;
		}
		o->step = RMW_WAIT_LOCK;
		o->state = OP_WAIT_TIMER;
		return;
	}
	if (rkv_slot_same_block(w, o->rmw.lock_seen) && !rkv_slot_empty(w)) {
		if (!rkv_slot_locked(w)) {
			/* released unchanged: lock it, read block */
			lock_round(o, w, w | RKV_SLOT_LOCK, 1);
			return;
		}
		/* locked again by someone else: new lease */
		wait_lock(o, w);
		return;
	}
	op_retry(o);
}

static void released(struct opslot *o)
{
	uint64_t w = word_at(o, OB_WORD);
	struct blk_info bi;

	o->rmw.locked = 0;
	if (o->rmw.release_retry) {
		cache_drop(o->c, o);
		op_retry(o);
		return;
	}
	if (w != o->expect) {
		/* our lock was stolen: nothing of ours was published */
		nb_drop(o);
		op_retry(o);
		return;
	}
	if (o->rmw.action == RKV_RMW_WRITE ||
	    (o->rmw.action == RKV_RMW_DELETE && o->repl.nlegs)) {
		unlink_block(o, o->expect);
		nb_published(o);
		cache_store(o->c, o, o->slot_pos, o->newslot, o->nb.pub_size,
			    nb_info(o, &bi));
		op_finish(o, 0);
	} else if (o->rmw.action == RKV_RMW_DELETE) {
		unlink_block(o, o->expect);
		cache_drop(o->c, o);
		op_finish(o, 0);
	} else {
		cache_store(o->c, o, o->slot_pos, o->newslot,
			    rkv_slot_size(o->newslot), NULL);
		/* nothing written: the answer is what the primary read (at
		 * r > 1 its lease must cover it, op.c op_lease_ok) */
		if (o->repl.nlegs && !op_lease_ok(o))
			return;
		if (o->rmw.action == -ENOSPC && o->repl.grow) {
			o->repl.grow = 0; /* a backup asked to grow: again */
			op_wait(o, INS_WAIT_GROW);
			return;
		}
		op_finish(o, o->rmw.action < 0 ? o->rmw.action : 0);
	}
}

void rmw_round(struct opslot *o)
{
	switch ((enum kind_step)o->step) {
	case RMW_LOCK:
		lock_done(o);
		return;
	case RMW_LOCK_POLL:
		lock_polled(o);
		return;
	case RMW_RELEASE:
		released(o);
		return;
	default:
		return; /* no other round is an rmw's */
	}
}

/* RMW_WAIT_LOCK is due: READ the locked slot again. */
void rmw_timer(struct opslot *o)
{
	round_begin(o);
	rd_word(o, o->slot_pos);
	round_post(o, RMW_LOCK_POLL);
}

/* A chunk came: a parked value goes on, anything else starts again. */
void rmw_space(struct opslot *o)
{
	if (o->step == RMW_PARKED)
		rmw_commit(o);
	else if (o->step == RMW_PARKED_INS)
		rmw_absent(o);
	else
		op_attempt(o);
}

struct rkv_op_stats *rmw_stats(struct rkv_client_stats *st)
{
	return &st->rmw;
}

/* rmw, and put and delete at r > 1 (rmws of a given value or a
 * tombstone): one machine, three statistics */
#define RMW_KIND(kname, mode, st)                                              \
	{                                                                      \
		.name = kname, .writes = 1, .wmode = mode,                     \
		.attempt = rmw_attempt, .round = rmw_round,                    \
		.found = rmw_found, .absent = rmw_absent,                      \
		.buckets = rmw_buckets, .space = rmw_space,                    \
		.timer = rmw_timer, .stats = st,                               \
	}

const struct op_kind op_rmw = RMW_KIND("rmw", WM_FN, rmw_stats);
const struct op_kind op_rput = RMW_KIND("put", WM_PUT, put_stats);
const struct op_kind op_rdel = RMW_KIND("delete", WM_DEL, del_stats);
