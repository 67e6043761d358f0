/* SPDX-License-Identifier: MIT */
/*
 * client.h - the client object: what every layer of librkv hangs off
 * (engine.h has the map of the layers).  Only the sources of client/ include it;
 * the layers above the core (client/ps/) use rkv_ext.h.
 *
 * Ownership: a client owns one engine (transport context, CQ, one local
 * registered region carved into per-slot buffers and the control buffers
 * of every server), its peers and their space, the op slots, and the
 * location cache.
 */
#ifndef RKV_CLIENT_CLIENT_H
#define RKV_CLIENT_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "cmap.h"
#include "op.h"
#include "rkv.h"
#include "rkv_ext.h"

#define AUX_CALLS 4           /* one-sided word calls (words.c) */
/* Blocks up to this size go through a slot's own buffers; larger ones
 * through buffers registered for the op (bigbuf.c). */
#define INLINE_BLOCK RKV_SMALL_BLOCK_MAX
/* The largest value whose block is always inline (the largest key). */
#define INLINE_VALUE (INLINE_BLOCK - RKV_BLOCK_HDR_SIZE - RKV_KEY_MAX)

/* A registered buffer for a big block (bigbuf.c). */
struct bigbuf {
	char *p;                 /* NULL: entry unused */
	size_t len;
	struct rkv_mr *mr;
	int busy;                /* held by an op */
};

/* Device staging (dev.c): blocks of device ops are READ into rd and new
 * blocks built in nb, both registered device memory. */
struct cgpu {
	int gpu;                 /* CUDA device of the staging */
	char *mem;               /* rkv_tp_mem_alloc_gpu */
	size_t len;
	struct rkv_mr *mr;       /* local access */
	char *rd;                /* blocks read: op_buf_size - OB_BLOCKS */
	char *nb;                /* the new block: new_blk_size */
	struct rkv_block_hdr *hk; /* host copy of header + key (encode) */
	size_t head;             /* DGET: value bytes [0, head) go to ... */
	void *head_buf;          /* ... this host buffer, the rest to
				  * op->buf; 0: all to op->buf */
};

/* Location cache entry (cache.c).  A get matches it on h1, key_len and
 * server (its index came from h2); a write also compares the key bytes. */
struct cache_ent {
	uint64_t h1;             /* the key's first hash */
	uint16_t key_len;
	uint16_t server;
	uint32_t blk_size;
	uint64_t slot_addr;      /* remote address of the slot word */
	uint64_t slot;           /* slot value last seen */
	unsigned pos;            /* position in its two buckets */
	uint32_t gen;            /* bumped whenever key changes hands */
	uint64_t t_ms;           /* when it was seen (coarse, no later) */
	char *key;               /* NULL: empty entry */
	int info_known;          /* info describes the block slot names */
	struct blk_info info;
};

/* A one-sided word call (words.c). */
struct aux_call {
	struct wr_ctx w;
	int busy;                /* posted, completion not yet seen */
	int abandoned;           /* its caller gave up (timeout) */
	int done;                /* completed */
	int status;              /* 0 or -errno */
	struct peer *p;
	uint64_t *word;          /* registered result word */
};

struct rkv_client {
	struct rkv_client_opts opts;
	struct engine eng;
	struct rkv_client_stats st;
	/* local registered memory */
	char *lmem;
	size_t lmem_len;
	size_t op_buf_size;      /* per slot */
	char *new_blk;           /* per slot new-block buffers */
	size_t new_blk_size;
	/* servers: the map, and a peer per server of it (and of the maps
	 * that came after it: cluster.c) */
	struct rkv_map *map;
	struct rkv_map *next;    /* the map a migration moves to, or NULL */
	unsigned r;              /* replication factor (rkv_map_r) */
	unsigned nlegs;          /* legs per slot: r when r > 1 (r - 1
				  * backups, and one more for a server in
				  * transit, cmap.h), else 0 */
	struct leg *legs;        /* REPL_LEGS per slot when r > 1 */
	uint16_t owner[RKV_MAP_PARTS]; /* partition -> peer index */
	/* partition -> its replicas' peer indices, primary first (r > 1),
	 * nrep[p] of them */
	uint16_t rep[RKV_MAP_PARTS][RKV_MAP_SET_MAX];
	uint8_t nrep[RKV_MAP_PARTS];
	struct peer *peer;       /* peer[i] for i < map->n: map->srv[i] */
	struct space *space;     /* space[i]: ours on peer[i] */
	struct link *links[MAX_SERVERS];
	unsigned nsrv;           /* peers in use */
	unsigned peer_cap;       /* peers there is room for (nsrv + spare) */
	char *ctrl_mem;          /* CTRL_MEM bytes per peer, registered */
	/* a partition went elsewhere (op_mig.c): the peer index it is on
	 * now, or -errno (cluster.c; NULL: a static map) */
	int (*moved)(struct rkv_client *c, unsigned part, uint32_t epoch,
		     unsigned from);
	int mig;                 /* a migration's own client: no fence */
	unsigned mig_moved;      /* ops waiting in MIG_MOVED (op_mig.c) */
	int mig_routing;         /* mig_route is running */
	unsigned ndown;          /* peers down (peers.c) */
	int healing;             /* peers_heal is running */
	unsigned links_failed_seen; /* eng.links_failed at the last heal */
	uint64_t map_poll_ms;     /* next read of etcd's map while down */
	/* a server refused us as a client of an old map (a failover fenced
	 * it at this epoch): until the map is that new, no op is served by
	 * the old one (they wait, op.c) */
	uint32_t newer_epoch;
	/* an op found a server's lease lapsed (op_lease_ok) at this coarse
	 * ms: peers_heal reads etcd's map for a while */
	uint64_t lease_lapsed_ms;
	const struct rkv_map *given_map; /* client_create_map, until taken */
	/* operation slots */
	struct opslot *slots;
	unsigned nslots;
	unsigned inflight;
	struct opslot *done_head, *done_tail;
	/* location cache */
	struct cache_ent *cache;
	unsigned cache_n;        /* power of two */
	unsigned char *secret;   /* opts' secret, copied; NULL: none */
	size_t secret_len;
	struct aux_call aux[AUX_CALLS]; /* words.c */
	struct cgpu *gpu;        /* device staging (dev.c); NULL until used */
	struct scan *scan;       /* scan buffers (scan.c); NULL until used */
	struct bigbuf *big;      /* big-block buffers (bigbuf.c) */
	unsigned nbig;
};

