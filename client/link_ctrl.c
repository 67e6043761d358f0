/* SPDX-License-Identifier: MIT */
/*
 * link_ctrl.c - the control channel of a server link (link_ctrl.h).
 *
 * Buffers: CTRL_RECVS receive buffers stay posted; CTRL_SENDS send
 * buffers carry requests, one more the RKEY_ACK.  Each buffer holds the
 * wr_ctx of its WRs, so a completion finds its buffer by container_of.
 *
 * rkey rotation (proto/msg.h): a server may send RKEY_UPDATE at any time.
 * The new keys replace the old ones in ctl->keys and in every WR queued
 * for the link's next doorbell, then RKEY_ACK goes out on the same
 * endpoint behind every WR posted with an old key (RC order), so the
 * server may revoke the old keys once the ACK arrives.
 */
#include "link_ctrl.h"

#include <errno.h>
#include <string.h>

#include "rtime.h"

#define CTRL_ACK_BUF CTRL_SENDS

static void send_rkey_ack(struct ctrl *ctl);

static int post_recv(struct ctrl_buf *b)
{
	struct rkv_recv_wr wr = {
		.wr_id = wr_ctx_id(&b->w),
		.local = b->mem,
		.length = RKV_MSG_MAX,
		.lkey = b->ctl->l->eng->lmr->lkey,
	};

	return rkv_post_recv(b->ctl->l->ep, &wr, NULL);
}

/* The link broke: every request waiting for a reply is over. */
static void ctrl_on_fail(struct link *l)
{
	struct ctrl *ctl = (struct ctrl *)l->on_fail_arg;

	for (unsigned i = 0; i < CTRL_SENDS; i++) {
		struct ctrl_req r = ctl->req[i];

		ctl->req[i].busy = 0;
		if (r.busy && r.done)
			r.done(r.arg, NULL, l->dead);
	}
}

static void handle_reply(struct ctrl *ctl, const struct rkv_msg *m)
{
	struct engine *e = ctl->l->eng;
	unsigned i;

	for (i = 0; i < CTRL_SENDS; i++)
		if (ctl->req[i].busy && ctl->req[i].req_id == m->hdr.req_id)
			break;
	if (i == CTRL_SENDS) {
		eng_log(e, RKV_LOG_WARN, "server %s: unexpected %s (req %u)",
			ctl->l->name, rkv_msg_type_str(m->hdr.type),
			m->hdr.req_id);
		return;
	}
	struct ctrl_req r = ctl->req[i];

	ctl->req[i].busy = 0;
	if (r.done)
		r.done(r.arg, m, 0);
	else if (m->hdr.type == RKV_MSG_ERROR)
		eng_log(e, RKV_LOG_WARN, "server %s: %s refused: %s",
			ctl->l->name, rkv_msg_type_str(r.type),
			m->u.error.text);
}

static void swap_rkey(struct rkv_wr *w, uint32_t from, uint32_t to)
{
	if (w->rkey == from)
		w->rkey = to;
}

/* RKEY_UPDATE: switch keys, also in WRs not posted yet, then acknowledge. */
static void apply_rkeys(struct ctrl *ctl, const struct rkv_msg_rkey_update *u)
{
	struct link *l = ctl->l;
	struct rkeys *k = &ctl->keys;

	if (u->epoch <= k->epoch) {
		eng_log(l->eng, RKV_LOG_WARN,
			"server %s: stale RKEY_UPDATE (epoch %u after %u)",
			l->name, u->epoch, k->epoch);
		return;
	}
	for (struct rkv_wr *w = l->pend_head; w; w = w->next) {
		if (w->opcode == RKV_WR_SEND)
			continue;
		/* index and data rkeys are distinct registrations */
		if (w->rkey == k->index)
			w->rkey = u->index_rkey;
		else if (w->rkey == k->data)
			w->rkey = u->data_rkey;
		else if (k->has_counters)
			swap_rkey(w, k->counters, u->counters_rkey);
	}
	k->index = u->index_rkey;
	k->data = u->data_rkey;
	if (k->has_counters)
		k->counters = u->counters_rkey;
	k->epoch = u->epoch;
	l->eng->st->rkey_updates++;
	eng_log(l->eng, RKV_LOG_DEBUG, "server %s: rkeys of epoch %u", l->name,
		u->epoch);
	send_rkey_ack(ctl);
}

