/* SPDX-License-Identifier: MIT */
/*
 * test_server.c - unit tests for the pure parts of rkv-server: the space
 * manager (grant, next fit, exhaustion, return, grace expiry on a fake
 * clock, duplicate, late and invalid returns, reclaim passes), the
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
#include "size.h"
#include "test.h"

#define K 1024ull

static struct rkv_space_stats stats(const struct rkv_space *sp)
{
	struct rkv_space_stats st;

	rkv_space_get_stats(sp, &st);
	return st;
}

/* Grant exactly bytes (no shorter run): 0 or -errno; *g the grant id. */
static int grant(struct rkv_space *sp, uint64_t bytes, uint64_t *off,
		 uint32_t *g)
{
	uint64_t len = 0;
	uint32_t id = 0;
	int rc = rkv_space_grant(sp, bytes, 0, off, &len, g ? g : &id);

	if (rc == 0 && len != bytes)
		return -EFAULT;
	return rc;
}

static void t_space_grant(void)
{
	struct rkv_space *sp;
	uint64_t off, a, b, len;
	uint32_t ga, gb, g;

	EXPECT_EQ(rkv_space_create(0, 100, 100, &sp), -EINVAL);
	EXPECT_EQ(rkv_space_create(100, 100, 100, &sp), -EINVAL);
	ASSERT_EQ(rkv_space_create(64 * K, 100, 100, &sp), 0);
	EXPECT_EQ(stats(sp).free, 64 * K);
	EXPECT_EQ(grant(sp, 0, &off, NULL), -EINVAL);
	EXPECT_EQ(grant(sp, 100, &off, NULL), -EINVAL);
	EXPECT_EQ(grant(sp, 128 * K, &off, NULL), -EINVAL);
	EXPECT_EQ(rkv_space_grant(sp, 128, 100, &off, &len, &g), -EINVAL);
	ASSERT_EQ(grant(sp, 16 * K, &a, &ga), 0);
	ASSERT_EQ(grant(sp, 16 * K, &b, &gb), 0);
	EXPECT_EQ(a, 0);
	EXPECT_EQ(b, 16 * K); /* next fit */
	EXPECT_TRUE(ga != 0 && gb != 0 && ga != gb);
	EXPECT_EQ(rkv_space_owner(sp, a + 64), ga);
	EXPECT_EQ(rkv_space_owner(sp, b + 16 * K - 64), gb);
	EXPECT_EQ(rkv_space_owner(sp, 32 * K), 0);
	EXPECT_EQ(stats(sp).free, 32 * K);
	EXPECT_EQ(stats(sp).grants, 2);
	/* an odd size, then exhaustion */
	ASSERT_EQ(grant(sp, 64, &off, NULL), 0);
	EXPECT_EQ(off, 32 * K);
	EXPECT_EQ(grant(sp, 32 * K, &off, NULL), -ENOSPC);
	ASSERT_EQ(grant(sp, 32 * K - 64, &off, NULL), 0);
	EXPECT_EQ(off, 32 * K + 64);
	EXPECT_EQ(stats(sp).free, 0);
	EXPECT_EQ(grant(sp, 64, &off, NULL), -ENOSPC);
	EXPECT_EQ(rkv_space_check(sp), 0);
	rkv_space_destroy(sp);
}

