/* SPDX-License-Identifier: MIT */
/*
 * verbs_internal.h - objects of the verbs provider, shared by verbs.c
 * (device and context), verbs_mr.c (memory), verbs_cq.c (CQs), verbs_qp.c
 * (QPs), verbs_post.c (datapath) and verbs_cm.c (rdma_cm connections).
 *
 * A context opens its own device (ibv_open_device) and PD; QPs are created
 * on that PD with ibv_create_qp and driven through INIT/RTR/RTS by us, with
 * the attributes rdma_cm computes (rdma_init_qp_attr) plus our timeouts;
 * rdma_cm only carries the connection handshake (qp_num in the conn param,
 * rdma_establish on the active side).  So no object of ours ever lives in
 * librdmacm's process-wide device cache, which a forked child would share
 * with its parent.  A connection whose address resolves to another device
 * (by GUID) is refused.
 *
 * wr_id mapping: each endpoint keeps a ring of request records per queue
 * (caller's wr_id, opcode, local-check result); the ibv wr_id is the
 * request's sequence number (bit 63 set for RECVs).  A completion finds its
 * endpoint by wc.qp_num in the CQ's table, so a CQ can serve any number of
 * QPs, and its record by the sequence number, so the opcode is right even
 * on error completions.  Ring slots are freed when a completion of that or
 * a later request is polled (unsignaled WRs are retired by a later
 * signaled one), which bounds outstanding WRs by the queue length.
 * A completion whose QP is no longer in the table (its endpoint was
 * destroyed) is dropped.
 *
 * Connected cm_ids are moved to their CQ's event channel; rkv_cq_poll reads
 * it now and then (see CM_CHECK_EVERY in verbs_cq.c) to learn of disconnects.
 * Every cm event is acked as soon as it is read, so rdma_destroy_id (which
 * waits for unacked events of its id) never blocks on us.
 */
#ifndef RKV_COMMON_TRANSPORT_VERBS_INTERNAL_H
#define RKV_COMMON_TRANSPORT_VERBS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "transport_internal.h"

#define VERBS_COMP "verbs"
/* rkv_tp_log of the verbs provider (tp: the struct rkv_tp of a context). */
#define verbs_log(tp, level, ...)                                              \
	rkv_tp_log((tp), (level), VERBS_COMP, __VA_ARGS__)
#define VERBS_MR_BUCKETS 64u  /* MR table, chained by lkey */
#define VERBS_EP_BUCKETS 256u /* per-CQ endpoint table, chained by qp_num */
#define VERBS_MAX_RD_ATOMIC 16 /* cap on outstanding READ/atomics per QP */
#define VERBS_LCACHE 4u        /* per-endpoint cache of checked MRs */
#define VERBS_RETRY_CNT 6      /* transport retries before RETRY_EXC_ERR */
#define VERBS_RNR_RETRY 6      /* RNR retries (7 would be infinite) */

/* A registered region; the lkey table lets rkv_post use inline sends only
 * for local buffers that the device would accept (a bad lkey must still
 * complete with LOC_PROT_ERR, and inline data is never checked). */
struct verbs_win;

struct verbs_mr {
	struct rkv_mr base;
	struct ibv_mr *mr;
	struct verbs_mr *hnext; /* lkey chain in verbs_tp.mr_tab */
	struct verbs_win *wins; /* its windows (verbs_mw.c), under mr_lock */
};

/*
 * A type-2B memory window over a whole windowed MR, bound to one
 * endpoint's QP (rkv_ep_rkey): the only rkey of that MR a peer gets, and
 * one the device honours on that QP alone.  On its MR's list and its
 * endpoint's, both under verbs_tp.mr_lock; deallocated when either goes.
 */
struct verbs_win {
	struct ibv_mw *mw;
	uint32_t rkey;               /* as bound (ibv_inc_rkey of the MW's) */
	struct verbs_mr *vm;
	struct verbs_ep *ep;
	struct verbs_win *mr_next, *ep_next;
};

struct verbs_tp {
	struct rkv_tp base;
	struct ibv_context *ctx;   /* the chosen device, opened by us */
	__be64 guid;               /* its node GUID, to match cm_id->verbs */
	int quirk_rxe;             /* Soft-RoCE: see wc_status_fix() */
	struct ibv_pd *pd;
	struct ibv_device_attr dev_attr;
	uint8_t port;
	int gid_index;
	uint32_t max_msg_sz;       /* port's limit on one message */
	uint32_t split_sz;         /* piece of a longer READ/WRITE */
	uint8_t ack_timeout;       /* QP local ACK timeout, 4.096 us << n */
	uint8_t min_rnr_timer;     /* IB encoding, see rnr_timer_code() */
	uint8_t rd_atomic;         /* responder resources we offer */
	uint8_t init_depth;        /* READ/atomics we keep in flight */
	/* QP knobs (rkv_tp_opts): path MTU (enum ibv_mtu, 0: rdma_cm's),
	 * traffic class and SL (-1: rdma_cm's) */
	int path_mtu;
	int traffic_class;
	int service_level;
	pthread_mutex_t mr_lock;   /* protects mr_tab */
	struct verbs_mr *mr_tab[VERBS_MR_BUCKETS];
	atomic_uint mr_gen;        /* bumped on every dereg (never 0) */
};

