/* SPDX-License-Identifier: MIT */
/*
 * ctrl.c - the control plane: connections and control messages, served
 * from one thread by a poll loop (rkv_srv_poll).
 *
 * Each connection registers one buffer: --max-inflight (c->nrecvs)
 * receive buffers, always posted except while their message waits to be
 * served, and RKV_CTRL_SENDS send buffers, each reused only after its SEND
 * completed.  A request is served only when a send buffer is free (every
 * request gets exactly one reply), so a client that sends faster than it
 * reaps replies just has its requests wait in the per-connection FIFO; the
 * FIFO cannot overflow because it holds at most the nrecvs buffers.  A
 * client with more than nrecvs requests unanswered finds no RECV posted:
 * its SEND waits (receiver not ready) and fails after the transport
 * timeout.  A client that stops posting RECVs makes the server's replies
 * fail the same way, and the connection is dropped: per connection, the
 * server never holds more than its fixed buffers.
 *
 * Authentication (--secret-file or --read-only-secret-file): HELLO is answered by AUTH_CHALLENGE
 * (a fresh nonce) and the connection waits in RKV_CONN_AUTH for exactly
 * one AUTH_RESPONSE; only a correct one gets HELLO_REPLY (rkeys,
 * addresses).  Anything else counts an authentication failure, is answered
 * ERROR -EACCES "authentication failed", and closes the connection.
 *
 * wr_id = slot << 32 | (generation & 0xffffff) << 8 | buffer.  A completion
 * whose slot is empty or whose generation differs belongs to a connection
 * already closed and is dropped, so a closed connection's memory is never
 * touched again, whatever completions a provider still delivers.
 *
 * What the server trusts: nothing from the wire.  Messages go through
 * rkv_msg_decode; a malformed one (or a reply type sent as a request)
 * closes that connection only.  Offsets and lengths of BLOCK_RETURN and
 * CHUNK_RETIRE are checked against the region and the space state.
 *
 * Client death (error completion, dead endpoint, malformed message) or a
 * departure: a reclaim pass (rkv_space_reclaim, at most every
 * RKV_CTRL_RECLAIM_MS) moves every allocated unit that the index does not
 * name and no live client holds to the grace queue: the chunks the client
 * held, and the blocks it unlinked but had not returned yet.  A grant that
 * finds no room, or leaves little, asks for one too.  Returns that arrive
 * after that are refused by their grant id (server/space.c).
 */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "alloc.h"
#include "rtime.h"
#include "server_internal.h"

#define ACCEPTS_PER_PASS 8

const char *rkv_conn_state_str(enum rkv_conn_state s)
{
	switch (s) {
	case RKV_CONN_HELLO: return "hello";
	case RKV_CONN_AUTH: return "auth";
	case RKV_CONN_READY: return "ready";
	case RKV_CONN_CLOSING: return "closing";
	}
	return "?";
}

static uint64_t make_wr_id(const struct rkv_srv_conn *c, unsigned buf)
{
	return (uint64_t)c->slot << 32 | (uint64_t)(c->gen & 0xffffffu) << 8 |
	       buf;
}

static char *buf_of(const struct rkv_srv_conn *c, unsigned buf)
{
	return c->buf + (size_t)buf * RKV_MSG_MAX;
}

/* "client 3 'trainer' (tcp://127.0.0.1:5555)" for logs */
static const char *who(const struct rkv_srv_conn *c, char *s, size_t n)
{
	if (c->client_id)
		snprintf(s, n, "client %u '%s' (%s)", c->client_id, c->name,
			 c->peer);
	else
		snprintf(s, n, "connection %s", c->peer);
	return s;
}

/* ---------------------------------------------------------- lifecycle */

static int post_recv(struct rkv_srv_conn *c, unsigned buf)
{
	struct rkv_recv_wr wr = {
		.wr_id = make_wr_id(c, buf),
		.local = buf_of(c, buf),
		.length = RKV_MSG_MAX,
		.lkey = c->mr->lkey,
	};

	return rkv_post_recv(c->ep, &wr, NULL);
}

static int conn_create(struct rkv_srv *srv, struct rkv_ep *ep, uint32_t slot,
		       uint64_t now_ms, struct rkv_srv_conn **out)
{
	struct rkv_srv_conn *c;
	struct rkv_recv_wr wr[RKV_CTRL_RECVS_MAX];
	unsigned nbufs;
	int rc;

	c = rkv_calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->srv = srv;
	c->ep = ep;
	c->slot = slot;
	c->gen = ++srv->gens[slot];
	c->state = RKV_CONN_HELLO;
	c->since_ms = now_ms;
	c->nrecvs = (unsigned)srv->cfg.max_inflight;
	if (c->nrecvs < 1 || c->nrecvs > RKV_CTRL_RECVS_MAX)
		c->nrecvs = c->nrecvs ? RKV_CTRL_RECVS_MAX : 1;
	nbufs = c->nrecvs + RKV_CTRL_SENDS;
	snprintf(c->peer, sizeof(c->peer), "%s", rkv_ep_peer(ep));
	c->buf = rkv_aligned_alloc(4096, (size_t)nbufs * RKV_MSG_MAX);
	if (!c->buf) {
		rc = -ENOMEM;
		goto err_free_conn;
	}
	memset(c->buf, 0, (size_t)nbufs * RKV_MSG_MAX);
	rc = rkv_mr_reg(srv->tp, c->buf, (size_t)nbufs * RKV_MSG_MAX,
			RKV_ACCESS_LOCAL_WRITE, &c->mr);
	if (rc)
		goto err_free_buf;
	for (unsigned i = 0; i < c->nrecvs; i++) {
		wr[i] = (struct rkv_recv_wr){
			.next = i + 1 < c->nrecvs ? &wr[i + 1] : NULL,
			.wr_id = make_wr_id(c, i),
			.local = buf_of(c, i),
			.length = RKV_MSG_MAX,
			.lkey = c->mr->lkey,
		};
	}
	rc = rkv_post_recv(ep, wr, NULL);
	if (rc)
		goto err_dereg;
	*out = c;
	return 0;

err_dereg:
	rkv_mr_dereg(c->mr);
err_free_buf:
	rkv_free(c->buf);
err_free_conn:
	rkv_free(c);
	return rc;
}