/* No run as long as asked: the longest free run that holds min_bytes. */
static void t_space_short_grant(void)
{
	struct rkv_space *sp;
	uint64_t off, len, x;
	uint32_t g, gx;

	ASSERT_EQ(rkv_space_create(64 * K, 0, 0, &sp), 0);
	/* 64 chunks of 1 KiB, each keeps one 64-byte block at its start */
	for (int i = 0; i < 64; i++) {
		ASSERT_EQ(grant(sp, K, &x, &gx), 0);
		ASSERT_EQ(rkv_space_return(sp, x + 64, K - 64, gx, 0), 0);
	}
	EXPECT_EQ(rkv_space_tick(sp, 0), 64 * (K - 64));
	/* plenty free, nothing contiguous of 1 KiB */
	EXPECT_EQ(grant(sp, K, &off, NULL), -ENOSPC);
	EXPECT_EQ(rkv_space_grant(sp, K, K - 64, &off, &len, &g), 0);
	EXPECT_EQ(len, K - 64);
	EXPECT_EQ(off % K, 64);
	EXPECT_EQ(rkv_space_grant(sp, K, 1024 - 32, &off, &len, &g), -EINVAL);
	EXPECT_EQ(rkv_space_grant(sp, 2 * K, 128, &off, &len, &g), 0);
	EXPECT_EQ(len, K - 64);
	EXPECT_EQ(stats(sp).short_grants, 2);
	EXPECT_EQ(rkv_space_check(sp), 0);
	rkv_space_destroy(sp);
}

static void t_space_return_grace(void)
{
	struct rkv_space *sp;
	uint64_t a, off;
	uint32_t ga, g2;

	ASSERT_EQ(rkv_space_create(8 * K, 1000, 1000, &sp), 0);
	ASSERT_EQ(grant(sp, 8 * K, &a, &ga), 0);
	EXPECT_EQ(grant(sp, 64, &off, NULL), -ENOSPC);
	/* invalid extents change nothing */
	EXPECT_EQ(rkv_space_return(sp, 32, 64, ga, 0), -EINVAL); /* misaligned */
	EXPECT_EQ(rkv_space_return(sp, 0, 100, ga, 0), -EINVAL); /* len */
	EXPECT_EQ(rkv_space_return(sp, 0, 0, ga, 0), -EINVAL);   /* empty */
	EXPECT_EQ(rkv_space_return(sp, 8 * K, 64, ga, 0), -EINVAL); /* outside */
	EXPECT_EQ(rkv_space_return(sp, 8 * K - 64, 128, ga, 0), -EINVAL);
	EXPECT_EQ(rkv_space_return(sp, UINT64_MAX - 63, 64, ga, 0), -EINVAL);
	EXPECT_EQ(stats(sp).bad_returns, 6);
	/* another grant's id, or none */
	EXPECT_EQ(rkv_space_return(sp, 0, 256, ga + 1, 0), -ESTALE);
	EXPECT_EQ(rkv_space_return(sp, 0, 256, 0, 0), -ESTALE);
	EXPECT_EQ(stats(sp).grace, 0);
	/* two blocks return at t=10 and t=500 */
	EXPECT_EQ(rkv_space_return(sp, 0, 256, ga, 10), 0);
	EXPECT_EQ(rkv_space_return(sp, 1024, 512, ga, 500), 0);
	EXPECT_EQ(stats(sp).grace, 768);
	EXPECT_EQ(stats(sp).returns, 2);
	/* duplicate, and overlap with a block in grace */
	EXPECT_EQ(rkv_space_return(sp, 0, 256, ga, 20), -ESTALE);
	EXPECT_EQ(rkv_space_return(sp, 192, 128, ga, 20), -ESTALE);
	EXPECT_EQ(stats(sp).grace, 768);
	/* nothing frees before the grace period */
	EXPECT_EQ(rkv_space_tick(sp, 1009), 0);
	EXPECT_EQ(grant(sp, 64, &off, NULL), -ENOSPC);
	EXPECT_EQ(rkv_space_tick(sp, 1010), 256);
	EXPECT_EQ(stats(sp).free, 256);
	EXPECT_EQ(stats(sp).grace, 512);
	/* freed units are free, not allocated: a late duplicate is refused */
	EXPECT_EQ(rkv_space_return(sp, 0, 256, ga, 1020), -ESTALE);
	EXPECT_EQ(grant(sp, 512, &off, NULL), -ENOSPC); /* not contiguous */
	ASSERT_EQ(grant(sp, 256, &off, &g2), 0);
	EXPECT_EQ(off, 0);
	/* granted again: a repeated return under the old grant is refused,
	 * though the units are allocated and not in grace */
	EXPECT_EQ(rkv_space_return(sp, 0, 256, ga, 1030), -ESTALE);
	EXPECT_EQ(rkv_space_return(sp, 0, 64, ga, 1030), -ESTALE);
	EXPECT_EQ(rkv_space_unit_state(sp, 0), RKV_SPACE_ALLOC);
	EXPECT_EQ(rkv_space_owner(sp, 0), g2);
	EXPECT_EQ(rkv_space_owner(sp, 256), ga);
	EXPECT_EQ(rkv_space_tick(sp, 2000), 512);
	EXPECT_EQ(stats(sp).free, 512);
	ASSERT_EQ(grant(sp, 512, &off, NULL), 0);
	EXPECT_EQ(off, 1024);
	/* largest block */
	EXPECT_EQ(rkv_space_return(sp, 2048, RKV_MAX_BLOCK + 64, ga, 2000),
		  -EINVAL);
	EXPECT_EQ(rkv_space_check(sp), 0);
	rkv_space_destroy(sp);
}

