/* SPDX-License-Identifier: MIT */
/*
 * fake.c - the deterministic fake provider (fake.h): in-process endpoints,
 * eager SEND/RECV, one-sided chains that run only when rkv_fake_step says.
 *
 * State is global and single-threaded: the listeners by name, every
 * endpoint (for kills), and the FIFO of queued one-sided chains.  A chain
 * is a copy of the posted WRs; rkv_fake_step executes them against the
 * target context's MR table, in order, and pushes completions (signaled
 * WRs, and any failure) to the initiator's CQ.  The first failure puts the
 * endpoint in error: the rest of its chains complete with WR_FLUSH_ERR,
 * like an RC queue pair.
 */
#include "fake.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../alloc.h"
#include "transport_internal.h"

struct fake_mr {
	struct rkv_mr base;
	struct fake_mr *next;
};

struct fake_tp {
	struct rkv_tp base;
	struct fake_mr *mrs;
	void *tag;
};

struct fake_cq {
	struct rkv_cq base;
	struct rkv_wc *q;            /* ring of cap completions */
	size_t head, n, cap;
};

struct fake_rqe {
	uint64_t wr_id;
	void *local;
	uint32_t length, lkey;
};

/* A SEND waiting for a RECV at its receiver. */
struct fake_msg {
	struct fake_msg *next;
	uint64_t wr_id;
	int signaled;
	struct fake_ep *from;
	size_t len;
	unsigned char data[];
};

struct fake_ep {
	struct rkv_ep base;
	struct fake_tp *ftp;
	struct fake_ep *peer;        /* NULL once disconnected */
	struct fake_ep *all_next;    /* every endpoint */
	struct fake_ep *bl_next;     /* listener backlog */
	struct fake_listener *backlog; /* waiting in its backlog */
	struct fake_rqe *rq;         /* ring of posted RECVs */
	size_t rq_head, rq_n, rq_cap;
	struct fake_msg *ux_head, *ux_tail; /* SENDs waiting for a RECV */
};

struct fake_listener {
	struct rkv_listener base;
	struct fake_listener *next;
	char name[65];
	struct fake_ep *bl_head, *bl_tail;
};

struct fake_chain_q {
	struct fake_chain_q *next;
	uint64_t id;
	struct fake_ep *ep;
	unsigned nwr, done;
	struct rkv_wr wr[];
};

static struct {
	struct fake_listener *listeners;
	struct fake_ep *eps;
	struct fake_chain_q *ch_head, *ch_tail;
	uint64_t next_chain;
	uint64_t activity;
	uint32_t next_key;
	unsigned live;
	void *next_tag;
	void (*idle_fn)(void *);
	void *idle_arg;
	int in_idle;
	rkv_fake_msg_fn msg_fn;
	void *msg_arg;
	unsigned conn_seq;
	int no_atomics;
} g_fake;

/* ------------------------------------------------------------ helpers */

static struct fake_tp *ftp_of(struct rkv_tp *tp)
{
	return container_of(tp, struct fake_tp, base);
}

static struct fake_ep *fep_of(struct rkv_ep *ep)
{
	return container_of(ep, struct fake_ep, base);
}

static void cq_push(struct rkv_cq *bcq, uint64_t wr_id, int status,
		    enum rkv_wr_opcode op, uint32_t byte_len, struct rkv_ep *ep)
{
	struct fake_cq *cq;

	if (!bcq)
		return; /* passive end not accepted yet: nobody to tell */
	cq = container_of(bcq, struct fake_cq, base);
	if (cq->n == cq->cap) {
		size_t cap = cq->cap * 2;
		struct rkv_wc *q = rkv_calloc(cap, sizeof(*q));

		if (!q)
			abort(); /* a test harness out of memory */
		for (size_t i = 0; i < cq->n; i++)
			q[i] = cq->q[(cq->head + i) % cq->cap];
		rkv_free(cq->q);
		cq->q = q;
		cq->head = 0;
		cq->cap = cap;
	}
	cq->q[(cq->head + cq->n) % cq->cap] = (struct rkv_wc){
		.wr_id = wr_id, .status = (enum rkv_wc_status)status,
		.opcode = op, .byte_len = byte_len, .ep = ep };
	cq->n++;
	g_fake.activity++;
}

