/* SPDX-License-Identifier: MIT */
/*
 * scan.c - rkv_scan: every key of every server, read one-sided
 * (rkv.h has what a scan guarantees; docs/DESIGN.md §9.6 the argument).
 *
 * Each partition is taken from one server: the one our map places it on.
 * For a server S and the partitions taken from it:
 *  1. READ S's partition table (pt0): an owned partition is taken; a
 *     frozen one waits (a migration is moving it); a gone one goes to
 *     the server the map of its epoch names (client->moved).
 *  2. Walk S's index in chunks of CHUNK_WORDS slot words.  READ the
 *     chunk's words; then, in rounds of one doorbell each, READ the
 *     blocks of up to ROUND_BLKS live committed slots and, after them,
 *     the words of those slots again.  A slot whose second word names
 *     the same block (the lock bit aside) named it between the two
 *     READs, so the block READ between them is the key's value at that
 *     moment: it is handed to the caller when its key belongs to a
 *     taken partition (and hashes to the slot's bucket).  A slot whose
 *     word changed is read again with its new word in the next round;
 *     one emptied or made tentative is dropped.
 *  3. READ the partition table again (pt1).  A partition whose word
 *     changed during the walk may have lost keys to a migration (slots
 *     marked moved are skipped): it is walked again where it went.
 * A key sits in one slot from its insert to its delete (an update
 * changes the slot's word, never its place), so a key present
 * throughout is handed over once per walk of its partition.
 *
 * At r > 1 a failover may replace a server that is paused or cut off,
 * whose memory (verbs: its NIC; shm: the mapping) still answers READs.
 * So each round of a leased server READs its lease word last, and hands
 * over its keys only if that word's time (on our clock) is still ahead,
 * as a get does (op.c op_lease_ok): every READ of the round completed
 * while the server held its place.  A lapsed lease fails the walk of
 * that server (-ETIMEDOUT, its keys missing, the others' go on).
 */
#include "client.h"
#include "walk.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "rtime.h"

#define CHUNK_WORDS 32768u       /* slot words per chunk: 256 KiB */
#define ROUND_BLKS 62u           /* block READs per round (+ 1 of words) */
#define BLKS_CAP (4u << 20)      /* bytes of blocks per round */
#define ROUND_TRIES 1000u        /* rounds in a row with every slot changed */
#define MOVES_MAX 64u            /* walks of one partition, at most */

_Static_assert(CHUNK_WORDS % RKV_BUCKET_SLOTS_MAX == 0, "whole buckets");

/* The registered buffers of a client's scans (kept: c->scan). */
struct scan {
	char *mem;
	size_t len;
	struct rkv_mr *mr;
	uint64_t *w1;                /* a chunk's words, as last seen */
	uint64_t *w2;                /* the words read again */
	uint64_t *pt0, *pt1;         /* a partition table, before and after */
	uint64_t *lease;             /* a server's lease word */
	struct bigbuf *big;          /* blocks read: BLKS_CAP, or the largest
				      * block met (the client's pool) */
};

/* One scan. */
struct sctx {
	struct rkv_client *c;
	struct scan *s;
	rkv_scan_fn fn;
	void *arg;
	struct rkv_scan_stats *st;
	int16_t from[RKV_MAP_PARTS]; /* the peer to take it from; -1: done */
	uint8_t walks[RKV_MAP_PARTS];
	uint8_t take[RKV_MAP_PARTS]; /* taken from the peer being walked */
	uint16_t pend[CHUNK_WORDS];  /* a chunk's slots still to read */
	int stop;                    /* fn's non-zero answer */
};

static size_t scan_len(void)
{
	return 2 * (size_t)CHUNK_WORDS * 8 + 2 * (size_t)RKV_PART_TABLE_SIZE +
	       8;
}

/* The block buffer holds size bytes (at least BLKS_CAP). */
static int blks_room(struct rkv_client *c, struct scan *s, size_t size)
{
	return bigbuf_hold(c, &s->big, size < BLKS_CAP ? BLKS_CAP : size);
}

