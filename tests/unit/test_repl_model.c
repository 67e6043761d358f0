/* SPDX-License-Identifier: MIT */
/*
 * test_repl_model.c - an exhaustive model check of the replication
 * protocol proposed in docs/DESIGN.md §9.7, before it is built.
 *
 * One key with r replicas (2 or 3).  Each replica holds the key's slot
 * word {value, version, lock}; the value stands for the immutable block
 * the word names.  Two writers and a reader run the protocol's steps as
 * separate atomic actions on the replicas (one-sided CAS and READ on one
 * server are atomic there; nothing else is); the coordinator kills the
 * primary (and, with r=3, the next one), fences the survivors, reconciles
 * them and publishes the next map epoch.  Writers may crash between any
 * two steps, and a waiting writer may steal a held lock at any time (the
 * holder may be paused, which nobody can tell from dead).
 *
 * A put of value v by a writer of map epoch e (primary P = the first
 * replica of the map, backups B):
 *   1. lock P: CAS w -> w|LOCK; its sequence s = w.version.  Or steal a
 *      locked word: CAS w|LOCK -> (w.version+1)|LOCK, s = w.version+1
 *      (versions here are unbounded: the real ones are 64-bit, in the
 *      block headers; BUG_SEQ_WRAP shows why a small one will not do);
 *   2. for each backup b, until installed: READ b; b.version >= s: done
 *      (ours, or a newer holder's); else CAS b -> {v, s};
 *   3. release: CAS P {.., s, LOCK} -> {v, s+1}; success acknowledges.
 *      Failure (stolen) starts the put again.
 * A get READs P's word and returns its value (a locked word names the last
 * published value).  An operation meeting a dead or fenced replica waits
 * for a newer map and starts again there.
 * Failover: the old primary dies; the coordinator fences each survivor
 * (its rkeys for older epochs revoked: their one-sided ops fail from then
 * on), then sets every survivor to the new primary's value, the new
 * primary at version M+2 and the backups at M+1 (M: the largest version
 * among them), and publishes epoch e+1.
 *
 * Checked in every state: the value a reader can see on the primary is on
 * every live backup, or superseded there by a newer sequence.  At the end
 * of every run: the history (with a final get) is linearizable.  The state
 * space is searched depth-first with a table of visited states; the
 * real-time order in the history is kept as "completed before" bit masks,
 * so equal states meet whatever the path.
 *
 * An rmw is a put whose value is computed from what it read under the
 * lock; every lock it takes is a new attempt with a new value.  A delete
 * is a put of 0 ("absent"): a tombstone, which keeps its sequence.  In a
 * fresh scenario the key has no slot at first: the first writer takes a
 * tentative slot on the primary and commits it as a locked tombstone of
 * sequence 1, then installs and releases as above; a waiter may clear a
 * tentative slot whose inserter looks dead.
 *
 * A join (or drain) at r = 2 (docs/DESIGN.md §9.7, "Join and drain"):
 * replicas 0 and 1 hold the key, replica 2 (the server that enters its
 * set) nothing.  The coordinator fences all three at epoch 2 and
 * publishes the set {0, 1, 2} (2 an extra backup); a rebuilder (an rmw
 * that writes back the value it reads under the lock, skipping an absent
 * key) rewrites the key; then the coordinator fences all three at epoch
 * 3, reconciles the final set as a failover does (its new primary's
 * value wins) and publishes it: {2, 0} (the new server primary), {0, 2}
 * (a backup) or {1, 2} (the old primary leaves: a drain).  The server
 * that enters is checked against I1 from the end of the rebuild on.
 *
 * Broken variants (release before the backups, a backup install without
 * the sequence check, no fence, a writer that simply starts again after a
 * failover, a delete that empties backups, sequences that wrap, an insert
 * that commits its value at once; a join without its first fence or
 * without its rebuild) must each be caught: the check is shown to fail
 * on bad protocols, not only to pass on this one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define R_MAX 3
#define W_N 2            /* writers */
#define OPS_MAX 2        /* puts per writer */
#define GETS 2           /* the reader's gets */
#define H_MAX (W_N * OPS_MAX + GETS + 1)

enum bug {
	OK = 0, BUG_RELEASE_FIRST, BUG_NO_SEQ_CHECK, BUG_NO_FENCE,
	BUG_BLIND_RETRY, BUG_DEL_EMPTIES, BUG_SEQ_WRAP, BUG_INS_VALUE,
	BUG_JOIN_NO_FENCE, BUG_JOIN_NO_REBUILD, BUG_SWEEP_NO_FENCE
};

/* a join's final replica set (scen.join) */
enum join { NO_JOIN = 0, JOIN_PRIM, JOIN_BACKUP, LEAVE_PRIM };

/* BUG_SEQ_WRAP compares sequences as serial numbers of this many values
 * (the slot word's 8-bit version is one of 256) */
#define WRAP 4

struct scen {
	const char *name;
	unsigned r;
	unsigned nops[W_N];
	unsigned failures;       /* primaries the coordinator kills (1..r-1) */
	unsigned kills;          /* writer crashes allowed */
	unsigned steals;         /* lock steals allowed */
	enum bug bug;
	unsigned rmw;            /* bit wi * OPS_MAX + op: that op is an rmw */
	unsigned dels;           /* ... that op is a delete */
	int fresh;               /* the key has no slot anywhere at first:
				  * the first write inserts it */
	enum join join;          /* a join instead of failures */
	int sweep;               /* a sweep instead of failures */
};

struct rep {
	uint8_t alive;
	uint8_t present;         /* the key has a slot word here (a backup
				  * without one reads as sequence 0) */
	uint8_t tent;            /* primary: writer + 1 holding a tentative
				  * slot for the absent key (0: none) */
	uint8_t fence;           /* ops of epochs below this fail */
	uint8_t val;
	uint8_t lock;
	uint16_t ver;
	uint16_t vseq;           /* model only: the sequence of val */
	uint8_t pad[2];
};