/* The MR of tp with key (lkey == rkey here) covering [p, p+len). */
static struct fake_mr *mr_find(struct fake_tp *tp, uint32_t key, uint64_t p,
			       uint64_t len)
{
	for (struct fake_mr *m = tp->mrs; m; m = m->next) {
		uint64_t a = (uint64_t)(uintptr_t)m->base.addr;

		if (m->base.rkey != key)
			continue;
		if (p < a || len > m->base.length || p - a > m->base.length - len)
			return NULL;
		return m;
	}
	return NULL;
}

static int local_ok(struct fake_ep *ep, const void *p, uint32_t len,
		    uint32_t lkey, int write)
{
	struct fake_mr *m;

	if (len == 0)
		return 1;
	m = mr_find(ep->ftp, lkey, (uint64_t)(uintptr_t)p, len);
	return m && (!write || (m->base.access & RKV_ACCESS_LOCAL_WRITE));
}

/* Flush every posted RECV of ep with WR_FLUSH_ERR. */
static void flush_recvs(struct fake_ep *ep)
{
	while (ep->rq_n) {
		struct fake_rqe *r = &ep->rq[ep->rq_head];

		ep->rq_head = (ep->rq_head + 1) % ep->rq_cap;
		ep->rq_n--;
		cq_push(ep->base.cq, r->wr_id, RKV_WC_WR_FLUSH_ERR, RKV_WR_RECV,
			0, &ep->base);
	}
}

static void drop_msgs(struct fake_ep *ep)
{
	while (ep->ux_head) {
		struct fake_msg *m = ep->ux_head;

		ep->ux_head = m->next;
		rkv_free(m);
	}
	ep->ux_tail = NULL;
}

static void chain_unlink(struct fake_chain_q *c)
{
	struct fake_chain_q **pp = &g_fake.ch_head, *prev = NULL;

	while (*pp && *pp != c) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (!*pp)
		return;
	*pp = c->next;
	if (g_fake.ch_tail == c)
		g_fake.ch_tail = prev;
	rkv_free(c);
}

/* Drop ep's queued chains; with flush, complete their WRs as flushed. */
static void drop_chains(struct fake_ep *ep, int flush)
{
	struct fake_chain_q *c = g_fake.ch_head, *next;

	for (; c; c = next) {
		next = c->next;
		if (c->ep != ep)
			continue;
		for (unsigned i = c->done; flush && i < c->nwr; i++)
			cq_push(ep->base.cq, c->wr[i].wr_id,
				RKV_WC_WR_FLUSH_ERR, c->wr[i].opcode, 0,
				&ep->base);
		chain_unlink(c);
	}
}

static void ep_error(struct fake_ep *ep)
{
	ep->base.state = RKV_EP_ERROR;
	drop_chains(ep, 1);
	flush_recvs(ep);
}

/* The link to the peer is gone (peer destroyed or killed). */
static void disconnect(struct fake_ep *ep)
{
	if (ep->peer)
		ep->peer->peer = NULL;
	ep->peer = NULL;
	ep_error(ep);
}

/* ----------------------------------------------------------- SEND/RECV */

/* Place m (from its sender) into ep's next RECV, if one is posted. */
static int deliver_one(struct fake_ep *ep, struct fake_ep *from,
		       uint64_t wr_id, int signaled, const void *buf,
		       size_t len)
{
	struct fake_rqe r;

	if (!ep->rq_n)
		return 0;
	r = ep->rq[ep->rq_head];
	ep->rq_head = (ep->rq_head + 1) % ep->rq_cap;
	ep->rq_n--;
	if (len > r.length) {
		cq_push(ep->base.cq, r.wr_id, RKV_WC_LOC_LEN_ERR, RKV_WR_RECV,
			0, &ep->base);
		if (from)
			cq_push(from->base.cq, wr_id, RKV_WC_REM_INV_REQ_ERR,
				RKV_WR_SEND, 0, &from->base);
		return 1;
	}
	if (len)
		memcpy(r.local, buf, len);
	if (g_fake.msg_fn)
		g_fake.msg_fn(from ? from->ftp->tag : NULL, ep->ftp->tag, buf,
			      len, g_fake.msg_arg);
	cq_push(ep->base.cq, r.wr_id, RKV_WC_SUCCESS, RKV_WR_RECV,
		(uint32_t)len, &ep->base);
	if (from && signaled)
		cq_push(from->base.cq, wr_id, RKV_WC_SUCCESS, RKV_WR_SEND, 0,
			&from->base);
	return 1;
}

