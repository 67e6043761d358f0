/* SPDX-License-Identifier: MIT */
/*
 * t_errors.c - errors that change nothing.  Each case runs on a fresh
 * connection (an error puts the endpoint, and on verbs the QP pair, in
 * error state): bad rkey, out of bounds (one byte past the end, before the
 * start, wrapping the address space), access the region does not allow,
 * an rkey used outside its own region, a deregistered MR; bad lkey and
 * local range.  Each checks the status, that every registered byte on the
 * server is unchanged, that the endpoint is RKV_EP_ERROR, and that a WR
 * posted afterwards completes with RKV_WC_WR_FLUSH_ERR.  Also: outstanding
 * WRs and RECVs flush, a failing unsignaled WR still completes, and
 * malformed WRs are refused by rkv_post with -EINVAL and *bad set.
 */
#include "conf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

#define SMALL (64u << 10)

struct snap {
	uint8_t *mem, *ro, *wo;
	size_t mem_len;
};

static int snap_take(struct snap *sn, const struct conf_srv *s)
{
	sn->mem_len = s->mem_len;
	sn->mem = rkv_malloc(s->mem_len);
	sn->ro = rkv_malloc(CONF_SIDE_LEN);
	sn->wo = rkv_malloc(CONF_SIDE_LEN);
	if (!sn->mem || !sn->ro || !sn->wo)
		return -ENOMEM;
	conf_memcpy(sn->mem, s->mem, s->mem_len);
	conf_memcpy(sn->ro, s->ro, CONF_SIDE_LEN);
	conf_memcpy(sn->wo, s->wo, CONF_SIDE_LEN);
	return 0;
}

/* 0 when nothing changed; prints the first changed byte otherwise. */
static int snap_check(const struct snap *sn, const struct conf_srv *s)
{
	long d;

	d = conf_diff(sn->mem, s->mem, sn->mem_len);
	if (d >= 0) {
		printf("#   server memory changed at region%+ld\n",
		       d - (long)CONF_GUARD);
		return -1;
	}
	if (conf_diff(sn->ro, s->ro, CONF_SIDE_LEN) >= 0) {
		printf("#   read-only region changed\n");
		return -1;
	}
	if (conf_diff(sn->wo, s->wo, CONF_SIDE_LEN) >= 0) {
		printf("#   write-only region changed\n");
		return -1;
	}
	return 0;
}

static void snap_free(struct snap *sn)
{
	rkv_free(sn->mem);
	rkv_free(sn->ro);
	rkv_free(sn->wo);
}

static void small_opts(struct conf_fix_opts *o)
{
	conf_fix_opts_init(o);
	o->region_len = SMALL;
	o->local_len = 2 * SMALL; /* room for region+1 B transfers */
}

/* Fill every server region with a pattern so changes are visible. */
static void paint(struct conf_fix *f)
{
	conf_fill(f->s.mem, f->s.mem_len, 91);
	conf_fill(f->s.ro, CONF_SIDE_LEN, 92);
	conf_fill(f->s.wo, CONF_SIDE_LEN, 93);
	conf_fill(f->c.loc, f->c.loc_len, 94);
}

/* A key that is none of the server's nor the client's. */
static uint32_t bogus_key(const struct conf_fix *f)
{
	uint32_t k = 0xdeadbeef;

	for (;;) {
		if (k != f->s.mr->rkey && k != f->s.ro_mr->rkey &&
		    k != f->s.wo_mr->rkey && k != f->s.loc_mr->rkey &&
		    k != f->c.loc_mr->lkey && k != f->s.mr->lkey &&
		    k != f->c.loc_mr->rkey)
			return k;
		k += 0x101;
	}
}

enum target { T_MAIN, T_RO, T_WO };

struct err_case {
	const char *what;
	enum rkv_wr_opcode op;
	enum target tgt;
	long off;            /* from the target region's start */
	int wrap;            /* remote_addr = UINT64_MAX - 7 instead */
	uint32_t len;        /* 0: 8 */
	int bad_rkey;
	int rkey_of;         /* 1: use the main region's rkey whatever tgt */
	int bad_lkey;
	long loff;           /* local offset; -1: 4 bytes before the end */
	enum rkv_wc_status want;
	int unchanged_only_on_write; /* local errors: target may change */
};

static uint8_t *tgt_base(struct conf_fix *f, enum target t)
{
	return t == T_RO ? f->s.ro : t == T_WO ? f->s.wo : f->s.reg;
}

static uint32_t tgt_rkey(struct conf_fix *f, enum target t)
{
	return t == T_RO ? f->s.ro_mr->rkey :
	       t == T_WO ? f->s.wo_mr->rkey : f->s.mr->rkey;
}

