/* SPDX-License-Identifier: MIT */
/*
 * test_cache.c - the location cache (client/cache.c) as a table: a get's
 * probe matches an entry on hash, key length and server without the key
 * bytes; a write's lookup compares the bytes; an entry of another key
 * with the same hashes is dropped by the get that refused its block, and
 * replaced by the next store; a get's refresh never pairs one key's bytes
 * with another key's slot.  The end-to-end proof (two keys given one
 * hash, each get answered with its own value) is itest_kv's
 * t_hash_collision.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "rtime.h"
#include "test.h"

#define SLOT(off) (((uint64_t)1 << 34) | (off)) /* size 1, offset off */

struct fix {
	struct rkv_client c;
	struct peer p;
	struct rkv_op op;
	struct opslot o;
};

static void fix_init(struct fix *f)
{
	memset(f, 0, sizeof(*f));
	EXPECT_EQ(cache_init(&f->c, 64), 0);
	f->c.eng.pass_ms = rkv_coarse_ms();
	f->p.idx = 0;
	f->p.g.index_addr = 0x10000;
	f->p.g.nbuckets = 16;
	f->p.g.bucket_slots = 8;
	f->p.g.grace_ms = 1000;
	f->o.c = &f->c;
	f->o.p = &f->p;
	f->o.op = &f->op;
	f->o.b[0] = 3;
	f->o.b[1] = 5;
}

/* The op is now a get or put of key, with hashes kh. */
static void as_key(struct fix *f, const char *key,
		   const struct rkv_key_hash *kh)
{
	f->op.key = key;
	f->op.key_len = strlen(key);
	f->o.kh = *kh;
}

/* A fresh cache holding key-a (slot 7 at position 2); *kh: key-a's
 * hashes, which the tests give key-b too.  Returns the entry a get of
 * key-a probes. */
static struct cache_ent *with_a(struct fix *f, struct rkv_key_hash *kh)
{
	fix_init(f);
	rkv_key_hash("key-a", 5, kh);
	as_key(f, "key-a", kh);
	cache_store(&f->c, &f->o, 2, SLOT(7), 64, NULL);
	f->o.slot_pos = 2;
	return cache_find_any(&f->c, &f->o);
}

/* A get of B probes A's entry (a hint); a write of B does not get it. */
static void t_probe_by_hash(void)
{
	struct fix f;
	struct rkv_key_hash kh;

	EXPECT_TRUE(with_a(&f, &kh) != NULL);
	EXPECT_TRUE(cache_find(&f.c, &f.o) != NULL);
	as_key(&f, "key-b", &kh);
	EXPECT_TRUE(cache_find_any(&f.c, &f.o) != NULL); /* hash only */
	EXPECT_TRUE(cache_find(&f.c, &f.o) == NULL);     /* bytes differ */
	/* another length, or another server: no match */
	as_key(&f, "key-bb", &kh);
	EXPECT_TRUE(cache_find_any(&f.c, &f.o) == NULL);
	as_key(&f, "key-b", &kh);
	f.p.idx = 1;
	EXPECT_TRUE(cache_find_any(&f.c, &f.o) == NULL);
	cache_fini(&f.c);
}

/* The get of B that READ A's block drops the entry; B's locate stores
 * B's; A's writes then miss, A's gets probe B's entry. */
static void t_collision_dropped_and_replaced(void)
{
	struct fix f;
	struct rkv_key_hash kh;
	struct cache_ent *e;

	with_a(&f, &kh);
	as_key(&f, "key-b", &kh);
	cache_drop(&f.c, &f.o); /* its block held key-a */
	EXPECT_TRUE(cache_find_any(&f.c, &f.o) == NULL);
	as_key(&f, "key-a", &kh);
	EXPECT_TRUE(cache_find_any(&f.c, &f.o) == NULL);
	as_key(&f, "key-b", &kh);
	cache_store(&f.c, &f.o, 9, SLOT(11), 64, NULL);
	e = cache_find(&f.c, &f.o);
	ASSERT_TRUE(e != NULL);
	EXPECT_EQ(e->slot, SLOT(11));
	EXPECT_EQ(memcmp(e->key, "key-b", 5), 0);
	as_key(&f, "key-a", &kh);
	EXPECT_TRUE(cache_find(&f.c, &f.o) == NULL);
	/* a store of A over B's entry (same hashes) replaces key and slot */
	cache_store(&f.c, &f.o, 2, SLOT(7), 64, NULL);
	e = cache_find(&f.c, &f.o);
	ASSERT_TRUE(e != NULL);
	EXPECT_EQ(e->slot, SLOT(7));
	as_key(&f, "key-b", &kh);
	EXPECT_TRUE(cache_find(&f.c, &f.o) == NULL);
	cache_fini(&f.c);
}

/* A get's refresh keeps the entry's key (the block proved it) ... */
static void t_hit_refresh(void)
{
	struct fix f;
	struct rkv_key_hash kh;
	struct cache_ent *e;
	uint32_t gen;

	e = with_a(&f, &kh);
	ASSERT_TRUE(e != NULL);
	gen = e->gen;
	cache_hit(&f.c, &f.o, e, gen, SLOT(7) | (5ull << RKV_SLOT_VER_SHIFT),
		  64, NULL);
	e = cache_find(&f.c, &f.o);
	ASSERT_TRUE(e != NULL);
	EXPECT_EQ(e->slot, SLOT(7) | (5ull << RKV_SLOT_VER_SHIFT));
	EXPECT_EQ(e->gen, gen);
	cache_fini(&f.c);
}

/* ... but when the entry changed hands between the get's attempt and its
 * block (a pipelined op of a key with the same hashes stored over it),
 * the refresh stores: the key bytes and the slot stay one key's. */
static void t_hit_after_change_of_hands(void)
{
	struct fix f;
	struct rkv_key_hash kh;
	struct cache_ent *e;
	uint32_t gen;

	e = with_a(&f, &kh);
	ASSERT_TRUE(e != NULL);
	gen = e->gen;
	as_key(&f, "key-b", &kh); /* B's op stores meanwhile */
	cache_store(&f.c, &f.o, 9, SLOT(11), 64, NULL);
	EXPECT_TRUE(e->gen != gen);
	as_key(&f, "key-a", &kh); /* A's get delivers from slot 7 */
	f.o.slot_pos = 2;
	cache_hit(&f.c, &f.o, e, gen, SLOT(7), 64, NULL);
	e = cache_find(&f.c, &f.o);
	ASSERT_TRUE(e != NULL);
	EXPECT_EQ(e->slot, SLOT(7));
	EXPECT_EQ(e->pos, 2);
	as_key(&f, "key-b", &kh);
	EXPECT_TRUE(cache_find(&f.c, &f.o) == NULL); /* not B with A's slot */
	cache_fini(&f.c);
}

int main(int argc, char **argv)
{
	rkv_test_init(argc, argv, 30);
	RKV_TEST(t_probe_by_hash);
	RKV_TEST(t_collision_dropped_and_replaced);
	RKV_TEST(t_hit_refresh);
	RKV_TEST(t_hit_after_change_of_hands);
	return rkv_test_done();
}
