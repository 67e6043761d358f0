/* SPDX-License-Identifier: MIT */
/*
 * ps_internal.h - the parameter server's stored layouts (client/ps.c).
 * Tests include it to forge metadata (a tensor left "creating").
 *
 *   key "ps/<name>"        struct ps_meta (32 bytes)
 *   key "ps/<name>/<i>"    struct ps_shard_hdr (16 bytes), then the
 *                          shard's elements (float32, little-endian)
 *
 *   key "emb/<name>"       struct emb_meta (64 bytes): an embedding table
 *   key "emb/<name>/<id>"  struct ps_shard_hdr (magic PS_ROW_MAGIC, nonce =
 *                          the table's generation, version = steps
 *                          applied), then dim weights and the optimizer's
 *                          state (0, 1 or 2 times dim floats)
 *
 * Everything is host (little-endian) order, like the rest of rkv's remote
 * layouts.  The incarnation (nonce) ties shards to one create: a shard
 * whose nonce differs from the handle's is from another incarnation of the
 * name (-ESTALE).
 */
#ifndef RKV_CLIENT_PS_INTERNAL_H
#define RKV_CLIENT_PS_INTERNAL_H

#include <stdint.h>

#include "rkv_ps.h"

#define PS_META_MAGIC 0x314d5350u  /* "PSM1" */
#define PS_SHARD_MAGIC 0x31485350u /* "PSH1" */
#define PS_EMB_MAGIC 0x31454d45u   /* "EME1" */
#define PS_ROW_MAGIC 0x31575245u   /* "ERW1" */

enum ps_state {
	PS_CREATING = 1, /* metadata inserted, shards being written */
	PS_READY = 2,    /* every shard written */
	PS_DELETING = 3, /* shards being deleted */
	PS_DELETED = 4,  /* embedding tables: a tombstone keeping the gen */
};

struct ps_meta {
	uint32_t magic;        /* PS_META_MAGIC */
	uint16_t dtype;        /* enum rkv_ps_dtype */
	uint16_t state;        /* enum ps_state */
	uint64_t len;          /* elements */
	uint32_t shard_elems;
	uint32_t nonce;        /* incarnation, random, never 0 */
	uint64_t reserved;
};
_Static_assert(sizeof(struct ps_meta) == 32, "ps_meta layout");

struct ps_shard_hdr {
	uint32_t magic;        /* PS_SHARD_MAGIC */
	uint32_t nonce;        /* the tensor's incarnation */
	uint64_t version;      /* 0 at create, +1 per push */
};
_Static_assert(sizeof(struct ps_shard_hdr) == RKV_PS_SHARD_HDR,
	       "ps_shard_hdr layout");

struct emb_meta {
	uint32_t magic;        /* PS_EMB_MAGIC */
	uint16_t state;        /* PS_READY, PS_DELETING or PS_DELETED */
	uint16_t optim;        /* enum rkv_emb_optim */
	uint64_t num_rows;
	uint32_t dim;
	uint32_t gen;          /* 1 at the first create, +1 per create after */
	uint64_t seed;
	float lr, beta1, beta2, eps, init_accum, init_scale;
	uint64_t reserved;
};
_Static_assert(sizeof(struct emb_meta) == 64, "emb_meta layout");

#endif
