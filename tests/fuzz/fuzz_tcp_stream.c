/* SPDX-License-Identifier: MIT */
/*
 * fuzz_tcp_stream.c - libFuzzer harness for the real receive path of the
 * tcp provider: the input is the byte stream one connection delivers.
 *
 * Per input: a socketpair; one end becomes a tcp endpoint (sw_ep_alloc on
 * a tcp context, as rkv_connect makes it), the harness holds the other.
 * The endpoint posts some WRs and RECVs (chosen by the first input byte) so
 * that responses, RNRs and SENDs have something to match; then the rest of
 * the input is written in chunks (sizes from the second byte) and the
 * endpoint is progressed by sw_ep_progress, the code rkv_cq_poll runs;
 * whatever it sends back is read and dropped.  Finally the harness closes
 * its end.
 *
 * Checks: no crash, no sanitizer report, no leak (LeakSanitizer after each
 * input); after EOF the endpoint is in the error state with its socket shut
 * down; every RECV and every signaled WR completed exactly once, on this
 * endpoint, with a known status.
 *
 * So that inputs stay valid across runs (rkeys are random per process), a
 * frame header whose key is FUZZ_RKEY gets the real rkey of the target
 * region, and an address whose high half is FUZZ_ADDR_HI gets the region's
 * base plus its low half.  The frames are found with sw_frame_check, as the
 * endpoint finds them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "sw.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #c);                                 \
			abort();                                               \
		}                                                              \
	} while (0)

#define FUZZ_RKEY 0x59454b52u    /* "RKEY" */
#define FUZZ_ADDR_HI 0xa5a5a5a5u
#define REGION_LEN (64u * 1024)  /* target region, remote access */
#define LOCAL_LEN (256u * 1024)  /* initiator buffers */
#define MAX_IDS 16

static struct rkv_tp *g_tp;
static struct sw_tp *g_sw;
static struct rkv_cq *g_cq;
static struct rkv_mr *g_rmr, *g_lmr;
static uint8_t *g_region, *g_local;
static bool g_trace; /* FUZZ_LOG set: log and trace to stderr */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct rkv_tp_opts o;

	(void)argc;
	(void)argv;
	g_trace = getenv("FUZZ_LOG") != NULL;
	rkv_log_set_level(g_trace ? RKV_LOG_DEBUG : RKV_LOG_OFF);
	rkv_tp_opts_init(&o);
	o.provider = RKV_TP_TCP;
	o.max_send_wr = 8;
	o.max_recv_wr = 8;
	o.timeout_ms = 600000; /* no timeouts: runs are deterministic */
	CHECK(rkv_tp_create(&o, &g_tp) == 0);
	g_sw = container_of(g_tp, struct sw_tp, base);
	CHECK(rkv_cq_create(g_tp, 64, &g_cq) == 0);
	/* Heap, not mmap: ASan redzones around both. */
	g_region = aligned_alloc(64, REGION_LEN);
	g_local = aligned_alloc(64, LOCAL_LEN);
	CHECK(g_region && g_local);
	CHECK(rkv_mr_reg(g_tp, g_region, REGION_LEN, RKV_ACCESS_ALL,
			 &g_rmr) == 0);
	CHECK(rkv_mr_reg(g_tp, g_local, LOCAL_LEN, RKV_ACCESS_LOCAL_WRITE,
			 &g_lmr) == 0);
	return 0;
}

struct expect {
	uint64_t id[MAX_IDS];
	uint8_t must[MAX_IDS]; /* RECV or signaled: exactly one completion */
	uint8_t got[MAX_IDS];
	uint32_t len[MAX_IDS]; /* RECV buffer length */
	unsigned n;
};

static void expect_add(struct expect *e, uint64_t id, bool must, uint32_t len)
{
	CHECK(e->n < MAX_IDS);
	e->id[e->n] = id;
	e->must[e->n] = must;
	e->len[e->n] = len;
	e->n++;
}

