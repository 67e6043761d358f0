/* SPDX-License-Identifier: MIT */
/*
 * test_proto.c - unit tests for proto/: slot word packing, block encoding
 * and checking (torn, foreign and truncated blocks), key hashing, jump-hash
 * routing, and control message round trips and rejections.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "msg.h"
#include "test.h"

static void t_slot(void)
{
	uint64_t off = (1ull << 34) - 1, s;

	s = rkv_slot_make(off, 4095, 0xab, 255);
	EXPECT_EQ_U64(rkv_slot_offset(s), off * 64);
	EXPECT_EQ(rkv_slot_size(s), 4095 * 64);
	EXPECT_EQ(rkv_slot_fp(s), 0xab);
	EXPECT_EQ(rkv_slot_version(s), 255);
	EXPECT_TRUE(!rkv_slot_locked(s));
	EXPECT_TRUE(!rkv_slot_tentative(s));
	EXPECT_TRUE(rkv_slot_locked(s | RKV_SLOT_LOCK));
	EXPECT_TRUE(rkv_slot_tentative(s | RKV_SLOT_TENT));
	EXPECT_TRUE(!rkv_slot_locked(s | RKV_SLOT_TENT));
	EXPECT_TRUE(rkv_slot_same_block(s, s | RKV_SLOT_TENT));
	EXPECT_EQ(rkv_slot_version(s | RKV_SLOT_TENT | RKV_SLOT_LOCK), 255);
	/* version wraps and stays out of the other fields */
	uint64_t b = rkv_slot_bump(s | RKV_SLOT_LOCK);

	EXPECT_EQ(rkv_slot_version(b), 0);
	EXPECT_TRUE(!rkv_slot_locked(b));
	EXPECT_TRUE(rkv_slot_same_block(s, b));
	EXPECT_TRUE(rkv_slot_same_block(s, s | RKV_SLOT_LOCK));
	EXPECT_TRUE(b != s);
	s = rkv_slot_make(1, 1, 0, 0);
	EXPECT_TRUE(!rkv_slot_empty(s));
	EXPECT_TRUE(!rkv_slot_same_block(s, rkv_slot_make(2, 1, 0, 0)));
}

static void t_block(void)
{
	char key[] = "user:42";
	char val[300];
	char buf[1024];
	const void *v;
	uint32_t vl;
	const struct rkv_block_hdr *h;

	for (size_t i = 0; i < sizeof(val); i++)
		val[i] = (char)i;
	uint32_t n = rkv_block_encode(buf, key, 7, val, sizeof(val), 9, 5, 77);

	EXPECT_EQ(n, 384); /* 32 + 7 + 300 = 339 -> 384 */
	EXPECT_EQ(n, rkv_block_size(7, 300));
	ASSERT_EQ(rkv_block_decode(buf, n, key, 7, &v, &vl, &h), 0);
	EXPECT_EQ(vl, 300);
	EXPECT_TRUE(memcmp(v, val, 300) == 0);
	EXPECT_EQ(h->writer, 9);
	EXPECT_EQ(h->version, 77);
	/* another key */
	EXPECT_EQ(rkv_block_decode(buf, n, "user:43", 7, &v, &vl, NULL),
		  -ESTALE);
	EXPECT_EQ(rkv_block_decode(buf, n, "user:4", 6, &v, &vl, NULL),
		  -ESTALE);
	/* torn: any flipped byte in the used part is caught */
	for (size_t i = 0; i < 339; i += 13) {
		buf[i] ^= 0x40;
		EXPECT_EQ(rkv_block_decode(buf, n, key, 7, &v, &vl, NULL),
			  -EBADMSG);
		buf[i] ^= 0x40;
	}
	/* truncated read */
	EXPECT_EQ(rkv_block_decode(buf, 200, key, 7, &v, &vl, NULL), -EBADMSG);
	EXPECT_EQ(rkv_block_decode(buf, 16, key, 7, &v, &vl, NULL), -EBADMSG);
	/* zeroed (never written) memory */
	memset(buf, 0, sizeof(buf));
	EXPECT_EQ(rkv_block_decode(buf, n, key, 7, &v, &vl, NULL), -EBADMSG);
	/* limits */
	EXPECT_EQ(rkv_block_size(RKV_MAX_KEY, RKV_MAX_VALUE) <= RKV_MAX_BLOCK,
		  1);
	EXPECT_EQ(rkv_block_size(RKV_MAX_KEY + 1, 0), 0);
	EXPECT_EQ(rkv_block_size(1, RKV_MAX_VALUE + 1), 0);
	EXPECT_EQ(rkv_block_encode(buf, key, 0, val, 1, 0, 0, 0), 0);
	/* empty value */
	n = rkv_block_encode(buf, key, 7, NULL, 0, 1, 1, 1);
	EXPECT_EQ(n, 64);
	EXPECT_EQ(rkv_block_decode(buf, n, key, 7, &v, &vl, NULL), 0);
	EXPECT_EQ(vl, 0);
}

