/* SPDX-License-Identifier: MIT */
/*
 * server_internal.h - what the files of rkv-server share.
 *
 *   config.c          the settings table, command-line parsing and printing
 *   index.c           the index region (buckets of slots) and its scans
 *   space.c           the data-region space manager: chunk grants, block
 *                     returns, the grace queue and the free-space rebuild
 *                     after a client dies
 *   server.c          the server object: transport, registered regions,
 *                     lifecycle
 *   ctrl.c            the control plane: connections and control messages
 *   counter_region.c  the counter region's name table (COUNTER_OPEN)
 *   rotate.c          rkey rotation (--rotate-rkeys)
 *   datamem.c         where the data region lives: host or GPU (datamem.h)
 *   auth.c            the shared secret (--secret-file), nonces, HMAC-SHA256
 *   main.c            the command line, signals and the poll loop
 *
 * The server CPU never executes a get/put/delete/rmw: clients do those with
 * one-sided operations on the index and data regions, registered once at
 * start.  The server only serves control messages over SEND/RECV, from one
 * thread.  Pure parts (config, space, index scans) take no clock and do no
 * I/O so that unit tests drive them directly (space.c gets now_ms).
 */
#ifndef RKV_SERVER_SERVER_INTERNAL_H
#define RKV_SERVER_SERVER_INTERNAL_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "layout.h"
#include "log.h"
#include "msg.h"
#include "transport.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RKV_SRV_COMP "server"

/* ---------------------------------------------------------------- config */

#define RKV_SRV_ADDR_MAX 300
#define RKV_SRV_DEVICE_MAX 64
#define RKV_SRV_CHUNK_MAX RKV_CHUNK_ALLOC_MAX /* largest CHUNK_ALLOC / --chunk */
#define RKV_SRV_PATH_MAX 256
#define RKV_SRV_SECRET_MAX 4096       /* bytes of --secret-file */
#define RKV_SRV_SECRET_WEAK 16        /* shorter secrets get a warning */

struct rkv_srv_config {
	char listen[RKV_SRV_ADDR_MAX];  /* provider address */
	char name[RKV_SERVER_NAME_MAX]; /* "" = from the bound address */
	char cluster[RKV_SRV_PATH_MAX]; /* etcd://HOST:PORT/CLUSTER; "" none */
	uint64_t etcd_wait_s;           /* how long start waits for etcd */
	uint64_t memory;                /* data region bytes, multiple of 64 */
	uint64_t buckets;               /* power of two; 0 = from capacity */
	uint64_t bucket_slots;          /* slots a bucket: 8, 16, 32, 64 */
	uint64_t capacity;              /* keys; sizes buckets when no --buckets */
	uint64_t index_max;             /* bytes the index may grow to; 0:
					 * derived (config.c index_levels) */
	uint64_t lease_ms;              /* lock lease */
	uint64_t grace_ms;              /* block reuse grace, > lease_ms */
	uint64_t big_grace_ms;          /* the same for big blocks, >= grace */
	uint64_t idle_spin_us;          /* the loop stays awake this long after
					 * work, then blocks (main.c) */
	uint64_t chunk;                 /* default chunk bytes */
	uint64_t max_value;             /* largest value (HELLO_REPLY) */
	uint64_t max_clients;
	uint64_t max_clients_peer;      /* tcp/verbs: per peer address */
	uint64_t max_chunks;            /* chunk grants one client may hold */
	uint64_t max_inflight;          /* RECVs posted per connection */
	uint64_t counters;              /* counter words; 0 = no region */
	char secret_file[RKV_SRV_PATH_MAX]; /* "" = no authentication */
	char ro_secret_file[RKV_SRV_PATH_MAX]; /* read-only credentials */
	char data_memory[16];           /* "host", "gpu" or "gpu:N" */
	uint64_t rotate_s;              /* --rotate-rkeys period; 0 = never */
	char device[RKV_SRV_DEVICE_MAX]; /* verbs device; "" chooses */
	int64_t port;                   /* verbs port; 0 chooses */
	int64_t gid_index;              /* verbs GID index; -1 chooses */
	int64_t mtu;                    /* verbs path MTU; 0: the port's */
	int64_t traffic_class;          /* verbs RoCE v2 DSCP|ECN; -1 */
	int64_t service_level;          /* verbs IB SL; -1 */
	int64_t max_rd_atomic;          /* verbs; 0: min(device, 16) */
	char rkey_windows_s[8];         /* --rkey-windows auto|on|off */
	int check_fabric;               /* --check-fabric: report, exit */
	int64_t log_level;              /* enum rkv_log_level */
	uint64_t max_handshakes;        /* tcp/shm: 0 = from the fd limit */
	uint64_t max_handshakes_peer;   /* tcp: per peer address */
	char shm_mode_s[8];             /* --shm-mode, octal */
	char shm_group[64];             /* --shm-group: name or gid; "" none */
	char shm_allow[256];            /* --shm-allow-uid: uids or names */
	char metrics[RKV_SRV_ADDR_MAX]; /* --metrics HOST:PORT; "" none */
	/* derived by rkv_srv_config_parse */
	uint64_t nbuckets;              /* level 0's buckets (layout.h
					 * "Levels") */
	unsigned levels_max;            /* 1: a fixed index */
	unsigned shm_mode;              /* socket file mode */
	int rkey_windows;               /* RKV_WINDOWS_* */
	int shm_gid;                    /* -1: none */
	unsigned shm_nuids;
	uint32_t shm_uids[RKV_TP_SHM_UIDS];
	int data_gpu;                   /* -1: host; else CUDA device index */
	uint64_t set_mask;              /* bit i: row i given on the CLI */
	/* loaded by rkv_srv_secret_load (auth.c); 0 bytes: none.  A
	 * client proves one of the two, or is refused when either is set */
	unsigned char secret[RKV_SRV_SECRET_MAX];
	size_t secret_len;
	unsigned char ro_secret[RKV_SRV_SECRET_MAX]; /* read-only access */
	size_t ro_secret_len;
};