enum wpc { W_IDLE, W_LOCK, W_COMMIT, W_READB, W_CASB, W_RELEASE, W_CHECK,
	   W_DONE, W_DEAD };

struct wr {
	uint8_t pc;
	uint8_t op;              /* next op of its script */
	uint8_t epoch;
	uint8_t b;               /* backup index being installed (in map order) */
	uint8_t seen_val;        /* READ of backup b */
	uint16_t seen_ver;
	uint16_t seq;
	uint8_t hist;
	uint8_t seen_lock;
	uint8_t installed;       /* some backup took this op's value */
	uint8_t val;             /* the value this attempt writes */
	uint8_t pad[2];
};

#define ATT_MAX 4        /* attempts of one rmw (each reads, then writes) */

enum hkind { H_GET, H_PUT, H_RMW, H_DEL };

struct hent {
	uint8_t kind;            /* enum hkind */
	uint8_t val;             /* put: the value; get: what it returned;
				  * rmw: the value of the attempt that took
				  * effect (done) */
	uint8_t done;
	uint8_t eff;             /* rmw, done: that attempt */
	uint16_t before;         /* ops completed before this one began */
	uint8_t natt;            /* rmw: attempts made */
	uint8_t att_old[ATT_MAX];/* what each read under the lock */
};

#define RB W_N               /* w[RB]: a join's rebuilder */

struct state {
	struct rep rep[R_MAX];
	struct wr w[W_N + 1];
	uint8_t epoch;           /* the published map */
	uint8_t dead_prims;      /* primaries killed so far */
	uint8_t coord;           /* 0 idle, 1 fencing, then publish */
	uint8_t fenced;          /* bit i: survivor i fenced this failover */
	uint8_t kills, steals;
	uint8_t jphase;          /* a join: 0 before, 1 fencing for epoch 2,
				  * 2 epoch 2 (the rebuild), 3 fencing for
				  * epoch 3, 4 done */
	uint8_t rb_steals;       /* the rebuilder's (not the budget's) */
	uint8_t rd_epoch, rd_n;  /* the reader: its map, gets done */
	uint8_t nh;
	uint8_t pad[3];
	uint16_t completed;      /* bit per history entry */
	struct hent h[H_MAX];
};

struct ctx {
	const struct scen *sc;
	uint64_t *seen;
	size_t seen_cap, nseen;
	uint64_t states, ends, violations;
	uint64_t limit;          /* states explored at most (0: all) */
	char first[512];
};

/* ----------------------------------------------------------- the map */

static const struct scen *g_sc; /* the scenario being explored */

/* A replica set: the primary first. */
struct mset {
	unsigned n;
	uint8_t rep[R_MAX];
};

/* Replicas of epoch e: failing over, the first failures-so-far replicas
 * are dead, so the map of epoch e has replicas e-1 .. r-1; joining, {0,
 * 1}, then {0, 1, 2}, then the final set. */
static struct mset set_of(uint8_t e)
{
	static const uint8_t fin[][2] = { [JOIN_PRIM] = { 2, 0 },
					  [JOIN_BACKUP] = { 0, 2 },
					  [LEAVE_PRIM] = { 1, 2 } };
	struct mset m = { 0 };

	if (g_sc->sweep) {
		for (unsigned i = 0; i < g_sc->r; i++)
			m.rep[m.n++] = (uint8_t)i;
		return m;
	}
	if (!g_sc->join) {
		for (unsigned i = (unsigned)e - 1; i < g_sc->r; i++)
			m.rep[m.n++] = (uint8_t)i;
		return m;
	}
	if (e <= 1) {
		m = (struct mset){ 2, { 0, 1 } };
	} else if (e == 2) {
		m = (struct mset){ 3, { 0, 1, 2 } };
	} else {
		m.n = 2;
		m.rep[0] = fin[g_sc->join][0];
		m.rep[1] = fin[g_sc->join][1];
	}
	return m;
}

static unsigned prim(uint8_t e) { return set_of(e).rep[0]; }

/* replicas in the model: r, and the server a join adds */
static unsigned nreps(const struct scen *sc)
{
	return sc->join ? sc->r + 1 : sc->r;
}

static int usable(const struct state *s, unsigned i, uint8_t e)
{
	return s->rep[i].alive && s->rep[i].fence <= e;
}

/* -------------------------------------------------------- linearizable */

/* the value rmw attempt k of history entry i writes */
static uint8_t att_val(unsigned i, unsigned k)
{
	return (uint8_t)(32 + i * ATT_MAX + k);
}

static int lin_rec(const struct hent *h, unsigned n, uint16_t placed,
		   uint8_t cur)
{
	int all = 1;

	for (unsigned i = 0; i < n; i++)
		if (h[i].done && !(placed & (1u << i)))
			all = 0;
	if (all)
		return 1;
	for (unsigned i = 0; i < n; i++) {
		uint16_t with = (uint16_t)(placed | (1u << i));

		if (placed & (1u << i))
			continue;
		if (!h[i].done && h[i].kind == H_GET)
			continue;
		/* i may go next only if every op that finished before it began
		 * is placed */
		if ((h[i].before & ~placed) != 0)
			continue;
		switch (h[i].kind) {
		case H_PUT:
		case H_DEL:             /* a put of "absent" (0) */
			if (lin_rec(h, n, with, h[i].val))
				return 1;
			break;
		case H_GET:
			if (h[i].val == cur && lin_rec(h, n, with, cur))
				return 1;
			break;
		case H_RMW:
			/* done: the attempt that took effect; pending: any */
			for (unsigned k = 0; k < h[i].natt; k++) {
				if (h[i].done && k != h[i].eff)
					continue;
				if (h[i].att_old[k] == cur &&
				    lin_rec(h, n, with, att_val(i, k)))
					return 1;
			}
			break;
		}
	}
	return 0;
}

