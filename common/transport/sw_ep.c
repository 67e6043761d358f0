/* SPDX-License-Identifier: MIT */
/*
 * sw_ep.c - endpoints of the software providers: their lifetime, the
 * completion of send-queue WRs in posting order, the error state, link
 * loss, and progress (poll-time for active endpoints, transport-thread
 * events and ticks for passive ones).
 *
 * Errors follow RC: the first failing WR moves the endpoint to the error
 * state, after which every outstanding and later WR completes with
 * RKV_WC_WR_FLUSH_ERR, posted RECVs are flushed, and the socket is shut
 * down (after the pending output, e.g. an error response, has drained), so
 * the peer's endpoint fails too.  A peer that closes the connection (EOF)
 * is the ordinary end of one: logged at debug only, unless a WR of ours
 * was outstanding.
 *
 * The send side is sw_tx.c, the receive side sw_rx.c, the frame format
 * and socket I/O sw_wire.c, GPU staging sw_gpu.c.
 */
#include "sw.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../alloc.h"
#include "../log.h"
#include "../rtime.h"

/* ------------------------------------------------------------ completions */
void sw_ep_push_wc(struct sw_ep *ep, uint64_t wr_id, int status,
		   enum rkv_wr_opcode op, uint32_t byte_len)
{
	struct rkv_wc wc = { .wr_id = wr_id,
			     .status = (enum rkv_wc_status)status,
			     .opcode = op,
			     .byte_len = byte_len,
			     .ep = &ep->base };

	sw_cq_push(ep->cq, &wc);
}

/* Emit completions of done WRs at the head, in posting order. */
void sw_ep_sq_emit(struct sw_ep *ep)
{
	while (ep->sq_head != ep->sq_tail) {
		struct sw_sqe *s = sw_sq_at(ep, ep->sq_head);
		bool fail;

		if (!s->done)
			break;
		fail = s->status != RKV_WC_SUCCESS;
		if (fail || s->signaled)
			sw_ep_push_wc(ep, s->wr_id, s->status,
				      (enum rkv_wr_opcode)s->opcode, 0);
		/* Read lock-free by shm's post to see an empty queue. */
		__atomic_store_n(&ep->sq_head, ep->sq_head + 1,
				 __ATOMIC_RELEASE);
		if (fail)
			sw_ep_enter_error_locked(ep);
	}
}

/* ------------------------------------------------------------------ errors */
static void do_close(struct sw_ep *ep)
{
	if (ep->closed)
		return;
	shutdown(ep->fd, SHUT_RDWR);
	ep->closed = true;
	ep->draining = false;
	ep->tx_len = 0;
	ep->tx_off = 0;
	ep->rx_len = 0;
	ep->rx_off = 0;
	ep->cur.kind = SW_RX_NONE;
	ep->io_err = false;
}

/* Shut the socket down once pending output (an error response) is out. */
static void link_close(struct sw_ep *ep)
{
	if (ep->closed)
		return;
	sw_ep_tx_commit(ep); /* frames staged so far, e.g. the error response */
	if (ep->tx_len && !ep->io_err)
		sw_ep_tx_flush(ep);
	if (ep->tx_len && !ep->io_err) {
		ep->draining = true;
		ep->drain_deadline = rkv_now_ns() + ep->timeout_ns;
		return;
	}
	do_close(ep);
}

static void free_unexp(struct sw_ep *ep)
{
	struct sw_unexp *u = ep->ux_head;

	while (u) {
		struct sw_unexp *n = u->next;

		rkv_free(u);
		u = n;
	}
	ep->ux_head = ep->ux_tail = NULL;
	ep->ux_bytes = 0;
	ep->ux_count = 0;
}

