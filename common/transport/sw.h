/* SPDX-License-Identifier: MIT */
/*
 * sw.h - the engine shared by the software providers (tcp and shm).
 *
 * Both providers carry a framed, symmetric protocol over one stream socket
 * per endpoint (a TCP socket for tcp, an abstract unix socket for shm):
 * SEND/RECV, their acknowledgements, and on tcp the one-sided requests
 * (READ, WRITE, CAS, FETCH_ADD) that the target executes against its MR
 * table.  Every frame starts with a 48-byte header (magic, version, type,
 * payload length) that the receiver validates before trusting anything.
 *
 * Progress: an endpoint made by rkv_connect (active) is progressed by
 * rkv_cq_poll on its CQ; an endpoint made by rkv_accept (passive) by the
 * context's transport thread (one per context, started by the first listen).
 * Either way, all state of an endpoint is changed under ep->lock.
 *
 * Completion order: the send queue is a ring; a WR's completion is emitted
 * only when every older WR on the endpoint is done, so completions of one
 * endpoint appear in posting order (as on an RC QP), and the first
 * non-success completion moves the endpoint to the error state, which
 * flushes everything after it.
 *
 * Lock order: tp->thr_lock -> ep->lock -> tp->mrt.lock (read) -> cq overflow
 * lock.  The CQ ring itself is lock-free (MPSC).
 */
#ifndef RKV_COMMON_TRANSPORT_SW_H
#define RKV_COMMON_TRANSPORT_SW_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "../gpu/gpu.h"
#include "transport_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* rkv_tp_log for a context of tcp or shm (struct sw_tp *tp), under its
 * provider's component name. */
#define sw_log(tp, level, ...)                                                 \
	rkv_tp_log(&(tp)->base, (level), (tp)->prov->comp, __VA_ARGS__)

/* ------------------------------------------------------------ wire format */
#define SW_MAGIC 0x54564b52u /* "RKVT" on the wire (little-endian) */
#define SW_VERSION 1
#define SW_HDR_LEN 48
/* The connector's first bytes, before its HELLO: a line, so that a server
 * of a line protocol on the port (Redis, memcached, HTTP) answers at once
 * with an error of its own, and the connector says "not an rkv server"
 * instead of timing out (the header has NUL bytes, at which such servers
 * stop looking for the end of the line).  An acceptor takes a HELLO with
 * or without it. */
#define SW_PREAMBLE "rkv1\r\n\r\n"
#define SW_PREAMBLE_LEN 8

enum sw_ftype {
	SW_F_HELLO = 1,  /* connector -> acceptor, first frame */
	SW_F_HELLO_ACK,  /* acceptor -> connector */
	SW_F_READ,       /* addr, key=rkey, arg0=length */
	SW_F_WRITE,      /* addr, key=rkey, payload */
	SW_F_CAS,        /* addr, key=rkey, arg0=compare, arg1=swap */
	SW_F_FADD,       /* addr, key=rkey, arg0=addend */
	SW_F_SEND,       /* payload */
	SW_F_RESP,       /* key=status; READ: payload; atomics: arg0=old */
	SW_F_RNR,        /* SEND seq is waiting for a RECV at the receiver */
	SW_F_MAP_REQ,    /* shm: arg0=memid, arg1=writable wanted */
	SW_F_MAP_RESP,   /* shm: key=status, an fd rides along (SCM_RIGHTS) */
	SW_F_MAX,
};

/* A decoded header; the encoding is fixed little-endian (sw_wire.c). */
struct sw_hdr {
	uint8_t type;  /* enum sw_ftype */
	uint32_t len;  /* payload bytes that follow the header */
	uint32_t key;  /* requests: rkey; responses: status */
	uint64_t seq;  /* initiator's send-queue sequence number */
	uint64_t addr; /* target virtual address */
	uint64_t arg0;
	uint64_t arg1;
};

