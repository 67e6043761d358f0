/* SPDX-License-Identifier: MIT */
/*
 * ps.c - the parameter-server half of the Python module (rkv_ps.h):
 *
 *   t = client.tensor("w", shape=(256, 64), create=True)
 *   t.push(grad, rule="sgd", lr=0.1)       # grad: float32, C-contiguous
 *   w = t.pull()                           # a numpy array of t.shape
 *   r = t.pull_async(into=w); ...; r.wait()
 *   client.barrier("epoch", 4).wait()
 *   client.counter("steps").add(1)
 *
 * Buffers are float32 ('f') and C-contiguous, taken where they lie (a
 * torch CPU tensor through .numpy(), which shares its memory); anything
 * else is refused with TypeError, never copied behind the caller's back.
 * The GIL is released while librkv works.
 */
#include "rkvpy.h"

#include <structmember.h>

#include <errno.h>
#include <string.h>


/* ------------------------------------------------------- the children */

void child_add(ClientObject *cl, struct pschild *ch, int kind,
		      void (*fini)(struct pschild *))
{
	ch->kind = kind;
	ch->fini = fini;
	ch->prev = NULL;
	ch->next = cl->children;
	if (cl->children)
		cl->children->prev = ch;
	cl->children = ch;
}

void child_del(ClientObject *cl, struct pschild *ch)
{
	if (ch->prev)
		ch->prev->next = ch->next;
	else if (cl->children == ch)
		cl->children = ch->next;
	if (ch->next)
		ch->next->prev = ch->prev;
	ch->next = ch->prev = NULL;
}

void ps_close_all(ClientObject *self)
{
	for (int kind = KIND_REQ; kind <= KIND_BARRIER; kind++) {
		struct pschild *ch = self->children, *next;

		for (; ch; ch = next) {
			next = ch->next;
			if (ch->kind != kind)
				continue;
			child_del(self, ch);
			ch->fini(ch);
		}
	}
	if (self->ps) {
		Py_BEGIN_ALLOW_THREADS
		rkv_ps_destroy(self->ps);
		Py_END_ALLOW_THREADS
		self->ps = NULL;
	}
}

/* The client for a call of a child, or -1 with ValueError (closed). */
int child_take(ClientObject *cl, const void *handle, const char *what)
{
	if (take(cl))
		return -1;
	if (!handle) {
		give(cl);
		PyErr_Format(PyExc_ValueError, "the %s is closed", what);
		return -1;
	}
	return 0;
}

/* The child's dealloc: finish it (the client taken, without raising). */
void child_dealloc_fini(ClientObject *cl, struct pschild *ch,
			       int open)
{
	if (!open || !cl->c)
		return;
	if (!PyThread_acquire_lock(cl->lock, NOWAIT_LOCK)) {
		Py_BEGIN_ALLOW_THREADS
		PyThread_acquire_lock(cl->lock, WAIT_LOCK);
		Py_END_ALLOW_THREADS
	}
	child_del(cl, ch);
	ch->fini(ch);
	PyThread_release_lock(cl->lock);
}

int ensure_ps(ClientObject *self)
{
	int rc;

	if (self->ps)
		return 0;
	rc = rkv_ps_create(self->c, &self->ps);
	if (rc) {
		raise_rc(self, "tensor", rc, NULL, NULL);
		return -1;
	}
	return 0;
}

/* A float32 C-contiguous buffer: its elements in *n.  -1 with TypeError
 * for anything else. */
