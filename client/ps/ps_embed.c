/* SPDX-License-Identifier: MIT */
/*
 * ps_embed.c - sparse embedding tables (rkv_ps.h): the configuration
 * record "emb/<name>" and its generations, rows stored lazily as
 * "emb/<name>/<id>", their initial values, and the optimizer steps a push
 * applies under each row's slot lock.
 *
 * A request's ids are sorted once (with their positions, stably) into
 * distinct rows; the engine (ps.c) then runs one shard op per distinct
 * row, so a pull of 4,096 ids moves each row once, and a push sums the
 * gradients of an id's duplicates before its one read-modify-write.
 *
 * Rows are processed through ps->row, an aligned buffer: a row's bytes in
 * a block follow the key and are not 4-byte aligned.  Callbacks run on the
 * client's thread one at a time, so one buffer per engine suffices.
 */
#include "ps_engine.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hash.h"

#define EMB_GOLDEN 0x9e3779b97f4a7c15ull

const char *rkv_emb_optim_str(enum rkv_emb_optim o)
{
	switch (o) {
	case RKV_EMB_SGD: return "sgd";
	case RKV_EMB_ADAGRAD: return "adagrad";
	case RKV_EMB_ADAM: return "adam";
	}
	return "?";
}

void rkv_emb_conf_init(struct rkv_emb_conf *conf)
{
	*conf = (struct rkv_emb_conf){ .optim = RKV_EMB_SGD, .lr = 0.01f,
				       .beta1 = 0.9f, .beta2 = 0.999f,
				       .eps = 1e-8f, .init_scale = 0.01f };
}

static unsigned state_per_dim(uint16_t optim)
{
	return optim == RKV_EMB_ADAM ? 2 : optim == RKV_EMB_ADAGRAD ? 1 : 0;
}

static int check_conf(const struct rkv_emb_conf *c)
{
	if (!c || !c->num_rows || !c->dim || c->dim > (1u << 20))
		return -EINVAL;
	if (c->optim != RKV_EMB_SGD && c->optim != RKV_EMB_ADAGRAD &&
	    c->optim != RKV_EMB_ADAM)
		return -EINVAL;
	if (!(c->lr > 0) || !isfinite(c->lr) || !(c->eps >= 0) ||
	    !isfinite(c->eps) || !(c->init_accum >= 0) ||
	    !isfinite(c->init_accum) || !(c->init_scale >= 0) ||
	    !isfinite(c->init_scale))
		return -EINVAL;
	if (c->optim == RKV_EMB_ADAM &&
	    (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1)))
		return -EINVAL;
	return 0;
}

static size_t row_bytes(uint32_t dim, uint16_t optim)
{
	return RKV_PS_SHARD_HDR +
	       (size_t)dim * 4 * (1 + state_per_dim(optim));
}

static size_t meta_key(const char *name, char *key)
{
	return (size_t)snprintf(key, PS_KEY_MAX, "emb/%s", name);
}

static int meta_decode(const void *v, size_t len, struct emb_meta *m)
{
	if (len != sizeof(*m))
		return -EINVAL;
	memcpy(m, v, sizeof(*m));
	if (m->magic != PS_EMB_MAGIC || !m->num_rows || !m->dim ||
	    (m->optim != RKV_EMB_SGD && m->optim != RKV_EMB_ADAGRAD &&
	     m->optim != RKV_EMB_ADAM))
		return -EINVAL;
	return 0;
}

/* ------------------------------------------------ the configuration */

struct meta_arg {
	struct emb_meta want;  /* create: the record (gen filled in here) */
	int mode;              /* 0 create, 1 READY -> DELETING, 2 -> DELETED */
	int existed;           /* create: a live table has the name */
};

