/* SPDX-License-Identifier: MIT */
/*
 * drv_redis.c - the Redis driver (hiredis, one connection per thread).
 *
 * A record is one string value, as in rkv and memcached: GET reads it, SET
 * writes it whole.  Pipelining: up to --batch operations are outstanding;
 * commands are appended to hiredis's output buffer, flushed at each poll,
 * and replies come back in order, so a FIFO of (operation, expected reply)
 * pairs maps each reply to its operation.
 *
 *   read        GET key
 *   update      writeallfields=true: SET key record.  One field (the
 *               default): SETRANGE key offset field when every field has
 *               the same length (fieldlengthdistribution=constant: field f
 *               is at f * fieldlength); else EVALSHA of SPLICE_LUA, which
 *               rewrites the field and the record's length header in the
 *               server, in one atomic command (a field of a new length
 *               moves the fields after it, which SETRANGE cannot do)
 *   insert      SET key record (+ ZADD ycsb:keys 0 key when the workload
 *               scans)
 *   scan        ZRANGEBYLEX ycsb:keys [key + LIMIT 0 len, then MGET of
 *               the keys it returned (two round trips, as YCSB's redis
 *               binding does with its index)
 *   read-modify-write  GET key, then the update's command once the GET
 *               returned (YCSB's read-then-update), counted as one
 *               operation
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "ycsb.h"

#define SCAN_INDEX "ycsb:keys"

/* ARGV: fieldcount, header digits per length, field, its new length in
 * those digits, its bytes.  Rewrites the field and its length. */
static const char SPLICE_LUA[] =
	"local v = redis.call('GET', KEYS[1])\n"
	"if not v then return redis.error_reply('ERR no such record') end\n"
	"local n, w, f = tonumber(ARGV[1]), tonumber(ARGV[2]), "
	"tonumber(ARGV[3])\n"
	"local off = n * w\n"
	"for i = 0, f - 1 do\n"
	"  off = off + tonumber(string.sub(v, i * w + 1, i * w + w), 16)\n"
	"end\n"
	"local len = tonumber(string.sub(v, f * w + 1, f * w + w), 16)\n"
	"redis.call('SET', KEYS[1], string.sub(v, 1, f * w) .. ARGV[4] ..\n"
	"  string.sub(v, f * w + w + 1, off) .. ARGV[5] ..\n"
	"  string.sub(v, off + len + 1))\n"
	"return 1\n";

struct ycsb_drv {
	redisContext *c;
	const struct ycsb_props *p;
	unsigned lenw;            /* header digits per length; 0: constant */
	char sha[48];             /* SPLICE_LUA's, when lenw */
	int scan_index;
	size_t record_len;
	unsigned batch;           /* most operations outstanding */
	unsigned nops;            /* operations outstanding */
	struct ycsb_op **fifo;    /* one entry per reply expected */
	unsigned fcap, fhead, fcount;
};

static const char *redis_unsupported(enum ycsb_op_type t)
{
	(void)t;
	return NULL;
}

int ycsb_hostport(const char *s, char *host, size_t hostlen, int *port,
		  int default_port)
{
	const char *colon = strrchr(s, ':');
	size_t hl = colon ? (size_t)(colon - s) : strlen(s);
	char *end;
	long p = default_port;

	if (strstr(s, "://") || strchr(s, ','))
		return -EINVAL;
	if (colon) {
		p = strtol(colon + 1, &end, 10);
		if (!colon[1] || *end || p < 1 || p > 65535)
			return -EINVAL;
	}
	if (!hl || hl >= hostlen)
		return -EINVAL;
	memcpy(host, s, hl);
	host[hl] = 0;
	*port = (int)p;
	return 0;
}

