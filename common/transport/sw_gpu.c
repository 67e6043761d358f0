/* SPDX-License-Identifier: MIT */
/*
 * sw_gpu.c - GPU-resident memory on the software providers: the staging
 * buffers and the datapath through them.
 *
 * The transport thread cannot hand device memory to a socket, so READ
 * responses and WRITE payloads of GPU regions go through pinned host
 * buffers: two per device, each with its own stream.  A READ copies chunk
 * i+1 into one buffer while chunk i is sent from the other; a WRITE copies
 * each received piece into the next buffer and queues its host-to-device
 * copy, waiting only before that buffer is reused and, for the whole
 * frame, before the response is sent.  The initiator uses the same buffers
 * for local GPU buffers: a WRITE or SEND payload in device memory is
 * copied out chunk by chunk while the previous chunk goes to the socket
 * (sw_gpu_tx), a READ response is copied into device memory piece by piece
 * and completes only after the last copy landed.  Staging exists only once
 * GPU memory has been touched, so host-only contexts never call CUDA.  The
 * MR key word says whether a region is device memory (SW_KEY_GPU1); host
 * regions never reach the datapath functions here.
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
		sw_log(tp, RKV_LOG_ERROR,
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

/* ------------------------------------------------------------- datapath */
static size_t min_sz(uint64_t a, size_t b)
{
	return a < b ? (size_t)a : b;
}

/*
 * Send len bytes of device memory at src (g->lock held): chunk 0 (n bytes)
 * is already in pinned buffer b; chunk i+1 is copied into the other buffer
 * while chunk i goes to the socket (or into the endpoint's output buffer,
 * so the staging buffer is free again when sw_ep_tx_commit returns).
 * Returns 0 or the CUDA -errno that stopped it.
 */
static int gpu_pipe_out(struct sw_ep *ep, struct sw_gpu *g, unsigned b,
			size_t n, const uint8_t *src, uint64_t len)
{
	uint64_t off = 0;
	int rc = 0;

	while (off < len) {
		unsigned nb = b ^ 1;
		size_t nn = min_sz(len - off - n, SW_GPU_CHUNK);

		if (nn)
			rc = rkv_cuda_copy_async(g->s[nb], g->buf[nb],
						 src + off + n, nn);
		sw_ep_tx_payload(ep, g->buf[b], n);
		sw_ep_tx_commit(ep);
		off += n;
		if (nn && !rc)
			rc = rkv_cuda_stream_sync(g->s[nb]);
		if (rc || ep->closed || ep->io_err)
			break;
		b = nb;
		n = nn;
	}
	g->next = b ^ 1;
	return rc;
}

/*
 * READ of len bytes at device address src.  Chunk i+1 is copied to the
 * other pinned buffer while chunk i goes to the socket (or, when the
 * socket is full, into the endpoint's output buffer, so the staging buffer
 * is free again when sw_ep_tx_commit returns).  The first chunk is copied
 * before the response header is staged, so a CUDA failure there is an
 * ordinary REM_OP_ERR; a failure later can only end the connection.
 * Returns a WC status (SUCCESS also when the link was dropped).
 */
int sw_gpu_read(struct sw_ep *ep, uint64_t seq, const uint8_t *src,
		uint64_t len, int gpu)
{
	struct sw_gpu *g = sw_gpu_get(ep->tp, gpu);
	struct sw_hdr r = { .type = SW_F_RESP, .len = (uint32_t)len,
			    .key = RKV_WC_SUCCESS, .seq = seq };
	unsigned b;
	size_t n;
	int rc;

	if (!g)
		return RKV_WC_REM_OP_ERR;
	pthread_mutex_lock(&g->lock);
	b = g->next;
	n = min_sz(len, SW_GPU_CHUNK);
	rc = rkv_cuda_copy_async(g->s[b], g->buf[b], src, n);
	if (!rc)
		rc = rkv_cuda_stream_sync(g->s[b]);
	if (rc) {
		pthread_mutex_unlock(&g->lock);
		sw_log(ep->tp, RKV_LOG_ERROR,
		       "peer %s: READ of GPU %d memory: copy failed: %s",
		       ep->base.peer, gpu, rkv_cuda_strerror());
		return RKV_WC_REM_OP_ERR;
	}
	sw_ep_tx_frame(ep, &r, NULL, 0);
	rc = gpu_pipe_out(ep, g, b, n, src, len);
	pthread_mutex_unlock(&g->lock);
	if (rc) {
		sw_log(ep->tp, RKV_LOG_ERROR,
		       "peer %s: READ of GPU %d memory failed mid-way: %s",
		       ep->base.peer, gpu, rkv_cuda_strerror());
		sw_ep_proto_error(ep, "GPU copy failed during a READ");
	}
	return RKV_WC_SUCCESS;
}