static int meta_fn(const void *old, size_t old_len, void *out, size_t cap,
		   size_t *out_len, void *arg)
{
	struct meta_arg *a = arg;
	struct emb_meta m = { 0 };

	if (cap < sizeof(m))
		return -EMSGSIZE;
	if (old && meta_decode(old, old_len, &m))
		return -EINVAL; /* the key holds something else */
	switch (a->mode) {
	case 0:
		/* a table half-deleted may be created over: its rows are of
		 * an older generation, ignored, and its deleter removes only
		 * rows of its own generation or older */
		a->existed = old && m.state == PS_READY;
		if (a->existed)
			return RKV_RMW_KEEP;
		a->want.gen = old ? m.gen + 1 : 1;
		m = a->want;
		break;
	case 1:
		if (!old || m.state == PS_DELETED)
			return -ENOENT;
		m.state = PS_DELETING;
		a->want = m;
		break;
	default:
		if (!old || m.gen != a->want.gen || m.state != PS_DELETING)
			return RKV_RMW_KEEP; /* created again meanwhile */
		m.state = PS_DELETED;
		break;
	}
	memcpy(out, &m, sizeof(m));
	*out_len = sizeof(m);
	return RKV_RMW_WRITE;
}

int rkv_emb_create(struct rkv_ps *ps, const char *name,
		   const struct rkv_emb_conf *conf)
{
	struct meta_arg a = { .mode = 0 };
	char key[PS_KEY_MAX];
	int rc;

	if (!ps)
		return -EINVAL;
	rc = ps_check_name(name);
	if (!rc)
		rc = check_conf(conf);
	if (rc)
		return rc;
	if (row_bytes(conf->dim, (uint16_t)conf->optim) > ps->stage_size)
		return -EMSGSIZE;
	a.want = (struct emb_meta){ .magic = PS_EMB_MAGIC, .state = PS_READY,
				    .optim = (uint16_t)conf->optim,
				    .num_rows = conf->num_rows,
				    .dim = conf->dim, .seed = conf->seed,
				    .lr = conf->lr, .beta1 = conf->beta1,
				    .beta2 = conf->beta2, .eps = conf->eps,
				    .init_accum = conf->init_accum,
				    .init_scale = conf->init_scale };
	rc = rkv_rmw(ps->c, key, meta_key(name, key), meta_fn, &a);
	if (rc)
		return rc;
	return a.existed ? -EEXIST : 0;
}

static void emb_init(struct rkv_ps_emb *e, struct rkv_ps *ps,
		     const char *name, const struct emb_meta *m)
{
	tensor_init(&e->t, ps, name, &(struct ps_meta){
		.magic = PS_META_MAGIC, .dtype = RKV_PS_FLOAT32,
		.len = m->dim, .shard_elems = m->dim, .nonce = m->gen });
	snprintf(e->t.prefix, sizeof(e->t.prefix), "emb/%s/", name);
	e->m = *m;
	e->nstate = m->dim * state_per_dim(m->optim);
	e->row_bytes = row_bytes(m->dim, m->optim);
}

int rkv_emb_open(struct rkv_ps *ps, const char *name, struct rkv_ps_emb **out)
{
	struct rkv_ps_emb *e;
	struct emb_meta m;
	char key[PS_KEY_MAX];
	size_t vl = 0;
	int rc;

	if (!ps || !out)
		return -EINVAL;
	*out = NULL;
	rc = ps_check_name(name);
	if (rc)
		return rc;
	rc = rkv_get(ps->c, key, meta_key(name, key), &m, sizeof(m), &vl);
	if (rc == -ENOBUFS)
		return -EINVAL;
	if (rc)
		return rc;
	if (meta_decode(&m, vl, &m))
		return -EINVAL;
	if (m.state != PS_READY)
		return -ENOENT;
	if (row_bytes(m.dim, m.optim) > ps->stage_size)
		return -EMSGSIZE;
	e = rkv_malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	emb_init(e, ps, name, &m);
	*out = e;
	return 0;
}

void rkv_emb_conf_get(const struct rkv_ps_emb *e, struct rkv_emb_conf *conf)
{
	const struct emb_meta *m = &e->m;

	*conf = (struct rkv_emb_conf){
		.num_rows = m->num_rows, .dim = m->dim,
		.optim = (enum rkv_emb_optim)m->optim, .lr = m->lr,
		.beta1 = m->beta1, .beta2 = m->beta2, .eps = m->eps,
		.init_accum = m->init_accum, .init_scale = m->init_scale,
		.seed = m->seed };
}

void rkv_emb_close(struct rkv_ps_emb *e)
{
	rkv_free(e);
}

/* ------------------------------------------------------------- rows */

