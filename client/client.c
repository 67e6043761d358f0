/* SPDX-License-Identifier: MIT */
/*
 * client.c - librkv's connections and progress engine: connecting to the
 * servers (HELLO), the control plane (chunk grants, block returns, stats),
 * doorbell batching, and the completion dispatcher that drives the
 * operation state machines in ops.c.
 *
 * Doorbells: an op appends the WRs of its next round to its server's
 * pending chain; client_progress() posts each server's chain with one
 * rkv_post, so ops submitted together (and mget batches) share doorbells.
 * Every round ends with one signaled WR; on RC its completion means the
 * whole round is done, so the send queue never holds more than
 * nslots * ROUND_MAX_WR + CTRL_SENDS WRs and is sized for that.
 *
 * Authentication: a server with a secret answers HELLO with a challenge;
 * the client answers HMAC-SHA256(secret, nonce || name || context) (see
 * proto/msg.h), computed by rkv_auth_mac (proto/auth.h) as the server
 * does, and only then gets the rkeys.
 * A read_only client fails put, delete and rmw with -EACCES before
 * sending anything (its rkeys would refuse them anyway).
 *
 * rkey rotation: a server may send RKEY_UPDATE at any time (proto/msg.h).
 * The new rkeys replace the old ones in the server's geometry and in every
 * WR queued for its next doorbell, then RKEY_ACK goes out on the same
 * endpoint behind every WR posted with an old key.  A client that was idle
 * polls its CQ before building WRs (client_progress), so it never posts
 * with keys the server may already have revoked.
 */
#include "client_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "alloc.h"
#include "auth.h"
#include "rtime.h"
#include "secret.h"

void clog_(struct rkv_client *c, int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!c->opts.log_fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->opts.log_fn(level, msg, c->opts.log_arg);
}

void rkv_client_opts_init(struct rkv_client_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->opts_size = sizeof(*opts);
	opts->name = "rkv";
	opts->timeout_ms = 5000;
	opts->connect_timeout_ms = 5000;
	opts->max_inflight = 32;
	opts->cache_entries = 65536;
	opts->max_value = RKV_VALUE_MAX;
	opts->gid_index = -1;
	opts->secret_file = getenv("RKV_SECRET_FILE");
	if (opts->secret_file && !*opts->secret_file)
		opts->secret_file = NULL;
}

/* ---------------------------------------------------------- server list */

static int add_server(struct rkv_client *c, const char *a, size_t n)
{
	while (n && (a[n - 1] == ' ' || a[n - 1] == '\t' || a[n - 1] == '\r'))
		n--;
	while (n && (*a == ' ' || *a == '\t')) {
		a++;
		n--;
	}
	if (n == 0)
		return 0;
	if (n >= sizeof(c->srv[0].addr) || c->nsrv >= MAX_SERVERS)
		return -EINVAL;
	memcpy(c->srv[c->nsrv].addr, a, n);
	c->srv[c->nsrv].addr[n] = '\0';
	c->nsrv++;
	return 0;
}

static int parse_servers(struct rkv_client *c)
{
	const char *s = c->opts.servers;
	int rc;

	if (s) {
		while (*s) {
			const char *e = strchr(s, ',');
			size_t n = e ? (size_t)(e - s) : strlen(s);

			rc = add_server(c, s, n);
			if (rc)
				return rc;
			s += n;
			if (*s == ',')
				s++;
		}
	} else if (c->opts.cluster_file) {
		FILE *f = fopen(c->opts.cluster_file, "r");
		char line[512];

		if (!f)
			return -errno;
		while (fgets(line, sizeof(line), f)) {
			char *h = strchr(line, '#');

			if (h)
				*h = '\0';
			line[strcspn(line, "\n")] = '\0';
			rc = add_server(c, line, strlen(line));
			if (rc) {
				fclose(f);
				return rc;
			}
		}
		fclose(f);
	}
	return c->nsrv ? 0 : -EINVAL;
}

/* ------------------------------------------------------------- control */

/* Send buffers: CTRL_SENDS for requests, then one for RKEY_ACK. */
#define CTRL_SEND_BUFS (CTRL_SENDS + 1)
#define CTRL_ACK_BUF CTRL_SENDS
/* Poll the CQ before building WRs after this long without a poll. */
#define IDLE_POLL_MS 20

static char *ctrl_send_buf(struct server *s, unsigned i)
{
	return s->ctrl_send + (size_t)i * RKV_MSG_MAX;
}

static char *ctrl_recv_buf(struct server *s, unsigned i)
{
	return s->ctrl_recv + (size_t)i * RKV_MSG_MAX;
}

static int post_ctrl_recv(struct server *s, unsigned i)
{
	struct rkv_recv_wr wr = {
		.wr_id = WRID_CTRL | WRID_CTRL_RECV | ((uint64_t)s->idx << 8) | i,
		.local = ctrl_recv_buf(s, i),
		.length = RKV_MSG_MAX,
		.lkey = s->c->lmr->lkey,
	};

	return rkv_post_recv(s->ep, &wr, NULL);
}

