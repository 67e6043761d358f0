/* SPDX-License-Identifier: MIT */
/*
 * size.h - byte counts as people write them on command lines: 4096, 64K,
 * 256m, 2GiB, 1T (binary multiples; an "i" and a "B" may follow the
 * letter).  One parser for the server's options and every tool's.
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

#ifdef __cplusplus
}
#endif

#endif
