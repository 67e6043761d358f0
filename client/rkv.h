/* SPDX-License-Identifier: MIT */
/*
 * rkv.h - librkv, the rkv client library.
 *
 * A client connects to one or more rkv servers and does every get, put,
 * delete and read-modify-write itself with one-sided operations on the
 * servers' registered regions; the servers' CPUs only hand out geometry,
 * rkeys and memory chunks over the control plane.  Keys are placed on
 * servers by their names (rendezvous hashing over 4096 partitions,
 * proto/cmap.h): the order servers are listed in changes nothing, and a
 * server added to N takes about 1/(N+1) of the keys.
 *
 * Round trips (RTTs) per operation on a quiet system:
 *   get       1 with the key's location cached, 2 cold
 *   put       2 with the location cached (block WRITE in parallel with the
 *             slot READ, then CAS); 3 cold for a present key (buckets, the
 *             candidate block to check the key, CAS); 3 for an insert
 *             (buckets, CAS an empty slot, re-read buckets for a racing
 *             insert of the same key)
 *   delete    1 cached (CAS to empty), 3 cold
 *   rmw       2 cached (CAS-lock chained with the block READ; WRITE new
 *             block chained with the releasing CAS), 4 cold
 *   mget      2 in total for N keys on one server
 * With a cluster map that keeps r > 1 copies of each key ("replicas R"),
 * gets are unchanged (they read the key's primary alone); put, delete and
 * rmw lock the primary, write every backup in parallel, then release:
 * put, rmw and delete 3 cached, 5 cold, whatever r.  A write is
 * acknowledged only once it is on all r servers; one of them down fails
 * the writes of its keys (no failover yet).
 * rkv_client_stats() reports the RTTs each kind of operation took.
 *
 * Consistency: per key, get/put/delete/rmw are linearizable; every block
 * read is checked (checksum and key), so a torn or reused block is never
 * returned; an acknowledged put is visible to every later get.
 *
 * Errors are -errno: -ENOENT (no such key), -ENOSPC (index or memory full),
 * -EMSGSIZE (key over RKV_KEY_MAX bytes, or value over the limit: the
 * client's max_value and the server's --max-value, 64 MiB by default),
 * -EINVAL (empty key, bad arguments), -ENOBUFS (get buffer too small; the
 * value's length is reported), -ETIMEDOUT, -ECONNRESET (server gone),
 * -EPROTO (server speaks another protocol version), -EBUSY (a synchronous
 * call or batch found every slot holding a finished pipelined op that
 * rkv_poll has not handed back yet), -EIO (the key's block fails its
 * checksum when read twice: overwritten by a writer that scribbled; a put
 * or delete of the key replaces it while its header and key are intact).
 * In an etcd cluster keeping r > 1
 * copies a get is answered only while its server's registration is
 * known live (its lease word): a server paused or cut off from etcd for
 * ~4 s makes its gets wait for a newer map, then -ETIMEDOUT.
 *
 * Thread safety: a struct rkv_client is used by one thread at a time (the
 * caller serializes); use one client per thread for parallelism.  The
 * library never prints and never exits; it logs only through the optional
 * callback in the options.
 */
#ifndef RKV_CLIENT_RKV_H
#define RKV_CLIENT_RKV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RKV_KEY_MAX 1024u /* bytes (proto/layout.h: the same) */
/* The default value limit (64 MiB; a server's --max-value may raise it
 * to RKV_VALUE_LIMIT, 1 GiB less 1,056 bytes, or lower it).  Values up to
 * 256 KiB use the client's own registered buffers; larger ones buffers
 * registered for the operation and kept for the next (two idle at most).
 * A get of any size is 1 RTT with its location cached, 2 cold, at any
 * r.  Values over 256 KiB are not moved through device buffers (the _dev
 * calls: -EMSGSIZE). */
#define RKV_VALUE_MAX 67108864u /* bytes (proto/layout.h: the same) */
#define RKV_VALUE_LIMIT 1073740768u /* bytes (proto/layout.h: the same) */

