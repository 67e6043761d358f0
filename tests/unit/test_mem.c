/* SPDX-License-Identifier: MIT */
/*
 * test_mem.c - the memory backend (common/mem.h) on any machine: the host
 * path, the refusals when there is no usable GPU (no CUDA in the build, no
 * driver, no such device) with a reason naming the cause, the transport's
 * GPU calls failing cleanly the same way, and the GPU xxh3 transcription
 * (common/gpu/xxh3_impl.h) computed on the host against libxxhash.  What
 * needs a real GPU lives in tests/gpu/ (make check-gpu).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "gpu/gpu.h"
#include "gpu/xxh3_impl.h"
#include "mem.h"
#include "test.h"
#include "transport.h"

static void t_host_backend(void)
{
	struct rkv_mem *m = NULL;
	char why[256];
	uint8_t *p = NULL, buf[100];

	ASSERT_EQ(rkv_mem_open(-1, why, sizeof(why), &m), 0);
	EXPECT_EQ(m->ops->kind, RKV_MEM_HOST);
	EXPECT_EQ(m->gpu, -1);
	EXPECT_STREQ(m->describe, "host memory");
	EXPECT_STREQ(rkv_mem_kind_str(m->ops->kind), "host");
	ASSERT_EQ(rkv_mem_alloc(m, 10000, (void **)&p), 0);
	EXPECT_EQ((uintptr_t)p % 4096, 0);
	for (int i = 0; i < 10000; i++)
		if (p[i])
			EXPECT_TRUE(!"host memory is zeroed");
	memset(buf, 0xab, sizeof(buf));
	EXPECT_EQ(rkv_mem_copy_in(m, p + 5, buf, sizeof(buf)), 0);
	memset(buf, 0, sizeof(buf));
	EXPECT_EQ(rkv_mem_copy_out(m, buf, p + 5, sizeof(buf)), 0);
	EXPECT_EQ(buf[0], 0xab);
	EXPECT_EQ(buf[99], 0xab);
	EXPECT_EQ(rkv_mem_zero(m, p, 10000), 0);
	EXPECT_EQ(p[5], 0);
	EXPECT_EQ(rkv_mem_alloc(m, 0, (void **)&p) == -EINVAL, 1);
	rkv_mem_free(m, p, 10000);
	rkv_mem_close(&m);
	EXPECT_TRUE(m == NULL);
	rkv_mem_close(&m); /* NULL is fine */
	rkv_mem_close(NULL);
}

static void t_bad_index(void)
{
	struct rkv_mem *m = NULL;
	char why[256];

	EXPECT_EQ(rkv_mem_open(-2, why, sizeof(why), &m), -EINVAL);
	EXPECT_TRUE(m == NULL);
	EXPECT_TRUE(strstr(why, "-2") != NULL);
}

/* No GPU usable here: opening one fails with a reason naming the cause. */
static void t_gpu_refused(void)
{
	struct rkv_mem *m = NULL;
	char why[256] = "";
	int rc;

	if (rkv_cuda_device_count() > 0) {
		rkv_test_skip("this machine has a CUDA device (make check-gpu)");
		return;
	}
	rc = rkv_mem_open(0, why, sizeof(why), &m);
	printf("#   gpu 0: %s (%s)\n", why, strerror(-rc));
	EXPECT_TRUE(m == NULL);
	if (!rkv_mem_have_cuda()) {
		EXPECT_EQ(rc, -EOPNOTSUPP);
		EXPECT_TRUE(strstr(why, "no CUDA support") != NULL);
	} else {
		EXPECT_EQ(rc, -ENODEV);
		EXPECT_TRUE(strstr(why, "CUDA driver not available") != NULL ||
			    strstr(why, "CUDA driver too old") != NULL ||
			    strstr(why, "no CUDA device") != NULL);
	}
	rc = rkv_mem_open(7, why, sizeof(why), &m);
	EXPECT_TRUE(rc == -ENODEV || rc == -EOPNOTSUPP || rc == -ENXIO);
	EXPECT_TRUE(why[0] != 0);
}

