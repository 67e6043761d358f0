/* SPDX-License-Identifier: MIT */
/*
 * sw_tx.c - the send side of a software endpoint: posting WRs (send and
 * receive queues) and the output path.
 *
 * tx: the frames of one post (a chain, one doorbell) are gathered as
 * iovecs - headers staged in the endpoint, payloads pointing at the
 * caller's memory - and go out in one sendmsg.  What the socket does not
 * take is copied into txbuf and flushed later by progress, so a payload is
 * never referenced after the call that queued it returns (a READ response
 * is copied under the MR read lock, so deregistration cannot race it).
 * Everything here runs with ep->lock held.
 */
#include "sw.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "../alloc.h"
#include "../hash.h"
#include "../log.h"
#include "../rtime.h"

/* --------------------------------------------------------------------- tx */
/*
 * txbuf: from the heap below SW_TX_MAP_MIN bytes, a mapping of its own
 * from there with transparent huge pages asked for (the kernel's madvise
 * mode, Debian's default).  What the socket does not take of a big READ
 * response or WRITE is copied into it on every such op, and a buffer over
 * 8 MiB goes back after it drains: with 4 KiB pages each 16 MiB op faulted
 * 4,096 pages in (mapping, filling and unmapping 16 MiB took 57 ms on the
 * VM of docs/DESIGN.md's figures, 1-1.5 ms with huge pages), which made a
 * 16 MiB get over tcp take 50 ms there.  Whether a buffer is a mapping
 * follows from its capacity.
 */
#define SW_TX_MAP_MIN (2u << 20)

static uint8_t *txbuf_alloc(size_t cap)
{
	void *p;

	if (cap < SW_TX_MAP_MIN)
		return rkv_malloc(cap);
	p = mmap(NULL, cap, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	(void)madvise(p, cap, MADV_HUGEPAGE); /* a hint: may be refused */
	return p;
}

void sw_txbuf_free(uint8_t *p, size_t cap)
{
	if (!p)
		return;
	if (cap < SW_TX_MAP_MIN)
		rkv_free(p);
	else
		munmap(p, cap);
}

void sw_ep_tx_flush(struct sw_ep *ep)
{
	while (ep->tx_len && !ep->closed) {
		struct iovec v = { .iov_base = ep->txbuf + ep->tx_off,
				   .iov_len = ep->tx_len };
		ssize_t n = sw_sock_send(ep, &v, 1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				ep->io_err = true;
			break;
		}
		ep->tx_off += (size_t)n;
		ep->tx_len -= (size_t)n;
		/* the peer drains its socket: alive, even while a long
		 * WRITE gets no answer (sw_ep.c tick_locked) */
		ep->last_tx = rkv_now_ns();
	}
	if (!ep->tx_len) {
		ep->tx_off = 0;
		/* Don't sit on a huge buffer after a burst of large ops. */
		if (ep->tx_cap > 8u * 1024 * 1024) {
			sw_txbuf_free(ep->txbuf, ep->tx_cap);
			ep->txbuf = NULL;
			ep->tx_cap = 0;
		}
	}
}

static void tx_append(struct sw_ep *ep, const void *p, size_t n)
{
	if (ep->tx_off + ep->tx_len + n > ep->tx_cap) {
		if (ep->tx_off) {
			memmove(ep->txbuf, ep->txbuf + ep->tx_off, ep->tx_len);
			ep->tx_off = 0;
		}
		if (ep->tx_len + n > ep->tx_cap) {
			size_t cap = ep->tx_cap ? ep->tx_cap : 64 * 1024;
			uint8_t *nb;

			while (cap < ep->tx_len + n)
				cap *= 2;
			if (cap < SW_TX_MAP_MIN)
				nb = rkv_realloc(ep->txbuf, cap);
			else if ((nb = txbuf_alloc(cap)) != NULL) {
				if (ep->tx_len)
					memcpy(nb, ep->txbuf, ep->tx_len);
				sw_txbuf_free(ep->txbuf, ep->tx_cap);
			}
			if (!nb) {
				sw_log(ep->tp, RKV_LOG_ERROR,
				       "peer %s: no memory for %zu bytes of output",
				       ep->base.peer, ep->tx_len + n);
				ep->io_err = true;
				return;
			}
			ep->txbuf = nb;
			ep->tx_cap = cap;
		}
	}
	memcpy(ep->txbuf + ep->tx_off + ep->tx_len, p, n);
	ep->tx_len += n;
}

void sw_ep_tx_commit(struct sw_ep *ep)
{
	size_t skip = 0;
	bool direct = false, region = ep->tx_refs_region;

	if (!ep->niov)
		return;
	if (ep->closed || ep->io_err)
		goto out;
	sw_hb_release();
	if (region)
		sw_tsan_region_reads_begin();
	if (!ep->tx_len) {
		ssize_t n;

		direct = true;
		do {
			n = sw_sock_send(ep, ep->iov, ep->niov);
		} while (n < 0 && errno == EINTR);
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				ep->io_err = true;
			n = 0;
		}
		skip = (size_t)n;
	}
	for (unsigned i = 0; i < ep->niov && !ep->io_err; i++) {
		size_t l = ep->iov[i].iov_len;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		tx_append(ep, (uint8_t *)ep->iov[i].iov_base + skip, l - skip);
		skip = 0;
	}
	if (region)
		sw_tsan_region_reads_end();
	if (!direct && !ep->io_err)
		sw_ep_tx_flush(ep);
out:
	ep->niov = 0;
	ep->nhstage = 0;
	ep->stage_len = 0;
	ep->tx_refs_region = false;
}

