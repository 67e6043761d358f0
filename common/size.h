/* SPDX-License-Identifier: MIT */
/*
 * size.h - byte counts as people write them on command lines: 4096, 64K,
 * 256m, 2GiB, 1T (binary multiples; an "i" and a "B" may follow the
 * letter).  One parser for the server's options and every tool's, and
 * one for comma-separated lists of them.
 */
#ifndef RKV_COMMON_SIZE_H
#define RKV_COMMON_SIZE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Digits, then at most one of K, M, G, T (either case), optionally "i",
 * optionally "B".  0 and the value in *out, or -EINVAL (nothing else
 * allowed, no sign, no overflow; *out untouched).
 */
int rkv_parse_size(const char *s, uint64_t *out);

/*
 * SIZE[,SIZE...]: at most cap sizes, each as rkv_parse_size reads it and
 * within [lo, hi], into out.  0 with their count in *n, or -EINVAL (an
 * empty or bad item, one out of range, more than cap, none at all).
 */
int rkv_parse_size_list(const char *s, uint64_t lo, uint64_t hi,
			uint64_t *out, unsigned cap, unsigned *n);

#ifdef __cplusplus
}
#endif

#endif
