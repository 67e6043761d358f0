/* SPDX-License-Identifier: MIT */
/*
 * test_server.c - unit tests for the pure parts of rkv-server: the space
 * manager (grant, next fit, exhaustion, return, grace expiry on a fake
 * clock, duplicate and invalid returns, rebuild after a client death), the
 * settings table (sizes, bounds, relationships, getopt parsing) and the
 * index scans.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server_internal.h"
#include "test.h"

#define K 1024ull

static struct rkv_space_stats stats(const struct rkv_space *sp)
{
	struct rkv_space_stats st;

	rkv_space_get_stats(sp, &st);
	return st;
}

static void t_space_grant(void)
{
	struct rkv_space *sp;
	uint64_t off, a, b;

	EXPECT_EQ(rkv_space_create(0, 100, &sp), -EINVAL);
	EXPECT_EQ(rkv_space_create(100, 100, &sp), -EINVAL);
	ASSERT_EQ(rkv_space_create(64 * K, 100, &sp), 0);
	EXPECT_EQ(stats(sp).free, 64 * K);
	EXPECT_EQ(rkv_space_grant(sp, 0, &off), -EINVAL);
	EXPECT_EQ(rkv_space_grant(sp, 100, &off), -EINVAL);
	EXPECT_EQ(rkv_space_grant(sp, 128 * K, &off), -EINVAL);
	ASSERT_EQ(rkv_space_grant(sp, 16 * K, &a), 0);
	ASSERT_EQ(rkv_space_grant(sp, 16 * K, &b), 0);
	EXPECT_EQ(a, 0);
	EXPECT_EQ(b, 16 * K); /* next fit */
	EXPECT_EQ(stats(sp).free, 32 * K);
	EXPECT_EQ(stats(sp).grants, 2);
	/* an odd size, then exhaustion */
	ASSERT_EQ(rkv_space_grant(sp, 64, &off), 0);
	EXPECT_EQ(off, 32 * K);
	EXPECT_EQ(rkv_space_grant(sp, 32 * K, &off), -ENOSPC);
	ASSERT_EQ(rkv_space_grant(sp, 32 * K - 64, &off), 0);
	EXPECT_EQ(off, 32 * K + 64);
	EXPECT_EQ(stats(sp).free, 0);
	EXPECT_EQ(rkv_space_grant(sp, 64, &off), -ENOSPC);
	rkv_space_destroy(sp);
}

static void t_space_return_grace(void)
{
	struct rkv_space *sp;
	uint64_t a, off;

	ASSERT_EQ(rkv_space_create(8 * K, 1000, &sp), 0);
	ASSERT_EQ(rkv_space_grant(sp, 8 * K, &a), 0);
	EXPECT_EQ(rkv_space_grant(sp, 64, &off), -ENOSPC);
	/* invalid extents change nothing */
	EXPECT_EQ(rkv_space_return(sp, 32, 64, 0), -EINVAL);     /* misaligned */
	EXPECT_EQ(rkv_space_return(sp, 0, 100, 0), -EINVAL);     /* len */
	EXPECT_EQ(rkv_space_return(sp, 0, 0, 0), -EINVAL);       /* empty */
	EXPECT_EQ(rkv_space_return(sp, 8 * K, 64, 0), -EINVAL);  /* outside */
	EXPECT_EQ(rkv_space_return(sp, 8 * K - 64, 128, 0), -EINVAL);
	EXPECT_EQ(rkv_space_return(sp, UINT64_MAX - 63, 64, 0), -EINVAL);
	EXPECT_EQ(stats(sp).bad_returns, 6);
	EXPECT_EQ(stats(sp).grace, 0);
	/* two blocks return at t=10 and t=500 */
	EXPECT_EQ(rkv_space_return(sp, 0, 256, 10), 0);
	EXPECT_EQ(rkv_space_return(sp, 1024, 512, 500), 0);
	EXPECT_EQ(stats(sp).grace, 768);
	EXPECT_EQ(stats(sp).returns, 2);
	/* duplicate, and overlap with a block in grace */
	EXPECT_EQ(rkv_space_return(sp, 0, 256, 20), -EALREADY);
	EXPECT_EQ(rkv_space_return(sp, 192, 128, 20), -EALREADY);
	EXPECT_EQ(stats(sp).grace, 768);
	/* nothing frees before the grace period */
	EXPECT_EQ(rkv_space_tick(sp, 1009), 0);
	EXPECT_EQ(rkv_space_grant(sp, 64, &off), -ENOSPC);
	EXPECT_EQ(rkv_space_tick(sp, 1010), 256);
	EXPECT_EQ(stats(sp).free, 256);
	EXPECT_EQ(stats(sp).grace, 512);
	/* freed units are free, not allocated: a late duplicate is refused */
	EXPECT_EQ(rkv_space_return(sp, 0, 256, 1020), -EALREADY);
	EXPECT_EQ(rkv_space_grant(sp, 512, &off), -ENOSPC); /* not contiguous */
	ASSERT_EQ(rkv_space_grant(sp, 256, &off), 0);
	EXPECT_EQ(off, 0);
	EXPECT_EQ(rkv_space_tick(sp, 2000), 512);
	EXPECT_EQ(stats(sp).free, 512);
	ASSERT_EQ(rkv_space_grant(sp, 512, &off), 0);
	EXPECT_EQ(off, 1024);
	/* largest block */
	EXPECT_EQ(rkv_space_return(sp, 2048, RKV_MAX_BLOCK + 64, 2000),
		  -EINVAL);
	rkv_space_destroy(sp);
}

