/* SPDX-License-Identifier: MIT */
/*
 * sw_tp.c - context and transport thread of the software providers.
 *
 * The transport thread (one per context, started by the first listen) owns
 * an epoll set of listening sockets, connections still in the handshake,
 * and passive endpoints.  epoll carries a handle token (generation << 32 |
 * index into tp->h), never a pointer, so an event for an object destroyed
 * meanwhile is recognised and ignored.  The thread holds thr_lock while it
 * handles a batch of events; destroying a listener or a passive endpoint
 * takes thr_lock, so nothing is freed under the thread's feet.  After
 * activity the thread spins on epoll_wait(0) for SW_SPIN_NS before it
 * blocks, which keeps request latency low under load; blocked, it wakes
 * every SW_TICK_MS while something can time out (a WR outstanding or a
 * drain on a passive endpoint, a handshake, a paused listener), or every
 * SW_IDLE_MS when nothing can (an idle server, idle clients connected).
 * Whoever gives a passive endpoint something to time out during that long
 * sleep wakes the thread (sw_thr_kick, below).
 * Events of established endpoints are handled before listeners and
 * handshakes in each batch.
 *
 * Handshakes and floods are sw_hs.c, listeners, accept and connect
 * sw_conn.c.
 */
#include "sw.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../alloc.h"
#include "../log.h"
#include "../rtime.h"

#define SW_SPIN_NS (150u * 1000)
#define SW_TICK_MS 10
#define SW_IDLE_MS 1000 /* nothing to time out: how long it blocks */