void sw_hdr_encode(const struct sw_hdr *h, uint8_t *out);
/* Returns 0, or -EPROTO for a bad magic, version or type. */
int sw_hdr_decode(const uint8_t *in, struct sw_hdr *h);
/*
 * The frame parser: check the frame that starts at buf (n bytes received so
 * far) before anything in it is trusted.  Decodes the header (magic,
 * version, type, reserved bytes) and checks what its type allows without
 * looking at endpoint state: READ carries no payload and asks at most
 * RKV_TP_MAX_MSG bytes; WRITE and SEND carry at most RKV_TP_MAX_MSG; a RESP
 * has a known status, at most RKV_TP_MAX_MSG of payload and none with an
 * error; every other type carries none.  The payload (h->len bytes) follows
 * the header; the receive path (sw_rx.c), the handshakes (sw_hs.c) and the
 * fuzz harnesses (tests/fuzz/) all call this.  Pure, thread-safe.
 * Returns 0 with *h filled, -EAGAIN (n < SW_HDR_LEN), -EPROTO (bad header),
 * -EBADMSG (a frame its type does not allow; *h is filled).
 */
int sw_frame_check(const void *buf, size_t n, struct sw_hdr *h);

/* ---------------------------------------------------------------- MR table */
/*
 * The MR table maps key -> entry in O(1): the low SW_MR_IDX_BITS of an
 * lkey/rkey are the index, the rest a generation that changes on every
 * registration.  An entry's key word is written last (release) on
 * registration and cleared first on deregistration; readers load it with
 * acquire and re-check it after reading the other fields (seqlock), so a
 * reader never pairs a key with another registration's fields.  On shm the
 * entries live in a memfd that peers map read-only.
 */
#define SW_MR_IDX_BITS 14
#define SW_MR_MAX (1u << SW_MR_IDX_BITS)
#define SW_MR_IDX_MASK (SW_MR_MAX - 1)
#define SW_KEY_VALID (1ull << 63)
/* tcp: the region is reached only with an endpoint's salted rkeys
 * (RKV_ACCESS_WINDOWED, sw_ep.wsalt) */
#define SW_KEY_WINDOWED (1ull << 62)
#define SW_KEY_ACCESS(k) ((unsigned)((k) >> 32) & 0xfu)
#define SW_KEY_MEMID1(k) ((unsigned)((k) >> 36) & 0xffffu) /* memid+1 */
/* GPU regions: CUDA device + 1 in bits 52..61 (0: host memory). */
#define SW_KEY_GPU1(k) ((unsigned)((k) >> 52) & 0x3ffu)
#define SW_GPU_MAX 64 /* devices a context can stage for */

struct sw_mrent {
	uint64_t key;    /* VALID | (gpu+1) << 52 | (memid+1) << 36 |
			  * access << 32 | rkey */
	uint64_t addr;   /* region start, in the owner's address space */
	uint64_t len;    /* region bytes */
	uint64_t memoff; /* shm: offset of addr inside its memfd */
};
_Static_assert(sizeof(struct sw_mrent) == 32, "MR table entry is 32 bytes");
#define SW_MRTAB_BYTES ((size_t)SW_MR_MAX * sizeof(struct sw_mrent))

struct sw_mr {
	struct rkv_mr base;
	uint32_t idx;
};

struct sw_mrtab {
	pthread_rwlock_t lock;   /* write: reg/dereg; read: remote execution */
	struct sw_mrent *ent;    /* SW_MR_MAX entries; owner may be a memfd */
	uint32_t *gen;           /* per index, private */
	uint8_t *used;           /* per index, private */
	uint32_t hint;           /* where the next free-slot scan starts */
	const struct rkv_tp *owner; /* the context, for its log */
};

/* The table of owner's regions, its entries at ent. */
int sw_mrtab_init(struct sw_mrtab *t, struct sw_mrent *ent,
		  const struct rkv_tp *owner);
void sw_mrtab_fini(struct sw_mrtab *t);
/* Register; memid1 is the shm memfd id + 1 (0: none). */
int sw_mrtab_reg(struct sw_mrtab *t, void *addr, size_t len, unsigned access,
		 unsigned memid1, uint64_t memoff, struct sw_mr **out);
/* The same for device memory of CUDA device gpu (0..SW_GPU_MAX-1). */
int sw_mrtab_reg_gpu(struct sw_mrtab *t, void *addr, size_t len,
		     unsigned access, unsigned memid1, uint64_t memoff, int gpu,
		     struct sw_mr **out);
