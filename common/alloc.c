/* SPDX-License-Identifier: MIT */
/*
 * alloc.c - thin wrappers over the process allocator.  The allocator is
 * chosen at link time (jemalloc or libc, see the Makefile's MALLOC switch);
 * rkv_calloc guards the multiplication so a hostile count cannot wrap.
 */
#include "alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *rkv_malloc(size_t n)
{
	return malloc(n ? n : 1);
}

void *rkv_calloc(size_t nmemb, size_t n)
{
	if (n && nmemb > SIZE_MAX / n)
		return NULL;
	return calloc(nmemb ? nmemb : 1, n ? n : 1);
}

void *rkv_realloc(void *p, size_t n)
{
	return realloc(p, n ? n : 1);
}

void *rkv_aligned_alloc(size_t align, size_t n)
{
	void *p = NULL;

	if (posix_memalign(&p, align, n ? n : 1))
		return NULL;
	return p;
}

char *rkv_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = rkv_malloc(n);

	if (p)
		memcpy(p, s, n);
	return p;
}

void rkv_free(void *p)
{
	free(p);
}
