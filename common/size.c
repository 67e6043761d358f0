/* SPDX-License-Identifier: MIT */
/*
 * size.c - rkv_parse_size (size.h).
 */
#include "size.h"

#include <errno.h>
#include <stdlib.h>

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