/* Everything allocated that nobody names or holds goes to grace. */
static void reclaim(struct rkv_srv *srv, uint64_t now_ms, const char *why)
{
	struct rkv_space_extent *keep = NULL;
	size_t nkeep = 0, cap = 0;
	uint64_t freed = 0, t0 = rkv_now_ns();
	int rc;

	srv->reclaim_due = 0;
	srv->last_reclaim_ms = now_ms;
	for (uint32_t i = 0; i < srv->nslots; i++)
		if (srv->conns[i])
			cap += srv->conns[i]->nchunks;
	if (cap) {
		keep = rkv_malloc(cap * sizeof(*keep));
		if (!keep) {
			rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP,
				"no memory for a reclaim pass: space stays "
				"allocated until the next one");
			srv->reclaim_due = 1;
			return;
		}
		for (uint32_t i = 0; i < srv->nslots; i++) {
			const struct rkv_srv_conn *o = srv->conns[i];

			if (!o || !o->nchunks)
				continue;
			memcpy(keep + nkeep, o->chunks,
			       o->nchunks * sizeof(*keep));
			nkeep += o->nchunks;
		}
	}
	rc = rkv_space_reclaim(srv->space, keep, nkeep, srv->index_mem,
			       rkv_srv_used_slots(srv), now_ms,
			       &freed);
	rkv_free(keep);
	if (rc) {
		rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP,
			"reclaim incomplete: %s", strerror(-rc));
		srv->reclaim_due = 1;
	}
	rkv_log(RKV_LOG_INFO, RKV_SRV_COMP,
		"reclaim (%s): %zu chunks held, %" PRIu64
		" bytes to grace, %.1f ms",
		why, nkeep, freed, (double)(rkv_now_ns() - t0) / 1e6);
}

/* Close and free a connection; a reclaim pass gives back what it held. */
static void conn_close(struct rkv_srv_conn *c, uint64_t now_ms, int do_rebuild,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void conn_close(struct rkv_srv_conn *c, uint64_t now_ms, int do_rebuild,
		       const char *fmt, ...)
{
	struct rkv_srv *srv = c->srv;
	char why[200], w[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	/* no completion of this endpoint after this; stale ones are dropped
	 * by the generation check */
	rkv_ep_destroy(c->ep);
	c->ep = NULL;
	if (c->state == RKV_CONN_AUTH && do_rebuild) {
		/* challenged, never answered (or answered with garbage) */
		srv->auth_failures++;
		if (rkv_srv_warn_ok(srv, now_ms))
			rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
				"%s: authentication failed: %s before a "
				"response",
				who(c, w, sizeof(w)), why);
	}
	rkv_srv_wipe(c->nonce, sizeof(c->nonce));
	if (c->client_id) {
		if (c->state == RKV_CONN_READY)
			srv->nclients--;
		rkv_log(RKV_LOG_INFO, RKV_SRV_COMP,
			"%s disconnected: %s (%zu chunks held)",
			who(c, w, sizeof(w)), why, c->nchunks);
	} else {
		rkv_log(RKV_LOG_INFO, RKV_SRV_COMP, "%s closed: %s",
			who(c, w, sizeof(w)), why);
	}
	/* a writer may have held chunks or blocks it unlinked and had not
	 * returned yet: the next reclaim pass frees them */
	if (do_rebuild && c->client_id && !c->read_only)
		srv->reclaim_due = 1;
	srv->conns[c->slot] = NULL;
	srv->nconns--;
	rkv_mr_dereg(c->mr);
	rkv_free(c->buf);
	rkv_free(c->chunks);
	rkv_free(c);
}

void rkv_srv_ctrl_close_all(struct rkv_srv *srv)
{
	for (uint32_t i = 0; i < srv->nslots; i++)
		if (srv->conns[i])
			conn_close(srv->conns[i], rkv_now_ms(), 0,
				   "server stopping");
}

int rkv_srv_ctrl_accept(struct rkv_srv *srv, uint64_t now_ms)
{
	int n = 0;

	while (n < ACCEPTS_PER_PASS) {
		struct rkv_srv_conn *c;
		struct rkv_ep *ep;
		uint32_t slot;
		int rc = rkv_accept(srv->listener, srv->cq, 0, &ep);

		if (rc == -ETIMEDOUT || rc == -EAGAIN)
			break;
		if (rc == -EACCES)
			continue; /* a peer the transport refused (shm: its
				   * uid); the next may be a client */
		if (rc) {
			if (rkv_srv_warn_ok(srv, now_ms))
				rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
					"accept failed: %s", strerror(-rc));
			break;
		}
		n++;
		for (slot = 0; slot < srv->nslots; slot++)
			if (!srv->conns[slot])
				break;
		if (slot == srv->nslots) {
			if (rkv_srv_warn_ok(srv, now_ms))
				rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
					"%s refused: %u connections open",
					rkv_ep_peer(ep), srv->nconns);
			rkv_ep_destroy(ep);
			continue;
		}
		rc = conn_create(srv, ep, slot, now_ms, &c);
		if (rc) {
			if (rkv_srv_warn_ok(srv, now_ms))
				rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
					"%s dropped: cannot set up: %s",
					rkv_ep_peer(ep), strerror(-rc));
			rkv_ep_destroy(ep);
			continue;
		}
		srv->conns[slot] = c;
		srv->nconns++;
		rkv_log(RKV_LOG_DEBUG, RKV_SRV_COMP, "connection from %s",
			c->peer);
	}
	return n;
}

