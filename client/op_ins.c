/* SPDX-License-Identifier: MIT */
/*
 * op_ins.c - inserting a key that is absent (the INS_* steps of op.h):
 * put, and rmw of an absent key.  At most one committed copy of a key
 * exists: an insert CASes an empty slot to a tentative word (readers skip
 * it), re-reads both buckets in the same doorbell and commits only when it
 * sees no other copy; it withdraws when it sees a committed copy or a
 * tentative one earlier in scan order, and waits for tentative copies
 * later in scan order.  docs/DESIGN.md §6 has the argument.
 */
#include "client.h"

#include <errno.h>
#include <string.h>

#include "rtime.h"

/* What the verify rounds saw (ins.seen). */
#define INS_SEEN_COMMITTED 1u /* a committed copy: ours must go */
#define INS_SEEN_LOWER 2u     /* a tentative copy before ours in scan order */
#define INS_SEEN_HIGHER 4u    /* a tentative copy after ours: wait for it */

/* GROW_REPLY: the server's level count now (layout.h "Levels"). */
static void grow_done(void *arg, const struct rkv_msg *m, int err)
{
	struct peer *p = arg;

	p->grow_busy = 0;
	if (err || !m || m->hdr.type != RKV_MSG_GROW_REPLY)
		return; /* the ops waiting look again anyway */
	if (m->u.grow_reply.levels > p->g.levels &&
	    m->u.grow_reply.levels <= p->g.levels_max)
		p->g.levels = m->u.grow_reply.levels;
}

/*
 * Every bucket of the key full in the levels o read, which were all the
 * server had then (op_level_stale said so): ask it for one more level
 * (one GROW per server at a time) and wait for the answer, then look
 * again (INS_WAIT_GROW).  0 when the index is at its largest, or
 * read-only.
 */
int grow_ask(struct opslot *o, struct peer *p, unsigned levels)
{
	struct rkv_msg m;

	if (levels >= p->g.levels_max || p->g.read_only)
		return 0;
	o->grow_p = p;
	o->grow_levels = levels;
	if (p->g.levels > levels || p->grow_busy)
		return 1; /* grown already, or asked */
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_GROW;
	m.u.grow.levels = levels;
	if (!ctrl_send(&p->ctrl, &m, grow_done, p)) {
		p->grow_busy = 1;
		o->c->st.grows++;
	}
	return 1;
}

static int ins_grow(struct opslot *o)
{
	if (!grow_ask(o, o->p, o->levels))
		return 0;
	op_wait(o, INS_WAIT_GROW);
	return 1;
}

/* Both buckets full: an insert in progress may withdraw and free its
 * slot, so look again for up to a lease before saying so. */
static void ins_full(struct opslot *o, int tent)
{
	uint64_t now = rkv_coarse_ms();

	if (op_level_stale(o)) {
		op_retry(o); /* the new level may have room */
		return;
	}
	if (ins_grow(o))
		return;

	if (!tent || (o->ins.full_since_ms &&
		      now - o->ins.full_since_ms >= o->p->g.lease_ms)) {
		op_finish(o, -ENOSPC);
		return;
	}
	if (!o->ins.full_since_ms)
		o->ins.full_since_ms = now;
	op_wait(o, INS_WAIT_FULL);
}

/*
 * The slot an insert takes: the first empty one of the key's emptiest
 * bucket (the first in scan order on a tie; with levels, usually one of
 * the newest level's).  Choosing the emptier of two is
 * what fills the index: taking the first bucket whenever it had room
 * refused the first key at 34-47 % of the slots; with the choice the
 * first refusal comes at 73-82 % with buckets of 8 slots, past 90 % with
 * 32 (docs/DESIGN.md §3).  The
 * protocol does not care which empty slot is taken: inserters order
 * themselves by scan position (§6).  A replicated write's leg takes an
 * empty slot on a backup the same way (op_repl.c).
 */
int pick_empty_slot(const char *buckets, unsigned npos, unsigned slots,
		    int *tent)
{
	int best = -1;
	unsigned most = 0;

	for (unsigned b = 0; b * slots < npos; b++) {
		int first = -1;
		unsigned empty = 0;

		for (unsigned p = b * slots; p < (b + 1) * slots; p++) {
			uint64_t w;

			memcpy(&w, buckets + p * 8u, 8);
			if (rkv_slot_empty(w)) {
				if (first < 0)
					first = (int)p;
				empty++;
			}
			*tent |= rkv_slot_tentative(w);
		}
		if (empty > most) {
			most = empty;
			best = first;
		}
	}
	return best;
}

/*
 * Step 1: CAS an empty slot (pick_empty_slot) to our block's tentative word
 * (chaining the block WRITE before it when not written yet) and READ
 * both buckets behind it: RC order makes that READ see every copy of the
 * key that was in place before our CAS.
 */