/* Extents over RKV_SMALL_BLOCK_MAX (a big block, or a reclaimed run that
 * may hold one) wait the big grace period; a small one its own, even when
 * returned later; a big grace shorter than the grace is refused. */
static void t_space_big_grace(void)
{
	const uint64_t S = RKV_SMALL_BLOCK_MAX, B = RKV_SMALL_BLOCK_MAX + 64;
	struct rkv_space *sp;
	uint64_t a;
	uint32_t ga;

	EXPECT_EQ(rkv_space_create(1024 * K, 100, 99, &sp), -EINVAL);
	ASSERT_EQ(rkv_space_create(1024 * K, 100, 1000, &sp), 0);
	ASSERT_EQ(grant(sp, 1024 * K, &a, &ga), 0);
	EXPECT_EQ(rkv_space_return(sp, 0, B, ga, 0), 0);     /* big */
	EXPECT_EQ(rkv_space_return(sp, B, S, ga, 50), 0);    /* small */
	EXPECT_EQ(rkv_space_return(sp, B + S, 64, ga, 60), 0);
	EXPECT_EQ(stats(sp).grace, B + S + 64);
	EXPECT_EQ(rkv_space_tick(sp, 149), 0);
	EXPECT_EQ(rkv_space_tick(sp, 160), S + 64); /* the small ones */
	EXPECT_EQ(rkv_space_tick(sp, 999), 0);
	EXPECT_EQ(stats(sp).grace, B);
	EXPECT_EQ(rkv_space_unit_state(sp, 0), RKV_SPACE_GRACE);
	EXPECT_EQ(rkv_space_check(sp), 0);
	EXPECT_EQ(rkv_space_tick(sp, 1000), B);
	EXPECT_EQ(stats(sp).grace, 0);
	EXPECT_EQ(rkv_space_check(sp), 0);
	rkv_space_destroy(sp);
}

static void t_space_next_fit_wrap(void)
{
	struct rkv_space *sp;
	uint64_t off[4], x;
	uint32_t g[4];

	ASSERT_EQ(rkv_space_create(4 * K, 0, 0, &sp), 0);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(grant(sp, K, &off[i], &g[i]), 0);
	/* free the first and third chunk (grace 0) */
	for (int i = 0; i < 4; i += 2)
		for (uint64_t o = 0; o < K; o += 256)
			ASSERT_EQ(rkv_space_return(sp, off[i] + o, 256, g[i],
						   5),
				  0);
	EXPECT_EQ(rkv_space_tick(sp, 5), 2 * K);
	/* cursor is at the end: the search wraps to the start */
	ASSERT_EQ(grant(sp, K, &x, NULL), 0);
	EXPECT_EQ(x, 0);
	ASSERT_EQ(grant(sp, K, &x, NULL), 0);
	EXPECT_EQ(x, 2 * K);
	EXPECT_EQ(grant(sp, 64, &x, NULL), -ENOSPC);
	rkv_space_destroy(sp);
}

