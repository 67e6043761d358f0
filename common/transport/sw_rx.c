/* SPDX-License-Identifier: MIT */
/*
 * sw_rx.c - the receive side of a software endpoint: parsing frames, the
 * SEND/RECV match (with a bounded store of SENDs that found no RECV), and
 * (tcp) one-sided requests executed at the target against the MR table.
 *
 * rx: bytes are read into a 256 KiB buffer and parsed frame by frame;
 * headers are validated (magic, version, type, lengths, sequence numbers)
 * before anything is trusted, and a violation drops the connection with a
 * warning.  A large payload headed for plain memory (READ response, RECV
 * buffer) is received straight into place.  Everything here runs with
 * ep->lock held.
 */
#include "sw.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "../alloc.h"
#include "../hash.h"
#include "../log.h"
#include "../rtime.h"

#define SW_DIRECT_MIN (16u * 1024)

/* Deliver complete unexpected SENDs into posted RECVs. */
void sw_ep_match_unexp(struct sw_ep *ep)
{
	while (ep->ux_head && ep->ux_head->got == ep->ux_head->len &&
	       ep->rq_head != ep->rq_tail &&
	       ep->base.state == RKV_EP_CONNECTED) {
		struct sw_unexp *u = ep->ux_head;
		struct sw_rqe *r = &ep->rq[ep->rq_head % ep->rq_cap];

		if (ep->cur.kind == SW_RX_UNEXP && ep->cur.ux == u)
			break; /* still arriving */
		ep->ux_head = u->next;
		if (!ep->ux_head)
			ep->ux_tail = NULL;
		ep->ux_bytes -= u->len;
		ep->ux_count--;
		ep->rq_head++;
		if (u->len > r->length) {
			sw_ep_push_wc(ep, r->wr_id, RKV_WC_LOC_LEN_ERR,
				      RKV_WR_RECV, u->len);
			sw_ep_respond(ep, u->seq, RKV_WC_REM_INV_REQ_ERR, 0,
				      NULL, 0);
			rkv_free(u);
			sw_ep_fail(ep);
			return;
		}
		if (u->len)
			memcpy(r->local, u->data, u->len);
		sw_ep_push_wc(ep, r->wr_id, RKV_WC_SUCCESS, RKV_WR_RECV,
			      u->len);
		sw_ep_respond(ep, u->seq, RKV_WC_SUCCESS, 0, NULL, 0);
		rkv_free(u);
	}
}

/* --------------------------------------------------------------------- rx */
static void rx_finish(struct sw_ep *ep)
{
	struct sw_rxcur c = ep->cur;
	struct sw_sqe *s;

	ep->cur.kind = SW_RX_NONE;
	switch (c.kind) {
	case SW_RX_MEM:
		if (c.is_recv) {
			sw_ep_push_wc(ep, c.rq_wr_id, RKV_WC_SUCCESS,
				      RKV_WR_RECV, c.h.len);
			sw_ep_respond(ep, c.h.seq, RKV_WC_SUCCESS, 0, NULL, 0);
		} else {
			s = sw_sq_at(ep, c.h.seq);
			s->done = 1;
			s->status = RKV_WC_SUCCESS;
			/* into local GPU memory: landed before the completion */
			if (c.ldev && (c.status || !c.lgpu ||
				       sw_gpu_write_drain(ep, c.lgpu)))
				s->status = RKV_WC_GENERAL_ERR;
			sw_ep_sq_emit(ep);
		}
		break;
	case SW_RX_WRITE:
		/* A GPU write is complete in device memory before the
		 * initiator hears of it. */
		if (c.gpu && sw_gpu_write_drain(ep, c.gpu) &&
		    c.status == RKV_WC_SUCCESS)
			c.status = RKV_WC_REM_OP_ERR;
		sw_ep_respond(ep, c.h.seq, c.status, 0, NULL, 0);
		if (c.status != RKV_WC_SUCCESS)
			sw_ep_fail(ep);
		break;
	case SW_RX_UNEXP:
		c.ux->got = c.ux->len;
		sw_ep_match_unexp(ep);
		break;
	default:
		break;
	}
}

