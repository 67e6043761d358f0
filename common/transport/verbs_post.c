/* SPDX-License-Identifier: MIT */
/*
 * verbs_post.c - the datapath of the verbs provider: rkv_post and
 * rkv_post_recv.
 *
 * Datapath invariants:
 *   - one rkv_post = one ibv_post_send (one doorbell), built in the
 *     endpoint's scratch array; each WR's record (caller's wr_id, opcode)
 *     goes in the endpoint's send ring, and the ibv wr_id is its sequence
 *     number (see verbs_internal.h).
 *   - a READ or WRITE over the port's max_msg_sz (rxe: 8 MiB; rkv
 *     promises RKV_TP_MAX_MSG) goes as pieces in the same doorbell, one
 *     ring record each; only the last may be signaled (split()).
 *   - WRITE and SEND go inline when they fit the QP's max_inline_data and
 *     the local range lies in one of this context's MRs (inline data is not
 *     checked by the device, and a bad lkey must still fail with
 *     LOC_PROT_ERR).
 *   - an error completion puts the endpoint in RKV_EP_ERROR; the device
 *     flushes what follows (kick_flush() helps rxe with RECVs).
 */
#include "verbs_internal.h"

#include <errno.h>
#include <string.h>

#include "../log.h"

/*
 * Whether [addr, addr+len) lies in one of this context's MRs with this lkey,
 * with LOCAL_WRITE when the device writes it (READ, CAS, FETCH_ADD, RECV).
 * Cached per endpoint, so the mutex is taken only for an lkey not seen
 * since the last deregistration.  Allows inline data (which the device
 * never checks), and names a bad local buffer LOC_PROT_ERR where rxe says
 * LOC_QP_OP_ERR (see wc_status_fix()).
 */
static int local_ok(struct verbs_ep *ep, struct verbs_tp *vt, uint32_t lkey,
		    const void *addr, uint32_t len, int dev_writes)
{
	unsigned gen = atomic_load_explicit(&vt->mr_gen, memory_order_acquire);
	uintptr_t lo = (uintptr_t)addr, hi = lo + len;
	unsigned slot = lkey % VERBS_LCACHE;
	struct verbs_mr *vm;

	if (ep->lcache[slot].gen != gen || ep->lcache[slot].lkey != lkey) {
		pthread_mutex_lock(&vt->mr_lock);
		for (vm = vt->mr_tab[verbs_mr_bucket(lkey)]; vm;
		     vm = vm->hnext) {
			if (vm->base.lkey == lkey)
				break;
		}
		if (vm) {
			ep->lcache[slot].gen = gen;
			ep->lcache[slot].lkey = lkey;
			ep->lcache[slot].access = vm->base.access;
			ep->lcache[slot].gpu = vm->base.gpu >= 0;
			ep->lcache[slot].lo = (uintptr_t)vm->base.addr;
			ep->lcache[slot].hi = (uintptr_t)vm->base.addr +
					      vm->base.length;
		}
		pthread_mutex_unlock(&vt->mr_lock);
		if (!vm)
			return 0;
	}
	if (hi < lo || lo < ep->lcache[slot].lo || hi > ep->lcache[slot].hi)
		return 0;
	if (dev_writes && !(ep->lcache[slot].access & RKV_ACCESS_LOCAL_WRITE))
		return 0;
	return 1;
}

/*
 * The QP is in ERR: the device must flush what was just posted.  rxe of
 * Linux 6.1 flushes the receive queue only when its responder runs, which a
 * RECV posted from user space does not trigger; a transition ERR -> ERR
 * (always allowed) does.  Harmless elsewhere, and only on dead QPs.
 */
static void kick_flush(struct verbs_ep *ep)
{
	struct ibv_qp_attr qa;
	int rc;

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_ERR;
	rc = ibv_modify_qp(ep->qp, &qa, IBV_QP_STATE);
	if (rc)
		verbs_log(ep->base.tp, RKV_LOG_DEBUG, "QP 0x%x to ERR: %s",
			  ep->qp_num, strerror(rc));
}

/* Fill s and g from w; returns 0 or -EINVAL. */
static int build_send(struct verbs_ep *ep, struct verbs_tp *vt,
		      const struct rkv_wr *w, struct ibv_send_wr *s,
		      struct ibv_sge *g, struct verbs_req *rq)
{
	int ok = 1;

