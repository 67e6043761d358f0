/* SPDX-License-Identifier: MIT */
/*
 * explore.c - the interleaving explorer (explore.h).  Included by
 * tests/unit/test_explore.c (the Makefile builds one binary per test file).
 *
 * It uses only the public client API (client/rkv.h: rkv_submit, rkv_poll),
 * the transport interface with the fake provider's controls, and the
 * server's internals (server_internal.h: the regions, the control loop),
 * so it keeps working while client/ops.c changes.
 *
 * A world: one server (2 buckets of 8 slots, 64 KiB of data, lease 100 ms, grace
 * 1000 ms of fake time), or 2-3 such servers and a cluster file naming
 * them with a replication factor; a setup client that lays each index out
 * and leaves, and the scenario's clients (one op in flight each).  A step
 * is one queued chain executed at its server's memory (or its next WR
 * with split), then "settle": the servers' control planes and every
 * client are polled until the fake provider reports no activity; op
 * completions are recorded and the client's next op is submitted there.
 */
#include "explore.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmap.h"
#include "fake.h"
#include "test.h"
#include "layout.h"
#include "log.h"
#include "msg.h"
#include "rkv.h"
#include "rtime.h"
#include "server_internal.h"

/* server/space.c's unit state (0 free, 1 allocated, 2 in grace), when the
 * build has it: a weak reference, so the check simply drops out where it
 * does not. */
extern int x_space_unit_state(const struct rkv_space *sp, uint64_t offset)
	__asm__("rkv_space_unit_state") __attribute__((weak));

/* Every interleaving creates its clients and servers anew.  jemalloc
 * zeroes a recycled large calloc (a client is 48 KiB) by MADV_DONTNEED
 * and takes the pages back one fault at a time, a TLB flush each; with
 * thp:always it memsets instead: t_put_rmw_delete 54.6 -> 29.4 s.  Read
 * by jemalloc when it is the malloc (MALLOC=jemalloc), ignored otherwise. */
const char *malloc_conf = "thp:always";

#define X_NBUCKETS 2u
#define X_BUCKET_SLOTS 8u /* --bucket-slots: the smallest */
#define X_NSLOTS (X_NBUCKETS * X_BUCKET_SLOTS)
/* sc->grow: --index-max 4K lets the index grow one level (14 buckets) */
#define X_GROW_SLOTS (rkv_index_nbuckets(X_NBUCKETS, 2) * X_BUCKET_SLOTS)
#define X_LEASE_MS 100u
#define X_GRACE_MS 1000u
#define X_MAX_KEYS 8
#define X_MAX_HIST (X_MAX_CL * X_MAX_OPS + X_MAX_KEYS)
#define X_MAX_EN 16
#define X_MAX_DEPTH 200
#define X_MAX_FP 24
#define X_MAX_RET 256
#define X_VAL_MAX 96
#define X_DRAIN_MAX 400

/* ------------------------------------------------------------- the world */

struct x_hist {
	int client;              /* -1: the final cold read */
	int key;
	enum x_kind kind;
	const char *arg;
	int status;
	int done;
	char out[X_VAL_MAX];
	uint64_t inv, resp;
};

struct x_client {
	struct rkv_client *c;
	int dead;
	unsigned next;           /* next script op to submit */
	int busy;                /* an op is in flight */
	unsigned hist;           /* its history entry */
	unsigned nsteps[X_MAX_SRV]; /* chains (WRs with split) it executed,
				 * per server */
	struct rkv_op op;
	char buf[X_VAL_MAX];
};

struct x_rng {
	uint8_t region;          /* server * 3 + (0 index, 1 data, 2 other) */
	uint8_t write;
	uint32_t off, len;
};

enum x_trk { XT_STEP = 1, XT_KILL, XT_ADV };

struct x_tr {
	uint8_t kind;            /* enum x_trk */
	uint8_t cl;
	uint8_t sv;              /* XT_STEP: the server of the round */
	uint16_t seq;            /* XT_STEP: the client's step number there */
	uint8_t global;          /* commutes with nothing */
	uint8_t hist;            /* an op finished (and the next began) */
	uint8_t nfp;
	struct x_rng fp[X_MAX_FP];
};

struct x_node {
	unsigned nen, nsl, ndone;
	int cur;
	struct x_tr en[X_MAX_EN];
	struct x_tr sl[X_MAX_EN];
	struct x_tr done[X_MAX_EN];
	struct x_tr chosen;
};

struct x_world {
	const struct x_scenario *sc;
	unsigned nsrv;
	struct rkv_srv *srv[X_MAX_SRV];
	char srvtag[X_MAX_SRV];  /* the servers' context tags */
	char map[64];            /* the cluster file (nsrv > 1) */
	struct x_client cl[X_MAX_CL + 1]; /* [X_MAX_CL]: the setup client */
	const char *keys[X_MAX_KEYS];
	unsigned nkeys;
	unsigned nrep;           /* replicas of every key (r) */
	unsigned krep[X_MAX_KEYS]; /* key k's: r, or r + 1 (transit) */
	uint8_t rep[X_MAX_KEYS][X_MAX_SRV]; /* their servers, primary first */
	struct x_hist hist[X_MAX_HIST];
	unsigned nhist;
	uint64_t clock;          /* logical time of history events */
	int warming;             /* world_build's warm puts: no script yet */
	unsigned kills, advances;
	int in_pump;
	/* effects of the step being executed */
	int ctrl_seen, resp_seen;
	/* extents returned by clients and not granted again */
	struct { uint64_t off, len; unsigned sv; } ret[X_MAX_RET];
	unsigned nret;
	int ret_overflow;
	/* the run's verdict */
	int violated;
	char why[2048];
	uint64_t transient;
	int verbose;
};

static uint64_t g_x_now_ns;
static int g_x_auto_tick;    /* teardown: time passes by itself */
static int g_x_strict;
static struct x_world g_x;
static struct x_node g_x_stack[X_MAX_DEPTH + 1];
static struct rkv_msg g_x_msg;

static uint64_t x_now(void)
{
	if (g_x_auto_tick)
		g_x_now_ns += 1000000u; /* bounded waits in destroy end */
	return g_x_now_ns;
}