static void deliver_waiting(struct fake_ep *ep)
{
	while (ep->ux_head && ep->rq_n) {
		struct fake_msg *m = ep->ux_head;

		ep->ux_head = m->next;
		if (!ep->ux_head)
			ep->ux_tail = NULL;
		/* the sender may be gone: its completion goes nowhere */
		deliver_one(ep, m->from && m->from->peer == ep ? m->from : NULL,
			    m->wr_id, m->signaled, m->data, m->len);
		rkv_free(m);
	}
}

static int do_send(struct fake_ep *ep, const struct rkv_wr *w)
{
	struct fake_ep *peer = ep->peer;
	struct fake_msg *m;

	if (!local_ok(ep, w->local, w->length, w->lkey, 0))
		return RKV_WC_LOC_PROT_ERR;
	if (!peer)
		return RKV_WC_RETRY_EXC_ERR;
	if (!peer->ux_head &&
	    deliver_one(peer, ep, w->wr_id, w->flags & RKV_WR_SIGNALED,
			w->local, w->length))
		return -1; /* completed (or failed) by deliver_one */
	m = rkv_malloc(sizeof(*m) + w->length);
	if (!m)
		return RKV_WC_GENERAL_ERR;
	*m = (struct fake_msg){ .wr_id = w->wr_id,
				.signaled = !!(w->flags & RKV_WR_SIGNALED),
				.from = ep, .len = w->length };
	if (w->length)
		memcpy(m->data, w->local, w->length);
	if (peer->ux_tail)
		peer->ux_tail->next = m;
	else
		peer->ux_head = m;
	peer->ux_tail = m;
	deliver_waiting(peer);
	return -1;
}

/* ----------------------------------------------------------- one-sided */

static unsigned need_of(enum rkv_wr_opcode op)
{
	switch (op) {
	case RKV_WR_READ: return RKV_ACCESS_REMOTE_READ;
	case RKV_WR_WRITE: return RKV_ACCESS_REMOTE_WRITE;
	default: return RKV_ACCESS_REMOTE_ATOMIC;
	}
}

/* Execute one one-sided WR at the peer.  Returns its status. */
static int exec_wr(struct fake_ep *ep, const struct rkv_wr *w)
{
	struct fake_ep *peer = ep->peer;
	struct fake_mr *m;
	unsigned char *t;

	if (!local_ok(ep, w->local, w->length, w->lkey,
		      w->opcode != RKV_WR_WRITE))
		return RKV_WC_LOC_PROT_ERR;
	if (!peer)
		return RKV_WC_RETRY_EXC_ERR;
	m = mr_find(peer->ftp, w->rkey, w->remote_addr, w->length);
	if (!m || !(m->base.access & need_of(w->opcode)))
		return RKV_WC_REM_ACCESS_ERR;
	t = (unsigned char *)(uintptr_t)w->remote_addr;
	switch (w->opcode) {
	case RKV_WR_READ:
		if (w->length)
			memmove(w->local, t, w->length);
		break;
	case RKV_WR_WRITE:
		if (w->length)
			memmove(t, w->local, w->length);
		break;
	case RKV_WR_CAS: {
		uint64_t old;

		memcpy(&old, t, 8);
		if (old == w->compare_add)
			memcpy(t, &w->swap, 8);
		memcpy(w->local, &old, 8);
		break;
	}
	case RKV_WR_FETCH_ADD: {
		uint64_t old, nw;

		memcpy(&old, t, 8);
		nw = old + w->compare_add;
		memcpy(t, &nw, 8);
		memcpy(w->local, &old, 8);
		break;
	}
	default:
		return RKV_WC_REM_INV_REQ_ERR;
	}
	return RKV_WC_SUCCESS;
}

