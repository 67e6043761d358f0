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
 *     start the op again there.
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
	int rc;

	if (rkv_part_state(o->fence) == RKV_PART_FROZEN) {
		c->st.mig_waits++;
		op_wait(o, MIG_WAIT);
		o->t_round_ms = rkv_now_ms(); /* the timer's own clock */
		return;
	}
	rc = c->moved ? c->moved(c, o->part, rkv_part_epoch(o->fence),
				 o->p->idx)
		      : -ESTALE;
	if (rc < 0) {
		op_finish(o, rc);
		return;
	}
	c->st.redirects++;
	op_redirect(o, (unsigned)rc);
}