void sw_ep_tx_frame(struct sw_ep *ep, const struct sw_hdr *h,
		    const void *payload, size_t len)
{
	uint8_t *hb;

	if (ep->niov + 2 > SW_TX_IOV || ep->nhstage == SW_TX_IOV / 2)
		sw_ep_tx_commit(ep);
	hb = ep->hstage[ep->nhstage++];
	sw_hdr_encode(h, hb);
	ep->iov[ep->niov].iov_base = hb;
	ep->iov[ep->niov].iov_len = SW_HDR_LEN;
	ep->niov++;
	ep->stage_len += SW_HDR_LEN + len;
	if (len) {
		ep->iov[ep->niov].iov_base = (void *)payload;
		ep->iov[ep->niov].iov_len = len;
		ep->niov++;
	}
}

void sw_ep_respond(struct sw_ep *ep, uint64_t seq, int status, uint64_t arg0,
		   const void *payload, uint32_t len)
{
	struct sw_hdr h = { .type = SW_F_RESP, .len = len,
			    .key = (uint32_t)status, .seq = seq, .arg0 = arg0 };

	sw_ep_tx_frame(ep, &h, payload, len);
}

void sw_ep_tx_payload(struct sw_ep *ep, const void *p, size_t n)
{
	if (ep->niov + 1 > SW_TX_IOV)
		sw_ep_tx_commit(ep);
	ep->iov[ep->niov].iov_base = (void *)p;
	ep->iov[ep->niov].iov_len = n;
	ep->niov++;
	ep->stage_len += n;
}

/* --------------------------------------------------------------- posting */
/* Take the send-queue entry of wr (the caller checked for room). */
static struct sw_sqe *sqe_take(struct sw_ep *ep, const struct rkv_wr *wr,
			       uint64_t now)
{
	struct sw_sqe *s = sw_sq_at(ep, ep->sq_tail);

	s->wr_id = wr->wr_id;
	s->local = wr->local;
	s->length = wr->length;
	s->opcode = (uint8_t)wr->opcode;
	s->signaled = !!(wr->flags & RKV_WR_SIGNALED);
	s->done = 0;
	s->rnr = 0;
	s->gpu = -1;
	s->status = RKV_WC_SUCCESS;
	s->t_post = now;
	s->digest = NULL;
	if ((wr->flags & RKV_WR_DIGEST) && wr->opcode == RKV_WR_READ &&
	    wr->digest && wr->digest_off <= wr->length) {
		s->digest = wr->digest;
		s->digest_off = wr->digest_off;
	}
	ep->sq_tail++;
	return s;
}

/* s is done with status st at once; a failure flushes the WRs after it. */
static void sqe_complete(struct sw_ep *ep, struct sw_sqe *s, int st)
{
	s->done = 1;
	s->status = st;
	if (st != RKV_WC_SUCCESS)
		__atomic_store_n(&ep->err_pending, true, __ATOMIC_RELAXED);
	sw_ep_sq_emit(ep);
}

/* Stage the frame of wr, whose local buffer passed the check, as h. */
static void post_frame(struct sw_ep *ep, struct sw_sqe *s,
		       const struct rkv_wr *wr, struct sw_hdr *h)
{
	h->addr = wr->remote_addr;
	h->key = wr->rkey;
	switch (wr->opcode) {
	case RKV_WR_READ:
		h->type = SW_F_READ;
		h->arg0 = wr->length;
		sw_ep_tx_frame(ep, h, NULL, 0);
		break;
	case RKV_WR_WRITE:
		h->type = SW_F_WRITE;
		h->len = wr->length;
		/* RKV_WR_DIGEST: the payload hashed as it is posted */
		if ((wr->flags & RKV_WR_DIGEST) && wr->digest &&
		    wr->digest_off <= wr->length)
			rkv_hash_update(wr->digest,
					(const char *)wr->local +
						wr->digest_off,
					wr->length - wr->digest_off);
		sw_ep_tx_frame(ep, h, wr->local, wr->length);
		break;
	case RKV_WR_CAS:
		h->type = SW_F_CAS;
		h->arg0 = wr->compare_add;
		h->arg1 = wr->swap;
		sw_ep_tx_frame(ep, h, NULL, 0);
		break;
	case RKV_WR_FETCH_ADD:
		h->type = SW_F_FADD;
		h->arg0 = wr->compare_add;
		sw_ep_tx_frame(ep, h, NULL, 0);
		break;
	case RKV_WR_SEND:
		h->type = SW_F_SEND;
		h->key = 0;
		h->addr = 0;
		h->len = wr->length;
		sw_ep_tx_frame(ep, h, wr->local, wr->length);
		break;
	default:
		sqe_complete(ep, s, RKV_WC_GENERAL_ERR);
		break;
	}
}