int floats_get(PyObject *o, Py_buffer *v, int writable,
		      const char *what, size_t *n)
{
	PyObject *np = NULL;
	int rc;

	rc = PyObject_GetBuffer(o, v, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS |
					      (writable ? PyBUF_WRITABLE : 0));
	if (rc)
		PyErr_Clear(); /* HasAttr must not run with an error set */
	if (rc && PyObject_HasAttrString(o, "numpy")) {
		/* a torch CPU tensor: .numpy() shares its memory */
		np = PyObject_CallMethod(o, "numpy", NULL);
		if (!np)
			return -1;
		rc = PyObject_GetBuffer(np, v, PyBUF_FORMAT |
						       PyBUF_C_CONTIGUOUS |
						       (writable ? PyBUF_WRITABLE
								 : 0));
		Py_DECREF(np); /* the view holds the array */
	}
	if (rc) {
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError, "%s must be a %sC-contiguous "
			     "float32 buffer (numpy array, array('f'), ...), "
			     "not %.100s", what, writable ? "writable " : "",
			     Py_TYPE(o)->tp_name);
		return -1;
	}
	if (v->itemsize != 4 || !v->format ||
	    (strcmp(v->format, "f") && strcmp(v->format, "<f") &&
	     strcmp(v->format, "=f"))) {
		PyErr_Format(PyExc_TypeError, "%s must be float32 (format "
			     "'f'), not format '%s'", what,
			     v->format ? v->format : "B");
		PyBuffer_Release(v);
		return -1;
	}
	*n = (size_t)v->len / 4;
	return 0;
}

static int parse_rule(const char *s, enum rkv_ps_rule *r)
{
	if (!strcmp(s, "sum"))
		*r = RKV_PS_SUM;
	else if (!strcmp(s, "assign"))
		*r = RKV_PS_ASSIGN;
	else if (!strcmp(s, "sgd"))
		*r = RKV_PS_SGD;
	else {
		PyErr_Format(PyExc_ValueError, "rule '%s': one of sum, "
			     "assign, sgd", s);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------- Tensor */

typedef struct {
	PyObject_HEAD
	struct pschild ch;
	ClientObject *cl;
	struct rkv_ps_tensor *t;   /* NULL: closed */
	PyObject *name;
	PyObject *shape;           /* a tuple */
	uint64_t len;
	uint64_t vers[2];          /* min, max shard version of the last pull */
	unsigned outstanding;      /* requests not waited for */
} TensorObject;

static PyTypeObject TensorType;

static void tensor_fini(struct pschild *ch)
{
	TensorObject *t = (TensorObject *)((char *)ch -
					   offsetof(TensorObject, ch));

	rkv_ps_tensor_close(t->t);
	t->t = NULL;
}

static void Tensor_dealloc(TensorObject *self)
{
	child_dealloc_fini(self->cl, &self->ch, self->t != NULL);
	Py_XDECREF(self->cl);
	Py_XDECREF(self->name);
	Py_XDECREF(self->shape);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* shape: None (any length: opened as (len,)), an int, or a sequence of
 * ints; *len its product. */
static PyObject *shape_of(PyObject *o, uint64_t *len)
{
	PyObject *t;

	*len = 0;
	if (o == Py_None)
		return PyTuple_New(0);
	if (PyLong_Check(o))
		t = PyTuple_Pack(1, o);
	else
		t = PySequence_Tuple(o);
	if (!t)
		return NULL;
	*len = 1;
	for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
		long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));

		if (d <= 0) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_ValueError, "tensor: every "
						"dimension must be > 0");
			Py_DECREF(t);
			return NULL;
		}
		*len *= (uint64_t)d;
	}
	return t;
}