static void t_hashing(void)
{
	struct rkv_key_hash kh;
	uint64_t b1, b2;
	char k[32];
	unsigned hits[2][64] = { { 0 } };

	for (int i = 0; i < 20000; i++) {
		int n = snprintf(k, sizeof(k), "key%d", i);

		rkv_key_hash(k, (size_t)n, &kh);
		rkv_key_buckets(&kh, 64, &b1, &b2);
		EXPECT_TRUE(b1 != b2);
		EXPECT_TRUE(b1 < 64 && b2 < 64);
		EXPECT_EQ(kh.fp, kh.h1 >> 56);
		hits[0][b1]++;
		hits[1][b2]++;
	}
	/* both hash functions spread keys: every bucket within 30% of mean */
	for (int i = 0; i < 64; i++) {
		EXPECT_TRUE(hits[0][i] > 312 * 7 / 10 && hits[0][i] < 312 * 13 / 10);
		EXPECT_TRUE(hits[1][i] > 312 * 7 / 10 && hits[1][i] < 312 * 13 / 10);
	}
	/* two buckets: must still differ */
	rkv_key_hash("x", 1, &kh);
	rkv_key_buckets(&kh, 2, &b1, &b2);
	EXPECT_TRUE(b1 != b2);
}

static void t_jump_hash(void)
{
	unsigned cnt[5] = { 0 };
	unsigned moved = 0;
	const unsigned n = 50000;

	for (unsigned i = 0; i < n; i++) {
		struct rkv_key_hash kh;
		char k[32];
		int len = snprintf(k, sizeof(k), "k%u", i);

		rkv_key_hash(k, (size_t)len, &kh);
		uint32_t a = rkv_jump_hash(kh.route, 4);
		uint32_t b = rkv_jump_hash(kh.route, 5);

		EXPECT_TRUE(a < 4 && b < 5);
		cnt[b]++;
		if (a != b) {
			moved++;
			EXPECT_EQ(b, 4); /* keys only move to the new server */
		}
	}
	/* about 1/5 of keys move when a fifth server joins */
	EXPECT_TRUE(moved > n / 5 * 9 / 10 && moved < n / 5 * 11 / 10);
	for (int i = 0; i < 5; i++)
		EXPECT_TRUE(cnt[i] > n / 5 * 9 / 10 && cnt[i] < n / 5 * 11 / 10);
	EXPECT_EQ(rkv_jump_hash(12345, 1), 0);
}

static int roundtrip(struct rkv_msg *m, struct rkv_msg *out)
{
	unsigned char buf[RKV_MSG_MAX];
	int n = rkv_msg_encode(m, buf, sizeof(buf));

	if (n < 0)
		return n;
	return rkv_msg_decode(buf, (size_t)n, out);
}

