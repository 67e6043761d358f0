/* SPDX-License-Identifier: MIT */
/*
 * embed.c - sparse embedding tables for Python (rkv_ps.h's rkv_emb_*):
 *
 *   e = client.embedding("user", num_rows=10_000_000, dim=64,
 *                        optimizer="adam", lr=1e-3, create=True)
 *   rows = e.pull(ids)                # numpy float32 [len(ids), 64]
 *   e.push(ids, grads)                # one optimizer step per row
 *   r = e.pull_async(ids, into=buf); ...; r.wait()
 *
 * ids: a numpy or torch int64/int32/uint64 array, or any sequence of
 * ints; each must be in [0, num_rows) (IndexError otherwise, and nothing
 * is read or changed).  grads and into are float32 C-contiguous buffers of
 * len(ids) * dim elements (a torch CPU tensor through .numpy()); others
 * are refused with TypeError, not copied.  The GIL is released while
 * librkv works.
 */
#include "rkvpy.h"

#include <structmember.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	PyObject_HEAD
	struct pschild ch;
	ClientObject *cl;
	struct rkv_ps_emb *e;      /* NULL: closed */
	PyObject *name;
	struct rkv_emb_conf conf;
	unsigned outstanding;      /* requests not waited for */
} EmbObject;

static PyTypeObject EmbType;

static void emb_fini(struct pschild *ch)
{
	EmbObject *e = (EmbObject *)((char *)ch - offsetof(EmbObject, ch));

	rkv_emb_close(e->e);
	e->e = NULL;
}

