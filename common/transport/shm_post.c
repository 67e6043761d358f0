/* SPDX-License-Identifier: MIT */
/*
 * shm_post.c - one-sided operations of the shm provider, executed by the
 * initiator inside rkv_post: the rkey's translation (shm_map.c), bounds
 * and access checks, then the load, store or atomic on the mapping.
 *
 * READ/WRITE on GPU regions become CUDA copies between the local buffer
 * and the device memory, CAS/FETCH_ADD a device atomic - all complete
 * before rkv_post returns.  The rkey, bounds and access checks are the
 * same as for host memory; unlike a read-only mmap, an IPC mapping is
 * always writable, so for GPU regions those checks are the only guard (as
 * the NIC's are on verbs).  SENDs, and one-sided WRs behind an
 * outstanding SEND, go through the engine's send queue (sw_tx.c).
 */
#include "shm_internal.h"

#include <errno.h>
#include <string.h>

#include "../hash.h"
#include "../log.h"
#include "../rtime.h"

/*
 * A one-sided WR where the target memory p (checked) is on gpu, or, with
 * gpu -1, host memory and the local buffer is on lgpu; done when this
 * returns.  Copies are cudaMemcpyDefault, so host<->device and
 * device<->device (peer) need nothing else.
 */
static int exec_gpu(struct sw_ep *ep, int tgpu, int lgpu,
		    const struct rkv_wr *wr, uint8_t *p)
{
	int gpu = tgpu >= 0 ? tgpu : lgpu;
	int rc = 0;

	switch (wr->opcode) {
	case RKV_WR_READ:
		rc = rkv_cuda_copy(gpu, wr->local, p, wr->length);
		break;
	case RKV_WR_WRITE:
		rc = rkv_cuda_copy(gpu, p, wr->local, wr->length);
		break;
	case RKV_WR_CAS:
	case RKV_WR_FETCH_ADD: {
		uint64_t old = 0;

		if (tgpu < 0) {
			/* host word, result into local device memory */
			old = wr->opcode == RKV_WR_CAS ? wr->compare_add : 0;
			if (wr->opcode == RKV_WR_CAS)
				__atomic_compare_exchange_n(
					(uint64_t *)(void *)p, &old, wr->swap,
					false, __ATOMIC_SEQ_CST,
					__ATOMIC_SEQ_CST);
			else
				old = __atomic_fetch_add((uint64_t *)(void *)p,
							 wr->compare_add,
							 __ATOMIC_SEQ_CST);
		} else {
			rc = rkv_cuda_atomic64(
				gpu, (uint64_t *)(void *)p,
				wr->opcode == RKV_WR_CAS ? RKV_CUDA_CAS
							 : RKV_CUDA_FADD,
				wr->compare_add, wr->swap, &old);
		}
		if (!rc && lgpu >= 0)
			rc = rkv_cuda_copy(lgpu, wr->local, &old, 8);
		else if (!rc)
			memcpy(wr->local, &old, 8);
		break;
	}
	default:
		return RKV_WC_GENERAL_ERR;
	}
	if (rc) {
		sw_log(ep->tp, RKV_LOG_WARN, "%s on GPU %d memory failed: %s",
		       rkv_wr_opcode_str(wr->opcode), gpu, rkv_cuda_strerror());
		return RKV_WC_REM_OP_ERR;
	}
	return RKV_WC_SUCCESS;
}

static void (*access_hook)(void *arg);
static void *access_hook_arg;

void rkv_shm_set_access_hook(void (*fn)(void *arg), void *arg)
{
	access_hook_arg = arg;
	access_hook = fn;
}

/* A READ or WRITE the caller asked us to hash (RKV_WR_DIGEST), of a sane
 * range. */
static bool digesting(const struct rkv_wr *wr)
{
	return (wr->flags & RKV_WR_DIGEST) &&
	       (wr->opcode == RKV_WR_READ || wr->opcode == RKV_WR_WRITE) &&
	       wr->digest && wr->digest_off <= wr->length;
}

