/* SPDX-License-Identifier: MIT */
/*
 * chunks.c - chunks and block returns of one server (chunks.h).  Every
 * message goes through the control layer (ctrl_chunk_alloc,
 * ctrl_chunk_retire, ctrl_block_return).
 */
#include "chunks.h"

#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "rtime.h"

#define FIRST_CHUNK 16384u
/* A block over the chunk size is asked for with room for more like it,
 * up to this many chunks' worth and a 64th of the server's region (at
 * least the one block): a run of big puts then asks once every few
 * blocks, not once each, and no client holds much of a small server. */
#define BIG_AHEAD 8u
#define BIG_AHEAD_SHARE 64u

void space_init(struct space *sp, struct peer *p)
{
	memset(sp, 0, sizeof(*sp));
	sp->p = p;
}

void space_fini(struct space *sp)
{
	rkv_free(sp->ret);
	sp->ret = NULL;
	sp->ret_n = sp->ret_cap = 0;
}

static void retire_if_done(struct space *sp, int ci)
{
	struct chunk *ch = &sp->chunk[ci];

	if (!ch->in_use || ch->active || ch->pending)
		return;
	if (ctrl_chunk_retire(&sp->p->ctrl, ch->off, ch->len) == 0)
		ch->in_use = 0; /* else retried from space_tick */
}

/* The unwritten tail of chunk ch goes back (a full or departing chunk),
 * in pieces no longer than a small block: nobody ever read it, so it needs
 * no big grace period (an extent over RKV_SMALL_BLOCK_MAX gets one). */
static void return_tail(struct space *sp, struct chunk *ch)
{
	uint64_t t = ch->off + ch->used, end = ch->off + ch->len;

	while (t < end) {
		uint32_t n = (uint32_t)(end - t > RKV_SMALL_BLOCK_MAX ?
						RKV_SMALL_BLOCK_MAX :
						end - t);

		space_return(sp, t, n, ch->grant);
		t += n;
	}
	ch->used = ch->len;
}

static void take_grant(struct space *sp, const struct rkv_msg_chunk_grant *g)
{
	for (unsigned k = 0; k < CHUNKS_MAX; k++) {
		struct chunk *ch = &sp->chunk[k];

		if (ch->in_use)
			continue;
		sp->busy_since_ms = 0;
		*ch = (struct chunk){ .off = g->offset, .len = g->len,
				      .grant = g->grant, .active = 1,
				      .in_use = 1 };
		sp->p->link.eng->st->chunks++;
		return;
	}
}

/* No grant: remember why, and when to ask again. */
static void no_grant(struct space *sp, int st)
{
	uint64_t now = rkv_now_ms();

	sp->err = st ? st : -EPROTO;
	sp->err_ms = now + 20;
	if (st == -EBUSY) {
		/* full, but space is in its grace period: ask again
		 * shortly, for at most a (big block's) grace period */
		if (!sp->busy_since_ms)
			sp->busy_since_ms = now;
		sp->err_ms = now + 5;
		if (now - sp->busy_since_ms > sp->p->g.big_grace_ms + 100u)
			sp->err = -ENOSPC;
	}
}

static void grant_done(void *arg, const struct rkv_msg *m, int err)
{
	struct space *sp = arg;
	int st, ahead;

	ahead = sp->chunk_ahead;
	sp->chunk_req = 0;
	sp->chunk_ahead = 0;
	if (!m)
		st = err;
	else if (m->hdr.type == RKV_MSG_CHUNK_GRANT)
		st = m->u.chunk_grant.status;
	else
		st = m->hdr.type == RKV_MSG_ERROR ? m->u.error.status : -EPROTO;
	if (st == -EPERM) /* read-only client: no chunks */
		st = -EACCES;
	if (st == 0 && m->hdr.type == RKV_MSG_CHUNK_GRANT &&
	    m->u.chunk_grant.len >= RKV_BLOCK_ALIGN &&
	    m->u.chunk_grant.offset + m->u.chunk_grant.len <= sp->p->g.data_len)
		take_grant(sp, &m->u.chunk_grant);
	else if (!ahead)
		no_grant(sp, st);
	/* (a refused ask ahead is no error: whoever needs the space asks
	 * again and gets the answer itself) */
	if (sp->ready)
		sp->ready(sp->ready_arg, sp);
}

/* Ask for a chunk of at least size bytes, unless one is being asked for
 * or every chunk record is taken. */
static void ask(struct space *sp, uint32_t size)
{
	unsigned free_rec = 0;
	uint32_t csz = sp->p->g.chunk_size, want;

	for (unsigned i = 0; i < CHUNKS_MAX; i++)
		free_rec += !sp->chunk[i].in_use;
	if (sp->chunk_req || !free_rec)
		return;
	if (!sp->chunk_next)
		sp->chunk_next = csz < FIRST_CHUNK ? csz : FIRST_CHUNK;
	want = size > sp->chunk_next ? size : sp->chunk_next;
	if (size > csz) {
		uint64_t room = (uint64_t)BIG_AHEAD * csz,
			 share = sp->p->g.data_len / BIG_AHEAD_SHARE;

		if (room > share)
			room = share;
		if (room > RKV_CHUNK_ALLOC_MAX)
			room = RKV_CHUNK_ALLOC_MAX;
		if (room / size > 1)
			want = (uint32_t)(room / size * size);
	}
	if (ctrl_chunk_alloc(&sp->p->ctrl, want, size, grant_done, sp) == 0) {
		sp->chunk_req = 1;
		if (sp->chunk_next < csz / 2)
			sp->chunk_next *= 2;
		else
			sp->chunk_next = csz;
	}
}

