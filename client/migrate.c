/* SPDX-License-Identifier: MIT */
/*
 * migrate.c - live migration (migrate.h; docs/DESIGN.md §9.5).
 *
 * The migration is a client of every server of both maps, with no fence
 * of its own (client->mig) and each partition routed to its owner in the
 * new map, so its puts land on the new servers.  Everything it does to
 * the old servers is one-sided: READs of the index and of blocks, CASes
 * of slot words and partition words (aux_run, one WR at a time).
 *
 * For each old server S and each batch of the partitions leaving it:
 *  1. CAS each partition word of S to FROZEN(E+1).  From then on no
 *     insert of the batch commits on S (an insert reads the word after
 *     its tentative CAS and withdraws), and ops of the batch wait.
 *  2. Pass over S's index until a pass finds nothing left to do: a
 *     slot's key (read from its block, remembered while the slot names
 *     the same block) gives its partition; for one of the batch:
 *       committed (locked or not): CAS it to moved, then copy the block's
 *         key and value to the new owner (a put); a CAS that fails was a
 *         write that got in first: look again;
 *       tentative: an insert that read the word before step 1 and may
 *         still commit: look again, and clear it after a lease unchanged
 *         (its inserter is dead; its commit then fails);
 *       moved already (an earlier run): copy it again.
 *     A moved slot is never changed by a client, so the copy is the
 *     key's last value, and the key has no other copy.
 *  3. CAS each partition word of the new owner to OWNED, then S's to
 *     GONE(E+1): ops of the batch go on at the new owner.
 * rkv_mig_cleanup then empties the moved slots of gone partitions on the
 * old servers and returns their blocks (their grant from the header).
 */
#include "client.h"
#include "migrate.h"
#include "walk.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "rtime.h"

#define SCAN_CHUNK (256u * 1024) /* index bytes per READ */
#define CHAIN 64u                /* WRs per doorbell, keys per put batch */
#define BLKS_CAP (4u << 20)      /* bytes of blocks read per doorbell */
#define NO_PART 0xffffu

struct mig {
	const struct rkv_mig_opts *o;
	struct rkv_client *c;
	struct rkv_mr *mr;
	char *buf;                   /* registered: SCAN_CHUNK of index,
				      * CHAIN CAS results */
	uint64_t *res;
	struct bigbuf *big;          /* blocks read: BLKS_CAP, or the largest
				      * block met (the client's pool) */
	struct walk_item todo[CHAIN]; /* committed slots of the batch */
	unsigned ntodo;
	int from_peer[RKV_MAP_SERVERS_MAX], to_peer[RKV_MAP_SERVERS_MAX];
	struct rkv_mig_progress pr;
	uint64_t t0;
	char *why;
	size_t why_len;
	/* the source being scanned: per slot, the word whose key we know
	 * and that key's partition; whether this run copied it */
	uint64_t nslots;
	uint64_t *seen;
	uint16_t *part;
	uint8_t *copied;
	uint64_t *tent_since;        /* a tentative word seen unchanged since */
	uint8_t in_batch[RKV_MAP_PARTS];
	uint64_t pw[RKV_MAP_PARTS];  /* a partition table as read */
};

