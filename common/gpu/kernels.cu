/* SPDX-License-Identifier: MIT */
/*
 * kernels.cu - the device code of common/gpu/gpu.h: 8-byte atomics on GPU
 * memory (the software providers' CAS and FETCH_ADD on GPU-resident
 * regions) and a batched xxh3-64 that computes the same digest as the
 * host's libxxhash (common/gpu/xxh3_impl.h, one thread per input).
 *
 * Compiled by nvcc for sm_90 plus compute_90 PTX (the Makefile), host side
 * as C++ with C linkage for the entry points.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdint.h>

#include "gpu.h"
#include "xxh3_impl.h"

__constant__ uint8_t g_ksecret[RKV_XXH3_SECRET_SIZE] = { RKV_XXH3_KSECRET };

__global__ void atomic64_kernel(unsigned long long *p, int op,
				unsigned long long a, unsigned long long b,
				unsigned long long *old)
{
	if (op == RKV_CUDA_CAS)
		*old = atomicCAS(p, a, b);
	else
		*old = atomicAdd(p, a);
	__threadfence_system();
}

__global__ void xxh3_kernel(const uint8_t *base, const uint64_t *offs,
			    const uint32_t *lens, unsigned n, uint64_t seed,
			    uint64_t *out)
{
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
	uint8_t ks[RKV_XXH3_SECRET_SIZE], scratch[RKV_XXH3_SECRET_SIZE];

	if (i >= n)
		return;
	for (int j = 0; j < RKV_XXH3_SECRET_SIZE; j++)
		ks[j] = g_ksecret[j];
	out[i] = rkv_xxh3_64(base + offs[i], lens[i], seed, ks, scratch);
}

/* -errno, and rkv_cuda_strerror() names e */
static int err_of(cudaError_t e)
{
	return rkv_cuda_map_err((int)e);
}

extern "C" int rkv_cuda_atomic64(int gpu, uint64_t *p,
				 enum rkv_cuda_atomic_op op, uint64_t a,
				 uint64_t b, uint64_t *old)
{
	unsigned long long *res = NULL, host = 0;
	cudaStream_t s = cudaStreamPerThread;
	cudaError_t e;

	if ((uintptr_t)p & 7)
		return -EINVAL;
	e = cudaSetDevice(gpu);
	if (e == cudaSuccess)
		e = cudaMallocAsync((void **)&res, sizeof(*res), s);
	if (e != cudaSuccess)
		return err_of(e);
	/* cudaGetLastError below must see this launch, not an earlier
	 * call's error on this thread */
	(void)cudaGetLastError();
	atomic64_kernel<<<1, 1, 0, s>>>((unsigned long long *)p, (int)op,
					(unsigned long long)a,
					(unsigned long long)b, res);
	e = cudaGetLastError();
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(&host, res, sizeof(host),
				    cudaMemcpyDeviceToHost, s);
	cudaFreeAsync(res, s);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(s);
	else
		cudaStreamSynchronize(s);
	if (e != cudaSuccess)
		return err_of(e);
	*old = (uint64_t)host;
	return 0;
}

extern "C" int rkv_cuda_xxh3_batch(int gpu, const void *dev,
				   const uint64_t *offs, const uint32_t *lens,
				   unsigned n, uint64_t seed, uint64_t *out)
{
	cudaStream_t s = cudaStreamPerThread;
	uint64_t *d_offs = NULL, *d_out = NULL;
	uint32_t *d_lens = NULL;
	cudaError_t e;

	if (n == 0)
		return 0;
	if (n > 65536)
		return -EINVAL;
	e = cudaSetDevice(gpu);
	if (e == cudaSuccess)
		e = cudaMallocAsync((void **)&d_offs, n * sizeof(*d_offs), s);
	if (e == cudaSuccess)
		e = cudaMallocAsync((void **)&d_out, n * sizeof(*d_out), s);
	if (e == cudaSuccess)
		e = cudaMallocAsync((void **)&d_lens, n * sizeof(*d_lens), s);
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(d_offs, offs, n * sizeof(*offs),
				    cudaMemcpyHostToDevice, s);
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(d_lens, lens, n * sizeof(*lens),
				    cudaMemcpyHostToDevice, s);
	if (e == cudaSuccess) {
		(void)cudaGetLastError();
		xxh3_kernel<<<(n + 127) / 128, 128, 0, s>>>(
			(const uint8_t *)dev, d_offs, d_lens, n, seed, d_out);
		e = cudaGetLastError();
	}
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(out, d_out, n * sizeof(*out),
				    cudaMemcpyDeviceToHost, s);
	if (d_offs)
		cudaFreeAsync(d_offs, s);
	if (d_out)
		cudaFreeAsync(d_out, s);
	if (d_lens)
		cudaFreeAsync(d_lens, s);
	{
		cudaError_t e2 = cudaStreamSynchronize(s);

		if (e == cudaSuccess)
			e = e2;
	}
	return err_of(e);
}

/* Element-wise float32 rule of the parameter server; dst and old may be
 * unaligned (shard elements follow the key inside a block). */
__global__ void f32_apply_kernel(uint8_t *dst, const uint8_t *old,
				 const uint8_t *src, uint64_t n, int rule,
				 float lr)
{
	uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (; i < n; i += stride) {
		float x = 0.0f, v;

		memcpy(&v, src + i * 4, 4);
		if (rule != RKV_CUDA_F32_ASSIGN)
			memcpy(&x, old + i * 4, 4);
		if (rule == RKV_CUDA_F32_SUM)
			x += v;
		else if (rule == RKV_CUDA_F32_AXPY)
			x -= lr * v;
		else
			x = v;
		memcpy(dst + i * 4, &x, 4);
	}
}

extern "C" int rkv_cuda_f32_apply(int gpu, void *dst, const void *old,
				  const void *src, uint64_t n,
				  enum rkv_cuda_f32_rule rule, float lr)
{
	cudaStream_t s = cudaStreamPerThread;
	cudaError_t e;
	uint64_t blocks = (n + 255) / 256;

	if (n == 0)
		return 0;
	if (blocks > 4096)
		blocks = 4096;
	e = cudaSetDevice(gpu);
	if (e == cudaSuccess) {
		(void)cudaGetLastError();
		f32_apply_kernel<<<(unsigned)blocks, 256, 0, s>>>(
			(uint8_t *)dst, (const uint8_t *)old,
			(const uint8_t *)src, n, (int)rule, lr);
		e = cudaGetLastError();
	}
	{
		cudaError_t e2 = cudaStreamSynchronize(s);

		if (e == cudaSuccess)
			e = e2;
	}
	return err_of(e);
}