void srv_fail(struct server *s, int err)
{
	if (s->dead)
		return;
	s->dead = err;
	clog_(s->c, 3, "server %s: connection failed (%s)", s->addr,
	      strerror(-err));
	for (unsigned i = 0; i < CTRL_SENDS; i++) {
		if (s->req[i].busy && s->req[i].done_flag)
			*s->req[i].done_flag = err;
		s->req[i].busy = 0;
	}
}

int srv_ctrl_send(struct server *s, struct rkv_msg *m, struct rkv_msg *reply,
		  int *done_flag)
{
	unsigned i;
	int n;

	if (s->dead)
		return s->dead;
	for (i = 0; i < CTRL_SENDS; i++)
		if (!s->req[i].busy)
			break;
	if (i == CTRL_SENDS)
		return -EBUSY;
	m->hdr.req_id = ++s->next_req_id;
	n = rkv_msg_encode(m, ctrl_send_buf(s, i), RKV_MSG_MAX);
	if (n < 0)
		return n;
	struct rkv_wr wr = {
		.wr_id = WRID_CTRL | ((uint64_t)s->idx << 8) | i,
		.opcode = RKV_WR_SEND,
		.flags = RKV_WR_SIGNALED,
		.local = ctrl_send_buf(s, i),
		.length = (uint32_t)n,
		.lkey = s->c->lmr->lkey,
	};
	int rc = rkv_post(s->ep, &wr, NULL);

	if (rc)
		return rc;
	s->req[i] = (struct ctrl_req){ .busy = 1, .req_id = m->hdr.req_id,
				       .type = m->hdr.type,
				       .reply_to = reply,
				       .done_flag = done_flag };
	s->c->last_ctrl_ms = rkv_now_ms();
	return 0;
}

static void wake_space_waiters(struct server *s)
{
	struct rkv_client *c = s->c;

	for (unsigned i = 0; i < c->nslots; i++) {
		struct opslot *o = &c->slots[i];

		if (o->state == OP_WAIT_SPACE && o->srv == s)
			op_space_ready(o);
	}
}

static void retire_chunk_if_done(struct server *s, int ci)
{
	struct chunk *ch = &s->chunk[ci];
	struct rkv_msg m;

	if (!ch->in_use || ch->active || ch->pending)
		return;
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_CHUNK_RETIRE;
	m.u.chunk_retire.offset = ch->off;
	m.u.chunk_retire.len = ch->len;
	if (srv_ctrl_send(s, &m, NULL, NULL) == 0)
		ch->in_use = 0; /* else retried from srv_ctrl_tick */
}

static void handle_reply(struct server *s, const struct rkv_msg *m)
{
	struct rkv_client *c = s->c;
	unsigned i;

	for (i = 0; i < CTRL_SENDS; i++)
		if (s->req[i].busy && s->req[i].req_id == m->hdr.req_id)
			break;
	if (i == CTRL_SENDS) {
		clog_(c, 2, "server %s: unexpected %s (req %u)", s->addr,
		      rkv_msg_type_str(m->hdr.type), m->hdr.req_id);
		return;
	}
	struct ctrl_req r = s->req[i];

	s->req[i].busy = 0;
	if (r.reply_to)
		*r.reply_to = *m;
	if (r.done_flag)
		*r.done_flag = 1;
	if (r.type == RKV_MSG_CHUNK_ALLOC) {
		int st = m->hdr.type == RKV_MSG_CHUNK_GRANT ?
			 m->u.chunk_grant.status :
			 m->hdr.type == RKV_MSG_ERROR ? m->u.error.status :
							-EPROTO;
		s->chunk_req = 0;
		if (st == -EPERM) /* read-only client: no chunks */
			st = -EACCES;
		if (st == 0 && m->hdr.type == RKV_MSG_CHUNK_GRANT &&
		    m->u.chunk_grant.len >= RKV_BLOCK_ALIGN &&
		    m->u.chunk_grant.offset + m->u.chunk_grant.len <=
			    s->data_len) {
			for (unsigned k = 0; k < CHUNKS_MAX; k++) {
				struct chunk *ch = &s->chunk[k];

				if (ch->in_use)
					continue;
				s->busy_since_ms = 0;
				*ch = (struct chunk){
					.off = m->u.chunk_grant.offset,
					.len = m->u.chunk_grant.len,
					.grant = m->u.chunk_grant.grant,
					.active = 1, .in_use = 1 };
				c->st.chunks++;
				break;
			}
		} else {
			uint64_t now = rkv_now_ms();

			s->space_err = st ? st : -EPROTO;
			s->space_err_ms = now + 20;
			if (st == -EBUSY) {
				/* full, but space is in its grace period: ask
				 * again shortly, for at most a grace period */
				if (!s->busy_since_ms)
					s->busy_since_ms = now;
				s->space_err_ms = now + 5;
				if (now - s->busy_since_ms > s->grace_ms + 100u)
					s->space_err = -ENOSPC;
			}
		}
		wake_space_waiters(s);
	} else if (m->hdr.type == RKV_MSG_ERROR) {
		clog_(c, 2, "server %s: %s refused: %s", s->addr,
		      rkv_msg_type_str(r.type), m->u.error.text);
	}
}