static void x_violation(struct x_world *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void x_violation(struct x_world *w, const char *fmt, ...)
{
	va_list ap;
	size_t n = strlen(w->why);

	w->violated = 1;
	if (n + 2 >= sizeof(w->why))
		return;
	va_start(ap, fmt);
	vsnprintf(w->why + n, sizeof(w->why) - n, fmt, ap);
	va_end(ap);
	n = strlen(w->why);
	if (n + 1 < sizeof(w->why)) {
		w->why[n] = '\n';
		w->why[n + 1] = 0;
	}
}

static int key_id(const struct x_world *w, const void *k, size_t kl)
{
	for (unsigned i = 0; i < w->nkeys; i++)
		if (strlen(w->keys[i]) == kl && memcmp(w->keys[i], k, kl) == 0)
			return (int)i;
	return -1;
}

static char cl_name(unsigned i)
{
	return i == X_MAX_CL ? 'S' : (char)('A' + i);
}

/* The control planes of the servers, until they have nothing more to do. */
static void pump(struct x_world *w)
{
	uint64_t now = g_x_now_ns / 1000000u;
	int n;

	if (w->in_pump)
		return;
	w->in_pump = 1;
	do {
		n = 0;
		for (unsigned i = 0; i < w->nsrv; i++) {
			if (!w->srv[i])
				continue;
			n += rkv_srv_ctrl_accept(w->srv[i], now);
			int m = rkv_srv_ctrl_poll(w->srv[i], now);

			n += m > 0 ? m : 0;
		}
	} while (n > 0);
	for (unsigned i = 0; i < w->nsrv; i++) {
		if (!w->srv[i])
			continue;
		rkv_srv_ctrl_tick(w->srv[i], now);
		rkv_space_tick(w->srv[i]->space, now);
	}
	w->in_pump = 0;
}

/* The server a context tag belongs to, or -1 (a client). */
static int srv_of_tag(const struct x_world *w, const void *tag)
{
	for (unsigned i = 0; i < X_MAX_SRV; i++)
		if (tag == &w->srvtag[i])
			return (int)i;
	return -1;
}

static void idle_hook(void *arg)
{
	pump(arg);
}

/* BLOCK_RETURN from a client, CHUNK_GRANT to one: the shadow of what the
 * server may reuse. */
static void msg_hook(void *from, void *to, const void *buf, size_t len,
		     void *arg)
{
	struct x_world *w = arg;
	struct rkv_msg *m = &g_x_msg;

	int fs = srv_of_tag(w, from), ts = srv_of_tag(w, to);

	w->ctrl_seen = 1;
	if (rkv_msg_decode(buf, len, m))
		return;
	if (fs < 0 && ts >= 0 && m->hdr.type == RKV_MSG_BLOCK_RETURN) {
		for (unsigned i = 0; i < m->u.block_return.count; i++) {
			if (w->nret == X_MAX_RET) {
				w->ret_overflow = 1;
				break;
			}
			w->ret[w->nret].off = m->u.block_return.ext[i].offset;
			w->ret[w->nret].len = m->u.block_return.ext[i].len;
			w->ret[w->nret].sv = (unsigned)ts;
			w->nret++;
		}
	} else if (fs >= 0 && m->hdr.type == RKV_MSG_CHUNK_GRANT &&
		   m->u.chunk_grant.status == 0) {
		uint64_t lo = m->u.chunk_grant.offset,
			 hi = lo + m->u.chunk_grant.len;

		for (unsigned i = 0; i < w->nret;) {
			if (w->ret[i].sv == (unsigned)fs && w->ret[i].off < hi &&
			    lo < w->ret[i].off + w->ret[i].len)
				w->ret[i] = w->ret[--w->nret];
			else
				i++;
		}
	}
}

/* ------------------------------------------------------------ the index */

/*
 * What counts as a visible copy, in one place: a slot that is not empty
 * and, where the layout has the tentative mark (an insert in progress that
 * readers skip), not tentative.  A locked slot is visible: it still names
 * the last published block, which gets read without waiting.  The block
 * must also verify (x_slot_block).
 */
int x_slot_visible(uint64_t slot)
{
	if (rkv_slot_empty(slot))
		return 0;
#ifdef RKV_SLOT_TENT
	if (slot & RKV_SLOT_TENT)
		return 0;
#endif
	return 1;
}

static uint64_t slot_word(const struct x_world *w, unsigned sv, unsigned i)
{
	uint64_t v;

	memcpy(&v, (const char *)w->srv[sv]->index_mem + i * 8u, 8);
	return v;
}

/* A slot of an index and its block: what the loops below look at. */
struct x_slot {
	uint64_t word;
	int valid;               /* the block verifies: the rest is set */
	const char *key, *val;
	size_t kl;
	uint32_t vl;
	uint64_t seq;            /* the header's version */
	int tomb;                /* a tombstone (RKV_BLOCK_F_DELETED) */
};

/* The block a slot word of server sv names, if it verifies. */
static int x_slot_block(const struct x_world *w, unsigned sv, uint64_t slot,
			struct x_slot *sl)
{
	const struct rkv_block_hdr *h;
	const void *v;
	uint64_t off = rkv_slot_offset(slot);
	uint32_t sz = rkv_slot_size(slot);

	if (!sz || off + sz > w->srv[sv]->data_len)
		return 0;
	const char *blk = (const char *)w->srv[sv]->data_mem + off;

	if (rkv_block_decode(blk, sz, NULL, 0, &v, &sl->vl, &h))
		return 0;
	sl->key = blk + RKV_BLOCK_HDR_SIZE;
	sl->kl = h->key_len;
	sl->val = v;
	sl->seq = h->version;
	sl->tomb = (h->flags & RKV_BLOCK_F_DELETED) != 0;
	return 1;
}

/* Slot i of server sv; returns 0 when it is empty. */
static int slot_get(const struct x_world *w, unsigned sv, unsigned i,
		    struct x_slot *sl)
{
	memset(sl, 0, sizeof(*sl));
	sl->word = slot_word(w, sv, i);
	if (rkv_slot_empty(sl->word))
		return 0;
	sl->valid = x_slot_block(w, sv, sl->word, sl);
	return 1;
}

/* Slot index (bucket * 8 + slot) of scan position p of key in an index
 * of levels levels (layout.h "Levels"); *npos: its positions. */
static unsigned scan_slot_at(const char *key, unsigned levels, unsigned p,
			     unsigned *npos)
{
	struct rkv_key_hash kh;
	uint64_t b[RKV_KEY_BUCKETS_MAX];
	unsigned nb;

	rkv_key_hash(key, strlen(key), &kh);
	nb = rkv_key_level_buckets(&kh, X_NBUCKETS, levels, b);
	if (npos)
		*npos = nb * X_BUCKET_SLOTS;
	return (unsigned)b[p / X_BUCKET_SLOTS] * X_BUCKET_SLOTS +
	       p % X_BUCKET_SLOTS;
}

static unsigned scan_slot(const char *key, unsigned p)
{
	return scan_slot_at(key, 1, p, NULL);
}

/* Slots of server sv's levels in use. */
static unsigned used_slots(const struct x_world *w, unsigned sv)
{
	return (unsigned)rkv_srv_used_slots(w->srv[sv]);
}

/*
 * The copy of key on server sv: the first visible one in scan order (what
 * a reader of that server takes), or with highest set the one with the
 * highest sequence (a backup's, which installs compare with).  Returns 0
 * when there is none.
 */
static int copy_of(const struct x_world *w, unsigned sv, const char *key,
		   int highest, struct x_slot *out, unsigned *pos)
{
	int found = 0;
	unsigned npos = 2 * X_BUCKET_SLOTS;

	for (unsigned p = 0; p < npos; p++) {
		struct x_slot sl;
		unsigned i = scan_slot_at(key, w->srv[sv]->levels, p, &npos);

		if (!slot_get(w, sv, i, &sl) || !x_slot_visible(sl.word) ||
		    !sl.valid)
			continue;
		if (sl.kl != strlen(key) || memcmp(sl.key, key, sl.kl))
			continue;
		if (found && (!highest || sl.seq <= out->seq))
			continue;
		*out = sl;
		if (pos)
			*pos = i;
		found = 1;
	}
	return found;
}

/* A reader's cold view of key at its primary; a tombstone is absent. */
static int cold_read(const struct x_world *w, int k, char *out)
{
	struct x_slot sl;
	uint32_t vl;

	if (!copy_of(w, w->rep[k][0], w->keys[k], 0, &sl, NULL) || sl.tomb)
		return -ENOENT;
	vl = sl.vl < X_VAL_MAX ? sl.vl : X_VAL_MAX - 1;
	memcpy(out, sl.val, vl);
	out[vl] = 0;
	return 0;
}

/* Whether an op that may insert key k is in flight. */
static int inserting(const struct x_world *w, int k)
{
	for (unsigned i = 0; i < w->sc->nclients; i++) {
		const struct x_client *c = &w->cl[i];

		if (!c->busy || c->dead)
			continue;
		const struct x_hist *h = &w->hist[c->hist];

		if (h->key == k && (h->kind == X_PUT || h->kind == X_RMW))
			return 1;
	}
	return 0;
}

static void dump_slots(const struct x_world *w, char *out, size_t cap)
{
	size_t n = 0;
	struct x_slot sl;

	for (unsigned sv = 0; sv < w->nsrv; sv++) {
		if (w->nsrv > 1 && n + 8 < cap)
			n += (size_t)snprintf(out + n, cap - n, "%s s%u:",
					      sv ? ";" : "", sv);
		for (unsigned i = 0; i < used_slots(w, sv) && n + 96 < cap;
		     i++) {
			if (!slot_get(w, sv, i, &sl))
				continue;
			if (!sl.valid) {
				n += (size_t)snprintf(out + n, cap - n, " [%u]?", i);
				continue;
			}
			if (sl.vl == 6 && memcmp(sl.val, "filler", 6) == 0 &&
			    w->nsrv > 1)
				continue; /* only the scenario's keys */
			n += (size_t)snprintf(out + n, cap - n,
					      " [%u]%.*s=%.*s%s%s%s", i,
					      (int)sl.kl, sl.key,
					      (int)(sl.vl > 16 ? 16 : sl.vl),
					      sl.val, sl.tomb ? "(D)" : "",
					      rkv_slot_locked(sl.word) ? "(L)" : "",
					      x_slot_visible(sl.word) ? "" : "(T)");
			if (w->nrep > 1 && n + 24 < cap)
				n += (size_t)snprintf(out + n, cap - n,
						      "#%" PRIu64, sl.seq);
		}
	}
}

/* The sequence of a primary's word: its block's, or the lock's (the least
 * number above the block's whose low 8 bits are the word's version:
 * docs/DESIGN.md §9.7). */
static uint64_t word_seq(uint64_t word, uint64_t h)
{
	unsigned d;

	if (!rkv_slot_locked(word))
		return h;
	d = (rkv_slot_version(word) - (unsigned)(h & 0xffu)) & 0xffu;
	return h + (d ? d : 0x100u);
}

/* Invariant 3: the replicas of key k agree (explore.h). */
static void check_replicas(struct x_world *w, const char *when, int k)
{
	const char *key = w->keys[k];
	struct x_slot p, b;
	int hp = copy_of(w, w->rep[k][0], key, 0, &p, NULL);

	for (unsigned r = 1; r < w->krep[k]; r++) {
		unsigned sv = w->rep[k][r];
		int hb = copy_of(w, sv, key, 1, &b, NULL);
		uint64_t bs = hb ? b.seq : 0;

		if (!hp) {
			if (hb)
				x_violation(w, "%s: key %s is absent from its "
					    "primary s%u but on backup s%u "
					    "(sequence %" PRIu64 ")", when, key,
					    w->rep[k][0], sv, bs);
			continue;
		}
		if (bs > word_seq(p.word, p.seq))
			x_violation(w, "%s: I2: key %s: backup s%u holds sequence "
				    "%" PRIu64 ", above its primary s%u's %" PRIu64
				    "%s", when, key, sv, bs, w->rep[k][0],
				    word_seq(p.word, p.seq),
				    rkv_slot_locked(p.word) ? " (locked)" : "");
		if (bs > p.seq)
			continue; /* a write in flight */
		int same;

		if (!hb)
			same = p.seq == 0 && p.tomb;
		else
			same = bs == p.seq && b.tomb == p.tomb &&
			       (p.tomb || (b.vl == p.vl &&
					   memcmp(b.val, p.val, p.vl) == 0));
		if (!same)
			x_violation(w, "%s: I1: key %s: its primary s%u names "
				    "%s (sequence %" PRIu64 ") but backup s%u "
				    "holds %s%.*s (sequence %" PRIu64 ")", when,
				    key, w->rep[k][0],
				    p.tomb ? "a tombstone" : "a value", p.seq,
				    sv, !hb ? "nothing" : b.tomb ? "a tombstone" : "",
				    hb && !b.tomb ? (int)(b.vl > 16 ? 16 : b.vl) : 0,
				    hb ? b.val : "", bs);
	}
}

/* Invariants after a step; at_rest: no op may be in flight. */
static void check_state(struct x_world *w, const char *when, int at_rest)
{
	unsigned cnt[X_MAX_KEYS] = { 0 };
	unsigned pos[X_MAX_KEYS][4];
	char vals[X_MAX_KEYS][2][X_VAL_MAX];

	struct x_slot sl;

	for (unsigned sv = 0; sv < w->nsrv; sv++) {
		for (unsigned i = 0; i < used_slots(w, sv); i++) {
			if (!slot_get(w, sv, i, &sl))
				continue;
			uint64_t s = sl.word;
			/* 2: the extent is neither returned nor free nor in
			 * grace */
			uint64_t off = rkv_slot_offset(s), sz = rkv_slot_size(s);
			const struct rkv_srv *srv = w->srv[sv];

			for (unsigned r = 0; r < w->nret; r++)
				if (w->ret[r].sv == sv && w->ret[r].off < off + sz &&
				    off < w->ret[r].off + w->ret[r].len)
					x_violation(w, "%s: s%u slot %u names [%"
						    PRIu64 ", +%" PRIu64 ") that "
						    "was returned to the server",
						    when, sv, i, off, sz);
			if (x_space_unit_state && off + sz <= srv->data_len) {
				for (uint64_t u = off; u < off + sz;
				     u += RKV_BLOCK_ALIGN) {
					int st = x_space_unit_state(srv->space, u);

					if (st != 1) {
						x_violation(w, "%s: s%u slot %u "
							    "names unit %" PRIu64
							    " that the server "
							    "holds %s", when, sv,
							    i, u, st == 0 ? "free"
							    : "in grace");
						break;
					}
				}
			}
			/* 1: visible copies per key, on its primary */
			if (!x_slot_visible(s) || !sl.valid)
				continue;
			int id = key_id(w, sl.key, sl.kl);

			if (id < 0 || w->rep[id][0] != sv)
				continue;
			if (cnt[id] < 4)
				pos[id][cnt[id]] = i;
			if (cnt[id] < 2)
				snprintf(vals[id][cnt[id]], X_VAL_MAX, "%.*s%s",
					 (int)(sl.vl > 40 ? 40 : sl.vl), sl.val,
					 sl.tomb ? "(deleted)" : "");
			cnt[id]++;
		}
	}
	for (unsigned id = 0; id < w->nkeys; id++) {
		if (w->nrep > 1)
			check_replicas(w, when, (int)id);
		if (cnt[id] < 2)
			continue;
		if (w->sc->no_copy_check ||
		    (!at_rest && inserting(w, (int)id) && !g_x_strict)) {
			w->transient++;
			continue;
		}
		x_violation(w, "%s: key %s has %u visible copies: slot %u (%s) "
			    "and slot %u (%s)%s", when, w->keys[id], cnt[id],
			    pos[id][0], vals[id][0], pos[id][1], vals[id][1],
			    inserting(w, (int)id) ? " (an insert is in flight)"
						  : " with no insert in flight");
	}
}

/* ----------------------------------------------------------- the clients */

static int x_rmw_append(const void *old, size_t old_len, void *out,
			size_t cap, size_t *out_len, void *arg)
{
	size_t al = strlen(arg);

	if (!old)
		old_len = 0;
	if (old_len + al > cap)
		return -EMSGSIZE;
	if (old_len)
		memcpy(out, old, old_len);
	memcpy((char *)out + old_len, arg, al);
	*out_len = old_len + al;
	return RKV_RMW_WRITE;
}

static int x_submit(struct x_world *w, unsigned ci, enum x_kind kind,
		    const char *key, const char *arg)
{
	struct x_client *c = &w->cl[ci];
	struct rkv_op *op = &c->op;
	int rc;

	memset(op, 0, sizeof(*op));
	op->key = key;
	op->key_len = strlen(key);
	switch (kind) {
	case X_PUT:
		op->type = RKV_OP_PUT;
		op->val = arg;
		op->val_len = strlen(arg);
		break;
	case X_GET:
		op->type = RKV_OP_GET;
		op->buf = c->buf;
		op->buf_cap = sizeof(c->buf) - 1;
		break;
	case X_DEL:
		op->type = RKV_OP_DELETE;
		break;
	case X_RMW:
		op->type = RKV_OP_RMW;
		op->fn = x_rmw_append;
		op->fn_arg = (void *)(uintptr_t)arg;
		break;
	default:
		return -EINVAL;
	}
	rc = rkv_submit(c->c, op);
	if (rc)
		return rc;
	c->busy = 1;
	if (ci < X_MAX_CL && w->nhist < X_MAX_HIST) {
		struct x_hist *h = &w->hist[w->nhist];

		*h = (struct x_hist){ .client = (int)ci, .kind = kind,
				      .key = key_id(w, key, strlen(key)),
				      .arg = arg, .inv = ++w->clock };
		c->hist = w->nhist++;
	}
	return 0;
}

static void submit_next(struct x_world *w, unsigned ci)
{
	struct x_client *c = &w->cl[ci];
	const struct x_op *o = &w->sc->ops[ci][c->next];

	if (c->dead || c->busy || c->next >= X_MAX_OPS || o->kind == X_END ||
	    w->warming)
		return;
	c->next++;
	if (x_submit(w, ci, o->kind, o->key, o->val))
		x_violation(w, "client %c: rkv_submit failed", cl_name(ci));
}

/* Poll everything until the fake provider is quiet. */
static void settle(struct x_world *w)
{
	for (unsigned round = 0; round < 10000; round++) {
		uint64_t a0 = rkv_fake_activity();
		int done = 0;

		pump(w);
		for (unsigned i = 0; i <= X_MAX_CL; i++) {
			struct x_client *c = &w->cl[i];
			struct rkv_op *d[4];
			int n;

			if (!c->c || c->dead)
				continue;
			n = rkv_poll(c->c, d, 4);
			if (n < 0) {
				x_violation(w, "client %c: rkv_poll: %s",
					    cl_name(i), strerror(-n));
				c->dead = 1;
				continue;
			}
			for (int j = 0; j < n; j++) {
				c->busy = 0;
				done = 1;
				if (i == X_MAX_CL)
					continue;
				struct x_hist *h = &w->hist[c->hist];

				h->done = 1;
				h->status = d[j]->status;
				h->resp = ++w->clock;
				if (h->kind == X_GET && h->status == 0) {
					size_t l = d[j]->out_len;

					memcpy(h->out, c->buf, l < X_VAL_MAX ? l : X_VAL_MAX - 1);
					h->out[l < X_VAL_MAX ? l : X_VAL_MAX - 1] = 0;
				}
				w->resp_seen = 1;
				submit_next(w, i);
			}
		}
		if (!done && rkv_fake_activity() == a0)
			return;
	}
	x_violation(w, "the system never became quiet (livelock?)");
}

/* The server whose memory address a falls in, or -1; *region: 0 index,
 * 1 data. */
static int srv_of_addr(const struct x_world *w, uint64_t a, unsigned *region,
		       uint64_t *off)
{
	for (unsigned i = 0; i < w->nsrv; i++) {
		const struct rkv_srv *v = w->srv[i];
		uint64_t ib = (uint64_t)(uintptr_t)v->index_mem,
			 db = (uint64_t)(uintptr_t)v->data_mem;

		if (a >= ib && a - ib < v->index_len) {
			*region = 0;
			*off = a - ib;
			return (int)i;
		}
		if (a >= db && a - db < v->data_len) {
			*region = 1;
			*off = a - db;
			return (int)i;
		}
	}
	return -1;
}

/* The server a chain targets (one endpoint, one server); 0 when none
 * matches (a stray address: the chain then fails at the target). */
static unsigned chain_srv(const struct x_world *w,
			  const struct rkv_fake_chain *ch)
{
	unsigned region;
	uint64_t off;
	int sv = ch->nwr ? srv_of_addr(w, ch->wr[0].remote_addr, &region, &off)
			 : -1;

	return sv < 0 ? 0 : (unsigned)sv;
}

/* The oldest queued chain of client ci (tag &cl[ci]) to server sv (any
 * server: -1). */
static int chain_of(const struct x_world *w, unsigned ci, int sv,
		    struct rkv_fake_chain *out)
{
	struct rkv_fake_chain ch[64];
	size_t n = rkv_fake_pending(ch, 64);

	for (size_t i = 0; i < n && i < 64; i++) {
		if (ch[i].tag == &w->cl[ci] &&
		    (sv < 0 || chain_srv(w, &ch[i]) == (unsigned)sv)) {
			*out = ch[i];
			return 1;
		}
	}
	return 0;
}

/* Run op synchronously (setup): every chain runs as soon as it is queued. */
static int run_sync(struct x_world *w, unsigned ci, enum x_kind kind,
		    const char *key, const char *arg)
{
	struct rkv_fake_chain ch;
	int rc = x_submit(w, ci, kind, key, arg);

	if (rc)
		return rc;
	for (unsigned i = 0; i < 1000 && w->cl[ci].busy; i++) {
		settle(w);
		if (chain_of(w, ci, -1, &ch))
			rkv_fake_step(ch.id, 0);
	}
	return w->cl[ci].busy ? -ETIMEDOUT : w->cl[ci].op.status;
}

/* A client: of server sv alone (sv >= 0), else of the world (the single
 * server, or the cluster file). */
static int client_new(struct x_world *w, unsigned ci, int sv)
{
	struct rkv_client_opts o;
	char name[16], addr[48];
	int rc;

	rkv_client_opts_init(&o);
	if (w->nsrv == 1) {
		o.servers = "fake:///explore";
	} else if (sv >= 0) {
		snprintf(addr, sizeof(addr), "s%d=fake:///explore-%d", sv, sv);
		o.servers = addr;
	} else {
		o.cluster_file = w->map;
	}
	o.secret_file = NULL;
	snprintf(name, sizeof(name), "x-%c", cl_name(ci));
	o.name = name;
	o.max_inflight = 1;
	o.max_value = 256;
	o.cache_entries = 64;
	o.timeout_ms = 600000;
	o.connect_timeout_ms = 600000;
	rkv_fake_set_next_tag(&w->cl[ci]);
	rc = rkv_client_create(&o, &w->cl[ci].c);
	rkv_fake_set_next_tag(NULL);
	return rc;
}

/* ------------------------------------------------------------- a world */

static void world_free(struct x_world *w)
{
	g_x_auto_tick = 1;
	for (unsigned i = 0; i <= X_MAX_CL; i++) {
		rkv_client_destroy(w->cl[i].c);
		w->cl[i].c = NULL;
	}
	for (unsigned i = 0; i < X_MAX_SRV; i++) {
		rkv_srv_destroy(w->srv[i]);
		w->srv[i] = NULL;
	}
	if (w->map[0])
		unlink(w->map);
	w->map[0] = 0;
	rkv_fake_set_idle_hook(NULL, NULL);
	rkv_fake_set_msg_hook(NULL, NULL);
	g_x_auto_tick = 0;
}

static int srv_set(struct rkv_srv_config *cfg, const char *k, const char *v)
{
	char err[256];
	int rc = rkv_srv_config_set(cfg, k, v, err, sizeof(err));

	if (rc)
		fprintf(stderr, "explore: server --%s %s: %s\n", k, v, err);
	return rc;
}

/* A filler key: its fingerprint differs from every scenario key's, so
 * scenario ops never read it as a candidate. */
static void filler_name(const struct x_world *w, unsigned *seq, char *out)
{
	for (;;) {
		struct rkv_key_hash kh;
		int clash = 0;

		snprintf(out, 16, "f%u", (*seq)++);
		rkv_key_hash(out, strlen(out), &kh);
		for (unsigned i = 0; i < w->nkeys; i++) {
			struct rkv_key_hash k2;

			rkv_key_hash(w->keys[i], strlen(w->keys[i]), &k2);
			clash |= k2.fp == kh.fp;
		}
		if (!clash)
			return;
	}
}

static void add_key(struct x_world *w, const char *k)
{
	if (k && key_id(w, k, strlen(k)) < 0 && w->nkeys < X_MAX_KEYS)
		w->keys[w->nkeys++] = k;
}

/* Server sv: created, its index filled with filler keys but for the
 * scenario's empty positions (by the setup client, a client of sv alone). */
static int srv_build(struct x_world *w, unsigned sv)
{
	static char fill[X_NSLOTS][16];
	const struct x_scenario *sc = w->sc;
	struct rkv_srv_config cfg;
	char err[256], addr[32], name[8];
	unsigned seq = 0;
	int rc;

	snprintf(addr, sizeof(addr), w->nsrv == 1 ? "fake:///explore" :
		 "fake:///explore-%u", sv);
	snprintf(name, sizeof(name), "s%u", sv);
	rkv_srv_config_init(&cfg);
	if (srv_set(&cfg, "listen", addr) || srv_set(&cfg, "memory", "64K") ||
	    srv_set(&cfg, "buckets", "2") || srv_set(&cfg, "bucket-slots", "8") ||
	    srv_set(&cfg, "lease", "100") ||
	    srv_set(&cfg, "grace", "1000") || srv_set(&cfg, "chunk", "4K") ||
	    srv_set(&cfg, "max-clients", "8") ||
	    (sc->grow && srv_set(&cfg, "index-max", "4K")) ||
	    (w->nsrv > 1 && srv_set(&cfg, "name", name)))
		return -EINVAL;
	rc = rkv_srv_config_finish(&cfg, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "explore: server config: %s\n", err);
		return rc;
	}
	rkv_fake_set_next_tag(&w->srvtag[sv]);
	rc = rkv_srv_create(&cfg, &w->srv[sv]);
	rkv_fake_set_next_tag(NULL);
	if (rc)
		return rc;
	if (w->srv[sv]->cfg.nbuckets != X_NBUCKETS ||
	    w->srv[sv]->cfg.levels_max != (sc->grow ? 2u : 1u))
		return -EINVAL;
	/* the layout: fill every slot, then empty the chosen positions */
	rc = client_new(w, X_MAX_CL, (int)sv);
	if (rc)
		return rc;
	for (unsigned i = 0; i < X_NSLOTS; i++) {
		filler_name(w, &seq, fill[i]);
		rc = run_sync(w, X_MAX_CL, X_PUT, fill[i], "filler");
		if (rc)
			return rc;
	}
	for (unsigned p = 0; p < X_NSLOTS; p++) {
		struct x_slot sl;
		char key[32];

		if (!(sc->empty & (1u << p)))
			continue;
		uint64_t s = slot_word(w, sv, scan_slot(sc->layout_key, p));

		if (!x_slot_block(w, sv, s, &sl) || sl.kl >= sizeof(key))
			return -EPROTO;
		memcpy(key, sl.key, sl.kl);
		key[sl.kl] = 0;
		rc = run_sync(w, X_MAX_CL, X_DEL, key, NULL);
		if (rc)
			return rc;
	}
	rkv_client_destroy(w->cl[X_MAX_CL].c);
	w->cl[X_MAX_CL].c = NULL;
	settle(w);
	return 0;
}