/* Fill cfg with the table's defaults (nbuckets derived). */
void rkv_srv_config_init(struct rkv_srv_config *cfg);
/*
 * Parse argv into cfg (which holds defaults).  Returns 0, 1 when --help was
 * asked (usage already written to out), or -EINVAL with a one-line message
 * naming the option in err.
 */
int rkv_srv_config_parse(struct rkv_srv_config *cfg, int argc, char **argv,
			 FILE *out, char *err, size_t errlen);
/* Parse one setting by its long name, as the CLI does (tests use it). */
int rkv_srv_config_set(struct rkv_srv_config *cfg, const char *name,
		       const char *value, char *err, size_t errlen);
/* Check relationships and derive nbuckets.  Returns 0 or -EINVAL + err. */
int rkv_srv_config_finish(struct rkv_srv_config *cfg, char *err,
			  size_t errlen);
void rkv_srv_config_usage(FILE *out, const char *prog);
/* The effective configuration, one block. */
void rkv_srv_config_print(const struct rkv_srv_config *cfg, FILE *out);
/* Next power of two >= max(ceil(keys / 6), 2). */
uint64_t rkv_srv_buckets_for(uint64_t keys, unsigned slots);
/* Buckets of the largest index (its layout: the partition table and the
 * tail follow them). */
static inline uint64_t rkv_srv_nbuckets_max(const struct rkv_srv_config *cfg)
{
	return rkv_index_nbuckets(cfg->nbuckets, cfg->levels_max);
}

/* The largest index's slots (every level). */
static inline uint64_t rkv_srv_nslots(const struct rkv_srv_config *cfg)
{
	return rkv_srv_nbuckets_max(cfg) * cfg->bucket_slots;
}

/* ------------------------------------------------------------------ auth */

/*
 * Read the shared secrets of cfg->secret_file and cfg->ro_secret_file
 * (those set) into cfg->secret and cfg->ro_secret: the file's bytes, one
 * trailing "\n" (or "\r\n") stripped.  Refused (-EPERM) when a file is
 * readable, writable or executable by group or others (st_mode & 077),
 * -EINVAL when empty, not a regular file or longer than
 * RKV_SRV_SECRET_MAX, or when both files hold the same secret (a
 * read-only credential that grants writing); -errno when unreadable; err
 * gets one line naming the option and the file.
 */
