/* SPDX-License-Identifier: MIT */
/*
 * failover.c - promoting the backups of a dead server (failover.h,
 * docs/DESIGN.md §9.7).
 *
 * Why the reconcile may pick the new primary's copy: a write is
 * acknowledged only after its block is on every backup (install) and the
 * old primary released; so every acknowledged write of a key is on the
 * new primary (a backup of the old map), at its sequence or under a newer
 * one.  A copy elsewhere with a higher sequence than the new primary's
 * belongs to a write that never reached the new primary: never
 * acknowledged (its writer failed with -EIO or died), so it goes.  A
 * copy on the new primary newer than the acknowledged value is a write
 * in flight when the server died: it may count (its writer was told -EIO
 * or nothing), and from now on it does, on every survivor.
 *
 * Why nothing of an old client lands after the reads: every survivor is
 * fenced first (FENCE), and fenced servers run no one-sided operation of
 * a client of an older map.  The coordinator is then alone on the
 * partitions it reconciles: clients of the old map are refused, and no
 * client has the new map before it is published.
 */
#include "client.h"
#include "failover.h"
#include "walk.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "rtime.h"

#define SCAN_CHUNK (256u * 1024) /* index bytes per READ */
#define CHAIN 64u                /* blocks per doorbell */
#define BLKS_CAP (4u << 20)      /* bytes of blocks per doorbell */
#define INFLIGHT 32u             /* rewrites in flight */

/* A copy of a key on a server of the new map. */
struct copy {
	char *key;
	uint32_t key_len;
	uint16_t srv;            /* peer index (= index in the new map) */
	uint16_t part;
	uint64_t slot;           /* slot number in that server's index */
	uint64_t w;              /* its word as read */
	uint64_t seq;            /* its block's sequence */
	uint32_t grant;          /* its block's grant (the cleanup returns it) */
	uint8_t del;             /* a tombstone */
};

struct fo {
	const struct rkv_fo_opts *o;
	struct rkv_client *c;
	struct rkv_mr *mr;
	char *buf;               /* registered: SCAN_CHUNK of index */
	struct bigbuf *big;      /* blocks read */
	int live;                /* clients write meanwhile (the rebuild) */
	struct copy *cp;
	size_t ncp, cap;
	uint8_t *pass;           /* per copy group: write it again */
	char *why;
	size_t why_len;
};

