/* SPDX-License-Identifier: MIT */
/*
 * explore.h - an exhaustive interleaving explorer for small scenarios of
 * the client state machines (stateless model checking, CHESS-style, with
 * sleep sets).
 *
 * A scenario is a few clients, each with a short script of operations on a
 * 2-bucket index whose free slots are made scarce by filler keys.  A run
 * builds a fresh world (a real in-process server and real clients over the
 * fake provider, common/transport/fake.h, on a fake clock), then executes
 * one choice at a time: the next round (queued one-sided chain) of one
 * client, a client's death, or a clock jump.  Between choices the control
 * plane runs until quiet.  After every choice the invariants are checked:
 *
 *   1. at most one visible copy of every key (x_slot_visible() decides
 *      what is visible); while an op that may insert the key is in flight
 *      a second copy counts as transient (reported, fatal with strict);
 *   2. no slot names an extent that was returned to the server (the
 *      BLOCK_RETURN messages seen) or that the server holds as free or in
 *      grace (server/space.c's rkv_space_unit_state, when linked);
 *
 * and at the end of a run the history of every key, with a final cold
 * read of the memory as a reader sees it, must be linearizable (a small
 * brute-force search with real-time order; failed ops are open-ended).
 * The search is a depth-first enumeration of every choice sequence, pruned
 * by sleep sets: two rounds of different clients commute when their target
 * ranges do not conflict, neither finished an op nor sent a control
 * message; deaths and clock jumps commute with nothing.
 *
 * Environment: RKV_EXPLORE_REPLAY="s0 s1 k2 a ..." replays one choice
 * sequence (s = round of client i, k = death of client i, a = clock jump)
 * and prints each step; RKV_EXPLORE_DEPTH bounds the choices per run
 * (deeper: one canonical order); RKV_EXPLORE_RUNS caps the runs of a
 * scenario; a second visible copy is a violation even while an insert
 * is in flight (RKV_EXPLORE_STRICT=0 reports such copies as transient);
 * RKV_EXPLORE_VERBOSE=1 prints every violation, not just the first.
 */
#ifndef RKV_TESTS_EXPLORE_EXPLORE_H
#define RKV_TESTS_EXPLORE_EXPLORE_H

#include <stddef.h>
#include <stdint.h>

#define X_MAX_CL 4       /* clients of a scenario */
#define X_MAX_OPS 4      /* ops per client script */

enum x_kind {
	X_END = 0,       /* end of a script */
	X_PUT,           /* put key val */
	X_GET,           /* get key */
	X_DEL,           /* delete key */
	X_RMW,           /* rmw key: append val to the value (absent: "") */
};

struct x_op {
	enum x_kind kind;
	const char *key;
	const char *val;   /* PUT: the value; RMW: what it appends */
};

struct x_scenario {
	const char *name;
	unsigned nclients;
	struct x_op ops[X_MAX_CL][X_MAX_OPS];
	/* Index layout before the run: every slot holds a filler key except
	 * the positions of `empty` (bit p: scan position p of layout_key,
	 * 0..7 its first bucket, 8..15 its second); then pre[] are put. */
	const char *layout_key;
	uint16_t empty;
	struct { const char *key, *val; } pre[2];
	unsigned kill_mask;     /* clients that may die between rounds */
	unsigned max_kills;
	unsigned max_advances;  /* clock jumps per run */
	uint64_t advance_ms;    /* each jump; 0: the lease */
	int split;              /* one WR per step instead of one chain */
	unsigned max_depth;     /* 0: unbounded */
	uint64_t max_runs;      /* 0: RKV_EXPLORE_RUNS or 200000 */
	int strict;             /* transient copies are violations */
	int no_copy_check;      /* skip invariant 1 (to see what the
				 * history check alone finds) */
};

struct x_result {
	uint64_t runs;          /* runs started */
	uint64_t complete;      /* runs that reached the end (checked) */
	uint64_t pruned;        /* runs cut by the sleep sets */
	uint64_t steps;         /* choices executed, replays included */
	uint64_t violations;    /* runs with a violation */
	uint64_t transient;     /* steps that saw a transient second copy */
	/* coverage: what the runs exercised (client and server counters) */
	uint64_t lock_waits, lock_steals, retries, kills, enospc;
	int budget_hit;         /* stopped at max_runs: not exhaustive */
	double seconds;
	char first[4096];       /* the first violation: choices and details */
};

/* Explore every interleaving of sc.  Returns 0 (ran; see res) or -errno
 * when the world could not be built. */
int x_explore(const struct x_scenario *sc, struct x_result *res);

/* What counts as a visible copy: see explore.c.  Exposed for the
 * self-tests. */
int x_slot_visible(uint64_t slot);

/*
 * Linearizability of one key's history (self-tests use it directly).
 * kind: enum x_kind; arg: the put value or rmw suffix; status: 0 or
 * -errno (definite: 0, -ENOENT; -ENOSPC for put: no effect; anything
 * else, or done == 0: it may or may not have taken effect); out: what a
 * get returned.  inv/resp: logical times (resp ignored when not done).
 * Returns 1 when some order respecting real time explains every result.
 */
struct x_lin_op {
	enum x_kind kind;
	const char *arg;
	int status;
	const char *out;
	int done;
	uint64_t inv, resp;
};
int x_linearizable(const struct x_lin_op *ops, unsigned n, const char *init);

#endif