/* Post RKEY_ACK for the epoch applied, unless the ACK buffer is busy (then
 * the SEND completion sends it). */
static void send_rkey_ack(struct server *s)
{
	struct rkv_msg m;
	int n, rc;

	if (s->dead || s->ack_busy || s->rkey_acked == s->rkey_epoch)
		return;
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_RKEY_ACK;
	m.u.rkey_ack.epoch = s->rkey_epoch;
	n = rkv_msg_encode(&m, ctrl_send_buf(s, CTRL_ACK_BUF), RKV_MSG_MAX);
	if (n < 0)
		return;
	struct rkv_wr wr = {
		.wr_id = WRID_CTRL | ((uint64_t)s->idx << 8) | CTRL_ACK_BUF,
		.opcode = RKV_WR_SEND,
		.flags = RKV_WR_SIGNALED,
		.local = ctrl_send_buf(s, CTRL_ACK_BUF),
		.length = (uint32_t)n,
		.lkey = s->c->lmr->lkey,
	};
	/* every queued WR (they carry the new keys now) goes first */
	srv_flush(s);
	rc = rkv_post(s->ep, &wr, NULL);
	if (rc) {
		srv_fail(s, rc);
		return;
	}
	s->ack_busy = 1;
	s->rkey_acked = s->rkey_epoch;
}

static void swap_rkey(struct rkv_wr *w, uint32_t from, uint32_t to)
{
	if (w->rkey == from)
		w->rkey = to;
}

/* RKEY_UPDATE: switch keys, also in WRs not posted yet, then acknowledge. */
static void apply_rkeys(struct server *s, const struct rkv_msg_rkey_update *u)
{
	struct rkv_client *c = s->c;

	if (u->epoch <= s->rkey_epoch) {
		clog_(c, 2, "server %s: stale RKEY_UPDATE (epoch %u after %u)",
		      s->addr, u->epoch, s->rkey_epoch);
		return;
	}
	for (struct rkv_wr *w = s->pend_head; w; w = w->next) {
		if (w->opcode == RKV_WR_SEND)
			continue;
		/* index and data rkeys are distinct registrations */
		if (w->rkey == s->index_rkey)
			w->rkey = u->index_rkey;
		else if (w->rkey == s->data_rkey)
			w->rkey = u->data_rkey;
		else if (s->counters_count)
			swap_rkey(w, s->counters_rkey, u->counters_rkey);
	}
	s->index_rkey = u->index_rkey;
	s->data_rkey = u->data_rkey;
	if (s->counters_count)
		s->counters_rkey = u->counters_rkey;
	s->rkey_epoch = u->epoch;
	c->st.rkey_updates++;
	clog_(c, 0, "server %s: rkeys of epoch %u", s->addr, u->epoch);
	send_rkey_ack(s);
}

static void handle_ctrl_wc(struct rkv_client *c, const struct rkv_wc *wc)
{
	unsigned si = (unsigned)(wc->wr_id >> 8) & 0xffff;
	unsigned bi = (unsigned)wc->wr_id & 0xff;
	struct server *s;
	struct rkv_msg m;

	if (si >= c->nsrv)
		return;
	s = &c->srv[si];
	if (wc->status != RKV_WC_SUCCESS) {
		srv_fail(s, -ECONNRESET);
		return;
	}
	if (!(wc->wr_id & WRID_CTRL_RECV)) {
		/* a SEND finished; a request waits for its reply */
		if (bi == CTRL_ACK_BUF) {
			s->ack_busy = 0;
			send_rkey_ack(s);
		}
		return;
	}
	if (bi >= CTRL_RECVS)
		return;
	int rc = rkv_msg_decode(ctrl_recv_buf(s, bi), wc->byte_len, &m);

	if (rc) {
		clog_(c, 3, "server %s: bad control message (%s)", s->addr,
		      strerror(-rc));
		srv_fail(s, rc == -EPROTO ? -EPROTO : -EBADMSG);
		return;
	}
	if (m.hdr.type == RKV_MSG_RKEY_UPDATE && m.hdr.req_id == 0)
		apply_rkeys(s, &m.u.rkey_update);
	else
		handle_reply(s, &m);
	if (!s->dead && post_ctrl_recv(s, bi))
		srv_fail(s, -ECONNRESET);
}

/* --------------------------------------------------------------- space */

/* The unwritten tail of chunk ch goes back (a full or departing chunk). */
static void return_tail(struct server *s, struct chunk *ch)
{
	uint64_t t = ch->off + ch->used, end = ch->off + ch->len;

	while (t < end) {
		uint32_t n = (uint32_t)(end - t > RKV_MAX_BLOCK ? RKV_MAX_BLOCK :
								  end - t);

		srv_block_return(s, t, n, ch->grant);
		t += n;
	}
	ch->used = ch->len;
}

