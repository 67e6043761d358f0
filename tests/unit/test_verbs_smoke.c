/* SPDX-License-Identifier: MIT */
/*
 * test_verbs_smoke.c - the verbs provider against a real device (Soft-RoCE
 * in tests/softroce/, or an HCA): device choice and overrides, connect and
 * accept in one process, READ / WRITE (inline and not, 1 B to 4 MiB), CAS,
 * FETCH_ADD, SEND / RECV, chains, the error paths (bad rkey, bad lkey,
 * short RECV, refused connection, accept timeout, peer gone), and
 * per-connection rkeys (type-2B memory windows, random PSNs).
 *
 * Without an RDMA device it checks that forcing verbs fails with -ENODEV,
 * then exits 77 with the reason.  The listen address comes from
 * RKV_VERBS_IP (rdma_cm needs an address of the RDMA netdev; 127/8 does
 * not work).  Every wait is bounded.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rtime.h"
#include "tests/lib/test.h"
#include "transport.h"

#define REGION (8u << 20) /* main MR: all but the last 64 KiB */
#define WAIT_MS 15000     /* bound on one completion (TCG is slow) */

static const char *g_ip;
/* the fabric knobs open_tp passes (t_fabric_knobs) */
static unsigned g_mtu, g_rd;
static int g_tc = -1, g_sl = -1;

struct half {
	struct rkv_tp *tp;
	struct rkv_cq *cq;
	struct rkv_ep *ep;
	uint8_t *mem;
	struct rkv_mr *mr;
	struct rkv_mr *ro; /* read-only window of mem (last 64 KiB) */
};

struct fix {
	struct half s, c;
	struct rkv_listener *l;
};

static int open_tp(struct rkv_tp **tp)
{
	struct rkv_tp_opts o;

	rkv_tp_opts_init(&o);
	o.provider = RKV_TP_VERBS;
	o.timeout_ms = 1000;
	o.mtu = g_mtu;
	o.traffic_class = g_tc;
	o.service_level = g_sl;
	o.max_rd_atomic = g_rd;
	return rkv_tp_create(&o, tp);
}

static int half_open(struct half *h)
{
	int rc = open_tp(&h->tp);

	if (rc)
		return rc;
	rc = rkv_cq_create(h->tp, 1024, &h->cq);
	if (rc)
		return rc;
	rc = rkv_tp_mem_alloc(h->tp, REGION, (void **)&h->mem);
	if (rc)
		return rc;
	rc = rkv_mr_reg(h->tp, h->mem, REGION - 65536, RKV_ACCESS_ALL, &h->mr);
	if (rc)
		return rc;
	return rkv_mr_reg(h->tp, h->mem + REGION - 65536, 65536,
			  RKV_ACCESS_REMOTE_READ, &h->ro);
}

static void half_close(struct half *h)
{
	rkv_ep_destroy(h->ep);
	if (h->ro)
		EXPECT_EQ(rkv_mr_dereg(h->ro), 0);
	if (h->mr)
		EXPECT_EQ(rkv_mr_dereg(h->mr), 0);
	if (h->mem)
		rkv_tp_mem_free(h->tp, h->mem, REGION);
	rkv_cq_destroy(h->cq);
	rkv_tp_destroy(h->tp);
	memset(h, 0, sizeof(*h));
}

struct acceptor {
	struct fix *f;
	int rc;
};

static void *accept_thread(void *arg)
{
	struct acceptor *a = arg;

	a->rc = rkv_accept(a->f->l, a->f->s.cq, WAIT_MS, &a->f->s.ep);
	return NULL;
}

static int fix_open(struct fix *f)
{
	struct acceptor a = { .f = f, .rc = -1 };
	char addr[300];
	pthread_t th;
	int rc;

	memset(f, 0, sizeof(*f));
	rc = half_open(&f->s);
	if (rc)
		return rc;
	rc = half_open(&f->c);
	if (rc)
		return rc;
	snprintf(addr, sizeof(addr), "verbs://%s:0", g_ip);
	rc = rkv_listen(f->s.tp, addr, &f->l);
	if (rc)
		return rc;
	if (pthread_create(&th, NULL, accept_thread, &a))
		return -EAGAIN;
	rc = rkv_connect(f->c.tp, rkv_listener_addr(f->l), f->c.cq, WAIT_MS,
			 &f->c.ep);
	pthread_join(th, NULL);
	return rc ? rc : a.rc;
}