static void t_space_next_fit_wrap(void)
{
	struct rkv_space *sp;
	uint64_t off[4], x;

	ASSERT_EQ(rkv_space_create(4 * K, 0, &sp), 0);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(rkv_space_grant(sp, K, &off[i]), 0);
	/* free the first and third chunk (grace 0) */
	for (int i = 0; i < 4; i += 2)
		for (uint64_t o = 0; o < K; o += 256)
			ASSERT_EQ(rkv_space_return(sp, off[i] + o, 256, 5), 0);
	EXPECT_EQ(rkv_space_tick(sp, 5), 2 * K);
	/* cursor is at the end: the search wraps to the start */
	ASSERT_EQ(rkv_space_grant(sp, K, &x), 0);
	EXPECT_EQ(x, 0);
	ASSERT_EQ(rkv_space_grant(sp, K, &x), 0);
	EXPECT_EQ(x, 2 * K);
	EXPECT_EQ(rkv_space_grant(sp, 64, &x), -ENOSPC);
	rkv_space_destroy(sp);
}

/* Long bitmaps: runs crossing 64-unit words. */
static void t_space_words(void)
{
	struct rkv_space *sp;
	uint64_t off;

	ASSERT_EQ(rkv_space_create(1024 * K, 0, &sp), 0);
	ASSERT_EQ(rkv_space_grant(sp, 64 * 100, &off), 0);
	ASSERT_EQ(rkv_space_grant(sp, 64 * 1000, &off), 0);
	EXPECT_EQ(off, 64 * 100);
	EXPECT_EQ(rkv_space_return(sp, 64 * 60, 64 * 10, 0), 0);
	EXPECT_EQ(rkv_space_return(sp, 64 * 90, 64 * 20, 0), 0); /* crosses */
	EXPECT_EQ(rkv_space_return(sp, 64 * 65, 64, 0), -EALREADY);
	EXPECT_EQ(rkv_space_tick(sp, 0), 64 * 30);
	EXPECT_EQ(stats(sp).free, 1024 * K - 64 * 1070);
	rkv_space_destroy(sp);
}

static void t_space_rebuild(void)
{
	struct rkv_space *sp;
	uint64_t a, b, c, freed;
	uint64_t slots[16] = { 0 };

	ASSERT_EQ(rkv_space_create(64 * K, 1000, &sp), 0);
	ASSERT_EQ(rkv_space_grant(sp, 4 * K, &a), 0); /* dead client */
	ASSERT_EQ(rkv_space_grant(sp, 4 * K, &b), 0); /* dead client */
	ASSERT_EQ(rkv_space_grant(sp, 4 * K, &c), 0); /* live client */
	/* published blocks: two in chunk a (one locked), one in c */
	slots[3] = rkv_slot_make(a / 64 + 2, 3, 0x11, 5);
	slots[9] = rkv_slot_make(a / 64 + 10, 1, 0x12, 0) | RKV_SLOT_LOCK;
	slots[12] = rkv_slot_make(c / 64, 4, 0x13, 1);
	/* garbage slot outside the region is ignored */
	slots[13] = rkv_slot_make((1ull << 34) - 1, 4095, 0, 0);
	/* the dead client had returned one block of a */
	ASSERT_EQ(rkv_space_return(sp, a + 64 * 20, 128, 0), 0);

	/* a live client holds a small chunk granted out of the dead one's
	 * range: carve it by hand as the free fragment [b+1K, b+2K) */
	struct rkv_space_extent orphans[] = { { a, 4 * K }, { b, 4 * K } };
	struct rkv_space_extent keep[] = { { c, 4 * K }, { b + K, K } };

	ASSERT_EQ(rkv_space_rebuild(sp, orphans, 2, keep, 2, slots, 16, 100,
				    &freed),
		  0);
	/* a: 64 units - 3 - 1 live - 2 already in grace = 58; b: 64 - 16 */
	EXPECT_EQ(freed, (58 + 48) * 64);
	EXPECT_EQ(stats(sp).rebuilds, 1);
	EXPECT_EQ(stats(sp).grace, (58 + 48 + 2) * 64);
	/* a late BLOCK_RETURN of a rebuilt unit is a duplicate */
	EXPECT_EQ(rkv_space_return(sp, a, 64, 200), -EALREADY);
	EXPECT_EQ(rkv_space_return(sp, b + 3 * K, 128, 200), -EALREADY);
	/* the live blocks are still allocated: they can be returned later */
	EXPECT_EQ(rkv_space_return(sp, a + 128, 192, 200), 0);
	EXPECT_EQ(rkv_space_return(sp, b + K, 64, 200), 0); /* kept chunk */
	/* after the grace period everything rebuilt is free */
	EXPECT_EQ(rkv_space_tick(sp, 1100), (2 + 58 + 48) * 64);
	EXPECT_EQ(stats(sp).free, 64 * K - 12 * K + (2 + 58 + 48) * 64);
	/* a second rebuild of the same range finds nothing more */
	ASSERT_EQ(rkv_space_rebuild(sp, orphans, 2, keep, 2, slots, 16, 2000,
				    &freed),
		  0);
	EXPECT_EQ(freed, 0);
	rkv_space_destroy(sp);
}

