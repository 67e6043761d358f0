/* SPDX-License-Identifier: MIT */
/*
 * sw_conn.c - listeners and connection set-up of the software providers.
 *
 * Handshake: the connector sends HELLO (shm: with its fds), the listener's
 * thread reads and validates it (garbage: warning, connection dropped;
 * sw_hs.c) and queues the connection; rkv_accept makes the endpoint and
 * answers HELLO_ACK; rkv_connect returns once the ACK arrived.
 */
#include "sw.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "../alloc.h"
#include "../log.h"
#include "../rtime.h"

/* --------------------------------------------------------------- listener */
int sw_listener_create(struct sw_tp *tp, int fd, const char *addr,
		       struct rkv_listener **out)
{
	struct sw_listener *l = rkv_calloc(1, sizeof(*l));
	pthread_condattr_t ca;
	int rc = -ENOMEM;

	if (!l)
		goto close_fd;
	if (pthread_mutex_init(&l->lock, NULL))
		goto free_l;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rc = -pthread_cond_init(&l->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (rc)
		goto destroy_lock;
	l->tp = tp;
	l->fd = fd;
	l->ready_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->ready_fd < 0) {
		rc = -errno;
		goto destroy_cond;
	}
	snprintf(l->base.addr, sizeof(l->base.addr), "%s", addr);
	pthread_mutex_lock(&tp->thr_lock);
	rc = sw_thr_start_locked(tp);
	if (!rc)
		rc = sw_h_alloc(tp, SW_H_LISTENER, l, &l->handle);
	if (!rc) {
		rc = sw_epoll_add(tp, fd, EPOLLIN, l->handle);
		if (rc)
			sw_h_free(tp, l->handle);
	}
	pthread_mutex_unlock(&tp->thr_lock);
	if (rc)
		goto destroy_cond;
	*out = &l->base;
	return 0;

destroy_cond:
	if (l->ready_fd >= 0)
		close(l->ready_fd);
	pthread_cond_destroy(&l->cond);
destroy_lock:
	pthread_mutex_destroy(&l->lock);
free_l:
	rkv_free(l);
close_fd:
	close(fd);
	return rc;
}

void sw_listener_destroy(struct rkv_listener *bl)
{
	struct sw_listener *l = container_of(bl, struct sw_listener, base);
	struct sw_tp *tp = l->tp;
	struct sw_pend *p;

	pthread_mutex_lock(&tp->thr_lock);
	epoll_ctl(tp->epfd, EPOLL_CTL_DEL, l->fd, NULL);
	sw_h_free(tp, l->handle);
	for (uint32_t i = 0; i < tp->hcap; i++)
		if (tp->h[i].type == SW_H_PEND &&
		    ((struct sw_pend *)tp->h[i].ptr)->l == l)
			sw_pend_drop(tp, tp->h[i].ptr);
	pthread_mutex_unlock(&tp->thr_lock);
	while ((p = l->ready_head)) {
		l->ready_head = p->next;
		sw_pend_free(p);
	}
	close(l->fd);
	close(l->ready_fd);
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
	rkv_free(l);
}

int sw_listener_fd(const struct rkv_listener *bl)
{
	return container_of(bl, struct sw_listener, base)->ready_fd;
}

/* The ready queue got its first connection (or lost its last): l->lock
 * held. */
