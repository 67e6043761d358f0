/* SPDX-License-Identifier: MIT */
/*
 * op_repl.c - replicated writes (r > 1): the legs on the backups, and the
 * tombstones of deletes.  docs/DESIGN.md §9.7 has the protocol and the
 * model that checks it; here is how the client runs it.
 *
 * A write at r > 1 is an rmw (op_rmw.c) on the key's primary: lock its
 * slot, build the value under the lock (a put's given value, a delete's
 * tombstone, an rmw callback's result), install it on every backup,
 * release the primary.  The lock's sequence s (repl_seq) goes into every
 * copy's header.  Each backup has a leg: a small machine with its own
 * rounds on the backup's link that
 *   1. locates the key's copy there while the primary takes its lock
 *      (LEG_WORD: a cached location, one READ of its word; else
 *      LEG_BUCKETS then LEG_VERIFY: every copy's block, for its key and
 *      its sequence; the highest sequence is the copy, the others are
 *      stale duplicates two lock holders left, cleared on install);
 *   2. installs, once the primary is locked and the value known: leave a
 *      copy whose sequence is >= s (ours, or a newer holder's); else
 *      WRITE our block and CAS the copy's word to it (or an empty slot
 *      when there is none), in one doorbell; a lost CAS locates again.
 * The primary waits until every leg is done, then releases.  A leg never
 * decides the write: a backup down, full or failing fails the write,
 * whose lock is released unchanged (a backup that took the value already
 * is ahead of the primary only by a sequence the release's bump covers).
 *
 * Blocks: each leg carves its block from our space on its backup; the
 * bytes are the primary's new block with that server's writer id and
 * grant (and so its own checksum).  A block published on a backup is the
 * backup's; one never published goes back; one whose install CAS had an
 * unknown outcome (the link failed) is left to the server's reclaim.
 */
#include "client.h"

#include <errno.h>
#include <string.h>

#include "rtime.h"

/* How many times a leg locates the key again within one attempt. */
#define LEG_TRIES 1000u

uint64_t repl_seq(uint64_t h, uint64_t lockword)
{
	unsigned d = (rkv_slot_version(lockword) - (unsigned)(h & 0xffu)) &
		     0xffu;

	return h + (d ? d : 0x100u);
}

int blk_deleted(const char *blk)
{
	const struct rkv_block_hdr *h = (const void *)blk;

	return (h->flags & RKV_BLOCK_F_DELETED) != 0;
}

int nb_make_tomb(struct opslot *o, uint64_t version)
{
	char *buf = new_blk_buf(o);
	struct rkv_block_hdr *h = (void *)buf;
	int rc = nb_make(o, buf + RKV_BLOCK_HDR_SIZE + o->op->key_len, 0,
			 version);

	if (rc)
		return rc;
	h->flags = RKV_BLOCK_F_DELETED;
	h->checksum = rkv_block_checksum(buf, rkv_block_used(h));
	return 0;
}

const struct op_kind *repl_kind(const struct op_kind *k)
{
	if (k == &op_put)
		return &op_rput;
	if (k == &op_del)
		return &op_rdel;
	return k; /* rmw, head put (as its rmw) */
}

/* ------------------------------------------------------- leg rounds */

static uint64_t lword(const struct leg *l, unsigned off)
{
	uint64_t w;

	memcpy(&w, l->buf + off, 8);
	return w;
}

static uint64_t lpos_addr(const struct leg *l, unsigned pos)
{
	return peer_pos_addr(l->p, l->b, pos);
}

static void lrd(struct leg *l, unsigned off, uint64_t raddr, uint32_t rkey,
		uint32_t len)
{
	l->wr[l->nwr++] = (struct rkv_wr){
		.opcode = RKV_WR_READ, .local = l->buf + off, .length = len,
		.lkey = l->lkey, .remote_addr = raddr, .rkey = rkey };
}