size_t rkv_fake_pending(struct rkv_fake_chain *out, size_t max)
{
	size_t n = 0;

	for (struct fake_chain_q *c = g_fake.ch_head; c; c = c->next, n++) {
		if (n < max)
			out[n] = (struct rkv_fake_chain){
				.id = c->id, .tag = c->ep->ftp->tag,
				.ep = &c->ep->base, .nwr = c->nwr,
				.done = c->done, .wr = c->wr };
	}
	return n;
}

int rkv_fake_step(uint64_t id, unsigned nwr)
{
	struct fake_chain_q *c;
	struct fake_ep *ep;

	for (c = g_fake.ch_head; c && c->id != id; c = c->next)
		;
	if (!c)
		return -ENOENT;
	ep = c->ep;
	for (struct fake_chain_q *o = g_fake.ch_head; o != c; o = o->next)
		if (o->ep == ep)
			return -EBUSY;
	if (nwr == 0 || nwr > c->nwr - c->done)
		nwr = c->nwr - c->done;
	g_fake.activity++;
	for (unsigned i = 0; i < nwr; i++) {
		const struct rkv_wr *w = &c->wr[c->done++];
		int st = exec_wr(ep, w);

		if (st != RKV_WC_SUCCESS) {
			cq_push(ep->base.cq, w->wr_id, st, w->opcode, 0,
				&ep->base);
			ep_error(ep); /* flushes the rest, frees c */
			return 1;
		}
		if (w->flags & RKV_WR_SIGNALED)
			cq_push(ep->base.cq, w->wr_id, RKV_WC_SUCCESS,
				w->opcode, w->opcode == RKV_WR_READ ?
				w->length : 0, &ep->base);
	}
	if (c->done < c->nwr)
		return 0;
	chain_unlink(c);
	return 1;
}

static int fake_post(struct rkv_ep *bep, struct rkv_wr *wr, struct rkv_wr **bad)
{
	struct fake_ep *ep = fep_of(bep);
	struct fake_chain_q *c = NULL;
	unsigned n = 0;

	(void)bad;
	g_fake.activity++;
	for (struct rkv_wr *w = wr; w; w = w->next)
		n += w->opcode != RKV_WR_SEND;
	for (struct rkv_wr *w = wr; w; w = w->next) {
		int st;

		if (ep->base.state == RKV_EP_ERROR) {
			cq_push(bep->cq, w->wr_id, RKV_WC_WR_FLUSH_ERR,
				w->opcode, 0, bep);
			continue;
		}
		if (w->opcode == RKV_WR_SEND) {
			st = do_send(ep, w);
			if (st >= 0) {
				cq_push(bep->cq, w->wr_id, st, w->opcode, 0,
					bep);
				ep_error(ep);
			}
			continue;
		}
		if (!c) {
			c = rkv_malloc(sizeof(*c) + n * sizeof(c->wr[0]));
			if (!c)
				return -ENOMEM;
			*c = (struct fake_chain_q){ .id = ++g_fake.next_chain,
						    .ep = ep };
		}
		c->wr[c->nwr] = *w;
		c->wr[c->nwr].next = NULL;
		c->nwr++;
	}
	if (c && c->nwr) {
		if (g_fake.ch_tail)
			g_fake.ch_tail->next = c;
		else
			g_fake.ch_head = c;
		g_fake.ch_tail = c;
	} else {
		rkv_free(c);
	}
	return 0;
}

static int fake_post_recv(struct rkv_ep *bep, struct rkv_recv_wr *wr,
			  struct rkv_recv_wr **bad)
{
	struct fake_ep *ep = fep_of(bep);

