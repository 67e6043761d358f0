/* SPDX-License-Identifier: MIT */
/*
 * mem.h - the memory backend: where a region's bytes live (host DRAM or a
 * CUDA device) behind one small vtable, as perftest's memory.h does.
 *
 * A backend is opened for a place ("host", or GPU N) and then allocates,
 * zeroes and copies in and out of its memory.  The host backend is plain
 * page-aligned heap memory and never touches CUDA; the CUDA backend
 * (common/gpu/gpu.h) is chosen only when a caller asks for a GPU, so a
 * process that only uses host memory never loads the CUDA driver.  Without
 * CUDA in the build the CUDA backend is the stub of gpu.h and opening it
 * fails with -EOPNOTSUPP and a reason: callers need no #ifdef.
 *
 * Region memory that the transport must expose (the server's regions)
 * comes from rkv_tp_mem_alloc / rkv_tp_mem_alloc_gpu instead (the shm
 * provider must share it); the backend then still does the probing, the
 * zeroing and the copies.
 *
 * Every int function returns 0 or -errno.  A backend may be used by
 * several threads at once.
 */
#ifndef RKV_COMMON_MEM_H
#define RKV_COMMON_MEM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rkv_mem_kind {
	RKV_MEM_HOST = 0, /* host DRAM */
	RKV_MEM_CUDA = 1, /* CUDA device memory (cudaMalloc) */
};
/* "host", "cuda"; "?" for anything else. */
const char *rkv_mem_kind_str(enum rkv_mem_kind k);

struct rkv_mem;

struct rkv_mem_ops {
	enum rkv_mem_kind kind;
	/* len bytes, zeroed; GPU: rounded up to RKV_CUDA_ALIGN. */
	int (*alloc)(struct rkv_mem *m, size_t len, void **out);
	void (*free)(struct rkv_mem *m, void *p, size_t len);
	int (*zero)(struct rkv_mem *m, void *p, size_t len);
	/* Host <-> backend memory; complete when they return. */
	int (*copy_in)(struct rkv_mem *m, void *dst, const void *host_src,
		       size_t len);
	int (*copy_out)(struct rkv_mem *m, void *host_dst, const void *src,
			size_t len);
};

struct rkv_mem {
	const struct rkv_mem_ops *ops;
	int gpu;           /* -1: host; else the CUDA device index */
	char describe[96]; /* "host memory", "GPU 0 (CUDA device memory)" */
};

/*
 * Open the backend for gpu (-1: host memory; else CUDA device gpu).  For a
 * GPU this probes the driver and the device first; on failure why (may be
 * NULL) gets one line naming the cause ("CUDA driver not available
 * (cudaErrorInsufficientDriver): no NVIDIA driver on this machine", "GPU 7
 * requested, this machine has 1 CUDA device (0..0)", "this build has no
 * CUDA support ...").  Returns 0, -EINVAL (gpu < -1), -EOPNOTSUPP (no CUDA
 * in the build), -ENODEV (no driver or no device, driver too old), -ENXIO
 * (no such device), -ENOMEM.  Close with rkv_mem_close.
 */
int rkv_mem_open(int gpu, char *why, size_t whylen, struct rkv_mem **out);
/* Accepts NULL; clears *m. */
void rkv_mem_close(struct rkv_mem **m);

/* Whether this build has CUDA (WITH_CUDA=1). */
int rkv_mem_have_cuda(void);

static inline int rkv_mem_alloc(struct rkv_mem *m, size_t len, void **out)
{
	return m->ops->alloc(m, len, out);
}
static inline void rkv_mem_free(struct rkv_mem *m, void *p, size_t len)
{
	if (p)
		m->ops->free(m, p, len);
}
static inline int rkv_mem_zero(struct rkv_mem *m, void *p, size_t len)
{
	return m->ops->zero(m, p, len);
}
static inline int rkv_mem_copy_in(struct rkv_mem *m, void *dst,
				  const void *src, size_t len)
{
	return m->ops->copy_in(m, dst, src, len);
}
static inline int rkv_mem_copy_out(struct rkv_mem *m, void *dst,
				   const void *src, size_t len)
{
	return m->ops->copy_out(m, dst, src, len);
}

#ifdef __cplusplus
}
#endif
#endif
