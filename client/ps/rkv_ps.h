/* SPDX-License-Identifier: MIT */
/*
 * rkv_ps.h - librkv's parameter-server API: named dense tensors that
 * workers pull and push, counters, and barriers, all on the KV store's
 * one-sided paths.
 *
 * Tensors.  A tensor of len float32 elements is split into shards of
 * shard_elems elements (the last one shorter); shard i is the KV value of
 * key "ps/<name>/<i>" (placed like every key, by its partition, so shards
 * spread over the servers), and key "ps/<name>" holds the metadata (dtype, len,
 * shard size, state, and a random incarnation number).  A shard's value is
 * a 16-byte header (magic, incarnation, version) and the elements.
 *
 *   pull  one GET per shard; every shard of every tensor pulled together is
 *         submitted through the pipelined interface, so shards on one
 *         server share doorbells (1 RTT per shard round with the location
 *         cached, 2 cold).  Each shard is read atomically (a block is
 *         immutable and checksummed): a pull never returns a mixture of two
 *         versions of one shard.  Different shards may come from different
 *         pushes: a pull is not a snapshot of the whole tensor.
 *   push  one read-modify-write per shard (rkv_rmw's path: CAS-lock the
 *         slot, read, apply the rule, write a new block and release in one
 *         doorbell), so concurrent pushes to a shard serialize and none is
 *         lost.  Rules: SUM (x += v), ASSIGN (x = v), SGD (x -= lr * v).
 *         Atomicity is per shard: a worker that dies in the middle of a
 *         push leaves each shard either fully updated or untouched (its
 *         lock is taken over after the servers' lease), but a tensor of
 *         several shards may then hold the update in some shards only.
 *   version  every push increments the version in each shard's header
 *         (starting at 0 at create); a pull reports the minimum and maximum
 *         over the shards it read.  After k whole-tensor pushes that all
 *         finished, min == max == k.
 *
 * Counters and barriers.  Each server has a counter region of 8-byte words
 * (rkv-server --counters N); rkv_counter_open maps a name to one word (on
 * the server the name routes to), then FETCH_ADD and READ are one-sided.
 * A barrier of n workers is one counter: each arrival adds 1 and waits
 * until the word reaches the end of its generation.  Counter words live as
 * long as the server: use fresh names per run.
 *
 * Errors are -errno: -ENOENT (no such tensor), -EEXIST (create: exists),
 * -EBUSY (open: the tensor is being created or its creator died before
 * finishing; delete it to start over), -EINVAL (bad name, length or dtype
 * mismatch, push of a wrong length, bad rule), -ENOBUFS (pull buffer
 * shorter than the tensor), -EOPNOTSUPP (float16/bfloat16: not yet),
 * -EMSGSIZE (a shard over 261,024 bytes with its 16-byte header, the most
 * one value moves in one piece: 65,252 float32 elements; less when the
 * client's max_value is lower), -ESTALE (the
 * tensor was deleted and created again since open), -ETIMEDOUT,
 * -ECONNRESET, -ENOSPC, -ENODEV (server without counters).  A call that
 * fails its argument checks changes nothing.
 *
 * Thread safety: everything here is used on the thread that uses the
 * client (one thread at a time per client).  While asynchronous PS
 * requests are outstanding, do not use rkv_submit/rkv_poll on the same
 * client: the PS engine polls the client and would take those ops'
 * completions.  Synchronous calls (rkv_get, rkv_put, ...) are fine.
 */
#ifndef RKV_CLIENT_RKV_PS_H
#define RKV_CLIENT_RKV_PS_H

#include <stddef.h>
#include <stdint.h>

#include "rkv.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RKV_PS_NAME_MAX 200u          /* bytes of a tensor name */
#define RKV_PS_SHARD_DEFAULT 16384u   /* elements: 64 KiB of float32 */
#define RKV_PS_SHARD_HDR 16u          /* bytes before a shard's elements */
#define RKV_COUNTER_NAME_LEN 63u      /* bytes of a counter name */

enum rkv_ps_dtype {
	RKV_PS_FLOAT32 = 1,
	RKV_PS_FLOAT16 = 2,  /* reserved: -EOPNOTSUPP */
	RKV_PS_BFLOAT16 = 3, /* reserved: -EOPNOTSUPP */
};