/*
 * Run one error case on a fresh connection.  Checks status, memory,
 * endpoint state, then that a later signaled READ and unsignaled WRITE
 * both complete with FLUSH and change nothing.
 */
static void run_case(const struct err_case *ec)
{
	struct conf_fix_opts o;
	struct conf_fix f;
	struct snap sn = { 0 };
	struct rkv_wr w, later[2], *bad;
	uint64_t raddr;
	uint8_t *local;
	int st;

	small_opts(&o);
	CONF_FIX(&f, &o);
	if ((ec->op == RKV_WR_CAS || ec->op == RKV_WR_FETCH_ADD) &&
	    !rkv_tp_has_atomics(f.c.tp)) {
		printf("#   %s: skipped, no atomics\n", ec->what);
		conf_fix_destroy(&f);
		return;
	}
	paint(&f);
	if (snap_take(&sn, &f.s)) {
		g_test_failures++;
		goto out;
	}
	raddr = ec->wrap ? UINT64_MAX - 7 :
		(uint64_t)(uintptr_t)tgt_base(&f, ec->tgt) + (uint64_t)ec->off;
	local = ec->loff < 0 ? f.c.loc + f.c.loc_len - 4 : f.c.loc + ec->loff;
	conf_wr(&w, ec->op, 77, RKV_WR_SIGNALED, local, ec->len ? ec->len : 8,
		ec->bad_lkey ? bogus_key(&f) : f.c.loc_mr->lkey, raddr,
		ec->bad_rkey ? bogus_key(&f) :
		ec->rkey_of ? f.s.mr->rkey : tgt_rkey(&f, ec->tgt));
	w.compare_add = 0;
	w.swap = 0x4242424242424242ull;
	if (ec->op == RKV_WR_CAS) {
		/* A compare that would succeed: a refusal must not swap. */
		if (!ec->wrap && ec->off >= 0 &&
		    (size_t)ec->off + 8 <= CONF_SIDE_LEN)
			w.compare_add =
				conf_rd64(tgt_base(&f, ec->tgt) + ec->off);
	} else if (ec->op == RKV_WR_FETCH_ADD) {
		w.compare_add = 1;
	}
	st = conf_post_wait(&f, &w, 1);
	if (st) {
		printf("#   %s: %s\n", ec->what, strerror(-st));
		g_test_failures++;
		goto out;
	}
	if (f.c.st.wc[0].status != ec->want || f.c.st.wc[0].wr_id != 77) {
		printf("#   %s: got %s (wr_id %" PRIu64 "), expected %s\n",
		       ec->what, rkv_wc_status_str(f.c.st.wc[0].status),
		       f.c.st.wc[0].wr_id, rkv_wc_status_str(ec->want));
		g_test_failures++;
	}
	if ((!ec->unchanged_only_on_write || ec->op == RKV_WR_WRITE) &&
	    snap_check(&sn, &f.s)) {
		printf("#   %s: target memory changed\n", ec->what);
		g_test_failures++;
	}
	if (rkv_ep_state(f.c.ep) != RKV_EP_ERROR) {
		printf("#   %s: endpoint state %s after the error\n", ec->what,
		       rkv_ep_state_str(rkv_ep_state(f.c.ep)));
		g_test_failures++;
	}
	/* Later WRs flush, signaled or not, and change nothing. */
	conf_memcpy(sn.mem, f.s.mem, sn.mem_len);
	conf_wr(&later[0], RKV_WR_READ, 78, RKV_WR_SIGNALED, f.c.loc, 8,
		f.c.loc_mr->lkey, conf_raddr(&f.s, 0), f.s.mr->rkey);
	conf_wr(&later[1], RKV_WR_WRITE, 79, 0, f.c.loc + 64, 64,
		f.c.loc_mr->lkey, conf_raddr(&f.s, 0), f.s.mr->rkey);
	later[0].next = &later[1];
	conf_stash_clear(&f.c.st);
	st = rkv_post(f.c.ep, later, &bad);
	if (st) {
		/* Posting on an errored endpoint may be refused outright
		 * on some stacks; rkv documents completions instead. */
		printf("#   %s: rkv_post after error: %s\n", ec->what,
		       strerror(-st));
		g_test_failures++;
		goto out;
	}
	if (conf_wait(&f.s, &f.c, 2, 0, conf_bound_ms()) ||
	    f.c.st.wc[0].status != RKV_WC_WR_FLUSH_ERR ||
	    f.c.st.wc[1].status != RKV_WC_WR_FLUSH_ERR ||
	    f.c.st.wc[0].wr_id != 78 || f.c.st.wc[1].wr_id != 79) {
		printf("#   %s: WRs after the error: %d completions", ec->what,
		       f.c.st.n);
		for (int i = 0; i < f.c.st.n; i++)
			printf(" [%" PRIu64 " %s]", f.c.st.wc[i].wr_id,
			       rkv_wc_status_str(f.c.st.wc[i].status));
		printf(", expected [78 %s] [79 %s]\n",
		       rkv_wc_status_str(RKV_WC_WR_FLUSH_ERR),
		       rkv_wc_status_str(RKV_WC_WR_FLUSH_ERR));
		g_test_failures++;
	}
	if (snap_check(&sn, &f.s)) {
		printf("#   %s: a flushed WR changed memory\n", ec->what);
		g_test_failures++;
	}
out:
	snap_free(&sn);
	conf_fix_destroy(&f);
}

