/* SPDX-License-Identifier: MIT */
/*
 * fuzz_msg.c - libFuzzer harness for the control-message codec
 * (proto/msg.c).
 *
 * Decode: arbitrary bytes go to rkv_msg_decode, which must never read past
 * them; a message it accepts must satisfy what the decoder promises (exact
 * length, known type, bounded count, terminated strings), re-encode with
 * rkv_msg_encode to the same bytes (the last byte of ERROR's text and
 * COUNTER_OPEN's name excepted: the encoder forces them to NUL) and decode
 * again to the same struct.
 *
 * Encode: the same bytes, read as a struct rkv_msg, go to rkv_msg_encode
 * with a capacity taken from the input; it must stay within the capacity,
 * reject counts over their limit, and what it writes must decode.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #c);                                 \
			abort();                                               \
		}                                                              \
	} while (0)

/* The bytes the encoder normalises: offset of the last text byte. */
static size_t forced_nul(const struct rkv_msg *m)
{
	if (m->hdr.type == RKV_MSG_ERROR)
		return RKV_MSG_HDR_SIZE + 4 + RKV_ERROR_TEXT_MAX - 1;
	if (m->hdr.type == RKV_MSG_COUNTER_OPEN)
		return RKV_MSG_HDR_SIZE + RKV_COUNTER_NAME_MAX - 1;
	return 0;
}

static void normalise(struct rkv_msg *m)
{
	if (m->hdr.type == RKV_MSG_ERROR)
		m->u.error.text[RKV_ERROR_TEXT_MAX - 1] = '\0';
	if (m->hdr.type == RKV_MSG_COUNTER_OPEN)
		m->u.counter_open.name[RKV_COUNTER_NAME_MAX - 1] = '\0';
}

static void check_decoded(const struct rkv_msg *m, size_t n)
{
	CHECK(m->hdr.magic == RKV_PROTO_MAGIC);
	CHECK(m->hdr.version == RKV_PROTO_VERSION);
	CHECK(m->hdr.len == n);
	CHECK(n >= RKV_MSG_HDR_SIZE && n <= RKV_MSG_MAX);
	CHECK(strcmp(rkv_msg_type_str(m->hdr.type), "UNKNOWN") != 0);
	switch (m->hdr.type) {
	case RKV_MSG_HELLO:
		CHECK(memchr(m->u.hello.name, 0, RKV_NAME_MAX));
		break;
	case RKV_MSG_HELLO_REPLY:
		CHECK(memchr(m->u.hello_reply.server_name, 0,
			     RKV_SERVER_NAME_MAX));
		break;
	case RKV_MSG_BLOCK_RETURN:
		CHECK(m->u.block_return.count <= RKV_BLOCK_RETURN_MAX);
		CHECK(n == RKV_MSG_HDR_SIZE + 4 +
		      RKV_EXTENT_WIRE_SIZE * m->u.block_return.count);
		break;
	case RKV_MSG_ERROR:
		CHECK(memchr(m->u.error.text, 0, RKV_ERROR_TEXT_MAX));
		break;
	case RKV_MSG_COUNTER_OPEN:
		CHECK(memchr(m->u.counter_open.name, 0, RKV_COUNTER_NAME_MAX));
		break;
	default:
		break;
	}
}

static void fuzz_decode(const uint8_t *data, size_t size)
{
	static uint8_t out[RKV_MSG_MAX];
	struct rkv_msg *m = malloc(sizeof(*m));
	struct rkv_msg *m2 = malloc(sizeof(*m2));
	size_t fz;
	int rc, len;

	CHECK(m && m2);
	rc = rkv_msg_decode(data, size, m);
	CHECK(rc == 0 || rc == -EBADMSG || rc == -EPROTO || rc == -EOPNOTSUPP);
	if (rc)
		goto out;
	check_decoded(m, size);
	len = rkv_msg_encode(m, out, sizeof(out));
	CHECK(len > 0 && (size_t)len == size);
	fz = forced_nul(m);
	CHECK(memcmp(out, data, size) == 0 ||
	      (fz && memcmp(out, data, fz) == 0 && out[fz] == 0 &&
	       memcmp(out + fz + 1, data + fz + 1, size - fz - 1) == 0));
	rc = rkv_msg_decode(out, (size_t)len, m2);
	CHECK(rc == 0);
	normalise(m);
	CHECK(memcmp(m, m2, sizeof(*m)) == 0);
	/* One byte fewer never decodes. */
	CHECK(rkv_msg_decode(data, size - 1, m2) != 0);
out:
	free(m);
	free(m2);
}

static void fuzz_encode(const uint8_t *data, size_t size)
{
	struct rkv_msg *m = calloc(1, sizeof(*m));
	struct rkv_msg *m2 = malloc(sizeof(*m2));
	size_t cap;
	uint8_t *out;
	int len, rc;

	CHECK(m && m2);
	if (size < 4)
		goto out;
	/* 2 bytes of capacity, the rest is the struct. */
	cap = ((size_t)data[0] | (size_t)data[1] << 8) % (RKV_MSG_MAX + 64);
	memcpy(m, data + 2, size - 2 < sizeof(*m) ? size - 2 : sizeof(*m));
	m->hdr.type %= RKV_MSG_FENCE + 2; /* every type and one unknown */
	out = malloc(cap ? cap : 1); /* exact size: ASan sees overruns */
	CHECK(out);
	len = rkv_msg_encode(m, out, cap);
	if (m->hdr.type == RKV_MSG_BLOCK_RETURN &&
	    m->u.block_return.count > RKV_BLOCK_RETURN_MAX)
		CHECK(len == -EINVAL);
	CHECK(len == -EINVAL || len == -ENOSPC || (len > 0 && (size_t)len <= cap));
	if (len > 0) {
		rc = rkv_msg_decode(out, (size_t)len, m2);
		/* HELLO's and HELLO_REPLY's names are not terminated by
		 * the encoder: an unterminated one is refused by the
		 * decoder. */
		if ((m->hdr.type == RKV_MSG_HELLO &&
		     !memchr(m->u.hello.name, 0, RKV_NAME_MAX)) ||
		    (m->hdr.type == RKV_MSG_HELLO_REPLY &&
		     !memchr(m->u.hello_reply.server_name, 0,
			     RKV_SERVER_NAME_MAX))) {
			CHECK(rc == -EBADMSG);
		} else {
			CHECK(rc == 0);
			CHECK(m2->hdr.type == m->hdr.type);
			CHECK(m2->hdr.req_id == m->hdr.req_id);
			CHECK(m2->hdr.len == (uint32_t)len);
			if (m->hdr.type == RKV_MSG_BLOCK_RETURN)
				CHECK(m2->u.block_return.count ==
				      m->u.block_return.count);
			/* and the decoded struct encodes to the same bytes */
			uint8_t *again = malloc((size_t)len);

			CHECK(again);
			CHECK(rkv_msg_encode(m2, again, (size_t)len) == len);
			CHECK(memcmp(again, out, (size_t)len) == 0);
			free(again);
		}
	}
	free(out);
out:
	free(m);
	free(m2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_decode(data, size);
	fuzz_encode(data, size);
	return 0;
}