int srv_block_alloc(struct server *s, uint32_t size, uint64_t *off,
		    int *chunk, uint32_t *grant)
{
	uint64_t now = rkv_now_ms();

	for (unsigned i = 0; i < CHUNKS_MAX; i++) {
		struct chunk *ch = &s->chunk[i];

		if (!ch->in_use || !ch->active)
			continue;
		if (ch->len - ch->used >= size) {
			*off = ch->off + ch->used;
			*chunk = (int)i;
			*grant = ch->grant;
			ch->used += size;
			ch->pending++;
			return 0;
		}
		/* full: hand the unwritten tail back, retire when settled */
		ch->active = 0;
		return_tail(s, ch);
		retire_chunk_if_done(s, (int)i);
	}
	if (s->space_err && now < s->space_err_ms)
		return s->space_err == -EBUSY ? -EAGAIN : s->space_err;
	s->space_err = 0;
	if (!s->chunk_req) {
		unsigned free_rec = 0;

		for (unsigned i = 0; i < CHUNKS_MAX; i++)
			free_rec += !s->chunk[i].in_use;
		if (free_rec) {
			struct rkv_msg m;

			memset(&m, 0, sizeof(m));
			m.hdr.type = RKV_MSG_CHUNK_ALLOC;
			if (!s->chunk_next)
				s->chunk_next = s->chunk_size < 16384 ?
							s->chunk_size : 16384;
			m.u.chunk_alloc.bytes =
				size > s->chunk_next ? size : s->chunk_next;
			m.u.chunk_alloc.min_bytes = size;
			if (srv_ctrl_send(s, &m, NULL, NULL) == 0) {
				s->chunk_req = 1;
				if (s->chunk_next < s->chunk_size / 2)
					s->chunk_next *= 2;
				else
					s->chunk_next = s->chunk_size;
			}
		}
	}
	return -EAGAIN;
}

void srv_block_settle(struct server *s, int ci)
{
	if (ci < 0 || ci >= CHUNKS_MAX || !s->chunk[ci].in_use)
		return;
	if (s->chunk[ci].pending)
		s->chunk[ci].pending--;
	retire_chunk_if_done(s, ci);
}

void srv_block_return(struct server *s, uint64_t off, uint32_t size,
		      uint32_t grant)
{
	if (s->ret_n == s->ret_cap) {
		unsigned cap = s->ret_cap ? s->ret_cap * 2 : 256;
		struct rkv_extent *r = rkv_realloc(s->ret, cap * sizeof(*r));

		if (!r)
			return; /* leaked until the server's rebuild */
		s->ret = r;
		s->ret_cap = cap;
	}
	if (s->ret_n == 0)
		s->ret_oldest_ms = rkv_now_ms();
	s->ret[s->ret_n++] = (struct rkv_extent){ .offset = off, .len = size,
						   .grant = grant };
}

static void flush_returns(struct server *s)
{
	while (s->ret_n && !s->dead) {
		struct rkv_msg m;
		unsigned n = s->ret_n < RKV_BLOCK_RETURN_MAX ?
				     s->ret_n : RKV_BLOCK_RETURN_MAX;

		memset(&m, 0, sizeof(m));
		m.hdr.type = RKV_MSG_BLOCK_RETURN;
		m.u.block_return.count = n;
		memcpy(m.u.block_return.ext, s->ret, n * sizeof(s->ret[0]));
		if (srv_ctrl_send(s, &m, NULL, NULL))
			return;
		memmove(s->ret, s->ret + n, (s->ret_n - n) * sizeof(s->ret[0]));
		s->ret_n -= n;
		s->c->st.blocks_returned += n;
		s->ret_oldest_ms = rkv_now_ms();
	}
}

void srv_ctrl_tick(struct server *s, uint64_t now_ms)
{
	uint64_t age = s->grace_ms / 4 < 100 ? s->grace_ms / 4 : 100;

	if (s->dead)
		return;
	if (s->ret_n && (s->ret_n >= RKV_BLOCK_RETURN_MAX ||
			 now_ms - s->ret_oldest_ms >= age))
		flush_returns(s);
	for (int i = 0; i < CHUNKS_MAX; i++)
		retire_chunk_if_done(s, i);
}

/* ----------------------------------------------------------- doorbells */

void srv_queue_wrs(struct server *s, struct rkv_wr *first, unsigned n)
{
	for (unsigned i = 0; i + 1 < n; i++)
		first[i].next = &first[i + 1];
	first[n - 1].next = NULL;
	if (s->pend_tail)
		s->pend_tail->next = first;
	else
		s->pend_head = first;
	s->pend_tail = &first[n - 1];
	s->pend_n += n;
}

static struct opslot *wr_op(uint64_t wr_id)
{
	return (struct opslot *)(uintptr_t)(wr_id & ~63ull);
}

static int wc_errno(enum rkv_wc_status st)
{
	switch (st) {
	case RKV_WC_SUCCESS: return 0;
	case RKV_WC_REM_ACCESS_ERR: return -EACCES;
	case RKV_WC_RETRY_EXC_ERR: return -ETIMEDOUT;
	default: return -ECONNRESET;
	}
}

