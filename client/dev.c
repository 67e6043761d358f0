/* SPDX-License-Identifier: MIT */
/*
 * dev.c - device ops (the *_dev calls of rkv.h): the device staging of a
 * client and the block encode/decode of ops whose values live in GPU
 * memory (an op with o->d set runs the get, put or rmw machine).
 *
 * The value bytes of a device op never pass through host memory: blocks
 * are READ into registered device staging (the transport moves them: the
 * NIC by dma-buf on verbs, pinned staging on tcp, cudaMemcpy on shm), the
 * header and key (at most 32 + 1024 bytes) are copied back to check the
 * key, the xxh3-64 block checksum is computed on the device by
 * rkv_cuda_xxh3_batch, and the value is copied device to device into the
 * caller's buffer.  A new block is built in device staging (header and
 * key copied in, value copied device to device, checksum by the kernel)
 * and WRITTEN from there.  The staging exists only once a device call was
 * made, so host-only clients never call CUDA.
 */
#include "client.h"

#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "gpu/gpu.h"

void gpu_fini(struct rkv_client *c)
{
	struct cgpu *g = c->gpu;

	if (!g)
		return;
	rkv_mr_dereg(g->mr);
	rkv_tp_mem_free_gpu(c->eng.tp, g->gpu, g->mem, g->len);
	rkv_free(g->hk);
	rkv_free(g);
	c->gpu = NULL;
}

int gpu_prepare(struct rkv_client *c, int gpu, const void *ptr, size_t len,
		const char *what)
{
	char why[256];
	struct cgpu *g;
	int rc, pg = -1;

	if (gpu < 0) {
		clog_(c, RKV_LOG_ERROR, "%s: GPU index %d is invalid", what, gpu);
		return -EINVAL;
	}
	/* staging exists only for a GPU that passed the probe: do not probe
	 * again on every call (a PS device push calls this per shard) */
	rc = c->gpu && c->gpu->gpu == gpu ? 0 :
					    rkv_cuda_probe(gpu, why, sizeof(why));
	if (rc) {
		clog_(c, RKV_LOG_ERROR, "%s: GPU %d unusable: %s", what, gpu, why);
		return rc == -EOPNOTSUPP ? rc : rc == -ENXIO ? rc : -ENODEV;
	}
	if (len) {
		rc = ptr ? rkv_cuda_ptr_device(ptr, &pg) : -EINVAL;
		if (rc || pg != gpu) {
			clog_(c, RKV_LOG_ERROR,
			      "%s: buffer %p is not CUDA device memory of GPU "
			      "%d (%s)",
			      what, ptr, gpu,
			      rc ? "host memory or unknown to CUDA"
				 : "it is on another GPU");
			return rc == -ENODEV ? rc : -EINVAL;
		}
	}
	if (c->gpu && c->gpu->gpu == gpu)
		return 0;
	gpu_fini(c);
	g = rkv_calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->gpu = gpu;
	g->len = (c->op_buf_size - OB_BLOCKS) + c->new_blk_size;
	g->hk = rkv_malloc(RKV_BLOCK_HDR_SIZE + RKV_KEY_MAX);
	rc = g->hk ? rkv_tp_mem_alloc_gpu(c->eng.tp, gpu, g->len,
					  (void **)&g->mem)
		   : -ENOMEM;
	if (rc) {
		clog_(c, RKV_LOG_ERROR, "%s: device staging of %zu bytes on GPU %d: %s",
		      what, g->len, gpu, strerror(-rc));
		rkv_free(g->hk);
		rkv_free(g);
		return rc;
	}
	rc = rkv_mr_reg_gpu(c->eng.tp, g->mem, g->len, RKV_ACCESS_LOCAL_WRITE, gpu,
			    &g->mr);
	if (rc) {
		clog_(c, RKV_LOG_ERROR, "%s: cannot register GPU %d staging: %s", what,
		      gpu, strerror(-rc));
		rkv_tp_mem_free_gpu(c->eng.tp, gpu, g->mem, g->len);
		rkv_free(g->hk);
		rkv_free(g);
		return rc;
	}
	g->rd = g->mem;
	g->nb = g->mem + (c->op_buf_size - OB_BLOCKS);
	c->gpu = g;
	return 0;
}

static int cuda_fail(struct opslot *o, const char *step)
{
	clog_(o->c, RKV_LOG_ERROR, "GPU %d: %s failed: %s", o->d->gpu, step,
	      rkv_cuda_strerror());
	return -EIO;
}