/* sc->transit: the server that, listed joining, makes layout_key's
 * replica set one longer (-1: none, or no transit asked for). */
static int transit_server(const struct x_world *w)
{
	struct rkv_map *m;
	struct rkv_key_hash kh;
	int found = -1;

	if (!w->sc->transit || !(m = malloc(sizeof(*m))))
		return -1;
	rkv_key_hash(w->sc->layout_key, strlen(w->sc->layout_key), &kh);
	for (unsigned j = 0; found < 0 && j < w->nsrv; j++) {
		rkv_map_init(m);
		m->replicas = w->nrep;
		for (unsigned i = 0; i < w->nsrv; i++) {
			char name[16], addr[64];

			snprintf(name, sizeof(name), "s%u", i);
			snprintf(addr, sizeof(addr), "fake:///explore-%u", i);
			(void)rkv_map_add(m, name, addr, NULL, 0);
		}
		m->srv[j].state = RKV_MAP_JOINING;
		rkv_map_place(m);
		if (rkv_map_nrep(m, rkv_map_part(kh.route)) == w->nrep + 1)
			found = (int)j;
	}
	free(m);
	return found;
}

/* The cluster file: "replicas R", then every server by name. */
static int map_write(struct x_world *w)
{
	FILE *f;
	int fd, joining = transit_server(w);

	snprintf(w->map, sizeof(w->map), "/tmp/rkv-explore-%d-XXXXXX",
		 (int)getpid());
	fd = mkstemp(w->map);
	if (fd < 0) {
		w->map[0] = 0;
		return -errno;
	}
	f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		return -EIO;
	}
	fprintf(f, "replicas %u\n", w->nrep);
	for (unsigned i = 0; i < w->nsrv; i++)
		fprintf(f, "s%u fake:///explore-%u%s\n", i, i,
			(int)i == joining ? " joining" : "");
	return fclose(f) ? -EIO : 0;
}

