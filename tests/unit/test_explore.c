/* SPDX-License-Identifier: MIT */
/*
 * test_explore.c - every interleaving of small scenarios of the client
 * state machines, run against the real op code and a real in-process
 * server over the deterministic fake provider (tests/explore/explore.h
 * says how, and which invariants are checked after every step).
 *
 * Each scenario is a TAP test that prints the interleavings explored; a
 * violation prints the choice sequence, replayable with
 *   RKV_EXPLORE_REPLAY="s0 s1 ..." build/tests/test_explore -t NAME
 * The self-tests first prove that the checks can fail.
 */
#include "../explore/explore.c"

#include "test.h"

/* ------------------------------------------------------ the checks fail */

static void t_linearizability_checker(void)
{
	/* put A [1,2]; get [3,4]: absent -> stale */
	struct x_lin_op stale[] = {
		{ X_PUT, "A", 0, NULL, 1, 1, 2 },
		{ X_GET, NULL, -ENOENT, "", 1, 3, 4 },
	};
	/* put A [1,2]; del [3,4]; get [5,6] = A: deleted key came back */
	struct x_lin_op back[] = {
		{ X_PUT, "A", 0, NULL, 1, 1, 2 },
		{ X_DEL, NULL, 0, NULL, 1, 3, 4 },
		{ X_GET, NULL, 0, "A", 1, 5, 6 },
	};
	/* two rmw appends, the final read lost one */
	struct x_lin_op lost[] = {
		{ X_RMW, "a", 0, NULL, 1, 1, 4 },
		{ X_RMW, "b", 0, NULL, 1, 2, 3 },
		{ X_GET, NULL, 0, "v0a", 1, 5, 6 },
	};
	/* a get that sees a put begun later */
	struct x_lin_op future[] = {
		{ X_GET, NULL, 0, "A", 1, 1, 2 },
		{ X_PUT, "A", 0, NULL, 1, 3, 4 },
	};
	/* fine: overlapping put and get, unfinished put that took effect */
	struct x_lin_op ok1[] = {
		{ X_PUT, "A", 0, NULL, 1, 1, 4 },
		{ X_GET, NULL, 0, "A", 1, 2, 3 },
		{ X_PUT, "B", 0, NULL, 0, 5, 0 },
		{ X_GET, NULL, 0, "B", 1, 6, 7 },
	};
	struct x_lin_op ok2[] = {
		{ X_RMW, "a", 0, NULL, 1, 1, 4 },
		{ X_RMW, "b", 0, NULL, 1, 2, 3 },
		{ X_GET, NULL, 0, "v0ba", 1, 5, 6 },
		{ X_PUT, "X", -ENOSPC, NULL, 1, 7, 8 },
		{ X_GET, NULL, 0, "v0ba", 1, 9, 10 },
	};

	EXPECT_EQ(x_linearizable(stale, 2, NULL), 0);
	EXPECT_EQ(x_linearizable(back, 3, NULL), 0);
	EXPECT_EQ(x_linearizable(lost, 3, "v0"), 0);
	EXPECT_EQ(x_linearizable(future, 2, NULL), 0);
	EXPECT_EQ(x_linearizable(ok1, 4, NULL), 1);
	EXPECT_EQ(x_linearizable(ok2, 5, "v0"), 1);
}

/* A world at rest, then hand-made damage: a copied slot (two copies of
 * one key), a slot naming a returned extent. */
static void t_invariant_checker(void)
{
	static const struct x_scenario sc = {
		.name = "selftest", .nclients = 1,
		.ops = { { { X_GET, "K", NULL } } },
		.layout_key = "K", .empty = 0xc0,
		.pre = { { "K", "v0" } },
	};
	struct x_world *w = &g_x;
	unsigned src = X_NSLOTS, dst = X_NSLOTS;
	uint64_t s;

	ASSERT_EQ(world_build(w, &sc), 0);
	check_state(w, "clean", 1);
	EXPECT_EQ(w->violated, 0);
	for (unsigned i = 0; i < X_NSLOTS; i++) {
		struct x_slot sl;

		s = slot_word(w, 0, i);
		if (rkv_slot_empty(s))
			dst = i;
		else if (x_slot_block(w, 0, s, &sl) && sl.kl == 1 &&
			 *sl.key == 'K')
			src = i;
	}
	ASSERT_TRUE(src < X_NSLOTS && dst < X_NSLOTS);
	s = slot_word(w, 0, src);
	memcpy((char *)w->srv[0]->index_mem + dst * 8u, &s, 8);
	check_state(w, "copied", 1);
	EXPECT_TRUE(w->violated && strstr(w->why, "2 visible copies"));
	w->violated = 0;
	w->why[0] = 0;
	memset((char *)w->srv[0]->index_mem + dst * 8u, 0, 8);
	w->ret[w->nret].off = rkv_slot_offset(s);
	w->ret[w->nret].len = RKV_BLOCK_ALIGN;
	w->nret++;
	check_state(w, "returned", 1);
	EXPECT_TRUE(w->violated && strstr(w->why, "returned"));
	g_x_auto_tick = 1;
	world_free(w);
	rkv_time_set_source(NULL);
}

