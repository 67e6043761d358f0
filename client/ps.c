/* SPDX-License-Identifier: MIT */
/*
 * ps.c - the parameter-server API (client/rkv_ps.h): tensors split into
 * shards stored as KV values, pulled with GETs and pushed with
 * read-modify-writes, through the pipelined interface (rkv_submit /
 * rkv_poll) so that every shard of every request in flight shares
 * doorbells.
 *
 * The engine (struct rkv_ps) owns max_inflight shard ops, each with a
 * staging buffer of max_value bytes (a GET lands there; a create's PUT is
 * encoded there).  Requests wait in FIFO order; fill() gives free shard
 * ops to the oldest request that still has shards to start, and complete()
 * accounts a finished shard.  A request is finished when each of its
 * shards finished (or was skipped after the request's first error: the
 * shards not yet started are not started).  Nothing blocks except
 * rkv_ps_wait and the synchronous calls built on it, which poll with a
 * short sleep once idle, like librkv's synchronous calls.
 *
 * A push's callback (push_fn) runs under the shard's slot lock; it checks
 * the stored header (magic, incarnation, length) and writes the new
 * header (version + 1) and elements into the output block.  It may run
 * more than once (lost race, stolen lock); only the last run is applied.
 * Elements in a block are not 4-byte aligned (they follow the key), so
 * they are processed through an aligned stack buffer.
 *
 * ASSIGN does not need the old elements, so it goes through the XPUT
 * path of ops.c (client_internal.h): with a trusted cached location whose
 * block the cache describes, assign_xfn builds the new shard from the old
 * one's 16-byte header alone, and one doorbell WRITEs the new block and
 * CASes the slot from the cached word (1 RTT, the shard's bytes moved
 * once).  Why this keeps the push properties:
 *   - versions: the shard version lives in the value's header, so a blind
 *     write must know the old one.  The location cache keeps, beside the
 *     slot word W it saw, the first 16 value bytes of the block W names
 *     (magic, incarnation, version).  A block is immutable while a slot
 *     names it, so if the CAS from W succeeds, the block replaced is
 *     exactly the one whose header we used, and the new version is its
 *     version + 1 - the same chain push_fn builds under the lock.  (ABA
 *     on W is the put path's: W carries a 9-bit slot version and a block
 *     offset that is reused only after the grace period; the cache entry
 *     is trusted only when younger than the grace period.)
 *   - serialization: the CAS expects the unlocked word W.  A SUM holding
 *     the lock has W|LOCK in the slot, so the ASSIGN's CAS fails; one that
 *     released has a new word.  Conversely a SUM whose lock CAS expected W
 *     fails once the ASSIGN published.  Either order, never a mixture, and
 *     unlike a plain put an XPUT never CASes over a lock (no lost SUM).
 *   - a lost CAS publishes nothing (the block is returned) and the shard
 *     op carries on as an RMW with push_fn, which also reports -ENOENT /
 *     -ESTALE properly; assign_xfn declines (RMW path) whenever the cached
 *     header is not this incarnation's shard of the right length.
 *
 * A pull into a buffer registered by the engine (tcp and shm only: there
 * a registration is bookkeeping, see mr_get) uses XGET: each shard's
 * elements are READ straight into the caller's buffer and the checksum is
 * verified over the pieces before the shard counts as read.
 */
#include "client_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "gpu/gpu.h"
#include "ps_internal.h"
#include "rtime.h"

#define PS_KEY_MAX (3 + RKV_PS_NAME_MAX + 1 + 20 + 1)
#define PS_POLL_MAX 32
#define APPLY_CHUNK 256
#define PS_MR_CACHE 8

enum req_kind {
	REQ_PULL,   /* GET each shard into staging, check, copy out */
	REQ_PUSH,   /* RMW each shard with push_fn */
	REQ_CREATE, /* PUT each shard (header + init or zeros) */
	REQ_DELETE, /* DELETE each shard (absent is fine) */
};

struct rkv_ps_tensor {
	struct rkv_ps *ps;
	char prefix[3 + RKV_PS_NAME_MAX + 2]; /* "ps/<name>/" */
	char name[RKV_PS_NAME_MAX + 1];
	enum rkv_ps_dtype dtype;
	uint64_t len;
	uint32_t shard_elems;
	uint64_t nshards;
	uint32_t nonce;
	unsigned outstanding;   /* requests not yet waited for */
};

struct rkv_ps_req {
	struct rkv_ps *ps;
	struct rkv_ps_tensor *t;
	enum req_kind kind;
	enum rkv_ps_rule rule;
	float lr;
	float *buf;             /* pull destination */
	const float *src;       /* push source; create init (or NULL) */
	uint64_t next;          /* next shard to start */
	uint64_t ndone;         /* shards finished or skipped */
	int err;                /* first error */
	int finished;
	uint64_t vmin, vmax;    /* shard versions seen */
	struct ps_mr *mr;       /* pull: buf's registration, or NULL */
	struct rkv_ps_req *qnext; /* FIFO of unfinished requests */
};

