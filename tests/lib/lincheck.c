/* SPDX-License-Identifier: MIT */
/*
 * lincheck.c - Wing & Gong / Lowe linearizability search over per-key
 * register histories, and the history file format (lincheck.h).
 *
 * Per key: the ops' call and return events sit in one doubly linked list in
 * time order (calls before returns at equal times: touching ops count as
 * concurrent).  The search walks the list from its head: at a call it
 * tries the op's step in the model and, if legal and the configuration
 * (linearized set, value) is new, pushes (op, old value), lifts the op's
 * two events out and starts again from the head; at a return it has found
 * an op that must have been linearized by now and was not, so it pops the
 * last choice, unlifts it and tries the next call after it.  The list ends
 * empty (linearizable) or the stack does (not).
 *
 * Indeterminate ops return at the end of time: placing one "last" is
 * placing it nowhere, so it never has to take effect, and once every done
 * op is linearized the history is.  Three reductions keep them from
 * multiplying the search (each keeps it exact; see check_key):
 *  - lazily: at each point the done candidates are tried first, the
 *    indeterminate ones only when those are exhausted;
 *  - dominance: a configuration (done set D, indeterminate set K, value)
 *    is pruned when (D, K', value) with K' a subset of K was visited,
 *    since every continuation of the larger K works from the smaller (the
 *    extra ops go at the end);
 *  - symmetry: a written value no op ever reads is replaced by one
 *    "unread" value, so pending indeterminate writes of unread values are
 *    interchangeable, as are pending indeterminate deletes: only the first
 *    of each class is tried;
 *  - blind writes: every indeterminate op writes without condition, so two
 *    in a row are dominated by the second alone: after an indeterminate op
 *    only done ops are tried, and only those that need its effect (legal,
 *    or with another result, only because of it).
 *
 * Memo records are compact so histories of 10^5..10^6 ops per key fit: the
 * done set is stored from its first word holding a zero (every earlier bit
 * is set) to its last non-zero word; a done op is only linearized once
 * every op returning before its call is, so that span covers the ops
 * concurrent with the oldest pending one, not the whole history.
 */
#include "lincheck.h"

#include "hash.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEF_STATES (4ull << 20)
#define DEF_MEM (1ull << 30)
#define TAIL_N 6     /* linearized ops shown before the failure */
#define CAND_N 8     /* unlinearized ops shown at the failure */

/* indeterminate ops interchangeable with others of their class */
enum sym { SYM_NONE = 0, SYM_UNREAD = 1, SYM_DEL = 2 };

struct kop {             /* one searched op */
	uint64_t key, in, out, call, ret;
	uint64_t win;         /* the value it writes: in, or the unread one */
	int kind, ok, client;
	int sym;              /* enum sym, for indeterminate ops */
	size_t orig;          /* index in the caller's array */
	uint32_t bit;         /* in done[] or indet[] */
};

struct entry {
	struct entry *prev, *next;
	struct entry *match;  /* a call's return event */
	uint32_t op;
	int is_call;
};

struct frame {
	struct entry *e;      /* the call linearized */
	uint64_t state;       /* the value before it */
	int phase;            /* 0: done candidates, 1: indeterminate ones */
	int tried;            /* sym classes tried in this scan, with e's */
	int blind;            /* the value before was an indeterminate op's */
};

struct slot {
	uint64_t h;
	size_t off;           /* in arena words; 0: empty */
};

/* An arena record: value, lo | span << 32, head of its list of
 * indeterminate sets, then span words of the done set.  A list node: next,
 * then niw words. */
#define REC_HDR 3

struct search {
	struct kop *ops;
	size_t n;
	uint64_t *done;       /* linearized done ops */
	size_t ndw, lo, hi;   /* words; [lo, hi) may hold zeros / ones */
	size_t done_left;     /* done ops not linearized */
	uint64_t *indet;      /* linearized indeterminate ops */
	size_t niw;
	uint64_t unread;      /* the value standing for unread ones */
	uint64_t *rec;        /* the record being probed */
	struct slot *tab;
	size_t cap, used;
	uint64_t *arena;
	size_t alen, acap;
	uint64_t states, max_states;
	size_t max_mem;
	/* the deepest dead end, for the explanation */
	int have_best;
	size_t best_depth;
	uint32_t best_block;
	uint64_t best_state;
	uint32_t best_tail[TAIL_N];
	uint64_t best_tail_state[TAIL_N];
	size_t best_ntail;
	uint32_t best_cand[CAND_N];
	size_t best_ncand, best_more;
};