void rkv_srv_ctrl_tick(struct rkv_srv *srv, uint64_t now_ms)
{
	for (uint32_t i = 0; i < srv->nslots; i++) {
		struct rkv_srv_conn *c = srv->conns[i];

		if (!c)
			continue;
		/* An endpoint can enter the error state before its error
		 * completion reaches the CQ; give the completion (which says
		 * why) RKV_CTRL_ERR_WAIT_MS to arrive before closing here. */
		if (rkv_ep_state(c->ep) == RKV_EP_ERROR) {
			if (!c->err_seen_ms)
				c->err_seen_ms = now_ms;
			else if (now_ms - c->err_seen_ms >= RKV_CTRL_ERR_WAIT_MS)
				conn_close(c, now_ms, 1,
					   "endpoint in error state");
		} else if ((c->state == RKV_CONN_HELLO ||
			    c->state == RKV_CONN_AUTH) &&
			   now_ms - c->since_ms > RKV_CTRL_HELLO_MS)
			conn_close(c, now_ms, 1, "no %s within %u ms",
				   c->state == RKV_CONN_HELLO ? "HELLO"
							      : "AUTH_RESPONSE",
				   RKV_CTRL_HELLO_MS);
		else if (c->state == RKV_CONN_CLOSING &&
			 now_ms - c->since_ms > RKV_CTRL_LINGER_MS)
			conn_close(c, now_ms, 1, "final reply not completed");
	}
	if (srv->reclaim_due &&
	    now_ms - srv->last_reclaim_ms >= RKV_CTRL_RECLAIM_MS)
		reclaim(srv, now_ms, "clients left");
	rkv_srv_rotate_tick(srv, now_ms);
	uint32_t sf = atomic_exchange(&srv->self_fence, 0);
	int frc = sf > srv->fence_epoch ? rkv_srv_fence(srv, sf, NULL, now_ms)
					: 0;

	if (frc == -EOPNOTSUPP)
		rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP,
			"out of the cluster's map (epoch %u), and shm cannot "
			"fence its clients: stop this server", sf);
	else if (frc)
		atomic_store(&srv->self_fence, sf); /* again next tick */
}

/* ------------------------------------------------------------ replies */

enum serve_rc {
	SERVED = 0, /* reply posted, connection open */
	CLOSED = 1, /* connection closed and freed */
};

static int free_send(const struct rkv_srv_conn *c)
{
	for (unsigned i = 0; i < RKV_CTRL_SENDS; i++)
		if (!(c->send_busy & (1u << i)))
			return (int)i;
	return -1;
}

/* Post srv->rep (type and req_id set by the caller) on a free send slot. */
static int send_reply(struct rkv_srv_conn *c, uint64_t now_ms)
{
	struct rkv_srv *srv = c->srv;
	int s = free_send(c), len, rc;
	char *b;

	if (s < 0) /* cannot happen: serve() runs only with a free slot */
		return -ENOBUFS;
	b = buf_of(c, c->nrecvs + (unsigned)s);
	len = rkv_msg_encode(&srv->rep, b, RKV_MSG_MAX);
	if (len < 0)
		return len;
	struct rkv_wr wr = {
		.wr_id = make_wr_id(c, c->nrecvs + (unsigned)s),
		.opcode = RKV_WR_SEND,
		.flags = RKV_WR_SIGNALED,
		.local = b,
		.length = (uint32_t)len,
		.lkey = c->mr->lkey,
	};
	rc = rkv_post(c->ep, &wr, NULL);
	if (rc)
		return rc;
	c->send_busy |= 1u << s;
	(void)now_ms;
	return 0;
}

static void init_rep(struct rkv_srv *srv, unsigned type, uint32_t req_id)
{
	memset(&srv->rep.hdr, 0, sizeof(srv->rep.hdr));
	srv->rep.hdr.type = (uint16_t)type;
	srv->rep.hdr.req_id = req_id;
}

/* Reply ERROR; the connection lingers until it completes, then closes. */
static int error_and_close(struct rkv_srv_conn *c, uint32_t req_id,
			   int status, uint64_t now_ms, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static int error_and_close(struct rkv_srv_conn *c, uint32_t req_id,
			   int status, uint64_t now_ms, const char *fmt, ...)
{
	struct rkv_srv *srv = c->srv;
	char w[256];
	va_list ap;
	int rc;

	init_rep(srv, RKV_MSG_ERROR, req_id);
	memset(&srv->rep.u.error, 0, sizeof(srv->rep.u.error));
	srv->rep.u.error.status = status;
	va_start(ap, fmt);
	vsnprintf(srv->rep.u.error.text, sizeof(srv->rep.u.error.text), fmt,
		  ap);
	va_end(ap);
	if (rkv_srv_warn_ok(srv, now_ms))
		rkv_log(RKV_LOG_WARN, RKV_SRV_COMP, "%s: %s; closing",
			who(c, w, sizeof(w)), srv->rep.u.error.text);
	if (c->state == RKV_CONN_READY)
		srv->nclients--;
	rkv_srv_wipe(c->nonce, sizeof(c->nonce));
	c->nonce_live = 0;
	c->state = RKV_CONN_CLOSING;
	c->since_ms = now_ms;
	rc = send_reply(c, now_ms);
	if (rc) {
		conn_close(c, now_ms, 1, "cannot send ERROR: %s", strerror(-rc));
		return CLOSED;
	}
	return SERVED;
}

static void copy_name(char *dst, const char *src)
{
	size_t i;

	for (i = 0; i + 1 < RKV_NAME_MAX && src[i]; i++)
		dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
	dst[i] = '\0';
}

/* ----------------------------------------------------------- requests */

static void do_hello(struct rkv_srv_conn *c, const struct rkv_msg_hello *hm)
{
	struct rkv_srv *srv = c->srv;
	struct rkv_msg_hello_reply *r = &srv->rep.u.hello_reply;
	struct rkv_mr *imr = srv->index_mr, *dmr = srv->data_mr;
	char w[256];
	int rc;

	memset(r, 0, sizeof(*r));
	r->fence_epoch = srv->fence_epoch;
	if (hm->map_epoch && hm->map_epoch < srv->fence_epoch) {
		/* a client of a map the cluster left behind (failover): it
		 * reads the map again */
		r->status = -ESTALE;
		return;
	}
	if (!imr) { /* a failed shm fence (rkv_srv_fence_index) */
		r->status = -EIO;
		return;
	}
	if (hm->flags & RKV_HELLO_READ_ONLY) {
		imr = srv->index_ro_mr;
		dmr = srv->data_ro_mr;
		if (!imr || !dmr) {
			r->status = -EPERM;
			return;
		}
	}
	/* this connection's own rkeys (verbs: windows bound to its QP, the
	 * binds posted before the reply) */
	rc = rkv_ep_rkey(c->ep, imr, &r->index_rkey);
	if (!rc)
		rc = rkv_ep_rkey(c->ep, dmr, &r->data_rkey);
	if (!rc && srv->ctr_mr && !(hm->flags & RKV_HELLO_READ_ONLY))
		rc = rkv_ep_rkey(c->ep, srv->ctr_mr, &r->counters_rkey);
	if (rc) {
		rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
			"%s: no rkeys for this connection: %s",
			who(c, w, sizeof(w)), strerror(-rc));
		memset(r, 0, sizeof(*r));
		r->fence_epoch = srv->fence_epoch;
		r->status = rc == -ENOMEM ? -EBUSY : -EIO;
		return;
	}
	copy_name(c->name, hm->name);
	c->read_only = !!(hm->flags & RKV_HELLO_READ_ONLY);
	c->map_epoch = hm->map_epoch;
	r->flags = (c->read_only ? RKV_HELLO_REPLY_READ_ONLY : 0) |
		   (srv->cfg.cluster[0] ? RKV_HELLO_REPLY_LEASED : 0);
	c->rkey_epoch = c->rkey_sent = rkv_srv_rotate_epoch(srv);
	c->client_id = srv->next_client_id++;
	if (!srv->next_client_id)
		srv->next_client_id = 1;
	c->state = RKV_CONN_READY;
	srv->nclients++;
	srv->clients_total++;
	r->status = 0;
	r->client_id = c->client_id;
	snprintf(r->server_name, sizeof(r->server_name), "%s", srv->cfg.name);
	r->server_id = srv->server_id;
	r->index_addr = (uint64_t)(uintptr_t)srv->index_mem;
	r->nbuckets = srv->cfg.nbuckets;
	r->bucket_slots = (uint32_t)srv->cfg.bucket_slots;
	r->levels_max = srv->cfg.levels_max;
	r->levels = srv->levels;
	r->chunk_size = (uint32_t)srv->cfg.chunk;
	r->data_addr = (uint64_t)(uintptr_t)srv->data_mem;
	r->data_len = srv->data_len;
	r->lease_ms = (uint32_t)srv->cfg.lease_ms;
	r->grace_ms = (uint32_t)srv->cfg.grace_ms;
	r->max_value = (uint32_t)srv->cfg.max_value;
	r->big_grace_ms = (uint32_t)srv->cfg.big_grace_ms;
	if (srv->ctr_mr && !c->read_only) {
		r->counters_addr = (uint64_t)(uintptr_t)srv->ctr_mem;
		r->counters_count = (uint32_t)srv->cfg.counters;
	}
	/* Before the reply goes out: the client maps our regions (shm) as
	 * soon as it has it.  Cannot fail for an endpoint we accepted. */
	rkv_ep_grant(c->ep, c->read_only ? RKV_GRANT_READ : RKV_GRANT_WRITE);
	rkv_log(RKV_LOG_INFO, RKV_SRV_COMP, "%s connected%s (%u clients)",
		who(c, w, sizeof(w)), c->read_only ? " read-only" : "",
		srv->nclients);
}