/* Peers a client whose map is in etcd keeps room for, beyond its map's
 * servers: servers that join later (cluster.c). */
#define PEER_SPARE 16u

/* words.c: post wr (one signaled WR; into a call's aux word when
 * wr->local is NULL, *val gets that word) on p and wait for it, within
 * the op timeout.  0 or -errno. */
int aux_run(struct rkv_client *c, struct peer *p, struct rkv_wr *wr,
	    uint64_t *val);
/* The same for the n WRs of wr[] (each with its own local buffer), in one
 * doorbell, only the last signaled. */
int aux_run_n(struct rkv_client *c, struct peer *p, struct rkv_wr *wr,
	      unsigned n, uint64_t *val);
/* words.c: READ p's level word (layout.h "Levels") and raise the levels
 * we know of p to it: a walk of the index that starts after this covers
 * every key present then.  0, -EPROTO (a bad word) or as aux_run. */
int aux_levels(struct rkv_client *c, struct peer *p);

/* Log through the client's callback (engine.c). */
#define clog_(c, level, ...) eng_log(&(c)->eng, (level), __VA_ARGS__)

/* bigbuf.c: the client's pool of registered buffers for big blocks */
int bigbuf_init(struct rkv_client *c);
void bigbuf_fini(struct rkv_client *c);
/* A buffer of at least len bytes (an idle one up to 4 times that, or a
 * new one), or NULL (out of memory, registration refused). */
struct bigbuf *bigbuf_get(struct rkv_client *c, size_t len);
void bigbuf_put(struct rkv_client *c, struct bigbuf *b);
/* *b (NULL or held) holds at least len bytes: swapped for a bigger one
 * when it does not (contents not kept).  0 or -ENOMEM. */
int bigbuf_hold(struct rkv_client *c, struct bigbuf **b, size_t len);

/* api.c */
int client_progress(struct rkv_client *c);
void client_idle(struct rkv_client *c, int progressed);
/* Queue op with kind k (x: its extension descriptor, or NULL). */
int client_submit(struct rkv_client *c, struct rkv_op *op,
		  const struct op_kind *k, struct rkv_ext_op *x);
/* Run one op to completion like the synchronous calls. */
int client_run(struct rkv_client *c, struct rkv_op *op,
	       const struct op_kind *k, struct rkv_ext_op *x);
/* Read-only: asked for (opts), or granted so by any server (a
 * read-only secret: the server decides). */
int client_read_only(const struct rkv_client *c);

/* peers.c: connecting to the map's servers, and reconnecting */
/* At create: connect to every server.  A server that is down or
 * unreachable stays down (its keys' ops fail with its error) and is
 * retried; any other refusal fails create, as does every server down. */
int peers_connect_all(struct rkv_client *c);
/* Set up peer i (< peer_cap) for server s, not connected. */
void peers_setup(struct rkv_client *c, unsigned i,
		 const struct rkv_map_server *s, int check_name);
/* The peer of server s (by name, then address), connected or down and
 * retried like any other; a new one is added.  Its index, or -ENOSPC
 * (no room left: PEER_SPARE) or -ENXIO (the name is another address). */
int peers_get(struct rkv_client *c, const struct rkv_map_server *s);
/* Peer p is in the map again (a server failed over, then joined): a
 * link that died while it was out is retried at once. */