static void drain_cq(struct sw_ep *ep, struct expect *e)
{
	struct rkv_wc wc[16];
	int n;

	while ((n = rkv_cq_poll(g_cq, wc, 16)) > 0) {
		for (int i = 0; i < n; i++) {
			unsigned k;

			CHECK(wc[i].ep == &ep->base);
			CHECK((unsigned)wc[i].status <= RKV_WC_GENERAL_ERR);
			for (k = 0; k < e->n; k++)
				if (e->id[k] == wc[i].wr_id)
					break;
			CHECK(k < e->n);
			CHECK(e->got[k] == 0);
			e->got[k] = 1;
			if (g_trace)
				fprintf(stderr,
					"fuzz: completion wr_id %llu status %s len %u\n",
					(unsigned long long)wc[i].wr_id,
					rkv_wc_status_str(wc[i].status),
					wc[i].byte_len);
			if (wc[i].opcode == RKV_WR_RECV &&
			    wc[i].status == RKV_WC_SUCCESS)
				CHECK(wc[i].byte_len <= e->len[k]);
		}
	}
	CHECK(n == 0);
}

/* FUZZ_LOG set: what the endpoint sent back, frame by frame, to stderr. */
static uint8_t g_back[1 << 20];
static size_t g_nback;

static void drain_peer(int fd)
{
	static uint8_t sink[64 * 1024];
	ssize_t n;

	while ((n = read(fd, sink, sizeof(sink))) > 0) {
		if (g_trace && g_nback + (size_t)n <= sizeof(g_back)) {
			memcpy(g_back + g_nback, sink, (size_t)n);
			g_nback += (size_t)n;
		}
	}
}

static void trace_back(void)
{
	size_t off = 0;
	struct sw_hdr h;

	while (sw_frame_check(g_back + off, g_nback - off, &h) == 0) {
		fprintf(stderr,
			"fuzz: sent type %u len %u key %u seq %llu arg0 %llu\n",
			h.type, h.len, h.key, (unsigned long long)h.seq,
			(unsigned long long)h.arg0);
		off += SW_HDR_LEN;
		if (h.len > g_nback - off)
			break;
		off += h.len;
	}
	g_nback = 0;
}

/* Give placeholders their real values, frame by frame. */
static void patch(uint8_t *in, size_t size)
{
	size_t off = 0;

	for (;;) {
		struct sw_hdr h;
		int rc = sw_frame_check(in + off, size - off, &h);

		if (rc == -EAGAIN || rc == -EPROTO)
			return;
		if (h.key == FUZZ_RKEY)
			h.key = g_rmr->rkey;
		if ((uint32_t)(h.addr >> 32) == FUZZ_ADDR_HI)
			h.addr = (uint64_t)(uintptr_t)g_region +
				 (uint32_t)h.addr;
		sw_hdr_encode(&h, in + off);
		if (rc)
			return;
		off += SW_HDR_LEN;
		if (h.len > size - off)
			return;
		off += h.len;
	}
}

