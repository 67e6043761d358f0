/* SPDX-License-Identifier: MIT */
/*
 * cache.c - the location cache: key -> (server, slot address, slot word
 * last seen, block size, when).  Direct-mapped on the key's second hash;
 * an entry keeps its key's first hash and a copy of its key.  An entry may
 * be trusted to name the key's slot only while it is younger than the
 * grace period: within it, no block named by the cached word can have
 * been freed and reused, so an unchanged slot word still holds this key.
 * Writes trust entries that way and compare the key bytes (they CAS the
 * slot).
 *
 * A get may use an entry of any age, and matches it like a hash table's
 * probe: first hash, key length and server, no key bytes.  It READs the
 * slot word in the same doorbell as the block and checks the block's key,
 * so an entry of another key with the same hashes (2^-64 per pair, or a
 * test's hook) costs a failed check, a drop and a locate, never another
 * key's value.  When the get succeeds, the block it checked is the one
 * the entry's word names, and that block holds the get's key: the entry's
 * key is the get's, and it is refreshed without comparing bytes (unless
 * it changed hands meanwhile: gen).
 */
#include "client.h"

#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "rtime.h"

int cache_init(struct rkv_client *c, unsigned n)
{
	unsigned p = 1;

	if (n == 0) {
		c->cache = NULL;
		c->cache_n = 0;
		return 0;
	}
	while (p < n && p < (1u << 24))
		p <<= 1;
	c->cache = rkv_calloc(p, sizeof(*c->cache));
	if (!c->cache)
		return -ENOMEM;
	c->cache_n = p;
	return 0;
}

void cache_fini(struct rkv_client *c)
{
	if (!c->cache)
		return;
	for (unsigned i = 0; i < c->cache_n; i++)
		rkv_free(c->cache[i].key);
	rkv_free(c->cache);
	c->cache = NULL;
}

/* Direct-mapped on the key's second hash; a replicated write's legs
 * (salt: the backup's index + 1) keep their entries elsewhere, the hash
 * mixed with the server, so a key has an entry per replica.  The op's own
 * server uses salt 0. */
static struct cache_ent *slot_of(struct rkv_client *c,
				 const struct rkv_key_hash *kh, unsigned salt)
{
	return &c->cache[(kh->h2 ^ ((uint64_t)salt * 0x9e3779b97f4a7c15ull)) &
			 (c->cache_n - 1)];
}

/* Whether e is an entry of key_len bytes on server with first hash h1. */
static int same_hash(const struct cache_ent *e,
		     const struct rkv_key_hash *kh, size_t key_len,
		     unsigned server)
{
	return e->key && e->h1 == kh->h1 && e->key_len == key_len &&
	       e->server == server;
}

/* key NULL: by hash alone (a reader's hint). */
static struct cache_ent *find(struct rkv_client *c,
			      const struct rkv_key_hash *kh, const void *key,
			      size_t key_len, unsigned server, unsigned salt,
			      uint32_t grace_ms)
{
	struct cache_ent *e;

	if (!c->cache_n)
		return NULL;
	e = slot_of(c, kh, salt);
	if (!same_hash(e, kh, key_len, server) ||
	    (key && memcmp(e->key, key, key_len) != 0))
		return NULL;
	if (grace_ms &&
	    rkv_coarse_ms() - e->t_ms + RKV_COARSE_SLACK_MS >= grace_ms)
		return NULL;
	return e;
}

struct cache_ent *cache_find_at(struct rkv_client *c,
				const struct rkv_key_hash *kh, const void *key,
				size_t key_len, unsigned server,
				uint32_t grace_ms)
{
	return find(c, kh, key, key_len, server, server + 1, grace_ms);
}

struct cache_ent *cache_find(struct rkv_client *c, const struct opslot *o)
{
	return find(c, &o->kh, o->op->key, o->op->key_len, o->p->idx, 0,
		    o->p->g.grace_ms ? o->p->g.grace_ms : 1);
}

struct cache_ent *cache_find_any(struct rkv_client *c, const struct opslot *o)
{
	return find(c, &o->kh, NULL, o->op->key_len, o->p->idx, 0, 0);
}

