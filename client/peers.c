/* SPDX-License-Identifier: MIT */
/*
 * peers.c - the client's servers over time: connecting to every server of
 * the map at create, noticing one that went down, and reconnecting it.
 *
 * A dead server costs only its own keys.  A server that cannot be reached
 * at create, or whose link fails later, is down: ops on its keys fail at
 * once with the error it went down with (op.c checks peer->down), the
 * other servers' ops go on untouched.  peers_heal, run at the top of each
 * progress call the application makes (api.c), retries a down server
 * after 100 ms, doubling to 5 s, each attempt bounded by the connect
 * timeout (at most 1 s).  A reconnect starts afresh: a new connection and
 * client id, no chunks, no cached locations on that server (its regions
 * may be new: a restarted server has lost its keys, and says so to
 * nobody).  It waits until no op has a round in flight on the old link,
 * and no op holds state of the old one (a block of its chunks, slot
 * addresses), so nothing of the old connection reaches the new one.
 *
 * An attempt blocks the caller for its duration: instant when the host
 * refuses (nothing listens), up to the bound when packets are dropped.
 */
#include "client.h"

#include <errno.h>
#include <string.h>

#include "rtime.h"

#define RETRY_FIRST_MS 100
#define FENCED_TRIES 3     /* at once, for a server that just fenced us */
#define RETRY_MAX_MS 5000
#define RECONNECT_TIMEOUT_MS 1000
#define MAP_POLL_MS 200 /* etcd's map, read while a server is down */
/* and for this long after an op found a server's lease lapsed (op.c) */
#define LEASE_POLL_MS 1000

static struct conn_opts conn_opts_of(const struct rkv_client *c,
				     unsigned timeout_ms)
{
	return (struct conn_opts){ .name = c->opts.name,
				   .read_only = c->opts.read_only,
				   .timeout_ms = timeout_ms,
				   .secret = c->secret,
				   .secret_len = c->secret_len,
				   .map_epoch = (uint32_t)c->map->epoch };
}

static void mark_down(struct rkv_client *c, struct peer *p, int err,
		      uint64_t now)
{
	if (p->down)
		return;
	p->down = err ? err : -ECONNRESET;
	p->backoff_ms = RETRY_FIRST_MS;
	p->retry_ms = now + RETRY_FIRST_MS;
	c->ndown++;
}

void peers_back(struct rkv_client *c, struct peer *p)
{
	uint64_t now = rkv_coarse_ms();

	if (!p->link.dead || p->down)
		return;
	mark_down(c, p, p->link.dead, now);
	p->retry_ms = now;
}

void peers_setup(struct rkv_client *c, unsigned i,
		 const struct rkv_map_server *s, int check_name)
{
	peer_init(&c->peer[i], &c->eng, i, s, check_name,
		  c->ctrl_mem + (size_t)i * CTRL_MEM);
	space_init(&c->space[i], &c->peer[i]);
	c->space[i].ready = ops_space_ready;
	c->space[i].ready_arg = c;
	c->links[i] = &c->peer[i].link;
}

int peers_get(struct rkv_client *c, const struct rkv_map_server *s)
{
	struct conn_opts co = conn_opts_of(c, c->opts.connect_timeout_ms);
	unsigned i;
	int rc;

	for (i = 0; i < c->nsrv; i++) {
		if (strcmp(c->peer[i].name, s->name) != 0)
			continue;
		if (strcmp(c->peer[i].addr, s->addr) != 0) {
			clog_(c, RKV_LOG_ERROR, "server %s is at %s now, not at "
			      "%s: not followed", s->name, s->addr,
			      c->peer[i].addr);
			return -ENXIO;
		}
		return (int)i;
	}
	if (c->nsrv == c->peer_cap) {
		clog_(c, RKV_LOG_ERROR, "no room for server %s: this client "
		      "was made for %u servers", s->name, c->peer_cap);
		return -ENOSPC;
	}
	peers_setup(c, i, s, 1);
	c->nsrv++;
	c->eng.nlinks = c->nsrv;
	rc = peer_connect(&c->peer[i], &co);
	if (rc) {
		clog_(c, RKV_LOG_WARN, "new server %s is down (%s): its keys "
		      "fail until it is back", c->peer[i].label,
		      strerror(-rc));
		peer_reset(&c->peer[i]);
		c->peer[i].link.dead = rc;
		mark_down(c, &c->peer[i], rc, rkv_now_ms());
	} else {
		clog_(c, RKV_LOG_INFO, "server %s joined", c->peer[i].label);
	}
	return (int)i;
}

