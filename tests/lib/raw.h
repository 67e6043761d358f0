/* SPDX-License-Identifier: MIT */
/*
 * raw.h - a transport-level test client: speaks raw control messages (or
 * raw bytes) and one-sided operations to an rkv-server, so tests can send
 * what librkv never would (garbage, replays, other protocol versions,
 * writes with read-only rkeys).
 */
#ifndef RKV_TESTS_LIB_RAW_H
#define RKV_TESTS_LIB_RAW_H

#include <stddef.h>
#include <stdint.h>

#include "msg.h"
#include "transport.h"

#define RAW_RECVS 8

/* A transport-level client speaking raw control messages and one-sided
 * operations. */
struct test_raw {
	struct rkv_tp *tp;
	struct rkv_cq *cq;
	struct rkv_ep *ep;
	struct rkv_mr *mr;
	unsigned next_recv;       /* next RECV buffer to complete */
	uint32_t req_id;
	char send[RKV_MSG_MAX];
	char recv[RAW_RECVS][RKV_MSG_MAX];
	char data[8192];          /* READ destination / WRITE source */
	uint64_t word;            /* CAS / FETCH_ADD result */
};

/* Connect to addr and post nrecv (<= RAW_RECVS) RECVs.  Returns 0 or
 * -errno; test_raw_close() also cleans up after a failed open. */
int test_raw_open(struct test_raw *r, const char *addr, unsigned nrecv);
void test_raw_close(struct test_raw *r);
/* SEND n bytes as they are (n <= RKV_MSG_MAX). */
int test_raw_send_bytes(struct test_raw *r, const void *b, size_t n);
/* Encode m with the next req_id and SEND it. */
int test_raw_send(struct test_raw *r, struct rkv_msg *m);
/* Wait for the next received message and decode it: 0, -ECONNRESET (the
 * connection failed), -ETIMEDOUT, or the decoder's -errno. */
int test_raw_wait(struct test_raw *r, struct rkv_msg *out, int wait_ms);
/* test_raw_send, then test_raw_wait up to 3 s. */
int test_raw_call(struct test_raw *r, struct rkv_msg *m, struct rkv_msg *out);

#endif