/* Long bitmaps: runs crossing 64-unit words. */
static void t_space_words(void)
{
	struct rkv_space *sp;
	uint64_t off;
	uint32_t g;

	ASSERT_EQ(rkv_space_create(1024 * K, 0, 0, &sp), 0);
	ASSERT_EQ(grant(sp, 64 * 100, &off, NULL), 0);
	ASSERT_EQ(grant(sp, 64 * 1000, &off, &g), 0);
	EXPECT_EQ(off, 64 * 100);
	EXPECT_EQ(rkv_space_return(sp, 64 * 60, 64 * 10, g, 0), -ESTALE);
	EXPECT_EQ(rkv_space_return(sp, 64 * 160, 64 * 10, g, 0), 0);
	EXPECT_EQ(rkv_space_return(sp, 64 * 190, 64 * 20, g, 0), 0);
	EXPECT_EQ(rkv_space_return(sp, 64 * 165, 64, g, 0), -ESTALE);
	/* straddles the two grants */
	EXPECT_EQ(rkv_space_return(sp, 64 * 90, 64 * 20, g, 0), -ESTALE);
	EXPECT_EQ(rkv_space_tick(sp, 0), 64 * 30);
	EXPECT_EQ(stats(sp).free, 1024 * K - 64 * 1070);
	rkv_space_destroy(sp);
}

/*
 * Reclaim: the index names some blocks, live clients hold some chunks;
 * everything else allocated goes to grace, and late returns of what it
 * took are refused, even once the units are granted again (the failure
 * that lost acknowledged values: a dead client's block unlinked by another
 * client whose return came after the rebuild).
 */