/*
 * Initiator: a WRITE or SEND whose payload (h->len bytes at src) is in
 * local device memory of gpu.  Like sw_gpu_read the other way round: chunk
 * i+1 is copied device-to-host into the other pinned buffer while chunk i
 * goes out.  The first chunk is copied before the header is staged, so a
 * CUDA failure there completes the WR with GENERAL_ERR (returned); a
 * failure later ends the connection.
 */
int sw_gpu_tx(struct sw_ep *ep, const struct sw_hdr *h, const void *src,
	      int gpu)
{
	struct sw_gpu *g = sw_gpu_get(ep->tp, gpu);
	const uint8_t *sp = src;
	uint64_t len = h->len;
	unsigned b;
	size_t n;
	int rc;

	if (!g)
		return RKV_WC_GENERAL_ERR;
	pthread_mutex_lock(&g->lock);
	b = g->next;
	n = min_sz(len, SW_GPU_CHUNK);
	rc = rkv_cuda_stream_sync(g->s[b]);
	if (!rc)
		rc = rkv_cuda_copy_async(g->s[b], g->buf[b], sp, n);
	if (!rc)
		rc = rkv_cuda_stream_sync(g->s[b]);
	if (rc) {
		pthread_mutex_unlock(&g->lock);
		sw_log(ep->tp, RKV_LOG_ERROR,
		       "peer %s: %s from local GPU %d memory: copy failed: %s",
		       ep->base.peer, h->type == SW_F_SEND ? "SEND" : "WRITE",
		       gpu, rkv_cuda_strerror());
		return RKV_WC_GENERAL_ERR;
	}
	sw_ep_tx_frame(ep, h, NULL, 0);
	rc = gpu_pipe_out(ep, g, b, n, sp, len);
	pthread_mutex_unlock(&g->lock);
	if (rc) {
		sw_log(ep->tp, RKV_LOG_ERROR,
		       "peer %s: staging from local GPU %d failed mid-way: %s",
		       ep->base.peer, gpu, rkv_cuda_strerror());
		sw_ep_proto_error(ep, "GPU copy failed during a WRITE");
	}
	return RKV_WC_SUCCESS;
}

/* One received piece of a WRITE into device memory at dst. */
int sw_gpu_write_piece(struct sw_ep *ep, struct sw_gpu *g, void *dst,
		       const uint8_t *p, size_t n)
{
	int rc = 0;

	pthread_mutex_lock(&g->lock);
	while (n && !rc) {
		unsigned b = g->next;
		size_t k = n < SW_GPU_CHUNK ? n : SW_GPU_CHUNK;

		/* the buffer's previous copy must be done before reuse */
		rc = rkv_cuda_stream_sync(g->s[b]);
		if (!rc) {
			memcpy(g->buf[b], p, k);
			rc = rkv_cuda_copy_async(g->s[b], dst, g->buf[b], k);
		}
		g->next = b ^ 1;
		dst = (uint8_t *)dst + k;
		p += k;
		n -= k;
	}
	pthread_mutex_unlock(&g->lock);
	if (rc) {
		sw_log(ep->tp, RKV_LOG_ERROR,
		       "peer %s: WRITE into GPU %d memory: copy failed: %s",
		       ep->base.peer, g->gpu, rkv_cuda_strerror());
		return RKV_WC_REM_OP_ERR;
	}
	return RKV_WC_SUCCESS;
}

/* Wait for every queued host-to-device copy; returns 0 or -errno. */
int sw_gpu_write_drain(struct sw_ep *ep, struct sw_gpu *g)
{
	int rc, rc2;

	pthread_mutex_lock(&g->lock);
	rc = rkv_cuda_stream_sync(g->s[0]);
	rc2 = rkv_cuda_stream_sync(g->s[1]);
	pthread_mutex_unlock(&g->lock);
	if (!rc)
		rc = rc2;
	if (rc)
		sw_log(ep->tp, RKV_LOG_ERROR,
		       "peer %s: WRITE into GPU %d memory failed: %s",
		       ep->base.peer, g->gpu, rkv_cuda_strerror());
	return rc;
}