enum rkv_ps_rule {
	RKV_PS_SUM = 1,    /* x[i] += v[i] */
	RKV_PS_ASSIGN = 2, /* x[i] = v[i] */
	RKV_PS_SGD = 3,    /* x[i] -= lr * v[i] */
};
const char *rkv_ps_rule_str(enum rkv_ps_rule r);

/* ---------------------------------------------------------- counters */

/*
 * Map name (1..RKV_COUNTER_NAME_LEN bytes) to a counter word and return
 * its id (server and word).  The same name gives the same word from any
 * client.  Returns 0, -EINVAL, -ENOSPC (every word named), -ENODEV (the
 * server has no counter region, or this client is read-only), -ETIMEDOUT,
 * -ECONNRESET.  One control round trip.
 */
int rkv_counter_open(struct rkv_client *c, const char *name, uint64_t *id);
/* Atomically add delta (one-sided FETCH_ADD, 1 RTT); *old (may be NULL)
 * gets the value before.  Returns 0, -EINVAL (bad id), -ETIMEDOUT,
 * -ECONNRESET. */
int rkv_counter_add(struct rkv_client *c, uint64_t id, uint64_t delta,
		    uint64_t *old);
/* Read the value (one-sided READ, 1 RTT).  Returns as rkv_counter_add. */
int rkv_counter_read(struct rkv_client *c, uint64_t id, uint64_t *val);

/* ---------------------------------------------------------- barriers */

struct rkv_ps_barrier;

/*
 * A barrier of nworkers (>= 1) participants named name (as a counter
 * name).  Every participant creates its own handle with the same name and
 * nworkers.  Returns 0, -EINVAL, -ENOMEM or rkv_counter_open's errors.
 * The caller frees it with rkv_ps_barrier_destroy().
 */
int rkv_ps_barrier_create(struct rkv_client *c, const char *name,
			  unsigned nworkers, struct rkv_ps_barrier **out);
/*
 * Arrive and wait until all nworkers arrived in this generation: the
 * arrival is FETCH_ADD(+1) on the word, which returns old; the generation
 * ends when the word reaches (old / nworkers + 1) * nworkers, which the
 * waiter checks by READ, polling with a short sleep (50 us growing to
 * 1 ms).  Returns 0, -ETIMEDOUT after timeout_ms (the arrival stays
 * counted: the barrier is then broken for everyone), -ECONNRESET.
 */
int rkv_ps_barrier_wait(struct rkv_ps_barrier *b, unsigned timeout_ms);
/* Accepts NULL. */
void rkv_ps_barrier_destroy(struct rkv_ps_barrier *b);

/* ----------------------------------------------------------- tensors */

struct rkv_ps;        /* per-client PS engine: requests in flight */
struct rkv_ps_tensor; /* an opened tensor */
struct rkv_ps_req;    /* an asynchronous pull or push */

/*
 * A PS engine on client c (which must outlive it).  Returns 0, -EINVAL,
 * -ENOMEM.  Freed with rkv_ps_destroy().
 */
int rkv_ps_create(struct rkv_client *c, struct rkv_ps **out);
/* Wait for the shard operations still in flight (each bounded by the
 * client's timeout) and free the engine.  Wait for every request and close
 * every tensor first (requests not waited for are not freed).  Accepts
 * NULL. */
void rkv_ps_destroy(struct rkv_ps *ps);

/*
 * Create tensor name (1..RKV_PS_NAME_MAX bytes, no '/' or control
 * characters) of len elements of dtype, in shards of shard_elems elements
 * (0: RKV_PS_SHARD_DEFAULT), filled from init (len elements) or zeros when
 * init is NULL.  The metadata is inserted first in state "creating" (a
 * concurrent create of the same name gets -EEXIST, an open -EBUSY), then
 * every shard is written, then the state becomes "ready".  Returns 0,
 * -EEXIST, -EINVAL, -EOPNOTSUPP (float16, bfloat16), -EMSGSIZE (shard over
 * 261,024 bytes: see above), -ENOSPC, -ETIMEDOUT, -ECONNRESET.
 */
