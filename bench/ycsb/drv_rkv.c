/* SPDX-License-Identifier: MIT */
/*
 * drv_rkv.c - the rkv driver: one librkv client per thread, operations
 * through the pipelined rkv_submit/rkv_poll interface with max_inflight =
 * --batch.  read = RKV_OP_GET of the record; insert = RKV_OP_PUT of the
 * whole record; update = RKV_OP_PUT of the whole record with
 * writeallfields=true, else RKV_OP_RMW whose callback rewrites the one
 * field and copies the others as they are (rkv has no partial write; the
 * slot's CAS lock makes the field update atomic against other writers of
 * the record); read-modify-write = RKV_OP_RMW (one operation under the
 * slot's CAS lock: the callback copies the old record out for checking
 * and writes the new record, or the old one with the field rewritten).
 * Scans are not supported: the index is a hash.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "transport.h"
#include "ycsb.h"

struct ycsb_drv {
	struct rkv_client *c;
	const struct ycsb_props *p;
	int one_field;            /* updates go through RKV_OP_RMW */
	char *servers;            /* owned copy with schemes added */
	char why[256];            /* librkv's first warning or error */
};

/*
 * rkv_poll never blocks.  When it finds nothing the driver calls rkv_wait,
 * which spins or blocks (librkv adapts which), so that client threads on a
 * machine with fewer cores than busy threads leave CPU to the servers'
 * transport threads (Redis and memcached clients block in the kernel too);
 * should a wait fail, it sleeps briefly.
 */
#define IDLE_WAIT_US 1000u
#define IDLE_SLEEP_NS 20000L

static const char *rkv_unsupported(enum ycsb_op_type t)
{
	return t == YCSB_SCAN ? "not supported by a hash index" : NULL;
}

/* "h:p,h:p" -> "tcp://h:p,tcp://h:p" when addresses have no scheme;
 * check that addresses with one match --provider. */