static void do_chunk_alloc(struct rkv_srv_conn *c, const struct rkv_msg *m,
			   uint64_t now_ms)
{
	struct rkv_srv *srv = c->srv;
	struct rkv_msg_chunk_grant *g = &srv->rep.u.chunk_grant;
	uint64_t bytes = m->u.chunk_alloc.bytes, min = m->u.chunk_alloc.min_bytes;
	uint64_t off, len;
	struct rkv_space_stats st;

	memset(g, 0, sizeof(*g));
	if (!bytes)
		bytes = srv->cfg.chunk;
	if (c->read_only) {
		srv->denied++;
		g->status = -EPERM;
		return;
	}
	/* a chunk is at most --chunk's limit, or one block of the largest
	 * value this server takes */
	if (bytes % RKV_BLOCK_ALIGN ||
	    (bytes > RKV_SRV_CHUNK_MAX &&
	     bytes > rkv_block_size(RKV_KEY_MAX, srv->cfg.max_value)) ||
	    min % RKV_BLOCK_ALIGN || min > bytes) {
		g->status = -EINVAL;
		return;
	}
	if (c->nchunks >= srv->cfg.max_chunks) {
		g->status = -EDQUOT; /* --max-chunks: retire one first */
		return;
	}
	if (c->nchunks == c->chunks_cap) {
		size_t cap = c->chunks_cap ? c->chunks_cap * 2 : 16;
		struct rkv_space_extent *p =
			rkv_realloc(c->chunks, cap * sizeof(*p));

		if (!p) {
			g->status = -ENOMEM;
			return;
		}
		c->chunks = p;
		c->chunks_cap = cap;
	}
	g->status = rkv_space_grant(srv->space, bytes, min, &off, &len,
				    &g->grant);
	if (g->status == -ENOSPC &&
	    now_ms - srv->last_reclaim_ms >= RKV_CTRL_RECLAIM_MS)
		reclaim(srv, now_ms, "no room for a chunk");
	if (g->status == -ENOSPC) {
		/* full now; if what waits for its grace period could hold
		 * the block, the client asks again shortly */
		rkv_space_get_stats(srv->space, &st);
		if (st.grace >= (min ? min : bytes))
			g->status = -EBUSY;
	}
	if (g->status)
		return;
	c->chunks[c->nchunks++] = (struct rkv_space_extent){ off, len };
	rkv_log(RKV_LOG_DEBUG, RKV_SRV_COMP, "grant %u [%" PRIu64 ", +%" PRIu64
		") to client %u", g->grant, off, len, c->client_id);
	/* the new chunk is held now: a reclaim pass keeps it */
	rkv_space_get_stats(srv->space, &st);
	if (st.free < st.len / 16 &&
	    now_ms - srv->last_reclaim_ms >= RKV_CTRL_RECLAIM_MS)
		reclaim(srv, now_ms, "little room left");
	g->offset = off;
	g->len = len;
}