int peers_connect_all(struct rkv_client *c)
{
	struct conn_opts co = conn_opts_of(c, c->opts.connect_timeout_ms);
	const struct peer *first_down = NULL;
	unsigned up = 0;
	int first = 0;

	for (unsigned i = 0; i < c->nsrv; i++) {
		struct peer *p = &c->peer[i];
		int rc = peer_connect(p, &co);

		if (!rc) {
			up++;
			continue;
		}
		/* one server: its error is the client's; a refusal (secret,
		 * name, version) is a configuration error, never waited out */
		if (c->nsrv == 1 || !peer_err_transient(rc))
			return rc;
		if (!first) {
			first = rc;
			first_down = p;
		}
		clog_(c, RKV_LOG_WARN,
		      "server %s is down (%s): its keys fail until it is back",
		      p->label, strerror(-rc));
		peer_reset(p);
		p->link.dead = rc;
		mark_down(c, p, rc, rkv_now_ms());
	}
	if (!up)
		clog_(c, RKV_LOG_ERROR, "all %u servers are down, the first "
		      "%s", c->nsrv, first_down->label);
	return up ? 0 : first;
}

/* Whether an op or a word call still works on p: it may have WRs on the
 * old link, or hold state of the old connection (a chunk's block, slot
 * addresses).  Such ops end soon: each step on a dead link fails. */
static int peer_busy(const struct rkv_client *c, const struct peer *p)
{
	for (unsigned i = 0; i < c->nslots; i++) {
		const struct opslot *o = &c->slots[i];

		/* an op waiting for a newer map holds nothing of p's */
		if (o->p == p && o->state != OP_FREE &&
		    o->state != OP_START && o->state != OP_DONE &&
		    !(o->state == OP_WAIT_TIMER &&
		      (o->step == MIG_EPOCH || o->step == LEASE_WAIT)))
			return 1;
		/* a leg's round on p (its op's primary is another server):
		 * a new connection would drop its completion for good */
		for (unsigned k = 0; o->leg && k < REPL_LEGS; k++)
			if (o->leg[k].p == p && o->leg[k].busy)
				return 1;
	}
	for (unsigned i = 0; i < AUX_CALLS; i++)
		if (c->aux[i].busy && c->aux[i].p == p)
			return 1;
	return 0;
}