void srv_flush(struct server *s)
{
	struct rkv_wr *bad = NULL, *w;
	int rc;

	if (!s->pend_head)
		return;
	struct rkv_wr *head = s->pend_head;

	s->pend_head = s->pend_tail = NULL;
	s->pend_n = 0;
	if (s->dead) {
		rc = s->dead;
		bad = head;
	} else {
		rc = rkv_post(s->ep, head, &bad);
		s->c->st.doorbells++;
		if (rc && !bad)
			bad = head;
		if (rc)
			srv_fail(s, rc);
	}
	if (!rc)
		return;
	/* fail every op whose round was not posted */
	for (w = bad; w; w = w->next) {
		if (w->wr_id & 1) {
			struct opslot *o = wr_op(w->wr_id);

			o->err = s->dead ? s->dead : rc;
			op_finish(o, o->err);
		}
	}
}

static void handle_op_wc(struct rkv_client *c, const struct rkv_wc *wc)
{
	struct opslot *o = wr_op(wc->wr_id);

	if (o < c->slots || o >= c->slots + c->nslots ||
	    o->state != OP_IO)
		return;
	if (wc->status != RKV_WC_SUCCESS) {
		int e = wc_errno(wc->status);

		if (!o->err)
			o->err = e;
		if (o->srv->ep && rkv_ep_state(o->srv->ep) == RKV_EP_ERROR)
			srv_fail(o->srv, e == -EACCES ? -EACCES : -ECONNRESET);
	}
	if (!(wc->wr_id & 1))
		return;
	if (((wc->wr_id >> 1) & 31) != (o->round & 31))
		return;
	if (o->err)
		op_finish(o, o->err);
	else
		op_round_done(o);
}

static int poll_cq(struct rkv_client *c)
{
	struct rkv_wc wc[32];
	int n = rkv_cq_poll(c->cq, wc, 32);

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		if (wc[i].wr_id & WRID_CTRL)
			handle_ctrl_wc(c, &wc[i]);
		else if (wc[i].wr_id & WRID_AUX)
			aux_wc(c, &wc[i]);
		else
			handle_op_wc(c, &wc[i]);
	}
	return n;
}

int client_progress(struct rkv_client *c)
{
	uint64_t now = 0, cnow = rkv_coarse_ms();
	int n, total = 0;

	/* Idle for a while: an RKEY_UPDATE may be waiting; take it before
	 * building WRs with keys that may be revoked. */
	if (cnow - c->last_poll_ms > IDLE_POLL_MS) {
		n = poll_cq(c);
		if (n < 0)
			return n;
		total += n;
	}
	c->last_poll_ms = cnow; /* the CQ is polled below in any case */

	for (unsigned i = 0; i < c->nslots; i++) {
		struct opslot *o = &c->slots[i];

		if (o->state == OP_START && c->opts.read_only &&
		    o->op->type != RKV_OP_GET) {
			/* its rkeys allow remote read only: fail here rather
			 * than break the connection with a refused WR */
			o->state = OP_IO;
			o->blk_size = 0;
			o->retries = 0;
			o->op->rtts = 0;
			o->op->out_len = 0;
			op_finish(o, -EACCES);
		} else if (o->state == OP_START) {
			op_start(o);
		} else if (o->state == OP_WAIT_TIMER ||
			   o->state == OP_WAIT_SPACE) {
			if (!now)
				now = rkv_now_ms();
			op_timer(o, now);
		}
	}
	for (unsigned i = 0; i < c->nsrv; i++)
		srv_flush(&c->srv[i]);
	n = poll_cq(c);
	if (n < 0)
		return n;
	total += n;
	if (n)
		for (unsigned i = 0; i < c->nsrv; i++)
			srv_flush(&c->srv[i]);
	if (!now)
		now = rkv_now_ms();
	if (now != c->last_ctrl_ms) {
		for (unsigned i = 0; i < c->nsrv; i++)
			srv_ctrl_tick(&c->srv[i], now);
		c->last_ctrl_ms = now;
	}
	return total;
}

/*
 * A synchronous control request: send m (retrying while every request slot
 * is busy) and wait for its reply in *reply, driving progress, all within
 * timeout_ms.  Returns 0, -ETIMEDOUT, or the connection's -errno.  A
 * request given up on is detached, so a late reply writes nowhere.
 */
int srv_ctrl_call(struct server *s, struct rkv_msg *m, struct rkv_msg *reply,
		  unsigned timeout_ms)
{
	struct rkv_client *c = s->c;
	uint64_t end = rkv_now_ms() + timeout_ms;
	int done = 0, rc;

	while ((rc = srv_ctrl_send(s, m, reply, &done)) == -EBUSY) {
		if (rkv_now_ms() > end)
			return -ETIMEDOUT;
		rc = client_progress(c);
		if (rc < 0)
			return rc;
	}
	if (rc)
		return rc;
	while (!done) {
		rc = client_progress(c);
		if (rc >= 0 && rkv_now_ms() > end)
			rc = -ETIMEDOUT;
		if (rc < 0)
			break;
	}
	if (!done) {
		for (unsigned i = 0; i < CTRL_SENDS; i++) {
			struct ctrl_req *q = &s->req[i];

			if (q->busy && q->req_id == m->hdr.req_id) {
				q->reply_to = NULL;
				q->done_flag = NULL;
			}
		}
		return rc;
	}
	return done < 0 ? done : 0;
}

