/* SPDX-License-Identifier: MIT */
/*
 * gpu_client.c - client-side GPU buffers: rkv_get_dev / rkv_put_dev /
 * rkv_rmw_dev and rkv_ps_pull_dev / rkv_ps_push_dev against a host-memory
 * and a GPU-memory (--data-memory gpu) rkv-server, over tcp and shm.
 * Values written from device memory are read back by host clients and the
 * other way round (the block checksum is the same xxh3-64); a
 * multi-process torture mixes device and host clients on the same keys
 * and a shared rmw counter; bad input (a host pointer passed as device
 * memory, a device index past the last one) is refused with a log line
 * and changes nothing.
 *
 * --bench: PS pull/push bandwidth of 1..256 MiB float32 tensors with
 * device buffers beside cudaMemcpy device-to-host of the same bytes,
 * ending with "# GOAL MET|MISSED" for shm (goal 0.7x of cudaMemcpy).
 *
 *   gpu_client [--provider tcp|shm] [--bench]   (default: both)
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_test.h"
#include "rkv.h"
#include "rkv_ps.h"
#include "srv.h"
#include "test.h"

/* the largest value a device op moves (rkv.h: values over 256 KiB take
 * host buffers of their own) */
#define DEV_VALUE_MAX 261024u

#define PROCS 4
#define ITERS 150
#define SHARD (60000u) /* elements: 240 KB shards */

static const char *g_prov;
static struct test_srv g_srv;
static char g_log[512];

static const char *const g_host_args[] = { "--memory", "2G", "--capacity",
					   "100000", NULL };
static const char *const g_gpu_args[] = { "--data-memory", "gpu", "--memory",
					  "2G", "--capacity", "100000",
					  NULL };

static void log_fn(int level, const char *msg, void *arg)
{
	(void)arg;
	if (level >= 3)
		snprintf(g_log, sizeof(g_log), "%s", msg);
}

static struct rkv_client *client(void)
{
	struct rkv_client_opts o;
	struct rkv_client *c = NULL;

	rkv_client_opts_init(&o);
	o.servers = g_srv.addr;
	o.timeout_ms = 10000;
	o.log_fn = log_fn;
	if (rkv_client_create(&o, &c))
		return NULL;
	return c;
}

static void *dmalloc(size_t n)
{
	void *p = NULL;

	return rkv_cuda_malloc(0, n ? n : 1, &p) ? NULL : p;
}

static void t_get_put(void)
{
	static const size_t sizes[] = { 0, 1, 63, 4096, 100000, DEV_VALUE_MAX };
	struct rkv_client *c = client();
	uint8_t *v = malloc(DEV_VALUE_MAX), *r = malloc(DEV_VALUE_MAX);
	void *dv = dmalloc(DEV_VALUE_MAX), *dr = dmalloc(DEV_VALUE_MAX);
	size_t len;

	ASSERT_TRUE(c && v && r && dv && dr);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char k[32];

		snprintf(k, sizeof(k), "dev-%u", i);
		for (size_t j = 0; j < sizes[i]; j++)
			v[j] = (uint8_t)(j * 13 + i);
		ASSERT_EQ(rkv_cuda_copy(0, dv, v, sizes[i]), 0);
		/* device -> server, read by a host get */
		EXPECT_EQ(rkv_put_dev(c, k, strlen(k), dv, sizes[i], 0), 0);
		len = 0;
		EXPECT_EQ(rkv_get(c, k, strlen(k), r, DEV_VALUE_MAX, &len), 0);
		EXPECT_EQ(len, sizes[i]);
		EXPECT_TRUE(memcmp(v, r, sizes[i]) == 0);
		/* host put, device get (cached and cold) */
		EXPECT_EQ(rkv_put(c, k, strlen(k), v, sizes[i]), 0);
		for (int cold = 0; cold < 2; cold++) {
			struct rkv_client *c2 = cold ? client() : c;

			ASSERT_TRUE(c2 != NULL);
			ASSERT_EQ(rkv_cuda_memset(0, dr, 0xee, DEV_VALUE_MAX),
				  0);
			len = 0;
			EXPECT_EQ(rkv_get_dev(c2, k, strlen(k), dr,
					      DEV_VALUE_MAX, &len, 0),
				  0);
			EXPECT_EQ(len, sizes[i]);
			ASSERT_EQ(rkv_cuda_copy(0, r, dr, sizes[i]), 0);
			EXPECT_TRUE(memcmp(v, r, sizes[i]) == 0);
			if (cold)
				rkv_client_destroy(c2);
		}
	}
	/* too small a device buffer: -ENOBUFS with the length */
	EXPECT_EQ(rkv_get_dev(c, "dev-3", 5, dr, 10, &len, 0), -ENOBUFS);
	EXPECT_EQ(len, 4096);
	EXPECT_EQ(rkv_get_dev(c, "nope", 4, dr, 10, &len, 0), -ENOENT);
	rkv_cuda_free(0, dv);
	rkv_cuda_free(0, dr);
	free(v);
	free(r);
	rkv_client_destroy(c);
}