/* A registration of caller memory (pull destinations), kept for reuse. */
struct ps_mr {
	struct rkv_mr *mr;      /* NULL: entry unused */
	unsigned refs;          /* requests in flight using it */
	uint64_t used;          /* LRU stamp */
};

struct shard_op {
	struct rkv_op op;
	struct rkv_ps_req *req; /* NULL: free */
	uint64_t shard;
	uint64_t version;       /* push: the version push_fn wrote */
	struct rkv_xop x;       /* XGET / XPUT descriptor */
	char *stage;            /* stage_size bytes */
	char key[PS_KEY_MAX];
};

struct rkv_ps {
	struct rkv_client *c;
	struct shard_op *ops;
	unsigned nops;
	unsigned busy;
	size_t stage_size;
	char *stage_mem;
	struct rkv_ps_req *head, *tail;
	int direct;             /* XGET into caller memory allowed */
	struct ps_mr mrc[PS_MR_CACHE];
	uint64_t mr_clock;
};

const char *rkv_ps_rule_str(enum rkv_ps_rule r)
{
	switch (r) {
	case RKV_PS_SUM: return "sum";
	case RKV_PS_ASSIGN: return "assign";
	case RKV_PS_SGD: return "sgd";
	}
	return "?";
}

/* ------------------------------------------------------------ helpers */

static uint64_t shard_len(const struct rkv_ps_tensor *t, uint64_t i)
{
	uint64_t off = i * t->shard_elems;

	return t->len - off < t->shard_elems ? t->len - off : t->shard_elems;
}

/*
 * The header of a value of val_len bytes, read from head (host memory),
 * that should be shard i of t: 0 with *h, or -ESTALE when the length is
 * not shard i's, or it is not a shard of this incarnation of t.
 */
static int shard_hdr(const struct rkv_ps_tensor *t, uint64_t i,
		     size_t val_len, const void *head, struct ps_shard_hdr *h)
{
	if (val_len != RKV_PS_SHARD_HDR + (size_t)shard_len(t, i) * 4)
		return -ESTALE;
	memcpy(h, head, sizeof(*h));
	return h->magic == PS_SHARD_MAGIC && h->nonce == t->nonce ? 0
								   : -ESTALE;
}

/*
 * The header of the next version of shard i of t, whose current value
 * (val_len bytes, header at head in host memory) shard_hdr checks: 0 with
 * *next, -ESTALE, or -EMSGSIZE when the shard does not fit cap.  The new
 * value has the old one's length.
 */
static int shard_next_hdr(const struct rkv_ps_tensor *t, uint64_t i,
			  size_t val_len, const void *head, size_t cap,
			  struct ps_shard_hdr *next)
{
	int rc = shard_hdr(t, i, val_len, head, next);

	if (rc)
		return rc;
	if (val_len > cap)
		return -EMSGSIZE;
	next->version++;
	return 0;
}

static int check_name(const char *name)
{
	size_t n;

	if (!name)
		return -EINVAL;
	n = strnlen(name, RKV_PS_NAME_MAX + 1);
	if (n == 0 || n > RKV_PS_NAME_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (name[i] == '/' || (unsigned char)name[i] < 0x20 ||
		    name[i] == 0x7f)
			return -EINVAL;
	return 0;
}

static int check_dtype(enum rkv_ps_dtype d)
{
	switch (d) {
	case RKV_PS_FLOAT32:
		return 0;
	case RKV_PS_FLOAT16:
	case RKV_PS_BFLOAT16:
		return -EOPNOTSUPP;
	}
	return -EINVAL;
}

static size_t meta_key(const char *name, char *key)
{
	return (size_t)snprintf(key, PS_KEY_MAX, "ps/%s", name);
}

static uint32_t new_nonce(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)(rkv_now_ns() ^ ((uint64_t)getpid() << 20));
	return v ? v : 1;
}

/* Fill t's geometry from a metadata record. */
static void tensor_init(struct rkv_ps_tensor *t, struct rkv_ps *ps,
			const char *name, const struct ps_meta *m)
{
	memset(t, 0, sizeof(*t));
	t->ps = ps;
	snprintf(t->name, sizeof(t->name), "%s", name);
	snprintf(t->prefix, sizeof(t->prefix), "ps/%s/", name);
	t->dtype = (enum rkv_ps_dtype)m->dtype;
	t->len = m->len;
	t->shard_elems = m->shard_elems;
	t->nshards = (m->len + m->shard_elems - 1) / m->shard_elems;
	t->nonce = m->nonce;
}

/* Decode a metadata value.  Returns 0 or -EINVAL (not PS metadata). */
static int meta_decode(const void *v, size_t len, struct ps_meta *m)
{
	if (len != sizeof(*m))
		return -EINVAL;
	memcpy(m, v, sizeof(*m));
	if (m->magic != PS_META_MAGIC || !m->len || !m->shard_elems)
		return -EINVAL;
	return 0;
}