static void run_cases(const struct err_case *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		run_case(&c[i]);
}

#define CASES(a) run_cases((a), sizeof(a) / sizeof((a)[0]))
#define RAE RKV_WC_REM_ACCESS_ERR

static void t_bad_rkey(void)
{
	static const struct err_case c[] = {
		{ "READ bad rkey", RKV_WR_READ, T_MAIN, 0, 0, 8, 1, 0, 0, 0,
		  RAE, 0 },
		{ "WRITE bad rkey", RKV_WR_WRITE, T_MAIN, 0, 0, 8, 1, 0, 0, 0,
		  RAE, 0 },
		{ "CAS bad rkey", RKV_WR_CAS, T_MAIN, 0, 0, 8, 1, 0, 0, 0, RAE,
		  0 },
		{ "FETCH_ADD bad rkey", RKV_WR_FETCH_ADD, T_MAIN, 0, 0, 8, 1, 0,
		  0, 0, RAE, 0 },
	};

	CASES(c);
}

static void t_oob_past_end(void)
{
	static const struct err_case c[] = {
		{ "READ 8 B, 1 past the end", RKV_WR_READ, T_MAIN, SMALL - 7,
		  0, 8, 0, 0, 0, 0, RAE, 0 },
		{ "WRITE 8 B, 1 past the end", RKV_WR_WRITE, T_MAIN, SMALL - 7,
		  0, 8, 0, 0, 0, 0, RAE, 0 },
		{ "WRITE 1 B at the end", RKV_WR_WRITE, T_MAIN, SMALL, 0, 1, 0,
		  0, 0, 0, RAE, 0 },
		{ "WRITE region+1 B at the start", RKV_WR_WRITE, T_MAIN, 0, 0,
		  SMALL + 1, 0, 0, 0, 0, RAE, 0 },
		{ "READ region+1 B at the start", RKV_WR_READ, T_MAIN, 0, 0,
		  SMALL + 1, 0, 0, 0, 0, RAE, 0 },
		{ "CAS just past the end", RKV_WR_CAS, T_MAIN, SMALL, 0, 8, 0,
		  0, 0, 0, RAE, 0 },
		{ "FETCH_ADD just past the end", RKV_WR_FETCH_ADD, T_MAIN,
		  SMALL, 0, 8, 0, 0, 0, 0, RAE, 0 },
	};
	CASES(c);
}

static void t_oob_before_start(void)
{
	static const struct err_case c[] = {
		{ "READ 8 B before the start", RKV_WR_READ, T_MAIN, -8, 0, 8,
		  0, 0, 0, 0, RAE, 0 },
		{ "WRITE 8 B from 1 before the start", RKV_WR_WRITE, T_MAIN, -1,
		  0, 8, 0, 0, 0, 0, RAE, 0 },
		{ "WRITE 1 B before the start", RKV_WR_WRITE, T_MAIN, -1, 0, 1,
		  0, 0, 0, 0, RAE, 0 },
		{ "CAS before the start", RKV_WR_CAS, T_MAIN, -8, 0, 8, 0, 0, 0,
		  0, RAE, 0 },
		{ "FETCH_ADD before the start", RKV_WR_FETCH_ADD, T_MAIN, -8, 0,
		  8, 0, 0, 0, 0, RAE, 0 },
	};

	CASES(c);
}

/* Address arithmetic that overflows must not wrap into the region. */
static void t_oob_wrap(void)
{
	static const struct err_case c[] = {
		{ "READ 16 B at 2^64-8", RKV_WR_READ, T_MAIN, 0, 1, 16, 0, 0, 0,
		  0, RAE, 0 },
		{ "WRITE 16 B at 2^64-8", RKV_WR_WRITE, T_MAIN, 0, 1, 16, 0, 0,
		  0, 0, RAE, 0 },
		{ "FETCH_ADD at 2^64-8", RKV_WR_FETCH_ADD, T_MAIN, 0, 1, 8, 0,
		  0, 0, 0, RAE, 0 },
	};

	CASES(c);
}

