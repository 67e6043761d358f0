/* SPDX-License-Identifier: MIT */
/*
 * space.c - the data-region space manager.
 *
 * The region is cut into 64-byte units (RKV_BLOCK_ALIGN).  Each unit is in
 * one of three states, kept in two bitmaps:
 *
 *   alloc grace
 *     0     0    free: may be granted
 *     1     0    allocated: inside a granted chunk, carved or not
 *     1     1    in grace: returned, waiting grace_ms before it is free
 *
 * Clients get chunks (contiguous runs found next-fit from a cursor, so
 * grants sweep the region instead of hammering its start) and carve blocks
 * from them themselves; unlinked blocks come back in BLOCK_RETURN batches
 * and wait in a FIFO grace queue: a reader that started before the unlink
 * may still be reading the block, and it is allowed to finish for
 * grace_ms.  Entries are appended with non-decreasing stamps, so the queue
 * is ordered by expiry and rkv_space_tick only looks at its head.
 *
 * A return is accepted only when every unit is allocated and none is in
 * grace; anything else is a duplicate (the same block returned twice, or a
 * block the rebuild below already freed) and is refused without changing
 * state.
 *
 * Rebuild after a client death: the dead client's orphan chunks may hold
 * blocks it carved but never published, or published blocks still named by
 * the index.  Every allocated unit of an orphan chunk that no slot names and
 * no live client's held chunk covers goes to the grace queue.
 *
 * Nothing here reads a clock: callers pass now_ms (unit tests use a fake).
 */
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "server_internal.h"

#define UNIT RKV_BLOCK_ALIGN
#define TICK_MAX 4096 /* grace entries freed per tick (bounded work) */

struct gentry {
	uint64_t unit;      /* first unit */
	uint64_t n;         /* units */
	uint64_t expire_ms; /* free at or after this time */
};

struct rkv_space {
	uint64_t len;         /* bytes */
	uint64_t units;
	uint64_t nwords;
	uint64_t grace_ms;
	uint64_t *alloc;      /* 1: granted or in grace */
	uint64_t *grace;      /* 1: in grace (subset of alloc) */
	uint64_t cursor;      /* next-fit start, in units */
	uint64_t free_units;
	uint64_t grace_units;
	struct gentry *q;     /* grace FIFO: q[qhead..qtail) */
	size_t qhead, qtail, qcap;
	struct rkv_space_stats st;
};

/* ------------------------------------------------------------- bitmaps */

/* Mask of bits [i % 64, i % 64 + cnt) of i's word; *cnt clipped to it. */
static uint64_t word_span(uint64_t i, uint64_t end, uint64_t *cnt)
{
	uint64_t b = i % 64, c = 64 - b;

	if (c > end - i)
		c = end - i;
	*cnt = c;
	return (c == 64 ? ~0ull : ((1ull << c) - 1)) << b;
}

static void range_set(uint64_t *bm, uint64_t lo, uint64_t n)
{
	uint64_t c;

	for (uint64_t i = lo; i < lo + n; i += c)
		bm[i / 64] |= word_span(i, lo + n, &c);
}

static void range_clr(uint64_t *bm, uint64_t lo, uint64_t n)
{
	uint64_t c;

	for (uint64_t i = lo; i < lo + n; i += c)
		bm[i / 64] &= ~word_span(i, lo + n, &c);
}

static int range_all(const uint64_t *bm, uint64_t lo, uint64_t n)
{
	uint64_t c, m;

	for (uint64_t i = lo; i < lo + n; i += c) {
		m = word_span(i, lo + n, &c);
		if ((bm[i / 64] & m) != m)
			return 0;
	}
	return 1;
}

static int range_any(const uint64_t *bm, uint64_t lo, uint64_t n)
{
	uint64_t c;

	for (uint64_t i = lo; i < lo + n; i += c)
		if (bm[i / 64] & word_span(i, lo + n, &c))
			return 1;
	return 0;
}

/* First i in [from, to) whose bit equals val, else to. */
static uint64_t find_bit(const uint64_t *bm, uint64_t from, uint64_t to,
			 int val)
{
	uint64_t i = from;

	while (i < to) {
		uint64_t w = i / 64;
		uint64_t bits = (val ? bm[w] : ~bm[w]) & (~0ull << (i % 64));

		if (bits) {
			uint64_t r = w * 64 + (uint64_t)__builtin_ctzll(bits);

			return r < to ? r : to;
		}
		i = (w + 1) * 64;
	}
	return to;
}

