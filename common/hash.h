/* SPDX-License-Identifier: MIT */
/*
 * hash.h - xxh3 from Debian's libxxhash, header-only (XXH_INLINE_ALL), so
 * the hot path inlines it and no shared library is needed at run time.
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

#endif