static void t_readonly_region(void)
{
	static const struct err_case c[] = {
		{ "WRITE to read-only", RKV_WR_WRITE, T_RO, 64, 0, 8, 0, 0, 0,
		  0, RAE, 0 },
		{ "CAS on read-only", RKV_WR_CAS, T_RO, 64, 0, 8, 0, 0, 0, 0,
		  RAE, 0 },
		{ "FETCH_ADD on read-only", RKV_WR_FETCH_ADD, T_RO, 64, 0, 8, 0,
		  0, 0, 0, RAE, 0 },
	};
	struct conf_fix_opts o;
	struct conf_fix f;

	CASES(c);
	/* READ is allowed there. */
	small_opts(&o);
	CONF_FIX(&f, &o);
	conf_fill(f.s.ro, 64, 5);
	EXPECT_EQ(conf_op(&f, RKV_WR_READ, 0, 64,
			  (uint64_t)(uintptr_t)f.s.ro, f.s.ro_mr->rkey, 0, 0),
		  RKV_WC_SUCCESS);
	EXPECT_TRUE(conf_diff(f.c.loc, f.s.ro, 64) < 0);
	conf_fix_destroy(&f);
}

static void t_writeonly_region(void)
{
	static const struct err_case c[] = {
		{ "READ from write-only", RKV_WR_READ, T_WO, 64, 0, 8, 0, 0, 0,
		  0, RAE, 0 },
		{ "CAS on write-only (no atomic access)", RKV_WR_CAS, T_WO, 64,
		  0, 8, 0, 0, 0, 0, RAE, 0 },
		{ "FETCH_ADD on write-only (no atomic access)",
		  RKV_WR_FETCH_ADD, T_WO, 64, 0, 8, 0, 0, 0, 0, RAE, 0 },
	};
	struct conf_fix_opts o;
	struct conf_fix f;

	CASES(c);
	small_opts(&o);
	CONF_FIX(&f, &o);
	conf_fill(f.c.loc, 64, 6);
	EXPECT_EQ(conf_op(&f, RKV_WR_WRITE, 0, 64,
			  (uint64_t)(uintptr_t)f.s.wo, f.s.wo_mr->rkey, 0, 0),
		  RKV_WC_SUCCESS);
	EXPECT_TRUE(conf_diff(f.c.loc, f.s.wo, 64) < 0);
	conf_fix_destroy(&f);
}

/* A valid rkey names one region: addresses in another are out of bounds. */
static void t_rkey_other_region(void)
{
	static const struct err_case c[] = {
		{ "READ of read-only region with main rkey", RKV_WR_READ, T_RO,
		  0, 0, 8, 0, 1, 0, 0, RAE, 0 },
		{ "WRITE to write-only region with main rkey", RKV_WR_WRITE,
		  T_WO, 0, 0, 8, 0, 1, 0, 0, RAE, 0 },
	};

	CASES(c);
}

static void t_bad_lkey(void)
{
	static const struct err_case c[] = {
		{ "WRITE bad lkey", RKV_WR_WRITE, T_MAIN, 0, 0, 8, 0, 0, 1, 0,
		  RKV_WC_LOC_PROT_ERR, 1 },
		{ "READ bad lkey", RKV_WR_READ, T_MAIN, 0, 0, 8, 0, 0, 1, 0,
		  RKV_WC_LOC_PROT_ERR, 1 },
		{ "SEND bad lkey", RKV_WR_SEND, T_MAIN, 0, 0, 8, 0, 0, 1, 0,
		  RKV_WC_LOC_PROT_ERR, 1 },
		{ "FETCH_ADD bad lkey", RKV_WR_FETCH_ADD, T_MAIN, 0, 0, 8, 0, 0,
		  1, 0, RKV_WC_LOC_PROT_ERR, 1 },
	};

	CASES(c);
}

static void t_bad_local_range(void)
{
	static const struct err_case c[] = {
		{ "WRITE from past the local MR", RKV_WR_WRITE, T_MAIN, 0, 0, 8,
		  0, 0, 0, -1, RKV_WC_LOC_PROT_ERR, 1 },
		{ "READ into past the local MR", RKV_WR_READ, T_MAIN, 0, 0, 8,
		  0, 0, 0, -1, RKV_WC_LOC_PROT_ERR, 1 },
	};

	CASES(c);
}