static void t_space_reclaim(void)
{
	struct rkv_space *sp;
	uint64_t a, b, c, freed, x;
	uint32_t ga, gb, gc, gx;
	uint64_t slots[16] = { 0 };

	ASSERT_EQ(rkv_space_create(64 * K, 1000, 1000, &sp), 0);
	ASSERT_EQ(grant(sp, 4 * K, &a, &ga), 0); /* dead client */
	ASSERT_EQ(grant(sp, 4 * K, &b, &gb), 0); /* retired by a live one */
	ASSERT_EQ(grant(sp, 4 * K, &c, &gc), 0); /* held by a live client */
	/* published blocks: two in chunk a (one locked), one tentative in
	 * b, one in c */
	slots[3] = rkv_slot_make(a / 64 + 2, 3, 0x11, 5);
	slots[9] = rkv_slot_make(a / 64 + 10, 1, 0x12, 0) | RKV_SLOT_LOCK;
	slots[10] = rkv_slot_make(b / 64 + 16, 2, 0x14, 0) | RKV_SLOT_TENT;
	slots[12] = rkv_slot_make(c / 64, 4, 0x13, 1);
	/* garbage slot outside the region is ignored */
	slots[13] = rkv_slot_make((1ull << 34) - 1, 4095, 0, 0);
	/* one block of a was returned already */
	ASSERT_EQ(rkv_space_return(sp, a + 64 * 20, 128, ga, 0), 0);

	struct rkv_space_extent keep[] = { { c, 4 * K } };

	ASSERT_EQ(rkv_space_reclaim(sp, keep, 1, slots, 16, 100, &freed), 0);
	/* a: 64 units - 3 - 1 named - 2 in grace = 58; b: 64 - 2 named */
	EXPECT_EQ(freed, (58 + 62) * 64);
	EXPECT_EQ(stats(sp).rebuilds, 1);
	EXPECT_EQ(stats(sp).grace, (58 + 62 + 2) * 64);
	/* a late BLOCK_RETURN of a reclaimed unit changes nothing */
	EXPECT_EQ(rkv_space_return(sp, a, 64, ga, 200), -ESTALE);
	EXPECT_EQ(rkv_space_return(sp, b + 3 * K, 128, gb, 200), -ESTALE);
	/* named blocks are still allocated: they can be returned later */
	EXPECT_EQ(rkv_space_return(sp, a + 128, 192, ga, 200), 0);
	/* after the grace period everything reclaimed is free ... */
	EXPECT_EQ(rkv_space_tick(sp, 1100), (2 + 58 + 62) * 64);
	EXPECT_EQ(stats(sp).free, 64 * K - 12 * K + (2 + 58 + 62) * 64);
	/* ... and granted again, a late return still changes nothing */
	for (;;) {
		if (grant(sp, 64, &x, &gx) != 0)
			break;
		if (x == b + 3 * K)
			break;
	}
	EXPECT_EQ(x, b + 3 * K);
	EXPECT_EQ(rkv_space_return(sp, b + 3 * K, 128, gb, 1200), -ESTALE);
	EXPECT_EQ(rkv_space_unit_state(sp, b + 3 * K), RKV_SPACE_ALLOC);
	EXPECT_EQ(rkv_space_return(sp, x, 64, gx, 1200), 0);
	/* a second pass over the same state finds nothing more */
	ASSERT_EQ(rkv_space_reclaim(sp, keep, 1, slots, 16, 2000, &freed), 0);
	EXPECT_EQ(rkv_space_check(sp), 0);
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

/* The shm fence's move: dst gets every word as it was; src keeps poison
 * that no CAS built from a read before matches, GONE at the epoch in the
 * partition table, and 0 in the lease word. */
static void t_index_fence_move(void)
{
	enum { NS = 4 * RKV_BUCKET_SLOTS_MIN };
	const size_t words = NS + RKV_INDEX_EXTRA / 8;
	uint64_t *src = calloc(words, 8), *dst = calloc(words, 8);
	uint64_t *orig = calloc(words, 8);

	ASSERT_TRUE(src && dst && orig);
	for (size_t i = 0; i < NS; i++)
		src[i] = i % 3 == 0 ? 0
			 : (0x1234567ull * i) ^
				   (i % 5 == 1 ? RKV_SLOT_LOCK : 0);
	src[5] = rkv_slot_bump(77) | RKV_SLOT_MOVED; /* moved already */
	src[NS + 7] = rkv_part_word(RKV_PART_GONE, 3);
	src[NS + RKV_PART_WORDS] = 123456789; /* the lease word */
	src[NS + RKV_PART_WORDS + RKV_INDEX_LEVEL_WORD] = 1; /* one level */
	memcpy(orig, src, words * 8);
	rkv_srv_index_fence_move(dst, src, NS, NS, 9);
	EXPECT_EQ(memcmp(dst, orig, words * 8), 0);
	for (size_t i = 0; i < NS; i++) {
		EXPECT_TRUE(src[i] != orig[i]);
		EXPECT_TRUE(rkv_slot_moved(src[i]));
		EXPECT_TRUE(rkv_slot_same_block(src[i], orig[i]));
		EXPECT_EQ(rkv_slot_version(src[i]),
			  (rkv_slot_version(orig[i]) + 1) & 0xffu);
	}
	for (unsigned p = 0; p < RKV_PART_WORDS; p++)
		EXPECT_EQ_U64(src[NS + p], rkv_part_word(RKV_PART_GONE, 9));
	EXPECT_EQ_U64(src[NS + RKV_PART_WORDS], 0);
	EXPECT_EQ_U64(src[NS + RKV_PART_WORDS + RKV_INDEX_LEVEL_WORD], 1);

	/* an index that may grow: only the levels in use move and are
	 * poisoned; the rest stays 0 on both sides; the level word is
	 * copied (2 of 3 levels of 1 bucket: 8 + 56 of 512 slots) */
	enum { NG = 512, USED = 64 };
	const size_t gw = NG + RKV_INDEX_EXTRA / 8;
	uint64_t *gs = calloc(gw, 8), *gd = calloc(gw, 8);

	ASSERT_TRUE(gs && gd);
	for (size_t i = 0; i < USED; i++)
		gs[i] = i % 2 ? (0x777ull * i) : 0;
	gs[NG + RKV_PART_WORDS + RKV_INDEX_LEVEL_WORD] = 2;
	rkv_srv_index_fence_move(gd, gs, NG, USED, 4);
	for (size_t i = 0; i < USED; i++) {
		EXPECT_EQ_U64(gd[i], i % 2 ? (0x777ull * i) : 0);
		EXPECT_TRUE(rkv_slot_moved(gs[i]));
	}
	for (size_t i = USED; i < NG; i++)
		EXPECT_TRUE(gs[i] == 0 && gd[i] == 0);
	EXPECT_EQ_U64(gd[NG + RKV_PART_WORDS + RKV_INDEX_LEVEL_WORD], 2);
	EXPECT_EQ_U64(gd[NG], 0);
	EXPECT_EQ_U64(gs[NG], rkv_part_word(RKV_PART_GONE, 4));
	free(gs);
	free(gd);
	free(src);
	free(dst);
	free(orig);
}

static void t_config_values(void)
{
	uint64_t v;

	EXPECT_EQ(rkv_parse_size("0", &v), 0);
	EXPECT_EQ(rkv_parse_size("4096", &v), 0);
	EXPECT_EQ(v, 4096);
	EXPECT_EQ(rkv_parse_size("64K", &v), 0);
	EXPECT_EQ(v, 64 * K);
	EXPECT_EQ(rkv_parse_size("256m", &v), 0);
	EXPECT_EQ(v, 256 * K * K);
	EXPECT_EQ(rkv_parse_size("2GiB", &v), 0);
	EXPECT_EQ(v, 2 * K * K * K);
	EXPECT_EQ(rkv_parse_size("1T", &v), 0);
	EXPECT_EQ(rkv_parse_size("", &v), -EINVAL);
	EXPECT_EQ(rkv_parse_size("-1", &v), -EINVAL);
	EXPECT_EQ(rkv_parse_size("12X", &v), -EINVAL);
	EXPECT_EQ(rkv_parse_size("1KK", &v), -EINVAL);
	EXPECT_EQ(rkv_parse_size("99999999999999999999", &v), -EINVAL);
	EXPECT_EQ(rkv_parse_size("17179869184G", &v), -EINVAL);

	/* lists (the bench tools' --sizes) */
	uint64_t l[3];
	unsigned n = 99;

	EXPECT_EQ(rkv_parse_size_list("8,64K,1M", 1, 1ull << 20, l, 3, &n), 0);
	EXPECT_EQ(n, 3);
	EXPECT_TRUE(l[0] == 8 && l[1] == 64 * K && l[2] == K * K);
	EXPECT_EQ(rkv_parse_size_list("4096", 1, 4096, l, 3, &n), 0);
	EXPECT_EQ(n, 1);
	EXPECT_EQ(rkv_parse_size_list("1,2,3,4", 1, 9, l, 3, &n), -EINVAL);
	EXPECT_EQ(rkv_parse_size_list("0", 1, 9, l, 3, &n), -EINVAL);
	EXPECT_EQ(rkv_parse_size_list("10", 1, 9, l, 3, &n), -EINVAL);
	EXPECT_EQ(rkv_parse_size_list("", 1, 9, l, 3, &n), -EINVAL);
	EXPECT_EQ(rkv_parse_size_list("1,,2", 1, 9, l, 3, &n), -EINVAL);
	EXPECT_EQ(rkv_parse_size_list("1,", 1, 9, l, 3, &n), -EINVAL);
	EXPECT_EQ(rkv_parse_size_list("1,x", 1, 9, l, 3, &n), -EINVAL);
	EXPECT_EQ(n, 1); /* untouched by the failures */

	EXPECT_EQ(rkv_srv_buckets_for(0, 8), 2);
	EXPECT_EQ(rkv_srv_buckets_for(8, 8), 2);  /* 4 keys a bucket of 8 */
	EXPECT_EQ(rkv_srv_buckets_for(9, 8), 4);
	EXPECT_EQ(rkv_srv_buckets_for(1000000, 8), 262144);
	EXPECT_EQ(rkv_srv_buckets_for(4 * 1024, 8), 1024);
	EXPECT_EQ(rkv_srv_buckets_for(4 * 1024 + 1, 8), 2048);
	/* 3/4 of larger ones: 12 of 16, 24 of 32, 48 of 64 */
	EXPECT_EQ(rkv_srv_buckets_for(0, 32), 2);
	EXPECT_EQ(rkv_srv_buckets_for(48, 32), 2);
	EXPECT_EQ(rkv_srv_buckets_for(49, 32), 4);
	EXPECT_EQ(rkv_srv_buckets_for(1000000, 32), 65536);
	EXPECT_EQ(rkv_srv_buckets_for(24 * 1024, 32), 1024);
	EXPECT_EQ(rkv_srv_buckets_for(24 * 1024 + 1, 32), 2048);
	EXPECT_EQ(rkv_srv_buckets_for(12 * 1024, 16), 1024);
	EXPECT_EQ(rkv_srv_buckets_for(48 * 1024, 64), 1024);
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
	EXPECT_EQ(cfg.bucket_slots, 32);
	/* no --capacity: 1/64 of --memory / 8, three levels to reach it */
	EXPECT_EQ(cfg.nbuckets, 2048);
	EXPECT_EQ(cfg.levels_max, 3);
	EXPECT_EQ(cfg.capacity, 0);

	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--listen", "shm:///rkv-t",
			"--memory", "1M", "--buckets", "1024", "--lease", "50",
			"--grace", "500", "--chunk", "64K", "--max-clients",
			"3", "--gid-index", "3", "--log-level", "warn", NULL),
		  0);
	EXPECT_STREQ(cfg.listen, "shm:///rkv-t");
	EXPECT_EQ(cfg.memory, K * K);
	EXPECT_EQ(cfg.nbuckets, 1024);
	EXPECT_EQ(cfg.levels_max, 1); /* --buckets alone: a fixed index */
	EXPECT_EQ(cfg.lease_ms, 50);
	EXPECT_EQ(cfg.grace_ms, 500);
	EXPECT_EQ(cfg.chunk, 64 * K);
	EXPECT_EQ(cfg.max_clients, 3);
	EXPECT_EQ(cfg.gid_index, 3);
	EXPECT_EQ(cfg.log_level, RKV_LOG_WARN);

	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--mtu", "1024",
			"--traffic-class", "106", "--service-level", "3", NULL),
		  0);
	EXPECT_EQ(cfg.mtu, 1024);
	EXPECT_EQ(cfg.traffic_class, 106);
	EXPECT_EQ(cfg.service_level, 3);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), NULL), 0);
	EXPECT_EQ(cfg.mtu, 0);
	EXPECT_EQ(cfg.traffic_class, -1);
	EXPECT_EQ(cfg.service_level, -1);
	EXPECT_TRUE(parse(&cfg, err, sizeof(err), "--traffic-class", "256",
			  NULL) != 0);
	EXPECT_TRUE(strstr(err, "traffic-class") != NULL);
	EXPECT_TRUE(parse(&cfg, err, sizeof(err), "--service-level", "16",
			  NULL) != 0);
	EXPECT_TRUE(parse(&cfg, err, sizeof(err), "--mtu", "8192", NULL) != 0);
	/* per-connection rkeys and per-address clients */
	EXPECT_EQ(parse(&cfg, err, sizeof(err), NULL), 0);
	EXPECT_EQ(cfg.rkey_windows, RKV_WINDOWS_AUTO);
	EXPECT_EQ(cfg.max_clients_peer, 256);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--rkey-windows", "on",
			"--max-clients-per-peer", "2", NULL), 0);
	EXPECT_EQ(cfg.rkey_windows, RKV_WINDOWS_ON);
	EXPECT_EQ(cfg.max_clients_peer, 2);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--rkey-windows", "off",
			NULL), 0);
	EXPECT_EQ(cfg.rkey_windows, RKV_WINDOWS_OFF);
	EXPECT_TRUE(parse(&cfg, err, sizeof(err), "--rkey-windows", "yes",
			  NULL) != 0);
	EXPECT_STREQ(err, "--rkey-windows: 'yes' is not auto, on or off");
	EXPECT_TRUE(parse(&cfg, err, sizeof(err), "--max-clients-per-peer",
			  "0", NULL) != 0);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--capacity", "100", NULL), 0);
	EXPECT_EQ(cfg.nbuckets, 8);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--capacity", "100",
			"--bucket-slots", "8", NULL), 0);
	EXPECT_EQ(cfg.nbuckets, 32);
	EXPECT_EQ(cfg.bucket_slots, 8);
	EXPECT_EQ(cfg.levels_max, 3);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--bucket-slots", "64", NULL),
		  0);
	EXPECT_EQ(cfg.nbuckets, 1024);
	EXPECT_EQ(cfg.levels_max, 3);
	/* levels while they fit in --index-max */
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--buckets", "4",
			"--index-max", "64K", NULL), 0);
	EXPECT_EQ(cfg.nbuckets, 4);
	EXPECT_EQ(cfg.levels_max, 3);
	EXPECT_EQ(rkv_srv_nslots(&cfg), 256 * 32);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--buckets", "4",
			"--index-max", "63K", NULL), 0);
	EXPECT_EQ(cfg.levels_max, 2);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--capacity", "1000000",
			"--memory", "64M", NULL), 0);
	EXPECT_EQ(cfg.nbuckets, 65536);
	EXPECT_EQ(cfg.levels_max, 1); /* 16 MiB: over 64M / 8 for a level */
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--buckets", "1024",
			"--index-max", "64K", NULL), -EINVAL);
	EXPECT_TRUE(strstr(err, "--index-max") != NULL);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--index-max", "1K", NULL),
		  0);
	EXPECT_EQ(cfg.nbuckets, 2);
	EXPECT_EQ(cfg.levels_max, 1);
	/* 0: a fixed index, of --capacity's default million keys */
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--index-max", "0", NULL), 0);
	EXPECT_EQ(cfg.nbuckets, 65536);
	EXPECT_EQ(cfg.levels_max, 1);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--index-max", "0",
			"--capacity", "100", NULL), 0);
	EXPECT_EQ(cfg.nbuckets, 8);
	EXPECT_EQ(cfg.levels_max, 1);
	EXPECT_EQ(parse(&cfg, err, sizeof(err), "--index-max", "x", NULL),
		  -EINVAL);
	EXPECT_TRUE(strstr(err, "index-max") != NULL);
	static const char *const bad_slots[] = { "4", "12", "128", "0", "x" };

	for (size_t i = 0; i < sizeof(bad_slots) / sizeof(bad_slots[0]); i++) {
		EXPECT_EQ(parse(&cfg, err, sizeof(err), "--bucket-slots",
				bad_slots[i], NULL),
			  -EINVAL);
		EXPECT_TRUE(strstr(err, "--bucket-slots") != NULL);
	}
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
	EXPECT_TRUE(strstr(buf, "2048 (index 512K, 49152 keys for sure, "
				"at 75%; grows online to 3 levels, 32M)") !=
		    NULL);
	EXPECT_TRUE(strstr(buf, "capacity     (none: the index starts "
				"small)") != NULL);
	EXPECT_TRUE(strstr(buf, "index-max    (--memory / 8)") != NULL);
	EXPECT_TRUE(strstr(buf, "bucket-slots 32") != NULL);
	EXPECT_TRUE(strstr(buf, "log-level    info") != NULL);
}

int main(int argc, char **argv)
{
	rkv_test_init(argc, argv, 60);
	RKV_TEST(t_space_grant);
	RKV_TEST(t_space_return_grace);
	RKV_TEST(t_space_big_grace);
	RKV_TEST(t_space_next_fit_wrap);
	RKV_TEST(t_space_words);
	RKV_TEST(t_space_short_grant);
	RKV_TEST(t_space_reclaim);
	RKV_TEST(t_index);
	RKV_TEST(t_index_fence_move);
	RKV_TEST(t_config_values);
	RKV_TEST(t_config_parse);
	RKV_TEST(t_config_print);
	return rkv_test_done();
}