void lin_opts_init(struct lin_opts *opts)
{
	opts->max_states = DEF_STATES;
	opts->max_mem = DEF_MEM;
}

const char *lin_verdict_str(int verdict)
{
	switch (verdict) {
	case LIN_OK: return "linearizable";
	case LIN_VIOLATION: return "NOT linearizable";
	case LIN_UNKNOWN: return "unknown (search budget exceeded)";
	default: return "error";
	}
}

const char *lin_kind_str(int kind)
{
	switch (kind) {
	case LIN_PUT: return "put";
	case LIN_GET: return "get";
	case LIN_DEL: return "del";
	case LIN_RMW: return "rmw";
	default: return "?";
	}
}

/* ------------------------------------------------------------- model */

static int step(const struct kop *o, uint64_t st, uint64_t *ns)
{
	switch (o->kind) {
	case LIN_PUT:
		*ns = o->win;
		return 1;
	case LIN_GET:
		*ns = st;
		return o->out == st;
	case LIN_DEL:
		*ns = LIN_ABSENT;
		if (o->ok != LIN_DONE)
			return 1; /* removed it or found it absent */
		return o->out == LIN_DEL_DONE ? st != LIN_ABSENT
					      : st == LIN_ABSENT;
	case LIN_RMW:
		*ns = o->win;
		return o->ok != LIN_DONE || o->out == st;
	}
	return 0;
}

/* After an indeterminate op moved the value from prev, is done op o as
 * legal from prev with the same result?  Then the indeterminate op was
 * needless there: the configuration is dominated by taking o without it,
 * which the parent tries itself. */
static int needless(const struct kop *o, uint64_t prev, uint64_t ns)
{
	uint64_t alt;

	return step(o, prev, &alt) && alt == ns;
}

/* ------------------------------------------------------ linearized set */

static void bit_set(struct search *s, const struct kop *o)
{
	size_t w = o->bit >> 6;

	if (o->ok != LIN_DONE) {
		s->indet[w] |= 1ull << (o->bit & 63);
		return;
	}
	s->done_left--;
	s->done[w] |= 1ull << (o->bit & 63);
	if (w >= s->hi)
		s->hi = w + 1;
	while (s->lo < s->ndw && s->done[s->lo] == UINT64_MAX)
		s->lo++;
}

static void bit_clear(struct search *s, const struct kop *o)
{
	size_t w = o->bit >> 6;

	if (o->ok != LIN_DONE) {
		s->indet[w] &= ~(1ull << (o->bit & 63));
		return;
	}
	s->done_left++;
	s->done[w] &= ~(1ull << (o->bit & 63));
	if (w < s->lo)
		s->lo = w;
	while (s->hi > s->lo && s->done[s->hi - 1] == 0)
		s->hi--;
}

/* ---------------------------------------------------------------- memo */

static size_t memo_bytes(const struct search *s)
{
	return s->acap * 8 + s->cap * sizeof(struct slot);
}

static int memo_grow(struct search *s)
{
	size_t ncap = s->cap ? s->cap * 2 : 1024;
	struct slot *nt = calloc(ncap, sizeof(*nt));

	if (!nt)
		return -ENOMEM;
	for (size_t i = 0; i < s->cap; i++) {
		if (!s->tab[i].off)
			continue;
		size_t j = s->tab[i].h & (ncap - 1);

		while (nt[j].off)
			j = (j + 1) & (ncap - 1);
		nt[j] = s->tab[i];
	}
	free(s->tab);
	s->tab = nt;
	s->cap = ncap;
	return 0;
}

/* Room for len more arena words; the offset of the first. */
static int arena_take(struct search *s, size_t len, size_t *off)
{
	if (s->alen + len > s->acap) {
		size_t ncap = s->acap ? s->acap * 2 : 1u << 16;

		while (ncap < s->alen + len)
			ncap *= 2;
		if (ncap * 8 + s->cap * sizeof(struct slot) > s->max_mem)
			return -E2BIG;
		uint64_t *na = realloc(s->arena, ncap * 8);

		if (!na)
			return -ENOMEM;
		s->arena = na;
		s->acap = ncap;
	}
	*off = s->alen;
	s->alen += len;
	return 0;
}

