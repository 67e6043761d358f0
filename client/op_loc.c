/* SPDX-License-Identifier: MIT */
/*
 * op_loc.c - locating a key (the LOC_* steps of op.h), and the op's own
 * new block.
 *
 * Locate: READ both candidate buckets; the slots whose fingerprint
 * matches are candidates; READ their blocks (as many per round as fit the
 * op buffer) and check key and checksum; the first match in scan order is
 * the key's slot, handed to the kind's found(), else absent().  A verify
 * round slower than the grace period starts again: a block it read may
 * have been freed and reused meanwhile.
 */
#include "client.h"

#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "hash.h"
#include "rtime.h"

/* Checksum and key of a block read (device ops: checked on the GPU). */
int blk_decode(struct opslot *o, const char *blk, size_t size,
	       const void **v, uint32_t *vl, const struct rkv_block_hdr **h)
{
	if (o->d)
		return gpu_block_decode(o, (char *)blk, size, v, vl, h);
	return rkv_block_decode(blk, size, o->op->key, o->op->key_len, v, vl,
				h);
}

void loc_start(struct opslot *o, int with_block, uint64_t hdr_of)
{
	round_begin(o);
	if (with_block && o->nb.size > RKV_SMALL_BLOCK_MAX) {
		/* a big block goes in a round of its own (one RTT more):
		 * READs behind it in one doorbell run after it, and the
		 * round's clock would count its transfer against the grace
		 * period of what they read (a 64 MiB put under TSan: 6 s,
		 * retried until -ETIMEDOUT) */
		wr_block(o);
		o->hdr_slot = hdr_of;
		round_post(o, LOC_BLOCK);
		return;
	}
	if (with_block)
		wr_block(o);
	else if (o->nb.sum_due)
		wr_block_sum(o);
	rd_buckets(o);
	o->hdr_slot = hdr_of;
	if (hdr_of)
		rd(o, OB_HDR, data_addr(o, hdr_of), o->p->ctrl.keys.data,
		   RKV_BLOCK_HDR_SIZE);
	op_clock(o, rkv_coarse_ms());
	round_post(o, LOC_BUCKETS);
}

void loc_collect(struct opslot *o, int skip, int with_tent)
{
	o->ncand = 0;
	for (unsigned pos = 0; pos < o->npos; pos++) {
		uint64_t w = bucket_word(o, pos);

		if ((int)pos == skip || rkv_slot_empty(w) ||
		    rkv_slot_fp(w) != o->kh.fp ||
		    (!with_tent && rkv_slot_tentative(w)))
			continue;
		o->cand[o->ncand++] = (struct cand){ .pos = pos, .slot = w };
	}
}

int loc_read_cands(struct opslot *o, unsigned from, unsigned step)
{
	size_t off = 0;
	unsigned i;
	int rc;

	round_begin(o);
	for (i = from; i < o->ncand; i++) {
		struct cand *cd = &o->cand[i];
		uint32_t sz = rkv_slot_size(cd->slot);

		cd->match = 0;
		if (rkv_slot_offset(cd->slot) + sz > o->p->g.data_len) {
			cd->buf_off = UINT32_MAX; /* names no valid block */
			continue;
		}
		/* a big block is read alone, into a buffer of its size */
		if (sz > o->room && off == 0 && o->round_nwr == 0) {
			rc = op_room(o, sz);
			if (rc)
				return rc;
		}
		if (sz > o->room - off || o->round_nwr == ROUND_MAX_WR)
			break;
		cd->buf_off = (uint32_t)(OB_BLOCKS + off);
		rd_blk(o, (unsigned)(OB_BLOCKS + off), data_addr(o, cd->slot),
		       sz);
		off += sz;
	}
	o->vfrom = from;
	o->vend = i;
	if (o->round_nwr == 0)
		return i < o->ncand ? -EMSGSIZE : 0;
	round_post(o, step);
	return 1;
}

int loc_check_cands(struct opslot *o)
{
	int first = -1;

	o->bad_idx = -1;
	for (unsigned i = o->vfrom; i < o->vend; i++) {
		struct cand *cd = &o->cand[i];
		int rc;

		if (cd->buf_off == UINT32_MAX)
			continue;
		rc = blk_decode(o, o->buf + cd->buf_off,
				rkv_slot_size(cd->slot), NULL, NULL, NULL);
		if (rc == -EBADMSG || rc == -EIO) {
			if (o->bad_idx < 0)
				o->bad_idx = (int)i;
			continue;
		}
		if (rc == 0) {
			cd->match = 1;
			if (first < 0)
				first = (int)i;
		}
	}
	return first;
}

void loc_buckets(struct opslot *o)
{
	int rc;

	if (mig_fenced(o)) {
		mig_resolve(o); /* (a put's block written here is dropped) */
		return;
	}
	if (op_level_stale(o)) {
		op_retry(o); /* over every level: the key may be in the new */
		return;
	}
	if (o->kind->buckets && o->kind->buckets(o))
		return;
	loc_collect(o, -1, 0);
	o->bad_loc = -1;
	rc = o->ncand ? loc_read_cands(o, 0, LOC_VERIFY) : 0;
	if (rc < 0)
		op_finish(o, rc);
	else if (rc == 0)
		o->kind->absent(o);
}