/* rmw on device values: old and out are device pointers */
static int dev_add(const void *old, size_t old_len, void *out, size_t cap,
		   size_t *out_len, void *arg)
{
	uint64_t v = 0;

	(void)cap;
	if (old && old_len == 8 && rkv_cuda_copy(0, &v, old, 8))
		return -EIO;
	v += (uint64_t)(uintptr_t)arg;
	if (rkv_cuda_copy(0, out, &v, 8))
		return -EIO;
	*out_len = 8;
	return RKV_RMW_WRITE;
}

static void t_rmw(void)
{
	struct rkv_client *c = client();
	uint64_t v = 0;
	size_t len;

	ASSERT_TRUE(c != NULL);
	rkv_delete(c, "dctr", 4);
	EXPECT_EQ(rkv_rmw_dev(c, "dctr", 4, dev_add, (void *)5, 0), 0);
	EXPECT_EQ(rkv_rmw_dev(c, "dctr", 4, dev_add, (void *)7, 0), 0);
	EXPECT_EQ(rkv_get(c, "dctr", 4, &v, 8, &len), 0);
	EXPECT_EQ(v, 12);
	rkv_client_destroy(c);
}

static void t_ps(void)
{
	struct rkv_client *c = client();
	struct rkv_ps *ps = NULL;
	struct rkv_ps_tensor *t = NULL;
	uint64_t n = 3 * SHARD + 123, vmin = 0, vmax = 0;
	float *h = malloc(n * 4), *g = malloc(n * 4);
	float *d = dmalloc(n * 4), *d2 = dmalloc(n * 4);

	ASSERT_TRUE(c && h && g && d && d2);
	ASSERT_EQ(rkv_ps_create(c, &ps), 0);
	rkv_ps_tensor_delete(ps, "gt");
	for (uint64_t i = 0; i < n; i++)
		h[i] = (float)(i % 1000);
	ASSERT_EQ(rkv_ps_tensor_create(ps, "gt", RKV_PS_FLOAT32, n, SHARD, h),
		  0);
	ASSERT_EQ(rkv_ps_tensor_open(ps, "gt", RKV_PS_FLOAT32, n, &t), 0);
	EXPECT_EQ(rkv_ps_pull_dev(t, d, n, 0, &vmin, &vmax), 0);
	ASSERT_EQ(rkv_cuda_copy(0, g, d, n * 4), 0);
	EXPECT_TRUE(memcmp(g, h, n * 4) == 0);
	EXPECT_EQ(vmin, 0);
	/* push SUM of ones from the device, SGD, ASSIGN; pull on the host */
	for (uint64_t i = 0; i < n; i++)
		g[i] = 1.0f;
	ASSERT_EQ(rkv_cuda_copy(0, d2, g, n * 4), 0);
	EXPECT_EQ(rkv_ps_push_dev(t, RKV_PS_SUM, d2, n, 0, 0), 0);
	EXPECT_EQ(rkv_ps_push_dev(t, RKV_PS_SGD, d2, n, 0.5f, 0), 0);
	EXPECT_EQ(rkv_ps_pull(t, g, n, &vmin, &vmax), 0);
	EXPECT_EQ(vmin, 2);
	EXPECT_EQ(vmax, 2);
	for (uint64_t i = 0; i < n; i++)
		if (g[i] != h[i] + 0.5f) {
			EXPECT_TRUE(g[i] == h[i] + 0.5f);
			break;
		}
	EXPECT_EQ(rkv_ps_push_dev(t, RKV_PS_ASSIGN, d, n, 0, 0), 0);
	EXPECT_EQ(rkv_ps_pull(t, g, n, NULL, NULL), 0);
	EXPECT_TRUE(memcmp(g, h, n * 4) == 0);
	/* bad input: a host pointer as device memory */
	g_log[0] = 0;
	EXPECT_EQ(rkv_ps_pull_dev(t, g, n, 0, NULL, NULL), -EINVAL);
	EXPECT_TRUE(strstr(g_log, "not CUDA device memory") != NULL);
	EXPECT_EQ(rkv_ps_push_dev(t, RKV_PS_SUM, h, n, 0, 0), -EINVAL);
	rkv_ps_tensor_close(t);
	rkv_ps_destroy(ps);
	rkv_cuda_free(0, d);
	rkv_cuda_free(0, d2);
	free(h);
	free(g);
	rkv_client_destroy(c);
}

