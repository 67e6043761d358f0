/* SPDX-License-Identifier: MIT */
/*
 * gpu.h - the thin CUDA layer under the GPU memory backend (common/mem.h)
 * and the transport providers: probing, device memory, copies that are
 * complete when they return, pinned staging buffers with streams, CUDA IPC
 * handles, dma-buf export for GPUDirect RDMA, and 8-byte atomics executed
 * by a kernel on the device that owns the word.
 *
 * Built with CUDA (RKV_WITH_CUDA, the Makefile's WITH_CUDA=1) the functions
 * live in common/gpu/cuda.c and common/gpu/kernels.cu, against the static
 * CUDA runtime (which loads libcuda.so.1 itself on first use, so a binary
 * runs on a machine without the driver and simply gets errors).  Without
 * CUDA every function below is a static inline stub that fails with
 * -EOPNOTSUPP and says "built without CUDA": callers need no #ifdef.
 *
 * Nothing here runs before a caller asks for a GPU: host-memory paths never
 * touch CUDA.  Every function returns 0 or -errno:
 *   -EOPNOTSUPP  built without CUDA, or an operation the driver lacks
 *   -ENODEV      no usable driver or no CUDA device
 *   -ENXIO       device index out of range
 *   -ENOMEM      device or pinned memory exhausted
 *   -EIO         any other CUDA failure (rkv_cuda_strerror() names it)
 * The why buffers (may be NULL) get one line meant for a human.
 * Thread safety: all functions may be called from any thread; each call
 * makes the device it names current for the calling thread.
 */
#ifndef RKV_COMMON_GPU_GPU_H
#define RKV_COMMON_GPU_GPU_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Size of a CUDA IPC memory handle (cudaIpcMemHandle_t). */
#define RKV_CUDA_IPC_BYTES 64
/* GPU allocations are rounded up to this (dma-buf export wants whole
 * pages; 2 MiB is the GPU's own large-page granularity). */
#define RKV_CUDA_ALIGN ((size_t)2 << 20)

enum rkv_cuda_atomic_op {
	RKV_CUDA_CAS = 0,  /* if (*p == a) *p = b; */
	RKV_CUDA_FADD = 1, /* *p += a; */
};

/* Element-wise float32 rules (the parameter server's push). */
enum rkv_cuda_f32_rule {
	RKV_CUDA_F32_SUM = 1,    /* dst = old + src */
	RKV_CUDA_F32_ASSIGN = 2, /* dst = src */
	RKV_CUDA_F32_AXPY = 3,   /* dst = old - lr * src */
};

/* A stream on one device (opaque). */
struct rkv_cuda_stream;

#ifdef RKV_WITH_CUDA
#define RKV_HAVE_CUDA 1

/*
 * Check that CUDA device gpu can be used: a driver is loaded, it is new
 * enough for this build's runtime, and the device exists.  why gets e.g.
 * "CUDA driver not available (cudaErrorInsufficientDriver): no NVIDIA
 * driver on this machine" or "GPU 7 requested, this machine has 1 CUDA
 * device (0)".  Returns 0, -ENODEV, -ENXIO, -EIO.
 */
int rkv_cuda_probe(int gpu, char *why, size_t whylen);
/* Number of CUDA devices (0 when there is no driver).  Never fails. */
int rkv_cuda_device_count(void);
/* The name of the last CUDA error of this thread ("cudaErrorXxx"). */
const char *rkv_cuda_strerror(void);
/* The -errno of a cudaError_t (as int), remembered for rkv_cuda_strerror;
 * for kernels.cu. */
int rkv_cuda_map_err(int cuda_error);

/* cudaMalloc of len rounded up to RKV_CUDA_ALIGN, zeroed. */
int rkv_cuda_malloc(int gpu, size_t len, void **out);
void rkv_cuda_free(int gpu, void *p);
int rkv_cuda_memset(int gpu, void *p, int byte, size_t len);
/*
 * Copy len bytes between any two of host memory and device memory (UVA,
 * cudaMemcpyDefault), and wait until the bytes have landed: a copy from
 * pageable host memory is complete at the destination when this returns
 * (cudaMemcpy alone may return before the DMA finished).
 */
