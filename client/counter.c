/* SPDX-License-Identifier: MIT */
/*
 * counter.c - counters and barriers: named 8-byte words in the servers'
 * counter regions, changed by one-sided FETCH_ADD and read by READ.
 *
 * A counter id is (server index << 32 | word index).  The name routes to a
 * server by the key hash; COUNTER_OPEN (control plane) gives the word.
 * Each one-sided WR here is posted alone and signaled on the server's
 * endpoint, with wr_id WRID_AUX | seq, and the caller drives
 * client_progress until aux_wc() saw that completion; the result word is
 * one of the client's registered aux words.  The send queue has room: it
 * is sized with 4 WRs of slack beyond the op slots and control sends, and
 * at most one aux WR is outstanding (a call waits for it; after a timeout
 * the endpoint is failed, so the stale completion never lands).
 */
#include "client_internal.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "rkv_ps.h"
#include "rtime.h"

_Static_assert(RKV_COUNTER_NAME_LEN + 1 == RKV_COUNTER_NAME_MAX,
	       "public counter name limit matches the wire");

struct rkv_ps_barrier {
	struct rkv_client *c;
	uint64_t id;
	unsigned n;
};

static void nap_us(long us)
{
	struct timespec ts = { 0, us * 1000 };

	nanosleep(&ts, NULL);
}

void aux_wc(struct rkv_client *c, const struct rkv_wc *wc)
{
	if ((wc->wr_id & ~WRID_AUX) != c->aux.seq || c->aux.done)
		return; /* a stale completion */
	switch (wc->status) {
	case RKV_WC_SUCCESS:
		c->aux.status = 0;
		break;
	case RKV_WC_REM_ACCESS_ERR:
		c->aux.status = -EACCES;
		break;
	case RKV_WC_RETRY_EXC_ERR:
		c->aux.status = -ETIMEDOUT;
		break;
	default:
		c->aux.status = -ECONNRESET;
		break;
	}
	c->aux.done = 1;
	if (wc->status == RKV_WC_SUCCESS)
		return;
	for (unsigned i = 0; i < c->nsrv; i++)
		if (c->srv[i].ep == wc->ep &&
		    rkv_ep_state(wc->ep) == RKV_EP_ERROR)
			srv_fail(&c->srv[i], c->aux.status == -EACCES ?
						     -EACCES : -ECONNRESET);
}

/* Post wr (one signaled WR into c->aux_words[0]) on s and wait for it. */
static int aux_run(struct rkv_client *c, struct server *s, struct rkv_wr *wr)
{
	uint64_t end = rkv_now_ms() + c->opts.timeout_ms;
	int rc;

	if (s->dead)
		return s->dead;
	c->aux.seq = (c->aux.seq + 1) & ~(WRID_AUX | WRID_CTRL |
					  WRID_CTRL_RECV);
	c->aux.done = 0;
	c->aux.status = 0;
	wr->wr_id = WRID_AUX | c->aux.seq;
	wr->flags = RKV_WR_SIGNALED;
	wr->local = &c->aux_words[0];
	wr->lkey = c->lmr->lkey;
	wr->length = 8;
	wr->next = NULL;
	rc = rkv_post(s->ep, wr, NULL);
	if (rc) {
		srv_fail(s, rc);
		return rc;
	}
	while (!c->aux.done) {
		rc = client_progress(c);
		if (rc < 0)
			return rc;
		if (s->dead && !c->aux.done)
			return s->dead;
		if (rkv_now_ms() > end) {
			/* the endpoint cannot be trusted to complete it */
			srv_fail(s, -ETIMEDOUT);
			return -ETIMEDOUT;
		}
	}
	return c->aux.status;
}

static int id_check(struct rkv_client *c, uint64_t id, struct server **s)
{
	unsigned si = (unsigned)(id >> 32);
	uint32_t w = (uint32_t)id;

	if (!c || si >= c->nsrv || w >= c->srv[si].counters_count)
		return -EINVAL;
	*s = &c->srv[si];
	return 0;
}