int rkv_srv_secret_load(struct rkv_srv_config *cfg, char *err, size_t errlen);
/* Whether clients must authenticate (either secret is set). */
static inline int rkv_srv_auth_on(const struct rkv_srv_config *cfg)
{
	return cfg->secret_len || cfg->ro_secret_len;
}
/* Fill nonce with RKV_AUTH_NONCE_LEN bytes from getrandom().  0 or -errno. */
int rkv_srv_auth_nonce(uint8_t *nonce);
/* What a response proves (constant time: CRYPTO_memcmp, and both
 * secrets are always tried). */
enum rkv_srv_access {
	RKV_SRV_ACCESS_NONE = 0,  /* neither secret: refused */
	RKV_SRV_ACCESS_FULL,      /* --secret-file */
	RKV_SRV_ACCESS_READ,      /* --read-only-secret-file */
};
enum rkv_srv_access rkv_srv_auth_check(const struct rkv_srv_config *cfg,
				       const uint8_t *nonce, const char *name,
				       const uint8_t *mac);
/* Wipe n bytes so the compiler cannot drop it (OPENSSL_cleanse). */
void rkv_srv_wipe(void *p, size_t n);
/* Wipe both secrets of cfg. */
void rkv_srv_wipe_secrets(struct rkv_srv_config *cfg);

/* ----------------------------------------------------------------- index */

/* Count non-empty slots (atomic loads: clients CAS them concurrently). */
uint64_t rkv_srv_index_count(const uint64_t *slots, uint64_t nslots);

typedef void (*rkv_srv_extent_fn)(uint64_t offset, uint32_t len, void *arg);
/* Call fn with the block extent named by every non-empty slot. */
void rkv_srv_index_scan(const uint64_t *slots, uint64_t nslots,
			rkv_srv_extent_fn fn, void *arg);

/*
 * Move the index (nslots slot words, then the partition table and the
 * tail; only the first used slots, those of the levels in use, can be
 * other than 0) from src to dst word by word for a fence at map epoch
 * epoch (shm), leaving src poisoned: partition words GONE at epoch first,
 * then every used slot word with its version bumped and the migration
 * marks set.
 */
void rkv_srv_index_fence_move(uint64_t *dst, uint64_t *src, uint64_t nslots,
			      uint64_t used, uint32_t epoch);

/* ----------------------------------------------------------------- space */

struct rkv_space;

struct rkv_space_extent {
	uint64_t offset; /* bytes, 64-aligned */
	uint64_t len;    /* bytes, multiple of 64 */
};

struct rkv_space_stats {
	uint64_t len;          /* region bytes */
	uint64_t free;         /* neither granted nor in grace */
	uint64_t grace;        /* waiting for the grace period */
	uint64_t grants;       /* chunks granted */
	uint64_t short_grants; /* granted shorter than asked (fragmented) */
	uint64_t returns;      /* extents accepted by rkv_space_return */
	uint64_t bad_returns;  /* extents refused as invalid */
	uint64_t stale_returns; /* refused: already free, in grace, or
				 * reclaimed and granted again (late or
				 * repeated returns) */
	uint64_t rebuilds;     /* reclaim passes */
	uint64_t rebuilt_bytes; /* bytes moved to grace by reclaim passes */
};

/*
 * A space manager for a data region of len bytes (multiple of 64) whose
 * freed units wait grace_ms before reuse, big_grace_ms (>= grace_ms) in
 * extents over RKV_SMALL_BLOCK_MAX.  Returns 0, -EINVAL, -ENOMEM.
 */
int rkv_space_create(uint64_t len, uint64_t grace_ms, uint64_t big_grace_ms,
		     struct rkv_space **out);
void rkv_space_destroy(struct rkv_space *sp);
/* Tests: extents longer than units wait the big grace (default:
 * RKV_SMALL_BLOCK_MAX / 64), so a small region can hold big ones. */
