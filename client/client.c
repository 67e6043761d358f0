/* SPDX-License-Identifier: MIT */
/*
 * client.c - creating and destroying a client, and its accessors.
 *
 * Create: options, secret, the cluster map (opts' servers or cluster
 * file: proto/cmap.h), one transport context and CQ for the whole cluster
 * (one provider), one registered region carved into the op buffers, the
 * new-block buffers, the control buffers of every server and the
 * word-call results; then connect to the servers (peers.c: one that is
 * down does not stop the client).
 * Destroy: hand back the blocks we freed and the chunks we hold (bounded
 * wait), then take everything down in reverse.
 *
 * A read_only client fails put, delete and rmw with -EACCES before sending
 * anything (op.c; its rkeys would refuse them anyway).
 */
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <openssl/crypto.h>

#include "alloc.h"
#include "registry.h"
#include "rtime.h"

void rkv_client_opts_init(struct rkv_client_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->opts_size = sizeof(*opts);
	opts->name = "rkv";
	opts->timeout_ms = 5000;
	opts->connect_timeout_ms = 5000;
	opts->max_inflight = 32;
	opts->cache_entries = 65536;
	opts->max_value = RKV_VALUE_MAX;
	opts->gid_index = -1;
	opts->traffic_class = -1;
	opts->service_level = -1;
	opts->secret_file = getenv("RKV_SECRET_FILE");
	if (opts->secret_file && !*opts->secret_file)
		opts->secret_file = NULL;
}

/* The engine's tick hook: each server's space, at most once per coarse
 * clock tick (engine.c). */
static void client_tick(void *arg, uint64_t now_ms)
{
	struct rkv_client *c = arg;

	for (unsigned i = 0; i < c->nsrv; i++)
		space_tick(&c->space[i], now_ms);
	/* a busy client sees a closed link within a tick and heals */
	client_links_check(c);
}

void client_links_check(struct rkv_client *c)
{
	/* an endpoint its peer disconnected with nothing posted on it
	 * gives no completion (verbs: the CM's DISCONNECTED; a failover's
	 * fence closes the survivors' links) */
	for (unsigned i = 0; i < c->nsrv; i++) {
		struct link *l = &c->peer[i].link;

		if (l->ep && !l->dead && rkv_ep_state(l->ep) == RKV_EP_ERROR)
			link_fail(l, -ECONNRESET);
	}
}

static int check_opts(struct rkv_client *c)
{
	if (!c->opts.max_inflight || c->opts.max_inflight > 1024 ||
	    !c->opts.timeout_ms || !c->opts.connect_timeout_ms ||
	    c->opts.max_value > RKV_VALUE_LIMIT)
		return -EINVAL;
	if (!c->opts.max_value)
		c->opts.max_value = RKV_VALUE_MAX;
	return 0;
}

/* The text of a cluster file (rkv_malloc'd, NUL-terminated). */
static int read_text(const char *path, char **out)
{
	FILE *f = fopen(path, "r");
	size_t cap = 1 << 20, n;
	char *buf;
	int rc = 0;

	*out = NULL;
	if (!f)
		return -errno;
	buf = rkv_malloc(cap + 1);
	if (!buf) {
		fclose(f);
		return -ENOMEM;
	}
	n = fread(buf, 1, cap + 1, f);
	if (ferror(f))
		rc = -EIO;
	else if (n > cap)
		rc = -EFBIG;
	fclose(f);
	if (rc) {
		rkv_free(buf);
		return rc;
	}
	buf[n] = '\0';
	*out = buf;
	return 0;
}

