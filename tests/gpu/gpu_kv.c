/* SPDX-License-Identifier: MIT */
/*
 * gpu_kv.c - the KV store with its data region in GPU memory: a real
 * rkv-server --data-memory gpu and librkv clients over tcp and shm (the
 * client reads and writes the GPU-resident blocks; the index stays in host
 * memory).  gets, puts (value sizes up to the maximum), deletes, rmw, and
 * a multi-process torture: processes incrementing shared counters by rmw
 * and round-tripping their own keys, then the totals are checked.  Bad
 * input: --data-memory gpu:N past the last device fails at start with one
 * line naming the cause.
 *
 *   gpu_kv [--provider tcp|shm]   (default: both)
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
#include "srv.h"
#include "test.h"

/* the largest value a device op moves (rkv.h: values over 256 KiB take
 * host buffers of their own) */
#define DEV_VALUE_MAX 261024u

#define PROCS 4
#define ITERS 200

static const char *g_prov;
static struct test_srv g_srv;

static const char *const g_args[] = { "--data-memory", "gpu", "--memory",
				      "256M", "--capacity", "100000", NULL };

static struct rkv_client *client(void)
{
	struct rkv_client_opts o;
	struct rkv_client *c = NULL;

	rkv_client_opts_init(&o);
	o.servers = g_srv.addr;
	o.timeout_ms = 5000;
	if (rkv_client_create(&o, &c))
		return NULL;
	return c;
}

static void t_get_put_del(void)
{
	static const size_t sizes[] = { 0, 1, 64, 4096, 100000, DEV_VALUE_MAX };
	struct rkv_client *c = client();
	uint8_t *v = malloc(DEV_VALUE_MAX), *r = malloc(DEV_VALUE_MAX);
	size_t len;

	ASSERT_TRUE(c && v && r);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char k[32];

		snprintf(k, sizeof(k), "gpu-key-%u", i);
		for (size_t j = 0; j < sizes[i]; j++)
			v[j] = (uint8_t)(j * 31 + i);
		EXPECT_EQ(rkv_put(c, k, strlen(k), v, sizes[i]), 0);
		len = 0;
		EXPECT_EQ(rkv_get(c, k, strlen(k), r, DEV_VALUE_MAX, &len), 0);
		EXPECT_EQ(len, sizes[i]);
		EXPECT_TRUE(memcmp(v, r, sizes[i]) == 0);
	}
	EXPECT_EQ(rkv_delete(c, "gpu-key-1", 9), 0);
	EXPECT_EQ(rkv_get(c, "gpu-key-1", 9, r, DEV_VALUE_MAX, &len), -ENOENT);
	free(v);
	free(r);
	rkv_client_destroy(c);
}

static void t_rmw(void)
{
	struct rkv_client *c = client();
	uint64_t v = 0;
	size_t len;

	ASSERT_TRUE(c != NULL);
	EXPECT_EQ(rkv_rmw(c, "ctr", 3, test_rmw_add, (void *)5), 0);
	EXPECT_EQ(rkv_rmw(c, "ctr", 3, test_rmw_add, (void *)7), 0);
	EXPECT_EQ(rkv_get(c, "ctr", 3, &v, 8, &len), 0);
	EXPECT_EQ(v, 12);
	rkv_client_destroy(c);
}

static int torture_child(unsigned id)
{
	struct rkv_client *c = client();
	uint8_t v[3000], r[3000];
	int fails = 0;

	if (!c)
		return 1;
	for (unsigned i = 0; i < ITERS; i++) {
		char k[32];
		size_t n = 100 + (i * 37) % 2900, len = 0;

		if (rkv_rmw(c, "shared", 6, test_rmw_add, (void *)1))
			fails++;
		snprintf(k, sizeof(k), "p%u-%u", id, i % 17);
		for (size_t j = 0; j < n; j++)
			v[j] = (uint8_t)(j ^ i ^ id);
		if (rkv_put(c, k, strlen(k), v, n) ||
		    rkv_get(c, k, strlen(k), r, sizeof(r), &len) || len != n ||
		    memcmp(v, r, n))
			fails++;
		/* read other processes' keys: must be whole values */
		snprintf(k, sizeof(k), "p%u-%u", (id + 1) % PROCS, i % 17);
		if (rkv_get(c, k, strlen(k), r, sizeof(r), &len) == 0) {
			for (size_t j = 0; j < len; j++)
				if ((uint8_t)(r[j] ^ j ^ ((id + 1) % PROCS)) !=
				    (uint8_t)(r[0] ^ ((id + 1) % PROCS))) {
					fails++;
					break;
				}
		}
	}
	rkv_client_destroy(c);
	return fails ? 1 : 0;
}

static void t_torture(void)
{
	struct rkv_client *c;
	uint64_t v = 0;
	size_t len;

	EXPECT_EQ(gpu_run_clients(PROCS, g_srv.addr), 0);
	c = client();
	ASSERT_TRUE(c != NULL);
	EXPECT_EQ(rkv_get(c, "shared", 6, &v, 8, &len), 0);
	EXPECT_EQ(v, (uint64_t)PROCS * ITERS);
	rkv_client_destroy(c);
}

/* A device index past the last one: one line naming the cause, exit 1. */
static void t_bad_device(void)
{
	char cmd[600], line[512] = "";
	int n = rkv_cuda_device_count(), lines = 0, st;
	FILE *f;

	snprintf(cmd, sizeof(cmd),
		 "%s/rkv-server --listen tcp://127.0.0.1:0 "
		 "--data-memory gpu:%d 2>&1 >/dev/null",
		 test_bin_dir(), n);
	f = popen(cmd, "r");
	ASSERT_TRUE(f != NULL);
	while (fgets(line + (lines ? 0 : 0), sizeof(line), f))
		lines++;
	st = pclose(f);
	printf("#   %s", line);
	EXPECT_EQ(lines, 1);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	EXPECT_TRUE(strstr(line, "requested") != NULL);
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	char **child = gpu_child_of(argc, argv);

	signal(SIGPIPE, SIG_IGN);
	if (child) { /* a t_torture process */
		int id = gpu_client_args(child, g_srv.addr, sizeof(g_srv.addr));

		return id < 0 ? 2 : torture_child((unsigned)id);
	}
	gpu_test_args(argc, argv, &only, NULL);
	gpu_test_require();
	rkv_test_init(argc, argv, 300);
	test_srv_setup(argv[0]);
	RKV_TEST(t_bad_device);
	for (int p = 0; p < 2; p++) {
		g_prov = p ? "shm" : "tcp";
		if (only && strcmp(only, g_prov) != 0)
			continue;
		printf("# provider %s, server --data-memory gpu\n", g_prov);
		if (test_srv_start(&g_srv, g_prov, g_args)) {
			printf("not ok - %s: rkv-server --data-memory gpu did "
			       "not start\n", g_prov);
			return 1;
		}
		RKV_TEST(t_get_put_del);
		RKV_TEST(t_rmw);
		RKV_TEST(t_torture);
		EXPECT_EQ(test_srv_stop(&g_srv), 0);
	}
	return rkv_test_done();
}
