/* SPDX-License-Identifier: MIT */
/*
 * hist.c - log-linear histogram.  Values below 2^RKV_HIST_SUB get a bucket
 * each; above that, bucket = (exponent, top RKV_HIST_SUB bits of mantissa).
 * A quantile reports the midpoint of its bucket, clamped to [min, max].
 */
#include "hist.h"

#include <string.h>

static unsigned bucket_of(uint64_t v)
{
	const unsigned sub = 1u << RKV_HIST_SUB;

	if (v < sub)
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= RKV_HIST_SUB */
	unsigned m = (unsigned)(v >> (e - RKV_HIST_SUB)) & (sub - 1);

	return (e - RKV_HIST_SUB + 1) * sub + m;
}

static uint64_t bucket_mid(unsigned b)
{
	const unsigned sub = 1u << RKV_HIST_SUB;

	if (b < sub)
		return b;
	unsigned e = b / sub + RKV_HIST_SUB - 1;
	uint64_t m = b % sub;
	uint64_t lo = (1ull << e) | (m << (e - RKV_HIST_SUB));
	uint64_t width = 1ull << (e - RKV_HIST_SUB);

	return lo + width / 2;
}

void rkv_hist_init(struct rkv_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

void rkv_hist_add(struct rkv_hist *h, uint64_t ns)
{
	h->count++;
	h->sum += (double)ns;
	if (ns < h->min)
		h->min = ns;
	if (ns > h->max)
		h->max = ns;
	h->b[bucket_of(ns)]++;
}

void rkv_hist_merge(struct rkv_hist *dst, const struct rkv_hist *src)
{
	if (!src->count)
		return;
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	for (unsigned i = 0; i < RKV_HIST_BUCKETS; i++)
		dst->b[i] += src->b[i];
}

uint64_t rkv_hist_quantile(const struct rkv_hist *h, double q)
{
	if (!h->count)
		return 0;
	if (q <= 0)
		return h->min;
	if (q >= 1)
		return h->max;
	uint64_t rank = (uint64_t)(q * (double)h->count);
	uint64_t seen = 0;

	if (rank >= h->count)
		rank = h->count - 1;
	for (unsigned i = 0; i < RKV_HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen > rank) {
			uint64_t v = bucket_mid(i);

			if (v < h->min)
				v = h->min;
			if (v > h->max)
				v = h->max;
			return v;
		}
	}
	return h->max;
}

double rkv_hist_mean(const struct rkv_hist *h)
{
	return h->count ? h->sum / (double)h->count : 0.0;
}
