/* SPDX-License-Identifier: MIT */
/*
 * verbs_cm.c - connections of the verbs provider through librdmacm.
 *
 * Every cm_id is asynchronous (it has an event channel of ours), so no
 * librdmacm call blocks: rdma_disconnect() only sends the DREQ, and all
 * waiting happens in wait_event() with poll() and a deadline.  The QP is
 * ours, not the cm_id's (see verbs_internal.h):
 *   active   route resolved: QP -> INIT; rdma_connect(qp_num);
 *            CONNECT_RESPONSE: QP -> RTR -> RTS; rdma_establish (RTU).
 *   passive  CONNECT_REQUEST: QP -> INIT -> RTR -> RTS; rdma_accept(qp_num);
 *            ESTABLISHED.
 *
 * Channels:
 *   listener  one channel; only CONNECT_REQUESTs arrive there.  The new
 *             cm_id is acked and moved at once to the endpoint's own setup
 *             channel, so two threads accepting and connecting never read
 *             each other's events.
 *   setup     per endpoint while it connects (address, route, established).
 *   CQ        once ESTABLISHED, the cm_id moves to its CQ's channel, where
 *             rkv_cq_poll notices DISCONNECTED and marks the endpoint in
 *             error (rkv_verbs_cq_cm_events).
 * Every event is acked right after it is read: rdma_destroy_id and
 * rdma_migrate_id wait for the acks of their id's events.
 *
 * Endpoint state machine (ep->base.state):
 *   CONNECTED  from rkv_accept/rkv_connect returning 0
 *   ERROR      an error completion, or the peer disconnected (the QP is left
 *              as it is: WRs to a dead peer end in RETRY_EXC_ERR)
 * Teardown (rkv_verbs_ep_destroy, also for half-built endpoints): forget
 * the QP in the CQ table, destroy it, rdma_disconnect (DREQ sent, no
 * wait), destroy the id, destroy the setup channel.
 */
#include "verbs_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "../alloc.h"
#include "../log.h"
#include "../rtime.h"

#define LISTEN_BACKLOG 128
/* rdma_resolve_addr/route need a finite timeout even when we wait forever */
#define RESOLVE_MAX_MS 5000

struct verbs_listener {
	struct rkv_listener base;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
};

/* An RC (RDMA_PS_TCP) cm_id on ch; *id stays NULL on failure. */
static int create_id(struct rkv_tp *tp, struct rdma_event_channel *ch,
		     struct rdma_cm_id **id, void *ctx)
{
	int rc;

	errno = 0;
	if (rdma_create_id(ch, id, ctx, RDMA_PS_TCP)) {
		rc = rkv_verbs_neg_errno(ENOMEM);
		*id = NULL;
		verbs_log(tp, RKV_LOG_ERROR, "rdma_create_id: %s",
			  strerror(-rc));
		return rc;
	}
	return 0;
}

int rkv_verbs_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return rkv_verbs_neg_errno(EINVAL);
	return 0;
}

static int new_channel(struct rkv_tp *tp, struct rdma_event_channel **out)
{
	int rc;

	errno = 0;
	*out = rdma_create_event_channel();
	if (!*out) {
		rc = rkv_verbs_neg_errno(ENOMEM);
		verbs_log(tp, RKV_LOG_ERROR, "rdma_create_event_channel: %s",
			  strerror(-rc));
		return rc;
	}
	rc = rkv_verbs_set_nonblock((*out)->fd);
	if (rc) {
		rdma_destroy_event_channel(*out);
		*out = NULL;
	}
	return rc;
}

/* UINT64_MAX: no deadline. */
static uint64_t deadline_of(int timeout_ms)
{
	return timeout_ms < 0 ? UINT64_MAX : rkv_now_ms() + (uint64_t)timeout_ms;
}

static int left_ms(uint64_t deadline)
{
	uint64_t now = rkv_now_ms();

	if (deadline == UINT64_MAX)
		return -1;
	if (now >= deadline)
		return 0;
	return deadline - now > INT32_MAX ? INT32_MAX : (int)(deadline - now);
}