static void post_setup(struct sw_ep *ep, uint8_t cfg, struct expect *e)
{
	static const uint32_t rlen[] = { 64, 4096, 40000 };
	unsigned nrecv = cfg & 3;
	struct rkv_wr wr;

	for (unsigned i = 0; i < nrecv; i++) {
		struct rkv_recv_wr r = { .wr_id = 100 + i,
					 .local = g_local + i * 65536u,
					 .length = rlen[i],
					 .lkey = g_lmr->lkey };

		CHECK(rkv_post_recv(&ep->base, &r, NULL) == 0);
		expect_add(e, r.wr_id, true, r.length);
	}
	if (cfg & 4) { /* READ: small, or big enough for the direct path */
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 200;
		wr.opcode = RKV_WR_READ;
		wr.flags = RKV_WR_SIGNALED;
		wr.local = g_local + 196608;
		wr.length = (cfg & 0x40) ? 40000 : 64;
		wr.lkey = g_lmr->lkey;
		wr.remote_addr = 0x1000;
		wr.rkey = 7;
		CHECK(rkv_post(&ep->base, &wr, NULL) == 0);
		expect_add(e, wr.wr_id, true, 0);
	}
	if (cfg & 8) { /* SEND */
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 201;
		wr.opcode = RKV_WR_SEND;
		wr.flags = RKV_WR_SIGNALED;
		wr.local = g_local + 250000;
		wr.length = 16;
		wr.lkey = g_lmr->lkey;
		CHECK(rkv_post(&ep->base, &wr, NULL) == 0);
		expect_add(e, wr.wr_id, true, 0);
	}
	if (cfg & 0x10) { /* CAS, signaled or not */
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 202;
		wr.opcode = RKV_WR_CAS;
		wr.flags = (cfg & 0x80) ? RKV_WR_SIGNALED : 0;
		wr.local = g_local + 250048;
		wr.length = 8;
		wr.lkey = g_lmr->lkey;
		wr.remote_addr = 0x2000;
		wr.rkey = 7;
		CHECK(rkv_post(&ep->base, &wr, NULL) == 0);
		expect_add(e, wr.wr_id, wr.flags != 0, 0);
	}
	if (cfg & 0x20) { /* WRITE, unsignaled */
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 203;
		wr.opcode = RKV_WR_WRITE;
		wr.local = g_local + 250112;
		wr.length = 64;
		wr.lkey = g_lmr->lkey;
		wr.remote_addr = 0x3000;
		wr.rkey = 7;
		CHECK(rkv_post(&ep->base, &wr, NULL) == 0);
		expect_add(e, wr.wr_id, false, 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct expect e = { .n = 0 };
	struct sw_ep *ep;
	uint8_t cfg, *in = NULL;
	uint32_t rng, lim;
	size_t pos = 0;
	int sv[2];

	if (size < 2)
		return 0;
	cfg = data[0];
	/* chunk sizes: tiny (headers split across reads) or up to 8 KiB */
	lim = (data[1] & 1) ? 61 : 8192;
	rng = data[1] * 2654435761u + 1;
	data += 2;
	size -= 2;
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
			 sv) == 0);
	CHECK(sw_ep_alloc(g_sw, container_of(g_cq, struct sw_cq, base), sv[0],
			  false, "fuzz", &ep) == 0);
	memset(g_region, 0x5a, REGION_LEN);
	post_setup(ep, cfg, &e);
	in = malloc(size ? size : 1);
	CHECK(in);
	memcpy(in, data, size);
	patch(in, size);

	while (pos < size && !ep->closed) {
		size_t chunk;
		ssize_t n;

		rng = rng * 1103515245u + 12345u;
		chunk = 1 + (rng >> 8) % lim;
		if (chunk > size - pos)
			chunk = size - pos;
		n = write(sv[1], in + pos, chunk);
		if (n > 0)
			pos += (size_t)n;
		sw_ep_progress(ep, 0);
		drain_peer(sv[1]);
		drain_cq(ep, &e);
		if (n <= 0 && ep->tx_len == 0 && ep->rx_len == 0 &&
		    ep->base.state == RKV_EP_CONNECTED)
			break; /* the endpoint stopped reading: give up */
	}
	shutdown(sv[1], SHUT_WR);
	for (int i = 0; i < 64 && !ep->closed; i++) {
		sw_ep_progress(ep, 0);
		drain_peer(sv[1]);
	}
	drain_cq(ep, &e);
	/* The peer went away: the endpoint must be dropped, cleanly. */
	CHECK(ep->closed);
	CHECK(ep->base.state == RKV_EP_ERROR);
	CHECK(ep->cur.kind == SW_RX_NONE);
	CHECK(!ep->ux_head && !ep->ux_bytes && !ep->ux_count);
	for (unsigned k = 0; k < e.n; k++)
		CHECK(!e.must[k] || e.got[k]);
	if (g_trace)
		trace_back();
	sw_ep_free(ep);
	close(sv[1]);
	free(in);
	return 0;
}
