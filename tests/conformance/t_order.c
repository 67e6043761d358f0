/* SPDX-License-Identifier: MIT */
/*
 * t_order.c - ordering on one endpoint and posting shapes: WRITE then READ
 * (signaled or not, chained or in separate posts) sees the written data,
 * WRITE then CAS / FETCH_ADD sees it, the last of many WRITEs wins;
 * completions come back in posting order; a mixed 16-WR chain; unsignaled
 * WRs take effect without completing; a full send queue gives -ENOMEM with
 * *bad at the first WR not posted.
 */
#include "conf.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static uint64_t rword(struct conf_fix *f, size_t off)
{
	return conf_rd64(f->s.reg + off);
}

static void set_rword(struct conf_fix *f, size_t off, uint64_t v)
{
	conf_wr64(f->s.reg + off, v);
}

static uint64_t *lword(struct conf_fix *f, size_t off)
{
	return (uint64_t *)(void *)(f->c.loc + off);
}

static void link_chain(struct rkv_wr *w, int n)
{
	for (int i = 0; i < n; i++)
		w[i].next = i + 1 < n ? &w[i + 1] : NULL;
}

/* WRITE then READ of the same range: chained, and in two posts. */
static void write_read(int signal_write, int chained)
{
	const uint32_t len = 4096;
	struct conf_fix f;
	struct rkv_wr w[2], *bad;
	int want = signal_write ? 2 : 1;

	CONF_FIX(&f, NULL);
	for (int it = 0; it < 50; it++) {
		size_t roff = 8192 + (size_t)(it % 7) * 512;

		conf_fill(f.c.loc, len, (uint32_t)it);
		memset(f.c.loc + 65536, 0, len);
		conf_wr(&w[0], RKV_WR_WRITE, 1,
			signal_write ? RKV_WR_SIGNALED : 0, f.c.loc, len,
			f.c.loc_mr->lkey, conf_raddr(&f.s, roff),
			f.s.mr->rkey);
		conf_wr(&w[1], RKV_WR_READ, 2, RKV_WR_SIGNALED,
			f.c.loc + 65536, len, f.c.loc_mr->lkey,
			conf_raddr(&f.s, roff), f.s.mr->rkey);
		conf_stash_clear(&f.c.st);
		if (chained) {
			link_chain(w, 2);
			ASSERT_EQ(rkv_post(f.c.ep, w, &bad), 0);
		} else {
			ASSERT_EQ(rkv_post(f.c.ep, &w[0], &bad), 0);
			ASSERT_EQ(rkv_post(f.c.ep, &w[1], &bad), 0);
		}
		if (conf_wait(&f.s, &f.c, want, 0, conf_bound_ms())) {
			printf("#   iteration %d: %d of %d completions\n", it,
			       f.c.st.n, want);
			g_test_failures++;
			break;
		}
		for (int i = 0; i < f.c.st.n; i++)
			EXPECT_EQ(f.c.st.wc[i].status, RKV_WC_SUCCESS);
		EXPECT_EQ_U64(f.c.st.wc[want - 1].wr_id, 2);
		if (conf_diff(f.c.loc + 65536, f.c.loc, len) >= 0) {
			printf("#   iteration %d: READ did not see the WRITE "
			       "(byte %ld)\n",
			       it, conf_diff(f.c.loc + 65536, f.c.loc, len));
			g_test_failures++;
			break;
		}
	}
	conf_quiesce(&f.s, &f.c, 20);
	EXPECT_EQ(f.c.st.n, want); /* no completion for the unsignaled */
	conf_fix_destroy(&f);
}

static void t_write_then_read(void)
{
	write_read(1, 0);
	write_read(1, 1);
}

static void t_unsignaled_write_then_read(void)
{
	write_read(0, 0);
	write_read(0, 1);
}