/* Execute a one-sided WR now; returns its WC status. */
static int shm_exec(struct sw_ep *ep, struct shm_ep *se,
		    const struct rkv_wr *wr)
{
	uint32_t idx = wr->rkey & SW_MR_IDX_MASK;
	struct shm_rc *c;
	unsigned need;
	uint64_t k, off;
	uint8_t *p;
	int st, lgpu = -1;

	if (wr->length &&
	    sw_mrtab_check_local(&ep->tp->mrt, wr->local, wr->length,
				 wr->lkey, wr->opcode != RKV_WR_WRITE, &lgpu))
		return RKV_WC_LOC_PROT_ERR;
	if (!se->peer_tab) {
		st = shm_tab_get(ep, se);
		if (st != RKV_WC_SUCCESS)
			return st;
	}
	k = __atomic_load_n(&se->peer_tab[idx].key, __ATOMIC_ACQUIRE);
	if (!se->rc || se->rc[idx].key != k) {
		st = shm_rc_fill(ep, se, idx, wr->rkey, k);
		if (st != RKV_WC_SUCCESS)
			return st;
	}
	c = &se->rc[idx];
	if (!(k & SW_KEY_VALID) || (uint32_t)k != wr->rkey)
		return RKV_WC_REM_ACCESS_ERR;
	need = wr->opcode == RKV_WR_READ    ? RKV_ACCESS_REMOTE_READ
	       : wr->opcode == RKV_WR_WRITE ? RKV_ACCESS_REMOTE_WRITE
					    : RKV_ACCESS_REMOTE_ATOMIC;
	if (!(SW_KEY_ACCESS(k) & need))
		return RKV_WC_REM_ACCESS_ERR;
	off = wr->remote_addr - c->addr;
	if (wr->remote_addr < c->addr || wr->length > c->len ||
	    off > c->len - wr->length)
		return RKV_WC_REM_ACCESS_ERR;
	p = c->base + off;
	if (access_hook)
		access_hook(access_hook_arg);
	if (c->gpu >= 0 || lgpu >= 0) {
		st = exec_gpu(ep, c->gpu, lgpu, wr, p);
		/* a device region read into host memory, or written from
		 * it: the host buffer hashed after */
		if (st == RKV_WC_SUCCESS && digesting(wr) && lgpu < 0)
			rkv_hash_update(wr->digest,
					(char *)wr->local + wr->digest_off,
					wr->length - wr->digest_off);
		return st;
	}
	switch (wr->opcode) {
	case RKV_WR_READ:
		if (digesting(wr)) {
			/* the copy and the hash in one pass (hash.h) */
			memcpy(wr->local, p, wr->digest_off);
			rkv_hash_copy(wr->digest,
				      (char *)wr->local + wr->digest_off,
				      p + wr->digest_off,
				      wr->length - wr->digest_off);
		} else if (wr->length) {
			memcpy(wr->local, p, wr->length);
		}
		break;
	case RKV_WR_WRITE:
		if (digesting(wr)) {
			/* hashed in the target as it is copied there */
			memcpy(p, wr->local, wr->digest_off);
			rkv_hash_copy(wr->digest, p + wr->digest_off,
				      (const char *)wr->local + wr->digest_off,
				      wr->length - wr->digest_off);
		} else if (wr->length) {
			memcpy(p, wr->local, wr->length);
		}
		break;
	case RKV_WR_CAS: {
		uint64_t old = wr->compare_add;

		__atomic_compare_exchange_n((uint64_t *)(void *)p, &old,
					    wr->swap, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
		*(uint64_t *)wr->local = old;
		break;
	}
	case RKV_WR_FETCH_ADD:
		*(uint64_t *)wr->local = __atomic_fetch_add(
			(uint64_t *)(void *)p, wr->compare_add,
			__ATOMIC_SEQ_CST);
		break;
	default:
		return RKV_WC_GENERAL_ERR;
	}
	return RKV_WC_SUCCESS;
}

/* Whether the send queue has room for one more WR (frees the slots of
 * completions polled since). */
static bool take_slot(struct sw_ep *ep, struct shm_ep *se)
{
	uint64_t done = __atomic_load_n(&ep->cq->consumed, __ATOMIC_ACQUIRE);

	while (se->cr_head != se->cr_tail &&
	       se->cr[se->cr_head % ep->sq_cap].ticket < done) {
		se->fast_out -= se->cr[se->cr_head % ep->sq_cap].count;
		se->cr_head++;
	}
	return se->fast_out +
		       (uint32_t)(ep->sq_tail -
				  __atomic_load_n(&ep->sq_head,
						  __ATOMIC_ACQUIRE)) <
	       ep->sq_cap;
}

int shm_post(struct rkv_ep *bep, struct rkv_wr *wr, struct rkv_wr **bad)
{
	struct sw_ep *ep = container_of(bep, struct sw_ep, base);
	struct shm_ep *se = ep->prov;

	for (; wr; wr = wr->next) {
		int st = -1, rc;

		if (!take_slot(ep, se)) {
			if (bad)
				*bad = wr;
			return -ENOMEM;
		}
		if (wr->opcode != RKV_WR_SEND &&
		    __atomic_load_n(&ep->base.state, __ATOMIC_ACQUIRE) ==
			    RKV_EP_CONNECTED &&
		    !__atomic_load_n(&ep->err_pending, __ATOMIC_RELAXED)) {
			st = shm_exec(ep, se, wr);
			/* Fast path: nothing outstanding ahead of it. */
			if (st == RKV_WC_SUCCESS &&
			    __atomic_load_n(&ep->sq_head, __ATOMIC_ACQUIRE) ==
				    ep->sq_tail) {
				se->fast_out++;
				if (wr->flags & RKV_WR_SIGNALED) {
					struct rkv_wc wc = {
						.wr_id = wr->wr_id,
						.status = RKV_WC_SUCCESS,
						.opcode = wr->opcode,
						.ep = bep,
					};
					struct shm_credit *c =
						&se->cr[se->cr_tail++ %
							ep->sq_cap];

					c->ticket = sw_cq_push(ep->cq, &wc);
					c->count = se->unsig + 1;
					se->unsig = 0;
				} else {
					se->unsig++;
				}
				continue;
			}
		}
		/* The engine's queue accounts for this one; unsignaled WRs
		 * before it are let go (approximation, keeps slots from
		 * leaking). */
		se->fast_out -= se->unsig;
		se->unsig = 0;
		pthread_mutex_lock(&ep->lock);
		rc = sw_ep_post_one_locked(ep, wr, st, rkv_now_ns());
		sw_ep_tx_commit(ep);
		sw_ep_settle_locked(ep);
		pthread_mutex_unlock(&ep->lock);
		if (rc) {
			if (bad)
				*bad = wr;
			return rc;
		}
	}
	return 0;
}
