/* SPDX-License-Identifier: MIT */
/*
 * rkvpy.h - what the two halves of the Python module share: the client
 * object (rkvmodule.c: the KV calls) and the parameter-server objects
 * (ps.c: tensors, requests, barriers, counters), which hang off it.
 *
 * Ownership: every PS object holds a reference to its client and sits on
 * the client's list of children until it is closed; Client.close()
 * finishes them all first (waits for outstanding requests, closes tensors
 * and barriers, frees the PS engine), then the librkv client.
 */
#ifndef RKV_PYTHON_RKVPY_H
#define RKV_PYTHON_RKVPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include <pthread.h>
#include <stddef.h>

#include "rkv.h"
#include "rkv_ps.h"

struct pschild;

typedef struct {
	PyObject_HEAD
	struct rkv_client *c;
	PyThread_type_lock lock;  /* one call at a time */
	char *scratch;            /* max_value bytes: get's landing place */
	size_t max_value;
	int read_only;            /* asked for */
	pthread_mutex_t log_mu;   /* the log callback may run on librkv's
				   * transport thread */
	char last_log[256];       /* the last warn-or-above message */
	struct rkv_ps *ps;        /* made by the first PS call (ps.c) */
	struct pschild *children; /* open PS objects */
} ClientObject;

/* A PS object on its client's list; fini releases its librkv object
 * (called with the client taken), at close or when the client closes. */
struct pschild {
	struct pschild *next, *prev;
	int kind;                 /* fini order: requests (0) first */
	void (*fini)(struct pschild *ch);
};

/* A key or value argument: its bytes where they lie. */
struct arg {
	Py_buffer view;
	int has_view;
	const char *p;
	size_t len;
};

/* rkvmodule.c */
int arg_get(PyObject *o, struct arg *a, const char *what);
void arg_release(struct arg *a);
/* Take the client for one call (waiting without the GIL): 0, or -1 with
 * ValueError when it is closed.  give() ends the call. */
int take(ClientObject *self);
void give(ClientObject *self);
/* Raise for rc < 0: KeyError(key) for -ENOENT when key, else OSError. */
PyObject *raise_rc(ClientObject *self, const char *what, int rc,
		   PyObject *key, const char *detail);

/* ps.c: the children of a client (fini order: requests, then tensors
 * and embeddings, then barriers). */
enum { KIND_REQ = 0, KIND_TENSOR = 1, KIND_BARRIER = 2 };
void child_add(ClientObject *cl, struct pschild *ch, int kind,
	       void (*fini)(struct pschild *));
void child_del(ClientObject *cl, struct pschild *ch);
/* The client for a call of a child, or -1 with ValueError (closed). */
int child_take(ClientObject *cl, const void *handle, const char *what);
/* A child's dealloc: finish it (the client taken, without raising). */
void child_dealloc_fini(ClientObject *cl, struct pschild *ch, int open);
/* close() of a child: RuntimeError with requests outstanding, else fini
 * (None when it is closed already). */
PyObject *child_close(ClientObject *cl, struct pschild *ch, int open,
		      unsigned outstanding, const char *what);
/* Client.delete_tensor / delete_embedding: del(name) without the GIL;
 * OSError named call '<name>' (enoent: the detail for -ENOENT). */
PyObject *ps_delete_named(ClientObject *self, PyObject *name_o,
			  int (*del)(struct rkv_ps *, const char *),
			  const char *call, const char *enoent);
/* The client's PS engine, made at first use: 0 or -1 with an error. */
int ensure_ps(ClientObject *self);
/* A float32 C-contiguous buffer (a torch CPU tensor through .numpy()):
 * its elements in *n.  -1 with TypeError for anything else. */
int floats_get(PyObject *o, Py_buffer *v, int writable, const char *what,
	       size_t *n);
/* A Request for r (client taken), owning v (may be NULL) and result;
 * *outstanding counts it until its wait; vdst (NULL, or 2 words) gets a
 * pull's versions. */
PyObject *ps_request_new(ClientObject *cl, PyObject *owner,
			 unsigned *outstanding, uint64_t *vdst,
			 struct rkv_ps_req *r, Py_buffer *v, PyObject *result,
			 const char *what);

/* embed.c */
int emb_type_ready(PyObject *module);
PyObject *Client_embedding(ClientObject *self, PyObject *args, PyObject *kw);
PyObject *Client_delete_embedding(ClientObject *self, PyObject *name);

/* ps.c: the types (ready at import), the Client methods, and the
 * client's close: finish every child (client taken). */
int ps_types_ready(PyObject *module);
PyObject *Client_tensor(ClientObject *self, PyObject *args, PyObject *kw);
PyObject *Client_delete_tensor(ClientObject *self, PyObject *name);
PyObject *Client_barrier(ClientObject *self, PyObject *args);
PyObject *Client_counter(ClientObject *self, PyObject *name);
void ps_close_all(ClientObject *self);

#endif
