/* SPDX-License-Identifier: MIT */
/*
 * drv_memcached.c - the memcached driver (libmemcached, text protocol, one
 * connection per thread).  A record is one item.
 *
 * libmemcached has no general pipelining, so --batch means: up to --batch
 * operations are queued; a poll sends all queued reads as ONE multi-get
 * (memcached_mget + memcached_fetch_result: one round trip for the lot),
 * then runs the queued writes one by one (memcached_set waits for its
 * reply: one round trip each; no buffered or no-reply writes, whose errors
 * would go unseen).  memcached has no partial write, so an update of one
 * field (writeallfields=false, the default) is gets, the field rewritten
 * in the record, then cas; a cas that finds the item changed since the
 * gets starts again (counted as a retry), so a field update never undoes
 * another's.  With writeallfields=true an update is a set of the whole
 * record.  read-modify-write is the same gets/cas (its gets is the read
 * checked), or get then set with writeallfields=true (YCSB's
 * read-then-update), counted as one operation.  Scans are not supported
 * by memcached.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

#include "ycsb.h"

/* a field update that lost this many cas races in a row fails */
#define CAS_TRIES 1000

struct ycsb_drv {
	memcached_st *m;
	const struct ycsb_props *p;
	char *rec;                /* a spliced record (record_len bytes) */
	uint64_t retries[YCSB_NTYPES]; /* cas races lost */
	size_t record_len;
	unsigned batch;
	unsigned nq;              /* queued operations */
	struct ycsb_op **q;
	const char **keys;        /* mget arguments */
	size_t *klen;
};

static const char *mc_unsupported(enum ycsb_op_type t)
{
	return t == YCSB_SCAN ? "not supported by memcached" : NULL;
}

/* libmemcached connects lazily and words a refusal vaguely: try a plain
 * TCP connect first so a missing server gets errno's words.  0 or errno. */
static int probe(const char *host, int port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai, *a;
	char ps[16];
	int e = ECONNREFUSED;

	snprintf(ps, sizeof(ps), "%d", port);
	if (getaddrinfo(host, ps, &hints, &ai))
		return EHOSTUNREACH;
	for (a = ai; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);

		if (fd < 0) {
			e = errno;
			continue;
		}
		if (!connect(fd, a->ai_addr, a->ai_addrlen)) {
			close(fd);
			e = 0;
			break;
		}
		e = errno;
		close(fd);
	}
	freeaddrinfo(ai);
	return e;
}

