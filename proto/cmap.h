/* SPDX-License-Identifier: MIT */
/*
 * cmap.h - the cluster map: which server owns which key.
 *
 * A map is an epoch and a set of servers, each a stable name and an
 * address.  Placement depends on the names only (docs/DESIGN.md §6):
 * a key's route hash picks one of RKV_MAP_PARTS partitions (its top 12
 * bits), and each partition belongs to the server whose name scores
 * highest for it (rendezvous, or highest-random-weight, hashing).  So the
 * order servers are listed in changes nothing, a server added to N takes
 * about 1/(N+1) of the partitions, each from the server that had it, and
 * a server removed gives up exactly its own.  The owner table is computed
 * once per map, so routing a key is one shift and one load.
 *
 * Names: 1..RKV_SERVER_NAME_MAX-1 bytes of [A-Za-z0-9._:-] and brackets
 * (an IPv6 address).  A server
 * listed by address only is named after the address without its
 * provider ("tcp://10.0.0.1:7000" is "10.0.0.1:7000"), which is also
 * rkv-server's default --name.
 *
 * Text form (cluster files, and the map rkv admin keeps in etcd): one
 * server per line, "NAME ADDRESS" or "ADDRESS", blank lines and #
 * comments ignored, and optionally a first line "epoch N" (N >= 1; no
 * such line: epoch 0, a static map) and, before the servers, a line
 * "replicas R" (1..3; none: 1).  A partition's R replicas are the R
 * servers with the highest rendezvous scores for it, in score order: the
 * first is its owner (the primary).  R above the number of servers is
 * refused.
 *
 * A map of R >= 2 may hold one server *in transit*: a server line
 * "NAME ADDRESS joining" or "NAME ADDRESS leaving" (rkv admin join and
 * drain, docs/DESIGN.md §9.7).  Its replica sets are those of the map
 * without the server joining (or with the server leaving), the primary
 * first, and, where the map after the move places a server that is not
 * in that set, that server as one more backup at the end: R + 1 copies
 * while it catches up, the primary unchanged.  The text form of such a
 * map is refused by librkv builds that predate it.
 *
 * A server line may end in "boot=HEX" (rkv admin records each member's
 * run, common/registry.h): a server that restarted since holds none of
 * its copies, and rkv admin fails it over rather than trust them.
 */
#ifndef RKV_PROTO_CMAP_H
#define RKV_PROTO_CMAP_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RKV_MAP_PART_BITS 12u
#define RKV_MAP_PARTS (1u << RKV_MAP_PART_BITS)
_Static_assert(RKV_MAP_PARTS == RKV_PART_WORDS,
	       "one partition table word per partition (layout.h)");
#define RKV_MAP_SERVERS_MAX 256u
#define RKV_SERVER_NAME_MAX 64u  /* bytes, NUL included */
#define RKV_MAP_ADDR_MAX 300u    /* bytes, NUL included */
#define RKV_MAP_REPLICAS_MAX 3u  /* the replication factor's bound */
/* a replica set's bound: r, and one more while a server is in transit */
#define RKV_MAP_SET_MAX (RKV_MAP_REPLICAS_MAX + 1u)

enum rkv_map_state {
	RKV_MAP_MEMBER = 0,
	RKV_MAP_JOINING,         /* copies being made: never a primary */
	RKV_MAP_LEAVING,         /* its copies being made elsewhere */
};

struct rkv_map_server {
	char name[RKV_SERVER_NAME_MAX];
	char addr[RKV_MAP_ADDR_MAX];
	uint64_t name_hash;      /* of the name: its rendezvous seed */
	int named;               /* the name was given, not derived */
	int state;               /* enum rkv_map_state */
	/* the run of the server the map was made with (its registration's
	 * boot; 0: not recorded).  A server starts empty: one registered
	 * with another boot holds none of the copies the map gives it. */
	uint64_t boot;
};