/*
 * No candidate was the key, and the block of candidate bad failed its
 * checksum or header: torn, so the op looks again; if the same word's
 * block fails twice it is corrupt (op_corrupt).  A put or a delete then
 * replaces it when its header and key are still ours (a value scribbled
 * over, or changed by its writer while a tcp put sent it): the key can be
 * mended by writing it.  Anything else gets -EIO.
 */
static void loc_torn(struct opslot *o, int bad)
{
	struct cand *cd = &o->cand[bad];
	const char *blk = o->buf + cd->buf_off;
	size_t used;

	if (!op_corrupt(o, cd->slot)) {
		op_retry(o);
		return;
	}
	if ((o->kind == &op_put || o->kind == &op_del) && !o->d &&
	    rkv_block_hdr_check((const void *)blk, rkv_slot_size(cd->slot),
				&used) == 0 &&
	    rkv_block_key_match(blk, o->op->key, o->op->key_len) == 0) {
		o->slot_pos = cd->pos;
		o->target = bad;
		o->old_grant = 0; /* its header is not trusted: reclaimed */
		o->kind->found(o, cd);
		return;
	}
	op_finish(o, -EIO);
}

static void loc_verified(struct opslot *o)
{
	int first, rc;

	if (op_too_slow(o)) {
		op_retry(o);
		return;
	}
	first = loc_check_cands(o);
	if (o->bad_idx >= 0 && o->bad_loc < 0)
		o->bad_loc = o->bad_idx;
	if (first < 0) {
		rc = o->vend < o->ncand ?
			     loc_read_cands(o, o->vend, LOC_VERIFY) : 0;
		if (rc < 0)
			op_finish(o, rc);
		else if (rc == 0 && o->bad_loc >= 0)
			loc_torn(o, o->bad_loc);
		else if (rc == 0)
			o->kind->absent(o);
		return;
	}
	struct cand *cd = &o->cand[first];

	o->slot_pos = cd->pos;
	o->target = first;
	o->old_grant = grant_at(o, cd->buf_off);
	o->kind->found(o, cd);
}

void loc_round(struct opslot *o)
{
	if (o->step == LOC_BLOCK)
		loc_start(o, 0, o->hdr_slot);
	else if (o->step == LOC_BUCKETS)
		loc_buckets(o);
	else
		loc_verified(o);
}

/* ----------------------------------------------------- our new block */

char *new_blk_buf(const struct opslot *o)
{
	struct rkv_client *c = o->c;

	if (o->d)
		return o->d->nb; /* device staging */
	if (o->wbig)
		return o->wbig->p; /* a big block (bigbuf.c) */
	return c->new_blk + (size_t)(o - c->slots) * c->new_blk_size;
}

size_t op_value_max(const struct opslot *o)
{
	size_t m = o->c->opts.max_value;

	return o->p->g.max_value < m ? o->p->g.max_value : m;
}

size_t nb_value_cap(const struct opslot *o)
{
	size_t cap = op_nb_cap(o) - RKV_BLOCK_HDR_SIZE - o->op->key_len;
	size_t m = op_value_max(o);

	return cap < m ? cap : m;
}

void nb_drop(struct opslot *o)
{
	if (!o->nb.size)
		return;
	if (o->ins.tent) {
		/* our tentative slot may still name it (the connection broke
		 * before the withdrawal): the server's reclaim pass clears
		 * that slot and frees the block */
		o->ins.tent = 0;
		o->nb.size = 0;
		o->nb.written = 0;
		return;
	}
	space_return(o->sp, o->nb.ref.off, o->nb.size, o->nb.ref.grant);
	space_settle(o->sp, o->nb.ref.chunk);
	o->nb.size = 0;
	o->nb.written = 0;
	o->nb.zc = 0;
	o->nb.sum_due = 0;
}

/* Space for a new block of a val_len-byte value, and room for it in the
 * new-block buffer where whole (room): 0, -EAGAIN (parked until a chunk
 * comes), or -errno. */
static int nb_carve(struct opslot *o, size_t val_len, int room)
{
	uint32_t size = rkv_block_size(o->op->key_len, val_len);
	int rc;

	if (!size || val_len > op_value_max(o))
		return -EMSGSIZE;
	if (size > o->p->g.data_len)
		return -ENOSPC; /* a block larger than the server's region */
	rc = room ? op_nb_room(o, size) : size > RKV_MAX_BLOCK ? -EMSGSIZE : 0;
	if (rc)
		return rc;
	if (o->nb.size && o->nb.size != size)
		nb_drop(o);
	if (!o->nb.size) {
		rc = space_alloc(o->sp, size, &o->nb.ref);
		if (rc == -EAGAIN) {
			o->state = OP_WAIT_SPACE;
			return rc;
		}
		if (rc)
			return rc;
		o->nb.size = size;
	}
	return 0;
}