/* ----------------------------------------------------- update rules */

static void apply(enum rkv_ps_rule rule, float lr, char *dst,
		  const char *old, const float *v, uint64_t n)
{
	float a[APPLY_CHUNK];

	for (uint64_t i = 0; i < n; i += APPLY_CHUNK) {
		size_t k = n - i < APPLY_CHUNK ? (size_t)(n - i) : APPLY_CHUNK;

		if (rule == RKV_PS_ASSIGN) {
			memcpy(dst + i * 4, v + i, k * 4);
			continue;
		}
		memcpy(a, old + i * 4, k * 4);
		if (rule == RKV_PS_SUM) {
			for (size_t j = 0; j < k; j++)
				a[j] += v[i + j];
		} else {
			for (size_t j = 0; j < k; j++)
				a[j] -= lr * v[i + j];
		}
		memcpy(dst + i * 4, a, k * 4);
	}
}

static int push_fn(const void *old, size_t old_len, void *out, size_t cap,
		   size_t *out_len, void *arg)
{
	struct shard_op *so = arg;
	const struct rkv_ps_req *r = so->req;
	const struct rkv_ps_tensor *t = r->t;
	struct ps_shard_hdr h;
	int rc;

	if (!old)
		return -ENOENT; /* deleted: do not create it */
	rc = shard_next_hdr(t, so->shard, old_len, old, cap, &h);
	if (rc)
		return rc;
	so->version = h.version;
	memcpy(out, &h, sizeof(h));
	apply(r->rule, r->lr, (char *)out + RKV_PS_SHARD_HDR,
	      (const char *)old + RKV_PS_SHARD_HDR,
	      r->src + so->shard * t->shard_elems, shard_len(t, so->shard));
	*out_len = old_len;
	return RKV_RMW_WRITE;
}

/* XPUT builder of an ASSIGN (see the top of the file): only the old
 * shard's header is known.  Declining sends the op down the RMW path. */
static int assign_xfn(const struct blk_info *old, void *out, size_t cap,
		      size_t *out_len, void *arg)
{
	struct shard_op *so = arg;
	const struct rkv_ps_req *r = so->req;
	const struct rkv_ps_tensor *t = r->t;
	struct ps_shard_hdr h;

	if (shard_next_hdr(t, so->shard, old->val_len, old->head, cap, &h))
		return RKV_RMW_KEEP;
	so->version = h.version;
	memcpy(out, &h, sizeof(h));
	memcpy((char *)out + RKV_PS_SHARD_HDR,
	       r->src + so->shard * t->shard_elems,
	       old->val_len - RKV_PS_SHARD_HDR);
	*out_len = old->val_len;
	return RKV_RMW_WRITE;
}

/* ---------------------------------------------------- registrations */

/*
 * A registration covering [p, p + len), from the cache or new (evicting
 * the least recently used idle entry).  NULL when none can be had: the
 * pull then goes through the staging buffers.  On tcp and shm a
 * registration only records the range (nothing is pinned), so an entry
 * that outlives the caller's buffer is harmless: it is used only for a
 * range the caller passes again.  Verbs would pin pages and need
 * invalidation on free (what RDMA libraries hook munmap for), so the
 * engine does not register caller memory there (ps->direct is 0).
 */
static struct ps_mr *mr_get(struct rkv_ps *ps, void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p;
	struct ps_mr *victim = NULL;

	for (unsigned i = 0; i < PS_MR_CACHE; i++) {
		struct ps_mr *e = &ps->mrc[i];
		uintptr_t ea;

		if (!e->mr) {
			if (!victim || victim->mr)
				victim = e;
			continue;
		}
		ea = (uintptr_t)e->mr->addr;
		if (a >= ea && len <= e->mr->length &&
		    a - ea <= e->mr->length - len) {
			e->refs++;
			e->used = ++ps->mr_clock;
			return e;
		}
		if (!e->refs && (!victim || (victim->mr && e->used < victim->used)))
			victim = e;
	}
	if (!victim)
		return NULL;
	if (victim->mr) {
		rkv_mr_dereg(victim->mr);
		victim->mr = NULL;
	}
	if (rkv_mr_reg(ps->c->tp, p, len, RKV_ACCESS_LOCAL_WRITE, &victim->mr)) {
		victim->mr = NULL;
		return NULL;
	}
	victim->refs = 1;
	victim->used = ++ps->mr_clock;
	return victim;
}

static void mr_put(struct ps_mr *e)
{
	if (e && e->refs)
		e->refs--;
}

/* ----------------------------------------------------------- engine */