/* The cluster map of the options: servers, else the cluster file. */
static int take_map(struct rkv_client *c)
{
	char why[300] = "", *text = NULL;
	int rc;

	c->map = rkv_malloc(sizeof(*c->map));
	if (!c->map)
		return -ENOMEM;
	if (c->given_map) {
		*c->map = *c->given_map;
		c->given_map = NULL;
		return 0;
	}
	if (c->opts.servers || !c->opts.cluster_file) {
		rc = rkv_map_parse_list(c->opts.servers, c->map, why,
					sizeof(why));
		if (rc)
			clog_(c, RKV_LOG_ERROR, "servers '%s': %s",
			      c->opts.servers ? c->opts.servers : "", why);
		return rc;
	}
	if (rkv_reg_is_url(c->opts.cluster_file))
		return cluster_load(c, c->opts.cluster_file);
	rc = read_text(c->opts.cluster_file, &text);
	if (rc) {
		clog_(c, RKV_LOG_ERROR, "cluster file %s: %s",
		      c->opts.cluster_file, strerror(-rc));
		return rc;
	}
	rc = rkv_map_parse(text, c->map, why, sizeof(why));
	rkv_free(text);
	if (rc)
		clog_(c, RKV_LOG_ERROR, "cluster file %s: %s",
		      c->opts.cluster_file, why);
	return rc;
}

/* The secret and the cluster map. */
static int take_servers(struct rkv_client *c)
{
	char why[128] = "";
	int rc;

	rc = conn_load_secret(c->opts.secret, c->opts.secret_len,
			      c->opts.secret_file, &c->secret, &c->secret_len,
			      why, sizeof(why));
	if (rc) {
		if (why[0])
			clog_(c, RKV_LOG_ERROR, "secret file %s: %s",
			      c->opts.secret_file, why);
		return rc;
	}
	rc = take_map(c);
	if (rc)
		return rc;
	if (c->map->replicas > c->map->n) {
		/* refused rather than served with fewer copies: a user who
		 * asked for r copies must not believe to have them */
		clog_(c, RKV_LOG_ERROR, "the cluster map asks for replicas %u "
		      "but lists %u server%s", c->map->replicas, c->map->n,
		      c->map->n == 1 ? "" : "s");
		return -EINVAL;
	}
	c->r = rkv_map_r(c->map);
	c->nlegs = c->r > 1 ? c->r : 0;
	c->nsrv = c->map->n;
	c->peer_cap = c->nsrv;
	if (c->opts.cluster_file && rkv_reg_is_url(c->opts.cluster_file)) {
		/* a map in etcd may gain servers (a join): room for them */
		c->peer_cap += PEER_SPARE;
		if (c->peer_cap > MAX_SERVERS)
			c->peer_cap = MAX_SERVERS;
		c->moved = cluster_moved;
	}
	for (unsigned p = 0; p < RKV_MAP_PARTS; p++) {
		c->owner[p] = c->map->owner[p];
		memcpy(c->rep[p], c->map->rep[p], sizeof(c->rep[p]));
		c->nrep[p] = c->map->nrep[p];
	}
	c->nslots = c->opts.max_inflight;
	return 0;
}