/* The transport's GPU calls fail cleanly, with a reason, on every
 * software provider, and leave the context usable. */
static void t_tp_gpu_refused(void)
{
	static const enum rkv_tp_provider provs[] = { RKV_TP_TCP, RKV_TP_SHM };

	if (rkv_cuda_device_count() > 0) {
		rkv_test_skip("this machine has a CUDA device (make check-gpu)");
		return;
	}
	for (unsigned i = 0; i < 2; i++) {
		struct rkv_tp_opts o;
		struct rkv_tp *tp = NULL;
		struct rkv_mr *mr = NULL;
		void *p = NULL;
		int rc;

		rkv_tp_opts_init(&o);
		o.provider = provs[i];
		ASSERT_EQ(rkv_tp_create(&o, &tp), 0);
		rc = rkv_tp_mem_alloc_gpu(tp, 0, 1 << 20, &p);
		EXPECT_TRUE(rc == -ENODEV || rc == -EOPNOTSUPP);
		EXPECT_TRUE(p == NULL);
		EXPECT_TRUE(rkv_tp_gpu_why(tp)[0] != 0);
		printf("#   %s: %s\n", rkv_tp_provider_str(provs[i]),
		       rkv_tp_gpu_why(tp));
		/* a "GPU buffer" where no GPU is usable: refused at once */
		{
			static uint64_t fake[512];

			rc = rkv_mr_reg_gpu(tp, fake, sizeof(fake),
					    RKV_ACCESS_ALL, 0, &mr);
			EXPECT_TRUE(rc == -ENODEV || rc == -EOPNOTSUPP);
			EXPECT_TRUE(mr == NULL);
			EXPECT_EQ(rkv_mr_reg_gpu(tp, fake, sizeof(fake),
						 RKV_ACCESS_ALL, -1, &mr),
				  -EINVAL);
		}
		rkv_tp_mem_free_gpu(tp, 0, NULL, 0); /* no-op */
		/* host memory still works and says so */
		ASSERT_EQ(rkv_tp_mem_alloc(tp, 4096, &p), 0);
		ASSERT_EQ(rkv_mr_reg(tp, p, 4096, RKV_ACCESS_ALL, &mr), 0);
		EXPECT_EQ(mr->gpu, -1);
		EXPECT_EQ(rkv_mr_dereg(mr), 0);
		rkv_tp_mem_free(tp, p, 4096);
		rkv_tp_destroy(tp);
	}
}

/* The GPU kernel's xxh3 code, run on the host: identical to libxxhash on
 * every length class (0, 1-3, 4-8, 9-16, 17-128, 129-240, long) and seed. */
static void t_xxh3_transcription(void)
{
	static const uint8_t ks[] = { RKV_XXH3_KSECRET };
	static const uint64_t seeds[] = { 0, 1, 0x9e3779b97f4a7c15ull,
					  ~0ull };
	uint8_t scratch[RKV_XXH3_SECRET_SIZE];
	size_t n = 5000;
	uint8_t *buf = malloc(n + 8);
	unsigned bad = 0;

	ASSERT_TRUE(buf != NULL);
	EXPECT_EQ(sizeof(ks), RKV_XXH3_SECRET_SIZE);
	srand(7);
	for (size_t i = 0; i < n + 8; i++)
		buf[i] = (uint8_t)rand();
	for (unsigned s = 0; s < 4; s++)
		for (size_t len = 0; len <= n; len += len < 300 ? 1 : 97)
			for (size_t off = 0; off < 3; off++)
				if (XXH3_64bits_withSeed(buf + off, len,
							 seeds[s]) !=
				    rkv_xxh3_64(buf + off, len, seeds[s], ks,
						scratch))
					bad++;
	EXPECT_EQ(bad, 0);
	free(buf);
}

int main(int argc, char **argv)
{
	rkv_test_init(argc, argv, 60);
	RKV_TEST(t_host_backend);
	RKV_TEST(t_bad_index);
	RKV_TEST(t_gpu_refused);
	RKV_TEST(t_tp_gpu_refused);
	RKV_TEST(t_xxh3_transcription);
	return rkv_test_done();
}