static void t_bad_input(void)
{
	struct rkv_client *c = client();
	char host[64] = "unchanged";
	void *d = dmalloc(64);
	size_t len = 0;

	ASSERT_TRUE(c && d);
	EXPECT_EQ(rkv_put(c, "bk", 2, "v1", 2), 0);
	g_log[0] = 0;
	EXPECT_EQ(rkv_put_dev(c, "bk", 2, host, 8, 0), -EINVAL);
	printf("#   %s\n", g_log);
	EXPECT_TRUE(strstr(g_log, "not CUDA device memory") != NULL);
	EXPECT_EQ(rkv_get_dev(c, "bk", 2, host, sizeof(host), &len, 0),
		  -EINVAL);
	EXPECT_TRUE(strcmp(host, "unchanged") == 0);
	g_log[0] = 0;
	EXPECT_EQ(rkv_get_dev(c, "bk", 2, d, 64, &len,
			      rkv_cuda_device_count()),
		  -ENXIO);
	printf("#   %s\n", g_log);
	EXPECT_EQ(rkv_get(c, "bk", 2, host, sizeof(host), &len), 0);
	EXPECT_EQ(len, 2);
	rkv_cuda_free(0, d);
	rkv_client_destroy(c);
}

static int torture_child(unsigned id)
{
	struct rkv_client *c = client();
	uint8_t v[3000], r[3000];
	void *dv = dmalloc(3000), *dr = dmalloc(3000);
	int fails = 0, dev = id & 1; /* odd: device buffers */

	if (!c || !dv || !dr)
		return 1;
	for (unsigned i = 0; i < ITERS; i++) {
		char k[32];
		size_t n = 100 + (i * 37) % 2900, len = 0;
		int rc;

		rc = dev ? rkv_rmw_dev(c, "tshared", 7, dev_add, (void *)1, 0)
			 : 0;
		if (rc)
			fails++;
		snprintf(k, sizeof(k), "t%u-%u", id, i % 17);
		for (size_t j = 0; j < n; j++)
			v[j] = (uint8_t)(j ^ i ^ id);
		if (dev) {
			rc = rkv_cuda_copy(0, dv, v, n) ||
			     rkv_put_dev(c, k, strlen(k), dv, n, 0) ||
			     rkv_get_dev(c, k, strlen(k), dr, 3000, &len, 0) ||
			     rkv_cuda_copy(0, r, dr, n);
		} else {
			rc = rkv_put(c, k, strlen(k), v, n) ||
			     rkv_get(c, k, strlen(k), r, sizeof(r), &len);
		}
		if (rc || len != n || memcmp(v, r, n))
			fails++;
		/* the neighbour's keys (the other kind of client): whole */
		snprintf(k, sizeof(k), "t%u-%u", (id + 1) % PROCS, i % 17);
		rc = dev ? rkv_get_dev(c, k, strlen(k), dr, 3000, &len, 0)
			 : rkv_get(c, k, strlen(k), r, sizeof(r), &len);
		if (rc == 0) {
			if (dev && rkv_cuda_copy(0, r, dr, len))
				fails++;
			for (size_t j = 0; j < len; j++)
				if ((uint8_t)(r[j] ^ j ^ ((id + 1) % PROCS)) !=
				    (uint8_t)(r[0] ^ ((id + 1) % PROCS))) {
					fails++;
					break;
				}
		}
	}
	rkv_cuda_free(0, dv);
	rkv_cuda_free(0, dr);
	rkv_client_destroy(c);
	return fails ? 1 : 0;
}

static void t_torture(void)
{
	struct rkv_client *c = client();
	uint64_t v = 0;
	size_t len;

	ASSERT_TRUE(c != NULL);
	rkv_delete(c, "tshared", 7);
	EXPECT_EQ(gpu_run_clients(PROCS, g_srv.addr), 0);
	EXPECT_EQ(rkv_get(c, "tshared", 7, &v, 8, &len), 0);
	EXPECT_EQ(v, (uint64_t)(PROCS / 2) * ITERS);
	rkv_client_destroy(c);
}