PyObject *Client_tensor(ClientObject *self, PyObject *args, PyObject *kw)
{
	static char kw_name[] = "name", kw_shape[] = "shape",
		    kw_dtype[] = "dtype", kw_create[] = "create",
		    kw_init[] = "init", kw_shard[] = "shard";
	static char *kwlist[] = { kw_name, kw_shape, kw_dtype, kw_create,
				  kw_init, kw_shard, NULL };
	const char *name, *dtype = "float32";
	PyObject *shape_o = Py_None, *init_o = Py_None, *shape;
	int create = 0, rc = 0;
	unsigned shard = 0;
	uint64_t len;
	Py_buffer init;
	size_t ninit = 0;
	int has_init = 0;
	struct rkv_ps_tensor *t = NULL;
	struct rkv_ps_info info;
	TensorObject *obj;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|OspOI", kwlist, &name,
					 &shape_o, &dtype, &create, &init_o,
					 &shard))
		return NULL;
	if (strcmp(dtype, "float32")) {
		PyErr_Format(PyExc_ValueError, "tensor: dtype '%s' is not "
			     "supported: float32", dtype);
		return NULL;
	}
	shape = shape_of(shape_o, &len);
	if (!shape)
		return NULL;
	if (create && !len) {
		Py_DECREF(shape);
		PyErr_SetString(PyExc_ValueError, "tensor: create needs a "
				"shape");
		return NULL;
	}
	if (init_o != Py_None) {
		if (!create) {
			Py_DECREF(shape);
			PyErr_SetString(PyExc_ValueError, "tensor: init goes "
					"with create=True");
			return NULL;
		}
		if (floats_get(init_o, &init, 0, "init", &ninit)) {
			Py_DECREF(shape);
			return NULL;
		}
		has_init = 1;
		if (ninit != len) {
			PyBuffer_Release(&init);
			Py_DECREF(shape);
			PyErr_Format(PyExc_ValueError, "tensor: init has %zu "
				     "elements, the shape %llu", ninit,
				     (unsigned long long)len);
			return NULL;
		}
	}
	if (take(self)) {
		if (has_init)
			PyBuffer_Release(&init);
		Py_DECREF(shape);
		return NULL;
	}
	if (ensure_ps(self))
		goto fail;
	Py_BEGIN_ALLOW_THREADS
	if (create)
		rc = rkv_ps_tensor_create(self->ps, name, RKV_PS_FLOAT32, len,
					  shard, has_init ? init.buf : NULL);
	if (!rc)
		rc = rkv_ps_tensor_open(self->ps, name, RKV_PS_FLOAT32, len,
					&t);
	Py_END_ALLOW_THREADS
	if (rc) {
		char what[300];

		snprintf(what, sizeof(what), "tensor '%s'", name);
		raise_rc(self, what, rc, NULL,
			 rc == -ENOENT ? "no such tensor: create=True makes "
					 "it"
			 : rc == -EEXIST ? "it exists: open it without create"
			 : rc == -EINVAL && !create
				 ? "a bad name, or another shape or dtype"
				 : NULL);
		goto fail;
	}
	rkv_ps_tensor_info(t, &info);
	if (!len) {
		Py_DECREF(shape);
		shape = Py_BuildValue("(K)", (unsigned long long)info.len);
		if (!shape) {
			rkv_ps_tensor_close(t);
			goto fail;
		}
	}
	obj = PyObject_New(TensorObject, &TensorType);
	if (!obj) {
		rkv_ps_tensor_close(t);
		goto fail;
	}
	obj->t = t;
	obj->cl = self;
	Py_INCREF(self);
	obj->name = PyUnicode_FromString(name);
	obj->shape = shape;
	obj->len = info.len;
	obj->vers[0] = obj->vers[1] = 0;
	obj->outstanding = 0;
	child_add(self, &obj->ch, KIND_TENSOR, tensor_fini);
	give(self);
	if (has_init)
		PyBuffer_Release(&init);
	return (PyObject *)obj;
fail:
	give(self);
	if (has_init)
		PyBuffer_Release(&init);
	Py_XDECREF(shape);
	return NULL;
}