struct rkv_client;

/* Levels of the log callback (the same numbers as common/log.h's). */
enum rkv_client_log_level {
	RKV_CLIENT_LOG_DEBUG = 0,
	RKV_CLIENT_LOG_INFO = 1,
	RKV_CLIENT_LOG_WARN = 2,
	RKV_CLIENT_LOG_ERROR = 3,
};

/* Optional log callback, level an enum rkv_client_log_level: librkv's
 * messages and its transport's, one line each, no newline.  librkv never
 * writes to stdout or stderr itself.  Called on the thread that made the
 * call that logs, or for a transport message on the client's transport
 * thread (tcp, shm), possibly at the same time: it must not call librkv. */
typedef void (*rkv_client_log_fn)(int level, const char *msg, void *arg);

struct rkv_client_opts {
	size_t opts_size;          /* sizeof(struct rkv_client_opts) */
	const char *servers;       /* "ADDR,ADDR" or "NAME=ADDR,..."; or NULL
				    * and: */
	const char *cluster_file;  /* one server per line, "NAME ADDRESS" or
				    * "ADDRESS"; # comments.  Or the URL
				    * "etcd://HOST:PORT/CLUSTER": the map
				    * `rkv admin` keeps in etcd, read at
				    * create (etcd unreachable: retried
				    * within connect_timeout_ms) */
	const char *name;          /* shown in server logs; default "rkv" */
	unsigned timeout_ms;       /* per operation; default 5000 */
	unsigned connect_timeout_ms; /* default 5000 */
	unsigned max_inflight;     /* pipelined ops at once; default 32 */
	unsigned cache_entries;    /* location cache size; default 65536
				    * (times r with r > 1 replicas: the
				    * backups' locations are kept too) */
	unsigned max_value;        /* largest value this client puts;
				    * default RKV_VALUE_MAX, at most
				    * RKV_VALUE_LIMIT; the server's limit
				    * applies too */
	int read_only;             /* ask for read-only access */
	const char *device;        /* verbs overrides (NULL, 0, -1 choose) */
	int port;
	int gid_index;
	rkv_client_log_fn log_fn;  /* NULL: no logging */
	void *log_arg;
	/* appended: the shared secret of servers started with --secret-file
	 * (give one of the two, or neither).  The file must not be open to
	 * group or others (mode 0600 or stricter); its bytes are the secret,
	 * one trailing newline stripped.  The secret never goes on the wire:
	 * the client answers each server's challenge with an HMAC-SHA256. */
	const char *secret_file;
	const void *secret;        /* secret_len bytes, copied at create */
	size_t secret_len;
	/* appended: verbs QP knobs, as rkv-server's --mtu, --traffic-class
	 * and --service-level (0, -1, -1: the port's and the path's) */
	unsigned mtu;
	int traffic_class;
	int service_level;
	unsigned max_rd_atomic;    /* as --max-rd-atomic (0: the device's,
				    * at most 16) */
};

/* Fill opts with defaults; secret_file defaults to $RKV_SECRET_FILE when
 * that is set and not empty, so every program built on librkv (tools,
 * benchmarks, examples) can reach a server that asks for a secret.
 * Thread safety: touches only opts. */
void rkv_client_opts_init(struct rkv_client_opts *opts);

/*
 * Connect to the servers in opts.  A server that is down or unreachable
 * does not stop the client: ops on its keys fail at once with its error
 * (-ECONNREFUSED, -ECONNRESET, -ETIMEDOUT...: rkv_client_route and
 * rkv_client_server_name say which server), every other key works, and
 * the client reconnects by itself when the server is back (retried from
 * the calls it makes: after 100 ms, doubling up to 5 s).  With two
 * servers or more each must answer with the name its map entry gives
 * (its --name, or the address without the provider when the entry has
 * no name): -ENXIO otherwise, logged.  Returns 0, -EINVAL (no servers,
 * bad address, a name or address listed twice, bad opts), the error of
 * the only server (or of the first, when every server is down),
 * -EPROTO (protocol version mismatch), -ENOMEM, -EACCES (a server
 * requires a secret and none or a wrong one was given; logged), -EUSERS
 * (a server already has --max-clients clients), -EPERM (secret_file is
 * open to group or others), -ENODATA (a cluster in etcd has no map yet),
 * -EOPNOTSUPP (built without etcd support), or a transport -errno.
 * The caller frees the client with rkv_client_destroy().
 * Thread safety: any thread; clients are independent of each other.
 */
