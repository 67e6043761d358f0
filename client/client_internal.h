/* SPDX-License-Identifier: MIT */
/*
 * client_internal.h - librkv's internals: servers, operation slots, the
 * location cache.  Only files in client/ include it.
 *
 * Ownership: a client owns one transport context, one CQ and one local
 * registered region (struct lmem) carved into per-slot buffers and the
 * control buffers of every server.  An operation occupies one slot from
 * rkv_submit until rkv_poll hands it back; a slot is reused only after the
 * signaled completion of its last round was reaped (RC: it completes after
 * every earlier WR of the round).
 */
#ifndef RKV_CLIENT_CLIENT_INTERNAL_H
#define RKV_CLIENT_CLIENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "msg.h"
#include "rkv.h"
#include "transport.h"

#define MAX_SERVERS 256
#define ROUND_MAX_WR 20       /* WRs in one round of one op */
#define CTRL_RECVS 6          /* RECVs posted per server: replies to
				 * CTRL_SENDS requests + 2 RKEY_UPDATEs */
#define CTRL_SENDS 4          /* control requests in flight per server */
#define MAX_CAND (2 * RKV_SLOTS_PER_BUCKET)
#define CHUNKS_MAX 8          /* chunks held per server at once */

/* wr_id tags.  Op rounds use the slot pointer (64-byte aligned) with the
 * round number in bits 1..5 and bit 0 set on the signaled (last) WR;
 * control WRs set bit 62 and carry server and buffer index. */
#define WRID_CTRL (1ull << 62)
#define WRID_CTRL_RECV (1ull << 61)
/* One-sided WRs outside the op slots (counter.c): bit 60 plus a sequence
 * number (c->aux.seq); routed to aux_wc(). */
#define WRID_AUX (1ull << 60)
#define AUX_WORDS 8           /* registered 8-byte result words */

struct chunk {
	uint64_t off;        /* data-region offset */
	uint64_t len;
	uint64_t used;       /* bump pointer */
	uint32_t grant;      /* grant id: blocks carry it, returns name it */
	unsigned pending;    /* carved blocks not yet published or returned */
	int active;          /* 1: carving from it; 0: retiring */
	int in_use;
};

struct ctrl_req {
	int busy;
	uint32_t req_id;
	unsigned type;       /* request type awaiting a reply */
	struct rkv_msg *reply_to; /* where a sync caller wants the reply */
	int *done_flag;
};

struct server {
	struct rkv_client *c;
	unsigned idx;
	char addr[300];
	struct rkv_ep *ep;
	int dead;                 /* -errno once the connection failed */
	/* geometry from HELLO_REPLY */
	uint32_t client_id;
	uint64_t index_addr, nbuckets, data_addr, data_len;
	uint32_t index_rkey, data_rkey, chunk_size, lease_ms, grace_ms;
	uint64_t counters_addr;   /* counter region (0 words: none) */
	uint32_t counters_rkey, counters_count;
	uint32_t rkey_epoch;      /* last RKEY_UPDATE applied (0: HELLO's) */
	uint32_t rkey_acked;      /* last epoch whose RKEY_ACK was posted */
	int ack_busy;             /* the ACK send buffer awaits completion */
	/* doorbell batching: WRs queued for the next rkv_post */
	struct rkv_wr *pend_head, *pend_tail;
	unsigned pend_n;
	unsigned sq_used;         /* WRs posted and not yet retired */
	/* control plane */
	char *ctrl_recv;          /* CTRL_RECVS * RKV_MSG_MAX */
	char *ctrl_send;          /* CTRL_SENDS * RKV_MSG_MAX */
	struct ctrl_req req[CTRL_SENDS];
	uint32_t next_req_id;
	/* space */
	struct chunk chunk[CHUNKS_MAX];
	int chunk_req;            /* a CHUNK_ALLOC is in flight */
	uint32_t chunk_next;      /* bytes the next CHUNK_ALLOC asks for:
				   * 16 KiB, doubling per grant up to
				   * chunk_size (a short-lived client
				   * keeps little) */
	int space_err;            /* -ENOSPC from the last grant, until ... */
	uint64_t space_err_ms;    /* ... this time (retry later) */
	uint64_t busy_since_ms;   /* first -EBUSY (space in grace) of a run */
	struct rkv_extent *ret;   /* blocks to return */
	unsigned ret_n, ret_cap;
	uint64_t ret_oldest_ms;
};