void ins_start(struct opslot *o)
{
	int tent = 0, pos = pick_empty_slot(o->buf + OB_BUCKETS, o->npos,
					    o->p->g.bucket_slots, &tent);

	if (pos < 0) {
		ins_full(o, tent);
		return;
	}
	o->slot_pos = (unsigned)pos;
	o->expect = 0;
	o->newslot = nb_slot_word(o, 0) | RKV_SLOT_TENT;
	o->ins.tent_seen = 0;
	op_clock(o, rkv_coarse_ms());
	round_begin(o);
	if (o->nb.sum_due)
		wr_block_sum(o); /* (loc_start's round wrote it already) */
	if (!o->nb.written)
		wr_block(o); /* (never a caller's value: loc_start's) */
	cas(o, o->slot_pos, 0, o->newslot);
	rd_buckets(o);
	round_post(o, INS_CAS);
}

static void withdraw(struct opslot *o)
{
	cas_round(o, o->newslot, 0, INS_WITHDRAW);
}

void ins_abort(struct opslot *o, int err)
{
	o->ins.abort_err = err;
	withdraw(o);
}

/* At r > 1 the tentative tombstone commits locked: readers see the key
 * absent until the value is on every backup (docs/DESIGN.md §9.7). */
static void commit(struct opslot *o)
{
	uint64_t w = o->newslot & ~RKV_SLOT_TENT;

	cas_round(o, o->newslot, o->repl.nlegs ? w | RKV_SLOT_LOCK : w,
		  INS_COMMIT);
}

/* Step 2, and after every wait: look at the other copies of the key. */
static void decide(struct opslot *o)
{
	int rc;

	if (mig_fenced(o)) {
		/* the partition is moving: nothing of it may be added here */
		o->ins.fenced = 1;
		withdraw(o);
		return;
	}
	if (op_level_stale(o)) {
		/* a level we did not read: another inserter of the key may
		 * be there; start again over every level (op_retry) */
		withdraw(o);
		return;
	}
	o->ins.seen = 0;
	op_clock(o, rkv_coarse_ms());
	loc_collect(o, (int)o->slot_pos, 1);
	rc = o->ncand ? loc_read_cands(o, 0, INS_VERIFY) : 0;
	if (rc < 0)
		ins_abort(o, rc);
	else if (rc == 0) /* nobody else: commit */
		commit(o);
}

/* Wait for the later tentative copy w at pos (lease/8 between looks);
 * one unchanged for a whole lease belongs to a dead or stopped inserter
 * and is cleared (its owner's commit then fails, and it retries). */
static void wait_higher(struct opslot *o, unsigned pos, uint64_t w)
{
	uint64_t now = rkv_coarse_ms();
	struct ins_state *in = &o->ins;

	if (in->tent_seen != w || in->tent_seen_pos != pos) {
		in->tent_seen = w;
		in->tent_seen_pos = pos;
		in->tent_seen_ms = now;
	} else if (now - in->tent_seen_ms >= o->p->g.lease_ms) {
		o->c->st.lock_steals++;
		in->tent_seen = 0;
		op_clock(o, now);
		round_begin(o);
		cas(o, pos, w, 0);
		rd_buckets(o);
		round_post(o, INS_STEAL);
		return;
	}
	o->c->st.lock_waits++;
	op_wait(o, INS_WAIT_HIGHER);
}

/* Withdrawn for an earlier tentative copy (tent_seen at tent_seen_pos):
 * look at its slot again after lease/8; when it changed, start again;
 * when it stayed for a whole lease, clear it (its inserter is dead or
 * stopped; its commit will fail). */
static void wait_lower(struct opslot *o)
{
	o->c->st.lock_waits++;
	op_wait(o, INS_WAIT_LOWER);
}

/* The candidates of a verify round: what copies are there? */
static void classify(struct opslot *o)
{
	struct ins_state *in = &o->ins;

	for (unsigned i = o->vfrom; i < o->vend; i++) {
		const struct cand *cd = &o->cand[i];

		if (!cd->match)
			continue;
		if (!rkv_slot_tentative(cd->slot)) {
			in->seen |= INS_SEEN_COMMITTED;
		} else if (cd->pos < o->slot_pos) {
			if (!(in->seen & INS_SEEN_LOWER)) {
				in->tent_seen = cd->slot;
				in->tent_seen_pos = cd->pos;
				in->tent_seen_ms = rkv_coarse_ms();
			}
			in->seen |= INS_SEEN_LOWER;
		} else if (!(in->seen & INS_SEEN_HIGHER)) {
			in->seen |= INS_SEEN_HIGHER;
			o->target = (int)i;
		}
	}
}