static void reconnect(struct rkv_client *c, struct peer *p)
{
	unsigned t = c->opts.connect_timeout_ms < RECONNECT_TIMEOUT_MS
			     ? c->opts.connect_timeout_ms
			     : RECONNECT_TIMEOUT_MS;
	struct conn_opts co = conn_opts_of(c, t);
	struct space *sp = &c->space[p->idx];
	int rc, fenced = p->link.fenced;

	space_fini(sp);
	peer_reset(p);
	/* p->down stays set while connecting: the ops that progress
	 * meanwhile (ctrl_call drives it) still fail on p at once */
	rc = peer_connect(p, &co);
	space_init(sp, p);
	sp->ready = ops_space_ready;
	sp->ready_arg = c;
	if (rc) {
		if (rc != p->down)
			clog_(c, RKV_LOG_WARN, "server %s is still down (%s)",
			      p->label, strerror(-rc));
		peer_reset(p);
		p->link.dead = rc;
		p->down = rc;
		if (fenced && rc == -ECONNRESET &&
		    p->fenced_tries < FENCED_TRIES) {
			/* it fenced us a moment ago, so it is alive: a new
			 * connection it reset (seen on shm right after a
			 * failover's fence) is tried again at once, and
			 * the ops of its keys wait meanwhile (the link
			 * still reads as fenced: op.c op_refenced) */
			p->fenced_tries++;
			p->link.fenced = 1;
			p->retry_ms = rkv_now_ms();
			return;
		}
		p->backoff_ms = p->backoff_ms * 2 < RETRY_MAX_MS
					? p->backoff_ms * 2
					: RETRY_MAX_MS;
		p->retry_ms = rkv_now_ms() + p->backoff_ms;
		return;
	}
	cache_drop_server(c, p->idx);
	p->fenced_tries = 0;
	p->down = 0;
	c->ndown--;
	c->st.reconnects++;
	clog_(c, RKV_LOG_INFO, "server %s is back", p->label);
}

/* A newer map in etcd (a failover): adopt it, and retry the servers that
 * are down at once.  Rate-limited unless forced. */
static void poll_map(struct rkv_client *c, uint64_t now, int force)
{
	if (!c->moved || (!force && now < c->map_poll_ms))
		return;
	c->map_poll_ms = now + MAP_POLL_MS;
	if (cluster_poll(c) <= 0)
		return;
	for (unsigned i = 0; i < c->nsrv; i++)
		if (c->peer[i].down) {
			c->peer[i].retry_ms = now;
			c->peer[i].backoff_ms = RETRY_FIRST_MS;
		}
}

void peers_heal(struct rkv_client *c)
{
	uint64_t now;
	int polled = 0, lapsed = 0, fresh = 0;

	/* (the common case: one test of each field, no clock read) */
	if (c->healing ||
	    (!c->ndown && !c->lease_lapsed_ms &&
	     c->eng.links_failed == c->links_failed_seen))
		return;
	now = rkv_coarse_ms();
	if (c->lease_lapsed_ms && now - c->lease_lapsed_ms < LEASE_POLL_MS)
		lapsed = 1;
	else
		c->lease_lapsed_ms = 0;
	if (!c->ndown && !lapsed &&
	    c->eng.links_failed == c->links_failed_seen)
		return;
	c->healing = 1;
	c->links_failed_seen = c->eng.links_failed;
	for (unsigned i = 0; i < c->nsrv; i++) {
		struct peer *p = &c->peer[i];

		if (p->link.dead && !p->down && !p->out_of_map) {
			mark_down(c, p, p->link.dead, now);
			fresh = 1;
			/* fenced: one try at once, which reads the new map
			 * (a dead server is tried after RETRY_FIRST_MS) */
			if (p->link.fenced)
				p->retry_ms = now;
		}
	}
	/* a server down may have been failed over: a newer map in etcd
	 * places its keys on the others (and the survivors, fenced, refuse
	 * this client until it has it).  Read at once when a server has
	 * just gone down: an idle client's first ops after a failover
	 * would otherwise fail on the replaced server for up to
	 * MAP_POLL_MS before the map sends them to its successors */
	if (c->ndown || lapsed)
		poll_map(c, now, fresh);
	for (unsigned i = 0; i < c->nsrv; i++) {
		struct peer *p = &c->peer[i];

		if (!p->down || now < p->retry_ms || p->out_of_map ||
		    peer_busy(c, p))
			continue;
		reconnect(c, p);
		if (p->down == -ESTALE && p->fenced_at > c->newer_epoch)
			c->newer_epoch = p->fenced_at;
		if (p->down == -ESTALE && !polled) {
			/* refused as a client of an old map: read it now */
			polled = 1;
			poll_map(c, now, 1);
			if (now >= p->retry_ms)
				reconnect(c, p);
		}
	}
	c->healing = 0;
}