enum op_state {
	OP_FREE = 0,   /* slot unused */
	OP_START,      /* submitted, first round not built yet */
	OP_IO,         /* a round is posted (or queued for the doorbell) */
	OP_WAIT_SPACE, /* needs a chunk from the server */
	OP_WAIT_TIMER, /* rmw backing off on a locked slot */
	OP_DONE,       /* finished, waiting for rkv_poll to return it */
};

/* Step of an operation; tells what the round in flight was. */
enum op_step {
	ST_GET_CACHED,   /* READ slot word + cached block */
	ST_BUCKETS,      /* READ both buckets (put also WRITEs its block) */
	ST_VERIFY,       /* READ candidate blocks to check keys */
	ST_CAS,          /* put/delete CAS on the target slot */
	ST_DEL_CACHED,   /* delete: CAS cached slot to empty */
	ST_INS_CAS,      /* insert: CAS an empty slot to tentative, then
			  * READ both buckets (one doorbell) */
	ST_INS_REREAD,   /* insert: READ both buckets again (waiting) */
	ST_INS_VERIFY,   /* insert: check other copies' keys */
	ST_INS_COMMIT,   /* insert: CAS tentative -> committed */
	ST_INS_WITHDRAW, /* insert: CAS tentative -> empty */
	ST_INS_STEAL,    /* insert: clear a dead inserter's tentative slot,
			  * then READ both buckets */
	ST_INS_LOWER,    /* insert withdrawn: READ the earlier tentative
			  * slot it waits for */
	ST_INS_CLEAR,    /* insert withdrawn: clear that slot (its lease
			  * ran out) */
	ST_LOCK,         /* rmw: CAS-lock (+ READ block when cached) */
	ST_LOCK_POLL,    /* rmw: READ a locked slot while waiting */
	ST_RELEASE,      /* rmw: WRITE new block + CAS release */
	ST_XPUT,         /* xput: WRITE new block + CAS from cached word */
};

/*
 * Internal op kinds (client/ps.c), never part of the public API.  op->type
 * is RKV_OP_XGET or RKV_OP_XPUT and op->val points to a struct rkv_xop the
 * submitter owns until rkv_poll returns the op.
 *
 * XGET: a get whose value bytes [0, head) land in op->buf and bytes
 *   [head, head + tail_len) are READ straight into tail (registered,
 *   tail_lkey), on the cached path; the checksum is verified over the
 *   pieces before the op succeeds (a torn read is retried and the retry
 *   overwrites tail).  split is set to 1 when it took that path; otherwise
 *   (cold location, value of another shape) it ran as a plain get and the
 *   whole value is in op->buf (buf_cap must allow it).
 * XPUT: a write that needs only the head of the old value: with a trusted
 *   cached location whose block is known (struct blk_info), put_fn builds
 *   the new value from old's head, and one round WRITEs the new block and
 *   CASes the slot from the cached word (RC order: block first).  If there
 *   is no such entry, put_fn declines (returns anything but
 *   RKV_RMW_WRITE), or the CAS loses, the op runs as an RMW with op->fn.
 */
#define RKV_OP_XGET ((enum rkv_op_type)0x58)
#define RKV_OP_XPUT ((enum rkv_op_type)0x59)
#define BLK_HEAD 16              /* value bytes kept per cache entry */

/*
 * Device ops (client/gpu.c, the *_dev calls of rkv.h): a GET, PUT or RMW
 * whose value lives in CUDA device memory.  op->buf (DGET), op->val
 * (DPUT) and the rmw callback's old/out (DRMW) are device pointers on the
 * GPU of c->gpu.  Blocks are READ into c->gpu->rd and new blocks built in
 * c->gpu->nb (registered device staging); only header and key are copied
 * back to the host, the checksum is computed by the xxh3 kernel on the
 * device.  One device op at a time per client (synchronous calls only).
 */
