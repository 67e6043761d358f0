/* SPDX-License-Identifier: MIT */
/*
 * rkvmodule.c - the Python module `rkv`: librkv's KV calls for Python
 * (a CPython extension, linked with the self-contained librkv.a).
 *
 *   import rkv
 *   with rkv.Client(servers="tcp://127.0.0.1:7000") as c:
 *       c.put(b"k", b"v"); c.get(b"k"); c.delete(b"k")
 *
 * Keys: bytes, str (UTF-8) or any buffer.  Values: any buffer (bytes,
 * bytearray, memoryview, numpy arrays, torch CPU tensors through
 * numpy()), passed to librkv where they lie: this layer copies nothing
 * (librkv itself copies a value once, into its registered memory, as
 * every put does).  get_into(key, buffer) writes the value into a
 * writable buffer where it lies.
 *
 * Errors are OSError with the errno (so ConnectionRefusedError,
 * PermissionError, TimeoutError... where Python has one) and a message
 * that names the call, the limit or librkv's own reason; a missing key
 * is KeyError.  The GIL is released while librkv works, so threads
 * overlap; one client is used by one thread at a time (a lock per
 * client: a second thread waits, without the GIL).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rkvpy.h"
#include "version.h"

#define MGET_ROOM 4096 /* bytes per key of an mget; larger: fetched again */

static PyObject *g_delete; /* rkv.DELETE: an rmw function's "delete it" */

/* ------------------------------------------------------------ helpers */

static void on_log(int level, const char *msg, void *arg)
{
	ClientObject *self = arg;

	if (level < RKV_CLIENT_LOG_WARN)
		return;
	pthread_mutex_lock(&self->log_mu);
	snprintf(self->last_log, sizeof(self->last_log), "%s", msg);
	pthread_mutex_unlock(&self->log_mu);
}

static void log_reset(ClientObject *self)
{
	if (!self)
		return;
	pthread_mutex_lock(&self->log_mu);
	self->last_log[0] = '\0';
	pthread_mutex_unlock(&self->log_mu);
}

/* Raise for rc (< 0) of what: KeyError(key) for -ENOENT, else OSError
 * with errno -rc and "what: strerror (detail)". */
PyObject *raise_rc(ClientObject *self, const char *what, int rc,
			  PyObject *key, const char *detail)
{
	char msg[512], logged[256] = "";
	PyObject *e;

	if (rc == -ENOENT && key) {
		PyErr_SetObject(PyExc_KeyError, key);
		return NULL;
	}
	if (self) {
		pthread_mutex_lock(&self->log_mu);
		snprintf(logged, sizeof(logged), "%s", self->last_log);
		pthread_mutex_unlock(&self->log_mu);
	}
	/* librkv's line, unless it only repeats the error's own words */
	if (!detail && logged[0] && !strstr(logged, strerror(-rc)))
		detail = logged;
	if (!detail) {
		switch (rc) {
		case -EACCES:
			detail = self && self->read_only
				 ? "a read-only client cannot write"
				 : "a wrong or no secret, or the server grants "
				   "this secret read-only access";
			break;
		case -ECONNREFUSED:
			detail = "is rkv-server running there?";
			break;
		case -ENOSPC:
			detail = "the server is full: its index or its data "
				 "memory";
			break;
		case -ETIMEDOUT:
			detail = "no answer within timeout_ms";
			break;
		case -ECONNRESET:
			detail = "connection lost: did the server stop?";
			break;
		default:
			break;
		}
	}
	snprintf(msg, sizeof(msg), "%s: %s%s%s%s", what, strerror(-rc),
		 detail ? " (" : "", detail ? detail : "", detail ? ")" : "");
	e = PyObject_CallFunction(PyExc_OSError, "is", -rc, msg);
	if (e) {
		PyErr_SetObject((PyObject *)Py_TYPE(e), e);
		Py_DECREF(e);
	}
	return NULL;
}

/* A key or value argument: its bytes where they lie. */
int arg_get(PyObject *o, struct arg *a, const char *what)
{
	memset(a, 0, sizeof(*a));
	if (PyUnicode_Check(o)) {
		Py_ssize_t n;

		a->p = PyUnicode_AsUTF8AndSize(o, &n);
		if (!a->p)
			return -1;
		a->len = (size_t)n;
		return 0;
	}
	if (PyObject_GetBuffer(o, &a->view, PyBUF_SIMPLE | PyBUF_C_CONTIGUOUS)) {
		PyErr_Clear();
		/* a strided buffer is not copied behind the caller's back */
		PyErr_Format(PyExc_TypeError, "%s must be bytes, str or a "
			     "C-contiguous buffer, not %.100s", what,
			     Py_TYPE(o)->tp_name);
		return -1;
	}
	a->has_view = 1;
	a->p = a->view.buf;
	a->len = (size_t)a->view.len;
	return 0;
}