static void t_msg_roundtrip(void)
{
	struct rkv_msg m, d;

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_HELLO;
	m.hdr.req_id = 7;
	m.u.hello.flags = RKV_HELLO_READ_ONLY;
	strcpy(m.u.hello.name, "worker-1");
	ASSERT_EQ(roundtrip(&m, &d), 0);
	EXPECT_EQ(d.hdr.type, RKV_MSG_HELLO);
	EXPECT_EQ(d.hdr.req_id, 7);
	EXPECT_EQ(d.u.hello.flags, RKV_HELLO_READ_ONLY);
	EXPECT_STREQ(d.u.hello.name, "worker-1");

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_HELLO_REPLY;
	m.u.hello_reply.status = -EPROTO;
	m.u.hello_reply.client_id = 3;
	m.u.hello_reply.index_addr = 0x7f0000001000ull;
	m.u.hello_reply.index_rkey = 0xdeadbeef;
	m.u.hello_reply.nbuckets = 1u << 20;
	m.u.hello_reply.data_addr = 0x7f1000000000ull;
	m.u.hello_reply.data_len = 1ull << 32;
	m.u.hello_reply.lease_ms = 50;
	m.u.hello_reply.grace_ms = 1000;
	m.u.hello_reply.counters_addr = 0x7f2000000000ull;
	m.u.hello_reply.counters_rkey = 0x1234;
	m.u.hello_reply.counters_count = 4096;
	ASSERT_EQ(roundtrip(&m, &d), 0);
	EXPECT_EQ_U64(d.u.hello_reply.counters_addr, 0x7f2000000000ull);
	EXPECT_EQ(d.u.hello_reply.counters_rkey, 0x1234);
	EXPECT_EQ(d.u.hello_reply.counters_count, 4096);
	EXPECT_TRUE(memcmp(&m.u.hello_reply, &d.u.hello_reply,
			   sizeof(m.u.hello_reply)) == 0);

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_BLOCK_RETURN;
	m.u.block_return.count = RKV_BLOCK_RETURN_MAX;
	for (int i = 0; i < RKV_BLOCK_RETURN_MAX; i++) {
		m.u.block_return.ext[i].offset = (uint64_t)i * 64;
		m.u.block_return.ext[i].len = 64;
	}
	ASSERT_EQ(roundtrip(&m, &d), 0);
	EXPECT_EQ(d.u.block_return.count, RKV_BLOCK_RETURN_MAX);
	EXPECT_EQ_U64(d.u.block_return.ext[249].offset, 249 * 64);
	m.u.block_return.count = RKV_BLOCK_RETURN_MAX + 1;
	unsigned char buf[RKV_MSG_MAX];

	EXPECT_EQ(rkv_msg_encode(&m, buf, sizeof(buf)), -EINVAL);

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_STATS_REPLY;
	m.u.stats_reply.keys = 99;
	m.u.stats_reply.ctrl_msgs = 1000;
	ASSERT_EQ(roundtrip(&m, &d), 0);
	EXPECT_EQ(d.u.stats_reply.keys, 99);
	EXPECT_EQ(d.u.stats_reply.ctrl_msgs, 1000);

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_ERROR;
	m.u.error.status = -ENOSPC;
	memset(m.u.error.text, 'x', sizeof(m.u.error.text)); /* unterminated */
	ASSERT_EQ(roundtrip(&m, &d), 0); /* encoder terminates it */
	EXPECT_EQ(strlen(d.u.error.text), RKV_ERROR_TEXT_MAX - 1);

	m.hdr.type = 200;
	EXPECT_EQ(rkv_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.hdr.type = RKV_MSG_STATS;
	EXPECT_EQ(rkv_msg_encode(&m, buf, 8), -ENOSPC);
}

/* COUNTER_OPEN / COUNTER_REPLY, and the counter fields appended to
 * HELLO_REPLY: round trips, exact sizes, and what the decoder refuses. */
static void t_msg_counter(void)
{
	struct rkv_msg m, d;
	unsigned char buf[RKV_MSG_MAX];
	int n;

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_COUNTER_OPEN;
	m.hdr.req_id = 11;
	strcpy(m.u.counter_open.name, "barrier/train/1");
	ASSERT_EQ(roundtrip(&m, &d), 0);
	EXPECT_EQ(d.hdr.type, RKV_MSG_COUNTER_OPEN);
	EXPECT_EQ(d.hdr.req_id, 11);
	EXPECT_STREQ(d.u.counter_open.name, "barrier/train/1");
	EXPECT_STREQ(rkv_msg_type_str(RKV_MSG_COUNTER_OPEN), "COUNTER_OPEN");
	n = rkv_msg_encode(&m, buf, sizeof(buf));
	EXPECT_EQ(n, RKV_MSG_HDR_SIZE + RKV_COUNTER_NAME_MAX);
	/* an unterminated name: the encoder terminates it ... */
	memset(m.u.counter_open.name, 'n', sizeof(m.u.counter_open.name));
	ASSERT_EQ(roundtrip(&m, &d), 0);
	EXPECT_EQ(strlen(d.u.counter_open.name), RKV_COUNTER_NAME_MAX - 1);
	/* ... and the decoder refuses one from the wire */
	n = rkv_msg_encode(&m, buf, sizeof(buf));
	ASSERT_TRUE(n > 0);
	buf[n - 1] = 'n';
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n, &d), -EBADMSG);
	for (int i = 0; i < n; i++)
		EXPECT_EQ(rkv_msg_decode(buf, (size_t)i, &d), -EBADMSG);

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_COUNTER_REPLY;
	m.u.counter_reply.status = -ENOSPC;
	m.u.counter_reply.index = 4095;
	ASSERT_EQ(roundtrip(&m, &d), 0);
	EXPECT_EQ(d.u.counter_reply.status, -ENOSPC);
	EXPECT_EQ(d.u.counter_reply.index, 4095);
	n = rkv_msg_encode(&m, buf, sizeof(buf));
	EXPECT_EQ(n, RKV_MSG_HDR_SIZE + 8);
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n + 1, &d), -EBADMSG);
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n - 1, &d), -EBADMSG);

	/* HELLO_REPLY is 80 bytes of body now; the old 64-byte form (no
	 * counter fields) is refused, not half-read */
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_HELLO_REPLY;
	m.u.hello_reply.counters_count = 7;
	n = rkv_msg_encode(&m, buf, sizeof(buf));
	EXPECT_EQ(n, RKV_MSG_HDR_SIZE + 80);
	uint32_t old_len = RKV_MSG_HDR_SIZE + 64;

	memcpy(buf + 8, &old_len, 4);
	EXPECT_EQ(rkv_msg_decode(buf, old_len, &d), -EBADMSG);
}

