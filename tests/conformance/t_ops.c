/* SPDX-License-Identifier: MIT */
/*
 * t_ops.c - each operation on its own: READ and WRITE at every size from
 * 1 B to 4 MiB (aligned and not), at the region's edges, and past a
 * device's one-message limit (40 MiB), with the data
 * and the bytes around it checked; CAS and FETCH_ADD (old value returned,
 * wraparound, edge words); SEND/RECV (contents, byte_len, order, both
 * directions, RECV too small, receiver not ready); a WR that times out
 * after a silence; rkv_cq_wait.
 */
#include "conf.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "hash.h"
#include "rtime.h"

static const uint32_t k_sizes[] = {
	1, 7, 8, 63, 64, 4096, 64u << 10, 1u << 20, 4u << 20,
};
#define NSIZES (sizeof(k_sizes) / sizeof(k_sizes[0]))

#define SENT 0xee /* sentinel around a target range */

static void one_read(struct conf_fix *f, size_t roff, size_t loff,
		     uint32_t len, uint32_t seed)
{
	long d;
	int st;

	conf_fill(f->s.reg + roff, len, seed);
	memset(f->c.loc + loff - 1, SENT, len + 2);
	st = conf_op(f, RKV_WR_READ, loff, len, conf_raddr(&f->s, roff),
		     f->s.mr->rkey, 0, 0);
	if (st != RKV_WC_SUCCESS) {
		printf("#   READ %u B at +%zu: status %d (%s)\n", len, roff, st,
		       st >= 0 ? rkv_wc_status_str(st) : strerror(-st));
		g_test_failures++;
		return;
	}
	d = conf_diff(f->c.loc + loff, f->s.reg + roff, len);
	if (d >= 0) {
		printf("#   READ %u B at +%zu: data differs at byte %ld\n", len,
		       roff, d);
		g_test_failures++;
	}
	if (f->c.loc[loff - 1] != SENT || f->c.loc[loff + len] != SENT) {
		printf("#   READ %u B at +%zu wrote outside its local range\n",
		       len, roff);
		g_test_failures++;
	}
}

static void one_write(struct conf_fix *f, size_t roff, size_t loff,
		      uint32_t len, uint32_t seed)
{
	uint8_t before = 0, after = 0;
	long d;
	int st;

	conf_fill(f->c.loc + loff, len, seed);
	conf_memset(f->s.reg + roff, SENT, len);
	if (roff > 0)
		conf_wr8(f->s.reg + roff - 1, before = 0x5a);
	if (roff + len < f->s.reg_len)
		conf_wr8(f->s.reg + roff + len, after = 0xa5);
	st = conf_op(f, RKV_WR_WRITE, loff, len, conf_raddr(&f->s, roff),
		     f->s.mr->rkey, 0, 0);
	if (st != RKV_WC_SUCCESS) {
		printf("#   WRITE %u B at +%zu: status %d (%s)\n", len, roff,
		       st, st >= 0 ? rkv_wc_status_str(st) : strerror(-st));
		g_test_failures++;
		return;
	}
	d = conf_diff(f->s.reg + roff, f->c.loc + loff, len);
	if (d >= 0) {
		printf("#   WRITE %u B at +%zu: data differs at byte %ld\n",
		       len, roff, d);
		g_test_failures++;
	}
	if ((roff > 0 && conf_rd8(f->s.reg + roff - 1) != before) ||
	    (roff + len < f->s.reg_len &&
	     conf_rd8(f->s.reg + roff + len) != after)) {
		printf("#   WRITE %u B at +%zu wrote outside its range\n", len,
		       roff);
		g_test_failures++;
	}
}

/* Offsets: aligned, or odd on both sides; sizes go up to 4 MiB. */
static void t_read_sizes(void)
{
	struct conf_fix f;

	CONF_FIX(&f, NULL);
	for (unsigned i = 0; i < NSIZES; i++) {
		one_read(&f, 64 * i, 64 + 64 * i, k_sizes[i], i);
		one_read(&f, 4093 + 8 * i, 4099 + 16 * i, k_sizes[i], 100 + i);
	}
	conf_fix_destroy(&f);
}

static void t_write_sizes(void)
{
	struct conf_fix f;

	CONF_FIX(&f, NULL);
	for (unsigned i = 0; i < NSIZES; i++) {
		one_write(&f, 64 * i, 64 + 64 * i, k_sizes[i], i);
		one_write(&f, 4093 + 8 * i, 4099 + 16 * i, k_sizes[i], 200 + i);
	}
	conf_fix_destroy(&f);
}

/* First byte, last byte, exactly the whole region. */
static void t_read_edges(void)
{
	struct conf_fix_opts o;
	struct conf_fix f;
	size_t n;

	conf_fix_opts_init(&o);
	o.local_len = o.region_len + 8192;
	CONF_FIX(&f, &o);
	n = f.s.reg_len;
	one_read(&f, 0, 64, 1, 1);
	one_read(&f, n - 1, 64, 1, 2);
	one_read(&f, n - 8, 64, 8, 3);
	one_read(&f, 0, 64, (uint32_t)n, 4);
	conf_fix_destroy(&f);
}

static void t_write_edges(void)
{
	struct conf_fix_opts o;
	struct conf_fix f;
	size_t n;

	conf_fix_opts_init(&o);
	o.local_len = o.region_len + 8192;
	CONF_FIX(&f, &o);
	n = f.s.reg_len;
	one_write(&f, 0, 64, 1, 5);
	one_write(&f, n - 1, 64, 1, 6);
	one_write(&f, n - 8, 64, 8, 7);
	one_write(&f, 0, 64, (uint32_t)n, 8);
	/* The guards around the region stay untouched. */
	for (size_t i = 0; i < CONF_GUARD; i++) {
		if (conf_rd8(f.s.mem + i) || conf_rd8(f.s.reg + n + i)) {
			printf("#   guard byte %zu changed\n", i);
			g_test_failures++;
			break;
		}
	}
	conf_fix_destroy(&f);
}