/* ------------------------------------------------------------ bench */
static void t_bench(void)
{
	static const size_t mib[] = { 1, 4, 16, 64, 256 };
	struct rkv_client *c = client();
	struct rkv_ps *ps = NULL;
	float *d = dmalloc(256u << 20), *pin = NULL;
	double p_sum = 0, c_sum = 0;

	ASSERT_TRUE(c && d);
	ASSERT_EQ(rkv_cuda_host_alloc(256u << 20, (void **)&pin), 0);
	ASSERT_EQ(rkv_ps_create(c, &ps), 0);
	printf("# %s, PS with device buffers, GB/s (best of 3)\n", g_prov);
	printf("# %6s %9s %9s %12s %7s\n", "MiB", "pull_dev", "push_dev",
	       "memcpy D2H", "pull/D2H");
	for (unsigned i = 0; i < sizeof(mib) / sizeof(mib[0]); i++) {
		uint64_t n = (mib[i] << 20) / 4;
		struct rkv_ps_tensor *t = NULL;
		double bp = 0, bq = 0, bc = 0;

		rkv_ps_tensor_delete(ps, "bench");
		ASSERT_EQ(rkv_ps_tensor_create(ps, "bench", RKV_PS_FLOAT32, n,
					       SHARD, NULL),
			  0);
		ASSERT_EQ(rkv_ps_tensor_open(ps, "bench", RKV_PS_FLOAT32, n,
					     &t),
			  0);
		for (int rep = 0; rep < 3; rep++) {
			uint64_t t0 = rkv_now_ns(), t1, t2, t3;

			EXPECT_EQ(rkv_ps_pull_dev(t, d, n, 0, NULL, NULL), 0);
			t1 = rkv_now_ns();
			EXPECT_EQ(rkv_ps_push_dev(t, RKV_PS_ASSIGN, d, n, 0, 0),
				  0);
			t2 = rkv_now_ns();
			EXPECT_EQ(rkv_cuda_copy(0, pin, d, n * 4), 0);
			t3 = rkv_now_ns();
			if (n * 4.0 / (t1 - t0) > bp)
				bp = n * 4.0 / (t1 - t0);
			if (n * 4.0 / (t2 - t1) > bq)
				bq = n * 4.0 / (t2 - t1);
			if (n * 4.0 / (t3 - t2) > bc)
				bc = n * 4.0 / (t3 - t2);
		}
		printf("# %6zu %9.2f %9.2f %12.2f %7.2f\n", mib[i], bp, bq, bc,
		       bc > 0 ? bp / bc : 0);
		if (mib[i] >= 16) {
			p_sum += bp;
			c_sum += bc;
		}
		rkv_ps_tensor_close(t);
		rkv_ps_tensor_delete(ps, "bench");
	}
	if (c_sum > 0)
		printf("# GOAL %s: %s PS pull_dev %.2fx of cudaMemcpy D2H "
		       "(16-256 MiB; goal >= 0.70x)\n",
		       p_sum / c_sum >= 0.7 ? "MET" : "MISSED", g_prov,
		       p_sum / c_sum);
	rkv_ps_destroy(ps);
	rkv_cuda_host_free(pin);
	rkv_cuda_free(0, d);
	rkv_client_destroy(c);
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	int bench = 0;
	char **child = gpu_child_of(argc, argv);

	signal(SIGPIPE, SIG_IGN);
	if (child) { /* a t_torture process */
		int id = gpu_client_args(child, g_srv.addr, sizeof(g_srv.addr));

		return id < 0 ? 2 : torture_child((unsigned)id);
	}
	gpu_test_args(argc, argv, &only, &bench);
	gpu_test_require();
	rkv_test_init(argc, argv, bench ? 600 : 300);
	test_srv_setup(argv[0]);
	for (int p = 0; p < 2; p++) {
		g_prov = p ? "shm" : "tcp";
		if (only && strcmp(only, g_prov) != 0)
			continue;
		for (int gm = 0; gm < (bench ? 1 : 2); gm++) {
			printf("# provider %s, server data in %s memory\n",
			       g_prov, gm ? "GPU" : "host");
			if (test_srv_start(&g_srv, g_prov,
					   gm ? g_gpu_args : g_host_args)) {
				printf("not ok - %s: rkv-server did not "
				       "start\n", g_prov);
				return 1;
			}
			if (bench) {
				RKV_TEST(t_bench);
			} else {
				RKV_TEST(t_get_put);
				RKV_TEST(t_rmw);
				RKV_TEST(t_ps);
				RKV_TEST(t_bad_input);
				RKV_TEST(t_torture);
			}
			EXPECT_EQ(test_srv_stop(&g_srv), 0);
		}
	}
	return rkv_test_done();
}
