/* SPDX-License-Identifier: MIT */
/*
 * sw_tp.c - context, transport thread, listeners and connection set-up of
 * the software providers.
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
 * every SW_TICK_MS to time out WRs of passive endpoints and handshakes.
 *
 * Handshake: the connector sends HELLO (shm: with its fds), the listener's
 * thread reads and validates it (garbage: warning, connection dropped) and
 * queues the connection; rkv_accept makes the endpoint and answers
 * HELLO_ACK; rkv_connect returns once the ACK arrived.
 */
#include "sw.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../alloc.h"
#include "../log.h"
#include "../rtime.h"

#define SW_SPIN_NS (150u * 1000)
#define SW_TICK_MS 10
#define SW_HELLO_MS 5000
#define SW_MAX_READY 128

/* ---------------------------------------------------------------- handles */
static int h_alloc(struct sw_tp *tp, enum sw_htype type, void *ptr,
		   uint64_t *tok)
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

static struct sw_handle *h_get(struct sw_tp *tp, uint64_t tok)
{
	uint32_t i = (uint32_t)tok;

	if (i >= tp->hcap || tp->h[i].gen != (uint32_t)(tok >> 32) ||
	    tp->h[i].type == SW_H_FREE)
		return NULL;
	return &tp->h[i];
}

static void h_free(struct sw_tp *tp, uint64_t tok)
{
	struct sw_handle *h = h_get(tp, tok);

	if (h) {
		h->type = SW_H_FREE;
		h->ptr = NULL;
		h->gen++;
	}
}

static int ep_add(struct sw_tp *tp, int fd, unsigned events, uint64_t tok)
{
	struct epoll_event ev = { .events = events, .data.u64 = tok };

	return epoll_ctl(tp->epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/* ------------------------------------------------------------ handshakes */
static void pend_drop(struct sw_tp *tp, struct sw_pend *p)
{
	epoll_ctl(tp->epfd, EPOLL_CTL_DEL, p->fd, NULL);
	h_free(tp, p->handle);
	close(p->fd);
	for (unsigned i = 0; i < p->nfds; i++)
		close(p->fds[i]);
	rkv_free(p);
}

static void pend_free_unlinked(struct sw_pend *p)
{
	if (p->fd >= 0)
		close(p->fd);
	for (unsigned i = 0; i < p->nfds; i++)
		close(p->fds[i]);
	rkv_free(p);
}

static void peer_name(struct sw_tp *tp, const struct sockaddr_storage *ss,
		      struct sw_listener *l, char *out, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)ss;

		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof(ip));
		snprintf(out, len, "%s://%s:%u", tp->prov->comp, ip,
			 ntohs(s->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)ss;

		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof(ip));
		snprintf(out, len, "%s://[%s]:%u", tp->prov->comp, ip,
			 ntohs(s->sin6_port));
	} else {
		snprintf(out, len, "%.100s (accepted)", l->base.addr);
	}
}

static void on_listener(struct sw_tp *tp, struct sw_listener *l)
{
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct sw_pend *p;
		int one = 1;
		int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != EINTR && errno != ECONNABORTED)
				rkv_log(RKV_LOG_WARN, tp->prov->comp,
					"accept on %s: %s", l->base.addr,
					strerror(errno));
			return;
		}
		if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				   sizeof(one));
		p = rkv_calloc(1, sizeof(*p));
		if (!p) {
			close(fd);
			continue;
		}
		p->fd = fd;
		p->l = l;
		p->deadline = rkv_now_ns() + SW_HELLO_MS * 1000000ull;
		peer_name(tp, &ss, l, p->peer, sizeof(p->peer));
		if (h_alloc(tp, SW_H_PEND, p, &p->handle)) {
			close(fd);
			rkv_free(p);
			continue;
		}
		if (ep_add(tp, fd, EPOLLIN, p->handle)) {
			h_free(tp, p->handle);
			close(fd);
			rkv_free(p);
		}
	}
}