void arg_release(struct arg *a)
{
	if (a->has_view)
		PyBuffer_Release(&a->view);
	a->has_view = 0;
}

/* Limits checked before anything is sent, with the limit in the
 * message (librkv would say only EMSGSIZE or EINVAL). */
static int check_key(const struct arg *k, const char *what)
{
	if (!k->len) {
		PyErr_Format(PyExc_ValueError, "%s: the key is empty", what);
		return -1;
	}
	if (k->len > RKV_KEY_MAX) {
		PyErr_Format(PyExc_ValueError, "%s: the key is %zu bytes, over "
			     "the limit of %u", what, k->len, RKV_KEY_MAX);
		return -1;
	}
	return 0;
}

static int check_val(const ClientObject *self, const struct arg *v,
		     const char *what)
{
	if (v->len > self->max_value) {
		PyErr_Format(PyExc_ValueError, "%s: the value is %zu bytes, "
			     "over the limit of %zu", what, v->len,
			     self->max_value);
		return -1;
	}
	return 0;
}

/* Take the client for one call (waiting without the GIL).  -1 with an
 * exception when it is closed. */
int take(ClientObject *self)
{
	if (!self->c) {
		PyErr_SetString(PyExc_ValueError, "the client is closed");
		return -1;
	}
	if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
		Py_BEGIN_ALLOW_THREADS
		PyThread_acquire_lock(self->lock, WAIT_LOCK);
		Py_END_ALLOW_THREADS
	}
	if (!self->c) {
		PyThread_release_lock(self->lock);
		PyErr_SetString(PyExc_ValueError, "the client is closed");
		return -1;
	}
	log_reset(self);
	return 0;
}

void give(ClientObject *self)
{
	PyThread_release_lock(self->lock);
}

/* A key argument checked, and the client taken for the call: 0, or -1
 * with an exception and nothing held. */