static void fix_close(struct fix *f)
{
	/* Client first: the server side then sees the disconnect. */
	half_close(&f->c);
	rkv_listener_destroy(f->l);
	half_close(&f->s);
}

/* One completion from cq within ms; 1 if got, 0 on timeout. */
static int poll_one(struct rkv_cq *cq, struct rkv_wc *wc, unsigned ms)
{
	uint64_t end = rkv_now_ms() + ms;

	do {
		int n = rkv_cq_poll(cq, wc, 1);

		if (n < 0)
			return 0;
		if (n == 1)
			return 1;
	} while (rkv_now_ms() < end);
	return 0;
}

static struct rkv_wr wr_of(enum rkv_wr_opcode op, struct half *l, size_t loff,
			   uint32_t len, struct half *r, size_t roff)
{
	struct rkv_wr w;

	memset(&w, 0, sizeof(w));
	w.wr_id = 0x1000 + (uint64_t)op;
	w.opcode = op;
	w.flags = RKV_WR_SIGNALED;
	w.local = l->mem + loff;
	w.length = len;
	w.lkey = l->mr->lkey;
	if (r) {
		w.remote_addr = (uintptr_t)(r->mem + roff);
		w.rkey = r->mr->rkey;
	}
	return w;
}

/* Post one signaled WR and expect its completion with status st. */
static void post_expect(struct fix *f, struct rkv_wr *w,
			enum rkv_wc_status st)
{
	struct rkv_wc wc;
	int rc = rkv_post(f->c.ep, w, NULL);

	EXPECT_EQ(rc, 0);
	if (rc)
		return;
	if (!poll_one(f->c.cq, &wc, WAIT_MS)) {
		EXPECT_TRUE(!"completion within WAIT_MS");
		return;
	}
	EXPECT_EQ_U64(wc.wr_id, w->wr_id);
	if (wc.status != st)
		printf("#   %s: got %s, want %s\n", rkv_wr_opcode_str(w->opcode),
		       rkv_wc_status_str(wc.status), rkv_wc_status_str(st));
	EXPECT_EQ(wc.status, st);
	EXPECT_TRUE(wc.ep == f->c.ep);
	if (st == RKV_WC_SUCCESS)
		EXPECT_EQ(wc.opcode, w->opcode);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed);
}

/* ---------------------------------------------------------------- tests */

static void t_create_and_overrides(void)
{
	struct rkv_tp_opts o;
	struct rkv_tp *tp = NULL;
	const char *dev = getenv("SOFTROCE_DEV");
	const char *gidx = getenv("SOFTROCE_GID_INDEX");
	enum rkv_log_level lvl = rkv_log_get_level();

	ASSERT_EQ(open_tp(&tp), 0);
	printf("# %s\n", rkv_tp_describe(tp));
	EXPECT_EQ(rkv_tp_provider(tp), RKV_TP_VERBS);
	EXPECT_TRUE(strstr(rkv_tp_describe(tp), " port ") != NULL);
	EXPECT_TRUE(strstr(rkv_tp_describe(tp), "gid[") != NULL);
	if (dev)
		EXPECT_TRUE(strncmp(rkv_tp_describe(tp), dev, strlen(dev)) == 0);
	if (gidx) {
		char want[32];

		snprintf(want, sizeof(want), "gid[%s]", gidx);
		EXPECT_TRUE(strstr(rkv_tp_describe(tp), want) != NULL);
		EXPECT_TRUE(strstr(rkv_tp_describe(tp), "RoCE v2") != NULL);
	}
	if (dev) /* rxe: ATOMIC_HCA */
		EXPECT_EQ(rkv_tp_has_atomics(tp), 1);
	rkv_tp_destroy(tp);

	/* Wrong overrides fail clearly (their log lines are expected). */
	rkv_log_set_level(RKV_LOG_OFF);
	rkv_tp_opts_init(&o);
	o.provider = RKV_TP_VERBS;
	o.device = "no-such-dev0";
	EXPECT_EQ(rkv_tp_create(&o, &tp), -ENODEV);
	rkv_tp_opts_init(&o);
	o.provider = RKV_TP_VERBS;
	o.device = dev;
	o.port = 9;
	EXPECT_EQ(rkv_tp_create(&o, &tp), dev ? -EINVAL : -ENODEV);
	rkv_tp_opts_init(&o);
	o.provider = RKV_TP_VERBS;
	o.gid_index = 100000;
	EXPECT_EQ(rkv_tp_create(&o, &tp), -EINVAL);
	rkv_log_set_level(lvl);
	if (dev && gidx) {
		rkv_tp_opts_init(&o);
		o.provider = RKV_TP_VERBS;
		o.device = dev;
		o.port = 1;
		o.gid_index = atoi(gidx);
		EXPECT_EQ(rkv_tp_create(&o, &tp), 0);
		rkv_tp_destroy(tp);
	}
}