int sw_mrtab_dereg(struct sw_mrtab *t, struct sw_mr *mr);
/*
 * Check a local buffer against the table: lkey valid, [p, p+len) inside
 * its region, RKV_ACCESS_LOCAL_WRITE if need_write.  *gpu gets the CUDA
 * device of a GPU MR, -1 for host memory; with gpu NULL a GPU MR is
 * refused (RECV buffers must be host memory).  Lock-free.  Returns
 * RKV_WC_SUCCESS or RKV_WC_LOC_PROT_ERR.
 */
int sw_mrtab_check_local(struct sw_mrtab *t, const void *p, uint32_t len,
			 uint32_t lkey, bool need_write, int *gpu);
/*
 * Check a remote access (caller holds t->lock for reading, or accepts a
 * race with deregistration).  salt: the receiving endpoint's wsalt, which
 * a windowed region's rkey must carry.  Returns RKV_WC_SUCCESS with *ptr set, or
 * RKV_WC_REM_ACCESS_ERR.  *key_out gets the entry's key word.
 */
int sw_mrtab_check_remote(struct sw_mrtab *t, uint32_t rkey, uint32_t salt,
			  uint64_t addr, uint64_t len, unsigned need,
			  void **ptr, uint64_t *key_out);

/* --------------------------------------------------------------- the CQ */
struct sw_ep;
struct sw_tp;

struct sw_cell {
	uint64_t seq; /* atomic: Vyukov bounded-queue sequence */
	struct rkv_wc wc;
};

struct sw_cq {
	struct rkv_cq base;
	struct sw_tp *tp;
	struct sw_cell *cells;
	uint64_t mask;
	_Alignas(64) uint64_t tail; /* atomic: producers claim with CAS */
	_Alignas(64) uint64_t head; /* consumer only */
	_Alignas(64) uint64_t produced; /* atomic: completions queued */
	uint64_t consumed;          /* atomic store: completions polled */
	int ovf_flag;               /* atomic: overflow list non-empty */
	pthread_mutex_t ovf_lock;   /* guards ovf* */
	struct rkv_wc *ovf;
	size_t ovf_head, ovf_tail, ovf_cap;
	/* Active endpoints that poll progresses. */
	pthread_mutex_t eps_lock;   /* guards eps, neps, eps_cap */
	struct sw_ep **eps;
	unsigned neps, eps_cap;
	uint64_t eps_gen;           /* atomic: bumped on change */
	struct sw_ep **snap;        /* poller's copy of eps */
	unsigned nsnap, snap_cap;
	uint64_t snap_gen;
	unsigned npoll;             /* poller counter */
	/* rkv_cq_wait: producers write wake_fd while waiting is set */
	int wake_fd;                /* eventfd */
	int waiting;                /* atomic */
	uint64_t published;         /* atomic: completions published */
};

int sw_cq_create(struct rkv_tp *tp, unsigned depth, struct rkv_cq **out);
void sw_cq_destroy(struct rkv_cq *cq);
int sw_cq_poll(struct rkv_cq *cq, struct rkv_wc *wc, int max);
int sw_cq_wait(struct rkv_cq *cq, struct pollfd *fds, unsigned nfds,
	       unsigned timeout_us);
/*
 * Queue a completion; any thread.  Returns its ticket: the completion has
 * (about) been polled once cq->consumed exceeds it, which is when shm frees
 * the send-queue slots it stood for.
 */
uint64_t sw_cq_push(struct sw_cq *cq, const struct rkv_wc *wc);
int sw_cq_add_ep(struct sw_cq *cq, struct sw_ep *ep);
void sw_cq_del_ep(struct sw_cq *cq, struct sw_ep *ep);

/* ----------------------------------------------------------- endpoints */
struct sw_sqe {
	uint64_t wr_id;
	void *local;
	uint32_t length;
	uint8_t opcode;   /* enum rkv_wr_opcode */
	uint8_t signaled;
	uint8_t done;     /* status is final */
	uint8_t rnr;      /* SEND: receiver said it has no RECV yet */
	int16_t gpu;      /* local buffer: -1 host, else CUDA device */
	int status;       /* enum rkv_wc_status once done */
	uint64_t t_post;  /* ns */
	struct rkv_hash_state *digest; /* READ with RKV_WR_DIGEST, or NULL */
	uint32_t digest_off;
};

struct sw_rqe {
	uint64_t wr_id;
	void *local;
	uint32_t length;
};

