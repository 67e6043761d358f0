/* SPDX-License-Identifier: MIT */
/*
 * size.c - rkv_parse_size and rkv_parse_size_list (size.h).
 */
#include "size.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int rkv_parse_size(const char *s, uint64_t *out)
{
	uint64_t v, mul = 1;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	case 't': case 'T': mul = 1ull << 40; end++; break;
	default: return -EINVAL;
	}
	if (*end == 'i' && mul > 1)
		end++;
	if ((*end == 'b' || *end == 'B') && mul > 1)
		end++;
	if (*end != '\0')
		return -EINVAL;
	if (v > UINT64_MAX / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}

int rkv_parse_size_list(const char *s, uint64_t lo, uint64_t hi,
			uint64_t *out, unsigned cap, unsigned *n)
{
	unsigned k = 0;

	if (!s)
		return -EINVAL;
	for (;;) {
		size_t len = strcspn(s, ",");
		char item[32];
		uint64_t v;

		if (!len || len >= sizeof(item) || k == cap)
			return -EINVAL;
		memcpy(item, s, len);
		item[len] = '\0';
		if (rkv_parse_size(item, &v) || v < lo || v > hi)
			return -EINVAL;
		out[k++] = v;
		if (!s[len])
			break;
		s += len + 1;
	}
	*n = k;
	return 0;
}