	g_fake.activity++;
	for (struct rkv_recv_wr *w = wr; w; w = w->next) {
		if (ep->base.state == RKV_EP_ERROR) {
			cq_push(bep->cq, w->wr_id, RKV_WC_WR_FLUSH_ERR,
				RKV_WR_RECV, 0, bep);
			continue;
		}
		if (!local_ok(ep, w->local, w->length, w->lkey, 1)) {
			if (bad)
				*bad = w;
			return -EINVAL;
		}
		if (ep->rq_n == ep->rq_cap) {
			if (bad)
				*bad = w;
			return -ENOMEM;
		}
		ep->rq[(ep->rq_head + ep->rq_n) % ep->rq_cap] =
			(struct fake_rqe){ .wr_id = w->wr_id, .local = w->local,
					   .length = w->length,
					   .lkey = w->lkey };
		ep->rq_n++;
	}
	deliver_waiting(ep);
	return 0;
}

/* ------------------------------------------------------------ contexts */

static int fake_create(const struct rkv_tp_opts *opts, struct rkv_tp **out)
{
	struct fake_tp *tp = rkv_calloc(1, sizeof(*tp));

	(void)opts;
	if (!tp)
		return -ENOMEM;
	tp->tag = g_fake.next_tag;
	tp->base.has_atomics = !g_fake.no_atomics;
	snprintf(tp->base.describe, sizeof(tp->base.describe),
		 "fake (deterministic, single-threaded%s)",
		 g_fake.no_atomics ? ", no atomics" : "");
	g_fake.live++;
	*out = &tp->base;
	return 0;
}

static void fake_destroy(struct rkv_tp *btp)
{
	struct fake_tp *tp = ftp_of(btp);

	while (tp->mrs) {
		struct fake_mr *m = tp->mrs;

		tp->mrs = m->next;
		rkv_free(m);
	}
	g_fake.live--;
	rkv_free(tp);
}

static int fake_mem_alloc(struct rkv_tp *tp, size_t len, void **out)
{
	void *p;

	(void)tp;
	p = rkv_aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	if (!p)
		return -ENOMEM;
	memset(p, 0, len);
	*out = p;
	return 0;
}

static void fake_mem_free(struct rkv_tp *tp, void *addr, size_t len)
{
	(void)tp;
	(void)len;
	rkv_free(addr);
}

static int fake_mr_reg(struct rkv_tp *btp, void *addr, size_t len,
		       unsigned access, struct rkv_mr **out)
{
	struct fake_tp *tp = ftp_of(btp);
	struct fake_mr *m = rkv_calloc(1, sizeof(*m));

	(void)addr;
	(void)len;
	(void)access;
	if (!m)
		return -ENOMEM;
	/* unique in the process: another context's key never matches */
	m->base.lkey = m->base.rkey = ++g_fake.next_key;
	m->next = tp->mrs;
	tp->mrs = m;
	*out = &m->base;
	return 0;
}

static int fake_mr_dereg(struct rkv_mr *bmr)
{
	struct fake_tp *tp = ftp_of(bmr->tp);

	for (struct fake_mr **pp = &tp->mrs; *pp; pp = &(*pp)->next) {
		if (&(*pp)->base == bmr) {
			struct fake_mr *m = *pp;

			*pp = m->next;
			rkv_free(m);
			return 0;
		}
	}
	return -EINVAL;
}

static int fake_cq_create(struct rkv_tp *tp, unsigned depth,
			  struct rkv_cq **out)
{
	struct fake_cq *cq = rkv_calloc(1, sizeof(*cq));

	(void)tp;
	(void)depth;
	if (!cq)
		return -ENOMEM;
	cq->cap = 16;
	cq->q = rkv_calloc(cq->cap, sizeof(*cq->q));
	if (!cq->q) {
		rkv_free(cq);
		return -ENOMEM;
	}
	g_fake.live++;
	*out = &cq->base;
	return 0;
}

static void fake_cq_destroy(struct rkv_cq *bcq)
{
	struct fake_cq *cq = container_of(bcq, struct fake_cq, base);

	g_fake.live--;
	rkv_free(cq->q);
	rkv_free(cq);
}