/* Which servers hold each key (the setup client's map). */
static int map_keys(struct x_world *w)
{
	struct rkv_client *c = w->cl[X_MAX_CL].c;

	for (unsigned k = 0; k < w->nkeys; k++) {
		unsigned rep[X_MAX_SRV];
		unsigned n = rkv_client_replicas(c, w->keys[k],
						 strlen(w->keys[k]), rep,
						 X_MAX_SRV);

		if (n != w->nrep && !(w->sc->transit && n == w->nrep + 1))
			return -EPROTO;
		w->krep[k] = n;
		for (unsigned r = 0; r < n; r++) {
			const char *nm = rkv_client_server_name(c, rep[r]);

			if (!nm || nm[0] != 's' || (unsigned)(nm[1] - '0') >= w->nsrv)
				return -EPROTO;
			w->rep[k][r] = (uint8_t)(nm[1] - '0');
		}
	}
	return 0;
}

static int world_build(struct x_world *w, const struct x_scenario *sc)
{
	int rc;
	int verbose = w->verbose;

	memset(w, 0, sizeof(*w));
	w->verbose = verbose;
	w->sc = sc;
	w->nsrv = sc->nservers > 1 ? sc->nservers : 1;
	w->nrep = sc->nservers > 1 && sc->replicas ? sc->replicas : 1;
	if (w->nsrv > X_MAX_SRV || w->nrep > w->nsrv)
		return -EINVAL;
	if (sc->transit && transit_server(w) < 0)
		return -EINVAL;
	for (unsigned i = 0; i < sc->nclients; i++)
		for (unsigned j = 0; j < X_MAX_OPS && sc->ops[i][j].kind; j++)
			add_key(w, sc->ops[i][j].key);
	for (unsigned i = 0; i < 2; i++)
		add_key(w, sc->pre[i].key);
	g_x_now_ns = 1000000000000ull; /* 1000 s: no special zero */
	rkv_time_set_source(x_now);
	rkv_fake_set_idle_hook(idle_hook, w);
	rkv_fake_set_msg_hook(msg_hook, w);
	for (unsigned i = 0; i < w->nsrv; i++) {
		rc = srv_build(w, i);
		if (rc)
			return rc;
	}
	if (w->nsrv > 1) {
		rc = map_write(w);
		if (rc)
			return rc;
	}
	/* the keys' replicas; then pre[], through the map, or with
	 * pre_primary_only by a client of the primary alone */
	rc = client_new(w, X_MAX_CL, -1);
	if (rc)
		return rc;
	if (w->nsrv > 1 && (rc = map_keys(w)) != 0)
		return rc;
	for (unsigned i = 0; i < 2; i++) {
		if (!sc->pre[i].key)
			continue;
		if (sc->pre_primary_only) {
			int k = key_id(w, sc->pre[i].key, strlen(sc->pre[i].key));

			rkv_client_destroy(w->cl[X_MAX_CL].c);
			w->cl[X_MAX_CL].c = NULL;
			rc = client_new(w, X_MAX_CL, w->rep[k][0]);
			if (rc)
				return rc;
		}
		rc = run_sync(w, X_MAX_CL, X_PUT, sc->pre[i].key, sc->pre[i].val);
		if (rc)
			return rc;
	}
	rkv_client_destroy(w->cl[X_MAX_CL].c);
	w->cl[X_MAX_CL].c = NULL;
	settle(w);
	for (unsigned i = 0; i < sc->nclients; i++) {
		rc = client_new(w, i, -1);
		if (rc)
			return rc;
	}
	if (sc->warm && sc->pre[0].key) {
		w->warming = 1;
		for (unsigned i = 0; i < sc->nclients; i++) {
			rc = run_sync(w, i, X_PUT, sc->pre[0].key,
				      sc->pre[0].val);
			if (rc)
				return rc;
		}
		/* the later puts moved the key: a get finds it again */
		for (unsigned i = 0; i < sc->nclients; i++) {
			rc = run_sync(w, i, X_GET, sc->pre[0].key, NULL);
			if (rc)
				return rc;
			memset(w->cl[i].nsteps, 0, sizeof(w->cl[i].nsteps));
		}
		w->warming = 0;
		w->nhist = 0;
	}
	for (unsigned i = 0; i < sc->nclients; i++)
		submit_next(w, i);
	settle(w);
	return 0;
}