/*
 * A big block was just carved: when no active chunk has room for another
 * of its size, ask for the next grant now, so that it comes while this
 * block is written rather than after the next put asks (the control round
 * trip was a fifth of a 4 MiB put on shm).  Only for blocks of at most a
 * BIG_AHEAD_SHARE-th of the region: a client holds at most two such
 * grants' room it has not used.
 */
static void ask_ahead(struct space *sp, uint32_t size)
{
	if (sp->chunk_req || sp->err ||
	    size > sp->p->g.data_len / BIG_AHEAD_SHARE)
		return;
	for (unsigned i = 0; i < CHUNKS_MAX; i++) {
		const struct chunk *ch = &sp->chunk[i];

		if (ch->in_use && ch->active && ch->len - ch->used >= size)
			return;
	}
	ask(sp, size);
	sp->chunk_ahead = sp->chunk_req;
}

int space_alloc(struct space *sp, uint32_t size, struct blk_ref *b)
{
	uint64_t now = rkv_now_ms();

	if (sp->p->link.dead)
		return sp->p->link.dead;
	for (unsigned i = 0; i < CHUNKS_MAX; i++) {
		struct chunk *ch = &sp->chunk[i];

		if (!ch->in_use || !ch->active)
			continue;
		if (ch->len - ch->used >= size) {
			*b = (struct blk_ref){ .off = ch->off + ch->used,
					       .chunk = (int)i,
					       .grant = ch->grant };
			ch->used += size;
			ch->pending++;
			if (size > sp->p->g.chunk_size)
				ask_ahead(sp, size);
			return 0;
		}
		/* a block over the chunk size gets a grant of its own: a
		 * chunk with room left stays for the next small block (a
		 * full one, such as a big block's own, retires) */
		if (size > sp->p->g.chunk_size && ch->used < ch->len)
			continue;
		/* full: hand the unwritten tail back, retire when settled */
		ch->active = 0;
		return_tail(sp, ch);
		retire_if_done(sp, (int)i);
	}
	if (sp->err && now < sp->err_ms)
		return sp->err == -EBUSY ? -EAGAIN : sp->err;
	sp->err = 0;
	ask(sp, size);
	return -EAGAIN;
}

void space_settle(struct space *sp, int ci)
{
	if (ci < 0 || ci >= CHUNKS_MAX || !sp->chunk[ci].in_use)
		return;
	if (sp->chunk[ci].pending)
		sp->chunk[ci].pending--;
	retire_if_done(sp, ci);
}

void space_return(struct space *sp, uint64_t off, uint32_t size,
		  uint32_t grant)
{
	if (sp->ret_n == sp->ret_cap) {
		unsigned cap = sp->ret_cap ? sp->ret_cap * 2 : 256;
		struct rkv_extent *r = rkv_realloc(sp->ret, cap * sizeof(*r));

		if (!r)
			return; /* left to the server's reclaim pass */
		sp->ret = r;
		sp->ret_cap = cap;
	}
	if (sp->ret_n == 0)
		sp->ret_oldest_ms = rkv_now_ms();
	sp->ret[sp->ret_n++] = (struct rkv_extent){ .offset = off, .len = size,
						     .grant = grant };
}

static void flush_returns(struct space *sp)
{
	while (sp->ret_n && !sp->p->link.dead) {
		unsigned n = sp->ret_n < RKV_BLOCK_RETURN_MAX ?
				     sp->ret_n : RKV_BLOCK_RETURN_MAX;

		if (ctrl_block_return(&sp->p->ctrl, sp->ret, n))
			return;
		memmove(sp->ret, sp->ret + n,
			(sp->ret_n - n) * sizeof(sp->ret[0]));
		sp->ret_n -= n;
		sp->p->link.eng->st->blocks_returned += n;
		sp->ret_oldest_ms = rkv_now_ms();
	}
}

void space_tick(struct space *sp, uint64_t now_ms)
{
	uint32_t grace = sp->p->g.grace_ms;
	uint64_t age = grace / 4 < 100 ? grace / 4 : 100;

	if (sp->p->link.dead)
		return;
	if (sp->ret_n && (sp->ret_n >= RKV_BLOCK_RETURN_MAX ||
			  now_ms - sp->ret_oldest_ms >= age))
		flush_returns(sp);
	for (int i = 0; i < CHUNKS_MAX; i++)
		retire_if_done(sp, i);
}

int space_asking(const struct space *sp)
{
	return sp->chunk_req;
}

void space_leave(struct space *sp)
{
	for (int k = 0; k < CHUNKS_MAX; k++) {
		struct chunk *ch = &sp->chunk[k];

		if (ch->in_use && ch->active && ch->used < ch->len) {
			ch->active = 0;
			return_tail(sp, ch);
		}
		if (ch->in_use)
			ch->active = 0;
	}
}

unsigned space_drain(struct space *sp)
{
	unsigned left;

	if (!sp->p || !sp->p->link.ep || sp->p->link.dead)
		return 0;
	flush_returns(sp);
	for (int k = 0; k < CHUNKS_MAX; k++)
		retire_if_done(sp, k);
	left = sp->ret_n;
	for (int k = 0; k < CHUNKS_MAX; k++)
		left += sp->chunk[k].in_use && !sp->chunk[k].pending;
	return left + ctrl_busy(&sp->p->ctrl);
}
