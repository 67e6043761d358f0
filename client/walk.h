/* SPDX-License-Identifier: MIT */
/*
 * walk.h - reading the blocks a server's slot words name, one-sided:
 * what the walks over a whole index share (scan.c reads every key of
 * every server; migrate.c reads the keys of the partitions it moves).
 * A walk READs a run of slot words, then the blocks of the live ones in
 * one doorbell, and decides from its own second look at the words which
 * blocks still count.
 */
#ifndef RKV_CLIENT_WALK_H
#define RKV_CLIENT_WALK_H

#include <stdint.h>

#include "client.h"

/* A slot of a walk: its index, the word seen, and where its block went
 * in the walk's block buffer. */
struct walk_item {
	uint64_t i, w;
	uint32_t off;
};

/* A block a walk READ, checked. */
struct walk_blk {
	const struct rkv_block_hdr *h;
	const char *key;
	const void *val;
	uint32_t val_len;
};

/* Whether slot word w names a block inside p's data region. */
static inline int walk_block_ok(const struct peer *p, uint64_t w)
{
	uint32_t size = rkv_slot_size(w);

	return size && rkv_slot_offset(w) + size <= p->g.data_len;
}

/* Fill wr[0..n) with READs of the blocks of it[0..n) (each
 * walk_block_ok) on p into buf (lkey), one after the other; it[k].off
 * says where.  Returns the bytes they take. */
uint32_t walk_block_wrs(const struct peer *p, uint32_t lkey, char *buf,
			struct walk_item *it, unsigned n, struct rkv_wr *wr);

/* Check the block of it that those READs brought into buf: 0 with *b
 * set, or -EBADMSG (torn, reused or garbage). */
int walk_block(const char *buf, const struct walk_item *it,
	       struct walk_blk *b);

#endif