#define RKV_OP_DGET ((enum rkv_op_type)0x5a)
#define RKV_OP_DPUT ((enum rkv_op_type)0x5b)
#define RKV_OP_DRMW ((enum rkv_op_type)0x5c)

struct cgpu {
	int gpu;                 /* CUDA device of the staging */
	char *mem;               /* rkv_tp_mem_alloc_gpu */
	size_t len;
	struct rkv_mr *mr;       /* local access */
	char *rd;                /* blocks read: op_buf_size - OB_BLOCKS */
	char *nb;                /* the new block: new_blk_size */
	struct rkv_block_hdr *hk; /* host copy of header + key (encode) */
	size_t head;             /* DGET: value bytes [0, head) go to ... */
	void *head_buf;          /* ... this host buffer (a PS shard header),
				  * the rest to op->buf; 0: all to op->buf */
};

struct blk_info {
	uint64_t version;        /* block header version */
	uint32_t grant;          /* block header grant id */
	uint32_t val_len;
	unsigned char head[BLK_HEAD]; /* first bytes of the value (0-padded) */
};

typedef int (*rkv_xput_fn)(const struct blk_info *old, void *out,
			   size_t out_cap, size_t *out_len, void *arg);

struct rkv_xop {
	size_t head;             /* XGET */
	void *tail;
	size_t tail_len;
	uint32_t tail_lkey;
	int split;               /* out */
	rkv_xput_fn put_fn;      /* XPUT */
	void *put_arg;
};

struct cand {
	unsigned pos;        /* 0..15: bucket 0 slots, then bucket 1 */
	uint64_t slot;       /* slot word as read */
	uint32_t buf_off;    /* where its block lands in the op buffer */
	int match;           /* verified to hold the key */
};

struct opslot {
	/* 64-byte aligned (wr_id tagging) */
	struct rkv_op *op;
	struct rkv_client *c;
	struct server *srv;
	enum op_state state;
	enum op_step step;
	unsigned round;          /* round counter (wr_id bits 1..5) */
	unsigned round_nwr;      /* WRs in the round in flight */
	int err;                 /* first error seen in this round */
	unsigned retries;
	uint64_t t_start_ns, t_op_ms, t_round_ms;
	uint64_t deadline_ms;
	struct rkv_key_hash kh;
	uint64_t b[2];           /* candidate bucket numbers */
	/* local buffer (registered): buckets, words, blocks */
	char *buf;
	uint32_t lkey;
	/* state carried between rounds */
	struct cand cand[MAX_CAND];
	unsigned ncand;
	int target;              /* candidate index of the key's slot, -1 */
	uint64_t expect;         /* slot value a CAS expects */
	uint64_t newslot;        /* slot value a CAS installs */
	unsigned slot_pos;       /* position of the slot worked on */
	uint64_t blk_off;        /* our new block: data offset */
	uint32_t blk_size;       /* its size (0: none allocated) */
	int blk_chunk;           /* chunk it was carved from */
	uint32_t blk_grant;      /* that chunk's grant id */
	uint64_t hdr_slot;       /* slot word whose block header the bucket
				  * round READ into OB_HDR (0: none) */
	uint32_t old_grant;      /* grant of the block the slot we CAS
				  * names (0: unknown) */
	int blk_written;         /* WRITE already done */
	uint64_t old_version;    /* version of the block replaced */
	unsigned vfrom, vend;    /* candidates the verify round read */
	unsigned npos;           /* slot positions: 16, or 8 when both
				  * candidate buckets are one (1 bucket) */
	/* insert (docs/DESIGN.md §6): our slot is tentative from the CAS
	 * until the commit or the withdrawal */
	int tent;                /* we hold a tentative slot (newslot) */
	int tent_abort;          /* withdraw, then finish with tent_err */
	int tent_err;
	unsigned ins_seen;       /* INS_* flags of the verify rounds */
	uint64_t tent_seen;      /* higher tentative copy we wait for ... */
	unsigned tent_seen_pos;
	uint64_t tent_seen_ms;   /* ... unchanged since */
	int ins_waiting;         /* OP_WAIT_TIMER is an insert's wait: 1
				  * for a later tentative copy (re-read the
				  * buckets), 2 for an earlier one after
				  * withdrawing (read its slot), 3 for a
				  * full pair of buckets (start again) */
	uint64_t full_since_ms;  /* insert found both buckets full, some
				  * slot tentative, since (0: no) */
	int ins_lower;           /* withdrawing for an earlier tentative
				  * copy: wait for it after */
	uint32_t pub_size;       /* size of the block we just published */
	/* rmw */
	uint64_t lock_seen;      /* locked value seen while waiting */
	uint64_t lock_seen_ms;
	uint64_t lockval;        /* slot value while we hold the lock */
	int locked;              /* we hold the slot lock */
	int lock_read;           /* the lock round also READ the block */
	int release_retry;       /* releasing to retry (stale cache) */
	int rmw_action;          /* RKV_RMW_* or -errno chosen by fn */
	size_t rmw_len;          /* value length fn produced */
	uint64_t rmw_version;    /* version of the block to write */
	int rmw_parked;          /* waiting for space to commit */
	int cached;              /* this attempt started from the cache */
	enum rkv_op_type type;   /* GET, PUT, DELETE or RMW (XGET: GET,
				  * XPUT: RMW) */
	struct rkv_xop *x;       /* XGET / XPUT descriptor, else NULL */
	int xget;                /* XGET: the split path may be tried */
	int xput;                /* XPUT: the blind path may be tried */
	int xround;              /* the round in flight is the split one */
	uint64_t blk_version;    /* version our new block carries */
	struct cgpu *d;          /* device op: staging; NULL for host ops */
	struct opslot *done_next;
	struct rkv_wr wr[ROUND_MAX_WR];
} __attribute__((aligned(64)));