/* WRITE v, then CAS(v -> v+1) or FETCH_ADD: the atomic sees v. */
static void write_atomic(enum rkv_wr_opcode op)
{
	struct conf_fix f;
	struct rkv_wr w[2], *bad;

	CONF_FIX(&f, NULL);
	CONF_NEED_ATOMICS(&f);
	for (int it = 0; it < 50; it++) {
		uint64_t v = 0x1111111111111111ull * (uint64_t)(it % 15 + 1) +
			     (uint64_t)it;

		*lword(&f, 0) = v;
		*lword(&f, 8) = 0;
		conf_wr(&w[0], RKV_WR_WRITE, 1, it & 1 ? RKV_WR_SIGNALED : 0,
			f.c.loc, 8, f.c.loc_mr->lkey, conf_raddr(&f.s, 4096),
			f.s.mr->rkey);
		conf_wr(&w[1], op, 2, RKV_WR_SIGNALED, f.c.loc + 8, 8,
			f.c.loc_mr->lkey, conf_raddr(&f.s, 4096),
			f.s.mr->rkey);
		w[1].compare_add = op == RKV_WR_CAS ? v : 3;
		w[1].swap = v + 1;
		conf_stash_clear(&f.c.st);
		if (it % 4 < 2) {
			link_chain(w, 2);
			ASSERT_EQ(rkv_post(f.c.ep, w, &bad), 0);
		} else {
			ASSERT_EQ(rkv_post(f.c.ep, &w[0], &bad), 0);
			ASSERT_EQ(rkv_post(f.c.ep, &w[1], &bad), 0);
		}
		if (conf_wait(&f.s, &f.c, (it & 1) + 1, 0, conf_bound_ms())) {
			g_test_failures++;
			printf("#   iteration %d: timed out\n", it);
			break;
		}
		EXPECT_EQ(f.c.st.wc[f.c.st.n - 1].status, RKV_WC_SUCCESS);
		if (*lword(&f, 8) != v) {
			printf("#   iteration %d: %s saw 0x%" PRIx64
			       ", written 0x%" PRIx64 "\n",
			       it, rkv_wr_opcode_str(op), *lword(&f, 8), v);
			g_test_failures++;
			break;
		}
		EXPECT_EQ_U64(rword(&f, 4096), op == RKV_WR_CAS ? v + 1 : v + 3);
	}
	conf_fix_destroy(&f);
}

static void t_write_then_cas(void)
{
	write_atomic(RKV_WR_CAS);
}

static void t_write_then_fetch_add(void)
{
	write_atomic(RKV_WR_FETCH_ADD);
}

/* 200 WRITEs to one place (signaled every 32nd), then a READ: the last. */
static void t_many_writes_then_read(void)
{
	enum { N = 200, LEN = 64 };
	struct rkv_wr w[N + 1], *bad;
	struct conf_fix f;
	int nsig = 0;

	CONF_FIX(&f, NULL);
	for (int i = 0; i < N; i++) {
		int sig = i % 32 == 31;

		conf_fill(f.c.loc + LEN * i, LEN, 1000 + (uint32_t)i);
		conf_wr(&w[i], RKV_WR_WRITE, (uint64_t)i,
			sig ? RKV_WR_SIGNALED : 0, f.c.loc + LEN * i, LEN,
			f.c.loc_mr->lkey, conf_raddr(&f.s, 640), f.s.mr->rkey);
		nsig += sig;
	}
	conf_wr(&w[N], RKV_WR_READ, N, RKV_WR_SIGNALED, f.c.loc + 65536, LEN,
		f.c.loc_mr->lkey, conf_raddr(&f.s, 640), f.s.mr->rkey);
	conf_stash_clear(&f.c.st);
	/* One post per WR: the back-to-back case, not only chains. */
	for (int i = 0; i <= N; i++) {
		w[i].next = NULL;
		ASSERT_EQ(rkv_post(f.c.ep, &w[i], &bad), 0);
	}
	EXPECT_EQ(conf_wait(&f.s, &f.c, nsig + 1, 0, conf_bound_ms()), 0);
	for (int i = 0; i < f.c.st.n; i++)
		EXPECT_EQ(f.c.st.wc[i].status, RKV_WC_SUCCESS);
	EXPECT_TRUE(conf_diff(f.c.loc + 65536, f.c.loc + LEN * (N - 1), LEN) <
		    0);
	EXPECT_TRUE(conf_diff(f.s.reg + 640, f.c.loc + LEN * (N - 1), LEN) <
		    0);
	conf_quiesce(&f.s, &f.c, 20);
	EXPECT_EQ(f.c.st.n, nsig + 1);
	conf_fix_destroy(&f);
}

