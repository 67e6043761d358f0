/* SPDX-License-Identifier: MIT */
/*
 * test_lincheck.c - the linearizability checker (tests/lib/lincheck.c)
 * must fail where it should: hand-made bad histories (stale read, read
 * from the future, lost rmw, resurrected delete, a duplicate copy's
 * flip-flop, a failed put made visible), indeterminate ops both ways,
 * concurrent ops in any order; and it must agree with a brute-force
 * permutation checker on hundreds of random small histories, real
 * (generated from a sequential execution with overlapping intervals) and
 * mutated.  Large generated histories must pass, and certainly-stale
 * mutations of them must be flagged.  History files round-trip.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lincheck.h"
#include "test.h"

#define A LIN_ABSENT
#define NEVER LIN_NEVER

static struct lin_op put(uint64_t v, uint64_t call, uint64_t ret)
{
	return (struct lin_op){ .key = 1, .kind = LIN_PUT, .in = v,
				.ok = LIN_DONE, .call_ns = call, .ret_ns = ret };
}

static struct lin_op get(uint64_t v, uint64_t call, uint64_t ret)
{
	return (struct lin_op){ .key = 1, .kind = LIN_GET, .out = v,
				.ok = LIN_DONE, .call_ns = call, .ret_ns = ret };
}

static struct lin_op del(int found, uint64_t call, uint64_t ret)
{
	return (struct lin_op){ .key = 1, .kind = LIN_DEL,
				.out = found ? LIN_DEL_DONE : LIN_DEL_ABSENT,
				.ok = LIN_DONE, .call_ns = call, .ret_ns = ret };
}

static struct lin_op rmw(uint64_t nv, uint64_t old, uint64_t call,
			 uint64_t ret)
{
	return (struct lin_op){ .key = 1, .kind = LIN_RMW, .in = nv,
				.out = old, .ok = LIN_DONE, .call_ns = call,
				.ret_ns = ret };
}

static struct lin_op indet(struct lin_op o)
{
	o.ok = LIN_INDET;
	o.ret_ns = NEVER;
	return o;
}

static int check(const struct lin_op *o, size_t n)
{
	struct lin_result r;

	return lin_check(o, n, NULL, &r);
}

/* Check and, when it is a violation, show the explanation once. */
static int check_show(const char *what, const struct lin_op *o, size_t n,
		      const char *must_say)
{
	static struct lin_result r;
	int v = lin_check(o, n, NULL, &r);

	if (v == LIN_VIOLATION) {
		printf("# %s:\n", what);
		for (char *p = r.explain, *nl; *p; p = nl + 1) {
			nl = strchr(p, '\n');
			if (!nl)
				break;
			printf("#   %.*s\n", (int)(nl - p), p);
		}
		if (must_say && !strstr(r.explain, must_say)) {
			printf("#   (explanation lacks \"%s\")\n", must_say);
			g_test_failures++;
		}
	}
	return v;
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------- hand-made */

static void t_good_sequential(void)
{
	struct lin_op h[] = {
		get(A, 0, 5),      put(1, 10, 20),   get(1, 30, 40),
		del(1, 50, 60),    get(A, 70, 80),   del(0, 90, 100),
		rmw(2, A, 110, 120), rmw(3, 2, 130, 140), get(3, 150, 160),
	};

	EXPECT_EQ(check(h, 0), LIN_OK);
	EXPECT_EQ(check(h, N(h)), LIN_OK);
}

static void t_stale_read(void)
{
	struct lin_op h[] = { put(1, 0, 10), put(2, 20, 30), get(1, 40, 50) };

	EXPECT_EQ(check_show("stale read", h, N(h), "stale read"),
		  LIN_VIOLATION);
	h[2].call_ns = 25; /* concurrent with put 2: fine */
	EXPECT_EQ(check(h, N(h)), LIN_OK);
}

static void t_read_from_future(void)
{
	struct lin_op h[] = { get(1, 0, 10), put(1, 20, 30) };

	EXPECT_EQ(check_show("read from the future", h, N(h), "future"),
		  LIN_VIOLATION);
	h[1].call_ns = 10; /* touching: concurrent */
	EXPECT_EQ(check(h, N(h)), LIN_OK);
}

static void t_lost_rmw(void)
{
	struct lin_op h[] = { put(1, 0, 10), rmw(2, 1, 20, 40),
			      rmw(3, 1, 25, 45) };

	EXPECT_EQ(check_show("lost rmw", h, N(h), NULL), LIN_VIOLATION);
	h[2].out = 2; /* saw the first one's value: fine */
	EXPECT_EQ(check(h, N(h)), LIN_OK);
	struct lin_op seq[] = { rmw(2, A, 0, 10), rmw(3, A, 20, 30) };

	EXPECT_EQ(check(seq, N(seq)), LIN_VIOLATION);
}

static void t_resurrected_delete(void)
{
	struct lin_op h[] = { put(1, 0, 10), del(1, 20, 30), get(1, 40, 50) };

	EXPECT_EQ(check_show("resurrected delete", h, N(h), NULL),
		  LIN_VIOLATION);
	/* a delete that found nothing reveals the value too */
	struct lin_op h2[] = { put(1, 0, 10), del(0, 20, 30) };

	EXPECT_EQ(check(h2, N(h2)), LIN_VIOLATION);
	struct lin_op h3[] = { del(1, 0, 10) };

	EXPECT_EQ(check(h3, N(h3)), LIN_VIOLATION);
}

static void t_duplicate_copy(void)
{
	/* two copies of the key: reads flip between them */
	struct lin_op h[] = { put(1, 0, 10), put(2, 20, 30), get(1, 40, 50),
			      get(2, 60, 70), get(1, 80, 90) };

	EXPECT_EQ(check_show("duplicate copy", h, N(h), NULL), LIN_VIOLATION);
	/* concurrent puts: either may win, but not both in turn */
	struct lin_op c[] = { put(1, 0, 30), put(2, 5, 25), get(1, 40, 50),
			      get(2, 60, 70) };

	EXPECT_EQ(check(c, N(c)), LIN_VIOLATION);
	c[3].out = 1;
	EXPECT_EQ(check(c, N(c)), LIN_OK);
	c[2].out = c[3].out = 2;
	EXPECT_EQ(check(c, N(c)), LIN_OK);
}

static void t_indeterminate(void)
{
	/* must have happened */
	struct lin_op h[] = { put(1, 0, 10), indet(put(2, 20, 0)),
			      get(2, 100, 110) };

	EXPECT_EQ(check(h, N(h)), LIN_OK);
	/* must not have happened (yet) */
	h[2].out = 1;
	EXPECT_EQ(check(h, N(h)), LIN_OK);
	/* late: before then after */
	struct lin_op late[] = { put(1, 0, 10), indet(put(2, 20, 0)),
				 get(1, 100, 110), get(2, 200, 210) };

	EXPECT_EQ(check(late, N(late)), LIN_OK);
	/* it cannot un-happen */
	late[2].out = 2;
	late[3].out = 1;
	EXPECT_EQ(check_show("indeterminate put undone", late, N(late), NULL),
		  LIN_VIOLATION);
	/* never before its call */
	struct lin_op early[] = { get(2, 0, 10), indet(put(2, 20, 0)) };

	EXPECT_EQ(check(early, N(early)), LIN_VIOLATION);
	/* an indeterminate get says nothing; a failed put had no effect */
	struct lin_op g[] = { put(1, 0, 10), indet(get(77, 20, 0)),
			      put(2, 30, 40), get(1, 50, 60) };
	struct lin_result r;

	g[2].ok = LIN_FAILED;
	EXPECT_EQ(lin_check(g, N(g), NULL, &r), LIN_OK);
	EXPECT_EQ(r.dropped, 2);
	EXPECT_EQ(r.checked, 2);
	g[3].out = 2;
	EXPECT_EQ(check_show("failed put visible", g, N(g), "no op wrote"),
		  LIN_VIOLATION);
	/* indeterminate delete and rmw: either way */
	struct lin_op d[] = { put(1, 0, 10), indet(del(1, 20, 0)),
			      get(1, 30, 40), get(A, 50, 60) };

	EXPECT_EQ(check(d, N(d)), LIN_OK);
	d[2].out = A;
	d[3].out = 1;
	EXPECT_EQ(check(d, N(d)), LIN_VIOLATION);
	struct lin_op m[] = { put(1, 0, 10), indet(rmw(2, 99, 20, 0)),
			      get(2, 30, 40), rmw(3, 2, 50, 60) };

	EXPECT_EQ(lin_check(m, N(m), NULL, &r), LIN_OK);
	EXPECT_EQ(r.indeterminate, 1);
	m[3].out = 1; /* it happened (get saw 2), then 1 came back */
	EXPECT_EQ(check(m, N(m)), LIN_VIOLATION);
}

static void t_concurrent_any_order(void)
{
	/* three overlapping puts and reads that see them in some order */
	struct lin_op h[] = { put(1, 0, 100), put(2, 0, 100), put(3, 0, 100),
			      get(2, 10, 20), get(3, 30, 40), get(1, 50, 60) };

	EXPECT_EQ(check(h, N(h)), LIN_OK);
	h[5].out = 2; /* 2 came back after 3 */
	EXPECT_EQ(check(h, N(h)), LIN_VIOLATION);
	/* a get overlapping a put sees before or after */
	struct lin_op g[] = { put(1, 0, 10), put(2, 20, 60), get(1, 30, 40),
			      get(2, 45, 50), get(2, 70, 80) };

	EXPECT_EQ(check(g, N(g)), LIN_OK);
	g[2].out = A;
	EXPECT_EQ(check(g, N(g)), LIN_VIOLATION);
}

static void t_keys_and_errors(void)
{
	struct lin_op h[] = { put(1, 0, 10), put(2, 0, 10), put(3, 0, 10),
			      get(1, 20, 30), get(9, 20, 30), get(3, 20, 30) };
	struct lin_result r;

	h[1].key = h[4].key = 2;
	h[2].key = h[5].key = 3;
	EXPECT_EQ(lin_check(h, N(h), NULL, &r), LIN_VIOLATION);
	EXPECT_EQ(r.keys, 3);
	EXPECT_EQ(r.keys_violated, 1);
	EXPECT_EQ_U64(r.bad_key, 2);
	EXPECT_TRUE(strstr(r.explain, "key 0x2") != NULL);
	h[4].out = 2;
	EXPECT_EQ(lin_check(h, N(h), NULL, &r), LIN_OK);
	h[0].ret_ns = 0;
	h[0].call_ns = 5;
	EXPECT_EQ(lin_check(h, N(h), NULL, &r), -EINVAL);
	h[0] = put(A, 0, 10);
	EXPECT_EQ(lin_check(h, N(h), NULL, &r), -EINVAL);
	h[0].kind = 9;
	EXPECT_EQ(lin_check(h, N(h), NULL, &r), -EINVAL);
}

/* A violation the search can only prove by trying every order: the
 * budget makes it "unknown", never a pass. */
static void t_budget(void)
{
	struct lin_op h[20];
	struct lin_opts o;
	struct lin_result r;
	size_t n = 0;

	for (int i = 0; i < 8; i++)
		h[n++] = put((uint64_t)i + 1, 0, 1000);
	for (int i = 0; i < 8; i++)
		h[n++] = get((uint64_t)i + 1, 10 + (uint64_t)i, 990);
	h[n++] = get(555, 2000, 2010);
	lin_opts_init(&o);
	o.max_states = 1000;
	EXPECT_EQ(lin_check(h, n, &o, &r), LIN_UNKNOWN);
	EXPECT_EQ(r.keys_unknown, 1);
	EXPECT_TRUE(strstr(r.explain, "unknown") != NULL);
	EXPECT_EQ(lin_check(h, n, NULL, &r), LIN_VIOLATION);
	h[n - 1].out = 7; /* put 7 went last */
	EXPECT_EQ(lin_check(h, n, NULL, &r), LIN_OK);
}

/* ------------------------------------------------------- brute force */

static int brute_step(const struct lin_op *o, uint64_t st, uint64_t *ns)
{
	int done = o->ok == LIN_DONE;

	switch (o->kind) {
	case LIN_PUT:
		*ns = o->in;
		return 1;
	case LIN_GET:
		*ns = st;
		return st == o->out;
	case LIN_DEL:
		*ns = A;
		if (!done)
			return 1;
		return (o->out == LIN_DEL_DONE) == (st != A);
	default:
		*ns = o->in;
		return !done || o->out == st;
	}
}

/* Every order of the ops that respects real time (indeterminate ones may
 * be left out), tried in full. */
static int brute_rec(const struct lin_op *o, size_t n, unsigned used,
		     uint64_t st)
{
	int all = 1;

	for (size_t i = 0; i < n; i++)
		if (!(used >> i & 1) && o[i].ok == LIN_DONE)
			all = 0;
	if (all)
		return 1;
	for (size_t i = 0; i < n; i++) {
		uint64_t ns;
		int ready = 1;

		if (used >> i & 1)
			continue;
		for (size_t j = 0; j < n && ready; j++)
			if (j != i && !(used >> j & 1) && o[j].ok == LIN_DONE &&
			    o[j].ret_ns < o[i].call_ns)
				ready = 0;
		if (ready && brute_step(&o[i], st, &ns) &&
		    brute_rec(o, n, used | 1u << i, ns))
			return 1;
	}
	return 0;
}

static int brute(const struct lin_op *h, size_t n)
{
	struct lin_op o[16];
	size_t m = 0;

	for (size_t i = 0; i < n; i++)
		if (h[i].ok != LIN_FAILED &&
		    !(h[i].kind == LIN_GET && h[i].ok != LIN_DONE))
			o[m++] = h[i];
	return brute_rec(o, m, 0, A) ? LIN_OK : LIN_VIOLATION;
}

/* ------------------------------------------------------- generators */

static uint64_t g_rng = 88172645463325252ull;

static uint64_t rnd(uint64_t n)
{
	g_rng ^= g_rng << 13;
	g_rng ^= g_rng >> 7;
	g_rng ^= g_rng << 17;
	return n ? g_rng % n : g_rng;
}

/*
 * n ops on key, run one after another on a model (op i takes effect at
 * t0 + 100 i + 50), each given an interval around that instant up to
 * spread wide: linearizable by construction.  Some ops are indeterminate
 * (took effect or not), some puts failed.  *next is the next value id.
 */
static void gen(struct lin_op *o, size_t n, uint64_t key, uint64_t t0,
		uint64_t spread, unsigned indet_pct, uint64_t *next)
{
	uint64_t st = A;

	for (size_t i = 0; i < n; i++) {
		uint64_t at = t0 + 100 * i + 50, ns;
		unsigned pick = (unsigned)rnd(100);
		struct lin_op *x = &o[i];
		int applied = 1;

		*x = (struct lin_op){ .key = key, .ok = LIN_DONE,
				      .client = (int)rnd(4) };
		x->kind = pick < 30 ? LIN_PUT : pick < 65 ? LIN_GET
			: pick < 80 ? LIN_DEL : LIN_RMW;
		x->call_ns = at - rnd(spread / 2 + 1);
		x->ret_ns = at + rnd(spread / 2 + 1);
		if (x->kind != LIN_GET)
			x->in = (*next)++;
		if (rnd(100) < indet_pct) {
			x->ok = LIN_INDET;
			x->ret_ns = NEVER;
			applied = (int)rnd(2);
		} else if (x->kind == LIN_PUT && rnd(15) == 0) {
			x->ok = LIN_FAILED;
			applied = 0;
		}
		switch (x->kind) {
		case LIN_GET: x->out = x->ok == LIN_DONE ? st : 12345; break;
		case LIN_DEL: x->out = st != A ? LIN_DEL_DONE : LIN_DEL_ABSENT;
			break;
		case LIN_RMW: x->out = st; break;
		default: break;
		}
		if (applied && brute_step(x, st, &ns))
			st = ns;
	}
}

/* Change one done read's output: another value (older, newer, absent or
 * never written), or the other delete answer.  0 when none to change. */
static int mutate(struct lin_op *o, size_t n, uint64_t maxval)
{
	for (int tries = 0; tries < 20; tries++) {
		struct lin_op *x = &o[rnd(n)];

		if (x->ok != LIN_DONE || x->kind == LIN_PUT)
			continue;
		if (x->kind == LIN_DEL) {
			x->out ^= 1;
			return 1;
		}
		uint64_t v = rnd(4) == 0 ? A : 1 + rnd(maxval + 1);

		if (v == x->out)
			continue;
		x->out = v;
		return 1;
	}
	return 0;
}

/* Both checkers' verdict on h; a disagreement fails the test. */
static int agree(const struct lin_op *h, size_t n, const char *what)
{
	int b = brute(h, n), l = check(h, n);

	if (b != l) {
		printf("#   disagree on a %s history: brute %d, lin %d\n", what,
		       b, l);
		g_test_failures++;
	}
	return b;
}

static void t_random_vs_brute(void)
{
	unsigned good = 0, mutated = 0, flagged = 0, wild = 0, wild_bad = 0;

	for (int it = 0; it < 600; it++) {
		struct lin_op h[8];
		size_t n = 3 + rnd(6);
		uint64_t next = 1;

		gen(h, n, 1, 1000, 50 + rnd(400), 10, &next);
		int b = brute(h, n), l = check(h, n);

		EXPECT_EQ(b, LIN_OK);
		EXPECT_EQ(l, LIN_OK);
		good += l == LIN_OK;
		if (!mutate(h, n, next))
			continue;
		mutated++;
		flagged += agree(h, n, "mutated") == LIN_VIOLATION;
	}
	/* outputs drawn at random: mostly illegal, both ways */
	for (int it = 0; it < 400; it++) {
		struct lin_op h[7];
		size_t n = 2 + rnd(6);
		uint64_t next = 1;

		gen(h, n, 1, 1000, 300, 10, &next);
		for (size_t i = 0; i < n; i++)
			if (h[i].kind == LIN_GET || h[i].kind == LIN_RMW)
				h[i].out = rnd(3) ? rnd(next) : A;
		wild++;
		wild_bad += agree(h, n, "random") == LIN_VIOLATION;
	}
	printf("#   %u generated histories pass; %u mutated, %u of them "
	       "illegal and flagged; %u random, %u illegal; each compared "
	       "with brute force\n", good, mutated, flagged, wild, wild_bad);
	EXPECT_TRUE(flagged * 5 > mutated); /* the mutations have teeth */
	EXPECT_TRUE(wild_bad * 3 > wild);
}

/* A done op that certainly supersedes a done write (began after it
 * returned) and returned before o[g] began: o[g] reading that write's
 * value is certainly stale. */
static uint64_t certainly_stale(const struct lin_op *o, size_t g)
{
	for (size_t nw = g; nw-- > 0;) {
		const struct lin_op *x = &o[nw];

		if (x->ok != LIN_DONE || x->ret_ns >= o[g].call_ns ||
		    x->kind == LIN_GET ||
		    (x->kind == LIN_DEL && x->out != LIN_DEL_DONE))
			continue;
		for (size_t ow = nw; ow-- > 0;) {
			const struct lin_op *w = &o[ow];

			if ((w->kind == LIN_PUT || w->kind == LIN_RMW) &&
			    w->ok == LIN_DONE && w->ret_ns < x->call_ns &&
			    w->in != o[g].out)
				return w->in;
		}
		return A;
	}
	return A;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void t_large(void)
{
	const char *env = getenv("RKV_LIN_UNIT_OPS");
	size_t per = env ? strtoull(env, NULL, 10) / 8 : 5000;
	const char *ienv = getenv("RKV_LIN_UNIT_INDET");
	unsigned indet_pct = ienv ? (unsigned)atoi(ienv) : 1;
	struct lin_op *h = calloc(per * 8, sizeof(*h));
	struct lin_result r;
	uint64_t next = 1;

	ASSERT_TRUE(h != NULL);
	for (int k = 0; k < 8; k++)
		gen(h + per * (size_t)k, per, (uint64_t)k + 100, 5000, 500,
		    indet_pct, &next);
	double t0 = now_s();

	EXPECT_EQ(lin_check(h, per * 8, NULL, &r), LIN_OK);
	double dt = now_s() - t0;

	printf("#   %zu ops (%zu checked, %zu indeterminate) over %zu keys: "
	       "%.3f s, %.0f ops/s, %" PRIu64 " states\n",
	       r.ops, r.checked, r.indeterminate, r.keys, dt,
	       dt > 0 ? (double)r.checked / dt : 0.0, r.states);
	/* stale reads planted deep in one key's history are found */
	unsigned planted = 0, found = 0;

	for (int m = 0; m < 10; m++) {
		size_t g = per / 2 + rnd(per / 2);

		if (h[g].kind != LIN_GET || h[g].ok != LIN_DONE)
			continue;
		uint64_t stale = certainly_stale(h, g), keep = h[g].out;

		if (stale == A)
			continue;
		h[g].out = stale;
		planted++;
		double t1 = now_s();
		int v = lin_check(h, per, NULL, &r);

		if (v == LIN_VIOLATION)
			found++;
		else
			printf("#   missed (%s): %s\n", lin_verdict_str(v),
			       r.explain);
		if (getenv("RKV_LIN_UNIT_VERBOSE"))
			printf("#   planted at %zu: %" PRIu64 " states, %.3f s\n",
			       g, r.states, now_s() - t1);
		h[g].out = keep;
	}
	printf("#   %u stale reads planted in %zu-op histories, %u found\n",
	       planted, per, found);
	EXPECT_EQ(found, planted);
	free(h);
}

/* ------------------------------------------------------------- files */

static int same_op(const struct lin_op *a, const struct lin_op *b)
{
	return a->key == b->key && a->kind == b->kind && a->in == b->in &&
	       a->out == b->out && a->ok == b->ok && a->call_ns == b->call_ns &&
	       a->ret_ns == b->ret_ns && a->client == b->client;
}

static void t_files(void)
{
	char dir[] = "/tmp/rkv-lin-XXXXXX", path[64], log[64];
	struct lin_op h[] = { put(1, 0, 10), indet(put(2, 20, 0)),
			      get(2, 30, 40), del(1, 50, 60),
			      rmw(5, A, 70, 80) };
	struct lin_hist lh = { 0 };
	size_t bad = 0;

	ASSERT_TRUE(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/h", dir);
	snprintf(log, sizeof(log), "%s/log", dir);
	h[2].client = 7;
	h[3].key = 0xabcdef;
	EXPECT_EQ(lin_save(path, h, N(h)), 0);
	EXPECT_EQ(lin_load(path, &lh, &bad), 0);
	ASSERT_EQ(lh.n, N(h));
	for (size_t i = 0; i < N(h); i++)
		EXPECT_TRUE(same_op(&lh.ops[i], &h[i]));
	lin_hist_fini(&lh);
	/* call/answer log: a call without its answer is open */
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ASSERT_TRUE(fd >= 0);
	EXPECT_EQ(lin_log_call(fd, 3, 1, 1, LIN_PUT, 9, 100), 0);
	EXPECT_EQ(lin_log_ret(fd, 3, 1, 0, LIN_DONE, 110), 0);
	EXPECT_EQ(lin_log_call(fd, 3, 2, 1, LIN_GET, 0, 120), 0);
	EXPECT_EQ(lin_log_ret(fd, 3, 2, 9, LIN_DONE, 130), 0);
	EXPECT_EQ(lin_log_call(fd, 3, 3, 1, LIN_RMW, 10, 140), 0);
	close(fd);
	EXPECT_EQ(lin_load(log, &lh, &bad), 0);
	ASSERT_EQ(lh.n, 3);
	EXPECT_EQ(lh.open, 1);
	EXPECT_EQ(lh.ops[1].out, 9);
	EXPECT_EQ(lh.ops[2].ok, LIN_INDET);
	EXPECT_EQ_U64(lh.ops[2].ret_ns, NEVER);
	EXPECT_EQ(check(lh.ops, lh.n), LIN_OK);
	lin_hist_fini(&lh);
	/* a kill cut the last write short: the torn answer leaves its call
	 * open, a torn call is no op */
	fd = open(log, O_WRONLY | O_APPEND);
	ASSERT_TRUE(fd >= 0);
	off_t whole = lseek(fd, 0, SEEK_END);

	EXPECT_EQ(write(fd, "r 3 3 a 1", 9), 9);
	close(fd);
	EXPECT_EQ(lin_load(log, &lh, &bad), 0);
	ASSERT_EQ(lh.n, 3);
	EXPECT_EQ(lh.open, 1);
	EXPECT_EQ(lh.ops[2].ok, LIN_INDET);
	lin_hist_fini(&lh);
	ASSERT_EQ(truncate(log, whole), 0);
	fd = open(log, O_WRONLY | O_APPEND);
	ASSERT_TRUE(fd >= 0);
	EXPECT_EQ(write(fd, "c 3 4 1 pu", 10), 10);
	close(fd);
	EXPECT_EQ(lin_load(log, &lh, &bad), 0);
	EXPECT_EQ(lh.n, 3);
	lin_hist_fini(&lh);
	/* a bad line with its newline is no cut write */
	ASSERT_EQ(truncate(log, whole), 0);
	fd = open(log, O_WRONLY | O_APPEND);
	ASSERT_TRUE(fd >= 0);
	EXPECT_EQ(write(fd, "r 4 1 0 1 5\n", 12), 12); /* no such call */
	close(fd);
	EXPECT_EQ(lin_load(log, &lh, &bad), -EBADMSG);
	EXPECT_EQ(bad, 6);
	lin_hist_fini(&lh);
	EXPECT_EQ(lin_load("/nonexistent/h", &lh, NULL), -ENOENT);
	unlink(path);
	unlink(log);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	rkv_test_init(argc, argv, 60);
	RKV_TEST(t_good_sequential);
	RKV_TEST(t_stale_read);
	RKV_TEST(t_read_from_future);
	RKV_TEST(t_lost_rmw);
	RKV_TEST(t_resurrected_delete);
	RKV_TEST(t_duplicate_copy);
	RKV_TEST(t_indeterminate);
	RKV_TEST(t_concurrent_any_order);
	RKV_TEST(t_keys_and_errors);
	RKV_TEST(t_budget);
	RKV_TEST(t_random_vs_brute);
	RKV_TEST(t_large);
	RKV_TEST(t_files);
	return rkv_test_done();
}