/* Add the current indeterminate set to the list of record rec_off. */
static int klist_add(struct search *s, size_t rec_off)
{
	size_t off;
	int rc = arena_take(s, 1 + s->niw, &off);

	if (rc)
		return rc;
	s->arena[off] = s->arena[rec_off + 2];
	memcpy(s->arena + off + 1, s->indet, s->niw * 8);
	s->arena[rec_off + 2] = off;
	return 0;
}

/* Is a subset of the current indeterminate set on rec_off's list? */
static int klist_dominated(const struct search *s, size_t rec_off)
{
	for (size_t n = s->arena[rec_off + 2]; n; n = s->arena[n]) {
		const uint64_t *k = s->arena + n + 1;
		size_t w = 0;

		while (w < s->niw && !(k[w] & ~s->indet[w]))
			w++;
		if (w == s->niw)
			return 1;
	}
	return 0;
}

/* Visit (the linearized sets, value).  Returns 1 when new, 0 when it or a
 * dominating configuration was visited, -E2BIG past the memory budget,
 * -ENOMEM. */
static int memo_visit(struct search *s, uint64_t value)
{
	size_t span = s->hi - s->lo, len = REC_HDR + span, off;
	uint64_t *r = s->rec;

	r[0] = value;
	r[1] = (uint64_t)s->lo | (uint64_t)span << 32;
	r[2] = 0;
	memcpy(r + REC_HDR, s->done + s->lo, span * 8);
	uint64_t h = rkv_hash64(r, len * 8, 0x1c4ec4);

	if (s->used * 2 >= s->cap) {
		int rc = memo_grow(s);

		if (rc)
			return rc;
	}
	if (memo_bytes(s) > s->max_mem)
		return -E2BIG;
	size_t j = h & (s->cap - 1);

	for (; s->tab[j].off; j = (j + 1) & (s->cap - 1)) {
		const uint64_t *o = s->arena + s->tab[j].off;

		if (s->tab[j].h != h || o[0] != r[0] || o[1] != r[1] ||
		    memcmp(o + REC_HDR, r + REC_HDR, span * 8))
			continue;
		if (!s->niw || klist_dominated(s, s->tab[j].off))
			return 0;
		int rc = klist_add(s, s->tab[j].off);

		return rc ? rc : 1;
	}
	int rc = arena_take(s, len, &off);

	if (rc)
		return rc;
	memcpy(s->arena + off, r, len * 8);
	s->tab[j] = (struct slot){ .h = h, .off = off };
	s->used++;
	if (s->niw && (rc = klist_add(s, off)))
		return rc;
	return 1;
}

/* ------------------------------------------------------ event list */

static void lift(struct entry *e)
{
	struct entry *m = e->match;

	e->prev->next = e->next;
	e->next->prev = e->prev; /* a call is always followed by its return */
	m->prev->next = m->next;
	if (m->next)
		m->next->prev = m->prev;
}

static void unlift(struct entry *e)
{
	struct entry *m = e->match;

	m->prev->next = m;
	if (m->next)
		m->next->prev = m;
	e->prev->next = e;
	e->next->prev = e;
}

/* The search met the return of ops[e->op] with depth ops linearized and
 * nothing left to try: keep the deepest such dead end (the first met at
 * that depth). */
static void snapshot(struct search *s, const struct entry *head,
		     const struct entry *e, const struct frame *stack,
		     size_t depth, uint64_t state)
{
	if (s->have_best && depth <= s->best_depth)
		return;
	s->have_best = 1;
	s->best_depth = depth;
	s->best_block = e->op;
	s->best_state = state;
	s->best_ntail = depth < TAIL_N ? depth : TAIL_N;
	for (size_t i = 0; i < s->best_ntail; i++) {
		size_t k = depth - s->best_ntail + i;

		s->best_tail[i] = stack[k].e->op;
		s->best_tail_state[i] = k + 1 < depth ? stack[k + 1].state
						      : state;
	}
	s->best_ncand = 0;
	s->best_more = 0;
	for (const struct entry *x = head->next; x && x != e; x = x->next) {
		if (!x->is_call || x->op == e->op)
			continue;
		if (s->best_ncand < CAND_N)
			s->best_cand[s->best_ncand++] = x->op;
		else
			s->best_more++;
	}
}