void sw_ep_enter_error_locked(struct sw_ep *ep)
{
	if (ep->base.state == RKV_EP_ERROR)
		return;
	/* Set before any completion is pushed: a poller that sees one of
	 * them (acquire) sees the state too. */
	__atomic_store_n(&ep->base.state, RKV_EP_ERROR, __ATOMIC_RELEASE);
	for (uint64_t q = ep->sq_head; q != ep->sq_tail; q++) {
		struct sw_sqe *s = sw_sq_at(ep, q);

		if (!s->done) {
			s->done = 1;
			s->status = RKV_WC_WR_FLUSH_ERR;
		}
	}
	__atomic_store_n(&ep->err_pending, false, __ATOMIC_RELAXED);
	if (ep->cur.kind == SW_RX_MEM && ep->cur.is_recv)
		sw_ep_push_wc(ep, ep->cur.rq_wr_id, RKV_WC_WR_FLUSH_ERR,
			      RKV_WR_RECV, 0);
	ep->cur.kind = SW_RX_NONE;
	for (; ep->rq_head != ep->rq_tail; ep->rq_head++)
		sw_ep_push_wc(ep, ep->rq[ep->rq_head % ep->rq_cap].wr_id,
			      RKV_WC_WR_FLUSH_ERR, RKV_WR_RECV, 0);
	free_unexp(ep);
	link_close(ep);
}

void sw_ep_fail(struct sw_ep *ep)
{
	sw_ep_enter_error_locked(ep);
	sw_ep_sq_emit(ep);
}

/*
 * The link is gone (EOF, reset, garbage, timeout).  by_peer: the peer
 * closed it (EOF, or a reset for bytes it did not read), which is how a
 * connection ordinarily ends: debug only, unless a WR of ours was
 * outstanding and fails for it.
 */
void sw_ep_link_lost(struct sw_ep *ep, int status, const char *why,
		     bool by_peer)
{
	if (ep->base.state != RKV_EP_ERROR) {
		bool hit = false;

		for (uint64_t q = ep->sq_head; q != ep->sq_tail; q++) {
			struct sw_sqe *s = sw_sq_at(ep, q);

			if (!s->done) {
				s->done = 1;
				s->status = s->rnr && status ==
							      RKV_WC_RETRY_EXC_ERR
						    ? RKV_WC_RNR_RETRY_EXC_ERR
						    : status;
				hit = true;
				break;
			}
		}
		/* As on a QP: with nothing outstanding, the next WR is the
		 * one that finds the peer gone. */
		if (!hit)
			ep->lost_status = status;
		sw_log(ep->tp,
		       by_peer && !hit ? RKV_LOG_DEBUG : RKV_LOG_INFO,
		       "peer %s: %s", ep->base.peer, why);
		sw_ep_enter_error_locked(ep);
	}
	do_close(ep);
	sw_ep_sq_emit(ep);
}

void sw_ep_proto_error(struct sw_ep *ep, const char *why)
{
	sw_log(ep->tp, RKV_LOG_WARN, "peer %s: %s; dropping the connection",
	       ep->base.peer, why);
	sw_ep_link_lost(ep, RKV_WC_RETRY_EXC_ERR, why, false);
}

/* ------------------------------------------------------------- progress */
static void update_interest(struct sw_ep *ep)
{
	struct epoll_event ev = { 0 };
	unsigned want = 0;

	if (!ep->in_epoll)
		return;
	if (ep->closed) {
		epoll_ctl(ep->tp->epfd, EPOLL_CTL_DEL, ep->fd, NULL);
		ep->in_epoll = false;
		return;
	}
	if (ep->base.state == RKV_EP_CONNECTED && ep->tx_len < SW_TX_HIGH)
		want |= EPOLLIN;
	if (ep->tx_len)
		want |= EPOLLOUT;
	if (want == ep->ev)
		return;
	ev.events = want;
	ev.data.u64 = ep->handle;
	if (epoll_ctl(ep->tp->epfd, EPOLL_CTL_MOD, ep->fd, &ev) == 0)
		ep->ev = want;
}

void sw_ep_settle_locked(struct sw_ep *ep)
{
	if (ep->io_err) {
		ep->io_err = false;
		sw_ep_link_lost(ep, RKV_WC_RETRY_EXC_ERR, "send failed", false);
	}
	if (ep->draining && !ep->tx_len)
		do_close(ep);
	if (ep->passive) {
		update_interest(ep);
		/* Published under ep->lock, which the thread's scan takes:
		 * sw_tp.c explains why no wake-up is lost. */
		if (sw_ep_timed_locked(ep))
			sw_thr_kick(ep->tp);
	}
}