static int fake_cq_poll(struct rkv_cq *bcq, struct rkv_wc *wc, int max)
{
	struct fake_cq *cq = container_of(bcq, struct fake_cq, base);
	int n = 0;

	if (!cq->n && g_fake.idle_fn && !g_fake.in_idle) {
		g_fake.in_idle = 1;
		g_fake.idle_fn(g_fake.idle_arg);
		g_fake.in_idle = 0;
	}
	while (n < max && cq->n) {
		wc[n++] = cq->q[cq->head];
		cq->head = (cq->head + 1) % cq->cap;
		cq->n--;
	}
	if (n)
		g_fake.activity++;
	return n;
}

static int fake_cq_wait(struct rkv_cq *cq, struct pollfd *fds,
			unsigned nfds, unsigned timeout_us)
{
	(void)cq;
	(void)fds;
	(void)nfds;
	(void)timeout_us;
	return 0; /* never blocks: the caller polls again */
}

/* ---------------------------------------------------- connection setup */

static void fake_ep_destroy(struct rkv_ep *bep);

static int ep_new(struct fake_tp *tp, unsigned nrecv, const char *peer,
		  struct fake_ep **out)
{
	struct fake_ep *ep = rkv_calloc(1, sizeof(*ep));

	if (!ep)
		return -ENOMEM;
	ep->ftp = tp;
	ep->rq_cap = nrecv ? nrecv : 1;
	ep->rq = rkv_calloc(ep->rq_cap, sizeof(*ep->rq));
	if (!ep->rq) {
		rkv_free(ep);
		return -ENOMEM;
	}
	ep->base.state = RKV_EP_CONNECTED;
	snprintf(ep->base.peer, sizeof(ep->base.peer), "%s", peer);
	ep->all_next = g_fake.eps;
	g_fake.eps = ep;
	g_fake.live++;
	*out = ep;
	return 0;
}

static int fake_listen(struct rkv_tp *btp, const struct rkv_tp_addr *a,
		       struct rkv_listener **out)
{
	struct fake_listener *l;

	for (l = g_fake.listeners; l; l = l->next)
		if (strcmp(l->name, a->name) == 0)
			return -EADDRINUSE;
	l = rkv_calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	(void)btp;
	snprintf(l->name, sizeof(l->name), "%s", a->name);
	snprintf(l->base.addr, sizeof(l->base.addr), "fake:///%s", a->name);
	l->next = g_fake.listeners;
	g_fake.listeners = l;
	g_fake.live++;
	*out = &l->base;
	return 0;
}

static void fake_listener_destroy(struct rkv_listener *bl)
{
	struct fake_listener *l = container_of(bl, struct fake_listener, base);

	for (struct fake_listener **pp = &g_fake.listeners; *pp;
	     pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	}
	/* requests never accepted: refused */
	while (l->bl_head) {
		struct fake_ep *ep = l->bl_head;

		l->bl_head = ep->bl_next;
		ep->backlog = NULL;
		disconnect(ep);
	}
	g_fake.live--;
	rkv_free(l);
}

static int fake_accept(struct rkv_listener *bl, struct rkv_cq *cq,
		       int timeout_ms, struct rkv_ep **out)
{
	struct fake_listener *l = container_of(bl, struct fake_listener, base);
	struct fake_ep *ep = l->bl_head;

	(void)timeout_ms;
	if (!ep)
		return -ETIMEDOUT;
	l->bl_head = ep->bl_next;
	if (!l->bl_head)
		l->bl_tail = NULL;
	ep->backlog = NULL;
	ep->bl_next = NULL;
	ep->base.cq = cq; /* rkv_accept sets it too; RECVs post before */
	g_fake.activity++;
	*out = &ep->base;
	return 0;
}

static int fake_connect(struct rkv_tp *btp, const struct rkv_tp_addr *a,
			struct rkv_cq *cq, int timeout_ms, struct rkv_ep **out)
{
	struct fake_tp *tp = ftp_of(btp);
	struct fake_listener *l;
	struct fake_ep *act, *pas;
	char peer[96];
	int rc;