void peers_back(struct rkv_client *c, struct peer *p);
/* From each progress call at the top (never from inside one): notice
 * links that failed; reconnect the down servers whose retry is due. */
void peers_heal(struct rkv_client *c);

/* client.c: every link whose endpoint its peer closed marked dead. */
void client_links_check(struct rkv_client *c);
/* client.c: rkv_client_create with the cluster map given (its epoch goes
 * in every HELLO; options' servers and cluster file ignored): the
 * failover's coordinator, a client of the next map. */
int client_create_map(const struct rkv_client_opts *opts,
		      const struct rkv_map *map, struct rkv_client **out);

/* cluster.c: the map of "etcd://HOST:PORT/CLUSTER" into c->map (the
 * reason logged).  0 or -errno. */
int cluster_load(struct rkv_client *c, const char *url);
/* client->moved of a client whose map is in etcd: a server said partition
 * part is gone from peer from since the map of epoch.  Reads the maps in
 * etcd when the client has none of that epoch (blocking, once per
 * epoch), points the partition at its owner there, and returns that
 * peer's index, or -errno (-ESTALE: no map says where it went). */
int cluster_moved(struct rkv_client *c, unsigned part, uint32_t epoch,
		  unsigned from);
/* The published map in etcd, adopted when newer than the client's (a
 * failover): 1 adopted, 0 not newer, or -errno. */
int cluster_poll(struct rkv_client *c);

/* dev.c */
int gpu_prepare(struct rkv_client *c, int gpu, const void *ptr, size_t len,
		const char *what);
void gpu_fini(struct rkv_client *c);
/* rkv_block_encode into device staging dst (value val, device memory,
 * may already be in place).  Returns the block size or 0 (-errno in
 * *err). */
uint32_t gpu_block_encode(struct opslot *o, char *dst, const void *val,
			  size_t val_len, uint64_t version, int *err);
/* rkv_block_decode of the block whose READ landed in device staging at
 * the position host buffer blk stands for (blk = o->buf + OB_BLOCKS +
 * off): copies header + key into blk, checks the checksum on the device.
 * *val is a device pointer. */
int gpu_block_decode(struct opslot *o, char *blk, size_t size,
		     const void **val, uint32_t *val_len,
		     const struct rkv_block_hdr **hdr);
/* A device get's value (verified, at device pointer v) to its buffers. */
int gpu_deliver(struct opslot *o, const void *v, uint32_t vl);

/* scan.c: free the scan buffers (rkv_client_destroy). */
void scan_fini(struct rkv_client *c);

/* cache.c */
int cache_init(struct rkv_client *c, unsigned n);
void cache_fini(struct rkv_client *c);
/* An entry younger than the grace period (trusted to name the key's slot) */
struct cache_ent *cache_find(struct rkv_client *c, const struct opslot *o);
/* An entry of any age whose hash, key length and server match, without
 * comparing the key bytes: a hint for readers, which re-check the slot
 * word and the key in the block they READ (the entry may be another key
 * of the same 64-bit hash: the block's key check refuses it, and
 * cache_drop then drops it). */
struct cache_ent *cache_find_any(struct rkv_client *c, const struct opslot *o);
/* A get through e (cache_find_any at its attempt, e->gen then gen) found
 * the block at blk (NULL: not in host memory) still named by slot and
 * holding its key: refresh e without comparing key bytes (the block
 * proved the key is e's), or store as cache_store if e changed hands
 * since. */
void cache_hit(struct rkv_client *c, const struct opslot *o,
	       struct cache_ent *e, uint32_t gen, uint64_t slot,
	       uint32_t blk_size, const char *blk);
/* bi: the block slot names (NULL: unknown) */
void cache_store(struct rkv_client *c, const struct opslot *o, unsigned pos,
		 uint64_t slot, uint32_t blk_size, const struct blk_info *bi);
/* Drop the entry that matches o's hash and key length, on any server and
 * whatever its key bytes (another key's entry is only a lost hint). */
void cache_drop(struct rkv_client *c, const struct opslot *o);
/* The same by key and server (a replicated write's legs): grace_ms 0 any
 * age, else trusted within it. */
struct cache_ent *cache_find_at(struct rkv_client *c,
				const struct rkv_key_hash *kh, const void *key,
				size_t key_len, unsigned server,
				uint32_t grace_ms);
void cache_store_at(struct rkv_client *c, const struct rkv_key_hash *kh,
		    const void *key, size_t key_len, unsigned server,
		    unsigned pos, uint64_t slot_addr, uint64_t slot,
		    uint32_t blk_size, const struct blk_info *bi);
void cache_drop_at(struct rkv_client *c, const struct rkv_key_hash *kh,
		   size_t key_len, unsigned server);
/* Forget every entry of server si (it reconnected: new regions). */
void cache_drop_server(struct rkv_client *c, unsigned si);

#endif