int rkv_cuda_copy(int gpu, void *dst, const void *src, size_t len);
/*
 * An 8-byte atomic on device memory p (8-byte aligned), executed by a
 * kernel on gpu: atomic with every other rkv_cuda_atomic64 on that word,
 * from any process of this host.  *old gets the previous value.
 */
int rkv_cuda_atomic64(int gpu, uint64_t *p, enum rkv_cuda_atomic_op op,
		      uint64_t a, uint64_t b, uint64_t *old);
/*
 * xxh3-64 (seed 0 unless given) of n blobs on the device: blob i is
 * lens[i] bytes at dev + offs[i]; the digests go to out[i] (host).  The
 * kernel computes exactly what XXH3_64bits_withSeed computes on the host.
 * n <= 65536, every length <= 1 GiB.
 */
int rkv_cuda_xxh3_batch(int gpu, const void *dev, const uint64_t *offs,
			const uint32_t *lens, unsigned n, uint64_t seed,
			uint64_t *out);

/*
 * Whether p is CUDA device memory (cudaMalloc, or a CUDA IPC mapping):
 * 0 with *gpu its device, -EINVAL for host memory (pageable or pinned) or
 * a pointer CUDA does not know, -ENODEV when no driver is usable.
 */
int rkv_cuda_ptr_device(const void *p, int *gpu);

/*
 * dst[i] = rule(old[i], src[i]) for n float32 elements in device memory of
 * gpu (dst and old may be unaligned and may be the same); done when this
 * returns.
 */
int rkv_cuda_f32_apply(int gpu, void *dst, const void *old, const void *src,
		       uint64_t n, enum rkv_cuda_f32_rule rule, float lr);

/* Pinned (page-locked) host memory for staging. */
int rkv_cuda_host_alloc(size_t len, void **out);
void rkv_cuda_host_free(void *p);

int rkv_cuda_stream_create(int gpu, struct rkv_cuda_stream **out);
void rkv_cuda_stream_destroy(struct rkv_cuda_stream *s);
/* Queue a copy on s (cudaMemcpyDefault); src/dst may be pinned host. */
int rkv_cuda_copy_async(struct rkv_cuda_stream *s, void *dst,
			const void *src, size_t len);
/* Wait for everything queued on s; returns the first error. */
int rkv_cuda_stream_sync(struct rkv_cuda_stream *s);

/* CUDA IPC: the handle of allocation base (from rkv_cuda_malloc). */
int rkv_cuda_ipc_get(int gpu, void *base, void *handle);
/* Open a peer's handle on gpu; *out is the allocation's base here. */
int rkv_cuda_ipc_open(int gpu, const void *handle, void **out);
void rkv_cuda_ipc_close(int gpu, void *p);

/* The PCI bus id of gpu ("0000:3b:00.0"): names a device across
 * processes whose CUDA_VISIBLE_DEVICES differ. */
int rkv_cuda_pci_id(int gpu, char *buf, size_t len);
/* This process's index of the device with PCI bus id; -ENODEV if none. */
int rkv_cuda_device_by_pci(const char *id, int *gpu);

/*
 * Export [p, p+len) of device memory as a dma-buf fd for
 * ibv_reg_dmabuf_mr (cuMemGetHandleForAddressRange,
 * CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD).  p and len must be page aligned.
 * Returns 0 with *fd (the caller closes it), -EOPNOTSUPP when the driver
 * cannot (why says what is missing), -EIO.
 */
int rkv_cuda_dmabuf_fd(int gpu, void *p, size_t len, int *fd, char *why,
		       size_t whylen);

#else /* !RKV_WITH_CUDA: stubs */
#define RKV_HAVE_CUDA 0