static void lcas(struct leg *l, unsigned off, unsigned pos, uint64_t expect,
		 uint64_t swap)
{
	l->wr[l->nwr++] = (struct rkv_wr){
		.opcode = RKV_WR_CAS, .local = l->buf + off, .length = 8,
		.lkey = l->lkey, .remote_addr = lpos_addr(l, pos),
		.rkey = l->p->ctrl.keys.index, .compare_add = expect,
		.swap = swap };
}

static void leg_post(struct leg *l, unsigned step)
{
	unsigned n = l->nwr, par = (++l->round & 1) * 2;

	for (unsigned i = 0; i < n; i++) {
		l->wr[i].wr_id = wr_ctx_id(&l->ctx[par]);
		l->wr[i].flags = 0;
	}
	l->wr[n - 1].wr_id = wr_ctx_id(&l->ctx[par + 1]);
	l->wr[n - 1].flags = RKV_WR_SIGNALED;
	l->step = step;
	l->busy = 1;
	l->err = 0;
	l->nrounds++;
	link_queue(&l->p->link, l->wr, n);
}

static void leg_locate(struct leg *l);
static void leg_install(struct leg *l);
static void leg_settled(struct opslot *o);

/* The leg cannot go on: the write fails with err (the first one). */
static void leg_fail(struct leg *l, int err)
{
	struct opslot *o = l->o;

	l->step = LEG_IDLE;
	if (!o->repl.err)
		o->repl.err = err;
	leg_settled(o);
}

static void leg_drop(struct leg *l)
{
	if (!l->size)
		return;
	space_return(l->sp, l->ref.off, l->size, l->ref.grant);
	space_settle(l->sp, l->ref.chunk);
	l->size = 0;
	l->written = 0;
}

/* The leg's server is down, or being connected again (peers.c: its down
 * stays set meanwhile): a round posted now could go out on a connection
 * that the failed attempt then drops with its completions, and the leg
 * would wait for ever.  Its error, or 0. */
static int leg_peer_err(const struct leg *l)
{
	return l->p->down ? l->p->down : l->p->link.dead;
}

static void leg_located(struct leg *l)
{
	l->step = LEG_LOCATED;
	leg_settled(l->o);
}

/* The key's buckets on the backup, for the levels it knows. */
static void leg_buckets(struct leg *l)
{
	l->levels = l->p->g.levels;
	l->nbk = peer_key_buckets(l->p, &l->o->kh, l->b);
	l->npos = l->nbk * l->p->g.bucket_slots;
}

/* Whether the level word the locate READ shows a level it did not read
 * (layout.h "Levels"); the peer's count is raised. */
static int leg_level_stale(struct leg *l)
{
	if (!peer_levels_seen(l->p, lword(l, OB_LEVEL), l->levels))
		return 0;
	l->o->c->st.level_news++;
	return 1;
}

/* READ the key's buckets on the backup (and its level word). */
static void leg_read_buckets(struct leg *l)
{
	uint32_t k = l->p->ctrl.keys.index, n = peer_bucket_bytes(l->p);

	l->found = 0;
	l->nwr = 0;
	if (l->levels != l->p->g.levels)
		leg_buckets(l);
	for (unsigned i = 0; i < l->nbk; i++)
		lrd(l, OB_BUCKETS + i * n, peer_slot_addr(l->p, l->b[i], 0), k,
		    n);
	if (l->p->g.levels_max > 1)
		lrd(l, OB_LEVEL, peer_level_addr(l->p), k, 8);
	leg_post(l, LEG_BUCKETS);
}

/* LEG_WORD: the cached word is still the one we knew. */
static void word_done(struct leg *l)
{
	struct opslot *o = l->o;

	if (lword(l, OB_WORD) == l->word &&
	    rkv_coarse_ms() - l->t_ms + RKV_COARSE_SLACK_MS < l->p->g.grace_ms) {
		leg_located(l);
		return;
	}
	cache_drop_at(o->c, &o->kh, o->op->key_len, l->p->idx);
	l->t_ms = rkv_coarse_ms();
	leg_read_buckets(l);
}

/* The fingerprint matches of the buckets read: their blocks are READ
 * into OB_BLOCKS, as many as fit, one round each batch (l->cand*). */