/* A SEND that arrived before a RECV was posted. */
struct sw_unexp {
	struct sw_unexp *next;
	uint64_t seq;
	uint32_t len;
	uint32_t got;   /* payload bytes received so far */
	uint8_t data[]; /* len bytes */
};

enum sw_rx_kind {
	SW_RX_NONE = 0,
	SW_RX_DISCARD,   /* drop the payload */
	SW_RX_MEM,       /* copy into dst (READ response, RECV buffer) */
	SW_RX_WRITE,     /* remote WRITE into a region, checked per chunk */
	SW_RX_UNEXP,     /* SEND into an unexpected buffer */
};

/* The frame whose payload is being received. */
struct sw_rxcur {
	enum sw_rx_kind kind;
	uint64_t remaining;
	uint64_t off;
	uint8_t *dst;
	struct sw_hdr h;        /* header of the frame */
	uint64_t key;           /* SW_RX_WRITE: MR key word at the start */
	struct sw_gpu *gpu;     /* SW_RX_WRITE into a GPU region: staging */
	int status;             /* SW_RX_WRITE: becomes an error mid-way */
	struct sw_unexp *ux;    /* SW_RX_UNEXP */
	uint64_t rq_wr_id;      /* SW_RX_MEM for a RECV */
	bool is_recv;           /* SW_RX_MEM: RECV (else READ response) */
	bool ldev;              /* SW_RX_MEM: READ into local GPU memory, */
	struct sw_gpu *lgpu;    /* through this staging (NULL: failed) */
	/* SW_RX_MEM of a READ with RKV_WR_DIGEST: fed the payload from
	 * digest_off on as it lands */
	struct rkv_hash_state *digest;
	uint32_t digest_off;
};

#define SW_TX_IOV 64
#define SW_RXBUF (256u * 1024)
#define SW_TX_HIGH (32u * 1024 * 1024) /* stop reading above this backlog */
#define SW_MAX_FDQ 8

struct sw_ep {
	struct rkv_ep base;
	struct sw_tp *tp;
	struct sw_cq *cq;
	/* rkv_ep_rkey of a windowed region: its rkey XOR this (random, the
	 * index bits 0, never 0), undone by the target on this connection */
	uint32_t wsalt;
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* shm: waiters for a MAP_RESP (passive) */
	int fd;
	int rcvlowat;            /* SO_RCVLOWAT set on fd (0: the default) */
	bool passive;            /* accepted: the transport thread drives it */
	bool closed;             /* socket shut down: no more I/O */
	bool draining;           /* error: flushing tx, then shut down */
	bool err_pending;        /* a WR failed locally; flush what follows */
	bool io_err;             /* a send failed: treat as link loss */
	int lost_status;         /* link lost idle: status of the next WR */
	uint64_t handle;         /* passive: handle token in tp's table */
	unsigned ev;             /* passive: epoll events registered */
	bool in_epoll;
	uint64_t drain_deadline; /* ns */
	uint64_t last_rx;        /* ns of the last bytes received */
	uint64_t last_tx;        /* ns the socket last took queued bytes */
	uint64_t timeout_ns;

	/* send queue: [sq_head, sq_tail) outstanding, in posting order */
	struct sw_sqe *sq;
	uint32_t sq_cap;
	uint64_t sq_head; /* atomic store: read lock-free by shm's post */
	uint64_t sq_tail;

	/* receive queue */
	struct sw_rqe *rq;
	uint32_t rq_cap;
	uint64_t rq_head, rq_tail;
	struct sw_unexp *ux_head, *ux_tail;
	size_t ux_bytes;
	unsigned ux_count;

	/* tx: iovecs of the chain being built, then unsent bytes in txbuf */
	struct iovec iov[SW_TX_IOV];
	unsigned niov;
	uint8_t hstage[SW_TX_IOV / 2][SW_HDR_LEN];
	unsigned nhstage;
	bool tx_refs_region;     /* staged iovecs point into a region */
	size_t stage_len;        /* bytes the staged iovecs describe */
	uint8_t *txbuf;
	size_t tx_cap, tx_off, tx_len;
	int tx_fds[SW_MAX_FDQ];  /* fds to attach to the next send */
	bool tx_fds_close[SW_MAX_FDQ];
	unsigned ntx_fds;