static void do_block_return(struct rkv_srv_conn *c, const struct rkv_msg *m,
			    uint64_t now_ms)
{
	struct rkv_srv *srv = c->srv;
	const struct rkv_msg_block_return *br = &m->u.block_return;
	char w[256];
	int rc;

	srv->rep.u.ack.status = 0;
	if (c->read_only) {
		srv->denied++;
		srv->rep.u.ack.status = -EPERM;
		return;
	}
	for (uint32_t i = 0; i < br->count; i++) {
		rc = rkv_space_return(srv->space, br->ext[i].offset,
				      br->ext[i].len, br->ext[i].grant, now_ms);
		if (rc == -ENOMEM) {
			srv->rep.u.ack.status = rc;
			return;
		}
		if (rc == 0)
			rkv_log(RKV_LOG_DEBUG, RKV_SRV_COMP,
				"%s: return [%" PRIu64 ", +%u) of grant %u",
				who(c, w, sizeof(w)), br->ext[i].offset,
				br->ext[i].len, br->ext[i].grant);
		if (rc == -ESTALE) {
			/* late or repeated: a reclaim pass already freed it */
			rkv_log(RKV_LOG_DEBUG, RKV_SRV_COMP,
				"%s: stale return [%" PRIu64 ", +%u) of grant "
				"%u ignored", who(c, w, sizeof(w)),
				br->ext[i].offset, br->ext[i].len,
				br->ext[i].grant);
			continue;
		}
		if (rc) {
			srv->bad_extents++;
			if (rkv_srv_warn_ok(srv, now_ms))
				rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
					"%s: returned extent [%" PRIu64
					", +%u) ignored: %s",
					who(c, w, sizeof(w)), br->ext[i].offset,
					br->ext[i].len,
					"invalid");
		}
	}
}

static void do_chunk_retire(struct rkv_srv_conn *c, const struct rkv_msg *m)
{
	const struct rkv_msg_chunk_retire *r = &m->u.chunk_retire;

	c->srv->rep.u.ack.status = -EINVAL;
	for (size_t i = 0; i < c->nchunks; i++) {
		if (c->chunks[i].offset == r->offset &&
		    c->chunks[i].len == r->len) {
			c->chunks[i] = c->chunks[--c->nchunks];
			c->srv->rep.u.ack.status = 0;
			return;
		}
	}
}

const char *rkv_srv_chunk_refusal_str(int r)
{
	static const char *const names[RKV_SRV_CHUNK_REFUSALS] = {
		"read_only", "invalid", "quota", "full", "wait_grace", "nomem",
	};

	return r >= 0 && r < RKV_SRV_CHUNK_REFUSALS ? names[r] : "?";
}

/* Count a refused CHUNK_ALLOC by its status. */
static void count_refusal(struct rkv_srv *srv, int status)
{
	switch (status) {
	case 0:
		return;
	case -EPERM:
		srv->chunk_refused[RKV_SRV_CHUNK_READ_ONLY]++;
		return;
	case -EDQUOT:
		srv->chunk_refused[RKV_SRV_CHUNK_QUOTA]++;
		return;
	case -ENOSPC:
		srv->chunk_refused[RKV_SRV_CHUNK_FULL]++;
		return;
	case -EBUSY:
		srv->chunk_refused[RKV_SRV_CHUNK_WAIT_GRACE]++;
		return;
	case -ENOMEM:
		srv->chunk_refused[RKV_SRV_CHUNK_NOMEM]++;
		return;
	default:
		srv->chunk_refused[RKV_SRV_CHUNK_INVALID]++;
		return;
	}
}

static void do_stats(struct rkv_srv *srv, uint64_t now_ms)
{
	struct rkv_msg_stats_reply *r = &srv->rep.u.stats_reply;
	struct rkv_space_stats st;

	rkv_space_get_stats(srv->space, &st);
	memset(r, 0, sizeof(*r));
	r->uptime_ms = now_ms - srv->start_ms;
	r->clients = srv->nclients;
	r->clients_total = srv->clients_total;
	r->keys = rkv_srv_index_count(srv->index_mem,
				      rkv_srv_used_slots(srv));
	r->nbuckets = srv->cfg.nbuckets;
	r->bucket_slots = srv->cfg.bucket_slots;
	r->levels = srv->levels;
	r->levels_max = srv->cfg.levels_max;
	r->index_slots = rkv_srv_used_slots(srv);
	r->data_len = st.len;
	r->data_free = st.free;
	r->data_grace = st.grace;
	r->chunks_granted = st.grants;
	r->blocks_returned = st.returns;
	r->rebuilds = st.rebuilds;
	r->bad_msgs = srv->bad_msgs;
	r->ctrl_msgs = srv->ctrl_msgs;
	r->auth_failures = srv->auth_failures;
	r->denied = srv->denied;
}

static void do_counter_open(struct rkv_srv_conn *c, const struct rkv_msg *m)
{
	struct rkv_msg_counter_reply *r = &c->srv->rep.u.counter_reply;
	int rc;

	memset(r, 0, sizeof(*r));
	if (c->read_only) {
		c->srv->denied++;
		r->status = -EPERM;
		return;
	}
	rc = rkv_srv_counter_lookup(c->srv, m->u.counter_open.name);
	if (rc < 0) {
		r->status = rc;
		return;
	}
	r->index = (uint32_t)rc;
}

/*
 * GROW (layout.h "Levels"): a client found a key's candidate buckets full
 * in every level it read.  A level is added when that count is still
 * ours: its pages are fresh (zero) memory of the index region, and the
 * level word says so with one store; clients READ it behind every bucket
 * round, so from the next round on every reader and inserter sees the
 * new level's buckets.  The fill of the levels before is logged: the load
 * factor each step was taken at.
 */
static void do_grow(struct rkv_srv_conn *c, const struct rkv_msg *m)
{
	struct rkv_srv *srv = c->srv;
	struct rkv_msg_grow_reply *r = &srv->rep.u.grow_reply;
	uint64_t used, slots;

	memset(r, 0, sizeof(*r));
	if (c->read_only) {
		srv->denied++;
		r->status = -EPERM;
		r->levels = srv->levels;
		return;
	}
	if (m->u.grow.levels == srv->levels &&
	    srv->levels < srv->cfg.levels_max) {
		uint64_t t0 = rkv_now_ns();

		rkv_srv_levels_set(srv, srv->levels + 1);
		srv->grows++;
		/* the fill it grew at, for the log (after the store: the
		 * clients waiting for it go on meanwhile) */
		slots = rkv_index_nbuckets(srv->cfg.nbuckets,
					   srv->levels - 1) *
			srv->cfg.bucket_slots;
		used = rkv_srv_index_count(srv->index_mem, slots);
		rkv_log(RKV_LOG_INFO, RKV_SRV_COMP,
			"index: level %u added (%" PRIu64 " slots in all, "
			"%.2f ms); the %u before held %" PRIu64 " of %" PRIu64
			" slots (%.1f %%)",
			srv->levels, rkv_srv_used_slots(srv),
			(double)(rkv_now_ns() - t0) / 1e6, srv->levels - 1,
			used, slots, slots ? 100.0 * (double)used / (double)slots
					   : 0.0);
	}
	r->levels = srv->levels;
	if (m->u.grow.levels >= srv->levels) /* none added: at its largest */
		r->status = -ENOSPC;
}