static int scan_init(struct rkv_client *c)
{
	struct scan *s;
	int rc;

	if (c->scan)
		return 0;
	s = rkv_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->len = scan_len();
	s->mem = rkv_malloc(s->len);
	if (!s->mem) {
		rkv_free(s);
		return -ENOMEM;
	}
	rc = rkv_mr_reg(c->eng.tp, s->mem, s->len, RKV_ACCESS_LOCAL_WRITE,
			&s->mr);
	if (rc) {
		rkv_free(s->mem);
		rkv_free(s);
		return rc;
	}
	s->w1 = (uint64_t *)(void *)s->mem;
	s->w2 = s->w1 + CHUNK_WORDS;
	s->pt0 = s->w2 + CHUNK_WORDS;
	s->pt1 = s->pt0 + RKV_PART_WORDS;
	s->lease = s->pt1 + RKV_PART_WORDS;
	c->scan = s;
	return blks_room(c, s, BLKS_CAP);
}

void scan_fini(struct rkv_client *c)
{
	struct scan *s = c->scan;

	if (!s)
		return;
	rkv_mr_dereg(s->mr);
	rkv_free(s->mem);
	if (s->big)
		bigbuf_put(c, s->big);
	rkv_free(s);
	c->scan = NULL;
}

static int live(uint64_t w)
{
	return !rkv_slot_empty(w) && !rkv_slot_tentative(w);
}

static int sread(struct sctx *x, struct peer *p, uint64_t addr, void *local,
		 uint32_t len)
{
	struct rkv_wr wr = { .opcode = RKV_WR_READ, .local = local,
			     .length = len, .lkey = x->s->mr->lkey,
			     .remote_addr = addr, .rkey = p->ctrl.keys.index };

	x->st->rounds++;
	x->st->bytes += len;
	return aux_run(x->c, p, &wr, NULL);
}

/* Slot i (word w) of peer p, its block b unchanged since its READ: hand
 * it over when its key is one of the taken partitions'.  0, 1 when fn
 * said stop (x->stop), or -EIO (a committed slot names a block that is not
 * its key's: a broken index). */
static int deliver(struct sctx *x, const struct peer *p, uint64_t i,
		   uint64_t w, const struct walk_blk *b)
{
	struct rkv_key_hash kh;
	uint64_t kb[RKV_KEY_BUCKETS_MAX], bucket = i / p->g.bucket_slots;
	unsigned part, nb, k = 0;

	rkv_key_hash(b->key, b->h->key_len, &kh);
	nb = peer_key_buckets(p, &kh, kb);
	while (k < nb && kb[k] != bucket)
		k++;
	if (kh.fp != rkv_slot_fp(w) || k == nb) {
		clog_(x->c, RKV_LOG_ERROR, "scan: server %s: slot %llu names "
		      "a block of a key that does not hash there", p->label,
		      (unsigned long long)i);
		return -EIO;
	}
	part = rkv_map_part(kh.route);
	if (!x->take[part] || (b->h->flags & RKV_BLOCK_F_DELETED))
		return 0; /* another server's, or a tombstone (r > 1) */
	x->st->keys++;
	x->stop = x->fn(b->key, b->h->key_len, b->val, b->val_len, x->arg);
	return x->stop ? 1 : 0;
}

/* The lease word just read: 0 while it is ahead of our clock, else
 * -ETIMEDOUT (said). */
static int lease_held(struct sctx *x, struct peer *p)
{
	uint64_t until = rkv_lease_until(*x->s->lease);

	if (until > p->lease_until)
		p->lease_until = until;
	if (rkv_wall_coarse_ms() + RKV_COARSE_SLACK_MS < until)
		return 0;
	clog_(x->c, RKV_LOG_ERROR, "scan: server %s: its lease has lapsed "
	      "(paused, cut off from etcd, or replaced): its keys are not "
	      "listed", p->label);
	return -ETIMEDOUT;
}