/* ------------------------------------------------------------- connect */


/* The secret from opts (bytes, or a file like rkv-server's --secret-file:
 * not open to group or others, one trailing newline stripped). */
static int load_secret(struct rkv_client *c)
{
	const char *path = c->opts.secret_file;
	unsigned char buf[RKV_SECRET_MAX];
	char why[128];
	size_t n = 0;
	int rc;

	if (c->opts.secret && path)
		return -EINVAL;
	if (c->opts.secret) {
		if (!c->opts.secret_len || c->opts.secret_len > RKV_SECRET_MAX)
			return -EINVAL;
		c->secret = rkv_malloc(c->opts.secret_len);
		if (!c->secret)
			return -ENOMEM;
		memcpy(c->secret, c->opts.secret, c->opts.secret_len);
		c->secret_len = c->opts.secret_len;
		return 0;
	}
	if (!path)
		return 0;
	rc = rkv_secret_read(path, buf, &n, why, sizeof(why));
	if (rc) {
		clog_(c, 3, "secret file %s: %s", path, why);
		return rc;
	}
	c->secret = rkv_malloc(n);
	if (c->secret) {
		memcpy(c->secret, buf, n);
		c->secret_len = n;
	}
	OPENSSL_cleanse(buf, sizeof(buf));
	return c->secret ? 0 : -ENOMEM;
}

/* The server answered HELLO with a challenge: prove the secret.  On
 * success *reply holds the server's answer to the response. */
static int srv_authenticate(struct rkv_client *c, struct server *s,
			    const struct rkv_msg *hello, struct rkv_msg *reply)
{
	const struct rkv_msg_auth_challenge *ch = &reply->u.auth_challenge;
	struct rkv_msg m;
	int rc;

	if (!c->secret) {
		clog_(c, 3,
		      "server %s requires authentication and no secret is "
		      "configured (secret_file; RKV_SECRET_FILE for the CLI)",
		      s->addr);
		return -EACCES;
	}
	if (ch->alg != RKV_AUTH_HMAC_SHA256) {
		clog_(c, 3, "server %s: unknown authentication algorithm %u",
		      s->addr, ch->alg);
		return -EPROTO;
	}
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_AUTH_RESPONSE;
	/* the transcript the server checks: proto/auth.h */
	rc = rkv_auth_mac(c->secret, c->secret_len, ch->nonce,
			  hello->u.hello.name, m.u.auth_response.mac);
	if (rc)
		return rc;
	rc = srv_ctrl_call(s, &m, reply, c->opts.connect_timeout_ms);
	OPENSSL_cleanse(&m.u.auth_response, sizeof(m.u.auth_response));
	if (rc == -ECONNRESET && reply->hdr.type != RKV_MSG_ERROR)
		rc = -EACCES; /* closed on us without a word */
	if (rc) {
		clog_(c, 3, "server %s: authentication failed (%s)", s->addr,
		      strerror(-rc));
		return rc;
	}
	if (reply->hdr.type == RKV_MSG_ERROR &&
	    reply->u.error.status == -EACCES) {
		clog_(c, 3, "server %s: authentication failed (wrong secret?)",
		      s->addr);
		return -EACCES;
	}
	return 0;
}

static int srv_connect(struct rkv_client *c, struct server *s)
{
	struct rkv_msg m, reply;
	int rc;

	rc = rkv_connect(c->tp, s->addr, c->cq, (int)c->opts.connect_timeout_ms,
			 &s->ep);
	if (rc) {
		clog_(c, 3, "connect %s: %s", s->addr, strerror(-rc));
		return rc;
	}
	for (unsigned i = 0; i < CTRL_RECVS; i++) {
		rc = post_ctrl_recv(s, i);
		if (rc)
			return rc;
	}
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_HELLO;
	m.u.hello.flags = c->opts.read_only ? RKV_HELLO_READ_ONLY : 0;
	snprintf(m.u.hello.name, sizeof(m.u.hello.name), "%s",
		 c->opts.name ? c->opts.name : "rkv");
	rc = srv_ctrl_call(s, &m, &reply, c->opts.connect_timeout_ms);
	if (rc)
		return rc;
	if (reply.hdr.type == RKV_MSG_AUTH_CHALLENGE) {
		rc = srv_authenticate(c, s, &m, &reply);
		if (rc)
			return rc;
	} else if (c->secret) {
		clog_(c, 1, "server %s does not ask for authentication",
		      s->addr);
	}
	if (reply.hdr.type == RKV_MSG_ERROR) {
		clog_(c, 3, "server %s refused: %s", s->addr,
		      reply.u.error.text);
		return reply.u.error.status < 0 ? reply.u.error.status
						: -ECONNREFUSED;
	}
	if (reply.hdr.type != RKV_MSG_HELLO_REPLY)
		return -EPROTO;
	const struct rkv_msg_hello_reply *h = &reply.u.hello_reply;

	if (h->status)
		return h->status < 0 ? h->status : -EPROTO;
	if (!h->nbuckets || (h->nbuckets & (h->nbuckets - 1)) ||
	    !h->data_len || h->data_len > RKV_MAX_DATA_REGION ||
	    !h->chunk_size || h->grace_ms <= h->lease_ms)
		return -EPROTO;
	s->client_id = h->client_id;
	s->index_addr = h->index_addr;
	s->index_rkey = h->index_rkey;
	s->nbuckets = h->nbuckets;
	s->data_addr = h->data_addr;
	s->data_rkey = h->data_rkey;
	s->data_len = h->data_len;
	s->chunk_size = h->chunk_size;
	s->lease_ms = h->lease_ms;
	s->grace_ms = h->grace_ms;
	s->counters_addr = h->counters_addr;
	s->counters_rkey = h->counters_rkey;
	s->counters_count = h->counters_count;
	return 0;
}