void sw_listener_ready(struct sw_listener *l, bool ready)
{
	uint64_t v = 1;

	if (ready) {
		if (write(l->ready_fd, &v, sizeof(v)) < 0) {
			/* EAGAIN: it is readable already */
		}
	} else if (read(l->ready_fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: it was not readable */
	}
}

/* ------------------------------------------------------ accept and connect */
static int send_hello(struct sw_tp *tp, struct sw_ep *ep, bool connector)
{
	struct sw_hdr h = { .type = connector ? SW_F_HELLO : SW_F_HELLO_ACK };
	int fds[SW_MAX_FDQ];
	bool cl[SW_MAX_FDQ];
	unsigned nfds = 0;
	int rc;

	if (tp->prov->hello_fds) {
		rc = tp->prov->hello_fds(tp, ep, connector, fds, cl, &nfds);
		if (rc)
			return rc;
		for (unsigned i = 0; i < nfds; i++)
			sw_ep_tx_fd(ep, fds[i], cl[i]);
	}
	if (connector)
		sw_ep_tx_payload(ep, SW_PREAMBLE, SW_PREAMBLE_LEN);
	sw_ep_tx_frame(ep, &h, NULL, 0);
	sw_ep_tx_commit(ep);
	if (ep->io_err || ep->tx_len)
		return -ECONNRESET;
	return 0;
}

/* Wait up to timeout_ms (-1 forever) for a connection whose HELLO came and
 * take it off l's ready queue.  Returns 0, -ETIMEDOUT or -errno. */
static int ready_pop(struct sw_listener *l, int timeout_ms,
		     struct sw_pend **out)
{
	struct sw_pend *p = NULL;
	struct timespec ts;
	int rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (timeout_ms > 0) {
		ts.tv_sec += timeout_ms / 1000;
		ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&l->lock);
	while (!l->ready_head) {
		if (timeout_ms == 0) {
			rc = ETIMEDOUT;
			break;
		}
		if (timeout_ms < 0)
			rc = pthread_cond_wait(&l->cond, &l->lock);
		else
			rc = pthread_cond_timedwait(&l->cond, &l->lock, &ts);
		if (rc == ETIMEDOUT)
			break;
		rc = 0;
	}
	if (!rc && l->ready_head) {
		p = l->ready_head;
		l->ready_head = p->next;
		if (!l->ready_head) {
			l->ready_tail = NULL;
			sw_listener_ready(l, false);
		}
		l->nready--;
	}
	pthread_mutex_unlock(&l->lock);
	*out = p;
	if (!p)
		return rc == ETIMEDOUT ? -ETIMEDOUT : -rc;
	return 0;
}

int sw_accept(struct rkv_listener *bl, struct rkv_cq *bcq, int timeout_ms,
	      struct rkv_ep **out)
{
	struct sw_listener *l = container_of(bl, struct sw_listener, base);
	struct sw_cq *cq = container_of(bcq, struct sw_cq, base);
	struct sw_tp *tp = l->tp;
	struct sw_pend *p;
	struct sw_ep *ep;
	int rc;

	rc = ready_pop(l, timeout_ms, &p);
	if (rc)
		return rc;
	rc = sw_ep_alloc(tp, cq, p->fd, true, p->peer, &ep);
	if (rc)
		goto free_p;
	p->fd = -1; /* the endpoint owns it now */
	if (tp->prov->ep_setup) {
		rc = tp->prov->ep_setup(ep, p->fds, p->nfds);
		if (rc)
			goto fini_ep;
	}
	rc = send_hello(tp, ep, false);
	if (rc)
		goto fini_ep;
	pthread_mutex_lock(&tp->thr_lock);
	rc = sw_h_alloc(tp, SW_H_EP, ep, &ep->handle);
	if (!rc) {
		rc = sw_epoll_add(tp, ep->fd, EPOLLIN, ep->handle);
		if (rc)
			sw_h_free(tp, ep->handle);
	}
	if (!rc) {
		pthread_mutex_lock(&ep->lock);
		ep->ev = EPOLLIN;
		ep->in_epoll = true;
		sw_ep_settle_locked(ep);
		pthread_mutex_unlock(&ep->lock);
	}
	pthread_mutex_unlock(&tp->thr_lock);
	if (rc)
		goto fini_ep;
	sw_pend_free(p);
	*out = &ep->base;
	return 0;

fini_ep:
	if (tp->prov->ep_fini)
		tp->prov->ep_fini(ep);
	sw_ep_free(ep);
free_p:
	sw_pend_free(p);
	return rc;
}

static uint32_t get_le32(const uint8_t *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[3] << 24;
}

static int wait_fd(int fd, short events, uint64_t deadline, bool forever)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = events };
		uint64_t now = rkv_now_ns();
		int ms, n;

		if (!forever && now >= deadline)
			return -ETIMEDOUT;
		ms = forever ? -1 : (int)((deadline - now + 999999) / 1000000);
		n = poll(&pfd, 1, ms);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