	/* rx */
	uint8_t *rxbuf;
	size_t rx_off, rx_len;
	struct sw_rxcur cur;
	int fdq[SW_MAX_FDQ];     /* fds received, FIFO */
	unsigned nfdq;

	void *prov;              /* provider's per-endpoint data */
};

/* Provider hooks into the engine. */
struct sw_prov {
	const char *comp;    /* log component: "tcp", "shm" */
	bool remote_exec;    /* execute READ/WRITE/CAS/FADD frames */
	bool unix_fds;       /* the socket carries SCM_RIGHTS */
	/* A provider frame type (MAP_REQ, MAP_RESP).  Return 0 or -EPROTO. */
	int (*frame)(struct sw_ep *ep, const struct sw_hdr *h);
	/* Whether rkv_cq_poll should progress ep now (NULL: always). */
	bool (*gate)(struct sw_ep *ep, unsigned npoll);
	/* After bytes went out on ep's socket (shm rings a doorbell). */
	void (*after_tx)(struct sw_ep *ep);
	/* Provider part of an endpoint; fds from the peer's hello/ack. */
	int (*ep_setup)(struct sw_ep *ep, const int *fds, unsigned nfds);
	void (*ep_fini)(struct sw_ep *ep);
	/* fds to send with our HELLO (connector) or HELLO_ACK (acceptor). */
	int (*hello_fds)(struct sw_tp *tp, struct sw_ep *ep, bool connector,
			 int *fds, bool *close_after, unsigned *nfds);
};

/* -------------------------------------------------- context and listener */
enum sw_htype {
	SW_H_FREE = 0,
	SW_H_WAKE,
	SW_H_LISTENER,
	SW_H_PEND,
	SW_H_EP,
};

struct sw_handle {
	enum sw_htype type;
	uint32_t gen;
	void *ptr;
};

/*
 * Staging for GPU regions at a target (sw_gpu.c): two pinned buffers and
 * two streams per device, made on first use, so that the copy of one chunk
 * overlaps the socket transfer of the other.  Used under lock by whichever
 * thread executes a remote operation (normally the transport thread).
 */
#define SW_GPU_CHUNK (4u << 20)
struct sw_gpu {
	pthread_mutex_t lock;
	int gpu;
	void *buf[2];                        /* pinned, SW_GPU_CHUNK each */
	struct rkv_cuda_stream *s[2];
	unsigned next;                       /* buffer the next copy uses */
};

#define SW_PEER_BUCKETS 256

struct sw_peer;
struct sw_pend;

/* A list of handshakes, oldest first, through one of their sw_plinks. */
struct sw_plink {
	struct sw_pend *prev, *next;
};
struct sw_plist {
	struct sw_pend *head, *tail;
	unsigned n;
};

struct sw_tp {
	struct rkv_tp base;
	const struct sw_prov *prov;
	struct sw_mrtab mrt;
	/* transport thread */
	pthread_mutex_t thr_lock;  /* handles, epoll membership; held by the
				    * thread while it processes events */
	pthread_t thr;
	bool thr_started;
	int stop;                  /* atomic */
	int epfd;
	int wakefd;
	struct sw_handle *h;
	uint32_t hcap;
	uint64_t next_tick;        /* ns: timeouts scan */
	void *prov_data;
	pthread_mutex_t gpu_lock;  /* guards creation of gpu[] entries */
	struct sw_gpu *gpu[SW_GPU_MAX]; /* by device; NULL until used */
	/* Connections in the handshake (accepted, HELLO not yet read), all
	 * guarded by thr_lock; sw_hs.c explains the caps. */
	struct sw_plist hs;        /* all of them, in accept order */
	unsigned hs_max;           /* total cap (opts or from the fd limit) */
	unsigned hs_peer_max;      /* cap per peer address */
	unsigned hs_room;          /* cap learned from EMFILE, until: */
	uint64_t hs_room_until;    /* ns; 0: none learned */
	struct sw_peer *peers[SW_PEER_BUCKETS]; /* addresses in hs_* */
	int reserve_fd;            /* closed to accept-and-close at EMFILE */
	uint64_t hs_evicted;       /* handshakes closed by a cap */
	uint64_t accept_shed;      /* connections closed at accept */
	uint64_t flog_ns;          /* flood log limiter: window start */
	unsigned flog_n;           /* lines in the window */
	uint64_t flog_dropped;     /* lines suppressed */
	/* atomic: 1 while the transport thread blocks SW_IDLE_MS with no
	 * timer to run; a thread that gives a passive endpoint one reads it
	 * and rings wakefd (sw_thr_kick).  Last in the struct: posters read
	 * it on every post, and nothing near it is written in the busy case
	 * (thr_lock and the MR table's lock are). */
	int long_sleep;
};

