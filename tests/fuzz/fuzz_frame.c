/* SPDX-License-Identifier: MIT */
/*
 * fuzz_frame.c - libFuzzer harness for the frame parser of the software
 * providers (sw_frame_check in common/transport/sw_wire.c, the function the
 * tcp and shm receive paths and handshakes call).
 *
 * The input is read as a stream of frames, the way the receive path walks
 * its buffer: check the header at the cursor, skip its payload, go on.  The
 * parser must never read past the bytes it is given, must answer -EAGAIN
 * exactly when fewer than a header's bytes are there, and a header it
 * decodes must re-encode (sw_hdr_encode) to the same 48 bytes and obey the
 * limits that sw.h documents for its type.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #c);                                 \
			abort();                                               \
		}                                                              \
	} while (0)

static void check_limits(const struct sw_hdr *h)
{
	CHECK(h->type >= SW_F_HELLO && h->type < SW_F_MAX);
	switch (h->type) {
	case SW_F_READ:
		CHECK(h->len == 0 && h->arg0 <= RKV_TP_MAX_MSG);
		break;
	case SW_F_WRITE:
	case SW_F_SEND:
		CHECK(h->len <= RKV_TP_MAX_MSG);
		break;
	case SW_F_RESP:
		CHECK(h->key <= RKV_WC_GENERAL_ERR);
		CHECK(h->len <= RKV_TP_MAX_MSG);
		CHECK(h->key == RKV_WC_SUCCESS || h->len == 0);
		break;
	default:
		CHECK(h->len == 0);
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	while (off < size) {
		uint8_t re[SW_HDR_LEN];
		struct sw_hdr h;
		size_t left = size - off;
		int rc;

		memset(&h, 0, sizeof(h)); /* padding: compared below */
		rc = sw_frame_check(data + off, left, &h);

		CHECK(rc == 0 || rc == -EAGAIN || rc == -EPROTO ||
		      rc == -EBADMSG);
		CHECK((rc == -EAGAIN) == (left < SW_HDR_LEN));
		if (rc == -EAGAIN || rc == -EPROTO)
			break;
		/* Decoded: the header round-trips byte for byte. */
		sw_hdr_encode(&h, re);
		CHECK(memcmp(re, data + off, SW_HDR_LEN) == 0);
		/* A header alone decides: more bytes change nothing, fewer
		 * are never enough. */
		{
			struct sw_hdr h2;

			memset(&h2, 0, sizeof(h2));
			CHECK(sw_frame_check(data + off, SW_HDR_LEN, &h2) == rc);
			CHECK(memcmp(&h, &h2, sizeof(h)) == 0);
			CHECK(sw_frame_check(data + off, SW_HDR_LEN - 1, &h2) ==
			      -EAGAIN);
		}
		if (rc == -EBADMSG)
			break;
		check_limits(&h);
		off += SW_HDR_LEN;
		if (h.len > size - off)
			break;
		off += h.len;
	}
	return 0;
}
