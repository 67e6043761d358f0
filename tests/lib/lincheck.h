/* SPDX-License-Identifier: MIT */
/*
 * lincheck.h - a linearizability checker for histories of per-key
 * registers (rkv's get/put/delete/rmw), and the history files tests record.
 *
 * The search is Wing & Gong's, refined by Lowe (as in porcupine's
 * checker.go and Knossos): the call and return events of one key's ops are
 * kept in time order in a doubly linked list; the search linearizes the
 * first op whose call comes before every pending return and whose step is
 * legal in the model, lifts its two events out of the list, and backtracks
 * (unlifts) when it meets a return event it could not get past.  Each
 * (set of linearized ops, register value) reached is remembered in a hash
 * set so no configuration is explored twice.  Linearizability is local, so
 * the history is split by key and each key is searched alone.
 *
 * Model: the key's value, LIN_ABSENT or a 64-bit value id.  Value ids must
 * be unique per write (put or rmw), so a read names its writer.
 *
 *   put(in)            -> ok;            value := in
 *   get                -> out;           legal iff out == value
 *   del                -> LIN_DEL_DONE   legal iff value != absent; := absent
 *                      -> LIN_DEL_ABSENT legal iff value == absent
 *   rmw(in) saw out    -> ok;            legal iff out == value; := in
 *
 * An indeterminate op (ok == LIN_INDET: timed out, lost its connection,
 * its process died before the answer) has an open end: it may take effect
 * at any point after its call, or never; its output is not trusted (an
 * indeterminate rmw or delete just writes).  An indeterminate get says
 * nothing and is dropped, as is an op that failed without effect
 * (ok == LIN_FAILED, e.g. a put refused with -ENOSPC).
 *
 * Ops that touch at equal times are taken as concurrent (never a false
 * violation from clock granularity).  The search is exponential in the
 * worst case (many concurrent or indeterminate ops on one key): past
 * opts.max_states configurations beyond 4 per op of the key (a search
 * visits at least one per op) or max_mem bytes of memo, a key is
 * "unknown", never a pass.
 *
 * Thread safety: every function works on its arguments only.
 */
#ifndef RKV_TESTS_LIB_LINCHECK_H
#define RKV_TESTS_LIB_LINCHECK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LIN_ABSENT 0ull         /* no value: valid ids are never 0 */
#define LIN_NEVER UINT64_MAX    /* ret_ns of an op without an answer */

enum lin_kind { LIN_PUT = 0, LIN_GET, LIN_DEL, LIN_RMW };

/* a delete's output */
#define LIN_DEL_ABSENT 0ull     /* -ENOENT */
#define LIN_DEL_DONE 1ull       /* it removed a value */

/* lin_op.ok */
#define LIN_DONE 1
#define LIN_INDET 0             /* may or may not have taken effect */
#define LIN_FAILED (-1)         /* failed without effect: left out */

struct lin_op {
	uint64_t key;
	int kind;          /* enum lin_kind */
	uint64_t in;       /* put, rmw: the value id written (not LIN_ABSENT) */
	uint64_t out;      /* get: the value read or LIN_ABSENT; rmw: the old
			    * value its applied callback run saw; del:
			    * LIN_DEL_DONE or LIN_DEL_ABSENT */
	int ok;            /* LIN_DONE, LIN_INDET or LIN_FAILED */
	uint64_t call_ns;  /* before the call (CLOCK_MONOTONIC) */
	uint64_t ret_ns;   /* after the answer; ignored unless LIN_DONE */
	int client;        /* for explanations only */
};

enum lin_verdict { LIN_OK = 0, LIN_VIOLATION = 1, LIN_UNKNOWN = 2 };

struct lin_opts {
	uint64_t max_states; /* configurations per key beyond 4 per op of
			      * the key; 0: 4M */
	size_t max_mem;      /* memo bytes per key; 0: 1 GiB */
};

struct lin_result {
	int verdict;            /* enum lin_verdict */
	size_t ops;             /* given */
	size_t checked;         /* searched (given minus dropped) */
	size_t dropped;         /* failed ops and indeterminate gets */
	size_t indeterminate;   /* open-ended ops searched */
	size_t keys, keys_violated, keys_unknown;
	uint64_t states;        /* configurations visited, all keys */
	uint64_t max_key_states; /* most on one key */
	size_t max_key_ops;     /* most ops searched on one key */
	uint64_t bad_key;       /* first key violated (else unknown) */
	char explain[8192];     /* the first violated key: why, and where */
};

/* Defaults into opts. */
void lin_opts_init(struct lin_opts *opts);

/*
 * Check the history ops[0..n) (any order; ops of all keys mixed).  opts
 * may be NULL.  Fills res and returns its verdict (LIN_OK, LIN_VIOLATION,
 * LIN_UNKNOWN), or -EINVAL (a done op returning before its call, a write
 * of LIN_ABSENT, a bad kind) or -ENOMEM; res->explain says which op.
 */
int lin_check(const struct lin_op *ops, size_t n, const struct lin_opts *opts,
	      struct lin_result *res);

const char *lin_verdict_str(int verdict);
const char *lin_kind_str(int kind);

/* ------------------------------------------------------- history files
 *
 * Text, one line per record, '#' starts a comment:
 *   o CLIENT KEY KIND IN OUT OK CALL RET   a whole op (lin_save)
 *   c CLIENT SEQ KEY KIND IN CALL          an op's call, logged before it
 *   r CLIENT SEQ OUT OK RET                its answer
 * KIND is put|get|del|rmw; KEY, IN, OUT hex; OK 1, 0 or -1; times decimal
 * ns; RET of an open op is '-'.  A 'c' without its 'r' (the process was
 * killed) loads as indeterminate.
 */

struct lin_hist {
	struct lin_op *ops;
	size_t n, cap;
	size_t open;       /* ops loaded indeterminate: no answer, or a
			    * timeout's */
};

/* Append one op; returns 0 or -ENOMEM. */
int lin_hist_add(struct lin_hist *h, const struct lin_op *op);
/* Free h's ops; h is empty afterwards. */
void lin_hist_fini(struct lin_hist *h);

/* Append the ops of file path to h; a last line without its newline (a
 * write cut by a kill) is left out.  Returns 0, -errno of open, -ENOMEM,
 * or -EBADMSG (a malformed line; its number is in *bad_line if given). */
int lin_load(const char *path, struct lin_hist *h, size_t *bad_line);
/* Write ops as 'o' lines.  Returns 0 or -errno. */
int lin_save(const char *path, const struct lin_op *ops, size_t n);

/*
 * Log an op's call / answer with one write(2) each: log the call before
 * starting the op (its effect is then always in the history), the answer
 * after it.  A process killed in a write(2) that crosses a page of the
 * file may leave a line cut short, always its last; lin_load leaves it
 * out.  Returns 0 or -errno.
 */
int lin_log_call(int fd, int client, uint64_t seq, uint64_t key, int kind,
		 uint64_t in, uint64_t call_ns);
int lin_log_ret(int fd, int client, uint64_t seq, uint64_t out, int ok,
		uint64_t ret_ns);

#ifdef __cplusplus
}
#endif
#endif
