/* SPDX-License-Identifier: MIT */
/*
 * conn.h - librkv's servers: the list a client was given, and for each a
 * peer (the client's handle on that server): its link, its control
 * channel, and the geometry its HELLO_REPLY described.
 */
#ifndef RKV_CLIENT_CONN_H
#define RKV_CLIENT_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "cmap.h"
#include "link_ctrl.h"
#include "layout.h"

#define MAX_SERVERS RKV_MAP_SERVERS_MAX
#define PEER_ADDR_MAX RKV_MAP_ADDR_MAX
#define PEER_LABEL_MAX (RKV_SERVER_NAME_MAX + RKV_MAP_ADDR_MAX + 4)

/* A server's regions and rules, from HELLO_REPLY (rkeys: ctrl.keys). */
struct geom {
	uint32_t client_id;       /* stamped into our blocks' headers */
	uint64_t index_addr, nbuckets;
	uint32_t bucket_slots;    /* slots a bucket holds (layout.h) */
	/* levels (layout.h "Levels"): nbuckets is level 0's; levels is the
	 * count the latest level word read said (only grows while the
	 * connection lasts); levels_max 1: a fixed index, no level word */
	unsigned levels_max, levels;
	uint64_t data_addr, data_len;
	uint32_t chunk_size, lease_ms, grace_ms;
	uint32_t big_grace_ms;    /* a block over RKV_SMALL_BLOCK_MAX waits */
	uint32_t max_value;      /* the server's --max-value */
	uint64_t counters_addr;   /* counter region (0 words: none) */
	uint32_t counters_count;
	int read_only;            /* the server granted read access only */
	int leased;               /* a cluster member: its lease word */
};

struct peer {
	unsigned idx;             /* position in the client's map */
	char addr[PEER_ADDR_MAX];
	char name[RKV_SERVER_NAME_MAX]; /* its name in the map */
	char label[PEER_LABEL_MAX]; /* "NAME (ADDR)" or ADDR: for messages */
	int check_name;           /* the server must answer with name */
	struct link link;
	struct ctrl ctrl;
	struct geom g;
	/* down: 0 while connected, else the -errno it went down with (the
	 * error its keys' ops get) until a reconnect succeeds */
	int down;
	uint64_t retry_ms;        /* next reconnect attempt */
	unsigned backoff_ms;      /* wait after the next failed attempt */
	uint32_t fenced_at;       /* HELLO refused -ESTALE: the server's fence
				   * epoch (a failover's next map) */
	uint32_t hello_epoch;     /* the map epoch the connection was made
				   * under (a fence that closes it is of a
				   * later one) */
	int out_of_map;           /* the client's map no longer has it (failed
				   * over): not reconnected */
	unsigned fenced_tries;    /* reconnects a server that fenced us reset
				   * in a row (peers.c reconnect) */
	/* g.leased: the latest lease word read (CLOCK_REALTIME ms; 0: none
	 * yet), and when (coarse ms) a round last carried a READ of it */
	uint64_t lease_until;
	uint64_t lease_asked_ms;
	int grow_busy;            /* a GROW awaits its reply (op_ins.c) */
};

/* What connecting needs from the client's options. */
struct conn_opts {
	const char *name;         /* HELLO name */
	int read_only;
	unsigned timeout_ms;      /* connect and each handshake step */
	const unsigned char *secret; /* NULL: none */
	size_t secret_len;
	uint32_t map_epoch;       /* HELLO: the client's map epoch (0: none) */
};

/* The secret of the options (bytes, or a file like rkv-server's
 * --secret-file), copied into *out (rkv_malloc; NULL: none).  why gets
 * the reason of a failure. */
int conn_load_secret(const void *secret, size_t secret_len,
		     const char *secret_file, unsigned char **out,
		     size_t *out_len, char *why, size_t why_len);

/* Set p up as server idx of the map (s: its entry), its control buffers
 * at ctrl_mem.  check_name: the server must call itself s->name. */
void peer_init(struct peer *p, struct engine *e, unsigned idx,
	       const struct rkv_map_server *s, int check_name,
	       char *ctrl_mem);
/* Connect, HELLO, authenticate, take the geometry.  0 or -errno (the
 * reason logged): -ENXIO when the server has another name than the map
 * gives it. */
int peer_connect(struct peer *p, const struct conn_opts *o);
/* Drop a failed connection (its WRs are dropped without completions) so
 * peer_connect may run again; the control channel starts afresh. */
void peer_reset(struct peer *p);
/* Whether err, from peer_connect or a failed link, means the server is
 * down or unreachable (try again later) rather than refusing us. */
int peer_err_transient(int err);

static inline uint64_t peer_slot_addr(const struct peer *p, uint64_t bucket,
				      unsigned i)
{
	return p->g.index_addr + (bucket * p->g.bucket_slots + i) * 8u;
}

/* The slot at position pos of a key's two buckets b[0], b[1] (bucket 0's
 * slots, then bucket 1's); bucket_slots is a power of two. */
static inline uint64_t peer_pos_addr(const struct peer *p, const uint64_t *b,
				     unsigned pos)
{
	unsigned n = p->g.bucket_slots;

	return peer_slot_addr(p, b[pos >> __builtin_ctz(n)], pos & (n - 1));
}

/* Slots of p's index: of the levels in use as far as we know. */
static inline uint64_t peer_nslots(const struct peer *p)
{
	return rkv_index_nbuckets(p->g.nbuckets, p->g.levels) *
	       p->g.bucket_slots;
}

/*
 * A level word w READ from p behind buckets of known levels (layout.h
 * "Levels"): whether it shows a level more (the reader must start again
 * over all of them); p's count is raised to it.
 */
static inline int peer_levels_seen(struct peer *p, uint64_t w,
				   unsigned known)
{
	unsigned lv = rkv_level_word_levels(w);

	if (p->g.levels_max <= 1 || lv <= known)
		return 0; /* (never fewer: the word only grows) */
	if (lv > p->g.levels_max)
		lv = p->g.levels_max;
	if (lv > p->g.levels)
		p->g.levels = lv;
	return 1;
}

/* Buckets of p's largest index: its layout (the table follows them). */
static inline uint64_t peer_nbuckets_max(const struct peer *p)
{
	return rkv_index_nbuckets(p->g.nbuckets, p->g.levels_max);
}

/* A key's candidate buckets in the levels in use (b: at least
 * RKV_KEY_BUCKETS_MAX); returns how many. */
static inline unsigned peer_key_buckets(const struct peer *p,
					const struct rkv_key_hash *kh,
					uint64_t *b)
{
	return rkv_key_level_buckets(kh, p->g.nbuckets, p->g.levels, b);
}

/* Bytes of one bucket of p's index. */
static inline uint32_t peer_bucket_bytes(const struct peer *p)
{
	return p->g.bucket_slots * 8u;
}

/* The lease word (layout.h: the index region's tail). */
static inline uint64_t peer_lease_addr(const struct peer *p)
{
	return p->g.index_addr +
	       rkv_index_lease_off(peer_nbuckets_max(p), p->g.bucket_slots);
}

/* The level word (layout.h "Levels"). */
static inline uint64_t peer_level_addr(const struct peer *p)
{
	return p->g.index_addr +
	       rkv_index_level_off(peer_nbuckets_max(p), p->g.bucket_slots);
}

/* The partition table's word of partition part (layout.h). */
static inline uint64_t peer_part_addr(const struct peer *p, unsigned part)
{
	return p->g.index_addr +
	       rkv_index_part_off(peer_nbuckets_max(p), p->g.bucket_slots) +
	       part * 8u;
}

#endif