int rkv_client_create(const struct rkv_client_opts *opts,
		      struct rkv_client **out);

/* Finish returning freed blocks, disconnect, free.  Accepts NULL.
 * Operations still in flight are abandoned.  Thread safety: no other
 * call on c may run or follow. */
void rkv_client_destroy(struct rkv_client *c);

/* Number of servers and the address and name of server i.  Thread
 * safety: read only; safe from any thread while c lives. */
unsigned rkv_client_nservers(const struct rkv_client *c);
const char *rkv_client_server_addr(const struct rkv_client *c, unsigned i);
const char *rkv_client_server_name(const struct rkv_client *c, unsigned i);
/* 0 while server i is connected, else the -errno it is down with (or
 * -EINVAL: no such server).  Thread safety: as rkv_poll. */
int rkv_client_server_status(const struct rkv_client *c, unsigned i);
/* The server index a key routes to. */
unsigned rkv_client_route(const struct rkv_client *c, const void *key,
			  size_t key_len);
/* The servers that hold a key: how many (its replication factor r, or
 * r + 1 while a server joins or leaves the cluster), and in out[] (cap
 * >= 1 entries) the first min(that, cap) server indexes, the primary
 * (rkv_client_route) first.  A write fails with the error of whichever
 * is down.  Thread safety: read only. */
unsigned rkv_client_replicas(const struct rkv_client *c, const void *key,
			     size_t key_len, unsigned *out, unsigned cap);
/* The epoch of the client's cluster map (0: a static map, from servers or
 * cluster_file), and how many of the 4096 placement partitions it places
 * on server i (0 for a server it keeps a peer for but places nothing on,
 * or no such server).  Thread safety: as rkv_poll. */
uint64_t rkv_client_map_epoch(const struct rkv_client *c);
unsigned rkv_client_server_parts(const struct rkv_client *c, unsigned i);

/*
 * Read key into buf (cap bytes).  On success returns 0 and sets *val_len.
 * -ENOENT when absent; -ENOBUFS when cap is too small (*val_len then says
 * how much is needed).  Thread safety: one thread at a time per client.
 */
int rkv_get(struct rkv_client *c, const void *key, size_t key_len, void *buf,
	    size_t cap, size_t *val_len);

/* Insert or replace.  Returns 0 once the value is visible to every later
 * get; -ENOSPC, -EMSGSIZE, -EINVAL, -ETIMEDOUT, -ECONNRESET; -EACCES for a
 * read_only client (put, delete and rmw fail at once, nothing is sent;
 * the server refuses such a client's writes anyway: its rkeys allow remote
 * read only); -EDQUOT when the server's --max-chunks limit refused a
 * chunk.
 * Thread safety: one thread at a time per client. */
int rkv_put(struct rkv_client *c, const void *key, size_t key_len,
	    const void *val, size_t val_len);

/* Remove.  Returns 0, or -ENOENT when absent.  Thread safety: one thread
 * at a time per client. */
int rkv_delete(struct rkv_client *c, const void *key, size_t key_len);

/*
 * Read-modify-write callback.  old/old_len is the current value (old is
 * NULL when the key is absent).  Write the new value into out (out_cap
 * bytes: at least the larger of old_len and 256 KiB less the key and 32
 * bytes; a longer value: set *out_len to its length and return -ENOBUFS,
 * and the callback runs again with room for it, up to the value limit)
 * and set *out_len, then return
 * RKV_RMW_WRITE; return RKV_RMW_KEEP to leave the value as it is (or
 * absent), RKV_RMW_DELETE to delete the key, or a -errno to abort: the
 * operation then returns it and changes nothing.  The callback may run
 * more than once (after a lost race or a stolen lock); only the last
 * run's result is applied.  It must be quick: the slot's lock lease runs.
 */
