/* SPDX-License-Identifier: MIT */
/*
 * op_mig.c - the partition fence of live migration (docs/DESIGN.md §9.5).
 *
 * Every round that reads a key's buckets also reads its partition's word
 * of the server's partition table (rd_buckets), after the buckets.  The
 * migration (client/migrate.c) freezes a partition on its old server
 * before it moves any key of it, marks each key's slot moved before
 * copying it, and says gone (with the new map's epoch) once every key is
 * on the new server.  So:
 *   - owned: the buckets just read are the truth; go on;
 *   - frozen: some keys may be moved already and new ones must not be
 *     inserted here: the op holds nothing and looks again every
 *     millisecond (bounded by the op timeout);
 *   - gone: the client's map is out of date for this partition: ask it
 *     (client->moved: the map in etcd) where the partition went, and
 *     start the op again there; the asking is done by mig_route at the
 *     top of the next progress call (like peers_heal), since it may read
 *     etcd and connect to a new server, which drive progress themselves.
 * An insert whose tentative slot is in place withdraws it first.  The
 * cached paths need no word: a cached slot word that is still the word
 * they expect was not marked moved, so the partition has not gone.
 */
#include "client.h"

#include <errno.h>

#include "rtime.h"

int mig_fenced(struct opslot *o)
{
	uint64_t w = word_at(o, OB_PART);

	if (o->c->mig || rkv_part_state(w) == RKV_PART_OWNED)
		return 0;
	o->fence = w;
	return 1;
}

void mig_resolve(struct opslot *o)
{
	struct rkv_client *c = o->c;

	if (rkv_part_state(o->fence) == RKV_PART_FROZEN) {
		c->st.mig_waits++;
		op_wait(o, MIG_WAIT);
		op_clock(o, rkv_now_ms()); /* the timer's own clock */
		return;
	}
	/* where it went is found outside this progress pass: reading etcd
	 * or connecting drives progress itself */
	c->mig_moved++;
	op_wait(o, MIG_MOVED);
}

void mig_route(struct rkv_client *c)
{
	if (!c->mig_moved || c->mig_routing)
		return;
	c->mig_routing = 1;
	c->mig_moved = 0; /* ops that meet a move meanwhile count again */
	for (unsigned i = 0; i < c->nslots; i++) {
		struct opslot *o = &c->slots[i];
		int rc;

		if (o->state != OP_WAIT_TIMER || o->step != MIG_MOVED)
			continue;
		o->state = OP_IO;
		rc = c->moved ? c->moved(c, o->part, rkv_part_epoch(o->fence),
					 o->p->idx)
			      : -ESTALE;
		if (rc < 0) {
			op_finish(o, rc);
			continue;
		}
		c->st.redirects++;
		op_redirect(o, (unsigned)rc);
	}
	c->mig_routing = 0;
}