struct rkv_map {
	uint64_t epoch;          /* 0: a static map (file, --servers) */
	unsigned n;
	unsigned replicas;       /* r, 1..RKV_MAP_REPLICAS_MAX (0 reads as 1) */
	struct rkv_map_server srv[RKV_MAP_SERVERS_MAX];
	uint16_t owner[RKV_MAP_PARTS]; /* partition -> index in srv */
	/* partition -> its replicas, indexes in srv in rendezvous score
	 * order (rep[p][0] == owner[p], the primary); nrep[p] are set:
	 * rkv_map_r, or one more where a server in transit is the extra */
	uint16_t rep[RKV_MAP_PARTS][RKV_MAP_SET_MAX];
	uint8_t nrep[RKV_MAP_PARTS];
};

/* The partition of a key's route hash (rkv_key_hash's route). */
static inline unsigned rkv_map_part(uint64_t route)
{
	return (unsigned)(route >> (64 - RKV_MAP_PART_BITS));
}

/* The index in m->srv of the server that owns a key (m placed, n > 0). */
static inline unsigned rkv_map_owner(const struct rkv_map *m, uint64_t route)
{
	return m->owner[rkv_map_part(route)];
}

/* 0 if name is a valid server name, else -EINVAL. */
int rkv_server_name_check(const char *name);
/* The name a server listed as addr only has ("PROVIDER://REST" ->
 * "REST").  0, or -EINVAL if that is no valid name. */
int rkv_server_name_from_addr(const char *addr, char *name, size_t cap);

/* An empty map of epoch 0. */
void rkv_map_init(struct rkv_map *m);
/* Add a server (name NULL: derived from addr).  0, or -EINVAL with the
 * reason in why: a bad name or address, a name or address listed twice,
 * too many servers.  Call rkv_map_place once all are added. */
int rkv_map_add(struct rkv_map *m, const char *name, const char *addr,
		char *why, size_t why_len);
/* Compute the owner and replica tables (no-op for an empty map). */
void rkv_map_place(struct rkv_map *m);
/* The replication factor r of a placed map: min(replicas, n), at least 1.
 * (In transit with n - 1 < r servers, the sets before the move have the
 * n - 1 others, and the server joining as the r-th.) */
unsigned rkv_map_r(const struct rkv_map *m);
/* The replicas of partition part, primary first (rkv_map_nrep of them). */
static inline const uint16_t *rkv_map_replicas(const struct rkv_map *m,
					       unsigned part)
{
	return m->rep[part];
}
/* How many: rkv_map_r, or one more during a transit. */
static inline unsigned rkv_map_nrep(const struct rkv_map *m, unsigned part)
{
	return m->nrep[part];
}
/* The index of the server in transit (joining or leaving), or -1. */
int rkv_map_transit(const struct rkv_map *m);
/* Whether server index s is in partition part's replica set. */
int rkv_map_holds(const struct rkv_map *m, unsigned part, unsigned s);
/* The rendezvous score of server s for partition part: the owner is the
 * server with the highest (the order of the replicas, later, too). */
uint64_t rkv_map_score(const struct rkv_map_server *s, unsigned part);

/* Parse the text form (see above) into m, placed.  0, or -EINVAL with
 * "line N: reason" in why. */
int rkv_map_parse(const char *text, struct rkv_map *m, char *why,
		  size_t why_len);
/* Parse a comma-separated list of "ADDRESS" or "NAME=ADDRESS" items
 * (--servers) into m, placed.  0 or -EINVAL with why. */
int rkv_map_parse_list(const char *list, struct rkv_map *m, char *why,
		       size_t why_len);
/* The text form of m (an "epoch" line when m->epoch, then "NAME ADDRESS"
 * lines, " joining" or " leaving" after a server in transit) into buf.  Returns its length, or -ENOSPC. */
int rkv_map_format(const struct rkv_map *m, char *buf, size_t cap);
/* The index of the server named name, or -1. */
int rkv_map_find(const struct rkv_map *m, const char *name);

#ifdef __cplusplus
}
#endif
#endif