static int say(struct fo *f, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int say(struct fo *f, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(f->why, f->why_len, fmt, ap);
	va_end(ap);
	return rc;
}

unsigned rkv_fo_parts(const struct rkv_map *from, const char *dead,
		      uint8_t *parts)
{
	int d = rkv_map_find(from, dead);
	unsigned n = 0;

	for (unsigned p = 0; p < RKV_MAP_PARTS; p++) {
		parts[p] = d >= 0 && rkv_map_holds(from, p, (unsigned)d);
		n += parts[p];
	}
	return n;
}

/* Whether partition p has the same replicas, in the same order, by name,
 * in x and y. */
static int same_set(const struct rkv_map *x, const struct rkv_map *y,
		    unsigned p)
{
	if (x->nrep[p] != y->nrep[p])
		return 0;
	for (unsigned k = 0; k < x->nrep[p]; k++)
		if (strcmp(x->srv[x->rep[p][k]].name, y->srv[y->rep[p][k]].name))
			return 0;
	return 1;
}

unsigned rkv_fo_parts_moved(const struct rkv_map *from,
			    const struct rkv_map *to, uint8_t *parts)
{
	unsigned n = 0;

	for (unsigned p = 0; p < RKV_MAP_PARTS; p++) {
		parts[p] = !same_set(from, to, p);
		n += parts[p];
	}
	return n;
}

/* A client of the new map (its epoch in every HELLO). */
static int open_client_of(struct fo *f, const struct rkv_fo_opts *o,
			  const struct rkv_map *map, char *why, size_t why_len)
{
	struct rkv_client_opts co = *o->base;
	int rc;

	memset(f, 0, sizeof(*f));
	f->o = o;
	f->why = why;
	f->why_len = why_len;
	co.servers = NULL;
	co.cluster_file = NULL;
	co.max_inflight = INFLIGHT;
	co.read_only = 0;
	rc = client_create_map(&co, map, &f->c);
	if (rc)
		return say(f, rc, "cannot connect to the servers of map epoch "
			   "%llu: %s", (unsigned long long)map->epoch,
			   strerror(-rc));
	for (unsigned i = 0; i < f->c->nsrv; i++)
		if (f->c->peer[i].down)
			return say(f, f->c->peer[i].down, "server %s is down "
				   "too (%s): fail it over first",
				   f->c->peer[i].label,
				   strerror(-f->c->peer[i].down));
	return 0;
}

static int open_client(struct fo *f, const struct rkv_fo_opts *o, char *why,
		       size_t why_len)
{
	return open_client_of(f, o, o->to, why, why_len);
}

static void close_client(struct fo *f)
{
	for (size_t i = 0; i < f->ncp; i++)
		rkv_free(f->cp[i].key);
	rkv_free(f->cp);
	rkv_free(f->pass);
	if (f->mr)
		rkv_mr_dereg(f->mr);
	if (f->big)
		bigbuf_put(f->c, f->big);
	rkv_free(f->buf);
	rkv_client_destroy(f->c);
}

/* The servers of to, and with fence_from those of from it lacks (a
 * drain's), as a map of to's epoch. */
static struct rkv_map *fence_map(const struct rkv_fo_opts *o)
{
	struct rkv_map *m = rkv_malloc(sizeof(*m));

	if (!m)
		return NULL;
	*m = *o->to;
	for (unsigned i = 0; o->fence_from && i < o->from->n; i++)
		if (rkv_map_find(m, o->from->srv[i].name) < 0 &&
		    rkv_map_add(m, o->from->srv[i].name, o->from->srv[i].addr,
				NULL, 0)) {
			rkv_free(m);
			return NULL;
		}
	for (unsigned i = 0; i < m->n; i++)
		m->srv[i].state = RKV_MAP_MEMBER;
	rkv_map_place(m);
	return m;
}

int rkv_fo_fence(const struct rkv_fo_opts *o, char *why, size_t why_len)
{
	struct fo f;
	struct rkv_map *fm = fence_map(o);
	int rc;

	if (!fm) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	rc = open_client_of(&f, o, fm, why, why_len);

	for (unsigned i = 0; !rc && i < f.c->nsrv; i++) {
		struct rkv_msg m, reply;

		memset(&m, 0, sizeof(m));
		m.hdr.type = RKV_MSG_FENCE;
		m.u.fence.epoch = (uint32_t)o->to->epoch;
		rc = ctrl_call(&f.c->peer[i].ctrl, &m, &reply,
			       f.c->opts.timeout_ms);
		if (!rc && reply.hdr.type == RKV_MSG_ERROR)
			rc = reply.u.error.status < 0 ? reply.u.error.status
						      : -EPROTO;
		else if (!rc && reply.hdr.type != RKV_MSG_ACK)
			rc = -EPROTO;
		else if (!rc)
			rc = reply.u.ack.status;
		if (rc == -EOPNOTSUPP)
			rc = say(&f, rc, "server %s cannot be fenced (shm: "
				 "failover is built for tcp and verbs)",
				 f.c->peer[i].label);
		else if (rc)
			rc = say(&f, rc, "fencing server %s: %s",
				 f.c->peer[i].label, strerror(-rc));
	}
	close_client(&f);
	rkv_free(fm);
	return rc;
}

/* ------------------------------------------------- partition words */

int rkv_fo_own(const struct rkv_fo_opts *o, char *why, size_t why_len)
{
	const size_t len = RKV_PART_WORDS * 8u;
	struct fo f;
	int rc = open_client(&f, o, why, why_len);

	if (!rc) {
		f.buf = rkv_malloc(len);
		if (!f.buf)
			rc = say(&f, -ENOMEM, "out of memory");
	}
	if (!rc) {
		rc = rkv_mr_reg(f.c->eng.tp, f.buf, len,
				RKV_ACCESS_LOCAL_WRITE, &f.mr);
		if (rc)
			rc = say(&f, rc, "cannot register memory: %s",
				 strerror(-rc));
	}
	for (unsigned si = 0; !rc && si < f.c->nsrv; si++) {
		struct peer *p = &f.c->peer[si];
		struct rkv_wr wr = { .opcode = RKV_WR_READ, .local = f.buf,
				     .length = (uint32_t)len,
				     .lkey = f.mr->lkey,
				     .remote_addr = peer_part_addr(p, 0),
				     .rkey = p->ctrl.keys.index };

		rc = aux_run(f.c, p, &wr, NULL);
		if (rc) {
			rc = say(&f, rc, "server %s: READ of the partition "
				 "table: %s", p->label, strerror(-rc));
			break;
		}
		for (unsigned q = 0; !rc && q < RKV_MAP_PARTS; q++) {
			uint64_t w, want, old = 0;

			if (!o->parts[q])
				continue;
			memcpy(&w, f.buf + (size_t)q * 8, 8);
			/* a copy here: its owner's word (backups' words are
			 * read once they are promoted); none: gone at this
			 * epoch, where a client that meets it finds the map
			 * that says where the partition is */
			if (rkv_map_holds(o->to, q, si))
				want = rkv_part_state(w) == RKV_PART_OWNED
					       ? w
					       : rkv_part_word(RKV_PART_OWNED, 0);
			else
				want = rkv_part_state(w) == RKV_PART_GONE
					       ? w
					       : rkv_part_word(RKV_PART_GONE,
							       (uint32_t)o->to->epoch);
			if (want == w)
				continue;
			struct rkv_wr cas = { .opcode = RKV_WR_CAS,
					      .remote_addr = peer_part_addr(p, q),
					      .rkey = p->ctrl.keys.index,
					      .compare_add = w, .swap = want };

			rc = aux_run(f.c, p, &cas, &old);
			if (!rc && old != w)
				rc = -EAGAIN;
			if (rc)
				rc = say(&f, rc, "server %s: partition %u's "
					 "word: %s", p->label, q,
					 rc == -EAGAIN ? "changed meanwhile"
						       : strerror(-rc));
		}
	}
	close_client(&f);
	return rc;
}

/* ------------------------------------------------------------ the walk */

static int add_copy(struct fo *f, unsigned si, uint64_t slot, uint64_t w,
		    const struct walk_blk *b)
{
	struct rkv_key_hash kh;
	struct copy *cp;
	unsigned part;

	rkv_key_hash(b->key, b->h->key_len, &kh);
	part = rkv_map_part(kh.route);
	if (!f->o->parts[part])
		return 0;
	if (f->ncp == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 1024;
		struct copy *n = rkv_realloc(f->cp, cap * sizeof(*n));

		if (!n)
			return say(f, -ENOMEM, "out of memory");
		f->cp = n;
		f->cap = cap;
	}
	cp = &f->cp[f->ncp];
	cp->key = rkv_malloc(b->h->key_len ? b->h->key_len : 1);
	if (!cp->key)
		return say(f, -ENOMEM, "out of memory");
	memcpy(cp->key, b->key, b->h->key_len);
	cp->key_len = b->h->key_len;
	cp->srv = (uint16_t)si;
	cp->part = (uint16_t)part;
	cp->slot = slot;
	cp->w = w;
	cp->seq = b->h->version;
	cp->grant = b->h->grant;
	cp->del = (b->h->flags & RKV_BLOCK_F_DELETED) != 0;
	f->ncp++;
	return 0;
}

/* The blocks of it[0..n) on peer si, and a copy for each of a partition
 * of ours.  A block that does not decode: nothing writes these slots now
 * (fenced), so it is an error, not a race. */
static int take_blocks(struct fo *f, unsigned si, struct walk_item *it,
		       unsigned n)
{
	struct peer *p = &f->c->peer[si];
	struct rkv_wr wr[CHAIN];
	int rc;

	if (!n)
		return 0;
	walk_block_wrs(p, f->big->mr->lkey, f->big->p, it, n, wr);
	rc = aux_run_n(f->c, p, wr, n, NULL);
	if (rc)
		return say(f, rc, "server %s: READ of blocks: %s", p->label,
			   strerror(-rc));
	for (unsigned k = 0; k < n && !rc; k++) {
		struct walk_blk b;

		if (walk_block(f->big->p, &it[k], &b)) {
			/* with clients writing, a block replaced since its
			 * word was read: that write went to every replica */
			if (f->live)
				continue;
			return say(f, -EIO, "server %s: slot %llu names a bad "
				   "block", p->label,
				   (unsigned long long)it[k].i);
		}
		rc = add_copy(f, si, it[k].i, it[k].w, &b);
	}
	return rc;
}

/* Every committed or locked slot of server si whose key is of ours. */
static int walk_server(struct fo *f, unsigned si)
{
	struct peer *p = &f->c->peer[si];
	uint64_t nslots;
	const uint64_t per = SCAN_CHUNK / 8;
	struct walk_item it[CHAIN];
	int rc = aux_levels(f->c, p); /* after the fence: every key's level */

	if (rc)
		return say(f, rc, "server %s: READ of the level word: %s",
			   p->label, strerror(-rc));
	nslots = peer_nslots(p);

	for (uint64_t first = 0; first < nslots && !rc; first += per) {
		uint32_t n = (uint32_t)(nslots - first < per ? nslots - first
							     : per);
		struct rkv_wr wr = { .opcode = RKV_WR_READ, .local = f->buf,
				     .length = n * 8u, .lkey = f->mr->lkey,
				     .remote_addr = p->g.index_addr + first * 8u,
				     .rkey = p->ctrl.keys.index };
		unsigned k = 0;
		uint32_t bytes = 0;

		rc = aux_run(f->c, p, &wr, NULL);
		if (rc)
			return say(f, rc, "server %s: READ of the index: %s",
				   p->label, strerror(-rc));
		for (uint32_t j = 0; j < n && !rc; j++) {
			uint64_t w;

			memcpy(&w, f->buf + (size_t)j * 8, 8);
			/* empty, tentative (an insert that a fenced client
			 * can never commit: the next inserter clears it) or
			 * moved (a migration's) */
			if (rkv_slot_empty(w) || rkv_slot_tentative(w) ||
			    !walk_block_ok(p, w))
				continue;
			if (k == CHAIN || bytes + rkv_slot_size(w) > f->big->len) {
				rc = take_blocks(f, si, it, k);
				k = 0;
				bytes = 0;
				if (!rc)
					rc = bigbuf_hold(f->c, &f->big,
							 rkv_slot_size(w) > BLKS_CAP
								 ? rkv_slot_size(w)
								 : BLKS_CAP);
			}
			it[k++] = (struct walk_item){ .i = first + j, .w = w };
			bytes += rkv_slot_size(w);
		}
		if (!rc)
			rc = take_blocks(f, si, it, k);
	}
	return rc;
}

static int by_key(const void *a, const void *b)
{
	const struct copy *x = a, *y = b;
	int d;

	if (x->key_len != y->key_len)
		return x->key_len < y->key_len ? -1 : 1;
	d = memcmp(x->key, y->key, x->key_len);
	if (d)
		return d;
	if (x->srv != y->srv)
		return x->srv < y->srv ? -1 : 1;
	return x->seq < y->seq ? 1 : x->seq > y->seq ? -1 : 0;
}

static int walk_all(struct fo *f)
{
	int rc;

	f->buf = rkv_malloc(SCAN_CHUNK);
	if (!f->buf)
		return say(f, -ENOMEM, "out of memory");
	rc = rkv_mr_reg(f->c->eng.tp, f->buf, SCAN_CHUNK,
			RKV_ACCESS_LOCAL_WRITE, &f->mr);
	if (rc)
		return say(f, rc, "cannot register memory: %s", strerror(-rc));
	rc = bigbuf_hold(f->c, &f->big, BLKS_CAP);
	if (rc)
		return say(f, rc, "no buffer for blocks: %s", strerror(-rc));
	for (unsigned si = 0; si < f->c->nsrv && !rc; si++)
		rc = walk_server(f, si);
	if (!rc && f->ncp)
		qsort(f->cp, f->ncp, sizeof(*f->cp), by_key);
	return rc;
}

/* ------------------------------------------------------ the reconcile */

static int slot_cas(struct fo *f, const struct copy *cp, uint64_t swap)
{
	struct peer *p = &f->c->peer[cp->srv];
	uint64_t old = 0;
	struct rkv_wr wr = {
		.opcode = RKV_WR_CAS,
		.remote_addr = p->g.index_addr + cp->slot * 8u,
		.rkey = p->ctrl.keys.index, .compare_add = cp->w, .swap = swap };
	int rc = aux_run(f->c, p, &wr, &old);

	if (rc)
		return say(f, rc, "server %s: CAS: %s", p->label,
			   strerror(-rc));
	if (old != cp->w)
		return say(f, -EAGAIN, "server %s: a slot changed during the "
			   "failover (is a client of the new map running?)",
			   p->label);
	return 0;
}

/* Whether server si was in the key's replica set of the old map. */
static int was_replica(const struct fo *f, unsigned part, unsigned si)
{
	const struct rkv_map *from = f->o->from;
	int old = rkv_map_find(from, f->o->to->srv[si].name);

	return old >= 0 && rkv_map_holds(from, part, (unsigned)old);
}

/* The slot of cp emptied (nobody writes: fenced) and its block
 * returned to its server (sent when the client closes). */
static int drop_copy(struct fo *f, const struct copy *cp)
{
	int rc = slot_cas(f, cp, 0);

	if (!rc)
		space_return(&f->c->space[cp->srv], rkv_slot_offset(cp->w),
			     rkv_slot_size(cp->w), cp->grant);
	return rc;
}

/* The sweep of a deleted key (best: its primary's tombstone): every copy
 * emptied, the backups' before the primary's, so that a sweep stopped
 * half-way never leaves a key on a backup but not on its primary (which
 * reads as a primary that lost its contents). */
static int sweep_key(struct fo *f, struct copy *g, size_t n,
		     const struct copy *best, struct rkv_fo_stats *st)
{
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		if (&g[i] == best)
			continue;
		rc = drop_copy(f, &g[i]);
		st->swept_copies += !rc;
	}
	if (!rc)
		rc = drop_copy(f, best);
	st->swept_copies += !rc;
	st->swept += !rc;
	return rc;
}