static void Emb_dealloc(EmbObject *self)
{
	child_dealloc_fini(self->cl, &self->ch, self->e != NULL);
	Py_XDECREF(self->cl);
	Py_XDECREF(self->name);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int parse_optim(const char *s, enum rkv_emb_optim *o)
{
	if (!strcmp(s, "sgd"))
		*o = RKV_EMB_SGD;
	else if (!strcmp(s, "adagrad"))
		*o = RKV_EMB_ADAGRAD;
	else if (!strcmp(s, "adam"))
		*o = RKV_EMB_ADAM;
	else {
		PyErr_Format(PyExc_ValueError, "embedding: optimizer '%s': one "
			     "of sgd, adagrad, adam", s);
		return -1;
	}
	return 0;
}

/* The configuration a create asks for, checked here so that the error
 * names the argument. */
static int conf_check(const struct rkv_emb_conf *c)
{
	const char *bad = NULL;

	if (!(c->lr > 0) || c->lr != c->lr || c->lr > 3.4e38f)
		bad = "lr must be > 0";
	else if (!(c->eps >= 0) || c->eps > 3.4e38f)
		bad = "eps must be >= 0";
	else if (!(c->init_accum >= 0) || c->init_accum > 3.4e38f)
		bad = "initial_accumulator must be >= 0";
	else if (!(c->init_scale >= 0) || c->init_scale > 3.4e38f)
		bad = "init_scale must be >= 0";
	else if (c->optim == RKV_EMB_ADAM &&
		 (!(c->beta1 >= 0 && c->beta1 < 1) ||
		  !(c->beta2 >= 0 && c->beta2 < 1)))
		bad = "betas must be in [0, 1)";
	if (bad) {
		PyErr_Format(PyExc_ValueError, "embedding: %s", bad);
		return -1;
	}
	return 0;
}

PyObject *Client_embedding(ClientObject *self, PyObject *args, PyObject *kw)
{
	static char k0[] = "name", k1[] = "num_rows", k2[] = "dim",
		    k3[] = "optimizer", k4[] = "lr", k5[] = "betas",
		    k6[] = "eps", k7[] = "initial_accumulator",
		    k8[] = "init_scale", k9[] = "seed", k10[] = "create",
		    k11[] = "exist_ok";
	static char *kwlist[] = { k0, k1, k2, k3, k4, k5, k6, k7, k8, k9,
				  k10, k11, NULL };
	const char *name, *optim_s = "sgd";
	long long num_rows = 0, dim = 0;
	unsigned long long seed = 0;
	PyObject *eps_o = Py_None;
	struct rkv_emb_conf conf;
	struct rkv_ps_emb *e = NULL;
	int create = 0, exist_ok = 0, rc = 0;
	EmbObject *obj;
	char what[300];

	rkv_emb_conf_init(&conf);
	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|LLsf(ff)OffKpp", kwlist,
					 &name, &num_rows, &dim, &optim_s,
					 &conf.lr, &conf.beta1, &conf.beta2,
					 &eps_o, &conf.init_accum,
					 &conf.init_scale, &seed, &create,
					 &exist_ok))
		return NULL;
	snprintf(what, sizeof(what), "embedding '%s'", name);
	if (num_rows < 0 || dim < 0 || dim > (1 << 20) ||
	    (create && (!num_rows || !dim))) {
		PyErr_SetString(PyExc_ValueError, create ?
				"embedding: create needs num_rows >= 1 and "
				"1 <= dim <= 1048576" :
				"embedding: num_rows and dim must be >= 0");
		return NULL;
	}
	if (parse_optim(optim_s, &conf.optim))
		return NULL;
	if (eps_o == Py_None) {
		conf.eps = conf.optim == RKV_EMB_ADAGRAD ? 1e-10f : 1e-8f;
	} else {
		double d = PyFloat_AsDouble(eps_o);

		if (d == -1.0 && PyErr_Occurred())
			return NULL;
		conf.eps = (float)d;
	}
	conf.num_rows = (uint64_t)num_rows;
	conf.dim = (uint32_t)dim;
	conf.seed = seed;
	if (create && conf_check(&conf))
		return NULL;
	if (take(self))
		return NULL;
	if (ensure_ps(self)) {
		give(self);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	if (create) {
		rc = rkv_emb_create(self->ps, name, &conf);
		if (rc == -EEXIST && exist_ok)
			rc = 0;
	}
	if (!rc)
		rc = rkv_emb_open(self->ps, name, &e);
	Py_END_ALLOW_THREADS
	if (rc) {
		give(self);
		return raise_rc(self, what, rc, NULL,
				rc == -ENOENT ? "no such table: create=True "
						"makes it"
				: rc == -EEXIST ? "it exists: open it without "
						  "create, or exist_ok=True"
				: rc == -EMSGSIZE ? "a row (dim and the "
						    "optimizer's state) is "
						    "larger than the client's "
						    "max_value"
				: rc == -EINVAL ? "a bad name, or the key holds "
						  "something else"
						: NULL);
	}
	{
		struct rkv_emb_conf have;

		rkv_emb_conf_get(e, &have);
		if ((num_rows && have.num_rows != conf.num_rows) ||
		    (dim && have.dim != conf.dim)) {
			rkv_emb_close(e);
			give(self);
			PyErr_Format(PyExc_ValueError, "%s has %llu rows of "
				     "dim %u, not %lld of dim %lld", what,
				     (unsigned long long)have.num_rows,
				     have.dim, num_rows, dim);
			return NULL;
		}
		conf = have;
	}
	obj = PyObject_New(EmbObject, &EmbType);
	if (!obj) {
		rkv_emb_close(e);
		give(self);
		return NULL;
	}
	obj->e = e;
	obj->cl = self;
	Py_INCREF(self);
	obj->name = PyUnicode_FromString(name);
	obj->conf = conf;
	obj->outstanding = 0;
	child_add(self, &obj->ch, KIND_TENSOR, emb_fini);
	give(self);
	return (PyObject *)obj;
}

PyObject *Client_delete_embedding(ClientObject *self, PyObject *name_o)
{
	return ps_delete_named(self, name_o, rkv_emb_delete,
			       "delete_embedding", "no such table");
}

/* ------------------------------------------------------------- ids */

struct ids {
	uint64_t *v;       /* the ids as uint64 */
	size_t n;
	Py_buffer view;    /* when v points into it */
	int has_view;
	uint64_t *own;     /* when converted */
};

static void ids_release(struct ids *d)
{
	if (d->has_view)
		PyBuffer_Release(&d->view);
	PyMem_Free(d->own);
	memset(d, 0, sizeof(*d));
}

static int id_bad(EmbObject *self, long long id)
{
	PyErr_Format(PyExc_IndexError, "embedding '%U': id %lld is out of "
		     "range [0, %llu)", self->name, id,
		     (unsigned long long)self->conf.num_rows);
	return -1;
}

/* ids as uint64, each checked against num_rows: int64 and uint64 buffers
 * are used where they lie, int32 ones and sequences converted. */
