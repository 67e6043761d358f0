/* SPDX-License-Identifier: MIT */
/*
 * cluster.c - a client's cluster map from etcd (cluster_file
 * "etcd://HOST:PORT/CLUSTER"; common/registry.h).
 *
 * At create the client reads /rkv/CLUSTER/map, the map `rkv admin` put
 * there, and parses it like a cluster file (proto/cmap.h, with its epoch).
 * etcd unreachable: retried with backoff within the connect timeout, each
 * try logged, then create fails naming etcd.  No map yet, or a map that
 * does not parse (edited by hand), fails create with the reason; nothing
 * is connected.  After create the client never talks to etcd: the data
 * path does not wait on it, and etcd going down changes nothing for
 * clients already running.
 */
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "etcd.h"
#include "registry.h"
#include "rtime.h"

#define RETRY_FIRST_MS 100
#define RETRY_MAX_MS 1000

static int transient(int rc)
{
	return rc == -ECONNREFUSED || rc == -ETIMEDOUT || rc == -EHOSTUNREACH ||
	       rc == -ECONNRESET || rc == -EAGAIN || rc == -EIO;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The map's text, retried while etcd is unreachable. */
static int read_map(struct rkv_client *c, struct rkv_etcd *e,
		    const struct rkv_reg_url *u, const char *key,
		    struct rkv_etcd_kv *kv)
{
	uint64_t end = rkv_now_ms() + c->opts.connect_timeout_ms;
	unsigned backoff = RETRY_FIRST_MS;
	int rc;

	for (;;) {
		rc = rkv_etcd_get(e, key, kv, NULL);
		if (!transient(rc) || rkv_now_ms() + backoff > end)
			break;
		clog_(c, RKV_LOG_WARN, "cluster %s: %s; retrying", u->cluster,
		      rkv_etcd_why(e));
		sleep_ms(backoff);
		backoff = backoff * 2 < RETRY_MAX_MS ? backoff * 2 : RETRY_MAX_MS;
	}
	if (rc == -ENOENT)
		clog_(c, RKV_LOG_ERROR,
		      "cluster %s has no map in etcd (%s) yet: make it with "
		      "`rkv admin --cluster %s init`",
		      u->cluster, u->endpoint, c->opts.cluster_file);
	if (rc == -ENOENT)
		return -ENODATA; /* not "no such key" */
	if (rc)
		clog_(c, RKV_LOG_ERROR, "cluster %s: %s", u->cluster,
		      rkv_etcd_why(e));
	return rc;
}

/* The map at key into *m: 0, -ENOENT (none), -EINVAL (not a map of an
 * epoch: logged), or etcd's error. */
static int parse_kv(struct rkv_client *c, const struct rkv_reg_url *u,
		    const char *key, const struct rkv_etcd_kv *kv,
		    struct rkv_map *m)
{
	char why[300] = "";
	int rc = 0;

	if (strlen(kv->val) != kv->val_len) {
		snprintf(why, sizeof(why), "it holds a NUL byte");
		rc = -EINVAL;
	} else {
		rc = rkv_map_parse(kv->val, m, why, sizeof(why));
	}
	if (!rc && !m->epoch) {
		snprintf(why, sizeof(why), "no epoch line");
		rc = -EINVAL;
	}
	if (rc)
		clog_(c, RKV_LOG_ERROR,
		      "cluster %s: the map in etcd (%s, revision %lld) is not "
		      "a cluster map: %s",
		      u->cluster, key, (long long)kv->mod_rev, why);
	return rc;
}

static int open_etcd(struct rkv_client *c, const char *url,
		     struct rkv_reg_url *u, struct rkv_etcd **e)
{
	char why[300] = "";
	int rc = rkv_reg_parse_url(url, u, why, sizeof(why));

	if (!rc)
		rc = rkv_etcd_open(u->endpoint, c->opts.connect_timeout_ms, e,
				   why, sizeof(why));
	if (rc)
		clog_(c, RKV_LOG_ERROR, "cluster %s: %s", url, why);
	return rc;
}

int cluster_load(struct rkv_client *c, const char *url)
{
	struct rkv_etcd_kv kv = { 0 };
	struct rkv_etcd *e = NULL;
	struct rkv_reg_url u;
	char key[RKV_REG_KEY_MAX];
	int rc = open_etcd(c, url, &u, &e);

	if (rc)
		return rc;
	rkv_reg_map_key(&u, key, sizeof(key));
	rc = read_map(c, e, &u, key, &kv);
	if (!rc)
		rc = parse_kv(c, &u, key, &kv, c->map);
	if (!rc)
		clog_(c, RKV_LOG_DEBUG, "cluster %s: map epoch %llu, %u servers",
		      u.cluster, (unsigned long long)c->map->epoch, c->map->n);
	rkv_etcd_kv_fini(&kv);
	rkv_etcd_close(e);
	return rc;
}

/* The map at key (one try: a migration is under way, etcd is up). */
static struct rkv_map *get_map(struct rkv_client *c, struct rkv_etcd *e,
			       const struct rkv_reg_url *u, const char *key,
			       int *rc)
{
	struct rkv_etcd_kv kv = { 0 };
	struct rkv_map *m = NULL;

	*rc = rkv_etcd_get(e, key, &kv, NULL);
	if (*rc && *rc != -ENOENT)
		clog_(c, RKV_LOG_ERROR, "cluster %s: %s", u->cluster,
		      rkv_etcd_why(e));
	if (!*rc) {
		m = rkv_malloc(sizeof(*m));
		*rc = m ? parse_kv(c, u, key, &kv, m) : -ENOMEM;
		if (*rc) {
			rkv_free(m);
			m = NULL;
		}
	}
	rkv_etcd_kv_fini(&kv);
	return m;
}

/* Take m (epoch at least the one a server gave) as the client's map:
 * every partition to its owner there. */
static int adopt(struct rkv_client *c, struct rkv_map *m)
{
	uint16_t owner[RKV_MAP_PARTS];
	int idx[RKV_MAP_SERVERS_MAX];
	uint8_t was_out[RKV_MAP_SERVERS_MAX + PEER_SPARE];
	unsigned r = rkv_map_r(m);

	if (r != c->r) {
		/* the slots' legs were made for c->r copies */
		clog_(c, RKV_LOG_ERROR, "cluster map epoch %llu keeps %u "
		      "cop%s of each key, this client was made for %u",
		      (unsigned long long)m->epoch, r, r == 1 ? "y" : "ies",
		      c->r);
		return -EINVAL;
	}

	for (unsigned i = 0; i < m->n; i++) {
		idx[i] = peers_get(c, &m->srv[i]);
		if (idx[i] < 0)
			return idx[i];
	}
	for (unsigned i = 0; i < c->nsrv; i++)
		was_out[i] = c->peer[i].out_of_map;
	for (unsigned i = 0; i < c->nsrv; i++)
		c->peer[i].out_of_map = 1;
	for (unsigned i = 0; i < m->n; i++)
		c->peer[idx[i]].out_of_map = 0;
	for (unsigned i = 0; i < c->nsrv; i++)
		if (was_out[i] && !c->peer[i].out_of_map)
			peers_back(c, &c->peer[i]);
	for (unsigned i = 0; i < c->nsrv; i++) {
		struct peer *p = &c->peer[i];

		/* a server failed over: no key goes there, nothing waits
		 * for it to come back */
		if (p->out_of_map && p->down) {
			p->down = 0;
			c->ndown--;
		}
	}
	for (unsigned p = 0; p < RKV_MAP_PARTS; p++)
		owner[p] = (uint16_t)idx[m->owner[p]];
	memcpy(c->owner, owner, sizeof(owner));
	for (unsigned p = 0; p < RKV_MAP_PARTS; p++) {
		for (unsigned k = 0; k < m->nrep[p]; k++)
			c->rep[p][k] = (uint16_t)idx[m->rep[p][k]];
		c->nrep[p] = m->nrep[p];
	}
	rkv_free(c->map);
	c->map = m;
	if (c->next && c->next->epoch <= m->epoch) {
		rkv_free(c->next);
		c->next = NULL;
	}
	clog_(c, RKV_LOG_INFO, "cluster map epoch %llu, %u servers",
	      (unsigned long long)m->epoch, m->n);
	return 0;
}

/* Read the maps in etcd again: the published one, adopted when newer
 * than ours; and, when ours is still older than epoch, the map a
 * migration moves to, which must be of that epoch (c->next).  A server
 * that says gone names the epoch of its own last move: the map of that
 * epoch places the partition where it is now (or where the next move
 * took it from, which then says gone in turn); a map of a later epoch
 * may place it where it is not yet. */
static int refresh(struct rkv_client *c, uint32_t epoch)
{
	struct rkv_etcd *e = NULL;
	struct rkv_reg_url u;
	struct rkv_map *m, *n = NULL;
	char key[RKV_REG_KEY_MAX];
	int rc = open_etcd(c, c->opts.cluster_file, &u, &e);

	if (rc)
		return rc;
	rkv_reg_map_key(&u, key, sizeof(key));
	m = get_map(c, e, &u, key, &rc);
	if (m && m->epoch > c->map->epoch) {
		rc = adopt(c, m);
		if (rc)
			rkv_free(m);
	} else {
		rkv_free(m);
	}
	if (!rc && c->map->epoch < epoch) {
		rkv_reg_next_key(&u, key, sizeof(key));
		n = get_map(c, e, &u, key, &rc);
		if (n && n->epoch == epoch) {
			rkv_free(c->next);
			c->next = n;
			n = NULL;
		} else if (!rc || rc == -ENOENT) {
			clog_(c, RKV_LOG_ERROR, "cluster %s: a server says a "
			      "partition moved in epoch %u, and etcd has no "
			      "map of that epoch", u.cluster, epoch);
			rc = -ESTALE;
		}
		rkv_free(n);
	}
	rkv_etcd_close(e);
	return rc;
}

int cluster_poll(struct rkv_client *c)
{
	uint64_t was = c->map->epoch;
	int rc = refresh(c, 0);

	if (rc)
		return rc;
	return c->map->epoch > was;
}

int cluster_moved(struct rkv_client *c, unsigned part, uint32_t epoch,
		  unsigned from)
{
	const struct rkv_map *m;
	int rc, to;

	if (c->map->epoch < epoch && (!c->next || c->next->epoch != epoch)) {
		rc = refresh(c, epoch);
		if (rc)
			return rc;
	}
	m = c->map->epoch >= epoch ? c->map : c->next;
	to = peers_get(c, &m->srv[m->owner[part]]);
	if (to < 0)
		return to;
	if ((unsigned)to == from) {
		clog_(c, RKV_LOG_ERROR, "server %s says a partition moved in "
		      "epoch %u, and that map places it there",
		      c->peer[from].label, epoch);
		return -ESTALE;
	}
	c->owner[part] = (uint16_t)to;
	return to;
}