/*
 * A SEND to a polled peer (we accepted; the connector's endpoint makes
 * progress only when its owner polls) waits for that poll, where a NIC
 * would have acknowledged it at once: a live peer that is idle must not
 * look dead.  Alive means, on shm, that the socket is open (the kernel
 * closes it when the process dies) and, on tcp, also that the peer's
 * kernel acknowledged every byte we sent (SIOCOUTQ 0), which a dead or
 * unreachable host cannot do.  A receiver that polls but has no RECV
 * posted answers RNR, and that SEND still times out.
 */
static bool polled_peer_alive(struct sw_ep *ep)
{
	int outq = -1;

	if (!ep->passive)
		return false;
	if (ep->tp->prov->unix_fds)
		return true;
	return ioctl(ep->fd, SIOCOUTQ, &outq) == 0 && outq == 0;
}

static void tick_locked(struct sw_ep *ep, uint64_t now)
{
	struct sw_sqe *s;
	uint64_t base;

	if (ep->closed)
		return;
	if (ep->draining) {
		if (now > ep->drain_deadline)
			do_close(ep);
		return;
	}
	if (ep->base.state != RKV_EP_CONNECTED || ep->sq_head == ep->sq_tail)
		return;
	s = sw_sq_at(ep, ep->sq_head);
	if (s->done)
		return;
	base = s->t_post;
	if (!s->rnr && ep->last_rx > base)
		base = ep->last_rx;
	/* bytes still going out (a WRITE longer than the socket buffers
	 * takes as long as the peer takes to read it): the timeout counts
	 * from the last progress */
	if (!s->rnr && ep->last_tx > base)
		base = ep->last_tx;
	if (now > base && now - base > ep->timeout_ns &&
	    !(s->opcode == RKV_WR_SEND && !s->rnr && polled_peer_alive(ep)))
		sw_ep_link_lost(ep,
				s->rnr ? RKV_WC_RNR_RETRY_EXC_ERR
				       : RKV_WC_RETRY_EXC_ERR,
				s->rnr ? "no RECV posted within the timeout"
				       : "no response within the timeout",
				false);
}

void sw_ep_tick(struct sw_ep *ep, uint64_t now)
{
	pthread_mutex_lock(&ep->lock);
	tick_locked(ep, now);
	sw_ep_settle_locked(ep);
	pthread_mutex_unlock(&ep->lock);
}

void sw_ep_progress(struct sw_ep *ep, unsigned npoll)
{
	const struct sw_prov *pv = ep->tp->prov;
	bool gated = pv->gate != NULL;

	if (gated && !pv->gate(ep, npoll))
		return;
	pthread_mutex_lock(&ep->lock);
	if (!ep->closed) {
		if (ep->tx_len)
			sw_ep_tx_flush(ep);
		if (ep->base.state == RKV_EP_CONNECTED &&
		    (gated || ep->sq_head != ep->sq_tail ||
		     ep->rq_head != ep->rq_tail ||
		     ep->cur.kind != SW_RX_NONE || (npoll & 15) == 0))
			sw_ep_rx_locked(ep);
		if (ep->sq_head != ep->sq_tail || ep->draining)
			tick_locked(ep, rkv_now_ns());
	}
	sw_ep_settle_locked(ep);
	pthread_mutex_unlock(&ep->lock);
}

void sw_ep_rcvlowat(struct sw_ep *ep, int want)
{
	if (want == ep->rcvlowat || ep->fd < 0)
		return;
	if (setsockopt(ep->fd, SOL_SOCKET, SO_RCVLOWAT,
		       &(int){ want ? want : 1 }, sizeof(int)) == 0)
		ep->rcvlowat = want;
}

bool sw_ep_wait_on(struct sw_ep *ep, int *fd, short *events)
{
	bool wait = true;

	*fd = -1;
	*events = 0;
	pthread_mutex_lock(&ep->lock);
	if (ep->closed || ep->base.state == RKV_EP_ERROR) {
		/* only a failure still to report or a drain to finish */
		wait = !ep->draining && ep->sq_head == ep->sq_tail;
	} else if (ep->err_pending || ep->draining || ep->io_err ||
		   (ep->rx_len && ep->tx_len < SW_TX_HIGH)) {
		wait = false;
	} else {
		*fd = ep->fd;
		*events = POLLIN | (ep->tx_len ? POLLOUT : 0);
	}
	pthread_mutex_unlock(&ep->lock);
	return wait;
}