static int ids_get(EmbObject *self, PyObject *o, struct ids *d)
{
	uint64_t rows = self->conf.num_rows;
	PyObject *np = NULL, *seq;

	memset(d, 0, sizeof(*d));
	if (!PyObject_CheckBuffer(o) && PyObject_HasAttrString(o, "numpy")) {
		np = PyObject_CallMethod(o, "numpy", NULL); /* torch */
		if (!np)
			return -1;
		o = np;
	}
	if (PyObject_CheckBuffer(o)) {
		const char *f;
		int rc = PyObject_GetBuffer(o, &d->view, PyBUF_FORMAT |
							   PyBUF_C_CONTIGUOUS);

		Py_XDECREF(np); /* the view holds the array */
		if (rc) {
			PyErr_Clear();
			PyErr_SetString(PyExc_TypeError, "ids must be a "
					"C-contiguous integer array or a "
					"sequence of ints");
			return -1;
		}
		d->has_view = 1;
		f = d->view.format ? d->view.format : "B";
		if (*f == '<' || *f == '=' || *f == '@')
			f++;
		if (d->view.itemsize == 8 && strchr("qQlL", *f) && f[1] == 0) {
			int sgn = *f == 'q' || *f == 'l';

			d->v = d->view.buf;
			d->n = (size_t)d->view.len / 8;
			for (size_t k = 0; k < d->n; k++)
				if (d->v[k] >= rows) {
					long long id = (long long)d->v[k];

					if (!sgn && id < 0)
						id = -1; /* past INT64_MAX */
					ids_release(d);
					return id_bad(self, id);
				}
			return 0;
		}
		if (d->view.itemsize == 4 && strchr("iIlL", *f) && f[1] == 0) {
			d->n = (size_t)d->view.len / 4;
			d->own = PyMem_Malloc((d->n ? d->n : 1) * 8);
			if (!d->own) {
				ids_release(d);
				PyErr_NoMemory();
				return -1;
			}
			for (size_t k = 0; k < d->n; k++) {
				long long id = *f == 'I' || *f == 'L' ?
					(long long)((uint32_t *)d->view.buf)[k] :
					(long long)((int32_t *)d->view.buf)[k];

				if (id < 0 || (uint64_t)id >= rows) {
					ids_release(d);
					return id_bad(self, id);
				}
				d->own[k] = (uint64_t)id;
			}
			d->v = d->own;
			return 0;
		}
		PyErr_Format(PyExc_TypeError, "ids must be int64, uint64 or "
			     "int32, not format '%s'", d->view.format ?
			     d->view.format : "B");
		ids_release(d);
		return -1;
	}
	Py_XDECREF(np);
	seq = PySequence_Fast(o, "ids must be an integer array or a sequence "
			      "of ints");
	if (!seq)
		return -1;
	d->n = (size_t)PySequence_Fast_GET_SIZE(seq);
	d->own = PyMem_Malloc((d->n ? d->n : 1) * 8);
	if (!d->own) {
		Py_DECREF(seq);
		PyErr_NoMemory();
		return -1;
	}
	for (size_t k = 0; k < d->n; k++) {
		long long id = PyLong_AsLongLong(
			PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)k));

		if (id == -1 && PyErr_Occurred()) {
			Py_DECREF(seq);
			ids_release(d);
			return -1;
		}
		if (id < 0 || (uint64_t)id >= rows) {
			Py_DECREF(seq);
			ids_release(d);
			return id_bad(self, id);
		}
		d->own[k] = (uint64_t)id;
	}
	Py_DECREF(seq);
	d->v = d->own;
	return 0;
}

/* -------------------------------------------------------- pull / push */

/* The ids of a call on an open table: 0, or -1 with an error. */
static int ids_open(EmbObject *self, PyObject *ids_o, struct ids *d)
{
	if (!self->e) {
		PyErr_SetString(PyExc_ValueError, "the embedding is closed");
		return -1;
	}
	return ids_get(self, ids_o, d);
}

/* into (writable float32 of n * dim elements) or a new numpy array
 * [n, dim]; *result the pull's return value (a new reference). */
static int pull_dest(EmbObject *self, PyObject *into, size_t n, Py_buffer *v,
		     PyObject **result)
{
	size_t have, want = n * self->conf.dim;

	*result = NULL;
	if (into == Py_None) {
		PyObject *np = PyImport_ImportModule("numpy");

		if (!np) {
			PyErr_Clear();
			PyErr_SetString(PyExc_TypeError, "pull: without numpy, "
					"give into= a float32 buffer");
			return -1;
		}
		into = PyObject_CallMethod(np, "empty", "((nI)s)",
					   (Py_ssize_t)n, self->conf.dim,
					   "float32");
		Py_DECREF(np);
		if (!into)
			return -1;
	} else {
		Py_INCREF(into);
	}
	if (floats_get(into, v, 1, "pull: into", &have)) {
		Py_DECREF(into);
		return -1;
	}
	if (have != want) {
		PyBuffer_Release(v);
		Py_DECREF(into);
		PyErr_Format(PyExc_ValueError, "pull: into has %zu elements, "
			     "%zu ids x dim %u need %zu", have, n,
			     self->conf.dim, want);
		return -1;
	}
	*result = into;
	return 0;
}