/* n payload bytes of a READ landed at c->dst + off: fed to its digest
 * (RKV_WR_DIGEST) while they are in the cache, from digest_off on. */
static void rx_digest(const struct sw_rxcur *c, uint64_t off, size_t n)
{
	uint64_t from = off > c->digest_off ? off : c->digest_off;

	if (c->digest && from < off + n)
		rkv_hash_update(c->digest, c->dst + from,
				(size_t)(off + n - from));
}

static void rx_sink(struct sw_ep *ep, const uint8_t *p, size_t n)
{
	struct sw_rxcur *c = &ep->cur;
	void *dst;
	uint64_t k;

	switch (c->kind) {
	case SW_RX_MEM:
		if (c->ldev) {
			if (c->lgpu && c->status == RKV_WC_SUCCESS &&
			    sw_gpu_write_piece(ep, c->lgpu, c->dst + c->off, p,
					       n) != RKV_WC_SUCCESS)
				c->status = RKV_WC_GENERAL_ERR;
			break;
		}
		memcpy(c->dst + c->off, p, n);
		rx_digest(c, c->off, n);
		break;
	case SW_RX_UNEXP:
		memcpy(c->ux->data + c->off, p, n);
		break;
	case SW_RX_WRITE:
		/* Re-checked per chunk: a deregistration between two chunks
		 * stops the write (the MR read lock is held meanwhile). */
		if (c->status != RKV_WC_SUCCESS)
			break;
		if (sw_mrtab_check_remote(&ep->tp->mrt, c->h.key, ep->wsalt,
					  c->h.addr + c->off, n,
					  RKV_ACCESS_REMOTE_WRITE, &dst,
					  &k) != RKV_WC_SUCCESS ||
		    k != c->key)
			c->status = RKV_WC_REM_ACCESS_ERR;
		else if (c->gpu)
			c->status = sw_gpu_write_piece(ep, c->gpu, dst, p, n);
		else
			memcpy(dst, p, n);
		break;
	default:
		break;
	}
}

static int rx_resp(struct sw_ep *ep, const struct sw_hdr *h)
{
	struct sw_sqe *s;

	if (h->seq - ep->sq_head >= ep->sq_tail - ep->sq_head) {
		sw_ep_proto_error(ep, "response to no outstanding request");
		return -EPROTO;
	}
	s = sw_sq_at(ep, h->seq);
	if (s->done) {
		sw_ep_proto_error(ep, "response to a completed request");
		return -EPROTO;
	}
	if (h->key != RKV_WC_SUCCESS) { /* no payload: sw_frame_check */
		s->done = 1;
		s->status = (int)h->key;
		sw_ep_sq_emit(ep);
		return 0;
	}
	if (h->len != (s->opcode == RKV_WR_READ ? s->length : 0)) {
		sw_ep_proto_error(ep, "response length mismatch");
		return -EPROTO;
	}
	switch (s->opcode) {
	case RKV_WR_READ:
		if (h->len) {
			memset(&ep->cur, 0, sizeof(ep->cur));
			ep->cur.kind = SW_RX_MEM;
			ep->cur.dst = s->local;
			ep->cur.remaining = h->len;
			ep->cur.h = *h;
			ep->cur.digest = s->gpu < 0 ? s->digest : NULL;
			ep->cur.digest_off = s->digest_off;
			if (s->gpu >= 0) {
				/* into local device memory: pinned staging */
				ep->cur.ldev = true;
				ep->cur.lgpu = sw_gpu_get(ep->tp, s->gpu);
				if (!ep->cur.lgpu)
					ep->cur.status = RKV_WC_GENERAL_ERR;
			}
			return 0;
		}
		break;
	case RKV_WR_CAS:
	case RKV_WR_FETCH_ADD:
		if (s->gpu >= 0) {
			if (rkv_cuda_copy(s->gpu, s->local, &h->arg0, 8)) {
				sw_log(ep->tp, RKV_LOG_ERROR,
				       "peer %s: atomic result into GPU %d "
				       "memory: copy failed: %s", ep->base.peer,
				       s->gpu, rkv_cuda_strerror());
				s->done = 1;
				s->status = RKV_WC_GENERAL_ERR;
				sw_ep_sq_emit(ep);
				return 0;
			}
			break;
		}
		memcpy(s->local, &h->arg0, 8);
		break;
	default:
		break;
	}
	s->done = 1;
	s->status = RKV_WC_SUCCESS;
	sw_ep_sq_emit(ep);
	return 0;
}