/* One transport context and CQ: every server must use one provider. */
static int make_engine(struct rkv_client *c)
{
	struct rkv_tp_opts to;
	struct rkv_tp_addr a, b;
	int rc = rkv_tp_addr_parse(c->map->srv[0].addr, &a);

	if (rc)
		clog_(c, RKV_LOG_ERROR, "'%s' is not a server address",
		      c->map->srv[0].addr);
	for (unsigned i = 1; !rc && i < c->nsrv; i++) {
		rc = rkv_tp_addr_parse(c->map->srv[i].addr, &b);
		if (rc)
			clog_(c, RKV_LOG_ERROR, "'%s' is not a server address",
			      c->map->srv[i].addr);
		else if (b.provider != a.provider) {
			clog_(c, RKV_LOG_ERROR, "'%s' is not a %s address like "
			      "'%s' (one client uses one transport)",
			      c->map->srv[i].addr,
			      rkv_tp_provider_str(a.provider),
			      c->map->srv[0].addr);
			rc = -EINVAL;
		}
	}
	if (rc)
		return rc;
	c->eng.st = &c->st;
	c->eng.log_fn = c->opts.log_fn;
	c->eng.log_arg = c->opts.log_arg;
	c->eng.hooks = (struct engine_hooks){ .run = ops_run,
					      .tick = client_tick, .arg = c };
	rkv_tp_opts_init(&to);
	to.provider = a.provider;
	to.device = c->opts.device;
	to.port = c->opts.port;
	to.gid_index = c->opts.gid_index;
	to.mtu = c->opts.mtu;
	to.traffic_class = c->opts.traffic_class;
	to.service_level = c->opts.service_level;
	to.max_rd_atomic = c->opts.max_rd_atomic;
	/* r > 1: a slot's legs post on the backups beside its own rounds
	 * (and a leg's stale round may still be out) */
	to.max_send_wr = c->nslots * ROUND_MAX_WR * (c->r > 1 ? 2 : 1) +
			 CTRL_SEND_BUFS + 4;
	if (to.max_send_wr > 16384)
		to.max_send_wr = 16384;
	to.max_recv_wr = CTRL_RECVS + 4;
	to.timeout_ms = c->opts.timeout_ms < 2000 ? c->opts.timeout_ms : 2000;
	/* the transport's messages go to the client's callback, or nowhere:
	 * librkv never prints */
	to.log_fn = eng_tp_log;
	to.log_arg = &c->eng;
	to.log_min = c->opts.log_fn ? RKV_LOG_DEBUG : RKV_LOG_OFF;
	rc = rkv_tp_create(&to, &c->eng.tp);
	if (rc)
		return rc;
	if (!rkv_tp_has_atomics(c->eng.tp)) {
		clog_(c, RKV_LOG_ERROR, "%s reports no remote atomics: rkv "
		      "needs 8-byte RDMA compare-and-swap and fetch-and-add",
		      rkv_tp_describe(c->eng.tp));
		return -EOPNOTSUPP;
	}
	return rkv_cq_create(c->eng.tp, c->nslots * ROUND_MAX_WR *
					(c->r > 1 ? 2 * c->r : 1) +
					c->peer_cap * (CTRL_SEND_BUFS + CTRL_RECVS) +
					64,
			     &c->eng.cq);
}

/* Local registered memory: op buffers, new blocks, control buffers,
 * word-call results. */
static int make_lmem(struct rkv_client *c)
{
	/* blocks over INLINE_BLOCK go through buffers of their own
	 * (bigbuf.c) */
	uint32_t maxblk = rkv_block_size(RKV_KEY_MAX, c->opts.max_value);

	if (maxblk > INLINE_BLOCK)
		maxblk = INLINE_BLOCK;

	c->op_buf_size = (OB_BLOCKS + (size_t)maxblk + 4095) & ~(size_t)4095;
	c->new_blk_size = ((size_t)maxblk + 4095) & ~(size_t)4095;
	c->lmem_len = c->nslots * (c->op_buf_size + c->new_blk_size) +
		      (size_t)c->nslots * c->nlegs * c->op_buf_size +
		      (size_t)c->peer_cap * CTRL_MEM +
		      AUX_CALLS * sizeof(uint64_t);
	c->lmem = mmap(NULL, c->lmem_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c->lmem == MAP_FAILED) {
		c->lmem = NULL;
		return -ENOMEM;
	}
	return rkv_mr_reg(c->eng.tp, c->lmem, c->lmem_len,
			  RKV_ACCESS_LOCAL_WRITE, &c->eng.lmr);
}

/* Carve lmem: slots, new blocks, peers' control buffers, aux words. */
static int carve(struct rkv_client *c)
{
	char *p = c->lmem;

	c->slots = rkv_aligned_alloc(64, c->nslots * sizeof(*c->slots));
	c->peer = rkv_calloc(c->peer_cap, sizeof(*c->peer));
	c->space = rkv_calloc(c->peer_cap, sizeof(*c->space));
	if (!c->slots || !c->peer || !c->space)
		return -ENOMEM;
	for (unsigned i = 0; i < c->nslots; i++) {
		op_slot_init(&c->slots[i], c, p, c->eng.lmr->lkey);
		p += c->op_buf_size;
	}
	c->new_blk = p;
	p += c->nslots * c->new_blk_size;
	if (c->r > 1) {
		/* each slot's legs (op_repl.c): a buffer per backup */
		c->legs = rkv_calloc((size_t)c->nslots * REPL_LEGS,
				     sizeof(*c->legs));
		if (!c->legs)
			return -ENOMEM;
		for (unsigned i = 0; i < c->nslots; i++) {
			repl_slot_init(&c->slots[i], &c->legs[i * REPL_LEGS],
				       p, c->op_buf_size, c->eng.lmr->lkey);
			p += (size_t)c->nlegs * c->op_buf_size;
		}
	}
	c->ctrl_mem = p;
	p += c->peer_cap * CTRL_MEM;
	c->eng.links = c->links;
	/* placement is by name: with two servers or more, each must be the
	 * one its map entry names */
	for (unsigned i = 0; i < c->nsrv; i++)
		peers_setup(c, i, &c->map->srv[i], c->nsrv > 1);
	c->eng.nlinks = c->nsrv;
	for (unsigned i = 0; i < AUX_CALLS; i++) {
		c->aux[i].word = (uint64_t *)(void *)p; /* 8-aligned */
		p += sizeof(uint64_t);
	}
	return 0;
}