static void store(struct rkv_client *c, const struct rkv_key_hash *kh,
		  const void *key, size_t key_len, unsigned server,
		  unsigned salt, unsigned pos, uint64_t slot_addr,
		  uint64_t slot, uint32_t blk_size, const struct blk_info *bi)
{
	struct cache_ent *e;

	if (!c->cache_n || rkv_slot_empty(slot) || rkv_slot_locked(slot) ||
	    rkv_slot_tentative(slot))
		return;
	e = slot_of(c, kh, salt);
	if (!same_hash(e, kh, key_len, server) ||
	    memcmp(e->key, key, key_len) != 0) {
		char *k = rkv_malloc(key_len);

		if (!k)
			return;
		memcpy(k, key, key_len);
		rkv_free(e->key);
		e->key = k;
		e->h1 = kh->h1;
		e->key_len = (uint16_t)key_len;
		e->gen++;
	}
	e->server = (uint16_t)server;
	e->pos = pos;
	e->slot_addr = slot_addr;
	e->slot = slot;
	e->blk_size = blk_size;
	e->t_ms = c->eng.pass_ms; /* this pass's start: no later than the
				   * clock now, so the entry's age is never
				   * understated */
	e->info_known = bi != NULL;
	if (bi)
		e->info = *bi;
}

void cache_store_at(struct rkv_client *c, const struct rkv_key_hash *kh,
		    const void *key, size_t key_len, unsigned server,
		    unsigned pos, uint64_t slot_addr, uint64_t slot,
		    uint32_t blk_size, const struct blk_info *bi)
{
	store(c, kh, key, key_len, server, server + 1, pos, slot_addr, slot,
	      blk_size, bi);
}

void cache_store(struct rkv_client *c, const struct opslot *o, unsigned pos,
		 uint64_t slot, uint32_t blk_size, const struct blk_info *bi)
{
	store(c, &o->kh, o->op->key, o->op->key_len, o->p->idx, 0, pos,
	      peer_pos_addr(o->p, o->b, pos),
	      slot, blk_size, bi);
}

void cache_hit(struct rkv_client *c, const struct opslot *o,
	       struct cache_ent *e, uint32_t gen, uint64_t slot,
	       uint32_t blk_size, const char *blk)
{
	struct blk_info bi;

	if (!e || e->gen != gen ||
	    !same_hash(e, &o->kh, o->op->key_len, o->p->idx)) {
		cache_store(c, o, o->slot_pos, slot, blk_size,
			    blk ? blk_info_of(&bi, blk, blk_size) : NULL);
		return;
	}
	e->t_ms = c->eng.pass_ms;
	if (e->slot == slot && e->blk_size == blk_size &&
	    (e->info_known || !blk))
		return; /* the block it knew: only the age changes */
	if (e->slot != slot || e->blk_size != blk_size)
		e->info_known = 0; /* another version of the same block */
	e->slot = slot;
	e->blk_size = blk_size;
	if (blk)
		e->info_known = blk_info_of(&e->info, blk, blk_size) != NULL;
}

/* Any server's: a key's entry for the server it left goes too. */
static void drop(struct rkv_client *c, const struct rkv_key_hash *kh,
		 size_t key_len, unsigned salt)
{
	struct cache_ent *e;

	if (!c->cache_n)
		return;
	e = slot_of(c, kh, salt);
	if (e->key && e->h1 == kh->h1 && e->key_len == key_len) {
		rkv_free(e->key);
		e->key = NULL;
		e->gen++;
	}
}

void cache_drop_at(struct rkv_client *c, const struct rkv_key_hash *kh,
		   size_t key_len, unsigned server)
{
	drop(c, kh, key_len, server + 1);
}

void cache_drop(struct rkv_client *c, const struct opslot *o)
{
	drop(c, &o->kh, o->op->key_len, 0);
}

void cache_drop_server(struct rkv_client *c, unsigned si)
{
	for (unsigned i = 0; i < c->cache_n; i++) {
		struct cache_ent *e = &c->cache[i];

		if (e->key && e->server == si) {
			rkv_free(e->key);
			e->key = NULL;
			e->gen++;
		}
	}
}