/* A 1 MiB unsignaled WRITE, then an 8 B READ of its tail. */
static void t_large_write_then_small_read(void)
{
	const uint32_t len = 1u << 20;
	struct rkv_wr w[2], *bad;
	struct conf_fix f;

	CONF_FIX(&f, NULL);
	conf_fill(f.c.loc, len, 77);
	conf_wr(&w[0], RKV_WR_WRITE, 1, 0, f.c.loc, len, f.c.loc_mr->lkey,
		conf_raddr(&f.s, 0), f.s.mr->rkey);
	conf_wr(&w[1], RKV_WR_READ, 2, RKV_WR_SIGNALED, f.c.loc + (2u << 20),
		8, f.c.loc_mr->lkey, conf_raddr(&f.s, len - 8), f.s.mr->rkey);
	conf_stash_clear(&f.c.st);
	ASSERT_EQ(rkv_post(f.c.ep, &w[0], &bad), 0);
	ASSERT_EQ(rkv_post(f.c.ep, &w[1], &bad), 0);
	EXPECT_EQ(conf_wait(&f.s, &f.c, 1, 0, conf_bound_ms()), 0);
	EXPECT_EQ(f.c.st.wc[0].status, RKV_WC_SUCCESS);
	EXPECT_TRUE(conf_diff(f.c.loc + (2u << 20), f.c.loc + len - 8, 8) < 0);
	conf_fix_destroy(&f);
}

/* Signaled WRs posted one by one complete in posting order. */
static void t_completion_order(void)
{
	enum { N = 96 };
	struct rkv_wr w[N], *bad;
	struct conf_fix f;

	CONF_FIX(&f, NULL);
	conf_stash_clear(&f.c.st);
	for (int i = 0; i < N; i++) {
		/* Mix small and large, READ and WRITE. */
		uint32_t len = i % 5 == 0 ? 65536 : 8;
		enum rkv_wr_opcode op = i % 3 ? RKV_WR_READ : RKV_WR_WRITE;

		conf_wr(&w[i], op, (uint64_t)i, RKV_WR_SIGNALED,
			f.c.loc + 65536 * (size_t)i, len, f.c.loc_mr->lkey,
			conf_raddr(&f.s, 65536 * (size_t)(i % 64)),
			f.s.mr->rkey);
		ASSERT_EQ(rkv_post(f.c.ep, &w[i], &bad), 0);
	}
	EXPECT_EQ(conf_wait(&f.s, &f.c, N, 0, conf_bound_ms()), 0);
	for (int i = 0; i < f.c.st.n; i++) {
		EXPECT_EQ(f.c.st.wc[i].status, RKV_WC_SUCCESS);
		if (f.c.st.wc[i].wr_id != (uint64_t)i) {
			printf("#   completion %d has wr_id %" PRIu64 "\n", i,
			       f.c.st.wc[i].wr_id);
			g_test_failures++;
			break;
		}
		EXPECT_EQ(f.c.st.wc[i].opcode, w[i].opcode);
		EXPECT_TRUE(f.c.st.wc[i].ep == f.c.ep);
	}
	conf_fix_destroy(&f);
}

/*
 * One rkv_post of 16 mixed WRs, all signaled; each result checked.  No READ
 * is followed by a WRITE or atomic to the same bytes: verbs orders that
 * only with a fence (a retried READ may see the later write), so the
 * write-after-read case has its own test below.
 */
