/* SPDX-License-Identifier: MIT */
/*
 * msg.h - rkv's control messages, carried by SEND/RECV only (the data path
 * is one-sided).  Every message starts with struct rkv_msg_hdr; all fields
 * are fixed-width little-endian on the wire; a reply repeats the request's
 * req_id.  The decoder never trusts a length or count from the wire: it
 * checks magic, version, type, the exact size of fixed messages and the
 * count of variable ones against the bytes received.
 *
 *   client                                 server
 *     HELLO (version, flags, name)   ->
 *                                    <-    HELLO_REPLY (status, client id,
 *                                          index/data addresses, rkeys,
 *                                          geometry, lease, grace)
 *     CHUNK_ALLOC (bytes, min_bytes) ->
 *                                    <-    CHUNK_GRANT (status, offset, len,
 *                                          grant id)
 *     BLOCK_RETURN (extents + grant) ->    (freed after the grace period)
 *                                    <-    ACK (status)
 *     CHUNK_RETIRE (offset, len)     ->    (chunk no longer held)
 *                                    <-    ACK (status)
 *     STATS                          ->
 *                                    <-    STATS_REPLY (counters)
 *     COUNTER_OPEN (name)            ->
 *                                    <-    COUNTER_REPLY (status, index)
 *   With a shared secret (rkv-server --secret-file), the reply to HELLO is
 *   a challenge, and region information follows only a correct response:
 *     HELLO (version, flags, name)   ->
 *                                    <-    AUTH_CHALLENGE (alg, server id,
 *                                          32-byte random nonce)
 *     AUTH_RESPONSE (HMAC-SHA256)    ->
 *                                    <-    HELLO_REPLY, or ERROR (-EACCES)
 *                                          and the connection is closed
 *   HELLO_REPLY also names the counter region (address, rkey, words): N
 *   8-byte words clients use with one-sided FETCH_ADD / CAS / READ;
 *   COUNTER_OPEN maps a name to one of them (same name, same word).
 *   Any request the server cannot take gets ERROR (status, text) and the
 *   server keeps serving; a malformed message closes that connection.
 */
#ifndef RKV_PROTO_MSG_H
#define RKV_PROTO_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "cmap.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RKV_PROTO_MAGIC 0x314b5652u /* "RVK1" read as little-endian */
#define RKV_PROTO_VERSION 9u
#define RKV_MSG_MAX 4096u           /* largest control message */
#define RKV_MSG_HDR_SIZE 16u

enum rkv_msg_type {
	RKV_MSG_HELLO = 1,
	RKV_MSG_HELLO_REPLY = 2,
	RKV_MSG_CHUNK_ALLOC = 3,
	RKV_MSG_CHUNK_GRANT = 4,
	RKV_MSG_BLOCK_RETURN = 5,
	RKV_MSG_CHUNK_RETIRE = 6,
	RKV_MSG_ACK = 7,
	RKV_MSG_STATS = 8,
	RKV_MSG_STATS_REPLY = 9,
	RKV_MSG_ERROR = 10,
	RKV_MSG_COUNTER_OPEN = 11,
	RKV_MSG_COUNTER_REPLY = 12,
	RKV_MSG_AUTH_CHALLENGE = 13,
	RKV_MSG_AUTH_RESPONSE = 14,
	RKV_MSG_RKEY_UPDATE = 15,
	RKV_MSG_RKEY_ACK = 16,
	RKV_MSG_FENCE = 17,
	RKV_MSG_GROW = 18,
	RKV_MSG_GROW_REPLY = 19,
};
const char *rkv_msg_type_str(unsigned type);

struct rkv_msg_hdr {
	uint32_t magic;   /* RKV_PROTO_MAGIC */
	uint16_t version; /* RKV_PROTO_VERSION */
	uint16_t type;    /* enum rkv_msg_type */
	uint32_t len;     /* whole message, header included */
	uint32_t req_id;  /* echoed in the reply */
};
_Static_assert(sizeof(struct rkv_msg_hdr) == RKV_MSG_HDR_SIZE, "hdr size");