static int mc_create(const struct ycsb_drv_cfg *cfg, struct ycsb_drv **out,
		     char *err, size_t errlen)
{
	char host[256];
	struct ycsb_drv *d;
	memcached_return_t rc;
	int port;

	if (ycsb_hostport(cfg->servers, host, sizeof(host), &port, 11211)) {
		snprintf(err, errlen, "--servers %s: want HOST:PORT for "
			 "memcached", cfg->servers);
		return -EINVAL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		goto err_nomem;
	d->record_len = cfg->record_len;
	d->p = cfg->p;
	d->batch = cfg->batch;
	d->rec = malloc(cfg->record_len);
	d->q = calloc(cfg->batch, sizeof(*d->q));
	d->keys = calloc(cfg->batch, sizeof(*d->keys));
	d->klen = calloc(cfg->batch, sizeof(*d->klen));
	d->m = memcached_create(NULL);
	if (!d->q || !d->keys || !d->klen || !d->m || !d->rec)
		goto err_free;
	memcached_behavior_set(d->m, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
	memcached_behavior_set(d->m, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, 5000);
	memcached_behavior_set(d->m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 5000);
	int e = probe(host, port);

	rc = memcached_server_add(d->m, host, (in_port_t)port);
	if (!e && rc == MEMCACHED_SUCCESS)
		rc = memcached_version(d->m);
	if (e || rc != MEMCACHED_SUCCESS) {
		const char *why = e ? strerror(e) :
				  memcached_strerror(d->m, rc);

		snprintf(err, errlen, "cannot connect to memcached at %s:%d: "
			 "%s (start it with: memcached -l %s -p %d -U 0)",
			 host, port, why, host, port);
		memcached_free(d->m);
		free(d->rec);
		free(d->q);
		free(d->keys);
		free(d->klen);
		free(d);
		return -ECONNREFUSED;
	}
	*out = d;
	return 0;

err_free:
	if (d->m)
		memcached_free(d->m);
	free(d->rec);
	free(d->q);
	free(d->keys);
	free(d->klen);
	free(d);
err_nomem:
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

static void mc_destroy(struct ycsb_drv *d)
{
	if (!d)
		return;
	memcached_free(d->m);
	free(d->rec);
	free(d->q);
	free(d->keys);
	free(d->klen);
	free(d);
}

static int mc_submit(struct ycsb_drv *d, struct ycsb_op *op)
{
	if (op->type == YCSB_SCAN)
		return -EOPNOTSUPP;
	if (d->nq >= d->batch)
		return -EAGAIN;
	op->stage = 0;          /* 0: waiting, 1: finished */
	op->status = 0;
	d->q[d->nq++] = op;
	return 0;
}

static int mc_status(memcached_return_t rc)
{
	switch (rc) {
	case MEMCACHED_SUCCESS:
		return 0;
	case MEMCACHED_NOTFOUND:
		return -ENOENT;
	case MEMCACHED_TIMEOUT:
		return -ETIMEDOUT;
	case MEMCACHED_CONNECTION_FAILURE:
	case MEMCACHED_SERVER_MARKED_DEAD:
		return -ECONNRESET;
	default:
		return -EIO;
	}
}

/* Every queued read in one multi-get. */
static void run_reads(struct ycsb_drv *d)
{
	memcached_result_st *res;
	memcached_return_t rc;
	unsigned nk = 0;

	for (unsigned i = 0; i < d->nq; i++) {
		if (d->q[i]->type != YCSB_READ)
			continue;
		d->keys[nk] = d->q[i]->key;
		d->klen[nk++] = d->q[i]->key_len;
	}
	if (!nk)
		return;
	rc = memcached_mget(d->m, d->keys, d->klen, nk);
	if (rc != MEMCACHED_SUCCESS) {
		for (unsigned i = 0; i < d->nq; i++)
			if (d->q[i]->type == YCSB_READ) {
				d->q[i]->status = mc_status(rc);
				d->q[i]->stage = 1;
			}
		return;
	}
	while ((res = memcached_fetch_result(d->m, NULL, &rc))) {
		const char *k = memcached_result_key_value(res);
		size_t kl = memcached_result_key_length(res);
		size_t vl = memcached_result_length(res);
		const char *v = memcached_result_value(res);

		/* a key asked twice is answered for every asker */
		for (unsigned i = 0; i < d->nq; i++) {
			struct ycsb_op *op = d->q[i];

			if (op->type != YCSB_READ || op->stage ||
			    op->key_len != kl || memcmp(op->key, k, kl))
				continue;
			op->out_len = vl;
			memcpy(op->buf, v, vl < op->buf_cap ? vl : op->buf_cap);
			op->stage = 1;
		}
		memcached_result_free(res);
	}
	for (unsigned i = 0; i < d->nq; i++)
		if (d->q[i]->type == YCSB_READ && !d->q[i]->stage) {
			d->q[i]->status = -ENOENT;
			d->q[i]->stage = 1;
		}
}

/* gets: op's item into op->buf (its length in *vl) and its cas value. */
static int mc_gets(struct ycsb_drv *d, struct ycsb_op *op, size_t *vl,
		   uint64_t *cas)
{
	const char *keys[1] = { op->key };
	size_t klen[1] = { op->key_len };
	memcached_result_st *res;
	memcached_return_t rc;
	int found = 0;

	/* gets only for these (reads keep plain get) */
	memcached_behavior_set(d->m, MEMCACHED_BEHAVIOR_SUPPORT_CAS, 1);
	rc = memcached_mget(d->m, keys, klen, 1);
	while (rc == MEMCACHED_SUCCESS &&
	       (res = memcached_fetch_result(d->m, NULL, &rc))) {
		size_t n = memcached_result_length(res);

		if (!found) {
			*vl = n;
			memcpy(op->buf, memcached_result_value(res),
			       n < op->buf_cap ? n : op->buf_cap);
			*cas = memcached_result_cas(res);
			found = 1;
		}
		memcached_result_free(res);
	}
	memcached_behavior_set(d->m, MEMCACHED_BEHAVIOR_SUPPORT_CAS, 0);
	if (found)
		return 0;
	return rc == MEMCACHED_SUCCESS || rc == MEMCACHED_END ||
	       rc == MEMCACHED_NOTFOUND ? -ENOENT : mc_status(rc);
}

/* One field: gets, splice, cas, again while another write came between. */
static int mc_field_update(struct ycsb_drv *d, struct ycsb_op *op)
{
	for (unsigned i = 0; i < CAS_TRIES; i++) {
		memcached_return_t rc;
		uint64_t cas = 0;
		size_t vl = 0;
		long n;
		int e = mc_gets(d, op, &vl, &cas);

		if (e)
			return e;
		if (op->type == YCSB_RMW)
			op->out_len = vl;
		if (vl > op->buf_cap)
			return -EBADMSG;
		n = ycsb_record_splice(d->p, op->buf, vl, op->field, op->val,
				       op->val_len, d->rec, d->record_len);
		if (n < 0)
			return (int)n;
		rc = memcached_cas(d->m, op->key, op->key_len, d->rec,
				   (size_t)n, 0, 0, cas);
		if (rc != MEMCACHED_DATA_EXISTS)
			return mc_status(rc);
		d->retries[op->type]++;
	}
	return -EBUSY;
}

static void run_write(struct ycsb_drv *d, struct ycsb_op *op)
{
	memcached_return_t rc;

	if (op->one_field) {
		op->status = mc_field_update(d, op);
		return;
	}
	if (op->type == YCSB_RMW) {
		size_t vl = 0;
		uint32_t flags;
		char *v = memcached_get(d->m, op->key, op->key_len, &vl,
					&flags, &rc);

		if (!v) {
			op->status = rc == MEMCACHED_SUCCESS ? -ENOENT :
				     mc_status(rc);
			return;
		}
		op->out_len = vl;
		memcpy(op->buf, v, vl < op->buf_cap ? vl : op->buf_cap);
		free(v);
	}
	rc = memcached_set(d->m, op->key, op->key_len, op->val, op->val_len,
			   0, 0);
	op->status = mc_status(rc);
}

static int mc_poll(struct ycsb_drv *d, struct ycsb_op **done, int max)
{
	int n = 0;

	if (!d->nq)
		return 0;
	/* done[] holds at least --batch entries (the harness's array) */
	(void)max;
	run_reads(d);
	for (unsigned i = 0; i < d->nq; i++) {
		struct ycsb_op *op = d->q[i];

		if (op->type != YCSB_READ)
			run_write(d, op);
		done[n++] = op;
	}
	d->nq = 0;
	return n;
}

static unsigned mc_inflight(const struct ycsb_drv *d)
{
	return d->nq;
}

static void mc_stats(struct ycsb_drv *d, const uint64_t *counts,
		     struct ycsb_drv_stats *st)
{
	(void)counts;
	memset(st, 0, sizeof(*st));
	/* cas races lost by one-field updates */
	st->has_retries = !d->p->writeallfields;
	memcpy(st->retries, d->retries, sizeof(st->retries));
}

static void mc_stats_reset(struct ycsb_drv *d)
{
	memset(d->retries, 0, sizeof(d->retries));
}

const struct ycsb_drv_ops ycsb_drv_memcached = {
	.name = "memcached",
	.unsupported = mc_unsupported,
	.create = mc_create,
	.destroy = mc_destroy,
	.submit = mc_submit,
	.poll = mc_poll,
	.inflight = mc_inflight,
	.stats = mc_stats,
	.stats_reset = mc_stats_reset,
};