/*
 * RKV_WR_DIGEST: a chain of two READs (or WRITEs) asking for the digest of
 * what they move (the first skipping 8 bytes), at sizes around the hash's
 * stripe, block and copy chunk: where the provider says it digests, the
 * state holds the one-shot hash of those bytes, in order; everywhere the
 * data is exact and the state is left alone where it does not.
 */
static void digest_chain(enum rkv_wr_opcode op)
{
	static const uint32_t lens[] = { 8, 9, 100, 241, 1024, 1025,
					 (64u << 10) + 1, 3u << 20 };
	struct rkv_hash_seed seed;
	struct rkv_hash_state *h = rkv_aligned_alloc(64, sizeof(*h)), *z;
	struct conf_fix_opts o;
	struct conf_fix f;
	struct rkv_wr w[2];
	const char *what = op == RKV_WR_READ ? "READs" : "WRITEs";
	int dig;

	z = rkv_aligned_alloc(64, sizeof(*z));
	if (!h || !z) {
		g_test_failures++;
		return;
	}
	rkv_hash_seed_init(&seed, 77);
	conf_fix_opts_init(&o);
	o.region_len = 8u << 20;
	o.local_len = (8u << 20) + 8192;
	CONF_FIX(&f, &o);
	dig = rkv_tp_digests(f.c.tp);
	printf("#   %s: %s %s digest\n", rkv_tp_provider_str(g_conf_provider),
	       what, dig ? "do" : "do not");
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint32_t a = lens[i], b = lens[(i + 3) % 8];
		uint64_t want;

		if (op == RKV_WR_READ) {
			conf_fill(f.s.reg, a + b, 500 + (uint32_t)i);
			memset(f.c.loc, 0, a + b);
		} else {
			conf_fill(f.c.loc, a + b, 600 + (uint32_t)i);
			conf_memset(f.s.reg, 0, a + b);
		}
		rkv_hash_start(h, &seed);
		*z = *h;
		conf_wr(&w[0], op, 1, RKV_WR_DIGEST, f.c.loc, a,
			f.c.loc_mr->lkey, conf_raddr(&f.s, 0), f.s.mr->rkey);
		w[0].digest = h;
		w[0].digest_off = 8;
		conf_wr(&w[1], op, 2, RKV_WR_DIGEST | RKV_WR_SIGNALED,
			f.c.loc + a, b, f.c.loc_mr->lkey, conf_raddr(&f.s, a),
			f.s.mr->rkey);
		w[1].digest = h;
		w[0].next = &w[1];
		if (conf_post_wait(&f, w, 1)) {
			g_test_failures++;
			break;
		}
		if (conf_diff(f.c.loc, f.s.reg, a + b) >= 0) {
			printf("#   %s of %u + %u B: data differs\n", what, a,
			       b);
			g_test_failures++;
		}
		want = rkv_hash64(f.c.loc + 8, a + b - 8, 77);
		if (dig ? rkv_hash_digest(h) != want :
			  memcmp(h, z, sizeof(*h)) != 0) {
			printf("#   %s of %u + %u B: digest %s\n", what, a, b,
			       dig ? "differs" : "changed");
			g_test_failures++;
		}
	}
	conf_fix_destroy(&f);
	rkv_free(h);
	rkv_free(z);
}

static void t_read_digest(void)
{
	digest_chain(RKV_WR_READ);
}

static void t_write_digest(void)
{
	digest_chain(RKV_WR_WRITE);
}

static void t_zero_length(void)
{
	struct conf_fix f;
	int st;

	CONF_FIX(&f, NULL);
	conf_memset(f.s.reg, 0x33, 64);
	memset(f.c.loc, 0x44, 64);
	st = conf_op(&f, RKV_WR_READ, 0, 0, conf_raddr(&f.s, 0), f.s.mr->rkey,
		     0, 0);
	EXPECT_EQ(st, RKV_WC_SUCCESS);
	st = conf_op(&f, RKV_WR_WRITE, 0, 0, conf_raddr(&f.s, 0),
		     f.s.mr->rkey, 0, 0);
	EXPECT_EQ(st, RKV_WC_SUCCESS);
	EXPECT_EQ(conf_rd8(f.s.reg), 0x33);
	EXPECT_EQ(f.c.loc[0], 0x44);
	conf_fix_destroy(&f);
}

/*
 * READ and WRITE past a device's one-message limit (rxe's port max_msg_sz is
 * 8 MiB; rkv promises RKV_TP_MAX_MSG): 8 MiB + 1 at odd offsets, 24 MiB,
 * the whole 40 MiB region; a long READ chained before a short WRITE gives
 * exactly two completions in order; a long READ that fails in its first or
 * its last 8 MiB completes once, with the real status, signaled or not.
 */
#define LARGE (40u << 20)

static void large_err(struct conf_fix_opts *o, long off, unsigned flags,
		      const char *what)
{
	struct conf_fix f;
	struct rkv_wr w;

	CONF_FIX(&f, o);
	conf_wr(&w, RKV_WR_READ, 77, flags, f.c.loc, 24u << 20,
		f.c.loc_mr->lkey, conf_raddr(&f.s, 0) + (uint64_t)off,
		f.s.mr->rkey);
	if (conf_post_wait(&f, &w, 1) == 0) {
		conf_quiesce(&f.s, &f.c, 100);
		if (f.c.st.n != 1 || f.c.st.wc[0].wr_id != 77 ||
		    f.c.st.wc[0].status != RKV_WC_REM_ACCESS_ERR) {
			printf("#   24 MiB READ %s: %d completions, first "
			       "[%" PRIu64 " %s]\n", what, f.c.st.n,
			       f.c.st.wc[0].wr_id,
			       rkv_wc_status_str(f.c.st.wc[0].status));
			g_test_failures++;
		}
	} else {
		g_test_failures++;
	}
	conf_fix_destroy(&f);
}

