/* SPDX-License-Identifier: MIT */
/*
 * transport.h - rkv's verbs-shaped transport interface.
 *
 * The KV code talks to this interface only; it mirrors the part of verbs that
 * rkv needs: register a region (address, length, access -> lkey/rkey), open
 * an endpoint to a peer, post READ / WRITE / CAS / FETCH_ADD / SEND / RECV
 * work requests (chained, signaled or not) and poll a completion queue.
 *
 * Providers:
 *   verbs  rdma-core RC queue pairs, connected through librdmacm.
 *   tcp    a software RNIC: the target's transport thread executes one-sided
 *          requests against registered regions, checking rkey, bounds and
 *          access as a NIC does.
 *   shm    same host: remote regions are memfd mappings that the initiator
 *          maps; one-sided operations are the initiator's own loads, stores
 *          and C11 atomics, checked against rkey, bounds and access first.
 *   auto   verbs when an RDMA device has an active port, else tcp.
 *
 * Semantics every provider keeps (the conformance suite in tests/conformance
 * proves them):
 *   - Operations posted on one endpoint execute in order at the target.
 *   - CAS and FETCH_ADD act on one 8-byte, 8-byte-aligned word in the
 *     target's native byte order and are atomic with respect to every other
 *     atomic on that word, from any endpoint.  The original value is written
 *     to the 8-byte local buffer in native byte order.
 *   - A WR whose rkey is unknown, whose range is not inside the region, or
 *     whose operation the region's access flags do not allow completes with
 *     RKV_WC_REM_ACCESS_ERR and changes nothing.  A bad lkey or local range
 *     completes with RKV_WC_LOC_PROT_ERR.
 *   - After an error completion the endpoint is in error state: every WR
 *     still outstanding and every WR posted later completes with
 *     RKV_WC_WR_FLUSH_ERR (RECVs too).
 *   - A peer that dies or stops answering gives RKV_WC_RETRY_EXC_ERR on the
 *     outstanding WRs within the endpoint's timeout (never a hang).
 *   - SEND completes at the sender after the receiver placed it in a posted
 *     RECV; a RECV that is too small completes with RKV_WC_LOC_LEN_ERR at the
 *     receiver and the SEND with RKV_WC_REM_INV_REQ_ERR.  A SEND that finds
 *     no posted RECV waits for one (receiver-not-ready) up to the timeout.
 *
 * Every function returns 0 (or a count) on success and -errno on failure.
 * Nothing here exits or prints to stdout.  Diagnostics of a context and of
 * everything made from it go to its log sink (rkv_tp_set_log) when one is
 * set, else through the global rkv_log (common/log.h, stderr by default).
 *
 * Thread safety: a context (struct rkv_tp) may be shared by threads for
 * registration, listen and connect.  An endpoint and a completion queue are
 * used by one thread at a time (the caller serializes), as is usual for
 * polled RDMA code.  Providers may run internal threads; they never call
 * code above the transport.
 */
#ifndef RKV_COMMON_TRANSPORT_TRANSPORT_H
#define RKV_COMMON_TRANSPORT_TRANSPORT_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "../log.h"