struct ev {
	uint64_t t;
	uint32_t op;
	int is_ret;
};

static int ev_cmp(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	if (x->is_ret != y->is_ret)
		return x->is_ret - y->is_ret; /* calls first: concurrent */
	return x->op < y->op ? -1 : x->op > y->op;
}

/* Search one key's ops.  Returns 1 linearizable, 0 not, -E2BIG over
 * budget, -ENOMEM. */
static int search_run(struct search *s)
{
	size_t n = s->n;
	struct ev *ev = malloc(2 * n * sizeof(*ev));
	struct entry *ent = calloc(2 * n + 1, sizeof(*ent));
	struct entry **call_of = calloc(n, sizeof(*call_of));
	struct frame *stack = malloc(n * sizeof(*stack));
	int rc = -ENOMEM;

	if (!ev || !ent || !call_of || !stack)
		goto out;
	for (size_t i = 0; i < n; i++) {
		ev[2 * i] = (struct ev){ s->ops[i].call, (uint32_t)i, 0 };
		ev[2 * i + 1] = (struct ev){ s->ops[i].ret, (uint32_t)i, 1 };
	}
	qsort(ev, 2 * n, sizeof(*ev), ev_cmp);
	struct entry *head = &ent[0];

	for (size_t i = 0; i < 2 * n; i++) {
		struct entry *x = &ent[i + 1];

		x->op = ev[i].op;
		x->is_call = !ev[i].is_ret;
		x->prev = &ent[i];
		ent[i].next = x;
		if (x->is_call)
			call_of[x->op] = x;
		else
			call_of[x->op]->match = x;
	}

	struct entry *e = head->next;
	size_t sp = 0;
	uint64_t state = LIN_ABSENT;
	int phase = 0, tried = 0, blind = 0;

	rc = 1;
	while (s->done_left) {
		if (e->is_call) {
			const struct kop *o = &s->ops[e->op];
			int indet = o->ok != LIN_DONE;
			uint64_t ns;

			/* done ops in phase 0, indeterminate ones in phase 1,
			 * one per interchangeable class */
			if (indet != phase || (o->sym & tried)) {
				e = e->next;
				continue;
			}
			tried |= o->sym;
			if (step(o, state, &ns) &&
			    !(blind && needless(o, stack[sp - 1].state, ns))) {
				bit_set(s, o);
				int r = memo_visit(s, ns);

				if (r < 0) {
					rc = r;
					goto out;
				}
				if (r == 1) {
					if (++s->states > s->max_states) {
						rc = -E2BIG;
						goto out;
					}
					stack[sp++] = (struct frame){
						e, state, phase, tried, blind };
					state = ns;
					lift(e);
					e = head->next;
					phase = 0;
					tried = 0;
					blind = indet;
					continue;
				}
				bit_clear(s, o);
			}
			e = e->next;
		} else if (phase == 0 && !blind) {
			/* done candidates exhausted: the indeterminate ones */
			phase = 1;
			tried = 0;
			e = head->next;
		} else {
			snapshot(s, head, e, stack, sp, state);
			if (sp == 0) {
				rc = 0;
				goto out;
			}
			struct frame f = stack[--sp];

			bit_clear(s, &s->ops[f.e->op]);
			state = f.state;
			phase = f.phase;
			tried = f.tried;
			blind = f.blind;
			unlift(f.e);
			e = f.e->next;
		}
	}
out:
	free(ev);
	free(ent);
	free(call_of);
	free(stack);
	return rc;
}

/* ------------------------------------------------------- explanation */

struct sbuf {
	char *p;
	size_t len, cap;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;

	if (b->len + 1 >= b->cap)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);

	va_end(ap);
	if (n > 0)
		b->len += (size_t)n;
	if (b->len >= b->cap)
		b->len = b->cap - 1;
}

static void fmt_val(char *buf, size_t len, uint64_t v)
{
	if (v == LIN_ABSENT)
		snprintf(buf, len, "absent");
	else
		snprintf(buf, len, "%#" PRIx64, v);
}

/* A model value: absent, unread (a value no op read), or the id. */
static void fmt_state(const struct search *s, char *buf, size_t len,
		      uint64_t v)
{
	if (v == s->unread && v != LIN_ABSENT)
		snprintf(buf, len, "(a value no op read)");
	else
		fmt_val(buf, len, v);
}