/*
 * After an error in the middle of a chain the rest of the chain flushes
 * (the WRITE after it never lands), posted RECVs flush, RECVs posted
 * later flush too.
 */
static void t_error_flushes(void)
{
	struct conf_fix_opts o;
	struct conf_fix f;
	struct rkv_wr w[4], *bad;
	struct rkv_recv_wr r[2], *rbad;
	int seen[8] = { 0 };

	small_opts(&o);
	CONF_FIX(&f, &o);
	for (int i = 0; i < 2; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].wr_id = 10 + (uint64_t)i;
		r[i].local = f.c.loc + 4096 + 256 * i;
		r[i].length = 256;
		r[i].lkey = f.c.loc_mr->lkey;
	}
	r[0].next = &r[1];
	EXPECT_EQ(rkv_post_recv(f.c.ep, r, &rbad), 0);
	conf_fill(f.c.loc, 64, 8);
	/* good READ, bad READ, WRITE, signaled READ */
	conf_wr(&w[0], RKV_WR_READ, 0, RKV_WR_SIGNALED, f.c.loc + 1024, 8,
		f.c.loc_mr->lkey, conf_raddr(&f.s, 0), f.s.mr->rkey);
	conf_wr(&w[1], RKV_WR_READ, 1, RKV_WR_SIGNALED, f.c.loc + 1032, 8,
		f.c.loc_mr->lkey, conf_raddr(&f.s, 0), bogus_key(&f));
	conf_wr(&w[2], RKV_WR_WRITE, 2, 0, f.c.loc, 64, f.c.loc_mr->lkey,
		conf_raddr(&f.s, 128), f.s.mr->rkey);
	conf_wr(&w[3], RKV_WR_READ, 3, RKV_WR_SIGNALED, f.c.loc + 1040, 8,
		f.c.loc_mr->lkey, conf_raddr(&f.s, 0), f.s.mr->rkey);
	w[0].next = &w[1];
	w[1].next = &w[2];
	w[2].next = &w[3];
	ASSERT_EQ(conf_post_wait(&f, w, 6), 0);
	for (int i = 0; i < f.c.st.n; i++) {
		struct rkv_wc *wc = &f.c.st.wc[i];
		enum rkv_wc_status want =
			wc->wr_id == 0 ? RKV_WC_SUCCESS :
			wc->wr_id == 1 ? RKV_WC_REM_ACCESS_ERR :
					 RKV_WC_WR_FLUSH_ERR;

		if (wc->wr_id < 8)
			seen[wc->wr_id]++;
		else if (wc->wr_id == 10 || wc->wr_id == 11)
			seen[wc->wr_id - 6]++;
		if (wc->status != want) {
			printf("#   wr_id %" PRIu64 ": %s, expected %s\n",
			       wc->wr_id, rkv_wc_status_str(wc->status),
			       rkv_wc_status_str(want));
			g_test_failures++;
		}
	}
	/* 0,1,2,3 on the send side (2 is unsignaled but flushed), 10,11. */
	EXPECT_EQ(seen[0], 1);
	EXPECT_EQ(seen[1], 1);
	EXPECT_EQ(seen[2], 1);
	EXPECT_EQ(seen[3], 1);
	EXPECT_EQ(seen[4], 1);
	EXPECT_EQ(seen[5], 1);
	/* Send-queue completions in order: 0, 1, 2, 3. */
	{
		uint64_t last = 0;
		int first = 1;

		for (int i = 0; i < f.c.st.n; i++) {
			uint64_t id = f.c.st.wc[i].wr_id;

			if (id >= 10)
				continue;
			if (!first && id <= last) {
				printf("#   send completions out of order\n");
				g_test_failures++;
			}
			first = 0;
			last = id;
		}
	}
	/* The flushed WRITE did not land. */
	for (int i = 0; i < 64; i++) {
		if (conf_rd8(f.s.reg + 128 + i) != 0) {
			printf("#   the WRITE after the error landed\n");
			g_test_failures++;
			break;
		}
	}
	EXPECT_EQ(rkv_ep_state(f.c.ep), RKV_EP_ERROR);
	/* A RECV posted now flushes as well. */
	conf_stash_clear(&f.c.st);
	r[0].next = NULL;
	EXPECT_EQ(rkv_post_recv(f.c.ep, &r[0], &rbad), 0);
	EXPECT_EQ(conf_wait(&f.s, &f.c, 1, 0, conf_bound_ms()), 0);
	if (f.c.st.n >= 1) {
		EXPECT_EQ(f.c.st.wc[0].status, RKV_WC_WR_FLUSH_ERR);
		EXPECT_EQ_U64(f.c.st.wc[0].wr_id, 10);
	}
	(void)bad;
	conf_fix_destroy(&f);
}