int sw_connect_finish(struct sw_tp *tp, struct sw_cq *cq, int fd,
		      const char *peer, int timeout_ms, struct rkv_ep **out)
{
	bool forever = timeout_ms < 0;
	uint64_t deadline = rkv_now_ns() + (uint64_t)(forever ? 0 : timeout_ms) *
						   1000000ull;
	uint8_t buf[SW_HDR_LEN];
	int fds[SW_MAX_FDQ];
	unsigned nfds = 0, got = 0;
	struct sw_hdr h;
	struct sw_ep *ep;
	int rc;

	rc = sw_ep_alloc(tp, cq, fd, false, peer, &ep);
	if (rc) {
		close(fd);
		return rc;
	}
	rc = send_hello(tp, ep, true);
	if (rc)
		goto fini_ep;
	while (got < SW_HDR_LEN) {
		ssize_t n;

		rc = wait_fd(fd, POLLIN, deadline, forever);
		if (rc)
			goto close_fds;
		n = sw_sock_recv(fd, buf + got, SW_HDR_LEN - got,
				 tp->prov->unix_fds ? fds : NULL, &nfds,
				 SW_MAX_FDQ);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0) {
			rc = n == 0 ? -ECONNRESET : -errno;
			goto close_fds;
		}
		got += (unsigned)n;
		if (got >= 4 && get_le32(buf) != SW_MAGIC) {
			/* another protocol answered (HTTP, Redis, ...): say
			 * so now rather than wait for 48 bytes that may
			 * never come */
			sw_log(tp, RKV_LOG_WARN, "%s: not an rkv server (its "
			       "first bytes are not an rkv handshake)", peer);
			rc = -EPROTO;
			goto close_fds;
		}
	}
	if (sw_frame_check(buf, got, &h) || h.type != SW_F_HELLO_ACK) {
		sw_log(tp, RKV_LOG_WARN, "%s: bad handshake answer", peer);
		rc = -EPROTO;
		goto close_fds;
	}
	if (tp->prov->ep_setup) {
		rc = tp->prov->ep_setup(ep, fds, nfds);
		if (rc)
			goto close_fds;
	}
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
	nfds = 0;
	rc = sw_cq_add_ep(cq, ep);
	if (rc)
		goto fini_ep;
	*out = &ep->base;
	return 0;

close_fds:
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
fini_ep:
	if (tp->prov->ep_fini)
		tp->prov->ep_fini(ep);
	sw_ep_free(ep);
	return rc;
}

void sw_ep_destroy(struct rkv_ep *bep)
{
	struct sw_ep *ep = container_of(bep, struct sw_ep, base);
	struct sw_tp *tp = ep->tp;

	if (ep->passive) {
		pthread_mutex_lock(&tp->thr_lock);
		pthread_mutex_lock(&ep->lock);
		if (ep->in_epoll)
			epoll_ctl(tp->epfd, EPOLL_CTL_DEL, ep->fd, NULL);
		ep->in_epoll = false;
		pthread_mutex_unlock(&ep->lock);
		sw_h_free(tp, ep->handle);
		pthread_mutex_unlock(&tp->thr_lock);
	} else {
		sw_cq_del_ep(ep->cq, ep);
	}
	if (tp->prov->ep_fini)
		tp->prov->ep_fini(ep);
	sw_ep_free(ep);
}
