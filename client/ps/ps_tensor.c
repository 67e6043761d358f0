/* SPDX-License-Identifier: MIT */
/*
 * ps_tensor.c - tensors: the metadata record "ps/<name>" (ps_internal.h)
 * and its states, create (metadata first, then every shard, then READY),
 * open, delete (DELETING, every shard, then the record), info, close.
 */
#include "ps_engine.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "rtime.h"

int ps_check_name(const char *name)
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
void tensor_init(struct rkv_ps_tensor *t, struct rkv_ps *ps,
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
	rc = ps_check_name(name);
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
	rc = ps_check_name(name);
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
	rc = ps_check_name(name);
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