static void req_unlink(struct rkv_ps *ps, struct rkv_ps_req *r)
{
	struct rkv_ps_req **pp = &ps->head, *prev = NULL;

	while (*pp && *pp != r) {
		prev = *pp;
		pp = &(*pp)->qnext;
	}
	if (!*pp)
		return;
	*pp = r->qnext;
	if (ps->tail == r)
		ps->tail = prev;
	r->qnext = NULL;
}

static void req_account(struct rkv_ps_req *r, int status)
{
	if (status && !r->err) {
		r->err = status;
		/* do not start the rest */
		r->ndone += r->t->nshards - r->next;
		r->next = r->t->nshards;
	}
	r->ndone++;
	if (r->ndone >= r->t->nshards && !r->finished) {
		r->finished = 1;
		mr_put(r->mr); /* no shard op of r is in flight now */
		r->mr = NULL;
		req_unlink(r->ps, r);
	}
}

/* Check a pulled shard in so->stage and copy its elements out. */
static int pull_done(struct shard_op *so)
{
	struct rkv_ps_req *r = so->req;
	const struct rkv_ps_tensor *t = r->t;
	uint64_t n = shard_len(t, so->shard);
	struct ps_shard_hdr h;
	int rc = shard_hdr(t, so->shard, so->op.out_len, so->stage, &h);

	if (rc)
		return rc;
	if (!(so->op.type == RKV_OP_XGET && so->x.split))
		memcpy(r->buf + so->shard * t->shard_elems,
		       so->stage + RKV_PS_SHARD_HDR, (size_t)n * 4);
	so->version = h.version;
	return 0;
}

static void complete(struct rkv_ps *ps, struct shard_op *so)
{
	struct rkv_ps_req *r = so->req;
	int st = so->op.status;

	if (st == 0 && r->kind == REQ_PULL)
		st = pull_done(so);
	if (r->kind == REQ_DELETE && st == -ENOENT)
		st = 0;
	if (st == 0 && (r->kind == REQ_PULL || r->kind == REQ_PUSH)) {
		if (so->version < r->vmin)
			r->vmin = so->version;
		if (so->version > r->vmax)
			r->vmax = so->version;
	}
	so->req = NULL;
	ps->busy--;
	req_account(r, st);
}

/* Build shard op so for shard i of r. */
static void build(struct rkv_ps *ps, struct shard_op *so,
		  struct rkv_ps_req *r, uint64_t i)
{
	const struct rkv_ps_tensor *t = r->t;
	int kl = snprintf(so->key, sizeof(so->key), "%s%" PRIu64, t->prefix, i);
	uint64_t n = shard_len(t, i);

	so->req = r;
	so->shard = i;
	so->version = 0;
	so->op = (struct rkv_op){ .key = so->key, .key_len = (size_t)kl,
				  .user = so };
	switch (r->kind) {
	case REQ_PULL:
		so->op.type = RKV_OP_GET;
		so->op.buf = so->stage;
		so->op.buf_cap = ps->stage_size;
		if (r->mr) {
			so->x = (struct rkv_xop){
				.head = RKV_PS_SHARD_HDR,
				.tail = r->buf + i * t->shard_elems,
				.tail_len = (size_t)n * 4,
				.tail_lkey = r->mr->mr->lkey };
			so->op.type = RKV_OP_XGET;
			so->op.val = &so->x;
		}
		break;
	case REQ_PUSH:
		so->op.type = RKV_OP_RMW;
		so->op.fn = push_fn;
		so->op.fn_arg = so;
		if (r->rule == RKV_PS_ASSIGN) {
			so->x = (struct rkv_xop){ .put_fn = assign_xfn,
						  .put_arg = so };
			so->op.type = RKV_OP_XPUT;
			so->op.val = &so->x;
		}
		break;
	case REQ_CREATE: {
		struct ps_shard_hdr h = { .magic = PS_SHARD_MAGIC,
					  .nonce = t->nonce, .version = 0 };

		memcpy(so->stage, &h, sizeof(h));
		if (r->src)
			memcpy(so->stage + RKV_PS_SHARD_HDR,
			       r->src + i * t->shard_elems, (size_t)n * 4);
		else
			memset(so->stage + RKV_PS_SHARD_HDR, 0, (size_t)n * 4);
		so->op.type = RKV_OP_PUT;
		so->op.val = so->stage;
		so->op.val_len = RKV_PS_SHARD_HDR + (size_t)n * 4;
		break;
	}
	case REQ_DELETE:
		so->op.type = RKV_OP_DELETE;
		break;
	}
}

/* Start shards of waiting requests on free shard ops. */
static void fill(struct rkv_ps *ps)
{
	struct rkv_ps_req *r = ps->head;

	for (unsigned k = 0; k < ps->nops && ps->busy < ps->nops; k++) {
		struct shard_op *so = &ps->ops[k];
		int rc;

		if (so->req)
			continue;
		while (r && r->next >= r->t->nshards)
			r = r->qnext;
		if (!r)
			return;
		build(ps, so, r, r->next);
		rc = rkv_submit(ps->c, &so->op);
		if (rc == -EAGAIN) {
			so->req = NULL;
			return; /* the client's slots are taken */
		}
		r->next++;
		ps->busy++;
		if (rc) {
			so->op.status = rc;
			complete(ps, so);
		}
	}
}