static void t_index_scan_cb(uint64_t off, uint32_t len, void *arg)
{
	uint64_t *sum = arg;

	*sum += off + len;
}

static void t_index(void)
{
	uint64_t slots[64] = { 0 }, sum = 0;

	EXPECT_EQ(rkv_srv_index_count(slots, 64), 0);
	slots[0] = rkv_slot_make(1, 1, 0, 0);
	slots[63] = rkv_slot_make(10, 2, 0, 0) | RKV_SLOT_LOCK;
	EXPECT_EQ(rkv_srv_index_count(slots, 64), 2);
	rkv_srv_index_scan(slots, 64, t_index_scan_cb, &sum);
	EXPECT_EQ(sum, 64 + 64 + 640 + 128);
}

static void t_config_values(void)
{
	uint64_t v;

	EXPECT_EQ(rkv_srv_parse_size("0", &v), 0);
	EXPECT_EQ(rkv_srv_parse_size("4096", &v), 0);
	EXPECT_EQ(v, 4096);
	EXPECT_EQ(rkv_srv_parse_size("64K", &v), 0);
	EXPECT_EQ(v, 64 * K);
	EXPECT_EQ(rkv_srv_parse_size("256m", &v), 0);
	EXPECT_EQ(v, 256 * K * K);
	EXPECT_EQ(rkv_srv_parse_size("2GiB", &v), 0);
	EXPECT_EQ(v, 2 * K * K * K);
	EXPECT_EQ(rkv_srv_parse_size("1T", &v), 0);
	EXPECT_EQ(rkv_srv_parse_size("", &v), -EINVAL);
	EXPECT_EQ(rkv_srv_parse_size("-1", &v), -EINVAL);
	EXPECT_EQ(rkv_srv_parse_size("12X", &v), -EINVAL);
	EXPECT_EQ(rkv_srv_parse_size("1KK", &v), -EINVAL);
	EXPECT_EQ(rkv_srv_parse_size("99999999999999999999", &v), -EINVAL);
	EXPECT_EQ(rkv_srv_parse_size("17179869184G", &v), -EINVAL);

	EXPECT_EQ(rkv_srv_buckets_for(0), 2);
	EXPECT_EQ(rkv_srv_buckets_for(12), 2);
	EXPECT_EQ(rkv_srv_buckets_for(13), 4);
	EXPECT_EQ(rkv_srv_buckets_for(1000000), 262144);
	EXPECT_EQ(rkv_srv_buckets_for(6 * 1024), 1024);
	EXPECT_EQ(rkv_srv_buckets_for(6 * 1024 + 1), 2048);
}

static int parse(struct rkv_srv_config *cfg, char *err, size_t n, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	FILE *devnull = fopen("/dev/null", "w");
	int rc;

	argv[argc++] = (char *)"rkv-server";
	va_start(ap, n);
	for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 31;)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	rkv_srv_config_init(cfg);
	err[0] = '\0';
	rc = rkv_srv_config_parse(cfg, argc, argv, devnull, err, n);
	fclose(devnull);
	return rc;
}