static void t_large_ops(void)
{
	struct conf_fix_opts o;
	struct conf_fix f;
	struct rkv_wr w[2];

	conf_fix_opts_init(&o);
	o.region_len = LARGE;
	o.local_len = LARGE + 8192;
	CONF_FIX(&f, &o);
	one_write(&f, 4093, 4099, (8u << 20) + 1, 300);
	one_read(&f, 4093, 4099, (8u << 20) + 1, 301);
	one_write(&f, 64, 64, 24u << 20, 302);
	one_read(&f, 1, 4096, 24u << 20, 303);
	one_write(&f, 0, 64, LARGE, 304);
	one_read(&f, 0, 64, LARGE, 305);
	/* READ 24 MiB, then WRITE 8 B elsewhere: two completions, in order */
	conf_fill(f.s.reg, 24u << 20, 306);
	conf_wr(&w[0], RKV_WR_READ, 1, RKV_WR_SIGNALED, f.c.loc + 64,
		24u << 20, f.c.loc_mr->lkey, conf_raddr(&f.s, 0),
		f.s.mr->rkey);
	conf_wr(&w[1], RKV_WR_WRITE, 2, RKV_WR_SIGNALED, f.c.loc, 8,
		f.c.loc_mr->lkey, conf_raddr(&f.s, LARGE - 8), f.s.mr->rkey);
	w[0].next = &w[1];
	if (conf_post_wait(&f, w, 2) == 0) {
		conf_quiesce(&f.s, &f.c, 50);
		if (f.c.st.n != 2 || f.c.st.wc[0].wr_id != 1 ||
		    f.c.st.wc[1].wr_id != 2 ||
		    f.c.st.wc[0].status != RKV_WC_SUCCESS ||
		    f.c.st.wc[1].status != RKV_WC_SUCCESS) {
			printf("#   READ 24 MiB + WRITE 8 B: %d completions\n",
			       f.c.st.n);
			g_test_failures++;
		}
		if (conf_diff(f.c.loc + 64, f.s.reg, 24u << 20) >= 0) {
			printf("#   READ 24 MiB in a chain: data differs\n");
			g_test_failures++;
		}
	} else {
		g_test_failures++;
	}
	conf_fix_destroy(&f);
	/* failing in the first piece (8 B before the region), in the last
	 * (1 B past its end) */
	large_err(&o, -8, RKV_WR_SIGNALED, "from 8 B before the region");
	large_err(&o, (long)LARGE - (24l << 20) + 1, RKV_WR_SIGNALED,
		  "to 1 B past the region");
	large_err(&o, -8, 0, "unsignaled, from 8 B before the region");
	/* a peer that is busy reading is alive: WRITEs that take longer
	 * than the endpoint's timeout (200 ms; 320 MiB here) complete */
	struct rkv_wr ws[8];

	o.cli_timeout_ms = 200;
	CONF_FIX(&f, &o);
	for (unsigned i = 0; i < 8; i++) {
		conf_wr(&ws[i], RKV_WR_WRITE, 10 + i, i == 7 ? RKV_WR_SIGNALED : 0,
			f.c.loc, LARGE, f.c.loc_mr->lkey, conf_raddr(&f.s, 0),
			f.s.mr->rkey);
		ws[i].next = i < 7 ? &ws[i + 1] : NULL;
	}
	uint64_t t0 = rkv_now_ms();

	if (conf_post_wait(&f, ws, 1) == 0) {
		if (f.c.st.wc[0].status != RKV_WC_SUCCESS ||
		    f.c.st.wc[0].wr_id != 17) {
			printf("#   8 WRITEs of 40 MiB, timeout 200 ms: [%" PRIu64
			       " %s] after %" PRIu64 " ms\n", f.c.st.wc[0].wr_id,
			       rkv_wc_status_str(f.c.st.wc[0].status),
			       rkv_now_ms() - t0);
			g_test_failures++;
		} else {
			printf("#   8 WRITEs of 40 MiB in %" PRIu64 " ms, timeout "
			       "200 ms\n", rkv_now_ms() - t0);
		}
	} else {
		g_test_failures++;
	}
	conf_fix_destroy(&f);
}

static uint64_t word(struct conf_fix *f, size_t off)
{
	return conf_rd64(f->s.reg + off);
}

static void set_word(struct conf_fix *f, size_t off, uint64_t v)
{
	conf_wr64(f->s.reg + off, v);
}

static uint64_t *result(struct conf_fix *f)
{
	return (uint64_t *)(void *)f->c.loc;
}

static int cas(struct conf_fix *f, size_t off, uint64_t cmp, uint64_t swp)
{
	*result(f) = 0xbadc0ffee0ddf00dull;
	return conf_op(f, RKV_WR_CAS, 0, 8, conf_raddr(&f->s, off),
		       f->s.mr->rkey, cmp, swp);
}

static int fadd(struct conf_fix *f, size_t off, uint64_t add)
{
	*result(f) = 0xbadc0ffee0ddf00dull;
	return conf_op(f, RKV_WR_FETCH_ADD, 0, 8, conf_raddr(&f->s, off),
		       f->s.mr->rkey, add, 0);
}

