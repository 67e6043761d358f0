/* SPDX-License-Identifier: MIT */
/*
 * alloc.h - all heap allocation in rkv goes through here.  Debian's
 * libjemalloc replaces malloc itself, so MALLOC=jemalloc|libc is a link-time
 * switch in the Makefile; sanitizer builds force MALLOC=libc.  One entry
 * point lets a debug build add poisoning and lets tests count allocations.
 */
#ifndef RKV_COMMON_ALLOC_H
#define RKV_COMMON_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *rkv_malloc(size_t n);
void *rkv_calloc(size_t nmemb, size_t n);
void *rkv_realloc(void *p, size_t n);
/* Alignment must be a power of two and a multiple of sizeof(void *). */
void *rkv_aligned_alloc(size_t align, size_t n);
char *rkv_strdup(const char *s);
void rkv_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