static void t_chain_mixed(void)
{
	enum { N = 16 };
	struct rkv_wr w[N];
	struct conf_fix f;
	uint32_t lk, rk;
	uint8_t *a, *b, *c;
	const size_t off0 = 0, off1 = 4096, off2 = 8192, ow = 65536,
		     ow2 = 65544;
	int atom;

	CONF_FIX(&f, NULL);
	atom = rkv_tp_has_atomics(f.c.tp);
	lk = f.c.loc_mr->lkey;
	rk = f.s.mr->rkey;
	a = f.c.loc;            /* 64 B */
	b = f.c.loc + 4096;     /* 4 KiB */
	c = f.c.loc + 8192;     /* 64 B */
	conf_fill(a, 64, 1);
	conf_fill(b, 4096, 2);
	conf_fill(c, 64, 3);
	set_rword(&f, ow, 0);
	set_rword(&f, ow2, 10);
	memset(f.c.loc + 16384, 0, 16384);
#define R(i) (f.c.loc + 16384 + 4096 * (size_t)((i) % 4) + 64 * (size_t)(i))
	conf_wr(&w[0], RKV_WR_WRITE, 0, 1, a, 64, lk, conf_raddr(&f.s, off0),
		rk);
	conf_wr(&w[1], RKV_WR_WRITE, 1, 1, b, 4096, lk, conf_raddr(&f.s, off1),
		rk);
	conf_wr(&w[2], RKV_WR_READ, 2, 1, R(2), 64, lk, conf_raddr(&f.s, off0),
		rk);
	conf_wr(&w[3], RKV_WR_READ, 3, 1, f.c.loc + 32768, 4096, lk,
		conf_raddr(&f.s, off1), rk);
	conf_wr(&w[4], RKV_WR_CAS, 4, 1, R(4), 8, lk, conf_raddr(&f.s, ow), rk);
	w[4].compare_add = 0;
	w[4].swap = 111;
	conf_wr(&w[5], RKV_WR_CAS, 5, 1, R(5), 8, lk, conf_raddr(&f.s, ow), rk);
	w[5].compare_add = 111;
	w[5].swap = 222;
	conf_wr(&w[6], RKV_WR_FETCH_ADD, 6, 1, R(6), 8, lk,
		conf_raddr(&f.s, ow2), rk);
	w[6].compare_add = 1;
	conf_wr(&w[7], RKV_WR_FETCH_ADD, 7, 1, R(7), 8, lk,
		conf_raddr(&f.s, ow2), rk);
	w[7].compare_add = 2;
	conf_wr(&w[8], RKV_WR_WRITE, 8, 1, c, 64, lk, conf_raddr(&f.s, off2),
		rk);
	conf_wr(&w[9], RKV_WR_READ, 9, 1, R(9), 64, lk, conf_raddr(&f.s, off2),
		rk);
	conf_wr(&w[10], RKV_WR_FETCH_ADD, 10, 1, R(10), 8, lk,
		conf_raddr(&f.s, ow), rk);
	w[10].compare_add = 3;
	conf_wr(&w[11], RKV_WR_READ, 11, 1, R(11), 8, lk, conf_raddr(&f.s, ow),
		rk);
	conf_wr(&w[12], RKV_WR_WRITE, 12, 1, c, 0, lk, conf_raddr(&f.s, off0),
		rk);
	conf_wr(&w[13], RKV_WR_READ, 13, 1, R(13), 1, lk,
		conf_raddr(&f.s, off1), rk);
	conf_wr(&w[14], RKV_WR_CAS, 14, 1, R(14), 8, lk, conf_raddr(&f.s, ow),
		rk);
	w[14].compare_add = 999;
	w[14].swap = 0;
	conf_wr(&w[15], RKV_WR_READ, 15, 1, R(15), 8, lk, conf_raddr(&f.s, ow2),
		rk);
	if (!atom) {
		/* Same shape without atomics: turn them into 8 B READs. */
		for (int i = 0; i < N; i++) {
			if (w[i].opcode == RKV_WR_CAS ||
			    w[i].opcode == RKV_WR_FETCH_ADD)
				w[i].opcode = RKV_WR_READ;
		}
	}
	link_chain(w, N);
	ASSERT_EQ(conf_post_wait(&f, w, N), 0);
	for (int i = 0; i < N && i < f.c.st.n; i++) {
		EXPECT_EQ(f.c.st.wc[i].status, RKV_WC_SUCCESS);
		EXPECT_EQ_U64(f.c.st.wc[i].wr_id, i);
		EXPECT_EQ(f.c.st.wc[i].opcode, w[i].opcode);
	}
	EXPECT_TRUE(conf_diff(R(2), a, 64) < 0);
	EXPECT_TRUE(conf_diff(f.c.loc + 32768, b, 4096) < 0);
	EXPECT_TRUE(conf_diff(R(9), c, 64) < 0);
	EXPECT_EQ(*R(13), b[0]);
	EXPECT_TRUE(conf_diff(f.s.reg + off0, a, 64) < 0);
	EXPECT_TRUE(conf_diff(f.s.reg + off2, c, 64) < 0);
	if (atom) {
		uint64_t v;

		memcpy(&v, R(4), 8);
		EXPECT_EQ_U64(v, 0);
		memcpy(&v, R(5), 8);
		EXPECT_EQ_U64(v, 111);
		memcpy(&v, R(6), 8);
		EXPECT_EQ_U64(v, 10);
		memcpy(&v, R(7), 8);
		EXPECT_EQ_U64(v, 11);
		memcpy(&v, R(10), 8);
		EXPECT_EQ_U64(v, 222);
		memcpy(&v, R(11), 8);
		EXPECT_EQ_U64(v, 225);
		memcpy(&v, R(14), 8);
		EXPECT_EQ_U64(v, 225);
		memcpy(&v, R(15), 8);
		EXPECT_EQ_U64(v, 13);
		EXPECT_EQ_U64(rword(&f, ow), 225);
		EXPECT_EQ_U64(rword(&f, ow2), 13);
	}
#undef R
	conf_fix_destroy(&f);
}