static char *with_scheme(const char *servers, const char *provider,
			 char *err, size_t errlen)
{
	size_t n = strlen(servers), cap = n * 2 + 64;
	char *out = malloc(cap), *copy = strdup(servers), *save = NULL;
	size_t len = 0;

	if (!out || !copy) {
		free(out);
		free(copy);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	out[0] = 0;
	for (char *a = strtok_r(copy, ",", &save); a;
	     a = strtok_r(NULL, ",", &save)) {
		const char *sep = strstr(a, "://");
		struct rkv_tp_addr ta;
		size_t at = len ? len + 1 : 0; /* where a lands in out */
		int w;

		if (sep && provider && strcmp(provider, "auto") &&
		    ((size_t)(sep - a) != strlen(provider) ||
		     strncmp(a, provider, strlen(provider)))) {
			snprintf(err, errlen, "address %s does not match "
				 "--provider %s", a, provider);
			goto err_free;
		}
		w = snprintf(out + len, cap - len, "%s%s%s", len ? "," : "",
			     sep ? "" : (provider ? provider : "tcp"),
			     sep ? a : "://");
		len += (size_t)w;
		if (!sep)
			len += (size_t)snprintf(out + len, cap - len, "%s", a);
		if (len >= cap - 16) {
			snprintf(err, errlen, "--servers too long");
			goto err_free;
		}
		if (rkv_tp_addr_parse(out + at, &ta)) {
			snprintf(err, errlen, "--servers: '%s' is not an rkv "
				 "address (tcp://HOST:PORT, shm:///NAME, "
				 "verbs://HOST:PORT, or HOST:PORT with "
				 "--provider)", a);
			goto err_free;
		}
	}
	free(copy);
	return out;

err_free:
	free(copy);
	free(out);
	return NULL;
}

/* librkv's log callback: keep the first warning or error, which names
 * the cause of a failed connect better than the error code does. */
static void on_log(int level, const char *msg, void *arg)
{
	struct ycsb_drv *d = arg;

	if (level >= 2 && !d->why[0])
		snprintf(d->why, sizeof(d->why), "%s", msg);
}

static const char *connect_hint(int rc, const char *servers)
{
	static _Thread_local char buf[320];

	switch (rc) {
	case -ECONNREFUSED:
		/* like the Redis and memcached drivers: how to start one */
		snprintf(buf, sizeof(buf), "start it with: rkv-server --listen "
			 "%.256s", servers);
		return buf;
	case -EACCES:
		return "wrong or no secret: $RKV_SECRET_FILE";
	case -ETIMEDOUT:
		return "no answer in time";
	case -EUSERS:
		return "the server has its --max-clients clients";
	case -EPROTO:
		return "not an rkv-server, or another protocol version";
	default:
		return NULL;
	}
}

static int rkv_create_drv(const struct ycsb_drv_cfg *cfg,
			  struct ycsb_drv **out, char *err, size_t errlen)
{
	struct rkv_client_opts o;
	struct ycsb_drv *d;
	char name[32];
	int rc;

	d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	d->p = cfg->p;
	d->one_field = !cfg->p->writeallfields;
	/* a cluster in etcd (etcd://HOST:PORT/CLUSTER) or a cluster file
	 * (a path: it starts with / or .): its map, as is */
	int as_map = strncmp(cfg->servers, "etcd://", 7) == 0 ||
		     cfg->servers[0] == '/' || cfg->servers[0] == '.';

	d->servers = as_map ? strdup(cfg->servers)
			    : with_scheme(cfg->servers, cfg->provider, err,
					  errlen);
	if (!d->servers) {
		if (as_map)
			snprintf(err, errlen, "out of memory");
		rc = as_map ? -ENOMEM : -EINVAL;
		goto err_free;
	}
	snprintf(name, sizeof(name), "rkv-ycsb/%u", cfg->tid);
	rkv_client_opts_init(&o);
	if (as_map)
		o.cluster_file = d->servers;
	else
		o.servers = d->servers;
	o.name = name;
	o.max_inflight = cfg->batch;
	o.max_value = cfg->record_len < 4096 ? 4096 :
		      (unsigned)cfg->record_len;
	o.log_fn = on_log;
	o.log_arg = d;
	rc = rkv_client_create(&o, &d->c);
	if (rc) {
		const char *why = d->why[0] && !strstr(d->why, strerror(-rc)) ?
				  d->why : connect_hint(rc, d->servers);

		snprintf(err, errlen, "cannot connect to rkv at %s: %s%s%s%s",
			 d->servers, strerror(-rc), why ? " (" : "",
			 why ? why : "", why ? ")" : "");
		goto err_free_servers;
	}
	*out = d;
	return 0;

err_free_servers:
	free(d->servers);
err_free:
	free(d);
	return rc;
}

static void rkv_destroy_drv(struct ycsb_drv *d)
{
	if (!d)
		return;
	rkv_client_destroy(d->c);
	free(d->servers);
	free(d);
}

/* The new value of an update or RMW: the old record with op's field
 * rewritten, or op's whole record. */
static int new_value(struct ycsb_op *op, const void *old, size_t old_len,
		     void *out, size_t out_cap, size_t *out_len)
{
	long n;

	if (!op->one_field) {
		if (out_cap < op->val_len)
			return -EMSGSIZE;
		memcpy(out, op->val, op->val_len);
		*out_len = op->val_len;
		return RKV_RMW_WRITE;
	}
	n = ycsb_record_splice(op->drv->p, old, old_len, op->field, op->val,
			       op->val_len, out, out_cap);
	if (n < 0)
		return (int)n;
	*out_len = (size_t)n;
	return RKV_RMW_WRITE;
}

/* Update of one field: rewrite it in the record as it is. */
static int update_fn(const void *old, size_t old_len, void *out,
		     size_t out_cap, size_t *out_len, void *arg)
{
	if (!old)
		return -ENOENT;
	return new_value(arg, old, old_len, out, out_cap, out_len);
}

/* RMW callback: keep the old record for the harness's check, write the
 * new one.  May run more than once; each run does the same. */
static int rmw_fn(const void *old, size_t old_len, void *out, size_t out_cap,
		  size_t *out_len, void *arg)
{
	struct ycsb_op *op = arg;

	if (!old)
		return -ENOENT;
	memcpy(op->buf, old, old_len < op->buf_cap ? old_len : op->buf_cap);
	op->out_len = old_len;
	return new_value(op, old, old_len, out, out_cap, out_len);
}

static int rkv_submit_op(struct ycsb_drv *d, struct ycsb_op *op)
{
	struct rkv_op *r = &op->rop;

	memset(r, 0, sizeof(*r));
	r->key = op->key;
	r->key_len = op->key_len;
	r->user = op;
	op->drv = d;
	switch (op->type) {
	case YCSB_READ:
		r->type = RKV_OP_GET;
		r->buf = op->buf;
		r->buf_cap = op->buf_cap;
		break;
	case YCSB_UPDATE:
		if (op->one_field) {
			r->type = RKV_OP_RMW;
			r->fn = update_fn;
			r->fn_arg = op;
			break;
		}
		/* fall through */
	case YCSB_INSERT:
		r->type = RKV_OP_PUT;
		r->val = op->val;
		r->val_len = op->val_len;
		break;
	case YCSB_RMW:
		r->type = RKV_OP_RMW;
		r->fn = rmw_fn;
		r->fn_arg = op;
		break;
	default:
		return -EOPNOTSUPP;
	}
	return rkv_submit(d->c, r);
}

static int rkv_poll_ops(struct ycsb_drv *d, struct ycsb_op **done, int max)
{
	struct rkv_op *r[64];
	int n = rkv_poll(d->c, r, max < 64 ? max : 64);

	if (n == 0 && rkv_wait(d->c, IDLE_WAIT_US) < 0) {
		struct timespec ts = { 0, IDLE_SLEEP_NS };

		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < n; i++) {
		struct ycsb_op *op = r[i]->user;

		op->status = r[i]->status;
		op->rtts = r[i]->rtts;
		if (op->type == YCSB_READ)
			op->out_len = r[i]->out_len;
		done[i] = op;
	}
	return n;
}

static unsigned rkv_inflight_ops(const struct ycsb_drv *d)
{
	return rkv_inflight(d->c);
}

static void rkv_stats_get(struct ycsb_drv *d, const uint64_t *counts,
			  struct ycsb_drv_stats *st)
{
	struct rkv_client_stats s;

	rkv_client_stats(d->c, &s);
	memset(st, 0, sizeof(*st));
	st->has_rtts = 1;
	st->has_retries = 1;
	st->retries[YCSB_READ] = s.get.retries;
	if (d->one_field) {
		/* one-field updates are librkv rmws: they share its rmw
		 * counter with RMW (to RMW when both ran); inserts have
		 * the put counter */
		if (counts[YCSB_RMW] || !counts[YCSB_UPDATE])
			st->retries[YCSB_RMW] = s.rmw.retries;
		else
			st->retries[YCSB_UPDATE] = s.rmw.retries;
		st->retries[YCSB_INSERT] = s.put.retries;
	} else {
		st->retries[YCSB_RMW] = s.rmw.retries;
		/* update and insert share librkv's put counter: give it
		 * to the one that ran (to update when both did) */
		if (counts[YCSB_UPDATE] || !counts[YCSB_INSERT])
			st->retries[YCSB_UPDATE] = s.put.retries;
		else
			st->retries[YCSB_INSERT] = s.put.retries;
	}
	st->cache_hits = s.cache_hits;
	st->cache_misses = s.cache_misses;
	st->lock_waits = s.lock_waits;
	st->lock_steals = s.lock_steals;
	st->doorbells = s.doorbells;
}

static void rkv_stats_reset_drv(struct ycsb_drv *d)
{
	rkv_client_stats_reset(d->c);
}

const struct ycsb_drv_ops ycsb_drv_rkv = {
	.name = "rkv",
	.unsupported = rkv_unsupported,
	.create = rkv_create_drv,
	.destroy = rkv_destroy_drv,
	.submit = rkv_submit_op,
	.poll = rkv_poll_ops,
	.inflight = rkv_inflight_ops,
	.stats = rkv_stats_get,
	.stats_reset = rkv_stats_reset_drv,
};