/* One key's copies g[0..n): sorted by server, then sequence downwards. */
static int reconcile_key(struct fo *f, struct copy *g, size_t n,
			 struct rkv_fo_stats *st, uint8_t *fix)
{
	const uint16_t *rep = f->c->rep[g[0].part];
	unsigned r = f->c->nrep[g[0].part], prim = rep[0];
	const struct copy *best = NULL;
	uint64_t h = 0;
	int live, rc = 0;

	for (size_t i = 0; i < n; i++)
		if (g[i].srv == prim) {
			best = &g[i]; /* the highest sequence comes first */
			h = best->seq;
			break;
		}
	live = best && !best->del;
	*fix = 0;
	if (f->o->sweep && best && best->del)
		return sweep_key(f, g, n, best, st);
	for (size_t i = 0; i < n && !rc; i++) {
		struct copy *cp = &g[i];
		int in_set = 0;

		if (cp == best)
			continue;
		for (unsigned k = 0; k < r; k++)
			in_set |= rep[k] == cp->srv;
		if (!in_set)
			continue; /* not a replica of this key: not read */
		if (cp->srv == prim || !live || cp->seq > h) {
			/* a duplicate on the primary, a copy of a key the
			 * primary does not hold (deleted), or a write that
			 * never reached the primary: never acknowledged */
			rc = slot_cas(f, cp, 0);
			st->emptied += !rc;
			continue;
		}
		if (cp->seq < h && was_replica(f, cp->part, cp->srv))
			*fix = 1; /* a survivor behind the primary */
	}
	if (!rc && best) {
		/* the primary's rule for its word, version (h + 1) mod 256,
		 * unlocked: a lock taken from it gets h + 1 and a thief h + 2,
		 * above every copy left.  The copy may have been a backup's,
		 * made before backups kept the rule, or locked by a fenced
		 * writer (released here, value unchanged). */
		uint64_t want = rkv_slot_with_version(best->w,
						      (unsigned)(h + 1));

		if (want != best->w) {
			rc = slot_cas(f, best, want);
			st->unlocked += !rc && rkv_slot_locked(best->w);
		}
	}
	/* a survivor missing the primary's live value */
	for (unsigned k = 1; !rc && live && k < r; k++) {
		int has = 0;

		if (!was_replica(f, g[0].part, rep[k]))
			continue; /* the server that entered: the rebuild's */
		for (size_t i = 0; i < n; i++)
			has |= g[i].srv == rep[k] && g[i].seq == h;
		if (!has)
			*fix = 1;
	}
	return rc;
}

