/* SPDX-License-Identifier: MIT */
/*
 * fuzz_block.c - libFuzzer harness for rkv_block_decode (proto/layout.c),
 * which a client runs on whatever bytes a one-sided READ brought back from
 * the data region (torn, reused, or written by a hostile peer), and for
 * the three steps it is made of, which the device path (client/gpu.c)
 * calls one by one: rkv_block_hdr_check, rkv_block_checksum,
 * rkv_block_key_match.
 *
 * Input: one mode byte, then the block.  Mode bit 0 fixes the checksum up
 * (when the header's lengths fit), so the fuzzer gets past it; bit 1 passes
 * the block's own key as the expected key, bit 2 a key taken from the end
 * of the input.  The decoder must stay inside buf_len; a block it accepts
 * must have lengths that fit, a value pointer inside the buffer, and must
 * re-encode (rkv_block_encode) to a block that decodes to the same key,
 * value, writer and version.  Decode must give what its steps give in
 * turn, so the device path refuses exactly what the host path refuses.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #c);                                 \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct rkv_block_hdr *hdr = NULL;
	const void *key = NULL, *val = NULL;
	size_t n, key_len = 0, used = 0;
	uint32_t val_len = 0;
	uint8_t *buf, mode;
	int rc, steps;

	if (size < 1)
		return 0;
	mode = data[0];
	data++;
	size--;
	n = size;
	/* Exactly n bytes, so ASan sees a read past buf_len (malloc's
	 * alignment suffices for the header's fields). */
	buf = malloc(n ? n : 1);
	CHECK(buf);
	memcpy(buf, data, n);
	if ((mode & 1) && n >= RKV_BLOCK_HDR_SIZE) {
		struct rkv_block_hdr *h = (struct rkv_block_hdr *)buf;
		size_t u = rkv_block_used(h);

		if (u <= n)
			h->checksum = rkv_block_checksum(buf, u);
	}
	if ((mode & 2) && n >= RKV_BLOCK_HDR_SIZE) {
		const struct rkv_block_hdr *h = (const void *)buf;

		key_len = h->key_len;
		if (RKV_BLOCK_HDR_SIZE + key_len <= n)
			key = buf + RKV_BLOCK_HDR_SIZE;
		else
			key_len = 0;
	} else if ((mode & 4) && n) {
		key_len = 1 + (mode >> 3) % 16;
		if (key_len > n)
			key_len = n;
		key = data + n - key_len;
	}
	rc = rkv_block_decode(buf, n, key, key_len, &val, &val_len, &hdr);
	CHECK(rc == 0 || rc == -EBADMSG || rc == -ESTALE);
	/* the same answer, step by step */
	steps = rkv_block_hdr_check((const void *)buf, n, &used);
	CHECK(steps == 0 || steps == -EBADMSG);
	if (!steps) {
		CHECK(used >= RKV_BLOCK_HDR_SIZE + 1 && used <= n);
		if (rkv_block_checksum(buf, used) !=
		    ((const struct rkv_block_hdr *)buf)->checksum)
			steps = -EBADMSG;
	}
	if (!steps && key)
		steps = rkv_block_key_match(buf, key, key_len);
	CHECK(rc == steps);
	if (rc == 0) {
		uint8_t *re;
		const void *v2;
		uint32_t vl2, size2;
		const struct rkv_block_hdr *h2;

		CHECK(hdr == (const void *)buf);
		CHECK(hdr->key_len >= 1 && hdr->key_len <= RKV_KEY_MAX);
		CHECK(val_len == hdr->val_len && val_len <= RKV_VALUE_LIMIT);
		CHECK(used == RKV_BLOCK_HDR_SIZE + (size_t)hdr->key_len + val_len);
		CHECK(used <= n);
		CHECK((const uint8_t *)val ==
		      buf + RKV_BLOCK_HDR_SIZE + hdr->key_len);
		if (key)
			CHECK(key_len == hdr->key_len &&
			      !memcmp(key, buf + RKV_BLOCK_HDR_SIZE, key_len));
		size2 = rkv_block_size(hdr->key_len, val_len);
		CHECK(size2 >= used && size2 % RKV_BLOCK_ALIGN == 0);
		re = aligned_alloc(RKV_BLOCK_ALIGN, size2);
		CHECK(re);
		CHECK(rkv_block_encode(re, buf + RKV_BLOCK_HDR_SIZE,
				       hdr->key_len, val, val_len, hdr->writer,
				       hdr->grant, hdr->version) == size2);
		CHECK(rkv_block_decode(re, size2, buf + RKV_BLOCK_HDR_SIZE,
				       hdr->key_len, &v2, &vl2, &h2) == 0);
		CHECK(vl2 == val_len && !memcmp(v2, val, val_len));
		CHECK(h2->writer == hdr->writer && h2->grant == hdr->grant &&
		      h2->version == hdr->version);
		/* a block of that size read short never decodes */
		CHECK(rkv_block_decode(re, used - 1, NULL, 0, NULL, NULL,
				       NULL) == -EBADMSG);
		free(re);
	}
	free(buf);
	return 0;
}
