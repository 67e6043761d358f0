/* SPDX-License-Identifier: MIT */
/*
 * hash.h - xxh3 from Debian's libxxhash, header-only (XXH_INLINE_ALL), so
 * the hot path inlines it and no shared library is needed at run time;
 * and splitmix64's finalizer.
 */
#ifndef RKV_COMMON_HASH_H
#define RKV_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

static inline uint64_t rkv_hash64(const void *p, size_t n, uint64_t seed)
{
	return XXH3_64bits_withSeed(p, n, seed);
}

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

#endif
