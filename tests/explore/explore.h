/* SPDX-License-Identifier: MIT */
/*
 * explore.h - an exhaustive interleaving explorer for small scenarios of
 * the client state machines (stateless model checking, CHESS-style, with
 * sleep sets).
 *
 * A scenario is a few clients, each with a short script of operations on a
 * 2-bucket index whose free slots are made scarce by filler keys (and
 * that may grow a level of 14 buckets, sc->grow).  A run
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
 *   3. with replicas (docs/DESIGN.md §9.7), per key: invariant 1 on its
 *      primary (readers read there; backups may hold stale duplicates a
 *      later install clears); I1: the block the primary's word names is
 *      on every backup with its sequence and contents, or the backup holds
 *      a higher sequence (a write in flight), a tombstone counting as an
 *      absent copy; I2: no backup holds a sequence above the primary's
 *      (above the lock's, while it is locked); a key absent from the
 *      primary is absent from its backups;
 *
 * and at the end of a run the history of every key, with a final cold
 * read of the memory as a reader sees it, must be linearizable (a small
 * brute-force search with real-time order; failed ops are open-ended).
 * The search is a depth-first enumeration of every choice sequence, pruned
 * by sleep sets: two rounds of different clients commute when their target
 * ranges do not conflict, neither finished an op nor sent a control
 * message; deaths and clock jumps commute with nothing.  With several
 * servers a choice is the next round of one client on one server (a
 * write's legs run on the backups while the primary's round is queued),
 * and ranges are per server.
 *
 * Environment: RKV_EXPLORE_REPLAY="s0 s1 k2 a ..." replays one choice
 * sequence (s = round of client i, "s1.2" its round on server 2, k =
 * death of client i, a = clock jump)
 * and prints each step; RKV_EXPLORE_DEPTH bounds the choices per run
 * (deeper: one canonical order); RKV_EXPLORE_RUNS caps the runs of every
 * scenario, over its own budget, and lifts the test's watchdog (`make
 * explore-long`); a second visible copy is a violation even while an insert
 * is in flight (RKV_EXPLORE_STRICT=0 reports such copies as transient);
 * RKV_EXPLORE_VERBOSE=1 prints every violation, not just the first.
 */
#ifndef RKV_TESTS_EXPLORE_EXPLORE_H
#define RKV_TESTS_EXPLORE_EXPLORE_H

#include <stddef.h>
#include <stdint.h>

#define X_MAX_CL 4       /* clients of a scenario */
#define X_MAX_OPS 4      /* ops per client script */
#define X_MAX_SRV 3      /* servers of a replicated scenario */

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
	uint64_t max_runs;      /* 0: 200000 (8000 sanitized); the
				 * environment's RKV_EXPLORE_RUNS overrides */
	uint64_t max_runs_sanitized; /* 0: max_runs or 8000 */
	int strict;             /* transient copies are violations */
	int no_copy_check;      /* skip invariant 1 (to see what the
				 * history check alone finds) */
	/* Replication: 0 or 1 server is the single-server world above; 2 or
	 * 3 servers (each laid out as above, by a client of that server
	 * alone) form a cluster map of `replicas` (1..nservers) read from a
	 * cluster file, and every scenario client writes through it. */
	unsigned nservers;
	unsigned replicas;
	/* Before the run each client puts pre[0] again (its value
	 * unchanged), so the scenario starts with every location cached
	 * (the primary's and the backups'); not part of the history. */
	int warm;
	/* self-test only: pre[] are put on each key's primary alone (by a
	 * client of that server), so its backups lack them: invariant 3
	 * must fail */
	int pre_primary_only;
	/* Too many interleavings to explore them all in the test's time:
	 * run max_runs random ones instead of the depth-first search's
	 * first max_runs (which differ only in their last choices).  Each
	 * run's choices are drawn from a generator seeded by
	 * RKV_EXPLORE_SEED (default 1) and the run's number; a violation
	 * prints its replay string as the search does. */
	int sample;
	/* The cluster file lists one server "joining" (cmap.h: a join in
	 * its first half), the one that makes layout_key's set r + 1 long:
	 * every write then installs on two backups at r = 2. */
	int transit;
	/* The index may grow one level (layout.h "Levels": 14 buckets more,
	 * --index-max 4K): an insert that finds every candidate full asks
	 * the server for it (GROW) during the run; invariants and the final
	 * read cover every level in use. */
	int grow;
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
	uint64_t grows, level_news; /* levels added, ops that met one */
	int budget_hit;         /* stopped at max_runs: not exhaustive */
	int sampled;            /* random runs (sc->sample) */
	uint64_t seed;
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

/* For the test files: explore sc as a TAP test (it fails on a violation,
 * which it prints with its replay string), the totals, and the test's
 * watchdog (none when RKV_EXPLORE_RUNS asks for a long run). */
void x_run(const struct x_scenario *sc);
void x_summary(void);
unsigned x_watchdog_s(unsigned plain, unsigned sanitized);

#endif
