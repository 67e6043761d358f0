/* SPDX-License-Identifier: MIT */
/*
 * engine.c - doorbells, completion dispatch and progress (engine.h).
 *
 * Doorbells: an op appends the WRs of its next round to its server's link;
 * eng_progress() posts each link's chain with one rkv_post, so ops
 * submitted together (and mget batches) share doorbells.  Every round ends
 * with one signaled WR; on RC its completion means the whole round is
 * done, so a send queue never holds more than nslots * ROUND_MAX_WR plus
 * the control sends, and it is sized for that (client.c).
 *
 * An idle client polls its CQ before the ops build WRs: an RKEY_UPDATE
 * may be waiting there, and WRs must not go out with keys the server may
 * already have revoked (link_ctrl.c).
 */
#include "engine.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rtime.h"

_Static_assert(RKV_CLIENT_LOG_DEBUG == (int)RKV_LOG_DEBUG &&
		       RKV_CLIENT_LOG_INFO == (int)RKV_LOG_INFO &&
		       RKV_CLIENT_LOG_WARN == (int)RKV_LOG_WARN &&
		       RKV_CLIENT_LOG_ERROR == (int)RKV_LOG_ERROR,
	       "one set of level numbers");

/* Poll the CQ before running the ops after this long without a poll. */
#define IDLE_POLL_MS 20

/* rkv_wait's spin policy (api.c has the reasoning). */
#define RKV_SPIN_LONG_NS 50000ull
#define RKV_SPIN_SHORT_NS 2000ull
#define RKV_WAIT_FAST_NS 40000ull
#define RKV_WAIT_SLOW_NS 60000ull

void eng_log(struct engine *e, enum rkv_log_level level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!e->log_fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e->log_fn((int)level, msg, e->log_arg);
}

void eng_tp_log(enum rkv_log_level level, const char *comp, const char *func,
		int line, const char *msg, void *arg)
{
	struct engine *e = arg;

	(void)func;
	(void)line;
	eng_log(e, level, "%s: %s", comp, msg);
}

int wc_errno(enum rkv_wc_status st)
{
	switch (st) {
	case RKV_WC_SUCCESS: return 0;
	case RKV_WC_REM_ACCESS_ERR: return -EACCES;
	case RKV_WC_RETRY_EXC_ERR: return -ETIMEDOUT;
	default: return -ECONNRESET;
	}
}

void link_fail(struct link *l, int err)
{
	if (l->dead)
		return;
	l->dead = err;
	l->eng->links_failed++;
	eng_log(l->eng, RKV_LOG_ERROR, "server %s: connection failed (%s)",
		l->name, strerror(-err));
	if (l->on_fail)
		l->on_fail(l);
}

void link_wc_error(struct link *l, int err)
{
	if (l->ep && rkv_ep_state(l->ep) == RKV_EP_ERROR)
		link_fail(l, err == -EACCES ? -EACCES : -ECONNRESET);
}

void link_queue(struct link *l, struct rkv_wr *first, unsigned n)
{
	for (unsigned i = 0; i + 1 < n; i++)
		first[i].next = &first[i + 1];
	first[n - 1].next = NULL;
	if (l->pend_tail)
		l->pend_tail->next = first;
	else
		l->pend_head = first;
	l->pend_tail = &first[n - 1];
	l->pend_n += n;
}

void link_flush(struct link *l)
{
	struct rkv_wr *bad = NULL, *head = l->pend_head, *w, *next;
	int rc;

	if (!head)
		return;
	l->pend_head = l->pend_tail = NULL;
	l->pend_n = 0;
	if (l->dead) {
		rc = l->dead;
		bad = head;
	} else {
		rc = rkv_post(l->ep, head, &bad);
		l->eng->st->doorbells++;
		if (rc && !bad)
			bad = head;
		if (rc)
			link_fail(l, rc);
	}
	if (!rc)
		return;
	/* every round whose signaled WR was not posted is over */
	for (w = bad; w; w = next) {
		next = w->next;
		if (w->flags & RKV_WR_SIGNALED) {
			struct wr_ctx *x = (struct wr_ctx *)(uintptr_t)w->wr_id;

			x->unposted(x, l->dead ? l->dead : rc);
		}
	}
}

static int poll_cq(struct engine *e)
{
	struct rkv_wc wc[32];
	int n = rkv_cq_poll(e->cq, wc, 32);

	for (int i = 0; i < n; i++) {
		struct wr_ctx *x = (struct wr_ctx *)(uintptr_t)wc[i].wr_id;

		x->done(x, &wc[i]);
	}
	return n;
}

static void flush_all(struct engine *e)
{
	for (unsigned i = 0; i < e->nlinks; i++)
		link_flush(e->links[i]);
}

/*
 * Clocks: one coarse read per pass (a few ns; a CLOCK_MONOTONIC read costs
 * 20-40 ns, in this VM 41 ns against 12).  The ops date their starts with
 * it (pass_ms) and read the clock themselves only where they need an end
 * time after a completion (op_too_slow).  The tick needs a fine clock
 * (space_tick ages block returns against rkv_now_ms stamps), so it is read
 * only when the coarse clock has moved since the last tick: at most once a
 * jiffy instead of once a pass.
 */
int eng_poll_idle(struct engine *e)
{
	uint64_t cnow = rkv_coarse_ms();

	int n;

	if (cnow - e->last_poll_ms <= IDLE_POLL_MS)
		return 0;
	e->last_poll_ms = cnow;
	n = poll_cq(e);
	return n < 0 ? n : 1;
}

int eng_progress(struct engine *e)
{
	uint64_t now = 0, cnow = rkv_coarse_ms();
	int n, total = 0;

	e->pass_ms = cnow;
	if (cnow - e->last_poll_ms > IDLE_POLL_MS) {
		n = poll_cq(e);
		if (n < 0)
			return n;
		total += n;
	}
	e->last_poll_ms = cnow; /* the CQ is polled below in any case */
	e->hooks.run(e->hooks.arg, &now);
	flush_all(e);
	n = poll_cq(e);
	if (n < 0)
		return n;
	total += n;
	if (n)
		flush_all(e);
	if (cnow == e->last_tick_pass_ms)
		return total;
	e->last_tick_pass_ms = cnow;
	if (!now)
		now = rkv_now_ms();
	if (now != e->last_tick_ms) {
		e->hooks.tick(e->hooks.arg, now);
		e->last_tick_ms = now;
	}
	return total;
}

void eng_progressed(struct engine *e)
{
	if (e->idle_t0) {
		uint64_t d = rkv_now_ns() - e->idle_t0;

		e->wait_avg_ns = (7 * e->wait_avg_ns + d) / 8;
		e->idle_t0 = 0;
		if (e->wait_avg_ns < RKV_WAIT_FAST_NS)
			e->spin_short = 0;
		else if (e->wait_avg_ns > RKV_WAIT_SLOW_NS)
			e->spin_short = 1;
	}
}

int eng_spinning(struct engine *e)
{
	uint64_t now = rkv_now_ns();

	if (!e->idle_t0)
		e->idle_t0 = now;
	return now - e->idle_t0 <
	       (e->spin_short ? RKV_SPIN_SHORT_NS : RKV_SPIN_LONG_NS);
}

int eng_block(struct engine *e, unsigned timeout_us)
{
	for (unsigned i = 0; i < e->nlinks; i++)
		if (e->links[i]->pend_head)
			return 0; /* WRs for the next doorbell: poll posts them */
	return rkv_cq_wait(e->cq, timeout_us);
}