/* RKEY_UPDATE / RKEY_ACK (rotation): round trips, wire layout, exact
 * sizes. */
static void t_msg_rkey(void)
{
	struct rkv_msg m, d;
	unsigned char buf[RKV_MSG_MAX];
	int n;

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_RKEY_UPDATE;
	m.u.rkey_update.epoch = 3;
	m.u.rkey_update.index_rkey = 0x01020304;
	m.u.rkey_update.data_rkey = 0x0a0b0c0d;
	m.u.rkey_update.counters_rkey = 0;
	ASSERT_EQ(roundtrip(&m, &d), 0);
	EXPECT_EQ(d.hdr.type, RKV_MSG_RKEY_UPDATE);
	EXPECT_EQ(d.hdr.req_id, 0);
	EXPECT_EQ(d.u.rkey_update.epoch, 3);
	EXPECT_EQ_U64(d.u.rkey_update.index_rkey, 0x01020304);
	EXPECT_EQ_U64(d.u.rkey_update.data_rkey, 0x0a0b0c0d);
	EXPECT_EQ(d.u.rkey_update.counters_rkey, 0);
	EXPECT_STREQ(rkv_msg_type_str(RKV_MSG_RKEY_UPDATE), "RKEY_UPDATE");
	n = rkv_msg_encode(&m, buf, sizeof(buf));
	EXPECT_EQ(n, RKV_MSG_HDR_SIZE + 16);
	EXPECT_EQ(buf[16], 3);    /* epoch first, little-endian */
	EXPECT_EQ(buf[20], 0x04); /* then the index rkey */
	EXPECT_EQ(buf[24], 0x0d); /* then the data rkey */
	for (int i = 0; i < n; i++)
		EXPECT_EQ(rkv_msg_decode(buf, (size_t)i, &d), -EBADMSG);
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n + 1, &d), -EBADMSG);

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_RKEY_ACK;
	m.u.rkey_ack.epoch = 0xfffffffe;
	ASSERT_EQ(roundtrip(&m, &d), 0);
	EXPECT_EQ_U64(d.u.rkey_ack.epoch, 0xfffffffe);
	EXPECT_STREQ(rkv_msg_type_str(RKV_MSG_RKEY_ACK), "RKEY_ACK");
	n = rkv_msg_encode(&m, buf, sizeof(buf));
	EXPECT_EQ(n, RKV_MSG_HDR_SIZE + 4);
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n + 4, &d), -EBADMSG);
	EXPECT_EQ(rkv_msg_encode(&m, buf, RKV_MSG_HDR_SIZE + 3), -ENOSPC);
}