int rkv_client_create(const struct rkv_client_opts *opts,
		      struct rkv_client **out)
{
	struct rkv_client *c;
	struct rkv_tp_opts to;
	struct rkv_tp_addr a;
	int rc;

	if (!opts || !out || opts->opts_size == 0 ||
	    opts->opts_size > sizeof(*opts))
		return -EINVAL;
	*out = NULL;
	c = rkv_calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	rkv_client_opts_init(&c->opts);
	memcpy(&c->opts, opts, opts->opts_size);
	c->opts.opts_size = sizeof(c->opts);
	if (!c->opts.max_inflight || c->opts.max_inflight > 1024 ||
	    !c->opts.timeout_ms || !c->opts.connect_timeout_ms ||
	    c->opts.max_value > RKV_VALUE_MAX) {
		rc = -EINVAL;
		goto err;
	}
	if (!c->opts.max_value)
		c->opts.max_value = RKV_VALUE_MAX;
	rc = load_secret(c);
	if (rc)
		goto err;
	c->srv = rkv_calloc(MAX_SERVERS, sizeof(*c->srv));
	if (!c->srv) {
		rc = -ENOMEM;
		goto err;
	}
	rc = parse_servers(c);
	if (rc)
		goto err;
	/* one provider for the whole cluster */
	rc = rkv_tp_addr_parse(c->srv[0].addr, &a);
	if (rc)
		goto err;
	for (unsigned i = 1; i < c->nsrv; i++) {
		struct rkv_tp_addr b;

		rc = rkv_tp_addr_parse(c->srv[i].addr, &b);
		if (rc)
			goto err;
		if (b.provider != a.provider) {
			rc = -EINVAL;
			goto err;
		}
	}
	c->nslots = c->opts.max_inflight;
	rkv_tp_opts_init(&to);
	to.provider = a.provider;
	to.device = c->opts.device;
	to.port = c->opts.port;
	to.gid_index = c->opts.gid_index;
	to.max_send_wr = c->nslots * ROUND_MAX_WR + CTRL_SEND_BUFS + 4;
	if (to.max_send_wr > 16384)
		to.max_send_wr = 16384;
	to.max_recv_wr = CTRL_RECVS + 4;
	to.timeout_ms = c->opts.timeout_ms < 2000 ? c->opts.timeout_ms : 2000;
	rc = rkv_tp_create(&to, &c->tp);
	if (rc)
		goto err;
	rc = rkv_cq_create(c->tp, c->nslots * ROUND_MAX_WR +
				   c->nsrv * (CTRL_SEND_BUFS + CTRL_RECVS) + 64,
			   &c->cq);
	if (rc)
		goto err;
	/* local registered memory: op buffers, new blocks, rmw output,
	 * control buffers */
	uint32_t maxblk = rkv_block_size(RKV_KEY_MAX, c->opts.max_value);

	c->op_buf_size = (OB_BLOCKS + (size_t)maxblk + 4095) & ~(size_t)4095;
	c->new_blk_size = ((size_t)maxblk + 4095) & ~(size_t)4095;
	size_t ctrl =
		(size_t)c->nsrv * (CTRL_RECVS + CTRL_SEND_BUFS) * RKV_MSG_MAX;

	c->lmem_len = c->nslots * (c->op_buf_size + c->new_blk_size) + ctrl +
		      AUX_WORDS * sizeof(uint64_t);
	c->lmem = mmap(NULL, c->lmem_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c->lmem == MAP_FAILED) {
		c->lmem = NULL;
		rc = -ENOMEM;
		goto err;
	}
	rc = rkv_mr_reg(c->tp, c->lmem, c->lmem_len, RKV_ACCESS_LOCAL_WRITE,
			&c->lmr);
	if (rc)
		goto err;
	c->slots = rkv_aligned_alloc(64, c->nslots * sizeof(*c->slots));
	if (!c->slots) {
		rc = -ENOMEM;
		goto err;
	}
	memset(c->slots, 0, c->nslots * sizeof(*c->slots));
	char *p = c->lmem;