static int verify_next(struct leg *l)
{
	uint32_t off = 0;
	unsigned i;
	int rc;

	l->nwr = 0;
	l->rd_big = 1;
	for (i = l->vend; i < l->ncand; i++) {
		struct cand *cd = &l->cand[i];
		uint32_t sz = rkv_slot_size(cd->slot);

		if (rkv_slot_offset(cd->slot) + sz > l->p->g.data_len) {
			cd->buf_off = UINT32_MAX;
			continue;
		}
		/* a big block is read alone, into a buffer of its size */
		if (sz > l->room && off == 0 && l->nwr == 0) {
			rc = leg_room(l, sz);
			if (rc)
				return rc;
		}
		if (sz > l->room - off || l->nwr == ROUND_MAX_WR)
			break;
		l->rd_big &= sz > RKV_SMALL_BLOCK_MAX;
		cd->buf_off = OB_BLOCKS + off;
		lrd(l, OB_BLOCKS + off,
		    l->p->g.data_addr + rkv_slot_offset(cd->slot),
		    l->p->ctrl.keys.data, sz);
		off += sz;
	}
	l->vfrom = l->vend;
	l->vend = i;
	if (!l->nwr)
		return i < l->ncand ? -EMSGSIZE : 0;
	leg_post(l, LEG_VERIFY);
	return 1;
}

/* READ the next candidates, or, with none left, the key is located. */
static void verify_more(struct leg *l)
{
	int rc = l->vend < l->ncand ? verify_next(l) : 0;

	if (rc < 0)
		leg_fail(l, rc);
	else if (rc == 0)
		leg_located(l);
}

static void buckets_done(struct leg *l)
{
	struct opslot *o = l->o;

	if (leg_level_stale(l)) {
		leg_locate(l); /* again, over every level */
		return;
	}
	l->ncand = 0;
	l->ndup = 0;
	l->found = 0;
	for (unsigned pos = 0; pos < l->npos; pos++) {
		uint64_t w = lword(l, OB_BUCKETS + pos * 8u);

		if (rkv_slot_empty(w) || rkv_slot_tentative(w) ||
		    rkv_slot_fp(w) != o->kh.fp)
			continue;
		l->cand[l->ncand++] = (struct cand){ .pos = pos, .slot = w };
	}
	memcpy(l->bucket_copy, l->buf + OB_BUCKETS, sizeof(l->bucket_copy));
	l->vend = 0;
	verify_more(l);
}

static void verify_done(struct leg *l)
{
	struct opslot *o = l->o;
	uint32_t grace = l->rd_big ? l->p->g.big_grace_ms : l->p->g.grace_ms;
	int rc;

	if (rkv_coarse_ms() - l->t_ms + RKV_COARSE_SLACK_MS >= grace) {
		leg_locate(l); /* a block read may have been reused */
		return;
	}
	for (unsigned i = l->vfrom; i < l->vend; i++) {
		const struct cand *cd = &l->cand[i];
		const struct rkv_block_hdr *h;

		if (cd->buf_off == UINT32_MAX)
			continue;
		rc = rkv_block_decode(l->buf + cd->buf_off,
				      rkv_slot_size(cd->slot), o->op->key,
				      o->op->key_len, NULL, NULL, &h);
		if (rc == -EBADMSG) {
			leg_locate(l); /* torn: changed while we read */
			return;
		}
		if (rc)
			continue; /* another key */
		if (!l->found || h->version > l->seq) {
			if (l->found) {
				l->dup_pos[l->ndup] = l->pos;
				l->dup_word[l->ndup] = l->word;
				l->dup_grant[l->ndup++] = l->grant;
			}
			l->found = 1;
			l->pos = cd->pos;
			l->word = cd->slot;
			l->seq = h->version;
			l->grant = h->grant;
		} else {
			l->dup_pos[l->ndup] = cd->pos;
			l->dup_word[l->ndup] = cd->slot;
			l->dup_grant[l->ndup++] = h->grant;
		}
	}
	verify_more(l);
}

/* Locate the key's copy on the backup: from the cache (one READ of the
 * word), or the buckets. */