static int key_take(ClientObject *self, PyObject *key, const char *what,
		    struct arg *k)
{
	if (arg_get(key, k, "key"))
		return -1;
	if (check_key(k, what) || take(self)) {
		arg_release(k);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------- Client */

static void Client_dealloc(ClientObject *self)
{
	/* every PS child holds a reference: none is left; the engine is */
	if (self->c && self->ps) {
		Py_BEGIN_ALLOW_THREADS
		rkv_ps_destroy(self->ps);
		Py_END_ALLOW_THREADS
		self->ps = NULL;
	}
	if (self->c) {
		Py_BEGIN_ALLOW_THREADS
		rkv_client_destroy(self->c);
		Py_END_ALLOW_THREADS
	}
	if (self->lock)
		PyThread_free_lock(self->lock);
	free(self->scratch);
	pthread_mutex_destroy(&self->log_mu);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Client_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	ClientObject *self = (ClientObject *)type->tp_alloc(type, 0);

	(void)args;
	(void)kw;
	if (self)
		pthread_mutex_init(&self->log_mu, NULL);
	return (PyObject *)self;
}

/* servers: a str, or a list or tuple of str, joined with commas. */
static PyObject *servers_str(PyObject *o)
{
	PyObject *sep, *s;

	if (PyUnicode_Check(o)) {
		Py_INCREF(o);
		return o;
	}
	if (!PyList_Check(o) && !PyTuple_Check(o)) {
		PyErr_SetString(PyExc_TypeError, "servers must be a str "
				"(\"ADDR,ADDR\") or a list of str");
		return NULL;
	}
	sep = PyUnicode_FromString(",");
	if (!sep)
		return NULL;
	s = PyUnicode_Join(sep, o);
	Py_DECREF(sep);
	return s;
}

static int Client_init(ClientObject *self, PyObject *args, PyObject *kw)
{
	static char kw_servers[] = "servers", kw_cluster[] = "cluster",
		    kw_secret[] = "secret_file", kw_ro[] = "read_only",
		    kw_timeout[] = "timeout_ms",
		    kw_ctimeout[] = "connect_timeout_ms",
		    kw_max[] = "max_value", kw_name[] = "name",
		    kw_infl[] = "max_inflight";
	static char *kwlist[] = { kw_servers, kw_cluster, kw_secret, kw_ro,
				  kw_timeout, kw_ctimeout, kw_max, kw_name,
				  kw_infl, NULL };
	PyObject *servers = Py_None, *sv = NULL;
	const char *cluster = NULL, *secret = NULL, *name = "rkv-python";
	int read_only = 0, rc;
	unsigned timeout = 0, ctimeout = 0, max_value = 0, inflight = 0;
	struct rkv_client_opts o;
	struct rkv_client *c = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OzzpIIIsI", kwlist,
					 &servers, &cluster, &secret,
					 &read_only, &timeout, &ctimeout,
					 &max_value, &name, &inflight))
		return -1;
	if (inflight > 1024) {
		PyErr_Format(PyExc_ValueError, "max_inflight %u is over the "
			     "limit of 1024", inflight);
		return -1;
	}
	if (self->c) {
		PyErr_SetString(PyExc_RuntimeError, "the client is set up "
				"already");
		return -1;
	}
	rkv_client_opts_init(&o);
	if (servers != Py_None && cluster) {
		PyErr_SetString(PyExc_ValueError, "give servers or cluster, "
				"not both");
		return -1;
	}
	if (servers != Py_None) {
		sv = servers_str(servers);
		if (!sv)
			return -1;
		o.servers = PyUnicode_AsUTF8(sv);
		if (!o.servers) {
			Py_DECREF(sv);
			return -1;
		}
	} else if (cluster) {
		o.cluster_file = cluster;
	} else {
		const char *env = getenv("RKV_SERVERS");

		o.servers = env && *env ? env : "tcp://127.0.0.1:7000";
	}
	if (secret)
		o.secret_file = *secret ? secret : NULL;
	o.read_only = read_only;
	self->read_only = read_only;
	o.name = name;
	if (timeout)
		o.timeout_ms = timeout;
	if (ctimeout)
		o.connect_timeout_ms = ctimeout;
	if (inflight)
		o.max_inflight = inflight;
	if (max_value) {
		if (max_value > RKV_VALUE_LIMIT) {
			Py_XDECREF(sv);
			PyErr_Format(PyExc_ValueError, "max_value %u is over the "
				     "limit of %u", max_value, RKV_VALUE_LIMIT);
			return -1;
		}
		o.max_value = max_value;
	}
	o.log_fn = on_log;
	o.log_arg = self;
	self->max_value = o.max_value ? o.max_value : RKV_VALUE_MAX;
	self->scratch = malloc(self->max_value ? self->max_value : 1);
	self->lock = PyThread_allocate_lock();
	if (!self->scratch || !self->lock) {
		Py_XDECREF(sv);
		PyErr_NoMemory();
		return -1;
	}
	log_reset(self);
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_client_create(&o, &c);
	Py_END_ALLOW_THREADS
	if (rc) {
		char what[400];

		snprintf(what, sizeof(what), "cannot connect to %s",
			 o.servers ? o.servers : o.cluster_file);
		Py_XDECREF(sv);
		raise_rc(self, what, rc, NULL, NULL);
		return -1;
	}
	Py_XDECREF(sv);
	self->c = c;
	return 0;
}

static PyObject *Client_close(ClientObject *self, PyObject *unused)
{
	struct rkv_client *c;

	(void)unused;
	if (!self->c)
		Py_RETURN_NONE;
	if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
		Py_BEGIN_ALLOW_THREADS
		PyThread_acquire_lock(self->lock, WAIT_LOCK);
		Py_END_ALLOW_THREADS
	}
	ps_close_all(self); /* the PS objects first, the client still up */
	c = self->c;
	self->c = NULL;
	PyThread_release_lock(self->lock);
	Py_BEGIN_ALLOW_THREADS
	rkv_client_destroy(c);
	Py_END_ALLOW_THREADS
	Py_RETURN_NONE;
}

static PyObject *Client_enter(ClientObject *self, PyObject *unused)
{
	(void)unused;
	if (!self->c) {
		PyErr_SetString(PyExc_ValueError, "the client is closed");
		return NULL;
	}
	Py_INCREF(self);
	return (PyObject *)self;
}

static PyObject *Client_exit(ClientObject *self, PyObject *args)
{
	(void)args;
	return Client_close(self, NULL);
}