/* --mtu, --traffic-class and --service-level reach both QPs (read back
 * with ibv_query_qp); values a port cannot take fail at create with
 * -EINVAL; the description says what was chosen. */
static void t_fabric_knobs(void)
{
	enum rkv_log_level lvl = rkv_log_get_level();
	struct rkv_ep_path ps, pc;
	struct rkv_tp *tp = NULL;
	struct fix f;
	unsigned small = 512;

	g_mtu = small;
	g_tc = 106; /* DSCP 26 (AF31), ECN capable */
	g_sl = 2;
	g_rd = 4;
	ASSERT_EQ(fix_open(&f), 0);
	printf("# %s\n", rkv_tp_describe(f.c.tp));
	int eth = strstr(rkv_tp_describe(f.c.tp), ", Ethernet,") != NULL;

	/* the SL is InfiniBand's: on RoCE it is ignored with a warning */
	EXPECT_TRUE(strstr(rkv_tp_describe(f.c.tp), eth ?
			   ", mtu 512, traffic class 106 (DSCP 26, ECN 2)" :
			   ", mtu 512, traffic class 106 (DSCP 26, ECN 2), "
			   "SL 2") != NULL);
	EXPECT_EQ(strstr(rkv_tp_describe(f.c.tp), "SL ") == NULL, eth);
	EXPECT_EQ(rkv_ep_path(f.c.ep, &pc), 0);
	EXPECT_EQ(rkv_ep_path(f.s.ep, &ps), 0);
	printf("# QPs: client mtu %u tc %u sl %u, server mtu %u tc %u sl %u\n",
	       pc.mtu, pc.traffic_class, pc.service_level, ps.mtu,
	       ps.traffic_class, ps.service_level);
	EXPECT_EQ(pc.mtu, small);
	EXPECT_EQ(ps.mtu, small);
	EXPECT_EQ(pc.traffic_class, 106);
	EXPECT_EQ(ps.traffic_class, 106);
	EXPECT_EQ(pc.service_level, eth ? 0u : 2u);
	EXPECT_EQ(ps.service_level, eth ? 0u : 2u);
	printf("# rd_atomic: client %u/%u, server %u/%u\n", pc.max_rd_atomic,
	       pc.max_dest_rd_atomic, ps.max_rd_atomic, ps.max_dest_rd_atomic);
	EXPECT_EQ(pc.max_rd_atomic, 4);
	EXPECT_EQ(pc.max_dest_rd_atomic, 4);
	EXPECT_EQ(ps.max_rd_atomic, 4);
	EXPECT_EQ(ps.max_dest_rd_atomic, 4);
	EXPECT_TRUE(strstr(rkv_tp_describe(f.c.tp), ", rd_atomic 4/4") != NULL);
	/* and data moves at that MTU (a WRITE and READ of 64 KiB) */
	fill(f.c.mem, 65536, 7);
	struct rkv_wr w = wr_of(RKV_WR_WRITE, &f.c, 0, 65536, &f.s, 0);

	post_expect(&f, &w, RKV_WC_SUCCESS);
	EXPECT_TRUE(memcmp(f.c.mem, f.s.mem, 65536) == 0);
	fix_close(&f);
	g_mtu = g_rd = 0;
	g_tc = g_sl = -1;

	rkv_log_set_level(RKV_LOG_OFF); /* the refusals log a line each */
	static const struct {
		unsigned mtu;
		int tc, sl;
	} bad[] = { { 1000, -1, -1 }, { 8192, -1, -1 }, { 0, 256, -1 },
		    { 0, -1, 16 } };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		g_mtu = bad[i].mtu;
		g_tc = bad[i].tc;
		g_sl = bad[i].sl;
		EXPECT_EQ(open_tp(&tp), -EINVAL);
	}
	/* above the port's active MTU (rxe: the netdev's MTU bounds it) */
	g_mtu = 4096;
	g_tc = g_sl = -1;
	int rc = open_tp(&tp);

	if (rc == 0) {
		printf("# the port runs an MTU of 4096: nothing above it\n");
		rkv_tp_destroy(tp);
	} else {
		EXPECT_EQ(rc, -EINVAL);
	}
	g_mtu = 0;
	rkv_log_set_level(lvl);
}