static int linearizable(const struct state *s)
{
	return lin_rec(s->h, s->nh, 0, 0);
}

/* ------------------------------------------------------------ history */

static unsigned h_begin(struct state *s, enum hkind kind, uint8_t val)
{
	unsigned i = s->nh++;

	s->h[i].kind = (uint8_t)kind;
	s->h[i].val = val;
	s->h[i].done = 0;
	s->h[i].natt = 0;
	s->h[i].before = s->completed;
	return i;
}

static void h_end(struct state *s, unsigned i, uint8_t val)
{
	s->h[i].val = val;
	s->h[i].done = 1;
	s->completed = (uint16_t)(s->completed | (1u << i));
}

/* -------------------------------------------------------------- search */

static uint64_t st_hash(const struct state *s)
{
	const unsigned char *p = (const unsigned char *)s;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < sizeof(*s); i++) {
		h ^= p[i];
		h *= 1099511628211ull;
	}
	return h | 1;
}

/* 1 when new (and now remembered) */
static int remember(struct ctx *x, const struct state *s)
{
	uint64_t h = st_hash(s);
	size_t i = (size_t)(h & (x->seen_cap - 1));

	while (x->seen[i]) {
		if (x->seen[i] == h)
			return 0;
		i = (i + 1) & (x->seen_cap - 1);
	}
	if (x->nseen * 4 > x->seen_cap * 3)
		return 1; /* full: explore without remembering */
	x->seen[i] = h;
	x->nseen++;
	return 1;
}

static void fail(struct ctx *x, const struct state *s, const char *why)
{
	x->violations++;
	if (x->first[0])
		return;
	int n = snprintf(x->first, sizeof(x->first), "%s; replicas", why);

	for (unsigned i = 0; i < nreps(x->sc) && n < (int)sizeof(x->first); i++)
		n += snprintf(x->first + n, sizeof(x->first) - (size_t)n,
			      " [%s v%u ver%u%s]",
			      s->rep[i].alive ? "up" : "dead", s->rep[i].val,
			      s->rep[i].ver, s->rep[i].lock ? " L" : "");
	for (unsigned i = 0; i < s->nh && n < (int)sizeof(x->first); i++)
		n += snprintf(x->first + n, sizeof(x->first) - (size_t)n,
			      "; %s %u%s",
			      s->h[i].kind == H_PUT   ? "put"
			      : s->h[i].kind == H_RMW ? "rmw"
			      : s->h[i].kind == H_DEL ? "del"
						      : "get",
			      s->h[i].val, s->h[i].done ? "" : " (pending)");
}

/* Invariants of a settled map (not checked while failing over):
 *  - what a reader can see on the primary is on every live backup, or a
 *    newer sequence is there (a put in flight);
 *  - no backup is ahead of the primary's lock sequence: sequences come
 *    only from its lock, so a backup ahead would make a later holder
 *    skip it (the sequence check would lie). */
static const char *settled_bad(const struct ctx *x, const struct state *s)
{
	unsigned p = prim(s->epoch);
	struct mset ms = set_of(s->epoch);

	if (s->coord || !s->rep[p].alive)
		return NULL;
	for (unsigned k = 1; k < ms.n; k++) {
		const struct rep *rb = &s->rep[ms.rep[k]];
		/* the server a join adds holds every value only once its
		 * rebuild is done */
		int catching_up = x->sc->join && s->jphase == 2 &&
				  ms.rep[k] == 2 && s->w[RB].pc != W_DONE;
		/* nor a tombstone written before it joined: a writer that
		 * could put an older value over it there locked before the
		 * delete, in the map it is fenced from */
		int no_tomb = x->sc->join && ms.rep[k] == 2 && !rb->present &&
			      s->rep[p].val == 0;

		if (!rb->alive)
			continue;
		if (!catching_up && !no_tomb &&
		    (rb->ver < s->rep[p].vseq ||
		     (rb->ver == s->rep[p].vseq && rb->val != s->rep[p].val)))
			return "the primary shows a value a live backup lacks";
		if (rb->ver > s->rep[p].ver)
			return "a backup is ahead of the primary's sequence";
	}
	return NULL;
}

static void explore(struct ctx *x, const struct state *s);

static void next(struct ctx *x, const struct state *s)
{
	x->states++;
	const char *why = settled_bad(x, s);

	if (why)
		fail(x, s, why);
	if (x->limit && x->states >= x->limit)
		return;
	if (remember(x, s))
		explore(x, s);
}

/* A writer that met a dead or fenced replica moves to the newer map.  If
 * no backup ever took its value it starts again there; if one did, the
 * failover may have made that value current (and a later put may already
 * have replaced it), so starting again could apply it twice: it looks at
 * the new primary instead (W_CHECK). */
static void w_new_map(struct state *s, struct wr *w)
{
	w->epoch = s->epoch;
	w->pc = w->installed ? W_CHECK : W_LOCK;
}

/* An rmw reads the value under the lock it is taking (the lock CAS and
 * the block READ share a doorbell) and computes a new value: a new
 * attempt each time it locks.  0 when it has used its attempts. */
static int rmw_attempt(struct state *s, struct wr *w)
{
	struct hent *h = &s->h[w->hist];
	unsigned p = prim(w->epoch);

	if (w == &s->w[RB]) {
		w->val = s->rep[p].val; /* writes back what it reads */
		return 1;
	}
	if (h->kind != H_RMW)
		return 1;
	if (h->natt >= ATT_MAX)
		return 0;
	h->att_old[h->natt] = s->rep[p].val;
	w->val = att_val(w->hist, h->natt);
	h->natt++;
	return 1;
}