static int rx_send(struct sw_ep *ep, const struct sw_hdr *h)
{
	struct sw_unexp *u;

	if (!ep->ux_head && ep->rq_head != ep->rq_tail) {
		struct sw_rqe *r = &ep->rq[ep->rq_head % ep->rq_cap];

		ep->rq_head++;
		if (h->len > r->length) {
			sw_ep_push_wc(ep, r->wr_id, RKV_WC_LOC_LEN_ERR,
				      RKV_WR_RECV, h->len);
			sw_ep_respond(ep, h->seq, RKV_WC_REM_INV_REQ_ERR, 0,
				      NULL, 0);
			sw_ep_fail(ep);
			return 0;
		}
		if (!h->len) {
			sw_ep_push_wc(ep, r->wr_id, RKV_WC_SUCCESS, RKV_WR_RECV,
				      0);
			sw_ep_respond(ep, h->seq, RKV_WC_SUCCESS, 0, NULL, 0);
			return 0;
		}
		memset(&ep->cur, 0, sizeof(ep->cur));
		ep->cur.kind = SW_RX_MEM;
		ep->cur.is_recv = true;
		ep->cur.rq_wr_id = r->wr_id;
		ep->cur.dst = r->local;
		ep->cur.remaining = h->len;
		ep->cur.h = *h;
		return 0;
	}
	/* Receiver not ready: keep a bounded amount, tell the sender. */
	u = NULL;
	if (ep->ux_count < ep->tp->base.opts.max_unexpected &&
	    ep->ux_bytes + h->len <= ep->tp->base.opts.max_unexpected_bytes)
		u = rkv_malloc(sizeof(*u) + h->len);
	memset(&ep->cur, 0, sizeof(ep->cur));
	ep->cur.h = *h;
	ep->cur.remaining = h->len;
	if (!u) {
		sw_ep_respond(ep, h->seq, RKV_WC_RNR_RETRY_EXC_ERR, 0, NULL, 0);
		ep->cur.kind = h->len ? SW_RX_DISCARD : SW_RX_NONE;
		return 0;
	}
	u->next = NULL;
	u->seq = h->seq;
	u->len = h->len;
	u->got = 0;
	if (ep->ux_tail)
		ep->ux_tail->next = u;
	else
		ep->ux_head = u;
	ep->ux_tail = u;
	ep->ux_bytes += h->len;
	ep->ux_count++;
	{
		struct sw_hdr r = { .type = SW_F_RNR, .seq = h->seq };

		sw_ep_tx_frame(ep, &r, NULL, 0);
	}
	if (h->len) {
		ep->cur.kind = SW_RX_UNEXP;
		ep->cur.ux = u;
	}
	return 0;
}

