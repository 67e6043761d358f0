/* SPDX-License-Identifier: MIT */
/*
 * fake.h - the deterministic fake provider ("fake:///NAME", the
 * name as for shm), for tests that
 * must choose the order in which one-sided work requests happen (the
 * interleaving explorer, tests/unit/test_explore.c).  In the spirit of
 * rdma-core's dummy ops and SPDK's stubs: one thread, no sockets, nothing
 * happens behind the caller's back.
 *
 *   - listen/connect/accept are in-process (a registry by NAME); connect
 *     returns at once, the passive end waits in the listener's backlog for
 *     rkv_accept.
 *   - MRs: a small table per context; rkeys are unique in the process, and
 *     rkey, bounds and access are checked as a NIC would (REM_ACCESS_ERR,
 *     LOC_PROT_ERR; then the endpoint is in error and flushes).
 *   - SEND is delivered at once into the peer's next posted RECV (or held
 *     until one is posted, as receiver-not-ready); the control plane thus
 *     needs no scheduling.  Deviation: a SEND may overtake one-sided
 *     chains queued earlier on the same endpoint (rkv never posts both in
 *     one doorbell, nor depends on that order outside rkey rotation).
 *   - READ/WRITE/CAS/FETCH_ADD are only QUEUED by rkv_post, one chain per
 *     call; nothing executes until rkv_fake_step() runs the chain (or its
 *     next WRs) at the target memory, in order, and queues the
 *     completions.  rkv_cq_poll returns queued completions; when a CQ is
 *     empty it first calls the idle hook (the test serves the server's
 *     control plane there, so rkv_client_create's synchronous HELLO ends).
 *   - rkv_fake_kill() fails the endpoints of a context as a dead process
 *     would: its queued chains vanish, its peers see a disconnect (their
 *     posted RECVs complete with WR_FLUSH_ERR, later posts fail).
 *
 * Nothing here is thread-safe: one thread drives every context.
 */
#ifndef RKV_COMMON_TRANSPORT_FAKE_H
#define RKV_COMMON_TRANSPORT_FAKE_H

#include <stddef.h>
#include <stdint.h>

#include "transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The provider number of the fake (after RKV_TP_SHM; tests only). */
#define RKV_TP_FAKE ((enum rkv_tp_provider)(RKV_TP_SHM + 1))

/* Contexts created from now on carry tag (NULL by default); chains and
 * messages report it, rkv_fake_kill() selects by it. */
void rkv_fake_set_next_tag(void *tag);

/* Contexts created from now on report no remote atomics (as a fabric
 * without them would: rkv_tp_has_atomics 0) when on. */
void rkv_fake_set_no_atomics(int on);

/* A queued one-sided chain. */
struct rkv_fake_chain {
	uint64_t id;            /* unique, increasing in posting order */
	void *tag;              /* the initiator's context tag */
	struct rkv_ep *ep;      /* the initiator's endpoint */
	unsigned nwr;           /* WRs in the chain */
	unsigned done;          /* WRs already executed */
	const struct rkv_wr *wr; /* nwr WRs (their next fields are stale) */
};

/* Up to max queued chains, oldest first.  Returns how many are queued. */
size_t rkv_fake_pending(struct rkv_fake_chain *out, size_t max);
/*
 * Execute the next nwr WRs (0: all that are left) of chain id at its
 * target and queue their completions.  Only the oldest chain of an
 * endpoint may run (RC order).  Returns 1 when the chain is finished, 0
 * when WRs are left, -ENOENT (no such chain), -EBUSY (an older chain of
 * its endpoint is queued).
 */
int rkv_fake_step(uint64_t id, unsigned nwr);

/* Fail every endpoint of the contexts tagged tag (a process death).
 * Returns the endpoints failed. */
int rkv_fake_kill(void *tag);

/* Called by rkv_cq_poll of any fake CQ that finds nothing (never nested). */
void rkv_fake_set_idle_hook(void (*fn)(void *arg), void *arg);

/* Called for every SEND placed into a RECV: sender's and receiver's
 * context tags and the payload. */
typedef void (*rkv_fake_msg_fn)(void *from_tag, void *to_tag,
				const void *buf, size_t len, void *arg);
void rkv_fake_set_msg_hook(rkv_fake_msg_fn fn, void *arg);

/* Bumped by every post, delivery, execution and completion: unchanged
 * over a pass of polls means the system is quiet. */
uint64_t rkv_fake_activity(void);

/* Contexts, endpoints and listeners alive (leak checks in tests). */
unsigned rkv_fake_live(void);

extern const struct rkv_tp_ops rkv_tp_fake_ops;

#ifdef __cplusplus
}
#endif
#endif