static void t_write_read_sizes(void)
{
	static const uint32_t sizes[] = { 1, 8, 64, 65, 4096, 65536, 4u << 20 };
	struct fix f;

	ASSERT_EQ(fix_open(&f), 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i];
		struct rkv_wr w;

		fill(f.c.mem, n, (unsigned)i);
		memset(f.s.mem, 0, n);
		w = wr_of(RKV_WR_WRITE, &f.c, 0, n, &f.s, 0);
		post_expect(&f, &w, RKV_WC_SUCCESS);
		EXPECT_TRUE(memcmp(f.c.mem, f.s.mem, n) == 0);
		memset(f.c.mem + n, 0xee, n < 65536 ? n : 65536);
		fill(f.s.mem, n, (unsigned)i + 7);
		w = wr_of(RKV_WR_READ, &f.c, n, n, &f.s, 0);
		if (n + n > REGION - 65536)
			w.local = f.c.mem; /* the 4 MiB one reads over itself */
		post_expect(&f, &w, RKV_WC_SUCCESS);
		EXPECT_TRUE(memcmp(w.local, f.s.mem, n) == 0);
	}
	EXPECT_EQ(rkv_ep_state(f.c.ep), RKV_EP_CONNECTED);
	fix_close(&f);
}

static void t_atomics(void)
{
	struct fix f;
	struct rkv_wr w;
	uint64_t *word, *res;

	ASSERT_EQ(fix_open(&f), 0);
	word = (uint64_t *)(void *)(f.s.mem + 4096);
	res = (uint64_t *)(void *)f.c.mem;
	*word = 41;
	w = wr_of(RKV_WR_FETCH_ADD, &f.c, 0, 8, &f.s, 4096);
	w.compare_add = 1;
	post_expect(&f, &w, RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*res, 41);
	EXPECT_EQ_U64(*word, 42);
	w = wr_of(RKV_WR_CAS, &f.c, 0, 8, &f.s, 4096);
	w.compare_add = 42;
	w.swap = 0x1122334455667788ull;
	post_expect(&f, &w, RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*res, 42);
	EXPECT_EQ_U64(*word, 0x1122334455667788ull);
	w.compare_add = 7; /* mismatch: nothing changes */
	w.swap = 9;
	post_expect(&f, &w, RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*res, 0x1122334455667788ull);
	EXPECT_EQ_U64(*word, 0x1122334455667788ull);
	fix_close(&f);
}

static void t_send_recv(void)
{
	static const uint32_t sizes[] = { 0, 1, 48, 4000, 1u << 20 };
	struct fix f;

	ASSERT_EQ(fix_open(&f), 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct rkv_recv_wr r = {
			.wr_id = 77 + i,
			.local = f.s.mem,
			.length = 1u << 20,
			.lkey = f.s.mr->lkey,
		};
		struct rkv_wr w;
		struct rkv_wc wc;

		ASSERT_EQ(rkv_post_recv(f.s.ep, &r, NULL), 0);
		fill(f.c.mem, sizes[i], 3);
		w = wr_of(RKV_WR_SEND, &f.c, 0, sizes[i], NULL, 0);
		post_expect(&f, &w, RKV_WC_SUCCESS);
		ASSERT_TRUE(poll_one(f.s.cq, &wc, WAIT_MS));
		EXPECT_EQ(wc.status, RKV_WC_SUCCESS);
		EXPECT_EQ(wc.opcode, RKV_WR_RECV);
		EXPECT_EQ_U64(wc.wr_id, 77 + i);
		EXPECT_EQ(wc.byte_len, sizes[i]);
		EXPECT_TRUE(wc.ep == f.s.ep);
		EXPECT_TRUE(memcmp(f.s.mem, f.c.mem, sizes[i]) == 0);
	}
	fix_close(&f);
}