static void t_cas(void)
{
	const uint64_t a = 0x0102030405060708ull, b = 0xfedcba9876543210ull;
	struct conf_fix f;

	CONF_FIX(&f, NULL);
	CONF_NEED_ATOMICS(&f);
	set_word(&f, 64, a);
	/* Success: swaps, returns the old value. */
	EXPECT_EQ(cas(&f, 64, a, b), RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*result(&f), a);
	EXPECT_EQ_U64(word(&f, 64), b);
	/* Failure: leaves the word, still returns the current value. */
	EXPECT_EQ(cas(&f, 64, a, 7), RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*result(&f), b);
	EXPECT_EQ_U64(word(&f, 64), b);
	/* All 64 bits are compared: equal low half is not enough. */
	EXPECT_EQ(cas(&f, 64, b & 0xffffffffull, 9), RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*result(&f), b);
	EXPECT_EQ_U64(word(&f, 64), b);
	EXPECT_EQ(cas(&f, 64, b ^ (1ull << 63), 9), RKV_WC_SUCCESS);
	EXPECT_EQ_U64(word(&f, 64), b);
	/* Neighbours untouched. */
	EXPECT_EQ_U64(word(&f, 56), 0);
	EXPECT_EQ_U64(word(&f, 72), 0);
	/* Zero to zero succeeds. */
	EXPECT_EQ(cas(&f, 128, 0, 0), RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*result(&f), 0);
	EXPECT_EQ_U64(word(&f, 128), 0);
	conf_fix_destroy(&f);
}

static void t_fetch_add(void)
{
	struct conf_fix f;

	CONF_FIX(&f, NULL);
	CONF_NEED_ATOMICS(&f);
	set_word(&f, 256, 5);
	EXPECT_EQ(fadd(&f, 256, 7), RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*result(&f), 5);
	EXPECT_EQ_U64(word(&f, 256), 12);
	EXPECT_EQ(fadd(&f, 256, 0), RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*result(&f), 12);
	EXPECT_EQ_U64(word(&f, 256), 12);
	/* Adding 2^64 - 1 subtracts one. */
	EXPECT_EQ(fadd(&f, 256, UINT64_MAX), RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*result(&f), 12);
	EXPECT_EQ_U64(word(&f, 256), 11);
	/* A carry across the 32-bit halves. */
	set_word(&f, 256, 0xffffffffull);
	EXPECT_EQ(fadd(&f, 256, 1), RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*result(&f), 0xffffffffull);
	EXPECT_EQ_U64(word(&f, 256), 0x100000000ull);
	EXPECT_EQ_U64(word(&f, 248), 0);
	EXPECT_EQ_U64(word(&f, 264), 0);
	conf_fix_destroy(&f);
}

static void t_fetch_add_wrap(void)
{
	struct conf_fix f;

	CONF_FIX(&f, NULL);
	CONF_NEED_ATOMICS(&f);
	set_word(&f, 512, UINT64_MAX - 1);
	EXPECT_EQ(fadd(&f, 512, 3), RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*result(&f), UINT64_MAX - 1);
	EXPECT_EQ_U64(word(&f, 512), 1);
	set_word(&f, 512, UINT64_MAX);
	EXPECT_EQ(fadd(&f, 512, UINT64_MAX), RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*result(&f), UINT64_MAX);
	EXPECT_EQ_U64(word(&f, 512), UINT64_MAX - 1);
	conf_fix_destroy(&f);
}

/* The first and the last word of the region. */
static void t_atomic_edges(void)
{
	struct conf_fix f;
	size_t last;

	CONF_FIX(&f, NULL);
	CONF_NEED_ATOMICS(&f);
	last = f.s.reg_len - 8;
	set_word(&f, 0, 40);
	set_word(&f, last, 50);
	EXPECT_EQ(fadd(&f, 0, 2), RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*result(&f), 40);
	EXPECT_EQ(fadd(&f, last, 3), RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*result(&f), 50);
	EXPECT_EQ(cas(&f, 0, 42, 1000), RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*result(&f), 42);
	EXPECT_EQ(cas(&f, last, 53, 2000), RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*result(&f), 53);
	EXPECT_EQ_U64(word(&f, 0), 1000);
	EXPECT_EQ_U64(word(&f, last), 2000);
	EXPECT_EQ(conf_rd8(f.s.mem + CONF_GUARD - 1), 0);
	EXPECT_EQ(conf_rd8(f.s.reg + f.s.reg_len), 0);
	conf_fix_destroy(&f);
}

/* Post RECVs on ep (local buffer base, 256 B apart). */
static int post_recvs(struct rkv_ep *ep, uint8_t *base, uint32_t lkey,
		      int n, uint32_t len, uint64_t id0)
{
	struct rkv_recv_wr r[8], *bad = NULL;

	for (int i = 0; i < n; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].wr_id = id0 + (uint64_t)i;
		r[i].local = base + 256 * i;
		r[i].length = len;
		r[i].lkey = lkey;
		r[i].next = i + 1 < n ? &r[i + 1] : NULL;
	}
	return rkv_post_recv(ep, r, &bad);
}

/* SENDs of the lengths in lens from src (256 B apart) on ep. */
static int post_sends(struct rkv_ep *ep, uint8_t *src, uint32_t lkey,
		      const uint32_t *lens, int n, uint64_t id0)
{
	struct rkv_wr w[8], *bad = NULL;

	for (int i = 0; i < n; i++) {
		conf_wr(&w[i], RKV_WR_SEND, id0 + (uint64_t)i, RKV_WR_SIGNALED,
			src + 256 * i, lens[i], lkey, 0, 0);
		w[i].next = i + 1 < n ? &w[i + 1] : NULL;
	}
	return rkv_post(ep, w, &bad);
}