static void t_config_parse(void)
{
	struct rkv_srv_config cfg;
	char err[256];

	rkv_srv_config_init(&cfg);
	EXPECT_STREQ(cfg.listen, "tcp://127.0.0.1:7000");
	EXPECT_EQ(cfg.memory, 256 * K * K);
	EXPECT_EQ(cfg.lease_ms, 100);
	EXPECT_EQ(cfg.grace_ms, 1000);
	EXPECT_EQ(cfg.chunk, K * K);
	EXPECT_EQ(cfg.max_clients, 1024);
	EXPECT_EQ(cfg.gid_index, -1);
	EXPECT_EQ(cfg.log_level, RKV_LOG_INFO);
	EXPECT_EQ(cfg.nbuckets, 262144);

	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--listen", "shm:///rkv-t",
			"--memory", "1M", "--buckets", "1024", "--lease", "50",
			"--grace", "500", "--chunk", "64K", "--max-clients",
			"3", "--gid-index", "3", "--log-level", "warn", NULL),
		  0);
	EXPECT_STREQ(cfg.listen, "shm:///rkv-t");
	EXPECT_EQ(cfg.memory, K * K);
	EXPECT_EQ(cfg.nbuckets, 1024);
	EXPECT_EQ(cfg.lease_ms, 50);
	EXPECT_EQ(cfg.grace_ms, 500);
	EXPECT_EQ(cfg.chunk, 64 * K);
	EXPECT_EQ(cfg.max_clients, 3);
	EXPECT_EQ(cfg.gid_index, 3);
	EXPECT_EQ(cfg.log_level, RKV_LOG_WARN);

	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--capacity", "100", NULL), 0);
	EXPECT_EQ(cfg.nbuckets, 32);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--help", NULL), 1);

	/* every error names its option */
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--memory", "12X", NULL),
		  -EINVAL);
	EXPECT_TRUE(strstr(err, "--memory") != NULL);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--memory", "4000", NULL),
		  -EINVAL);
	EXPECT_TRUE(strstr(err, "--memory") != NULL);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--memory", "2T", NULL),
		  -EINVAL);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--memory", "4100", NULL),
		  -EINVAL);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--buckets", "1000", NULL),
		  -EINVAL);
	EXPECT_TRUE(strstr(err, "power of two") != NULL);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--buckets", "8",
			"--capacity", "8", NULL),
		  -EINVAL);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--lease", "1000", NULL),
		  -EINVAL);
	EXPECT_TRUE(strstr(err, "--grace") != NULL);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--chunk", "1M", "--memory",
			"64K", NULL),
		  -EINVAL);
	EXPECT_TRUE(strstr(err, "--chunk") != NULL);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--listen", "udp://x:1", NULL),
		  -EINVAL);
	EXPECT_TRUE(strstr(err, "--listen") != NULL);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--log-level", "off", NULL),
		  -EINVAL);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--max-clients", "-5", NULL),
		  -EINVAL);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--port", "x", NULL), -EINVAL);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--nope", NULL), -EINVAL);
	EXPECT_TRUE(strstr(err, "--nope") != NULL);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--grace", NULL), -EINVAL);
	EXPECT_TRUE(strstr(err, "--grace") != NULL);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "stray", NULL), -EINVAL);
	EXPECT_EQ(rkv_srv_config_set(&cfg, "memory", "8K", err, sizeof(err)),
		  0);
	EXPECT_EQ(cfg.memory, 8 * K);
	EXPECT_EQ(rkv_srv_config_set(&cfg, "nope", "1", err, sizeof(err)),
		  -EINVAL);
}

static void t_config_print(void)
{
	struct rkv_srv_config cfg;
	char buf[4096] = { 0 };
	FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");

	ASSERT_TRUE(f != NULL);
	rkv_srv_config_init(&cfg);
	rkv_srv_config_print(&cfg, f);
	fclose(f);
	EXPECT_TRUE(strstr(buf, "memory       256M") != NULL);
	EXPECT_TRUE(strstr(buf, "262144 (index 16M") != NULL);
	EXPECT_TRUE(strstr(buf, "log-level    info") != NULL);
}

int main(int argc, char **argv)
{
	rkv_test_init(argc, argv, 60);
	RKV_TEST(t_space_grant);
	RKV_TEST(t_space_return_grace);
	RKV_TEST(t_space_next_fit_wrap);
	RKV_TEST(t_space_words);
	RKV_TEST(t_space_rebuild);
	RKV_TEST(t_index);
	RKV_TEST(t_config_values);
	RKV_TEST(t_config_parse);
	RKV_TEST(t_config_print);
	return rkv_test_done();
}