/* Walk the n slot words of peer p from slot first. */
static int walk_chunk(struct sctx *x, struct peer *p, uint64_t first,
		      uint32_t n)
{
	struct scan *s = x->s;
	struct rkv_wr wr[ROUND_BLKS + 2];
	struct walk_item it[ROUND_BLKS];
	uint32_t np = 0, nwr;
	int leased = x->c->r > 1 && p->g.leased;
	int rc = sread(x, p, p->g.index_addr + first * 8u, s->w1, n * 8u);

	if (rc)
		return rc;
	for (uint32_t j = 0; j < n; j++)
		if (live(s->w1[j]) && walk_block_ok(p, s->w1[j]))
			x->pend[np++] = (uint16_t)j;
	for (unsigned tries = 0; np;) {
		uint32_t k = 0, bytes = 0, lo, hi, nq = 0;

		if (tries == ROUND_TRIES) {
			clog_(x->c, RKV_LOG_ERROR, "scan: server %s: keys "
			      "near slot %llu changed in each of %u rounds",
			      p->label, (unsigned long long)first,
			      ROUND_TRIES);
			return -EBUSY;
		}
		/* a big block is read alone, into a buffer of its size */
		rc = blks_room(x->c, s, rkv_slot_size(s->w1[x->pend[0]]));
		if (rc)
			return rc;
		while (k < np && k < ROUND_BLKS &&
		       bytes + rkv_slot_size(s->w1[x->pend[k]]) <=
			       s->big->len) {
			uint32_t j = x->pend[k];

			it[k++] = (struct walk_item){ .i = j, .w = s->w1[j] };
			bytes += rkv_slot_size(s->w1[j]);
		}
		lo = x->pend[0];
		hi = x->pend[k - 1];
		walk_block_wrs(p, s->big->mr->lkey, s->big->p, it, k, wr);
		/* RC runs a QP's READs in order: these words are read
		 * after the blocks */
		wr[k] = (struct rkv_wr){
			.opcode = RKV_WR_READ, .local = &s->w2[lo],
			.length = (hi - lo + 1) * 8u, .lkey = s->mr->lkey,
			.remote_addr = p->g.index_addr + (first + lo) * 8u,
			.rkey = p->ctrl.keys.index };
		nwr = k + 1;
		if (leased)
			wr[nwr++] = (struct rkv_wr){
				.opcode = RKV_WR_READ, .local = s->lease,
				.length = 8, .lkey = s->mr->lkey,
				.remote_addr = peer_lease_addr(p),
				.rkey = p->ctrl.keys.index };
		x->st->rounds++;
		x->st->bytes += bytes + wr[k].length;
		rc = aux_run_n(x->c, p, wr, nwr, NULL);
		if (!rc && leased)
			rc = lease_held(x, p);
		if (rc)
			return rc;
		for (uint32_t q = 0; q < k; q++) {
			uint32_t j = (uint32_t)it[q].i;
			uint64_t cur = s->w2[j];
			struct walk_blk b;

			if (((cur ^ it[q].w) & ~RKV_SLOT_LOCK) == 0) {
				if (walk_block(s->big->p, &it[q], &b)) {
					clog_(x->c, RKV_LOG_ERROR, "scan: "
					      "server %s: slot %llu names a "
					      "bad block", p->label,
					      (unsigned long long)(first + j));
					return -EIO;
				}
				rc = deliver(x, p, first + j, cur, &b);
				if (rc)
					return rc < 0 ? rc : 0;
			} else if (live(cur) && walk_block_ok(p, cur)) {
				s->w1[j] = cur; /* updated: read it again */
				x->pend[nq++] = (uint16_t)j;
				x->st->retries++;
			}
		}
		/* rounds in a row in which every slot changed */
		tries = nq == k ? tries + 1 : 0;
		memmove(&x->pend[nq], &x->pend[k],
			(np - k) * sizeof(x->pend[0]));
		np = nq + np - k;
	}
	return 0;
}

/* Which of the partitions to take from peer pi can be taken now (pt0
 * read): owned ones; a gone one goes where the map of its epoch says.
 * *wait is set when one is frozen.  Returns how many were taken. */
static int choose(struct sctx *x, unsigned pi, int *wait)
{
	int n = 0;

	for (unsigned part = 0; part < RKV_MAP_PARTS; part++) {
		uint64_t w = x->s->pt0[part];
		int to;

		x->take[part] = 0;
		if (x->from[part] != (int)pi)
			continue;
		switch (rkv_part_state(w)) {
		case RKV_PART_OWNED:
			x->take[part] = 1;
			n++;
			break;
		case RKV_PART_FROZEN:
			*wait = 1;
			break;
		default: /* gone */
			to = x->c->moved ? x->c->moved(x->c, part,
						       rkv_part_epoch(w), pi)
					 : -ESTALE;
			if (to < 0)
				return to;
			x->from[part] = (int16_t)to;
			break;
		}
	}
	return n;
}