void sw_ep_event(struct sw_ep *ep, unsigned events)
{
	pthread_mutex_lock(&ep->lock);
	if (!ep->closed) {
		if (events & EPOLLOUT)
			sw_ep_tx_flush(ep);
		if (ep->rx_len && ep->tx_len < SW_TX_HIGH &&
		    ep->base.state == RKV_EP_CONNECTED)
			events |= EPOLLIN; /* parse what was held back */
		if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
			if (ep->base.state == RKV_EP_CONNECTED)
				sw_ep_rx_locked(ep);
			else if (events & (EPOLLHUP | EPOLLERR))
				do_close(ep);
		}
	}
	sw_ep_settle_locked(ep);
	pthread_mutex_unlock(&ep->lock);
}

/* ------------------------------------------------------------- lifetime */
/* A random salt for windowed rkeys: index bits 0, the rest never 0. */
static uint32_t new_wsalt(const void *ep)
{
	uint32_t r = 0;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint32_t)rkv_now_ns() * 2654435761u ^
		    (uint32_t)(uintptr_t)ep;
	r &= ~(uint32_t)SW_MR_IDX_MASK;
	return r ? r : 1u << SW_MR_IDX_BITS;
}

int sw_ep_rkey(struct rkv_ep *base, struct rkv_mr *mr, uint32_t *rkey)
{
	struct sw_ep *ep = container_of(base, struct sw_ep, base);

	*rkey = mr->rkey ^ ep->wsalt;
	return 0;
}

int sw_ep_alloc(struct sw_tp *tp, struct sw_cq *cq, int fd, bool passive,
		const char *peer, struct sw_ep **out)
{
	struct sw_ep *ep = rkv_calloc(1, sizeof(*ep));
	pthread_condattr_t ca;

	if (!ep)
		return -ENOMEM;
	ep->fd = -1;
	ep->sq_cap = tp->base.opts.max_send_wr;
	ep->rq_cap = tp->base.opts.max_recv_wr;
	ep->sq = rkv_calloc(ep->sq_cap, sizeof(*ep->sq));
	ep->rq = rkv_calloc(ep->rq_cap, sizeof(*ep->rq));
	ep->rxbuf = rkv_malloc(SW_RXBUF);
	if (!ep->sq || !ep->rq || !ep->rxbuf)
		goto free_bufs;
	if (pthread_mutex_init(&ep->lock, NULL))
		goto free_bufs;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&ep->cond, &ca)) {
		pthread_condattr_destroy(&ca);
		goto destroy_lock;
	}
	pthread_condattr_destroy(&ca);
	ep->tp = tp;
	ep->cq = cq;
	ep->fd = fd;
	ep->wsalt = new_wsalt(ep);
	ep->passive = passive;
	ep->timeout_ns = (uint64_t)tp->base.opts.timeout_ms * 1000000ull;
	ep->last_rx = rkv_now_ns();
	ep->base.tp = &tp->base;
	ep->base.cq = &cq->base;
	ep->base.state = RKV_EP_CONNECTED;
	snprintf(ep->base.peer, sizeof(ep->base.peer), "%s", peer);
	*out = ep;
	return 0;

destroy_lock:
	pthread_mutex_destroy(&ep->lock);
free_bufs:
	rkv_free(ep->sq);
	rkv_free(ep->rq);
	rkv_free(ep->rxbuf);
	rkv_free(ep);
	return -ENOMEM;
}

void sw_ep_free(struct sw_ep *ep)
{
	if (!ep)
		return;
	if (ep->fd >= 0)
		close(ep->fd);
	for (unsigned i = 0; i < ep->nfdq; i++)
		close(ep->fdq[i]);
	for (unsigned i = 0; i < ep->ntx_fds; i++)
		if (ep->tx_fds_close[i])
			close(ep->tx_fds[i]);
	free_unexp(ep);
	pthread_cond_destroy(&ep->cond);
	pthread_mutex_destroy(&ep->lock);
	sw_txbuf_free(ep->txbuf, ep->tx_cap);
	rkv_free(ep->rxbuf);
	rkv_free(ep->sq);
	rkv_free(ep->rq);
	rkv_free(ep);
}