/* 64 WRs in one post, only the last signaled: one completion, in order. */
static void t_chain(void)
{
	enum { N = 64 };
	struct rkv_wr w[N];
	struct rkv_wc wc;
	struct fix f;

	ASSERT_EQ(fix_open(&f), 0);
	for (int i = 0; i < N; i++) {
		f.c.mem[i] = (uint8_t)(i + 1);
		w[i] = wr_of(RKV_WR_WRITE, &f.c, (size_t)i, 1, &f.s, 100);
		w[i].flags = 0;
		w[i].next = i + 1 < N ? &w[i + 1] : NULL;
	}
	w[N - 1].flags = RKV_WR_SIGNALED;
	w[N - 1].wr_id = 999;
	ASSERT_EQ(rkv_post(f.c.ep, w, NULL), 0);
	ASSERT_TRUE(poll_one(f.c.cq, &wc, WAIT_MS));
	EXPECT_EQ_U64(wc.wr_id, 999);
	EXPECT_EQ(wc.status, RKV_WC_SUCCESS);
	EXPECT_EQ(f.s.mem[100], N); /* the last write won */
	EXPECT_EQ(rkv_cq_poll(f.c.cq, &wc, 1), 0);
	fix_close(&f);
}

/* After an error: endpoint in error, later WRs (RECVs too) flushed. */
static void expect_flushed_after(struct fix *f)
{
	struct rkv_recv_wr r = { .wr_id = 5, .local = f->c.mem, .length = 64,
				 .lkey = f->c.mr->lkey };
	struct rkv_wr w = wr_of(RKV_WR_WRITE, &f->c, 0, 8, &f->s, 0);
	struct rkv_wc wc;
	int seen_w = 0, seen_r = 0;
	uint64_t end = rkv_now_ms() + WAIT_MS;

	EXPECT_EQ(rkv_ep_state(f->c.ep), RKV_EP_ERROR);
	w.wr_id = 6;
	EXPECT_EQ(rkv_post(f->c.ep, &w, NULL), 0);
	EXPECT_EQ(rkv_post_recv(f->c.ep, &r, NULL), 0);
	while ((!seen_w || !seen_r) && rkv_now_ms() < end) {
		if (rkv_cq_poll(f->c.cq, &wc, 1) != 1)
			continue;
		EXPECT_EQ(wc.status, RKV_WC_WR_FLUSH_ERR);
		if (wc.wr_id == 6)
			seen_w = 1;
		if (wc.wr_id == 5)
			seen_r = 1;
	}
	EXPECT_TRUE(seen_w);
	EXPECT_TRUE(seen_r);
}

static void t_bad_rkey(void)
{
	struct fix f;
	struct rkv_wr w;

	ASSERT_EQ(fix_open(&f), 0);
	w = wr_of(RKV_WR_READ, &f.c, 0, 64, &f.s, 0);
	w.rkey ^= 0x5a5a00;
	post_expect(&f, &w, RKV_WC_REM_ACCESS_ERR);
	expect_flushed_after(&f);
	fix_close(&f);

	/* out of bounds, and a write to a read-only region */
	ASSERT_EQ(fix_open(&f), 0);
	w = wr_of(RKV_WR_READ, &f.c, 0, 64, &f.s, REGION - 65536 - 32);
	post_expect(&f, &w, RKV_WC_REM_ACCESS_ERR);
	fix_close(&f);
	ASSERT_EQ(fix_open(&f), 0);
	w = wr_of(RKV_WR_WRITE, &f.c, 0, 8, &f.s, 0);
	w.remote_addr = (uintptr_t)(f.s.mem + REGION - 65536);
	w.rkey = f.s.ro->rkey;
	post_expect(&f, &w, RKV_WC_REM_ACCESS_ERR);
	fix_close(&f);
}

/* Another client connection to f's listener: its half in h, the server's
 * endpoint in *sep (on f->s's CQ). */
static int conn_more(struct fix *f, struct half *h, struct rkv_ep **sep)
{
	struct fix tmp = *f; /* accept_thread fills tmp.s.ep */
	struct acceptor a = { .f = &tmp, .rc = -1 };
	pthread_t th;
	int rc;

	memset(h, 0, sizeof(*h));
	tmp.s.ep = NULL;
	rc = half_open(h);
	if (rc)
		return rc;
	if (pthread_create(&th, NULL, accept_thread, &a))
		return -EAGAIN;
	rc = rkv_connect(h->tp, rkv_listener_addr(f->l), h->cq, WAIT_MS,
			 &h->ep);
	pthread_join(th, NULL);
	*sep = tmp.s.ep;
	return rc ? rc : a.rc;
}

/* One signaled WR on h's endpoint (remote rkey and address given); the
 * status of its completion, or -1 on none. */