/* Row id's initial weights (rkv_ps.h gives the formula) into w. */
static void init_weights(const struct emb_meta *m, uint64_t id, float *w)
{
	uint64_t base = id * m->dim + 1;

	for (uint32_t j = 0; j < m->dim; j++) {
		uint64_t z = rkv_mix64(m->seed + EMB_GOLDEN * (base + j));
		float u = (float)(z >> 40) * 0x1p-24f;

		w[j] = (2.0f * u - 1.0f) * m->init_scale;
	}
}

/*
 * Row id of e in host floats f (weights, then state unless weights_only)
 * with its step count, from a stored value (old, old_len; NULL: absent).
 * A row of an older generation is the previous table's: it reads as
 * absent.  Returns 0 or -ESTALE (a newer generation's row, or not a row of
 * this table).
 */
static int row_load(const struct rkv_ps_emb *e, uint64_t id, const void *old,
		    size_t old_len, float *f, uint64_t *steps, int weights_only)
{
	struct ps_shard_hdr h;

	if (old) {
		if (old_len < sizeof(h))
			return -ESTALE;
		memcpy(&h, old, sizeof(h));
		if (h.magic != PS_ROW_MAGIC || h.nonce > e->m.gen)
			return -ESTALE;
		if (h.nonce == e->m.gen) {
			if (old_len != e->row_bytes)
				return -ESTALE;
			memcpy(f, (const char *)old + sizeof(h),
			       weights_only ? (size_t)e->m.dim * 4 :
					      e->row_bytes - sizeof(h));
			*steps = h.version;
			return 0;
		}
	}
	init_weights(&e->m, id, f);
	for (unsigned j = 0; !weights_only && j < e->nstate; j++)
		f[e->m.dim + j] = e->m.optim == RKV_EMB_ADAGRAD ?
					  e->m.init_accum : 0.0f;
	*steps = 0;
	return 0;
}

/* One optimizer step on weights w (state after them) with gradient g. */
static void step(const struct emb_meta *m, float *w, const float *g,
		 uint64_t t)
{
	uint32_t d = m->dim;
	float lr = m->lr, eps = m->eps;

	switch (m->optim) {
	case RKV_EMB_SGD:
		for (uint32_t j = 0; j < d; j++)
			w[j] = w[j] - lr * g[j];
		break;
	case RKV_EMB_ADAGRAD: {
		float *a = w + d;

		for (uint32_t j = 0; j < d; j++) {
			a[j] = a[j] + g[j] * g[j];
			w[j] = w[j] - lr * g[j] / (sqrtf(a[j]) + eps);
		}
		break;
	}
	case RKV_EMB_ADAM: {
		float *mo = w + d, *v = w + 2 * (size_t)d;
		float b1 = m->beta1, b2 = m->beta2;
		float c1 = 1.0f - b1, c2 = 1.0f - b2;
		float s = (float)((double)lr / (1.0 - pow((double)b1, (double)t)));
		float c = (float)sqrt(1.0 - pow((double)b2, (double)t));

		for (uint32_t j = 0; j < d; j++) {
			mo[j] = b1 * mo[j] + c1 * g[j];
			v[j] = b2 * v[j] + c2 * (g[j] * g[j]);
			w[j] = w[j] - s * mo[j] / (sqrtf(v[j]) / c + eps);
		}
		break;
	}
	}
}

int emb_push_fn(const void *old, size_t old_len, void *out, size_t cap,
		size_t *out_len, void *arg)
{
	struct shard_op *so = arg;
	const struct rkv_ps_req *r = so->req;
	const struct rkv_ps_emb *e = r->emb;
	struct ps_shard_hdr h = { .magic = PS_ROW_MAGIC, .nonce = e->m.gen };
	float *f = r->ps->row;
	uint64_t steps;
	int rc;

	if (e->row_bytes > cap)
		return -EMSGSIZE;
	rc = row_load(e, r->uids[so->shard], old, old_len, f, &steps, 0);
	if (rc)
		return rc;
	h.version = steps + 1;
	step(&e->m, f, r->gsum + so->shard * e->m.dim, h.version);
	so->version = h.version;
	memcpy(out, &h, sizeof(h));
	memcpy((char *)out + sizeof(h), f, e->row_bytes - sizeof(h));
	*out_len = e->row_bytes;
	return RKV_RMW_WRITE;
}

