/* SPDX-License-Identifier: MIT */
/*
 * msg.c - control message encoding and decoding.  Fields are written one by
 * one in little-endian through a bounds-checked cursor, so the wire format
 * does not depend on struct padding, and the decoder rejects any message
 * whose size does not match its type exactly.
 */
#include "msg.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

struct cur {
	unsigned char *p;
	size_t cap;
	size_t off;
	int err;
};

static void put(struct cur *c, const void *v, size_t n)
{
	if (c->err || c->off + n > c->cap) {
		c->err = 1;
		return;
	}
	memcpy(c->p + c->off, v, n);
	c->off += n;
}

static void put16(struct cur *c, uint16_t v)
{
	v = htole16(v);
	put(c, &v, 2);
}

static void put32(struct cur *c, uint32_t v)
{
	v = htole32(v);
	put(c, &v, 4);
}

static void put64(struct cur *c, uint64_t v)
{
	v = htole64(v);
	put(c, &v, 8);
}

static void get(struct cur *c, void *v, size_t n)
{
	if (c->err || c->off + n > c->cap) {
		c->err = 1;
		memset(v, 0, n);
		return;
	}
	memcpy(v, c->p + c->off, n);
	c->off += n;
}

static uint16_t get16(struct cur *c)
{
	uint16_t v;

	get(c, &v, 2);
	return le16toh(v);
}

static uint32_t get32(struct cur *c)
{
	uint32_t v;

	get(c, &v, 4);
	return le32toh(v);
}

static uint64_t get64(struct cur *c)
{
	uint64_t v;

	get(c, &v, 8);
	return le64toh(v);
}

const char *rkv_msg_type_str(unsigned type)
{
	switch (type) {
	case RKV_MSG_HELLO: return "HELLO";
	case RKV_MSG_HELLO_REPLY: return "HELLO_REPLY";
	case RKV_MSG_CHUNK_ALLOC: return "CHUNK_ALLOC";
	case RKV_MSG_CHUNK_GRANT: return "CHUNK_GRANT";
	case RKV_MSG_BLOCK_RETURN: return "BLOCK_RETURN";
	case RKV_MSG_CHUNK_RETIRE: return "CHUNK_RETIRE";
	case RKV_MSG_ACK: return "ACK";
	case RKV_MSG_STATS: return "STATS";
	case RKV_MSG_STATS_REPLY: return "STATS_REPLY";
	case RKV_MSG_ERROR: return "ERROR";
	case RKV_MSG_COUNTER_OPEN: return "COUNTER_OPEN";
	case RKV_MSG_COUNTER_REPLY: return "COUNTER_REPLY";
	case RKV_MSG_AUTH_CHALLENGE: return "AUTH_CHALLENGE";
	case RKV_MSG_AUTH_RESPONSE: return "AUTH_RESPONSE";
	case RKV_MSG_RKEY_UPDATE: return "RKEY_UPDATE";
	case RKV_MSG_RKEY_ACK: return "RKEY_ACK";
	case RKV_MSG_FENCE: return "FENCE";
	case RKV_MSG_GROW: return "GROW";
	case RKV_MSG_GROW_REPLY: return "GROW_REPLY";
	}
	return "UNKNOWN";
}

/* Body codec shared by encode (dir = 1) and decode (dir = 0). */
#define F32(c, dir, x)                                                         \
	do {                                                                   \
		if (dir)                                                       \
			put32(c, (uint32_t)(x));                               \
		else                                                           \
			(x) = (__typeof__(x))get32(c);                         \
	} while (0)
#define F64(c, dir, x)                                                         \
	do {                                                                   \
		if (dir)                                                       \
			put64(c, (uint64_t)(x));                               \
		else                                                           \
			(x) = (__typeof__(x))get64(c);                         \
	} while (0)
#define FBYTES(c, dir, x, n)                                                   \
	do {                                                                   \
		if (dir)                                                       \
			put(c, (x), (n));                                      \
		else                                                           \
			get(c, (x), (n));                                      \
	} while (0)