/* Walk peer pi for the partitions to take from it (*took: some were). */
static int walk_peer(struct sctx *x, unsigned pi, int *wait, int *took)
{
	struct peer *p = &x->c->peer[pi];
	uint64_t slots = peer_nslots(p);
	int rc = p->down ? p->down : p->link.dead;

	if (rc)
		return rc;
	rc = sread(x, p, peer_part_addr(p, 0), x->s->pt0, RKV_PART_TABLE_SIZE);
	if (rc)
		return rc;
	rc = aux_levels(x->c, p);
	if (rc)
		return rc;
	slots = peer_nslots(p); /* a key present from now on is in them */
	rc = choose(x, pi, wait);
	if (rc <= 0)
		return rc;
	*took = 1;
	rc = 0;
	for (uint64_t first = 0; first < slots && !rc && !x->stop;
	     first += CHUNK_WORDS)
		rc = walk_chunk(x, p, first,
				(uint32_t)(slots - first < CHUNK_WORDS
						   ? slots - first
						   : CHUNK_WORDS));
	if (rc || x->stop)
		return rc;
	rc = sread(x, p, peer_part_addr(p, 0), x->s->pt1, RKV_PART_TABLE_SIZE);
	if (rc)
		return rc;
	for (unsigned part = 0; part < RKV_MAP_PARTS; part++) {
		if (!x->take[part])
			continue;
		if (x->s->pt1[part] == x->s->pt0[part]) {
			x->from[part] = -1; /* done */
			continue;
		}
		/* a migration began during the walk: walk it again where
		 * it goes, once it is there */
		x->st->parts_moved++;
		if (++x->walks[part] == MOVES_MAX) {
			clog_(x->c, RKV_LOG_ERROR, "scan: partition %u moved "
			      "during each of %u walks", part, MOVES_MAX);
			return -EBUSY;
		}
	}
	return 0;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

int rkv_scan(struct rkv_client *c, rkv_scan_fn fn, void *arg,
	     struct rkv_scan_stats *st)
{
	struct rkv_scan_stats local;
	struct sctx *x;
	uint64_t wait_since = 0;
	int rc = 0;

	if (!c || !fn)
		return -EINVAL;
	if (!st)
		st = &local;
	memset(st, 0, sizeof(*st));
	st->failed_server = -1;
	rc = scan_init(c);
	if (rc)
		return rc;
	x = rkv_calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	*x = (struct sctx){ .c = c, .s = c->scan, .fn = fn, .arg = arg,
			    .st = st };
	for (unsigned part = 0; part < RKV_MAP_PARTS; part++)
		x->from[part] = (int16_t)c->owner[part];
	while (!x->stop) {
		int left = 0, wait = 0, took = 0;

		for (unsigned pi = 0; pi < c->nsrv && !x->stop; pi++) {
			int any = 0, err;

			for (unsigned part = 0; part < RKV_MAP_PARTS; part++)
				any |= x->from[part] == (int)pi;
			if (!any)
				continue;
			err = walk_peer(x, pi, &wait, &took);
			if (!err || x->stop)
				continue;
			/* the server is down or failed: its keys are
			 * missing, the other servers' go on */
			if (!rc) {
				rc = err;
				st->failed_server = (int)pi;
			}
			for (unsigned part = 0; part < RKV_MAP_PARTS; part++)
				if (x->from[part] == (int)pi)
					x->from[part] = -1;
		}
		for (unsigned part = 0; part < RKV_MAP_PARTS; part++)
			left |= x->from[part] >= 0;
		if (!left || x->stop)
			break;
		if (wait && !took) {
			/* only frozen partitions are left: wait for their
			 * migration, within the op timeout */
			uint64_t now = rkv_now_ms();

			if (!wait_since)
				wait_since = now;
			if (now - wait_since > c->opts.timeout_ms) {
				clog_(c, RKV_LOG_ERROR, "scan: a partition "
				      "stayed frozen (being moved) for %u ms",
				      c->opts.timeout_ms);
				rc = rc ? rc : -ETIMEDOUT;
				break;
			}
			sleep_ms(1);
		} else {
			wait_since = 0;
		}
	}
	if (x->stop)
		rc = x->stop;
	rkv_free(x);
	return rc;
}