/* Timeout for rdma_resolve_addr/route: what is left, within limits. */
static int resolve_ms(uint64_t deadline)
{
	int ms = left_ms(deadline);

	if (ms < 0 || ms > RESOLVE_MAX_MS)
		ms = RESOLVE_MAX_MS;
	return ms < 10 ? 10 : ms;
}

/* Next event of ch before the deadline.  Returns 0, -ETIMEDOUT, -errno. */
static int wait_event(struct rdma_event_channel *ch, uint64_t deadline,
		      struct rdma_cm_event **ev)
{
	for (;;) {
		struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
		int ms, n;

		errno = 0;
		if (rdma_get_cm_event(ch, ev) == 0)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return rkv_verbs_neg_errno(EIO);
		ms = left_ms(deadline);
		if (ms == 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, ms);
		if (n < 0 && errno != EINTR)
			return rkv_verbs_neg_errno(EIO);
	}
}

/* The -errno that an unexpected event stands for. */
static int event_error(const struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_UNREACHABLE:
		return ev->status < 0 ? ev->status : -EHOSTUNREACH;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return ev->status < 0 ? ev->status : -EHOSTUNREACH;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return ev->status < 0 ? ev->status : -ECONNABORTED;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		return -ECONNRESET;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return -ENODEV;
	default:
		return -EPROTO;
	}
}

/* Wait for one event of type want on ep's setup channel.  Returns 0 or
 * the -errno of what came instead. */
static int expect_event(struct verbs_ep *ep, enum rdma_cm_event_type want,
			uint64_t deadline, const char *what)
{
	struct rdma_cm_event *ev;
	int rc;

	for (;;) {
		rc = wait_event(ep->setup_ch, deadline, &ev);
		if (rc) {
			verbs_log(ep->base.tp, RKV_LOG_INFO,
				  "%s: %s waiting for %s", ep->base.peer,
				  strerror(-rc), rdma_event_str(want));
			return rc;
		}
		if (ev->event == want) {
			rdma_ack_cm_event(ev);
			return 0;
		}
		/* A late ADDR_CHANGE or the like: not ours to act on. */
		if (ev->event == RDMA_CM_EVENT_ADDR_CHANGE ||
		    ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT) {
			rdma_ack_cm_event(ev);
			continue;
		}
		rc = event_error(ev);
		verbs_log(ep->base.tp, RKV_LOG_INFO,
			  "%s %s: %s (status %d) instead of %s", what,
			  ep->base.peer, rdma_event_str(ev->event), ev->status,
			  rdma_event_str(want));
		rdma_ack_cm_event(ev);
		return rc;
	}
}

static void format_sockaddr(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		port = ntohs(s4->sin_port);
		snprintf(buf, len, "%s:%u", host, port);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)sa;

		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		port = ntohs(s6->sin6_port);
		snprintf(buf, len, "[%s]:%u", host, port);
	} else {
		snprintf(buf, len, "?");
	}
}

