/* SPDX-License-Identifier: MIT */
/*
 * datamem.h - where the server's data region lives (--data-memory): host
 * memory, or the memory of one CUDA device.  The index and counter regions
 * always stay in host memory.
 *
 * The backend is opened (and, for a GPU, probed) before anything else of
 * the server starts, so a bad --data-memory refuses the start with one
 * line naming the cause and nothing half-built.  Allocation and
 * registration go through the transport (rkv_tp_mem_alloc[_gpu],
 * rkv_mr_reg[_gpu]) so every provider can expose the memory; rkey
 * rotation registers the region again through rkv_srv_datamem_reg, the
 * same way as the first time.  A host-memory server never calls CUDA.
 */
#ifndef RKV_SERVER_DATAMEM_H
#define RKV_SERVER_DATAMEM_H

#include <stddef.h>

#include "transport.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rkv_srv_datamem;

/*
 * Open the backend for gpu (-1: host; else the CUDA device index).  why
 * gets the cause on failure.  Returns 0 or -errno as rkv_mem_open
 * (-EOPNOTSUPP no CUDA in the build, -ENODEV no driver / device / driver
 * too old, -ENXIO no such device).
 */
int rkv_srv_datamem_open(int gpu, char *why, size_t whylen,
			 struct rkv_srv_datamem **out);
/* Accepts NULL; frees nothing allocated through it (see _free). */
void rkv_srv_datamem_close(struct rkv_srv_datamem **dm);
/* -1: host memory; else the CUDA device. */
int rkv_srv_datamem_gpu(const struct rkv_srv_datamem *dm);
/* "host memory", "GPU 0 (CUDA device memory)". */
const char *rkv_srv_datamem_describe(const struct rkv_srv_datamem *dm);

/* len zeroed bytes that tp can expose; returns 0 or -errno. */
int rkv_srv_datamem_alloc(struct rkv_srv_datamem *dm, struct rkv_tp *tp,
			  size_t len, void **out);
void rkv_srv_datamem_free(struct rkv_srv_datamem *dm, struct rkv_tp *tp,
			  void *p, size_t len);
/*
 * Register [p, p+len) with access (GPU memory: GPUDirect RDMA on verbs,
 * see rkv_mr_reg_gpu).  Returns 0 or -errno; rkv_tp_gpu_why(tp) explains
 * a GPU failure.
 */
int rkv_srv_datamem_reg(struct rkv_srv_datamem *dm, struct rkv_tp *tp,
			void *p, size_t len, unsigned access,
			struct rkv_mr **out);

#ifdef __cplusplus
}
#endif
#endif
