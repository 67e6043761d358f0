/* SPDX-License-Identifier: MIT */
/*
 * ps_shard.c - shards (ps_internal.h: a 16-byte header, then the
 * elements), the update rules a push applies under the shard's lock, and
 * pull and push between shards and GPU memory.
 */
#include "ps_engine.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "gpu/gpu.h"

const char *rkv_ps_rule_str(enum rkv_ps_rule r)
{
	switch (r) {
	case RKV_PS_SUM: return "sum";
	case RKV_PS_ASSIGN: return "assign";
	case RKV_PS_SGD: return "sgd";
	}
	return "?";
}


/* ------------------------------------------------------------ helpers */

uint64_t shard_len(const struct rkv_ps_tensor *t, uint64_t i)
{
	uint64_t off = i * t->shard_elems;

	return t->len - off < t->shard_elems ? t->len - off : t->shard_elems;
}

/*
 * The header of a value of val_len bytes, read from head (host memory),
 * that should be shard i of t: 0 with *h, or -ESTALE when the length is
 * not shard i's, or it is not a shard of this incarnation of t.
 */
int shard_hdr(const struct rkv_ps_tensor *t, uint64_t i,
		     size_t val_len, const void *head, struct ps_shard_hdr *h)
{
	if (val_len != RKV_PS_SHARD_HDR + (size_t)shard_len(t, i) * 4)
		return -ESTALE;
	memcpy(h, head, sizeof(*h));
	return h->magic == PS_SHARD_MAGIC && h->nonce == t->nonce ? 0
								   : -ESTALE;
}

/*
 * The header of the next version of shard i of t, whose current value
 * (val_len bytes, header at head in host memory) shard_hdr checks: 0 with
 * *next, -ESTALE, or -EMSGSIZE when the shard does not fit cap.  The new
 * value has the old one's length.
 */
int shard_next_hdr(const struct rkv_ps_tensor *t, uint64_t i,
			  size_t val_len, const void *head, size_t cap,
			  struct ps_shard_hdr *next)
{
	int rc = shard_hdr(t, i, val_len, head, next);

	if (rc)
		return rc;
	if (val_len > cap)
		return -EMSGSIZE;
	next->version++;
	return 0;
}

/* ----------------------------------------------------- update rules */

/*
 * The rule over a[0..k): SUM adds v, SGD subtracts lr * v.  apply() calls
 * it with k == APPLY_CHUNK for every chunk but the last: a constant trip
 * count, which GCC's -O2 vectorizer takes (a variable one it leaves
 * scalar, one addss an element: 10 us a 64 KiB shard here, 3.8 us
 * vectorized).  Lane by lane the same IEEE operations: the same bits.
 */
static inline void rule_chunk(enum rkv_ps_rule rule, float lr, float *a,
			      const float *v, size_t k)
{
	if (rule == RKV_PS_SUM) {
		for (size_t j = 0; j < k; j++)
			a[j] += v[j];
	} else {
		for (size_t j = 0; j < k; j++)
			a[j] -= lr * v[j];
	}
}

static void apply(enum rkv_ps_rule rule, float lr, char *dst,
		  const char *old, const float *v, uint64_t n)
{
	float a[APPLY_CHUNK];

	for (uint64_t i = 0; i < n; i += APPLY_CHUNK) {
		size_t k = n - i < APPLY_CHUNK ? (size_t)(n - i) : APPLY_CHUNK;

		if (rule == RKV_PS_ASSIGN) {
			memcpy(dst + i * 4, v + i, k * 4);
			continue;
		}
		memcpy(a, old + i * 4, k * 4);
		if (k == APPLY_CHUNK)
			rule_chunk(rule, lr, a, v + i, APPLY_CHUNK);
		else
			rule_chunk(rule, lr, a, v + i, k);
		memcpy(dst + i * 4, a, k * 4);
	}
}

int push_fn(const void *old, size_t old_len, void *out, size_t cap,
		   size_t *out_len, void *arg)
{
	struct shard_op *so = arg;
	const struct rkv_ps_req *r = so->req;
	const struct rkv_ps_tensor *t = r->t;
	struct ps_shard_hdr h;
	int rc;

	if (!old)
		return -ENOENT; /* deleted: do not create it */
	rc = shard_next_hdr(t, so->shard, old_len, old, cap, &h);
	if (rc)
		return rc;
	so->version = h.version;
	memcpy(out, &h, sizeof(h));
	apply(r->rule, r->lr, (char *)out + RKV_PS_SHARD_HDR,
	      (const char *)old + RKV_PS_SHARD_HDR,
	      r->src + so->shard * t->shard_elems, shard_len(t, so->shard));
	*out_len = old_len;
	return RKV_RMW_WRITE;
}

/* Head put builder of an ASSIGN (see the top of the file): only the old
 * shard's header is known.  Declining sends the op down the RMW path. */
int assign_xfn(const struct rkv_ext_head *old, void *out, size_t cap,
		      size_t *out_len, void *arg)
{
	struct shard_op *so = arg;
	const struct rkv_ps_req *r = so->req;
	const struct rkv_ps_tensor *t = r->t;
	struct ps_shard_hdr h;

	if (shard_next_hdr(t, so->shard, old->val_len, old->head, cap, &h))
		return RKV_RMW_KEEP;
	so->version = h.version;
	memcpy(out, &h, sizeof(h));
	memcpy((char *)out + RKV_PS_SHARD_HDR,
	       r->src + so->shard * t->shard_elems,
	       old->val_len - RKV_PS_SHARD_HDR);
	*out_len = old->val_len;
	return RKV_RMW_WRITE;
}

