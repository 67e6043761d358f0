/* SPDX-License-Identifier: MIT */
/*
 * verbs_cq.c - completion queues of the verbs provider: the table that
 * finds an endpoint by qp_num, polling (ibv completions into rkv_wc with
 * the request records of the endpoint's rings, see verbs_internal.h), and
 * rkv_cq_wait on the completion channel.  An error completion puts its
 * endpoint in RKV_EP_ERROR; flushed WRs are not news.
 */
#include "verbs_internal.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>

#include "../alloc.h"
#include "../log.h"

/* Empty polls between two looks at the CQ's rdma_cm events (disconnects):
 * a read() on a non-blocking fd, ~0.5 us, so not on every poll. */
#define CM_CHECK_EVERY 64
#define POLL_BATCH 32

static unsigned ep_bucket(uint32_t qp_num)
{
	return (qp_num ^ (qp_num >> 8)) % VERBS_EP_BUCKETS;
}

void verbs_cq_add(struct verbs_cq *cq, struct verbs_ep *ep)
{
	unsigned b = ep_bucket(ep->qp_num);

	pthread_mutex_lock(&cq->lock);
	ep->hnext = cq->tab[b];
	cq->tab[b] = ep;
	ep->in_tab = 1;
	cq->nep++;
	pthread_mutex_unlock(&cq->lock);
}

void verbs_cq_del(struct verbs_cq *cq, struct verbs_ep *ep)
{
	struct verbs_ep **pp;

	if (!ep->in_tab)
		return;
	pthread_mutex_lock(&cq->lock);
	for (pp = &cq->tab[ep_bucket(ep->qp_num)]; *pp; pp = &(*pp)->hnext) {
		if (*pp == ep) {
			*pp = ep->hnext;
			cq->nep--;
			break;
		}
	}
	ep->in_tab = 0;
	pthread_mutex_unlock(&cq->lock);
}

static struct verbs_ep *cq_find_locked(struct verbs_cq *cq, uint32_t qp_num)
{
	struct verbs_ep *ep = cq->tab[ep_bucket(qp_num)];

	while (ep && ep->qp_num != qp_num)
		ep = ep->hnext;
	return ep;
}

void verbs_cq_destroy(struct rkv_cq *base)
{
	struct verbs_cq *cq = container_of(base, struct verbs_cq, base);

	if (cq->nep)
		verbs_log(base->tp, RKV_LOG_WARN,
			  "CQ destroyed while %u endpoints use it", cq->nep);
	if (cq->cq) {
		int rc;

		/* ibv_destroy_cq waits until every event is acknowledged */
		if (cq->unacked)
			ibv_ack_cq_events(cq->cq, cq->unacked);
		rc = ibv_destroy_cq(cq->cq);
		if (rc)
			verbs_log(base->tp, RKV_LOG_WARN, "ibv_destroy_cq: %s",
				  strerror(rc));
	}
	if (cq->comp)
		ibv_destroy_comp_channel(cq->comp);
	if (cq->ch)
		rdma_destroy_event_channel(cq->ch);
	pthread_mutex_destroy(&cq->lock);
	rkv_free(cq);
}

int verbs_cq_create(struct rkv_tp *tp, unsigned depth,
			   struct rkv_cq **out)
{
	struct verbs_tp *vt = container_of(tp, struct verbs_tp, base);
	struct verbs_cq *cq;
	int rc;

