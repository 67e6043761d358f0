/* SPDX-License-Identifier: MIT */
/*
 * verbs_qp.c - queue pairs of the verbs provider: creation on the
 * context's PD with the endpoint's request rings and scratch arrays, the
 * INIT/RTR/RTS transitions with rdma_cm's attributes plus our timeouts,
 * and teardown.
 */
#include "verbs_internal.h"

#include <errno.h>
#include <string.h>

#include "../alloc.h"
#include "../log.h"

static uint64_t pow2_at_least(unsigned n)
{
	uint64_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

/* Create the QP (RESET) on the context's PD, its rings and scratch. */
int rkv_verbs_ep_setup_qp(struct verbs_ep *ep)
{
	struct verbs_tp *vt = container_of(ep->base.tp, struct verbs_tp, base);
	const struct rkv_tp_opts *o = &vt->base.opts;
	unsigned max_wr = (unsigned)vt->dev_attr.max_qp_wr;
	struct ibv_qp_init_attr a;
	int rc;

	memset(&a, 0, sizeof(a));
	a.qp_context = ep;
	a.send_cq = ep->vcq->cq;
	a.recv_cq = ep->vcq->cq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 0;
	a.cap.max_send_wr = o->max_send_wr < max_wr ? o->max_send_wr : max_wr;
	a.cap.max_recv_wr = o->max_recv_wr < max_wr ? o->max_recv_wr : max_wr;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = o->max_inline;
	errno = 0;
	ep->qp = ibv_create_qp(vt->pd, &a);
	if (!ep->qp && a.cap.max_inline_data) {
		verbs_log(ep->base.tp, RKV_LOG_INFO,
			  "ibv_create_qp with max_inline %u: %s; retrying without inline",
			  o->max_inline, strerror(errno));
		a.cap.max_inline_data = 0;
		errno = 0;
		ep->qp = ibv_create_qp(vt->pd, &a);
	}
	if (!ep->qp) {
		rc = rkv_verbs_neg_errno(EINVAL);
		verbs_log(ep->base.tp, RKV_LOG_ERROR,
			  "ibv_create_qp(send %u, recv %u): %s",
			  a.cap.max_send_wr, a.cap.max_recv_wr, strerror(-rc));
		return rc;
	}
	ep->qp_num = ep->qp->qp_num;
	ep->split_st = -1;
	/* The device may grant more than asked; outstanding WRs are bounded
	 * by what was asked (the rings), the scratch by what was granted. */
	ep->max_inline = a.cap.max_inline_data;
	ep->sq_len = a.cap.max_send_wr < o->max_send_wr ? a.cap.max_send_wr :
							   o->max_send_wr;
	ep->rq_len = a.cap.max_recv_wr < o->max_recv_wr ? a.cap.max_recv_wr :
							   o->max_recv_wr;
	ep->smask = pow2_at_least(ep->sq_len) - 1;
	ep->rmask = pow2_at_least(ep->rq_len) - 1;
	ep->sring = rkv_calloc(ep->smask + 1, sizeof(*ep->sring));
	ep->rring = rkv_calloc(ep->rmask + 1, sizeof(*ep->rring));
	ep->swr = rkv_calloc(ep->sq_len, sizeof(*ep->swr));
	ep->ssge = rkv_calloc(ep->sq_len, sizeof(*ep->ssge));
	ep->rwr = rkv_calloc(ep->rq_len, sizeof(*ep->rwr));
	ep->rsge = rkv_calloc(ep->rq_len, sizeof(*ep->rsge));
	if (!ep->sring || !ep->rring || !ep->swr || !ep->ssge || !ep->rwr ||
	    !ep->rsge)
		return -ENOMEM; /* the caller's ep_destroy frees the rest */
	verbs_cq_add(ep->vcq, ep);
	return 0;
}

static void dump_qp(struct verbs_ep *ep)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;

	memset(&qa, 0, sizeof(qa));
	if (ibv_query_qp(ep->qp, &qa,
			 IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				 IBV_QP_RNR_RETRY | IBV_QP_MIN_RNR_TIMER |
				 IBV_QP_MAX_QP_RD_ATOMIC |
				 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_PATH_MTU |
				 IBV_QP_ACCESS_FLAGS | IBV_QP_AV,
			 &ia) == 0)
		verbs_log(ep->base.tp, RKV_LOG_DEBUG,
			  "QP 0x%x -> 0x%x: state %d timeout %u retry %u rnr_retry %u min_rnr_timer %u rd_atomic %u/%u mtu %d access 0x%x traffic_class %u sl %u",
			  ep->qp_num, qa.dest_qp_num, (int)qa.qp_state,
			  qa.timeout, qa.retry_cnt, qa.rnr_retry,
			  qa.min_rnr_timer, qa.max_rd_atomic,
			  qa.max_dest_rd_atomic, (int)qa.path_mtu,
			  (unsigned)qa.qp_access_flags,
			  qa.ah_attr.grh.traffic_class, qa.ah_attr.sl);
}

/*
 * Move the QP to INIT, RTR or RTS with what rdma_cm computed for this
 * connection (path, PSNs, remote QPN, READ/atomic depths) and our own
 * timeouts: ACK timeout and retries (dead peer), RNR delay and retries
 * (rdma_cm's min_rnr_timer of 0 means 655 ms per RNR NAK).
 */