/* The verify round of step 2 came back. */
static void verified(struct opslot *o)
{
	const unsigned stop = INS_SEEN_COMMITTED | INS_SEEN_LOWER;
	int rc, slow;

	/* too slow (blocks may have been reused) or torn: look again; the
	 * same block failing twice is corrupt */
	slow = op_too_slow(o);
	if (!slow)
		loc_check_cands(o);
	if (slow || o->bad_idx >= 0) {
		if (!slow && op_corrupt(o, o->cand[o->bad_idx].slot)) {
			ins_abort(o, -EIO);
			return;
		}
		round_begin(o);
		rd_buckets(o);
		op_clock(o, rkv_coarse_ms());
		round_post(o, INS_REREAD);
		return;
	}
	classify(o);
	if (o->vend < o->ncand && !(o->ins.seen & stop)) {
		rc = loc_read_cands(o, o->vend, INS_VERIFY);
		if (rc > 0)
			return;
		if (rc < 0) {
			ins_abort(o, rc);
			return;
		}
	}
	if (o->ins.seen & stop) {
		/* a committed copy (update it instead), or an earlier insert
		 * of the key: let it finish first, holding nothing (it may
		 * be waiting for us), then start again */
		o->ins.lower = !(o->ins.seen & INS_SEEN_COMMITTED);
		withdraw(o);
		return;
	}
	if (o->ins.seen & INS_SEEN_HIGHER) {
		const struct cand *cd = &o->cand[o->target];

		wait_higher(o, cd->pos, cd->slot);
		return;
	}
	commit(o);
}

/* INS_CAS came back: was the slot ours? */
static void cas_done(struct opslot *o)
{
	if (word_at(o, OB_WORD) != 0) {
		/* the slot was taken: the buckets just read are fresh,
		 * decide again from them */
		o->expect = 0;
		if (op_too_slow(o) || ++o->retries > MAX_RETRIES ||
		    rkv_coarse_ms() > o->deadline_ms) {
			op_retry(o); /* (it finishes the op when over) */
			return;
		}
		loc_buckets(o);
		return;
	}
	o->ins.tent = 1;
	decide(o);
}

static void committed(struct opslot *o)
{
	struct blk_info bi;

	o->ins.tent = 0;
	if (word_at(o, OB_WORD) != o->expect) {
		/* our tentative slot was cleared (we were slower than a
		 * lease): nobody ever saw the block as the value */
		nb_drop(o);
		op_retry(o);
		return;
	}
	o->newslot &= ~RKV_SLOT_TENT;
	if (o->repl.nlegs) {
		o->old_grant = o->nb.ref.grant;
		o->rmw.lockval = o->newslot;
		nb_published(o);
		rmw_locked_new(o);
		return;
	}
	nb_published(o);
	cache_store(o->c, o, o->slot_pos, o->newslot, o->nb.pub_size,
		    nb_info(o, &bi));
	op_finish(o, 0);
}

static void withdrawn(struct opslot *o)
{
	/* withdrawn, or cleared by a waiter: the block was never a value;
	 * it goes back through the grace period (inserters may be reading
	 * it) */
	o->ins.tent = 0;
	nb_drop(o);
	if (o->ins.fenced) {
		o->ins.fenced = 0;
		mig_resolve(o);
	} else if (o->ins.abort_err) {
		int err = o->ins.abort_err;

		o->ins.abort_err = 0;
		op_finish(o, err);
	} else if (o->ins.lower) {
		o->ins.lower = 0;
		wait_lower(o);
	} else {
		op_retry(o);
	}
}

/* INS_LOWER: the earlier tentative slot we wait for, read again. */
static void lower_read(struct opslot *o)
{
	uint64_t w = word_at(o, OB_WORD);

	if (w != o->ins.tent_seen) {
		op_retry(o); /* committed, withdrawn or replaced */
		return;
	}
	if (rkv_coarse_ms() - o->ins.tent_seen_ms >= o->p->g.lease_ms) {
		o->c->st.lock_steals++;
		round_begin(o);
		cas(o, o->ins.tent_seen_pos, w, 0);
		round_post(o, INS_CLEAR);
		return;
	}
	wait_lower(o);
}

void ins_round(struct opslot *o)
{
	switch ((enum ins_step)o->step) {
	case INS_CAS:
		cas_done(o);
		return;
	case INS_REREAD:
	case INS_STEAL: /* cleared or not, the buckets behind it are fresh */
		decide(o);
		return;
	case INS_VERIFY:
		verified(o);
		return;
	case INS_COMMIT:
		committed(o);
		return;
	case INS_WITHDRAW:
		withdrawn(o);
		return;
	case INS_LOWER:
		lower_read(o);
		return;
	case INS_CLEAR:
		op_retry(o);
		return;
	case INS_WAIT_HIGHER:
	case INS_WAIT_LOWER:
	case INS_WAIT_FULL:
	case INS_WAIT_GROW:
		break; /* timers, not rounds */
	}
}

void ins_timer(struct opslot *o)
{
	round_begin(o);
	switch ((enum ins_step)o->step) {
	case INS_WAIT_GROW: /* (op_timer's, but to be sure) */
	case INS_WAIT_FULL: /* a full pair of buckets: again */
		op_retry(o);
		return;
	case INS_WAIT_LOWER:
		rd_word(o, o->ins.tent_seen_pos);
		round_post(o, INS_LOWER);
		return;
	default: /* INS_WAIT_HIGHER */
		rd_buckets(o);
		round_post(o, INS_REREAD);
		return;
	}
}