/* A failing WR completes even when unsignaled. */
static void t_unsignaled_error_completes(void)
{
	struct conf_fix_opts o;
	struct conf_fix f;
	struct rkv_wr w;

	small_opts(&o);
	CONF_FIX(&f, &o);
	conf_wr(&w, RKV_WR_WRITE, 5, 0, f.c.loc, 8, f.c.loc_mr->lkey,
		conf_raddr(&f.s, 0), bogus_key(&f));
	ASSERT_EQ(conf_post_wait(&f, &w, 1), 0);
	EXPECT_EQ(f.c.st.wc[0].status, RKV_WC_REM_ACCESS_ERR);
	EXPECT_EQ_U64(f.c.st.wc[0].wr_id, 5);
	EXPECT_EQ(rkv_ep_state(f.c.ep), RKV_EP_ERROR);
	conf_fix_destroy(&f);
}

/* Malformed WRs: -EINVAL from rkv_post, *bad set, endpoint unharmed. */
static void t_post_einval(void)
{
	struct conf_fix_opts o;
	struct conf_fix f;
	struct rkv_wr w[2], *bad;
	struct rkv_recv_wr r, *rbad;

	small_opts(&o);
	CONF_FIX(&f, &o);
#define POST_BAD(wr, want, wantbad)                                            \
	do {                                                                   \
		bad = NULL;                                                    \
		EXPECT_EQ(rkv_post(f.c.ep, (wr), &bad), (want));               \
		EXPECT_TRUE(bad == (wantbad));                                 \
	} while (0)
	conf_wr(&w[0], RKV_WR_CAS, 1, RKV_WR_SIGNALED, f.c.loc, 4,
		f.c.loc_mr->lkey, conf_raddr(&f.s, 0), f.s.mr->rkey);
	POST_BAD(&w[0], -EINVAL, &w[0]);
	w[0].length = 16;
	POST_BAD(&w[0], -EINVAL, &w[0]);
	w[0].length = 8;
	w[0].remote_addr += 4;
	POST_BAD(&w[0], -EINVAL, &w[0]);
	conf_wr(&w[0], RKV_WR_FETCH_ADD, 1, RKV_WR_SIGNALED, f.c.loc + 4, 8,
		f.c.loc_mr->lkey, conf_raddr(&f.s, 0), f.s.mr->rkey);
	POST_BAD(&w[0], -EINVAL, &w[0]);
	w[0].local = f.c.loc;
	w[0].length = 0;
	POST_BAD(&w[0], -EINVAL, &w[0]);
	conf_wr(&w[0], RKV_WR_RECV, 1, RKV_WR_SIGNALED, f.c.loc, 8,
		f.c.loc_mr->lkey, conf_raddr(&f.s, 0), f.s.mr->rkey);
	POST_BAD(&w[0], -EINVAL, &w[0]);
	w[0].opcode = (enum rkv_wr_opcode)99;
	POST_BAD(&w[0], -EINVAL, &w[0]);
	conf_wr(&w[0], RKV_WR_READ, 1, RKV_WR_SIGNALED, f.c.loc,
		RKV_TP_MAX_MSG + 1u, f.c.loc_mr->lkey, conf_raddr(&f.s, 0),
		f.s.mr->rkey);
	POST_BAD(&w[0], -EINVAL, &w[0]);
	conf_wr(&w[0], RKV_WR_WRITE, 1, RKV_WR_SIGNALED, NULL, 8,
		f.c.loc_mr->lkey, conf_raddr(&f.s, 0), f.s.mr->rkey);
	POST_BAD(&w[0], -EINVAL, &w[0]);
	/* Second of a chain: *bad points at it.  The first is unsignaled so
	 * whether it was posted leaves no completion either way. */
	conf_wr(&w[0], RKV_WR_READ, 1, 0, f.c.loc, 8, f.c.loc_mr->lkey,
		conf_raddr(&f.s, 0), f.s.mr->rkey);
	conf_wr(&w[1], RKV_WR_CAS, 2, RKV_WR_SIGNALED, f.c.loc + 8, 4,
		f.c.loc_mr->lkey, conf_raddr(&f.s, 0), f.s.mr->rkey);
	w[0].next = &w[1];
	POST_BAD(&w[0], -EINVAL, &w[1]);
	memset(&r, 0, sizeof(r));
	r.length = 8;
	r.lkey = f.c.loc_mr->lkey;
	rbad = NULL;
	EXPECT_EQ(rkv_post_recv(f.c.ep, &r, &rbad), -EINVAL);
	EXPECT_TRUE(rbad == &r);
#undef POST_BAD
	/* Nothing happened to the endpoint. */
	EXPECT_EQ(rkv_ep_state(f.c.ep), RKV_EP_CONNECTED);
	EXPECT_EQ(conf_op(&f, RKV_WR_READ, 64, 8, conf_raddr(&f.s, 0),
			  f.s.mr->rkey, 0, 0),
		  RKV_WC_SUCCESS);
	conf_quiesce(&f.s, &f.c, 20);
	EXPECT_EQ(f.c.st.n, 1);
	conf_fix_destroy(&f);
}