static void check_sendrecv(struct conf_stash *snd, struct conf_stash *rcv,
			   const uint8_t *src, const uint8_t *dst,
			   const uint32_t *lens, int n)
{
	for (int i = 0; i < n && i < snd->n; i++) {
		EXPECT_EQ(snd->wc[i].status, RKV_WC_SUCCESS);
		EXPECT_EQ(snd->wc[i].opcode, RKV_WR_SEND);
		EXPECT_EQ_U64(snd->wc[i].wr_id, 200 + i);
	}
	for (int i = 0; i < n && i < rcv->n; i++) {
		EXPECT_EQ(rcv->wc[i].status, RKV_WC_SUCCESS);
		EXPECT_EQ(rcv->wc[i].opcode, RKV_WR_RECV);
		EXPECT_EQ_U64(rcv->wc[i].wr_id, 100 + i);
		EXPECT_EQ(rcv->wc[i].byte_len, lens[i]);
		EXPECT_TRUE(conf_diff(dst + 256 * i, src + 256 * i, lens[i]) <
			    0);
	}
}

static void t_send_recv(void)
{
	static const uint32_t lens[4] = { 1, 17, 256, 0 };
	struct conf_fix f;
	int rc;

	CONF_FIX(&f, NULL);
	/* client -> server, in order */
	conf_fill(f.c.loc, 1024, 11);
	conf_memset(f.s.loc, 0, 1024);
	EXPECT_EQ(post_recvs(f.s.ep, f.s.loc, f.s.loc_mr->lkey, 4, 256, 100),
		  0);
	EXPECT_EQ(post_sends(f.c.ep, f.c.loc, f.c.loc_mr->lkey, lens, 4, 200),
		  0);
	rc = conf_wait(&f.s, &f.c, 4, 4, conf_bound_ms());
	EXPECT_EQ(rc, 0);
	EXPECT_EQ(f.c.st.n, 4);
	EXPECT_EQ(f.s.st.n, 4);
	check_sendrecv(&f.c.st, &f.s.st, f.c.loc, f.s.loc, lens, 4);

	/* server -> client */
	conf_stash_clear(&f.c.st);
	conf_stash_clear(&f.s.st);
	conf_fill(f.s.loc, 1024, 12);
	memset(f.c.loc + 4096, 0, 1024);
	EXPECT_EQ(post_recvs(f.c.ep, f.c.loc + 4096, f.c.loc_mr->lkey, 4, 256,
			     100),
		  0);
	EXPECT_EQ(post_sends(f.s.ep, f.s.loc, f.s.loc_mr->lkey, lens, 4, 200),
		  0);
	rc = conf_wait(&f.s, &f.c, 4, 4, conf_bound_ms());
	EXPECT_EQ(rc, 0);
	EXPECT_EQ(f.c.st.n, 4);
	EXPECT_EQ(f.s.st.n, 4);
	check_sendrecv(&f.s.st, &f.c.st, f.s.loc, f.c.loc + 4096, lens, 4);
	EXPECT_EQ(rkv_ep_state(f.c.ep), RKV_EP_CONNECTED);
	EXPECT_EQ(rkv_ep_state(f.s.ep), RKV_EP_CONNECTED);
	conf_fix_destroy(&f);
}

/* Many messages, RECVs replenished as they complete. */
static void t_send_recv_many(void)
{
	const int total = (int)conf_scale(2000, 500);
	struct conf_fix f;
	int sent = 0, got = 0, posted = 0, acked = 0;
	uint64_t deadline;

	CONF_FIX(&f, NULL);
	deadline = rkv_now_ms() + 4 * conf_bound_ms();
	while (got < total && rkv_now_ms() < deadline) {
		uint32_t len = 8;

		while (posted - got < 4 && posted < total) {
			EXPECT_EQ(post_recvs(f.s.ep,
					     f.s.loc + 256 * (posted % 8),
					     f.s.loc_mr->lkey, 1, 64,
					     (uint64_t)posted),
				  0);
			posted++;
		}
		while (sent < posted) {
			uint64_t v = (uint64_t)sent * 2654435761u;

			memcpy(f.c.loc + 256 * (sent % 8), &v, 8);
			if (post_sends(f.c.ep, f.c.loc + 256 * (sent % 8),
				       f.c.loc_mr->lkey, &len, 1,
				       (uint64_t)sent)) {
				g_test_failures++;
				goto out;
			}
			sent++;
		}
		if (conf_wait(&f.s, &f.c, 0, 1, conf_bound_ms())) {
			printf("#   no RECV completion after %d messages\n",
			       got);
			g_test_failures++;
			break;
		}
		for (int i = 0; i < f.s.st.n; i++) {
			struct rkv_wc *wc = &f.s.st.wc[i];
			uint64_t v, want = wc->wr_id * 2654435761u;

			v = conf_rd64(f.s.loc + 256 * (wc->wr_id % 8));
			if (wc->status != RKV_WC_SUCCESS ||
			    wc->wr_id != (uint64_t)got || v != want ||
			    wc->byte_len != 8) {
				printf("#   message %d: status %s wr_id %" PRIu64
				       " len %u value %" PRIx64 "\n",
				       got, rkv_wc_status_str(wc->status),
				       wc->wr_id, wc->byte_len, v);
				g_test_failures++;
				goto out;
			}
			got++;
		}
		conf_stash_clear(&f.s.st);
	}
	/* Every SEND completes at the sender, successfully and in order. */
	if (conf_wait(&f.s, &f.c, sent, 0, conf_bound_ms()))
		printf("#   %d of %d SEND completions\n", f.c.st.n, sent);
	for (int i = 0; i < f.c.st.n; i++) {
		if (f.c.st.wc[i].status != RKV_WC_SUCCESS ||
		    f.c.st.wc[i].wr_id != (uint64_t)i)
			break;
		acked++;
	}
	EXPECT_EQ(acked, sent);
out:
	EXPECT_EQ(got, total);
	conf_fix_destroy(&f);
}