enum rkv_hello_flags {
	RKV_HELLO_READ_ONLY = 1u << 0, /* ask for read-only rkeys */
};

/* What the server granted (HELLO_REPLY flags, version 4). */
enum rkv_hello_reply_flags {
	/* read-only rkeys: asked for, or the client proved the
	 * --read-only-secret-file; the server refuses its writes */
	RKV_HELLO_REPLY_READ_ONLY = 1u << 0,
	/* a cluster member: check its lease word (layout.h) before trusting
	 * what a READ of it returned */
	RKV_HELLO_REPLY_LEASED = 1u << 1,
};

#define RKV_NAME_MAX 32

struct rkv_msg_hello {
	uint32_t flags;               /* enum rkv_hello_flags */
	char name[RKV_NAME_MAX];      /* client name for logs, NUL-padded */
	/* appended in version 7: the epoch of the client's cluster map (0:
	 * none, or a map without epochs); a server fenced at a later epoch
	 * refuses it with -ESTALE (docs/DESIGN.md §9.7, failover) */
	uint32_t map_epoch;
};

struct rkv_msg_hello_reply {
	int32_t status;       /* 0 or -errno */
	uint32_t client_id;   /* unique per server run, never 0 */
	uint32_t server_id;   /* random per server run */
	uint32_t index_rkey;
	uint64_t index_addr;  /* remote address of bucket 0 */
	uint64_t nbuckets;    /* power of two */
	uint32_t data_rkey;
	uint32_t chunk_size;  /* bytes a CHUNK_ALLOC grants by default */
	uint64_t data_addr;   /* remote address of data offset 0 */
	uint64_t data_len;
	uint32_t lease_ms;    /* lock lease */
	uint32_t grace_ms;    /* block reuse grace period */
	/* appended: the counter region (count 0: none, or read-only client) */
	uint64_t counters_addr;  /* remote address of word 0 */
	uint32_t counters_rkey;  /* remote read, write, atomic */
	uint32_t counters_count; /* 8-byte words */
	/* appended in version 3: the server's name (--name), NUL-terminated:
	 * placement is by name (cmap.h), so a client checks it is talking
	 * to the server its map names */
	char server_name[RKV_SERVER_NAME_MAX];
	/* appended in version 4 */
	uint32_t flags;       /* enum rkv_hello_reply_flags */
	/* appended in version 5: the largest value this server takes
	 * (rkv-server --max-value); slot sizes above 128 KiB name size
	 * classes (layout.h) */
	uint32_t max_value;
	/* appended in version 6: how long a block over RKV_SMALL_BLOCK_MAX
	 * waits before reuse (rkv-server --big-grace, >= grace_ms): a
	 * client's read of one may take that long */
	uint32_t big_grace_ms;
	/* appended in version 7: the epoch this server is fenced at (0:
	 * never): clients of an older map are refused */
	uint32_t fence_epoch;
	/* appended in version 8: slots a bucket holds (layout.h) */
	uint32_t bucket_slots;
	/* appended in version 9: the index's levels (layout.h "Levels"):
	 * nbuckets is level 0's; levels_max 1 is a fixed index */
	uint32_t levels_max;
	uint32_t levels;      /* in use now (the level word's) */
};

/*
 * A chunk of bytes (0: the server's chunk size); when no free run that
 * long exists the server grants the longest it finds of at least
 * min_bytes (0: bytes), so a fragmented region is used to its end.
 */
/* bytes every server grants: at most this, or one block of its largest
 * value (HELLO_REPLY's max_value) */
#define RKV_CHUNK_ALLOC_MAX (64u << 20)

struct rkv_msg_chunk_alloc {
	uint32_t bytes;       /* multiple of 64; 0 = server's chunk size */
	uint32_t min_bytes;   /* multiple of 64; 0 = bytes */
};

struct rkv_msg_chunk_grant {
	int32_t status;       /* 0, -ENOSPC, -EBUSY (full, but space waits for
			       * its grace period: ask again), -EPERM */
	uint32_t grant;       /* grant id: unique per server run, never 0 */
	uint64_t offset;      /* data-region offset, 64-byte aligned */
	uint64_t len;
};