/* A peer address with connections in the handshake (tcp only). */
struct sw_peer {
	struct sw_peer *next;      /* hash chain */
	uint8_t addr[16];          /* IPv4 (and v4-mapped v6): first 4 */
	uint8_t v6;
	uint16_t bucket;           /* index in tp->peers */
	struct sw_plist pends;     /* its connections in the handshake */
};

struct sw_pend {
	struct sw_pend *next;      /* listener's ready queue */
	struct sw_plink hs;        /* in tp->hs */
	struct sw_plink pr;        /* in pe->pends */
	struct sw_peer *pe;        /* NULL: no address (unix) */
	struct sw_listener *l;
	int fd;
	uint64_t handle;
	uint8_t buf[SW_PREAMBLE_LEN + SW_HDR_LEN]; /* [preamble] HELLO */
	unsigned got;
	int fds[SW_MAX_FDQ];
	unsigned nfds;
	uint64_t deadline;
	char peer[128];
};

struct sw_listener {
	struct rkv_listener base;
	struct sw_tp *tp;
	int fd;
	uint64_t handle;
	bool paused;               /* out of epoll after an accept error */
	uint64_t resume_ns;        /* until then (thr_lock) */
	pthread_mutex_t lock;      /* guards the ready queue */
	pthread_cond_t cond;
	struct sw_pend *ready_head, *ready_tail;
	unsigned nready;
	int ready_fd;              /* eventfd: readable while nready > 0
				    * (set and drained under lock) */
};

/* sw_tp.c: context, handles, transport thread */
int sw_tp_init(struct sw_tp *tp, const struct sw_prov *prov,
	       struct sw_mrent *mrtab);
void sw_tp_fini(struct sw_tp *tp);
int sw_mr_reg(struct rkv_tp *tp, void *addr, size_t len, unsigned access,
	      struct rkv_mr **out);
int sw_mr_dereg(struct rkv_mr *mr);
int sw_mr_reg_gpu(struct rkv_tp *tp, void *addr, size_t len, unsigned access,
		  int gpu, struct rkv_mr **out);
/* A handle token for ptr of type in tp->h (thr_lock held): 0 or -ENOMEM. */
int sw_h_alloc(struct sw_tp *tp, enum sw_htype type, void *ptr,
	       uint64_t *tok);
/* The live handle of tok, or NULL (freed since; thr_lock held). */
struct sw_handle *sw_h_get(struct sw_tp *tp, uint64_t tok);
/* Free the handle of tok; an event that still carries it is ignored. */
void sw_h_free(struct sw_tp *tp, uint64_t tok);
/* Add fd to the thread's epoll set with token tok: 0 or -errno. */
int sw_epoll_add(struct sw_tp *tp, int fd, unsigned events, uint64_t tok);
/* Start the transport thread if it is not running; thr_lock held. */
int sw_thr_start_locked(struct sw_tp *tp);
/*
 * A passive endpoint got something to time out (sw_ep_timed_locked): wake
 * the transport thread if it is in its long sleep, where it would notice
 * the timeout up to SW_IDLE_MS late.  Costs one load when it is not (the
 * busy case); call after publishing what made the endpoint timed.  Any
 * thread.
 */
void sw_thr_kick(struct sw_tp *tp);

/* sw_hs.c: the handshake set and flood control (thr_lock held) */
/* The caps' defaults, from the options and RLIMIT_NOFILE. */
void sw_hs_init(struct sw_tp *tp);
/* Accept what waits on listener l, into the handshake set. */
void sw_hs_on_listener(struct sw_tp *tp, struct sw_listener *l);
/* Read p's HELLO: true while its handshake goes on. */
bool sw_hs_on_pend(struct sw_tp *tp, struct sw_pend *p);
/* Drop the handshakes past their deadline. */
void sw_hs_tick(struct sw_tp *tp, uint64_t now);
/* Take p out of the handshake set and free it. */
void sw_pend_drop(struct sw_tp *tp, struct sw_pend *p);
/* Free p, out of the set already (its fd and fds closed). */
void sw_pend_free(struct sw_pend *p);