static int post_on(struct half *h, enum rkv_wr_opcode op, uint64_t raddr,
		   uint32_t rkey)
{
	int atomic = op == RKV_WR_CAS || op == RKV_WR_FETCH_ADD;
	struct rkv_wr w = wr_of(op, h, 0, atomic ? 8 : 256, NULL, 0);
	struct rkv_wc wc;

	w.remote_addr = raddr;
	w.rkey = rkey;
	w.compare_add = 0;
	w.swap = 0x77;
	if (rkv_post(h->ep, &w, NULL))
		return -1;
	return poll_one(h->cq, &wc, WAIT_MS) ? (int)wc.status : -1;
}

/*
 * A windowed MR: each server endpoint hands out an rkey of its own (a
 * type-2B window bound to its QP), which works on that connection for
 * READ, WRITE, CAS and FETCH_ADD and on no other: another client's
 * connection, one the server never gave an rkey to, and the MR's own
 * rkey all get REM_ACCESS_ERR.  A window dies with its MR; a client's
 * going takes only its own windows.  Starting PSNs differ per QP.
 */
static void t_windows(void)
{
	struct fix f;
	struct half c2, c3, c4;
	struct rkv_ep *s2 = NULL, *s3 = NULL, *s4 = NULL;
	struct rkv_ep_path p1, p2, p3;
	struct rkv_mr *wmr = NULL;
	uint32_t rk1 = 0, rk1b = 0, rk2 = 0;
	uint64_t base;

	ASSERT_EQ(fix_open(&f), 0);
	printf("# %s\n", rkv_tp_describe(f.s.tp));
	if (!rkv_tp_windows(f.s.tp)) {
		fix_close(&f);
		rkv_test_skip("the device has no type-2B memory windows");
		return;
	}
	ASSERT_EQ(rkv_mr_reg(f.s.tp, f.s.mem, 1u << 20,
			     RKV_ACCESS_ALL | RKV_ACCESS_WINDOWED, &wmr), 0);
	base = (uintptr_t)f.s.mem;
	EXPECT_EQ(rkv_ep_rkey(f.s.ep, wmr, &rk1), 0);
	EXPECT_EQ(rkv_ep_rkey(f.s.ep, wmr, &rk1b), 0);
	EXPECT_EQ(rk1, rk1b); /* one window per endpoint and MR */
	EXPECT_TRUE(rk1 != wmr->rkey);
	/* its own connection: every operation */
	fill(f.c.mem, 256, 3);
	EXPECT_EQ(post_on(&f.c, RKV_WR_WRITE, base + 4096, rk1),
		  RKV_WC_SUCCESS);
	EXPECT_TRUE(memcmp(f.s.mem + 4096, f.c.mem, 256) == 0);
	EXPECT_EQ(post_on(&f.c, RKV_WR_READ, base + 4096, rk1),
		  RKV_WC_SUCCESS);
	EXPECT_EQ(post_on(&f.c, RKV_WR_CAS, base + 8192, rk1), RKV_WC_SUCCESS);
	EXPECT_EQ(post_on(&f.c, RKV_WR_FETCH_ADD, base + 8192, rk1),
		  RKV_WC_SUCCESS);
	EXPECT_EQ_U64(*(uint64_t *)(void *)(f.s.mem + 8192), 0x77);

	/* a second client with its own window; the first one's rkey from
	 * its connection is refused and changes nothing */
	ASSERT_EQ(conn_more(&f, &c2, &s2), 0);
	EXPECT_EQ(rkv_ep_rkey(s2, wmr, &rk2), 0);
	EXPECT_TRUE(rk2 != rk1);
	EXPECT_EQ(post_on(&c2, RKV_WR_READ, base + 4096, rk2), RKV_WC_SUCCESS);
	EXPECT_EQ(post_on(&c2, RKV_WR_WRITE, base + 8192, rk1),
		  RKV_WC_REM_ACCESS_ERR);
	EXPECT_EQ_U64(*(uint64_t *)(void *)(f.s.mem + 8192), 0x77);
	/* a connection given no rkey: neither client's, nor the MR's own */
	ASSERT_EQ(conn_more(&f, &c3, &s3), 0);
	EXPECT_EQ(post_on(&c3, RKV_WR_READ, base, rk1), RKV_WC_REM_ACCESS_ERR);
	ASSERT_EQ(conn_more(&f, &c4, &s4), 0);
	EXPECT_EQ(post_on(&c4, RKV_WR_FETCH_ADD, base + 8192, wmr->rkey),
		  RKV_WC_REM_ACCESS_ERR);
	EXPECT_EQ_U64(*(uint64_t *)(void *)(f.s.mem + 8192), 0x77);
	/* random starting PSNs (rdma_cm's), one per QP */
	EXPECT_EQ(rkv_ep_path(f.c.ep, &p1), 0);
	EXPECT_EQ(rkv_ep_path(c2.ep, &p2), 0);
	EXPECT_EQ(rkv_ep_path(c3.ep, &p3), 0);
	printf("# sq_psn 0x%x 0x%x 0x%x\n", p1.sq_psn, p2.sq_psn, p3.sq_psn);
	EXPECT_TRUE(p1.sq_psn != p2.sq_psn && p2.sq_psn != p3.sq_psn &&
		    p1.sq_psn != p3.sq_psn);
	/* the second client goes: the first keeps its window */
	half_close(&c2);
	rkv_ep_destroy(s2);
	half_close(&c3);
	rkv_ep_destroy(s3);
	half_close(&c4);
	rkv_ep_destroy(s4);
	EXPECT_EQ(post_on(&f.c, RKV_WR_READ, base + 4096, rk1),
		  RKV_WC_SUCCESS);
	/* the MR goes: its window with it */
	EXPECT_EQ(rkv_mr_dereg(wmr), 0);
	EXPECT_EQ(post_on(&f.c, RKV_WR_READ, base + 4096, rk1),
		  RKV_WC_REM_ACCESS_ERR);
	fix_close(&f);
}