static int is_request(unsigned type)
{
	switch (type) {
	case RKV_MSG_GROW:
	case RKV_MSG_HELLO:
	case RKV_MSG_CHUNK_ALLOC:
	case RKV_MSG_BLOCK_RETURN:
	case RKV_MSG_CHUNK_RETIRE:
	case RKV_MSG_STATS:
	case RKV_MSG_COUNTER_OPEN:
	case RKV_MSG_AUTH_RESPONSE:
	case RKV_MSG_RKEY_ACK:
	case RKV_MSG_FENCE:
		return 1;
	}
	return 0;
}

/* A wrong, missing or misplaced response: count, say nothing, close. */
static int auth_fail(struct rkv_srv_conn *c, uint32_t req_id, uint64_t now_ms,
		     const char *why)
{
	struct rkv_srv *srv = c->srv;
	char w[256];

	srv->auth_failures++;
	/* error_and_close logs the warn line (with the peer) */
	rkv_log(RKV_LOG_DEBUG, RKV_SRV_COMP,
		"%s (name '%s'): authentication failed: %s",
		who(c, w, sizeof(w)), c->name, why);
	return error_and_close(c, req_id, -EACCES, now_ms,
			       "authentication failed");
}

/* HELLO with a secret configured: remember it, send a fresh nonce. */
static int do_challenge(struct rkv_srv_conn *c, const struct rkv_msg *m,
			uint64_t now_ms)
{
	struct rkv_srv *srv = c->srv;
	struct rkv_msg_auth_challenge *ch = &srv->rep.u.auth_challenge;
	int rc = rkv_srv_auth_nonce(c->nonce);

	if (rc)
		return error_and_close(c, m->hdr.req_id, -EAGAIN, now_ms,
				       "cannot draw a nonce: %s",
				       strerror(-rc));
	c->hello = m->u.hello;
	copy_name(c->name, m->u.hello.name); /* for logs only */
	c->nonce_live = 1;
	c->state = RKV_CONN_AUTH;
	init_rep(srv, RKV_MSG_AUTH_CHALLENGE, m->hdr.req_id);
	memset(ch, 0, sizeof(*ch));
	ch->alg = RKV_AUTH_HMAC_SHA256;
	ch->server_id = srv->server_id;
	memcpy(ch->nonce, c->nonce, sizeof(ch->nonce));
	return SERVED;
}

/* The address part of a transport peer ("HOST:PORT", "[V6]:PORT"), or
 * all of it when it has no port. */
static size_t peer_host_len(const char *p)
{
	const char *colon = strrchr(p, ':');
	const char *q;

	if (!colon || !colon[1])
		return strlen(p);
	for (q = colon + 1; *q; q++)
		if (*q < '0' || *q > '9')
			return strlen(p);
	return (size_t)(colon - p);
}

/*
 * Whether c's peer address has --max-clients-per-peer clients connected
 * already (tcp, verbs: every client is a connection, on verbs a QP; shm
 * peers are local processes, admitted by uid instead).
 */
static int peer_full(const struct rkv_srv_conn *c, unsigned *n)
{
	const struct rkv_srv *srv = c->srv;
	const char *me = rkv_ep_peer(c->ep);
	size_t ml = peer_host_len(me);

	*n = 0;
	if (rkv_tp_provider(srv->tp) == RKV_TP_SHM)
		return 0;
	for (uint32_t i = 0; i < srv->nslots; i++) {
		const struct rkv_srv_conn *o = srv->conns[i];
		const char *op;

		if (!o || o == c || o->state != RKV_CONN_READY)
			continue;
		op = rkv_ep_peer(o->ep);
		if (peer_host_len(op) == ml && !memcmp(op, me, ml))
			(*n)++;
	}
	return *n >= srv->cfg.max_clients_peer;
}

/* Whether c finds no room as a client (--max-clients,
 * --max-clients-per-peer); if so it was told -EUSERS and *rc is what
 * error_and_close said. */
static bool refuse_full(struct rkv_srv_conn *c, uint32_t req_id,
			uint64_t now_ms, int *rc)
{
	struct rkv_srv *srv = c->srv;
	unsigned np;

	if (srv->nclients >= srv->cfg.max_clients)
		*rc = error_and_close(c, req_id, -EUSERS, now_ms,
				      "server full: %u clients",
				      srv->nclients);
	else if (peer_full(c, &np))
		*rc = error_and_close(c, req_id, -EUSERS, now_ms,
				      "%u clients from this address "
				      "(--max-clients-per-peer)", np);
	else
		return false;
	return true;
}

/* AUTH_RESPONSE in RKV_CONN_AUTH: HELLO_REPLY or ERROR and close. */

static int do_auth_response(struct rkv_srv_conn *c, const struct rkv_msg *m,
			    uint64_t now_ms)
{
	struct rkv_srv *srv = c->srv;
	enum rkv_srv_access acc =
		c->nonce_live ? rkv_srv_auth_check(&srv->cfg, c->nonce,
						   c->hello.name,
						   m->u.auth_response.mac)
			      : RKV_SRV_ACCESS_NONE;
	int rc;

	/* single use, whatever the outcome */
	c->nonce_live = 0;
	rkv_srv_wipe(c->nonce, sizeof(c->nonce));
	if (acc == RKV_SRV_ACCESS_NONE)
		return auth_fail(c, m->hdr.req_id, now_ms, "wrong response");
	if (acc == RKV_SRV_ACCESS_READ) /* the server decides, not the ask */
		c->hello.flags |= RKV_HELLO_READ_ONLY;
	if (refuse_full(c, m->hdr.req_id, now_ms, &rc))
		return rc;
	init_rep(srv, RKV_MSG_HELLO_REPLY, m->hdr.req_id);
	do_hello(c, &c->hello);
	return SERVED;
}

static int bad_msg(struct rkv_srv_conn *c, uint64_t now_ms, const char *what)
{
	struct rkv_srv *srv = c->srv;
	char w[256];

	srv->bad_msgs++;
	if (rkv_srv_warn_ok(srv, now_ms))
		rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
			"%s: malformed message (%s); dropping the connection",
			who(c, w, sizeof(w)), what);
	conn_close(c, now_ms, 1, "malformed message");
	return CLOSED;
}