static int body(struct cur *c, int dir, struct rkv_msg *m)
{
	switch (m->hdr.type) {
	case RKV_MSG_HELLO:
		F32(c, dir, m->u.hello.flags);
		FBYTES(c, dir, m->u.hello.name, RKV_NAME_MAX);
		F32(c, dir, m->u.hello.map_epoch);
		break;
	case RKV_MSG_HELLO_REPLY: {
		struct rkv_msg_hello_reply *r = &m->u.hello_reply;

		F32(c, dir, r->status);
		F32(c, dir, r->client_id);
		F32(c, dir, r->server_id);
		F32(c, dir, r->index_rkey);
		F64(c, dir, r->index_addr);
		F64(c, dir, r->nbuckets);
		F32(c, dir, r->data_rkey);
		F32(c, dir, r->chunk_size);
		F64(c, dir, r->data_addr);
		F64(c, dir, r->data_len);
		F32(c, dir, r->lease_ms);
		F32(c, dir, r->grace_ms);
		F64(c, dir, r->counters_addr);
		F32(c, dir, r->counters_rkey);
		F32(c, dir, r->counters_count);
		FBYTES(c, dir, r->server_name, RKV_SERVER_NAME_MAX);
		F32(c, dir, r->flags);
		F32(c, dir, r->max_value);
		F32(c, dir, r->big_grace_ms);
		F32(c, dir, r->fence_epoch);
		F32(c, dir, r->bucket_slots);
		F32(c, dir, r->levels_max);
		F32(c, dir, r->levels);
		break;
	}
	case RKV_MSG_CHUNK_ALLOC:
		F32(c, dir, m->u.chunk_alloc.bytes);
		F32(c, dir, m->u.chunk_alloc.min_bytes);
		break;
	case RKV_MSG_CHUNK_GRANT:
		F32(c, dir, m->u.chunk_grant.status);
		F32(c, dir, m->u.chunk_grant.grant);
		F64(c, dir, m->u.chunk_grant.offset);
		F64(c, dir, m->u.chunk_grant.len);
		break;
	case RKV_MSG_BLOCK_RETURN: {
		struct rkv_msg_block_return *r = &m->u.block_return;

		F32(c, dir, r->count);
		if (r->count > RKV_BLOCK_RETURN_MAX)
			return -1;
		for (uint32_t i = 0; i < r->count; i++) {
			F64(c, dir, r->ext[i].offset);
			F32(c, dir, r->ext[i].len);
			F32(c, dir, r->ext[i].grant);
		}
		break;
	}
	case RKV_MSG_CHUNK_RETIRE:
		F64(c, dir, m->u.chunk_retire.offset);
		F64(c, dir, m->u.chunk_retire.len);
		break;
	case RKV_MSG_ACK:
		F32(c, dir, m->u.ack.status);
		break;
	case RKV_MSG_STATS:
		break;
	case RKV_MSG_STATS_REPLY: {
		uint64_t *v = &m->u.stats_reply.uptime_ms;
		size_t n = sizeof(m->u.stats_reply) / sizeof(uint64_t);

		for (size_t i = 0; i < n; i++)
			F64(c, dir, v[i]);
		break;
	}
	case RKV_MSG_ERROR:
		F32(c, dir, m->u.error.status);
		FBYTES(c, dir, m->u.error.text, RKV_ERROR_TEXT_MAX);
		break;
	case RKV_MSG_COUNTER_OPEN:
		FBYTES(c, dir, m->u.counter_open.name, RKV_COUNTER_NAME_MAX);
		break;
	case RKV_MSG_COUNTER_REPLY:
		F32(c, dir, m->u.counter_reply.status);
		F32(c, dir, m->u.counter_reply.index);
		break;
	case RKV_MSG_AUTH_CHALLENGE:
		F32(c, dir, m->u.auth_challenge.alg);
		F32(c, dir, m->u.auth_challenge.server_id);
		FBYTES(c, dir, m->u.auth_challenge.nonce, RKV_AUTH_NONCE_LEN);
		break;
	case RKV_MSG_AUTH_RESPONSE:
		FBYTES(c, dir, m->u.auth_response.mac, RKV_AUTH_MAC_LEN);
		break;
	case RKV_MSG_RKEY_UPDATE:
		F32(c, dir, m->u.rkey_update.epoch);
		F32(c, dir, m->u.rkey_update.index_rkey);
		F32(c, dir, m->u.rkey_update.data_rkey);
		F32(c, dir, m->u.rkey_update.counters_rkey);
		break;
	case RKV_MSG_RKEY_ACK:
		F32(c, dir, m->u.rkey_ack.epoch);
		break;
	case RKV_MSG_FENCE:
		F32(c, dir, m->u.fence.epoch);
		break;
	case RKV_MSG_GROW:
		F32(c, dir, m->u.grow.levels);
		break;
	case RKV_MSG_GROW_REPLY:
		F32(c, dir, m->u.grow_reply.status);
		F32(c, dir, m->u.grow_reply.levels);
		break;
	default:
		return -2;
	}
	return c->err ? -1 : 0;
}