/* One pass: start what can start, reap what finished.  Returns the number
 * of shard ops reaped, or -errno from rkv_poll. */
static int progress(struct rkv_ps *ps)
{
	struct rkv_op *done[PS_POLL_MAX];
	int n, got = 0;

	fill(ps);
	n = rkv_poll(ps->c, done, PS_POLL_MAX);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		struct shard_op *so = done[i]->user;

		if (so < ps->ops || so >= ps->ops + ps->nops || so->req == NULL)
			continue; /* not ours: see rkv_ps.h */
		complete(ps, so);
		got++;
	}
	if (got)
		fill(ps);
	return got;
}

static int req_new(struct rkv_ps_tensor *t, enum req_kind kind,
		   struct rkv_ps_req **out)
{
	struct rkv_ps *ps = t->ps;
	struct rkv_ps_req *r = rkv_calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->ps = ps;
	r->t = t;
	r->kind = kind;
	r->vmin = UINT64_MAX;
	if (ps->tail)
		ps->tail->qnext = r;
	else
		ps->head = r;
	ps->tail = r;
	t->outstanding++;
	*out = r;
	return 0;
}

static int req_run(struct rkv_ps_req *r)
{
	while (!r->finished) {
		int rc = progress(r->ps);

		if (rc < 0)
			return rc;
		client_idle(r->ps->c, rc);
	}
	return r->err;
}

static void req_free(struct rkv_ps_req *r)
{
	r->t->outstanding--;
	rkv_free(r);
}

/* ------------------------------------------------------------ engine */