int sw_ep_post_one_locked(struct sw_ep *ep, const struct rkv_wr *wr,
			  int done_status, uint64_t now)
{
	struct sw_sqe *s;
	struct sw_hdr h = { 0 };
	int st, lgpu;

	if (ep->base.state == RKV_EP_ERROR && ep->sq_head == ep->sq_tail) {
		sw_ep_push_wc(ep, wr->wr_id,
			      ep->lost_status ? ep->lost_status
					      : RKV_WC_WR_FLUSH_ERR,
			      wr->opcode, 0);
		ep->lost_status = 0;
		return 0;
	}
	if (ep->sq_tail - ep->sq_head >= ep->sq_cap)
		return -ENOMEM;
	h.seq = ep->sq_tail;
	s = sqe_take(ep, wr, now);
	if (ep->base.state == RKV_EP_ERROR || ep->err_pending) {
		s->done = 1;
		s->status = RKV_WC_WR_FLUSH_ERR;
		sw_ep_sq_emit(ep);
		return 0;
	}
	if (done_status >= 0) {
		sqe_complete(ep, s, done_status);
		return 0;
	}
	st = RKV_WC_SUCCESS;
	lgpu = -1;
	if (wr->length)
		st = sw_mrtab_check_local(&ep->tp->mrt, wr->local, wr->length,
					  wr->lkey,
					  wr->opcode == RKV_WR_READ ||
						  wr->opcode == RKV_WR_CAS ||
						  wr->opcode == RKV_WR_FETCH_ADD,
					  &lgpu);
	s->gpu = (int16_t)lgpu;
	if (st == RKV_WC_SUCCESS && lgpu >= 0 &&
	    (wr->opcode == RKV_WR_WRITE || wr->opcode == RKV_WR_SEND)) {
		/* payload in local device memory: staged (sw_gpu_tx) */
		h.addr = wr->opcode == RKV_WR_SEND ? 0 : wr->remote_addr;
		h.key = wr->opcode == RKV_WR_SEND ? 0 : wr->rkey;
		h.type = wr->opcode == RKV_WR_SEND ? SW_F_SEND : SW_F_WRITE;
		h.len = wr->length;
		st = sw_gpu_tx(ep, &h, wr->local, lgpu);
		if (st == RKV_WC_SUCCESS)
			return 0;
	}
	if (st != RKV_WC_SUCCESS)
		sqe_complete(ep, s, st);
	else
		post_frame(ep, s, wr, &h);
	return 0;
}

int sw_ep_post(struct rkv_ep *bep, struct rkv_wr *wr, struct rkv_wr **bad)
{
	struct sw_ep *ep = container_of(bep, struct sw_ep, base);
	uint64_t now = rkv_now_ns();
	int rc = 0;

	pthread_mutex_lock(&ep->lock);
	for (; wr; wr = wr->next) {
		rc = sw_ep_post_one_locked(ep, wr, -1, now);
		if (rc) {
			if (bad)
				*bad = wr;
			break;
		}
	}
	sw_ep_tx_commit(ep);
	sw_ep_settle_locked(ep);
	pthread_mutex_unlock(&ep->lock);
	return rc;
}

int sw_ep_post_recv(struct rkv_ep *bep, struct rkv_recv_wr *wr,
		    struct rkv_recv_wr **bad)
{
	struct sw_ep *ep = container_of(bep, struct sw_ep, base);
	int rc = 0;

	pthread_mutex_lock(&ep->lock);
	for (; wr; wr = wr->next) {
		struct sw_rqe *r;

		if (ep->base.state == RKV_EP_ERROR) {
			sw_ep_push_wc(ep, wr->wr_id, RKV_WC_WR_FLUSH_ERR,
				      RKV_WR_RECV, 0);
			continue;
		}
		if (ep->rq_tail - ep->rq_head >= ep->rq_cap) {
			rc = -ENOMEM;
			if (bad)
				*bad = wr;
			break;
		}
		if (wr->length &&
		    sw_mrtab_check_local(&ep->tp->mrt, wr->local, wr->length,
					 wr->lkey, true, NULL) != RKV_WC_SUCCESS) {
			sw_ep_push_wc(ep, wr->wr_id, RKV_WC_LOC_PROT_ERR,
				      RKV_WR_RECV, 0);
			sw_ep_fail(ep);
			continue;
		}
		r = &ep->rq[ep->rq_tail % ep->rq_cap];
		r->wr_id = wr->wr_id;
		r->local = wr->local;
		r->length = wr->length;
		ep->rq_tail++;
	}
	/* Before a waiting SEND is delivered, look at the socket: if its
	 * sender gave up (RNR timeout) and closed, the EOF is there already
	 * and the SEND must not be delivered. */
	if (ep->ux_head)
		sw_ep_rx_locked(ep);
	sw_ep_match_unexp(ep);
	sw_ep_tx_commit(ep);
	sw_ep_settle_locked(ep);
	pthread_mutex_unlock(&ep->lock);
	return rc;
}