static void recv_done(struct wr_ctx *w, const struct rkv_wc *wc)
{
	struct ctrl_buf *b = container_of(w, struct ctrl_buf, w);
	struct ctrl *ctl = b->ctl;
	struct rkv_msg m;
	int rc;

	if (wc->ep && wc->ep != ctl->l->ep)
		return; /* of a connection since replaced (reconnect) */
	if (wc->status != RKV_WC_SUCCESS) {
		link_fail(ctl->l, -ECONNRESET);
		return;
	}
	rc = rkv_msg_decode(b->mem, wc->byte_len, &m);
	if (rc) {
		eng_log(ctl->l->eng, RKV_LOG_ERROR,
			"server %s: bad control message (%s)", ctl->l->name,
			strerror(-rc));
		link_fail(ctl->l, rc == -EPROTO ? -EPROTO : -EBADMSG);
		return;
	}
	if (m.hdr.type == RKV_MSG_ERROR && m.hdr.req_id == 0) {
		/* the server closes us (a failover's fence: -ESTALE) */
		eng_log(ctl->l->eng, RKV_LOG_INFO, "server %s: %s",
			ctl->l->name, m.u.error.text);
		ctl->l->fenced = m.u.error.status == -ESTALE;
		link_fail(ctl->l, -ECONNRESET); /* its ops: connection lost */
		return;
	}
	if (m.hdr.type == RKV_MSG_RKEY_UPDATE && m.hdr.req_id == 0)
		apply_rkeys(ctl, &m.u.rkey_update);
	else
		handle_reply(ctl, &m);
	if (!ctl->l->dead && post_recv(b))
		link_fail(ctl->l, -ECONNRESET);
}

static void send_done(struct wr_ctx *w, const struct rkv_wc *wc)
{
	struct ctrl_buf *b = container_of(w, struct ctrl_buf, w);

	if (wc->ep && wc->ep != b->ctl->l->ep)
		return; /* of a connection since replaced (reconnect) */
	if (wc->status != RKV_WC_SUCCESS) {
		link_fail(b->ctl->l, -ECONNRESET);
		return;
	}
	/* a request's SEND finished: it waits for its reply */
	if (b->idx == CTRL_ACK_BUF) {
		b->ctl->ack_busy = 0;
		send_rkey_ack(b->ctl);
	}
}

static void never_unposted(struct wr_ctx *w, int err)
{
	(void)w;
	(void)err; /* control WRs are posted directly, never queued */
}

void ctrl_init(struct ctrl *ctl, struct link *l, char *mem)
{
	memset(ctl, 0, sizeof(*ctl));
	ctl->l = l;
	l->on_fail = ctrl_on_fail;
	l->on_fail_arg = ctl;
	for (unsigned i = 0; i < CTRL_RECVS; i++) {
		ctl->recv[i] = (struct ctrl_buf){
			.w = { .done = recv_done, .unposted = never_unposted },
			.ctl = ctl, .idx = i, .mem = mem };
		mem += RKV_MSG_MAX;
	}
	for (unsigned i = 0; i < CTRL_SEND_BUFS; i++) {
		ctl->send[i] = (struct ctrl_buf){
			.w = { .done = send_done, .unposted = never_unposted },
			.ctl = ctl, .idx = i, .mem = mem };
		mem += RKV_MSG_MAX;
	}
}

int ctrl_start(struct ctrl *ctl)
{
	for (unsigned i = 0; i < CTRL_RECVS; i++) {
		int rc = post_recv(&ctl->recv[i]);

		if (rc)
			return rc;
	}
	return 0;
}

static int post_send(struct ctrl *ctl, unsigned bi, const struct rkv_msg *m)
{
	struct ctrl_buf *b = &ctl->send[bi];
	int n = rkv_msg_encode(m, b->mem, RKV_MSG_MAX);

	if (n < 0)
		return n;
	struct rkv_wr wr = {
		.wr_id = wr_ctx_id(&b->w),
		.opcode = RKV_WR_SEND,
		.flags = RKV_WR_SIGNALED,
		.local = b->mem,
		.length = (uint32_t)n,
		.lkey = ctl->l->eng->lmr->lkey,
	};

	return rkv_post(ctl->l->ep, &wr, NULL);
}