/* ------------------------------------------------------- transitions */

static void add_fp(struct x_world *w, struct x_tr *t, const struct rkv_wr *wr)
{
	struct x_rng r = { .write = wr->opcode != RKV_WR_READ,
			   .len = wr->length };
	unsigned region;
	uint64_t off;
	int sv = srv_of_addr(w, wr->remote_addr, &region, &off);

	if (sv >= 0) {
		r.region = (uint8_t)(sv * 3 + (int)region);
		r.off = (uint32_t)off;
	} else {
		r.region = 2;
		r.off = (uint32_t)wr->remote_addr;
	}
	if (t->nfp == X_MAX_FP) {
		t->global = 1; /* too many ranges: commute with nothing */
		return;
	}
	t->fp[t->nfp++] = r;
}

static unsigned in_flight(const struct x_world *w)
{
	unsigned n = 0;

	for (unsigned i = 0; i < w->sc->nclients; i++) {
		const struct x_client *c = &w->cl[i];

		if (c->dead)
			continue;
		n += c->busy;
	}
	return n;
}

static unsigned enabled(struct x_world *w, struct x_tr *en)
{
	const struct x_scenario *sc = w->sc;
	unsigned n = 0, waiting = 0;

	for (unsigned i = 0; i < sc->nclients; i++) {
		struct x_client *c = &w->cl[i];
		struct rkv_fake_chain ch;
		unsigned queued = 0;

		if (c->dead)
			continue;
		for (unsigned sv = 0; sv < w->nsrv && n < X_MAX_EN - 2; sv++) {
			if (!chain_of(w, i, (int)sv, &ch))
				continue;
			struct x_tr *t = &en[n++];

			queued++;
			memset(t, 0, sizeof(*t));
			t->kind = XT_STEP;
			t->cl = (uint8_t)i;
			t->sv = (uint8_t)sv;
			t->seq = (uint16_t)c->nsteps[sv];
			for (unsigned j = ch.done; j < ch.nwr; j++) {
				add_fp(w, t, &ch.wr[j]);
				if (sc->split)
					break;
			}
		}
		if (!queued)
			waiting += c->busy;
	}
	for (unsigned i = 0; i < sc->nclients && w->kills < sc->max_kills; i++) {
		struct x_client *c = &w->cl[i];

		if (c->dead || !(sc->kill_mask & (1u << i)) || !c->busy)
			continue;
		en[n++] = (struct x_tr){ .kind = XT_KILL, .cl = (uint8_t)i,
					 .global = 1 };
	}
	if (waiting && w->advances < sc->max_advances)
		en[n++] = (struct x_tr){ .kind = XT_ADV,
					 .seq = (uint16_t)w->advances,
					 .global = 1 };
	return n;
}