/* ---------------------------------------------------- device buffers */
/*
 * Pulls into and pushes from CUDA device memory (rkv_ps.h).  Each shard
 * is one device op of ops.c (client/gpu.c): a pull is a DGET whose
 * 16-byte shard header goes to the host and whose elements are copied
 * device to device into the caller's buffer after the block checksum was
 * verified on the device; a push is a DRMW under the shard's slot lock
 * whose callback checks the old header (16 bytes copied to the host),
 * writes the new one and applies the rule with a kernel
 * (rkv_cuda_f32_apply) from the old elements to the new block, all on the
 * device.  Shards go one after the other (one device op at a time).
 */

struct push_dev_arg {
	const struct rkv_ps_tensor *t;
	uint64_t shard;
	enum rkv_ps_rule rule;
	float lr;
	const float *src;
	int gpu;
};

static int push_dev_fn(const void *old, size_t old_len, void *out,
		       size_t cap, size_t *out_len, void *arg)
{
	struct push_dev_arg *a = arg;
	const struct rkv_ps_tensor *t = a->t;
	uint64_t n = shard_len(t, a->shard);
	size_t bytes = RKV_PS_SHARD_HDR + (size_t)n * 4;
	enum rkv_cuda_f32_rule rule = a->rule == RKV_PS_SUM ? RKV_CUDA_F32_SUM :
				      a->rule == RKV_PS_SGD ? RKV_CUDA_F32_AXPY :
							      RKV_CUDA_F32_ASSIGN;
	struct ps_shard_hdr raw, h;
	int rc;

	if (!old)
		return -ENOENT;
	/* the header is in device memory: bring it over first */
	if (old_len == bytes && rkv_cuda_copy(a->gpu, &raw, old, sizeof(raw)))
		return -EIO;
	rc = shard_next_hdr(t, a->shard, old_len, &raw, cap, &h);
	if (rc)
		return rc;
	if (rkv_cuda_copy(a->gpu, out, &h, sizeof(h)) ||
	    rkv_cuda_f32_apply(a->gpu, (char *)out + RKV_PS_SHARD_HDR,
			       (const char *)old + RKV_PS_SHARD_HDR,
			       a->src + a->shard * t->shard_elems, n, rule,
			       a->lr))
		return -EIO;
	*out_len = bytes;
	return RKV_RMW_WRITE;
}

int rkv_ps_pull_dev(struct rkv_ps_tensor *t, float *dev_buf, uint64_t n,
		    int gpu, uint64_t *vmin, uint64_t *vmax)
{
	struct rkv_client *c;
	uint64_t lo = UINT64_MAX, hi = 0;
	int rc;

	if (!t || !dev_buf)
		return -EINVAL;
	if (n < t->len)
		return -ENOBUFS;
	c = t->ps->c;
	rc = rkv_ext_dev_prepare(c, gpu, dev_buf, (size_t)t->len * 4,
				 "rkv_ps_pull_dev");
	if (rc)
		return rc;
	for (uint64_t i = 0; i < t->nshards; i++) {
		char key[PS_KEY_MAX];
		int kl = snprintf(key, sizeof(key), "%s%" PRIu64, t->prefix, i);
		uint64_t m = shard_len(t, i);
		struct ps_shard_hdr raw, h;
		size_t vl = 0;

		memset(&raw, 0, sizeof(raw));
		rc = rkv_ext_get_dev_split(c, key, (size_t)kl, &raw,
					   sizeof(raw),
					   dev_buf + i * t->shard_elems,
					   (size_t)m * 4, &vl, gpu);
		if (!rc)
			rc = shard_hdr(t, i, vl, &raw, &h);
		if (rc == -ENOBUFS)
			rc = -ESTALE; /* a shard of another shape */
		if (rc)
			return rc;
		lo = h.version < lo ? h.version : lo;
		hi = h.version > hi ? h.version : hi;
	}
	if (vmin)
		*vmin = lo == UINT64_MAX ? 0 : lo;
	if (vmax)
		*vmax = hi;
	return 0;
}

int rkv_ps_push_dev(struct rkv_ps_tensor *t, enum rkv_ps_rule rule,
		    const float *dev_src, uint64_t n, float lr, int gpu)
{
	struct rkv_client *c;
	int rc;

	if (!t || !dev_src || n != t->len)
		return -EINVAL;
	if (rule != RKV_PS_SUM && rule != RKV_PS_ASSIGN && rule != RKV_PS_SGD)
		return -EINVAL;
	c = t->ps->c;
	if (t->ps->info.read_only)
		return -EACCES;
	rc = rkv_ext_dev_prepare(c, gpu, dev_src, (size_t)t->len * 4,
				 "rkv_ps_push_dev");
	if (rc)
		return rc;
	for (uint64_t i = 0; i < t->nshards; i++) {
		char key[PS_KEY_MAX];
		int kl = snprintf(key, sizeof(key), "%s%" PRIu64, t->prefix, i);
		struct push_dev_arg a = { .t = t, .shard = i, .rule = rule,
					  .lr = lr, .src = dev_src,
					  .gpu = gpu };
		rc = rkv_rmw_dev(c, key, (size_t)kl, push_dev_fn, &a, gpu);
		if (rc)
			return rc;
	}
	return 0;
}