	(void)timeout_ms;
	for (l = g_fake.listeners; l; l = l->next)
		if (strcmp(l->name, a->name) == 0)
			break;
	if (!l)
		return -ECONNREFUSED;
	/* the listener's context is the one that accepts */
	snprintf(peer, sizeof(peer), "fake:///%s", a->name);
	rc = ep_new(tp, btp->opts.max_recv_wr, peer, &act);
	if (rc)
		return rc;
	snprintf(peer, sizeof(peer), "fake-client-%u", ++g_fake.conn_seq);
	rc = ep_new(ftp_of(l->base.tp), l->base.tp->opts.max_recv_wr, peer,
		    &pas);
	if (rc) {
		fake_ep_destroy(&act->base);
		return rc;
	}
	act->base.cq = cq;
	act->peer = pas;
	pas->peer = act;
	pas->backlog = l;
	if (l->bl_tail)
		l->bl_tail->bl_next = pas;
	else
		l->bl_head = pas;
	l->bl_tail = pas;
	g_fake.activity++;
	*out = &act->base;
	return 0;
}

static void fake_ep_destroy(struct rkv_ep *bep)
{
	struct fake_ep *ep = fep_of(bep);

	if (ep->backlog) {
		struct fake_listener *l = ep->backlog;
		struct fake_ep **pp = &l->bl_head, *prev = NULL;

		while (*pp && *pp != ep) {
			prev = *pp;
			pp = &(*pp)->bl_next;
		}
		if (*pp)
			*pp = ep->bl_next;
		if (l->bl_tail == ep)
			l->bl_tail = prev;
	}
	drop_chains(ep, 0);
	if (ep->peer)
		disconnect(ep->peer);
	drop_msgs(ep);
	for (struct fake_ep **pp = &g_fake.eps; *pp; pp = &(*pp)->all_next) {
		if (*pp == ep) {
			*pp = ep->all_next;
			break;
		}
	}
	g_fake.live--;
	g_fake.activity++;
	rkv_free(ep->rq);
	rkv_free(ep);
}

/* -------------------------------------------------------- test control */

void rkv_fake_set_no_atomics(int on)
{
	g_fake.no_atomics = on;
}

void rkv_fake_set_next_tag(void *tag)
{
	g_fake.next_tag = tag;
}

int rkv_fake_kill(void *tag)
{
	int n = 0;

	for (struct fake_ep *ep = g_fake.eps; ep; ep = ep->all_next) {
		if (ep->ftp->tag != tag || ep->base.state == RKV_EP_ERROR)
			continue;
		/* a dead process: its queued work never executes */
		drop_chains(ep, 0);
		if (ep->peer)
			disconnect(ep->peer);
		ep->base.state = RKV_EP_ERROR;
		n++;
	}
	g_fake.activity++;
	return n;
}

void rkv_fake_set_idle_hook(void (*fn)(void *arg), void *arg)
{
	g_fake.idle_fn = fn;
	g_fake.idle_arg = arg;
}

void rkv_fake_set_msg_hook(rkv_fake_msg_fn fn, void *arg)
{
	g_fake.msg_fn = fn;
	g_fake.msg_arg = arg;
}

uint64_t rkv_fake_activity(void)
{
	return g_fake.activity;
}

unsigned rkv_fake_live(void)
{
	return g_fake.live;
}

const struct rkv_tp_ops rkv_tp_fake_ops = {
	.name = "fake",
	.create = fake_create,
	.destroy = fake_destroy,
	.mem_alloc = fake_mem_alloc,
	.mem_free = fake_mem_free,
	.mr_reg = fake_mr_reg,
	.mr_dereg = fake_mr_dereg,
	.cq_create = fake_cq_create,
	.cq_destroy = fake_cq_destroy,
	.cq_poll = fake_cq_poll,
	.cq_wait = fake_cq_wait,
	.listen = fake_listen,
	.listener_destroy = fake_listener_destroy,
	.accept = fake_accept,
	.connect = fake_connect,
	.ep_destroy = fake_ep_destroy,
	.post = fake_post,
	.post_recv = fake_post_recv,
};