#define RKV_RMW_WRITE 0
#define RKV_RMW_KEEP 1
#define RKV_RMW_DELETE 2
typedef int (*rkv_rmw_fn)(const void *old, size_t old_len, void *out,
			  size_t out_cap, size_t *out_len, void *arg);

/* Apply fn to key under the slot's CAS lock.  Returns 0 or -errno (fn's,
 * or one of the above).  Thread safety: one thread at a time per client;
 * fn runs on the calling thread and must not call into c. */
int rkv_rmw(struct rkv_client *c, const void *key, size_t key_len,
	    rkv_rmw_fn fn, void *arg);

/* ------------------------------------------------------------ batches */

struct rkv_kv {
	const void *key;
	size_t key_len;
	void *val;          /* get: destination; put: source */
	size_t val_cap;     /* get: capacity of val */
	size_t val_len;     /* get: length read; put: length to write */
	int status;         /* 0 or -errno for this item */
};

/*
 * Batches: every item's first round is posted in one doorbell per server,
 * and so on, so N keys on one server take 2 RTTs in total for mget.  Each
 * item gets its own status; the call returns 0 when all succeeded, else
 * the first item error.  Thread safety: one thread at a time per client.
 */
int rkv_mget(struct rkv_client *c, struct rkv_kv *items, size_t n);
int rkv_mput(struct rkv_client *c, struct rkv_kv *items, size_t n);

/* --------------------------------------------------------- pipelining */

enum rkv_op_type {
	RKV_OP_GET = 0,
	RKV_OP_PUT,
	RKV_OP_DELETE,
	RKV_OP_RMW,
};

/*
 * An operation for the pipelined interface.  The caller owns it and keeps
 * it (and key, val, buf) alive, and val's bytes unchanged, until rkv_poll
 * returns it: a big value (over 256 KiB) is written from val itself on
 * tcp and shm, and on tcp bytes changed before they were sent would
 * leave the key unreadable until it is written again.
 */
struct rkv_op {
	enum rkv_op_type type;
	const void *key;
	size_t key_len;
	const void *val;     /* PUT source */
	size_t val_len;
	void *buf;           /* GET destination */
	size_t buf_cap;
	rkv_rmw_fn fn;       /* RMW */
	void *fn_arg;
	void *user;          /* for the caller */
	/* results, valid when rkv_poll returns the op */
	int status;          /* 0 or -errno */
	size_t out_len;      /* GET: value length */
	unsigned rtts;       /* round trips this op took */
	uint64_t latency_ns; /* submit to completion */
};

/*
 * Queue op; its first round is posted at the next rkv_poll (so ops
 * submitted together share doorbells).  Returns 0, -EAGAIN when
 * max_inflight ops are in flight (poll first), -EINVAL, -EMSGSIZE.
 * Thread safety: one thread at a time per client (the same thread as
 * rkv_poll, or serialized with it).
 */
int rkv_submit(struct rkv_client *c, struct rkv_op *op);
/*
 * Make progress; return up to max finished ops in done[].  Returns the
 * count (0 when none finished yet), or -errno on a client-wide failure.
 * Never blocks.  Thread safety: one thread at a time per client.
 */
int rkv_poll(struct rkv_client *c, struct rkv_op **done, int max);
/*
 * Block until rkv_poll may have something to return or progress to make,
 * at most timeout_us: a thread with ops in flight calls it instead of
 * spinning on rkv_poll, so on few cores it leaves the CPU to the peers
 * that must answer (a tcp or shm server's thread).  Returns 0 (poll now;
 * it may return early), or -errno.  Thread safety: as rkv_poll.
 */