static void t_recv_too_small(void)
{
	struct conf_fix f;
	int rc;

	CONF_FIX(&f, NULL);
	conf_fill(f.c.loc, 64, 13);
	EXPECT_EQ(post_recvs(f.s.ep, f.s.loc, f.s.loc_mr->lkey, 1, 16, 100),
		  0);
	{
		uint32_t len = 64;

		EXPECT_EQ(post_sends(f.c.ep, f.c.loc, f.c.loc_mr->lkey, &len,
				     1, 200),
			  0);
	}
	rc = conf_wait(&f.s, &f.c, 1, 1, conf_bound_ms());
	EXPECT_EQ(rc, 0);
	if (f.s.st.n >= 1) {
		EXPECT_EQ(f.s.st.wc[0].status, RKV_WC_LOC_LEN_ERR);
		EXPECT_EQ_U64(f.s.st.wc[0].wr_id, 100);
	}
	if (f.c.st.n >= 1) {
		if (f.c.st.wc[0].status != RKV_WC_REM_INV_REQ_ERR)
			printf("#   SEND status: %s (documented: remote invalid "
			       "request)\n",
			       rkv_wc_status_str(f.c.st.wc[0].status));
		EXPECT_TRUE(f.c.st.wc[0].status != RKV_WC_SUCCESS);
		EXPECT_EQ(f.c.st.wc[0].status, RKV_WC_REM_INV_REQ_ERR);
		EXPECT_EQ_U64(f.c.st.wc[0].wr_id, 200);
	}
	conf_fix_destroy(&f);
}

/* A SEND that finds no RECV waits for one (receiver not ready). */
static void t_send_rnr_wait(void)
{
	struct conf_fix f;
	uint32_t len = 32;
	int rc;

	CONF_FIX(&f, NULL);
	conf_fill(f.c.loc, 32, 14);
	EXPECT_EQ(post_sends(f.c.ep, f.c.loc, f.c.loc_mr->lkey, &len, 1, 200),
		  0);
	conf_quiesce(&f.s, &f.c, 200);
	EXPECT_EQ(f.c.st.n, 0);
	EXPECT_EQ(f.s.st.n, 0);
	EXPECT_EQ(post_recvs(f.s.ep, f.s.loc, f.s.loc_mr->lkey, 1, 64, 100),
		  0);
	rc = conf_wait(&f.s, &f.c, 1, 1, conf_bound_ms());
	EXPECT_EQ(rc, 0);
	if (f.c.st.n >= 1 && f.s.st.n >= 1) {
		EXPECT_EQ(f.c.st.wc[0].status, RKV_WC_SUCCESS);
		EXPECT_EQ(f.s.st.wc[0].status, RKV_WC_SUCCESS);
		EXPECT_EQ(f.s.st.wc[0].byte_len, 32);
		EXPECT_TRUE(conf_diff(f.s.loc, f.c.loc, 32) < 0);
	}
	conf_fix_destroy(&f);
}

/* ... but only up to the endpoint's timeout. */
static void t_send_rnr_timeout(void)
{
	struct conf_fix_opts o;
	struct conf_fix f;
	uint32_t len = 32;
	uint64_t t0;
	int rc;

	conf_fix_opts_init(&o);
	o.region_len = o.local_len = 64u << 10;
	o.cli_timeout_ms = o.srv_timeout_ms = 1000;
	CONF_FIX(&f, &o);
	t0 = rkv_now_ms();
	EXPECT_EQ(post_sends(f.c.ep, f.c.loc, f.c.loc_mr->lkey, &len, 1, 200),
		  0);
	rc = conf_wait(&f.s, &f.c, 1, 0, conf_bound_ms());
	EXPECT_EQ(rc, 0);
	if (f.c.st.n >= 1) {
		printf("#   SEND without RECV: %s after %" PRIu64 " ms\n",
		       rkv_wc_status_str(f.c.st.wc[0].status),
		       rkv_now_ms() - t0);
		EXPECT_EQ(f.c.st.wc[0].status, RKV_WC_RNR_RETRY_EXC_ERR);
		EXPECT_EQ(rkv_ep_state(f.c.ep), RKV_EP_ERROR);
	}
	conf_fix_destroy(&f);
}

/*
 * A WR posted on an accepted endpoint after a silence still fails within
 * its timeout.  On tcp and shm that endpoint is timed by the server's
 * transport thread, which, with nothing outstanding, blocks up to 1 s at
 * a time; the post must wake it (sw_thr_kick) or the failure comes up to
 * a second late.  The server READs the client's memory while the client
 * does not poll: nothing answers on tcp (RETRY_EXC_ERR after the 200 ms
 * timeout, noticed by the thread's ticks), nor on shm (its READ first
 * asks the client for the mapping, in rkv_post); on verbs the NIC
 * answers (success).
 */