/* Reply ERROR -EALREADY to a second HELLO or AUTH_RESPONSE (no close). */
static void already_in(struct rkv_srv_conn *c, uint32_t req_id)
{
	struct rkv_srv *srv = c->srv;

	init_rep(srv, RKV_MSG_ERROR, req_id);
	memset(&srv->rep.u.error, 0, sizeof(srv->rep.u.error));
	srv->rep.u.error.status = -EALREADY;
	snprintf(srv->rep.u.error.text, sizeof(srv->rep.u.error.text),
		 "already connected as client %u", c->client_id);
}

/*
 * FENCE: serve no client of a map older than epoch (proto/msg.h).  The
 * index is registered anew first (shm: moved to fresh memory, the old
 * poisoned: rkv_srv_fence_index), so once the ACK leaves no one-sided
 * operation of a fenced client changes it or reads it; then their
 * connections close.
 */
int rkv_srv_fence(struct rkv_srv *srv, uint32_t epoch,
		  struct rkv_srv_conn *keep, uint64_t now_ms)
{
	unsigned closed = 0;
	char w[256];
	int rc;

	if (epoch <= srv->fence_epoch)
		return 0; /* fenced already (a coordinator's retry) */
	rc = rkv_srv_fence_index(srv, epoch, now_ms);
	if (rc)
		return rc;
	srv->fence_epoch = epoch;
	for (uint32_t i = 0; i < srv->nslots; i++) {
		struct rkv_srv_conn *o = srv->conns[i];

		/* epoch 0: not a client of the cluster's map (rkv stat, a
		 * direct client); it keeps going with the new rkeys */
		if (!o || o == keep || o->state != RKV_CONN_READY ||
		    !o->map_epoch || o->map_epoch >= epoch)
			continue;
		/* told first (an unsolicited ERROR): an idle client's CQ has
		 * it even where a closed connection gives no event */
		(void)error_and_close(o, 0, -ESTALE, now_ms,
				      "fenced: this server serves clients of "
				      "map epoch %u and later", epoch);
		closed++;
	}
	srv->fenced_out += closed;
	rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
		"fenced at map epoch %u%s%s: index rkeys replaced, %u "
		"connection(s) of older maps closed", epoch,
		keep ? " by " : "", keep ? who(keep, w, sizeof(w)) : "",
		closed);
	return 0;
}

static void do_fence(struct rkv_srv_conn *c, const struct rkv_msg *m,
		     uint64_t now_ms)
{
	struct rkv_srv *srv = c->srv;
	int32_t st = -EPERM;

	if (c->read_only || !c->map_epoch || c->map_epoch < m->u.fence.epoch)
		srv->denied++;
	else
		st = rkv_srv_fence(srv, m->u.fence.epoch, c, now_ms);
	/* (the notices to fenced clients used the reply buffer) */
	init_rep(srv, RKV_MSG_ACK, m->hdr.req_id);
	srv->rep.u.ack.status = st;
}

/* Post receive buffer rb again.  Returns enum serve_rc. */
static int repost(struct rkv_srv_conn *c, unsigned rb, uint64_t now_ms)
{
	int rc = post_recv(c, rb);

	if (rc) {
		conn_close(c, now_ms, 1, "cannot repost a RECV: %s",
			   strerror(-rc));
		return CLOSED;
	}
	return SERVED;
}

/* Serve receive buffer rb (a free send buffer exists).  Returns enum
 * serve_rc. */
static int serve(struct rkv_srv_conn *c, unsigned rb, uint64_t now_ms)
{
	struct rkv_srv *srv = c->srv;
	const struct rkv_msg *m = &srv->req;
	char what[96];
	int rc;

	rc = rkv_msg_decode(buf_of(c, rb), c->recv_len[rb], &srv->req);
	if (rc == -EPROTO)
		return error_and_close(c, m->hdr.req_id, -EPROTO, now_ms,
				       "protocol version %u not supported "
				       "(server speaks %u)",
				       m->hdr.version, RKV_PROTO_VERSION);
	if (rc) {
		snprintf(what, sizeof(what), "%u bytes: %s", c->recv_len[rb],
			 strerror(-rc));
		return bad_msg(c, now_ms, what);
	}
	if (!is_request(m->hdr.type)) {
		snprintf(what, sizeof(what), "%s is not a request",
			 rkv_msg_type_str(m->hdr.type));
		return bad_msg(c, now_ms, what);
	}
	srv->ctrl_msgs++;
	if (c->state == RKV_CONN_HELLO && m->hdr.type != RKV_MSG_HELLO)
		return error_and_close(c, m->hdr.req_id, -EPERM, now_ms,
				       "%s before HELLO",
				       rkv_msg_type_str(m->hdr.type));
	if (c->state == RKV_CONN_AUTH && m->hdr.type != RKV_MSG_AUTH_RESPONSE) {
		snprintf(what, sizeof(what), "%s instead of AUTH_RESPONSE",
			 rkv_msg_type_str(m->hdr.type));
		return auth_fail(c, m->hdr.req_id, now_ms, what);
	}

	if (m->hdr.type == RKV_MSG_RKEY_ACK) { /* a notice: no reply */
		if (c->state != RKV_CONN_READY ||
		    m->u.rkey_ack.epoch <= c->rkey_epoch ||
		    m->u.rkey_ack.epoch > c->rkey_sent)
			return bad_msg(c, now_ms, "RKEY_ACK of an epoch not sent");
		rkv_srv_rotate_ack(c, m->u.rkey_ack.epoch);
		return repost(c, rb, now_ms);
	}

	switch (m->hdr.type) {
	case RKV_MSG_HELLO:
		if (c->state == RKV_CONN_READY) {
			already_in(c, m->hdr.req_id);
			break;
		}
		if (refuse_full(c, m->hdr.req_id, now_ms, &rc))
			return rc;
		if (rkv_srv_auth_on(&srv->cfg)) {
			if (do_challenge(c, m, now_ms) == CLOSED)
				return CLOSED;
			if (c->state == RKV_CONN_CLOSING)
				return SERVED;
			break;
		}
		init_rep(srv, RKV_MSG_HELLO_REPLY, m->hdr.req_id);
		do_hello(c, &m->u.hello);
		break;
	case RKV_MSG_AUTH_RESPONSE:
		if (c->state != RKV_CONN_AUTH) { /* READY: already in */
			already_in(c, m->hdr.req_id);
			break;
		}
		if (do_auth_response(c, m, now_ms) == CLOSED)
			return CLOSED;
		if (c->state == RKV_CONN_CLOSING)
			return SERVED;
		break;
	case RKV_MSG_CHUNK_ALLOC:
		init_rep(srv, RKV_MSG_CHUNK_GRANT, m->hdr.req_id);
		do_chunk_alloc(c, m, now_ms);
		count_refusal(srv, srv->rep.u.chunk_grant.status);
		break;
	case RKV_MSG_BLOCK_RETURN:
		init_rep(srv, RKV_MSG_ACK, m->hdr.req_id);
		do_block_return(c, m, now_ms);
		break;
	case RKV_MSG_CHUNK_RETIRE:
		init_rep(srv, RKV_MSG_ACK, m->hdr.req_id);
		do_chunk_retire(c, m);
		break;
	case RKV_MSG_STATS:
		init_rep(srv, RKV_MSG_STATS_REPLY, m->hdr.req_id);
		do_stats(srv, now_ms);
		break;
	case RKV_MSG_COUNTER_OPEN:
		init_rep(srv, RKV_MSG_COUNTER_REPLY, m->hdr.req_id);
		do_counter_open(c, m);
		break;
	case RKV_MSG_FENCE:
		do_fence(c, m, now_ms);
		break;
	case RKV_MSG_GROW:
		init_rep(srv, RKV_MSG_GROW_REPLY, m->hdr.req_id);
		do_grow(c, m);
		break;
	}
	rc = send_reply(c, now_ms);
	if (rc) {
		conn_close(c, now_ms, 1, "cannot send a reply: %s",
			   strerror(-rc));
		return CLOSED;
	}
	return repost(c, rb, now_ms);
}

