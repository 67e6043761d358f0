/* SPDX-License-Identifier: MIT */
/*
 * op.h - the operation machines: an op slot, the steps, and the table of
 * kinds.
 *
 * An operation occupies one slot from submission until rkv_poll (or the
 * synchronous call) hands it back.  It runs as rounds: a round is a list
 * of WRs posted in one doorbell whose last WR is signaled, i.e. one round
 * trip.  o->step names what the round in flight (or the wait) is; each
 * step belongs to one machine:
 *   locate (op_loc.c)   READ both buckets, READ candidate blocks, check
 *                       their keys: the key's slot, or none;
 *   insert (op_ins.c)   the tentative-slot protocol of docs/DESIGN.md §6;
 *   a kind's own steps  get (op_get.c), put and delete (op_put.c),
 *                       rmw (op_rmw.c), and the extension kinds split
 *                       get and head put (op_ext.c).
 * A kind is a struct op_kind: how an attempt starts, what its own rounds
 * do when they come back, and what it does with the key's slot once
 * located (found) or with its absence.  op.c owns the slot's life: start,
 * rounds and their completions, timers, retries, the finish.
 *
 * Completions: each slot holds four wr_ctx, one per (round parity,
 * signaled or not); every WR of a round carries one of them, so a late
 * completion of an earlier round is told apart from the current one.
 *
 * A slot is reused only after the signaled completion of its last round
 * was reaped (RC: it completes after every earlier WR of the round).
 */
#ifndef RKV_CLIENT_OP_H
#define RKV_CLIENT_OP_H

#include <stddef.h>
#include <stdint.h>

#include "chunks.h"

struct rkv_client;
struct cgpu;
struct rkv_ext_op;

#define ROUND_MAX_WR 20       /* WRs in one round of one op */
#define MAX_CAND (RKV_KEY_BUCKETS_MAX * RKV_BUCKET_SLOTS_MAX)
#define MAX_RETRIES 100000
#define BLK_HEAD 16           /* value bytes kept per cache entry */