static int push_src(EmbObject *self, PyObject *grads, size_t n, Py_buffer *v)
{
	size_t have, want = n * self->conf.dim;

	if (floats_get(grads, v, 0, "push: grads", &have))
		return -1;
	if (have != want) {
		PyBuffer_Release(v);
		PyErr_Format(PyExc_ValueError, "push: grads has %zu elements, "
			     "%zu ids x dim %u need %zu", have, n,
			     self->conf.dim, want);
		return -1;
	}
	return 0;
}

/* pull(ids, into=None) and pull_async: the work of both. */
static PyObject *emb_pull(EmbObject *self, PyObject *args, PyObject *kw,
			  int async)
{
	static char kw_ids[] = "ids", kw_into[] = "into";
	static char *kwlist[] = { kw_ids, kw_into, NULL };
	PyObject *ids_o, *into = Py_None, *result, *req;
	struct rkv_ps_req *r = NULL;
	struct ids d;
	Py_buffer v;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwlist, &ids_o,
					 &into) ||
	    ids_open(self, ids_o, &d))
		return NULL;
	if (pull_dest(self, into, d.n, &v, &result)) {
		ids_release(&d);
		return NULL;
	}
	if (child_take(self->cl, self->e, "embedding")) {
		ids_release(&d);
		PyBuffer_Release(&v);
		Py_DECREF(result);
		return NULL;
	}
	if (async) {
		rc = rkv_emb_pull_async(self->e, d.v, d.n, v.buf, &r);
		ids_release(&d);
		if (rc)
			goto fail;
		req = ps_request_new(self->cl, (PyObject *)self,
				     &self->outstanding, NULL, r, &v, result,
				     "pull");
		give(self->cl);
		return req;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_emb_pull(self->e, d.v, d.n, v.buf);
	Py_END_ALLOW_THREADS
	ids_release(&d);
	if (rc)
		goto fail;
	give(self->cl);
	PyBuffer_Release(&v);
	return result;
fail:
	give(self->cl);
	PyBuffer_Release(&v);
	Py_DECREF(result);
	return raise_rc(self->cl, async ? "pull_async" : "pull", rc, NULL,
			NULL);
}

static PyObject *emb_push(EmbObject *self, PyObject *args, PyObject *kw,
			  int async)
{
	static char kw_ids[] = "ids", kw_g[] = "grads";
	static char *kwlist[] = { kw_ids, kw_g, NULL };
	PyObject *ids_o, *grads, *req;
	struct rkv_ps_req *r = NULL;
	struct ids d;
	Py_buffer v;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO", kwlist, &ids_o,
					 &grads) ||
	    ids_open(self, ids_o, &d))
		return NULL;
	if (push_src(self, grads, d.n, &v)) {
		ids_release(&d);
		return NULL;
	}
	if (child_take(self->cl, self->e, "embedding")) {
		ids_release(&d);
		PyBuffer_Release(&v);
		return NULL;
	}
	/* ids and grads are read before the async call returns (summed per
	 * row into the request), so both are let go at once */
	if (async) {
		rc = rkv_emb_push_async(self->e, d.v, d.n, v.buf, &r);
	} else {
		Py_BEGIN_ALLOW_THREADS
		rc = rkv_emb_push(self->e, d.v, d.n, v.buf);
		Py_END_ALLOW_THREADS
	}
	ids_release(&d);
	PyBuffer_Release(&v);
	if (rc) {
		give(self->cl);
		return raise_rc(self->cl, async ? "push_async" : "push", rc,
				NULL, rc == -EROFS ? "a read-only client "
						     "cannot push" : NULL);
	}
	if (!async) {
		give(self->cl);
		Py_RETURN_NONE;
	}
	req = ps_request_new(self->cl, (PyObject *)self, &self->outstanding,
			     NULL, r, NULL, NULL, "push");
	give(self->cl);
	return req;
}

static PyObject *Emb_pull(EmbObject *self, PyObject *a, PyObject *k)
{
	return emb_pull(self, a, k, 0);
}

static PyObject *Emb_pull_async(EmbObject *self, PyObject *a, PyObject *k)
{
	return emb_pull(self, a, k, 1);
}

