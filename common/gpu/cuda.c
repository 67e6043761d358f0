/* SPDX-License-Identifier: MIT */
/*
 * cuda.c - the CUDA layer of common/gpu/gpu.h (built only with
 * WITH_CUDA=1).
 *
 * Uses the CUDA runtime, linked statically: the runtime loads libcuda.so.1
 * on the first call, so a binary built here starts on a machine without a
 * driver and gets cudaErrorInsufficientDriver (35) from the first call
 * that needs one - which only a caller that asked for a GPU ever makes.
 * Driver-API entry points (dma-buf export) come through
 * cudaGetDriverEntryPointByVersion, so nothing links libcuda directly.
 *
 * Every call selects its device with cudaSetDevice first (a thread-local
 * setting in the runtime, cheap when unchanged): the transport thread and
 * application threads may each touch several devices.
 */
#include "gpu.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>

#include "../alloc.h"

struct rkv_cuda_stream {
	int gpu;
	cudaStream_t s;
};

static _Thread_local cudaError_t t_last;

const char *rkv_cuda_strerror(void)
{
	return cudaGetErrorName(t_last);
}

static int map_err(cudaError_t e)
{
	t_last = e;
	switch (e) {
	case cudaSuccess:
		return 0;
	case cudaErrorMemoryAllocation:
		return -ENOMEM;
	case cudaErrorInsufficientDriver:
	case cudaErrorNoDevice:
	case cudaErrorDevicesUnavailable:
		return -ENODEV;
	case cudaErrorInvalidDevice:
		return -ENXIO;
	case cudaErrorNotSupported:
		return -EOPNOTSUPP;
	default:
		return -EIO;
	}
}

int rkv_cuda_map_err(int cuda_error)
{
	return map_err((cudaError_t)cuda_error);
}

static int use(int gpu)
{
	return map_err(cudaSetDevice(gpu));
}

int rkv_cuda_device_count(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess)
		return 0;
	return n;
}

int rkv_cuda_probe(int gpu, char *why, size_t whylen)
{
	char dummy[8];
	int n = 0, drv = 0, rt = 0;
	cudaError_t e;

	if (!why) {
		why = dummy;
		whylen = sizeof(dummy);
	}
	why[0] = 0;
	e = cudaGetDeviceCount(&n);
	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	if (e == cudaErrorInsufficientDriver) {
		if (drv == 0)
			snprintf(why, whylen,
				 "CUDA driver not available "
				 "(cudaErrorInsufficientDriver): no NVIDIA "
				 "driver on this machine");
		else
			snprintf(why, whylen,
				 "CUDA driver too old "
				 "(cudaErrorInsufficientDriver): the driver "
				 "supports CUDA %d.%d, this build needs %d.%d",
				 drv / 1000, drv % 1000 / 10, rt / 1000,
				 rt % 1000 / 10);
		return map_err(e);
	}
	if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) {
		snprintf(why, whylen,
			 "no CUDA device on this machine (cudaErrorNoDevice)");
		t_last = cudaErrorNoDevice;
		return -ENODEV;
	}
	if (e != cudaSuccess) {
		snprintf(why, whylen, "CUDA cannot list devices: %s (%s)",
			 cudaGetErrorName(e), cudaGetErrorString(e));
		return map_err(e);
	}
	if (gpu < 0 || gpu >= n) {
		snprintf(why, whylen,
			 "GPU %d requested, this machine has %d CUDA device%s "
			 "(0..%d)",
			 gpu, n, n == 1 ? "" : "s", n - 1);
		t_last = cudaErrorInvalidDevice;
		return -ENXIO;
	}
	e = cudaSetDevice(gpu);
	if (e == cudaSuccess)
		e = cudaFree(NULL); /* creates the primary context */
	if (e != cudaSuccess) {
		snprintf(why, whylen, "GPU %d cannot be used: %s (%s)", gpu,
			 cudaGetErrorName(e), cudaGetErrorString(e));
		return map_err(e);
	}
	return 0;
}

int rkv_cuda_malloc(int gpu, size_t len, void **out)
{
	size_t l = (len + RKV_CUDA_ALIGN - 1) & ~(RKV_CUDA_ALIGN - 1);
	void *p = NULL;
	int rc = use(gpu);

	if (rc)
		return rc;
	rc = map_err(cudaMalloc(&p, l));
	if (rc)
		return rc;
	rc = map_err(cudaMemset(p, 0, l));
	if (rc == 0)
		rc = map_err(cudaDeviceSynchronize());
	if (rc) {
		cudaFree(p);
		return rc;
	}
	*out = p;
	return 0;
}

void rkv_cuda_free(int gpu, void *p)
{
	if (!p || use(gpu))
		return;
	cudaFree(p);
}

int rkv_cuda_memset(int gpu, void *p, int byte, size_t len)
{
	int rc = use(gpu);

	if (rc)
		return rc;
	rc = map_err(cudaMemsetAsync(p, byte, len, cudaStreamPerThread));
	if (rc)
		return rc;
	return map_err(cudaStreamSynchronize(cudaStreamPerThread));
}

int rkv_cuda_copy(int gpu, void *dst, const void *src, size_t len)
{
	int rc;

	if (!len)
		return 0;
	rc = use(gpu);
	if (rc)
		return rc;
	/* The per-thread stream plus a sync: the bytes are at dst when this
	 * returns, whatever kind of host memory src is. */
	rc = map_err(cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault,
				     cudaStreamPerThread));
	if (rc)
		return rc;
	return map_err(cudaStreamSynchronize(cudaStreamPerThread));
}