/* the op of w took effect with the value val: which attempt */
static void w_done(struct state *s, struct wr *w, uint8_t val)
{
	struct hent *h = &s->h[w->hist];

	if (h->kind == H_RMW)
		h->eff = (uint8_t)(val - att_val(w->hist, 0));
	h_end(s, w->hist, val);
}

/* val was written by an attempt of w's current op */
static int w_wrote(const struct state *s, const struct wr *w, uint8_t val)
{
	const struct hent *h = &s->h[w->hist];

	if (h->kind != H_RMW)
		return val == h->val;
	for (unsigned k = 0; k < h->natt; k++)
		if (val == att_val(w->hist, k))
			return 1;
	return 0;
}

/* w's map names a replica it cannot use: 0 (cannot move) until a newer
 * map is published, then 1, on to that map */
static int w_away(struct state *s, struct wr *w)
{
	if (s->epoch == w->epoch)
		return 0;
	w_new_map(s, w);
	return 1;
}

/* a >= b for sequences; BUG_SEQ_WRAP: as serial numbers modulo WRAP */
static int seq_ge(const struct scen *sc, unsigned a, unsigned b)
{
	if (sc->bug == BUG_SEQ_WRAP)
		return ((a - b) % WRAP) < WRAP / 2;
	return a >= b;
}

/* the writer's step; returns 0 when it cannot move now */
static int w_step(const struct ctx *x, struct state *s, unsigned wi)
{
	const struct scen *sc = x->sc;
	struct wr *w = &s->w[wi];
	unsigned p;

	switch (w->pc) {
	case W_IDLE:
		if (wi == RB) {
			/* once, when the map with the extra backup is out */
			if (w->op >= 1) {
				w->pc = W_DONE;
				return 1;
			}
			if (s->jphase != 2 || sc->bug == BUG_JOIN_NO_REBUILD)
				return 0;
			w->epoch = s->epoch;
			w->installed = 0;
			w->pc = W_LOCK;
			return 1;
		}
		if (w->op >= sc->nops[wi]) {
			w->pc = W_DONE;
			return 1;
		}
		w->epoch = s->epoch;
		w->installed = 0;
		if (sc->rmw & (1u << (wi * OPS_MAX + w->op))) {
			w->hist = (uint8_t)h_begin(s, H_RMW, 0);
		} else if (sc->dels & (1u << (wi * OPS_MAX + w->op))) {
			w->val = 0;          /* a tombstone: "absent" */
			w->hist = (uint8_t)h_begin(s, H_DEL, 0);
		} else {
			w->val = (uint8_t)(1 + wi * OPS_MAX + w->op);
			w->hist = (uint8_t)h_begin(s, H_PUT, w->val);
		}
		w->pc = W_LOCK;
		return 1;
	case W_LOCK:
		p = prim(w->epoch);
		if (!usable(s, p, w->epoch))
			return w_away(s, w);
		if (s->rep[p].lock || s->rep[p].tent)
			return 0;                    /* steals: see explore() */
		if (!rmw_attempt(s, w))
			return 0;
		if (wi == RB && w->val == 0) {
			/* absent (or no slot): nothing to write again */
			w->op++;
			w->pc = W_IDLE;
			return 1;
		}
		if (!s->rep[p].present) {
			/* no slot: insert one, tentative (§6 makes it the
			 * only one), committed as a locked tombstone */
			s->rep[p].tent = (uint8_t)(wi + 1);
			w->pc = W_COMMIT;
			return 1;
		}
		s->rep[p].lock = 1;
		w->seq = s->rep[p].ver;
		w->b = 0;
		w->pc = sc->bug == BUG_RELEASE_FIRST ? W_RELEASE : W_READB;
		return 1;
	case W_COMMIT:
		p = prim(w->epoch);
		if (!usable(s, p, w->epoch))
			return w_away(s, w);
		if (s->rep[p].tent != wi + 1) {
			w->pc = W_LOCK;              /* cleared: again */
			return 1;
		}
		/* tentative -> {tombstone, version 1, LOCK}: readers see the
		 * key absent until the release */
		s->rep[p].tent = 0;
		s->rep[p].present = 1;
		s->rep[p].val = 0;
		s->rep[p].ver = 1;
		s->rep[p].vseq = 0;
		s->rep[p].lock = 1;
		if (x->sc->bug == BUG_INS_VALUE) {
			/* r=1's insert: the slot names the new value at once */
			s->rep[p].val = w->val;
			s->rep[p].vseq = 1;
		}
		w->seq = 1;
		w->b = 0;
		w->pc = W_READB;
		return 1;
	case W_READB:
	case W_CASB: {
		struct mset ms = set_of(w->epoch);
		unsigned nb = ms.n - 1;
		unsigned b = w->b < nb ? ms.rep[1 + w->b] : 0;

		if (w->b >= nb) {
			w->pc = sc->bug == BUG_RELEASE_FIRST ? W_IDLE : W_RELEASE;
			if (sc->bug == BUG_RELEASE_FIRST) {
				w->op++;
			}
			return 1;
		}
		if (!s->rep[b].alive ||
		    (sc->bug != BUG_NO_FENCE && s->rep[b].fence > w->epoch))
			return w_away(s, w);
		if (w->pc == W_READB) {
			w->seen_val = s->rep[b].val;
			w->seen_ver = s->rep[b].ver;
			w->seen_lock = s->rep[b].lock;
			if (sc->bug != BUG_NO_SEQ_CHECK &&
			    seq_ge(sc, w->seen_ver, w->seq))
				w->b++;              /* ours or newer: done */
			else
				w->pc = W_CASB;
			return 1;
		}
		if (s->rep[b].val == w->seen_val && s->rep[b].ver == w->seen_ver &&
		    s->rep[b].lock == w->seen_lock) {
			s->rep[b].val = w->val;
			s->rep[b].ver = w->seq;
			s->rep[b].vseq = w->seq;
			s->rep[b].lock = 0;
			if (w->val == 0 && sc->bug == BUG_DEL_EMPTIES) {
				/* an emptied slot word: no sequence left */
				s->rep[b].ver = 0;
				s->rep[b].vseq = 0;
			}
			w->installed = 1;
			w->b++;
		}
		w->pc = W_READB;
		return 1;
	}
	case W_RELEASE:
		p = prim(w->epoch);
		if (!usable(s, p, w->epoch))
			return w_away(s, w);
		if (s->rep[p].lock && s->rep[p].ver == w->seq) {
			s->rep[p].val = w->val;
			s->rep[p].ver = (uint16_t)(w->seq + 1);
			s->rep[p].vseq = w->seq;
			s->rep[p].lock = 0;
			if (wi == RB) {
				w->op++;
				w->pc = W_IDLE;
				return 1;
			}
			if (sc->bug == BUG_RELEASE_FIRST) {
				w->b = 0;
				w->pc = W_READB;     /* backups after the ack */
				w_done(s, w, w->val);
				return 1;
			}
			w_done(s, w, w->val);
			w->op++;
			w->pc = W_IDLE;
		} else {
			w->pc = W_LOCK;              /* stolen: again */
		}
		return 1;
	case W_CHECK:
		p = prim(w->epoch);
		if (!usable(s, p, w->epoch)) {
			if (s->epoch == w->epoch)
				return 0;
			w->epoch = s->epoch;
			return 1;
		}
		if (x->sc->bug == BUG_BLIND_RETRY) {
			w->pc = W_LOCK;
			return 1;
		}
		/* its own block is current: it took effect; else the outcome
		 * is unknown (the op fails, "may have taken effect") */
		if (w_wrote(s, w, s->rep[p].val))
			w_done(s, w, s->rep[p].val);
		w->op++;
		w->pc = W_IDLE;
		return 1;
	default:
		return 0;
	}
}