int rkv_srv_ctrl_send_rkeys(struct rkv_srv_conn *c, uint32_t epoch,
			    uint64_t now_ms)
{
	struct rkv_srv *srv = c->srv;
	struct rkv_msg_rkey_update *u = &srv->rep.u.rkey_update;
	int rc;

	if (c->state != RKV_CONN_READY ||
	    !(c->read_only ? srv->index_ro_mr : srv->index_mr))
		return 0;
	if (free_send(c) < 0)
		return -EBUSY;
	init_rep(srv, RKV_MSG_RKEY_UPDATE, 0);
	memset(u, 0, sizeof(*u));
	u->epoch = epoch;
	rc = rkv_ep_rkey(c->ep,
			 c->read_only ? srv->index_ro_mr : srv->index_mr,
			 &u->index_rkey);
	if (!rc)
		rc = rkv_ep_rkey(c->ep,
				 c->read_only ? srv->data_ro_mr : srv->data_mr,
				 &u->data_rkey);
	if (!rc && srv->ctr_mr && !c->read_only)
		rc = rkv_ep_rkey(c->ep, srv->ctr_mr, &u->counters_rkey);
	if (!rc)
		rc = send_reply(c, now_ms);
	if (rc) {
		conn_close(c, now_ms, 1, "cannot send RKEY_UPDATE: %s",
			   strerror(-rc));
		return rc;
	}
	c->rkey_sent = epoch;
	return 0;
}

/* Serve waiting requests while send buffers are free. */
static int drain(struct rkv_srv_conn *c, uint64_t now_ms)
{
	while (c->pend_n && c->state != RKV_CONN_CLOSING && free_send(c) >= 0) {
		unsigned rb = c->pend[c->pend_head];

		c->pend_head = (c->pend_head + 1) % c->nrecvs;
		c->pend_n--;
		if (serve(c, rb, now_ms) == CLOSED)
			return CLOSED;
	}
	return SERVED;
}

static void on_wc(struct rkv_srv *srv, const struct rkv_wc *wc, uint64_t now_ms)
{
	uint32_t slot = (uint32_t)(wc->wr_id >> 32);
	uint32_t gen = (uint32_t)(wc->wr_id >> 8) & 0xffffffu;
	unsigned b = (unsigned)(wc->wr_id & 0xff);
	struct rkv_srv_conn *c;

	if (slot >= srv->nslots || !(c = srv->conns[slot]) ||
	    (c->gen & 0xffffffu) != gen || b >= c->nrecvs + RKV_CTRL_SENDS)
		return; /* a closed connection's leftover */
	if (wc->status != RKV_WC_SUCCESS) {
		if (b < c->nrecvs && wc->status == RKV_WC_LOC_LEN_ERR) {
			bad_msg(c, now_ms, "longer than RKV_MSG_MAX");
			return;
		}
		/* the posted RECVs flushed: the peer closed the connection
		 * (or its process ended), the ordinary way to leave */
		if (b < c->nrecvs && wc->status == RKV_WC_WR_FLUSH_ERR)
			conn_close(c, now_ms, 1, "closed the connection");
		else
			conn_close(c, now_ms, 1, "connection lost (%s %s)",
				   b < c->nrecvs ? "RECV" : "SEND",
				   rkv_wc_status_str(wc->status));
		return;
	}
	if (b < c->nrecvs) {
		if (c->pend_n == c->nrecvs) { /* cannot happen */
			bad_msg(c, now_ms, "receive FIFO overflow");
			return;
		}
		c->recv_len[b] = wc->byte_len;
		c->pend[(c->pend_head + c->pend_n) % c->nrecvs] = (uint8_t)b;
		c->pend_n++;
	} else {
		c->send_busy &= ~(1u << (b - c->nrecvs));
		if (c->state == RKV_CONN_CLOSING && !c->send_busy) {
			conn_close(c, now_ms, 1, "after the final reply");
			return;
		}
	}
	drain(c, now_ms);
}

int rkv_srv_ctrl_poll(struct rkv_srv *srv, uint64_t now_ms)
{
	struct rkv_wc wc[RKV_CTRL_WC];
	int n = rkv_cq_poll(srv->cq, wc, RKV_CTRL_WC);

	if (n < 0) {
		rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP, "CQ poll failed: %s",
			strerror(-n));
		return n;
	}
	for (int i = 0; i < n; i++)
		on_wc(srv, &wc[i], now_ms);
	srv->completions += (uint64_t)n;
	return n;
}