static void sb_op(struct sbuf *b, const struct kop *o, uint64_t t0)
{
	char v[32], w[32];

	sb_printf(b, "    #%zu c%d ", o->orig, o->client);
	switch (o->kind) {
	case LIN_PUT:
		fmt_val(v, sizeof(v), o->in);
		sb_printf(b, "put(%s)", v);
		break;
	case LIN_GET:
		fmt_val(v, sizeof(v), o->out);
		sb_printf(b, "get -> %s", v);
		break;
	case LIN_DEL:
		if (o->ok == LIN_DONE)
			sb_printf(b, "del -> %s", o->out == LIN_DEL_DONE
							 ? "ok" : "ENOENT");
		else
			sb_printf(b, "del");
		break;
	default:
		fmt_val(v, sizeof(v), o->in);
		fmt_val(w, sizeof(w), o->out);
		if (o->ok == LIN_DONE)
			sb_printf(b, "rmw(%s) saw %s", v, w);
		else
			sb_printf(b, "rmw(%s)", v);
	}
	if (o->ok != LIN_DONE)
		sb_printf(b, " indeterminate [%.3f, -] ms\n",
			  (double)(o->call - t0) / 1e6);
	else
		sb_printf(b, " [%.3f, %.3f] ms\n", (double)(o->call - t0) / 1e6,
			  (double)(o->ret - t0) / 1e6);
}

/* What the value a blocked read saw says about the failure. */
static void hint(struct sbuf *b, const struct search *s, const struct kop *bl,
		 uint64_t t0)
{
	uint64_t v = bl->out;
	const struct kop *wr = NULL;
	char vs[32];

	if ((bl->kind != LIN_GET && bl->kind != LIN_RMW) || v == LIN_ABSENT)
		return;
	fmt_val(vs, sizeof(vs), v);
	for (size_t i = 0; i < s->n && !wr; i++)
		if ((s->ops[i].kind == LIN_PUT || s->ops[i].kind == LIN_RMW) &&
		    s->ops[i].in == v)
			wr = &s->ops[i];
	if (!wr) {
		sb_printf(b, "  hint: no op wrote %s on this key (a torn, "
			     "misrouted or invented value)\n", vs);
		return;
	}
	sb_printf(b, "  %s was written by:\n", vs);
	sb_op(b, wr, t0);
	if (wr->call > bl->ret) {
		sb_printf(b, "  hint: read from the future (the write began "
			     "after the read returned)\n");
		return;
	}
	for (size_t i = 0; i < s->n; i++) {
		const struct kop *x = &s->ops[i];

		if (x == wr || x->ok != LIN_DONE || x->kind == LIN_GET ||
		    (x->kind == LIN_DEL && x->out != LIN_DEL_DONE))
			continue;
		if (wr->ok == LIN_DONE && wr->ret < x->call &&
		    x->ret < bl->call) {
			sb_printf(b, "  hint: stale read: this op replaced %s "
				     "after its write returned and before "
				     "the read began:\n", vs);
			sb_op(b, x, t0);
			return;
		}
	}
}

static void explain(const struct search *s, struct lin_result *res,
		    int unknown)
{
	struct sbuf b = { res->explain, 0, sizeof(res->explain) };
	const struct kop *o = s->ops;
	uint64_t t0 = o[0].call;
	size_t nind = 0;
	char st[32];

	for (size_t i = 0; i < s->n; i++)
		nind += o[i].ok != LIN_DONE;
	if (unknown) {
		sb_printf(&b, "key %#" PRIx64 ": unknown after %" PRIu64
			      " states (%zu ops, %zu indeterminate)\n",
			  o[0].key, s->states, s->n, nind);
		return;
	}
	sb_printf(&b, "key %#" PRIx64 ": not linearizable (%zu ops, %zu "
		      "indeterminate, %" PRIu64 " states searched; times from "
		      "the key's first call)\n",
		  o[0].key, s->n, nind, s->states);
	if (!s->have_best)
		return;
	fmt_state(s, st, sizeof(st), s->best_state);
	sb_printf(&b, "  longest linearizable prefix: %zu ops, value then "
		      "%s; its last ops (value after each):\n",
		  s->best_depth, st);
	for (size_t i = 0; i < s->best_ntail; i++) {
		fmt_state(s, st, sizeof(st), s->best_tail_state[i]);
		sb_op(&b, &o[s->best_tail[i]], t0);
		if (b.len && b.p[b.len - 1] == '\n')
			b.len--; /* the value goes on the op's line */
		sb_printf(&b, "  => %s\n", st);
	}
	sb_printf(&b, "  then this op cannot be linearized:\n");
	sb_op(&b, &o[s->best_block], t0);
	if (s->best_ncand) {
		sb_printf(&b, "  nor can any op called before it returned, in "
			      "any order:\n");
		for (size_t i = 0; i < s->best_ncand; i++)
			sb_op(&b, &o[s->best_cand[i]], t0);
		if (s->best_more)
			sb_printf(&b, "    (%zu more)\n", s->best_more);
	}
	hint(&b, s, &o[s->best_block], t0);
}