/* The join's coordinator: what 0 moves it on (begin, publish epoch 2
 * once every replica is fenced, begin the second half once the rebuild
 * is done, reconcile and publish epoch 3 once every replica is fenced
 * again); what 1..3 fences that replica. */
static int join_step(const struct ctx *x, struct state *s, unsigned what)
{
	const struct scen *sc = x->sc;
	unsigned all = nreps(sc), mask = (1u << all) - 1;

	if (what == 0) {
		switch (s->jphase) {
		case 0:
			s->jphase = 1;
			s->fenced = 0;
			return 1;
		case 1:
			if (sc->bug != BUG_JOIN_NO_FENCE && s->fenced != mask)
				return 0;
			s->epoch = 2;
			s->jphase = 2;
			return 1;
		case 2:
			if (s->w[RB].pc != W_DONE &&
			    sc->bug != BUG_JOIN_NO_REBUILD)
				return 0;
			s->jphase = 3;
			s->fenced = 0;
			return 1;
		case 3: {
			struct mset f = set_of(3);
			unsigned np = f.rep[0];
			uint8_t val = s->rep[np].val;
			uint16_t m = 0;

			if (s->fenced != mask)
				return 0;
			/* the failover's reconcile over the final set */
			for (unsigned k = 0; k < f.n; k++)
				if (s->rep[f.rep[k]].ver > m)
					m = s->rep[f.rep[k]].ver;
			for (unsigned k = 0; k < f.n; k++) {
				struct rep *rp = &s->rep[f.rep[k]];

				rp->val = val;
				rp->ver = (uint16_t)(f.rep[k] == np ? m + 2
								    : m + 1);
				rp->vseq = (uint16_t)(m + 1);
				rp->lock = 0;
				rp->present = 1;
			}
			s->epoch = 3;
			s->jphase = 4;
			return 1;
		}
		default:
			return 0;
		}
	}
	if (what > all || (s->jphase != 1 && s->jphase != 3) ||
	    (s->fenced & (1u << (what - 1))))
		return 0;
	if (!(sc->bug == BUG_JOIN_NO_FENCE && s->jphase == 1) &&
	    !(sc->bug == BUG_NO_FENCE && s->jphase == 3))
		s->rep[what - 1].fence = (uint8_t)(s->jphase == 1 ? 2 : 3);
	s->fenced = (uint8_t)(s->fenced | (1u << (what - 1)));
	return 1;
}

/*
 * The sweep (rkv admin sweep): one fenced step with the same replica
 * set.  what 1..r fences that replica at epoch 2; what 0 begins, then,
 * once every replica is fenced, reconciles and publishes epoch 2: a key
 * whose primary holds a tombstone loses its slot on every replica (the
 * sweep), a live one is reconciled as a failover does.  Nobody writes
 * between the fences and the publish: the old map's clients are fenced,
 * the new map is not out yet.
 */