void rkv_space_set_big_units(struct rkv_space *sp, uint64_t units);
/*
 * Grant a contiguous free run of bytes (multiple of 64, > 0), next-fit;
 * when no run that long is free, the longest free run of at least
 * min_bytes (0: bytes; capped at bytes).  *offset, *len: what was
 * granted; *grant: a new grant id (never 0), which owns those units from
 * now on.  Returns 0, -EINVAL, -ENOSPC, -ENOMEM.
 */
int rkv_space_grant(struct rkv_space *sp, uint64_t bytes, uint64_t min_bytes,
		    uint64_t *offset, uint64_t *len, uint32_t *grant);
/*
 * An extent carved from grant comes back (unlinked, never published, or a
 * chunk's unused tail): it waits grace_ms (big_grace_ms when longer than
 * RKV_SMALL_BLOCK_MAX), then is free.  Accepted only
 * when every unit is allocated, not in grace, and still owned by grant;
 * anything else changes nothing: -EINVAL (outside the region, misaligned,
 * too long), -ESTALE (a late or repeated return: the units are free, in
 * grace, or were reclaimed and granted again).  -ENOMEM.
 */
int rkv_space_return(struct rkv_space *sp, uint64_t offset, uint64_t len,
		     uint32_t grant, uint64_t now_ms);
/* Free what finished its grace period by now_ms (bounded work per call).
 * Returns the bytes freed. */
uint64_t rkv_space_tick(struct rkv_space *sp, uint64_t now_ms);
/*
 * Reclaim: every allocated unit that no slot names (slots: the index,
 * nslots words, read with atomic loads), that is not in grace and that no
 * keep extent covers (the chunks live clients hold: they may carve and
 * publish there) goes to the grace queue.  Such a unit can never become
 * named again (only blocks of held chunks get published), so this frees
 * what dead clients held and what a pending return would free, whatever
 * happens to that return later (refused: -ESTALE).  *freed: bytes moved
 * to grace.  Returns 0 or -ENOMEM.
 */
int rkv_space_reclaim(struct rkv_space *sp,
		      const struct rkv_space_extent *keep, size_t nkeep,
		      const uint64_t *slots, uint64_t nslots, uint64_t now_ms,
		      uint64_t *freed);
/* State of the unit holding byte offset (tests and invariant checks). */
enum rkv_space_unit {
	RKV_SPACE_FREE = 0,
	RKV_SPACE_ALLOC,
	RKV_SPACE_GRACE,
};
enum rkv_space_unit rkv_space_unit_state(const struct rkv_space *sp,
					 uint64_t offset);
/* Grant id owning the unit at offset (0: none since start). */
uint32_t rkv_space_owner(const struct rkv_space *sp, uint64_t offset);
/* Recount the bitmaps and compare with the counters: 0 or -EFAULT. */
int rkv_space_check(const struct rkv_space *sp);
void rkv_space_get_stats(const struct rkv_space *sp,
			 struct rkv_space_stats *st);

/* ---------------------------------------------------------------- server */

#define RKV_CTRL_RECVS_MAX 32     /* --max-inflight bound: RECVs posted per
				   * connection (default 8) */
#define RKV_CTRL_SENDS 8          /* send buffers per connection */
#define RKV_CTRL_OVERFLOW 64      /* connections beyond --max-clients that
				   * are accepted only to be told EUSERS */
#define RKV_CTRL_HELLO_MS 10000   /* a connection must say HELLO by then */
#define RKV_CTRL_LINGER_MS 2000   /* wait for a final reply's completion */
#define RKV_CTRL_ERR_WAIT_MS 20  /* dead endpoint: wait for its completion */
#define RKV_CTRL_WC 32            /* completions per CQ poll */
#define RKV_CTRL_WARN_PER_S 10    /* warn lines per second, then suppressed */
#define RKV_CTRL_RECLAIM_MS 50    /* reclaim passes at most this often */
_Static_assert(RKV_CTRL_RECVS_MAX + RKV_CTRL_SENDS <= 256,
	       "buffer index: 8 bits");
