/* SPDX-License-Identifier: MIT */
/*
 * mem.c - the host and CUDA memory backends of mem.h.
 *
 * The host backend is page-aligned rkv_aligned_alloc memory and memcpy;
 * it never calls CUDA.  The CUDA backend forwards to common/gpu/gpu.h
 * (stubs without CUDA), after rkv_cuda_probe said the device is usable.
 */
#include "mem.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "gpu/gpu.h"

#define HOST_ALIGN 4096

const char *rkv_mem_kind_str(enum rkv_mem_kind k)
{
	switch (k) {
	case RKV_MEM_HOST:
		return "host";
	case RKV_MEM_CUDA:
		return "cuda";
	}
	return "?";
}

int rkv_mem_have_cuda(void)
{
	return RKV_HAVE_CUDA;
}

/* ------------------------------------------------------------------ host */
static int host_alloc(struct rkv_mem *m, size_t len, void **out)
{
	size_t l = (len + HOST_ALIGN - 1) & ~(size_t)(HOST_ALIGN - 1);
	void *p;

	(void)m;
	if (!len || l < len)
		return -EINVAL;
	p = rkv_aligned_alloc(HOST_ALIGN, l);
	if (!p)
		return -ENOMEM;
	memset(p, 0, l);
	*out = p;
	return 0;
}

static void host_free(struct rkv_mem *m, void *p, size_t len)
{
	(void)m, (void)len;
	rkv_free(p);
}

static int host_zero(struct rkv_mem *m, void *p, size_t len)
{
	(void)m;
	memset(p, 0, len);
	return 0;
}

static int host_copy(struct rkv_mem *m, void *dst, const void *src,
		     size_t len)
{
	(void)m;
	memcpy(dst, src, len);
	return 0;
}

static const struct rkv_mem_ops g_host_ops = {
	.kind = RKV_MEM_HOST,
	.alloc = host_alloc,
	.free = host_free,
	.zero = host_zero,
	.copy_in = host_copy,
	.copy_out = host_copy,
};

/* ------------------------------------------------------------------ cuda */
static int cuda_alloc(struct rkv_mem *m, size_t len, void **out)
{
	if (!len)
		return -EINVAL;
	return rkv_cuda_malloc(m->gpu, len, out);
}

static void cuda_free(struct rkv_mem *m, void *p, size_t len)
{
	(void)len;
	rkv_cuda_free(m->gpu, p);
}

static int cuda_zero(struct rkv_mem *m, void *p, size_t len)
{
	return rkv_cuda_memset(m->gpu, p, 0, len);
}

static int cuda_copy(struct rkv_mem *m, void *dst, const void *src,
		     size_t len)
{
	return rkv_cuda_copy(m->gpu, dst, src, len);
}

static const struct rkv_mem_ops g_cuda_ops = {
	.kind = RKV_MEM_CUDA,
	.alloc = cuda_alloc,
	.free = cuda_free,
	.zero = cuda_zero,
	.copy_in = cuda_copy,
	.copy_out = cuda_copy,
};

int rkv_mem_open(int gpu, char *why, size_t whylen, struct rkv_mem **out)
{
	struct rkv_mem *m;
	int rc;

	if (why && whylen)
		why[0] = 0;
	if (!out || gpu < -1) {
		if (why && whylen)
			snprintf(why, whylen, "bad device index %d", gpu);
		return -EINVAL;
	}
	if (gpu >= 0) {
		rc = rkv_cuda_probe(gpu, why, whylen);
		if (rc)
			return rc;
	}
	m = rkv_calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->gpu = gpu;
	if (gpu < 0) {
		m->ops = &g_host_ops;
		snprintf(m->describe, sizeof(m->describe), "host memory");
	} else {
		m->ops = &g_cuda_ops;
		snprintf(m->describe, sizeof(m->describe),
			 "GPU %d (CUDA device memory)", gpu);
	}
	*out = m;
	return 0;
}

void rkv_mem_close(struct rkv_mem **m)
{
	if (!m || !*m)
		return;
	rkv_free(*m);
	*m = NULL;
}
