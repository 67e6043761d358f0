/* SPDX-License-Identifier: MIT */
/*
 * rtime.c - the replaceable clock source of rtime.h (tests only; NULL
 * means CLOCK_MONOTONIC and CLOCK_MONOTONIC_COARSE).
 */
#include "rtime.h"

uint64_t (*g_rkv_time_source)(void);

void rkv_time_set_source(uint64_t (*now_ns)(void))
{
	g_rkv_time_source = now_ns;
}