_Static_assert(RKV_CTRL_SENDS <= 32, "send slots fit the busy mask");

/* Connection states. */
enum rkv_conn_state {
	RKV_CONN_HELLO = 0, /* accepted; only HELLO is allowed */
	RKV_CONN_AUTH,      /* challenge sent; only AUTH_RESPONSE is allowed */
	RKV_CONN_READY,     /* HELLO answered: a client with an id */
	RKV_CONN_CLOSING,   /* final ERROR posted; closed once it completes */
};
const char *rkv_conn_state_str(enum rkv_conn_state s);

struct rkv_srv_conn {
	struct rkv_srv *srv;
	struct rkv_ep *ep;
	uint32_t slot;            /* index in srv->conns */
	uint32_t gen;             /* generation of that slot (stale wr_ids) */
	enum rkv_conn_state state;
	uint32_t client_id;       /* 0 until HELLO */
	int read_only;            /* HELLO asked RKV_HELLO_READ_ONLY */
	struct rkv_msg_hello hello; /* RKV_CONN_AUTH: the HELLO, as sent */
	uint8_t nonce[RKV_AUTH_NONCE_LEN]; /* RKV_CONN_AUTH: the challenge */
	int nonce_live;           /* nonce not used yet (single use) */
	uint64_t since_ms;        /* accept time, or time CLOSING began */
	uint64_t err_seen_ms;     /* first tick that saw the endpoint dead */
	char name[RKV_NAME_MAX];  /* from HELLO, printable */
	char peer[128];
	unsigned nrecvs;          /* RECV buffers: cfg.max_inflight */
	char *buf;                /* nrecvs then SENDS buffers of RKV_MSG_MAX */
	struct rkv_mr *mr;        /* registers buf, local write only */
	uint32_t recv_len[RKV_CTRL_RECVS_MAX]; /* bytes of a completed RECV */
	uint8_t pend[RKV_CTRL_RECVS_MAX];  /* received, not yet served (FIFO) */
	unsigned pend_head, pend_n;
	uint32_t send_busy;       /* bit i: send buffer i awaits completion */
	uint32_t rkey_epoch;      /* rotation epoch whose rkeys it holds: set
				   * at HELLO, then by RKEY_ACK */
	uint32_t rkey_sent;       /* last epoch sent in RKEY_UPDATE */
	uint32_t map_epoch;       /* its cluster map's epoch (HELLO; 0: none) */
	struct rkv_space_extent *chunks; /* chunks this client holds */
	size_t nchunks, chunks_cap;
};

struct rkv_srv_tplog;

/* Why a CHUNK_ALLOC was refused (the counters of --metrics). */
enum rkv_srv_chunk_refusal {
	RKV_SRV_CHUNK_READ_ONLY = 0, /* a read-only client (EPERM) */
	RKV_SRV_CHUNK_INVALID,       /* bad sizes (EINVAL) */
	RKV_SRV_CHUNK_QUOTA,         /* --max-chunks (EDQUOT) */
	RKV_SRV_CHUNK_FULL,          /* no room (ENOSPC) */
	RKV_SRV_CHUNK_WAIT_GRACE,    /* room once grace ends (EBUSY) */
	RKV_SRV_CHUNK_NOMEM,         /* the server is out of memory */
	RKV_SRV_CHUNK_REFUSALS
};
const char *rkv_srv_chunk_refusal_str(int r);