int rkv_wait(struct rkv_client *c, unsigned timeout_us);
/* Ops submitted and not yet returned by rkv_poll.  Thread safety: as
 * rkv_poll. */
unsigned rkv_inflight(const struct rkv_client *c);

/* --------------------------------------------------------- statistics */

struct rkv_op_stats {
	uint64_t ops;      /* finished */
	uint64_t errors;   /* finished with an error other than ENOENT */
	uint64_t rtts;     /* round trips, summed */
	uint64_t retries;  /* restarts after a lost race or a torn read */
};

struct rkv_client_stats {
	struct rkv_op_stats get, put, del, rmw;
	uint64_t mget_batches, mget_rtts; /* RTTs per batch, summed */
	uint64_t cache_hits, cache_misses;
	uint64_t lock_waits;      /* rmw found the slot locked */
	uint64_t lock_steals;     /* lease expired: lock taken over */
	uint64_t chunks;          /* chunks granted by servers */
	uint64_t blocks_returned; /* unlinked blocks handed back */
	uint64_t doorbells;       /* rkv_post calls */
	uint64_t rkey_updates;    /* new rkeys applied (server rotation) */
	uint64_t reconnects;      /* servers reconnected after going down */
	uint64_t redirects;       /* ops sent on to where their key moved */
	uint64_t mig_waits;       /* ops that waited for a key being moved */
	/* gauges, as of the call: servers of the map down now, and the
	 * partitions (of 4096) with a copy on one of them: their writes
	 * fail until it is back (at r > 1 gets go on while the primary is
	 * up): the client's "degraded" state */
	uint64_t servers_down;
	uint64_t parts_degraded;
	/* reads whose server's registration was not known live when they
	 * completed (r > 1: a failover may be replacing it): not answered,
	 * read again or sent where a newer map says */
	uint64_t lease_waits;
	/* ops started again because a server's index had grown a level
	 * they had not read, and levels asked of servers (GROW) */
	uint64_t level_news;
	uint64_t grows;
};

/* Copy / clear the counters.  Thread safety: as rkv_poll. */
void rkv_client_stats(const struct rkv_client *c, struct rkv_client_stats *st);
void rkv_client_stats_reset(struct rkv_client *c);

/* Counters of server i, fetched over the control plane (one RTT).
 * Returns 0, -EINVAL (no such server), -ETIMEDOUT, -ECONNRESET.
 * Thread safety: one thread at a time per client. */
struct rkv_server_stats {
	uint64_t uptime_ms, clients, clients_total, keys, nbuckets, data_len,
		data_free, data_grace, chunks_granted, blocks_returned,
		rebuilds, bad_msgs, ctrl_msgs;
	uint64_t auth_failures; /* appended */
	uint64_t denied;        /* writes refused to read-only clients */
	uint64_t bucket_slots;  /* slots a bucket holds: the index has
				 * nbuckets * bucket_slots slots */
	uint64_t levels;        /* the index's levels in use (nbuckets:
				 * theirs) ... */
	uint64_t levels_max;    /* ... and at most (1: a fixed index) */
};
int rkv_server_stats(struct rkv_client *c, unsigned i,
		     struct rkv_server_stats *st);

/* --------------------------------------------------------------- scan */