	if (w->length > vt->max_msg_sz && w->opcode != RKV_WR_READ &&
	    w->opcode != RKV_WR_WRITE)
		return -EINVAL;
	g->addr = (uintptr_t)w->local;
	g->length = w->length;
	g->lkey = w->lkey;
	s->sg_list = g;
	s->num_sge = w->length ? 1 : 0;
	s->send_flags = (w->flags & RKV_WR_SIGNALED) ? IBV_SEND_SIGNALED : 0;
	switch (w->opcode) {
	case RKV_WR_READ:
		s->opcode = IBV_WR_RDMA_READ;
		s->wr.rdma.remote_addr = w->remote_addr;
		s->wr.rdma.rkey = w->rkey;
		if (w->length)
			ok = local_ok(ep, vt, w->lkey, w->local, w->length, 1);
		break;
	case RKV_WR_WRITE:
	case RKV_WR_SEND:
		if (w->opcode == RKV_WR_WRITE) {
			s->opcode = IBV_WR_RDMA_WRITE;
			s->wr.rdma.remote_addr = w->remote_addr;
			s->wr.rdma.rkey = w->rkey;
		} else {
			s->opcode = IBV_WR_SEND;
		}
		if (!w->length)
			break;
		ok = local_ok(ep, vt, w->lkey, w->local, w->length, 0);
		/* inline makes the CPU read the payload: never from device
		 * memory (the NIC reads the registered dma-buf itself) */
		if (ok && w->length <= ep->max_inline &&
		    !ep->lcache[w->lkey % VERBS_LCACHE].gpu)
			s->send_flags |= IBV_SEND_INLINE;
		break;
	case RKV_WR_CAS:
	case RKV_WR_FETCH_ADD:
		s->opcode = w->opcode == RKV_WR_CAS ? IBV_WR_ATOMIC_CMP_AND_SWP :
						      IBV_WR_ATOMIC_FETCH_AND_ADD;
		s->wr.atomic.remote_addr = w->remote_addr;
		s->wr.atomic.rkey = w->rkey;
		s->wr.atomic.compare_add = w->compare_add;
		s->wr.atomic.swap = w->opcode == RKV_WR_CAS ? w->swap : 0;
		ok = local_ok(ep, vt, w->lkey, w->local, w->length, 1);
		break;
	default:
		return -EINVAL; /* transport.c already refused it */
	}
	rq->wr_id = w->wr_id;
	rq->opcode = (uint8_t)w->opcode;
	rq->bad_local = !ok;
	rq->split = 0;
	return 0;
}

/* How many ibv WRs w takes: READ and WRITE over max_msg_sz are split. */
static unsigned pieces_of(const struct verbs_tp *vt, const struct rkv_wr *w)
{
	uint32_t p = vt->split_sz;

	if (w->length <= vt->max_msg_sz ||
	    (w->opcode != RKV_WR_READ && w->opcode != RKV_WR_WRITE))
		return 1;
	return (unsigned)((w->length + (uint64_t)p - 1) / p);
}

/*
 * Turn the one WR built at ep->swr[i] (its record at sequence seq) into n
 * consecutive pieces of split_sz bytes, the last one the rest.  The pieces
 * go in order on one QP, so the last one's completion says they all
 * landed; it alone keeps the caller's signaled flag.
 */
static void split(struct verbs_ep *ep, const struct verbs_tp *vt,
		  unsigned i, uint64_t seq, unsigned n)
{
	const struct ibv_send_wr *s0 = &ep->swr[i];
	const struct ibv_sge *g0 = &ep->ssge[i];
	struct verbs_req *r0 = &ep->sring[seq & ep->smask];
	uint32_t len = g0->length, p = vt->split_sz;

	for (unsigned j = n; j-- > 0;) { /* backwards: piece 0 is s0 */
		struct ibv_send_wr *s = &ep->swr[i + j];
		struct ibv_sge *g = &ep->ssge[i + j];
		struct verbs_req *r = &ep->sring[(seq + j) & ep->smask];
		uint64_t off = (uint64_t)j * p;

		if (j) {
			*s = *s0;
			*g = *g0;
			*r = *r0;
		}
		g->addr += off;
		g->length = j == n - 1 ? len - (uint32_t)off : p;
		s->sg_list = g;
		s->wr.rdma.remote_addr += off;
		if (j != n - 1)
			s->send_flags &= ~(unsigned)IBV_SEND_SIGNALED;
		r->split = j == n - 1 ? VERBS_LAST_PIECE : VERBS_PIECE;
	}
}

int verbs_post(struct rkv_ep *base, struct rkv_wr *wr,
		      struct rkv_wr **bad)
{
	struct verbs_ep *ep = container_of(base, struct verbs_ep, base);
	struct verbs_tp *vt = container_of(base->tp, struct verbs_tp, base);
	uint64_t room = ep->sq_len - (ep->shead - ep->stail);
	struct ibv_send_wr *ibad = NULL;
	struct rkv_wr *w;
	unsigned i = 0;
	int rc = 0, rc_stop = 0;