/*
 * A block (or chunk tail) handed back.  grant is the id of the grant it
 * was carved from (the block header's grant field): the server frees it
 * only while those units still belong to that grant, so a late or
 * repeated return can never free space that was reclaimed and granted
 * again (server/space.c).
 */
struct rkv_extent {
	uint64_t offset;      /* data-region offset, 64-byte aligned */
	uint32_t len;         /* multiple of 64, <= RKV_MAX_BLOCK */
	uint32_t grant;
};
#define RKV_EXTENT_WIRE_SIZE 16u /* offset, len, grant on the wire */

#define RKV_BLOCK_RETURN_MAX 250 /* extents per message */

struct rkv_msg_block_return {
	uint32_t count;
	struct rkv_extent ext[RKV_BLOCK_RETURN_MAX];
};

struct rkv_msg_chunk_retire {
	uint64_t offset;
	uint64_t len;
};

struct rkv_msg_ack {
	int32_t status;
};

/*
 * FENCE (version 7), answered by ACK: from now on this server serves no
 * client of a map older than epoch.  It registers its index region anew
 * (the old rkeys stop working: on tcp and verbs no one-sided operation
 * with them runs after the ACK), closes every connection whose HELLO gave
 * an older nonzero map epoch, and refuses such HELLOs with -ESTALE.  Only
 * a writer whose own HELLO gave a map epoch >= epoch may ask (-EPERM);
 * an epoch <= the current fence is a no-op.  The failover's coordinator
 * sends it to every surviving server before it reads their copies.
 */
struct rkv_msg_fence {
	uint32_t epoch;
};

/* GROW (version 9): the client met a key whose candidate buckets in every
 * level were full; levels is the count it read.  The server adds a level
 * when that is still its count and levels_max allows; GROW_REPLY says the
 * count now (status 0), -ENOSPC when the index is at its largest, -EPERM
 * for a read-only client. */
struct rkv_msg_grow {
	uint32_t levels;
};

struct rkv_msg_grow_reply {
	int32_t status;
	uint32_t levels;
};

struct rkv_msg_stats_reply {
	uint64_t uptime_ms;
	uint64_t clients;        /* connected now */
	uint64_t clients_total;  /* ever connected */
	uint64_t keys;           /* used slots (last scan) */
	uint64_t nbuckets;
	uint64_t data_len;
	uint64_t data_free;      /* bytes free (not granted, not in grace) */
	uint64_t data_grace;     /* bytes waiting for their grace period */
	uint64_t chunks_granted;
	uint64_t blocks_returned;
	uint64_t rebuilds;       /* free-space rebuilds after client deaths */
	uint64_t bad_msgs;       /* malformed messages dropped */
	uint64_t ctrl_msgs;      /* control messages served */
	/* appended */
	uint64_t auth_failures;  /* wrong, missing or abandoned responses */
	uint64_t denied;         /* (version 4) writes refused to read-only
				  * clients: chunk, return, counter asks */
	uint64_t bucket_slots;   /* (version 8) slots a bucket holds */
	uint64_t levels;         /* (version 9) index levels in use ... */
	uint64_t levels_max;     /* ... and at most (nbuckets: level 0's) */
	uint64_t index_slots;    /* slots of the levels in use */
};

#define RKV_COUNTER_NAME_MAX 64 /* bytes, NUL included */

struct rkv_msg_counter_open {
	char name[RKV_COUNTER_NAME_MAX]; /* 1..63 bytes, NUL-padded */
};

struct rkv_msg_counter_reply {
	int32_t status;       /* 0, -EINVAL (empty name), -ENOSPC (table full),
			       * -EPERM (read-only client), -ENODEV (none) */
	uint32_t index;       /* word index in the counter region */
};

/*
 * Authentication (only when the server has a secret).  The response is
 *   mac = HMAC-SHA256(secret, nonce[32] || name[RKV_NAME_MAX] || "rkv-auth-v1")
 * where name is the HELLO's name field exactly as sent (NUL-padded to
 * RKV_NAME_MAX bytes) and the context string has no NUL; rkv_auth_mac
 * (proto/auth.h) is the one computation of it.  Each connection
 * gets a fresh nonce from getrandom() that is forgotten after one
 * response, so a response captured on one connection is useless on
 * another.
 */