/* The rmw of a rewrite: the value it finds, written again (a tombstone
 * or nothing: left). */
static int same_value(const void *old, size_t old_len, void *out,
		      size_t out_cap, size_t *out_len, void *arg)
{
	(void)arg;
	if (!old)
		return RKV_RMW_KEEP;
	if (old_len > out_cap) {
		*out_len = old_len;
		return -ENOBUFS;
	}
	memcpy(out, old, old_len);
	*out_len = old_len;
	return RKV_RMW_WRITE;
}

/* Write again, through the new map, the first copy of each group whose
 * pass flag is set: up to INFLIGHT at once. */
static int rewrite(struct fo *f, const uint8_t *want, size_t ngroups,
		   const size_t *first, uint64_t *count)
{
	struct rkv_op ops[INFLIGHT], *done[INFLIGHT];
	unsigned free_n = INFLIGHT, freelist[INFLIGHT];
	size_t next = 0, total = 0, finished = 0;
	int rc = 0;

	for (size_t g = 0; g < ngroups; g++)
		total += want[g];
	for (unsigned i = 0; i < INFLIGHT; i++)
		freelist[i] = i;
	while (!rc && finished < total) {
		while (free_n && next < ngroups) {
			const struct copy *cp;
			struct rkv_op *op;

			if (!want[next]) {
				next++;
				continue;
			}
			cp = &f->cp[first[next++]];
			op = &ops[freelist[--free_n]];
			memset(op, 0, sizeof(*op));
			op->type = RKV_OP_RMW;
			op->key = cp->key;
			op->key_len = cp->key_len;
			op->fn = same_value;
			rc = rkv_submit(f->c, op);
			if (rc)
				return say(f, rc, "rewrite: %s", strerror(-rc));
		}
		int n = rkv_poll(f->c, done, INFLIGHT);

		if (n == 0)
			(void)rkv_wait(f->c, 1000);
		if (n < 0)
			return say(f, n, "rewrite: %s", strerror(-n));
		for (int i = 0; i < n; i++) {
			if (done[i]->status && !rc)
				rc = say(f, done[i]->status, "writing a key "
					 "again: %s",
					 strerror(-done[i]->status));
			freelist[free_n++] = (unsigned)(done[i] - ops);
			finished++;
			(*count)++;
		}
		if (f->o->progress)
			f->o->progress(f->o->arg, finished, total);
	}
	while (rkv_inflight(f->c)) { /* what is still in flight */
		if (rkv_poll(f->c, done, INFLIGHT) < 0)
			break;
		(void)rkv_wait(f->c, 1000);
	}
	return rc;
}

