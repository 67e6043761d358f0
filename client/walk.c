/* SPDX-License-Identifier: MIT */
/* walk.c - reading the blocks slot words name (walk.h). */
#include "walk.h"

uint32_t walk_block_wrs(const struct peer *p, uint32_t lkey, char *buf,
			struct walk_item *it, unsigned n, struct rkv_wr *wr)
{
	uint32_t off = 0;

	for (unsigned k = 0; k < n; k++) {
		uint32_t size = rkv_slot_size(it[k].w);

		it[k].off = off;
		wr[k] = (struct rkv_wr){
			.opcode = RKV_WR_READ, .local = buf + off,
			.length = size, .lkey = lkey,
			.remote_addr = p->g.data_addr + rkv_slot_offset(it[k].w),
			.rkey = p->ctrl.keys.data };
		off += size;
	}
	return off;
}

int walk_block(const char *buf, const struct walk_item *it,
	       struct walk_blk *b)
{
	int rc = rkv_block_decode(buf + it->off, rkv_slot_size(it->w), NULL, 0,
				  &b->val, &b->val_len, &b->h);

	b->key = buf + it->off + RKV_BLOCK_HDR_SIZE;
	return rc;
}
