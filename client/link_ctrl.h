/* SPDX-License-Identifier: MIT */
/*
 * link_ctrl.h - the control channel of one server link: SEND/RECV messages of
 * proto/msg.h (chunk grants, block returns, stats, counters, HELLO and
 * authentication), the request slots awaiting replies, and rkey rotation.
 *
 * A request goes out with a completion callback; the reply (or the
 * link's failure) calls it once.  RKEY_UPDATE arrives unasked: the new
 * rkeys replace the old ones here and in every WR still queued on the
 * link, then RKEY_ACK goes out behind every WR posted with an old key.
 */
#ifndef RKV_CLIENT_LINK_CTRL_H
#define RKV_CLIENT_LINK_CTRL_H

#include <stdint.h>

#include "engine.h"
#include "msg.h"

#define CTRL_RECVS 6          /* RECVs posted per server: replies to
				 * CTRL_SENDS requests + 2 RKEY_UPDATEs */
#define CTRL_SENDS 4          /* control requests in flight per server */
#define CTRL_SEND_BUFS (CTRL_SENDS + 1) /* + the RKEY_ACK buffer */
/* registered bytes one control channel needs */
#define CTRL_MEM ((size_t)(CTRL_RECVS + CTRL_SEND_BUFS) * RKV_MSG_MAX)

/* reply: the answer, or NULL when the link failed (err its -errno) */
typedef void (*ctrl_done_fn)(void *arg, const struct rkv_msg *reply, int err);

struct ctrl;

struct ctrl_buf {
	struct wr_ctx w;
	struct ctrl *ctl;
	unsigned idx;
	char *mem;                /* RKV_MSG_MAX registered bytes */
};

struct ctrl_req {
	int busy;
	uint32_t req_id;
	unsigned type;            /* request type awaiting a reply */
	ctrl_done_fn done;        /* NULL: nobody waits (errors logged) */
	void *arg;
};

/* The rkeys the ops use, current after every RKEY_UPDATE. */
struct rkeys {
	uint32_t index, data, counters;
	int has_counters;
	uint32_t epoch;           /* last RKEY_UPDATE applied (0: HELLO's) */
	uint32_t acked;           /* last epoch whose RKEY_ACK was posted */
};

struct ctrl {
	struct link *l;
	struct ctrl_buf recv[CTRL_RECVS];
	struct ctrl_buf send[CTRL_SEND_BUFS];
	struct ctrl_req req[CTRL_SENDS];
	uint32_t next_req_id;
	struct rkeys keys;
	int ack_busy;             /* the ACK buffer awaits its completion */
};

/* Set up over link l with CTRL_MEM bytes of registered memory at mem. */
void ctrl_init(struct ctrl *ctl, struct link *l, char *mem);
/* Post the RECVs (after the endpoint connected).  0 or -errno. */
int ctrl_start(struct ctrl *ctl);
/* Send m (its req_id is assigned here).  0, -EBUSY (every request slot
 * in use), or the link's -errno. */
int ctrl_send(struct ctrl *ctl, struct rkv_msg *m, ctrl_done_fn done,
	      void *arg);
/* Send m and wait for its reply in *reply, driving progress, all within
 * timeout_ms.  0, -ETIMEDOUT or the link's -errno.  A request given up
 * on is detached, so a late reply writes nowhere. */
int ctrl_call(struct ctrl *ctl, struct rkv_msg *m, struct rkv_msg *reply,
	      unsigned timeout_ms);
/* Requests still awaiting replies. */
unsigned ctrl_busy(const struct ctrl *ctl);

/* The messages of the space layer (it never builds one itself). */
int ctrl_chunk_alloc(struct ctrl *ctl, uint32_t bytes, uint32_t min_bytes,
		     ctrl_done_fn done, void *arg);
int ctrl_chunk_retire(struct ctrl *ctl, uint64_t off, uint64_t len);
int ctrl_block_return(struct ctrl *ctl, const struct rkv_extent *ext,
		      unsigned n);

#endif