/* The groups of f->cp (one per key): first[g] is the first copy's index;
 * returns how many. */
static size_t groups(const struct fo *f, size_t *first)
{
	size_t ng = 0;

	for (size_t i = 0; i < f->ncp; i++)
		if (!i || f->cp[i].key_len != f->cp[i - 1].key_len ||
		    memcmp(f->cp[i].key, f->cp[i - 1].key, f->cp[i].key_len))
			first[ng++] = i;
	return ng;
}

static int run(const struct rkv_fo_opts *o, struct rkv_fo_stats *st,
	       char *why, size_t why_len, int rebuild)
{
	uint64_t t0 = rkv_now_ms();
	size_t *first = NULL, ng;
	uint8_t *want = NULL;
	struct fo f;
	int rc = open_client(&f, o, why, why_len);

	f.live = rebuild;
	if (!rc)
		rc = walk_all(&f);
	if (!rc && f.ncp) {
		first = rkv_malloc(f.ncp * sizeof(*first));
		want = rkv_calloc(f.ncp, 1);
		if (!first || !want)
			rc = say(&f, -ENOMEM, "out of memory");
	}
	ng = rc || !f.ncp ? 0 : groups(&f, first);
	st->copies_seen = f.ncp;
	st->keys = ng;
	for (size_t g = 0; g < ng && !rc; g++) {
		size_t end = g + 1 < ng ? first[g + 1] : f.ncp;
		const struct copy *cp = &f.cp[first[g]];
		unsigned prim = f.c->rep[cp->part][0];

		if (!rebuild) {
			rc = reconcile_key(&f, &f.cp[first[g]], end - first[g],
					   st, &want[g]);
			continue;
		}
		/* the rebuild: every live key on its primary */
		for (size_t i = first[g]; i < end; i++)
			if (f.cp[i].srv == prim) {
				want[g] = !f.cp[i].del;
				break;
			}
	}
	if (!rc)
		rc = rewrite(&f, want, ng, first,
			     rebuild ? &st->rebuilt : &st->fixed);
	rkv_free(first);
	rkv_free(want);
	close_client(&f);
	st->elapsed_ms += rkv_now_ms() - t0;
	return rc;
}