/* sw_gpu.c: the staging of GPU regions */
/* The staging of device gpu, made on first use; NULL when CUDA fails. */
struct sw_gpu *sw_gpu_get(struct sw_tp *tp, int gpu);
void sw_gpu_fini(struct sw_tp *tp);

/* sw_conn.c: listeners, accept, connect */
/* Take over a bound, listening, non-blocking socket. */
int sw_listener_create(struct sw_tp *tp, int fd, const char *addr,
		       struct rkv_listener **out);
void sw_listener_destroy(struct rkv_listener *l);
int sw_listener_fd(const struct rkv_listener *l);
void sw_listener_ready(struct sw_listener *l, bool ready);
int sw_accept(struct rkv_listener *l, struct rkv_cq *cq, int timeout_ms,
	      struct rkv_ep **out);
/* Handshake on a connected socket (takes fd) and make an active endpoint. */
int sw_connect_finish(struct sw_tp *tp, struct sw_cq *cq, int fd,
		      const char *peer, int timeout_ms, struct rkv_ep **out);
void sw_ep_destroy(struct rkv_ep *ep);

/* sw_ep.c: lifetime, completions, the error state, progress */
/* rkv_ep_rkey of a windowed region on tcp: its rkey XOR ep's wsalt. */
int sw_ep_rkey(struct rkv_ep *ep, struct rkv_mr *mr, uint32_t *rkey);
int sw_ep_alloc(struct sw_tp *tp, struct sw_cq *cq, int fd, bool passive,
		const char *peer, struct sw_ep **out);
void sw_ep_free(struct sw_ep *ep);
/* The send-queue entry of sequence number seq. */
static inline struct sw_sqe *sw_sq_at(struct sw_ep *ep, uint64_t seq)
{
	return &ep->sq[seq % ep->sq_cap];
}
/* Whether ep has something the ticks time out: a WR outstanding, or
 * output to drain before it closes (ep->lock held). */
static inline bool sw_ep_timed_locked(const struct sw_ep *ep)
{
	return !ep->closed && (ep->draining || ep->sq_head != ep->sq_tail);
}
/* Queue a completion of ep on its CQ. */
void sw_ep_push_wc(struct sw_ep *ep, uint64_t wr_id, int status,
		   enum rkv_wr_opcode op, uint32_t byte_len);
/* Complete the done WRs at the send queue's head, in posting order. */
void sw_ep_sq_emit(struct sw_ep *ep);
/* Error state (flush everything outstanding), then what sq_emit emits. */
void sw_ep_fail(struct sw_ep *ep);
void sw_ep_enter_error_locked(struct sw_ep *ep);
/* The link is gone: fail the oldest WR with status; by_peer (EOF, reset)
 * logs at debug when nothing was outstanding. */
void sw_ep_link_lost(struct sw_ep *ep, int status, const char *why,
		     bool by_peer);
/* Garbage from the peer: warn and drop the link. */
void sw_ep_proto_error(struct sw_ep *ep, const char *why);
/* Finish a locked operation: link loss, epoll interest. */
void sw_ep_settle_locked(struct sw_ep *ep);
/* Poll-time progress of an active endpoint. */
void sw_ep_progress(struct sw_ep *ep, unsigned npoll);
/*
 * What rkv_cq_wait waits on for an active endpoint: false when progress
 * has work now (buffered input, a failure to report, a drain); else true
 * with *fd (-1: nothing to wait for) and *events (POLLIN, POLLOUT).
 */
bool sw_ep_wait_on(struct sw_ep *ep, int *fd, short *events);
/* Set ep's SO_RCVLOWAT to want bytes (0: the default), when it differs
 * from what was set (tcp; ep->lock held). */
void sw_ep_rcvlowat(struct sw_ep *ep, int want);
/* Transport-thread work on a passive endpoint. */
void sw_ep_event(struct sw_ep *ep, unsigned events);
void sw_ep_tick(struct sw_ep *ep, uint64_t now);