_Static_assert(sizeof(struct rkv_msg_stats_reply) % sizeof(uint64_t) == 0,
	       "stats reply is all u64 counters");

int rkv_msg_encode(const struct rkv_msg *m, void *buf, size_t cap)
{
	struct rkv_msg tmp = *m;
	struct cur c = { .p = buf, .cap = cap < RKV_MSG_MAX ? cap : RKV_MSG_MAX };
	int rc;

	if (m->hdr.type == RKV_MSG_ERROR)
		tmp.u.error.text[RKV_ERROR_TEXT_MAX - 1] = '\0';
	if (m->hdr.type == RKV_MSG_COUNTER_OPEN)
		tmp.u.counter_open.name[RKV_COUNTER_NAME_MAX - 1] = '\0';
	/* Below the header's size every put fails (-ENOSPC), but a bad type
	 * or count is still -EINVAL, whatever the capacity. */
	c.off = RKV_MSG_HDR_SIZE;
	rc = body(&c, 1, &tmp);
	if (rc == -2 || (rc && m->hdr.type == RKV_MSG_BLOCK_RETURN &&
			 m->u.block_return.count > RKV_BLOCK_RETURN_MAX))
		return -EINVAL;
	if (rc || c.cap < RKV_MSG_HDR_SIZE)
		return -ENOSPC;
	size_t len = c.off;

	c.off = 0;
	put32(&c, RKV_PROTO_MAGIC);
	put16(&c, RKV_PROTO_VERSION);
	put16(&c, m->hdr.type);
	put32(&c, (uint32_t)len);
	put32(&c, m->hdr.req_id);
	return (int)len;
}

int rkv_msg_decode(const void *buf, size_t n, struct rkv_msg *m)
{
	struct cur c = { .p = (unsigned char *)(uintptr_t)buf, .cap = n };
	int rc;

	memset(m, 0, sizeof(*m));
	if (n < RKV_MSG_HDR_SIZE || n > RKV_MSG_MAX)
		return -EBADMSG;
	m->hdr.magic = get32(&c);
	m->hdr.version = get16(&c);
	m->hdr.type = get16(&c);
	m->hdr.len = get32(&c);
	m->hdr.req_id = get32(&c);
	if (m->hdr.magic != RKV_PROTO_MAGIC)
		return -EBADMSG;
	if (m->hdr.version != RKV_PROTO_VERSION)
		return -EPROTO;
	if (m->hdr.len != n)
		return -EBADMSG;
	rc = body(&c, 0, m);
	if (rc == -2)
		return -EOPNOTSUPP;
	if (rc || c.off != n)
		return -EBADMSG;
	if (m->hdr.type == RKV_MSG_HELLO &&
	    !memchr(m->u.hello.name, '\0', RKV_NAME_MAX))
		return -EBADMSG;
	if (m->hdr.type == RKV_MSG_HELLO_REPLY &&
	    !memchr(m->u.hello_reply.server_name, '\0', RKV_SERVER_NAME_MAX))
		return -EBADMSG;
	if (m->hdr.type == RKV_MSG_ERROR &&
	    !memchr(m->u.error.text, '\0', RKV_ERROR_TEXT_MAX))
		return -EBADMSG;
	if (m->hdr.type == RKV_MSG_COUNTER_OPEN &&
	    !memchr(m->u.counter_open.name, '\0', RKV_COUNTER_NAME_MAX))
		return -EBADMSG;
	return 0;
}