/* A small WRITE would go inline; with a bad lkey it must not. */
static void t_bad_lkey(void)
{
	struct fix f;
	struct rkv_wr w;

	ASSERT_EQ(fix_open(&f), 0);
	w = wr_of(RKV_WR_WRITE, &f.c, 0, 8, &f.s, 0);
	w.lkey ^= 0x5a5a00;
	post_expect(&f, &w, RKV_WC_LOC_PROT_ERR);
	EXPECT_EQ(rkv_ep_state(f.c.ep), RKV_EP_ERROR);
	fix_close(&f);
}

static void t_short_recv(void)
{
	struct rkv_recv_wr r;
	struct rkv_wr w;
	struct rkv_wc wc;
	struct fix f;

	ASSERT_EQ(fix_open(&f), 0);
	r = (struct rkv_recv_wr){ .wr_id = 1, .local = f.s.mem, .length = 16,
				  .lkey = f.s.mr->lkey };
	ASSERT_EQ(rkv_post_recv(f.s.ep, &r, NULL), 0);
	w = wr_of(RKV_WR_SEND, &f.c, 0, 100, NULL, 0);
	post_expect(&f, &w, RKV_WC_REM_INV_REQ_ERR);
	ASSERT_TRUE(poll_one(f.s.cq, &wc, WAIT_MS));
	EXPECT_EQ(wc.status, RKV_WC_LOC_LEN_ERR);
	EXPECT_EQ(rkv_ep_state(f.s.ep), RKV_EP_ERROR);
	fix_close(&f);
}

static void t_refused_and_timeout(void)
{
	struct rkv_tp *tp;
	struct rkv_cq *cq;
	struct rkv_listener *l;
	struct rkv_ep *ep = NULL;
	char addr[300];
	uint64_t t0;

	ASSERT_EQ(open_tp(&tp), 0);
	ASSERT_EQ(rkv_cq_create(tp, 64, &cq), 0);
	snprintf(addr, sizeof(addr), "verbs://%s:0", g_ip);
	ASSERT_EQ(rkv_listen(tp, addr, &l), 0);
	EXPECT_TRUE(strstr(rkv_listener_addr(l), ":0") == NULL);
	t0 = rkv_now_ms();
	EXPECT_EQ(rkv_accept(l, cq, 200, &ep), -ETIMEDOUT);
	EXPECT_TRUE(rkv_now_ms() - t0 < 5000);
	/* The same port once nobody listens: refused, quickly. */
	snprintf(addr, sizeof(addr), "%s", rkv_listener_addr(l));
	rkv_listener_destroy(l);
	t0 = rkv_now_ms();
	EXPECT_EQ(rkv_connect(tp, addr, cq, WAIT_MS, &ep), -ECONNREFUSED);
	EXPECT_TRUE(rkv_now_ms() - t0 < 5000);
	/* A second listener on a busy port: EADDRINUSE. */
	snprintf(addr, sizeof(addr), "verbs://%s:0", g_ip);
	ASSERT_EQ(rkv_listen(tp, addr, &l), 0);
	{
		struct rkv_listener *l2 = NULL;
		enum rkv_log_level lvl = rkv_log_get_level();

		rkv_log_set_level(RKV_LOG_OFF);
		EXPECT_EQ(rkv_listen(tp, rkv_listener_addr(l), &l2), -EADDRINUSE);
		rkv_log_set_level(lvl);
		rkv_listener_destroy(l2);
	}
	rkv_listener_destroy(l);
	rkv_cq_destroy(cq);
	rkv_tp_destroy(tp);
}