/* Deregistration revokes the rkey for new operations. */
static void t_dereg_revokes_rkey(void)
{
	struct conf_fix_opts o;
	struct conf_fix f;
	struct rkv_mr *mr = NULL;
	void *mem = NULL;
	uint8_t before[64];
	int rc;

	small_opts(&o);
	CONF_FIX(&f, &o);
	rc = rkv_tp_mem_alloc(f.s.tp, 8192, &mem);
	if (rc == 0)
		rc = rkv_mr_reg(f.s.tp, mem, 8192, RKV_ACCESS_ALL, &mr);
	if (rc) {
		printf("#   extra region: %s\n", strerror(-rc));
		g_test_failures++;
		goto out;
	}
	conf_fill(mem, 8192, 9);
	EXPECT_EQ(conf_op(&f, RKV_WR_READ, 0, 64, (uint64_t)(uintptr_t)mem,
			  mr->rkey, 0, 0),
		  RKV_WC_SUCCESS);
	EXPECT_TRUE(conf_diff(f.c.loc, mem, 64) < 0);
	{
		uint32_t rkey = mr->rkey;

		EXPECT_EQ(rkv_mr_dereg(mr), 0);
		mr = NULL;
		conf_memcpy(before, mem, 64);
		conf_fill(f.c.loc + 1024, 64, 10);
		EXPECT_EQ(conf_op(&f, RKV_WR_WRITE, 1024, 64,
				  (uint64_t)(uintptr_t)mem, rkey, 0, 0),
			  RKV_WC_REM_ACCESS_ERR);
		EXPECT_TRUE(conf_diff(mem, before, 64) < 0);
	}
out:
	if (mr)
		rkv_mr_dereg(mr);
	if (mem)
		rkv_tp_mem_free(f.s.tp, mem, 8192);
	conf_fix_destroy(&f);
}

/*
 * rkv_tp_mem_renew: an access that passed its rkey check before the
 * deregistration but lands after the move finds what move left in the
 * old backing, never the new one.  The access hook (shm) runs between the
 * check and the access, and renews there.  Other providers: -EOPNOTSUPP.
 */
#define RENEW_LEN 8192u
#define RENEW_POISON 0x8000000000000000ull

struct renew_ctx {
	struct conf_fix *f;
	void *mem;
	struct rkv_mr *mr;
	int poison; /* 0: move copies and leaves src as it was */
	int rc, ran;
};

/* Word by word: the new backing gets the word, the old one the poison. */
static void renew_move(void *dst, void *src, size_t len, void *arg)
{
	struct renew_ctx *x = arg;
	uint64_t *d = dst, *s = src;

	for (size_t i = 0; i < len / 8; i++)
		d[i] = x->poison ? __atomic_exchange_n(&s[i], RENEW_POISON |
						       (uint64_t)i,
						       __ATOMIC_SEQ_CST)
				 : __atomic_load_n(&s[i], __ATOMIC_SEQ_CST);
}

static void renew_hook(void *arg)
{
	struct renew_ctx *x = arg;

	rkv_shm_set_access_hook(NULL, NULL); /* once */
	x->ran = 1;
	x->rc = rkv_mr_dereg(x->mr);
	x->mr = NULL;
	if (!x->rc)
		x->rc = rkv_tp_mem_renew(x->f->s.tp, x->mem, RENEW_LEN,
					 renew_move, x);
}