static void leg_locate(struct leg *l)
{
	struct opslot *o = l->o;
	struct cache_ent *ce;
	int err = leg_peer_err(l);

	if (++l->tries > LEG_TRIES || rkv_coarse_ms() > o->deadline_ms)
		err = -ETIMEDOUT;
	if (err) {
		leg_fail(l, err);
		return;
	}
	l->t_ms = rkv_coarse_ms();
	l->nwr = 0;
	ce = cache_find_at(o->c, &o->kh, o->op->key, o->op->key_len,
			   l->p->idx, l->p->g.grace_ms);
	if (ce && ce->info_known && l->tries == 1) {
		l->found = 1;
		l->ndup = 0;
		l->pos = ce->pos;
		l->word = ce->slot;
		l->seq = ce->info.version;
		l->grant = ce->info.grant;
		lrd(l, OB_WORD, ce->slot_addr, l->p->ctrl.keys.index, 8);
		leg_post(l, LEG_WORD);
		return;
	}
	leg_read_buckets(l);
}

/* ------------------------------------------------------------ install */

/* Our block for this backup: the primary's bytes, its writer id and
 * grant. */
static int leg_block(struct leg *l)
{
	struct opslot *o = l->o;
	struct rkv_block_hdr *h;
	int rc;

	if (!l->size) {
		rc = space_alloc(l->sp, o->nb.size, &l->ref);
		if (rc == -EAGAIN) {
			l->wait_space = 1;
			return rc;
		}
		if (rc)
			return rc;
		l->size = o->nb.size;
		l->written = 0;
	}
	if (l->written)
		return 0;
	rc = leg_room(l, o->nb.size);
	if (rc)
		return rc;
	h = (void *)(l->buf + OB_BLOCKS);
	memcpy(h, new_blk_buf(o), o->nb.size);
	h->writer = l->p->g.client_id;
	h->grant = l->ref.grant;
	h->checksum = rkv_block_checksum(h, rkv_block_used(h));
	return 0;
}

static void leg_install(struct leg *l)
{
	struct opslot *o = l->o;
	unsigned pos, ver;
	uint64_t expect;
	int rc;

	if (o->repl.fresh && l->found) {
		/* a backup holds the key its primary had no slot for: every
		 * write puts the key on the primary first (a delete leaves a
		 * tombstone there), so the primary lost its contents (it
		 * restarted empty).  Writing on would leave the backups'
		 * newer sequences in place and lose this write there. */
		clog_(o->c, RKV_LOG_WARN, "a key on backup %s is missing on "
		      "its primary %s, which lost its contents (restarted?): "
		      "not written", l->p->label, o->p->label);
		l->step = LEG_IDLE;
		if (!o->repl.err)
			o->repl.err = -EIO;
		return;
	}
	rc = leg_peer_err(l);
	if (rc) {
		l->step = LEG_IDLE; /* nothing posted: as a full backup */
		if (!o->repl.err)
			o->repl.err = rc;
		return;
	}
	if (l->found && l->seq >= o->repl.seq) {
		l->step = LEG_DONE; /* ours already, or a newer holder's */
		if (l->seq == o->repl.seq)
			o->repl.maybe = 1;
		return;
	}
	/* the word's version follows the primary's rule, (s + 1) mod 256,
	 * on a backup too: a failover makes a backup a primary, and a lock
	 * taken there, then stolen, must still order its holders (a copy
	 * whose version was s mod 256 gave its lock holder s + 256 and the
	 * thief s + 1: the thief's value skipped the backups) */
	ver = (unsigned)((o->repl.seq + 1) & 0xffu);
	if (l->found) {
		pos = l->pos;
		expect = l->word;
	} else {
		int tent = 0, e = pick_empty_slot(l->bucket_copy, l->npos,
						  l->p->g.bucket_slots,
						  &tent);

		if (e < 0) {
			l->step = LEG_IDLE;
			if (!o->repl.err)
				o->repl.err = -ENOSPC;
			/* its index may grow: ask, and start again after
			 * the release (op_rmw.c released) */
			if (o->repl.err == -ENOSPC &&
			    grow_ask(o, l->p, l->levels))
				o->repl.grow = 1;
			return;
		}
		pos = (unsigned)e;
		expect = 0;
	}
	rc = leg_block(l);
	if (rc == -EAGAIN)
		return; /* repl_space_ready goes on */
	if (rc) {
		l->step = LEG_IDLE;
		if (!o->repl.err)
			o->repl.err = rc;
		return;
	}
	l->pos = pos;
	l->word = expect;
	l->newword = rkv_slot_make(l->ref.off / RKV_BLOCK_ALIGN,
				   l->size / RKV_BLOCK_ALIGN, o->kh.fp, ver);
	l->nwr = 0;
	if (!l->written) {
		l->wr[l->nwr++] = (struct rkv_wr){
			.opcode = RKV_WR_WRITE, .local = l->buf + OB_BLOCKS,
			.length = l->size, .lkey = l->lkey,
			.remote_addr = l->p->g.data_addr + l->ref.off,
			.rkey = l->p->ctrl.keys.data };
		l->written = 1;
	}
	lcas(l, OB_WORD, pos, expect, l->newword);
	/* older copies two stale holders left: cleared in the same doorbell
	 * (a newer install racing us wins its CAS or ours fails) */
	for (unsigned i = 0; i < l->ndup && l->nwr < ROUND_MAX_WR; i++)
		lcas(l, OB_BUCKETS + i * 8u, l->dup_pos[i], l->dup_word[i], 0);
	leg_post(l, LEG_INSTALL);
}