int rkv_cuda_ptr_device(const void *p, int *gpu)
{
	struct cudaPointerAttributes a;
	cudaError_t e;
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
		cudaGetLastError();
		return -ENODEV;
	}
	memset(&a, 0, sizeof(a));
	e = cudaPointerGetAttributes(&a, p);
	if (e != cudaSuccess) {
		cudaGetLastError(); /* unknown pointer: not sticky */
		return -EINVAL;
	}
	if (a.type != cudaMemoryTypeDevice)
		return -EINVAL;
	*gpu = a.device;
	return 0;
}

int rkv_cuda_host_alloc(size_t len, void **out)
{
	return map_err(cudaHostAlloc(out, len, cudaHostAllocPortable));
}

void rkv_cuda_host_free(void *p)
{
	if (p)
		cudaFreeHost(p);
}

int rkv_cuda_stream_create(int gpu, struct rkv_cuda_stream **out)
{
	struct rkv_cuda_stream *s;
	int rc = use(gpu);

	if (rc)
		return rc;
	s = rkv_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->gpu = gpu;
	rc = map_err(cudaStreamCreateWithFlags(&s->s, cudaStreamNonBlocking));
	if (rc) {
		rkv_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void rkv_cuda_stream_destroy(struct rkv_cuda_stream *s)
{
	if (!s)
		return;
	if (use(s->gpu) == 0)
		cudaStreamDestroy(s->s);
	rkv_free(s);
}

int rkv_cuda_copy_async(struct rkv_cuda_stream *s, void *dst,
			const void *src, size_t len)
{
	int rc = use(s->gpu);

	if (rc)
		return rc;
	return map_err(
		cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, s->s));
}

int rkv_cuda_stream_sync(struct rkv_cuda_stream *s)
{
	int rc = use(s->gpu);

	if (rc)
		return rc;
	return map_err(cudaStreamSynchronize(s->s));
}

_Static_assert(sizeof(cudaIpcMemHandle_t) == RKV_CUDA_IPC_BYTES,
	       "IPC handle size");

int rkv_cuda_ipc_get(int gpu, void *base, void *handle)
{
	cudaIpcMemHandle_t h;
	int rc = use(gpu);

	if (rc)
		return rc;
	rc = map_err(cudaIpcGetMemHandle(&h, base));
	if (rc == 0)
		memcpy(handle, &h, sizeof(h));
	return rc;
}

int rkv_cuda_ipc_open(int gpu, const void *handle, void **out)
{
	cudaIpcMemHandle_t h;
	int rc = use(gpu);

	if (rc)
		return rc;
	memcpy(&h, handle, sizeof(h));
	return map_err(
		cudaIpcOpenMemHandle(out, h, cudaIpcMemLazyEnablePeerAccess));
}

void rkv_cuda_ipc_close(int gpu, void *p)
{
	if (p && use(gpu) == 0)
		cudaIpcCloseMemHandle(p);
}

int rkv_cuda_pci_id(int gpu, char *buf, size_t len)
{
	return map_err(cudaDeviceGetPCIBusId(buf, (int)len, gpu));
}

int rkv_cuda_device_by_pci(const char *id, int *gpu)
{
	return map_err(cudaDeviceGetByPCIBusId(gpu, id));
}

typedef CUresult (*get_handle_fn)(void *handle, CUdeviceptr dptr,
				  size_t size, CUmemRangeHandleType type,
				  unsigned long long flags);

int rkv_cuda_dmabuf_fd(int gpu, void *p, size_t len, int *fd, char *why,
		       size_t whylen)
{
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSuccess;
	get_handle_fn get = NULL;
	int h = -1, rc;
	CUresult r;

	rc = use(gpu);
	if (rc) {
		if (why)
			snprintf(why, whylen, "GPU %d: %s", gpu,
				 rkv_cuda_strerror());
		return rc;
	}
	if (cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange",
					     (void **)&get, 11070,
					     cudaEnableDefault,
					     &q) != cudaSuccess ||
	    q != cudaDriverEntryPointSuccess || !get) {
		if (why)
			snprintf(why, whylen,
				 "the CUDA driver has no "
				 "cuMemGetHandleForAddressRange (driver older "
				 "than CUDA 11.7)");
		return -EOPNOTSUPP;
	}
	r = get(&h, (CUdeviceptr)(uintptr_t)p, len,
		CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
	if (r != CUDA_SUCCESS || h < 0) {
		/* dma-buf export needs the open NVIDIA kernel modules
		 * (r515+) and Linux 5.12+ */
		if (why && r == CUDA_ERROR_NOT_SUPPORTED)
			snprintf(why, whylen,
				 "GPU %d: the CUDA driver cannot export "
				 "dma-buf (CUDA_ERROR_NOT_SUPPORTED: needs the "
				 "open NVIDIA kernel modules r515+ and Linux "
				 "5.12+)",
				 gpu);
		else if (why)
			snprintf(why, whylen,
				 "cuMemGetHandleForAddressRange(DMA_BUF_FD) "
				 "failed with CUresult %d",
				 (int)r);
		return r == CUDA_ERROR_NOT_SUPPORTED ? -EOPNOTSUPP : -EIO;
	}
	*fd = h;
	return 0;
}
