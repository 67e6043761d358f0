/* SPDX-License-Identifier: MIT */
/*
 * bigbuf.c - registered buffers for blocks larger than a slot's own.
 *
 * Each op slot owns an op buffer and a new-block buffer in the client's
 * registered region, sized for blocks up to INLINE_BLOCK (256 KiB less
 * 64 bytes; client.h).  A value above that (up to the server's
 * --max-value, 64 MiB by default) is read into, or built in, a buffer
 * registered for the op: op_room switches the slot's op buffer to one
 * (carrying the words and buckets already read), op_nb_room its
 * new-block buffer.  Both go back when the slot is handed back
 * (op_big_release), never while a round is in flight: a slot is handed
 * back only after its last round completed.  A replicated write's leg
 * (op_repl.c) has one too while a copy it verifies or the block it
 * installs is big (leg_room); it goes back with the slot's, or when the
 * leg's last round is back.  The client keeps up to
 * BIG_KEEP idle buffers for the next big op and frees the rest, so a
 * stream of big puts or gets registers memory once, not per op.  A scan
 * and a migration hold one of the pool's buffers for the blocks they read
 * (bigbuf_hold), grown to the largest block they meet.
 */
#include "client.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc.h"

#define BIG_KEEP 2u              /* idle buffers kept */
#define BIG_ROUND (1u << 20)     /* sizes are rounded up to a MiB */

static void big_free(struct bigbuf *b)
{
	if (b->mr)
		rkv_mr_dereg(b->mr);
	if (b->p)
		munmap(b->p, b->len);
	memset(b, 0, sizeof(*b));
}

/* An idle buffer of at least len bytes (not over four times that), or a
 * new one.  NULL: out of memory or registration refused. */
struct bigbuf *bigbuf_get(struct rkv_client *c, size_t len)
{
	struct bigbuf *best = NULL, *slot = NULL;
	size_t want = (len + BIG_ROUND - 1) & ~(size_t)(BIG_ROUND - 1);

	for (unsigned i = 0; i < c->nbig; i++) {
		struct bigbuf *b = &c->big[i];

		if (!b->p) {
			if (!slot)
				slot = b;
			continue;
		}
		if (b->busy || b->len < len || b->len / 4 > len)
			continue;
		if (!best || b->len < best->len)
			best = b;
	}
	if (best) {
		best->busy = 1;
		return best;
	}
	if (!slot)
		return NULL; /* cannot happen: 2 per slot, a scan's, BIG_KEEP */
	slot->p = mmap(NULL, want, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (slot->p == MAP_FAILED) {
		slot->p = NULL;
		return NULL;
	}
	slot->len = want;
	if (rkv_mr_reg(c->eng.tp, slot->p, want, RKV_ACCESS_LOCAL_WRITE,
		       &slot->mr)) {
		slot->mr = NULL;
		big_free(slot);
		return NULL;
	}
	slot->busy = 1;
	return slot;
}

void bigbuf_put(struct rkv_client *c, struct bigbuf *b)
{
	unsigned idle = 0;

	b->busy = 0;
	for (unsigned i = 0; i < c->nbig; i++)
		idle += c->big[i].p && !c->big[i].busy;
	while (idle > BIG_KEEP) {
		struct bigbuf *small = NULL;

		for (unsigned i = 0; i < c->nbig; i++) {
			struct bigbuf *x = &c->big[i];

			if (x->p && !x->busy && (!small || x->len < small->len))
				small = x;
		}
		big_free(small);
		idle--;
	}
}

int bigbuf_init(struct rkv_client *c)
{
	c->nbig = (2 + c->nlegs) * c->nslots + 1 + BIG_KEEP + 1;
	c->big = rkv_calloc(c->nbig, sizeof(*c->big));
	return c->big ? 0 : -ENOMEM;
}

void bigbuf_fini(struct rkv_client *c)
{
	for (unsigned i = 0; c->big && i < c->nbig; i++)
		big_free(&c->big[i]);
	rkv_free(c->big);
	c->big = NULL;
	c->nbig = 0;
}

/*
 * An op buffer of the OB_* layout (*buf, its key *lkey, *cap bytes past
 * OB_BLOCKS) switched to the pool's buffer *big, grown to hold room bytes
 * past OB_BLOCKS, the words and buckets already read carried over; an op
 * slot's and a leg's alike.  0, -EMSGSIZE or -ENOMEM.
 */
static int ob_grow(struct rkv_client *c, struct bigbuf **big, char **buf,
		   uint32_t *lkey, size_t *cap, size_t room)
{
	char head[OB_BLOCKS]; /* the words and buckets read, carried over */
	int rc;

	if (room <= *cap)
		return 0;
	if (room > RKV_MAX_BLOCK)
		return -EMSGSIZE;
	memcpy(head, *buf, OB_BLOCKS);
	rc = bigbuf_hold(c, big, OB_BLOCKS + room);
	if (rc)
		return rc;
	memcpy((*big)->p, head, OB_BLOCKS);
	*buf = (*big)->p;
	*lkey = (*big)->mr->lkey;
	*cap = (*big)->len - OB_BLOCKS;
	return 0;
}

/* ... and back to its own (own, own_lkey): *big goes back to the pool. */
static void ob_shrink(struct rkv_client *c, struct bigbuf **big, char **buf,
		      uint32_t *lkey, size_t *cap, char *own, uint32_t own_lkey)
{
	if (!*big)
		return;
	bigbuf_put(c, *big);
	*big = NULL;
	*buf = own;
	*lkey = own_lkey;
	*cap = c->op_buf_size - OB_BLOCKS;
}

int op_room(struct opslot *o, size_t room)
{
	if (o->d && room > o->room)
		return -EMSGSIZE; /* device staging is sized for inline */
	return ob_grow(o->c, &o->rbig, &o->buf, &o->lkey, &o->room, room);
}

int bigbuf_hold(struct rkv_client *c, struct bigbuf **b, size_t len)
{
	struct bigbuf *n;

	if (*b && (*b)->len >= len)
		return 0;
	n = bigbuf_get(c, len);
	if (!n)
		return -ENOMEM;
	if (*b)
		bigbuf_put(c, *b);
	*b = n;
	return 0;
}

int op_nb_room(struct opslot *o, size_t size)
{
	if (size <= o->c->new_blk_size)
		return 0;
	if (o->d || size > RKV_MAX_BLOCK)
		return -EMSGSIZE;
	return bigbuf_hold(o->c, &o->wbig, size);
}

size_t op_nb_cap(const struct opslot *o)
{
	return o->wbig ? o->wbig->len : o->c->new_blk_size;
}

int leg_room(struct leg *l, size_t room)
{
	return ob_grow(l->o->c, &l->big, &l->buf, &l->lkey, &l->room, room);
}

void leg_big_release(struct leg *l)
{
	if (!l->busy)
		ob_shrink(l->o->c, &l->big, &l->buf, &l->lkey, &l->room,
			  l->own_buf, l->own_lkey);
}

void op_big_release(struct opslot *o)
{
	for (unsigned i = 0; o->leg && i < o->c->nlegs; i++)
		leg_big_release(&o->leg[i]);
	ob_shrink(o->c, &o->rbig, &o->buf, &o->lkey, &o->room, o->own_buf,
		  o->own_lkey);
	if (o->wbig) {
		bigbuf_put(o->c, o->wbig);
		o->wbig = NULL;
	}
	if (o->umr) {
		rkv_mr_dereg(o->umr);
		o->umr = NULL;
	}
}