static void on_pend(struct sw_tp *tp, struct sw_pend *p)
{
	struct sw_listener *l = p->l;
	struct sw_hdr h;
	ssize_t n;

	n = sw_sock_recv(p->fd, p->buf + p->got, SW_HDR_LEN - p->got,
			 tp->prov->unix_fds ? p->fds : NULL, &p->nfds,
			 SW_MAX_FDQ);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
		      errno == EINTR))
		return;
	if (n <= 0) {
		if (p->got)
			rkv_log(RKV_LOG_WARN, tp->prov->comp,
				"%s: truncated handshake from %s, dropping the connection",
				l->base.addr, p->peer);
		pend_drop(tp, p);
		return;
	}
	p->got += (unsigned)n;
	if (p->got < SW_HDR_LEN)
		return;
	if (sw_frame_check(p->buf, p->got, &h) || h.type != SW_F_HELLO) {
		rkv_log(RKV_LOG_WARN, tp->prov->comp,
			"%s: garbage from %s during the handshake, dropping the connection",
			l->base.addr, p->peer);
		pend_drop(tp, p);
		return;
	}
	epoll_ctl(tp->epfd, EPOLL_CTL_DEL, p->fd, NULL);
	h_free(tp, p->handle);
	pthread_mutex_lock(&l->lock);
	if (l->nready >= SW_MAX_READY) {
		pthread_mutex_unlock(&l->lock);
		rkv_log(RKV_LOG_WARN, tp->prov->comp,
			"%s: %u connections wait for rkv_accept, dropping %s",
			l->base.addr, l->nready, p->peer);
		pend_free_unlinked(p);
		return;
	}
	p->next = NULL;
	if (l->ready_tail)
		l->ready_tail->next = p;
	else
		l->ready_head = p;
	l->ready_tail = p;
	l->nready++;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

/* ------------------------------------------------------ transport thread */
static void tick_all(struct sw_tp *tp, uint64_t now)
{
	for (uint32_t i = 0; i < tp->hcap; i++) {
		struct sw_handle *h = &tp->h[i];

		if (h->type == SW_H_EP) {
			sw_ep_tick(h->ptr, now);
		} else if (h->type == SW_H_PEND) {
			struct sw_pend *p = h->ptr;

			if (now > p->deadline) {
				rkv_log(RKV_LOG_INFO, tp->prov->comp,
					"%s: no handshake from %s in time, dropping it",
					p->l->base.addr, p->peer);
				pend_drop(tp, p);
			}
		}
	}
}

static void *thr_main(void *arg)
{
	struct sw_tp *tp = arg;
	struct epoll_event evs[64];
	uint64_t last_busy = rkv_now_ns();

	for (;;) {
		uint64_t now = rkv_now_ns();
		bool spin = now - last_busy < SW_SPIN_NS;
		int n = epoll_wait(tp->epfd, evs, 64, spin ? 0 : SW_TICK_MS);
		bool busy = false;

		if (__atomic_load_n(&tp->stop, __ATOMIC_ACQUIRE))
			break;
		pthread_mutex_lock(&tp->thr_lock);
		for (int i = 0; i < n; i++) {
			struct sw_handle *h = h_get(tp, evs[i].data.u64);
			uint64_t v;

			if (!h)
				continue;
			switch (h->type) {
			case SW_H_WAKE:
				if (read(tp->wakefd, &v, sizeof(v)) < 0)
					break;
				break;
			case SW_H_LISTENER:
				busy = true;
				on_listener(tp, h->ptr);
				break;
			case SW_H_PEND:
				busy = true;
				on_pend(tp, h->ptr);
				break;
			case SW_H_EP:
				busy = true;
				sw_ep_event(h->ptr, evs[i].events);
				break;
			default:
				break;
			}
		}
		now = rkv_now_ns();
		if (now >= tp->next_tick) {
			tp->next_tick = now + SW_TICK_MS * 1000000ull;
			tick_all(tp, now);
		}
		pthread_mutex_unlock(&tp->thr_lock);
		/* Spinning idle: let a thread that shares our core (often
		 * the initiator that polls for our answer) run. */
		if (spin && n == 0)
			sched_yield();
		if (busy) {
			last_busy = now;
			/* Under TSan: what this thread did to regions happens
			 * before what a later rkv_cq_poll caller reads. */
			sw_hb_release();
		}
	}
	return NULL;
}