int rkv_counter_open(struct rkv_client *c, const char *name, uint64_t *id)
{
	struct rkv_msg m, reply;
	struct server *s;
	size_t len;
	int rc;

	if (!c || !name || !id)
		return -EINVAL;
	len = strlen(name);
	if (len == 0 || len > RKV_COUNTER_NAME_LEN)
		return -EINVAL;
	s = &c->srv[rkv_client_route(c, name, len)];
	if (!s->counters_count)
		return -ENODEV;
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_COUNTER_OPEN;
	memcpy(m.u.counter_open.name, name, len + 1);
	rc = srv_ctrl_call(s, &m, &reply, c->opts.timeout_ms);
	if (rc)
		return rc;
	if (reply.hdr.type == RKV_MSG_ERROR)
		return reply.u.error.status < 0 ? reply.u.error.status : -EPROTO;
	if (reply.hdr.type != RKV_MSG_COUNTER_REPLY)
		return -EPROTO;
	if (reply.u.counter_reply.status)
		return reply.u.counter_reply.status < 0 ?
			       reply.u.counter_reply.status : -EPROTO;
	if (reply.u.counter_reply.index >= s->counters_count)
		return -EPROTO;
	*id = (uint64_t)s->idx << 32 | reply.u.counter_reply.index;
	return 0;
}

int rkv_counter_add(struct rkv_client *c, uint64_t id, uint64_t delta,
		    uint64_t *old)
{
	struct server *s;
	int rc = id_check(c, id, &s);

	if (rc)
		return rc;
	struct rkv_wr wr = {
		.opcode = RKV_WR_FETCH_ADD,
		.remote_addr = s->counters_addr + (uint32_t)id * 8ull,
		.rkey = s->counters_rkey,
		.compare_add = delta,
	};

	rc = aux_run(c, s, &wr);
	if (rc == 0 && old)
		*old = c->aux_words[0];
	return rc;
}

int rkv_counter_read(struct rkv_client *c, uint64_t id, uint64_t *val)
{
	struct server *s;
	int rc = id_check(c, id, &s);

	if (rc || !val)
		return rc ? rc : -EINVAL;
	struct rkv_wr wr = {
		.opcode = RKV_WR_READ,
		.remote_addr = s->counters_addr + (uint32_t)id * 8ull,
		.rkey = s->counters_rkey,
	};

	rc = aux_run(c, s, &wr);
	if (rc == 0)
		*val = c->aux_words[0];
	return rc;
}

int rkv_ps_barrier_create(struct rkv_client *c, const char *name,
			  unsigned nworkers, struct rkv_ps_barrier **out)
{
	struct rkv_ps_barrier *b;
	uint64_t id;
	int rc;

	if (!c || !name || !out || nworkers == 0)
		return -EINVAL;
	*out = NULL;
	rc = rkv_counter_open(c, name, &id);
	if (rc)
		return rc;
	b = rkv_calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->c = c;
	b->id = id;
	b->n = nworkers;
	*out = b;
	return 0;
}

int rkv_ps_barrier_wait(struct rkv_ps_barrier *b, unsigned timeout_ms)
{
	uint64_t old, v, target, end;
	long nap = 50;
	int rc;

	if (!b)
		return -EINVAL;
	end = rkv_now_ms() + timeout_ms;
	rc = rkv_counter_add(b->c, b->id, 1, &old);
	if (rc)
		return rc;
	/* every arrival of one generation sees old in [g*n, (g+1)*n): a
	 * participant cannot arrive for generation g+1 before g ended */
	target = (old / b->n + 1) * b->n;
	for (;;) {
		if (old + 1 >= target)
			return 0; /* the last to arrive */
		rc = rkv_counter_read(b->c, b->id, &v);
		if (rc)
			return rc;
		if (v >= target)
			return 0;
		if (rkv_now_ms() > end)
			return -ETIMEDOUT;
		nap_us(nap);
		if (nap < 1000)
			nap *= 2;
	}
}

void rkv_ps_barrier_destroy(struct rkv_ps_barrier *b)
{
	rkv_free(b);
}
