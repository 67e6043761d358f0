/* SPDX-License-Identifier: MIT */
/*
 * engine.h - the bottom of librkv: one transport context, one CQ, the
 * registered local memory, the doorbell of each server link, and the
 * completion dispatcher.
 *
 * Layers, bottom up (each calls only those below it; what a lower layer
 * must tell an upper one goes through a function pointer the upper one
 * set):
 *   engine.c     links, doorbells, CQ dispatch, progress, waiting, log
 *   link_ctrl.c  the control channel of a link: requests, replies, rkeys
 *   conn.c       servers: the list, connect, HELLO, authentication
 *   chunks.c     chunks and block returns of a server (struct space)
 *   op*.c        the operation machines (one file per kind)
 *   api.c        the public calls; client.c creates and destroys
 *
 * Completions: every WR's wr_id is the address of a struct wr_ctx that
 * the poster embeds in its own object (an op slot, a control buffer, a
 * counter call); the dispatcher calls ctx->done, and the owner finds
 * itself again with container_of.  No wr_id carries tag bits.
 */
#ifndef RKV_CLIENT_ENGINE_H
#define RKV_CLIENT_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "rkv.h"
#include "transport.h"

#define container_of(ptr, type, member)                                        \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

struct wr_ctx {
	/* a WR of this context completed (success, or an error) */
	void (*done)(struct wr_ctx *w, const struct rkv_wc *wc);
	/* a signaled WR of this context was never posted (its link broke
	 * before the doorbell): err is the link's -errno */
	void (*unposted)(struct wr_ctx *w, int err);
};

static inline uint64_t wr_ctx_id(struct wr_ctx *w)
{
	return (uint64_t)(uintptr_t)w;
}

struct engine;

/* One endpoint to one server, and its doorbell: WRs queued by the ops
 * go out with one rkv_post per link per progress pass. */
struct link {
	struct engine *eng;
	struct rkv_ep *ep;
	const char *name;         /* the server's address, for logs */
	int dead;                 /* -errno once the connection failed */
	int fenced;               /* the server said it closes us as a
				   * client of an old map (failover) */
	struct rkv_wr *pend_head, *pend_tail;
	unsigned pend_n;
	/* the control layer's reaction to a failure (fails its requests) */
	void (*on_fail)(struct link *l);
	void *on_fail_arg;
};

/* What the layers above run from each progress pass. */
struct engine_hooks {
	void (*run)(void *arg, uint64_t *now_ms); /* ops: start, timers */
	void (*tick)(void *arg, uint64_t now_ms); /* at most once per
						   * coarse tick: control */
	void *arg;
};

struct engine {
	struct rkv_tp *tp;
	struct rkv_cq *cq;
	struct rkv_mr *lmr;         /* the client's local memory */
	struct rkv_client_stats *st;
	rkv_client_log_fn log_fn;   /* NULL: no logging */
	void *log_arg;
	struct link **links;
	unsigned nlinks;
	unsigned links_failed;      /* link_fail calls, ever */
	struct engine_hooks hooks;
	uint64_t last_poll_ms;      /* rkv_coarse_ms of the last CQ poll */
	uint64_t pass_ms;           /* rkv_coarse_ms at the start of the
				     * latest progress pass: a start stamp
				     * never later than the event it dates
				     * (never an end time) */
	uint64_t last_tick_ms;      /* now_ms of the last tick */
	uint64_t last_tick_pass_ms; /* pass_ms of the last tick */
	uint64_t idle_t0;           /* rkv_wait: idle since (ns), 0: busy */
	uint64_t wait_avg_ns;       /* moving average of idle periods */
	int spin_short;             /* rkv_wait blocks after a short spin */
};

void eng_log(struct engine *e, enum rkv_log_level level, const char *fmt,
	     ...) __attribute__((format(printf, 3, 4)));
/* The transport's messages go to the same callback (rkv_tp_set_log). */
void eng_tp_log(enum rkv_log_level level, const char *comp, const char *func,
		int line, const char *msg, void *arg);

/* -errno for a completion status. */
int wc_errno(enum rkv_wc_status st);

/* Mark the link failed (once): logs, calls l->on_fail. */
void link_fail(struct link *l, int err);
/* A completion reported an error on the link: fail it if the endpoint is
 * in the error state (-EACCES kept: a refused rkey). */
void link_wc_error(struct link *l, int err);
/* Append n WRs (first..first+n-1, chained here) for the next doorbell. */
void link_queue(struct link *l, struct rkv_wr *first, unsigned n);
/* Ring the doorbell: post what is queued.  Signaled WRs that could not
 * be posted get their context's unposted(). */
void link_flush(struct link *l);

/* One progress pass: read the coarse clock (pass_ms), poll the CQ when
 * idle a while, run the ops, ring every doorbell, poll and dispatch, ring
 * again, tick when the coarse clock moved.  Returns the number of
 * completions or a CQ error. */
int eng_progress(struct engine *e);
/* An idle engine's CQ polled (what happened while idle: a link that
 * died, an RKEY_UPDATE) before anything else runs: 1 polled, 0 not idle
 * (nothing done), or -errno. */
int eng_poll_idle(struct engine *e);
/* Progress was made: ends an idle period (rkv_wait's spin estimate). */
void eng_progressed(struct engine *e);
/* rkv_wait, first half: 1 while the caller should still spin (starts
 * the idle period). */
int eng_spinning(struct engine *e);
/* Second half: block in the CQ for up to timeout_us, unless WRs wait for
 * a doorbell.  0 or the CQ's -errno (-EOPNOTSUPP: it cannot block). */
int eng_block(struct engine *e, unsigned timeout_us);

#endif
