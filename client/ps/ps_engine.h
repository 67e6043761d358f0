/* SPDX-License-Identifier: MIT */
/*
 * ps_engine.h - the parameter server's private structures and the calls
 * its files share (ps.c: the engine; ps_tensor.c: tensors and their
 * metadata; ps_shard.c: shard headers, update rules, device buffers).
 */
#ifndef RKV_CLIENT_PS_ENGINE_H
#define RKV_CLIENT_PS_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "ps_internal.h"
#include "rkv_ext.h"


#define PS_KEY_MAX (3 + RKV_PS_NAME_MAX + 1 + 20 + 1)
#define PS_POLL_MAX 32
#define APPLY_CHUNK 256
#define PS_MR_CACHE 8

enum req_kind {
	REQ_PULL,   /* GET each shard into staging, check, copy out */
	REQ_PUSH,   /* RMW each shard with push_fn */
	REQ_CREATE, /* PUT each shard (header + init or zeros) */
	REQ_DELETE, /* DELETE each shard (absent is fine) */
	REQ_EMB_PULL,   /* GET each distinct row (absent: its initial value) */
	REQ_EMB_PUSH,   /* RMW each distinct row with emb_push_fn */
	REQ_EMB_DELETE, /* RMW each row found: delete if not newer */
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

/* An embedding table: t gives the engine its name, key prefix
 * ("emb/<name>/"), nonce (the generation) and outstanding count. */
struct rkv_ps_emb {
	struct rkv_ps_tensor t;
	struct emb_meta m;
	unsigned nstate;        /* state floats per row: 0, dim or 2 dim */
	size_t row_bytes;       /* a stored row's value */
};

struct rkv_ps_req {
	struct rkv_ps *ps;
	struct rkv_ps_tensor *t;
	uint64_t nitems;        /* shards, or distinct rows */
	/* embedding requests: distinct ids, and where each goes */
	struct rkv_ps_emb *emb;
	uint64_t *uids;         /* nitems distinct ids */
	uint32_t *ord;          /* positions in the caller's order, by id */
	uint32_t *ustart;       /* row u's positions: ord[ustart[u]..[u+1]) */
	float *gsum;            /* push: row u's summed gradient at u * dim */
	void *mem;              /* the arrays above, freed with r */
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
	struct rkv_ext_buf buf;
	int live;               /* 0: entry unused */
	unsigned refs;          /* requests in flight using it */
	uint64_t used;          /* LRU stamp */
};

struct shard_op {
	struct rkv_op op;
	struct rkv_ps_req *req; /* NULL: free */
	uint64_t shard;
	uint64_t version;       /* push: the version push_fn wrote */
	struct rkv_ext_op x;    /* split get / head put, when used */
	struct rkv_ext_op *xp;  /* &x, or NULL: a plain op */
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
	int direct;             /* split gets into caller memory allowed */
	struct rkv_ext_info info; /* the client's options */
	struct ps_mr mrc[PS_MR_CACHE];
	uint64_t mr_clock;
	float *row;             /* stage_size bytes, aligned: a row's floats */
};

/* ps_shard.c */
uint64_t shard_len(const struct rkv_ps_tensor *t, uint64_t i);
/* The header of a value of val_len bytes, read from head (host memory),
 * that should be shard i of t: 0 with *h, or -ESTALE. */
int shard_hdr(const struct rkv_ps_tensor *t, uint64_t i, size_t val_len,
	      const void *head, struct ps_shard_hdr *h);
/* The header of the next version of shard i: 0 with *next, -ESTALE, or
 * -EMSGSIZE when the shard does not fit cap. */
int shard_next_hdr(const struct rkv_ps_tensor *t, uint64_t i, size_t val_len,
		   const void *head, size_t cap, struct ps_shard_hdr *next);
/* A push's RMW callback (arg: the struct shard_op). */
int push_fn(const void *old, size_t old_len, void *out, size_t cap,
	    size_t *out_len, void *arg);
/* The head put builder of an ASSIGN (arg: the struct shard_op). */
int assign_xfn(const struct rkv_ext_head *old, void *out, size_t cap,
	       size_t *out_len, void *arg);

/* ps.c: requests */
int req_new(struct rkv_ps_tensor *t, enum req_kind kind,
	    struct rkv_ps_req **out);
/* Drive r to its end; its first error. */
int req_run(struct rkv_ps_req *r);
void req_free(struct rkv_ps_req *r);

/* ps_embed.c */
/* Row u of an embedding pull, finished with status st (0: the GET read it
 * into so->stage; -ENOENT: absent), copied to its positions.  0 or
 * -errno. */
int emb_pull_done(struct shard_op *so, int st);
int emb_push_fn(const void *old, size_t old_len, void *out, size_t cap,
		size_t *out_len, void *arg);
int emb_delete_fn(const void *old, size_t old_len, void *out, size_t cap,
		  size_t *out_len, void *arg);

/* ps.c: start r's first items (a request of no items is finished) */
void req_start(struct rkv_ps_req *r);

/* ps_tensor.c */
int ps_check_name(const char *name);
void tensor_init(struct rkv_ps_tensor *t, struct rkv_ps *ps,
		 const char *name, const struct ps_meta *m);

#endif