/* --------------------------------------------------------------- check */

static int kop_cmp(const void *a, const void *b)
{
	const struct kop *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	if (x->call != y->call)
		return x->call < y->call ? -1 : 1;
	return x->orig < y->orig ? -1 : x->orig > y->orig;
}

static void search_fini(struct search *s)
{
	free(s->done);
	free(s->indet);
	free(s->rec);
	free(s->tab);
	free(s->arena);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Values some done get or rmw read; every other written value becomes
 * s->unread, and indeterminate ops get their interchangeable class. */
static int classify(struct search *s)
{
	uint64_t *obs = malloc((s->n + 1) * sizeof(*obs));
	size_t no = 0;

	if (!obs)
		return -ENOMEM;
	for (size_t i = 0; i < s->n; i++)
		if (s->ops[i].ok == LIN_DONE &&
		    (s->ops[i].kind == LIN_GET || s->ops[i].kind == LIN_RMW))
			obs[no++] = s->ops[i].out;
	qsort(obs, no, sizeof(*obs), u64_cmp);
	s->unread = UINT64_MAX;
	while (bsearch(&s->unread, obs, no, sizeof(*obs), u64_cmp))
		s->unread--;
	for (size_t i = 0; i < s->n; i++) {
		struct kop *o = &s->ops[i];

		o->win = o->in;
		if ((o->kind == LIN_PUT || o->kind == LIN_RMW) &&
		    !bsearch(&o->in, obs, no, sizeof(*obs), u64_cmp))
			o->win = s->unread;
		o->sym = SYM_NONE;
		if (o->ok != LIN_DONE)
			o->sym = o->kind == LIN_DEL ? SYM_DEL
				 : o->win == s->unread ? SYM_UNREAD : SYM_NONE;
	}
	free(obs);
	return 0;
}

static int check_key(struct kop *ops, size_t n, const struct lin_opts *opts,
		     struct lin_result *res)
{
	/* a search visits at least one configuration per op: the budget is
	 * what it may spend beyond that */
	struct search s = { .ops = ops, .n = n,
			    .max_states = opts->max_states + 4 * (uint64_t)n,
			    .max_mem = opts->max_mem };
	size_t nd = 0, ni = 0;

	for (size_t i = 0; i < n; i++)
		ops[i].bit = ops[i].ok == LIN_DONE ? (uint32_t)nd++
						   : (uint32_t)ni++;
	s.done_left = nd;
	s.ndw = (nd + 63) / 64;
	s.niw = (ni + 63) / 64;
	s.done = calloc(s.ndw + 1, 8);
	s.indet = calloc(s.niw + 1, 8);
	s.rec = malloc((REC_HDR + s.ndw) * 8);
	s.arena = NULL;
	s.alen = 1; /* offset 0 marks an empty slot */
	int rc = -ENOMEM;

	if (s.done && s.indet && s.rec && !(rc = classify(&s)))
		rc = search_run(&s);
	res->states += s.states;
	if (s.states > res->max_key_states)
		res->max_key_states = s.states;
	if (rc == 0) {
		if (!res->keys_violated++) {
			res->bad_key = ops[0].key;
			explain(&s, res, 0);
		}
	} else if (rc == -E2BIG) {
		if (!res->keys_unknown++ && !res->keys_violated) {
			res->bad_key = ops[0].key;
			explain(&s, res, 1);
		}
		rc = 2;
	}
	search_fini(&s);
	return rc < 0 ? rc : 0;
}

int lin_check(const struct lin_op *ops, size_t n, const struct lin_opts *opts,
	      struct lin_result *res)
{
	struct lin_opts def;
	struct kop *k;
	size_t m = 0;
	int rc = 0;

	memset(res, 0, sizeof(*res));
	lin_opts_init(&def);
	if (opts) {
		if (opts->max_states)
			def.max_states = opts->max_states;
		if (opts->max_mem)
			def.max_mem = opts->max_mem;
	}
	res->ops = n;
	k = calloc(n ? n : 1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct lin_op *o = &ops[i];
		int bad = o->kind < LIN_PUT || o->kind > LIN_RMW ||
			  (o->ok == LIN_DONE && (o->ret_ns < o->call_ns ||
						 o->ret_ns == LIN_NEVER)) ||
			  ((o->kind == LIN_PUT || o->kind == LIN_RMW) &&
			   o->in == LIN_ABSENT && o->ok != LIN_FAILED);

		if (bad) {
			snprintf(res->explain, sizeof(res->explain),
				 "op #%zu is malformed (kind %d, in %#" PRIx64
				 ", ok %d, call %" PRIu64 ", ret %" PRIu64 ")\n",
				 i, o->kind, o->in, o->ok, o->call_ns, o->ret_ns);
			free(k);
			return -EINVAL;
		}
		if (o->ok == LIN_FAILED ||
		    (o->kind == LIN_GET && o->ok != LIN_DONE)) {
			res->dropped++;
			continue;
		}
		k[m] = (struct kop){ .key = o->key, .in = o->in, .out = o->out,
				     .call = o->call_ns,
				     .ret = o->ok == LIN_DONE ? o->ret_ns
							      : LIN_NEVER,
				     .kind = o->kind,
				     .ok = o->ok == LIN_DONE ? LIN_DONE
							     : LIN_INDET,
				     .client = o->client, .orig = i };
		res->indeterminate += o->ok != LIN_DONE;
		m++;
	}
	res->checked = m;
	qsort(k, m, sizeof(*k), kop_cmp);
	for (size_t a = 0, b; a < m && rc == 0; a = b) {
		for (b = a + 1; b < m && k[b].key == k[a].key; b++)
			;
		res->keys++;
		if (b - a > res->max_key_ops)
			res->max_key_ops = b - a;
		rc = check_key(k + a, b - a, &def, res);
	}
	free(k);
	if (rc < 0)
		return rc;
	res->verdict = res->keys_violated ? LIN_VIOLATION
		       : res->keys_unknown ? LIN_UNKNOWN : LIN_OK;
	return res->verdict;
}

/* ------------------------------------------------------------- files */

int lin_hist_add(struct lin_hist *h, const struct lin_op *op)
{
	if (h->n == h->cap) {
		size_t ncap = h->cap ? h->cap * 2 : 1024;
		struct lin_op *no = realloc(h->ops, ncap * sizeof(*no));

		if (!no)
			return -ENOMEM;
		h->ops = no;
		h->cap = ncap;
	}
	h->ops[h->n++] = *op;
	return 0;
}

void lin_hist_fini(struct lin_hist *h)
{
	free(h->ops);
	memset(h, 0, sizeof(*h));
}

static int kind_of(const char *s)
{
	for (int k = LIN_PUT; k <= LIN_RMW; k++)
		if (!strcmp(s, lin_kind_str(k)))
			return k;
	return -1;
}

struct pending {
	int client;
	uint64_t seq;
	size_t idx;
};

static int load_line(const char *line, struct lin_hist *h,
		     struct pending **pend, size_t *npend, size_t *cpend)
{
	struct lin_op op = { 0 };
	char kind[8], ret[32];
	uint64_t seq;
	int rc;

	while (*line == ' ' || *line == '\t')
		line++;
	if (*line == '#' || *line == '\n' || *line == '\0')
		return 0;
	switch (*line) {
	case 'o':
		if (sscanf(line, "o %d %" SCNx64 " %7s %" SCNx64 " %" SCNx64
				 " %d %" SCNu64 " %31s",
			   &op.client, &op.key, kind, &op.in, &op.out, &op.ok,
			   &op.call_ns, ret) != 8 ||
		    (op.kind = kind_of(kind)) < 0)
			return -EBADMSG;
		op.ret_ns = strcmp(ret, "-") ? strtoull(ret, NULL, 10)
					     : LIN_NEVER;
		return lin_hist_add(h, &op);
	case 'c':
		if (sscanf(line, "c %d %" SCNu64 " %" SCNx64 " %7s %" SCNx64
				 " %" SCNu64,
			   &op.client, &seq, &op.key, kind, &op.in,
			   &op.call_ns) != 6 ||
		    (op.kind = kind_of(kind)) < 0)
			return -EBADMSG;
		op.ok = LIN_INDET;
		op.ret_ns = LIN_NEVER;
		if (*npend == *cpend) {
			size_t nc = *cpend ? *cpend * 2 : 256;
			struct pending *np = realloc(*pend, nc * sizeof(*np));

			if (!np)
				return -ENOMEM;
			*pend = np;
			*cpend = nc;
		}
		(*pend)[(*npend)++] = (struct pending){ op.client, seq, h->n };
		rc = lin_hist_add(h, &op);
		if (rc == 0)
			h->open++;
		return rc;
	case 'r': {
		uint64_t out, rns;
		int ok;

		if (sscanf(line, "r %d %" SCNu64 " %" SCNx64 " %d %" SCNu64,
			   &op.client, &seq, &out, &ok, &rns) != 5)
			return -EBADMSG;
		/* answers follow their calls closely: search from the end */
		for (size_t i = *npend; i-- > 0;) {
			struct pending *p = &(*pend)[i];

			if (p->client != op.client || p->seq != seq)
				continue;
			struct lin_op *o = &h->ops[p->idx];

			o->out = out;
			o->ok = ok;
			o->ret_ns = ok == LIN_DONE ? rns : LIN_NEVER;
			if (ok != LIN_INDET)
				h->open--;
			*p = (*pend)[--(*npend)];
			return 0;
		}
		return -EBADMSG;
	}
	default:
		return -EBADMSG;
	}
}

int lin_load(const char *path, struct lin_hist *h, size_t *bad_line)
{
	FILE *f = fopen(path, "r");
	struct pending *pend = NULL;
	size_t npend = 0, cpend = 0, lineno = 0, cap = 0;
	char *line = NULL;
	ssize_t len;
	int rc = 0;

	if (!f)
		return -errno;
	while (rc == 0 && (len = getline(&line, &cap, f)) > 0) {
		lineno++;
		/* a last line without its newline is a write cut by a kill:
		 * a torn call never started its op, a torn answer leaves it
		 * open */
		if (line[len - 1] != '\n' && feof(f))
			break;
		rc = load_line(line, h, &pend, &npend, &cpend);
	}
	if (rc && bad_line)
		*bad_line = lineno;
	free(line);
	free(pend);
	fclose(f);
	return rc;
}

int lin_save(const char *path, const struct lin_op *ops, size_t n)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -errno;
	fprintf(f, "# rkv lin history: o CLIENT KEY KIND IN OUT OK CALL RET\n");
	for (size_t i = 0; i < n; i++) {
		const struct lin_op *o = &ops[i];
		char ret[32] = "-";

		if (o->ok == LIN_DONE)
			snprintf(ret, sizeof(ret), "%" PRIu64, o->ret_ns);
		fprintf(f, "o %d %" PRIx64 " %s %" PRIx64 " %" PRIx64 " %d %" PRIu64
			   " %s\n",
			o->client, o->key, lin_kind_str(o->kind), o->in, o->out,
			o->ok, o->call_ns, ret);
	}
	int rc = ferror(f) ? -EIO : 0;

	if (fclose(f) && !rc)
		rc = -errno;
	return rc;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t w = write(fd, buf, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

int lin_log_call(int fd, int client, uint64_t seq, uint64_t key, int kind,
		 uint64_t in, uint64_t call_ns)
{
	char line[160];
	int n = snprintf(line, sizeof(line),
			 "c %d %" PRIu64 " %" PRIx64 " %s %" PRIx64 " %" PRIu64
			 "\n",
			 client, seq, key, lin_kind_str(kind), in, call_ns);

	return write_all(fd, line, (size_t)n);
}

int lin_log_ret(int fd, int client, uint64_t seq, uint64_t out, int ok,
		uint64_t ret_ns)
{
	char line[128];
	int n = snprintf(line, sizeof(line),
			 "r %d %" PRIu64 " %" PRIx64 " %d %" PRIu64 "\n", client,
			 seq, out, ok, ret_ns);

	return write_all(fd, line, (size_t)n);
}