/* ----------------------------------------------------------- lifecycle */

int rkv_space_create(uint64_t len, uint64_t grace_ms, struct rkv_space **out)
{
	struct rkv_space *sp;

	*out = NULL;
	if (len == 0 || len % UNIT || len > RKV_MAX_DATA_REGION)
		return -EINVAL;
	sp = rkv_calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	sp->len = len;
	sp->units = len / UNIT;
	sp->nwords = (sp->units + 63) / 64;
	sp->grace_ms = grace_ms;
	sp->free_units = sp->units;
	sp->alloc = rkv_calloc(sp->nwords, sizeof(uint64_t));
	if (!sp->alloc)
		goto err_free_sp;
	sp->grace = rkv_calloc(sp->nwords, sizeof(uint64_t));
	if (!sp->grace)
		goto err_free_alloc;
	sp->st.len = len;
	*out = sp;
	return 0;

err_free_alloc:
	rkv_free(sp->alloc);
err_free_sp:
	rkv_free(sp);
	return -ENOMEM;
}

void rkv_space_destroy(struct rkv_space *sp)
{
	if (!sp)
		return;
	rkv_free(sp->q);
	rkv_free(sp->grace);
	rkv_free(sp->alloc);
	rkv_free(sp);
}

/* --------------------------------------------------------------- grant */

/* A run of n free units starting in [lo, hi), or UINT64_MAX. */
static uint64_t find_run(const struct rkv_space *sp, uint64_t lo, uint64_t hi,
			 uint64_t n)
{
	uint64_t p = lo;

	while (p < hi) {
		uint64_t z = find_bit(sp->alloc, p, hi, 0);

		if (z >= hi || z + n > sp->units)
			break;
		uint64_t o = find_bit(sp->alloc, z, z + n, 1);

		if (o == z + n)
			return z;
		p = o;
	}
	return UINT64_MAX;
}

int rkv_space_grant(struct rkv_space *sp, uint64_t bytes, uint64_t *offset)
{
	uint64_t n, at;

	if (bytes == 0 || bytes % UNIT || bytes > sp->len)
		return -EINVAL;
	n = bytes / UNIT;
	if (n > sp->free_units)
		return -ENOSPC;
	/* next fit: from the cursor to the end, then from the start */
	at = find_run(sp, sp->cursor, sp->units, n);
	if (at == UINT64_MAX && sp->cursor > 0)
		at = find_run(sp, 0, sp->cursor, n);
	if (at == UINT64_MAX)
		return -ENOSPC;
	range_set(sp->alloc, at, n);
	sp->free_units -= n;
	sp->cursor = at + n < sp->units ? at + n : 0;
	sp->st.grants++;
	*offset = at * UNIT;
	return 0;
}

/* --------------------------------------------------------------- grace */

static int q_push(struct rkv_space *sp, uint64_t unit, uint64_t n,
		  uint64_t now_ms)
{
	if (sp->qtail == sp->qcap) {
		if (sp->qhead > 0 && sp->qhead >= sp->qcap / 2) {
			memmove(sp->q, sp->q + sp->qhead,
				(sp->qtail - sp->qhead) * sizeof(*sp->q));
			sp->qtail -= sp->qhead;
			sp->qhead = 0;
		} else {
			size_t cap = sp->qcap ? sp->qcap * 2 : 256;
			struct gentry *q = rkv_realloc(sp->q, cap * sizeof(*q));

			if (!q)
				return -ENOMEM;
			sp->q = q;
			sp->qcap = cap;
		}
	}
	sp->q[sp->qtail++] = (struct gentry){ .unit = unit, .n = n,
					      .expire_ms = now_ms + sp->grace_ms };
	range_set(sp->grace, unit, n);
	sp->grace_units += n;
	return 0;
}

int rkv_space_return(struct rkv_space *sp, uint64_t offset, uint64_t len,
		     uint64_t now_ms)
{
	uint64_t u, n;
	int rc;

	if (len == 0 || len % UNIT || offset % UNIT || len > RKV_MAX_BLOCK ||
	    offset >= sp->len || len > sp->len - offset) {
		sp->st.bad_returns++;
		return -EINVAL;
	}
	u = offset / UNIT;
	n = len / UNIT;
	if (!range_all(sp->alloc, u, n) || range_any(sp->grace, u, n)) {
		sp->st.bad_returns++;
		return -EALREADY;
	}
	rc = q_push(sp, u, n, now_ms);
	if (rc)
		return rc;
	sp->st.returns++;
	return 0;
}