	if (depth > (unsigned)vt->dev_attr.max_cqe) {
		verbs_log(tp, RKV_LOG_ERROR,
			  "CQ depth %u over the device's max_cqe %d", depth,
			  vt->dev_attr.max_cqe);
		return -EINVAL;
	}
	cq = rkv_calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	cq->base.tp = tp; /* for the log of a failure; rkv_cq_create sets it */
	pthread_mutex_init(&cq->lock, NULL);
	errno = 0;
	cq->comp = ibv_create_comp_channel(vt->ctx);
	if (!cq->comp) {
		rc = rkv_verbs_neg_errno(ENOMEM);
		verbs_log(tp, RKV_LOG_ERROR, "ibv_create_comp_channel: %s",
			  strerror(-rc));
		goto fail;
	}
	rc = rkv_verbs_set_nonblock(cq->comp->fd);
	if (rc)
		goto fail;
	errno = 0;
	cq->cq = ibv_create_cq(vt->ctx, (int)depth, NULL, cq->comp, 0);
	if (!cq->cq) {
		rc = rkv_verbs_neg_errno(ENOMEM);
		verbs_log(tp, RKV_LOG_ERROR, "ibv_create_cq(%u): %s", depth,
			  strerror(-rc));
		goto fail;
	}
	errno = 0;
	cq->ch = rdma_create_event_channel();
	if (!cq->ch) {
		rc = rkv_verbs_neg_errno(ENOMEM);
		verbs_log(tp, RKV_LOG_ERROR, "rdma_create_event_channel: %s",
			  strerror(-rc));
		goto fail;
	}
	rc = rkv_verbs_set_nonblock(cq->ch->fd);
	if (rc)
		goto fail;
	*out = &cq->base;
	return 0;

fail:
	verbs_cq_destroy(&cq->base);
	return rc;
}

static enum rkv_wc_status wc_status_of(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS: return RKV_WC_SUCCESS;
	case IBV_WC_LOC_LEN_ERR: return RKV_WC_LOC_LEN_ERR;
	case IBV_WC_LOC_PROT_ERR: return RKV_WC_LOC_PROT_ERR;
	case IBV_WC_WR_FLUSH_ERR: return RKV_WC_WR_FLUSH_ERR;
	case IBV_WC_REM_INV_REQ_ERR: return RKV_WC_REM_INV_REQ_ERR;
	case IBV_WC_REM_ACCESS_ERR: return RKV_WC_REM_ACCESS_ERR;
	case IBV_WC_REM_OP_ERR: return RKV_WC_REM_OP_ERR;
	case IBV_WC_RETRY_EXC_ERR: return RKV_WC_RETRY_EXC_ERR;
	case IBV_WC_RNR_RETRY_EXC_ERR: return RKV_WC_RNR_RETRY_EXC_ERR;
	default: return RKV_WC_GENERAL_ERR;
	}
}

/*
 * Status of a completion, with the record of its request.  On Soft-RoCE
 * (rxe of Linux 6.1) some errors come out under other names than on an HCA
 * and than the transport contract says; translate those, and only those:
 *   - a WRITE/SEND whose lkey is unknown: LOC_QP_OP_ERR -> LOC_PROT_ERR
 *     (any device: we know the local buffer failed local_ok());
 *   - a SEND into a too small RECV: REM_OP_ERR at the sender ->
 *     REM_INV_REQ_ERR, LOC_QP_OP_ERR on the RECV -> LOC_LEN_ERR (or
 *     LOC_PROT_ERR when the RECV's own buffer failed local_ok()).
 */
static enum rkv_wc_status wc_status_fix(const struct verbs_tp *vt,
					const struct ibv_wc *wc,
					const struct verbs_req *rq, int is_recv)
{
	enum rkv_wc_status st = wc_status_of(wc->status);

	if (wc->status == IBV_WC_LOC_QP_OP_ERR && rq->bad_local)
		return RKV_WC_LOC_PROT_ERR;
	if (!vt->quirk_rxe)
		return st;
	if (is_recv && wc->status == IBV_WC_LOC_QP_OP_ERR)
		return RKV_WC_LOC_LEN_ERR;
	if (!is_recv && wc->status == IBV_WC_REM_OP_ERR &&
	    rq->opcode == RKV_WR_SEND)
		return RKV_WC_REM_INV_REQ_ERR;
	return st;
}