PyObject *ps_delete_named(ClientObject *self, PyObject *name_o,
			  int (*del)(struct rkv_ps *, const char *),
			  const char *call, const char *enoent)
{
	const char *name = PyUnicode_AsUTF8(name_o);
	int rc;

	if (!name)
		return NULL;
	if (take(self))
		return NULL;
	if (ensure_ps(self)) {
		give(self);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = del(self->ps, name);
	Py_END_ALLOW_THREADS
	give(self);
	if (rc) {
		char what[300];

		snprintf(what, sizeof(what), "%s '%s'", call, name);
		return raise_rc(self, what, rc, NULL,
				rc == -ENOENT ? enoent : NULL);
	}
	Py_RETURN_NONE;
}

PyObject *Client_delete_tensor(ClientObject *self, PyObject *name_o)
{
	return ps_delete_named(self, name_o, rkv_ps_tensor_delete,
			       "delete_tensor", "no such tensor");
}

/* The destination of a pull: into (writable float32, at least len
 * elements) or a new numpy array of the tensor's shape.  *result gets
 * what the pull returns (a new reference). */
static int pull_dest(TensorObject *self, PyObject *into, Py_buffer *v,
		     PyObject **result)
{
	size_t n;

	*result = NULL;
	if (into == Py_None) {
		PyObject *np = PyImport_ImportModule("numpy");

		if (!np) {
			PyErr_Clear();
			PyErr_SetString(PyExc_TypeError, "pull: without numpy, "
					"give into= a float32 buffer");
			return -1;
		}
		into = PyObject_CallMethod(np, "empty", "Os", self->shape,
					   "float32");
		Py_DECREF(np);
		if (!into)
			return -1;
	} else {
		Py_INCREF(into);
	}
	if (floats_get(into, v, 1, "pull: into", &n)) {
		Py_DECREF(into);
		return -1;
	}
	if (n < self->len) {
		PyBuffer_Release(v);
		Py_DECREF(into);
		PyErr_Format(PyExc_ValueError, "pull: into has %zu elements, "
			     "the tensor %llu", n, (unsigned long long)self->len);
		return -1;
	}
	*result = into;
	return 0;
}

static PyObject *Tensor_pull(TensorObject *self, PyObject *args,
			     PyObject *kw)
{
	static char kw_into[] = "into";
	static char *kwlist[] = { kw_into, NULL };
	PyObject *into = Py_None, *result;
	Py_buffer v;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kwlist, &into))
		return NULL;
	if (pull_dest(self, into, &v, &result))
		return NULL;
	if (child_take(self->cl, self->t, "tensor")) {
		PyBuffer_Release(&v);
		Py_DECREF(result);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_ps_pull(self->t, v.buf, (uint64_t)v.len / 4, &self->vers[0],
			 &self->vers[1]);
	Py_END_ALLOW_THREADS
	give(self->cl);
	PyBuffer_Release(&v);
	if (rc) {
		Py_DECREF(result);
		return raise_rc(self->cl, "pull", rc, NULL, NULL);
	}
	return result;
}

/* The source of a push: float32, exactly len elements. */
static int push_src(TensorObject *self, PyObject *grad, Py_buffer *v)
{
	size_t n;

	if (floats_get(grad, v, 0, "push: the values", &n))
		return -1;
	if (n != self->len) {
		PyBuffer_Release(v);
		PyErr_Format(PyExc_ValueError, "push: %zu elements, the tensor "
			     "has %llu", n, (unsigned long long)self->len);
		return -1;
	}
	return 0;
}

static PyObject *Tensor_push(TensorObject *self, PyObject *args, PyObject *kw)
{
	static char kw_grad[] = "values", kw_rule[] = "rule", kw_lr[] = "lr";
	static char *kwlist[] = { kw_grad, kw_rule, kw_lr, NULL };
	PyObject *grad;
	const char *rule_s = "sum";
	float lr = 0;
	enum rkv_ps_rule rule;
	Py_buffer v;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|sf", kwlist, &grad,
					 &rule_s, &lr))
		return NULL;
	if (parse_rule(rule_s, &rule) || push_src(self, grad, &v))
		return NULL;
	if (child_take(self->cl, self->t, "tensor")) {
		PyBuffer_Release(&v);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_ps_push(self->t, rule, v.buf, self->len, lr);
	Py_END_ALLOW_THREADS
	give(self->cl);
	PyBuffer_Release(&v);
	if (rc)
		return raise_rc(self->cl, "push", rc, NULL, NULL);
	Py_RETURN_NONE;
}