struct rkv_srv {
	struct rkv_srv_config cfg;
	struct rkv_tp *tp;
	struct rkv_srv_tplog *tplog; /* the transport's log sink (server.c) */
	struct rkv_cq *cq;
	struct rkv_listener *listener;
	void *index_mem;          /* the largest index's buckets (pages of
				   * levels not in use are never touched),
				   * the partition table, the tail; from
				   * rkv_tp_mem_alloc */
	size_t index_len;
	unsigned levels;          /* levels in use (the level word's) */
	uint64_t grows;           /* levels added (GROW) */
	struct rkv_mr *index_mr;  /* RKV_ACCESS_ALL */
	struct rkv_mr *index_ro_mr; /* remote read only (read-only clients) */
	void *data_mem;
	size_t data_len;
	struct rkv_mr *data_mr;
	struct rkv_mr *data_ro_mr;
	struct rkv_space *space;
	/* counter region: cfg.counters words, remote atomic; names map to
	 * words in order of first COUNTER_OPEN and are never unmapped */
	void *ctr_mem;
	size_t ctr_len;
	struct rkv_mr *ctr_mr;    /* RKV_ACCESS_ALL */
	char (*ctr_names)[RKV_COUNTER_NAME_MAX]; /* cfg.counters entries */
	uint32_t ctr_used;        /* words named so far */
	struct rkv_srv_conn **conns; /* slot table; NULL = free slot */
	uint32_t *gens;           /* per slot generation */
	uint32_t nslots;
	uint32_t nconns;          /* open connections */
	uint32_t nclients;        /* connections in RKV_CONN_READY */
	uint32_t next_client_id;
	uint32_t server_id;
	uint64_t start_ms;
	uint64_t last_tick_ms;
	/* counters */
	uint64_t clients_total;
	uint64_t ctrl_msgs;
	uint64_t bad_msgs;
	uint64_t bad_extents;
	uint64_t auth_failures;   /* wrong, missing or abandoned responses */
	uint64_t denied;          /* writes asked of read-only connections */
	uint32_t fence_epoch;     /* FENCE: clients of older maps refused */
	/* set by the registration thread (cluster.c): the map of this
	 * epoch no longer holds us (we were failed over while away); the
	 * control thread fences us at it */
	atomic_uint self_fence;
	/* a map without us was seen (cluster.c check_removed): the lease
	 * word stays 0 from then on */
	atomic_int removed;
	uint64_t fenced_out;      /* connections closed by a FENCE */
	uint64_t chunk_refused[RKV_SRV_CHUNK_REFUSALS]; /* CHUNK_ALLOC, by why */
	uint64_t polls, idle_polls, completions;
	/* warn rate limit */
	uint64_t warn_window_ms;
	unsigned warn_n;
	uint64_t warn_suppressed;
	/* data-region memory backend: host or GPU (server.c; opaque here) */
	struct rkv_srv_datamem *datamem;
	/* reclaim passes (ctrl.c) */
	int reclaim_due;          /* a writer left since the last pass */
	uint64_t last_reclaim_ms;
	/* rkey rotation (rotate.c): registrations being retired */
	struct rkv_srv_rotation *rot;
	/* scratch messages (a BLOCK_RETURN is ~4 KiB) */
	struct rkv_msg req, rep;
};

/* Slots of the levels in use. */
static inline uint64_t rkv_srv_used_slots(const struct rkv_srv *srv)
{
	return rkv_index_nbuckets(srv->cfg.nbuckets, srv->levels) *
	       srv->cfg.bucket_slots;
}

/* server.c: put levels in use (the level word, layout.h "Levels"). */
void rkv_srv_levels_set(struct rkv_srv *srv, unsigned levels);

/* server.c: the registered regions, by name (rkey rotation re-registers). */
enum rkv_srv_region {
	RKV_SRV_REGION_INDEX = 0,
	RKV_SRV_REGION_DATA,
	RKV_SRV_REGION_COUNTERS,
};
/*
 * Register region `which` (its whole memory) once more with access.
 * Returns 0 or -errno; -ENOENT when the server has no such region.
 */
int rkv_srv_region_reg(struct rkv_srv *srv, enum rkv_srv_region which,
		       unsigned access, struct rkv_mr **out);

/* counter_region.c */
/*
 * The word index of counter name (NUL-terminated, 1..RKV_COUNTER_NAME_MAX-1
 * bytes): the same index for the same name; a new name takes the next free
 * word.  Returns the index (>= 0), -EINVAL (empty name), -ENOSPC (every
 * word is named), -ENODEV (no counter region).
 */
int rkv_srv_counter_lookup(struct rkv_srv *srv, const char *name);

/* rotate.c */
/*
 * --rotate-rkeys: every cfg.rotate_s seconds register the regions anew, send
 * RKEY_UPDATE to every ready client and deregister the old registrations
 * once every client acknowledged (or at the latest RKV_ROTATE_OVERLAP_MS
 * after).  Called from rkv_srv_ctrl_tick.
 */