static int sweep_step(const struct ctx *x, struct state *s, unsigned what)
{
	const struct scen *sc = x->sc;
	unsigned mask = (1u << sc->r) - 1;

	if (what == 0 && s->jphase == 0) {
		s->jphase = 1;
		s->fenced = 0;
		return 1;
	}
	if (what == 0 && s->jphase == 1) {
		unsigned p = prim(s->epoch);
		uint8_t val = s->rep[p].val;
		uint16_t m = 0;

		if (s->fenced != mask)
			return 0;
		for (unsigned i = 0; i < sc->r; i++)
			if (s->rep[i].ver > m)
				m = s->rep[i].ver;
		for (unsigned i = 0; i < sc->r; i++) {
			struct rep *rp = &s->rep[i];

			rp->lock = 0;
			if (val == 0) {
				/* a tombstone (or no slot): no slot left
				 * anywhere; a fenced inserter's tentative
				 * slot stays for the next inserter to clear */
				rp->present = 0;
				rp->val = 0;
				rp->ver = 0;
				rp->vseq = 0;
				continue;
			}
			rp->val = val;
			rp->ver = (uint16_t)(i == p ? m + 2 : m + 1);
			rp->vseq = (uint16_t)(m + 1);
			rp->present = 1;
		}
		s->epoch = 2;
		s->jphase = 2;
		return 1;
	}
	if (what == 0 || what > sc->r || s->jphase != 1 ||
	    (s->fenced & (1u << (what - 1))))
		return 0;
	if (sc->bug != BUG_SWEEP_NO_FENCE)
		s->rep[what - 1].fence = 2;
	s->fenced = (uint8_t)(s->fenced | (1u << (what - 1)));
	return 1;
}

static int coord_step(const struct ctx *x, struct state *s, unsigned what)
{
	const struct scen *sc = x->sc;
	unsigned p = prim(s->epoch);

	if (sc->join)
		return join_step(x, s, what);
	if (sc->sweep)
		return sweep_step(x, s, what);

	if (what == 0) {                             /* kill the primary */
		if (s->coord || s->dead_prims >= sc->failures)
			return 0;
		s->rep[p].alive = 0;
		s->dead_prims++;
		s->coord = 1;
		s->fenced = 0;
		return 1;
	}
	if (!s->coord)
		return 0;
	if (what <= sc->r) {                         /* fence survivor */
		unsigned i = what - 1;

		if (i <= p || (s->fenced & (1u << i)))
			return 0;
		if (sc->bug != BUG_NO_FENCE)
			s->rep[i].fence = (uint8_t)(s->epoch + 1);
		s->fenced = (uint8_t)(s->fenced | (1u << i));
		return 1;
	}
	/* reconcile and publish, once every survivor is fenced */
	for (unsigned i = p + 1; i < sc->r; i++)
		if (!(s->fenced & (1u << i)))
			return 0;
	unsigned np = p + 1;
	uint16_t m = 0;

	for (unsigned i = np; i < sc->r; i++)
		if (s->rep[i].ver > m)
			m = s->rep[i].ver;
	for (unsigned i = np; i < sc->r; i++) {
		s->rep[i].val = s->rep[np].val;
		s->rep[i].ver = (uint16_t)(i == np ? m + 2 : m + 1);
		s->rep[i].vseq = (uint16_t)(m + 1);
		s->rep[i].lock = 0;
		s->rep[i].present = 1;
	}
	s->epoch++;
	s->coord = 0;
	return 1;
}

static void finish(struct ctx *x, const struct state *s0)
{
	struct state s = *s0;
	unsigned p = prim(s.epoch);

	x->ends++;
	if (s.coord || !s.rep[p].alive)
		return;
	unsigned i = h_begin(&s, H_GET, 0);

	h_end(&s, i, s.rep[p].val);
	if (!linearizable(&s))
		fail(x, &s, "not linearizable");
}

static void explore(struct ctx *x, const struct state *s)
{
	const struct scen *sc = x->sc;
	int moved = 0;

	if (x->violations)
		return;
	for (unsigned wi = 0; wi < W_N + (sc->join ? 1u : 0u); wi++) {
		struct state t = *s;
		int rb = wi == RB;

		if (w_step(x, &t, wi)) {
			next(x, &t);
			moved = 1;
		}
		/* a waiting writer steals the lock (its holder may be paused);
		 * the rebuilder once, beside the budget (a real one waits a
		 * lease like any writer) */
		t = *s;
		if ((rb ? s->rb_steals < 1 : s->steals < sc->steals) &&
		    t.w[wi].pc == W_LOCK &&
		    usable(&t, prim(t.w[wi].epoch), t.w[wi].epoch) &&
		    t.rep[prim(t.w[wi].epoch)].lock) {
			unsigned p = prim(t.w[wi].epoch);

			if (!rmw_attempt(&t, &t.w[wi]))
				goto no_steal;
			if (rb && t.w[wi].val == 0) {
				/* absent: stolen and released unchanged */
				t.rep[p].ver = (uint16_t)(t.rep[p].ver + 2);
				t.rep[p].lock = 0;
				t.w[wi].op++;
				t.w[wi].pc = W_IDLE;
				t.rb_steals++;
				next(x, &t);
				moved = 1;
				goto no_steal;
			}
			t.rep[p].ver++;
			t.w[wi].seq = t.rep[p].ver;
			t.w[wi].b = 0;
			t.w[wi].pc = sc->bug == BUG_RELEASE_FIRST ? W_RELEASE
								  : W_READB;
			if (rb)
				t.rb_steals++;
			else
				t.steals++;
			next(x, &t);
			moved = 1;
		}
no_steal:
		if (rb)
			continue;
		/* ... or clears a tentative slot whose inserter looks dead
		 * (§6: after a lease), then inserts its own */
		t = *s;
		if (s->steals < sc->steals && t.w[wi].pc == W_LOCK &&
		    usable(&t, prim(t.w[wi].epoch), t.w[wi].epoch) &&
		    t.rep[prim(t.w[wi].epoch)].tent) {
			t.rep[prim(t.w[wi].epoch)].tent = 0;
			t.steals++;
			next(x, &t);
			moved = 1;
		}
		/* the writer crashes: its op stays pending for ever */
		t = *s;
		if (s->kills < sc->kills && t.w[wi].pc != W_DONE &&
		    t.w[wi].pc != W_DEAD && t.w[wi].pc != W_IDLE) {
			t.w[wi].pc = W_DEAD;
			t.kills++;
			next(x, &t);
			moved = 1;
		}
	}
	/* the reader: one get = one READ of its map's primary */
	if (s->rd_n < GETS) {
		struct state t = *s;
		unsigned p = prim(t.rd_epoch);

		if (usable(&t, p, t.rd_epoch)) {
			unsigned i = h_begin(&t, H_GET, 0);

			h_end(&t, i, t.rep[p].val);
			t.rd_n++;
			next(x, &t);
			moved = 1;
		} else if (t.epoch != t.rd_epoch) {
			t.rd_epoch = t.epoch;
			next(x, &t);
			moved = 1;
		}
	}
	for (unsigned what = 0; what <= nreps(sc) + 1; what++) {
		struct state t = *s;

		if (coord_step(x, &t, what)) {
			next(x, &t);
			moved = 1;
		}
	}
	if (!moved)
		finish(x, s);
}