/*
 * READ then WRITE / FETCH_ADD of the same bytes, chained: the READ returns
 * the data from before the write, as transport.h's "operations posted on
 * one endpoint execute in order at the target" says.  (On verbs this holds
 * unless a READ response is lost and the READ retried after the write;
 * loopback and Soft-RoCE do not lose packets in practice.)
 */
static void t_read_then_write(void)
{
	struct rkv_wr w[4];
	struct conf_fix f;
	uint64_t v;
	int atom;

	CONF_FIX(&f, NULL);
	atom = rkv_tp_has_atomics(f.c.tp);
	for (int it = 0; it < 20; it++) {
		conf_fill(f.s.reg, 64, 600 + (uint32_t)it);
		set_rword(&f, 4096, 1000 + (uint64_t)it);
		conf_fill(f.c.loc, 64, 700 + (uint32_t)it);
		memset(f.c.loc + 1024, 0, 128);
		conf_wr(&w[0], RKV_WR_READ, 0, RKV_WR_SIGNALED, f.c.loc + 1024,
			64, f.c.loc_mr->lkey, conf_raddr(&f.s, 0),
			f.s.mr->rkey);
		conf_wr(&w[1], RKV_WR_WRITE, 1, RKV_WR_SIGNALED, f.c.loc, 64,
			f.c.loc_mr->lkey, conf_raddr(&f.s, 0), f.s.mr->rkey);
		conf_wr(&w[2], RKV_WR_READ, 2, RKV_WR_SIGNALED, f.c.loc + 1088,
			8, f.c.loc_mr->lkey, conf_raddr(&f.s, 4096),
			f.s.mr->rkey);
		conf_wr(&w[3], atom ? RKV_WR_FETCH_ADD : RKV_WR_WRITE, 3,
			RKV_WR_SIGNALED, f.c.loc + 1096, 8, f.c.loc_mr->lkey,
			conf_raddr(&f.s, 4096), f.s.mr->rkey);
		w[3].compare_add = 5;
		*lword(&f, 1096) = 7;
		link_chain(w, 4);
		{
			uint8_t before[64];

			conf_memcpy(before, f.s.reg, 64);
			ASSERT_EQ(conf_post_wait(&f, w, 4), 0);
			if (conf_diff(f.c.loc + 1024, before, 64) >= 0) {
				printf("#   iteration %d: READ saw the WRITE "
				       "posted after it\n", it);
				g_test_failures++;
				break;
			}
		}
		memcpy(&v, f.c.loc + 1088, 8);
		if (v != 1000 + (uint64_t)it) {
			printf("#   iteration %d: READ saw %" PRIu64
			       ", expected %" PRIu64 " (before the %s)\n",
			       it, v, 1000 + (uint64_t)it,
			       atom ? "FETCH_ADD" : "WRITE");
			g_test_failures++;
			break;
		}
		EXPECT_TRUE(conf_diff(f.s.reg, f.c.loc, 64) < 0);
	}
	conf_fix_destroy(&f);
}