/* ------------------------------------------------------------ scenarios */

/*
 * Failure 2: B reads K's buckets (K absent); Z is inserted into K's first
 * free slot; A inserts K into the next one, and its duplicate check finds
 * no earlier copy; Z is deleted; B CASes the first slot from its stale
 * read and checks only the copies before it: two copies of K stay.  The
 * insert of client/ops.c at f13ebaa fails this test: it is the bug's
 * regression test.
 */
static void t_failure2(void)
{
	static const struct x_scenario sc = {
		.name = "failure2", .nclients = 3,
		.ops = {
			{ { X_PUT, "K", "A1" } },
			{ { X_PUT, "K", "B1" } },
			{ { X_PUT, "Z", "Z1" }, { X_DEL, "Z", NULL } },
		},
		.layout_key = "K", .empty = 0xc0,
	};
	x_run(&sc);
}

/* The same race without invariant 1: what clients see of the second copy.
 * A's get of another key (J, absent) may end after B's put did; A's
 * second put then goes to its cached copy of K while readers read B's,
 * the first in scan order: an acknowledged put no later read returns. */
static void t_failure2_lost_put(void)
{
	static const struct x_scenario sc = {
		.name = "failure2_lost_put", .nclients = 3,
		.ops = {
			{ { X_PUT, "K", "A1" }, { X_GET, "J", NULL },
			  { X_PUT, "K", "A2" } },
			{ { X_PUT, "K", "B1" } },
			{ { X_PUT, "Z", "Z1" }, { X_DEL, "Z", NULL } },
		},
		.layout_key = "K", .empty = 0xc0, .no_copy_check = 1,
	};
	x_run(&sc);
}

static void t_insert_insert(void)
{
	static const struct x_scenario sc = {
		.name = "insert_insert", .nclients = 2,
		.ops = {
			{ { X_PUT, "K", "A1" }, { X_GET, "K", NULL } },
			{ { X_PUT, "K", "B1" }, { X_GET, "K", NULL } },
		},
		.layout_key = "K", .empty = 0xc0,
	};
	x_run(&sc);
}

/* The same with one WR per step: the two bucket READs of one round, the
 * block WRITE and the CAS can be split by other clients' WRs. */
static void t_insert_insert_split(void)
{
	static const struct x_scenario sc = {
		.name = "insert_insert_split", .nclients = 2,
		.ops = {
			{ { X_PUT, "K", "A1" } },
			{ { X_PUT, "K", "B1" } },
		},
		.layout_key = "K", .empty = 0xc0, .split = 1,
	};
	x_run(&sc);
}

static void t_insert_insert_delete(void)
{
	static const struct x_scenario sc = {
		.name = "insert_insert_delete", .nclients = 3,
		.ops = {
			{ { X_PUT, "K", "A1" } },
			{ { X_PUT, "K", "B1" } },
			{ { X_DEL, "K", NULL } },
		},
		.layout_key = "K", .empty = 0xc0,
		.max_runs = 60000,
	};
	x_run(&sc);
}

static void t_put_rmw_delete(void)
{
	static const struct x_scenario sc = {
		.name = "put_rmw_delete", .nclients = 3,
		.ops = {
			{ { X_PUT, "K", "A1" } },
			{ { X_RMW, "K", "+b" } },
			{ { X_DEL, "K", NULL } },
		},
		.layout_key = "K", .empty = 0xc0,
		.pre = { { "K", "v0" } },
		.max_advances = 1,
	};
	x_run(&sc);
}