/* An error completion: the QP is in ERR, say why once. */
static void note_error(struct verbs_ep *ep, const struct ibv_wc *iwc,
		       const struct rkv_wc *w)
{
	if (ep->base.state != RKV_EP_ERROR &&
	    w->status != RKV_WC_WR_FLUSH_ERR)
		verbs_log(ep->base.tp, RKV_LOG_INFO,
			  "QP 0x%x (peer %s): %s %s (ibv status %d, vendor_err 0x%x)",
			  ep->qp_num, ep->base.peer,
			  rkv_wr_opcode_str(w->opcode),
			  ibv_wc_status_str(iwc->status), (int)iwc->status,
			  iwc->vendor_err);
	ep->base.state = RKV_EP_ERROR;
	ep->hw_err = 1;
}

/* Fill w from one ibv completion of ep.  Returns 0, or -ENOENT for a
 * completion that matches no outstanding request (dropped). */
static int wc_convert(struct verbs_tp *vt, struct verbs_ep *ep,
		      const struct ibv_wc *iwc, struct rkv_wc *w)
{
	int is_recv = (iwc->wr_id & VERBS_RECV_BIT) != 0;
	uint64_t seq = iwc->wr_id & ~VERBS_RECV_BIT;
	const struct verbs_req *rq;

	if (is_recv) {
		if (seq < ep->rtail || seq >= ep->rhead)
			return -ENOENT;
		rq = &ep->rring[seq & ep->rmask];
		ep->rtail = seq + 1;
	} else {
		if (seq < ep->stail || seq >= ep->shead)
			return -ENOENT;
		rq = &ep->sring[seq & ep->smask];
		ep->stail = seq + 1; /* retires the unsignaled ones before */
	}
	if (!is_recv && rq->opcode == VERBS_OP_BIND) {
		/* our own window bind: success is never signaled; a failure
		 * leaves the QP in error, which the caller's WRs report */
		if (iwc->status != IBV_WC_SUCCESS &&
		    iwc->status != IBV_WC_WR_FLUSH_ERR)
			verbs_log(ep->base.tp, RKV_LOG_WARN,
				  "QP 0x%x (peer %s): binding a memory window "
				  "failed: %s (vendor_err 0x%x)", ep->qp_num,
				  ep->base.peer, ibv_wc_status_str(iwc->status),
				  iwc->vendor_err);
		if (iwc->status != IBV_WC_SUCCESS) {
			ep->base.state = RKV_EP_ERROR;
			ep->hw_err = 1;
		}
		return -ENOENT;
	}
	w->wr_id = rq->wr_id;
	w->opcode = (enum rkv_wr_opcode)rq->opcode;
	w->status = iwc->status == IBV_WC_SUCCESS ?
			    RKV_WC_SUCCESS :
			    wc_status_fix(vt, iwc, rq, is_recv);
	/* pieces of a split WR (verbs_internal.h): one completion, the last
	 * piece's, with the first error any piece met */
	if (!is_recv && rq->split == VERBS_PIECE) {
		if (w->status == RKV_WC_SUCCESS) /* only if signaled: never */
			return -ENOENT;
		if (ep->split_st < 0)
			ep->split_st = (int)w->status;
		note_error(ep, iwc, w);
		return -ENOENT;
	}
	if (!is_recv && rq->split == VERBS_LAST_PIECE && ep->split_st >= 0) {
		if (w->status == RKV_WC_WR_FLUSH_ERR)
			w->status = (enum rkv_wc_status)ep->split_st;
		ep->split_st = -1;
	}
	w->byte_len = is_recv && iwc->status == IBV_WC_SUCCESS ?
			      iwc->byte_len : 0;
	w->ep = &ep->base;
	if (w->status != RKV_WC_SUCCESS)
		note_error(ep, iwc, w);
	return 0;
}

/* Convert n ibv completions into wc[*got...]. */
static void convert_batch(struct verbs_cq *cq, struct verbs_tp *vt,
			  const struct ibv_wc *iwc, int n, struct rkv_wc *wc,
			  int *got)
{
	pthread_mutex_lock(&cq->lock);
	for (int i = 0; i < n; i++) {
		struct verbs_ep *ep = cq_find_locked(cq, iwc[i].qp_num);

		/* no endpoint: destroyed, its completions dropped */
		if (ep && wc_convert(vt, ep, &iwc[i], &wc[*got]) == 0)
			(*got)++;
	}
	pthread_mutex_unlock(&cq->lock);
}