/* The server endpoint goes away: the client notices (state, completions)
 * within its timeout, and destroying everything does not hang. */
static void t_peer_gone(void)
{
	struct fix f;
	struct rkv_wr w;
	struct rkv_wc wc;
	uint64_t t0, end;

	ASSERT_EQ(fix_open(&f), 0);
	rkv_ep_destroy(f.s.ep);
	f.s.ep = NULL;
	t0 = rkv_now_ms();
	end = t0 + WAIT_MS;
	while (rkv_ep_state(f.c.ep) != RKV_EP_ERROR && rkv_now_ms() < end)
		rkv_cq_poll(f.c.cq, &wc, 1);
	EXPECT_EQ(rkv_ep_state(f.c.ep), RKV_EP_ERROR);
	printf("# disconnect seen after %llu ms\n",
	       (unsigned long long)(rkv_now_ms() - t0));
	w = wr_of(RKV_WR_WRITE, &f.c, 0, 4096, &f.s, 0);
	EXPECT_EQ(rkv_post(f.c.ep, &w, NULL), 0);
	t0 = rkv_now_ms();
	EXPECT_TRUE(poll_one(f.c.cq, &wc, WAIT_MS));
	EXPECT_TRUE(wc.status != RKV_WC_SUCCESS);
	printf("# WRITE to a gone peer: %s after %llu ms\n",
	       rkv_wc_status_str(wc.status),
	       (unsigned long long)(rkv_now_ms() - t0));
	t0 = rkv_now_ms();
	fix_close(&f);
	EXPECT_TRUE(rkv_now_ms() - t0 < 5000);
}

/* Keeps the last error logged, for the skip reason. */
static void capture_sink(enum rkv_log_level level, const char *comp,
			 const char *func, int line, const char *msg, void *arg)
{
	(void)comp;
	(void)func;
	(void)line;
	if (level >= RKV_LOG_ERROR)
		snprintf(arg, 200, "%s", msg);
}

int main(int argc, char **argv)
{
	char why[200] = "no reason logged";
	struct rkv_tp_opts o;
	struct rkv_tp *tp = NULL;
	enum rkv_log_level lvl;
	int rc;

	rkv_test_init(argc, argv, 600);
	rkv_log_level_from_env();
	/* Forcing verbs without a device must be -ENODEV with a reason,
	 * never a crash; that is also how this test learns to skip. */
	lvl = rkv_log_get_level();
	rkv_log_set_level(RKV_LOG_ERROR);
	rkv_log_set_sink(capture_sink, why);
	rkv_tp_opts_init(&o);
	o.provider = RKV_TP_VERBS;
	rc = rkv_tp_create(&o, &tp);
	rkv_log_set_sink(NULL, NULL);
	rkv_log_set_level(lvl);
	if (rc == -ENODEV) {
		printf("1..0 # SKIP %s\n", why);
		return 77;
	}
	if (rc) {
		printf("not ok 1 - forcing verbs: %s (%s)\n", strerror(-rc), why);
		return 1;
	}
	rkv_tp_destroy(tp);
	g_ip = getenv("RKV_VERBS_IP");
	if (!g_ip || !*g_ip) {
		printf("1..0 # SKIP RKV_VERBS_IP not set (an address of the RDMA netdev)\n");
		return 77;
	}
	RKV_TEST(t_create_and_overrides);
	RKV_TEST(t_fabric_knobs);
	RKV_TEST(t_write_read_sizes);
	RKV_TEST(t_atomics);
	RKV_TEST(t_send_recv);
	RKV_TEST(t_chain);
	RKV_TEST(t_bad_rkey);
	RKV_TEST(t_bad_lkey);
	RKV_TEST(t_short_recv);
	RKV_TEST(t_refused_and_timeout);
	RKV_TEST(t_peer_gone);
	RKV_TEST(t_windows);
	return rkv_test_done();
}