static PyObject *Client_get(ClientObject *self, PyObject *key)
{
	struct arg k;
	size_t len = 0;
	int rc;

	if (key_take(self, key, "get", &k))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_get(self->c, k.p, k.len, self->scratch, self->max_value,
		     &len);
	Py_END_ALLOW_THREADS
	arg_release(&k);
	if (rc) {
		give(self);
		return raise_rc(self, "get", rc, key, NULL);
	}
	/* the one copy to a new bytes object; get_into has none */
	PyObject *v = PyBytes_FromStringAndSize(self->scratch, (Py_ssize_t)len);

	give(self);
	return v;
}

static PyObject *Client_get_into(ClientObject *self, PyObject *args)
{
	PyObject *key, *dst;
	Py_buffer out;
	struct arg k;
	size_t len = 0;
	int rc;

	if (!PyArg_ParseTuple(args, "OO", &key, &dst))
		return NULL;
	if (arg_get(key, &k, "key"))
		return NULL;
	if (check_key(&k, "get_into")) {
		arg_release(&k);
		return NULL;
	}
	if (PyObject_GetBuffer(dst, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS)) {
		arg_release(&k);
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError, "get_into: the buffer must be "
			     "writable and C-contiguous, not %.100s",
			     Py_TYPE(dst)->tp_name);
		return NULL;
	}
	if (take(self)) {
		arg_release(&k);
		PyBuffer_Release(&out);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_get(self->c, k.p, k.len, out.buf, (size_t)out.len, &len);
	Py_END_ALLOW_THREADS
	give(self);
	arg_release(&k);
	PyBuffer_Release(&out);
	if (rc == -ENOBUFS) {
		char d[96];

		snprintf(d, sizeof(d), "the value is %zu bytes, the buffer %zd",
			 len, out.len);
		return raise_rc(self, "get_into", rc, NULL, d);
	}
	if (rc)
		return raise_rc(self, "get_into", rc, key, NULL);
	return PyLong_FromSize_t(len);
}