/* AUTH_CHALLENGE / AUTH_RESPONSE and the auth_failures counter appended
 * to STATS_REPLY: round trips, exact sizes, rejections. */
static void t_msg_auth(void)
{
	struct rkv_msg m, d;
	unsigned char buf[RKV_MSG_MAX];
	int n;

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_AUTH_CHALLENGE;
	m.hdr.req_id = 5;
	m.u.auth_challenge.alg = RKV_AUTH_HMAC_SHA256;
	m.u.auth_challenge.server_id = 0xfeedf00d;
	for (int i = 0; i < RKV_AUTH_NONCE_LEN; i++)
		m.u.auth_challenge.nonce[i] = (uint8_t)(i * 7 + 1);
	ASSERT_EQ(roundtrip(&m, &d), 0);
	EXPECT_EQ(d.hdr.type, RKV_MSG_AUTH_CHALLENGE);
	EXPECT_EQ(d.hdr.req_id, 5);
	EXPECT_EQ(d.u.auth_challenge.alg, RKV_AUTH_HMAC_SHA256);
	EXPECT_EQ_U64(d.u.auth_challenge.server_id, 0xfeedf00d);
	EXPECT_TRUE(memcmp(d.u.auth_challenge.nonce, m.u.auth_challenge.nonce,
			   RKV_AUTH_NONCE_LEN) == 0);
	EXPECT_STREQ(rkv_msg_type_str(RKV_MSG_AUTH_CHALLENGE),
		     "AUTH_CHALLENGE");
	n = rkv_msg_encode(&m, buf, sizeof(buf));
	EXPECT_EQ(n, RKV_MSG_HDR_SIZE + 8 + RKV_AUTH_NONCE_LEN);
	/* wire layout: alg, server id, then the nonce */
	EXPECT_EQ(buf[16], RKV_AUTH_HMAC_SHA256);
	EXPECT_EQ(buf[20], 0x0d);
	EXPECT_EQ(buf[24], 1);
	for (int i = 0; i < n; i++)
		EXPECT_EQ(rkv_msg_decode(buf, (size_t)i, &d), -EBADMSG);
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n + 1, &d), -EBADMSG);

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_AUTH_RESPONSE;
	m.hdr.req_id = 6;
	memset(m.u.auth_response.mac, 0xa5, RKV_AUTH_MAC_LEN);
	m.u.auth_response.mac[31] = 0;
	ASSERT_EQ(roundtrip(&m, &d), 0);
	EXPECT_EQ(d.hdr.type, RKV_MSG_AUTH_RESPONSE);
	EXPECT_TRUE(memcmp(d.u.auth_response.mac, m.u.auth_response.mac,
			   RKV_AUTH_MAC_LEN) == 0);
	EXPECT_STREQ(rkv_msg_type_str(RKV_MSG_AUTH_RESPONSE), "AUTH_RESPONSE");
	n = rkv_msg_encode(&m, buf, sizeof(buf));
	EXPECT_EQ(n, RKV_MSG_HDR_SIZE + RKV_AUTH_MAC_LEN);
	for (int i = 0; i < n; i++)
		EXPECT_EQ(rkv_msg_decode(buf, (size_t)i, &d), -EBADMSG);
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n + 1, &d), -EBADMSG);
	/* a response length in the header that disagrees with the bytes */
	uint32_t bad = (uint32_t)n - 1;

	memcpy(buf + 8, &bad, 4);
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n, &d), -EBADMSG);
	EXPECT_EQ(rkv_msg_encode(&m, buf, RKV_MSG_HDR_SIZE + 31), -ENOSPC);

	/* STATS_REPLY carries auth_failures last */
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_STATS_REPLY;
	m.u.stats_reply.ctrl_msgs = 3;
	m.u.stats_reply.auth_failures = 42;
	n = rkv_msg_encode(&m, buf, sizeof(buf));
	EXPECT_EQ(n, RKV_MSG_HDR_SIZE + 14 * 8);
	EXPECT_EQ(buf[n - 8], 42);
	ASSERT_EQ(rkv_msg_decode(buf, (size_t)n, &d), 0);
	EXPECT_EQ(d.u.stats_reply.auth_failures, 42);
	EXPECT_EQ(d.u.stats_reply.ctrl_msgs, 3);
	/* the 13-counter form is refused, not half-read */
	uint32_t old_len = RKV_MSG_HDR_SIZE + 13 * 8;

	memcpy(buf + 8, &old_len, 4);
	EXPECT_EQ(rkv_msg_decode(buf, old_len, &d), -EBADMSG);
}

