/* SPDX-License-Identifier: MIT */
/*
 * sw_gpu.c - staging for GPU-resident regions at a software target.
 *
 * The transport thread cannot hand device memory to a socket, so READ
 * responses and WRITE payloads of GPU regions go through pinned host
 * buffers: two per device, each with its own stream.  A READ copies chunk
 * i+1 into one buffer while chunk i is sent from the other (sw_ep.c); a
 * WRITE copies each received piece into the next buffer and queues its
 * host-to-device copy, waiting only before that buffer is reused and, for
 * the whole frame, before the response is sent.  The initiator uses the
 * same buffers for local GPU buffers (sw_ep.c): a WRITE or SEND payload in
 * device memory is copied out chunk by chunk while the previous chunk goes
 * to the socket (gpu_tx), a READ response is copied into device memory
 * piece by piece and completes only after the last copy landed.  Staging
 * exists only once GPU memory has been touched, so host-only contexts
 * never call CUDA.
 */
#include "sw.h"

#include <errno.h>
#include <string.h>

#include "../alloc.h"
#include "../log.h"

static void gpu_destroy(struct sw_gpu *g)
{
	if (!g)
		return;
	for (int i = 0; i < 2; i++) {
		rkv_cuda_stream_destroy(g->s[i]);
		rkv_cuda_host_free(g->buf[i]);
	}
	pthread_mutex_destroy(&g->lock);
	rkv_free(g);
}

struct sw_gpu *sw_gpu_get(struct sw_tp *tp, int gpu)
{
	struct sw_gpu *g;
	int rc = 0;

	if (gpu < 0 || gpu >= SW_GPU_MAX)
		return NULL;
	g = __atomic_load_n(&tp->gpu[gpu], __ATOMIC_ACQUIRE);
	if (g)
		return g;
	pthread_mutex_lock(&tp->gpu_lock);
	g = tp->gpu[gpu];
	if (g)
		goto unlock;
	g = rkv_calloc(1, sizeof(*g));
	if (!g || pthread_mutex_init(&g->lock, NULL)) {
		rkv_free(g);
		g = NULL;
		goto unlock;
	}
	g->gpu = gpu;
	for (int i = 0; i < 2 && !rc; i++) {
		rc = rkv_cuda_host_alloc(SW_GPU_CHUNK, &g->buf[i]);
		if (!rc)
			rc = rkv_cuda_stream_create(gpu, &g->s[i]);
	}
	if (rc) {
		rkv_log(RKV_LOG_ERROR, tp->prov->comp,
			"GPU %d: cannot set up staging buffers: %s (%s)", gpu,
			strerror(-rc), rkv_cuda_strerror());
		gpu_destroy(g);
		g = NULL;
		goto unlock;
	}
	/* Publishes the initialized staging (acquire load above). */
	__atomic_store_n(&tp->gpu[gpu], g, __ATOMIC_RELEASE);
unlock:
	pthread_mutex_unlock(&tp->gpu_lock);
	return g;
}

void sw_gpu_fini(struct sw_tp *tp)
{
	for (int i = 0; i < SW_GPU_MAX; i++) {
		gpu_destroy(tp->gpu[i]);
		tp->gpu[i] = NULL;
	}
}