uint64_t rkv_space_tick(struct rkv_space *sp, uint64_t now_ms)
{
	uint64_t freed = 0;
	unsigned k = 0;

	while (sp->qhead < sp->qtail && k < TICK_MAX &&
	       sp->q[sp->qhead].expire_ms <= now_ms) {
		const struct gentry *e = &sp->q[sp->qhead++];

		range_clr(sp->grace, e->unit, e->n);
		range_clr(sp->alloc, e->unit, e->n);
		sp->grace_units -= e->n;
		sp->free_units += e->n;
		freed += e->n * UNIT;
		k++;
	}
	if (sp->qhead == sp->qtail)
		sp->qhead = sp->qtail = 0;
	return freed;
}

/* ------------------------------------------------------------- rebuild */

/* Clip a byte extent to the region, in units; 0 when nothing is left. */
static uint64_t clip(const struct rkv_space *sp, uint64_t off, uint64_t len,
		     uint64_t *unit)
{
	uint64_t lo = (off + UNIT - 1) / UNIT, hi;

	*unit = 0;
	if (off >= sp->len || len == 0)
		return 0;
	if (len > sp->len - off)
		len = sp->len - off;
	hi = (off + len) / UNIT;
	if (hi <= lo)
		return 0;
	*unit = lo;
	return hi - lo;
}

struct mark_ctx {
	const struct rkv_space *sp;
	uint64_t *bm;
};

static void mark_live(uint64_t off, uint32_t len, void *arg)
{
	struct mark_ctx *m = arg;
	uint64_t u, n = clip(m->sp, off, len, &u);

	if (n)
		range_set(m->bm, u, n);
}

/*
 * First unit in [from, to) that is (val = 1) or is not (val = 0) a rebuild
 * candidate: allocated, not in grace, not live.  Word at a time.
 */
static uint64_t find_cand(const struct rkv_space *sp, const uint64_t *live,
			  uint64_t from, uint64_t to, int val)
{
	uint64_t i = from;

	while (i < to) {
		uint64_t w = i / 64;
		uint64_t c = sp->alloc[w] & ~sp->grace[w] & ~live[w];
		uint64_t bits = (val ? c : ~c) & (~0ull << (i % 64));

		if (bits) {
			uint64_t r = w * 64 + (uint64_t)__builtin_ctzll(bits);

			return r < to ? r : to;
		}
		i = (w + 1) * 64;
	}
	return to;
}

int rkv_space_rebuild(struct rkv_space *sp,
		      const struct rkv_space_extent *orphans, size_t norphans,
		      const struct rkv_space_extent *keep, size_t nkeep,
		      const uint64_t *slots, uint64_t nslots, uint64_t now_ms,
		      uint64_t *freed)
{
	struct mark_ctx m = { .sp = sp };
	uint64_t total = 0;
	int rc = 0;

	*freed = 0;
	m.bm = rkv_calloc(sp->nwords, sizeof(uint64_t));
	if (!m.bm)
		return -ENOMEM;
	rkv_srv_index_scan(slots, nslots, mark_live, &m);
	for (size_t i = 0; i < nkeep; i++) {
		uint64_t u, n = clip(sp, keep[i].offset, keep[i].len, &u);

		if (n)
			range_set(m.bm, u, n);
	}
	for (size_t i = 0; i < norphans && rc == 0; i++) {
		uint64_t u, n = clip(sp, orphans[i].offset, orphans[i].len, &u);
		uint64_t p = u, end = u + n;

		while (p < end && rc == 0) {
			uint64_t start = find_cand(sp, m.bm, p, end, 1);
			uint64_t stop = find_cand(sp, m.bm, start, end, 0);

			if (start == end)
				break;
			rc = q_push(sp, start, stop - start, now_ms);
			if (rc == 0)
				total += (stop - start) * UNIT;
			p = stop;
		}
	}
	rkv_free(m.bm);
	sp->st.rebuilds++;
	sp->st.rebuilt_bytes += total;
	*freed = total;
	return rc;
}

void rkv_space_get_stats(const struct rkv_space *sp,
			 struct rkv_space_stats *st)
{
	*st = sp->st;
	st->free = sp->free_units * UNIT;
	st->grace = sp->grace_units * UNIT;
}
