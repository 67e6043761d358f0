/* SPDX-License-Identifier: MIT */
/*
 * gpu_client_nodev.c - the client's device-buffer calls (rkv_get_dev,
 * rkv_put_dev, rkv_rmw_dev) on a machine where they cannot work: no CUDA
 * driver or device (-ENODEV), or a build without CUDA (-EOPNOTSUPP).  Each
 * call fails at once, logs one line naming the cause through the client's
 * log callback, sends nothing and changes nothing (the key keeps its host
 * value, the server's key count is unchanged), and the client stays
 * usable.  Runs on every machine without a usable GPU (`make test`); on a
 * GPU machine it skips: gpu_client covers the working calls there.
 *
 *   gpu_client_nodev [--provider tcp|shm]   (default: tcp)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "rkv.h"
#include "rkv_ps.h"
#include "srv.h"
#include "test.h"

static struct test_srv g_srv;
static char g_last[512];
static int g_lines;

static void log_fn(int level, const char *msg, void *arg)
{
	(void)arg;
	if (level < 3)
		return;
	snprintf(g_last, sizeof(g_last), "%s", msg);
	g_lines++;
}

static int expect_rc(void)
{
	return RKV_HAVE_CUDA ? -ENODEV : -EOPNOTSUPP;
}

static int rmw_never(const void *old, size_t old_len, void *out, size_t cap,
		     size_t *out_len, void *arg)
{
	(void)old, (void)old_len, (void)out, (void)cap, (void)out_len;
	++*(int *)arg;
	return RKV_RMW_DELETE;
}

static void t_refused(void)
{
	struct rkv_client_opts o;
	struct rkv_client *c = NULL;
	struct rkv_server_stats st0, st1;
	struct rkv_client_stats cs;
	char buf[64] = "", fake[64];
	size_t len = 0;
	int calls = 0;

	rkv_client_opts_init(&o);
	o.servers = g_srv.addr;
	o.log_fn = log_fn;
	ASSERT_EQ(rkv_client_create(&o, &c), 0);
	ASSERT_EQ(rkv_put(c, "k", 1, "host-value", 10), 0);
	ASSERT_EQ(rkv_server_stats(c, 0, &st0), 0);
	rkv_client_stats_reset(c);
	memset(fake, 0x5a, sizeof(fake));

	g_lines = 0;
	EXPECT_EQ(rkv_get_dev(c, "k", 1, fake, sizeof(fake), &len, 0),
		  expect_rc());
	printf("#   get_dev: %s\n", g_last);
	EXPECT_EQ(g_lines, 1);
	EXPECT_TRUE(strstr(g_last, RKV_HAVE_CUDA ? "driver" : "no CUDA") !=
		    NULL);
	EXPECT_TRUE(strstr(g_last, "rkv_get_dev") != NULL);
	EXPECT_EQ(len, 0);
	EXPECT_EQ(fake[0], 0x5a);

	g_lines = 0;
	EXPECT_EQ(rkv_put_dev(c, "k", 1, fake, sizeof(fake), 0), expect_rc());
	printf("#   put_dev: %s\n", g_last);
	EXPECT_EQ(g_lines, 1);
	EXPECT_TRUE(strstr(g_last, "rkv_put_dev") != NULL);

	g_lines = 0;
	EXPECT_EQ(rkv_rmw_dev(c, "k", 1, rmw_never, &calls, 0), expect_rc());
	EXPECT_EQ(g_lines, 1);
	EXPECT_EQ(calls, 0);

	/* PS: pull and push with device buffers */
	{
		struct rkv_ps *ps = NULL;
		struct rkv_ps_tensor *t = NULL;
		float init[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, got[8];

		ASSERT_EQ(rkv_ps_create(c, &ps), 0);
		ASSERT_EQ(rkv_ps_tensor_create(ps, "nd", RKV_PS_FLOAT32, 8, 4,
					       init),
			  0);
		ASSERT_EQ(rkv_ps_tensor_open(ps, "nd", RKV_PS_FLOAT32, 8, &t),
			  0);
		rkv_client_stats_reset(c);
		g_lines = 0;
		EXPECT_EQ(rkv_ps_pull_dev(t, (float *)(void *)fake, 8, 0, NULL,
					  NULL),
			  expect_rc());
		EXPECT_EQ(rkv_ps_push_dev(t, RKV_PS_SUM,
					  (const float *)(void *)fake, 8, 0, 0),
			  expect_rc());
		EXPECT_EQ(g_lines, 2);
		EXPECT_TRUE(strstr(g_last, "rkv_ps_push_dev") != NULL);
		rkv_client_stats(c, &cs);
		EXPECT_EQ_U64(cs.doorbells, 0);
		EXPECT_EQ(rkv_ps_pull(t, got, 8, NULL, NULL), 0);
		EXPECT_TRUE(memcmp(got, init, sizeof(got)) == 0);
		rkv_ps_tensor_close(t);
		EXPECT_EQ(rkv_ps_tensor_delete(ps, "nd"), 0);
		rkv_ps_destroy(ps);
		ASSERT_EQ(rkv_server_stats(c, 0, &st0), 0);
		rkv_client_stats_reset(c);
	}

	/* a device index that cannot exist, a NULL client */
	EXPECT_TRUE(rkv_get_dev(c, "k", 1, fake, sizeof(fake), &len, -1) < 0);
	EXPECT_EQ(rkv_put_dev(NULL, "k", 1, fake, 8, 0), -EINVAL);

	/* nothing was sent, nothing changed, the client still works */
	rkv_client_stats(c, &cs);
	EXPECT_EQ_U64(cs.doorbells, 0);
	EXPECT_EQ(rkv_get(c, "k", 1, buf, sizeof(buf), &len), 0);
	EXPECT_EQ(len, 10);
	EXPECT_TRUE(memcmp(buf, "host-value", 10) == 0);
	ASSERT_EQ(rkv_server_stats(c, 0, &st1), 0);
	EXPECT_EQ_U64(st1.keys, st0.keys);
	rkv_client_destroy(c);
}

int main(int argc, char **argv)
{
	const char *prov;

	if (rkv_cuda_probe(0, NULL, 0) == 0) {
		printf("1..0 # SKIP a GPU is usable here: gpu_client tests "
		       "the device calls\n");
		return 77;
	}
	prov = test_itest_init(argc, argv, 120);
	if (!prov)
		return 77;
	if (test_srv_start(&g_srv, prov, NULL)) {
		printf("not ok - rkv-server did not start\n");
		return 1;
	}
	printf("# provider %s, build %s CUDA\n", prov,
	       RKV_HAVE_CUDA ? "with" : "without");
	RKV_TEST(t_refused);
	test_srv_stop(&g_srv);
	return rkv_test_done();
}