static int rx_atomic(struct sw_ep *ep, const struct sw_hdr *h)
{
	void *p;
	uint64_t old, k;
	int st;

	if (h->addr & 7) {
		sw_ep_respond(ep, h->seq, RKV_WC_REM_INV_REQ_ERR, 0, NULL, 0);
		sw_ep_fail(ep);
		return 0;
	}
	st = sw_mrtab_check_remote(&ep->tp->mrt, h->key, ep->wsalt, h->addr, 8,
				   RKV_ACCESS_REMOTE_ATOMIC, &p, &k);
	if (st == RKV_WC_SUCCESS && SW_KEY_GPU1(k)) {
		/* device memory: a one-thread kernel does the atomic */
		if (rkv_cuda_atomic64((int)SW_KEY_GPU1(k) - 1, p,
				      h->type == SW_F_CAS ? RKV_CUDA_CAS
							  : RKV_CUDA_FADD,
				      h->arg0, h->arg1, &old)) {
			sw_log(ep->tp, RKV_LOG_ERROR,
			       "peer %s: atomic on GPU memory failed: %s",
			       ep->base.peer, rkv_cuda_strerror());
			st = RKV_WC_REM_OP_ERR;
		} else {
			sw_ep_respond(ep, h->seq, RKV_WC_SUCCESS, old, NULL, 0);
			return 0;
		}
	}
	if (st != RKV_WC_SUCCESS) {
		sw_ep_respond(ep, h->seq, st, 0, NULL, 0);
		sw_ep_fail(ep);
		return 0;
	}
	if (h->type == SW_F_CAS) {
		old = h->arg0;
		__atomic_compare_exchange_n((uint64_t *)p, &old, h->arg1, false,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	} else {
		old = __atomic_fetch_add((uint64_t *)p, h->arg0,
					 __ATOMIC_SEQ_CST);
	}
	sw_ep_respond(ep, h->seq, RKV_WC_SUCCESS, old, NULL, 0);
	return 0;
}

/*
 * READ responses of this batch still point into regions: send or copy them
 * before a later WRITE or atomic of the same endpoint changes the memory,
 * so a READ never sees a write posted after it.
 */
static void settle_reads(struct sw_ep *ep)
{
	if (ep->tx_refs_region)
		sw_ep_tx_commit(ep);
}

static void frame_error(struct sw_ep *ep, const struct sw_hdr *h)
{
	char why[64];

	if (ep->closed)
		return;
	snprintf(why, sizeof(why), "invalid frame (type %u, len %u)", h->type,
		 h->len);
	sw_ep_proto_error(ep, why);
}

/* tcp target: a READ request; the response goes out with the batch. */
static int rx_read(struct sw_ep *ep, const struct sw_hdr *h)
{
	void *p;
	uint64_t k;
	int st;

	st = sw_mrtab_check_remote(&ep->tp->mrt, h->key, ep->wsalt, h->addr, h->arg0,
				   RKV_ACCESS_REMOTE_READ, &p, &k);
	if (st == RKV_WC_SUCCESS && SW_KEY_GPU1(k) && h->arg0)
		st = sw_gpu_read(ep, h->seq, p, h->arg0,
				 (int)SW_KEY_GPU1(k) - 1);
	else if (st == RKV_WC_SUCCESS)
		k = 0;
	if (st != RKV_WC_SUCCESS) {
		sw_ep_respond(ep, h->seq, st, 0, NULL, 0);
		sw_ep_fail(ep);
		return 0;
	}
	if (SW_KEY_GPU1(k))
		return 0; /* sw_gpu_read sent it */
	sw_ep_respond(ep, h->seq, RKV_WC_SUCCESS, 0, p, (uint32_t)h->arg0);
	ep->tx_refs_region = h->arg0 != 0;
	return 0;
}

/* tcp target: a WRITE request; its payload follows (SW_RX_WRITE). */
static int rx_write(struct sw_ep *ep, const struct sw_hdr *h)
{
	void *p;
	uint64_t k;
	int st;

	settle_reads(ep);
	st = sw_mrtab_check_remote(&ep->tp->mrt, h->key, ep->wsalt, h->addr, h->len,
				   RKV_ACCESS_REMOTE_WRITE, &p, &k);
	if (st != RKV_WC_SUCCESS) {
		sw_ep_respond(ep, h->seq, st, 0, NULL, 0);
		sw_ep_fail(ep);
		return 0;
	}
	if (!h->len) {
		sw_ep_respond(ep, h->seq, RKV_WC_SUCCESS, 0, NULL, 0);
		return 0;
	}
	memset(&ep->cur, 0, sizeof(ep->cur));
	ep->cur.kind = SW_RX_WRITE;
	ep->cur.remaining = h->len;
	ep->cur.h = *h;
	ep->cur.key = k;
	ep->cur.status = RKV_WC_SUCCESS;
	if (SW_KEY_GPU1(k)) {
		ep->cur.gpu = sw_gpu_get(ep->tp, (int)SW_KEY_GPU1(k) - 1);
		if (!ep->cur.gpu)
			ep->cur.status = RKV_WC_REM_OP_ERR;
	}
	return 0;
}

/* Act on a frame that passed sw_frame_check. */
static int rx_frame(struct sw_ep *ep, const struct sw_hdr *h)
{
	const struct sw_prov *pv = ep->tp->prov;

	switch (h->type) {
	case SW_F_READ:
		if (!pv->remote_exec)
			break;
		return rx_read(ep, h);
	case SW_F_WRITE:
		if (!pv->remote_exec)
			break;
		return rx_write(ep, h);
	case SW_F_CAS:
	case SW_F_FADD:
		if (!pv->remote_exec)
			break;
		settle_reads(ep);
		return rx_atomic(ep, h);
	case SW_F_SEND:
		return rx_send(ep, h);
	case SW_F_RESP:
		return rx_resp(ep, h);
	case SW_F_RNR:
		if (h->seq - ep->sq_head >= ep->sq_tail - ep->sq_head ||
		    sw_sq_at(ep, h->seq)->opcode != RKV_WR_SEND)
			break;
		sw_sq_at(ep, h->seq)->rnr = 1;
		return 0;
	case SW_F_MAP_REQ:
	case SW_F_MAP_RESP:
		if (!pv->frame)
			break;
		if (pv->frame(ep, h) == 0)
			return 0;
		break;
	default: /* HELLO, HELLO_ACK: only in the handshake */
		break;
	}
	frame_error(ep, h);
	return -EPROTO;
}

static void rx_parse(struct sw_ep *ep)
{
	bool rd = ep->tp->prov->remote_exec;

	if (rd)
		pthread_rwlock_rdlock(&ep->tp->mrt.lock);
	while (!ep->closed && ep->base.state == RKV_EP_CONNECTED) {
		struct sw_hdr h;
		int rc;

		if (ep->cur.kind != SW_RX_NONE) {
			size_t take = ep->rx_len < ep->cur.remaining
					      ? ep->rx_len
					      : (size_t)ep->cur.remaining;

			if (!take)
				break;
			rx_sink(ep, ep->rxbuf + ep->rx_off, take);
			ep->rx_off += take;
			ep->rx_len -= take;
			ep->cur.off += take;
			ep->cur.remaining -= take;
			if (!ep->cur.remaining)
				rx_finish(ep);
			continue;
		}
		/* Bounded output: a peer that floods READ requests without
		 * reading the answers stops being parsed once the backlog
		 * (staged and unsent) passes SW_TX_HIGH; the rest of its
		 * bytes wait in rxbuf until the backlog drains. */
		if (ep->tx_len + ep->stage_len >= SW_TX_HIGH) {
			sw_ep_tx_commit(ep);
			if (ep->tx_len >= SW_TX_HIGH)
				break;
		}
		rc = sw_frame_check(ep->rxbuf + ep->rx_off, ep->rx_len, &h);
		if (rc == -EAGAIN)
			break;
		if (rc == -EPROTO) {
			sw_ep_proto_error(ep, "bad frame header");
			break;
		}
		if (rc) {
			frame_error(ep, &h);
			break;
		}
		ep->rx_off += SW_HDR_LEN;
		ep->rx_len -= SW_HDR_LEN;
		if (rx_frame(ep, &h))
			break;
	}
	if (ep->closed || ep->base.state != RKV_EP_CONNECTED)
		ep->rx_len = 0;
	if (!ep->rx_len)
		ep->rx_off = 0;
	if (rd) {
		/* READ responses point into regions: copy them out while
		 * deregistration is held off. */
		sw_ep_tx_commit(ep);
		pthread_rwlock_unlock(&ep->tp->mrt.lock);
	}
}

static ssize_t ep_recv(struct sw_ep *ep, void *buf, size_t len)
{
	if (ep->tp->prov->unix_fds)
		return sw_sock_recv(ep->fd, buf, len, ep->fdq, &ep->nfdq,
				    SW_MAX_FDQ);
	return recv(ep->fd, buf, len, MSG_DONTWAIT);
}

/*
 * Whoever waits on ep's socket next (a polling initiator in ppoll, the
 * target thread in epoll) sleeps, in the middle of a large payload (a
 * READ response, a WRITE), until a good piece of it is there rather than
 * until the next segment: the socket's receive low-water mark is what is
 * left of the payload, at most RX_LOWAT_MAX (a hang-up or an error still
 * wakes), and back to the default otherwise.  Without it a 16 MiB get on
 * tcp woke once per 64 KiB or so and took twice the time of a poller
 * that spun (5.3 against 11 ms p50 here).
 */
#define RX_LOWAT_MIN (64u * 1024)
#define RX_LOWAT_MAX (512u * 1024)

/* A READ with a digest takes its payload in pieces of at most this much,
 * each hashed while it is in the cache (L2) after the kernel's copy. */
#define RX_DIGEST_PIECE (256u * 1024)

static void rx_lowat(struct sw_ep *ep)
{
	const struct sw_rxcur *c = &ep->cur;
	int want = 0;

	if (ep->tp->prov->unix_fds || ep->closed)
		return; /* shm: no payload streams through its socket */
	if (((c->kind == SW_RX_MEM && !c->is_recv) || c->kind == SW_RX_WRITE) &&
	    !ep->rx_len && c->remaining > RX_LOWAT_MIN)
		want = c->remaining > RX_LOWAT_MAX ? (int)RX_LOWAT_MAX :
						     (int)c->remaining;
	sw_ep_rcvlowat(ep, want);
}

void sw_ep_rx_locked(struct sw_ep *ep)
{
	/* frames left buffered while the output backlog was too high */
	if (ep->rx_len && ep->cur.kind == SW_RX_NONE && !ep->closed &&
	    ep->base.state == RKV_EP_CONNECTED && ep->tx_len < SW_TX_HIGH)
		rx_parse(ep);
	for (int iter = 0; iter < 32; iter++) {
		ssize_t n;
		size_t want;

		if (ep->closed || ep->base.state != RKV_EP_CONNECTED ||
		    ep->tx_len >= SW_TX_HIGH)
			break;
		if (ep->cur.kind == SW_RX_MEM && !ep->rx_len &&
		    ep->cur.remaining >= SW_DIRECT_MIN && !ep->cur.ldev) {
			/* Large payload into plain memory: no bounce. */
			want = (size_t)ep->cur.remaining;
			if (ep->cur.digest && want > RX_DIGEST_PIECE)
				want = RX_DIGEST_PIECE;
			n = ep_recv(ep, ep->cur.dst + ep->cur.off, want);
			if (n > 0) {
				sw_hb_acquire();
				ep->last_rx = rkv_now_ns();
				rx_digest(&ep->cur, ep->cur.off, (size_t)n);
				ep->cur.off += (size_t)n;
				ep->cur.remaining -= (size_t)n;
				if (!ep->cur.remaining)
					rx_finish(ep);
				if ((size_t)n < want)
					break;
				continue;
			}
		} else {
			if (ep->rx_off && ep->rx_off + ep->rx_len > SW_RXBUF / 2) {
				memmove(ep->rxbuf, ep->rxbuf + ep->rx_off,
					ep->rx_len);
				ep->rx_off = 0;
			}
			want = SW_RXBUF - ep->rx_off - ep->rx_len;
			n = ep_recv(ep, ep->rxbuf + ep->rx_off + ep->rx_len,
				    want);
			if (n > 0) {
				sw_hb_acquire();
				ep->last_rx = rkv_now_ns();
				ep->rx_len += (size_t)n;
				rx_parse(ep);
				if ((size_t)n < want)
					break;
				continue;
			}
		}
		if (n == 0) {
			if (ep->cur.kind != SW_RX_NONE || ep->rx_len)
				sw_ep_proto_error(ep, "truncated frame");
			else
				sw_ep_link_lost(ep, RKV_WC_RETRY_EXC_ERR,
						"connection closed by peer",
						true);
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			int err = errno;
			char why[96];

			snprintf(why, sizeof(why), "receive failed: %s",
				 strerror(err));
			sw_ep_link_lost(ep, RKV_WC_RETRY_EXC_ERR, why,
					err == ECONNRESET);
		}
		break;
	}
	rx_lowat(ep);
	sw_ep_tx_commit(ep);
}