int nb_make(struct opslot *o, const void *val, size_t val_len,
	    uint64_t version)
{
	int rc = nb_carve(o, val_len, 1);

	if (rc)
		return rc;
	o->nb.zc = 0;
	o->nb.sum_due = 0;
	if (o->d) {
		if (!gpu_block_encode(o, new_blk_buf(o), val, val_len, version,
				      &rc))
			return rc;
	} else {
		rkv_block_encode(new_blk_buf(o), o->op->key, o->op->key_len,
				 val, val_len, o->p->g.client_id,
				 o->nb.ref.grant, version);
	}
	o->nb.version = version;
	o->nb.written = 0;
	return 0;
}

/*
 * A put's big value is WRITten from the caller's buffer (wr_block), not
 * copied into the new-block buffer first, where registering the caller's
 * memory is a table entry and the transport hashes what it WRITEs (tcp,
 * shm, as for a direct get); verbs would pin it per op, so it copies.
 * The slot's own new-block buffer holds the header, the key and the
 * value's head (for the cache's entry, nb_info); the padding is not
 * written (nothing reads it: the checksum ends with the value, and a
 * block's bytes are any client's to read anyway).  The value's WRITE
 * feeds o->dh (RKV_WR_DIGEST; shm hashes the block's bytes as it copies
 * them there, so the checksum is of what the block holds), and the
 * checksum field is written by the next round, before the bucket READs
 * (loc_start): the block is published only after both.  The caller keeps
 * the value unchanged until the op returns (rkv.h).
 */
int nb_make_put(struct opslot *o)
{
	const struct rkv_op *op = o->op;
	size_t pre = RKV_BLOCK_HDR_SIZE + op->key_len;
	char *buf;
	int rc;

	if (o->d || op->val_len <= INLINE_BLOCK ||
	    !rkv_tp_digests(o->c->eng.tp))
		return nb_make(o, op->val, op->val_len, 0);
	rc = nb_carve(o, op->val_len, 0);
	if (rc)
		return rc;
	if (!o->dh)
		o->dh = rkv_aligned_alloc(64, sizeof(*o->dh));
	if (!o->dh ||
	    (!o->umr && rkv_mr_reg(o->c->eng.tp, (void *)op->val, op->val_len,
				   RKV_ACCESS_LOCAL_WRITE, &o->umr))) {
		o->umr = NULL;
		return nb_make(o, op->val, op->val_len, 0);
	}
	buf = new_blk_buf(o);
	if (rkv_block_hdr_fill((void *)buf, op->key_len, op->val_len,
			       o->p->g.client_id, o->nb.ref.grant, 0) < 0)
		return -EMSGSIZE;
	memcpy(buf + RKV_BLOCK_HDR_SIZE, op->key, op->key_len);
	rkv_block_hash_start(o->dh);
	rkv_hash_update(o->dh, buf + RKV_BLOCK_SUM_OFF,
			pre - RKV_BLOCK_SUM_OFF);
	memcpy(buf + pre, op->val, BLK_HEAD);
	o->nb.zc = 1;
	o->nb.sum_due = 0;
	o->nb.version = 0;
	o->nb.written = 0;
	return 0;
}

uint64_t nb_slot_word(const struct opslot *o, uint64_t prev)
{
	return rkv_slot_make(o->nb.ref.off / RKV_BLOCK_ALIGN,
			     o->nb.size / RKV_BLOCK_ALIGN, o->kh.fp,
			     rkv_slot_version(prev) + 1);
}

const struct blk_info *blk_info_of(struct blk_info *bi, const char *blk,
				   size_t avail)
{
	const struct rkv_block_hdr *h = (const void *)blk;
	size_t voff = RKV_BLOCK_HDR_SIZE + h->key_len;
	size_t n = h->val_len < BLK_HEAD ? h->val_len : BLK_HEAD;

	memset(bi, 0, sizeof(*bi));
	bi->version = h->version;
	bi->grant = h->grant;
	bi->val_len = h->val_len;
	if (voff + n > avail)
		return NULL;
	memcpy(bi->head, blk + voff, n);
	return bi;
}

const struct blk_info *nb_info(const struct opslot *o, struct blk_info *bi)
{
	if (o->d)
		return NULL; /* the value's head is on the GPU */
	return blk_info_of(bi, new_blk_buf(o), o->nb.pub_size);
}

void nb_published(struct opslot *o)
{
	space_settle(o->sp, o->nb.ref.chunk);
	o->nb.pub_size = o->nb.size;
	o->nb.size = 0;
	o->nb.written = 0;
	o->nb.zc = 0;
	o->nb.sum_due = 0;
}

/* The block the replaced slot word old named is unlinked: return it,
 * naming its grant (o->old_grant, from its header).  Unknown (0): the
 * server could not accept it, so it waits for a reclaim pass instead. */
void unlink_block(struct opslot *o, uint64_t old)
{
	if (!rkv_slot_empty(old) && o->old_grant)
		space_return(o->sp, rkv_slot_offset(old), rkv_slot_size(old),
			     o->old_grant);
	o->old_grant = 0;
}

uint32_t grant_at(const struct opslot *o, unsigned off)
{
	const struct rkv_block_hdr *h = (const void *)(o->buf + off);

	return h->grant;
}