PyObject *child_close(ClientObject *cl, struct pschild *ch, int open,
		      unsigned outstanding, const char *what)
{
	if (!open)
		Py_RETURN_NONE;
	if (outstanding) {
		PyErr_Format(PyExc_RuntimeError, "%s: %u requests not waited "
			     "for", what, outstanding);
		return NULL;
	}
	if (take(cl))
		return NULL;
	child_del(cl, ch);
	ch->fini(ch);
	give(cl);
	Py_RETURN_NONE;
}

static PyObject *Tensor_close(TensorObject *self, PyObject *unused)
{
	(void)unused;
	return child_close(self->cl, &self->ch, self->t != NULL,
			   self->outstanding, "tensor");
}

static PyObject *Tensor_versions(TensorObject *self, void *closure)
{
	(void)closure;
	return Py_BuildValue("(KK)", (unsigned long long)self->vers[0],
			     (unsigned long long)self->vers[1]);
}

static PyObject *Tensor_size(TensorObject *self, void *closure)
{
	(void)closure;
	return PyLong_FromUnsignedLongLong(self->len);
}

/* ------------------------------------------------------------ Request */

typedef struct {
	PyObject_HEAD
	struct pschild ch;
	ClientObject *cl;
	PyObject *owner;           /* the Tensor or Embedding */
	unsigned *outstanding;     /* the owner's count of requests */
	uint64_t *vdst;            /* NULL, or where a pull's versions go */
	struct rkv_ps_req *r;      /* NULL: waited for */
	Py_buffer view;            /* held until the wait */
	int has_view;
	PyObject *result;          /* pull: its destination */
	const char *what;          /* "pull", "push" */
	int status;
	uint64_t vmin, vmax;
} RequestObject;

static PyTypeObject RequestType;

/* Wait for r (client taken) and let its buffer go. */
static void req_finish(RequestObject *self)
{
	if (!self->r)
		return;
	Py_BEGIN_ALLOW_THREADS
	self->status = rkv_ps_wait(self->r, &self->vmin, &self->vmax);
	Py_END_ALLOW_THREADS
	self->r = NULL;
	if (self->has_view)
		PyBuffer_Release(&self->view);
	self->has_view = 0;
	(*self->outstanding)--;
	if (self->vdst) { /* a pull's versions, as a sync pull's */
		self->vdst[0] = self->vmin;
		self->vdst[1] = self->vmax;
	}
}

static void req_fini(struct pschild *ch)
{
	req_finish((RequestObject *)((char *)ch - offsetof(RequestObject, ch)));
}

static void Request_dealloc(RequestObject *self)
{
	child_dealloc_fini(self->cl, &self->ch, self->r != NULL);
	Py_XDECREF(self->result);
	Py_XDECREF(self->owner);
	Py_XDECREF(self->cl);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

PyObject *ps_request_new(ClientObject *cl, PyObject *owner,
			 unsigned *outstanding, uint64_t *vdst,
			 struct rkv_ps_req *r, Py_buffer *v, PyObject *result,
			 const char *what)
{
	RequestObject *obj = PyObject_New(RequestObject, &RequestType);

	if (!obj) {
		Py_BEGIN_ALLOW_THREADS
		rkv_ps_wait(r, NULL, NULL);
		Py_END_ALLOW_THREADS
		if (v)
			PyBuffer_Release(v);
		Py_XDECREF(result);
		return NULL;
	}
	obj->cl = cl;
	Py_INCREF(cl);
	obj->owner = owner;
	Py_INCREF(owner);
	obj->outstanding = outstanding;
	obj->vdst = vdst;
	obj->r = r;
	obj->has_view = v != NULL;
	if (v)
		obj->view = *v;
	obj->result = result;
	obj->what = what;
	obj->status = 0;
	obj->vmin = obj->vmax = 0;
	(*outstanding)++;
	child_add(cl, &obj->ch, KIND_REQ, req_fini);
	return (PyObject *)obj;
}

static PyObject *request_new(TensorObject *t, Py_buffer *v, PyObject *result,
			     int pull, enum rkv_ps_rule rule, float lr)
{
	struct rkv_ps_req *r = NULL;
	PyObject *obj;
	int rc;

	if (child_take(t->cl, t->t, "tensor")) {
		PyBuffer_Release(v);
		Py_XDECREF(result);
		return NULL;
	}
	rc = pull ? rkv_ps_pull_async(t->t, v->buf, (uint64_t)v->len / 4, &r)
		  : rkv_ps_push_async(t->t, rule, v->buf, t->len, lr, &r);
	if (rc) {
		give(t->cl);
		PyBuffer_Release(v);
		Py_XDECREF(result);
		return raise_rc(t->cl, pull ? "pull_async" : "push_async", rc,
				NULL, NULL);
	}
	obj = ps_request_new(t->cl, (PyObject *)t, &t->outstanding,
			     pull ? t->vers : NULL, r, v, result,
			     pull ? "pull" : "push");
	give(t->cl);
	return obj;
}

static PyObject *Tensor_pull_async(TensorObject *self, PyObject *args,
				   PyObject *kw)
{
	static char kw_into[] = "into";
	static char *kwlist[] = { kw_into, NULL };
	PyObject *into = Py_None, *result;
	Py_buffer v;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kwlist, &into))
		return NULL;
	if (pull_dest(self, into, &v, &result))
		return NULL;
	return request_new(self, &v, result, 1, RKV_PS_SUM, 0);
}