int emb_delete_fn(const void *old, size_t old_len, void *out, size_t cap,
		  size_t *out_len, void *arg)
{
	struct shard_op *so = arg;
	const struct rkv_ps_emb *e = so->req->emb;
	struct ps_shard_hdr h;

	(void)out;
	(void)cap;
	(void)out_len;
	if (!old || old_len < sizeof(h))
		return RKV_RMW_KEEP;
	memcpy(&h, old, sizeof(h));
	if (h.magic != PS_ROW_MAGIC || h.nonce > e->m.gen)
		return RKV_RMW_KEEP; /* a newer table's row */
	return RKV_RMW_DELETE;
}

int emb_pull_done(struct shard_op *so, int st)
{
	struct rkv_ps_req *r = so->req;
	const struct rkv_ps_emb *e = r->emb;
	uint32_t d = e->m.dim;
	float *f = r->ps->row;
	uint64_t steps = 0;
	int rc;

	if (st && st != -ENOENT)
		return st;
	rc = row_load(e, r->uids[so->shard], st ? NULL : so->stage,
		      so->op.out_len, f, &steps, 1);
	if (rc)
		return rc;
	so->version = steps;
	for (uint32_t k = r->ustart[so->shard]; k < r->ustart[so->shard + 1]; k++)
		memcpy(r->buf + (size_t)r->ord[k] * d, f, (size_t)d * 4);
	return 0;
}

/* ------------------------------------------------------- pull / push */

struct pos {
	uint64_t id;
	uint32_t at;
};

static int pos_cmp(const void *a, const void *b)
{
	const struct pos *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

/*
 * A request of kind over ids[0..n) of e: the distinct ids sorted, and
 * for a push their summed gradients.  Returns 0 with *out queued, -EINVAL,
 * -ERANGE (an id out of range), -ENOMEM.
 */
static int emb_req(struct rkv_ps_emb *e, enum req_kind kind,
		   const uint64_t *ids, size_t n, const float *grads,
		   struct rkv_ps_req **out)
{
	uint32_t d = e->m.dim;
	struct rkv_ps_req *r;
	struct pos *p;
	size_t nu = 0, sz;
	char *mem;
	int rc;

	if (n > UINT32_MAX - 1 || (n && !ids))
		return -EINVAL;
	for (size_t k = 0; k < n; k++)
		if (ids[k] >= e->m.num_rows)
			return -ERANGE;
	p = rkv_malloc((n ? n : 1) * sizeof(*p));
	if (!p)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++)
		p[k] = (struct pos){ .id = ids[k], .at = (uint32_t)k };
	qsort(p, n, sizeof(*p), pos_cmp);
	for (size_t k = 0; k < n; k++)
		nu += !k || p[k].id != p[k - 1].id;
	sz = nu * 8 + n * 4 + (nu + 1) * 4;
	sz = (sz + 7) & ~(size_t)7;
	mem = rkv_malloc(sz + (grads ? nu * d * 4 : 0) + 8);
	if (!mem) {
		rkv_free(p);
		return -ENOMEM;
	}
	rc = req_new(&e->t, kind, &r);
	if (rc) {
		rkv_free(p);
		rkv_free(mem);
		return rc;
	}
	r->mem = mem;
	r->emb = e;
	r->nitems = nu;
	r->uids = (uint64_t *)mem;
	r->ord = (uint32_t *)(mem + nu * 8);
	r->ustart = r->ord + n;
	r->gsum = grads ? (float *)(mem + sz) : NULL;
	nu = 0;
	for (size_t k = 0; k < n; k++) {
		if (k && p[k].id == p[k - 1].id) {
			float *g = r->gsum ? r->gsum + (nu - 1) * d : NULL;
			const float *s = grads ? grads + (size_t)p[k].at * d : NULL;

			for (uint32_t j = 0; g && j < d; j++)
				g[j] += s[j];
		} else {
			r->ustart[nu] = (uint32_t)k;
			r->uids[nu] = p[k].id;
			if (r->gsum)
				memcpy(r->gsum + nu * d,
				       grads + (size_t)p[k].at * d,
				       (size_t)d * 4);
			nu++;
		}
		r->ord[k] = p[k].at;
	}
	r->ustart[nu] = (uint32_t)n;
	rkv_free(p);
	*out = r;
	return 0;
}

