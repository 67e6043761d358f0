/* SPDX-License-Identifier: MIT */
/* walk.c - reading the blocks slot words name (walk.h). */
#include "walk.h"

#include <errno.h>

#include "alloc.h"

int walk_buf_room(struct rkv_client *c, char **buf, size_t *cap,
		  struct rkv_mr **mr, size_t size, size_t floor)
{
	size_t want = size < floor ? floor :
		      (size + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1);
	int rc;

	if (*buf && size <= *cap)
		return 0;
	if (*mr)
		rkv_mr_dereg(*mr);
	*mr = NULL;
	rkv_free(*buf);
	*cap = 0;
	*buf = rkv_malloc(want);
	if (!*buf)
		return -ENOMEM;
	rc = rkv_mr_reg(c->eng.tp, *buf, want, RKV_ACCESS_LOCAL_WRITE, mr);
	if (rc) {
		rkv_free(*buf);
		*buf = NULL;
		return rc;
	}
	*cap = want;
	return 0;
}

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