static void renew_case(int poison)
{
	const uint64_t a = 0x1111, b = 0x2222;
	struct conf_fix_opts o;
	struct conf_fix f;
	struct renew_ctx x = { .f = &f, .poison = poison };
	struct rkv_mr *mr2 = NULL;
	uint64_t *w;
	uint32_t rkey;
	int rc;

	small_opts(&o);
	CONF_FIX(&f, &o);
	rc = rkv_tp_mem_alloc(f.s.tp, RENEW_LEN, &x.mem);
	if (rc == 0)
		rc = rkv_mr_reg(f.s.tp, x.mem, RENEW_LEN, RKV_ACCESS_ALL, &x.mr);
	if (rc) {
		printf("#   region: %s\n", strerror(-rc));
		g_test_failures++;
		goto out;
	}
	w = x.mem;
	if (g_conf_provider != RKV_TP_SHM) {
		EXPECT_EQ(rkv_tp_mem_renew(f.s.tp, x.mem, RENEW_LEN, renew_move,
					   &x),
			  -EOPNOTSUPP);
		goto out;
	}
	EXPECT_EQ(rkv_tp_mem_renew(f.s.tp, w + 8, RENEW_LEN, renew_move, &x),
		  -EINVAL);
	EXPECT_EQ(rkv_tp_mem_renew(f.s.tp, x.mem, 4096, renew_move, &x),
		  -EINVAL);
	conf_wr64(&w[8], a);
	/* the client maps the memory */
	EXPECT_EQ(conf_op(&f, RKV_WR_CAS, 0, 8, (uint64_t)(uintptr_t)&w[8],
			  x.mr->rkey, a, b),
		  RKV_WC_SUCCESS);
	EXPECT_EQ_U64(conf_rd64(&w[8]), b);
	rkey = x.mr->rkey;
	/* a CAS that passed its check, landing after the renewal */
	rkv_shm_set_access_hook(renew_hook, &x);
	EXPECT_EQ(conf_op(&f, RKV_WR_CAS, 0, 8, (uint64_t)(uintptr_t)&w[8],
			  rkey, b, 0x3333),
		  RKV_WC_SUCCESS);
	rkv_shm_set_access_hook(NULL, NULL);
	EXPECT_TRUE(x.ran);
	EXPECT_EQ(x.rc, 0);
	/* the word kept its value at the same address; the late CAS saw the
	 * poison (it failed), or, without it, "succeeded" on memory that is
	 * no longer this */
	EXPECT_EQ_U64(conf_rd64(&w[8]), b);
	if (poison)
		EXPECT_EQ_U64(conf_rd64(f.c.loc), RENEW_POISON | 8);
	else
		EXPECT_EQ_U64(conf_rd64(f.c.loc), b);
	/* a new registration is the new memory, for the same client */
	rc = rkv_mr_reg(f.s.tp, x.mem, RENEW_LEN, RKV_ACCESS_ALL, &mr2);
	EXPECT_EQ(rc, 0);
	if (!rc) {
		EXPECT_EQ(conf_op(&f, RKV_WR_CAS, 0, 8,
				  (uint64_t)(uintptr_t)&w[8], mr2->rkey, b,
				  0x4444),
			  RKV_WC_SUCCESS);
		EXPECT_EQ_U64(conf_rd64(f.c.loc), b);
		EXPECT_EQ_U64(conf_rd64(&w[8]), 0x4444);
		conf_wr64(&w[9], 0x5555);
		EXPECT_EQ(conf_op(&f, RKV_WR_READ, 0, 8,
				  (uint64_t)(uintptr_t)&w[9], mr2->rkey, 0, 0),
			  RKV_WC_SUCCESS);
		EXPECT_EQ_U64(conf_rd64(f.c.loc), 0x5555);
	}
	/* the old rkey is gone (last: an error ends the endpoint) */
	EXPECT_EQ(conf_op(&f, RKV_WR_READ, 0, 8, (uint64_t)(uintptr_t)&w[8],
			  rkey, 0, 0),
		  RKV_WC_REM_ACCESS_ERR);
out:
	rkv_shm_set_access_hook(NULL, NULL);
	if (mr2)
		rkv_mr_dereg(mr2);
	if (x.mr)
		rkv_mr_dereg(x.mr);
	if (x.mem)
		rkv_tp_mem_free(f.s.tp, x.mem, RENEW_LEN);
	conf_fix_destroy(&f);
}

static void t_mem_renew(void)
{
	renew_case(1);
	renew_case(0);
}

void conf_tests_errors(void)
{
	CONF_TEST(t_bad_rkey);
	CONF_TEST(t_oob_past_end);
	CONF_TEST(t_oob_before_start);
	CONF_TEST(t_oob_wrap);
	CONF_TEST(t_readonly_region);
	CONF_TEST(t_writeonly_region);
	CONF_TEST(t_rkey_other_region);
	CONF_TEST(t_bad_lkey);
	CONF_TEST(t_bad_local_range);
	CONF_TEST(t_error_flushes);
	CONF_TEST(t_unsignaled_error_completes);
	CONF_TEST(t_post_einval);
	CONF_TEST(t_dereg_revokes_rkey);
	CONF_TEST(t_mem_renew);
}
