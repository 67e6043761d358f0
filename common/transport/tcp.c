/* SPDX-License-Identifier: MIT */
/*
 * tcp.c - the tcp provider: a software RNIC over TCP sockets.
 *
 * The target's transport thread (sw_tp.c) executes READ, WRITE, CAS and
 * FETCH_ADD frames against the context's MR table, checking rkey, bounds
 * and access as a NIC does, and never calls code above the transport.  An
 * initiator needs no thread: rkv_cq_poll progresses its active endpoints
 * (non-blocking socket reads), and since the protocol is symmetric an
 * active endpoint also serves the one-sided requests and SENDs its peer
 * sends.  TCP_NODELAY everywhere; one sendmsg per posted chain.  The
 * framing and queues live in sw_wire.c, sw_tx.c, sw_rx.c and sw_ep.c,
 * shared with shm.
 */
#include "sw.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../alloc.h"
#include "../log.h"
#include "../rtime.h"

struct tcp_tp {
	struct sw_tp sw;
	struct sw_mrent *tab;
};

static const struct sw_prov tcp_prov = {
	.comp = "tcp",
	.remote_exec = true,
};

static int tcp_create(const struct rkv_tp_opts *opts, struct rkv_tp **out)
{
	struct tcp_tp *t = rkv_calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return -ENOMEM;
	t->tab = rkv_calloc(SW_MR_MAX, sizeof(*t->tab));
	if (!t->tab) {
		rc = -ENOMEM;
		goto free_t;
	}
	rc = sw_tp_init(&t->sw, &tcp_prov, t->tab);
	if (rc)
		goto free_tab;
	t->sw.base.windows = opts->rkey_windows != RKV_WINDOWS_OFF;
	snprintf(t->sw.base.describe, sizeof(t->sw.base.describe),
		 "tcp software RNIC (target thread per context, polled initiator, timeout %u ms, rkeys per %s)",
		 opts->timeout_ms,
		 t->sw.base.windows ? "connection" : "region");
	*out = &t->sw.base;
	return 0;

free_tab:
	rkv_free(t->tab);
free_t:
	rkv_free(t);
	return rc;
}

static void tcp_destroy(struct rkv_tp *tp)
{
	struct tcp_tp *t = container_of(tp, struct tcp_tp, sw.base);

	sw_tp_fini(&t->sw);
	rkv_free(t->tab);
	rkv_free(t);
}

static size_t page_round(size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (len + pg - 1) & ~(pg - 1);
}

static int tcp_mem_alloc(struct rkv_tp *tp, size_t len, void **out)
{
	void *p;

	(void)tp;
	p = mmap(NULL, page_round(len), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	*out = p;
	return 0;
}

static void tcp_mem_free(struct rkv_tp *tp, void *addr, size_t len)
{
	(void)tp;
	munmap(addr, page_round(len));
}

static int resolve(struct sw_tp *tp, const struct rkv_tp_addr *a,
		   bool passive, struct addrinfo **res)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = passive ? AI_PASSIVE : 0 };
	char port[8];
	int rc;

	snprintf(port, sizeof(port), "%u", a->port);
	rc = getaddrinfo(a->host, port, &hints, res);
	if (rc) {
		sw_log(tp, RKV_LOG_WARN, "cannot resolve '%s': %s", a->host,
		       gai_strerror(rc));
		return -EINVAL;
	}
	return 0;
}

static void format_addr(const struct sockaddr *sa, char *out, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)sa;

		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof(ip));
		snprintf(out, len, "tcp://[%s]:%u", ip, ntohs(s->sin6_port));
	} else {
		const struct sockaddr_in *s = (const void *)sa;

		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof(ip));
		snprintf(out, len, "tcp://%s:%u", ip, ntohs(s->sin_port));
	}
}

static int tcp_listen(struct rkv_tp *btp, const struct rkv_tp_addr *a,
		      struct rkv_listener **out)
{
	struct sw_tp *tp = container_of(btp, struct sw_tp, base);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct addrinfo *res;
	char addr[300];
	int fd, rc, one = 1;

