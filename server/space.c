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
 * grace_ms.  An extent longer than RKV_SMALL_BLOCK_MAX (a big block, or a
 * reclaimed run that may hold one) waits big_grace_ms in a second FIFO: a
 * big read takes longer, and clients allow a round that read one big
 * block that long.  Entries are appended with non-decreasing stamps, so
 * each queue is ordered by expiry and rkv_space_tick only looks at the
 * heads.
 *
 * Every grant gets an id (never 0, unique per run) and owns its units
 * until a later grant covers them; the owner map is a sorted array of
 * boundaries (first unit, grant id), at most two per grant still on it.
 * A return names the grant its block was carved from (the block header
 * carries it) and is accepted only when every unit is allocated, not in
 * grace, and still owned by that grant.  Anything else changes nothing: a
 * return that comes late (after a reclaim freed the units, even after
 * they were granted again) or twice can never free space that live
 * values occupy.
 *
 * Reclaim (after a client's death, or when a grant finds no room): every
 * allocated unit that no slot names and no live client's held chunk
 * covers goes to the grace queue.  Only blocks of held chunks are ever
 * published, so such a unit stays unnamed; a pending return for it,
 * delivered later, is refused by the rule above.
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

/* A grace FIFO: q[head..tail) */
struct gqueue {
	struct gentry *q;
	size_t head, tail, cap;
	uint64_t ms;        /* how long its entries wait */
};

#define BIG_UNITS (RKV_SMALL_BLOCK_MAX / UNIT) /* longer: the big queue */

struct bnd {
	uint64_t unit;      /* first unit of a run owned by ... */
	uint32_t grant;     /* ... this grant (0: none) */
};

struct rkv_space {
	uint64_t len;         /* bytes */
	uint64_t units;
	uint64_t nwords;
	uint64_t *alloc;      /* 1: granted or in grace */
	uint64_t *grace;      /* 1: in grace (subset of alloc) */
	uint64_t cursor;      /* next-fit start, in units */
	uint64_t free_units;
	uint64_t grace_units;
	struct gqueue gq[2];  /* grace FIFOs: [0] small extents, [1] big */
	uint64_t big_units;   /* longer extents are big: BIG_UNITS */
	struct bnd *b;        /* owner map: sorted by unit, b[0].unit == 0 */
	size_t nb, bcap;
	uint32_t next_grant;
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

int rkv_space_create(uint64_t len, uint64_t grace_ms, uint64_t big_grace_ms,
		     struct rkv_space **out)
{
	struct rkv_space *sp;

	*out = NULL;
	if (len == 0 || len % UNIT || len > RKV_MAX_DATA_REGION ||
	    big_grace_ms < grace_ms)
		return -EINVAL;
	sp = rkv_calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	sp->len = len;
	sp->units = len / UNIT;
	sp->nwords = (sp->units + 63) / 64;
	sp->gq[0].ms = grace_ms;
	sp->gq[1].ms = big_grace_ms;
	sp->big_units = BIG_UNITS;
	sp->free_units = sp->units;
	sp->alloc = rkv_calloc(sp->nwords, sizeof(uint64_t));
	if (!sp->alloc)
		goto err_free_sp;
	sp->grace = rkv_calloc(sp->nwords, sizeof(uint64_t));
	if (!sp->grace)
		goto err_free_alloc;
	sp->b = rkv_calloc(16, sizeof(*sp->b));
	if (!sp->b)
		goto err_free_grace;
	sp->bcap = 16;
	sp->nb = 1; /* b[0] = { 0, 0 }: nobody owns anything yet */
	sp->next_grant = 1;
	sp->st.len = len;
	*out = sp;
	return 0;

err_free_grace:
	rkv_free(sp->grace);
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
	rkv_free(sp->gq[0].q);
	rkv_free(sp->gq[1].q);
	rkv_free(sp->b);
	rkv_free(sp->grace);
	rkv_free(sp->alloc);
	rkv_free(sp);
}

/* ----------------------------------------------------------- owner map */

/* Index of the boundary that owns unit u: the last one with unit <= u. */
static size_t bnd_find(const struct rkv_space *sp, uint64_t u)
{
	size_t lo = 0, hi = sp->nb; /* b[lo].unit <= u < b[hi].unit */

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (sp->b[mid].unit <= u)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Units [a, a + n) belong to grant g from now on. */
static int set_owner(struct rkv_space *sp, uint64_t a, uint64_t n, uint32_t g)
{
	uint64_t end = a + n;
	uint32_t g_end = end < sp->units ? sp->b[bnd_find(sp, end)].grant : 0;
	size_t lo = bnd_find(sp, a), hi;
	struct bnd ins[2];
	size_t nins = 0;

	if (sp->b[lo].unit < a)
		lo++;                      /* keep the run that starts before a */
	hi = end < sp->units ? bnd_find(sp, end) + 1 : sp->nb; /* drop [lo,hi) */
	ins[nins++] = (struct bnd){ .unit = a, .grant = g };
	if (end < sp->units)
		ins[nins++] = (struct bnd){ .unit = end, .grant = g_end };
	if (sp->nb - (hi - lo) + nins > sp->bcap) {
		size_t cap = sp->bcap * 2;
		struct bnd *b = rkv_realloc(sp->b, cap * sizeof(*b));

		if (!b)
			return -ENOMEM;
		sp->b = b;
		sp->bcap = cap;
	}
	memmove(sp->b + lo + nins, sp->b + hi, (sp->nb - hi) * sizeof(*sp->b));
	memcpy(sp->b + lo, ins, nins * sizeof(*ins));
	sp->nb = sp->nb - (hi - lo) + nins;
	return 0;
}

/* Whether grant g owns every unit of [u, u + n). */
static int owned_by(const struct rkv_space *sp, uint64_t u, uint64_t n,
		    uint32_t g)
{
	for (size_t i = bnd_find(sp, u); i < sp->nb && sp->b[i].unit < u + n;
	     i++)
		if (sp->b[i].grant != g)
			return 0;
	return 1;
}

uint32_t rkv_space_owner(const struct rkv_space *sp, uint64_t offset)
{
	if (offset >= sp->len)
		return 0;
	return sp->b[bnd_find(sp, offset / UNIT)].grant;
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

/* The longest free run (at most cap units); its length, 0 when none. */
static uint64_t longest_run(const struct rkv_space *sp, uint64_t cap,
			    uint64_t *at)
{
	uint64_t best = 0, p = 0;

	while (p < sp->units && best < cap) {
		uint64_t z = find_bit(sp->alloc, p, sp->units, 0);
		uint64_t o;

		if (z >= sp->units)
			break;
		o = find_bit(sp->alloc, z, sp->units, 1);
		if (o - z > best) {
			best = o - z;
			*at = z;
		}
		p = o;
	}
	return best < cap ? best : cap;
}

int rkv_space_grant(struct rkv_space *sp, uint64_t bytes, uint64_t min_bytes,
		    uint64_t *offset, uint64_t *len, uint32_t *grant)
{
	uint64_t n, at = UINT64_MAX, min;
	int rc;

	if (bytes == 0 || bytes % UNIT || bytes > sp->len || min_bytes % UNIT)
		return -EINVAL;
	n = bytes / UNIT;
	min = min_bytes && min_bytes < bytes ? min_bytes / UNIT : n;
	if (min > sp->free_units)
		return -ENOSPC;
	/* next fit: from the cursor to the end, then from the start */
	if (n <= sp->free_units) {
		at = find_run(sp, sp->cursor, sp->units, n);
		if (at == UINT64_MAX && sp->cursor > 0)
			at = find_run(sp, 0, sp->cursor, n);
	}
	if (at == UINT64_MAX && min < n) {
		/* fragmented: the longest run will do if the block fits */
		n = longest_run(sp, n, &at);
		if (n < min)
			return -ENOSPC;
		sp->st.short_grants++;
	}
	if (at == UINT64_MAX)
		return -ENOSPC;
	rc = set_owner(sp, at, n, sp->next_grant);
	if (rc)
		return rc;
	*grant = sp->next_grant++;
	if (sp->next_grant == 0)
		sp->next_grant = 1;
	range_set(sp->alloc, at, n);
	sp->free_units -= n;
	sp->cursor = at + n < sp->units ? at + n : 0;
	sp->st.grants++;
	*offset = at * UNIT;
	*len = n * UNIT;
	return 0;
}

/* --------------------------------------------------------------- grace */

static int q_push(struct rkv_space *sp, uint64_t unit, uint64_t n,
		  uint64_t now_ms)
{
	struct gqueue *g = &sp->gq[n > sp->big_units];

	if (g->tail == g->cap) {
		if (g->head > 0 && g->head >= g->cap / 2) {
			memmove(g->q, g->q + g->head,
				(g->tail - g->head) * sizeof(*g->q));
			g->tail -= g->head;
			g->head = 0;
		} else {
			size_t cap = g->cap ? g->cap * 2 : 256;
			struct gentry *q = rkv_realloc(g->q, cap * sizeof(*q));

			if (!q)
				return -ENOMEM;
			g->q = q;
			g->cap = cap;
		}
	}
	g->q[g->tail++] = (struct gentry){ .unit = unit, .n = n,
					   .expire_ms = now_ms + g->ms };
	range_set(sp->grace, unit, n);
	sp->grace_units += n;
	return 0;
}

void rkv_space_set_big_units(struct rkv_space *sp, uint64_t units)
{
	sp->big_units = units;
}

int rkv_space_return(struct rkv_space *sp, uint64_t offset, uint64_t len,
		     uint32_t grant, uint64_t now_ms)
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
	if (!grant || !range_all(sp->alloc, u, n) ||
	    range_any(sp->grace, u, n) || !owned_by(sp, u, n, grant)) {
		sp->st.stale_returns++;
		return -ESTALE;
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

	for (unsigned i = 0; i < 2; i++) {
		struct gqueue *g = &sp->gq[i];

		while (g->head < g->tail && k < TICK_MAX &&
		       g->q[g->head].expire_ms <= now_ms) {
			const struct gentry *e = &g->q[g->head++];

			range_clr(sp->grace, e->unit, e->n);
			range_clr(sp->alloc, e->unit, e->n);
			sp->grace_units -= e->n;
			sp->free_units += e->n;
			freed += e->n * UNIT;
			k++;
		}
		if (g->head == g->tail)
			g->head = g->tail = 0;
	}
	return freed;
}

/* ------------------------------------------------------------- reclaim */

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
 * First unit in [from, to) that is (val = 1) or is not (val = 0) a reclaim
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

int rkv_space_reclaim(struct rkv_space *sp,
		      const struct rkv_space_extent *keep, size_t nkeep,
		      const uint64_t *slots, uint64_t nslots, uint64_t now_ms,
		      uint64_t *freed)
{
	struct mark_ctx m = { .sp = sp };
	uint64_t total = 0, p = 0;
	int rc = 0;

	*freed = 0;
	m.bm = rkv_calloc(sp->nwords, sizeof(uint64_t));
	if (!m.bm)
		return -ENOMEM;
	/* what is held first: a block published after the scan read its
	 * slot lies in a held chunk */
	for (size_t i = 0; i < nkeep; i++) {
		uint64_t u, n = clip(sp, keep[i].offset, keep[i].len, &u);

		if (n)
			range_set(m.bm, u, n);
	}
	rkv_srv_index_scan(slots, nslots, mark_live, &m);
	while (p < sp->units && rc == 0) {
		uint64_t start = find_cand(sp, m.bm, p, sp->units, 1);
		uint64_t stop = find_cand(sp, m.bm, start, sp->units, 0);

		if (start == sp->units)
			break;
		rc = q_push(sp, start, stop - start, now_ms);
		if (rc == 0)
			total += (stop - start) * UNIT;
		p = stop;
	}
	rkv_free(m.bm);
	sp->st.rebuilds++;
	sp->st.rebuilt_bytes += total;
	*freed = total;
	return rc;
}

enum rkv_space_unit rkv_space_unit_state(const struct rkv_space *sp,
					 uint64_t offset)
{
	uint64_t u = offset / UNIT;

	if (offset >= sp->len || !(sp->alloc[u / 64] >> (u % 64) & 1))
		return RKV_SPACE_FREE;
	return (sp->grace[u / 64] >> (u % 64) & 1) ? RKV_SPACE_GRACE :
						     RKV_SPACE_ALLOC;
}

int rkv_space_check(const struct rkv_space *sp)
{
	uint64_t nalloc = 0, ngrace = 0, inq = 0;

	for (uint64_t w = 0; w < sp->nwords; w++) {
		if (sp->grace[w] & ~sp->alloc[w])
			return -EFAULT; /* in grace but not allocated */
		nalloc += (uint64_t)__builtin_popcountll(sp->alloc[w]);
		ngrace += (uint64_t)__builtin_popcountll(sp->grace[w]);
	}
	for (unsigned k = 0; k < 2; k++)
		for (size_t i = sp->gq[k].head; i < sp->gq[k].tail; i++)
			inq += sp->gq[k].q[i].n;
	if (sp->units - nalloc != sp->free_units || ngrace != sp->grace_units ||
	    inq != ngrace)
		return -EFAULT;
	if (sp->nb == 0 || sp->b[0].unit != 0)
		return -EFAULT;
	for (size_t i = 1; i < sp->nb; i++)
		if (sp->b[i].unit <= sp->b[i - 1].unit ||
		    sp->b[i].unit >= sp->units)
			return -EFAULT;
	return 0;
}

void rkv_space_get_stats(const struct rkv_space *sp,
			 struct rkv_space_stats *st)
{
	*st = sp->st;
	st->free = sp->free_units * UNIT;
	st->grace = sp->grace_units * UNIT;
}