int rkv_fo_reconcile(const struct rkv_fo_opts *o, struct rkv_fo_stats *st,
		     char *why, size_t why_len)
{
	return run(o, st, why, why_len, 0);
}

int rkv_fo_rebuild(const struct rkv_fo_opts *o, struct rkv_fo_stats *st,
		   char *why, size_t why_len)
{
	return run(o, st, why, why_len, 1);
}

int rkv_fo_cleanup(const struct rkv_fo_opts *o, struct rkv_fo_stats *st,
		   char *why, size_t why_len)
{
	uint64_t t0 = rkv_now_ms();
	struct fo f;
	int rc = open_client(&f, o, why, why_len);

	f.live = 1; /* clients of the map write their own copies meanwhile */
	if (!rc)
		rc = walk_all(&f);
	for (size_t i = 0; !rc && i < f.ncp; i++) {
		const struct copy *cp = &f.cp[i];
		int r2;

		if (rkv_map_holds(o->to, cp->part, cp->srv))
			continue;
		/* no replica of its key: no client of this map writes or
		 * reads it, and older clients are fenced */
		r2 = slot_cas(&f, cp, 0);
		if (r2 == -EAGAIN)
			continue;
		rc = r2;
		if (!rc) {
			space_return(&f.c->space[cp->srv], rkv_slot_offset(cp->w),
				     rkv_slot_size(cp->w), cp->grant);
			st->dropped++;
		}
	}
	close_client(&f); /* sends the returns */
	st->elapsed_ms += rkv_now_ms() - t0;
	return rc;
}