int rkv_ps_tensor_create(struct rkv_ps *ps, const char *name,
			 enum rkv_ps_dtype dtype, uint64_t len,
			 uint32_t shard_elems, const float *init);
/*
 * Delete tensor name: mark it deleting (opens then get -ENOENT), delete
 * its shards, then its metadata.  Handles still open get -ENOENT or
 * -ESTALE on their next push or pull.  Works on a tensor left "creating"
 * by a dead creator.  Returns 0, -ENOENT, -EINVAL, -ETIMEDOUT, ...
 */
int rkv_ps_tensor_delete(struct rkv_ps *ps, const char *name);

struct rkv_ps_info {
	enum rkv_ps_dtype dtype;
	uint64_t len;          /* elements */
	uint32_t shard_elems;
	uint64_t nshards;
};

/*
 * Open tensor name, checking it is dtype with len elements (len 0: any
 * length).  One GET of the metadata.  Returns 0, -ENOENT, -EBUSY (being
 * created), -EINVAL (dtype or length mismatch, bad name), -EOPNOTSUPP,
 * -ENOMEM.  Close with rkv_ps_tensor_close().
 */
int rkv_ps_tensor_open(struct rkv_ps *ps, const char *name,
		       enum rkv_ps_dtype dtype, uint64_t len,
		       struct rkv_ps_tensor **out);
void rkv_ps_tensor_info(const struct rkv_ps_tensor *t, struct rkv_ps_info *info);
/* Accepts NULL.  No request on t may be outstanding. */
void rkv_ps_tensor_close(struct rkv_ps_tensor *t);

/*
 * Pull t into buf (n elements, n >= the tensor's length; only the length
 * is written).  vmin/vmax (may be NULL) get the smallest and largest shard
 * version read.  Returns 0, -ENOBUFS (n too small: nothing is read),
 * -EINVAL, -ENOENT (deleted), -ESTALE, -ETIMEDOUT, -ECONNRESET.  On an
 * error, buf may hold some shards.
 */
int rkv_ps_pull(struct rkv_ps_tensor *t, float *buf, uint64_t n,
		uint64_t *vmin, uint64_t *vmax);

/* One tensor of rkv_ps_pull_many. */
struct rkv_ps_io {
	struct rkv_ps_tensor *t;
	float *buf;
	uint64_t n;            /* elements of buf */
	int status;            /* out: 0 or -errno */
	uint64_t vmin, vmax;   /* out: shard versions */
};

/* Pull several tensors with all their shards in flight together.
 * Returns 0 when all succeeded, else the first io's error. */
int rkv_ps_pull_many(struct rkv_ps *ps, struct rkv_ps_io *io, size_t count);

/*
 * Push src (n elements, n == the tensor's length) into t with rule (lr for
 * RKV_PS_SGD; ignored otherwise).  Each shard is updated atomically under
 * its slot lock (see the top of this file for what a failure leaves).
 * Returns 0, -EINVAL (length, rule), -ENOENT, -ESTALE, -ETIMEDOUT,
 * -ECONNRESET, -ENOSPC.
 */
int rkv_ps_push(struct rkv_ps_tensor *t, enum rkv_ps_rule rule,
		const float *src, uint64_t n, float lr);

/*
 * Asynchronous forms: start the request and return at once (argument
 * errors are returned here and no request is made).  buf/src must stay
 * valid until rkv_ps_wait returns.  Any number of requests may be
 * outstanding; their shards share the client's max_inflight op slots and
 * progress whenever any PS call (test, wait, a synchronous pull/push) runs.
 */
int rkv_ps_pull_async(struct rkv_ps_tensor *t, float *buf, uint64_t n,
		      struct rkv_ps_req **out);
int rkv_ps_push_async(struct rkv_ps_tensor *t, enum rkv_ps_rule rule,
		      const float *src, uint64_t n, float lr,
		      struct rkv_ps_req **out);
/* Make progress without blocking.  Returns -EINPROGRESS, or the request's
 * final status (it still must be waited for). */
int rkv_ps_test(struct rkv_ps_req *r);
/* Wait for r to finish, free it and return its status; vmin/vmax (may be
 * NULL) as for rkv_ps_pull. */