/*
 * Every key of every server, with its value, read one-sided: READs of
 * the servers' index regions and of the blocks their slots name, no
 * server CPU, no locks; writers are never held up.  fn gets each key and
 * value (valid only during the call) and returns 0 to go on; anything
 * else stops the scan, and rkv_scan returns it.
 * What a scan guarantees under concurrent writes:
 *   - a key present from the start of the scan to its end is returned,
 *     with a value it held during the scan (every block is checked, and
 *     taken only when its slot named it before and after it was read);
 *   - a key is returned once, unless it was deleted and inserted again
 *     during the scan, or a migration moved its partition to another
 *     server during the scan (st->parts_moved > 0): then it may be
 *     returned twice (as with Redis SCAN);
 *   - a key inserted or deleted during the scan may or may not be
 *     returned; nothing is returned that was never put;
 *   - no order: keys come server by server, in index order.
 * A server that is down or fails is skipped: the others' keys are still
 * returned, and rkv_scan then returns that server's error with
 * st->failed_server its index (the first such server).  At r > 1 so is
 * a server whose lease word has lapsed (paused or cut off from etcd,
 * perhaps replaced by a failover): -ETIMEDOUT, and nothing read from it
 * once the lease lapsed is returned.  Other errors:
 * -EINVAL, -ENOMEM, -EBUSY (keys kept changing under 1000 reads in a
 * row), -ETIMEDOUT (a partition stayed frozen by a migration for longer
 * than the op timeout), -EIO (a slot names a block that is not its
 * key's).  Cost: per server, 2 READs of its 32 KiB partition table, one
 * round per 256 KiB of index, and one round per 62 blocks (blocks and the
 * words of their slots again, in one doorbell; at r > 1 with the
 * server's 8-byte lease word); about 4.6 MB of registered memory,
 * allocated by the first scan and kept.
 * Thread safety: one thread at a time per client; fn runs on the calling
 * thread and must not call into c.
 */
struct rkv_scan_stats {
	uint64_t keys;        /* returned */
	uint64_t rounds;      /* doorbells, each one RTT */
	uint64_t bytes;       /* read */
	uint64_t retries;     /* slots read again: their word changed */
	uint64_t parts_moved; /* partitions moved during the scan */
	int failed_server;    /* the first server that failed, or -1 */
};
typedef int (*rkv_scan_fn)(const void *key, size_t key_len, const void *val,
			   size_t val_len, void *arg);
int rkv_scan(struct rkv_client *c, rkv_scan_fn fn, void *arg,
	     struct rkv_scan_stats *st);

/* ------------------------------------------- GPU (CUDA) device buffers */

/*
 * The same operations with the value in CUDA device memory of GPU gpu
 * (cudaMalloc'ed by the caller on this host).  The value bytes never pass
 * through host memory: blocks are READ into registered device staging
 * (verbs: the NIC writes GPU memory through dma-buf; tcp: pinned staging
 * buffers in the transport; shm: cudaMemcpy from the server's memory), the
 * block checksum (xxh3-64, the same as for host clients, so both kinds of
 * client read each other's blocks) is computed on the device, only the
 * 32-byte header and the key are copied back to check the key, and the
 * value is copied device to device.  Puts build the block in device
 * staging and WRITE it from there.  Round trips, retries of torn or reused
 * blocks, and locks are those of rkv_get / rkv_put / rkv_rmw.
 *
 * rkv_rmw_dev calls fn with old (device pointer, NULL when absent) and out
 * (device pointer, out_cap: 256 KiB less the key and 32 bytes, the most a
 * device op moves; larger values are -EMSGSIZE): fn runs its own CUDA work
 * on gpu and must have finished it (synchronized) when it returns.
 *
 * Besides the errors of the host calls: -EOPNOTSUPP (this librkv was
 * built without CUDA), -ENODEV (no CUDA driver or device), -ENXIO (no
 * device gpu), -EINVAL (the buffer is host memory or on another GPU),
 * -EIO (a CUDA copy or kernel failed).  Each logs one line naming the
 * cause through the client's log callback; nothing is sent and nothing
 * changes.  The first call on a GPU allocates and registers device
 * staging of about 512 KiB (kept until rkv_client_destroy).
 * Thread safety: as rkv_get.
 */
int rkv_get_dev(struct rkv_client *c, const void *key, size_t key_len,
		void *dev_buf, size_t cap, size_t *val_len, int gpu);
int rkv_put_dev(struct rkv_client *c, const void *key, size_t key_len,
		const void *dev_val, size_t val_len, int gpu);
int rkv_rmw_dev(struct rkv_client *c, const void *key, size_t key_len,
		rkv_rmw_fn fn, void *arg, int gpu);

#ifdef __cplusplus
}
#endif
#endif