int verbs_cq_poll(struct rkv_cq *base, struct rkv_wc *wc, int max)
{
	struct verbs_cq *cq = container_of(base, struct verbs_cq, base);
	struct verbs_tp *vt = container_of(base->tp, struct verbs_tp, base);
	struct ibv_wc iwc[POLL_BATCH];
	int got = 0;

	if (cq->nstash) { /* polled by verbs_cq_wait: they come first */
		int n = (int)cq->nstash < max ? (int)cq->nstash : max;

		convert_batch(cq, vt, cq->stash + cq->stash_off, n, wc, &got);
		cq->stash_off += (unsigned)n;
		cq->nstash -= (unsigned)n;
		if (cq->nstash)
			return got;
		cq->stash_off = 0;
	}
	while (got < max) {
		int want = max - got < POLL_BATCH ? max - got : POLL_BATCH;
		int n = ibv_poll_cq(cq->cq, want, iwc);

		if (n < 0) {
			verbs_log(base->tp, RKV_LOG_ERROR,
				  "ibv_poll_cq: %d (CQ overrun?)", n);
			return got ? got : -EIO;
		}
		if (n == 0)
			break;
		convert_batch(cq, vt, iwc, n, wc, &got);
		if (n < want)
			break;
	}
	if (got == 0 && ++cq->idle_polls >= CM_CHECK_EVERY) {
		cq->idle_polls = 0;
		rkv_verbs_cq_cm_events(cq);
	}
	return got;
}

/*
 * Block on the CQ's completion channel.  Arm it, then poll once: a
 * completion that came before the arming raises no event, so one found
 * here is kept for cq_poll instead.  The cm channel (disconnects) is
 * waited on too, and the caller's fds.  Events are acknowledged in batches.
 */
int verbs_cq_wait(struct rkv_cq *base, struct pollfd *fds, unsigned nfds,
		  unsigned timeout_us)
{
	struct verbs_cq *cq = container_of(base, struct verbs_cq, base);
	struct timespec ts = { (time_t)(timeout_us / 1000000u),
			       (long)(timeout_us % 1000000u) * 1000 };
	struct pollfd pfd[2 + RKV_CQ_WAIT_FDS];
	int rc, n;

	if (cq->nstash)
		return 0;
	rc = ibv_req_notify_cq(cq->cq, 0);
	if (rc)
		return -(rc > 0 ? rc : EIO);
	n = ibv_poll_cq(cq->cq, VERBS_CQ_STASH, cq->stash);
	if (n < 0)
		return -EIO;
	if (n > 0) {
		cq->nstash = (unsigned)n;
		cq->stash_off = 0;
		return 0;
	}
	pfd[0].fd = cq->comp->fd;
	pfd[0].events = POLLIN;
	pfd[1].fd = cq->ch->fd;
	pfd[1].events = POLLIN;
	pfd[0].revents = pfd[1].revents = 0;
	for (unsigned i = 0; i < nfds; i++) {
		pfd[2 + i] = fds[i];
		pfd[2 + i].revents = 0;
	}
	if (ppoll(pfd, 2 + nfds, &ts, NULL) < 0)
		return errno == EINTR ? 0 : -errno;
	for (unsigned i = 0; i < nfds; i++)
		fds[i].revents = pfd[2 + i].revents;
	if (pfd[0].revents & POLLIN) {
		struct ibv_cq *ev_cq;
		void *ev_ctx;

		if (ibv_get_cq_event(cq->comp, &ev_cq, &ev_ctx) == 0 &&
		    ++cq->unacked >= 64) {
			ibv_ack_cq_events(cq->cq, cq->unacked);
			cq->unacked = 0;
		}
	}
	if (pfd[1].revents & POLLIN)
		rkv_verbs_cq_cm_events(cq);
	return 0;
}