int rkv_ps_wait(struct rkv_ps_req *r, uint64_t *vmin, uint64_t *vmax);

/*
 * Pull into / push from CUDA device memory of GPU gpu (cudaMalloc'ed by
 * the caller; n and the rules as for rkv_ps_pull / rkv_ps_push).  The
 * elements never pass through host memory: each shard's block is READ
 * into device staging, its checksum verified on the device, and the
 * elements copied device to device; a push applies its rule with a kernel
 * on the old shard under the shard's slot lock and WRITEs the new block
 * from device memory (see rkv_get_dev in rkv.h).  Shards are moved one
 * after the other.  Besides the errors of the host calls: -EOPNOTSUPP
 * (built without CUDA), -ENODEV (no CUDA driver or device), -ENXIO, -EINVAL
 * (the buffer is not device memory of gpu), -EIO (a CUDA failure); each
 * logs its cause through the client's log callback and changes nothing.
 * Thread safety: as rkv_ps_pull; no request of the same rkv_ps may be
 * waited for meanwhile from another thread.
 */
int rkv_ps_pull_dev(struct rkv_ps_tensor *t, float *dev_buf, uint64_t n,
		    int gpu, uint64_t *vmin, uint64_t *vmax);
int rkv_ps_push_dev(struct rkv_ps_tensor *t, enum rkv_ps_rule rule,
		    const float *dev_src, uint64_t n, float lr, int gpu);

/* --------------------------------------------------- embedding tables */

/*
 * Sparse embedding tables: num_rows rows of dim float32, pulled and pushed
 * by row id, with the optimizer applied at the store.  Row id of table
 * name is the KV value of key "emb/<name>/<id>" (placed by its partition
 * like every key, so rows spread over the servers); key "emb/<name>" holds
 * the configuration.  A row's value is a 16-byte header (magic, the
 * table's generation, the number of steps applied) and then dim weights
 * and the optimizer's state for the row: nothing (SGD), the sum of squared
 * gradients (Adagrad), or the first and second moments (Adam).
 *
 * Rows are lazy: a row that was never pushed is not stored, and reads as
 * its initial value, a function of (seed, id) only: weight j of row id is
 * init_scale * (2u - 1), u = (mix64(seed + G * (id * dim + j + 1)) >> 40)
 * * 2^-24, with G = 0x9e3779b97f4a7c15 and mix64 splitmix64's finalizer.
 * So every worker sees the same initial row, and creating a table of 10M
 * rows writes one 64-byte record.
 *
 *   pull  one GET per distinct id; every row of the request goes through
 *         the pipelined interface together, so rows on one server share
 *         doorbells (1 RTT per round with locations cached, 2 cold).  A
 *         row is read atomically (blocks are immutable and checksummed).
 *   push  duplicate ids in one push are summed first (in the order they
 *         appear), then one read-modify-write per distinct row under its
 *         slot's CAS lock: the step reads the row (or its initial value),
 *         applies the optimizer to weights and state and writes the new
 *         row, so concurrent pushes to a row serialize and none is lost.
 *         Each row is updated atomically; a push of many rows is not.
 *
 * The optimizer steps, in float32 with g the row's summed gradient and
 * t the row's step count after this step (scalars noted (d) are computed
 * in double and rounded once to float):
 *   SGD      w = w - lr * g
 *   Adagrad  a = a + g * g;  w = w - lr * g / (sqrt(a) + eps)
 *            (a starts at init_accum)
 *   Adam     m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * (g * g)
 *            s = lr / (1 - b1^t) (d);  c = sqrt(1 - b2^t) (d)
 *            w = w - s * m / (sqrt(v) / c + eps)
 * Adam's t is per row (the steps applied to that row, as lazy Adam does
 * for sparse updates).  Hyper-parameters are fixed at creation.
 *
 * Delete marks the table deleting, removes the rows a scan finds, and
 * leaves a 64-byte tombstone that carries the generation: a table created
 * again under the name has the next generation, and ignores rows of older
 * ones (they read as initial), while a handle of an older generation gets
 * -ESTALE from any row of a newer one.  A handle kept open across a delete
 * and used on rows nobody pushed since is not refused: its rows are left
 * for the next delete's scan to remove.
 *
 * Errors are -errno: -EEXIST (create), -ENOENT (no such table), -EINVAL
 * (bad name or configuration), -ERANGE (an id >= num_rows: nothing is
 * read or changed), -EMSGSIZE (a row over 261,024 bytes, as a shard),
 * -ESTALE, -ETIMEDOUT, -ECONNRESET, -ENOSPC.
 */