static int say(struct mig *m, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int say(struct mig *m, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->why, m->why_len, fmt, ap);
	va_end(ap);
	return rc;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* ------------------------------------------------------ one-sided I/O */

static int mrd(struct mig *m, const struct rkv_mr *mr, unsigned pi,
	       uint64_t addr, uint32_t rkey, char *local, uint32_t len)
{
	struct rkv_wr wr = { .opcode = RKV_WR_READ, .local = local,
			     .length = len, .lkey = mr->lkey,
			     .remote_addr = addr, .rkey = rkey };

	return aux_run(m->c, &m->c->peer[pi], &wr, NULL);
}

static int mcas(struct mig *m, unsigned pi, uint64_t addr, uint64_t expect,
	       uint64_t swap, uint64_t *old)
{
	struct peer *p = &m->c->peer[pi];
	struct rkv_wr wr = { .opcode = RKV_WR_CAS, .remote_addr = addr,
			     .rkey = p->ctrl.keys.index,
			     .compare_add = expect, .swap = swap };

	return aux_run(m->c, p, &wr, old);
}

/* The block buffer holds size bytes (at least BLKS_CAP). */
static int blks_room(struct mig *m, uint32_t size)
{
	int rc = bigbuf_hold(m->c, &m->big, size < BLKS_CAP ? BLKS_CAP : size);

	return rc ? say(m, rc, "no buffer for blocks of %u bytes: %s", size,
			strerror(-rc))
		  : 0;
}

/* Set partition part's word on peer pi to want, from whatever it holds
 * (a CAS loop: clients only read these words). */
static int set_part(struct mig *m, unsigned pi, unsigned part, uint64_t want)
{
	struct peer *p = &m->c->peer[pi];
	uint64_t addr = peer_part_addr(p, part), cur = 0, old;
	int rc;

	for (int i = 0; i < 100; i++) {
		rc = mcas(m, pi, addr, cur, want, &old);
		if (rc)
			return say(m, rc, "server %s: partition word: %s",
				   p->label, strerror(-rc));
		if (old == cur)
			return 0;
		cur = old;
	}
	return say(m, -EAGAIN, "server %s: partition %u's word keeps changing",
		   p->label, part);
}

/* READ peer pi's partition table into m->pw. */
static int read_parts(struct mig *m, unsigned pi)
{
	struct peer *p = &m->c->peer[pi];
	int rc = mrd(m, m->mr, pi, peer_part_addr(p, 0), p->ctrl.keys.index,
		     m->buf, RKV_PART_TABLE_SIZE);

	if (rc)
		return say(m, rc, "server %s: READ of the partition table: %s",
			   p->label, strerror(-rc));
	memcpy(m->pw, m->buf, sizeof(m->pw));
	return 0;
}

/* ------------------------------------------------------------- blocks */

/* READ the block slot word w names on peer pi and check it (no key to
 * compare: any valid block).  0, -EBADMSG (torn or reused: look again
 * later), or the I/O error. */
static int read_block(struct mig *m, unsigned pi, uint64_t w,
		      const struct rkv_block_hdr **h, const void **val,
		      uint32_t *vl)
{
	struct peer *p = &m->c->peer[pi];
	uint32_t size = rkv_slot_size(w);
	int rc;

	if (!size || rkv_slot_offset(w) + size > p->g.data_len)
		return -EBADMSG;
	rc = blks_room(m, size);
	if (rc)
		return rc;
	rc = mrd(m, m->big->mr, pi, p->g.data_addr + rkv_slot_offset(w),
		 p->ctrl.keys.data, m->big->p, size);
	if (rc)
		return say(m, rc, "server %s: READ of a block: %s", p->label,
			   strerror(-rc));
	return rkv_block_decode(m->big->p, size, NULL, 0, val, vl, h);
}

static unsigned part_of_key(const void *key, size_t len)
{
	struct rkv_key_hash kh;

	rkv_key_hash(key, len, &kh);
	return rkv_map_part(kh.route);
}

/* The partition of slot i's key (word w), from memory or its block;
 * NO_PART when its block cannot be read now. */
static int slot_part(struct mig *m, unsigned pi, uint64_t i, uint64_t w,
		     unsigned *part)
{
	const struct rkv_block_hdr *h;
	const void *v;
	uint32_t vl;
	int rc;

	if (m->part[i] != NO_PART && rkv_slot_same_block(m->seen[i], w)) {
		*part = m->part[i];
		return 0;
	}
	rc = read_block(m, pi, w, &h, &v, &vl);
	if (rc == -EBADMSG || rc == -ESTALE) {
		*part = NO_PART;
		return 0;
	}
	if (rc)
		return rc;
	*part = part_of_key(m->big->p + RKV_BLOCK_HDR_SIZE, h->key_len);
	m->seen[i] = w;
	m->part[i] = (uint16_t)*part;
	m->copied[i] = 0;
	return 0;
}

/* ------------------------------------------------------------ batches */

/* READ the blocks of it[0..n) (n <= CHAIN, sizes within BLKS_CAP) from
 * peer pi into m->big->p, in one doorbell; it[k].off says where. */
static int read_blocks(struct mig *m, unsigned pi, struct walk_item *it,
		       unsigned n)
{
	struct peer *p = &m->c->peer[pi];
	struct rkv_wr wr[CHAIN];
	int rc;

	if (!n)
		return 0;
	walk_block_wrs(p, m->big->mr->lkey, m->big->p, it, n, wr);
	rc = aux_run_n(m->c, p, wr, n, NULL);
	return rc ? say(m, rc, "server %s: READ of blocks: %s", p->label,
			strerror(-rc))
		  : 0;
}

/* Learn the keys' partitions of it[0..n) from their blocks (a torn or
 * reused one stays unknown: the pass reads it again). */
static int learn(struct mig *m, unsigned pi, struct walk_item *it,
		 unsigned n)
{
	int rc = read_blocks(m, pi, it, n);

	for (unsigned k = 0; k < n && !rc; k++) {
		struct walk_blk b;

		if (walk_block(m->big->p, &it[k], &b))
			continue; /* unknown: the pass reads it again */
		m->seen[it[k].i] = it[k].w;
		m->part[it[k].i] = (uint16_t)part_of_key(b.key, b.h->key_len);
		m->copied[it[k].i] = 0;
	}
	return rc;
}

/* Learn, in batches of CHAIN READs, every slot of the index chunk in
 * m->buf (n words from slot first) whose block we do not know yet. */
static int learn_chunk(struct mig *m, unsigned pi, uint64_t first, uint32_t n)
{
	struct walk_item it[CHAIN];
	unsigned k = 0;
	uint32_t bytes = 0;
	int rc = 0;

	for (uint32_t j = 0; j < n && !rc; j++) {
		uint64_t w, i = first + j;

		memcpy(&w, m->buf + (size_t)j * 8, 8);
		if (rkv_slot_empty(w) || !walk_block_ok(&m->c->peer[pi], w) ||
		    (m->part[i] != NO_PART &&
		     rkv_slot_same_block(m->seen[i], w)))
			continue;
		if (k == CHAIN || bytes + rkv_slot_size(w) > m->big->len) {
			rc = learn(m, pi, it, k);
			k = 0;
			bytes = 0;
			if (!rc)
				rc = blks_room(m, rkv_slot_size(w));
		}
		it[k++] = (struct walk_item){ .i = i, .w = w };
		bytes += rkv_slot_size(w);
	}
	return rc ? rc : learn(m, pi, it, k);
}

/* Copy the keys of the moved slots it[0..n) to their new owner: their
 * blocks in one doorbell, then one rkv_mput. */
static int copy_keys(struct mig *m, unsigned pi, struct walk_item *it,
		     unsigned n)
{
	struct rkv_kv kv[CHAIN];
	uint64_t bytes = 0;
	int rc = read_blocks(m, pi, it, n);

	for (unsigned k = 0; k < n && !rc; k++) {
		struct walk_blk b;

		if (walk_block(m->big->p, &it[k], &b))
			return say(m, -EIO, "server %s: a moved slot names a "
				   "bad block", m->c->peer[pi].label);
		kv[k] = (struct rkv_kv){ .key = b.key,
					 .key_len = b.h->key_len,
					 .val = (void *)(uintptr_t)b.val,
					 .val_len = b.val_len };
		bytes += b.val_len;
	}
	if (!rc && n)
		rc = rkv_mput(m->c, kv, n);
	if (rc)
		return say(m, rc, "copy of keys to their new server: %s",
			   strerror(-rc));
	for (unsigned k = 0; k < n; k++)
		m->copied[it[k].i] = 1;
	m->pr.keys_moved += n;
	m->pr.bytes_moved += bytes; /* counted once they are there */
	return 0;
}

/* Mark the committed slots of m->todo moved (CASes in one doorbell) and
 * copy those that were marked; a CAS that lost leaves *left set. */
static int flush_todo(struct mig *m, unsigned pi, int *left)
{
	struct peer *p = &m->c->peer[pi];
	struct rkv_wr wr[CHAIN];
	struct walk_item mv[CHAIN];
	unsigned n = m->ntodo, nmv = 0;
	uint32_t bytes = 0;
	int rc;

	m->ntodo = 0;
	if (!n)
		return 0;
	for (unsigned k = 0; k < n; k++)
		wr[k] = (struct rkv_wr){
			.opcode = RKV_WR_CAS, .local = &m->res[k], .length = 8,
			.lkey = m->mr->lkey,
			.remote_addr = p->g.index_addr + m->todo[k].i * 8u,
			.rkey = p->ctrl.keys.index,
			.compare_add = m->todo[k].w,
			.swap = rkv_slot_bump(m->todo[k].w) | RKV_SLOT_MOVED };
	rc = aux_run_n(m->c, p, wr, n, NULL);
	if (rc)
		return say(m, rc, "server %s: CAS of slots: %s", p->label,
			   strerror(-rc));
	for (unsigned k = 0; k < n && !rc; k++) {
		uint64_t moved = rkv_slot_bump(m->todo[k].w) | RKV_SLOT_MOVED;

		if (m->res[k] != m->todo[k].w) {
			*left = 1; /* a write got in first: its word next pass */
			continue;
		}
		m->seen[m->todo[k].i] = moved;
		if (bytes + rkv_slot_size(moved) > m->big->len) {
			rc = copy_keys(m, pi, mv, nmv);
			nmv = 0;
			bytes = 0;
			if (!rc)
				rc = blks_room(m, rkv_slot_size(moved));
		}
		mv[nmv++] = (struct walk_item){ .i = m->todo[k].i, .w = moved };
		bytes += rkv_slot_size(moved);
	}
	return rc ? rc : copy_keys(m, pi, mv, nmv);
}

/* ------------------------------------------------------------- passes */

/* One slot of a pass: moves it when it is the batch's.  *left is set
 * when it must be looked at again. */
static int pass_slot(struct mig *m, unsigned pi, uint64_t i, uint64_t w,
		     int *left)
{
	struct peer *p = &m->c->peer[pi];
	uint64_t addr = p->g.index_addr + i * 8u, old;
	unsigned part;
	int rc = slot_part(m, pi, i, w, &part);

	if (rc)
		return rc;
	if (part == NO_PART) {
		*left = 1; /* changed under us: look again */
		return 0;
	}
	if (!m->in_batch[part])
		return 0;
	if (rkv_slot_moved(w)) {
		/* moved by an earlier run: copy it again, as a batch of one */
		struct walk_item it = { .i = i, .w = w };

		return m->copied[i] ? 0 : copy_keys(m, pi, &it, 1);
	}
	if (rkv_slot_tentative(w)) {
		uint64_t now = rkv_now_ms();

		*left = 1;
		if (m->seen[i] != w || !m->tent_since[i]) {
			m->seen[i] = w;
			m->tent_since[i] = now;
		} else if (now - m->tent_since[i] >= p->g.lease_ms) {
			/* a dead inserter's: clear it, as inserters do */
			rc = mcas(m, pi, addr, w, 0, &old);
			m->tent_since[i] = 0;
		}
		return rc;
	}
	/* committed (locked or not): moved and copied in a batch */
	m->todo[m->ntodo++] = (struct walk_item){ .i = i, .w = w };
	return m->ntodo == CHAIN ? flush_todo(m, pi, left) : 0;
}

/* Room for n slots of state, the new ones unknown (scan_state: from none;
 * more levels in use: layout.h "Levels"). */
static int state_grow(struct mig *m, uint64_t n)
{
	uint64_t o = m->nslots;
	void *a, *b, *c, *d;

	if (n <= o)
		return 0;
	a = rkv_realloc(m->seen, n * sizeof(*m->seen));
	if (a)
		m->seen = a;
	b = rkv_realloc(m->part, n * sizeof(*m->part));
	if (b)
		m->part = b;
	c = rkv_realloc(m->copied, n);
	if (c)
		m->copied = c;
	d = rkv_realloc(m->tent_since, n * sizeof(*m->tent_since));
	if (d)
		m->tent_since = d;
	if (!a || !b || !c || !d)
		return say(m, -ENOMEM, "out of memory");
	memset(m->seen + o, 0, (n - o) * sizeof(*m->seen));
	memset(m->part + o, 0xff, (n - o) * sizeof(*m->part));
	memset(m->copied + o, 0, n - o);
	memset(m->tent_since + o, 0, (n - o) * sizeof(*m->tent_since));
	m->nslots = n;
	return 0;
}

/* The levels peer pi's index has now (its level word): read after a
 * batch is frozen, they hold every key of it (an insert into a level
 * added later reads the frozen word behind its CAS and withdraws). */
static int mig_levels(struct mig *m, unsigned pi)
{
	struct peer *p = &m->c->peer[pi];
	int rc = aux_levels(m->c, p);

	if (rc)
		return say(m, rc, "server %s: READ of the level word: %s",
			   p->label, strerror(-rc));
	return state_grow(m, peer_nslots(p));
}

/* Learn every slot's partition of peer pi before anything is frozen, so
 * a batch's passes read only the blocks that changed since. */
static int survey(struct mig *m, unsigned pi)
{
	struct peer *p = &m->c->peer[pi];
	uint64_t len;
	int rc = mig_levels(m, pi);

	if (rc)
		return rc;
	len = peer_nslots(p) * 8;

	for (uint64_t off = 0; off < len && !rc; off += SCAN_CHUNK) {
		uint32_t n = (uint32_t)(len - off < SCAN_CHUNK ? len - off
							       : SCAN_CHUNK);

		rc = mrd(m, m->mr, pi, p->g.index_addr + off,
			 p->ctrl.keys.index, m->buf, n);
		if (rc)
			return say(m, rc, "server %s: READ of the index: %s",
				   p->label, strerror(-rc));
		rc = learn_chunk(m, pi, off / 8, n / 8);
	}
	return rc;
}

/* Pass over peer pi's index until nothing of the batch is left. */
static int move_batch(struct mig *m, unsigned pi)
{
	struct peer *p = &m->c->peer[pi];
	uint64_t len;
	int left = 1, rc = 0;

	for (unsigned passes = 0; left && !rc; passes++) {
		left = 0;
		if (passes)
			sleep_ms(1); /* let tentative inserts finish */
		rc = mig_levels(m, pi);
		if (rc)
			break;
		len = peer_nslots(p) * 8;
		for (uint64_t off = 0; off < len && !rc; off += SCAN_CHUNK) {
			uint32_t n = (uint32_t)(len - off < SCAN_CHUNK
							? len - off
							: SCAN_CHUNK);

			rc = mrd(m, m->mr, pi, p->g.index_addr + off,
				 p->ctrl.keys.index, m->buf, n);
			if (rc) {
				rc = say(m, rc, "server %s: READ of the index: "
					 "%s", p->label, strerror(-rc));
				break;
			}
			rc = learn_chunk(m, pi, off / 8, n / 8);
			for (uint32_t k = 0; k < n / 8 && !rc; k++) {
				uint64_t w;

				memcpy(&w, m->buf + (size_t)k * 8, 8);
				if (!rkv_slot_empty(w))
					rc = pass_slot(m, pi, off / 8 + k, w,
						       &left);
			}
			if (!rc)
				rc = flush_todo(m, pi, &left);
		}
		if (!rc && passes > 100000)
			rc = say(m, -ETIMEDOUT, "server %s: the batch does not "
				 "settle", p->label);
	}
	return rc;
}

/* ----------------------------------------------------------- the run */

static int setup(struct mig *m, const struct rkv_mig_opts *o, char *why,
		 size_t why_len)
{
	struct rkv_client_opts co = *o->base;
	size_t cap = 2u * RKV_MAP_SERVERS_MAX * (RKV_SERVER_NAME_MAX +
						  RKV_MAP_ADDR_MAX + 2);
	char *list = rkv_malloc(cap);
	size_t len = 0;
	unsigned n = 0;
	int rc;

	memset(m, 0, sizeof(*m));
	m->o = o;
	m->why = why;
	m->why_len = why_len;
	m->t0 = rkv_now_ms();
	if (!list)
		return say(m, -ENOMEM, "out of memory");
	/* the new map's servers first, then the old map's others */
	for (unsigned i = 0; i < o->to->n; i++, n++) {
		len += (size_t)snprintf(list + len, cap - len, "%s%s=%s",
					n ? "," : "", o->to->srv[i].name,
					o->to->srv[i].addr);
		m->to_peer[i] = (int)n;
	}
	for (unsigned i = 0; i < o->from->n; i++) {
		int t = rkv_map_find(o->to, o->from->srv[i].name);

		if (t >= 0) {
			m->from_peer[i] = m->to_peer[t];
			continue;
		}
		len += (size_t)snprintf(list + len, cap - len, "%s%s=%s",
					n ? "," : "", o->from->srv[i].name,
					o->from->srv[i].addr);
		m->from_peer[i] = (int)n++;
	}
	co.servers = list;
	co.cluster_file = NULL;
	co.max_inflight = CHAIN;
	co.max_value = RKV_VALUE_LIMIT; /* each server's own limit applies */
	co.read_only = 0;
	rc = rkv_client_create(&co, &m->c);
	rkv_free(list);
	if (rc)
		return say(m, rc, "cannot connect to the servers of both maps: "
			   "%s", strerror(-rc));
	for (unsigned i = 0; i < m->c->nsrv; i++)
		if (m->c->peer[i].down)
			return say(m, m->c->peer[i].down, "server %s is down: "
				   "%s", m->c->peer[i].label,
				   strerror(-m->c->peer[i].down));
	m->c->mig = 1;
	for (unsigned p = 0; p < RKV_MAP_PARTS; p++)
		m->c->owner[p] = (uint16_t)m->to_peer[o->to->owner[p]];
	m->buf = rkv_malloc(SCAN_CHUNK + CHAIN * 8);
	if (!m->buf)
		return say(m, -ENOMEM, "out of memory");
	m->res = (uint64_t *)(void *)(m->buf + SCAN_CHUNK);
	rc = rkv_mr_reg(m->c->eng.tp, m->buf, SCAN_CHUNK + CHAIN * 8,
			RKV_ACCESS_LOCAL_WRITE, &m->mr);
	if (rc)
		return say(m, rc, "cannot register memory: %s", strerror(-rc));
	return blks_room(m, BLKS_CAP);
}

/* Room to remember peer pi's slots. */
static int scan_state(struct mig *m, unsigned pi)
{
	rkv_free(m->seen);
	rkv_free(m->part);
	rkv_free(m->copied);
	rkv_free(m->tent_since);
	m->seen = NULL;
	m->part = NULL;
	m->copied = NULL;
	m->tent_since = NULL;
	m->nslots = 0;
	return state_grow(m, peer_nslots(&m->c->peer[pi]));
}

static void teardown(struct mig *m)
{
	rkv_free(m->seen);
	rkv_free(m->part);
	rkv_free(m->copied);
	rkv_free(m->tent_since);
	if (m->mr)
		rkv_mr_dereg(m->mr);
	if (m->big)
		bigbuf_put(m->c, m->big);
	rkv_free(m->buf);
	rkv_client_destroy(m->c);
}

static void report(struct mig *m)
{
	m->pr.elapsed_ms = rkv_now_ms() - m->t0;
	if (m->o->progress)
		m->o->progress(m->o->arg, &m->pr);
}

/* Move one batch (in_batch set) from peer si: freeze, move, hand over. */
static int batch(struct mig *m, unsigned si, const unsigned *parts,
		 unsigned n)
{
	const struct rkv_map *to = m->o->to;
	uint32_t e = (uint32_t)to->epoch;
	uint64_t t = rkv_now_ms();
	int rc = 0;

	for (unsigned k = 0; k < n && !rc; k++)
		rc = set_part(m, si, parts[k],
			      rkv_part_word(RKV_PART_FROZEN, e));
	if (!rc)
		rc = move_batch(m, si);
	for (unsigned k = 0; k < n && !rc; k++)
		rc = set_part(m, (unsigned)m->to_peer[to->owner[parts[k]]],
			      parts[k], rkv_part_word(RKV_PART_OWNED, 0));
	for (unsigned k = 0; k < n && !rc; k++)
		rc = set_part(m, si, parts[k], rkv_part_word(RKV_PART_GONE, e));
	t = rkv_now_ms() - t;
	if (t > m->pr.freeze_max_ms)
		m->pr.freeze_max_ms = t;
	return rc;
}

/* Every partition leaving from->srv[fi]. */
static int move_from(struct mig *m, unsigned fi)
{
	const struct rkv_map *from = m->o->from, *to = m->o->to;
	unsigned si = (unsigned)m->from_peer[fi], bsz = m->o->batch ? m->o->batch
								    : 64;
	unsigned parts[RKV_MAP_PARTS], n = 0;
	int rc = scan_state(m, si);

	if (!rc)
		rc = read_parts(m, si);
	if (!rc)
		rc = survey(m, si);
	m->pr.source = from->srv[fi].name;
	for (unsigned p = 0; p < RKV_MAP_PARTS && !rc; p++) {
		uint64_t w = m->pw[p];

		if (from->owner[p] != fi ||
		    !strcmp(to->srv[to->owner[p]].name, from->srv[fi].name))
			continue;
		if (rkv_part_state(w) == RKV_PART_GONE &&
		    rkv_part_epoch(w) >= to->epoch) {
			m->pr.parts_done++; /* an earlier run moved it */
			continue;
		}
		parts[n++] = p;
		m->in_batch[p] = 1;
		if (n == bsz) {
			rc = batch(m, si, parts, n);
			for (unsigned k = 0; k < n; k++)
				m->in_batch[parts[k]] = 0;
			m->pr.parts_done += rc ? 0 : n;
			n = 0;
			report(m);
		}
	}
	if (!rc && n) {
		rc = batch(m, si, parts, n);
		m->pr.parts_done += rc ? 0 : n;
		report(m);
	}
	memset(m->in_batch, 0, sizeof(m->in_batch));
	return rc;
}

static unsigned parts_moving(const struct rkv_map *from,
			     const struct rkv_map *to)
{
	unsigned n = 0;

	for (unsigned p = 0; p < RKV_MAP_PARTS; p++)
		n += strcmp(from->srv[from->owner[p]].name,
			    to->srv[to->owner[p]].name) != 0;
	return n;
}

int rkv_mig_run(const struct rkv_mig_opts *o, struct rkv_mig_progress *out,
		char *why, size_t why_len)
{
	struct mig *m = rkv_calloc(1, sizeof(*m));
	int rc;

	if (!m)
		return -ENOMEM;
	if (!o || !o->base || !o->from || !o->to || !o->from->n ||
	    !o->to->n || o->to->epoch <= o->from->epoch ||
	    o->to->epoch > UINT32_MAX) {
		snprintf(why, why_len, "bad maps for a migration");
		rkv_free(m);
		return -EINVAL;
	}
	rc = setup(m, o, why, why_len);
	m->pr.parts_total = parts_moving(o->from, o->to);
	report(m);
	for (unsigned i = 0; i < o->from->n && !rc; i++)
		rc = move_from(m, i);
	report(m);
	if (out)
		*out = m->pr;
	teardown(m);
	rkv_free(m);
	return rc;
}

int rkv_mig_progress_read(const struct rkv_mig_opts *o,
			  struct rkv_mig_progress *out, char *why,
			  size_t why_len)
{
	struct mig *m = rkv_calloc(1, sizeof(*m));
	int rc;

	if (!m)
		return -ENOMEM;
	rc = setup(m, o, why, why_len);
	m->pr.parts_total = rc ? 0 : parts_moving(o->from, o->to);
	for (unsigned i = 0; i < o->from->n && !rc; i++) {
		rc = read_parts(m, (unsigned)m->from_peer[i]);
		for (unsigned p = 0; p < RKV_MAP_PARTS && !rc; p++)
			m->pr.parts_done +=
				o->from->owner[p] == i &&
				strcmp(o->to->srv[o->to->owner[p]].name,
				       o->from->srv[i].name) &&
				rkv_part_state(m->pw[p]) == RKV_PART_GONE &&
				rkv_part_epoch(m->pw[p]) >= o->to->epoch;
	}
	if (out)
		*out = m->pr;
	teardown(m);
	rkv_free(m);
	return rc;
}

/* ------------------------------------------------------------ cleanup */

/* Empty the moved slots of peer pi whose partition is gone from it. */
static int clean_peer(struct mig *m, unsigned pi)
{
	struct peer *p = &m->c->peer[pi];
	uint64_t len, old;
	uint8_t gone[RKV_MAP_PARTS];
	int rc = read_parts(m, pi);

	if (!rc)
		rc = mig_levels(m, pi);
	len = peer_nslots(p) * 8;

	for (unsigned q = 0; q < RKV_MAP_PARTS; q++)
		gone[q] = rkv_part_state(m->pw[q]) == RKV_PART_GONE;
	for (uint64_t off = 0; off < len && !rc; off += SCAN_CHUNK) {
		uint32_t n = (uint32_t)(len - off < SCAN_CHUNK ? len - off
							       : SCAN_CHUNK);

		rc = mrd(m, m->mr, pi, p->g.index_addr + off,
			 p->ctrl.keys.index, m->buf, n);
		for (uint32_t k = 0; k < n / 8 && !rc; k++) {
			const struct rkv_block_hdr *h;
			const void *v;
			uint32_t vl, grant;
			uint64_t w;

			memcpy(&w, m->buf + (size_t)k * 8, 8);
			if (!rkv_slot_moved(w))
				continue;
			/* the block stays named (and whole) while moved */
			rc = read_block(m, pi, w, &h, &v, &vl);
			if (rc)
				break;
			if (!gone[part_of_key(m->big->p + RKV_BLOCK_HDR_SIZE,
					      h->key_len)])
				continue;
			grant = h->grant;
			rc = mcas(m, pi, p->g.index_addr + off + k * 8ull, w, 0,
				 &old);
			if (!rc && old == w) {
				space_return(&m->c->space[pi],
					     rkv_slot_offset(w),
					     rkv_slot_size(w), grant);
				m->pr.blocks_freed++;
			}
		}
	}
	if (rc && rc != -EBADMSG)
		return say(m, rc, "server %s: cleanup: %s", p->label,
			   strerror(-rc));
	return rc == -EBADMSG ? say(m, -EIO, "server %s: a moved slot names a "
				    "bad block", p->label)
			      : 0;
}

int rkv_mig_cleanup(const struct rkv_mig_opts *o,
		    struct rkv_mig_progress *out, char *why, size_t why_len)
{
	struct mig *m = rkv_calloc(1, sizeof(*m));
	int rc;

	if (!m)
		return -ENOMEM;
	rc = setup(m, o, why, why_len);
	for (unsigned i = 0; i < o->from->n && !rc; i++)
		rc = clean_peer(m, (unsigned)m->from_peer[i]);
	report(m);
	if (out)
		*out = m->pr;
	teardown(m); /* sends the returns (rkv_client_destroy drains) */
	rkv_free(m);
	return rc;
}