/* Offsets inside an op buffer. */
#define OB_BUCKETS 0             /* 2 buckets: 128 bytes */
#define OB_WORD 128              /* 8: slot word / CAS result */
#define OB_WORD2 136             /* 8: second CAS result */
#define OB_HDR 144               /* 32: header of the block a cached put
				  * or delete unlinks (its grant id) */
#define OB_BLOCKS 192            /* blocks read */

struct cache_ent {
	char *key;               /* NULL: empty entry */
	uint16_t key_len;
	uint16_t server;
	uint32_t blk_size;
	uint64_t slot_addr;      /* remote address of the slot word */
	unsigned pos;            /* position 0..15 */
	uint64_t slot;           /* slot value last seen */
	uint64_t t_ms;           /* when it was seen */
	int info_known;          /* info describes the block slot names */
	struct blk_info info;
};

struct rkv_client {
	struct rkv_client_opts opts;
	struct rkv_tp *tp;
	struct rkv_cq *cq;
	/* local registered memory */
	char *lmem;
	size_t lmem_len;
	struct rkv_mr *lmr;
	size_t op_buf_size;      /* per slot */
	char *new_blk;           /* per slot new-block buffers */
	size_t new_blk_size;
	/* servers */
	struct server *srv;
	unsigned nsrv;
	/* operation slots */
	struct opslot *slots;
	unsigned nslots;
	unsigned inflight;
	struct opslot *done_head, *done_tail;
	/* location cache */
	struct cache_ent *cache;
	unsigned cache_n;        /* power of two */
	struct rkv_client_stats st;
	uint64_t last_ctrl_ms;
	uint64_t last_poll_ms;    /* rkv_coarse_ms of the last CQ poll */
	uint64_t idle_t0;         /* rkv_wait: idle since (ns), 0 when busy */
	uint64_t wait_avg_ns;     /* moving average of idle periods */
	int spin_short;           /* rkv_wait blocks after a short spin */
	char addrbuf[300];
	unsigned char *secret;   /* opts' secret, copied; NULL: none */
	size_t secret_len;
	uint64_t *aux_words;     /* AUX_WORDS registered words (counter.c) */
	struct aux_req {         /* the one-sided WR counter.c waits for */
		uint64_t seq;    /* in its wr_id; a stale completion differs */
		int done;        /* 0 in flight, 1 completed */
		int status;      /* 0 or -errno */
	} aux;
	struct cgpu *gpu;        /* device staging (gpu.c); NULL until used */
};