int ctrl_send(struct ctrl *ctl, struct rkv_msg *m, ctrl_done_fn done,
	      void *arg)
{
	unsigned i;
	int rc;

	if (ctl->l->dead)
		return ctl->l->dead;
	for (i = 0; i < CTRL_SENDS; i++)
		if (!ctl->req[i].busy)
			break;
	if (i == CTRL_SENDS)
		return -EBUSY;
	m->hdr.req_id = ++ctl->next_req_id;
	rc = post_send(ctl, i, m);
	if (rc)
		return rc;
	ctl->req[i] = (struct ctrl_req){ .busy = 1, .req_id = m->hdr.req_id,
					 .type = m->hdr.type, .done = done,
					 .arg = arg };
	return 0;
}

unsigned ctrl_busy(const struct ctrl *ctl)
{
	unsigned n = 0;

	for (unsigned i = 0; i < CTRL_SENDS; i++)
		n += ctl->req[i].busy;
	return n;
}

/* Post RKEY_ACK for the epoch applied, unless the ACK buffer is busy (then
 * its SEND completion sends it). */
static void send_rkey_ack(struct ctrl *ctl)
{
	struct rkv_msg m;
	int rc;

	if (ctl->l->dead || ctl->ack_busy || ctl->keys.acked == ctl->keys.epoch)
		return;
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_RKEY_ACK;
	m.u.rkey_ack.epoch = ctl->keys.epoch;
	/* every queued WR (they carry the new keys now) goes first */
	link_flush(ctl->l);
	rc = post_send(ctl, CTRL_ACK_BUF, &m);
	if (rc) {
		link_fail(ctl->l, rc);
		return;
	}
	ctl->ack_busy = 1;
	ctl->keys.acked = ctl->keys.epoch;
}

/* ------------------------------------------------------ synchronous call */

struct call_wait {
	struct rkv_msg *reply;
	int done;                 /* 1: replied; -errno: the link failed */
};

static void call_done(void *arg, const struct rkv_msg *reply, int err)
{
	struct call_wait *cw = arg;

	if (reply) {
		*cw->reply = *reply;
		cw->done = 1;
	} else {
		cw->done = err ? err : -ECONNRESET;
	}
}

int ctrl_call(struct ctrl *ctl, struct rkv_msg *m, struct rkv_msg *reply,
	      unsigned timeout_ms)
{
	struct engine *e = ctl->l->eng;
	uint64_t end = rkv_now_ms() + timeout_ms;
	struct call_wait cw = { .reply = reply };
	int rc;

	while ((rc = ctrl_send(ctl, m, call_done, &cw)) == -EBUSY) {
		if (rkv_now_ms() > end)
			return -ETIMEDOUT;
		rc = eng_progress(e);
		if (rc < 0)
			return rc;
	}
	if (rc)
		return rc;
	while (!cw.done) {
		rc = eng_progress(e);
		if (rc >= 0 && rkv_now_ms() > end)
			rc = -ETIMEDOUT;
		if (rc < 0)
			break;
	}
	if (!cw.done) {
		for (unsigned i = 0; i < CTRL_SENDS; i++) {
			struct ctrl_req *q = &ctl->req[i];

			if (q->busy && q->req_id == m->hdr.req_id) {
				q->done = NULL;
				q->arg = NULL;
			}
		}
		return rc;
	}
	return cw.done < 0 ? cw.done : 0;
}

/* --------------------------------------------------- the space messages */

int ctrl_chunk_alloc(struct ctrl *ctl, uint32_t bytes, uint32_t min_bytes,
		     ctrl_done_fn done, void *arg)
{
	struct rkv_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_CHUNK_ALLOC;
	m.u.chunk_alloc.bytes = bytes;
	m.u.chunk_alloc.min_bytes = min_bytes;
	return ctrl_send(ctl, &m, done, arg);
}

int ctrl_chunk_retire(struct ctrl *ctl, uint64_t off, uint64_t len)
{
	struct rkv_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_CHUNK_RETIRE;
	m.u.chunk_retire.offset = off;
	m.u.chunk_retire.len = len;
	return ctrl_send(ctl, &m, NULL, NULL);
}

int ctrl_block_return(struct ctrl *ctl, const struct rkv_extent *ext,
		      unsigned n)
{
	struct rkv_msg m;

	if (n > RKV_BLOCK_RETURN_MAX)
		return -EINVAL;
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_BLOCK_RETURN;
	m.u.block_return.count = n;
	memcpy(m.u.block_return.ext, ext, n * sizeof(ext[0]));
	return ctrl_send(ctl, &m, NULL, NULL);
}
