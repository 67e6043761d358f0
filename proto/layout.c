/* SPDX-License-Identifier: MIT */
/*
 * layout.c - encoding and checking of KV blocks, key hashing and routing.
 * Pure functions: no I/O, no allocation.  rkv_block_decode never trusts a
 * length from the buffer: rkv_block_hdr_check checks them against the
 * bytes actually read before the checksum or key match touches the key or
 * value.  The device path (client/gpu.c) runs the same three steps, with
 * the checksum computed on the GPU over the same span.
 *
 * xxh3 comes from common/hash.h (libxxhash header-only, the same function
 * the server, client and the CUDA kernel's tests use).  That include is
 * proto's one edge into common; its prepared seeds (rkv_hash64_prep: the
 * secret of each seed derived once, the long loop's fastest variant for
 * this CPU) live in common/hash.c, so librkv_proto.a links with
 * librkv_common.a, as every program that uses it does.
 */
#include "layout.h"

#include <errno.h>
#include <string.h>

#include "hash.h"

#define SEED_B1 0x9e3779b97f4a7c15ull
#define SEED_B2 0xc2b2ae3d27d4eb4full
#define SEED_ROUTE 0x165667b19e3779f9ull

/* The seeds, prepared before main (read-only after). */
static struct rkv_hash_seed g_seed_block, g_seed_b1, g_seed_b2, g_seed_route;

__attribute__((constructor)) static void seeds_init(void)
{
	rkv_hash_seed_init(&g_seed_block, RKV_BLOCK_SEED);
	rkv_hash_seed_init(&g_seed_b1, SEED_B1);
	rkv_hash_seed_init(&g_seed_b2, SEED_B2);
	rkv_hash_seed_init(&g_seed_route, SEED_ROUTE);
}

uint64_t rkv_block_checksum(const void *buf, size_t used)
{
	return rkv_hash64_prep(&g_seed_block,
			       (const char *)buf + RKV_BLOCK_SUM_OFF,
			       rkv_block_sum_len(used));
}

void rkv_block_hash_start(struct rkv_hash_state *h)
{
	rkv_hash_start(h, &g_seed_block);
}

uint64_t rkv_block_checksum_split(const void *head, size_t head_len,
				  const void *tail, size_t tail_len)
{
	struct rkv_hash_state h;

	rkv_hash_start(&h, &g_seed_block);
	rkv_hash_update(&h, (const char *)head + RKV_BLOCK_SUM_OFF,
			rkv_block_sum_len(head_len));
	rkv_hash_update(&h, tail, tail_len);
	return rkv_hash_digest(&h);
}

int rkv_block_hdr_fill(struct rkv_block_hdr *h, size_t key_len,
		       size_t val_len, uint32_t writer, uint32_t grant,
		       uint64_t version)
{
	uint32_t size = rkv_block_size(key_len, val_len);

	if (key_len == 0)
		return -EINVAL;
	if (!size)
		return -EMSGSIZE;
	h->checksum = 0;
	h->key_len = (uint16_t)key_len;
	h->flags = RKV_BLOCK_F_NONE;
	h->val_len = (uint32_t)val_len;
	h->writer = writer;
	h->grant = grant;
	h->version = version;
	return (int)size;
}

uint32_t rkv_block_encode(void *buf, const void *key, size_t key_len,
			  const void *val, size_t val_len, uint32_t writer,
			  uint32_t grant, uint64_t version)
{
	int size = rkv_block_hdr_fill(buf, key_len, val_len, writer, grant,
				      version);
	char *p = buf;
	size_t used;

	if (size < 0)
		return 0;
	used = rkv_block_used(buf);
	/* the value may already be in place (rmw callbacks write there) */
	if (val_len >= RKV_HASH_COPY_CHUNK &&
	    ((const char *)val + val_len <= p ||
	     (const char *)val >= p + size)) {
		/* a big value from elsewhere: copied and hashed in one
		 * pass (hash.h) */
		struct rkv_hash_state h;

		memset(p + used, 0, (size_t)size - used);
		memcpy(p + RKV_BLOCK_HDR_SIZE, key, key_len);
		rkv_hash_start(&h, &g_seed_block);
		rkv_hash_update(&h, p + RKV_BLOCK_SUM_OFF,
				RKV_BLOCK_HDR_SIZE + key_len -
					RKV_BLOCK_SUM_OFF);
		rkv_hash_copy(&h, p + RKV_BLOCK_HDR_SIZE + key_len, val,
			      val_len);
		((struct rkv_block_hdr *)buf)->checksum = rkv_hash_digest(&h);
		return (uint32_t)size;
	}
	if (val_len && (const char *)val != p + RKV_BLOCK_HDR_SIZE + key_len)
		memmove(p + RKV_BLOCK_HDR_SIZE + key_len, val, val_len);
	memcpy(p + RKV_BLOCK_HDR_SIZE, key, key_len);
	memset(p + used, 0, (size_t)size - used);
	((struct rkv_block_hdr *)buf)->checksum = rkv_block_checksum(buf, used);
	return (uint32_t)size;
}

int rkv_block_hdr_check(const struct rkv_block_hdr *h, size_t buf_len,
			size_t *used)
{
	size_t n;

	if (buf_len < RKV_BLOCK_HDR_SIZE)
		return -EBADMSG;
	if (h->key_len == 0 || h->key_len > RKV_KEY_MAX ||
	    h->val_len > RKV_VALUE_LIMIT)
		return -EBADMSG;
	n = rkv_block_used(h);
	if (n > buf_len)
		return -EBADMSG;
	*used = n;
	return 0;
}