void rkv_srv_rotate_tick(struct rkv_srv *srv, uint64_t now_ms);
/* The current rotation epoch (0 before the first rotation). */
uint32_t rkv_srv_rotate_epoch(const struct rkv_srv *srv);
/* A client acknowledged rotation epoch `epoch`. */
void rkv_srv_rotate_ack(struct rkv_srv_conn *c, uint32_t epoch);
/*
 * FENCE (failover, docs/DESIGN.md §9.7): register the index region anew
 * and deregister its current registrations (and any rotation still
 * retires) at once, so no one-sided operation with an index rkey handed
 * out before runs after this returns (tcp: the transport's execution
 * holds the MR table's read lock; verbs: the NIC).  shm, whose clients
 * access their own mappings after an rkey check: the registrations go
 * first, then the index moves to fresh memory at the same address
 * (rkv_tp_mem_renew, rkv_srv_index_fence_move: what a late access finds
 * in the old memory is poison), then it is registered anew.  Connections
 * that stay get the new rkeys by RKEY_UPDATE.  0, or -errno (tcp, verbs:
 * nothing changed; shm: -errno after the deregistration leaves the
 * server without an index registration: it serves no one-sided
 * operation until a later fence succeeds).
 */
int rkv_srv_fence_index(struct rkv_srv *srv, uint32_t epoch,
			uint64_t now_ms);
/* ctrl.c: serve no client of a map older than epoch (FENCE, or our own
 * removal from the map): the index registered anew, their connections
 * (but keep's) closed.  0 or -errno. */
int rkv_srv_fence(struct rkv_srv *srv, uint32_t epoch,
		  struct rkv_srv_conn *keep, uint64_t now_ms);
/* Deregister what rotation still holds (shutdown). */
void rkv_srv_rotate_fini(struct rkv_srv *srv);

/* ctrl.c */
/* Accept pending connections (bounded).  Returns connections accepted. */
int rkv_srv_ctrl_accept(struct rkv_srv *srv, uint64_t now_ms);
/* Poll the CQ once and serve.  Returns completions handled or -errno. */
int rkv_srv_ctrl_poll(struct rkv_srv *srv, uint64_t now_ms);
/* Close connections that are dead, past their HELLO or linger time. */
void rkv_srv_ctrl_tick(struct rkv_srv *srv, uint64_t now_ms);
/* Close every connection (shutdown: no rebuild). */
void rkv_srv_ctrl_close_all(struct rkv_srv *srv);
/*
 * Send RKEY_UPDATE for the current registrations and epoch to c (READY).
 * Returns 0, -EBUSY (no free send buffer: try again later) or -errno (the
 * connection was closed).
 */
int rkv_srv_ctrl_send_rkeys(struct rkv_srv_conn *c, uint32_t epoch,
			    uint64_t now_ms);
/* Whether a warn line may be printed now (rate limit). */
int rkv_srv_warn_ok(struct rkv_srv *srv, uint64_t now_ms);

struct rkv_srv;

/*
 * Create the server: transport context, index and data regions (from
 * rkv_tp_mem_alloc, registered once), CQ and listener.  Returns 0 or -errno
 * (logged: one error line naming what failed).
 */
int rkv_srv_create(const struct rkv_srv_config *cfg, struct rkv_srv **out);
/*
 * rkv_srv_create, but the failure is not logged: why (whylen bytes; NULL
 * or 0 for none) then holds one line naming what failed (the region, the
 * listen error, the option), for the caller to print once.
 */
int rkv_srv_create_why(const struct rkv_srv_config *cfg, struct rkv_srv **out,
		       char *why, size_t whylen);
/* Log what the server runs with (regions, rkeys, transport, whether
 * clients must authenticate): once, after the configuration is printed. */
void rkv_srv_log_start(const struct rkv_srv *srv);
/* Close every connection and free everything.  Accepts NULL. */
void rkv_srv_destroy(struct rkv_srv *srv);

