/* SPDX-License-Identifier: MIT */
/*
 * index.c - scans of the index region.  The server never changes a slot:
 * clients CAS them remotely (on the tcp provider from the transport thread,
 * on shm from other processes), so every read here is a relaxed atomic
 * 8-byte load.  A scan is a snapshot of no single instant; its callers
 * (STATS, the rebuild after a client death) only need each slot's value at
 * some moment during the scan.  A locked slot still names its last
 * published block, which is live.
 */
#include "server_internal.h"

static uint64_t load_slot(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

uint64_t rkv_srv_index_count(const uint64_t *slots, uint64_t nslots)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i < nslots; i++)
		n += !rkv_slot_empty(load_slot(&slots[i]));
	return n;
}

void rkv_srv_index_scan(const uint64_t *slots, uint64_t nslots,
			rkv_srv_extent_fn fn, void *arg)
{
	for (uint64_t i = 0; i < nslots; i++) {
		uint64_t s = load_slot(&slots[i]);

		if (!rkv_slot_empty(s))
			fn(rkv_slot_offset(s), rkv_slot_size(s), arg);
	}
}
