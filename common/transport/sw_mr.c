/* SPDX-License-Identifier: MIT */
/*
 * sw_mr.c - the MR table of the software providers.
 *
 * lkey == rkey == generation << SW_MR_IDX_BITS | index, so a key finds its
 * entry in O(1).  Generations start at a random value per context, so keys
 * of different contexts rarely coincide, and change on every registration
 * of an index, so a stale key never matches a new region.  Registration
 * writes the entry's fields while its key word is 0 and publishes the key
 * last (release); deregistration clears the key first, under the write
 * lock, so a transport thread executing a remote operation (read lock held)
 * has finished with the region when rkv_mr_dereg returns.
 */
#include "sw.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../alloc.h"
#include "../log.h"

int sw_mrtab_init(struct sw_mrtab *t, struct sw_mrent *ent,
		  const struct rkv_tp *owner)
{
	struct timespec ts;
	uint32_t seed;

	memset(t, 0, sizeof(*t));
	t->ent = ent;
	t->owner = owner;
	t->gen = rkv_calloc(SW_MR_MAX, sizeof(*t->gen));
	t->used = rkv_calloc(SW_MR_MAX, 1);
	if (!t->gen || !t->used)
		goto free_arrays;
	if (pthread_rwlock_init(&t->lock, NULL))
		goto free_arrays;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	seed = (uint32_t)ts.tv_nsec ^ (uint32_t)getpid() * 2654435761u ^
	       (uint32_t)(uintptr_t)t;
	for (uint32_t i = 0; i < SW_MR_MAX; i++) {
		seed = seed * 1103515245u + 12345u;
		t->gen[i] = seed >> 8;
	}
	return 0;

free_arrays:
	rkv_free(t->gen);
	rkv_free(t->used);
	return -ENOMEM;
}

void sw_mrtab_fini(struct sw_mrtab *t)
{
	if (!t->gen)
		return;
	pthread_rwlock_destroy(&t->lock);
	rkv_free(t->gen);
	rkv_free(t->used);
	t->gen = NULL;
	t->used = NULL;
}

int sw_mrtab_reg(struct sw_mrtab *t, void *addr, size_t len, unsigned access,
		 unsigned memid1, uint64_t memoff, struct sw_mr **out)
{
	return sw_mrtab_reg_gpu(t, addr, len, access, memid1, memoff, -1, out);
}

int sw_mrtab_reg_gpu(struct sw_mrtab *t, void *addr, size_t len,
		     unsigned access, unsigned memid1, uint64_t memoff, int gpu,
		     struct sw_mr **out)
{
	struct sw_mr *mr;
	uint32_t idx, key, g;

	if (gpu >= SW_GPU_MAX)
		return -ENXIO;
	mr = rkv_calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	pthread_rwlock_wrlock(&t->lock);
	for (idx = 0; idx < SW_MR_MAX; idx++) {
		uint32_t i = (t->hint + idx) & SW_MR_IDX_MASK;

		if (!t->used[i]) {
			idx = i;
			goto found;
		}
	}
	pthread_rwlock_unlock(&t->lock);
	rkv_free(mr);
	rkv_tp_log(t->owner, RKV_LOG_WARN, "transport",
		   "MR table full (%u regions)", SW_MR_MAX);
	return -ENOMEM;
found:
	t->used[idx] = 1;
	t->hint = (idx + 1) & SW_MR_IDX_MASK;
	g = (t->gen[idx] + 1) & ((1u << (32 - SW_MR_IDX_BITS)) - 1);
	if (g == 0)
		g = 1;
	t->gen[idx] = g;
	key = g << SW_MR_IDX_BITS | idx;

	struct sw_mrent *e = &t->ent[idx];

	__atomic_store_n(&e->addr, (uint64_t)(uintptr_t)addr, __ATOMIC_RELAXED);
	__atomic_store_n(&e->len, (uint64_t)len, __ATOMIC_RELAXED);
	__atomic_store_n(&e->memoff, memoff, __ATOMIC_RELAXED);
	/* Publishes the fields above with the key. */
	__atomic_store_n(&e->key,
			 SW_KEY_VALID | (uint64_t)(gpu + 1) << 52 |
				 (uint64_t)memid1 << 36 |
				 (uint64_t)(access & 0xfu) << 32 |
				 ((access & RKV_ACCESS_WINDOWED) &&
						  t->owner->windows ?
					  SW_KEY_WINDOWED :
					  0) |
				 key,
			 __ATOMIC_RELEASE);
	pthread_rwlock_unlock(&t->lock);
	mr->idx = idx;
	mr->base.lkey = key;
	mr->base.rkey = key;
	*out = mr;
	return 0;
}

int sw_mrtab_dereg(struct sw_mrtab *t, struct sw_mr *mr)
{
	pthread_rwlock_wrlock(&t->lock);
	__atomic_store_n(&t->ent[mr->idx].key, 0, __ATOMIC_RELEASE);
	t->used[mr->idx] = 0;
	pthread_rwlock_unlock(&t->lock);
	rkv_free(mr);
	return 0;
}

int sw_mrtab_check_local(struct sw_mrtab *t, const void *p, uint32_t len,
			 uint32_t lkey, bool need_write, int *gpu)
{
	struct sw_mrent *e = &t->ent[lkey & SW_MR_IDX_MASK];
	uint64_t k = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
	uint64_t a, l, u = (uint64_t)(uintptr_t)p;

	if (!(k & SW_KEY_VALID) || (uint32_t)k != lkey)
		return RKV_WC_LOC_PROT_ERR;
	/* Acquire loads keep the key re-check below after them. */
	a = __atomic_load_n(&e->addr, __ATOMIC_ACQUIRE);
	l = __atomic_load_n(&e->len, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&e->key, __ATOMIC_RELAXED) != k)
		return RKV_WC_LOC_PROT_ERR;
	if (need_write && !(SW_KEY_ACCESS(k) & RKV_ACCESS_LOCAL_WRITE))
		return RKV_WC_LOC_PROT_ERR;
	if (u < a || len > l || u - a > l - len)
		return RKV_WC_LOC_PROT_ERR;
	if (gpu)
		*gpu = (int)SW_KEY_GPU1(k) - 1;
	else if (SW_KEY_GPU1(k))
		return RKV_WC_LOC_PROT_ERR; /* caller takes host memory only */
	return RKV_WC_SUCCESS;
}

int sw_mrtab_check_remote(struct sw_mrtab *t, uint32_t rkey, uint32_t salt,
			  uint64_t addr, uint64_t len, unsigned need,
			  void **ptr, uint64_t *key_out)
{
	struct sw_mrent *e = &t->ent[rkey & SW_MR_IDX_MASK];
	uint64_t k = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
	uint32_t want = (uint32_t)k ^ ((k & SW_KEY_WINDOWED) ? salt : 0);
	uint64_t a, l;

	if (!(k & SW_KEY_VALID) || want != rkey)
		return RKV_WC_REM_ACCESS_ERR;
	if ((SW_KEY_ACCESS(k) & need) != need)
		return RKV_WC_REM_ACCESS_ERR;
	a = __atomic_load_n(&e->addr, __ATOMIC_ACQUIRE);
	l = __atomic_load_n(&e->len, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&e->key, __ATOMIC_RELAXED) != k)
		return RKV_WC_REM_ACCESS_ERR;
	if (addr < a || len > l || addr - a > l - len)
		return RKV_WC_REM_ACCESS_ERR;
	*ptr = (void *)(uintptr_t)addr;
	if (key_out)
		*key_out = k;
	return RKV_WC_SUCCESS;
}