/* --check-fabric (fabric.c): what this host's RDMA fabric looks like to a
 * server of cfg, one line each on out, the count last; 0, or 2 when
 * something would stop rkv. */
int rkv_srv_check_fabric(const struct rkv_srv_config *cfg, FILE *out);
/* The bound address, with the real port. */
const char *rkv_srv_addr(const struct rkv_srv *srv);
/* Its name in the cluster map (--name, or derived from the address). */
const char *rkv_srv_name(const struct rkv_srv *srv);

/* cluster.c: the registration in etcd (--cluster).  Start: register name
 * at addr, waiting up to wait_s for etcd; 0, -EADDRINUSE (the name is a
 * live server's), -EINVAL (bad URL) or etcd's error, with why.  Stop:
 * deregister and free (NULL: nothing). */
struct rkv_srv_reg;
int rkv_srv_reg_start(const char *url, const char *name, const char *addr,
		      unsigned wait_s, struct rkv_srv_reg **out, char *why,
		      size_t why_len);
void rkv_srv_reg_stop(struct rkv_srv_reg *r);
/* At start, before clients come: from the cluster's map in etcd (and the
 * next map of a migration in progress), mark gone in srv's partition
 * table every partition another server owns, so that a client of an
 * older map is sent on rather than answered "absent" by a server that
 * restarted empty (docs/DESIGN.md §9.5).  0 (also: no map yet) or
 * -errno. */
int rkv_srv_reg_fence(struct rkv_srv_reg *r, struct rkv_srv *srv);
/* The lease word (proto/layout.h): until_ms of CLOCK_REALTIME, or 0 from
 * the moment srv->removed is set.  Any thread. */
void rkv_srv_lease_set(struct rkv_srv *srv, uint64_t until_ms);
/* How far before etcd's own expiry the lease word ends (clock skew
 * between a server and its clients, and etcd's between its own). */
#define RKV_LEASE_MARGIN_MS 1000u
/* Set partition part's word of the partition table (layout.h). */
void rkv_srv_part_set(struct rkv_srv *srv, unsigned part, uint64_t word);
/* The provider in use and its description. */
const char *rkv_srv_describe(const struct rkv_srv *srv);
/*
 * One pass of the control loop at now_ms: accept (at most every ~1 ms),
 * poll the CQ (bounded), serve messages, expire grace entries and stale
 * connections.  Returns the work done (0 = idle) or -errno when fatal.
 */
int rkv_srv_poll(struct rkv_srv *srv, uint64_t now_ms);
/*
 * Block until the control plane may have work: a completion on the CQ
 * (a client's message), a connection to accept, one of the caller's
 * fds[0 .. nfds) ready, or timeout_us.  0 (poll again), -EOPNOTSUPP when
 * the provider cannot block, or -errno.
 */
int rkv_srv_wait(struct rkv_srv *srv, struct pollfd *fds, unsigned nfds,
		 unsigned timeout_us);
/* metrics.c: --metrics HOST:PORT, the counters in Prometheus' text
 * format at GET /metrics.  Start: listen (0, or -errno with why); poll:
 * from the control loop, serve what came (returns the work done); url:
 * "http://IP:PORT/metrics" as bound; stop accepts NULL. */
struct rkv_srv_metrics;
int rkv_srv_metrics_start(const char *hostport, struct rkv_srv_metrics **out,
			  char *why, size_t why_len);
int rkv_srv_metrics_poll(struct rkv_srv_metrics *m, struct rkv_srv *srv,
			 uint64_t now_ms);
const char *rkv_srv_metrics_url(const struct rkv_srv_metrics *m);
/* The sockets the metrics poll waits on (listener, connections), with
 * their events, into fds[0 .. max): how many. */
unsigned rkv_srv_metrics_fds(const struct rkv_srv_metrics *m,
			     struct pollfd *fds, unsigned max);
void rkv_srv_metrics_stop(struct rkv_srv_metrics *m);
/* Log the final counters (at shutdown). */
void rkv_srv_log_summary(const struct rkv_srv *srv);

#ifdef __cplusplus
}
#endif
#endif
