/* SPDX-License-Identifier: MIT */
/*
 * gpu_test.h - shared by the GPU tests (tests/gpu/gpu_*.c): skip with the
 * reason when no CUDA device is usable, and post-and-wait helpers.
 * Every GPU test prints TAP, exits 0/1/77, and skips (77, "1..0 # SKIP
 * why") on a machine without a usable GPU, so `make test` passes there.
 */
#ifndef RKV_TESTS_GPU_GPU_TEST_H
#define RKV_TESTS_GPU_GPU_TEST_H

#include <stdio.h>
#include <stdlib.h>

#include "gpu/gpu.h"
#include "rtime.h"
#include "transport.h"

/* Exit 77 with the reason unless CUDA device 0 is usable. */
static inline void gpu_test_require(void)
{
	char why[256];

	if (rkv_cuda_probe(0, why, sizeof(why))) {
		printf("1..0 # SKIP no usable GPU: %s\n", why);
		fflush(stdout);
		exit(77);
	}
}

/* Post one signaled WR and wait (10 s) for its completion status. */
static inline int gpu_post_wait(struct rkv_ep *ep, struct rkv_cq *cq,
				struct rkv_wr *wr)
{
	struct rkv_wc wc;
	uint64_t end = rkv_now_ms() + 10000;
	int n;

	wr->flags |= RKV_WR_SIGNALED;
	wr->next = NULL;
	if (rkv_post(ep, wr, NULL))
		return -1;
	while (rkv_now_ms() < end) {
		n = rkv_cq_poll(cq, &wc, 1);
		if (n < 0)
			return -1;
		if (n == 1)
			return (int)wc.status;
	}
	return -2;
}

#endif