static PyObject *Tensor_push_async(TensorObject *self, PyObject *args,
				   PyObject *kw)
{
	static char kw_grad[] = "values", kw_rule[] = "rule", kw_lr[] = "lr";
	static char *kwlist[] = { kw_grad, kw_rule, kw_lr, NULL };
	PyObject *grad;
	const char *rule_s = "sum";
	float lr = 0;
	enum rkv_ps_rule rule;
	Py_buffer v;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|sf", kwlist, &grad,
					 &rule_s, &lr))
		return NULL;
	if (parse_rule(rule_s, &rule) || push_src(self, grad, &v))
		return NULL;
	return request_new(self, &v, NULL, 0, rule, lr);
}

static PyObject *Request_wait(RequestObject *self, PyObject *unused)
{
	ClientObject *cl = self->cl;

	(void)unused;
	if (self->r) {
		if (take(cl))
			return NULL;
		child_del(cl, &self->ch);
		req_finish(self);
		give(cl);
	}
	if (self->status)
		return raise_rc(cl, self->what, self->status, NULL, NULL);
	if (self->result) {
		Py_INCREF(self->result);
		return self->result;
	}
	Py_RETURN_NONE;
}

static PyObject *Request_done(RequestObject *self, PyObject *unused)
{
	ClientObject *cl = self->cl;
	int rc;

	(void)unused;
	if (!self->r)
		Py_RETURN_TRUE;
	if (take(cl))
		return NULL;
	rc = rkv_ps_test(self->r);
	give(cl);
	return PyBool_FromLong(rc != -EINPROGRESS);
}

/* ------------------------------------------------------------ Barrier */

typedef struct {
	PyObject_HEAD
	struct pschild ch;
	ClientObject *cl;
	struct rkv_ps_barrier *b;
} BarrierObject;

static PyTypeObject BarrierType;

static void barrier_fini(struct pschild *ch)
{
	BarrierObject *b = (BarrierObject *)((char *)ch -
					     offsetof(BarrierObject, ch));

	rkv_ps_barrier_destroy(b->b);
	b->b = NULL;
}

