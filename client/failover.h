/* SPDX-License-Identifier: MIT */
/*
 * failover.h - promoting the backups of a dead server (docs/DESIGN.md
 * §9.7, failover), for `rkv admin failover` (tools/rkv_admin.c).  Not
 * part of the installed API.
 *
 * The coordinator has the map `from` (epoch E, with the dead server) and
 * `to` (epoch E+1, without it: each replica set loses the dead server and
 * gains the next server by score at its end).  Then:
 *   1. rkv_fo_fence: every server of `to` is fenced at E+1 (FENCE): from
 *      then on no one-sided operation of a client of an older map runs
 *      there, and such clients are refused until they read the new map.
 *   2. rkv_fo_reconcile: with that exclusive access, every key of the
 *      partitions the dead server held is made consistent on the
 *      survivors: the new primary's copy (the highest sequence there)
 *      wins; a copy anywhere with a higher sequence (a write that was
 *      never acknowledged: it had not reached the new primary) and the
 *      new primary's other copies are emptied, a lock left by a fenced
 *      writer is released, and a key that a surviving backup holds
 *      differently is written again through the new map (a replicated
 *      rmw that writes the value it reads), so that every survivor holds
 *      the new primary's value at its sequence.
 *   3. the caller publishes `to`;
 *   4. rkv_fo_rebuild: every live key of those partitions is written
 *      again the same way, which puts it on the server that entered the
 *      replica set; clients work meanwhile (it is an ordinary write).
 * Each step may run again after a crash or an error.
 *
 * The sweep (rkv admin sweep) is the same fenced step with the same
 * servers: between the fence and the publish nobody writes (the old
 * map's clients are fenced, the new map is not out), so the reconcile
 * may also drop the tombstones of deleted keys, which at r > 1 keep
 * their slots (docs/DESIGN.md §9.7, "The sweep").
 */
#ifndef RKV_CLIENT_FAILOVER_H
#define RKV_CLIENT_FAILOVER_H

#include <stdint.h>

#include "cmap.h"
#include "rkv.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rkv_fo_stats {
	uint64_t copies_seen;      /* slots of the partitions, all servers */
	uint64_t keys;             /* distinct keys among them */
	uint64_t emptied;          /* copies emptied (never acknowledged) */
	uint64_t unlocked;         /* locks of fenced writers released */
	uint64_t fixed;            /* keys written again before publishing */
	uint64_t rebuilt;          /* keys written again after */
	uint64_t dropped;          /* copies emptied on servers that left
				    * their key's replica set (cleanup) */
	uint64_t swept;            /* deleted keys whose copies the sweep
				    * emptied, and ... */
	uint64_t swept_copies;     /* ... those copies */
	uint64_t elapsed_ms;
};

struct rkv_fo_opts {
	const struct rkv_client_opts *base; /* secret, timeouts */
	const struct rkv_map *from, *to;    /* to->epoch == from->epoch + 1 */
	/* the partitions to reconcile and rebuild (1: the dead server held
	 * a copy): rkv_fo_parts fills it */
	const uint8_t *parts;
	/* fence from's servers that to lacks too (a drain's: alive) */
	int fence_from;
	/* the reconcile also empties every copy of a key whose primary
	 * holds a tombstone, and returns their blocks (rkv admin sweep:
	 * to is from's servers at the next epoch) */
	int sweep;
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *arg;
};

/* parts[p] = 1 for every partition whose replica set in from holds the
 * server named dead; returns how many. */
unsigned rkv_fo_parts(const struct rkv_map *from, const char *dead,
		      uint8_t *parts);
/* parts[p] = 1 for every partition whose replicas (by name and order)
 * differ between from and to; returns how many. */
unsigned rkv_fo_parts_moved(const struct rkv_map *from,
			    const struct rkv_map *to, uint8_t *parts);
int rkv_fo_fence(const struct rkv_fo_opts *o, char *why, size_t why_len);
/* The partition words of parts on every server of to: OWNED where it
 * holds a copy, GONE (at to's epoch) where not.  Between the fence and
 * the publish. */
int rkv_fo_own(const struct rkv_fo_opts *o, char *why, size_t why_len);
int rkv_fo_reconcile(const struct rkv_fo_opts *o, struct rkv_fo_stats *st,
		     char *why, size_t why_len);
int rkv_fo_rebuild(const struct rkv_fo_opts *o, struct rkv_fo_stats *st,
		   char *why, size_t why_len);
/* After to is published: every copy of parts on a server of to that is
 * not in its key's replica set there (a join or drain moved the set) is
 * emptied and its block returned. */
int rkv_fo_cleanup(const struct rkv_fo_opts *o, struct rkv_fo_stats *st,
		   char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif /* RKV_CLIENT_FAILOVER_H */