struct verbs_ep;

#define VERBS_CQ_STASH 32

struct verbs_cq {
	struct rkv_cq base;
	struct ibv_cq *cq;
	struct rdma_event_channel *ch; /* cm events of connected endpoints */
	pthread_mutex_t lock;          /* protects tab and nep */
	struct verbs_ep *tab[VERBS_EP_BUCKETS];
	unsigned nep;
	unsigned idle_polls;           /* empty polls since the last cm check */
	/* rkv_cq_wait: the CQ's completion channel, events not yet acked,
	 * and completions polled while arming it (cq_poll returns them) */
	struct ibv_comp_channel *comp;
	unsigned unacked;
	struct ibv_wc stash[VERBS_CQ_STASH];
	unsigned nstash, stash_off;
};

/* One posted request, for its completion. */
struct verbs_req {
	uint64_t wr_id;     /* the caller's */
	uint8_t opcode;     /* enum rkv_wr_opcode */
	uint8_t bad_local;  /* local buffer failed local_ok() */
	uint8_t split;      /* VERBS_PIECE / VERBS_LAST_PIECE, else 0 */
};

/*
 * A READ or WRITE longer than the port's max_msg_sz (8 MiB on rxe) goes as
 * consecutive WRs of at most that size in the same doorbell: the leading
 * pieces unsignaled, the last one as the caller asked.  An error on a
 * leading piece is held (verbs_ep.split_st) and reported on the last
 * piece's flush, so the caller sees one completion with the real status.
 */
enum { VERBS_PIECE = 1, VERBS_LAST_PIECE = 2 };

#define VERBS_RECV_BIT (1ull << 63) /* in the ibv wr_id of RECVs */
/* verbs_req.opcode of a window bind the provider posted itself: never
 * reported to the caller (an error one puts the endpoint in error). */
#define VERBS_OP_BIND 0xfe

struct verbs_ep {
	struct rkv_ep base;
	struct rdma_cm_id *id;
	struct rdma_event_channel *setup_ch; /* own channel until connected */
	struct ibv_qp *qp;
	struct verbs_cq *vcq;
	uint32_t qp_num;
	uint32_t max_inline;       /* what the QP granted */
	unsigned sq_len, rq_len;   /* queue lengths the QP granted */
	/* request rings: seq & mask indexes; tail..head are outstanding */
	struct verbs_req *sring, *rring;
	uint64_t smask, rmask;
	uint64_t shead, stail, rhead, rtail;
	struct ibv_send_wr *swr;   /* scratch for one rkv_post chain */
	struct ibv_sge *ssge;
	struct ibv_recv_wr *rwr;   /* scratch for one rkv_post_recv chain */
	struct ibv_sge *rsge;
	struct verbs_ep *hnext;    /* qp_num chain in verbs_cq.tab */
	int in_tab;
	/* MRs that passed the local check, by lkey % VERBS_LCACHE; an
	 * entry is valid while its gen equals verbs_tp.mr_gen */
	struct {
		unsigned gen;
		uint32_t lkey;
		unsigned access;
		int gpu;           /* device memory: never posted inline */
		uintptr_t lo, hi;
	} lcache[VERBS_LCACHE];
	struct verbs_win *wins;    /* windows bound to this QP, under mr_lock */
	int hw_err;                /* an error completion: QP is in ERR */
	int split_st;              /* a leading piece's error status, or -1 */
	uint8_t resp_res;          /* passive side: max_dest_rd_atomic (0: rdma_cm's) */
	uint8_t init_depth;        /* passive side: max_rd_atomic (0: rdma_cm's) */
};

/* The lkey chain of verbs_tp.mr_tab that lkey is on. */
static inline unsigned verbs_mr_bucket(uint32_t lkey)
{
	return (lkey ^ (lkey >> 8)) % VERBS_MR_BUCKETS;
}

/* verbs_mr.c: memory and registrations (the ops of those names) */
int verbs_mem_alloc(struct rkv_tp *tp, size_t len, void **out);
void verbs_mem_free(struct rkv_tp *tp, void *addr, size_t len);
int verbs_mr_reg(struct rkv_tp *tp, void *addr, size_t len, unsigned access,
		 struct rkv_mr **out);
int verbs_mr_reg_gpu(struct rkv_tp *tp, void *addr, size_t len,
		     unsigned access, int gpu, struct rkv_mr **out);