/* Offsets inside an op buffer (registered, one per slot). */
#define OB_BUCKETS 0          /* a key's buckets (2 a level: up to 3 KiB);
			       * position p (bucket 0's slots, then bucket
			       * 1's, ...) at OB_BUCKETS + 8 p */
#define OB_WORD (RKV_KEY_BUCKETS_MAX * RKV_BUCKET_MAX_BYTES) /* 8: slot
			       * word / CAS result */
#define OB_WORD2 (OB_WORD + 8) /* 8: second CAS result */
#define OB_HDR (OB_WORD + 16) /* 32: header of the block a cached put or
			       * delete unlinks (its grant id) */
#define OB_PART (OB_WORD + 48) /* 8: the key's partition word, READ with
			       * the buckets (layout.h, op_mig.c) */
#define OB_LEASE (OB_WORD + 56) /* 8: the server's lease word (op.c) */
#define OB_LEVEL (OB_WORD + 64) /* 8: the level word, READ with the
			       * buckets (layout.h "Levels") */
#define OB_BLOCKS (OB_WORD + 128) /* blocks read */

enum op_state {
	OP_FREE = 0,   /* slot unused */
	OP_START,      /* submitted, first round not built yet */
	OP_IO,         /* a round is posted (or queued for the doorbell) */
	OP_WAIT_SPACE, /* needs a chunk from the server */
	OP_WAIT_TIMER, /* waits on a slot (o->step says which wait) */
	OP_DONE,       /* finished, waiting to be handed back */
};

/* Steps; the high nibble names the machine (OP_MACHINE). */
enum loc_step {
	LOC_BUCKETS = 0x10, /* READ both buckets (a put also WRITEs its
			     * block; a cached put READs a block header) */
	LOC_VERIFY,         /* READ candidate blocks to check keys */
	LOC_BLOCK,          /* WRITE a big block alone, then LOC_BUCKETS */
};

enum ins_step {
	INS_CAS = 0x20,     /* CAS an empty slot to tentative, then READ
			     * both buckets (one doorbell) */
	INS_REREAD,         /* READ both buckets again (waiting) */
	INS_VERIFY,         /* check other copies' keys */
	INS_COMMIT,         /* CAS tentative -> committed */
	INS_WITHDRAW,       /* CAS tentative -> empty */
	INS_STEAL,          /* clear a dead inserter's tentative slot, then
			     * READ both buckets */
	INS_LOWER,          /* withdrawn: READ the earlier tentative slot
			     * it waits for */
	INS_CLEAR,          /* withdrawn: clear that slot (lease ran out) */
	INS_WAIT_HIGHER,    /* timer: a later tentative copy (re-read) */
	INS_WAIT_LOWER,     /* timer: an earlier one, after withdrawing */
	INS_WAIT_FULL,      /* timer: both buckets full, some tentative */
	INS_WAIT_GROW,      /* timer: every bucket full, the server asked
			     * for a level (GROW) */
};

enum kind_step {
	GET_CACHED = 0x30,  /* READ slot word + cached block */
	GET_SPLIT,          /* split get: word, head, tail elsewhere */
	GET_DIRECT,         /* big value: word, head, value into op->buf */
	PUT_CAS,            /* CAS the key's slot to our block */
	DEL_CACHED,         /* CAS the cached slot to empty (+ header) */
	DEL_CAS,            /* CAS the located slot to empty */
	RMW_LOCK,           /* CAS-lock (+ READ block when cached) */
	RMW_LOCK_POLL,      /* READ a locked slot while waiting */
	RMW_RELEASE,        /* WRITE new block + CAS release */
	RMW_HEAD_PUT,       /* head put: WRITE block + CAS from cached */
	RMW_WAIT_LOCK,      /* timer: the slot is locked */
	RMW_PARKED,         /* space: the new value waits for a chunk */
	RMW_PARKED_INS,     /* space: r > 1, an absent key's tombstone
			     * waits for a chunk (then inserted from the
			     * buckets read) */
	REPL_INSTALL,       /* r > 1: the primary is locked and our value
			     * ready; the legs install it on the backups
			     * (op_repl.c), then RMW_RELEASE */
};

/* A leg's steps (op_repl.c): its own rounds on one backup. */
enum leg_step {
	LEG_IDLE = 0,
	LEG_WORD,           /* READ the cached slot word */
	LEG_BUCKETS,        /* READ both buckets */
	LEG_VERIFY,         /* READ the fingerprint matches' blocks */
	LEG_LOCATED,        /* knows the key's copy on the backup (or none) */
	LEG_INSTALL,        /* [WRITE block] CAS the copy to our block
			     * (+ CAS stale duplicates to empty) */
	LEG_DONE,           /* the backup holds sequence >= ours */
};

enum mig_step {
	MIG_WAIT = 0x40,    /* timer: the key's partition is being moved */
	MIG_MOVED,          /* it moved: where to is found between progress
			     * passes (mig_route: etcd, a new connection) */
	MIG_EPOCH,          /* timer: a server refused us as a client of an
			     * old map (failover): wait for the new one
			     * (peers_heal reads it), then go where it says */
	LEASE_WAIT,         /* timer: the server's lease word is in the past
			     * (op.c op_lease_ok): read it again, or go where
			     * a newer map says */
};

#define OP_MACHINE(step) ((unsigned)(step) >> 4)

/* What the location cache keeps about a block: header version, grant,
 * value length, the value's first bytes. */
struct blk_info {
	uint64_t version;
	uint32_t grant;
	uint32_t val_len;
	unsigned char head[BLK_HEAD]; /* 0-padded */
};

struct cand {
	unsigned pos;        /* bucket 0's slots, then bucket 1's */
	uint64_t slot;       /* slot word as read */
	uint32_t buf_off;    /* where its block lands in the op buffer */
	int match;           /* verified to hold the key */
};

struct opslot;

/* What a write does with the key under the primary's lock (r > 1, where
 * put and delete run as rmws: op_repl.c). */
enum op_wmode {
	WM_FN = 0,           /* the rmw callback decides */
	WM_PUT,              /* write op->val */
	WM_DEL,              /* write a tombstone (ENOENT if absent) */
};

struct op_kind {
	const char *name;
	int writes;          /* refused for a read-only client */
	enum op_wmode wmode; /* as a replicated write */
	/* start an attempt (the first, or after a retry) */
	void (*attempt)(struct opslot *o);
	/* a round of one of the kind's own steps came back */
	void (*round)(struct opslot *o);
	/* locate found the key at cd (its block verified) ... */
	void (*found)(struct opslot *o, struct cand *cd);
	/* ... or no copy of it */
	void (*absent)(struct opslot *o);
	/* locate read the buckets: 1 if the kind went on from them itself
	 * (NULL: never) */
	int (*buckets)(struct opslot *o);
	/* a chunk came for an op parked on space (NULL: attempt again) */
	void (*space)(struct opslot *o);
	/* its own timer wait is due (RMW_WAIT_LOCK) */
	void (*timer)(struct opslot *o);
	/* which statistics it counts in */
	struct rkv_op_stats *(*stats)(struct rkv_client_stats *st);
};

extern const struct op_kind op_get, op_put, op_del, op_rmw;
extern const struct op_kind op_split_get, op_head_put;
extern const struct op_kind op_rput, op_rdel; /* put, delete at r > 1 */

/* Our new block: carved, encoded, written, then published or dropped. */
struct newblk {
	struct blk_ref ref;      /* where (0 size: none carved) */
	uint32_t size;
	int written;             /* its WRITE was posted */
	int zc;                  /* its value is the caller's (nb_make_put) */
	int sum_due;             /* ... WRITTEN; its checksum not yet */
	uint64_t version;        /* the version its header carries */
	uint32_t pub_size;       /* size of the block just published */
};

/* The insert protocol's state (op_ins.c): our slot is tentative from the
 * CAS until the commit or the withdrawal. */
struct ins_state {
	int tent;                /* we hold a tentative slot (o->newslot) */
	int abort_err;           /* withdraw, then finish with this */
	int lower;               /* withdrawing for an earlier tentative
				  * copy: wait for it after */
	unsigned seen;           /* INS_SEEN_* of the verify rounds */
	uint64_t tent_seen;      /* the tentative copy we wait for ... */
	unsigned tent_seen_pos;
	uint64_t tent_seen_ms;   /* ... unchanged since */
	uint64_t full_since_ms;  /* both buckets full, some slot tentative,
				  * since (0: no) */
	int fenced;              /* withdrawing: the partition moves */
};

struct rmw_state {
	uint64_t lock_seen;      /* locked value seen while waiting */
	uint64_t lock_seen_ms;
	uint64_t lockval;        /* slot value while we hold the lock */
	int locked;              /* we hold the slot lock */
	int lock_read;           /* the lock round also READ the block */
	int release_retry;       /* releasing to retry (stale cache) */
	int no_fold;             /* this op locates before it locks: a
				  * lock taken with the verify READ found
				  * another key's block (op_rmw.c) */
	int action;              /* RKV_RMW_* or -errno chosen by fn */
	int may_restore;         /* r > 1: our lock was taken from an
				  * unlocked word and nothing was installed
				  * under it, so a release that writes
				  * nothing puts the word back as it was */
	size_t len;              /* value length fn produced */
	uint64_t version;        /* version of the block to write */
};

/* A replicated write's leg on one backup (op_repl.c, docs/DESIGN.md §9.7):
 * it locates the key's copy there, and when the primary's lock is held
 * and the value known, installs our block over it unless the backup
 * already holds our sequence or a newer one.  Legs never decide the
 * write; the primary's machine does. */
struct leg {
	struct wr_ctx ctx[4];    /* [round parity * 2 + signaled] */
	struct opslot *o;
	struct peer *p;          /* the backup ... */
	struct space *sp;        /* ... and our space on it */
	char *buf;               /* registered buffer, the OB_* layout: */
	uint32_t lkey;           /* its key, */
	size_t room;             /* the bytes it holds from OB_BLOCKS on */
	char *own_buf;           /* the slot's own one (room: op_buf_size less
				  * OB_BLOCKS) ... */
	uint32_t own_lkey;
	struct bigbuf *big;      /* ... or for a big block, one of the
				  * client's (bigbuf.c: leg_room) */
	int rd_big;              /* the round verifies big blocks only */
	unsigned step;           /* enum leg_step */
	unsigned round;          /* rounds posted (parity) */
	unsigned nrounds;        /* rounds since the phase began (RTTs) */
	unsigned nwr;
	int busy;                /* a round is in flight */
	int stale;               /* its op went on without it: the round in
				  * flight is ignored when it completes */
	int err;                 /* first error of the round in flight */
	int wait_space;          /* its block waits for a chunk */
	int pending;             /* start locating once the stale round is
				  * back ... */
	unsigned next_si;        /* ... on this backup */
	unsigned tries;          /* locates of this attempt */
	uint64_t b[RKV_KEY_BUCKETS_MAX];
	unsigned nbk, levels;    /* buckets of b, for levels levels */
	unsigned npos;
	/* the key's copy on the backup (LEG_LOCATED) */
	int found;
	unsigned pos;
	uint64_t word;
	uint64_t seq;            /* its block's header version */
	uint32_t grant;          /* its block's grant (0: unknown) */
	unsigned ndup;           /* older copies, cleared by the install */
	unsigned dup_pos[MAX_CAND];
	uint64_t dup_word[MAX_CAND];
	uint32_t dup_grant[MAX_CAND];
	uint64_t t_ms;           /* when its locate began (grace) */
	struct cand cand[MAX_CAND]; /* fingerprint matches to verify */
	unsigned ncand, vfrom, vend;
	char bucket_copy[RKV_KEY_BUCKETS_MAX * RKV_BUCKET_MAX_BYTES]; /* the
						     * buckets located
						     * in */
	/* our block on the backup */
	struct blk_ref ref;
	uint32_t size;           /* 0: none carved */
	int written;
	uint64_t newword;        /* the word the install CASes in */
	struct rkv_wr wr[ROUND_MAX_WR];
};

/* a backup each, and one for a server in transit (cmap.h) */
#define REPL_LEGS (RKV_MAP_SET_MAX - 1)

struct repl_state {
	unsigned nlegs;          /* the slot's legs while the op writes (0:
				  * none); the key's backups use the first
				  * nact, the others idle or settle a stale
				  * round */
	unsigned nact;
	int install;             /* the primary waits for the legs */
	int err;                 /* a leg failed: the write fails */
	int fresh;               /* the key had no slot on the primary */
	int maybe;               /* a block of this op (any attempt) may be
				  * on a backup: failing now, the write's
				  * outcome is unknown (a failover may make
				  * that copy current): -EIO */
	uint64_t seq;            /* the sequence our blocks carry */
	unsigned rtt0;           /* op->rtts when the attempt began */
	int grow;                /* a backup was full: it was asked for a
				  * level; after the release, wait and
				  * start again (INS_WAIT_GROW) */
};

struct opslot {
	struct wr_ctx ctx[4];    /* [round parity * 2 + signaled] */
	struct rkv_op *op;
	const struct op_kind *kind;
	struct rkv_client *c;
	struct peer *p;          /* the key's server ... */
	struct space *sp;        /* ... and our space on it */
	enum op_state state;
	unsigned step;           /* enum loc_step, ins_step, kind_step */
	unsigned round;          /* rounds posted */
	unsigned round_nwr;      /* WRs in the round being built */
	int err;                 /* first error of the round in flight */
	unsigned retries;
	uint64_t t_start_ns;     /* submitted (timed ops only) */
	uint64_t t_op_ms, t_round_ms, deadline_ms; /* coarse ms */
	/* blocks READ since t_round_ms: small ones, big ones (op_too_slow) */
	uint8_t rd_small, rd_big;
	int timed;               /* the caller sees op->latency_ns */
	struct rkv_key_hash kh;
	uint64_t b[RKV_KEY_BUCKETS_MAX]; /* candidate bucket numbers ... */
	unsigned nbk, levels;    /* ... nbk of them, for levels levels */
	unsigned part;           /* placement partition (cmap.h) */
	uint64_t fence;          /* partition word that stopped it (op_mig.c) */
	unsigned npos;           /* slot positions: nbk buckets' slots */
	struct peer *grow_p;     /* INS_WAIT_GROW: the server asked ... */
	unsigned grow_levels;    /* ... to grow from this many levels */
	char *buf;               /* registered op buffer (OB_*) */
	uint32_t lkey;
	size_t room;             /* bytes of buf from OB_BLOCKS on */
	char *own_buf;           /* the slot's own op buffer and lkey: buf */
	uint32_t own_lkey;       /* unless a big block needs more (rbig) */
	struct bigbuf *rbig;     /* bigbuf.c: a bigger op buffer ... */
	struct bigbuf *wbig;     /* ... and new-block buffer for this op */
	/* a direct get (op_get.c): the caller's buffer registered for the
	 * op, the value length the round READ into it, and whether the op
	 * gave the path up (another shape: the plain get decides) */
	struct rkv_mr *umr;
	size_t direct_len;
	int direct_no;
	/* the slot word whose block last failed its checksum (op_corrupt) */
	uint64_t bad_word;
	/* candidates whose block failed its checksum or header: the first
	 * of the last loc_check_cands, the first of the locate; -1 none */
	int bad_idx, bad_loc;
	/* ... and the checksum's state the transport feeds as it READs
	 * (64-byte aligned, made at first use) */
	struct rkv_hash_state *dh;
	/* locate */
	struct cand cand[MAX_CAND];
	unsigned ncand;
	unsigned vfrom, vend;    /* candidates the verify round read */
	int target;              /* candidate index of the key's slot, -1 */
	uint64_t hdr_slot;       /* slot word whose block header the round
				  * READ into OB_HDR (0: none) */
	/* the slot worked on */
	unsigned slot_pos;
	uint64_t expect;         /* slot value a CAS expects */
	uint64_t newslot;        /* slot value a CAS installs */
	uint32_t old_grant;      /* grant of the block that slot names
				  * (0: unknown) */
	int cached;              /* this attempt started from the cache */
	int lease_rd;            /* this round READs the lease word too */
	struct cache_ent *ce;    /* a cached get's entry ... */
	uint32_t ce_gen;         /* ... and its gen then (cache_hit) */
	struct newblk nb;
	struct ins_state ins;
	struct rmw_state rmw;
	struct repl_state repl;
	struct leg *leg;         /* REPL_LEGS legs (client.h: r > 1), or NULL */
	/* extension kinds (rkv_ext.h): the descriptor, and whether the
	 * fast path may still be tried */
	struct rkv_ext_op *x;
	int x_try;
	struct cgpu *d;          /* device op: staging; NULL for host ops */
	struct opslot *done_next;
	struct rkv_wr wr[ROUND_MAX_WR];
};

/* ---- op.c: the slot's life */

/* Set up slot o of client c (its buffer, lkey, contexts). */
void op_slot_init(struct opslot *o, struct rkv_client *c, char *buf,
		  uint32_t lkey);
/* The server a key routes to. */
unsigned op_route(const struct rkv_client *c, const void *key,
		  size_t key_len);
/* The engine's run hook: start submitted ops, run due timers. */
void ops_run(void *client, uint64_t *now_ms);
/* A chunk came (or the ask failed) on sp: parked ops go on. */
void ops_space_ready(void *client, struct space *sp);
void op_finish(struct opslot *o, int status);
/* What a failed write reports: a cluster client's -EACCES (an rkey a
 * fence revoked) as the -ECONNRESET of the connection the fence closes;
 * any other error as it is. */
int op_fence_err(const struct rkv_client *c, int err);
/* Restart after a lost race or a stale read (finishes when over). */
void op_retry(struct opslot *o);
/* Start an attempt: reset its state, then the kind's attempt. */
void op_attempt(struct opslot *o);
/* op_attempt with now_ms (rkv_coarse_ms, or a stamp no later) as the
 * start of its first round. */
void op_attempt_at(struct opslot *o, uint64_t now_ms);
/* The attempt ran longer than the grace period: what it read may have
 * been freed and reused since.  The period is the server's big grace when
 * the only blocks read since t_round_ms were big (over
 * RKV_SMALL_BLOCK_MAX: the server holds those longer). */
int op_too_slow(const struct opslot *o);
/* The block slot word w names failed its checksum (or header) in a round
 * within its grace period.  Once: 0 (a retry reads it again).  Twice for
 * the same word: 1, the block is corrupt, not torn (a published block
 * never changes until its word moves on and its grace has passed): the
 * caller ends the op with -EIO. */
int op_corrupt(struct opslot *o, uint64_t w);
/* Whether what o's last round READ from its server may be answered: not
 * a leased server at r > 1, or its lease word (proto/layout.h) is still
 * ahead of our clock.  Otherwise the op waits (LEASE_WAIT) and starts
 * again where the map then says; returns 0. */
int op_lease_ok(struct opslot *o);
/* Restart the round clock (t_round_ms) at now_ms. */
static inline void op_clock(struct opslot *o, uint64_t now_ms)
{
	o->t_round_ms = now_ms;
	o->rd_small = 0;
	o->rd_big = 0;
}
/* A READ of (part of) a block of len bytes, for op_too_slow. */
static inline void op_read_block(struct opslot *o, uint32_t len)
{
	if (len > RKV_SMALL_BLOCK_MAX)
		o->rd_big = 1;
	else
		o->rd_small = 1;
}
/* Wait on a timer (lease/8 between looks) in step. */
void op_wait(struct opslot *o, unsigned step);
/* The timer of a kind that never waits on its own (retries). */
void op_no_timer(struct opslot *o);

/* Rounds: WRs are appended to o->wr[0 .. o->round_nwr) */
void round_begin(struct opslot *o);
void round_post(struct opslot *o, unsigned step);
void rd(struct opslot *o, unsigned local_off, uint64_t raddr, uint32_t rkey,
	uint32_t len);
void rd_to(struct opslot *o, void *local, uint32_t lkey, uint64_t raddr,
	   uint32_t len);
void rd_blk(struct opslot *o, unsigned local_off, uint64_t raddr,
	    uint32_t len);
void rd_buckets(struct opslot *o);
void rd_word(struct opslot *o, unsigned pos);
void cas(struct opslot *o, unsigned pos, uint64_t expect, uint64_t swap);
void wr_block(struct opslot *o);
/* The checksum field of a block whose value's WRITE fed o->dh (newblk.zc),
 * from its digest: the round after that WRITE's. */
void wr_block_sum(struct opslot *o);
/* One round: CAS the slot at o->slot_pos from expect to swap. */
void cas_round(struct opslot *o, uint64_t expect, uint64_t swap,
	       unsigned step);

uint64_t bucket_word(const struct opslot *o, unsigned pos);
uint64_t word_at(const struct opslot *o, unsigned off);
uint64_t pos_addr(const struct opslot *o, unsigned pos);
uint64_t data_addr(const struct opslot *o, uint64_t slot);

/* ---- bigbuf.c: buffers for blocks over INLINE_BLOCK */

/* o's op buffer holds room bytes of blocks from OB_BLOCKS on (the words
 * and buckets already read are carried over).  0, -EMSGSIZE (a device
 * op; past RKV_MAX_BLOCK) or -ENOMEM. */
int op_room(struct opslot *o, size_t room);
/* o's new-block buffer holds a block of size bytes.  0 or as op_room. */
int op_nb_room(struct opslot *o, size_t size);
/* Bytes o's new-block buffer holds now. */
size_t op_nb_cap(const struct opslot *o);
/* The slot is handed back: its big buffers go back to the client (its
 * legs' only when no round of theirs is in flight). */
void op_big_release(struct opslot *o);
/* Leg l's buffer holds room bytes of blocks from OB_BLOCKS on (the words
 * and buckets read are carried over).  0, -EMSGSIZE or -ENOMEM. */
int leg_room(struct leg *l, size_t room);
/* l's big buffer goes back, unless a round of l is in flight. */
void leg_big_release(struct leg *l);

/* ---- op_loc.c: locating the key, and our blocks */

/* READ both buckets (with_block: WRITE our block first; hdr_of: READ the
 * header of the block that slot word names, for its grant id). */
void loc_start(struct opslot *o, int with_block, uint64_t hdr_of);
/* The buckets in the op buffer are fresh: locate from them. */
void loc_buckets(struct opslot *o);
void loc_round(struct opslot *o);
/* Slots whose fingerprint matches, in scan order, skipping position skip
 * (or -1); tentative ones only when with_tent. */
void loc_collect(struct opslot *o, int skip, int with_tent);
/* Post a round reading candidates from index from on (step).  1 posted,
 * 0 nothing left, -EMSGSIZE a block larger than this client's buffers. */
int loc_read_cands(struct opslot *o, unsigned from, unsigned step);
/* Check candidates [vfrom, vend): the first match, or -1; bad_idx is the
 * first whose block failed its checksum or header (torn), or -1. */
int loc_check_cands(struct opslot *o);
int blk_decode(struct opslot *o, const char *blk, size_t size,
	       const void **v, uint32_t *vl, const struct rkv_block_hdr **h);

char *new_blk_buf(const struct opslot *o);
/* The largest value o may write: the client's and its server's limit. */
size_t op_value_max(const struct opslot *o);
/* The largest value the new-block buffer holds now (within
 * op_value_max): what an rmw callback may write. */
size_t nb_value_cap(const struct opslot *o);
/* Carve space for our new block and encode it.  0, -EAGAIN (parked until
 * a chunk comes), or -errno. */
int nb_make(struct opslot *o, const void *val, size_t val_len,
	    uint64_t version);
/* nb_make of the put's own value (version 0); a big one on tcp or shm is
 * not copied: the caller's buffer is registered for the op and wr_block
 * WRITEs the value from there (newblk.zc). */
int nb_make_put(struct opslot *o);
/* Our new block will never be published: give its space back. */
void nb_drop(struct opslot *o);
/* Our block is now named by a slot. */
void nb_published(struct opslot *o);
uint64_t nb_slot_word(const struct opslot *o, uint64_t prev);
/* What the cache keeps about the block we published (NULL: unknown). */
const struct blk_info *nb_info(const struct opslot *o, struct blk_info *bi);
const struct blk_info *blk_info_of(struct blk_info *bi, const char *blk,
				   size_t avail);
/* The block named by a slot we replaced is unlinked: return it. */
void unlink_block(struct opslot *o, uint64_t old);
uint32_t grant_at(const struct opslot *o, unsigned off);

/* ---- op_ins.c: the insert protocol (put, and rmw of an absent key) */

void ins_start(struct opslot *o);
/* The empty slot an insert takes among the npos words at buckets (the
 * two buckets as read): the first of the emptier bucket, -1 when both
 * are full; *tent |= a tentative slot was seen. */
int pick_empty_slot(const char *buckets, unsigned npos, unsigned slots,
		    int *tent);
void ins_round(struct opslot *o);
void ins_timer(struct opslot *o);
/* Give our tentative slot up and finish with err (a deadline). */
void ins_abort(struct opslot *o, int err);

/* op.c: levels (layout.h "Levels").  op_buckets: the key's buckets on
 * o->p for the levels it knows.  op_level_stale: after a bucket round,
 * whether the level word it READ shows levels the round did not cover
 * (the peer's count is raised: the op must start again, withdrawing a
 * tentative slot first). */
void op_buckets(struct opslot *o);
int op_level_stale(struct opslot *o);
/* op_ins.c: ask server p, whose index had levels levels as far as o read
 * it, for one more (GROW, one at a time per server); o then waits for
 * the answer in INS_WAIT_GROW before it starts again.  0 when p's index
 * is at its largest or we may not write. */
int grow_ask(struct opslot *o, struct peer *p, unsigned levels);

/* op_mig.c: the partition fence.  mig_fenced: whether the partition word
 * the last bucket round read (OB_PART) stops the op here (kept in
 * o->fence); mig_resolve, once the op holds nothing on the server: wait
 * while the partition is frozen, follow it where it went. */
int mig_fenced(struct opslot *o);
void mig_resolve(struct opslot *o);
/* Send the ops whose partition moved to where it went: from the top of a
 * progress call, never inside a pass (it may read etcd and connect). */
void mig_route(struct rkv_client *c);
/* Move the op to server si and start it again there. */
void op_redirect(struct opslot *o, unsigned si);

/* ---- op_repl.c: replicated writes (r > 1) */

/* Set up the legs of slot o (bufs: REPL_LEGS registered buffers of the
 * op buffer's size, consecutive). */
void repl_slot_init(struct opslot *o, struct leg *legs, char *bufs,
		    size_t buf_size, uint32_t lkey);
/* The kind a write runs as at r > 1 (k itself for rmw and reads). */
const struct op_kind *repl_kind(const struct op_kind *k);
/* A write's attempt begins: point the legs at the key's backups and start
 * locating it there.  0, or the error a backup is down with. */
int repl_begin(struct opslot *o);
/* The primary is locked (sequence o->repl.seq) and our new block encoded:
 * install it on every backup, then release (rmw_release). */
void repl_install(struct opslot *o);
/* The op is over or starts again: legs stop, unpublished blocks go back. */
void repl_end(struct opslot *o);
/* Legs waiting for a chunk on sp go on (sp NULL: the poll of each
 * progress pass; those no chunk is asked for any more, or past the
 * deadline). */
void repl_space_ready(struct opslot *o, struct space *sp);
/* The sequence of a lock: the least number above header version h whose
 * low 8 bits are the locked word's version. */
uint64_t repl_seq(uint64_t h, uint64_t lockword);
/* Make our new block a tombstone (flag DELETED) of sequence version. */
int nb_make_tomb(struct opslot *o, uint64_t version);
/* A block read is a tombstone (reads as absent). */
int blk_deleted(const char *blk);

/* ---- shared by the kinds (the extension kinds reuse get's and rmw's) */

void get_deliver(struct opslot *o, const char *blk, uint32_t size,
		 unsigned pos, uint64_t slot);
void get_round(struct opslot *o);
/* Start a round from cached entry ce (a cache hit): o's slot, expected
 * word and entry set, the slot word READ to OB_WORD first. */
void get_cached_begin(struct opslot *o, struct cache_ent *ce);
void get_attempt(struct opslot *o);
void rmw_attempt(struct opslot *o);
void rmw_round(struct opslot *o);
void rmw_call_fn(struct opslot *o, const void *old, uint32_t old_len);
void rmw_commit(struct opslot *o);
/* Post the releasing round (after the install at r > 1). */
void rmw_release(struct opslot *o);
/* Release the lock unchanged, then finish with err. */
void rmw_abort(struct opslot *o, int err);
void get_found(struct opslot *o, struct cand *cd);
void get_absent(struct opslot *o);
struct rkv_op_stats *get_stats(struct rkv_client_stats *st);
void rmw_found(struct opslot *o, struct cand *cd);
void rmw_absent(struct opslot *o);
void rmw_timer(struct opslot *o);
void rmw_space(struct opslot *o);
struct rkv_op_stats *rmw_stats(struct rkv_client_stats *st);
struct rkv_op_stats *put_stats(struct rkv_client_stats *st);
struct rkv_op_stats *del_stats(struct rkv_client_stats *st);
/* r > 1: the tombstone an insert committed is locked by us: go on as a
 * write of a present key (op_ins.c). */
void rmw_locked_new(struct opslot *o);

#endif