	for (w = wr; w; w = w->next) {
		uint64_t seq = ep->shead + i;
		unsigned n = pieces_of(vt, w);

		if (n > room - i) {
			rc_stop = -ENOMEM; /* send queue full */
			break;
		}
		rc_stop = build_send(ep, vt, w, &ep->swr[i], &ep->ssge[i],
				     &ep->sring[seq & ep->smask]);
		if (rc_stop)
			break;
		if (n > 1)
			split(ep, vt, i, seq, n);
		for (unsigned j = 0; j < n; j++) {
			ep->swr[i + j].wr_id = seq + j;
			ep->swr[i + j].next = &ep->swr[i + j + 1];
		}
		i += n;
	}
	if (i > 0) {
		ep->swr[i - 1].next = NULL;
		rc = ibv_post_send(ep->qp, ep->swr, &ibad);
		if (rc) {
			size_t k = 0, n;

			if (ibad >= ep->swr && ibad < ep->swr + i)
				k = (size_t)(ibad - ep->swr);
			/* the WRs before ibad went out; a split WR counts as
			 * posted only whole (pieces before ibad still run:
			 * only a bad WR or a full queue, both checked above,
			 * make the device refuse) */
			ep->shead += k;
			for (w = wr; w && (n = pieces_of(vt, w)) <= k;
			     w = w->next)
				k -= n;
			verbs_log(base->tp, RKV_LOG_DEBUG,
				  "ibv_post_send(QP 0x%x): %s", ep->qp_num,
				  strerror(rc));
			if (bad)
				*bad = w;
			return rc > 0 ? -rc : rc;
		}
		ep->shead += i;
	}
	if (rc_stop && bad)
		*bad = w;
	return rc_stop;
}

int verbs_post_recv(struct rkv_ep *base, struct rkv_recv_wr *wr,
			   struct rkv_recv_wr **bad)
{
	struct verbs_ep *ep = container_of(base, struct verbs_ep, base);
	struct verbs_tp *vt = container_of(base->tp, struct verbs_tp, base);
	uint64_t room = ep->rq_len - (ep->rhead - ep->rtail);
	struct ibv_recv_wr *ibad = NULL;
	struct rkv_recv_wr *w;
	unsigned i = 0;
	int rc;

	for (w = wr; w && i < room; w = w->next, i++) {
		uint64_t seq = ep->rhead + i;
		struct verbs_req *rq = &ep->rring[seq & ep->rmask];
		struct ibv_recv_wr *r = &ep->rwr[i];
		struct ibv_sge *g = &ep->rsge[i];

		g->addr = (uintptr_t)w->local;
		g->length = w->length;
		g->lkey = w->lkey;
		r->wr_id = seq | VERBS_RECV_BIT;
		r->next = r + 1;
		r->sg_list = g;
		r->num_sge = w->length ? 1 : 0;
		rq->wr_id = w->wr_id;
		rq->opcode = RKV_WR_RECV;
		rq->bad_local = w->length &&
				!local_ok(ep, vt, w->lkey, w->local, w->length, 1);
	}
	if (i > 0) {
		ep->rwr[i - 1].next = NULL;
		rc = ibv_post_recv(ep->qp, ep->rwr, &ibad);
		if (rc) {
			size_t k = 0;

			if (ibad >= ep->rwr && ibad < ep->rwr + i)
				k = (size_t)(ibad - ep->rwr);
			ep->rhead += k;
			for (w = wr; k--; w = w->next)
				;
			if (bad)
				*bad = w;
			return rc > 0 ? -rc : rc;
		}
		ep->rhead += i;
		if (ep->hw_err)
			kick_flush(ep);
	}
	if (w) {
		if (bad)
			*bad = w;
		return -ENOMEM; /* receive queue full */
	}
	return 0;
}

int verbs_post_bind(struct verbs_ep *ep, struct verbs_win *w)
{
	struct ibv_send_wr s, *ibad = NULL;
	struct verbs_req *rq;
	unsigned a = w->vm->base.access;
	int rc;

	if (ep->sq_len - (ep->shead - ep->stail) == 0)
		return -ENOMEM;
	memset(&s, 0, sizeof(s));
	s.wr_id = ep->shead;
	s.opcode = IBV_WR_BIND_MW;
	s.bind_mw.mw = w->mw;
	s.bind_mw.rkey = w->rkey;
	s.bind_mw.bind_info.mr = w->vm->mr;
	s.bind_mw.bind_info.addr = (uintptr_t)w->vm->base.addr;
	s.bind_mw.bind_info.length = w->vm->base.length;
	s.bind_mw.bind_info.mw_access_flags =
		((a & RKV_ACCESS_REMOTE_READ) ? IBV_ACCESS_REMOTE_READ : 0) |
		((a & RKV_ACCESS_REMOTE_WRITE) ? IBV_ACCESS_REMOTE_WRITE : 0) |
		((a & RKV_ACCESS_REMOTE_ATOMIC) ? IBV_ACCESS_REMOTE_ATOMIC : 0);
	rq = &ep->sring[ep->shead & ep->smask];
	rq->wr_id = 0;
	rq->opcode = VERBS_OP_BIND;
	rq->bad_local = 0;
	rq->split = 0;
	rc = ibv_post_send(ep->qp, &s, &ibad);
	if (rc) {
		verbs_log(ep->base.tp, RKV_LOG_WARN,
			  "binding a memory window to QP 0x%x: %s", ep->qp_num,
			  strerror(rc));
		return rc > 0 ? -rc : -EIO;
	}
	ep->shead++;
	return 0;
}