/* ---------------------------------------------------------------- handles */
int sw_h_alloc(struct sw_tp *tp, enum sw_htype type, void *ptr, uint64_t *tok)
{
	uint32_t i;

	for (i = 0; i < tp->hcap; i++)
		if (tp->h[i].type == SW_H_FREE)
			break;
	if (i == tp->hcap) {
		uint32_t cap = tp->hcap ? tp->hcap * 2 : 16;
		struct sw_handle *n = rkv_realloc(tp->h, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		memset(n + tp->hcap, 0, (cap - tp->hcap) * sizeof(*n));
		tp->h = n;
		tp->hcap = cap;
	}
	tp->h[i].gen++;
	tp->h[i].type = type;
	tp->h[i].ptr = ptr;
	*tok = (uint64_t)tp->h[i].gen << 32 | i;
	return 0;
}

struct sw_handle *sw_h_get(struct sw_tp *tp, uint64_t tok)
{
	uint32_t i = (uint32_t)tok;

	if (i >= tp->hcap || tp->h[i].gen != (uint32_t)(tok >> 32) ||
	    tp->h[i].type == SW_H_FREE)
		return NULL;
	return &tp->h[i];
}

void sw_h_free(struct sw_tp *tp, uint64_t tok)
{
	struct sw_handle *h = sw_h_get(tp, tok);

	if (h) {
		h->type = SW_H_FREE;
		h->ptr = NULL;
		h->gen++;
	}
}

int sw_epoll_add(struct sw_tp *tp, int fd, unsigned events, uint64_t tok)
{
	struct epoll_event ev = { .events = events, .data.u64 = tok };

	return epoll_ctl(tp->epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/* ------------------------------------------------------ transport thread */
static void tick_all(struct sw_tp *tp, uint64_t now)
{
	sw_hs_tick(tp, now);
	for (uint32_t i = 0; i < tp->hcap; i++) {
		struct sw_handle *h = &tp->h[i];

		if (h->type == SW_H_EP) {
			sw_ep_tick(h->ptr, now);
		} else if (h->type == SW_H_LISTENER) {
			struct sw_listener *l = h->ptr;
			struct epoll_event ev = { .events = EPOLLIN,
						  .data.u64 = l->handle };

			if (l->paused && now >= l->resume_ns &&
			    !epoll_ctl(tp->epfd, EPOLL_CTL_MOD, l->fd, &ev))
				l->paused = false;
		}
	}
}

/* Whether anything may time out: a handshake, a paused listener, a
 * passive endpoint with a WR outstanding or output to drain (thr_lock
 * held).  Handshakes and pauses are made by this thread, which plans its
 * next wait after making them; the endpoints' timers are made by other
 * threads too, hence the lock per endpoint (see plan_wait_locked). */
static bool need_ticks(struct sw_tp *tp)
{
	if (tp->hs.head)
		return true;
	for (uint32_t i = 0; i < tp->hcap; i++) {
		struct sw_handle *h = &tp->h[i];
		bool timed = false;

		if (h->type == SW_H_EP) {
			struct sw_ep *ep = h->ptr;

			pthread_mutex_lock(&ep->lock);
			timed = sw_ep_timed_locked(ep);
			pthread_mutex_unlock(&ep->lock);
		} else if (h->type == SW_H_LISTENER) {
			timed = ((struct sw_listener *)h->ptr)->paused;
		}
		if (timed)
			return true;
	}
	return false;
}

/*
 * How long the next epoll_wait blocks, once the thread is done spinning
 * (thr_lock held): SW_TICK_MS while anything may time out, else
 * SW_IDLE_MS with tp->long_sleep set.  A WR posted on a passive endpoint
 * during that long sleep must not wait for its end to be timed (it would
 * fail up to SW_IDLE_MS late), so its poster wakes the thread - but only
 * then: a poster in the busy case pays one load, never a syscall.  The
 * classic pairing, each side publishing before it looks at the other's:
 *
 *   this thread                      a poster (sw_ep_settle_locked)
 *   A: long_sleep = 1                C: under ep->lock: queue the WR,
 *   B: for each ep, under ep->lock:     then D: read long_sleep; if 1,
 *      timed?  none: block 1 s          take it (xchg) and ring wakefd
 *
 * B and C hold the same ep->lock, so one of them comes first.  C first:
 * B sees the WR and the thread ticks.  B first: A is sequenced before B's
 * unlock, which synchronizes with C's lock, which comes before D, so D
 * reads the 1 (or the 0 of a thread already awake again, which plans
 * anew before it blocks) and rings.  The eventfd stays readable until
 * read, so a ring that comes before the thread enters epoll_wait ends
 * that wait at once.  The lock gives the order; the flag's accesses are
 * seq_cst besides (a plain load on x86), which would also keep it should
 * B ever read the queue without the lock, with seq_cst stores of C.
 */
static int plan_wait_locked(struct sw_tp *tp)
{
	__atomic_store_n(&tp->long_sleep, 1, __ATOMIC_SEQ_CST);
	if (!need_ticks(tp))
		return SW_IDLE_MS;
	__atomic_store_n(&tp->long_sleep, 0, __ATOMIC_SEQ_CST);
	return SW_TICK_MS;
}

void sw_thr_kick(struct sw_tp *tp)
{
	uint64_t one = 1;

	/* The load keeps the busy case free of a locked instruction; the
	 * exchange lets only the first of several posters ring. */
	if (!__atomic_load_n(&tp->long_sleep, __ATOMIC_SEQ_CST) ||
	    !__atomic_exchange_n(&tp->long_sleep, 0, __ATOMIC_SEQ_CST))
		return;
	if (write(tp->wakefd, &one, sizeof(one)) < 0)
		sw_log(tp, RKV_LOG_WARN, "waking the transport thread: %s",
		       strerror(errno));
}

/* Handle one event; pass 0 takes endpoints (and the wake-up), pass 1
 * listeners and handshakes, so that a burst of connections never delays
 * requests of established clients.  Returns whether it was work. */
static bool on_event(struct sw_tp *tp, const struct epoll_event *ev,
		     int pass)
{
	struct sw_handle *h = sw_h_get(tp, ev->data.u64);
	uint64_t v;

	if (!h)
		return false;
	switch (h->type) {
	case SW_H_WAKE:
		if (pass == 0 && read(tp->wakefd, &v, sizeof(v)) < 0)
			return false;
		return false;
	case SW_H_EP:
		if (pass == 0)
			sw_ep_event(h->ptr, ev->events);
		return pass == 0;
	case SW_H_LISTENER:
		if (pass == 1)
			sw_hs_on_listener(tp, h->ptr);
		return pass == 1;
	case SW_H_PEND:
		if (pass == 1)
			sw_hs_on_pend(tp, h->ptr);
		return pass == 1;
	default:
		return false;
	}
}

static void *thr_main(void *arg)
{
	struct sw_tp *tp = arg;
	struct epoll_event evs[64];
	uint64_t last_busy = rkv_now_ns();
	int wait_ms = 0;

	/* Named for top -H and for bench/run-goals.sh, which reads its CPU
	 * time from /proc (failure is harmless). */
	(void)pthread_setname_np(pthread_self(), "rkv-transport");
	for (;;) {
		int n = epoll_wait(tp->epfd, evs, 64, wait_ms);
		bool spin = wait_ms == 0, busy = false;
		uint64_t now;

		/* Awake: posters need not ring any more (a kick took it
		 * already, or the sleep ran out). */
		if (wait_ms == SW_IDLE_MS)
			__atomic_store_n(&tp->long_sleep, 0, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&tp->stop, __ATOMIC_ACQUIRE))
			break;
		pthread_mutex_lock(&tp->thr_lock);
		for (int pass = 0; pass < 2; pass++)
			for (int i = 0; i < n; i++)
				busy |= on_event(tp, &evs[i], pass);
		now = rkv_now_ns();
		if (now >= tp->next_tick) {
			tp->next_tick = now + SW_TICK_MS * 1000000ull;
			tick_all(tp, now);
		}
		if (busy)
			last_busy = now;
		wait_ms = now - last_busy < SW_SPIN_NS ? 0
						       : plan_wait_locked(tp);
		pthread_mutex_unlock(&tp->thr_lock);
		/* Spinning idle: let a thread that shares our core (often
		 * the initiator that polls for our answer) run. */
		if (spin && n == 0)
			sched_yield();
		/* Under TSan: what this thread did to regions happens
		 * before what a later rkv_cq_poll caller reads. */
		if (busy)
			sw_hb_release();
	}
	return NULL;
}

/* Start the transport thread; tp->thr_lock held. */
int sw_thr_start_locked(struct sw_tp *tp)
{
	uint64_t tok;
	int rc;

	if (tp->thr_started)
		return 0;
	sw_hs_init(tp);
	tp->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (tp->epfd < 0)
		return -errno;
	tp->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (tp->wakefd < 0) {
		rc = -errno;
		goto close_ep;
	}
	rc = sw_h_alloc(tp, SW_H_WAKE, NULL, &tok);
	if (rc)
		goto close_wake;
	rc = sw_epoll_add(tp, tp->wakefd, EPOLLIN, tok);
	if (rc)
		goto close_wake;
	rc = -pthread_create(&tp->thr, NULL, thr_main, tp);
	if (rc)
		goto close_wake;
	tp->thr_started = true;
	return 0;

close_wake:
	close(tp->wakefd);
	tp->wakefd = -1;
close_ep:
	close(tp->epfd);
	tp->epfd = -1;
	return rc;
}

/* ---------------------------------------------------------------- context */
int sw_tp_init(struct sw_tp *tp, const struct sw_prov *prov,
	       struct sw_mrent *mrtab)
{
	int rc;

	tp->prov = prov;
	tp->epfd = -1;
	tp->wakefd = -1;
	tp->reserve_fd = -1;
	/* both software providers execute 8-byte atomics; tp->base.opts is
	 * filled in by rkv_tp_create once the provider returns */
	tp->base.has_atomics = 1;
	rc = sw_mrtab_init(&tp->mrt, mrtab, &tp->base);
	if (rc)
		return rc;
	if (pthread_mutex_init(&tp->thr_lock, NULL)) {
		sw_mrtab_fini(&tp->mrt);
		return -ENOMEM;
	}
	if (pthread_mutex_init(&tp->gpu_lock, NULL)) {
		pthread_mutex_destroy(&tp->thr_lock);
		sw_mrtab_fini(&tp->mrt);
		return -ENOMEM;
	}
	return 0;
}

void sw_tp_fini(struct sw_tp *tp)
{
	if (tp->thr_started) {
		uint64_t one = 1;

		__atomic_store_n(&tp->stop, 1, __ATOMIC_RELEASE);
		if (write(tp->wakefd, &one, sizeof(one)) < 0)
			sw_log(tp, RKV_LOG_WARN,
			       "waking the transport thread: %s",
			       strerror(errno));
		pthread_join(tp->thr, NULL);
		tp->thr_started = false;
	}
	for (uint32_t i = 0; i < tp->hcap; i++) {
		if (tp->h[i].type == SW_H_PEND)
			sw_pend_drop(tp, tp->h[i].ptr);
		else if (tp->h[i].type == SW_H_EP ||
			 tp->h[i].type == SW_H_LISTENER)
			sw_log(tp, RKV_LOG_WARN,
			       "context destroyed before its %s",
			       tp->h[i].type == SW_H_EP ? "endpoint" : "listener");
	}
	if (tp->wakefd >= 0)
		close(tp->wakefd);
	if (tp->epfd >= 0)
		close(tp->epfd);
	if (tp->reserve_fd >= 0)
		close(tp->reserve_fd);
	rkv_free(tp->h);
	tp->h = NULL;
	pthread_mutex_destroy(&tp->thr_lock);
	sw_gpu_fini(tp);
	pthread_mutex_destroy(&tp->gpu_lock);
	sw_mrtab_fini(&tp->mrt);
}

int sw_mr_reg(struct rkv_tp *btp, void *addr, size_t len, unsigned access,
	      struct rkv_mr **out)
{
	struct sw_tp *tp = container_of(btp, struct sw_tp, base);
	struct sw_mr *mr;
	int rc = sw_mrtab_reg(&tp->mrt, addr, len, access, 0, 0, &mr);

	if (rc)
		return rc;
	*out = &mr->base;
	return 0;
}

/* tcp: GPU memory needs no export; the transport thread stages it. */
int sw_mr_reg_gpu(struct rkv_tp *btp, void *addr, size_t len, unsigned access,
		  int gpu, struct rkv_mr **out)
{
	struct sw_tp *tp = container_of(btp, struct sw_tp, base);
	struct sw_mr *mr;
	int rc = sw_mrtab_reg_gpu(&tp->mrt, addr, len, access, 0, 0, gpu, &mr);

	if (rc)
		return rc;
	*out = &mr->base;
	return 0;
}

int sw_mr_dereg(struct rkv_mr *bmr)
{
	struct sw_tp *tp = container_of(bmr->tp, struct sw_tp, base);

	return sw_mrtab_dereg(&tp->mrt, container_of(bmr, struct sw_mr, base));
}