int rkv_ps_create(struct rkv_client *c, struct rkv_ps **out)
{
	struct rkv_ps *ps;

	if (!c || !out)
		return -EINVAL;
	*out = NULL;
	ps = rkv_calloc(1, sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	ps->c = c;
	ps->nops = c->nslots;
	ps->stage_size = c->opts.max_value;
	ps->ops = rkv_calloc(ps->nops, sizeof(*ps->ops));
	ps->stage_mem = rkv_malloc(ps->nops * ps->stage_size);
	if (!ps->ops || !ps->stage_mem) {
		rkv_ps_destroy(ps);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < ps->nops; i++)
		ps->ops[i].stage = ps->stage_mem + i * ps->stage_size;
	ps->direct = !c->opts.read_only &&
		     rkv_tp_provider(c->tp) != RKV_TP_VERBS &&
		     !getenv("RKV_PS_NO_DIRECT");
	*out = ps;
	return 0;
}

void rkv_ps_destroy(struct rkv_ps *ps)
{
	uint64_t end;

	if (!ps)
		return;
	/* each shard op ends by the client's timeout: wait for them all */
	end = rkv_now_ms() + 2ull * ps->c->opts.timeout_ms + 1000;
	while (ps->busy && rkv_now_ms() < end) {
		int rc = progress(ps);

		if (rc < 0)
			break;
		client_idle(ps->c, rc);
	}
	for (unsigned i = 0; i < PS_MR_CACHE; i++)
		if (ps->mrc[i].mr)
			rkv_mr_dereg(ps->mrc[i].mr);
	rkv_free(ps->stage_mem);
	rkv_free(ps->ops);
	rkv_free(ps);
}

/* ----------------------------------------------------------- tensors */

struct meta_arg {
	struct ps_meta want;   /* create: the record to insert */
	int mode;              /* 0 insert if absent, 1 set state */
	uint16_t from_state;   /* mode 1: the state expected */
	uint32_t nonce;        /* mode 1: the incarnation expected */
	int existed;           /* mode 0: out */
};

static int meta_fn(const void *old, size_t old_len, void *out, size_t cap,
		   size_t *out_len, void *arg)
{
	struct meta_arg *a = arg;
	struct ps_meta m;

	if (cap < sizeof(m))
		return -EMSGSIZE;
	if (a->mode == 0) {
		a->existed = old != NULL;
		if (old)
			return RKV_RMW_KEEP;
		memcpy(out, &a->want, sizeof(a->want));
		*out_len = sizeof(a->want);
		return RKV_RMW_WRITE;
	}
	if (!old)
		return -ENOENT;
	if (meta_decode(old, old_len, &m) || m.nonce != a->nonce ||
	    (a->from_state && m.state != a->from_state))
		return -ESTALE;
	m.state = a->want.state;
	memcpy(out, &m, sizeof(m));
	*out_len = sizeof(m);
	return RKV_RMW_WRITE;
}

static int set_state(struct rkv_ps *ps, const char *name, uint32_t nonce,
		     uint16_t from, uint16_t to)
{
	char key[PS_KEY_MAX];
	size_t kl = meta_key(name, key);
	struct meta_arg a = { .mode = 1, .from_state = from, .nonce = nonce };

	a.want.state = to;
	return rkv_rmw(ps->c, key, kl, meta_fn, &a);
}

/* Run a create or delete request over every shard of t (synchronous). */
static int run_all(struct rkv_ps_tensor *t, enum req_kind kind,
		   const float *init)
{
	struct rkv_ps_req *r;
	int rc = req_new(t, kind, &r);

	if (rc)
		return rc;
	r->src = init;
	rc = req_run(r);
	if (r->finished)
		req_free(r);
	return rc;
}

int rkv_ps_tensor_create(struct rkv_ps *ps, const char *name,
			 enum rkv_ps_dtype dtype, uint64_t len,
			 uint32_t shard_elems, const float *init)
{
	struct rkv_ps_tensor t;
	struct meta_arg a = { .mode = 0 };
	char key[PS_KEY_MAX];
	size_t kl;
	int rc;

	if (!ps)
		return -EINVAL;
	rc = check_name(name);
	if (!rc)
		rc = check_dtype(dtype);
	if (rc)
		return rc;
	if (!shard_elems)
		shard_elems = RKV_PS_SHARD_DEFAULT;
	if (len == 0 || len > (1ull << 40))
		return -EINVAL;
	if (RKV_PS_SHARD_HDR + (uint64_t)shard_elems * 4 > ps->stage_size)
		return -EMSGSIZE;
	a.want = (struct ps_meta){ .magic = PS_META_MAGIC,
				   .dtype = (uint16_t)dtype,
				   .state = PS_CREATING, .len = len,
				   .shard_elems = shard_elems,
				   .nonce = new_nonce() };
	kl = meta_key(name, key);
	rc = rkv_rmw(ps->c, key, kl, meta_fn, &a);
	if (rc)
		return rc;
	if (a.existed)
		return -EEXIST;
	tensor_init(&t, ps, name, &a.want);
	rc = run_all(&t, REQ_CREATE, init);
	if (!rc)
		rc = set_state(ps, name, t.nonce, PS_CREATING, PS_READY);
	if (rc) {
		/* undo: whatever shards were written, then the metadata */
		if (set_state(ps, name, t.nonce, 0, PS_DELETING) == 0) {
			run_all(&t, REQ_DELETE, NULL);
			rkv_delete(ps->c, key, kl);
		}
	}
	return rc;
}

int rkv_ps_tensor_delete(struct rkv_ps *ps, const char *name)
{
	struct rkv_ps_tensor t;
	struct ps_meta m;
	char key[PS_KEY_MAX];
	size_t kl, vl = 0;
	int rc;

	if (!ps)
		return -EINVAL;
	rc = check_name(name);
	if (rc)
		return rc;
	kl = meta_key(name, key);
	rc = rkv_get(ps->c, key, kl, &m, sizeof(m), &vl);
	if (rc == -ENOBUFS)
		return -EINVAL; /* not PS metadata */
	if (rc)
		return rc;
	if (meta_decode(&m, vl, &m))
		return -EINVAL;
	rc = set_state(ps, name, m.nonce, 0, PS_DELETING);
	if (rc)
		return rc;
	tensor_init(&t, ps, name, &m);
	rc = run_all(&t, REQ_DELETE, NULL);
	if (rc)
		return rc;
	rc = rkv_delete(ps->c, key, kl);
	return rc == -ENOENT ? 0 : rc;
}

int rkv_ps_tensor_open(struct rkv_ps *ps, const char *name,
		       enum rkv_ps_dtype dtype, uint64_t len,
		       struct rkv_ps_tensor **out)
{
	struct rkv_ps_tensor *t;
	struct ps_meta m;
	char key[PS_KEY_MAX];
	size_t kl, vl = 0;
	int rc;

	if (!ps || !out)
		return -EINVAL;
	*out = NULL;
	rc = check_name(name);
	if (!rc)
		rc = check_dtype(dtype);
	if (rc)
		return rc;
	kl = meta_key(name, key);
	rc = rkv_get(ps->c, key, kl, &m, sizeof(m), &vl);
	if (rc == -ENOBUFS)
		return -EINVAL;
	if (rc)
		return rc;
	if (meta_decode(&m, vl, &m))
		return -EINVAL;
	if (m.state == PS_CREATING)
		return -EBUSY;
	if (m.state != PS_READY)
		return -ENOENT;
	if (m.dtype != dtype || (len && len != m.len))
		return -EINVAL;
	if (RKV_PS_SHARD_HDR + (uint64_t)m.shard_elems * 4 > ps->stage_size)
		return -EMSGSIZE;
	t = rkv_malloc(sizeof(*t));
	if (!t)
		return -ENOMEM;
	tensor_init(t, ps, name, &m);
	*out = t;
	return 0;
}

void rkv_ps_tensor_info(const struct rkv_ps_tensor *t, struct rkv_ps_info *info)
{
	*info = (struct rkv_ps_info){ .dtype = t->dtype, .len = t->len,
				      .shard_elems = t->shard_elems,
				      .nshards = t->nshards };
}

void rkv_ps_tensor_close(struct rkv_ps_tensor *t)
{
	rkv_free(t);
}

/* ------------------------------------------------------- pull / push */

int rkv_ps_pull_async(struct rkv_ps_tensor *t, float *buf, uint64_t n,
		      struct rkv_ps_req **out)
{
	struct rkv_ps_req *r;
	int rc;

	if (!t || !buf || !out)
		return -EINVAL;
	*out = NULL;
	if (n < t->len)
		return -ENOBUFS;
	rc = req_new(t, REQ_PULL, &r);
	if (rc)
		return rc;
	r->buf = buf;
	if (t->ps->direct)
		r->mr = mr_get(t->ps, buf, (size_t)t->len * 4);
	fill(t->ps);
	*out = r;
	return 0;
}

int rkv_ps_push_async(struct rkv_ps_tensor *t, enum rkv_ps_rule rule,
		      const float *src, uint64_t n, float lr,
		      struct rkv_ps_req **out)
{
	struct rkv_ps_req *r;
	int rc;

	if (!t || !src || !out)
		return -EINVAL;
	*out = NULL;
	if (n != t->len)
		return -EINVAL;
	if (rule != RKV_PS_SUM && rule != RKV_PS_ASSIGN && rule != RKV_PS_SGD)
		return -EINVAL;
	rc = req_new(t, REQ_PUSH, &r);
	if (rc)
		return rc;
	r->rule = rule;
	r->lr = lr;
	r->src = src;
	fill(t->ps);
	*out = r;
	return 0;
}

int rkv_ps_test(struct rkv_ps_req *r)
{
	int rc;

	if (!r)
		return -EINVAL;
	if (!r->finished) {
		rc = progress(r->ps);
		if (rc < 0)
			return rc;
	}
	return r->finished ? r->err : -EINPROGRESS;
}

int rkv_ps_wait(struct rkv_ps_req *r, uint64_t *vmin, uint64_t *vmax)
{
	int rc;

	if (!r)
		return -EINVAL;
	rc = req_run(r);
	if (!r->finished)
		return rc; /* the client failed under it: shard ops still
			    * name r, so it stays allocated */
	if (rc == 0) {
		if (vmin)
			*vmin = r->vmin == UINT64_MAX ? 0 : r->vmin;
		if (vmax)
			*vmax = r->vmax;
	}
	req_free(r);
	return rc;
}

int rkv_ps_pull(struct rkv_ps_tensor *t, float *buf, uint64_t n,
		uint64_t *vmin, uint64_t *vmax)
{
	struct rkv_ps_req *r;
	int rc = rkv_ps_pull_async(t, buf, n, &r);

	return rc ? rc : rkv_ps_wait(r, vmin, vmax);
}

int rkv_ps_push(struct rkv_ps_tensor *t, enum rkv_ps_rule rule,
		const float *src, uint64_t n, float lr)
{
	struct rkv_ps_req *r;
	int rc = rkv_ps_push_async(t, rule, src, n, lr, &r);

	return rc ? rc : rkv_ps_wait(r, NULL, NULL);
}

int rkv_ps_pull_many(struct rkv_ps *ps, struct rkv_ps_io *io, size_t count)
{
	struct rkv_ps_req **reqs;
	int first = 0;

	if (!ps || (count && !io))
		return -EINVAL;
	reqs = rkv_calloc(count ? count : 1, sizeof(*reqs));
	if (!reqs)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++) {
		io[i].vmin = io[i].vmax = 0;
		io[i].status = io[i].t && io[i].t->ps != ps ?
				       -EINVAL :
				       rkv_ps_pull_async(io[i].t, io[i].buf,
							 io[i].n, &reqs[i]);
	}
	for (size_t i = 0; i < count; i++) {
		if (reqs[i])
			io[i].status = rkv_ps_wait(reqs[i], &io[i].vmin,
						   &io[i].vmax);
		if (io[i].status && !first)
			first = io[i].status;
	}
	rkv_free(reqs);
	return first;
}

