/* SPDX-License-Identifier: MIT */
/*
 * hash.h - xxh3 from Debian's libxxhash, header-only (XXH_INLINE_ALL), so
 * the hot path inlines it and no shared library is needed at run time;
 * prepared seeds for long inputs (hash.c); and splitmix64's finalizer.
 */
#ifndef RKV_COMMON_HASH_H
#define RKV_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline uint64_t rkv_hash64(const void *p, size_t n, uint64_t seed)
{
	return XXH3_64bits_withSeed(p, n, seed);
}

/*
 * A seed prepared once for inputs over 240 bytes (XXH3_MIDSIZE_MAX).
 * XXH3_64bits_withSeed derives a 192-byte secret from the seed on every
 * such call; a prepared seed holds it (XXH3_generateSecret_fromSeed), and
 * rkv_hash64_prep hashes long inputs with it through the fastest variant
 * of XXH3's long loop this CPU runs (picked at load, hash.c).  The digest
 * is rkv_hash64(p, n, seed) for every n: only the speed differs.
 */
#define RKV_HASH_SECRET_SIZE 192

struct rkv_hash_seed {
	_Alignas(64) unsigned char secret[RKV_HASH_SECRET_SIZE];
	uint64_t seed;
};

/* Fill s for seed.  Pure; s may be shared read-only by any threads. */
void rkv_hash_seed_init(struct rkv_hash_seed *s, uint64_t seed);

/* XXH3-64 of an input of more than 240 bytes with a secret of
 * RKV_HASH_SECRET_SIZE bytes (the long-input half of
 * XXH3_64bits_withSecretandSeed). */
typedef uint64_t (*rkv_hash_long_fn)(const void *p, size_t n,
				     const void *secret);

/* The variant in use: set once at load (before main), read-only after. */
extern rkv_hash_long_fn g_rkv_hash_long;

static inline uint64_t rkv_hash64_prep(const struct rkv_hash_seed *s,
				       const void *p, size_t n)
{
	if (n <= XXH3_MIDSIZE_MAX)
		return XXH3_64bits_withSeed(p, n, s->seed);
	return g_rkv_hash_long(p, n, s->secret);
}

/*
 * Streaming: the digest of the bytes given to rkv_hash_update (or copied
 * by rkv_hash_copy) since rkv_hash_start, in order, is rkv_hash64_prep(s,
 * their concatenation, n) whatever the pieces; the long loop runs in the
 * variant g_rkv_hash_long is.  The state keeps a pointer to s's secret: s
 * outlives it.
 */
struct rkv_hash_state {
	XXH3_state_t st;
};

void rkv_hash_start(struct rkv_hash_state *h, const struct rkv_hash_seed *s);
void rkv_hash_update(struct rkv_hash_state *h, const void *p, size_t n);
uint64_t rkv_hash_digest(const struct rkv_hash_state *h);
/*
 * memcpy(dst, src, n) and rkv_hash_update(h, dst, n), fused: the copy
 * goes RKV_HASH_COPY_CHUNK bytes at a time and each piece is hashed while
 * it is still in the cache, so a large value costs about one pass over
 * memory instead of two.  dst and src do not overlap.
 */
#define RKV_HASH_COPY_CHUNK (64u << 10)
void rkv_hash_copy(struct rkv_hash_state *h, void *dst, const void *src,
		   size_t n);

/*
 * The long-loop variants built in (tests, benchmarks): names "avx512",
 * "avx2", "sse2", "scalar", fastest first.  rkv_hash_variant(i, &fn) returns the
 * name of variant i and sets *fn, or NULL past the last; *fn is NULL for
 * a variant this CPU cannot run (no AVX-512 or AVX2, or the OS does not
 * save its registers).  rkv_hash_variant_in_use() names the one g_rkv_hash_long
 * is.
 */
const char *rkv_hash_variant(unsigned i, rkv_hash_long_fn *fn);
const char *rkv_hash_variant_in_use(void);

/* splitmix64's finalizer: a bijection that mixes every bit (placement
 * by name, an embedding row's seeded initial value). */
static inline uint64_t rkv_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

#ifdef __cplusplus
}
#endif
#endif