static PyObject *Emb_push(EmbObject *self, PyObject *a, PyObject *k)
{
	return emb_push(self, a, k, 0);
}

static PyObject *Emb_push_async(EmbObject *self, PyObject *a, PyObject *k)
{
	return emb_push(self, a, k, 1);
}

static PyObject *Emb_close(EmbObject *self, PyObject *unused)
{
	(void)unused;
	return child_close(self->cl, &self->ch, self->e != NULL,
			   self->outstanding, "embedding");
}

/* f as the shortest decimal that reads back as f (0.001f is 0.001, not
 * 0.0010000000474974513), so that hyper["lr"] == 1e-3. */
static double short_f(float f)
{
	char b[40];

	for (int prec = 6; prec < 9; prec++) {
		snprintf(b, sizeof(b), "%.*g", prec, (double)f);
		if (strtof(b, NULL) == f)
			return strtod(b, NULL);
	}
	return (double)f;
}

static PyObject *Emb_get(EmbObject *self, void *closure)
{
	const struct rkv_emb_conf *c = &self->conf;
	const char *what = closure;

	if (!strcmp(what, "num_rows"))
		return PyLong_FromUnsignedLongLong(c->num_rows);
	if (!strcmp(what, "dim"))
		return PyLong_FromUnsignedLong(c->dim);
	if (!strcmp(what, "optimizer"))
		return PyUnicode_FromString(rkv_emb_optim_str(c->optim));
	return Py_BuildValue("{s:d,s:(dd),s:d,s:d,s:d,s:K}", "lr",
			     short_f(c->lr), "betas", short_f(c->beta1),
			     short_f(c->beta2), "eps", short_f(c->eps),
			     "initial_accumulator", short_f(c->init_accum),
			     "init_scale", short_f(c->init_scale), "seed",
			     (unsigned long long)c->seed);
}

static PyMethodDef Emb_methods[] = {
	{ "pull", (PyCFunction)(void (*)(void))Emb_pull,
	  METH_VARARGS | METH_KEYWORDS,
	  "pull(ids, into=None) -> rows [len(ids), dim]: into (writable "
	  "float32, len(ids) * dim elements) or a new numpy array; rows never "
	  "pushed read as their seeded initial values" },
	{ "push", (PyCFunction)(void (*)(void))Emb_push,
	  METH_VARARGS | METH_KEYWORDS,
	  "push(ids, grads): one optimizer step per distinct row, atomically "
	  "under its lock (duplicate ids' gradients summed first)" },
	{ "pull_async", (PyCFunction)(void (*)(void))Emb_pull_async,
	  METH_VARARGS | METH_KEYWORDS,
	  "pull_async(ids, into=None) -> Request; wait() returns the rows" },
	{ "push_async", (PyCFunction)(void (*)(void))Emb_push_async,
	  METH_VARARGS | METH_KEYWORDS,
	  "push_async(ids, grads) -> Request (ids and grads are read at once)" },
	{ "close", (PyCFunction)Emb_close, METH_NOARGS, "close()" },
	{ NULL, NULL, 0, NULL },
};

static PyMemberDef Emb_members[] = {
	{ "name", T_OBJECT, offsetof(EmbObject, name), READONLY, NULL },
	{ NULL, 0, 0, 0, NULL },
};

static char g_rows[] = "num_rows", g_dim[] = "dim", g_opt[] = "optimizer",
	    g_hyper[] = "hyper";

static PyGetSetDef Emb_getset[] = {
	{ g_rows, (getter)Emb_get, NULL, "rows", g_rows },
	{ g_dim, (getter)Emb_get, NULL, "floats per row", g_dim },
	{ g_opt, (getter)Emb_get, NULL, "sgd, adagrad or adam", g_opt },
	{ g_hyper, (getter)Emb_get, NULL,
	  "the hyper-parameters fixed at creation (a dict)", g_hyper },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject EmbType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "rkv.Embedding",
	.tp_basicsize = sizeof(EmbObject),
	.tp_dealloc = (destructor)Emb_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A sparse embedding table of the parameter server "
		  "(Client.embedding)",
	.tp_methods = Emb_methods,
	.tp_members = Emb_members,
	.tp_getset = Emb_getset,
};

int emb_type_ready(PyObject *m)
{
	if (PyType_Ready(&EmbType) < 0)
		return -1;
	Py_INCREF(&EmbType);
	if (PyModule_AddObject(m, "Embedding", (PyObject *)&EmbType)) {
		Py_DECREF(&EmbType);
		return -1;
	}
	return 0;
}