#define RKV_AUTH_NONCE_LEN 32
#define RKV_AUTH_MAC_LEN 32
#define RKV_AUTH_CONTEXT "rkv-auth-v1"
#define RKV_AUTH_HMAC_SHA256 1u /* the only algorithm */

struct rkv_msg_auth_challenge {
	uint32_t alg;         /* RKV_AUTH_HMAC_SHA256 */
	uint32_t server_id;   /* random per server run (as in HELLO_REPLY) */
	uint8_t nonce[RKV_AUTH_NONCE_LEN];
};

struct rkv_msg_auth_response {
	uint8_t mac[RKV_AUTH_MAC_LEN];
};

/*
 * rkey rotation (rkv-server --rotate-rkeys).  The server registers its
 * regions anew and sends RKEY_UPDATE (req_id 0: unsolicited) to every ready
 * client: the rkeys of the new registrations, with the access the client
 * was given at HELLO (read-only clients get read-only rkeys; counters_rkey
 * is 0 for them and when there is no counter region).  Addresses do not
 * change.  The client uses the new rkeys for every WR it posts from then on
 * and answers RKEY_ACK with the same epoch (req_id 0; no reply).  An RC
 * endpoint executes requests in order, so once the ACK arrives no WR with
 * an old rkey can still come from that client; the server deregisters the
 * old registrations when every client has acknowledged, or at the latest
 * RKV_ROTATE_OVERLAP_MS after the update.
 */
#define RKV_ROTATE_OVERLAP_MS 1000

struct rkv_msg_rkey_update {
	uint32_t epoch;         /* 1, 2, ... per server run */
	uint32_t index_rkey;
	uint32_t data_rkey;
	uint32_t counters_rkey;
};

struct rkv_msg_rkey_ack {
	uint32_t epoch;         /* as in the RKEY_UPDATE applied */
};

#define RKV_ERROR_TEXT_MAX 200

struct rkv_msg_error {
	int32_t status;
	char text[RKV_ERROR_TEXT_MAX]; /* NUL-terminated */
};

/* A decoded message (host order). */
struct rkv_msg {
	struct rkv_msg_hdr hdr;
	union {
		struct rkv_msg_hello hello;
		struct rkv_msg_hello_reply hello_reply;
		struct rkv_msg_chunk_alloc chunk_alloc;
		struct rkv_msg_chunk_grant chunk_grant;
		struct rkv_msg_block_return block_return;
		struct rkv_msg_chunk_retire chunk_retire;
		struct rkv_msg_ack ack;
		struct rkv_msg_stats_reply stats_reply;
		struct rkv_msg_error error;
		struct rkv_msg_counter_open counter_open;
		struct rkv_msg_counter_reply counter_reply;
		struct rkv_msg_auth_challenge auth_challenge;
		struct rkv_msg_auth_response auth_response;
		struct rkv_msg_rkey_update rkey_update;
		struct rkv_msg_rkey_ack rkey_ack;
		struct rkv_msg_fence fence;
		struct rkv_msg_grow grow;
		struct rkv_msg_grow_reply grow_reply;
	} u;
};

/*
 * Encode m (type and req_id from m->hdr; magic, version and len are filled
 * in) into buf.  Returns the wire length (<= RKV_MSG_MAX), or -EINVAL for an
 * unknown type or a count over its limit, -ENOSPC if cap is too small.
 */
int rkv_msg_encode(const struct rkv_msg *m, void *buf, size_t cap);

/*
 * Decode n received bytes.  Returns 0, -EBADMSG (too short, bad magic, bad
 * length or count, unterminated text), -EPROTO (another protocol version:
 * m->hdr.version says which), -EOPNOTSUPP (unknown type).
 */
int rkv_msg_decode(const void *buf, size_t n, struct rkv_msg *m);

#ifdef __cplusplus
}
#endif
#endif