static int redis_create(const struct ycsb_drv_cfg *cfg, struct ycsb_drv **out,
			char *err, size_t errlen)
{
	struct timeval tv = { .tv_sec = 5 };
	char host[256];
	struct ycsb_drv *d;
	redisReply *r;
	int port;

	if (ycsb_hostport(cfg->servers, host, sizeof(host), &port, 6379)) {
		snprintf(err, errlen, "--servers %s: want HOST:PORT for redis",
			 cfg->servers);
		return -EINVAL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		goto err_nomem;
	d->fcap = cfg->batch * 2 + 4;
	d->fifo = calloc(d->fcap, sizeof(*d->fifo));
	if (!d->fifo)
		goto err_free;
	d->scan_index = cfg->scan_index;
	d->p = cfg->p;
	d->lenw = ycsb_len_width(cfg->p);
	d->batch = cfg->batch;
	d->record_len = cfg->record_len;
	d->c = redisConnectWithTimeout(host, port, tv);
	if (!d->c || d->c->err) {
		snprintf(err, errlen, "cannot connect to redis at %s:%d: %s "
			 "(start it with: redis-server --port %d --save '')",
			 host, port, d->c ? d->c->errstr : "out of memory",
			 port);
		goto err_free_ctx;
	}
	redisSetTimeout(d->c, tv);
	r = redisCommand(d->c, "PING");
	if (!r || r->type == REDIS_REPLY_ERROR) {
		snprintf(err, errlen, "redis at %s:%d does not answer PING: "
			 "%s", host, port, r ? r->str : d->c->errstr);
		if (r)
			freeReplyObject(r);
		goto err_free_ctx;
	}
	freeReplyObject(r);
	if (d->lenw && !cfg->p->writeallfields) {
		r = redisCommand(d->c, "SCRIPT LOAD %s", SPLICE_LUA);
		if (!r || r->type != REDIS_REPLY_STRING ||
		    r->len >= sizeof(d->sha)) {
			snprintf(err, errlen, "redis at %s:%d: SCRIPT LOAD of "
				 "the field update script failed: %s", host,
				 port, r && r->type == REDIS_REPLY_ERROR ?
				 r->str : d->c->errstr);
			if (r)
				freeReplyObject(r);
			goto err_free_ctx;
		}
		memcpy(d->sha, r->str, r->len + 1);
		freeReplyObject(r);
	}
	*out = d;
	return 0;

err_free_ctx:
	if (d->c)
		redisFree(d->c);
	free(d->fifo);
	free(d);
	return -ECONNREFUSED;
err_free:
	free(d);
err_nomem:
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

static void redis_destroy(struct ycsb_drv *d)
{
	if (!d)
		return;
	redisFree(d->c);
	free(d->fifo);
	free(d);
}

static void push(struct ycsb_drv *d, struct ycsb_op *op)
{
	d->fifo[(d->fhead + d->fcount) % d->fcap] = op;
	d->fcount++;
	op->pending++;
}

static int append(struct ycsb_drv *d, struct ycsb_op *op, int argc,
		  const char **argv, const size_t *len)
{
	if (redisAppendCommandArgv(d->c, argc, argv, len) != REDIS_OK)
		return -ENOMEM;
	push(d, op);
	return 0;
}

static int append_set(struct ycsb_drv *d, struct ycsb_op *op)
{
	const char *argv[3] = { "SET", op->key, op->val };
	size_t len[3] = { 3, op->key_len, op->val_len };

	return append(d, op, 3, argv, len);
}

/* An update's write: the whole record, or one field (SETRANGE at its
 * offset when fields have fixed offsets, else the splice script). */
static int append_update(struct ycsb_drv *d, struct ycsb_op *op)
{
	char off[24], nf[16], w[8], f[16], fl[16];

	if (!op->one_field)
		return append_set(d, op);
	if (!d->lenw) {
		const char *argv[4] = { "SETRANGE", op->key, off, op->val };
		size_t len[4] = { 8, op->key_len, 0, op->val_len };

		len[2] = (size_t)snprintf(off, sizeof(off), "%zu",
					  (size_t)op->field *
					  d->p->fieldlength);
		return append(d, op, 4, argv, len);
	}
	const char *argv[9] = { "EVALSHA", d->sha, "1", op->key, nf, w, f, fl,
				op->val };
	size_t len[9] = { 7, strlen(d->sha), 1, op->key_len, 0, 0, 0, 0,
			  op->val_len };

	len[4] = (size_t)snprintf(nf, sizeof(nf), "%u", d->p->fieldcount);
	len[5] = (size_t)snprintf(w, sizeof(w), "%u", d->lenw);
	len[6] = (size_t)snprintf(f, sizeof(f), "%u", op->field);
	len[7] = (size_t)snprintf(fl, sizeof(fl), "%0*zx", (int)d->lenw,
				  op->val_len);
	return append(d, op, 9, argv, len);
}

static int redis_submit(struct ycsb_drv *d, struct ycsb_op *op)
{
	const char *argv[8];
	size_t len[8];
	char lo[40], lim[16];
	int rc;

	if (d->nops >= d->batch)
		return -EAGAIN;
	op->stage = 0;
	op->pending = 0;
	op->records = 0;
	switch (op->type) {
	case YCSB_READ:
	case YCSB_RMW:
		argv[0] = "GET";
		len[0] = 3;
		argv[1] = op->key;
		len[1] = op->key_len;
		rc = append(d, op, 2, argv, len);
		break;
	case YCSB_UPDATE:
		rc = append_update(d, op);
		break;
	case YCSB_INSERT:
		rc = append_set(d, op);
		if (!rc && d->scan_index) {
			argv[0] = "ZADD";
			argv[1] = SCAN_INDEX;
			argv[2] = "0";
			argv[3] = op->key;
			len[0] = 4;
			len[1] = strlen(SCAN_INDEX);
			len[2] = 1;
			len[3] = op->key_len;
			rc = append(d, op, 4, argv, len);
		}
		break;
	case YCSB_SCAN:
		snprintf(lo, sizeof(lo), "[%.*s", (int)op->key_len, op->key);
		snprintf(lim, sizeof(lim), "%u", op->scan_len);
		argv[0] = "ZRANGEBYLEX";
		argv[1] = SCAN_INDEX;
		argv[2] = lo;
		argv[3] = "+";
		argv[4] = "LIMIT";
		argv[5] = "0";
		argv[6] = lim;
		for (int i = 0; i < 7; i++)
			len[i] = strlen(argv[i]);
		rc = append(d, op, 7, argv, len);
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (rc)
		return rc;
	op->status = 0;
	d->nops++;
	return 0;
}

/* Stage 1 of a scan: MGET the keys the index returned. */
static int scan_mget(struct ycsb_drv *d, struct ycsb_op *op, redisReply *r)
{
	size_t n = r->elements;
	const char **argv = malloc((n + 1) * sizeof(*argv));
	size_t *len = malloc((n + 1) * sizeof(*len));
	int rc;

	if (!argv || !len) {
		free(argv);
		free(len);
		return -ENOMEM;
	}
	argv[0] = "MGET";
	len[0] = 4;
	for (size_t i = 0; i < n; i++) {
		argv[i + 1] = r->element[i]->str;
		len[i + 1] = r->element[i]->len;
	}
	rc = append(d, op, (int)n + 1, argv, len);
	free(argv);
	free(len);
	return rc;
}

/* Apply one reply to its operation.  Returns 1 when the operation is now
 * finished, 0 when it waits for more, -errno on a client-wide failure. */
static int on_reply(struct ycsb_drv *d, struct ycsb_op *op, redisReply *r)
{
	op->pending--;
	if (r->type == REDIS_REPLY_ERROR) {
		op->status = -EIO;
		return op->pending == 0;
	}
	switch (op->type) {
	case YCSB_READ:
	case YCSB_RMW:
		if (op->stage == 1)
			break;          /* the RMW's SET */
		if (r->type == REDIS_REPLY_NIL) {
			op->status = -ENOENT;
			return 1;
		}
		if (r->type != REDIS_REPLY_STRING) {
			op->status = -EPROTO;
			return 1;
		}
		op->out_len = r->len;
		memcpy(op->buf, r->str,
		       r->len < op->buf_cap ? r->len : op->buf_cap);
		if (op->type == YCSB_RMW) {
			op->stage = 1;
			if (append_update(d, op))
				return -ENOMEM;
		}
		break;
	case YCSB_SCAN:
		if (r->type != REDIS_REPLY_ARRAY) {
			op->status = -EPROTO;
			return op->pending == 0;
		}
		if (op->stage == 0) {
			op->stage = 1;
			if (r->elements && scan_mget(d, op, r))
				return -ENOMEM;
			break;
		}
		for (size_t i = 0; i < r->elements; i++) {
			redisReply *e = r->element[i];

			if (e->type != REDIS_REPLY_STRING ||
			    ycsb_record_shape(d->p, e->str, e->len))
				op->status = -EBADMSG;
		}
		op->records = (unsigned)r->elements;
		break;
	default:
		break;
	}
	return op->pending == 0;
}

static int redis_poll(struct ycsb_drv *d, struct ycsb_op **done, int max)
{
	int n = 0, wdone = 0;
	void *reply;

	if (!d->fcount)
		return 0;
	while (!wdone)
		if (redisBufferWrite(d->c, &wdone) != REDIS_OK)
			return -ECONNRESET;
	/* one reply, blocking; then whatever is already buffered */
	if (redisGetReply(d->c, &reply) != REDIS_OK || !reply)
		return -ECONNRESET;
	do {
		struct ycsb_op *op = d->fifo[d->fhead];
		int rc;

		d->fhead = (d->fhead + 1) % d->fcap;
		d->fcount--;
		rc = on_reply(d, op, reply);
		freeReplyObject(reply);
		if (rc < 0)
			return rc;
		if (rc) {
			done[n++] = op;
			d->nops--;
		}
		if (n >= max || !d->fcount)
			break;
		if (redisReaderGetReply(d->c->reader, &reply) != REDIS_OK)
			return -EPROTO;
	} while (reply);
	return n;
}

static unsigned redis_inflight(const struct ycsb_drv *d)
{
	return d->nops;
}

static void redis_stats(struct ycsb_drv *d, const uint64_t *counts,
			struct ycsb_drv_stats *st)
{
	(void)d;
	(void)counts;
	memset(st, 0, sizeof(*st));
}

static void redis_stats_reset(struct ycsb_drv *d)
{
	(void)d;
}

const struct ycsb_drv_ops ycsb_drv_redis = {
	.name = "redis",
	.unsupported = redis_unsupported,
	.create = redis_create,
	.destroy = redis_destroy,
	.submit = redis_submit,
	.poll = redis_poll,
	.inflight = redis_inflight,
	.stats = redis_stats,
	.stats_reset = redis_stats_reset,
};