/* A chain of 16 WRITEs with two signaled: two completions, 16 effects. */
static void t_chain_partial_signal(void)
{
	enum { N = 16 };
	struct rkv_wr w[N];
	struct conf_fix f;

	CONF_FIX(&f, NULL);
	for (int i = 0; i < N; i++) {
		conf_fill(f.c.loc + 128 * i, 128, 500 + (uint32_t)i);
		conf_wr(&w[i], RKV_WR_WRITE, (uint64_t)i,
			i == 5 || i == 15 ? RKV_WR_SIGNALED : 0,
			f.c.loc + 128 * i, 128, f.c.loc_mr->lkey,
			conf_raddr(&f.s, 1024 * (size_t)i), f.s.mr->rkey);
	}
	link_chain(w, N);
	ASSERT_EQ(conf_post_wait(&f, w, 2), 0);
	conf_quiesce(&f.s, &f.c, 30);
	EXPECT_EQ(f.c.st.n, 2);
	EXPECT_EQ_U64(f.c.st.wc[0].wr_id, 5);
	EXPECT_EQ_U64(f.c.st.wc[1].wr_id, 15);
	for (int i = 0; i < N; i++) {
		if (conf_diff(f.s.reg + 1024 * i, f.c.loc + 128 * i, 128) >=
		    0) {
			printf("#   WRITE %d of the chain did not land\n", i);
			g_test_failures++;
		}
	}
	conf_fix_destroy(&f);
}

/*
 * Unsignaled work, many times over: 7 unsignaled WRITEs (separate posts)
 * and one signaled READ of the last; exactly one completion each round.
 */
static void t_unsignaled_work(void)
{
	const int rounds = (int)conf_scale(300, 100);
	struct conf_fix f;
	struct rkv_wr w[8], *bad;
	int completions = 0;

	CONF_FIX(&f, NULL);
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < 7; i++) {
			uint64_t v = (uint64_t)r << 8 | (uint64_t)i;

			memcpy(f.c.loc + 64 * i, &v, 8);
			conf_wr(&w[i], RKV_WR_WRITE, (uint64_t)i, 0,
				f.c.loc + 64 * i, 8, f.c.loc_mr->lkey,
				conf_raddr(&f.s, 8 * (size_t)i), f.s.mr->rkey);
			ASSERT_EQ(rkv_post(f.c.ep, &w[i], &bad), 0);
		}
		conf_wr(&w[7], RKV_WR_READ, 7, RKV_WR_SIGNALED, f.c.loc + 4096,
			56, f.c.loc_mr->lkey, conf_raddr(&f.s, 0),
			f.s.mr->rkey);
		conf_stash_clear(&f.c.st);
		ASSERT_EQ(rkv_post(f.c.ep, &w[7], &bad), 0);
		if (conf_wait(&f.s, &f.c, 1, 0, conf_bound_ms())) {
			printf("#   round %d: no completion\n", r);
			g_test_failures++;
			break;
		}
		completions += f.c.st.n;
		EXPECT_EQ_U64(f.c.st.wc[0].wr_id, 7);
		for (int i = 0; i < 7; i++) {
			uint64_t v;

			memcpy(&v, f.c.loc + 4096 + 8 * i, 8);
			if (v != ((uint64_t)r << 8 | (uint64_t)i)) {
				printf("#   round %d: WRITE %d not seen\n", r,
				       i);
				g_test_failures++;
				goto out;
			}
		}
	}