static int run(const struct scen *sc, struct ctx *x)
{
	struct state s;
	const char *only = getenv("RKV_MODEL_ONLY"); /* a name's substring */

	memset(x, 0, sizeof(*x));
	if (only && !strstr(sc->name, only)) {
		x->ends = 1;
		x->violations = sc->bug != OK;
		return 0;
	}
	x->sc = sc;
	g_sc = sc;
	/* sanitizers slow this single-threaded search 15x, and what they
	 * could find in it (a bad access of the search itself) shows in its
	 * first states as well: there each scenario stops at 250,000, the
	 * plain build (make test) explores every state */
	x->limit = RKV_TEST_SANITIZED ? 250000 : 0;
	x->seen_cap = (size_t)1 << (RKV_TEST_SANITIZED ? 20 : 24);
	x->seen = calloc(x->seen_cap, sizeof(uint64_t));
	if (!x->seen)
		return -1;
	memset(&s, 0, sizeof(s));
	for (unsigned i = 0; i < nreps(sc); i++) {
		s.rep[i].alive = 1;
		s.rep[i].fence = 1;
		/* a tombstone everywhere (primary ver = seq + 1), or no slot
		 * anywhere; nothing on the server a join adds */
		s.rep[i].present = !sc->fresh && i < sc->r;
		s.rep[i].ver = i == 0 && !sc->fresh ? 1 : 0;
	}
	s.epoch = 1;
	s.rd_epoch = 1;
	for (unsigned wi = 0; wi < W_N; wi++)
		s.w[wi].pc = W_IDLE;
	remember(x, &s);
	explore(x, &s);
	free(x->seen);
	printf("#   %-28s %9llu states, %7llu ends, %s%s\n", sc->name,
	       (unsigned long long)x->states, (unsigned long long)x->ends,
	       x->violations ? "VIOLATION" : "no violation",
	       x->limit && x->states >= x->limit ?
		       " (a sanitizer build stops there; the plain one "
		       "explores all)" :
		       "");
	if (x->violations)
		printf("#     %s\n", x->first);
	fflush(stdout);
	return 0;
}

static const struct scen good[] = {
	/* name, r, ops, failures, crashes, steals, bug, rmws, dels, fresh,
	 * join, sweep */
	{ "r=2, 2+1 puts, crash, steal", 2, { 2, 1 }, 1, 1, 1, OK, 0, 0, 0, NO_JOIN, 0 },
	{ "r=2, 1+1 puts, crash, 2 steals", 2, { 1, 1 }, 1, 1, 2, OK, 0, 0,
	  0, NO_JOIN, 0 },
	{ "r=3, 1+1 puts, crash, steal", 3, { 1, 1 }, 1, 1, 1, OK, 0, 0, 0, NO_JOIN, 0 },
	{ "r=3, 1+1 puts, two failures", 3, { 1, 1 }, 2, 1, 1, OK, 0, 0, 0, NO_JOIN, 0 },
	{ "r=2, rmw+put and rmw", 2, { 2, 1 }, 1, 1, 1, OK, 0x5, 0, 0, NO_JOIN, 0 },
	{ "r=2, 1+1 rmws, 2 steals", 2, { 1, 1 }, 1, 1, 2, OK, 0x5, 0, 0, NO_JOIN, 0 },
	{ "r=3, 1+1 rmws, two failures", 3, { 1, 1 }, 2, 1, 1, OK, 0x5, 0, 0, NO_JOIN, 0 },
	{ "r=2, put+del and put", 2, { 2, 1 }, 1, 1, 1, OK, 0, 0x2, 0, NO_JOIN, 0 },
	{ "r=2, del and rmw, 2 steals", 2, { 1, 1 }, 1, 1, 2, OK, 0x4, 0x1,
	  0, NO_JOIN, 0 },
	{ "r=3, del and put, two failures", 3, { 1, 1 }, 2, 1, 1, OK, 0, 0x1,
	  0, NO_JOIN, 0 },
	{ "r=2, new key: 2+1 puts", 2, { 2, 1 }, 1, 1, 1, OK, 0, 0, 1, NO_JOIN, 0 },
	{ "r=2, new key: rmw, del+put", 2, { 1, 2 }, 1, 1, 1, OK, 0x1, 0x4,
	  1, NO_JOIN, 0 },
	{ "r=3, new key: 2 rmws, 2 fails", 3, { 1, 1 }, 2, 1, 1, OK, 0x5, 0,
	  1, NO_JOIN, 0 },
	{ "r=2, join as primary: puts, crash", 2, { 1, 1 }, 0, 1, 1, OK, 0, 0, 0,
	  JOIN_PRIM, 0 },
	{ "r=2, join as primary: rmw, del", 2, { 1, 1 }, 0, 0, 1, OK, 0x1, 0x4,
	  0, JOIN_PRIM, 0 },
	{ "r=2, join as backup: 1+1 puts", 2, { 1, 1 }, 0, 0, 1, OK, 0, 0, 0,
	  JOIN_BACKUP, 0 },
	{ "r=2, drain the primary: rmws", 2, { 1, 1 }, 0, 0, 1, OK, 0x5, 0, 0,
	  LEAVE_PRIM, 0 },
	{ "r=2, sweep: put, del+put", 2, { 1, 2 }, 0, 1, 1, OK, 0, 0x4, 0,
	  NO_JOIN, 1 },
	{ "r=2, sweep: del+rmw, rmw", 2, { 2, 1 }, 0, 1, 2, OK, 0x6, 0x1, 0,
	  NO_JOIN, 1 },
	{ "r=3, sweep: del+put, put", 3, { 2, 1 }, 0, 1, 1, OK, 0, 0x1, 0,
	  NO_JOIN, 1 },
	{ "r=2, sweep, new key: del, put", 2, { 1, 1 }, 0, 1, 1, OK, 0, 0x1, 1,
	  NO_JOIN, 1 },
};