static int same_tr(const struct x_tr *a, const struct x_tr *b)
{
	return a->kind == b->kind && a->cl == b->cl && a->sv == b->sv &&
	       a->seq == b->seq;
}

static int in_set(const struct x_tr *set, unsigned n, const struct x_tr *t)
{
	for (unsigned i = 0; i < n; i++)
		if (same_tr(&set[i], t))
			return 1;
	return 0;
}

/*
 * Whether a and b commute: executed from one state, either order reaches
 * the same state and the same history.  Rounds of different clients whose
 * target ranges do not conflict (one writes what the other touches) leave
 * the same memory, and each client's processing of its completions is its
 * own, unless it talked to the server (global).  The history: its events
 * (an op's end, the next op's start) happen only in steps with hist set,
 * so keeping those in order among themselves keeps the history.
 */
static int indep(const struct x_tr *a, const struct x_tr *b)
{
	if (a->global || b->global || a->cl == b->cl || (a->hist && b->hist))
		return 0;
	for (unsigned i = 0; i < a->nfp; i++) {
		for (unsigned j = 0; j < b->nfp; j++) {
			const struct x_rng *x = &a->fp[i], *y = &b->fp[j];

			if (x->region == y->region && (x->write || y->write) &&
			    x->off < y->off + y->len && y->off < x->off + x->len)
				return 0;
		}
	}
	return 1;
}

static void tr_str(const struct x_tr *t, char *out, size_t cap)
{
	if (t->kind == XT_STEP && g_x.nsrv > 1)
		snprintf(out, cap, "s%u.%u", t->cl, t->sv);
	else if (t->kind == XT_STEP)
		snprintf(out, cap, "s%u", t->cl);
	else if (t->kind == XT_KILL)
		snprintf(out, cap, "k%u", t->cl);
	else
		snprintf(out, cap, "a");
}

static void print_chain(struct x_world *w, unsigned ci, unsigned sv)
{
	struct rkv_fake_chain ch;

	if (!chain_of(w, ci, (int)sv, &ch))
		return;
	for (unsigned j = ch.done; j < ch.nwr; j++) {
		const struct rkv_wr *r = &ch.wr[j];
		unsigned region = 2;
		uint64_t off = 0;
		int s = srv_of_addr(w, r->remote_addr, &region, &off);

		printf("#     %s s%d %s %" PRIu64 " len %u",
		       rkv_wr_opcode_str(r->opcode), s,
		       region == 0 ? "index slot" : "data +",
		       region == 0 ? off / 8 : off, r->length);
		if (r->opcode == RKV_WR_CAS)
			printf(" %s -> %s", r->compare_add ? "word" : "empty",
			       r->swap ? "word" : "empty");
		printf("\n");
		if (w->sc->split)
			break;
	}
}

/* Execute t; record its effects into t. */
static void execute(struct x_world *w, struct x_tr *t)
{
	struct rkv_fake_chain ch;

	w->ctrl_seen = w->resp_seen = 0;
	switch (t->kind) {
	case XT_STEP:
		if (w->verbose)
			print_chain(w, t->cl, t->sv);
		if (chain_of(w, t->cl, t->sv, &ch))
			rkv_fake_step(ch.id, w->sc->split ? 1 : 0);
		w->cl[t->cl].nsteps[t->sv]++;
		break;
	case XT_KILL:
		rkv_fake_kill(&w->cl[t->cl]);
		w->cl[t->cl].dead = 1;
		w->kills++;
		break;
	case XT_ADV:
		g_x_now_ns += (w->sc->advance_ms ? w->sc->advance_ms : X_LEASE_MS) *
			      1000000ull;
		w->advances++;
		break;
	}
	settle(w);
	if (w->ctrl_seen)
		t->global = 1;
	if (w->resp_seen)
		t->hist = 1;
}

/* ---------------------------------------------------------- linearizability */

struct lin_ctx {
	const struct x_lin_op *ops;
	unsigned n;
	uint64_t seen[512];      /* memo: (mask, state hash) already failed */
	unsigned nseen;
};