int rkv_verbs_ep_qp_to(struct verbs_ep *ep, enum ibv_qp_state state)
{
	struct verbs_tp *vt = container_of(ep->base.tp, struct verbs_tp, base);
	struct ibv_qp_attr qa;
	int mask = 0, rc;

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = state;
	errno = 0;
	if (rdma_init_qp_attr(ep->id, &qa, &mask)) {
		rc = rkv_verbs_neg_errno(EINVAL);
		verbs_log(ep->base.tp, RKV_LOG_ERROR,
			  "rdma_init_qp_attr(QP 0x%x, state %d): %s",
			  ep->qp_num, (int)state, strerror(-rc));
		return rc;
	}
	switch (state) {
	case IBV_QPS_INIT:
		/* MRs decide what peers may do; the QP allows it all. */
		qa.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				     IBV_ACCESS_REMOTE_WRITE |
				     IBV_ACCESS_REMOTE_READ |
				     (vt->base.has_atomics ?
					      IBV_ACCESS_REMOTE_ATOMIC : 0);
		mask |= IBV_QP_ACCESS_FLAGS;
		break;
	case IBV_QPS_RTR:
		qa.min_rnr_timer = vt->min_rnr_timer;
		mask |= IBV_QP_MIN_RNR_TIMER;
		/* the fabric knobs over rdma_cm's path (which it put in
		 * qa.ah_attr and path_mtu with IBV_QP_AV | IBV_QP_PATH_MTU) */
		if (vt->path_mtu)
			qa.path_mtu = (enum ibv_mtu)vt->path_mtu;
		if (vt->traffic_class >= 0)
			qa.ah_attr.grh.traffic_class =
				(uint8_t)vt->traffic_class;
		if (vt->service_level >= 0)
			qa.ah_attr.sl = (uint8_t)vt->service_level;
		if (ep->resp_res)
			qa.max_dest_rd_atomic = ep->resp_res;
		break;
	case IBV_QPS_RTS:
		if (ep->init_depth)
			qa.max_rd_atomic = ep->init_depth;
		qa.timeout = vt->ack_timeout;
		qa.retry_cnt = VERBS_RETRY_CNT;
		qa.rnr_retry = VERBS_RNR_RETRY;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
		break;
	default:
		break;
	}
	rc = ibv_modify_qp(ep->qp, &qa, mask);
	if (rc) {
		verbs_log(ep->base.tp, RKV_LOG_ERROR,
			  "ibv_modify_qp(QP 0x%x -> state %d, mask 0x%x): %s",
			  ep->qp_num, (int)state, (unsigned)mask, strerror(rc));
		return -rc;
	}
	if (state == IBV_QPS_RTS &&
	    rkv_tp_sink_wants(&vt->base.log, RKV_LOG_DEBUG))
		dump_qp(ep);
	return 0;
}

int rkv_verbs_ep_path(struct rkv_ep *e, struct rkv_ep_path *out)
{
	struct verbs_ep *ep = container_of(e, struct verbs_ep, base);
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;

	memset(&qa, 0, sizeof(qa));
	if (!ep->qp ||
	    ibv_query_qp(ep->qp, &qa,
			 IBV_QP_PATH_MTU | IBV_QP_AV | IBV_QP_MAX_QP_RD_ATOMIC |
				 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_SQ_PSN |
				 IBV_QP_RQ_PSN,
			 &ia))
		return -EIO;
	out->sq_psn = qa.sq_psn;
	out->rq_psn = qa.rq_psn;
	out->max_rd_atomic = qa.max_rd_atomic;
	out->max_dest_rd_atomic = qa.max_dest_rd_atomic;
	out->mtu = (unsigned)rkv_verbs_mtu_bytes(qa.path_mtu);
	out->traffic_class = qa.ah_attr.grh.traffic_class;
	out->service_level = qa.ah_attr.sl;
	return 0;
}

void rkv_verbs_ep_fini_qp(struct verbs_ep *ep)
{
	struct verbs_tp *vt = container_of(ep->base.tp, struct verbs_tp, base);

	if (ep->wins) {
		pthread_mutex_lock(&vt->mr_lock);
		verbs_ep_drop_windows(vt, ep);
		pthread_mutex_unlock(&vt->mr_lock);
	}
	if (ep->vcq)
		verbs_cq_del(ep->vcq, ep);
	if (ep->qp) {
		int rc = ibv_destroy_qp(ep->qp);

		if (rc)
			verbs_log(ep->base.tp, RKV_LOG_WARN,
				  "ibv_destroy_qp(0x%x): %s", ep->qp_num,
				  strerror(rc));
		ep->qp = NULL;
	}
	rkv_free(ep->sring);
	rkv_free(ep->rring);
	rkv_free(ep->swr);
	rkv_free(ep->ssge);
	rkv_free(ep->rwr);
	rkv_free(ep->rsge);
	ep->sring = NULL;
	ep->rring = NULL;
	ep->swr = NULL;
	ep->ssge = NULL;
	ep->rwr = NULL;
	ep->rsge = NULL;
}