static void t_protocol(void)
{
	struct ctx x;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ASSERT_EQ(run(&good[i], &x), 0);
		EXPECT_EQ(x.violations, 0);
		EXPECT_TRUE(x.ends > 0);
	}
}

static const struct scen bad[] = {
	{ "bug: release first", 2, { 1, 1 }, 1, 0, 0, BUG_RELEASE_FIRST, 0, 0,
	  0, NO_JOIN, 0 },
	{ "bug: no sequence check", 2, { 2, 1 }, 1, 1, 1, BUG_NO_SEQ_CHECK,
	  0, 0, 0, NO_JOIN, 0 },
	{ "bug: no fence", 3, { 1, 1 }, 1, 0, 2, BUG_NO_FENCE, 0, 0, 0, NO_JOIN, 0 },
	{ "bug: blind retry", 2, { 2, 1 }, 1, 1, 1, BUG_BLIND_RETRY, 0, 0, 0, NO_JOIN, 0 },
	{ "bug: blind retry of rmws", 2, { 1, 1 }, 1, 0, 0, BUG_BLIND_RETRY,
	  0x5, 0, 0, NO_JOIN, 0 },
	{ "bug: delete empties backups", 2, { 1, 1 }, 1, 1, 1,
	  BUG_DEL_EMPTIES, 0, 0x4, 0, NO_JOIN, 0 },
	{ "bug: sequences wrap", 2, { 1, 2 }, 1, 0, 1, BUG_SEQ_WRAP, 0, 0, 0, NO_JOIN, 0 },
	{ "bug: insert shows its value", 2, { 1, 1 }, 1, 0, 0, BUG_INS_VALUE,
	  0, 0, 1, NO_JOIN, 0 },
	{ "bug: join, no first fence", 2, { 1, 1 }, 0, 0, 1, BUG_JOIN_NO_FENCE,
	  0, 0, 0, JOIN_PRIM, 0 },
	{ "bug: join, no rebuild", 2, { 1, 1 }, 0, 0, 0, BUG_JOIN_NO_REBUILD,
	  0, 0, 0, JOIN_PRIM, 0 },
	{ "bug: join, no second fence", 2, { 1, 1 }, 0, 0, 1, BUG_NO_FENCE, 0,
	  0, 0, JOIN_PRIM, 0 },
	{ "bug: sweep without a fence", 2, { 1, 2 }, 0, 1, 1,
	  BUG_SWEEP_NO_FENCE, 0, 0x4, 0, NO_JOIN, 1 },
};

/* each broken protocol is caught */
static void t_broken(void)
{
	struct ctx x;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ASSERT_EQ(run(&bad[i], &x), 0);
		EXPECT_TRUE(x.violations > 0);
	}
}

/* the checker itself, on hand-made histories */
static void t_checker(void)
{
	struct state s;

	memset(&s, 0, sizeof(s));
	h_end(&s, h_begin(&s, H_PUT, 5), 5);
	h_end(&s, h_begin(&s, H_GET, 0), 5);
	EXPECT_TRUE(linearizable(&s));
	h_end(&s, h_begin(&s, H_GET, 0), 0);  /* the old value after 5 */
	EXPECT_TRUE(!linearizable(&s));

	memset(&s, 0, sizeof(s));
	(void)h_begin(&s, H_PUT, 7);          /* pending put */
	h_end(&s, h_begin(&s, H_GET, 0), 7);
	h_end(&s, h_begin(&s, H_GET, 0), 0);  /* 7 then 0: no */
	EXPECT_TRUE(!linearizable(&s));

	/* two rmws that both read 0 and both took effect: a lost update */
	memset(&s, 0, sizeof(s));
	for (unsigned i = 0; i < 2; i++) {
		unsigned h = h_begin(&s, H_RMW, 0);

		s.h[h].att_old[0] = 0;
		s.h[h].natt = 1;
		s.h[h].eff = 0;
		h_end(&s, h, att_val(h, 0));
	}
	EXPECT_TRUE(!linearizable(&s));
	s.h[1].att_old[1] = att_val(0, 0);    /* the second one's retry */
	s.h[1].natt = 2;
	s.h[1].eff = 1;
	s.h[1].val = att_val(1, 1);
	EXPECT_TRUE(linearizable(&s));
}

int main(int argc, char **argv)
{
	rkv_test_init(argc, argv, 600);
	RKV_TEST(t_checker);
	RKV_TEST(t_protocol);
	RKV_TEST(t_broken);
	return rkv_test_done();
}