static PyObject *Client_put(ClientObject *self, PyObject *args)
{
	PyObject *key, *val;
	struct arg k, v;
	int rc;

	if (!PyArg_ParseTuple(args, "OO", &key, &val))
		return NULL;
	if (arg_get(key, &k, "key"))
		return NULL;
	if (arg_get(val, &v, "value")) {
		arg_release(&k);
		return NULL;
	}
	if (check_key(&k, "put") || check_val(self, &v, "put") || take(self)) {
		arg_release(&k);
		arg_release(&v);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_put(self->c, k.p, k.len, v.p, v.len);
	Py_END_ALLOW_THREADS
	give(self);
	arg_release(&k);
	arg_release(&v);
	if (rc)
		return raise_rc(self, "put", rc, key, NULL);
	Py_RETURN_NONE;
}

static PyObject *Client_delete(ClientObject *self, PyObject *key)
{
	struct arg k;
	int rc;

	if (key_take(self, key, "delete", &k))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_delete(self->c, k.p, k.len);
	Py_END_ALLOW_THREADS
	give(self);
	arg_release(&k);
	if (rc)
		return raise_rc(self, "delete", rc, key, NULL);
	Py_RETURN_NONE;
}

/* The keys (and values) of a sequence, held for one batch call. */
struct batch {
	size_t n;
	struct arg *k, *v;
	struct rkv_kv *items;
	char *room;
};

static void batch_free(struct batch *b)
{
	for (size_t i = 0; b->k && i < b->n; i++) {
		arg_release(&b->k[i]);
		if (b->v)
			arg_release(&b->v[i]);
	}
	free(b->k);
	free(b->v);
	free(b->items);
	free(b->room);
}

static PyObject *Client_mget(ClientObject *self, PyObject *keys)
{
	PyObject *seq = PySequence_Fast(keys, "mget takes a sequence of keys");
	PyObject *out = NULL;
	struct batch b = { 0 };
	int rc;

	if (!seq)
		return NULL;
	b.n = (size_t)PySequence_Fast_GET_SIZE(seq);
	b.k = calloc(b.n ? b.n : 1, sizeof(*b.k));
	b.items = calloc(b.n ? b.n : 1, sizeof(*b.items));
	b.room = malloc(b.n ? b.n * MGET_ROOM : 1);
	if (!b.k || !b.items || !b.room) {
		PyErr_NoMemory();
		goto done;
	}
	for (size_t i = 0; i < b.n; i++) {
		if (arg_get(PySequence_Fast_GET_ITEM(seq, i), &b.k[i], "key") ||
		    check_key(&b.k[i], "mget"))
			goto done;
		b.items[i] = (struct rkv_kv){ .key = b.k[i].p,
					      .key_len = b.k[i].len,
					      .val = b.room + i * MGET_ROOM,
					      .val_cap = MGET_ROOM };
	}
	if (take(self))
		goto done;
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_mget(self->c, b.items, b.n);
	Py_END_ALLOW_THREADS
	(void)rc; /* each item has its status */
	out = PyList_New((Py_ssize_t)b.n);
	for (size_t i = 0; out && i < b.n; i++) {
		struct rkv_kv *it = &b.items[i];
		const char *p = it->val;
		PyObject *v;

		if (it->status == -ENOBUFS) {
			/* over MGET_ROOM: fetched again alone */
			int st;

			Py_BEGIN_ALLOW_THREADS
			st = rkv_get(self->c, it->key, it->key_len,
				     self->scratch, self->max_value,
				     &it->val_len);
			Py_END_ALLOW_THREADS
			it->status = st;
			p = self->scratch;
		}
		if (it->status == -ENOENT) {
			Py_INCREF(Py_None);
			v = Py_None;
		} else if (it->status) {
			Py_CLEAR(out);
			raise_rc(self, "mget", it->status, NULL, NULL);
			break;
		} else {
			v = PyBytes_FromStringAndSize(p, (Py_ssize_t)it->val_len);
		}
		if (!v) {
			Py_CLEAR(out);
			break;
		}
		PyList_SET_ITEM(out, (Py_ssize_t)i, v);
	}
	give(self);
done:
	batch_free(&b);
	Py_DECREF(seq);
	return out;
}

static PyObject *Client_mput(ClientObject *self, PyObject *pairs)
{
	PyObject *src = PyDict_Check(pairs) ? PyDict_Items(pairs) : pairs;
	PyObject *seq = src ? PySequence_Fast(src, "mput takes a dict or a "
						   "sequence of (key, value)")
			    : NULL;
	struct batch b = { 0 };
	PyObject *ret = NULL;
	int rc;

	if (src != pairs)
		Py_XDECREF(src);
	if (!seq)
		return NULL;
	b.n = (size_t)PySequence_Fast_GET_SIZE(seq);
	b.k = calloc(b.n ? b.n : 1, sizeof(*b.k));
	b.v = calloc(b.n ? b.n : 1, sizeof(*b.v));
	b.items = calloc(b.n ? b.n : 1, sizeof(*b.items));
	if (!b.k || !b.v || !b.items) {
		PyErr_NoMemory();
		goto done;
	}
	for (size_t i = 0; i < b.n; i++) {
		PyObject *kv = PySequence_Fast_GET_ITEM(seq, i);

		if (!PyTuple_Check(kv) || PyTuple_GET_SIZE(kv) != 2) {
			PyErr_SetString(PyExc_TypeError, "mput: each item is "
					"a (key, value) pair");
			goto done;
		}
		if (arg_get(PyTuple_GET_ITEM(kv, 0), &b.k[i], "key") ||
		    arg_get(PyTuple_GET_ITEM(kv, 1), &b.v[i], "value") ||
		    check_key(&b.k[i], "mput") ||
		    check_val(self, &b.v[i], "mput"))
			goto done;
		b.items[i] = (struct rkv_kv){ .key = b.k[i].p,
					      .key_len = b.k[i].len,
					      .val = (void *)b.v[i].p,
					      .val_len = b.v[i].len };
	}
	if (take(self))
		goto done;
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_mput(self->c, b.items, b.n);
	Py_END_ALLOW_THREADS
	give(self);
	if (rc) {
		for (size_t i = 0; i < b.n; i++)
			if (b.items[i].status) {
				rc = b.items[i].status;
				break;
			}
		raise_rc(self, "mput", rc, NULL, NULL);
		goto done;
	}
	Py_INCREF(Py_None);
	ret = Py_None;
done:
	batch_free(&b);
	Py_DECREF(seq);
	return ret;
}

/* rmw: fn(old) with old bytes or None; returns the new value (a
 * buffer), None (leave it as it is) or rkv.DELETE. */
struct rmw_arg {
	PyObject *fn;
	PyObject *exc_type, *exc_val, *exc_tb; /* fn raised */
};

static int rmw_cb(const void *old, size_t old_len, void *out, size_t cap,
		  size_t *out_len, void *argp)
{
	struct rmw_arg *a = argp;
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *o, *r;
	int ret = RKV_RMW_KEEP;

	/* a run after a lost race starts afresh */
	Py_CLEAR(a->exc_type);
	Py_CLEAR(a->exc_val);
	Py_CLEAR(a->exc_tb);
	if (old) {
		o = PyBytes_FromStringAndSize(old, (Py_ssize_t)old_len);
	} else {
		Py_INCREF(Py_None);
		o = Py_None;
	}
	r = o ? PyObject_CallOneArg(a->fn, o) : NULL;
	Py_XDECREF(o);
	if (!r) {
		ret = -ECANCELED;
	} else if (r == Py_None) {
		ret = RKV_RMW_KEEP;
	} else if (r == g_delete) {
		ret = RKV_RMW_DELETE;
	} else {
		struct arg v;

		if (arg_get(r, &v, "the rmw function's result")) {
			ret = -ECANCELED;
		} else if (v.len > cap) {
			PyErr_Format(PyExc_ValueError, "rmw: the new value is "
				     "%zu bytes, over the limit of %zu", v.len,
				     cap);
			ret = -ECANCELED;
		} else {
			memcpy(out, v.p, v.len);
			*out_len = v.len;
			ret = RKV_RMW_WRITE;
		}
		arg_release(&v);
	}
	Py_XDECREF(r);
	if (ret == -ECANCELED)
		PyErr_Fetch(&a->exc_type, &a->exc_val, &a->exc_tb);
	PyGILState_Release(g);
	return ret;
}

static PyObject *Client_rmw(ClientObject *self, PyObject *args)
{
	PyObject *key;
	struct rmw_arg a = { 0 };
	struct arg k;
	int rc;

	if (!PyArg_ParseTuple(args, "OO", &key, &a.fn))
		return NULL;
	if (!PyCallable_Check(a.fn)) {
		PyErr_SetString(PyExc_TypeError, "rmw: fn must be callable");
		return NULL;
	}
	if (key_take(self, key, "rmw", &k))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_rmw(self->c, k.p, k.len, rmw_cb, &a);
	Py_END_ALLOW_THREADS
	give(self);
	arg_release(&k);
	if (a.exc_type) {
		/* fn raised: nothing was changed; its exception goes on */
		PyErr_Restore(a.exc_type, a.exc_val, a.exc_tb);
		return NULL;
	}
	if (rc)
		return raise_rc(self, "rmw", rc, NULL, NULL);
	Py_RETURN_NONE;
}

static int add_u64(PyObject *d, const char *k, uint64_t v)
{
	PyObject *o = PyLong_FromUnsignedLongLong(v);
	int rc = o ? PyDict_SetItemString(d, k, o) : -1;

	Py_XDECREF(o);
	return rc;
}

static PyObject *op_dict(const struct rkv_op_stats *s)
{
	PyObject *d = PyDict_New();

	if (d && (add_u64(d, "ops", s->ops) || add_u64(d, "errors", s->errors) ||
		  add_u64(d, "rtts", s->rtts) ||
		  add_u64(d, "retries", s->retries)))
		Py_CLEAR(d);
	return d;
}

static PyObject *Client_stats(ClientObject *self, PyObject *unused)
{
	struct rkv_client_stats st;
	PyObject *d;
	static const char *const kinds[] = { "get", "put", "delete", "rmw" };

	(void)unused;
	if (take(self))
		return NULL;
	rkv_client_stats(self->c, &st);
	give(self);
	d = PyDict_New();
	const struct rkv_op_stats *ops[] = { &st.get, &st.put, &st.del,
					     &st.rmw };

	for (int i = 0; d && i < 4; i++) {
		PyObject *o = op_dict(ops[i]);

		if (!o || PyDict_SetItemString(d, kinds[i], o))
			Py_CLEAR(d);
		Py_XDECREF(o);
	}
	if (d && (add_u64(d, "mget_batches", st.mget_batches) ||
		  add_u64(d, "mget_rtts", st.mget_rtts) ||
		  add_u64(d, "cache_hits", st.cache_hits) ||
		  add_u64(d, "cache_misses", st.cache_misses) ||
		  add_u64(d, "lock_waits", st.lock_waits) ||
		  add_u64(d, "lock_steals", st.lock_steals) ||
		  add_u64(d, "chunks", st.chunks) ||
		  add_u64(d, "blocks_returned", st.blocks_returned) ||
		  add_u64(d, "doorbells", st.doorbells) ||
		  add_u64(d, "reconnects", st.reconnects) ||
		  add_u64(d, "redirects", st.redirects) ||
		  add_u64(d, "servers_down", st.servers_down) ||
		  add_u64(d, "parts_degraded", st.parts_degraded) ||
		  add_u64(d, "lease_waits", st.lease_waits) ||
		  add_u64(d, "level_news", st.level_news) ||
		  add_u64(d, "grows", st.grows)))
		Py_CLEAR(d);
	return d;
}

/* scan: the keys, collected without the GIL, then a list. */
struct keys_acc {
	char *buf;
	size_t len, cap;
	size_t n;
	int oom;
};

static int scan_cb(const void *key, size_t key_len, const void *val,
		   size_t val_len, void *arg)
{
	struct keys_acc *a = arg;
	size_t need = a->len + sizeof(size_t) + key_len;

	(void)val;
	(void)val_len;
	if (need > a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 65536;
		char *p;

		while (cap < need)
			cap *= 2;
		p = realloc(a->buf, cap);
		if (!p) {
			a->oom = 1;
			return -ENOMEM;
		}
		a->buf = p;
		a->cap = cap;
	}
	memcpy(a->buf + a->len, &key_len, sizeof(size_t));
	memcpy(a->buf + a->len + sizeof(size_t), key, key_len);
	a->len = need;
	a->n++;
	return 0;
}

static PyObject *Client_keys(ClientObject *self, PyObject *unused)
{
	struct keys_acc a = { 0 };
	struct rkv_scan_stats st;
	PyObject *out;
	int rc;

	(void)unused;
	if (take(self))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_scan(self->c, scan_cb, &a, &st);
	Py_END_ALLOW_THREADS
	give(self);
	if (rc) {
		free(a.buf);
		if (a.oom)
			return PyErr_NoMemory();
		return raise_rc(self, "keys", rc, NULL, NULL);
	}
	out = PyList_New((Py_ssize_t)a.n);
	for (size_t o = 0, i = 0; out && i < a.n; i++) {
		size_t len;
		PyObject *k;

		memcpy(&len, a.buf + o, sizeof(size_t));
		k = PyBytes_FromStringAndSize(a.buf + o + sizeof(size_t),
					      (Py_ssize_t)len);
		if (!k) {
			Py_CLEAR(out);
			break;
		}
		PyList_SET_ITEM(out, (Py_ssize_t)i, k);
		o += sizeof(size_t) + len;
	}
	free(a.buf);
	return out;
}

static PyObject *Client_servers(ClientObject *self, void *closure)
{
	PyObject *l;
	unsigned n;

	(void)closure;
	if (!self->c) {
		PyErr_SetString(PyExc_ValueError, "the client is closed");
		return NULL;
	}
	n = rkv_client_nservers(self->c);
	l = PyList_New(n);
	for (unsigned i = 0; l && i < n; i++) {
		PyObject *t = Py_BuildValue("(ss)",
					    rkv_client_server_name(self->c, i),
					    rkv_client_server_addr(self->c, i));

		if (!t) {
			Py_CLEAR(l);
			break;
		}
		PyList_SET_ITEM(l, i, t);
	}
	return l;
}

static PyObject *Client_closed(ClientObject *self, void *closure)
{
	(void)closure;
	return PyBool_FromLong(self->c == NULL);
}

static PyMethodDef Client_methods[] = {
	{ "get", (PyCFunction)Client_get, METH_O,
	  "get(key) -> bytes: the value; KeyError when absent" },
	{ "get_into", (PyCFunction)Client_get_into, METH_VARARGS,
	  "get_into(key, buffer) -> int: the value written into a writable "
	  "C-contiguous buffer where it lies; its length" },
	{ "put", (PyCFunction)Client_put, METH_VARARGS,
	  "put(key, value): store value (bytes or any C-contiguous buffer)" },
	{ "delete", (PyCFunction)Client_delete, METH_O,
	  "delete(key); KeyError when absent" },
	{ "mget", (PyCFunction)Client_mget, METH_O,
	  "mget(keys) -> list: each value, or None when absent (2 RTTs for "
	  "any number of keys on one server)" },
	{ "mput", (PyCFunction)Client_mput, METH_O,
	  "mput(dict or [(key, value), ...])" },
	{ "rmw", (PyCFunction)Client_rmw, METH_VARARGS,
	  "rmw(key, fn): atomically apply fn(old) (old: bytes, or None when "
	  "absent) under the key's lock; fn returns the new value, None to "
	  "leave it, or rkv.DELETE; it may run more than once; if it raises, "
	  "nothing changes and the exception goes on" },
	{ "keys", (PyCFunction)Client_keys, METH_NOARGS,
	  "keys() -> list of bytes: every key, by a one-sided scan "
	  "(rkv_scan's guarantees)" },
	{ "tensor", (PyCFunction)(void (*)(void))Client_tensor,
	  METH_VARARGS | METH_KEYWORDS,
	  "tensor(name, shape=None, dtype='float32', create=False, init=None, "
	  "shard=0) -> Tensor: open (or create, zeros or init) a dense "
	  "tensor of the parameter server" },
	{ "delete_tensor", (PyCFunction)Client_delete_tensor, METH_O,
	  "delete_tensor(name)" },
	{ "embedding", (PyCFunction)(void (*)(void))Client_embedding,
	  METH_VARARGS | METH_KEYWORDS,
	  "embedding(name, num_rows=0, dim=0, optimizer='sgd', lr=0.01, "
	  "betas=(0.9, 0.999), eps=None, initial_accumulator=0.0, "
	  "init_scale=0.01, seed=0, create=False, exist_ok=False) -> "
	  "Embedding: open (or create) a sparse embedding table; rows start "
	  "uniform in [-init_scale, init_scale) from (seed, id); eps defaults "
	  "to 1e-10 for adagrad, 1e-8 for adam" },
	{ "delete_embedding", (PyCFunction)Client_delete_embedding, METH_O,
	  "delete_embedding(name): remove its rows (a scan) and the table" },
	{ "barrier", (PyCFunction)Client_barrier, METH_VARARGS,
	  "barrier(name, nworkers) -> Barrier" },
	{ "counter", (PyCFunction)Client_counter, METH_O,
	  "counter(name) -> Counter: a named 8-byte server counter" },
	{ "stats", (PyCFunction)Client_stats, METH_NOARGS,
	  "stats() -> dict: the client's counters (ops and RTTs by kind...)" },
	{ "close", (PyCFunction)Client_close, METH_NOARGS,
	  "close(): disconnect; later calls raise ValueError" },
	{ "__enter__", (PyCFunction)Client_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)Client_exit, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef Client_getset[] = {
	{ "servers", (getter)Client_servers, NULL,
	  "[(name, address), ...] of the client's servers", NULL },
	{ "closed", (getter)Client_closed, NULL, "whether close() ran", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject ClientType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "rkv.Client",
	.tp_basicsize = sizeof(ClientObject),
	.tp_dealloc = (destructor)Client_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Client(servers=None, cluster=None, secret_file=None, "
		  "read_only=False, timeout_ms=0, connect_timeout_ms=0, "
		  "max_value=0, name='rkv-python', max_inflight=0): a client "
		  "of rkv servers (max_inflight: pipelined ops at once, the PS "
		  "calls' rows and shards in flight together, default 32; "
		  "servers: \"ADDR,ADDR\" or a list; default $RKV_SERVERS, "
		  "else tcp://127.0.0.1:7000; cluster: a cluster file or "
		  "etcd://HOST:PORT/CLUSTER)",
	.tp_methods = Client_methods,
	.tp_getset = Client_getset,
	.tp_init = (initproc)Client_init,
	.tp_new = Client_new,
};

static struct PyModuleDef rkv_module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "rkv",
	.m_doc = "rkv: a distributed key-value store on one-sided RDMA "
		 "(librkv for Python)",
	.m_size = -1,
};

PyMODINIT_FUNC PyInit_rkv(void);

PyMODINIT_FUNC PyInit_rkv(void)
{
	PyObject *m;

	if (PyType_Ready(&ClientType) < 0)
		return NULL;
	m = PyModule_Create(&rkv_module);
	if (!m)
		return NULL;
	/* a unique object: no value a function returns can be it by chance */
	g_delete = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
	if (!g_delete || PyModule_AddObject(m, "DELETE", g_delete) ||
	    PyModule_AddIntConstant(m, "KEY_MAX", RKV_KEY_MAX) ||
	    PyModule_AddIntConstant(m, "VALUE_MAX", RKV_VALUE_MAX) ||
	    PyModule_AddStringConstant(m, "__version__", RKV_VERSION)) {
		Py_DECREF(m);
		return NULL;
	}
	Py_INCREF(g_delete); /* the module holds one reference, we one */
	if (ps_types_ready(m)) {
		Py_DECREF(m);
		return NULL;
	}
	Py_INCREF(&ClientType);
	if (PyModule_AddObject(m, "Client", (PyObject *)&ClientType)) {
		Py_DECREF(&ClientType);
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