/*
 * The block format and its checks are proto's (proto/layout.h): the header
 * comes from rkv_block_hdr_fill, a block read passes rkv_block_hdr_check
 * and rkv_block_key_match, and only the checksum runs here instead of on
 * the host, over the span proto names (RKV_BLOCK_SUM_OFF,
 * rkv_block_sum_len) with its seed: the digest rkv_block_checksum gives.
 */
uint32_t gpu_block_encode(struct opslot *o, char *dst, const void *val,
			  size_t val_len, uint64_t version, int *err)
{
	struct rkv_block_hdr *h = o->d->hk;
	size_t kl = o->op->key_len, used;
	uint64_t off = RKV_BLOCK_SUM_OFF, sum = 0;
	uint32_t n;
	int gpu = o->d->gpu, size;

	size = rkv_block_hdr_fill(h, kl, val_len, o->p->g.client_id,
				  o->nb.ref.grant, version);
	if (size < 0) {
		*err = size; /* -EINVAL (empty key) or -EMSGSIZE */
		return 0;
	}
	used = rkv_block_used(h);
	n = (uint32_t)rkv_block_sum_len(used);
	memcpy((char *)h + RKV_BLOCK_HDR_SIZE, o->op->key, kl);
	*err = -EIO;
	/* the value may already be in place (rmw callbacks write there) */
	if (val_len && (const char *)val != dst + RKV_BLOCK_HDR_SIZE + kl &&
	    rkv_cuda_copy(gpu, dst + RKV_BLOCK_HDR_SIZE + kl, val, val_len)) {
		cuda_fail(o, "copying the value into the block");
		return 0;
	}
	if (rkv_cuda_copy(gpu, dst, h, RKV_BLOCK_HDR_SIZE + kl) ||
	    ((size_t)size > used &&
	     rkv_cuda_memset(gpu, dst + used, 0, (size_t)size - used))) {
		cuda_fail(o, "building the block header");
		return 0;
	}
	if (rkv_cuda_xxh3_batch(gpu, dst, &off, &n, 1, RKV_BLOCK_SEED, &sum) ||
	    rkv_cuda_copy(gpu, dst, &sum, sizeof(sum))) {
		cuda_fail(o, "the block checksum kernel");
		return 0;
	}
	*err = 0;
	return (uint32_t)size;
}

int gpu_block_decode(struct opslot *o, char *blk, size_t size,
		     const void **val, uint32_t *val_len,
		     const struct rkv_block_hdr **hdr)
{
	const struct rkv_block_hdr *h = (const void *)blk;
	size_t kl = o->op->key_len, used, head;
	const char *dev = o->d->rd + (blk - (o->buf + OB_BLOCKS));
	uint64_t off = RKV_BLOCK_SUM_OFF, sum = 0;
	uint32_t n;
	int rc;

	/* header and (what should be) the key: never the value.  A block
	 * shorter than a header is copied whole and refused by the check,
	 * which reads nothing of it then. */
	head = RKV_BLOCK_HDR_SIZE + kl < size ? RKV_BLOCK_HDR_SIZE + kl : size;
	if (head && rkv_cuda_copy(o->d->gpu, blk, dev, head))
		return cuda_fail(o, "copying a block header");
	rc = rkv_block_hdr_check(h, size, &used);
	if (rc)
		return rc;
	n = (uint32_t)rkv_block_sum_len(used);
	if (rkv_cuda_xxh3_batch(o->d->gpu, dev, &off, &n, 1, RKV_BLOCK_SEED,
				&sum))
		return cuda_fail(o, "the block checksum kernel");
	if (sum != h->checksum)
		return -EBADMSG;
	/* reads the host copy: HDR + kl bytes are there whenever the key
	 * lengths agree, as the check put HDR + key_len + val_len <= size */
	rc = rkv_block_key_match(blk, o->op->key, kl);
	if (rc)
		return rc;
	if (val)
		*val = dev + RKV_BLOCK_HDR_SIZE + kl;
	if (val_len)
		*val_len = h->val_len;
	if (hdr)
		*hdr = h;
	return 0;
}

int gpu_deliver(struct opslot *o, const void *v, uint32_t vl)
{
	size_t hd = o->d->head < vl ? o->d->head : vl;

	if (vl - hd > o->op->buf_cap)
		return -ENOBUFS;
	/* device to device: the value never reaches the host (a PS shard's
	 * 16-byte header does) */
	if (rkv_cuda_copy(o->d->gpu, o->d->head_buf, v, hd) ||
	    rkv_cuda_copy(o->d->gpu, o->op->buf, (const char *)v + hd,
			  vl - hd)) {
		clog_(o->c, RKV_LOG_ERROR,
		      "get into GPU %d memory: copy failed: %s", o->d->gpu,
		      rkv_cuda_strerror());
		return -EIO;
	}
	return 0;
}