/* HOST:PORT of addr into ss. */
static int resolve_host(struct rkv_tp *tp, const struct rkv_tp_addr *a,
			int passive, struct sockaddr_storage *ss,
			socklen_t *sslen)
{
	struct addrinfo hints, *res = NULL;
	char port[8];
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	snprintf(port, sizeof(port), "%u", a->port);
	rc = getaddrinfo(a->host, port, &hints, &res);
	if (rc || !res) {
		verbs_log(tp, RKV_LOG_WARN, "cannot resolve '%s': %s", a->host,
			  rc ? gai_strerror(rc) : "no address");
		if (res)
			freeaddrinfo(res);
		return rc == EAI_SYSTEM ? rkv_verbs_neg_errno(EINVAL) :
		       rc == EAI_AGAIN	? -EAGAIN :
					  -EHOSTUNREACH;
	}
	if (res->ai_addrlen > sizeof(*ss)) {
		freeaddrinfo(res);
		return -EINVAL;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sslen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static const char *dev_name(const struct ibv_context *ctx)
{
	return ctx ? ibv_get_device_name(ctx->device) : "(none)";
}

/* ----------------------------------------------------------- endpoints */

static struct verbs_ep *ep_alloc(struct verbs_tp *vt, struct verbs_cq *cq)
{
	struct verbs_ep *ep = rkv_calloc(1, sizeof(*ep));

	if (!ep)
		return NULL;
	ep->base.tp = &vt->base;
	ep->base.cq = &cq->base;
	ep->base.state = RKV_EP_CONNECTED;
	ep->vcq = cq;
	if (new_channel(&vt->base, &ep->setup_ch)) {
		rkv_free(ep);
		return NULL;
	}
	return ep;
}

void rkv_verbs_ep_destroy(struct rkv_ep *base)
{
	struct verbs_ep *ep = container_of(base, struct verbs_ep, base);
	int had_qp = ep->qp != NULL;

	/* Out of the CQ table first, so its flushed WRs never surface. */
	rkv_verbs_ep_fini_qp(ep);
	if (ep->id) {
		if (had_qp)
			(void)rdma_disconnect(ep->id); /* async id: no wait */
		if (rdma_destroy_id(ep->id))
			verbs_log(base->tp, RKV_LOG_WARN,
				  "rdma_destroy_id(%s): %s", ep->base.peer,
				  strerror(errno));
		ep->id = NULL;
	}
	if (ep->setup_ch)
		rdma_destroy_event_channel(ep->setup_ch);
	rkv_free(ep);
}

/* Whether ctx (librdmacm's own handle on a device, cm_id->verbs) is the
 * device of the context. */
static int same_device(const struct verbs_tp *vt, const struct ibv_context *ctx)
{
	return ctx && ibv_get_device_guid(ctx->device) == vt->guid &&
	       strcmp(dev_name(ctx), dev_name(vt->ctx)) == 0;
}

/* The cm_id resolved to a device: it must be the context's. */
static int check_device(struct verbs_ep *ep, struct verbs_tp *vt)
{
	if (same_device(vt, ep->id->verbs))
		return 0;
	verbs_log(&vt->base, RKV_LOG_ERROR,
		  "%s is reached through device %s, but the context uses %s",
		  ep->base.peer, dev_name(ep->id->verbs), dev_name(vt->ctx));
	return -ENODEV;
}

/* Connected: hand the id to the CQ's channel. */
static int finish_connected(struct verbs_ep *ep)
{
	int rc;

	if (rdma_migrate_id(ep->id, ep->vcq->ch)) {
		rc = rkv_verbs_neg_errno(EINVAL);
		verbs_log(ep->base.tp, RKV_LOG_ERROR, "rdma_migrate_id(%s): %s",
			  ep->base.peer, strerror(-rc));
		return rc;
	}
	rdma_destroy_event_channel(ep->setup_ch);
	ep->setup_ch = NULL;
	verbs_log(ep->base.tp, RKV_LOG_INFO,
		  "connected to %s: QP 0x%x on %s, inline %u, send %u, recv %u",
		  ep->base.peer, ep->qp_num, dev_name(ep->id->verbs),
		  ep->max_inline, ep->sq_len, ep->rq_len);
	return 0;
}

static void conn_param_init(struct rdma_conn_param *p, struct verbs_tp *vt)
{
	memset(p, 0, sizeof(*p));
	p->responder_resources = vt->rd_atomic;
	p->initiator_depth = vt->init_depth;
	p->flow_control = 1;
	p->retry_count = VERBS_RETRY_CNT;
	p->rnr_retry_count = VERBS_RNR_RETRY;
}

/* -------------------------------------------------------------- connect */

/* Active side up to a resolved route: address, device check, route. */
static int connect_resolve(struct verbs_ep *ep, struct verbs_tp *vt,
			   const struct rkv_tp_addr *addr, uint64_t deadline)
{
	struct rkv_tp *tp = &vt->base;
	struct sockaddr_storage dst;
	socklen_t dstlen;
	int rc;

	rc = resolve_host(tp, addr, 0, &dst, &dstlen);
	if (rc)
		return rc;
	rc = create_id(tp, ep->setup_ch, &ep->id, ep);
	if (rc)
		return rc;
	errno = 0;
	if (rdma_resolve_addr(ep->id, NULL, (struct sockaddr *)&dst,
			      resolve_ms(deadline))) {
		rc = rkv_verbs_neg_errno(EHOSTUNREACH);
		verbs_log(tp, RKV_LOG_WARN, "rdma_resolve_addr(%s): %s",
			  ep->base.peer, strerror(-rc));
		return rc;
	}
	rc = expect_event(ep, RDMA_CM_EVENT_ADDR_RESOLVED, deadline,
			  "resolving");
	if (rc)
		return rc;
	rc = check_device(ep, vt);
	if (rc)
		return rc;
	if (ep->id->port_num != vt->port)
		verbs_log(tp, RKV_LOG_WARN,
			  "%s is reached through port %u of %s, the context chose port %u",
			  ep->base.peer, ep->id->port_num, dev_name(vt->ctx),
			  vt->port);
	errno = 0;
	if (rdma_resolve_route(ep->id, resolve_ms(deadline))) {
		rc = rkv_verbs_neg_errno(EHOSTUNREACH);
		verbs_log(tp, RKV_LOG_WARN, "rdma_resolve_route(%s): %s",
			  ep->base.peer, strerror(-rc));
		return rc;
	}
	return expect_event(ep, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline,
			    "routing to");
}

/* Active side from a resolved route: QP, REQ, REP, RTU. */
static int connect_establish(struct verbs_ep *ep, struct verbs_tp *vt,
			     uint64_t deadline)
{
	struct rkv_tp *tp = &vt->base;
	struct rdma_conn_param param;
	int rc;

	rc = rkv_verbs_ep_setup_qp(ep);
	if (!rc)
		rc = rkv_verbs_ep_qp_to(ep, IBV_QPS_INIT);
	if (rc)
		return rc;
	conn_param_init(&param, vt);
	param.qp_num = ep->qp_num;
	errno = 0;
	if (rdma_connect(ep->id, &param)) {
		rc = rkv_verbs_neg_errno(ECONNREFUSED);
		verbs_log(tp, RKV_LOG_WARN, "rdma_connect(%s): %s",
			  ep->base.peer, strerror(-rc));
		return rc;
	}
	rc = expect_event(ep, RDMA_CM_EVENT_CONNECT_RESPONSE, deadline,
			  "connecting to");
	if (!rc)
		rc = rkv_verbs_ep_qp_to(ep, IBV_QPS_RTR);
	if (!rc)
		rc = rkv_verbs_ep_qp_to(ep, IBV_QPS_RTS);
	if (rc)
		return rc; /* destroying the id rejects the REP */
	errno = 0;
	if (rdma_establish(ep->id)) {
		rc = rkv_verbs_neg_errno(ECONNABORTED);
		verbs_log(tp, RKV_LOG_WARN, "rdma_establish(%s): %s",
			  ep->base.peer, strerror(-rc));
		return rc;
	}
	return finish_connected(ep);
}

int rkv_verbs_connect(struct rkv_tp *tp, const struct rkv_tp_addr *addr,
		      struct rkv_cq *cqb, int timeout_ms, struct rkv_ep **out)
{
	struct verbs_tp *vt = container_of(tp, struct verbs_tp, base);
	struct verbs_cq *cq = container_of(cqb, struct verbs_cq, base);
	uint64_t deadline = deadline_of(timeout_ms);
	struct verbs_ep *ep;
	int rc;

	ep = ep_alloc(vt, cq);
	if (!ep)
		return -ENOMEM;
	if (strchr(addr->host, ':'))
		snprintf(ep->base.peer, sizeof(ep->base.peer), "[%s]:%u",
			 addr->host, addr->port);
	else
		snprintf(ep->base.peer, sizeof(ep->base.peer), "%s:%u",
			 addr->host, addr->port);
	rc = connect_resolve(ep, vt, addr, deadline);
	if (!rc)
		rc = connect_establish(ep, vt, deadline);
	if (rc) {
		rkv_verbs_ep_destroy(&ep->base);
		return rc;
	}
	*out = &ep->base;
	return 0;
}

/* --------------------------------------------------------------- listen */

void rkv_verbs_listener_destroy(struct rkv_listener *base)
{
	struct verbs_listener *l = container_of(base, struct verbs_listener, base);

	if (l->id && rdma_destroy_id(l->id))
		verbs_log(base->tp, RKV_LOG_WARN, "rdma_destroy_id(%s): %s",
			  l->base.addr, strerror(errno));
	if (l->ch)
		rdma_destroy_event_channel(l->ch);
	rkv_free(l);
}

/* CONNECT_REQUESTs arrive on the listener's own channel. */
int rkv_verbs_listener_fd(const struct rkv_listener *base)
{
	const struct verbs_listener *l =
		container_of(base, const struct verbs_listener, base);

	return l->ch ? l->ch->fd : -1;
}

int rkv_verbs_listen(struct rkv_tp *tp, const struct rkv_tp_addr *addr,
		     struct rkv_listener **out)
{
	struct verbs_tp *vt = container_of(tp, struct verbs_tp, base);
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct verbs_listener *l;
	int rc;

	l = rkv_calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->base.tp = tp; /* for the log of a failure; rkv_listen sets it too */
	rc = resolve_host(tp, addr, 1, &ss, &sslen);
	if (rc)
		goto fail;
	rc = new_channel(tp, &l->ch);
	if (rc)
		goto fail;
	rc = create_id(tp, l->ch, &l->id, l);
	if (rc)
		goto fail;
	errno = 0;
	if (rdma_bind_addr(l->id, (struct sockaddr *)&ss)) {
		rc = rkv_verbs_neg_errno(EADDRNOTAVAIL);
		verbs_log(tp, RKV_LOG_WARN, "rdma_bind_addr(%s:%u): %s",
			  addr->host, addr->port, strerror(-rc));
		goto fail;
	}
	if (l->id->verbs && !same_device(vt, l->id->verbs)) {
		verbs_log(tp, RKV_LOG_ERROR,
			  "%s belongs to device %s, but the context uses %s",
			  addr->host, dev_name(l->id->verbs),
			  dev_name(vt->ctx));
		rc = -ENODEV;
		goto fail;
	}
	errno = 0;
	if (rdma_listen(l->id, LISTEN_BACKLOG)) {
		rc = rkv_verbs_neg_errno(EADDRINUSE);
		verbs_log(tp, RKV_LOG_WARN, "rdma_listen(%s:%u): %s",
			  addr->host, addr->port, strerror(-rc));
		goto fail;
	}
	snprintf(l->base.addr, sizeof(l->base.addr),
		 strchr(addr->host, ':') ? "verbs://[%s]:%u" : "verbs://%s:%u",
		 addr->host, (unsigned)ntohs(rdma_get_src_port(l->id)));
	verbs_log(tp, RKV_LOG_INFO, "listening on %s (%s)", l->base.addr,
		  l->id->verbs ? dev_name(l->id->verbs) : "all devices");
	*out = &l->base;
	return 0;

fail:
	rkv_verbs_listener_destroy(&l->base);
	return rc;
}

/* --------------------------------------------------------------- accept */

/* Turn one connection request (id, acked already) into an endpoint. */
static int accept_one(struct verbs_tp *vt, struct verbs_cq *cq,
		      struct rdma_cm_id *id, const struct rdma_conn_param *req,
		      uint64_t deadline, struct verbs_ep **out)
{
	struct rdma_conn_param param;
	struct verbs_ep *ep;
	int rc;

	ep = ep_alloc(vt, cq);
	if (!ep) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return -ENOMEM;
	}
	ep->id = id;
	id->context = ep;
	format_sockaddr(rdma_get_peer_addr(id), ep->base.peer,
			sizeof(ep->base.peer));
	rc = check_device(ep, vt);
	if (rc) {
		rdma_reject(id, NULL, 0);
		goto fail;
	}
	errno = 0;
	if (rdma_migrate_id(id, ep->setup_ch)) {
		rc = rkv_verbs_neg_errno(EINVAL);
		verbs_log(&vt->base, RKV_LOG_ERROR, "rdma_migrate_id(%s): %s",
			  ep->base.peer, strerror(-rc));
		rdma_reject(id, NULL, 0);
		goto fail;
	}
	conn_param_init(&param, vt);
	/* Never promise more READ/atomic slots than the peer can use or
	 * more than it can take. */
	if (req->initiator_depth < param.responder_resources)
		param.responder_resources = req->initiator_depth;
	if (req->responder_resources < param.initiator_depth)
		param.initiator_depth = req->responder_resources;
	ep->resp_res = param.responder_resources;
	ep->init_depth = param.initiator_depth;
	rc = rkv_verbs_ep_setup_qp(ep);
	if (!rc)
		rc = rkv_verbs_ep_qp_to(ep, IBV_QPS_INIT);
	if (!rc)
		rc = rkv_verbs_ep_qp_to(ep, IBV_QPS_RTR);
	if (!rc)
		rc = rkv_verbs_ep_qp_to(ep, IBV_QPS_RTS);
	if (rc) {
		rdma_reject(id, NULL, 0);
		goto fail;
	}
	param.qp_num = ep->qp_num;
	errno = 0;
	if (rdma_accept(id, &param)) {
		rc = rkv_verbs_neg_errno(ECONNABORTED);
		verbs_log(&vt->base, RKV_LOG_WARN, "rdma_accept(%s): %s",
			  ep->base.peer, strerror(-rc));
		goto fail;
	}
	rc = expect_event(ep, RDMA_CM_EVENT_ESTABLISHED, deadline,
			  "accepting");
	if (rc)
		goto fail;
	rc = finish_connected(ep);
	if (rc)
		goto fail;
	*out = ep;
	return 0;

fail:
	rkv_verbs_ep_destroy(&ep->base);
	return rc;
}

int rkv_verbs_accept(struct rkv_listener *lb, struct rkv_cq *cqb,
		     int timeout_ms, struct rkv_ep **out)
{
	struct verbs_listener *l = container_of(lb, struct verbs_listener, base);
	struct verbs_tp *vt = container_of(lb->tp, struct verbs_tp, base);
	struct verbs_cq *cq = container_of(cqb, struct verbs_cq, base);
	uint64_t deadline = deadline_of(timeout_ms);
	struct verbs_ep *ep = NULL;

	for (;;) {
		struct rdma_cm_event *ev;
		struct rdma_conn_param req;
		struct rdma_cm_id *id;
		int rc = wait_event(l->ch, deadline, &ev);

		if (rc)
			return rc;
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
			verbs_log(&vt->base, RKV_LOG_DEBUG,
				  "listener %s: ignoring %s", l->base.addr,
				  rdma_event_str(ev->event));
			rdma_ack_cm_event(ev);
			continue;
		}
		id = ev->id;
		req = ev->param.conn;
		/* The ack must come before rdma_migrate_id, which waits
		 * for it. */
		rdma_ack_cm_event(ev);
		/* timeout_ms bounds the wait for a request; the handshake
		 * of one that came is bounded by the context's timeout (a
		 * poll with timeout 0 must still complete it) */
		uint64_t hs = rkv_now_ms() + vt->base.opts.timeout_ms;

		rc = accept_one(vt, cq, id, &req, hs > deadline ? hs : deadline,
				&ep);
		if (rc)
			return rc;
		*out = &ep->base;
		return 0;
	}
}

/* ------------------------------------------------------ connected state */

void rkv_verbs_cq_cm_events(struct verbs_cq *cq)
{
	struct rdma_cm_event *ev;

	/* Bounded: a burst of events is taken over a few polls. */
	for (int i = 0; i < 16; i++) {
		struct verbs_ep *ep;

		if (rdma_get_cm_event(cq->ch, &ev))
			return; /* EAGAIN: nothing pending */
		ep = ev->id ? ev->id->context : NULL;
		switch (ev->event) {
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
		case RDMA_CM_EVENT_ADDR_CHANGE:
			/* A peer that disconnects is an ordinary end of the
			 * connection: debug only; losing the device or the
			 * address is news. */
			if (ep && ep->base.state != RKV_EP_ERROR) {
				verbs_log(cq->base.tp,
					  ev->event == RDMA_CM_EVENT_DISCONNECTED
						  ? RKV_LOG_DEBUG
						  : RKV_LOG_INFO,
					  "%s: %s, endpoint in error",
					  ep->base.peer,
					  rdma_event_str(ev->event));
				ep->base.state = RKV_EP_ERROR;
			}
			break;
		default:
			break;
		}
		rdma_ack_cm_event(ev);
	}
}