static void t_timeout_after_idle(void)
{
	const unsigned timeout_ms = 200, late_ms = 300;
	struct conf_fix_opts o;
	struct conf_fix f;
	struct rkv_mr *mr = NULL;
	struct rkv_wr w;
	uint64_t t0, dt;
	int rc;

	conf_fix_opts_init(&o);
	o.region_len = o.local_len = 64u << 10;
	o.srv_timeout_ms = timeout_ms;
	CONF_FIX(&f, &o);
	rc = rkv_mr_reg(f.c.tp, f.c.loc, 4096,
			RKV_ACCESS_LOCAL_WRITE | RKV_ACCESS_REMOTE_READ, &mr);
	EXPECT_EQ(rc, 0);
	if (rc)
		goto out;
	/* Long enough for the server's thread to be in its long sleep. */
	conf_sleep_ms(30);
	conf_wr(&w, RKV_WR_READ, 7, RKV_WR_SIGNALED, f.s.loc, 64,
		f.s.loc_mr->lkey, (uint64_t)(uintptr_t)f.c.loc, mr->rkey);
	t0 = rkv_now_ms();
	EXPECT_EQ(rkv_post(f.s.ep, &w, NULL), 0);
	/* The server's CQ only: a client poll would answer the READ. */
	EXPECT_EQ(conf_wait(&f.s, NULL, 0, 1, conf_bound_ms()), 0);
	dt = rkv_now_ms() - t0;
	if (f.s.st.n >= 1) {
		enum rkv_wc_status st = f.s.st.wc[0].status;

		printf("#   READ of a client that does not poll: %s after %" PRIu64
		       " ms (timeout %u ms)\n",
		       rkv_wc_status_str(st), dt, timeout_ms);
		if (g_conf_provider == RKV_TP_VERBS) {
			EXPECT_TRUE(st == RKV_WC_SUCCESS ||
				    st == RKV_WC_RETRY_EXC_ERR);
		} else {
			EXPECT_EQ(st, RKV_WC_RETRY_EXC_ERR);
			EXPECT_TRUE(dt + 10 >= timeout_ms);
			EXPECT_TRUE(dt <= timeout_ms + late_ms);
		}
	}
out:
	if (mr)
		rkv_mr_dereg(mr);
	conf_fix_destroy(&f);
}

struct late_send {
	struct conf_fix *f;
	int rc;
};

/* 50 ms after it starts, the client SENDs 8 bytes. */
static void *late_send_main(void *arg)
{
	struct late_send *ls = arg;
	static const uint32_t len = 8;

	usleep(50 * 1000);
	ls->rc = post_sends(ls->f->c.ep, ls->f->c.loc, ls->f->c.loc_mr->lkey,
			    &len, 1, 200);
	return NULL;
}

/* Wait on cq (each wait up to the bound) until a completion comes. */
static int wait_one(struct rkv_cq *cq, struct rkv_wc *wc, uint64_t *ms)
{
	uint64_t t0 = rkv_now_ms();
	int n = 0, rc = 0;

	while (n == 0 && rc == 0 && rkv_now_ms() - t0 < conf_bound_ms()) {
		rc = rkv_cq_wait(cq, conf_bound_ms() * 1000u);
		n = rkv_cq_poll(cq, wc, 1);
	}
	*ms = rkv_now_ms() - t0;
	return rc ? rc : n;
}

/*
 * rkv_cq_wait: with nothing outstanding it sleeps about its timeout; it
 * wakes for a READ's answer (tcp: arriving on the poller's own socket;
 * verbs: a completion event) and for a RECV on an accepted endpoint sent
 * while the server already waits (tcp/shm: queued by the transport thread,
 * which rings the CQ's eventfd) - each long before its 10 s timeout.
 */
static void t_cq_wait(void)
{
	struct conf_fix f;
	struct rkv_wr w;
	struct rkv_wc wc;
	struct late_send ls;
	pthread_t th;
	uint64_t t0, ms;

	CONF_FIX(&f, NULL);
	EXPECT_EQ(rkv_cq_wait(NULL, 1000), -EINVAL);
	t0 = rkv_now_ns();
	EXPECT_EQ(rkv_cq_wait(f.c.cq, 30 * 1000), 0);
	EXPECT_TRUE(rkv_now_ns() - t0 >= 20 * 1000000ull);
	/* the client's READ */
	conf_fill(f.s.reg, 4096, 5);
	conf_wr(&w, RKV_WR_READ, 7, RKV_WR_SIGNALED, f.c.loc, 4096,
		f.c.loc_mr->lkey, conf_raddr(&f.s, 0), f.s.mr->rkey);
	ASSERT_EQ(rkv_post(f.c.ep, &w, NULL), 0);
	EXPECT_EQ(wait_one(f.c.cq, &wc, &ms), 1);
	printf("#   READ completion after %llu ms of waiting\n",
	       (unsigned long long)ms);
	EXPECT_TRUE(ms < conf_bound_ms() / 2);
	EXPECT_EQ_U64(wc.wr_id, 7);
	EXPECT_EQ(wc.status, RKV_WC_SUCCESS);
	EXPECT_TRUE(conf_diff(f.c.loc, f.s.reg, 4096) < 0);
	/* the server's RECV, queued by its transport thread */
	ASSERT_EQ(post_recvs(f.s.ep, f.s.loc, f.s.loc_mr->lkey, 1, 256, 100),
		  0);
	ls.f = &f;
	ls.rc = -1;
	ASSERT_EQ(pthread_create(&th, NULL, late_send_main, &ls), 0);
	EXPECT_EQ(wait_one(f.s.cq, &wc, &ms), 1);
	pthread_join(th, NULL);
	EXPECT_EQ(ls.rc, 0);
	printf("#   RECV completion after %llu ms of waiting (sent at 50)\n",
	       (unsigned long long)ms);
	EXPECT_TRUE(ms < conf_bound_ms() / 2);
	EXPECT_EQ_U64(wc.wr_id, 100);
	EXPECT_EQ(wc.opcode, RKV_WR_RECV);
	EXPECT_EQ(wc.byte_len, 8);
	/* and the client's SEND completes */
	EXPECT_EQ(wait_one(f.c.cq, &wc, &ms), 1);
	EXPECT_EQ_U64(wc.wr_id, 200);
	conf_fix_destroy(&f);
}