static void t_msg_reject(void)
{
	struct rkv_msg m, d;
	unsigned char buf[RKV_MSG_MAX];
	int n;

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_CHUNK_GRANT;
	m.u.chunk_grant.offset = 4096;
	n = rkv_msg_encode(&m, buf, sizeof(buf));
	ASSERT_TRUE(n > 0);
	/* every truncation is rejected */
	for (int i = 0; i < n; i++)
		EXPECT_EQ(rkv_msg_decode(buf, (size_t)i, &d), -EBADMSG);
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n, &d), 0);
	/* trailing bytes */
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n + 4, &d), -EBADMSG);
	/* bad magic */
	buf[0] ^= 1;
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n, &d), -EBADMSG);
	buf[0] ^= 1;
	/* another protocol version */
	buf[4] = RKV_PROTO_VERSION + 1;
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n, &d), -EPROTO);
	EXPECT_EQ(d.hdr.version, RKV_PROTO_VERSION + 1);
	buf[4] = 1;
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n, &d), -EPROTO);
	buf[4] = RKV_PROTO_VERSION;
	/* unknown type */
	buf[6] = 99;
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n, &d), -EOPNOTSUPP);
	buf[6] = RKV_MSG_CHUNK_GRANT;
	/* a block return whose count claims more than was sent */
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_BLOCK_RETURN;
	m.u.block_return.count = 2;
	n = rkv_msg_encode(&m, buf, sizeof(buf));
	buf[16] = 3; /* count field */
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n, &d), -EBADMSG);
	buf[16] = 0xff;
	buf[17] = 0xff;
	EXPECT_EQ(rkv_msg_decode(buf, (size_t)n, &d), -EBADMSG);
	/* random garbage never crashes and is almost always rejected */
	srand(1);
	for (int it = 0; it < 20000; it++) {
		size_t len = (size_t)(rand() % 300);

		for (size_t i = 0; i < len; i++)
			buf[i] = (unsigned char)rand();
		if (it & 1 && len >= 16) { /* plausible header */
			uint32_t magic = RKV_PROTO_MAGIC, l = (uint32_t)len;

			memcpy(buf, &magic, 4);
			buf[4] = 1;
			buf[5] = 0;
			memcpy(buf + 8, &l, 4);
		}
		(void)rkv_msg_decode(buf, len, &d);
	}
}

int main(int argc, char **argv)
{
	rkv_test_init(argc, argv, 60);
	RKV_TEST(t_slot);
	RKV_TEST(t_block);
	RKV_TEST(t_hashing);
	RKV_TEST(t_jump_hash);
	RKV_TEST(t_msg_roundtrip);
	RKV_TEST(t_msg_reject);
	RKV_TEST(t_msg_counter);
	RKV_TEST(t_msg_auth);
	RKV_TEST(t_msg_rkey);
	return rkv_test_done();
}
