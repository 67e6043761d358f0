/* SPDX-License-Identifier: MIT */
/*
 * sw_hs.c - connections in the handshake: accepting them, reading their
 * HELLO, and bounding half-open floods.  Run by the transport thread under
 * thr_lock.
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
 * the listener for SW_PAUSE_MS.  Flood messages are rate-limited
 * (SW_FLOG_PER_S).
 */
#include "sw.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../alloc.h"
#include "../log.h"
#include "../rtime.h"

#define SW_HELLO_MS 5000
#define SW_MAX_READY 128
#define SW_ACCEPTS 64          /* accepts per listener event */
#define SW_HS_MAX 1024         /* default total cap (and fd limit / 2) */
#define SW_HS_PEER_MAX 64      /* default cap per peer address */
#define SW_ROOM_MS 10000       /* a cap learned from EMFILE lasts this */
#define SW_ROOM_MIN 8          /* and is at least this */
#define SW_PAUSE_MS 100        /* listener off after a hopeless accept */
#define SW_FLOG_PER_S 5        /* flood log lines per second */

/* ------------------------------------------------------------ handshakes */
/* Whether a flood message may be logged now (SW_FLOG_PER_S a second; the
 * first line of the next window says how many were suppressed). */
static bool flog_ok(struct sw_tp *tp, uint64_t now)
{
	if (now - tp->flog_ns >= 1000000000ull) {
		if (tp->flog_dropped)
			sw_log(tp, RKV_LOG_WARN,
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
	sw_h_free(tp, p->handle);
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

void sw_pend_free(struct sw_pend *p)
{
	if (p->fd >= 0)
		close(p->fd);
	for (unsigned i = 0; i < p->nfds; i++)
		close(p->fds[i]);
	rkv_free(p);
}

void sw_pend_drop(struct sw_tp *tp, struct sw_pend *p)
{
	pend_unlink(tp, p);
	sw_pend_free(p);
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
bool sw_hs_on_pend(struct sw_tp *tp, struct sw_pend *p)
{
	struct sw_listener *l = p->l;
	/* the preamble first, or (an older connector) the HELLO at once */
	bool pre = p->got && p->buf[0] == SW_PREAMBLE[0];
	unsigned need = pre ? SW_PREAMBLE_LEN + SW_HDR_LEN : SW_HDR_LEN;
	struct sw_hdr h;
	ssize_t n;

	do {
		/* never past the HELLO: the connector sends nothing more
		 * until it has the answer */
		n = sw_sock_recv(p->fd, p->buf + p->got, need - p->got,
				 tp->prov->unix_fds ? p->fds : NULL, &p->nfds,
				 SW_MAX_FDQ);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
			      errno == EINTR))
			return true;
		if (n <= 0) {
			if (p->got && flog_ok(tp, rkv_now_ns()))
				sw_log(tp, RKV_LOG_WARN,
				       "%s: truncated handshake from %s, dropping the connection",
				       l->base.addr, p->peer);
			sw_pend_drop(tp, p);
			return false;
		}
		p->got += (unsigned)n;
		pre = p->buf[0] == SW_PREAMBLE[0];
		need = pre ? SW_PREAMBLE_LEN + SW_HDR_LEN : SW_HDR_LEN;
	} while (p->got < need);
	if ((pre && memcmp(p->buf, SW_PREAMBLE, SW_PREAMBLE_LEN)) ||
	    sw_frame_check(p->buf + (pre ? SW_PREAMBLE_LEN : 0), SW_HDR_LEN,
			   &h) ||
	    h.type != SW_F_HELLO) {
		if (flog_ok(tp, rkv_now_ns()))
			sw_log(tp, RKV_LOG_WARN,
			       "%s: garbage from %s during the handshake, dropping the connection",
			       l->base.addr, p->peer);
		sw_pend_drop(tp, p);
		return false;
	}
	pend_unlink(tp, p);
	pthread_mutex_lock(&l->lock);
	if (l->nready >= SW_MAX_READY) {
		pthread_mutex_unlock(&l->lock);
		if (flog_ok(tp, rkv_now_ns()))
			sw_log(tp, RKV_LOG_WARN,
			       "%s: %u connections wait for rkv_accept, dropping %s",
			       l->base.addr, SW_MAX_READY, p->peer);
		sw_pend_free(p);
		return false;
	}
	p->next = NULL;
	if (l->ready_tail)
		l->ready_tail->next = p;
	else
		l->ready_head = p;
	l->ready_tail = p;
	if (!l->nready++)
		sw_listener_ready(l, true);
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

		if (!sw_hs_on_pend(tp, p)) {
			if (last)
				return;
			continue;
		}
		if (flog_ok(tp, now))
			sw_log(tp, RKV_LOG_WARN,
			       "%s: closing the handshake of %s (%s)",
			       p->l->base.addr, p->peer, why);
		tp->hs_evicted++;
		pend_unlink(tp, p);
		close_reset(p->fd);
		p->fd = -1;
		sw_pend_free(p);
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
	if (sw_h_alloc(tp, SW_H_PEND, p, &p->handle)) {
		sw_pend_free(p);
		return;
	}
	if (sw_epoll_add(tp, fd, EPOLLIN, p->handle)) {
		sw_h_free(tp, p->handle);
		sw_pend_free(p);
		return;
	}
	p->pe = pe = peer_get(tp, ss);
	plist_append(&tp->hs, p, HS_OFF);
	if (pe)
		plist_append(&pe->pends, p, PR_OFF);
	/* A client sends HELLO right after connecting: it is often here
	 * already, and then the connection never counts against a cap. */
	if (!sw_hs_on_pend(tp, p))
		return;
	if (pe && pe->pends.n > tp->hs_peer_max)
		hs_trim(tp, pe, tp->hs_peer_max, "too many from that address",
			now);
	if (tp->hs.n > hs_cap(tp, now))
		hs_trim(tp, NULL, hs_cap(tp, now), "too many handshakes", now);
}

/* Stop polling l for SW_PAUSE_MS (tick_all in sw_tp.c resumes it). */
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
			sw_log(tp, RKV_LOG_WARN,
			       "accept on %s: %s with %u handshakes pending; "
			       "keeping at most %u for %u s", l->base.addr,
			       strerror(err), tp->hs.n, room,
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
				sw_log(tp, RKV_LOG_WARN,
				       "accept on %s: %s, closing new connections",
				       l->base.addr, strerror(err));
			return true;
		}
	}
	if (flog_ok(tp, now))
		sw_log(tp, RKV_LOG_WARN,
		       "accept on %s: %s, not accepting for %u ms",
		       l->base.addr, strerror(err), SW_PAUSE_MS);
	listener_pause(tp, l, now);
	return false;
}

void sw_hs_on_listener(struct sw_tp *tp, struct sw_listener *l)
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
			sw_log(tp, RKV_LOG_WARN,
			       "accept on %s: %s, not accepting for %u ms",
			       l->base.addr, strerror(err), SW_PAUSE_MS);
		listener_pause(tp, l, now);
		return;
	}
}

/* Drop the handshakes past their deadline. */
void sw_hs_tick(struct sw_tp *tp, uint64_t now)
{
	/* the set is in accept order, so in deadline order */
	while (tp->hs.head && now > tp->hs.head->deadline) {
		struct sw_pend *p = tp->hs.head;

		if (flog_ok(tp, now))
			sw_log(tp, RKV_LOG_INFO,
			       "%s: no handshake from %s in time, dropping it",
			       p->l->base.addr, p->peer);
		sw_pend_drop(tp, p);
	}
}

/* Hand out the defaults of the caps (the first listen). */
void sw_hs_init(struct sw_tp *tp)
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