static void Barrier_dealloc(BarrierObject *self)
{
	child_dealloc_fini(self->cl, &self->ch, self->b != NULL);
	Py_XDECREF(self->cl);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

PyObject *Client_barrier(ClientObject *self, PyObject *args)
{
	const char *name;
	unsigned n;
	struct rkv_ps_barrier *b = NULL;
	BarrierObject *obj;
	int rc;

	if (!PyArg_ParseTuple(args, "sI", &name, &n))
		return NULL;
	if (take(self))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_ps_barrier_create(self->c, name, n, &b);
	Py_END_ALLOW_THREADS
	if (rc) {
		give(self);
		return raise_rc(self, "barrier", rc, NULL,
				rc == -ENODEV ? "the server has no counters "
						"(--counters), or this client "
						"is read-only"
					      : NULL);
	}
	obj = PyObject_New(BarrierObject, &BarrierType);
	if (!obj) {
		rkv_ps_barrier_destroy(b);
		give(self);
		return NULL;
	}
	obj->cl = self;
	Py_INCREF(self);
	obj->b = b;
	child_add(self, &obj->ch, KIND_BARRIER, barrier_fini);
	give(self);
	return (PyObject *)obj;
}

static PyObject *Barrier_wait(BarrierObject *self, PyObject *args,
			      PyObject *kw)
{
	static char kw_t[] = "timeout_ms";
	static char *kwlist[] = { kw_t, NULL };
	unsigned timeout = 60000;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|I", kwlist, &timeout))
		return NULL;
	if (child_take(self->cl, self->b, "barrier"))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_ps_barrier_wait(self->b, timeout);
	Py_END_ALLOW_THREADS
	give(self->cl);
	if (rc)
		return raise_rc(self->cl, "barrier wait", rc, NULL,
				rc == -ETIMEDOUT ? "not every worker arrived: "
						   "the barrier is broken"
						 : NULL);
	Py_RETURN_NONE;
}

/* ------------------------------------------------------------ Counter */

typedef struct {
	PyObject_HEAD
	ClientObject *cl;
	uint64_t id;
} CounterObject;

static PyTypeObject CounterType;

static void Counter_dealloc(CounterObject *self)
{
	Py_XDECREF(self->cl);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

PyObject *Client_counter(ClientObject *self, PyObject *name_o)
{
	const char *name = PyUnicode_AsUTF8(name_o);
	CounterObject *obj;
	uint64_t id;
	int rc;

	if (!name)
		return NULL;
	if (take(self))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_counter_open(self->c, name, &id);
	Py_END_ALLOW_THREADS
	give(self);
	if (rc)
		return raise_rc(self, "counter", rc, NULL,
				rc == -ENODEV ? "the server has no counters "
						"(--counters), or this client "
						"is read-only"
					      : NULL);
	obj = PyObject_New(CounterObject, &CounterType);
	if (!obj)
		return NULL;
	obj->cl = self;
	Py_INCREF(self);
	obj->id = id;
	return (PyObject *)obj;
}

static PyObject *Counter_add(CounterObject *self, PyObject *args)
{
	unsigned long long delta = 1;
	uint64_t old = 0;
	int rc;

	if (!PyArg_ParseTuple(args, "|K", &delta))
		return NULL;
	if (take(self->cl))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_counter_add(self->cl->c, self->id, delta, &old);
	Py_END_ALLOW_THREADS
	give(self->cl);
	if (rc)
		return raise_rc(self->cl, "counter add", rc, NULL, NULL);
	return PyLong_FromUnsignedLongLong(old);
}

static PyObject *Counter_read(CounterObject *self, PyObject *unused)
{
	uint64_t v = 0;
	int rc;

	(void)unused;
	if (take(self->cl))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = rkv_counter_read(self->cl->c, self->id, &v);
	Py_END_ALLOW_THREADS
	give(self->cl);
	if (rc)
		return raise_rc(self->cl, "counter read", rc, NULL, NULL);
	return PyLong_FromUnsignedLongLong(v);
}

/* ------------------------------------------------------------- types */

static PyMethodDef Tensor_methods[] = {
	{ "pull", (PyCFunction)(void (*)(void))Tensor_pull,
	  METH_VARARGS | METH_KEYWORDS,
	  "pull(into=None) -> the tensor: into (a writable float32 buffer of "
	  "at least size elements) or a new numpy array of its shape" },
	{ "push", (PyCFunction)(void (*)(void))Tensor_push,
	  METH_VARARGS | METH_KEYWORDS,
	  "push(values, rule='sum', lr=0.0): apply values (float32, size "
	  "elements) to every shard under its lock: sum x += v, assign "
	  "x = v, sgd x -= lr * v" },
	{ "pull_async", (PyCFunction)(void (*)(void))Tensor_pull_async,
	  METH_VARARGS | METH_KEYWORDS,
	  "pull_async(into=None) -> Request; wait() returns the tensor" },
	{ "push_async", (PyCFunction)(void (*)(void))Tensor_push_async,
	  METH_VARARGS | METH_KEYWORDS,
	  "push_async(values, rule='sum', lr=0.0) -> Request" },
	{ "close", (PyCFunction)Tensor_close, METH_NOARGS, "close()" },
	{ NULL, NULL, 0, NULL },
};

static PyMemberDef Tensor_members[] = {
	{ "name", T_OBJECT, offsetof(TensorObject, name), READONLY, NULL },
	{ "shape", T_OBJECT, offsetof(TensorObject, shape), READONLY, NULL },
	{ NULL, 0, 0, 0, NULL },
};

static PyGetSetDef Tensor_getset[] = {
	{ "versions", (getter)Tensor_versions, NULL,
	  "(min, max) shard version of the last pull", NULL },
	{ "size", (getter)Tensor_size, NULL, "elements", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject TensorType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "rkv.Tensor",
	.tp_basicsize = sizeof(TensorObject),
	.tp_dealloc = (destructor)Tensor_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A dense float32 tensor of the parameter server "
		  "(Client.tensor)",
	.tp_methods = Tensor_methods,
	.tp_members = Tensor_members,
	.tp_getset = Tensor_getset,
};

static PyMethodDef Request_methods[] = {
	{ "wait", (PyCFunction)Request_wait, METH_NOARGS,
	  "wait(): finish; a pull's tensor, or None; raises the request's "
	  "error" },
	{ "done", (PyCFunction)Request_done, METH_NOARGS,
	  "done() -> bool, without blocking" },
	{ NULL, NULL, 0, NULL },
};

static PyTypeObject RequestType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "rkv.Request",
	.tp_basicsize = sizeof(RequestObject),
	.tp_dealloc = (destructor)Request_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "An asynchronous pull or push (Tensor.pull_async, "
		  "push_async, Embedding.pull_async, push_async)",
	.tp_methods = Request_methods,
};

static PyMethodDef Barrier_methods[] = {
	{ "wait", (PyCFunction)(void (*)(void))Barrier_wait,
	  METH_VARARGS | METH_KEYWORDS,
	  "wait(timeout_ms=60000): until every worker arrived" },
	{ NULL, NULL, 0, NULL },
};

static PyTypeObject BarrierType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "rkv.Barrier",
	.tp_basicsize = sizeof(BarrierObject),
	.tp_dealloc = (destructor)Barrier_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A barrier of N workers (Client.barrier)",
	.tp_methods = Barrier_methods,
};

static PyMethodDef Counter_methods[] = {
	{ "add", (PyCFunction)Counter_add, METH_VARARGS,
	  "add(delta=1) -> the value before (one-sided FETCH_ADD)" },
	{ "read", (PyCFunction)Counter_read, METH_NOARGS,
	  "read() -> the value (one-sided READ)" },
	{ NULL, NULL, 0, NULL },
};

static PyTypeObject CounterType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "rkv.Counter",
	.tp_basicsize = sizeof(CounterObject),
	.tp_dealloc = (destructor)Counter_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A named 8-byte server counter (Client.counter)",
	.tp_methods = Counter_methods,
};

int ps_types_ready(PyObject *m)
{
	PyTypeObject *types[] = { &TensorType, &RequestType, &BarrierType,
				  &CounterType };
	const char *names[] = { "Tensor", "Request", "Barrier", "Counter" };

	if (emb_type_ready(m))
		return -1;
	for (int i = 0; i < 4; i++) {
		if (PyType_Ready(types[i]) < 0)
			return -1;
		Py_INCREF(types[i]);
		if (PyModule_AddObject(m, names[i], (PyObject *)types[i])) {
			Py_DECREF(types[i]);
			return -1;
		}
	}
	return 0;
}