/* Start the transport thread; tp->thr_lock held. */
static int thr_start_locked(struct sw_tp *tp)
{
	uint64_t tok;
	int rc;

	if (tp->thr_started)
		return 0;
	tp->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (tp->epfd < 0)
		return -errno;
	tp->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (tp->wakefd < 0) {
		rc = -errno;
		goto close_ep;
	}
	rc = h_alloc(tp, SW_H_WAKE, NULL, &tok);
	if (rc)
		goto close_wake;
	rc = ep_add(tp, tp->wakefd, EPOLLIN, tok);
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
	/* both software providers execute 8-byte atomics; tp->base.opts is
	 * filled in by rkv_tp_create once the provider returns */
	tp->base.has_atomics = 1;
	rc = sw_mrtab_init(&tp->mrt, mrtab);
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
			rkv_log(RKV_LOG_WARN, tp->prov->comp,
				"waking the transport thread: %s",
				strerror(errno));
		pthread_join(tp->thr, NULL);
		tp->thr_started = false;
	}
	for (uint32_t i = 0; i < tp->hcap; i++) {
		if (tp->h[i].type == SW_H_PEND)
			pend_drop(tp, tp->h[i].ptr);
		else if (tp->h[i].type == SW_H_EP ||
			 tp->h[i].type == SW_H_LISTENER)
			rkv_log(RKV_LOG_WARN, tp->prov->comp,
				"context destroyed before its %s",
				tp->h[i].type == SW_H_EP ? "endpoint"
							  : "listener");
	}
	if (tp->wakefd >= 0)
		close(tp->wakefd);
	if (tp->epfd >= 0)
		close(tp->epfd);
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
	snprintf(l->base.addr, sizeof(l->base.addr), "%s", addr);
	pthread_mutex_lock(&tp->thr_lock);
	rc = thr_start_locked(tp);
	if (!rc)
		rc = h_alloc(tp, SW_H_LISTENER, l, &l->handle);
	if (!rc) {
		rc = ep_add(tp, fd, EPOLLIN, l->handle);
		if (rc)
			h_free(tp, l->handle);
	}
	pthread_mutex_unlock(&tp->thr_lock);
	if (rc)
		goto destroy_cond;
	*out = &l->base;
	return 0;

destroy_cond:
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
	h_free(tp, l->handle);
	for (uint32_t i = 0; i < tp->hcap; i++)
		if (tp->h[i].type == SW_H_PEND &&
		    ((struct sw_pend *)tp->h[i].ptr)->l == l)
			pend_drop(tp, tp->h[i].ptr);
	pthread_mutex_unlock(&tp->thr_lock);
	while ((p = l->ready_head)) {
		l->ready_head = p->next;
		pend_free_unlinked(p);
	}
	close(l->fd);
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
	rkv_free(l);
}

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
	sw_ep_tx_frame(ep, &h, NULL, 0);
	sw_ep_tx_commit(ep);
	if (ep->io_err || ep->tx_len)
		return -ECONNRESET;
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
	p = NULL;
	if (!rc && l->ready_head) {
		p = l->ready_head;
		l->ready_head = p->next;
		if (!l->ready_head)
			l->ready_tail = NULL;
		l->nready--;
	}
	pthread_mutex_unlock(&l->lock);
	if (!p)
		return rc == ETIMEDOUT ? -ETIMEDOUT : -rc;

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
	rc = h_alloc(tp, SW_H_EP, ep, &ep->handle);
	if (!rc) {
		rc = ep_add(tp, ep->fd, EPOLLIN, ep->handle);
		if (rc)
			h_free(tp, ep->handle);
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
	pend_free_unlinked(p);
	*out = &ep->base;
	return 0;

fini_ep:
	if (tp->prov->ep_fini)
		tp->prov->ep_fini(ep);
	sw_ep_free(ep);
free_p:
	pend_free_unlinked(p);
	return rc;
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
	}
	if (sw_frame_check(buf, got, &h) || h.type != SW_F_HELLO_ACK) {
		rkv_log(RKV_LOG_WARN, tp->prov->comp,
			"%s: bad handshake answer", peer);
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
		h_free(tp, ep->handle);
		pthread_mutex_unlock(&tp->thr_lock);
	} else {
		sw_cq_del_ep(ep->cq, ep);
	}
	if (tp->prov->ep_fini)
		tp->prov->ep_fini(ep);
	sw_ep_free(ep);
}