#ifdef __cplusplus
extern "C" {
#endif

enum rkv_tp_provider {
	RKV_TP_AUTO = 0,  /* verbs if a device has an active port, else tcp */
	RKV_TP_VERBS = 1, /* rdma-core RC QPs through librdmacm */
	RKV_TP_TCP = 2,   /* software RNIC over TCP sockets */
	RKV_TP_SHM = 3,   /* same host, memfd mappings */
};

/* "auto", "verbs", "tcp", "shm"; "?" for anything else. */
const char *rkv_tp_provider_str(enum rkv_tp_provider p);
/* Parse a provider name.  Returns 0 or -EINVAL. */
int rkv_tp_provider_parse(const char *name, enum rkv_tp_provider *out);

/* Region access flags, as IBV_ACCESS_*. */
enum rkv_access {
	RKV_ACCESS_LOCAL_WRITE = 1u << 0,
	RKV_ACCESS_REMOTE_WRITE = 1u << 1,
	RKV_ACCESS_REMOTE_READ = 1u << 2,
	RKV_ACCESS_REMOTE_ATOMIC = 1u << 3,
	/*
	 * Peers reach the region only through the rkeys rkv_ep_rkey gives
	 * for one endpoint, each of which works on that endpoint alone:
	 *   verbs  a type-2B memory window over the region bound to the
	 *          endpoint's QP (the MR itself is registered without remote
	 *          access, so its own rkey reaches nothing); on a device
	 *          without such windows, or with rkv_tp_opts.rkey_windows
	 *          RKV_WINDOWS_OFF, the flag is ignored (rkv_tp_windows()).
	 *   tcp    the MR's rkey with its generation bits XORed with a
	 *          random salt of the endpoint; the target undoes it with the
	 *          salt of the connection a request came on.
	 *   shm    ignored (the peer maps the memory: rkv_ep_grant decides).
	 */
	RKV_ACCESS_WINDOWED = 1u << 4,
};
#define RKV_ACCESS_ALL                                                         \
	(RKV_ACCESS_LOCAL_WRITE | RKV_ACCESS_REMOTE_WRITE |                    \
	 RKV_ACCESS_REMOTE_READ | RKV_ACCESS_REMOTE_ATOMIC)

/* Completion statuses; each mirrors the ibv_wc_status of the same name. */
enum rkv_wc_status {
	RKV_WC_SUCCESS = 0,
	RKV_WC_LOC_LEN_ERR,      /* receive buffer too small */
	RKV_WC_LOC_PROT_ERR,     /* bad lkey or local range */
	RKV_WC_WR_FLUSH_ERR,     /* endpoint was in error state */
	RKV_WC_REM_INV_REQ_ERR,  /* malformed request at the target */
	RKV_WC_REM_ACCESS_ERR,   /* rkey, bounds or access refused */
	RKV_WC_REM_OP_ERR,       /* target could not execute it */
	RKV_WC_RETRY_EXC_ERR,    /* peer dead or silent past the timeout */
	RKV_WC_RNR_RETRY_EXC_ERR, /* no RECV posted at the peer in time */
	RKV_WC_GENERAL_ERR,      /* anything else */
};
const char *rkv_wc_status_str(enum rkv_wc_status s);

enum rkv_wr_opcode {
	RKV_WR_READ = 0,
	RKV_WR_WRITE,
	RKV_WR_CAS,       /* if (*remote == compare) *remote = swap; */
	RKV_WR_FETCH_ADD, /* *remote += compare_add; */
	RKV_WR_SEND,
	RKV_WR_RECV,      /* only in completions */
};
const char *rkv_wr_opcode_str(enum rkv_wr_opcode op);

enum rkv_wr_flags {
	RKV_WR_SIGNALED = 1u << 0, /* generate a completion on success */
	/* READ: also feed the bytes delivered from digest_off on to *digest
	 * (hash.h's streaming xxh3), in post order, as the provider copies
	 * them: one pass over memory instead of a copy and then a hash.
	 * WRITE: the same with the bytes written from digest_off on: shm
	 * hashes them in the target as it copies them there (the digest is
	 * of what the target holds), tcp as it posts them (of the local
	 * buffer, which must not change until the completion anyway).
	 * Honoured where rkv_tp_digests() says so (shm, tcp); elsewhere
	 * the flag is ignored and the caller hashes the bytes itself.  The
	 * state may be fed by the transport's thread: look at it only after
	 * the WR's completion (or a later one) was polled. */
	RKV_WR_DIGEST = 1u << 1,
};

struct rkv_hash_state;

/*
 * A work request.  Chain with next; a chain is posted in one call (one
 * doorbell on verbs).  local/length/lkey name the local buffer: the READ
 * destination, the WRITE or SEND source, the 8-byte result of CAS and
 * FETCH_ADD.  length may be 0 for READ, WRITE and SEND.  Unsignaled WRs that
 * succeed produce no completion; a failing WR always completes.  As on
 * verbs, an endpoint's send queue holds at most max_send_wr outstanding WRs,
 * and the slots of unsignaled WRs are freed only when a later signaled WR on
 * the same endpoint completes: signal at least every max_send_wr/2 WRs.
 */
struct rkv_wr {
	struct rkv_wr *next;    /* next WR in the chain, or NULL */
	uint64_t wr_id;         /* returned in the completion */
	enum rkv_wr_opcode opcode;
	unsigned flags;         /* enum rkv_wr_flags */
	void *local;            /* local buffer */
	uint32_t length;        /* bytes; 8 for CAS and FETCH_ADD */
	uint32_t lkey;          /* lkey of the MR holding local */
	uint64_t remote_addr;   /* target virtual address */
	uint32_t rkey;          /* target MR's rkey */
	uint64_t compare_add;   /* CAS: compare value; FETCH_ADD: addend */
	uint64_t swap;          /* CAS: new value */
	struct rkv_hash_state *digest; /* RKV_WR_DIGEST: the state fed */
	uint32_t digest_off;    /* RKV_WR_DIGEST: bytes skipped first */
};

struct rkv_recv_wr {
	struct rkv_recv_wr *next;
	uint64_t wr_id;
	void *local;
	uint32_t length;
	uint32_t lkey;
};

struct rkv_ep;

struct rkv_wc {
	uint64_t wr_id;
	enum rkv_wc_status status;
	enum rkv_wr_opcode opcode; /* valid on success; RKV_WR_RECV for RECVs */
	uint32_t byte_len;         /* RECV: bytes received */
	struct rkv_ep *ep;         /* the endpoint the WR was posted on */
};

struct rkv_tp;
struct rkv_mr;
struct rkv_cq;
struct rkv_listener;

#define RKV_TP_SHM_UIDS 8 /* most extra uids a shm listener admits */

struct rkv_tp_opts {
	size_t opts_size;       /* sizeof(struct rkv_tp_opts) */
	enum rkv_tp_provider provider; /* RKV_TP_AUTO by default */
	const char *device;     /* verbs: device name; NULL chooses */
	int port;               /* verbs: port number; 0 chooses */
	int gid_index;          /* verbs: GID index; -1 chooses RoCEv2 */
	unsigned timeout_ms;    /* dead-peer detection; default 2000 */
	unsigned max_send_wr;   /* per endpoint; default 256 */
	unsigned max_recv_wr;   /* per endpoint; default 256 */
	unsigned max_inline;    /* verbs: inline threshold asked; default 64 */
	/* appended.  tcp/shm: SENDs an endpoint keeps while no RECV is posted
	 * (a NIC would make the sender retry instead); one more, or more
	 * bytes, and that SEND completes with RNR_RETRY_EXC_ERR at the
	 * sender.  Defaults 4096 and 64 MiB; verbs ignores both. */
	unsigned max_unexpected;
	size_t max_unexpected_bytes;
	/* appended.  tcp/shm: connections accepted whose HELLO has not
	 * arrived, in all and (tcp) from one peer address.  Past either cap
	 * the oldest such connection is closed (one whose HELLO is already
	 * buffered is taken instead); accept meeting EMFILE lowers the total
	 * for 10 s.  0 picks the default: min(1024, RLIMIT_NOFILE / 2) in
	 * all, 64 per peer.  verbs ignores both. */
	unsigned max_handshakes;
	unsigned max_handshakes_per_peer;
	/* appended.  shm: what an endpoint made by rkv_accept lets its peer
	 * reach until rkv_ep_grant says otherwise (enum rkv_grant).  Default
	 * RKV_GRANT_WRITE (every registered region, as before); rkv-server
	 * sets RKV_GRANT_NONE and grants once the peer has authenticated.
	 * Other providers ignore it. */
	unsigned accept_grant;
	/* appended.  shm listeners (a socket file, see rkv_tp_addr): its
	 * mode (default 0600) and, when shm_gid >= 0 (default -1), its group.
	 * rkv_accept admits a peer (SO_PEERCRED, as of its connect) only when
	 * its uid is 0, the listener's euid or one of shm_uids[0..shm_nuids),
	 * or its gid or a supplementary group is shm_gid; others are closed
	 * before anything is sent to them. */
	unsigned shm_mode;
	int shm_gid;
	unsigned shm_nuids;
	uint32_t shm_uids[RKV_TP_SHM_UIDS];
	/* appended.  The context's log sink from the start, so that the
	 * messages of rkv_tp_create itself (device choice on verbs) reach
	 * it too: as rkv_tp_set_log(tp, log_fn, log_arg, log_min).  log_fn
	 * NULL (default): the global rkv_log.  log_min default
	 * RKV_LOG_WARN; above RKV_LOG_OFF is -EINVAL. */
	rkv_log_fn log_fn;
	void *log_arg;
	enum rkv_log_level log_min;
	/* appended.  verbs, set on every QP at RTR (other providers ignore
	 * them): mtu, the path MTU in bytes (256, 512, 1024, 2048 or 4096;
	 * 0, the default: the port's active MTU; more than it: -EINVAL at
	 * create); traffic_class, the IP header's DSCP and ECN bits of
	 * RoCE v2 packets, 0-255 (-1, the default: the device's); and
	 * service_level, the InfiniBand SL, 0-15 (-1: rdma_cm's). */
	unsigned mtu;
	int traffic_class;
	int service_level;
	/* appended.  verbs: READs and atomics a QP keeps in flight and takes
	 * in (max_rd_atomic / max_dest_rd_atomic, agreed with the peer at
	 * connect: the lower of both sides'); 0, the default: min(the
	 * device's limit, 16); more than the device allows: its limit. */
	unsigned max_rd_atomic;
	/* appended.  Per-endpoint rkeys of RKV_ACCESS_WINDOWED regions
	 * (verbs: type-2B memory windows): RKV_WINDOWS_AUTO (default) where
	 * the device has them, RKV_WINDOWS_ON or rkv_tp_create fails with
	 * -EOPNOTSUPP, RKV_WINDOWS_OFF never (the MR's rkey for every
	 * peer).  tcp: AUTO and ON salt the rkeys, OFF does not; shm
	 * ignores it. */
	int rkey_windows;
};
enum { RKV_WINDOWS_AUTO = 0, RKV_WINDOWS_ON = 1, RKV_WINDOWS_OFF = -1 };

/* Fill opts with defaults. */
void rkv_tp_opts_init(struct rkv_tp_opts *opts);

/*
 * What this host's RDMA fabric looks like to rkv (`rkv-server
 * --check-fabric`): one call of fn per finding, each a line with what to
 * do (no device, a port not ACTIVE, no remote atomics, RoCE v1 GIDs, an
 * RDMA MTU below what the netdev carries, --mtu above the port's).
 * opts' device, port, gid_index and mtu narrow it as rkv_tp_create would.
 * The first RoCE port's netdev goes to netdev (may be NULL).  Changes
 * nothing.  Returns 0.
 */
enum rkv_check_level {
	RKV_CHECK_OK,
	RKV_CHECK_INFO,
	RKV_CHECK_WARN,
	RKV_CHECK_ERROR,
};
typedef void (*rkv_tp_check_fn)(enum rkv_check_level level, const char *line,
				void *arg);
int rkv_tp_check_fabric(const struct rkv_tp_opts *opts, rkv_tp_check_fn fn,
			void *arg, char *netdev, size_t ndlen);

/*
 * Open a transport context of opts->provider (RKV_TP_AUTO resolves now:
 * rkv_tp_provider() tells which was picked).  Forcing a provider that is not
 * available is an error (-ENODEV verbs without a device), never a fallback.
 * The caller destroys it with rkv_tp_destroy() after every endpoint, CQ,
 * listener and MR made from it.
 * Returns 0, -EINVAL (bad opts), -ENODEV, -ENOMEM.
 */
int rkv_tp_create(const struct rkv_tp_opts *opts, struct rkv_tp **out);
void rkv_tp_destroy(struct rkv_tp *tp);
enum rkv_tp_provider rkv_tp_provider(const struct rkv_tp *tp);
/* Whether tp's READs and WRITEs honour RKV_WR_DIGEST: shm (its READ and
 * WRITE are the initiator's own copy, done when the WR is posted) and tcp
 * (a READ's payload is hashed as it comes off the socket, a WRITE's as it
 * is posted); not verbs (a NIC moves it).  Registering memory there is a
 * table entry, not pinning. */
int rkv_tp_digests(const struct rkv_tp *tp);
/*
 * Send the messages of tp and of everything made from it - endpoints,
 * listeners, CQs, MRs, connection set-up, handshakes, flood warnings - to
 * fn instead of the global rkv_log: fn(level, comp, func, line, msg, arg)
 * for each message at level min or above (formatted only when it passes;
 * RKV_LOG_OFF: none), whatever rkv_log_set_level says.  fn NULL sends them
 * to rkv_log again, as before.  A library that must never print (librkv)
 * sets a sink, perhaps one that discards: the transport then writes
 * nothing to stderr or stdout.
 * fn is called on whichever thread logs - the caller's, or the context's
 * transport thread - possibly concurrently and with transport locks held:
 * it must not call into the transport.  The sink is read without a lock:
 * set it before the context is shared, right after rkv_tp_create and
 * before its first listen or connect (or give it to rkv_tp_create as
 * rkv_tp_opts.log_fn, which also covers rkv_tp_create's own messages).
 * tp NULL: no-op.
 */
void rkv_tp_set_log(struct rkv_tp *tp, rkv_log_fn fn, void *arg,
		    enum rkv_log_level min);
/* A one-line description of the device in use (verbs: device, port, GID). */
const char *rkv_tp_describe(const struct rkv_tp *tp);
/* Whether the context can execute CAS and FETCH_ADD (verbs: atomic_cap). */
int rkv_tp_has_atomics(const struct rkv_tp *tp);

/*
 * Memory that can be registered for remote access on every provider
 * (page-aligned, zeroed; on shm a memfd mapping that peers can map).  On the
 * shm provider, remote-accessible MRs must lie inside such memory.
 */
int rkv_tp_mem_alloc(struct rkv_tp *tp, size_t len, void **out);
void rkv_tp_mem_free(struct rkv_tp *tp, void *addr, size_t len);

/*
 * Give memory from rkv_tp_mem_alloc (addr and len as allocated) new
 * backing at the same address, so that what peers mapped of it before is
 * no longer this memory.  Only providers whose peers map the memory
 * themselves need it: shm (a fresh memfd mapped over the old one with
 * MAP_FIXED; a peer's existing mapping keeps the old memfd).  Every MR
 * of the memory must be deregistered first (new ones go to the new
 * backing).  move(dst, src, len, arg) runs once, after the new backing
 * exists: it fills dst (the new backing) from src (the old) and leaves in
 * src what a peer's access that passed its rkey check before the
 * deregistration, but lands after, must find (a word by word exchange
 * lets each such access land either before its word moved, and move with
 * it, or after, on what move left).  Returns 0, -EINVAL (not such
 * memory), -ENOMEM, -EOPNOTSUPP (tcp, verbs: the target executes every
 * access, so deregistration alone stops them), or -errno.  On an error
 * before move ran the memory is unchanged; after it (the kernel failed
 * the final mapping) the memory is what move left in src.
 */
typedef void (*rkv_tp_move_fn)(void *dst, void *src, size_t len, void *arg);
int rkv_tp_mem_renew(struct rkv_tp *tp, void *addr, size_t len,
		     rkv_tp_move_fn move, void *arg);

/*
 * Test seam (shm): fn runs inside each one-sided operation after its rkey
 * check and before its access, on the initiator's thread, so a test can
 * deregister or renew memory in between.  NULL removes it.  Not for
 * production use; not thread-safe against posting.
 */
void rkv_shm_set_access_hook(void (*fn)(void *arg), void *arg);

/* A registered region.  Fields are read-only for the caller. */
struct rkv_mr {
	void *addr;
	size_t length;
	uint32_t lkey;
	uint32_t rkey;
	unsigned access; /* enum rkv_access */
	struct rkv_tp *tp; /* owning context */
	int gpu;         /* -1: host memory; else the CUDA device holding it */
};

/*
 * Register [addr, addr+len) with the access flags.  Returns 0, -EINVAL
 * (len 0, bad flags), -EFAULT (shm: remote access to memory that did not
 * come from rkv_tp_mem_alloc), -ENOMEM, or the provider's -errno.
 * Deregistration revokes the rkey at once for new operations.
 */
int rkv_mr_reg(struct rkv_tp *tp, void *addr, size_t len, unsigned access,
	       struct rkv_mr **out);
int rkv_mr_dereg(struct rkv_mr *mr);

/*
 * GPU memory regions (docs: DESIGN.md section 5).
 *
 * rkv_tp_mem_alloc_gpu: len bytes (rounded up to 2 MiB) of device memory
 * on CUDA device gpu (cudaMalloc), zeroed, that every provider can expose:
 * on shm it is shared with same-host peers through a CUDA IPC handle.
 * Returns 0, -EINVAL, -EOPNOTSUPP (this build has no CUDA), -ENODEV (no
 * driver, driver too old, no device), -ENXIO (no device gpu), -ENOMEM.
 * Free it with rkv_tp_mem_free_gpu after its MRs are deregistered.
 *
 * rkv_mr_reg_gpu: register device memory [addr, addr+len) of device gpu.
 *   verbs  GPUDirect RDMA: a dma-buf of the range
 *          (cuMemGetHandleForAddressRange) given to ibv_reg_dmabuf_mr,
 *          else plain ibv_reg_mr (peer-memory systems: nvidia-peermem).
 *          If neither works: -EOPNOTSUPP, and rkv_tp_gpu_why() says
 *          which step failed and what the machine lacks.  Never a copy
 *          through host memory.
 *   tcp    the target's transport thread moves the bytes between socket
 *          and device memory with CUDA copies through pinned staging
 *          buffers; CAS and FETCH_ADD run as a device atomic.
 *   shm    addr must lie in memory from rkv_tp_mem_alloc_gpu (else
 *          -EFAULT); initiators open its CUDA IPC handle and copy
 *          directly between their buffer and the device memory.
 * rkeys, bounds and access flags are enforced as for host MRs.  Phase 1:
 * on tcp and shm a GPU MR serves remote access only; using its lkey as the
 * local buffer of a WR completes with RKV_WC_LOC_PROT_ERR (on verbs the
 * NIC handles either).  Returns as rkv_mr_reg, plus -EOPNOTSUPP.
 */
int rkv_tp_mem_alloc_gpu(struct rkv_tp *tp, int gpu, size_t len, void **out);
void rkv_tp_mem_free_gpu(struct rkv_tp *tp, int gpu, void *addr, size_t len);
int rkv_mr_reg_gpu(struct rkv_tp *tp, void *addr, size_t len,
		   unsigned access, int gpu, struct rkv_mr **out);
/*
 * One line on why the last failed GPU allocation or registration of tp
 * failed ("" when none failed).  Valid until the next such call; callers
 * that register concurrently see either reason.
 */
const char *rkv_tp_gpu_why(const struct rkv_tp *tp);

/* A completion queue for endpoints of one context. */
int rkv_cq_create(struct rkv_tp *tp, unsigned depth, struct rkv_cq **out);
void rkv_cq_destroy(struct rkv_cq *cq);
/*
 * Poll up to max completions into wc.  Returns the count (0 when none) or
 * -errno.  On the software providers this also drives the progress of the
 * CQ's active endpoints (no thread per connection).
 */
int rkv_cq_poll(struct rkv_cq *cq, struct rkv_wc *wc, int max);
/*
 * Block until rkv_cq_poll may find a completion or have progress to make,
 * or timeout_us passes; the thread that polls cq calls it instead of
 * spinning.  Returns 0 (poll again: it may return early), or -EOPNOTSUPP
 * where a provider cannot block, or -errno.  The software providers wait
 * in ppoll on the sockets of the CQ's active endpoints and on an eventfd
 * that completions queued by the transport thread (accepted endpoints)
 * ring while someone waits; verbs arms the CQ's completion channel.
 */
int rkv_cq_wait(struct rkv_cq *cq, unsigned timeout_us);
/*
 * The same, also waking when one of the caller's fds[0 .. nfds) is ready
 * for its events (revents set on return; 0 where nothing came or the
 * wait ended early).  A server's loop waits so on its CQ, its listener
 * (rkv_listener_fd) and its own sockets.
 */
#define RKV_CQ_WAIT_FDS 32
int rkv_cq_wait_fds(struct rkv_cq *cq, struct pollfd *fds, unsigned nfds,
		    unsigned timeout_us);

/*
 * Addresses: "tcp://HOST:PORT", "verbs://HOST:PORT", "shm:///NAME" (a
 * name [A-Za-z0-9._-]{1,64}: the unix socket file $RKV_SHM_DIR/NAME, by
 * default /run/rkv/NAME; listen creates the directory, mode 0755, when it
 * is missing), "auto://HOST:PORT".  PORT 0 on listen picks a free port
 * (rkv_listener_addr() tells it).
 */
struct rkv_tp_addr {
	enum rkv_tp_provider provider;
	char host[256];
	uint16_t port;
	char name[65]; /* shm */
};
/* Returns 0 or -EINVAL (unparsable address or unknown scheme). */
int rkv_tp_addr_parse(const char *s, struct rkv_tp_addr *out);

/*
 * Listen on addr, whose scheme must match the context's provider (else
 * -EPROTONOSUPPORT).  Returns 0, -EINVAL, -EADDRINUSE, or -errno.
 */
int rkv_listen(struct rkv_tp *tp, const char *addr, struct rkv_listener **out);
/* The bound address, with the real port: "tcp://127.0.0.1:40123". */
const char *rkv_listener_addr(const struct rkv_listener *l);
void rkv_listener_destroy(struct rkv_listener *l);
/* An fd that polls readable while rkv_accept may have a connection to
 * return (sw: an eventfd the transport thread rings when a handshake is
 * done; verbs: the listener's cm channel), or -1 where there is none. */
int rkv_listener_fd(const struct rkv_listener *l);

/*
 * Wait up to timeout_ms (-1 forever, 0 just looks) for a connection request
 * and return it as an endpoint whose completions go to cq; the handshake of
 * a request that arrived is bounded by the context's timeout_ms.  Returns
 * 0, -ETIMEDOUT (no request), -errno.
 */
int rkv_accept(struct rkv_listener *l, struct rkv_cq *cq, int timeout_ms,
	       struct rkv_ep **out);
/*
 * Connect to addr; completions go to cq.  Returns 0, -EINVAL (address),
 * -EPROTONOSUPPORT (scheme of another provider), -ECONNREFUSED,
 * -ETIMEDOUT, -errno.
 */
int rkv_connect(struct rkv_tp *tp, const char *addr, struct rkv_cq *cq,
		int timeout_ms, struct rkv_ep **out);
/* Disconnect and free.  Outstanding WRs are dropped without completions. */
void rkv_ep_destroy(struct rkv_ep *ep);

/* What the peer of an endpoint may reach of this side's registered memory. */
enum rkv_grant {
	RKV_GRANT_NONE = 0,  /* nothing: no MR table, no descriptor */
	RKV_GRANT_READ = 1,  /* read-only descriptors and mappings only */
	RKV_GRANT_WRITE = 2, /* what each region's access flags allow */
};
const char *rkv_grant_str(enum rkv_grant g);

/*
 * Set what ep's peer may reach from now on.  The transport knows nothing of
 * authentication: the layer above calls this once it trusts the peer, and
 * before it tells the peer so.
 *   shm    enforced: an endpoint made by rkv_accept starts at
 *          rkv_tp_opts.accept_grant, one made by rkv_connect at WRITE.
 *          Under NONE the peer's requests for the MR table or a region's
 *          descriptor are refused, so its one-sided WRs complete with
 *          RKV_WC_REM_ACCESS_ERR; under READ it gets only read-only
 *          descriptors (no writable mapping can be made from them, not even
 *          of a region registered with remote write) and no GPU region (a
 *          CUDA IPC mapping is always writable).  Descriptors already handed
 *          out are not taken back by lowering the grant.
 *   tcp, verbs  no-op (0): the target checks rkey, bounds and access on
 *          every request; there an rkey is the capability (one of this
 *          endpoint's only, for RKV_ACCESS_WINDOWED regions).
 * Any thread.  Returns 0 or -EINVAL.
 */
int rkv_ep_grant(struct rkv_ep *ep, enum rkv_grant grant);

/* What the endpoint's QP runs with, read back from the device (verbs:
 * ibv_query_qp): path MTU in bytes, traffic class, service level.
 * Returns 0, -EOPNOTSUPP (a provider without QPs), -EIO. */
struct rkv_ep_path {
	unsigned mtu;
	unsigned traffic_class;
	unsigned service_level;
	unsigned max_rd_atomic;      /* READ/atomics it keeps in flight */
	unsigned max_dest_rd_atomic; /* ... and takes from its peer */
	uint32_t sq_psn;             /* starting PSNs (rdma_cm's, random) */
	uint32_t rq_psn;
};
int rkv_ep_path(struct rkv_ep *ep, struct rkv_ep_path *out);

/*
 * The rkey ep's peer is to use for mr (see RKV_ACCESS_WINDOWED): for a
 * windowed region, one that works on this endpoint only (verbs: a memory
 * window bound to its QP the first time it is asked for, the same rkey
 * after that; it dies with the endpoint or the MR); else mr->rkey.  Call
 * it from the thread that posts on ep: on verbs it posts the bind on ep's
 * send queue, ahead of whatever that thread posts next (the SEND that
 * hands the rkey out), so the window is there before the peer can use
 * it.  Returns 0, -EINVAL (mr of another context), -ENOMEM (send queue
 * full, no window left: the device's max_mw), or the device's -errno.
 */
int rkv_ep_rkey(struct rkv_ep *ep, struct rkv_mr *mr, uint32_t *rkey);
/* Whether the context gives per-endpoint rkeys for windowed regions. */
int rkv_tp_windows(const struct rkv_tp *tp);

enum rkv_ep_state {
	RKV_EP_CONNECTED = 0,
	RKV_EP_ERROR, /* an error completion happened, or the peer is gone */
};
enum rkv_ep_state rkv_ep_state(const struct rkv_ep *ep);
const char *rkv_ep_state_str(enum rkv_ep_state s);
/* Peer address as text, for logs. */
const char *rkv_ep_peer(const struct rkv_ep *ep);

/*
 * Post a chain of WRs (one doorbell).  Returns 0, or -errno with *bad set to
 * the first WR not posted: -EINVAL (bad opcode, CAS/FETCH_ADD not 8 bytes or
 * not 8-byte aligned, length over the limit), -ENOMEM (send queue full),
 * -EOPNOTSUPP (atomics on a device without them).  bad may be NULL.
 */
int rkv_post(struct rkv_ep *ep, struct rkv_wr *wr, struct rkv_wr **bad);
int rkv_post_recv(struct rkv_ep *ep, struct rkv_recv_wr *wr,
		  struct rkv_recv_wr **bad);

/* Largest READ/WRITE/SEND length every provider accepts. */
#define RKV_TP_MAX_MSG (1u << 30)

#ifdef __cplusplus
}
#endif
#endif