/* B's lock can be stolen once A waited a whole lease (the clock jumps). */
static void t_rmw_rmw_steal(void)
{
	static const struct x_scenario sc = {
		.name = "rmw_rmw_steal", .nclients = 2,
		.ops = {
			{ { X_RMW, "K", "+a" } },
			{ { X_RMW, "K", "+b" } },
		},
		.layout_key = "K", .empty = 0x80,
		.pre = { { "K", "v0" } },
		.max_advances = 2,
	};
	x_run(&sc);
}

/* "T52" and "K" share their fingerprint: A's rmw of the absent K finds
 * one slot of K's fingerprint, T52's, and locks it with the verify READ
 * (op_rmw.c rmw_buckets); the block says T52, so A unlocks it and
 * starts again, verifying first, while B writes and reads T52. */
static void t_fp_twin_lock(void)
{
	static const struct x_scenario sc = {
		.name = "fp_twin_lock", .nclients = 2,
		.ops = {
			{ { X_RMW, "K", "+a" }, { X_GET, "T52", NULL } },
			{ { X_PUT, "T52", "t1" }, { X_GET, "K", NULL } },
		},
		.layout_key = "K", .empty = 0x180,
		.pre = { { "T52", "t0" } },
		.kill_mask = 1, .max_kills = 1,
	};
	x_run(&sc);
}

/* A dies after any round; the server rebuilds its space; B carries on. */
static void t_client_dies(void)
{
	static const struct x_scenario sc = {
		.name = "client_dies", .nclients = 2,
		.ops = {
			{ { X_PUT, "K", "A1" }, { X_PUT, "K", "A2" } },
			{ { X_PUT, "K", "B1" }, { X_GET, "K", NULL } },
		},
		.layout_key = "K", .empty = 0xc0,
		.kill_mask = 1, .max_kills = 1,
	};
	x_run(&sc);
}

/* A dies holding the lock: B steals it after the lease. */
static void t_lock_holder_dies(void)
{
	static const struct x_scenario sc = {
		.name = "lock_holder_dies", .nclients = 2,
		.ops = {
			{ { X_RMW, "K", "+a" } },
			{ { X_RMW, "K", "+b" }, { X_GET, "K", NULL } },
		},
		.layout_key = "K", .empty = 0x80,
		.pre = { { "K", "v0" } },
		.kill_mask = 1, .max_kills = 1, .max_advances = 2,
	};
	x_run(&sc);
}

/* One free slot for two inserts, while a delete makes a second one. */
static void t_nearly_full(void)
{
	static const struct x_scenario sc = {
		.name = "nearly_full", .nclients = 3,
		.ops = {
			{ { X_PUT, "K", "A1" } },
			{ { X_PUT, "L", "B1" } },
			{ { X_DEL, "J", NULL } },
		},
		.layout_key = "K", .empty = 0xc0,
		.pre = { { "J", "j0" } },
	};
	x_run(&sc);
}

/*
 * The index grows under two inserters of K (layout.h "Levels"): its one
 * free slot goes to J or to one of them, the others find every candidate
 * full and ask for a level; an inserter that read one level must not
 * commit beside a copy in the new one, and a reader must not miss it.
 */
static void t_grow_insert_insert(void)
{
	static const struct x_scenario sc = {
		.name = "grow_insert_insert", .nclients = 3,
		.ops = {
			{ { X_PUT, "J", "A1" }, { X_PUT, "K", "A2" } },
			{ { X_PUT, "K", "B1" } },
			{ { X_GET, "K", NULL }, { X_GET, "J", NULL } },
		},
		.layout_key = "K", .empty = 0x1, .grow = 1,
	};
	x_run(&sc);
}

int main(int argc, char **argv)
{
	rkv_test_init(argc, argv, x_watchdog_s(480, 600));
	rkv_log_set_level(RKV_LOG_OFF);
	RKV_TEST(t_linearizability_checker);
	RKV_TEST(t_invariant_checker);
	RKV_TEST(t_failure2);
	RKV_TEST(t_failure2_lost_put);
	RKV_TEST(t_insert_insert);
	RKV_TEST(t_insert_insert_split);
	RKV_TEST(t_insert_insert_delete);
	RKV_TEST(t_put_rmw_delete);
	RKV_TEST(t_rmw_rmw_steal);
	RKV_TEST(t_fp_twin_lock);
	RKV_TEST(t_client_dies);
	RKV_TEST(t_lock_holder_dies);
	RKV_TEST(t_nearly_full);
	RKV_TEST(t_grow_insert_insert);
	RKV_TEST(x_summary);
	return rkv_test_done();
}
