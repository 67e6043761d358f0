/* SPDX-License-Identifier: MIT */
/*
 * index.c - scans of the index region.  The server never changes a slot
 * of the index it serves (rkv_srv_index_fence_move below changes the copy
 * it leaves behind): clients CAS them remotely (on the tcp provider from
 * the transport thread, on shm from other processes), so every read here
 * is a relaxed atomic 8-byte load.  A scan is a snapshot of no single instant; its callers
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

/*
 * The shm fence's move (rkv_tp_mem_renew): every word goes to dst, and
 * what stays in src makes a fenced client's late access harmless.  First
 * each partition word becomes GONE at the fence epoch, then each slot
 * word its poison (its version bumped and both migration marks set: no
 * CAS a client built from an earlier read matches it).  A late CAS lands
 * before its word moved (and moves with it) or fails; a reader that finds
 * a poisoned slot READs the partition word after the buckets (client/
 * op.c rd_buckets), so it finds GONE there and asks the map of epoch.
 * The lease word (the tail's first) moves too and is 0 in src; the level
 * word is copied.  nslots: the largest index's (the table follows them),
 * used: the slots of the levels in use (the others are 0 on both sides).
 */
void rkv_srv_index_fence_move(uint64_t *dst, uint64_t *src, uint64_t nslots,
			      uint64_t used, uint32_t epoch)
{
	const uint64_t gone = rkv_part_word(RKV_PART_GONE, epoch);
	uint64_t *dpart = dst + nslots, *spart = src + nslots;
	const uint64_t lw = nslots + RKV_PART_WORDS + RKV_INDEX_LEVEL_WORD;

	for (unsigned i = 0; i < RKV_PART_WORDS; i++)
		dpart[i] = __atomic_exchange_n(&spart[i], gone,
					       __ATOMIC_SEQ_CST);
	/* the levels not in use are 0 on both sides (fresh pages: left
	 * untouched); the level word moves as it is */
	dst[lw] = __atomic_load_n(&src[lw], __ATOMIC_ACQUIRE);
	for (uint64_t i = 0; i < used; i++) {
		uint64_t w = __atomic_load_n(&src[i], __ATOMIC_RELAXED);

		while (!__atomic_compare_exchange_n(
			&src[i], &w, rkv_slot_bump(w) | RKV_SLOT_MOVED, 0,
			__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
			;
		dst[i] = w;
	}
	/* the lease word: 0 (not known live) for whoever reads late */
	dst[nslots + RKV_PART_WORDS] = __atomic_exchange_n(
		&src[nslots + RKV_PART_WORDS], 0, __ATOMIC_SEQ_CST);
}
