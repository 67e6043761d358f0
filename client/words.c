/* SPDX-License-Identifier: MIT */
/*
 * words.c - the servers' counter regions (rkv-server --counters N), for
 * the extension point (rkv_ext.h): a name maps to a word through the
 * control plane (COUNTER_OPEN); the word changes by one-sided FETCH_ADD
 * and is read by READ.
 *
 * Each one-sided WR here is posted alone and signaled on the server's
 * endpoint, its wr_ctx in one of the client's AUX_CALLS call records, and
 * the caller drives progress until that call completed; the result lands
 * in the record's registered aux word.  The send queue has room: it is
 * sized with 4 WRs of slack beyond the op slots and control sends.  A
 * call given up on (timeout: its endpoint is failed) keeps its record
 * until the late completion (a flush) comes, so nothing lands in a call
 * that is gone.
 */
#include "client.h"

#include <errno.h>
#include <string.h>

#include "rtime.h"

static void aux_done(struct wr_ctx *w, const struct rkv_wc *wc)
{
	struct aux_call *a = container_of(w, struct aux_call, w);

	a->status = wc_errno(wc->status);
	a->done = 1;
	if (a->status)
		link_wc_error(&a->p->link, a->status);
	if (a->abandoned)
		a->busy = a->abandoned = 0;
}

static void aux_unposted(struct wr_ctx *w, int err)
{
	(void)w;
	(void)err; /* posted directly, never queued */
}

int aux_run(struct rkv_client *c, struct peer *p, struct rkv_wr *wr,
	    uint64_t *val)
{
	return aux_run_n(c, p, wr, 1, val);
}

int aux_run_n(struct rkv_client *c, struct peer *p, struct rkv_wr *wr,
	      unsigned n, uint64_t *val)
{
	uint64_t end = rkv_now_ms() + c->opts.timeout_ms;
	struct aux_call *a = NULL;
	unsigned i;
	int rc = 0;

	if (p->link.dead)
		return p->link.dead;
	for (i = 0; i < AUX_CALLS && !a; i++)
		if (!c->aux[i].busy)
			a = &c->aux[i];
	if (!a)
		return -EBUSY; /* every record waits for a late completion */
	*a = (struct aux_call){ .w = { .done = aux_done,
				       .unposted = aux_unposted },
				.busy = 1, .p = p, .word = a->word };
	for (i = 0; i < n; i++) {
		/* one doorbell; the last WR signaled: RC completes it after
		 * all the others */
		wr[i].wr_id = wr_ctx_id(&a->w);
		wr[i].flags = i + 1 == n ? RKV_WR_SIGNALED : 0;
		if (!wr[i].local) {
			wr[i].local = a->word;
			wr[i].lkey = c->eng.lmr->lkey;
			wr[i].length = 8;
		}
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	rc = rkv_post(p->link.ep, wr, NULL);
	if (rc) {
		a->busy = 0;
		link_fail(&p->link, rc);
		return rc;
	}
	while (!a->done) {
		rc = eng_progress(&c->eng);
		if (rc >= 0)
			rc = 0;
		if (!rc && p->link.dead && !a->done)
			rc = p->link.dead;
		if (!rc && rkv_now_ms() > end) {
			/* the endpoint cannot be trusted to complete it */
			link_fail(&p->link, -ETIMEDOUT);
			rc = -ETIMEDOUT;
		}
		if (rc && !a->done) {
			a->abandoned = 1; /* freed by the late completion */
			return rc;
		}
	}
	if (a->status && n > 1)
		return a->status; /* flushes of the others may still come:
				   * the record stays taken */
	a->busy = 0;
	if (a->status == 0 && val)
		*val = *a->word;
	return a->status;
}

int aux_levels(struct rkv_client *c, struct peer *p)
{
	struct rkv_wr wr = { .opcode = RKV_WR_READ,
			     .remote_addr = peer_level_addr(p),
			     .rkey = p->ctrl.keys.index };
	uint64_t w = 0;
	unsigned lv;
	int rc;

	if (p->g.levels_max <= 1)
		return 0;
	rc = aux_run(c, p, &wr, &w);
	if (rc)
		return rc;
	lv = rkv_level_word_levels(w);
	if (!lv || lv > p->g.levels_max)
		return -EPROTO;
	peer_levels_seen(p, w, p->g.levels);
	return 0;
}

static int word_check(struct rkv_client *c, unsigned si, uint32_t w,
		      struct peer **p)
{
	if (!c || si >= c->nsrv || w >= c->peer[si].g.counters_count)
		return -EINVAL;
	*p = &c->peer[si];
	return 0;
}

int rkv_ext_word_open(struct rkv_client *c, const char *name,
		      unsigned *server, uint32_t *word)
{
	struct rkv_msg m, reply;
	struct peer *p;
	size_t len;
	int rc;

	_Static_assert(RKV_EXT_WORD_NAME + 1 == RKV_COUNTER_NAME_MAX,
		       "word names fit the wire");
	if (!c || !name || !server || !word)
		return -EINVAL;
	len = strlen(name);
	if (len == 0 || len > RKV_EXT_WORD_NAME)
		return -EINVAL;
	p = &c->peer[op_route(c, name, len)];
	if (!p->g.counters_count)
		return -ENODEV;
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_COUNTER_OPEN;
	memcpy(m.u.counter_open.name, name, len + 1);
	rc = ctrl_call(&p->ctrl, &m, &reply, c->opts.timeout_ms);
	if (rc)
		return rc;
	if (reply.hdr.type == RKV_MSG_ERROR)
		return reply.u.error.status < 0 ? reply.u.error.status : -EPROTO;
	if (reply.hdr.type != RKV_MSG_COUNTER_REPLY)
		return -EPROTO;
	if (reply.u.counter_reply.status)
		return reply.u.counter_reply.status < 0 ?
			       reply.u.counter_reply.status : -EPROTO;
	if (reply.u.counter_reply.index >= p->g.counters_count)
		return -EPROTO;
	*server = p->idx;
	*word = reply.u.counter_reply.index;
	return 0;
}

int rkv_ext_word_add(struct rkv_client *c, unsigned server, uint32_t word,
		     uint64_t delta, uint64_t *old)
{
	struct peer *p;
	int rc = word_check(c, server, word, &p);

	if (rc)
		return rc;
	struct rkv_wr wr = {
		.opcode = RKV_WR_FETCH_ADD,
		.remote_addr = p->g.counters_addr + word * 8ull,
		.rkey = p->ctrl.keys.counters,
		.compare_add = delta,
	};

	uint64_t v = 0;

	rc = aux_run(c, p, &wr, &v);
	if (rc == 0 && old)
		*old = v;
	return rc;
}

int rkv_ext_word_read(struct rkv_client *c, unsigned server, uint32_t word,
		      uint64_t *val)
{
	struct peer *p;
	int rc = word_check(c, server, word, &p);

	if (rc || !val)
		return rc ? rc : -EINVAL;
	struct rkv_wr wr = {
		.opcode = RKV_WR_READ,
		.remote_addr = p->g.counters_addr + word * 8ull,
		.rkey = p->ctrl.keys.counters,
	};

	return aux_run(c, p, &wr, val);
}
