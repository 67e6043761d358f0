/* SPDX-License-Identifier: MIT */
/*
 * raw.c - the transport-level test client (see raw.h).  One registered
 * struct holds every buffer; completions are taken one at a time so a
 * later message stays queued for the next wait.
 */
#include "raw.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "rtime.h"

int test_raw_open(struct test_raw *r, const char *addr, unsigned nrecv)
{
	struct rkv_tp_opts o;
	struct rkv_tp_addr a;
	int rc;

	memset(r, 0, sizeof(*r));
	rkv_tp_addr_parse(addr, &a);
	rkv_tp_opts_init(&o);
	o.provider = a.provider;
	o.timeout_ms = 1000;
	rc = rkv_tp_create(&o, &r->tp);
	if (!rc)
		rc = rkv_cq_create(r->tp, 512, &r->cq);
	if (!rc)
		rc = rkv_mr_reg(r->tp, r, sizeof(*r), RKV_ACCESS_LOCAL_WRITE,
				&r->mr);
	if (!rc)
		rc = rkv_connect(r->tp, addr, r->cq, 3000, &r->ep);
	for (unsigned i = 0; !rc && i < nrecv && i < RAW_RECVS; i++) {
		struct rkv_recv_wr rw = { .wr_id = 100 + i,
					  .local = r->recv[i],
					  .length = RKV_MSG_MAX,
					  .lkey = r->mr->lkey };
		rc = rkv_post_recv(r->ep, &rw, NULL);
	}
	return rc;
}

void test_raw_close(struct test_raw *r)
{
	rkv_ep_destroy(r->ep);
	rkv_mr_dereg(r->mr);
	rkv_cq_destroy(r->cq);
	rkv_tp_destroy(r->tp);
	memset(r, 0, sizeof(*r));
}

int test_raw_send_bytes(struct test_raw *r, const void *b, size_t n)
{
	struct rkv_wr w = { .wr_id = 1, .opcode = RKV_WR_SEND,
			    .flags = RKV_WR_SIGNALED, .local = r->send,
			    .length = (uint32_t)n, .lkey = r->mr->lkey };

	memcpy(r->send, b, n);
	return rkv_post(r->ep, &w, NULL);
}

int test_raw_send(struct test_raw *r, struct rkv_msg *m)
{
	char wire[RKV_MSG_MAX];
	int n;

	m->hdr.req_id = ++r->req_id;
	n = rkv_msg_encode(m, wire, sizeof(wire));
	if (n < 0)
		return n;
	return test_raw_send_bytes(r, wire, (size_t)n);
}

/* Wait for the next received message: 0, -ECONNRESET, -ETIMEDOUT, or a
 * decode error. */
int test_raw_wait(struct test_raw *r, struct rkv_msg *out, int wait_ms)
{
	uint64_t end = rkv_now_ms() + (uint64_t)wait_ms;

	while (rkv_now_ms() < end) {
		struct rkv_wc wc[1];
		int k = rkv_cq_poll(r->cq, wc, 1); /* one: keep the rest */

		for (int i = 0; i < k; i++) {
			if (wc[i].status != RKV_WC_SUCCESS)
				return -ECONNRESET;
			if (wc[i].wr_id >= 100) {
				unsigned b = (unsigned)(wc[i].wr_id - 100);

				r->next_recv = b + 1;
				return rkv_msg_decode(r->recv[b],
						      wc[i].byte_len, out);
			}
		}
		if (rkv_ep_state(r->ep) == RKV_EP_ERROR)
			return -ECONNRESET;
		if (!k)
			usleep(200);
	}
	return -ETIMEDOUT;
}

int test_raw_call(struct test_raw *r, struct rkv_msg *m, struct rkv_msg *out)
{
	int rc = test_raw_send(r, m);

	return rc ? rc : test_raw_wait(r, out, 3000);
}