static uint64_t str_hash(const char *s, int present)
{
	uint64_t h = present ? 1469598103934665603ull : 7;

	for (; present && *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static int lin_search(struct lin_ctx *l, uint32_t mask, int present,
		      const char *val)
{
	char nv[2 * X_VAL_MAX];
	int all = 1;

	for (unsigned i = 0; i < l->n; i++)
		if (l->ops[i].done && l->ops[i].kind != X_END &&
		    !(mask & (1u << i)))
			all = 0;
	if (all)
		return 1;
	uint64_t key = str_hash(val, present) * 31 + mask;

	for (unsigned i = 0; i < l->nseen; i++)
		if (l->seen[i] == key)
			return 0;
	for (unsigned i = 0; i < l->n; i++) {
		const struct x_lin_op *o = &l->ops[i];
		int ok = 1, np = present;
		const char *v = val;

		if (mask & (1u << i))
			continue;
		/* real time: no unlinearized op finished before o began */
		for (unsigned j = 0; j < l->n && ok; j++)
			if (j != i && !(mask & (1u << j)) && l->ops[j].done &&
			    l->ops[j].resp < o->inv)
				ok = 0;
		if (!ok)
			continue;
		int definite = o->done &&
			       (o->status == 0 || o->status == -ENOENT ||
				(o->status == -ENOSPC && o->kind == X_PUT));

		if (!o->done && o->kind == X_GET)
			continue; /* an unfinished get changes nothing */
		if (o->done && !definite && o->kind == X_GET)
			definite = 1, ok = 1; /* failed get: no constraint */
		switch (o->kind) {
		case X_PUT:
			if (definite && o->status == -ENOSPC)
				break;
			np = 1;
			v = o->arg;
			break;
		case X_GET:
			if (o->done && o->status == 0)
				ok = present && strcmp(val, o->out) == 0;
			else if (o->done && o->status == -ENOENT)
				ok = !present;
			break;
		case X_DEL:
			if (definite)
				ok = o->status == 0 ? present : !present;
			np = 0;
			break;
		case X_RMW:
			if (definite && o->status) {
				ok = 0;
				break;
			}
			snprintf(nv, sizeof(nv), "%s%s", present ? val : "",
				 o->arg);
			np = 1;
			v = nv;
			break;
		default:
			ok = 0;
		}
		if (!ok)
			continue;
		if (lin_search(l, mask | (1u << i), np, v))
			return 1;
	}
	if (l->nseen < 512)
		l->seen[l->nseen++] = key;
	return 0;
}

int x_linearizable(const struct x_lin_op *ops, unsigned n, const char *init)
{
	struct lin_ctx l = { .ops = ops, .n = n };

	if (n > 30)
		return 0;
	return lin_search(&l, 0, init != NULL, init ? init : "");
}

static void check_history(struct x_world *w)
{
	for (unsigned k = 0; k < w->nkeys; k++) {
		struct x_lin_op ops[X_MAX_HIST];
		const char *init = NULL;
		char fin[X_VAL_MAX];
		unsigned n = 0;

		for (unsigned i = 0; i < 2; i++)
			if (w->sc->pre[i].key && strcmp(w->sc->pre[i].key, w->keys[k]) == 0)
				init = w->sc->pre[i].val;
		for (unsigned i = 0; i < w->nhist; i++) {
			const struct x_hist *h = &w->hist[i];

			if (h->key != (int)k)
				continue;
			ops[n++] = (struct x_lin_op){
				.kind = h->kind, .arg = h->arg,
				.status = h->status, .out = h->out,
				.done = h->done, .inv = h->inv,
				.resp = h->resp };
		}
		/* the final cold read, after everything */
		int rc = cold_read(w, (int)k, fin);

		ops[n++] = (struct x_lin_op){ .kind = X_GET, .status = rc,
					      .out = fin, .done = 1,
					      .inv = ++w->clock,
					      .resp = ++w->clock };
		if (x_linearizable(ops, n, init))
			continue;
		char line[1024];
		size_t m = 0;

		for (unsigned i = 0; i < n; i++) {
			const struct x_lin_op *o = &ops[i];
			const char *kn = o->kind == X_PUT ? "put" :
					 o->kind == X_GET ? "get" :
					 o->kind == X_DEL ? "del" : "rmw";

			m += (size_t)snprintf(line + m, sizeof(line) - m,
				"  %s%s%s [%" PRIu64 ",%" PRIu64 "] -> %s%s%s\n",
				i + 1 == n ? "final cold read: " : "", kn,
				o->arg ? o->arg : "", o->inv,
				o->done ? o->resp : 0,
				!o->done ? "(unfinished)" :
				o->status ? strerror(-o->status) : "ok",
				o->kind == X_GET && o->done && !o->status ? " " : "",
				o->kind == X_GET && o->done && !o->status ? o->out : "");
			if (m >= sizeof(line))
				break;
		}
		x_violation(w, "key %s: history not linearizable (initial %s):\n%s",
			    w->keys[k], init ? init : "absent", line);
	}
}

/* ------------------------------------------------------------- the search */

static unsigned env_u(const char *name, unsigned dflt)
{
	const char *s = getenv(name);

	return s && *s ? (unsigned)strtoul(s, NULL, 0) : dflt;
}

static int all_done(const struct x_world *w)
{
	for (unsigned i = 0; i < w->sc->nclients; i++) {
		const struct x_client *c = &w->cl[i];

		if (c->dead)
			continue;
		if (c->busy || (c->next < X_MAX_OPS &&
				w->sc->ops[i][c->next].kind != X_END))
			return 0;
	}
	return 1;
}

/* No choice left: run what is queued in a canonical order, with time. */
static void drain(struct x_world *w)
{
	for (unsigned i = 0; i < X_DRAIN_MAX && !all_done(w) && !w->violated;
	     i++) {
		struct rkv_fake_chain ch;
		int stepped = 0;

		for (unsigned c = 0; c < w->sc->nclients && !stepped; c++) {
			if (w->cl[c].dead || !chain_of(w, c, -1, &ch))
				continue;
			/* the chain's WRs are freed by the step: its
			 * server first */
			w->cl[c].nsteps[chain_srv(w, &ch)]++;
			rkv_fake_step(ch.id, 0);
			stepped = 1;
		}
		if (!stepped)
			g_x_now_ns += X_LEASE_MS / 4 * 1000000ull;
		settle(w);
		check_state(w, "drain", 0);
	}
	if (!all_done(w) && !w->violated)
		x_violation(w, "ops still unfinished after the drain "
			    "(%u in flight)", in_flight(w));
}

static void finish_run(struct x_world *w)
{
	/* let returns go out (they wait grace/4), then look once more */
	g_x_now_ns += (X_GRACE_MS / 4 + 1) * 1000000ull;
	settle(w);
	check_state(w, "end", 1);
	check_history(w);
	for (unsigned i = 0; i < w->sc->nclients; i++) {
		const struct x_hist *h = &w->hist[w->cl[i].hist];

		if (!w->cl[i].dead && h->done && h->status == -ETIMEDOUT)
			x_violation(w, "client %c: an op timed out", cl_name(i));
	}
}

struct x_search {
	const struct x_scenario *sc;
	struct x_result *res;
	unsigned max_depth;
	const char *replay;      /* forced choices, or NULL */
	unsigned depth;          /* nodes with a choice in the last run */
	uint64_t rng;            /* sample mode: this run's generator; 0: off */
};

static uint64_t rng_next(uint64_t *x)
{
	/* splitmix64 */
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Sample mode's choice: a kill or a clock jump one time in 16 (chosen
 * uniformly, one at each step would end nearly every run with a death in
 * its first steps), else one of the steps. */
static int pick_random(uint64_t *rng, const struct x_tr *en, unsigned nen)
{
	unsigned nstep = 0, r;
	int other = (rng_next(rng) & 15) == 0;

	for (unsigned i = 0; i < nen; i++)
		nstep += en[i].kind == XT_STEP;
	if (nstep == 0 || nstep == nen)
		other = nstep == 0;
	r = (unsigned)(rng_next(rng) % (other ? nen - nstep : nstep));
	for (unsigned i = 0; i < nen; i++)
		if ((en[i].kind == XT_STEP) != other && r-- == 0)
			return (int)i;
	return 0;
}

/* Choose from en by a replay token ("s1", "k0", "a"); -1 if absent. */
static int pick_token(const char **p, const struct x_tr *en, unsigned nen)
{
	const char *s = *p;
	unsigned kind, cl = 0;
	int sv = -1;

	while (*s == ' ' || *s == ',')
		s++;
	if (!*s)
		return -1;
	kind = *s == 's' ? XT_STEP : *s == 'k' ? XT_KILL : XT_ADV;
	s++;
	if (kind != XT_ADV)
		cl = (unsigned)strtoul(s, (char **)&s, 10);
	if (kind == XT_STEP && *s == '.') {
		sv = (int)strtoul(s + 1, (char **)&s, 10);
	}
	*p = s;
	for (unsigned i = 0; i < nen; i++)
		if (en[i].kind == kind && (kind == XT_ADV || en[i].cl == cl) &&
		    (sv < 0 || en[i].sv == (unsigned)sv))
			return (int)i;
	return -2;
}

/* The choices of the run so far, as a replay string. */
static void seq_str(unsigned depth, char *seq, size_t cap)
{
	size_t m = 0;

	seq[0] = 0;
	for (unsigned i = 0; i < depth && m + 8 < cap; i++) {
		char ts[16];

		tr_str(&g_x_stack[i].chosen, ts, sizeof(ts));
		m += (size_t)snprintf(seq + m, cap - m, "%s%s", i ? " " : "", ts);
	}
}

/* One run on a built world, replaying the choices of nodes
 * [0, replay_len). */
static void run_body(struct x_search *s, unsigned replay_len)
{
	struct x_world *w = &g_x;
	const char *rp = s->replay;
	unsigned d;

	s->res->runs++;
	check_state(w, "start", 0);
	for (d = 0; !w->violated; d++) {
		struct x_node *nd = &g_x_stack[d];
		struct x_tr en[X_MAX_EN];
		unsigned nen = enabled(w, en);
		char ts[16];

		if (d >= s->max_depth || d >= X_MAX_DEPTH || nen == 0) {
			drain(w);
			if (!w->violated)
				finish_run(w);
			s->res->complete++;
			break;
		}
		if (d < replay_len) {
			if (!in_set(en, nen, &nd->en[nd->cur])) {
				x_violation(w, "nondeterminism: choice %u of the "
					    "replay is not enabled", d);
				break;
			}
			for (unsigned i = 0; i < nen; i++)
				if (same_tr(&en[i], &nd->en[nd->cur]))
					nd->chosen = en[i];
		} else {
			nd->nen = nen;
			memcpy(nd->en, en, nen * sizeof(en[0]));
			nd->ndone = nd->nsl = 0;
			if (d > 0) {
				const struct x_node *p = &g_x_stack[d - 1];

				for (unsigned i = 0; i < p->nsl; i++)
					if (indep(&p->sl[i], &p->chosen))
						nd->sl[nd->nsl++] = p->sl[i];
				for (unsigned i = 0; i < p->ndone; i++)
					if (indep(&p->done[i], &p->chosen) &&
					    nd->nsl < X_MAX_EN)
						nd->sl[nd->nsl++] = p->done[i];
			}
			nd->cur = -1;
			if (rp) {
				int k = pick_token(&rp, en, nen);

				if (k == -2) {
					x_violation(w, "replay: choice %u is not "
						    "enabled here", d);
					break;
				}
				if (k >= 0) {
					nd->cur = k;
					nd->nsl = 0;
				}
			}
			if (nd->cur < 0 && s->rng) {
				/* sample mode: no sleep sets (they prune only
				 * what a systematic search visits elsewhere) */
				nd->nsl = 0;
				nd->cur = pick_random(&s->rng, en, nen);
			}
			for (unsigned i = 0; nd->cur < 0 && i < nen; i++)
				if (!in_set(nd->sl, nd->nsl, &en[i]))
					nd->cur = (int)i;
			if (nd->cur < 0) {
				s->res->pruned++; /* every choice sleeps */
				break;
			}
			nd->chosen = en[nd->cur];
		}
		if (w->verbose) {
			tr_str(&nd->chosen, ts, sizeof(ts));
			printf("# %u: %s\n", d, ts);
		}
		execute(w, &nd->chosen);
		s->res->steps++;
		tr_str(&nd->chosen, ts, sizeof(ts));
		check_state(w, ts, 0);
		if (w->verbose) {
			char sl[1024] = "";

			dump_slots(w, sl, sizeof(sl));
			printf("#    slots:%s\n", sl);
		}
	}
	s->depth = d;
	if (w->violated) {
		s->res->violations++;
		if (s->res->violations == 1 || env_u("RKV_EXPLORE_VERBOSE", 0)) {
			char seq[1024] = "";
			char sl[1024] = "";

			seq_str(d, seq, sizeof(seq));
			dump_slots(w, sl, sizeof(sl));
			snprintf(s->res->first, sizeof(s->res->first),
				 "scenario %s: violation after choices "
				 "RKV_EXPLORE_REPLAY=\"%s\"\n%sslots at the end:%s\n",
				 s->sc->name, seq, w->why, sl);
		}
	}
	s->res->transient += w->transient;
	s->res->kills += w->kills;
	for (unsigned sv = 0; sv < w->nsrv; sv++)
		s->res->grows += w->srv[sv]->grows;
	for (unsigned i = 0; i < w->nhist; i++)
		s->res->enospc += w->hist[i].done &&
				  w->hist[i].status == -ENOSPC;
	for (unsigned i = 0; i < s->sc->nclients; i++) {
		struct rkv_client_stats st;

		if (!w->cl[i].c)
			continue;
		rkv_client_stats(w->cl[i].c, &st);
		s->res->lock_waits += st.lock_waits;
		s->res->lock_steals += st.lock_steals;
		s->res->level_news += st.level_news;
		s->res->retries += st.get.retries + st.put.retries +
				   st.del.retries + st.rmw.retries;
	}
}

static int run_once(struct x_search *s, unsigned replay_len)
{
	struct x_world *w = &g_x;
	int rc = world_build(w, s->sc);

	if (rc) {
		s->res->runs++;
		world_free(w);
		return rc;
	}
	run_body(s, replay_len);
	world_free(w);
	return 0;
}

int x_explore(const struct x_scenario *sc, struct x_result *res)
{
	struct x_search s = { .sc = sc, .res = res };
	/* sanitizers run the op code 5-15x slower: there the big scenarios
	 * stop at a run budget (reported: not exhaustive); the plain build
	 * explores every interleaving */
	uint64_t max_runs = env_u("RKV_EXPLORE_RUNS", 0);

	if (!max_runs)
		max_runs = sc->max_runs ? sc->max_runs :
			   RKV_TEST_SANITIZED ? 8000 : 200000;
	if (RKV_TEST_SANITIZED && sc->max_runs_sanitized &&
	    !env_u("RKV_EXPLORE_RUNS", 0))
		max_runs = sc->max_runs_sanitized;
	struct timespec t0, t1;
	unsigned live0 = rkv_fake_live();
	int rc;

	memset(res, 0, sizeof(*res));
	s.max_depth = sc->max_depth ? sc->max_depth : X_MAX_DEPTH;
	s.max_depth = env_u("RKV_EXPLORE_DEPTH", s.max_depth);
	s.replay = getenv("RKV_EXPLORE_REPLAY");
	if (s.replay && !*s.replay)
		s.replay = NULL;
	g_x.verbose = s.replay != NULL;
	g_x_strict = sc->strict || env_u("RKV_EXPLORE_STRICT", 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (sc->sample && !s.replay) {
		uint64_t seed = env_u("RKV_EXPLORE_SEED", 1);

		res->sampled = 1;
		res->seed = seed;
		rc = 0;
		for (uint64_t i = 0; rc == 0 && i < max_runs; i++) {
			s.rng = seed * 0x100000001b3ull + i + 1;
			rc = run_once(&s, 0);
		}
		goto out;
	}
	rc = run_once(&s, 0);
	while (rc == 0 && !s.replay) {
		int d = (int)s.depth - 1;

		/* backtrack: the deepest node with an unexplored choice */
		for (; d >= 0; d--) {
			struct x_node *nd = &g_x_stack[d];
			int next = -1;

			if (nd->ndone < X_MAX_EN)
				nd->done[nd->ndone++] = nd->chosen;
			for (unsigned i = 0; i < nd->nen && next < 0; i++)
				if (!in_set(nd->sl, nd->nsl, &nd->en[i]) &&
				    !in_set(nd->done, nd->ndone, &nd->en[i]))
					next = (int)i;
			if (next >= 0) {
				nd->cur = next;
				break;
			}
		}
		if (d < 0)
			break;
		if (res->runs >= max_runs) {
			res->budget_hit = 1;
			break;
		}
		rc = run_once(&s, (unsigned)d + 1);
	}
out:
	clock_gettime(CLOCK_MONOTONIC, &t1);
	res->seconds = (double)(t1.tv_sec - t0.tv_sec) +
		       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	rkv_time_set_source(NULL);
	if (rc == 0 && rkv_fake_live() != live0) {
		snprintf(res->first + strlen(res->first),
			 sizeof(res->first) - strlen(res->first),
			 "fake provider objects leaked: %u\n",
			 rkv_fake_live() - live0);
		res->violations++;
	}
	return rc;
}

/* ------------------------------------------------------- for the tests */

static double g_total_s;
static uint64_t g_total_runs;

void x_run(const struct x_scenario *sc)
{
	struct x_result r;
	int rc = x_explore(sc, &r);

	ASSERT_EQ(rc, 0);
	g_total_s += r.seconds;
	g_total_runs += r.runs;
	if (r.sampled)
		printf("# %s: %" PRIu64 " random interleavings (seed %" PRIu64
		       "), %" PRIu64 " steps, %" PRIu64
		       " with a transient second copy, %" PRIu64
		       " violating runs, %.2f s (a sample: not exhaustive)\n",
		       sc->name, r.runs, r.seed, r.steps, r.transient,
		       r.violations, r.seconds);
	else
		printf("# %s: %" PRIu64 " interleavings (%" PRIu64 " complete, %"
		       PRIu64 " cut by sleep sets), %" PRIu64 " steps, %" PRIu64
		       " with a transient second copy, %" PRIu64
		       " violating runs, %.2f s%s\n",
		       sc->name, r.runs, r.complete, r.pruned, r.steps,
		       r.transient, r.violations, r.seconds,
		       r.budget_hit ? " (run budget reached: not exhaustive)" :
				      "");
	printf("#   coverage: %" PRIu64 " retries, %" PRIu64 " lock waits, %"
	       PRIu64 " lock steals, %" PRIu64 " deaths, %" PRIu64
	       " ENOSPC results\n", r.retries, r.lock_waits, r.lock_steals,
	       r.kills, r.enospc);
	if (sc->grow)
		printf("#   levels: %" PRIu64 " added (GROW), %" PRIu64
		       " ops started again over the new one\n", r.grows,
		       r.level_news);
	if (r.violations) {
		for (char *line = strtok(r.first, "\n"); line;
		     line = strtok(NULL, "\n"))
			printf("#   %s\n", line);
	}
	EXPECT_EQ(r.violations, 0);
}

void x_summary(void)
{
	printf("# total: %" PRIu64 " interleavings in %.2f s\n", g_total_runs,
	       g_total_s);
}

unsigned x_watchdog_s(unsigned plain, unsigned sanitized)
{
	const char *r = getenv("RKV_EXPLORE_RUNS");

	if (r && *r)
		return 0; /* a long run asked for by hand: no bound */
	return RKV_TEST_SANITIZED ? sanitized : plain;
}