/* sw_tx.c: posting and output; ep->lock held unless said otherwise */
int sw_ep_post(struct rkv_ep *ep, struct rkv_wr *wr, struct rkv_wr **bad);
int sw_ep_post_recv(struct rkv_ep *ep, struct rkv_recv_wr *wr,
		    struct rkv_recv_wr **bad);
/* Post one WR, ep->lock held; done_status >= 0 completes it at once with
 * that status (shm's one-sided ops).  Returns 0 or -ENOMEM. */
int sw_ep_post_one_locked(struct sw_ep *ep, const struct rkv_wr *wr,
			  int done_status, uint64_t now);
/* Stage a frame (header and payload) for the next sw_ep_tx_commit. */
void sw_ep_tx_frame(struct sw_ep *ep, const struct sw_hdr *h,
		    const void *payload, size_t len);
/* Stage n more payload bytes of the frame being built. */
void sw_ep_tx_payload(struct sw_ep *ep, const void *p, size_t n);
/* Stage a RESP frame for request seq. */
void sw_ep_respond(struct sw_ep *ep, uint64_t seq, int status, uint64_t arg0,
		   const void *payload, uint32_t len);
/* Frees a txbuf of capacity cap (sw_tx.c; NULL: nothing). */
void sw_txbuf_free(uint8_t *p, size_t cap);
/* Send what is staged; what the socket refuses is copied to txbuf. */
void sw_ep_tx_commit(struct sw_ep *ep);
/* Send what txbuf holds, as far as the socket takes it. */
void sw_ep_tx_flush(struct sw_ep *ep);

/* sw_rx.c: the receive side; ep->lock held */
/* Receive and process what is on the socket. */
void sw_ep_rx_locked(struct sw_ep *ep);
/* Deliver complete unexpected SENDs into posted RECVs. */
void sw_ep_match_unexp(struct sw_ep *ep);

/* sw_wire.c: socket I/O and fds (the frame format is above) */
ssize_t sw_sock_recv(int fd, void *buf, size_t len, int *fds, unsigned *nfds,
		     unsigned maxfds);
/* sendmsg of ep's iovecs with its queued fds; after_tx on success. */
ssize_t sw_sock_send(struct sw_ep *ep, struct iovec *iov, unsigned n);
void sw_set_nonblock(int fd);
/* Queue an fd to ride on the next bytes sent (SCM_RIGHTS). */
int sw_ep_tx_fd(struct sw_ep *ep, int fd, bool close_after);
/* Pop the oldest received fd (-1 if none). */
int sw_ep_fd_pop(struct sw_ep *ep);
/* Make the writes and reads of data carried by a message visible to
 * ThreadSanitizer as ordered when both ends live in one process. */
void sw_hb_release(void);
/*
 * Around copying READ payloads out of registered memory: ThreadSanitizer
 * is told to ignore those reads.  The target's own threads may change
 * that memory meanwhile (rkv-server's lease word: an 8-byte store by its
 * registration thread), as its CPU may under a NIC's DMA: a READ is not
 * ordered with them and its readers check what they get.  No-ops outside
 * TSan builds.
 */
void sw_tsan_region_reads_begin(void);
void sw_tsan_region_reads_end(void);
void sw_hb_acquire(void);

/* sw_gpu.c: the datapath of GPU memory (ep->lock held) */
/* Target: answer a READ of len bytes of GPU gpu's memory at src. */
int sw_gpu_read(struct sw_ep *ep, uint64_t seq, const uint8_t *src,
		uint64_t len, int gpu);
/* Initiator: send a WRITE or SEND whose payload is in local GPU memory. */
int sw_gpu_tx(struct sw_ep *ep, const struct sw_hdr *h, const void *src,
	      int gpu);
/* Copy n received bytes at p into device memory at dst (queued). */
int sw_gpu_write_piece(struct sw_ep *ep, struct sw_gpu *g, void *dst,
		       const uint8_t *p, size_t n);
/* Wait until every queued copy of g has landed; 0 or -errno. */
int sw_gpu_write_drain(struct sw_ep *ep, struct sw_gpu *g);

#ifdef __cplusplus
}
#endif
#endif