static void install_done(struct leg *l)
{
	struct opslot *o = l->o;
	struct blk_info bi = { 0 };

	if (lword(l, OB_WORD) != l->word) {
		leg_locate(l); /* changed since we looked: look again */
		return;
	}
	/* ours is published: the replaced copy and the cleared duplicates
	 * go back under their grants */
	if (!rkv_slot_empty(l->word) && l->grant)
		space_return(l->sp, rkv_slot_offset(l->word),
			     rkv_slot_size(l->word), l->grant);
	for (unsigned i = 0; i < l->ndup; i++)
		if (lword(l, OB_BUCKETS + i * 8u) == l->dup_word[i] &&
		    l->dup_grant[i])
			space_return(l->sp, rkv_slot_offset(l->dup_word[i]),
				     rkv_slot_size(l->dup_word[i]),
				     l->dup_grant[i]);
	space_settle(l->sp, l->ref.chunk);
	o->repl.maybe = 1;
	bi.version = o->repl.seq;
	bi.grant = l->ref.grant;
	cache_store_at(o->c, &o->kh, o->op->key, o->op->key_len, l->p->idx,
		       l->pos, lpos_addr(l, l->pos), l->newword, l->size, &bi);
	l->size = 0;
	l->written = 0;
	l->step = LEG_DONE;
}

/* -------------------------------------------------------- completions */

/* Point the leg at backup si for the op's key. */
static void leg_setup(struct leg *l, unsigned si)
{
	struct opslot *o = l->o;

	l->p = &o->c->peer[si];
	l->sp = &o->c->space[si];
	leg_buckets(l);
	l->tries = 0;
	l->nrounds = 0;
	l->wait_space = 0;
	l->found = 0;
	l->ndup = 0;
}

static void leg_round_done(struct leg *l)
{
	struct opslot *o = l->o;

	if (l->stale) {
		/* its op went on without it: settle what the round did */
		l->stale = 0;
		if (l->step == LEG_INSTALL) {
			if (l->err)
				l->size = 0; /* unknown outcome: reclaim's */
			else if (lword(l, OB_WORD) == l->word)
				l->size = 0; /* published: the backup's */
		}
		leg_drop(l);
		l->step = LEG_IDLE;
		if (!l->pending && o->state == OP_FREE)
			leg_big_release(l); /* its slot went back meanwhile */
		if (l->pending) {
			l->pending = 0;
			leg_setup(l, l->next_si);
			leg_locate(l);
		} else {
			/* a leg the op has no backup for this time (repl_begin)
			 * held its install back until now */
			leg_settled(o);
		}
		return;
	}
	if (l->err) {
		if (l->step == LEG_INSTALL) {
			l->size = 0; /* the CAS may have landed: reclaim's */
			o->repl.maybe = 1;
		}
		leg_fail(l, l->err);
		return;
	}
	switch ((enum leg_step)l->step) {
	case LEG_WORD:
		word_done(l);
		break;
	case LEG_BUCKETS:
		buckets_done(l);
		break;
	case LEG_VERIFY:
		verify_done(l);
		break;
	case LEG_INSTALL:
		install_done(l);
		leg_settled(o);
		break;
	default:
		break;
	}
}