out:
	conf_stash_clear(&f.c.st);
	conf_quiesce(&f.s, &f.c, 30);
	completions += f.c.st.n;
	EXPECT_EQ(completions, rounds);
	conf_fix_destroy(&f);
}

/* max_send_wr 16: a chain of 64 stops with -ENOMEM at the first WR that
 * does not fit; the ones before it complete; the endpoint stays usable. */
static void t_sq_full(void)
{
	enum { N = 64 };
	struct conf_fix_opts o;
	struct rkv_wr w[N], *bad = NULL;
	struct conf_fix f;
	long k;
	int rc;

	conf_fix_opts_init(&o);
	o.region_len = o.local_len = 1u << 20;
	o.cli_max_send_wr = 16;
	CONF_FIX(&f, &o);
	for (int i = 0; i < N; i++)
		conf_wr(&w[i], RKV_WR_READ, (uint64_t)i, RKV_WR_SIGNALED,
			f.c.loc + 8 * i, 8, f.c.loc_mr->lkey,
			conf_raddr(&f.s, 8 * (size_t)i), f.s.mr->rkey);
	link_chain(w, N);
	conf_stash_clear(&f.c.st);
	rc = rkv_post(f.c.ep, w, &bad);
	EXPECT_EQ(rc, -ENOMEM);
	k = bad ? bad - w : N;
	if (rc == -ENOMEM) {
		EXPECT_TRUE(bad != NULL);
		EXPECT_TRUE(k >= 16 && k < N);
		printf("#   %ld WRs accepted before -ENOMEM\n", k);
	} else {
		k = rc == 0 ? N : 0;
	}
	EXPECT_EQ(conf_wait(&f.s, &f.c, (int)k, 0, conf_bound_ms()), 0);
	conf_quiesce(&f.s, &f.c, 30);
	EXPECT_EQ(f.c.st.n, k);
	for (int i = 0; i < f.c.st.n; i++) {
		EXPECT_EQ(f.c.st.wc[i].status, RKV_WC_SUCCESS);
		EXPECT_EQ_U64(f.c.st.wc[i].wr_id, i);
	}
	/* Room again. */
	w[0].next = NULL;
	EXPECT_EQ(conf_post_wait(&f, &w[0], 1), 0);
	EXPECT_EQ(f.c.st.wc[0].status, RKV_WC_SUCCESS);
	EXPECT_EQ(rkv_ep_state(f.c.ep), RKV_EP_CONNECTED);
	conf_fix_destroy(&f);
}

void conf_tests_order(void)
{
	CONF_TEST(t_write_then_read);
	CONF_TEST(t_unsignaled_write_then_read);
	CONF_TEST(t_write_then_cas);
	CONF_TEST(t_write_then_fetch_add);
	CONF_TEST(t_many_writes_then_read);
	CONF_TEST(t_large_write_then_small_read);
	CONF_TEST(t_completion_order);
	CONF_TEST(t_chain_mixed);
	CONF_TEST(t_read_then_write);
	CONF_TEST(t_chain_partial_signal);
	CONF_TEST(t_unsignaled_work);
	CONF_TEST(t_sq_full);
}
