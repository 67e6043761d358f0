/* SPDX-License-Identifier: MIT */
/*
 * hist.h - a latency histogram with log-linear buckets (HdrHistogram-like):
 * 2^RKV_HIST_SUB sub-buckets per power of two, so any percentile is within
 * 1/2^RKV_HIST_SUB (3%) of the true value, from 1 ns to ~1e19 ns.  Fixed
 * size, no allocation; merge by adding.  Not thread-safe: one per thread.
 */
#ifndef RKV_COMMON_HIST_H
#define RKV_COMMON_HIST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RKV_HIST_SUB 5
#define RKV_HIST_BUCKETS (64 << RKV_HIST_SUB)

struct rkv_hist {
	uint64_t count;
	uint64_t min;  /* ns */
	uint64_t max;  /* ns */
	double sum;    /* ns */
	uint64_t b[RKV_HIST_BUCKETS];
};

void rkv_hist_init(struct rkv_hist *h);
void rkv_hist_add(struct rkv_hist *h, uint64_t ns);
void rkv_hist_merge(struct rkv_hist *dst, const struct rkv_hist *src);
/* Value at quantile q in [0, 1] (ns); 0 when empty. */
uint64_t rkv_hist_quantile(const struct rkv_hist *h, double q);
double rkv_hist_mean(const struct rkv_hist *h);

#ifdef __cplusplus
}
#endif
#endif
