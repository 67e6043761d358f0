/* SPDX-License-Identifier: MIT */
/*
 * sw_cq.c - the completion queue of the software providers.
 *
 * Completions come from the poller itself (progress inside rkv_cq_poll,
 * shm's synchronous one-sided ops), from posters, and from the context's
 * transport thread (passive endpoints).  They go into a bounded lock-free
 * MPSC ring (Vyukov's sequence-numbered cells: a producer claims a cell by
 * CAS on tail, the single consumer frees it by bumping the cell's
 * sequence), so the poller's own completions cost no lock.  When the ring
 * is full, completions spill into a mutex-protected overflow list that
 * grows: nothing is dropped.  Once the overflow is in use, every producer
 * appends there until the consumer has drained it, and the consumer drains
 * the ring before the overflow; since one endpoint's completions are
 * produced under its lock, their order survives the spill.
 *
 * rkv_cq_poll also progresses the CQ's active endpoints (manual progress).
 * The list of active endpoints changes under eps_lock; the poller works on
 * a private copy refreshed when eps_gen moves, so a steady-state poll takes
 * no lock.
 *
 * rkv_cq_wait blocks the poller in ppoll on the active endpoints' sockets
 * and the CQ's eventfd.  Completions from other threads ring the eventfd
 * only while the poller waits: the waiter sets `waiting` and then reads
 * `published`; a producer publishes its cell, bumps `published` and then
 * reads `waiting`.  All four are sequentially consistent, so one of the
 * two sees the other (Dekker) and no completion sleeps until the timeout.
 */
#include "sw.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "../alloc.h"
#include "../log.h"

