/* SPDX-License-Identifier: MIT */
/*
 * rtime.h - monotonic time for timeouts, leases and latency measurement.
 * CLOCK_MONOTONIC through the vDSO costs ~20 ns, cheap enough for the
 * datapath; leases are always measured on the waiter's own clock.
 */
#ifndef RKV_COMMON_RTIME_H
#define RKV_COMMON_RTIME_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Tests replace the clock here (deterministic, simulated time: the
 * interleaving explorer of tests/unit/test_explore.c).  NULL, the default,
 * means the real clocks; otherwise every rkv_now_ns, rkv_now_ms and
 * rkv_coarse_ms returns the source's nanoseconds (coarse: / 1e6).  Costs
 * one predictable branch when unset.  Set it while no other thread reads
 * the clock.
 */
extern uint64_t (*g_rkv_time_source)(void);
void rkv_time_set_source(uint64_t (*now_ns)(void));

static inline uint64_t rkv_now_ns(void)
{
	struct timespec ts;

	if (__builtin_expect(g_rkv_time_source != NULL, 0))
		return g_rkv_time_source();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t rkv_now_ms(void)
{
	return rkv_now_ns() / 1000000ull;
}

/*
 * Milliseconds from CLOCK_MONOTONIC_COARSE: a few ns (no hardware clock
 * read), but it advances in jiffies (1-4 ms).  For deadlines, leases and
 * cache ages on hot paths; callers that compare against a bound keep a
 * margin of RKV_COARSE_SLACK_MS.
 */
#define RKV_COARSE_SLACK_MS 10u

static inline uint64_t rkv_coarse_ms(void)
{
	struct timespec ts;

	if (__builtin_expect(g_rkv_time_source != NULL, 0))
		return g_rkv_time_source() / 1000000ull;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

/*
 * Milliseconds of CLOCK_REALTIME_COARSE: wall time, comparable across
 * hosts as far as their clocks agree (lease words, proto/layout.h).  It
 * lags the true time by up to a jiffy: a check "now < deadline" adds
 * RKV_COARSE_SLACK_MS.  Not replaced by the test time source.
 */
static inline uint64_t rkv_wall_coarse_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

/* Pause in a spin loop (x86 PAUSE; a compiler barrier elsewhere). */
static inline void rkv_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

#ifdef __cplusplus
}
#endif
#endif