/* client.c */
void clog_(struct rkv_client *c, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int srv_ctrl_call(struct server *s, struct rkv_msg *m, struct rkv_msg *reply,
		  unsigned timeout_ms);
int srv_ctrl_send(struct server *s, struct rkv_msg *m, struct rkv_msg *reply,
		  int *done_flag);
void srv_fail(struct server *s, int err);
int client_progress(struct rkv_client *c);
/* Between progress calls of a blocking call (progressed: the last call's
 * count): rkv_wait, or a short sleep where the provider cannot block. */
void client_idle(struct rkv_client *c, int progressed);
/* Progress was made: ends an idle period (rkv_wait's spin estimate). */
void client_progressed(struct rkv_client *c);
void srv_flush(struct server *s);
void srv_queue_wrs(struct server *s, struct rkv_wr *first, unsigned n);
/* Carve size bytes: *off, the chunk index and the grant id the block's
 * header must carry.  0, -EAGAIN (a chunk was asked for), -errno. */
int srv_block_alloc(struct server *s, uint32_t size, uint64_t *off,
		    int *chunk, uint32_t *grant);
void srv_block_settle(struct server *s, int chunk);
/* Queue [off, off + size) of grant for a BLOCK_RETURN. */
void srv_block_return(struct server *s, uint64_t off, uint32_t size,
		      uint32_t grant);
void srv_ctrl_tick(struct server *s, uint64_t now_ms);

/* counter.c */
void aux_wc(struct rkv_client *c, const struct rkv_wc *wc);

/* ops.c */
void op_start(struct opslot *o);
void op_round_done(struct opslot *o);
void op_timer(struct opslot *o, uint64_t now_ms);
void op_space_ready(struct opslot *o);
void op_finish(struct opslot *o, int status);

/* gpu.c */
/* Probe CUDA and gpu, check that ptr (len bytes, may be NULL when len is
 * 0) is device memory of gpu, and make c->gpu staging for gpu.  Logs the
 * cause through the client's callback.  0, -EOPNOTSUPP (no CUDA in the
 * build), -ENODEV (no driver/device), -ENXIO, -EINVAL, -ENOMEM. */
int gpu_prepare(struct rkv_client *c, int gpu, const void *ptr, size_t len,
		const char *what);
void gpu_fini(struct rkv_client *c);
/* api.c: run one op to completion like the synchronous calls (other
 * pipelined ops stay queued for rkv_poll).  0 (then op->status) or a
 * client-wide -errno. */
int client_run_op(struct rkv_client *c, struct rkv_op *op);
/* rkv_block_encode into device staging dst (value val, device memory,
 * may already be in place).  Returns the block size or 0 (-errno in
 * *err). */
uint32_t gpu_block_encode(struct opslot *o, char *dst, const void *val,
			  size_t val_len, uint64_t version, int *err);
/* rkv_block_decode of the block whose READ landed in device staging at
 * the position host buffer blk stands for (blk = o->buf + OB_BLOCKS +
 * off): copies header + key into blk, checks the checksum on the device.
 * *val is a device pointer. */
int gpu_block_decode(struct opslot *o, char *blk, size_t size,
		     const void **val, uint32_t *val_len,
		     const struct rkv_block_hdr **hdr);

/* cache.c */
int cache_init(struct rkv_client *c, unsigned n);
void cache_fini(struct rkv_client *c);
/* An entry younger than the grace period (trusted to name the key's slot) */
struct cache_ent *cache_find(struct rkv_client *c, const struct opslot *o);
/* An entry of any age (a hint: the caller re-checks slot and key) */
struct cache_ent *cache_find_any(struct rkv_client *c, const struct opslot *o);
/* bi: the block slot names (NULL: unknown) */
void cache_store(struct rkv_client *c, const struct opslot *o, unsigned pos,
		 uint64_t slot, uint32_t blk_size, const struct blk_info *bi);
void cache_drop(struct rkv_client *c, const struct opslot *o);

static inline uint64_t slot_addr(const struct server *s, uint64_t bucket,
				 unsigned i)
{
	return s->index_addr + bucket * RKV_BUCKET_SIZE + i * 8u;
}

#endif
