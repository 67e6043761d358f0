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
 *
 * Half-open floods: a connection that completed the kernel handshake but
 * sends no HELLO (or part of one) costs an fd until its deadline.  Such
 * connections are bounded, in all (hs_max) and per peer address
 * (hs_peer_max), by closing (with a reset) the oldest one past a cap: a
 * newcomer is never refused for the flooder's sake, so a client that
 * shares the flooder's address still gets in.  Before a connection is
 * closed it gets one read, and one whose HELLO is already buffered is
 * taken instead; a new connection is read at once after accept, so real
 * clients rarely stay in the set at all.  When accept fails with EMFILE or
 * ENFILE the listener stays readable, and retrying would spin: the thread
 * closes the oldest quarter of the set and caps it there (never under
 * SW_ROOM_MIN) for SW_ROOM_MS, which leaves fds to endpoints and the rest
 * of the process; with nothing to close it frees its reserve fd to accept
 * and close one connection (the caller is refused at once instead of
 * waiting in the kernel's queue), and if even that fails it stops polling
 * the listener for SW_PAUSE_MS.  Events of established endpoints are
 * handled before listeners and handshakes in each batch.  Flood messages
 * are rate-limited (SW_FLOG_PER_S).
 */
#include "sw.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../alloc.h"
#include "../log.h"
#include "../rtime.h"

#define SW_SPIN_NS (150u * 1000)
#define SW_TICK_MS 10
#define SW_HELLO_MS 5000
#define SW_MAX_READY 128
#define SW_ACCEPTS 64          /* accepts per listener event */
#define SW_HS_MAX 1024         /* default total cap (and fd limit / 2) */
#define SW_HS_PEER_MAX 64      /* default cap per peer address */
#define SW_ROOM_MS 10000       /* a cap learned from EMFILE lasts this */
#define SW_ROOM_MIN 8          /* and is at least this */
#define SW_PAUSE_MS 100        /* listener off after a hopeless accept */
#define SW_FLOG_PER_S 5        /* flood log lines per second */

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
/* Whether a flood message may be logged now (SW_FLOG_PER_S a second; the
 * first line of the next window says how many were suppressed). */
static bool flog_ok(struct sw_tp *tp, uint64_t now)
{
	if (now - tp->flog_ns >= 1000000000ull) {
		if (tp->flog_dropped)
			rkv_log(RKV_LOG_WARN, tp->prov->comp,
				"%" PRIu64 " similar messages suppressed "
				"(%" PRIu64 " handshakes closed by a cap, %" PRIu64
				" connections closed at accept so far)",
				tp->flog_dropped, tp->hs_evicted,
				tp->accept_shed);
		tp->flog_ns = now;
		tp->flog_n = 0;
		tp->flog_dropped = 0;
	}
	if (tp->flog_n < SW_FLOG_PER_S) {
		tp->flog_n++;
		return true;
	}
	tp->flog_dropped++;
	return false;
}

/* The peer entry of an address (made on first use), or NULL: no address
 * (unix sockets) or no memory, and then only the total cap applies. */
static struct sw_peer *peer_get(struct sw_tp *tp,
				const struct sockaddr_storage *ss)
{
	uint8_t a[16] = { 0 };
	uint32_t hash = 2166136261u;
	struct sw_peer *pe;
	uint8_t v6 = 0;

	if (ss->ss_family == AF_INET) {
		memcpy(a, &((const struct sockaddr_in *)(const void *)ss)->sin_addr,
		       4);
	} else if (ss->ss_family == AF_INET6) {
		const struct in6_addr *s6 =
			&((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr;

		/* a v4 client of a dual-stack listener is that v4 address */
		if (IN6_IS_ADDR_V4MAPPED(s6)) {
			memcpy(a, s6->s6_addr + 12, 4);
		} else {
			memcpy(a, s6->s6_addr, 16);
			v6 = 1;
		}
	} else {
		return NULL;
	}
	for (unsigned i = 0; i < 16; i++)
		hash = (hash ^ a[i]) * 16777619u;
	hash = (hash ^ v6) % SW_PEER_BUCKETS;
	for (pe = tp->peers[hash]; pe; pe = pe->next)
		if (pe->v6 == v6 && !memcmp(pe->addr, a, 16))
			return pe;
	pe = rkv_calloc(1, sizeof(*pe));
	if (!pe)
		return NULL;
	memcpy(pe->addr, a, 16);
	pe->v6 = v6;
	pe->bucket = (uint16_t)hash;
	pe->next = tp->peers[hash];
	tp->peers[hash] = pe;
	return pe;
}

static void peer_put(struct sw_tp *tp, struct sw_peer *pe)
{
	struct sw_peer **pp;

	if (pe->pends.n)
		return;
	for (pp = &tp->peers[pe->bucket]; *pp; pp = &(*pp)->next)
		if (*pp == pe) {
			*pp = pe->next;
			rkv_free(pe);
			return;
		}
}

/* The link of p that lst threads through (p->hs or p->pr). */
static struct sw_plink *plink(struct sw_pend *p, size_t off)
{
	return (struct sw_plink *)(void *)((char *)p + off);
}

static void plist_append(struct sw_plist *lst, struct sw_pend *p, size_t off)
{
	plink(p, off)->prev = lst->tail;
	plink(p, off)->next = NULL;
	if (lst->tail)
		plink(lst->tail, off)->next = p;
	else
		lst->head = p;
	lst->tail = p;
	lst->n++;
}

static void plist_remove(struct sw_plist *lst, struct sw_pend *p, size_t off)
{
	struct sw_plink *k = plink(p, off);

	if (k->prev)
		plink(k->prev, off)->next = k->next;
	else
		lst->head = k->next;
	if (k->next)
		plink(k->next, off)->prev = k->prev;
	else
		lst->tail = k->prev;
	lst->n--;
}

#define HS_OFF offsetof(struct sw_pend, hs)
#define PR_OFF offsetof(struct sw_pend, pr)

/* Out of the set and the epoll set: the handshake is over. */
static void pend_unlink(struct sw_tp *tp, struct sw_pend *p)
{
	epoll_ctl(tp->epfd, EPOLL_CTL_DEL, p->fd, NULL);
	h_free(tp, p->handle);
	plist_remove(&tp->hs, p, HS_OFF);
	if (p->pe) {
		plist_remove(&p->pe->pends, p, PR_OFF);
		peer_put(tp, p->pe);
		p->pe = NULL;
	}
}

/* Closed by a cap: reset, so that neither end keeps FIN_WAIT or
 * TIME_WAIT state for a connection that never carried anything. */
static void close_reset(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

static void pend_free_unlinked(struct sw_pend *p)
{
	if (p->fd >= 0)
		close(p->fd);
	for (unsigned i = 0; i < p->nfds; i++)
		close(p->fds[i]);
	rkv_free(p);
}

static void pend_drop(struct sw_tp *tp, struct sw_pend *p)
{
	pend_unlink(tp, p);
	pend_free_unlinked(p);
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

/*
 * Read what p's peer sent.  Returns true while the handshake goes on;
 * false when p is gone: queued for rkv_accept, or dropped (garbage, a
 * closed or truncated handshake, a full ready queue).
 */
static bool on_pend(struct sw_tp *tp, struct sw_pend *p)
{
	struct sw_listener *l = p->l;
	struct sw_hdr h;
	ssize_t n;

	n = sw_sock_recv(p->fd, p->buf + p->got, SW_HDR_LEN - p->got,
			 tp->prov->unix_fds ? p->fds : NULL, &p->nfds,
			 SW_MAX_FDQ);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
		      errno == EINTR))
		return true;
	if (n <= 0) {
		if (p->got && flog_ok(tp, rkv_now_ns()))
			rkv_log(RKV_LOG_WARN, tp->prov->comp,
				"%s: truncated handshake from %s, dropping the connection",
				l->base.addr, p->peer);
		pend_drop(tp, p);
		return false;
	}
	p->got += (unsigned)n;
	if (p->got < SW_HDR_LEN)
		return true;
	if (sw_frame_check(p->buf, p->got, &h) || h.type != SW_F_HELLO) {
		if (flog_ok(tp, rkv_now_ns()))
			rkv_log(RKV_LOG_WARN, tp->prov->comp,
				"%s: garbage from %s during the handshake, dropping the connection",
				l->base.addr, p->peer);
		pend_drop(tp, p);
		return false;
	}
	pend_unlink(tp, p);
	pthread_mutex_lock(&l->lock);
	if (l->nready >= SW_MAX_READY) {
		pthread_mutex_unlock(&l->lock);
		if (flog_ok(tp, rkv_now_ns()))
			rkv_log(RKV_LOG_WARN, tp->prov->comp,
				"%s: %u connections wait for rkv_accept, dropping %s",
				l->base.addr, SW_MAX_READY, p->peer);
		pend_free_unlinked(p);
		return false;
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
	return false;
}

/*
 * Close the oldest handshakes of pe (NULL: of the whole set) until at most
 * keep are left.  Each gets one read first: one whose HELLO is buffered
 * leaves the set through rkv_accept's queue instead.
 */
static void hs_trim(struct sw_tp *tp, struct sw_peer *pe, unsigned keep,
		    const char *why, uint64_t now)
{
	struct sw_plist *lst = pe ? &pe->pends : &tp->hs;

	while (lst->n > keep) {
		struct sw_pend *p = lst->head;
		bool last = pe && lst->n == 1; /* pe is freed with it */

		if (!on_pend(tp, p)) {
			if (last)
				return;
			continue;
		}
		if (flog_ok(tp, now))
			rkv_log(RKV_LOG_WARN, tp->prov->comp,
				"%s: closing the handshake of %s (%s)",
				p->l->base.addr, p->peer, why);
		tp->hs_evicted++;
		pend_unlink(tp, p);
		close_reset(p->fd);
		p->fd = -1;
		pend_free_unlinked(p);
		if (last)
			return;
	}
}

/* The total cap now: the configured one, or less for SW_ROOM_MS after
 * accept met EMFILE. */
static unsigned hs_cap(struct sw_tp *tp, uint64_t now)
{
	if (tp->hs_room_until && now >= tp->hs_room_until)
		tp->hs_room_until = 0;
	if (tp->hs_room_until && tp->hs_room < tp->hs_max)
		return tp->hs_room;
	return tp->hs_max;
}

/* Take an accepted connection into the handshake set. */
static void pend_add(struct sw_tp *tp, struct sw_listener *l, int fd,
		     const struct sockaddr_storage *ss, uint64_t now)
{
	struct sw_pend *p = rkv_calloc(1, sizeof(*p));
	struct sw_peer *pe;
	int one = 1;

	if (!p) {
		close(fd);
		return;
	}
	if (ss->ss_family == AF_INET || ss->ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	p->fd = fd;
	p->l = l;
	p->deadline = now + SW_HELLO_MS * 1000000ull;
	peer_name(tp, ss, l, p->peer, sizeof(p->peer));
	if (h_alloc(tp, SW_H_PEND, p, &p->handle)) {
		pend_free_unlinked(p);
		return;
	}
	if (ep_add(tp, fd, EPOLLIN, p->handle)) {
		h_free(tp, p->handle);
		pend_free_unlinked(p);
		return;
	}
	p->pe = pe = peer_get(tp, ss);
	plist_append(&tp->hs, p, HS_OFF);
	if (pe)
		plist_append(&pe->pends, p, PR_OFF);
	/* A client sends HELLO right after connecting: it is often here
	 * already, and then the connection never counts against a cap. */
	if (!on_pend(tp, p))
		return;
	if (pe && pe->pends.n > tp->hs_peer_max)
		hs_trim(tp, pe, tp->hs_peer_max, "too many from that address",
			now);
	if (tp->hs.n > hs_cap(tp, now))
		hs_trim(tp, NULL, hs_cap(tp, now), "too many handshakes", now);
}

/* Stop polling l for SW_PAUSE_MS (tick_all resumes it). */
static void listener_pause(struct sw_tp *tp, struct sw_listener *l,
			   uint64_t now)
{
	struct epoll_event ev = { .events = 0, .data.u64 = l->handle };

	if (l->paused || epoll_ctl(tp->epfd, EPOLL_CTL_MOD, l->fd, &ev))
		return;
	l->paused = true;
	l->resume_ns = now + SW_PAUSE_MS * 1000000ull;
}

/*
 * accept failed with EMFILE or ENFILE while connections wait in the
 * kernel's queue.  Returns true when accept may be retried at once (an
 * fd was freed), false when l is paused.
 */
static bool out_of_fds(struct sw_tp *tp, struct sw_listener *l, int err,
		       uint64_t now)
{
	int fd;

	if (tp->hs.n) {
		/* close a quarter (at least one: accept must find an fd),
		 * and cap the set there; but never below SW_ROOM_MIN, or a
		 * client whose HELLO lags its connect by a round trip would
		 * be closed as soon as it was accepted */
		unsigned keep = tp->hs.n - (tp->hs.n + 3) / 4;
		unsigned room = keep > SW_ROOM_MIN ? keep : SW_ROOM_MIN;

		if (flog_ok(tp, now))
			rkv_log(RKV_LOG_WARN, tp->prov->comp,
				"accept on %s: %s with %u handshakes pending; "
				"keeping at most %u for %u s",
				l->base.addr, strerror(err), tp->hs.n, room,
				SW_ROOM_MS / 1000);
		tp->hs_room = room;
		tp->hs_room_until = now + SW_ROOM_MS * 1000000ull;
		hs_trim(tp, NULL, keep, "out of file descriptors", now);
		return true;
	}
	/* Nothing of ours to close: refuse the connection now rather than
	 * let it wait in the kernel's queue (the classic reserve fd). */
	if (tp->reserve_fd >= 0) {
		close(tp->reserve_fd);
		fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			close_reset(fd);
		tp->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			tp->accept_shed++;
			if (flog_ok(tp, now))
				rkv_log(RKV_LOG_WARN, tp->prov->comp,
					"accept on %s: %s, closing new connections",
					l->base.addr, strerror(err));
			return true;
		}
	}
	if (flog_ok(tp, now))
		rkv_log(RKV_LOG_WARN, tp->prov->comp,
			"accept on %s: %s, not accepting for %u ms",
			l->base.addr, strerror(err), SW_PAUSE_MS);
	listener_pause(tp, l, now);
	return false;
}

static void on_listener(struct sw_tp *tp, struct sw_listener *l)
{
	uint64_t now = rkv_now_ns();

	for (int i = 0; i < SW_ACCEPTS; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		int err = errno;

		if (fd >= 0) {
			pend_add(tp, l, fd, &ss, now);
			continue;
		}
		if (err == EAGAIN || err == EWOULDBLOCK)
			return;
		if (err == EINTR || err == ECONNABORTED)
			continue;
		if (err == EMFILE || err == ENFILE) {
			if (out_of_fds(tp, l, err, now))
				continue;
			return;
		}
		/* ENOBUFS, ENOMEM, ...: the queue stays readable, so
		 * retrying at once would spin */
		if (flog_ok(tp, now))
			rkv_log(RKV_LOG_WARN, tp->prov->comp,
				"accept on %s: %s, not accepting for %u ms",
				l->base.addr, strerror(err), SW_PAUSE_MS);
		listener_pause(tp, l, now);
		return;
	}
}

/* Hand out the defaults of the caps (the first listen). */
static void hs_init(struct sw_tp *tp)
{
	const struct rkv_tp_opts *o = &tp->base.opts;
	struct rlimit rl;
	unsigned lim = SW_HS_MAX;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur / 2 < lim)
		lim = rl.rlim_cur / 2 > 8 ? (unsigned)(rl.rlim_cur / 2) : 8;
	tp->hs_max = o->max_handshakes ? o->max_handshakes : lim;
	tp->hs_peer_max = o->max_handshakes_per_peer
				  ? o->max_handshakes_per_peer
				  : SW_HS_PEER_MAX;
	tp->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* ------------------------------------------------------ transport thread */
static void tick_all(struct sw_tp *tp, uint64_t now)
{
	/* the set is in accept order, so in deadline order */
	while (tp->hs.head && now > tp->hs.head->deadline) {
		struct sw_pend *p = tp->hs.head;

		if (flog_ok(tp, now))
			rkv_log(RKV_LOG_INFO, tp->prov->comp,
				"%s: no handshake from %s in time, dropping it",
				p->l->base.addr, p->peer);
		pend_drop(tp, p);
	}
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

/* Handle one event; pass 0 takes endpoints (and the wake-up), pass 1
 * listeners and handshakes, so that a burst of connections never delays
 * requests of established clients.  Returns whether it was work. */
static bool on_event(struct sw_tp *tp, const struct epoll_event *ev,
		     int pass)
{
	struct sw_handle *h = h_get(tp, ev->data.u64);
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
			on_listener(tp, h->ptr);
		return pass == 1;
	case SW_H_PEND:
		if (pass == 1)
			on_pend(tp, h->ptr);
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

	for (;;) {
		uint64_t now = rkv_now_ns();
		bool spin = now - last_busy < SW_SPIN_NS;
		int n = epoll_wait(tp->epfd, evs, 64, spin ? 0 : SW_TICK_MS);
		bool busy = false;

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
	hs_init(tp);
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
	tp->reserve_fd = -1;
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