static uint64_t roundup_pow2(uint64_t v)
{
	uint64_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

int sw_cq_create(struct rkv_tp *btp, unsigned depth, struct rkv_cq **out)
{
	struct sw_tp *tp = container_of(btp, struct sw_tp, base);
	struct sw_cq *cq;
	uint64_t n = roundup_pow2(depth < 64 ? 64 : depth);

	cq = rkv_aligned_alloc(64, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	memset(cq, 0, sizeof(*cq));
	cq->cells = rkv_calloc(n, sizeof(*cq->cells));
	if (!cq->cells)
		goto free_cq;
	for (uint64_t i = 0; i < n; i++)
		cq->cells[i].seq = i;
	cq->mask = n - 1;
	cq->tp = tp;
	if (pthread_mutex_init(&cq->ovf_lock, NULL))
		goto free_cells;
	if (pthread_mutex_init(&cq->eps_lock, NULL))
		goto destroy_ovf;
	cq->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (cq->wake_fd < 0) {
		int e = -errno;

		pthread_mutex_destroy(&cq->eps_lock);
		pthread_mutex_destroy(&cq->ovf_lock);
		rkv_free(cq->cells);
		rkv_free(cq);
		return e;
	}
	*out = &cq->base;
	return 0;

destroy_ovf:
	pthread_mutex_destroy(&cq->ovf_lock);
free_cells:
	rkv_free(cq->cells);
free_cq:
	rkv_free(cq);
	return -ENOMEM;
}

void sw_cq_destroy(struct rkv_cq *bcq)
{
	struct sw_cq *cq = container_of(bcq, struct sw_cq, base);

	close(cq->wake_fd);
	pthread_mutex_destroy(&cq->eps_lock);
	pthread_mutex_destroy(&cq->ovf_lock);
	rkv_free(cq->snap);
	rkv_free(cq->eps);
	rkv_free(cq->ovf);
	rkv_free(cq->cells);
	rkv_free(cq);
}

static void ovf_push(struct sw_cq *cq, const struct rkv_wc *wc)
{
	pthread_mutex_lock(&cq->ovf_lock);
	if (cq->ovf_tail == cq->ovf_cap) {
		if (cq->ovf_head > 0) {
			memmove(cq->ovf, cq->ovf + cq->ovf_head,
				(cq->ovf_tail - cq->ovf_head) * sizeof(*wc));
			cq->ovf_tail -= cq->ovf_head;
			cq->ovf_head = 0;
		}
		if (cq->ovf_tail == cq->ovf_cap) {
			size_t cap = cq->ovf_cap ? cq->ovf_cap * 2 : 256;
			struct rkv_wc *n = rkv_realloc(cq->ovf, cap * sizeof(*n));

			if (!n) {
				pthread_mutex_unlock(&cq->ovf_lock);
				rkv_tp_log(&cq->tp->base, RKV_LOG_ERROR,
					   "transport",
					   "CQ overflow: out of memory, completion of wr_id %llu dropped",
					   (unsigned long long)wc->wr_id);
				return;
			}
			cq->ovf = n;
			cq->ovf_cap = cap;
		}
	}
	cq->ovf[cq->ovf_tail++] = *wc;
	__atomic_store_n(&cq->ovf_flag, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&cq->ovf_lock);
}

static void enqueue(struct sw_cq *cq, const struct rkv_wc *wc)
{
	if (!__atomic_load_n(&cq->ovf_flag, __ATOMIC_ACQUIRE)) {
		uint64_t pos = __atomic_load_n(&cq->tail, __ATOMIC_RELAXED);

		for (;;) {
			struct sw_cell *c = &cq->cells[pos & cq->mask];
			uint64_t seq = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
			int64_t dif = (int64_t)(seq - pos);

			if (dif == 0) {
				if (__atomic_compare_exchange_n(
					    &cq->tail, &pos, pos + 1, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
					c->wc = *wc;
					/* Publishes wc to the consumer. */
					__atomic_store_n(&c->seq, pos + 1,
							 __ATOMIC_RELEASE);
					return;
				}
			} else if (dif < 0) {
				break; /* full */
			} else {
				pos = __atomic_load_n(&cq->tail,
						      __ATOMIC_RELAXED);
			}
		}
	}
	ovf_push(cq, wc);
}

uint64_t sw_cq_push(struct sw_cq *cq, const struct rkv_wc *wc)
{
	uint64_t ticket = __atomic_fetch_add(&cq->produced, 1,
					     __ATOMIC_RELAXED);

	enqueue(cq, wc);
	/* published; now look for a waiter (pairs with sw_cq_wait) */
	__atomic_fetch_add(&cq->published, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&cq->waiting, __ATOMIC_SEQ_CST)) {
		uint64_t one = 1;

		if (write(cq->wake_fd, &one, sizeof(one)) < 0) {
			/* EAGAIN: the counter is full, the waiter wakes */
		}
	}
	return ticket;
}

static int drain(struct sw_cq *cq, struct rkv_wc *wc, int max)
{
	int n = 0;

	while (n < max) {
		struct sw_cell *c = &cq->cells[cq->head & cq->mask];
		uint64_t seq = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);

		if (seq != cq->head + 1)
			break;
		wc[n++] = c->wc;
		/* Hands the cell back to producers after we copied it. */
		__atomic_store_n(&c->seq, cq->head + cq->mask + 1,
				 __ATOMIC_RELEASE);
		cq->head++;
	}
	if (n < max && __atomic_load_n(&cq->ovf_flag, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&cq->ovf_lock);
		while (n < max && cq->ovf_head < cq->ovf_tail)
			wc[n++] = cq->ovf[cq->ovf_head++];
		if (cq->ovf_head == cq->ovf_tail) {
			cq->ovf_head = cq->ovf_tail = 0;
			__atomic_store_n(&cq->ovf_flag, 0, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&cq->ovf_lock);
	}
	if (n)
		__atomic_store_n(&cq->consumed, cq->consumed + (uint64_t)n,
				 __ATOMIC_RELEASE);
	return n;
}

static void refresh_snap(struct sw_cq *cq, uint64_t gen)
{
	pthread_mutex_lock(&cq->eps_lock);
	if (cq->snap_cap < cq->neps) {
		struct sw_ep **n = rkv_realloc(cq->snap,
					       cq->eps_cap * sizeof(*n));

		if (!n) {
			pthread_mutex_unlock(&cq->eps_lock);
			return; /* keep the old copy, retry next poll */
		}
		cq->snap = n;
		cq->snap_cap = cq->eps_cap;
	}
	if (cq->neps)
		memcpy(cq->snap, cq->eps, cq->neps * sizeof(*cq->eps));
	cq->nsnap = cq->neps;
	cq->snap_gen = gen;
	pthread_mutex_unlock(&cq->eps_lock);
}

int sw_cq_poll(struct rkv_cq *bcq, struct rkv_wc *wc, int max)
{
	struct sw_cq *cq = container_of(bcq, struct sw_cq, base);
	uint64_t gen = __atomic_load_n(&cq->eps_gen, __ATOMIC_ACQUIRE);
	unsigned npoll = cq->npoll++;

	sw_hb_acquire();
	if (gen != cq->snap_gen)
		refresh_snap(cq, gen);
	for (unsigned i = 0; i < cq->nsnap; i++)
		sw_ep_progress(cq->snap[i], npoll);
	return drain(cq, wc, max);
}

static bool has_wc(struct sw_cq *cq)
{
	const struct sw_cell *c = &cq->cells[cq->head & cq->mask];

	return __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) == cq->head + 1 ||
	       __atomic_load_n(&cq->ovf_flag, __ATOMIC_ACQUIRE);
}

#define WAIT_MAX_EPS 64

int sw_cq_wait(struct rkv_cq *bcq, struct pollfd *fds, unsigned nfds,
	       unsigned timeout_us)
{
	struct sw_cq *cq = container_of(bcq, struct sw_cq, base);
	uint64_t gen = __atomic_load_n(&cq->eps_gen, __ATOMIC_ACQUIRE);
	struct pollfd pfd[1 + RKV_CQ_WAIT_FDS + WAIT_MAX_EPS];
	struct timespec ts = { (time_t)(timeout_us / 1000000u),
			       (long)(timeout_us % 1000000u) * 1000 };
	unsigned n = 1 + nfds;
	uint64_t pub;
	int rc = 0;

	if (gen != cq->snap_gen)
		refresh_snap(cq, gen);
	if (cq->nsnap > WAIT_MAX_EPS)
		return 0; /* too many to wait on: the caller polls */
	for (unsigned i = 0; i < cq->nsnap; i++) {
		if (!sw_ep_wait_on(cq->snap[i], &pfd[n].fd, &pfd[n].events))
			return 0;
		pfd[n].revents = 0;
		n++;
	}
	pfd[0].fd = cq->wake_fd;
	pfd[0].events = POLLIN;
	pfd[0].revents = 0;
	for (unsigned i = 0; i < nfds; i++) {
		pfd[1 + i] = fds[i];
		pfd[1 + i].revents = 0;
	}
	__atomic_store_n(&cq->waiting, 1, __ATOMIC_SEQ_CST);
	pub = __atomic_load_n(&cq->published, __ATOMIC_SEQ_CST);
	/* consumed only moves in this thread; a completion consumed before
	 * its producer bumped published makes the difference negative */
	if ((int64_t)(pub - cq->consumed) <= 0 && !has_wc(cq) &&
	    ppoll(pfd, n, &ts, NULL) < 0 && errno != EINTR)
		rc = -errno;
	__atomic_store_n(&cq->waiting, 0, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < nfds; i++)
		fds[i].revents = pfd[1 + i].revents;
	if (pfd[0].revents & POLLIN) {
		uint64_t v;

		if (read(cq->wake_fd, &v, sizeof(v)) < 0) {
			/* EAGAIN: another read took it; nothing to do */
		}
	}
	return rc;
}

int sw_cq_add_ep(struct sw_cq *cq, struct sw_ep *ep)
{
	pthread_mutex_lock(&cq->eps_lock);
	if (cq->neps == cq->eps_cap) {
		unsigned cap = cq->eps_cap ? cq->eps_cap * 2 : 8;
		struct sw_ep **n = rkv_realloc(cq->eps, cap * sizeof(*n));

		if (!n) {
			pthread_mutex_unlock(&cq->eps_lock);
			return -ENOMEM;
		}
		cq->eps = n;
		cq->eps_cap = cap;
	}
	cq->eps[cq->neps++] = ep;
	__atomic_add_fetch(&cq->eps_gen, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&cq->eps_lock);
	return 0;
}

void sw_cq_del_ep(struct sw_cq *cq, struct sw_ep *ep)
{
	pthread_mutex_lock(&cq->eps_lock);
	for (unsigned i = 0; i < cq->neps; i++) {
		if (cq->eps[i] == ep) {
			cq->eps[i] = cq->eps[--cq->neps];
			break;
		}
	}
	/* The poller's copy may still name ep; drop it now (ep_destroy and
	 * polling this CQ are serialized by the caller). */
	for (unsigned i = 0; i < cq->nsnap; i++) {
		if (cq->snap[i] == ep) {
			cq->snap[i] = cq->snap[--cq->nsnap];
			break;
		}
	}
	__atomic_add_fetch(&cq->eps_gen, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&cq->eps_lock);
}