/* ---------------------------------------------------- device buffers */
/*
 * Pulls into and pushes from CUDA device memory (rkv_ps.h).  Each shard
 * is one device op of ops.c (client/gpu.c): a pull is a DGET whose
 * 16-byte shard header goes to the host and whose elements are copied
 * device to device into the caller's buffer after the block checksum was
 * verified on the device; a push is a DRMW under the shard's slot lock
 * whose callback checks the old header (16 bytes copied to the host),
 * writes the new one and applies the rule with a kernel
 * (rkv_cuda_f32_apply) from the old elements to the new block, all on the
 * device.  Shards go one after the other (one device op at a time).
 */

struct push_dev_arg {
	const struct rkv_ps_tensor *t;
	uint64_t shard;
	enum rkv_ps_rule rule;
	float lr;
	const float *src;
	int gpu;
};

static int push_dev_fn(const void *old, size_t old_len, void *out,
		       size_t cap, size_t *out_len, void *arg)
{
	struct push_dev_arg *a = arg;
	const struct rkv_ps_tensor *t = a->t;
	uint64_t n = shard_len(t, a->shard);
	size_t bytes = RKV_PS_SHARD_HDR + (size_t)n * 4;
	enum rkv_cuda_f32_rule rule = a->rule == RKV_PS_SUM ? RKV_CUDA_F32_SUM :
				      a->rule == RKV_PS_SGD ? RKV_CUDA_F32_AXPY :
							      RKV_CUDA_F32_ASSIGN;
	struct ps_shard_hdr raw, h;
	int rc;

	if (!old)
		return -ENOENT;
	/* the header is in device memory: bring it over first */
	if (old_len == bytes && rkv_cuda_copy(a->gpu, &raw, old, sizeof(raw)))
		return -EIO;
	rc = shard_next_hdr(t, a->shard, old_len, &raw, cap, &h);
	if (rc)
		return rc;
	if (rkv_cuda_copy(a->gpu, out, &h, sizeof(h)) ||
	    rkv_cuda_f32_apply(a->gpu, (char *)out + RKV_PS_SHARD_HDR,
			       (const char *)old + RKV_PS_SHARD_HDR,
			       a->src + a->shard * t->shard_elems, n, rule,
			       a->lr))
		return -EIO;
	*out_len = bytes;
	return RKV_RMW_WRITE;
}