int rkv_emb_pull_async(struct rkv_ps_emb *e, const uint64_t *ids, size_t n,
		       float *out, struct rkv_ps_req **req)
{
	struct rkv_ps_req *r;
	int rc;

	if (!e || !req || (n && !out))
		return -EINVAL;
	*req = NULL;
	rc = emb_req(e, REQ_EMB_PULL, ids, n, NULL, &r);
	if (rc)
		return rc;
	r->buf = out;
	req_start(r);
	*req = r;
	return 0;
}

int rkv_emb_push_async(struct rkv_ps_emb *e, const uint64_t *ids, size_t n,
		       const float *grads, struct rkv_ps_req **req)
{
	struct rkv_ps_req *r;
	int rc;

	if (!e || !req || (n && !grads))
		return -EINVAL;
	*req = NULL;
	if (e->t.ps->info.read_only)
		return -EROFS;
	rc = emb_req(e, REQ_EMB_PUSH, ids, n, grads, &r);
	if (rc)
		return rc;
	req_start(r);
	*req = r;
	return 0;
}

int rkv_emb_pull(struct rkv_ps_emb *e, const uint64_t *ids, size_t n,
		 float *out)
{
	struct rkv_ps_req *r;
	int rc = rkv_emb_pull_async(e, ids, n, out, &r);

	return rc ? rc : rkv_ps_wait(r, NULL, NULL);
}

int rkv_emb_push(struct rkv_ps_emb *e, const uint64_t *ids, size_t n,
		 const float *grads)
{
	struct rkv_ps_req *r;
	int rc = rkv_emb_push_async(e, ids, n, grads, &r);

	return rc ? rc : rkv_ps_wait(r, NULL, NULL);
}

/* ------------------------------------------------------------ delete */

struct scan_arg {
	const char *prefix;
	size_t plen;
	uint64_t *ids;
	size_t n, cap;
	int err;
};

static int scan_fn(const void *key, size_t key_len, const void *val,
		   size_t val_len, void *arg)
{
	struct scan_arg *a = arg;
	const char *k = key;
	uint64_t id = 0;
	size_t i;

	(void)val;
	(void)val_len;
	if (key_len <= a->plen || memcmp(k, a->prefix, a->plen))
		return 0;
	for (i = a->plen; i < key_len; i++) {
		if (k[i] < '0' || k[i] > '9' || id > (UINT64_MAX - 9) / 10)
			return 0; /* not a row key */
		id = id * 10 + (uint64_t)(k[i] - '0');
	}
	if (a->n == a->cap) {
		size_t nc = a->cap ? 2 * a->cap : 1024;
		uint64_t *ni = rkv_realloc(a->ids, nc * sizeof(*ni));

		if (!ni) {
			a->err = -ENOMEM;
			return 1;
		}
		a->ids = ni;
		a->cap = nc;
	}
	a->ids[a->n++] = id;
	return 0;
}

int rkv_emb_delete(struct rkv_ps *ps, const char *name)
{
	struct meta_arg a = { .mode = 1 };
	struct scan_arg sa = { 0 };
	struct rkv_scan_stats st;
	struct rkv_ps_emb e;
	struct rkv_ps_req *r;
	char key[PS_KEY_MAX];
	size_t kl;
	int rc;

	if (!ps)
		return -EINVAL;
	rc = ps_check_name(name);
	if (rc)
		return rc;
	kl = meta_key(name, key);
	rc = rkv_rmw(ps->c, key, kl, meta_fn, &a);
	if (rc)
		return rc;
	emb_init(&e, ps, name, &a.want);
	/* every id a scan finds, as a request over ids < num_rows */
	sa.prefix = e.t.prefix;
	sa.plen = strlen(e.t.prefix);
	rc = rkv_scan(ps->c, scan_fn, &sa, &st);
	if (sa.err)
		rc = sa.err;
	if (rc) {
		rkv_free(sa.ids);
		return rc;
	}
	e.m.num_rows = UINT64_MAX; /* rows of any id are removed */
	rc = emb_req(&e, REQ_EMB_DELETE, sa.ids, sa.n, NULL, &r);
	rkv_free(sa.ids);
	if (rc)
		return rc;
	req_start(r);
	rc = req_run(r);
	if (!r->finished)
		return rc;
	req_free(r);
	if (rc)
		return rc;
	a.mode = 2;
	return rkv_rmw(ps->c, key, kl, meta_fn, &a);
}
