/* SPDX-License-Identifier: MIT */
/*
 * rkv_ext.h - the extension point of librkv's KV core, for the layers
 * built on it inside librkv (client/ps/: the parameter server and its
 * counters; the device calls of rkv.h).  Not installed, not part of the
 * public API; nothing above the core includes client/ internals but this.
 *
 * It offers four things:
 *   an op kind: a plain struct rkv_op, or one with a struct rkv_ext_op
 *     that picks an extension kind (split get, head put), submitted with
 *     rkv_ext_submit and polled with rkv_poll like any op;
 *   a buffer: caller memory registered for one-sided transfers
 *     (rkv_ext_buf_reg), where a split get lands its tail;
 *   a completion: rkv_ext_run runs one op to the end (other pipelined ops
 *     stay queued for rkv_poll), rkv_ext_idle waits between polls;
 *   words: the servers' counter regions, by one-sided FETCH_ADD and READ.
 * Every function returns 0 or -errno and never prints.
 */
#ifndef RKV_CLIENT_RKV_EXT_H
#define RKV_CLIENT_RKV_EXT_H

#include <stddef.h>
#include <stdint.h>

#include "rkv.h"

/* Value bytes a head put sees of the old value. */
#define RKV_EXT_HEAD 16

enum rkv_ext_kind {
	/*
	 * A get whose value bytes [0, head) land in op->buf and bytes
	 * [head, head + tail_len) are READ straight into tail (registered:
	 * tail_lkey), when the key's location is cached; the checksum is
	 * verified over the pieces before the op succeeds (a torn read is
	 * retried and the retry overwrites tail).  split is set to 1 when it
	 * took that path; otherwise (cold location, value of another shape)
	 * it ran as a plain get and the whole value is in op->buf (buf_cap
	 * must allow it).
	 */
	RKV_EXT_SPLIT_GET = 1,
	/*
	 * A write that needs only the head of the old value: with a trusted
	 * cached location whose block is known, put_fn builds the new value
	 * from the old one's head, and one round WRITEs the new block and
	 * CASes the slot from the cached word (RC order: block first).  If
	 * there is no such entry, put_fn declines (returns anything but
	 * RKV_RMW_WRITE), or the CAS loses, the op runs as an RMW with
	 * op->fn.
	 */
	RKV_EXT_HEAD_PUT,
};

/* What a head put knows of the old value. */
struct rkv_ext_head {
	uint64_t version;        /* its block's version */
	uint32_t val_len;
	unsigned char head[RKV_EXT_HEAD]; /* first bytes (0-padded) */
};

typedef int (*rkv_ext_head_fn)(const struct rkv_ext_head *old, void *out,
			       size_t out_cap, size_t *out_len, void *arg);

struct rkv_ext_op {
	enum rkv_ext_kind kind;
	/* RKV_EXT_SPLIT_GET */
	size_t head;
	void *tail;
	size_t tail_len;
	uint32_t tail_lkey;
	int split;               /* out */
	/* RKV_EXT_HEAD_PUT (op->fn is the RMW it falls back to) */
	rkv_ext_head_fn put_fn;
	void *put_arg;
};

/* Submit op (x NULL: as rkv_submit; else op->type is ignored and x, which
 * the caller owns until the op is polled, says what it is). */
int rkv_ext_submit(struct rkv_client *c, struct rkv_op *op,
		   struct rkv_ext_op *x);
/* Run op (and x) to completion like the synchronous calls.  0 (then
 * op->status) or a client-wide -errno. */
int rkv_ext_run(struct rkv_client *c, struct rkv_op *op,
		struct rkv_ext_op *x);
/* Between polls of a blocking call (progressed: the last poll's count). */
void rkv_ext_idle(struct rkv_client *c, int progressed);

/* Registered caller memory. */
struct rkv_ext_buf {
	void *addr;
	size_t len;
	uint32_t lkey;
	void *mr;                /* the transport's registration */
};

int rkv_ext_buf_reg(struct rkv_client *c, void *addr, size_t len,
		    struct rkv_ext_buf *b);
void rkv_ext_buf_dereg(struct rkv_ext_buf *b);
/* 1 when registering caller memory pins nothing (tcp, shm): a cached
 * registration outliving its buffer is harmless.  0 on verbs. */
int rkv_ext_buf_cheap(const struct rkv_client *c);

/* The client's options, as an extension sizes itself by them.  max_value
 * is the largest value an extension op moves: the client's max_value, at
 * most 261,024 bytes (a split get or head put moves a value in one piece;
 * bigger values are rkv_get/rkv_put/rkv_rmw's). */
struct rkv_ext_info {
	unsigned max_inflight;
	unsigned max_value;
	unsigned timeout_ms;
	int read_only;
};

void rkv_ext_info(const struct rkv_client *c, struct rkv_ext_info *out);

/* Words of server i's counter region (rkv-server --counters N). */
/* Map name (1..RKV_EXT_WORD_NAME bytes) to its word on the server the
 * name routes to: *server and *word.  -ENODEV: no counter region. */
#define RKV_EXT_WORD_NAME 63
int rkv_ext_word_open(struct rkv_client *c, const char *name,
		      unsigned *server, uint32_t *word);
/* One-sided FETCH_ADD (old value in *old, may be NULL) or READ. */
int rkv_ext_word_add(struct rkv_client *c, unsigned server, uint32_t word,
		     uint64_t delta, uint64_t *old);
int rkv_ext_word_read(struct rkv_client *c, unsigned server, uint32_t word,
		      uint64_t *val);

/* Check that CUDA and GPU gpu work, that ptr (len bytes; NULL when len is
 * 0) is memory of that GPU, and set up the client's device staging for
 * it (what: the caller's name, for the log).  -EOPNOTSUPP (a build
 * without CUDA), -ENODEV, -ENXIO, -EINVAL, -ENOMEM. */
int rkv_ext_dev_prepare(struct rkv_client *c, int gpu, const void *ptr,
			size_t len, const char *what);
/* A device get whose first head bytes go to host memory head_buf and the
 * rest to dev_buf (GPU gpu), as rkv_get_dev otherwise.  dev_buf must lie
 * in what rkv_ext_dev_prepare checked for gpu (-EINVAL if nothing was
 * prepared for gpu); it is not checked again per call. */
int rkv_ext_get_dev_split(struct rkv_client *c, const void *key,
			  size_t key_len, void *head_buf, size_t head,
			  void *dev_buf, size_t cap, size_t *val_len, int gpu);

#endif