int rkv_block_key_match(const void *buf, const void *key, size_t key_len)
{
	const struct rkv_block_hdr *h = buf;

	if (h->key_len != key_len ||
	    memcmp((const char *)buf + RKV_BLOCK_HDR_SIZE, key, key_len) != 0)
		return -ESTALE;
	return 0;
}

int rkv_block_decode(const void *buf, size_t buf_len, const void *key,
		     size_t key_len, const void **val, uint32_t *val_len,
		     const struct rkv_block_hdr **hdr)
{
	const struct rkv_block_hdr *h = buf;
	size_t used;
	int rc;

	rc = rkv_block_hdr_check(h, buf_len, &used);
	if (rc)
		return rc;
	if (rkv_block_checksum(buf, used) != h->checksum)
		return -EBADMSG;
	if (key) {
		rc = rkv_block_key_match(buf, key, key_len);
		if (rc)
			return rc;
	}
	if (val)
		*val = (const char *)buf + RKV_BLOCK_HDR_SIZE + h->key_len;
	if (val_len)
		*val_len = h->val_len;
	if (hdr)
		*hdr = h;
	return 0;
}

int rkv_block_decode_copy(const void *buf, size_t buf_len, const void *key,
			  size_t key_len, void *dst, size_t cap,
			  uint32_t *val_len, int *copied)
{
	const struct rkv_block_hdr *h = buf;
	const char *v;
	struct rkv_hash_state st;
	size_t used;
	int rc;

	*copied = 0;
	rc = rkv_block_hdr_check(h, buf_len, &used);
	if (rc)
		return rc;
	if (h->val_len < RKV_HASH_COPY_CHUNK || h->val_len > cap)
		return rkv_block_decode(buf, buf_len, key, key_len, NULL,
					val_len, NULL);
	v = (const char *)buf + RKV_BLOCK_HDR_SIZE + h->key_len;
	rkv_hash_start(&st, &g_seed_block);
	rkv_hash_update(&st, (const char *)buf + RKV_BLOCK_SUM_OFF,
			(size_t)(v - (const char *)buf) - RKV_BLOCK_SUM_OFF);
	rkv_hash_copy(&st, dst, v, h->val_len);
	if (rkv_hash_digest(&st) != h->checksum)
		return -EBADMSG;
	rc = key ? rkv_block_key_match(buf, key, key_len) : 0;
	if (rc)
		return rc;
	*val_len = h->val_len;
	*copied = 1;
	return 0;
}

void (*g_rkv_key_hash_hook)(const void *key, size_t key_len,
			   struct rkv_key_hash *out);

void rkv_key_hash(const void *key, size_t key_len, struct rkv_key_hash *out)
{
	out->h1 = rkv_hash64_prep(&g_seed_b1, key, key_len);
	out->h2 = rkv_hash64_prep(&g_seed_b2, key, key_len);
	out->route = rkv_hash64_prep(&g_seed_route, key, key_len);
	out->fp = (unsigned)(out->h1 >> 56);
	if (__builtin_expect(g_rkv_key_hash_hook != NULL, 0))
		g_rkv_key_hash_hook(key, key_len, out);
}

void rkv_key_buckets(const struct rkv_key_hash *kh, uint64_t nbuckets,
		     uint64_t *b1, uint64_t *b2)
{
	uint64_t m = nbuckets - 1;

	*b1 = kh->h1 & m;
	*b2 = kh->h2 & m;
	if (*b2 == *b1)
		*b2 = *b1 ^ 1u;
	*b2 &= m;
}

/* The key's hash h mixed afresh for level (so each level draws bits of
 * its own). */
static uint64_t level_mix(uint64_t h, unsigned level)
{
	return rkv_mix64(h ^ (uint64_t)level * 0x9e3779b97f4a7c15ull);
}

/* A bucket in [0, n) from h (Lemire's multiply-shift: n need not be a
 * power of two; level k >= 1 has 7 n0 G^(k-1) buckets). */
static uint64_t level_pick(uint64_t h, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)h * n) >> 64);
}

unsigned rkv_key_level_buckets(const struct rkv_key_hash *kh, uint64_t n0,
			       unsigned levels, uint64_t *b)
{
	unsigned n = 0;

	rkv_key_buckets(kh, n0, &b[0], &b[1]);
	n = b[0] == b[1] ? 1 : 2;
	if (levels > RKV_INDEX_LEVELS_MAX)
		levels = RKV_INDEX_LEVELS_MAX;
	for (unsigned k = 1; k < levels; k++) {
		uint64_t base = rkv_index_nbuckets(n0, k);
		uint64_t size = rkv_index_nbuckets(n0, k + 1) - base;
		uint64_t x = level_pick(level_mix(kh->h1, k), size);
		uint64_t y = level_pick(level_mix(kh->h2, k), size);

		if (y == x)
			y = x + 1 == size ? 0 : x + 1;
		b[n++] = base + x;
		b[n++] = base + y;
	}
	return n;
}

uint32_t rkv_jump_hash(uint64_t key, uint32_t n)
{
	int64_t b = -1, j = 0;

	while (j < (int64_t)n) {
		b = j;
		key = key * 2862933555777941757ull + 1;
		j = (int64_t)((double)(b + 1) *
			      ((double)(1ll << 31) / (double)((key >> 33) + 1)));
	}
	return (uint32_t)b;
}
