/* SPDX-License-Identifier: MIT */
/*
 * migrate.h - live migration between two cluster maps (docs/DESIGN.md
 * §9.5), for `rkv admin join|drain` (tools/rkv_admin.c).  Not part of the
 * installed API.
 *
 * rkv_mig_run moves every partition whose owner differs between from
 * (epoch E) and to (epoch E+1) from its old server to its new one, a
 * batch of partitions at a time, with one-sided operations only: freeze
 * the batch on the old server (its partition words), mark each key's slot
 * moved and copy the key to the new server, then own the batch there and
 * say gone (epoch E+1) on the old one.  Clients keep working: a key of a
 * frozen batch waits (at most the batch's time), one of a gone partition
 * is followed to the new server.  Then rkv_mig_cleanup empties the moved
 * slots of the old servers and returns their blocks.  Both are safe to
 * run again after a crash or an error (a partition already gone is
 * skipped, a moved slot copied again).
 *
 * The caller publishes `to` as the cluster's map between the two (the
 * data path does not need it: gone partitions redirect), and keeps `to`
 * readable meanwhile as the cluster's next map (clients that meet a gone
 * partition read it).
 */
#ifndef RKV_CLIENT_MIGRATE_H
#define RKV_CLIENT_MIGRATE_H

#include <stdint.h>

#include "cmap.h"
#include "rkv.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rkv_mig_progress {
	unsigned parts_done, parts_total; /* partitions moved / to move */
	uint64_t keys_moved;              /* keys copied so far */
	uint64_t bytes_moved;             /* their values' bytes */
	uint64_t freeze_max_ms;           /* longest a batch was frozen */
	uint64_t elapsed_ms;
	uint64_t blocks_freed;            /* cleanup: slots emptied */
	const char *source;               /* the server being moved from */
};

struct rkv_mig_opts {
	const struct rkv_client_opts *base; /* secret, timeouts, transport */
	const struct rkv_map *from, *to;    /* to->epoch > from->epoch */
	unsigned batch;                     /* partitions per freeze (0: 64) */
	void (*progress)(void *arg, const struct rkv_mig_progress *p);
	void *arg;
};

/* Move the keys.  0, or -errno with why (one line). */
int rkv_mig_run(const struct rkv_mig_opts *o, struct rkv_mig_progress *out,
		char *why, size_t why_len);
/* How far a migration is: out->parts_done of out->parts_total partitions
 * gone from their old servers (their partition words).  0, or -errno
 * with why (a server down: its partitions cannot be counted). */
int rkv_mig_progress_read(const struct rkv_mig_opts *o,
			  struct rkv_mig_progress *out, char *why,
			  size_t why_len);
/* Empty the moved slots of o->from's servers, returning their blocks.
 * 0, or -errno with why. */
int rkv_mig_cleanup(const struct rkv_mig_opts *o,
		    struct rkv_mig_progress *out, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif /* RKV_CLIENT_MIGRATE_H */