int verbs_mr_dereg(struct rkv_mr *mr);

/* verbs_mw.c: memory windows (rkv_ep_rkey) */
int verbs_ep_rkey(struct rkv_ep *ep, struct rkv_mr *mr, uint32_t *rkey);
/* Deallocate the windows of vm / of ep; callers hold vt->mr_lock. */
void verbs_mr_drop_windows(struct verbs_tp *vt, struct verbs_mr *vm);
void verbs_ep_drop_windows(struct verbs_tp *vt, struct verbs_ep *ep);

/* verbs_cq.c: completion queues (the ops of those names) */
int verbs_cq_create(struct rkv_tp *tp, unsigned depth, struct rkv_cq **out);
void verbs_cq_destroy(struct rkv_cq *cq);
int verbs_cq_poll(struct rkv_cq *cq, struct rkv_wc *wc, int max);
int verbs_cq_wait(struct rkv_cq *cq, struct pollfd *fds, unsigned nfds,
		  unsigned timeout_us);
/* Enter ep in / take it out of cq's qp_num table. */
void verbs_cq_add(struct verbs_cq *cq, struct verbs_ep *ep);
void verbs_cq_del(struct verbs_cq *cq, struct verbs_ep *ep);

/* verbs_qp.c: queue pairs */
/* Create the QP (RESET) on the context's PD, with its rings and scratch. */
int rkv_verbs_ep_setup_qp(struct verbs_ep *ep);
/* Move the QP to INIT, RTR or RTS with rdma_cm's attributes and ours. */
int rkv_verbs_ep_qp_to(struct verbs_ep *ep, enum ibv_qp_state state);
/* Out of the CQ table, destroy the QP, free rings and scratch. */
void rkv_verbs_ep_fini_qp(struct verbs_ep *ep);
int rkv_verbs_ep_path(struct rkv_ep *e, struct rkv_ep_path *out);

/* GIDs (verbs.c; verbs_check.c reads them too) */
enum verbs_gid_kind { GID_UNKNOWN = 0, GID_IB, GID_ROCE_V1, GID_ROCE_V2 };
const char *rkv_verbs_gid_kind_str(enum verbs_gid_kind k);
int rkv_verbs_gid_is_v4mapped(const union ibv_gid *g);
/* The GID at idx of ctx's port and its type: ibv_query_gid_ex, or sysfs
 * on kernels without the GID-table ioctl.  0 or -errno (-ENODATA: an
 * empty entry). */
int rkv_verbs_query_gid(struct ibv_context *ctx, uint8_t port, int idx,
			union ibv_gid *gid, enum verbs_gid_kind *kind);
/* The GID index a QP uses when none is asked for, on an Ethernet port: a
 * RoCE v2 GID of an IPv4 address, else the first v2 GID, else the first
 * GID; -1 when the table is empty. */
int rkv_verbs_default_gid(struct ibv_context *ctx, uint8_t port,
			  int tbl_len);

/* An enum ibv_mtu in bytes (0: not one). */
static inline int rkv_verbs_mtu_bytes(int m)
{
	return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128 << m : 0;
}

/* verbs_post.c: the datapath (the ops of those names) */
int verbs_post(struct rkv_ep *ep, struct rkv_wr *wr, struct rkv_wr **bad);
int verbs_post_recv(struct rkv_ep *ep, struct rkv_recv_wr *wr,
		    struct rkv_recv_wr **bad);
/* Post the bind of w->mw over its whole MR to w->rkey on ep's send queue,
 * unsignaled.  0, -ENOMEM (queue full) or -errno. */
int verbs_post_bind(struct verbs_ep *ep, struct verbs_win *w);

/* verbs_cm.c */
int rkv_verbs_listen(struct rkv_tp *tp, const struct rkv_tp_addr *addr,
		     struct rkv_listener **out);
void rkv_verbs_listener_destroy(struct rkv_listener *l);
int rkv_verbs_listener_fd(const struct rkv_listener *l);
int rkv_verbs_accept(struct rkv_listener *l, struct rkv_cq *cq,
		     int timeout_ms, struct rkv_ep **out);
int rkv_verbs_connect(struct rkv_tp *tp, const struct rkv_tp_addr *addr,
		      struct rkv_cq *cq, int timeout_ms, struct rkv_ep **out);
void rkv_verbs_ep_destroy(struct rkv_ep *ep);
void rkv_verbs_cq_cm_events(struct verbs_cq *cq);
/* O_NONBLOCK on fd; 0 or -errno. */
int rkv_verbs_set_nonblock(int fd);

/* errno after a failed rdma-core call as -errno, never 0: the one place
 * the provider normalizes rdma-core's "NULL or -1 plus errno" results. */
static inline int rkv_verbs_neg_errno(int fallback)
{
	return errno ? -errno : -fallback;
}

#endif