	for (unsigned i = 0; i < c->nslots; i++) {
		c->slots[i].c = c;
		c->slots[i].buf = p;
		c->slots[i].lkey = c->lmr->lkey;
		p += c->op_buf_size;
	}
	c->new_blk = p;
	p += c->nslots * c->new_blk_size;
	rc = cache_init(c, c->opts.cache_entries);
	if (rc)
		goto err;
	for (unsigned i = 0; i < c->nsrv; i++) {
		struct server *s = &c->srv[i];

		s->c = c;
		s->idx = i;
		s->ctrl_recv = p;
		p += (size_t)CTRL_RECVS * RKV_MSG_MAX;
		s->ctrl_send = p;
		p += (size_t)CTRL_SEND_BUFS * RKV_MSG_MAX;
	}
	c->aux_words = (uint64_t *)(void *)p; /* 8-aligned: sizes above are */
	p += AUX_WORDS * sizeof(uint64_t);
	for (unsigned i = 0; i < c->nsrv; i++) {
		rc = srv_connect(c, &c->srv[i]);
		if (rc)
			goto err;
	}
	*out = c;
	return 0;
err:
	rkv_client_destroy(c);
	return rc;
}

void rkv_client_destroy(struct rkv_client *c)
{
	if (!c)
		return;
	/* hand back what we freed and the chunks we hold (bounded wait) */
	if (c->srv && c->cq) {
		uint64_t end = rkv_now_ms() + 1000;

		for (unsigned i = 0; i < c->nsrv; i++) {
			struct server *s = &c->srv[i];

			if (!s->ep || s->dead)
				continue;
			for (int k = 0; k < CHUNKS_MAX; k++) {
				struct chunk *ch = &s->chunk[k];

				if (ch->in_use && ch->active &&
				    ch->used < ch->len) {
					ch->active = 0;
					return_tail(s, ch);
				}
				if (ch->in_use)
					ch->active = 0;
			}
		}
		for (;;) {
			unsigned left = 0;

			for (unsigned i = 0; i < c->nsrv; i++) {
				struct server *s = &c->srv[i];

				if (!s->ep || s->dead)
					continue;
				flush_returns(s);
				for (int k = 0; k < CHUNKS_MAX; k++)
					retire_chunk_if_done(s, k);
				left += s->ret_n;
				for (int k = 0; k < CHUNKS_MAX; k++)
					left += s->chunk[k].in_use &&
						!s->chunk[k].pending;
				for (int k = 0; k < CTRL_SENDS; k++)
					left += s->req[k].busy;
			}
			if (!left || rkv_now_ms() > end)
				break;
			if (client_progress(c) < 0)
				break;
		}
	}
	if (c->srv) {
		for (unsigned i = 0; i < c->nsrv; i++) {
			rkv_ep_destroy(c->srv[i].ep);
			rkv_free(c->srv[i].ret);
		}
	}
	gpu_fini(c); /* device staging (gpu.c), before its context goes */
	cache_fini(c);
	rkv_free(c->slots);
	rkv_mr_dereg(c->lmr);
	if (c->lmem)
		munmap(c->lmem, c->lmem_len);
	rkv_cq_destroy(c->cq);
	rkv_tp_destroy(c->tp);
	rkv_free(c->srv);
	if (c->secret) {
		OPENSSL_cleanse(c->secret, c->secret_len);
		rkv_free(c->secret);
	}
	rkv_free(c);
}

unsigned rkv_client_nservers(const struct rkv_client *c)
{
	return c->nsrv;
}

const char *rkv_client_server_addr(const struct rkv_client *c, unsigned i)
{
	return i < c->nsrv ? c->srv[i].addr : NULL;
}

unsigned rkv_client_route(const struct rkv_client *c, const void *key,
			  size_t key_len)
{
	struct rkv_key_hash kh;

	rkv_key_hash(key, key_len, &kh);
	return rkv_jump_hash(kh.route, c->nsrv);
}

void rkv_client_stats(const struct rkv_client *c, struct rkv_client_stats *st)
{
	*st = c->st;
}

void rkv_client_stats_reset(struct rkv_client *c)
{
	memset(&c->st, 0, sizeof(c->st));
}

int rkv_server_stats(struct rkv_client *c, unsigned i,
		     struct rkv_server_stats *st)
{
	struct rkv_msg m, reply;
	int rc;

	if (i >= c->nsrv || !st)
		return -EINVAL;
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_STATS;
	rc = srv_ctrl_call(&c->srv[i], &m, &reply, c->opts.timeout_ms);
	if (rc)
		return rc;
	if (reply.hdr.type != RKV_MSG_STATS_REPLY)
		return reply.hdr.type == RKV_MSG_ERROR ? reply.u.error.status
						       : -EPROTO;
	const struct rkv_msg_stats_reply *r = &reply.u.stats_reply;

	*st = (struct rkv_server_stats){
		.uptime_ms = r->uptime_ms, .clients = r->clients,
		.clients_total = r->clients_total, .keys = r->keys,
		.nbuckets = r->nbuckets, .data_len = r->data_len,
		.data_free = r->data_free, .data_grace = r->data_grace,
		.chunks_granted = r->chunks_granted,
		.blocks_returned = r->blocks_returned,
		.rebuilds = r->rebuilds, .bad_msgs = r->bad_msgs,
		.ctrl_msgs = r->ctrl_msgs, .auth_failures = r->auth_failures,
	};
	return 0;
}