enum rkv_emb_optim {
	RKV_EMB_SGD = 1,
	RKV_EMB_ADAGRAD = 2,
	RKV_EMB_ADAM = 3,
};
const char *rkv_emb_optim_str(enum rkv_emb_optim o);

struct rkv_emb_conf {
	uint64_t num_rows;        /* >= 1 */
	uint32_t dim;             /* >= 1 */
	enum rkv_emb_optim optim;
	float lr;                 /* > 0 */
	float beta1, beta2;       /* Adam: in [0, 1) */
	float eps;                /* Adagrad, Adam: >= 0 */
	float init_accum;         /* Adagrad: >= 0 */
	float init_scale;         /* >= 0: rows start in [-s, s) */
	uint64_t seed;
};

/* Defaults: SGD, lr 0.01, betas 0.9 and 0.999, eps 1e-8, init_accum 0,
 * init_scale 0.01, seed 0 (num_rows and dim are 0: set them). */
void rkv_emb_conf_init(struct rkv_emb_conf *conf);

struct rkv_ps_emb; /* an opened embedding table */

/* Create table name (as a tensor name) with conf.  One read-modify-write
 * of the configuration record; no row is written.  Returns 0, -EEXIST,
 * -EINVAL, -EMSGSIZE, -ETIMEDOUT, -ECONNRESET, -ENOSPC. */
int rkv_emb_create(struct rkv_ps *ps, const char *name,
		   const struct rkv_emb_conf *conf);
/* Open table name (one GET).  Returns 0, -ENOENT, -EINVAL, -EMSGSIZE,
 * -ENOMEM.  Close with rkv_emb_close(). */
int rkv_emb_open(struct rkv_ps *ps, const char *name, struct rkv_ps_emb **out);
void rkv_emb_conf_get(const struct rkv_ps_emb *e, struct rkv_emb_conf *conf);
/* Accepts NULL.  No request on e may be outstanding. */
void rkv_emb_close(struct rkv_ps_emb *e);
/* Delete table name (see above): a scan of every server, then a
 * conditional delete of each of its rows.  Works on a table whose last
 * delete died half-way.  Returns 0, -ENOENT, -EINVAL, rkv_scan's errors. */
int rkv_emb_delete(struct rkv_ps *ps, const char *name);

/*
 * Pull rows ids[0..n) into out (n * dim floats, row k at out + k * dim).
 * Returns 0, -ERANGE, -EINVAL, -ESTALE, -ETIMEDOUT, -ECONNRESET; on an
 * error out may hold some rows.
 */
int rkv_emb_pull(struct rkv_ps_emb *e, const uint64_t *ids, size_t n,
		 float *out);
/*
 * Apply one optimizer step to rows ids[0..n) with grads (n * dim floats,
 * row k's gradient at grads + k * dim; duplicates summed).  Returns 0,
 * -ERANGE, -EINVAL, -ESTALE, -ETIMEDOUT, -ECONNRESET, -ENOSPC; on an error
 * some rows may have taken the step.
 */
int rkv_emb_push(struct rkv_ps_emb *e, const uint64_t *ids, size_t n,
		 const float *grads);
/* Asynchronous forms, finished with rkv_ps_test / rkv_ps_wait.  ids and
 * grads are read before the call returns; out must stay valid until
 * rkv_ps_wait returns. */
int rkv_emb_pull_async(struct rkv_ps_emb *e, const uint64_t *ids, size_t n,
		       float *out, struct rkv_ps_req **req);
int rkv_emb_push_async(struct rkv_ps_emb *e, const uint64_t *ids, size_t n,
		       const float *grads, struct rkv_ps_req **req);

#ifdef __cplusplus
}
#endif
#endif