int rkv_ps_pull_dev(struct rkv_ps_tensor *t, float *dev_buf, uint64_t n,
		    int gpu, uint64_t *vmin, uint64_t *vmax)
{
	struct rkv_client *c;
	uint64_t lo = UINT64_MAX, hi = 0;
	int rc;

	if (!t || !dev_buf)
		return -EINVAL;
	if (n < t->len)
		return -ENOBUFS;
	c = t->ps->c;
	rc = gpu_prepare(c, gpu, dev_buf, (size_t)t->len * 4,
			 "rkv_ps_pull_dev");
	if (rc)
		return rc;
	for (uint64_t i = 0; i < t->nshards; i++) {
		char key[PS_KEY_MAX];
		int kl = snprintf(key, sizeof(key), "%s%" PRIu64, t->prefix, i);
		uint64_t m = shard_len(t, i);
		struct ps_shard_hdr raw, h;
		struct rkv_op op = { .type = RKV_OP_DGET, .key = key,
				     .key_len = (size_t)kl,
				     .buf = dev_buf + i * t->shard_elems,
				     .buf_cap = (size_t)m * 4 };

		memset(&raw, 0, sizeof(raw));
		c->gpu->head = sizeof(raw);
		c->gpu->head_buf = &raw;
		rc = client_run_op(c, &op);
		c->gpu->head = 0;
		c->gpu->head_buf = NULL;
		if (!rc)
			rc = op.status;
		if (!rc)
			rc = shard_hdr(t, i, op.out_len, &raw, &h);
		if (rc == -ENOBUFS)
			rc = -ESTALE; /* a shard of another shape */
		if (rc)
			return rc;
		lo = h.version < lo ? h.version : lo;
		hi = h.version > hi ? h.version : hi;
	}
	if (vmin)
		*vmin = lo == UINT64_MAX ? 0 : lo;
	if (vmax)
		*vmax = hi;
	return 0;
}

int rkv_ps_push_dev(struct rkv_ps_tensor *t, enum rkv_ps_rule rule,
		    const float *dev_src, uint64_t n, float lr, int gpu)
{
	struct rkv_client *c;
	int rc;

	if (!t || !dev_src || n != t->len)
		return -EINVAL;
	if (rule != RKV_PS_SUM && rule != RKV_PS_ASSIGN && rule != RKV_PS_SGD)
		return -EINVAL;
	c = t->ps->c;
	if (c->opts.read_only)
		return -EACCES;
	rc = gpu_prepare(c, gpu, dev_src, (size_t)t->len * 4,
			 "rkv_ps_push_dev");
	if (rc)
		return rc;
	for (uint64_t i = 0; i < t->nshards; i++) {
		char key[PS_KEY_MAX];
		int kl = snprintf(key, sizeof(key), "%s%" PRIu64, t->prefix, i);
		struct push_dev_arg a = { .t = t, .shard = i, .rule = rule,
					  .lr = lr, .src = dev_src,
					  .gpu = gpu };
		struct rkv_op op = { .type = RKV_OP_DRMW, .key = key,
				     .key_len = (size_t)kl, .fn = push_dev_fn,
				     .fn_arg = &a };

		rc = client_run_op(c, &op);
		if (!rc)
			rc = op.status;
		if (rc)
			return rc;
	}
	return 0;
}