int rkv_client_create(const struct rkv_client_opts *opts,
		      struct rkv_client **out)
{
	return client_create_map(opts, NULL, out);
}

int client_create_map(const struct rkv_client_opts *opts,
		      const struct rkv_map *map, struct rkv_client **out)
{
	struct rkv_client *c;
	int rc;

	if (!opts || !out || opts->opts_size == 0 ||
	    opts->opts_size > sizeof(*opts))
		return -EINVAL;
	*out = NULL;
	c = rkv_calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	rkv_client_opts_init(&c->opts);
	memcpy(&c->opts, opts, opts->opts_size);
	c->opts.opts_size = sizeof(c->opts);
	c->given_map = map;
	c->eng.log_fn = c->opts.log_fn; /* for what create itself says */
	c->eng.log_arg = c->opts.log_arg;
	rc = check_opts(c);
	if (!rc)
		rc = take_servers(c);
	if (!rc)
		rc = make_engine(c);
	if (!rc)
		rc = make_lmem(c);
	if (!rc)
		rc = carve(c);
	if (!rc)
		rc = bigbuf_init(c);
	if (!rc)
		/* r > 1: a write's legs keep an entry per backup too */
		rc = cache_init(c, c->opts.cache_entries * c->r);
	if (!rc)
		rc = peers_connect_all(c);
	if (rc) {
		rkv_client_destroy(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* Hand back what we freed and the chunks we hold (bounded wait). */
static void leave_servers(struct rkv_client *c)
{
	uint64_t end = rkv_now_ms() + 1000;

	for (unsigned i = 0; i < c->nsrv; i++)
		if (c->peer[i].link.ep && !c->peer[i].link.dead)
			space_leave(&c->space[i]);
	for (;;) {
		unsigned left = 0;

		for (unsigned i = 0; i < c->nsrv; i++)
			left += space_drain(&c->space[i]);
		if (!left || rkv_now_ms() > end)
			break;
		if (eng_progress(&c->eng) < 0)
			break;
	}
}

void rkv_client_destroy(struct rkv_client *c)
{
	if (!c)
		return;
	if (c->peer && c->space && c->eng.cq)
		leave_servers(c);
	for (unsigned i = 0; c->peer && i < c->nsrv; i++) {
		rkv_ep_destroy(c->peer[i].link.ep);
		if (c->space)
			space_fini(&c->space[i]);
	}
	gpu_fini(c); /* device staging (dev.c), before its context goes */
	scan_fini(c);
	cache_fini(c);
	bigbuf_fini(c);
	for (unsigned i = 0; c->slots && i < c->nslots; i++)
		rkv_free(c->slots[i].dh); /* op_get.c's direct gets */
	rkv_free(c->slots);
	rkv_free(c->legs);
	rkv_free(c->space);
	rkv_free(c->peer);
	rkv_free(c->map);
	rkv_free(c->next);
	rkv_mr_dereg(c->eng.lmr);
	if (c->lmem)
		munmap(c->lmem, c->lmem_len);
	rkv_cq_destroy(c->eng.cq);
	rkv_tp_destroy(c->eng.tp);
	if (c->secret) {
		OPENSSL_cleanse(c->secret, c->secret_len);
		rkv_free(c->secret);
	}
	rkv_free(c);
}

unsigned rkv_client_nservers(const struct rkv_client *c)
{
	return c->nsrv;
}

const char *rkv_client_server_addr(const struct rkv_client *c, unsigned i)
{
	return i < c->nsrv ? c->peer[i].addr : NULL;
}

const char *rkv_client_server_name(const struct rkv_client *c, unsigned i)
{
	return i < c->nsrv ? c->peer[i].name : NULL;
}

int rkv_client_server_status(const struct rkv_client *c, unsigned i)
{
	if (i >= c->nsrv)
		return -EINVAL;
	return c->peer[i].down ? c->peer[i].down : c->peer[i].link.dead;
}

uint64_t rkv_client_map_epoch(const struct rkv_client *c)
{
	return c->map ? c->map->epoch : 0;
}

unsigned rkv_client_server_parts(const struct rkv_client *c, unsigned i)
{
	unsigned n = 0;

	for (unsigned p = 0; i < c->nsrv && p < RKV_MAP_PARTS; p++)
		n += c->owner[p] == i;
	return n;
}

unsigned rkv_client_route(const struct rkv_client *c, const void *key,
			  size_t key_len)
{
	return op_route(c, key, key_len);
}

unsigned rkv_client_replicas(const struct rkv_client *c, const void *key,
			     size_t key_len, unsigned *out, unsigned cap)
{
	struct rkv_key_hash kh;
	unsigned part;
	const uint16_t *rep;

	rkv_key_hash(key, key_len, &kh);
	part = rkv_map_part(kh.route);
	out[0] = c->owner[part]; /* cap >= 1: the primary, as routed */
	if (c->r < 2)
		return 1;
	rep = c->rep[part];
	for (unsigned i = 1; i < c->nrep[part] && i < cap; i++)
		out[i] = rep[i];
	return c->nrep[part];
}

void rkv_client_stats(const struct rkv_client *c, struct rkv_client_stats *st)
{
	unsigned down = 0;

	*st = c->st;
	for (unsigned i = 0; i < c->nsrv; i++)
		down += !c->peer[i].out_of_map &&
			rkv_client_server_status(c, i) != 0;
	st->servers_down = down;
	st->parts_degraded = 0;
	if (!down)
		return;
	for (unsigned p = 0; p < RKV_MAP_PARTS; p++) {
		unsigned bad = rkv_client_server_status(c, c->owner[p]) != 0;

		if (c->r > 1 && c->map) {
			const uint16_t *rep = c->rep[p];

			for (unsigned i = 1; i < c->nrep[p]; i++)
				bad |= rkv_client_server_status(c, rep[i]) != 0;
		}
		st->parts_degraded += bad;
	}
}

void rkv_client_stats_reset(struct rkv_client *c)
{
	memset(&c->st, 0, sizeof(c->st));
}

int rkv_server_stats(struct rkv_client *c, unsigned i,
		     struct rkv_server_stats *st)
{
	struct rkv_msg m, reply;
	int rc;

	if (i >= c->nsrv || !st)
		return -EINVAL;
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_STATS;
	rc = ctrl_call(&c->peer[i].ctrl, &m, &reply, c->opts.timeout_ms);
	if (rc)
		return rc;
	if (reply.hdr.type != RKV_MSG_STATS_REPLY)
		return reply.hdr.type == RKV_MSG_ERROR ? reply.u.error.status
						       : -EPROTO;
	const struct rkv_msg_stats_reply *r = &reply.u.stats_reply;

	*st = (struct rkv_server_stats){
		.uptime_ms = r->uptime_ms, .clients = r->clients,
		.clients_total = r->clients_total, .keys = r->keys,
		.nbuckets = r->bucket_slots ? r->index_slots / r->bucket_slots
					    : r->nbuckets,
		.data_len = r->data_len,
		.data_free = r->data_free, .data_grace = r->data_grace,
		.chunks_granted = r->chunks_granted,
		.blocks_returned = r->blocks_returned,
		.rebuilds = r->rebuilds, .bad_msgs = r->bad_msgs,
		.ctrl_msgs = r->ctrl_msgs, .auth_failures = r->auth_failures,
		.denied = r->denied, .bucket_slots = r->bucket_slots,
		.levels = r->levels, .levels_max = r->levels_max,
	};
	return 0;
}