	rc = resolve(tp, a, true, &res);
	if (rc)
		return rc;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0) {
		rc = -errno;
		goto free_res;
	}
	/* TIME_WAIT leftovers must not block a restart; a live listener on
	 * the port still gives EADDRINUSE. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* The transport thread drains the queue at once (closing what a
	 * cap refuses, sw_hs.c), so a deep queue costs little and absorbs a
	 * burst; a full one drops SYNs and a client retries only after 1 s. */
	if (bind(fd, res->ai_addr, res->ai_addrlen) ||
	    listen(fd, SOMAXCONN)) {
		rc = -errno;
		sw_log(tp, RKV_LOG_WARN, "listen on %s:%u: %s", a->host,
		       a->port, strerror(-rc));
		goto close_fd;
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &sl)) {
		rc = -errno;
		goto close_fd;
	}
	format_addr((struct sockaddr *)&ss, addr, sizeof(addr));
	freeaddrinfo(res);
	return sw_listener_create(tp, fd, addr, out);

close_fd:
	close(fd);
free_res:
	freeaddrinfo(res);
	return rc;
}

static int tcp_connect(struct rkv_tp *btp, const struct rkv_tp_addr *a,
		       struct rkv_cq *bcq, int timeout_ms, struct rkv_ep **out)
{
	struct sw_tp *tp = container_of(btp, struct sw_tp, base);
	struct sw_cq *cq = container_of(bcq, struct sw_cq, base);
	uint64_t t0 = rkv_now_ns();
	struct addrinfo *res;
	char peer[300];
	int fd, rc, one = 1, left;

	rc = resolve(tp, a, false, &res);
	if (rc)
		return rc;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0) {
		rc = -errno;
		goto free_res;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	format_addr(res->ai_addr, peer, sizeof(peer));
	if (connect(fd, res->ai_addr, res->ai_addrlen)) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		socklen_t el = sizeof(rc);
		int n;

		if (errno != EINPROGRESS) {
			rc = -errno;
			goto close_fd;
		}
		do {
			n = poll(&pfd, 1, timeout_ms < 0 ? -1 : timeout_ms);
		} while (n < 0 && errno == EINTR);
		if (n == 0) {
			rc = -ETIMEDOUT;
			goto close_fd;
		}
		if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &el)) {
			rc = -errno;
			goto close_fd;
		}
		if (rc) {
			rc = -rc;
			goto close_fd;
		}
	}
	freeaddrinfo(res);
	left = timeout_ms;
	if (timeout_ms > 0) {
		uint64_t spent = (rkv_now_ns() - t0) / 1000000ull;

		left = spent >= (uint64_t)timeout_ms ? 1
						     : timeout_ms - (int)spent;
	}
	return sw_connect_finish(tp, cq, fd, peer, left, out);

close_fd:
	close(fd);
free_res:
	freeaddrinfo(res);
	return rc;
}

const struct rkv_tp_ops rkv_tp_tcp_ops = {
	.name = "tcp",
	.create = tcp_create,
	.destroy = tcp_destroy,
	.mem_alloc = tcp_mem_alloc,
	.mem_free = tcp_mem_free,
	.mr_reg = sw_mr_reg,
	.mr_dereg = sw_mr_dereg,
	.mr_reg_gpu = sw_mr_reg_gpu,
	.cq_create = sw_cq_create,
	.cq_destroy = sw_cq_destroy,
	.cq_poll = sw_cq_poll,
	.cq_wait = sw_cq_wait,
	.listen = tcp_listen,
	.listener_destroy = sw_listener_destroy,
	.listener_fd = sw_listener_fd,
	.accept = sw_accept,
	.connect = tcp_connect,
	.ep_destroy = sw_ep_destroy,
	.post = sw_ep_post,
	.post_recv = sw_ep_post_recv,
	.ep_rkey = sw_ep_rkey,
};