static inline int rkv_cuda_nocuda(char *why, size_t whylen)
{
	if (why && whylen)
		snprintf(why, whylen,
			 "this build has no CUDA support (built with "
			 "WITH_CUDA=0 or without /usr/local/cuda)");
	return -EOPNOTSUPP;
}
static inline int rkv_cuda_probe(int gpu, char *why, size_t whylen)
{
	(void)gpu;
	return rkv_cuda_nocuda(why, whylen);
}
static inline int rkv_cuda_device_count(void) { return 0; }
static inline const char *rkv_cuda_strerror(void) { return "no CUDA"; }
static inline int rkv_cuda_malloc(int gpu, size_t len, void **out)
{
	(void)gpu, (void)len, (void)out;
	return -EOPNOTSUPP;
}
static inline void rkv_cuda_free(int gpu, void *p) { (void)gpu, (void)p; }
static inline int rkv_cuda_memset(int gpu, void *p, int byte, size_t len)
{
	(void)gpu, (void)p, (void)byte, (void)len;
	return -EOPNOTSUPP;
}
static inline int rkv_cuda_copy(int gpu, void *dst, const void *src,
				size_t len)
{
	(void)gpu, (void)dst, (void)src, (void)len;
	return -EOPNOTSUPP;
}
static inline int rkv_cuda_atomic64(int gpu, uint64_t *p,
				    enum rkv_cuda_atomic_op op, uint64_t a,
				    uint64_t b, uint64_t *old)
{
	(void)gpu, (void)p, (void)op, (void)a, (void)b, (void)old;
	return -EOPNOTSUPP;
}
static inline int rkv_cuda_xxh3_batch(int gpu, const void *dev,
				      const uint64_t *offs,
				      const uint32_t *lens, unsigned n,
				      uint64_t seed, uint64_t *out)
{
	(void)gpu, (void)dev, (void)offs, (void)lens, (void)n, (void)seed,
		(void)out;
	return -EOPNOTSUPP;
}
static inline int rkv_cuda_ptr_device(const void *p, int *gpu)
{
	(void)p, (void)gpu;
	return -EOPNOTSUPP;
}
static inline int rkv_cuda_f32_apply(int gpu, void *dst, const void *old,
				     const void *src, uint64_t n,
				     enum rkv_cuda_f32_rule rule, float lr)
{
	(void)gpu, (void)dst, (void)old, (void)src, (void)n, (void)rule,
		(void)lr;
	return -EOPNOTSUPP;
}
static inline int rkv_cuda_host_alloc(size_t len, void **out)
{
	(void)len, (void)out;
	return -EOPNOTSUPP;
}
static inline void rkv_cuda_host_free(void *p) { (void)p; }
static inline int rkv_cuda_stream_create(int gpu, struct rkv_cuda_stream **out)
{
	(void)gpu, (void)out;
	return -EOPNOTSUPP;
}
static inline void rkv_cuda_stream_destroy(struct rkv_cuda_stream *s)
{
	(void)s;
}
static inline int rkv_cuda_copy_async(struct rkv_cuda_stream *s, void *dst,
				      const void *src, size_t len)
{
	(void)s, (void)dst, (void)src, (void)len;
	return -EOPNOTSUPP;
}
static inline int rkv_cuda_stream_sync(struct rkv_cuda_stream *s)
{
	(void)s;
	return -EOPNOTSUPP;
}
static inline int rkv_cuda_ipc_get(int gpu, void *base, void *handle)
{
	(void)gpu, (void)base, (void)handle;
	return -EOPNOTSUPP;
}
static inline int rkv_cuda_ipc_open(int gpu, const void *handle, void **out)
{
	(void)gpu, (void)handle, (void)out;
	return -EOPNOTSUPP;
}
static inline void rkv_cuda_ipc_close(int gpu, void *p) { (void)gpu, (void)p; }
static inline int rkv_cuda_pci_id(int gpu, char *buf, size_t len)
{
	(void)gpu, (void)buf, (void)len;
	return -EOPNOTSUPP;
}
static inline int rkv_cuda_device_by_pci(const char *id, int *gpu)
{
	(void)id, (void)gpu;
	return -EOPNOTSUPP;
}
static inline int rkv_cuda_dmabuf_fd(int gpu, void *p, size_t len, int *fd,
				     char *why, size_t whylen)
{
	(void)gpu, (void)p, (void)len, (void)fd;
	return rkv_cuda_nocuda(why, whylen);
}
#endif

#ifdef __cplusplus
}
#endif
#endif