struct late_connect {
	struct conf_cli *c;
	const char *addr;
	int pipe_fd;             /* >= 0: write a byte there instead */
	int rc;
};

/* 50 ms after it starts: connect c to addr, or write to pipe_fd. */
static void *late_connect_main(void *arg)
{
	struct late_connect *lc = arg;

	usleep(50 * 1000);
	if (lc->pipe_fd >= 0)
		lc->rc = write(lc->pipe_fd, "x", 1) == 1 ? 0 : -errno;
	else
		lc->rc = conf_cli_connect(lc->c, lc->addr,
					  (int)conf_bound_ms());
	return NULL;
}

/* rkv_cq_wait_fds until fds[0] is ready or the bound: the ms it took. */
static uint64_t wait_fd_ready(struct rkv_cq *cq, struct pollfd *pfd)
{
	uint64_t t0 = rkv_now_ms();

	while (rkv_now_ms() - t0 < conf_bound_ms()) {
		if (rkv_cq_wait_fds(cq, pfd, 1, conf_bound_ms() * 1000u) ||
		    (pfd->revents & POLLIN))
			break;
	}
	return rkv_now_ms() - t0;
}

/*
 * rkv_cq_wait_fds wakes for the caller's fds too (a pipe written 50 ms
 * into a 10 s wait), and rkv_listener_fd turns readable when a connection
 * waits for rkv_accept, and stops being readable once it was taken: what
 * lets a server's loop block (server/main.c).
 */
static void t_cq_wait_fds(void)
{
	struct conf_fix f;
	struct conf_fix_opts o;
	struct conf_cli c2;
	struct late_connect lc;
	struct pollfd pfd[RKV_CQ_WAIT_FDS + 1];
	struct rkv_ep *ep2 = NULL;
	pthread_t th;
	uint64_t ms;
	int p[2], lfd;

	CONF_FIX(&f, NULL);
	memset(pfd, 0, sizeof(pfd));
	EXPECT_EQ(rkv_cq_wait_fds(f.s.cq, pfd, RKV_CQ_WAIT_FDS + 1, 1000),
		  -EINVAL);
	EXPECT_EQ(rkv_cq_wait_fds(f.s.cq, NULL, 1, 1000), -EINVAL);
	/* a pipe of ours */
	ASSERT_EQ(pipe(p), 0);
	lc = (struct late_connect){ .pipe_fd = p[1], .rc = -1 };
	pfd[0] = (struct pollfd){ .fd = p[0], .events = POLLIN };
	ASSERT_EQ(pthread_create(&th, NULL, late_connect_main, &lc), 0);
	ms = wait_fd_ready(f.c.cq, &pfd[0]);
	pthread_join(th, NULL);
	printf("#   pipe ready after %llu ms of waiting (written at 50)\n",
	       (unsigned long long)ms);
	EXPECT_EQ(lc.rc, 0);
	EXPECT_TRUE(pfd[0].revents & POLLIN);
	EXPECT_TRUE(ms < conf_bound_ms() / 2);
	close(p[0]);
	close(p[1]);
	/* the listener: quiet, then a connection, then quiet again */
	lfd = rkv_listener_fd(f.s.lis);
	EXPECT_TRUE(lfd >= 0);
	EXPECT_EQ(rkv_listener_fd(NULL), -1);
	if (lfd < 0) {
		conf_fix_destroy(&f);
		return;
	}
	pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
	EXPECT_EQ(poll(pfd, 1, 0), 0);
	conf_fix_opts_init(&o);
	ASSERT_EQ(conf_cli_open(&c2, &o), 0);
	lc = (struct late_connect){ .c = &c2, .addr = f.s.addr, .pipe_fd = -1,
				    .rc = -1 };
	ASSERT_EQ(pthread_create(&th, NULL, late_connect_main, &lc), 0);
	ms = wait_fd_ready(f.s.cq, &pfd[0]);
	printf("#   listener ready after %llu ms of waiting (connect at 50)\n",
	       (unsigned long long)ms);
	EXPECT_TRUE(pfd[0].revents & POLLIN);
	EXPECT_TRUE(ms < conf_bound_ms() / 2);
	EXPECT_EQ(rkv_accept(f.s.lis, f.s.cq, (int)conf_bound_ms(), &ep2), 0);
	pthread_join(th, NULL);
	EXPECT_EQ(lc.rc, 0);
	EXPECT_EQ(poll(pfd, 1, 0), 0);
	if (ep2)
		rkv_ep_destroy(ep2);
	conf_cli_close(&c2);
	conf_fix_destroy(&f);
}

void conf_tests_ops(void)
{
	CONF_TEST(t_read_sizes);
	CONF_TEST(t_write_sizes);
	CONF_TEST(t_read_edges);
	CONF_TEST(t_write_edges);
	CONF_TEST(t_zero_length);
	CONF_TEST(t_large_ops);
	CONF_TEST(t_read_digest);
	CONF_TEST(t_write_digest);
	CONF_TEST(t_cas);
	CONF_TEST(t_fetch_add);
	CONF_TEST(t_fetch_add_wrap);
	CONF_TEST(t_atomic_edges);
	CONF_TEST(t_send_recv);
	CONF_TEST(t_send_recv_many);
	CONF_TEST(t_recv_too_small);
	CONF_TEST(t_send_rnr_wait);
	CONF_TEST(t_send_rnr_timeout);
	CONF_TEST(t_timeout_after_idle);
	CONF_TEST(t_cq_wait);
	CONF_TEST(t_cq_wait_fds);
}