static void leg_wr_done(struct leg *l, unsigned par, int last,
			const struct rkv_wc *wc)
{
	if (!l->busy || (l->round & 1) * 2 != par ||
	    (wc->ep && wc->ep != l->p->link.ep))
		return;
	if (wc->status != RKV_WC_SUCCESS) {
		int e = wc_errno(wc->status);

		if (!l->err)
			l->err = e;
		link_wc_error(&l->p->link, e);
	}
	if (!last)
		return;
	l->busy = 0;
	leg_round_done(l);
}

#define LEG_CTX_FNS(i, par, last)                                              \
	static void leg_done_##i(struct wr_ctx *w, const struct rkv_wc *wc)    \
	{                                                                      \
		leg_wr_done(container_of(w, struct leg, ctx[i]), par, last,    \
			    wc);                                               \
	}
LEG_CTX_FNS(0, 0, 0)
LEG_CTX_FNS(1, 0, 1)
LEG_CTX_FNS(2, 2, 0)
LEG_CTX_FNS(3, 2, 1)

static void leg_unposted(struct wr_ctx *w, int err)
{
	struct leg *l = w->done == leg_done_1 ?
				container_of(w, struct leg, ctx[1]) :
				container_of(w, struct leg, ctx[3]);

	if (!l->busy)
		return;
	l->busy = 0;
	if (!l->err)
		l->err = err;
	leg_round_done(l);
}

/* ------------------------------------------------------ the primary */

void repl_slot_init(struct opslot *o, struct leg *legs, char *bufs,
		    size_t buf_size, uint32_t lkey)
{
	static void (*const done[4])(struct wr_ctx *, const struct rkv_wc *) = {
		leg_done_0, leg_done_1, leg_done_2, leg_done_3 };

	o->leg = legs;
	for (unsigned i = 0; i < REPL_LEGS; i++) {
		struct leg *l = &legs[i];

		memset(l, 0, sizeof(*l));
		l->o = o;
		l->buf = l->own_buf = bufs + i * buf_size;
		l->lkey = l->own_lkey = lkey;
		l->room = buf_size - OB_BLOCKS;
		for (unsigned k = 0; k < 4; k++)
			l->ctx[k] = (struct wr_ctx){ .done = done[k],
						     .unposted = leg_unposted };
	}
}

int repl_begin(struct opslot *o)
{
	struct rkv_client *c = o->c;
	const uint16_t *rep = c->rep[o->part];

	o->repl.install = 0;
	o->repl.err = 0;
	o->repl.grow = 0;
	o->repl.fresh = 0;
	o->repl.seq = 0;
	o->repl.rtt0 = o->op->rtts;
	/* the key's backups: r - 1, or r while a server is in transit */
	o->repl.nact = c->nrep[o->part] - 1u;
	if (o->repl.nact > o->repl.nlegs)
		o->repl.nact = o->repl.nlegs;
	for (unsigned i = 0; i < o->repl.nact; i++) {
		struct peer *p = &c->peer[rep[i + 1]];

		if (p->down || p->link.dead)
			return p->down ? p->down : p->link.dead;
	}
	for (unsigned i = 0; i < o->repl.nlegs; i++) {
		struct leg *l = &o->leg[i];

		if (i >= o->repl.nact) {
			/* no backup for it this time: idle, or settling a
			 * round of an earlier op (which holds the install
			 * back until it is in: leg_settled) */
			l->pending = 0;
			l->nrounds = 0;
			if (l->busy) {
				l->stale = 1;
				continue;
			}
			leg_drop(l);
			l->step = LEG_IDLE;
			continue;
		}
		if (l->busy) {
			/* a round of the last op or attempt is in flight,
			 * perhaps on another backup: start once it is back
			 * (its completion is matched to l->p's link) */
			l->stale = 1;
			l->pending = 1;
			l->next_si = rep[i + 1];
			l->step = LEG_IDLE;
			continue;
		}
		leg_drop(l); /* a block of an earlier attempt */
		leg_setup(l, rep[i + 1]);
		leg_locate(l);
	}
	return 0;
}

/* What a write whose legs failed reports: -EIO when a backup may hold
 * its value, else the first leg's error (a cluster client's rkey that a
 * fence revoked reads as the connection the fence then closes). */
static int legs_err(const struct opslot *o)
{
	return o->repl.maybe ? -EIO : op_fence_err(o->c, o->repl.err);
}

/* Every leg is back from its round: go on when the primary waits. */
static void leg_settled(struct opslot *o)
{
	unsigned more = 0, max = 0;

	if (!o->repl.install)
		return;
	for (unsigned i = 0; i < o->repl.nlegs; i++) {
		struct leg *l = &o->leg[i];

		if (l->busy || l->stale || l->wait_space)
			return;
	}
	if (o->repl.err) {
		o->repl.install = 0;
		rmw_abort(o, legs_err(o));
		return;
	}
	for (unsigned i = 0; i < o->repl.nlegs; i++) {
		struct leg *l = &o->leg[i];

		if (l->step == LEG_LOCATED)
			leg_install(l);
		if (l->busy || l->wait_space)
			more = 1;
		if (l->nrounds > max)
			max = l->nrounds;
	}
	if (more)
		return;
	if (o->repl.err) {
		o->repl.install = 0;
		rmw_abort(o, legs_err(o));
		return;
	}
	/* every backup holds our sequence or a newer one: the install's
	 * rounds count once (the legs ran in parallel) */
	o->op->rtts += max;
	o->repl.install = 0;
	rmw_release(o);
}

void repl_install(struct opslot *o)
{
	unsigned prim = o->op->rtts - o->repl.rtt0, max = 0;

	o->rmw.may_restore = 0; /* backups may take our sequence now */

	for (unsigned i = 0; i < o->repl.nlegs; i++) {
		if (o->leg[i].nrounds > max)
			max = o->leg[i].nrounds;
		o->leg[i].nrounds = 0;
	}
	/* legs' rounds beyond the primary's (a round still in flight
	 * counts: it was posted) add to the op's; from here on, the rounds
	 * a leg posts are the install's */
	if (max > prim)
		o->op->rtts += max - prim;
	o->repl.install = 1;
	o->step = REPL_INSTALL;
	o->state = OP_IO;
	leg_settled(o);
}

void repl_end(struct opslot *o)
{
	o->repl.install = 0;
	for (unsigned i = 0; i < o->repl.nlegs; i++) {
		struct leg *l = &o->leg[i];

		l->pending = 0;
		l->wait_space = 0;
		if (l->busy) {
			l->stale = 1;
			continue;
		}
		leg_drop(l);
		l->step = LEG_IDLE;
	}
}

void repl_space_ready(struct opslot *o, struct space *sp)
{
	int went = 0, late = !sp && rkv_coarse_ms() > o->deadline_ms;

	if (!o->repl.install)
		return;
	for (unsigned i = 0; i < o->repl.nlegs; i++) {
		struct leg *l = &o->leg[i];

		if (!l->wait_space)
			continue;
		if (late) {
			l->wait_space = 0;
			l->step = LEG_IDLE;
			if (!o->repl.err)
				o->repl.err = -ETIMEDOUT;
			went = 1;
		} else if (sp ? l->sp == sp : !space_asking(l->sp)) {
			l->wait_space = 0;
			went = 1;
		}
	}
	if (went)
		leg_settled(o);
}
