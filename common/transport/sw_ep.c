/* SPDX-License-Identifier: MIT */
/*
 * sw_ep.c - endpoints of the software providers: framing, the send and
 * receive queues, SEND/RECV, and (tcp) one-sided requests executed at the
 * target.
 *
 * tx: the frames of one post (a chain, one doorbell) are gathered as
 * iovecs - headers staged in the endpoint, payloads pointing at the
 * caller's memory - and go out in one sendmsg.  What the socket does not
 * take is copied into txbuf and flushed later by progress, so a payload is
 * never referenced after the call that queued it returns (a READ response
 * is copied under the MR read lock, so deregistration cannot race it).
 *
 * rx: bytes are read into a 256 KiB buffer and parsed frame by frame;
 * headers are validated (magic, version, type, lengths, sequence numbers)
 * before anything is trusted, and a violation drops the connection with a
 * warning.  A large payload headed for plain memory (READ response, RECV
 * buffer) is received straight into place.
 *
 * Errors follow RC: the first failing WR moves the endpoint to the error
 * state, after which every outstanding and later WR completes with
 * RKV_WC_WR_FLUSH_ERR, posted RECVs are flushed, and the socket is shut
 * down (after the pending output, e.g. an error response, has drained), so
 * the peer's endpoint fails too.
 */
#include "sw.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../alloc.h"
#include "../log.h"
#include "../rtime.h"

#define SW_DIRECT_MIN (16u * 1024)

/* ------------------------------------------------------------ TSan edges */
#if defined(__SANITIZE_THREAD__)
#define SW_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SW_TSAN 1
#endif
#endif

#ifdef SW_TSAN
static uint64_t g_sw_hb;
#endif

void sw_hb_release(void)
{
#ifdef SW_TSAN
	__atomic_fetch_add(&g_sw_hb, 1, __ATOMIC_RELEASE);
#endif
}

void sw_hb_acquire(void)
{
#ifdef SW_TSAN
	(void)__atomic_load_n(&g_sw_hb, __ATOMIC_ACQUIRE);
#endif
}

/* ---------------------------------------------------------------- headers */
static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

void sw_hdr_encode(const struct sw_hdr *h, uint8_t *out)
{
	put32(out, SW_MAGIC);
	out[4] = SW_VERSION;
	out[5] = h->type;
	out[6] = 0;
	out[7] = 0;
	put32(out + 8, h->len);
	put32(out + 12, h->key);
	put64(out + 16, h->seq);
	put64(out + 24, h->addr);
	put64(out + 32, h->arg0);
	put64(out + 40, h->arg1);
}

int sw_hdr_decode(const uint8_t *in, struct sw_hdr *h)
{
	if (get32(in) != SW_MAGIC || in[4] != SW_VERSION || in[5] == 0 ||
	    in[5] >= SW_F_MAX || in[6] || in[7])
		return -EPROTO;
	h->type = in[5];
	h->len = get32(in + 8);
	h->key = get32(in + 12);
	h->seq = get64(in + 16);
	h->addr = get64(in + 24);
	h->arg0 = get64(in + 32);
	h->arg1 = get64(in + 40);
	return 0;
}

int sw_frame_check(const void *buf, size_t n, struct sw_hdr *h)
{
	if (n < SW_HDR_LEN)
		return -EAGAIN;
	if (sw_hdr_decode(buf, h))
		return -EPROTO;
	switch (h->type) {
	case SW_F_READ:
		if (h->len || h->arg0 > RKV_TP_MAX_MSG)
			return -EBADMSG;
		break;
	case SW_F_WRITE:
	case SW_F_SEND:
		if (h->len > RKV_TP_MAX_MSG)
			return -EBADMSG;
		break;
	case SW_F_RESP:
		if (h->key > RKV_WC_GENERAL_ERR || h->len > RKV_TP_MAX_MSG ||
		    (h->key != RKV_WC_SUCCESS && h->len))
			return -EBADMSG;
		break;
	default: /* HELLO, HELLO_ACK, CAS, FADD, RNR, MAP_REQ, MAP_RESP */
		if (h->len)
			return -EBADMSG;
		break;
	}
	return 0;
}

/* ---------------------------------------------------------------- sockets */
void sw_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

union sw_cmsg {
	struct cmsghdr h;
	char b[CMSG_SPACE(sizeof(int) * SW_MAX_FDQ)];
};

ssize_t sw_sock_recv(int fd, void *buf, size_t len, int *fds, unsigned *nfds,
		     unsigned maxfds)
{
	union sw_cmsg cb;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;
	ssize_t n;

	if (!fds)
		return recv(fd, buf, len, MSG_DONTWAIT);
	m.msg_control = cb.b;
	m.msg_controllen = sizeof(cb.b);
	n = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return n;
	for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int f;

			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(f));
			if (*nfds < maxfds)
				fds[(*nfds)++] = f;
			else
				close(f);
		}
	}
	return n;
}

static ssize_t sock_send(struct sw_ep *ep, struct iovec *iov, unsigned n)
{
	union sw_cmsg cb;
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = n };
	ssize_t r;

	if (ep->ntx_fds) {
		struct cmsghdr *c;

		memset(&cb, 0, sizeof(cb));
		m.msg_control = cb.b;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * ep->ntx_fds);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * ep->ntx_fds);
		memcpy(CMSG_DATA(c), ep->tx_fds, sizeof(int) * ep->ntx_fds);
	}
	r = sendmsg(ep->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (r > 0) {
		for (unsigned i = 0; i < ep->ntx_fds; i++)
			if (ep->tx_fds_close[i])
				close(ep->tx_fds[i]);
		ep->ntx_fds = 0;
		if (ep->tp->prov->after_tx)
			ep->tp->prov->after_tx(ep);
	}
	return r;
}

int sw_ep_tx_fd(struct sw_ep *ep, int fd, bool close_after)
{
	if (ep->ntx_fds == SW_MAX_FDQ)
		return -ENOSPC;
	ep->tx_fds[ep->ntx_fds] = fd;
	ep->tx_fds_close[ep->ntx_fds] = close_after;
	ep->ntx_fds++;
	return 0;
}

int sw_ep_fd_pop(struct sw_ep *ep)
{
	int fd;

	if (!ep->nfdq)
		return -1;
	fd = ep->fdq[0];
	memmove(ep->fdq, ep->fdq + 1, (ep->nfdq - 1) * sizeof(int));
	ep->nfdq--;
	return fd;
}

/* --------------------------------------------------------------------- tx */
static void tx_flush(struct sw_ep *ep)
{
	while (ep->tx_len && !ep->closed) {
		struct iovec v = { .iov_base = ep->txbuf + ep->tx_off,
				   .iov_len = ep->tx_len };
		ssize_t n = sock_send(ep, &v, 1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				ep->io_err = true;
			break;
		}
		ep->tx_off += (size_t)n;
		ep->tx_len -= (size_t)n;
	}
	if (!ep->tx_len) {
		ep->tx_off = 0;
		/* Don't sit on a huge buffer after a burst of large ops. */
		if (ep->tx_cap > 8u * 1024 * 1024) {
			rkv_free(ep->txbuf);
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
			nb = rkv_realloc(ep->txbuf, cap);
			if (!nb) {
				rkv_log(RKV_LOG_ERROR, ep->tp->prov->comp,
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
	bool direct = false;

	if (!ep->niov)
		return;
	if (ep->closed || ep->io_err)
		goto out;
	sw_hb_release();
	if (!ep->tx_len) {
		ssize_t n;

		direct = true;
		do {
			n = sock_send(ep, ep->iov, ep->niov);
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
	if (!direct && !ep->io_err)
		tx_flush(ep);
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

static void respond(struct sw_ep *ep, uint64_t seq, int status, uint64_t arg0,
		    const void *payload, uint32_t len)
{
	struct sw_hdr h = { .type = SW_F_RESP, .len = len,
			    .key = (uint32_t)status, .seq = seq, .arg0 = arg0 };

	sw_ep_tx_frame(ep, &h, payload, len);
}

/* ------------------------------------------------------------ completions */
static void push_wc(struct sw_ep *ep, uint64_t wr_id, int status,
		    enum rkv_wr_opcode op, uint32_t byte_len)
{
	struct rkv_wc wc = { .wr_id = wr_id,
			     .status = (enum rkv_wc_status)status,
			     .opcode = op,
			     .byte_len = byte_len,
			     .ep = &ep->base };

	sw_cq_push(ep->cq, &wc);
}

static struct sw_sqe *sq_at(struct sw_ep *ep, uint64_t seq)
{
	return &ep->sq[seq % ep->sq_cap];
}

/* Emit completions of done WRs at the head, in posting order. */
static void sq_emit(struct sw_ep *ep)
{
	while (ep->sq_head != ep->sq_tail) {
		struct sw_sqe *s = sq_at(ep, ep->sq_head);
		bool fail;

		if (!s->done)
			break;
		fail = s->status != RKV_WC_SUCCESS;
		if (fail || s->signaled)
			push_wc(ep, s->wr_id, s->status,
				(enum rkv_wr_opcode)s->opcode, 0);
		/* Read lock-free by shm's post to see an empty queue. */
		__atomic_store_n(&ep->sq_head, ep->sq_head + 1,
				 __ATOMIC_RELEASE);
		if (fail)
			sw_ep_enter_error_locked(ep);
	}
}

static void do_close(struct sw_ep *ep)
{
	if (ep->closed)
		return;
	shutdown(ep->fd, SHUT_RDWR);
	ep->closed = true;
	ep->draining = false;
	ep->tx_len = 0;
	ep->tx_off = 0;
	ep->rx_len = 0;
	ep->rx_off = 0;
	ep->cur.kind = SW_RX_NONE;
	ep->io_err = false;
}

/* Shut the socket down once pending output (an error response) is out. */
static void link_close(struct sw_ep *ep)
{
	if (ep->closed)
		return;
	sw_ep_tx_commit(ep); /* frames staged so far, e.g. the error response */
	if (ep->tx_len && !ep->io_err)
		tx_flush(ep);
	if (ep->tx_len && !ep->io_err) {
		ep->draining = true;
		ep->drain_deadline = rkv_now_ns() + ep->timeout_ns;
		return;
	}
	do_close(ep);
}

static void free_unexp(struct sw_ep *ep)
{
	struct sw_unexp *u = ep->ux_head;

	while (u) {
		struct sw_unexp *n = u->next;

		rkv_free(u);
		u = n;
	}
	ep->ux_head = ep->ux_tail = NULL;
	ep->ux_bytes = 0;
	ep->ux_count = 0;
}

void sw_ep_enter_error_locked(struct sw_ep *ep)
{
	if (ep->base.state == RKV_EP_ERROR)
		return;
	/* Set before any completion is pushed: a poller that sees one of
	 * them (acquire) sees the state too. */
	__atomic_store_n(&ep->base.state, RKV_EP_ERROR, __ATOMIC_RELEASE);
	for (uint64_t q = ep->sq_head; q != ep->sq_tail; q++) {
		struct sw_sqe *s = sq_at(ep, q);

		if (!s->done) {
			s->done = 1;
			s->status = RKV_WC_WR_FLUSH_ERR;
		}
	}
	__atomic_store_n(&ep->err_pending, false, __ATOMIC_RELAXED);
	if (ep->cur.kind == SW_RX_MEM && ep->cur.is_recv)
		push_wc(ep, ep->cur.rq_wr_id, RKV_WC_WR_FLUSH_ERR,
			RKV_WR_RECV, 0);
	ep->cur.kind = SW_RX_NONE;
	for (; ep->rq_head != ep->rq_tail; ep->rq_head++)
		push_wc(ep, ep->rq[ep->rq_head % ep->rq_cap].wr_id,
			RKV_WC_WR_FLUSH_ERR, RKV_WR_RECV, 0);
	free_unexp(ep);
	link_close(ep);
}

static void ep_fail(struct sw_ep *ep)
{
	sw_ep_enter_error_locked(ep);
	sq_emit(ep);
}

/* The link is gone (EOF, reset, garbage, timeout). */
static void link_lost(struct sw_ep *ep, int status, const char *why)
{
	if (ep->base.state != RKV_EP_ERROR) {
		bool hit = false;

		for (uint64_t q = ep->sq_head; q != ep->sq_tail; q++) {
			struct sw_sqe *s = sq_at(ep, q);

			if (!s->done) {
				s->done = 1;
				s->status = s->rnr && status ==
							      RKV_WC_RETRY_EXC_ERR
						    ? RKV_WC_RNR_RETRY_EXC_ERR
						    : status;
				hit = true;
				break;
			}
		}
		/* As on a QP: with nothing outstanding, the next WR is the
		 * one that finds the peer gone. */
		if (!hit)
			ep->lost_status = status;
		rkv_log(RKV_LOG_INFO, ep->tp->prov->comp, "peer %s: %s",
			ep->base.peer, why);
		sw_ep_enter_error_locked(ep);
	}
	do_close(ep);
	sq_emit(ep);
}

void sw_ep_proto_error(struct sw_ep *ep, const char *why)
{
	rkv_log(RKV_LOG_WARN, ep->tp->prov->comp,
		"peer %s: %s; dropping the connection", ep->base.peer, why);
	link_lost(ep, RKV_WC_RETRY_EXC_ERR, why);
}

static int gpu_tx(struct sw_ep *ep, const struct sw_hdr *h, const void *src,
		  int gpu);

/* --------------------------------------------------------------- posting */
int sw_ep_post_one_locked(struct sw_ep *ep, const struct rkv_wr *wr,
			  int done_status, uint64_t now)
{
	struct sw_sqe *s;
	struct sw_hdr h = { 0 };
	int st, lgpu;

	if (ep->base.state == RKV_EP_ERROR && ep->sq_head == ep->sq_tail) {
		push_wc(ep, wr->wr_id,
			ep->lost_status ? ep->lost_status : RKV_WC_WR_FLUSH_ERR,
			wr->opcode, 0);
		ep->lost_status = 0;
		return 0;
	}
	if (ep->sq_tail - ep->sq_head >= ep->sq_cap)
		return -ENOMEM;
	s = sq_at(ep, ep->sq_tail);
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
	h.seq = ep->sq_tail;
	ep->sq_tail++;
	if (ep->base.state == RKV_EP_ERROR || ep->err_pending) {
		s->done = 1;
		s->status = RKV_WC_WR_FLUSH_ERR;
		sq_emit(ep);
		return 0;
	}
	if (done_status >= 0) {
		s->done = 1;
		s->status = done_status;
		if (done_status != RKV_WC_SUCCESS)
			__atomic_store_n(&ep->err_pending, true, __ATOMIC_RELAXED);
		sq_emit(ep);
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
		/* payload in local device memory: staged (gpu_tx) */
		h.addr = wr->opcode == RKV_WR_SEND ? 0 : wr->remote_addr;
		h.key = wr->opcode == RKV_WR_SEND ? 0 : wr->rkey;
		h.type = wr->opcode == RKV_WR_SEND ? SW_F_SEND : SW_F_WRITE;
		h.len = wr->length;
		st = gpu_tx(ep, &h, wr->local, lgpu);
		if (st == RKV_WC_SUCCESS)
			return 0;
	}
	if (st != RKV_WC_SUCCESS) {
		s->done = 1;
		s->status = st;
		__atomic_store_n(&ep->err_pending, true, __ATOMIC_RELAXED);
		sq_emit(ep);
		return 0;
	}
	h.addr = wr->remote_addr;
	h.key = wr->rkey;
	switch (wr->opcode) {
	case RKV_WR_READ:
		h.type = SW_F_READ;
		h.arg0 = wr->length;
		sw_ep_tx_frame(ep, &h, NULL, 0);
		break;
	case RKV_WR_WRITE:
		h.type = SW_F_WRITE;
		h.len = wr->length;
		sw_ep_tx_frame(ep, &h, wr->local, wr->length);
		break;
	case RKV_WR_CAS:
		h.type = SW_F_CAS;
		h.arg0 = wr->compare_add;
		h.arg1 = wr->swap;
		sw_ep_tx_frame(ep, &h, NULL, 0);
		break;
	case RKV_WR_FETCH_ADD:
		h.type = SW_F_FADD;
		h.arg0 = wr->compare_add;
		sw_ep_tx_frame(ep, &h, NULL, 0);
		break;
	case RKV_WR_SEND:
		h.type = SW_F_SEND;
		h.key = 0;
		h.addr = 0;
		h.len = wr->length;
		sw_ep_tx_frame(ep, &h, wr->local, wr->length);
		break;
	default:
		s->done = 1;
		s->status = RKV_WC_GENERAL_ERR;
		__atomic_store_n(&ep->err_pending, true, __ATOMIC_RELAXED);
		sq_emit(ep);
		break;
	}
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

/* Deliver complete unexpected SENDs into posted RECVs. */
static void match_unexp(struct sw_ep *ep)
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
			push_wc(ep, r->wr_id, RKV_WC_LOC_LEN_ERR, RKV_WR_RECV,
				u->len);
			respond(ep, u->seq, RKV_WC_REM_INV_REQ_ERR, 0, NULL, 0);
			rkv_free(u);
			ep_fail(ep);
			return;
		}
		if (u->len)
			memcpy(r->local, u->data, u->len);
		push_wc(ep, r->wr_id, RKV_WC_SUCCESS, RKV_WR_RECV, u->len);
		respond(ep, u->seq, RKV_WC_SUCCESS, 0, NULL, 0);
		rkv_free(u);
	}
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
			push_wc(ep, wr->wr_id, RKV_WC_WR_FLUSH_ERR,
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
			push_wc(ep, wr->wr_id, RKV_WC_LOC_PROT_ERR,
				RKV_WR_RECV, 0);
			ep_fail(ep);
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
	match_unexp(ep);
	sw_ep_tx_commit(ep);
	sw_ep_settle_locked(ep);
	pthread_mutex_unlock(&ep->lock);
	return rc;
}

/* ------------------------------------------------------------ GPU regions */
/*
 * Target side of GPU-resident regions (staging: sw_gpu.c).  The MR key
 * word says whether a region is device memory (SW_KEY_GPU1); host regions
 * never reach these functions.
 */
static void tx_payload(struct sw_ep *ep, const void *p, size_t n)
{
	if (ep->niov + 1 > SW_TX_IOV)
		sw_ep_tx_commit(ep);
	ep->iov[ep->niov].iov_base = (void *)p;
	ep->iov[ep->niov].iov_len = n;
	ep->niov++;
	ep->stage_len += n;
}

static size_t min_sz(uint64_t a, size_t b)
{
	return a < b ? (size_t)a : b;
}

/*
 * Send len bytes of device memory at src (g->lock held): chunk 0 (n bytes)
 * is already in pinned buffer b; chunk i+1 is copied into the other buffer
 * while chunk i goes to the socket (or into the endpoint's output buffer,
 * so the staging buffer is free again when sw_ep_tx_commit returns).
 * Returns 0 or the CUDA -errno that stopped it.
 */
static int gpu_pipe_out(struct sw_ep *ep, struct sw_gpu *g, unsigned b,
			size_t n, const uint8_t *src, uint64_t len)
{
	uint64_t off = 0;
	int rc = 0;

	while (off < len) {
		unsigned nb = b ^ 1;
		size_t nn = min_sz(len - off - n, SW_GPU_CHUNK);

		if (nn)
			rc = rkv_cuda_copy_async(g->s[nb], g->buf[nb],
						 src + off + n, nn);
		tx_payload(ep, g->buf[b], n);
		sw_ep_tx_commit(ep);
		off += n;
		if (nn && !rc)
			rc = rkv_cuda_stream_sync(g->s[nb]);
		if (rc || ep->closed || ep->io_err)
			break;
		b = nb;
		n = nn;
	}
	g->next = b ^ 1;
	return rc;
}

/*
 * READ of len bytes at device address src.  Chunk i+1 is copied to the
 * other pinned buffer while chunk i goes to the socket (or, when the
 * socket is full, into the endpoint's output buffer, so the staging buffer
 * is free again when sw_ep_tx_commit returns).  The first chunk is copied
 * before the response header is staged, so a CUDA failure there is an
 * ordinary REM_OP_ERR; a failure later can only end the connection.
 * Returns a WC status (SUCCESS also when the link was dropped).
 */
static int gpu_read(struct sw_ep *ep, uint64_t seq, const uint8_t *src,
		    uint64_t len, int gpu)
{
	struct sw_gpu *g = sw_gpu_get(ep->tp, gpu);
	struct sw_hdr r = { .type = SW_F_RESP, .len = (uint32_t)len,
			    .key = RKV_WC_SUCCESS, .seq = seq };
	unsigned b;
	size_t n;
	int rc;

	if (!g)
		return RKV_WC_REM_OP_ERR;
	pthread_mutex_lock(&g->lock);
	b = g->next;
	n = min_sz(len, SW_GPU_CHUNK);
	rc = rkv_cuda_copy_async(g->s[b], g->buf[b], src, n);
	if (!rc)
		rc = rkv_cuda_stream_sync(g->s[b]);
	if (rc) {
		pthread_mutex_unlock(&g->lock);
		rkv_log(RKV_LOG_ERROR, ep->tp->prov->comp,
			"peer %s: READ of GPU %d memory: copy failed: %s",
			ep->base.peer, gpu, rkv_cuda_strerror());
		return RKV_WC_REM_OP_ERR;
	}
	sw_ep_tx_frame(ep, &r, NULL, 0);
	rc = gpu_pipe_out(ep, g, b, n, src, len);
	pthread_mutex_unlock(&g->lock);
	if (rc) {
		rkv_log(RKV_LOG_ERROR, ep->tp->prov->comp,
			"peer %s: READ of GPU %d memory failed mid-way: %s",
			ep->base.peer, gpu, rkv_cuda_strerror());
		sw_ep_proto_error(ep, "GPU copy failed during a READ");
	}
	return RKV_WC_SUCCESS;
}

/*
 * Initiator: a WRITE or SEND whose payload (h->len bytes at src) is in
 * local device memory of gpu.  Like gpu_read the other way round: chunk
 * i+1 is copied device-to-host into the other pinned buffer while chunk i
 * goes out.  The first chunk is copied before the header is staged, so a
 * CUDA failure there completes the WR with GENERAL_ERR (returned); a
 * failure later ends the connection.
 */
static int gpu_tx(struct sw_ep *ep, const struct sw_hdr *h, const void *src,
		  int gpu)
{
	struct sw_gpu *g = sw_gpu_get(ep->tp, gpu);
	const uint8_t *sp = src;
	uint64_t len = h->len;
	unsigned b;
	size_t n;
	int rc;

	if (!g)
		return RKV_WC_GENERAL_ERR;
	pthread_mutex_lock(&g->lock);
	b = g->next;
	n = min_sz(len, SW_GPU_CHUNK);
	rc = rkv_cuda_stream_sync(g->s[b]);
	if (!rc)
		rc = rkv_cuda_copy_async(g->s[b], g->buf[b], sp, n);
	if (!rc)
		rc = rkv_cuda_stream_sync(g->s[b]);
	if (rc) {
		pthread_mutex_unlock(&g->lock);
		rkv_log(RKV_LOG_ERROR, ep->tp->prov->comp,
			"peer %s: %s from local GPU %d memory: copy failed: %s",
			ep->base.peer, h->type == SW_F_SEND ? "SEND" : "WRITE",
			gpu, rkv_cuda_strerror());
		return RKV_WC_GENERAL_ERR;
	}
	sw_ep_tx_frame(ep, h, NULL, 0);
	rc = gpu_pipe_out(ep, g, b, n, sp, len);
	pthread_mutex_unlock(&g->lock);
	if (rc) {
		rkv_log(RKV_LOG_ERROR, ep->tp->prov->comp,
			"peer %s: staging from local GPU %d failed mid-way: %s",
			ep->base.peer, gpu, rkv_cuda_strerror());
		sw_ep_proto_error(ep, "GPU copy failed during a WRITE");
	}
	return RKV_WC_SUCCESS;
}

/* One received piece of a WRITE into device memory at dst. */
static int gpu_write_piece(struct sw_ep *ep, struct sw_gpu *g, void *dst,
			   const uint8_t *p, size_t n)
{
	int rc = 0;

	pthread_mutex_lock(&g->lock);
	while (n && !rc) {
		unsigned b = g->next;
		size_t k = n < SW_GPU_CHUNK ? n : SW_GPU_CHUNK;

		/* the buffer's previous copy must be done before reuse */
		rc = rkv_cuda_stream_sync(g->s[b]);
		if (!rc) {
			memcpy(g->buf[b], p, k);
			rc = rkv_cuda_copy_async(g->s[b], dst, g->buf[b], k);
		}
		g->next = b ^ 1;
		dst = (uint8_t *)dst + k;
		p += k;
		n -= k;
	}
	pthread_mutex_unlock(&g->lock);
	if (rc) {
		rkv_log(RKV_LOG_ERROR, ep->tp->prov->comp,
			"peer %s: WRITE into GPU %d memory: copy failed: %s",
			ep->base.peer, g->gpu, rkv_cuda_strerror());
		return RKV_WC_REM_OP_ERR;
	}
	return RKV_WC_SUCCESS;
}

/* Wait for every queued host-to-device copy; returns 0 or -errno. */
static int gpu_write_drain(struct sw_ep *ep, struct sw_gpu *g)
{
	int rc, rc2;

	pthread_mutex_lock(&g->lock);
	rc = rkv_cuda_stream_sync(g->s[0]);
	rc2 = rkv_cuda_stream_sync(g->s[1]);
	pthread_mutex_unlock(&g->lock);
	if (!rc)
		rc = rc2;
	if (rc)
		rkv_log(RKV_LOG_ERROR, ep->tp->prov->comp,
			"peer %s: WRITE into GPU %d memory failed: %s",
			ep->base.peer, g->gpu, rkv_cuda_strerror());
	return rc;
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
			push_wc(ep, c.rq_wr_id, RKV_WC_SUCCESS, RKV_WR_RECV,
				c.h.len);
			respond(ep, c.h.seq, RKV_WC_SUCCESS, 0, NULL, 0);
		} else {
			s = sq_at(ep, c.h.seq);
			s->done = 1;
			s->status = RKV_WC_SUCCESS;
			/* into local GPU memory: landed before the completion */
			if (c.ldev && (c.status || !c.lgpu ||
				       gpu_write_drain(ep, c.lgpu)))
				s->status = RKV_WC_GENERAL_ERR;
			sq_emit(ep);
		}
		break;
	case SW_RX_WRITE:
		/* A GPU write is complete in device memory before the
		 * initiator hears of it. */
		if (c.gpu && gpu_write_drain(ep, c.gpu) &&
		    c.status == RKV_WC_SUCCESS)
			c.status = RKV_WC_REM_OP_ERR;
		respond(ep, c.h.seq, c.status, 0, NULL, 0);
		if (c.status != RKV_WC_SUCCESS)
			ep_fail(ep);
		break;
	case SW_RX_UNEXP:
		c.ux->got = c.ux->len;
		match_unexp(ep);
		break;
	default:
		break;
	}
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
			    gpu_write_piece(ep, c->lgpu, c->dst + c->off, p,
					    n) != RKV_WC_SUCCESS)
				c->status = RKV_WC_GENERAL_ERR;
			break;
		}
		memcpy(c->dst + c->off, p, n);
		break;
	case SW_RX_UNEXP:
		memcpy(c->ux->data + c->off, p, n);
		break;
	case SW_RX_WRITE:
		/* Re-checked per chunk: a deregistration between two chunks
		 * stops the write (the MR read lock is held meanwhile). */
		if (c->status != RKV_WC_SUCCESS)
			break;
		if (sw_mrtab_check_remote(&ep->tp->mrt, c->h.key,
					  c->h.addr + c->off, n,
					  RKV_ACCESS_REMOTE_WRITE, &dst,
					  &k) != RKV_WC_SUCCESS ||
		    k != c->key)
			c->status = RKV_WC_REM_ACCESS_ERR;
		else if (c->gpu)
			c->status = gpu_write_piece(ep, c->gpu, dst, p, n);
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
	s = sq_at(ep, h->seq);
	if (s->done) {
		sw_ep_proto_error(ep, "response to a completed request");
		return -EPROTO;
	}
	if (h->key != RKV_WC_SUCCESS) { /* no payload: sw_frame_check */
		s->done = 1;
		s->status = (int)h->key;
		sq_emit(ep);
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
				rkv_log(RKV_LOG_ERROR, ep->tp->prov->comp,
					"peer %s: atomic result into GPU %d "
					"memory: copy failed: %s",
					ep->base.peer, s->gpu,
					rkv_cuda_strerror());
				s->done = 1;
				s->status = RKV_WC_GENERAL_ERR;
				sq_emit(ep);
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
	sq_emit(ep);
	return 0;
}

static int rx_send(struct sw_ep *ep, const struct sw_hdr *h)
{
	struct sw_unexp *u;

	if (!ep->ux_head && ep->rq_head != ep->rq_tail) {
		struct sw_rqe *r = &ep->rq[ep->rq_head % ep->rq_cap];

		ep->rq_head++;
		if (h->len > r->length) {
			push_wc(ep, r->wr_id, RKV_WC_LOC_LEN_ERR, RKV_WR_RECV,
				h->len);
			respond(ep, h->seq, RKV_WC_REM_INV_REQ_ERR, 0, NULL, 0);
			ep_fail(ep);
			return 0;
		}
		if (!h->len) {
			push_wc(ep, r->wr_id, RKV_WC_SUCCESS, RKV_WR_RECV, 0);
			respond(ep, h->seq, RKV_WC_SUCCESS, 0, NULL, 0);
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
		respond(ep, h->seq, RKV_WC_RNR_RETRY_EXC_ERR, 0, NULL, 0);
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
		respond(ep, h->seq, RKV_WC_REM_INV_REQ_ERR, 0, NULL, 0);
		ep_fail(ep);
		return 0;
	}
	st = sw_mrtab_check_remote(&ep->tp->mrt, h->key, h->addr, 8,
				   RKV_ACCESS_REMOTE_ATOMIC, &p, &k);
	if (st == RKV_WC_SUCCESS && SW_KEY_GPU1(k)) {
		/* device memory: a one-thread kernel does the atomic */
		if (rkv_cuda_atomic64((int)SW_KEY_GPU1(k) - 1, p,
				      h->type == SW_F_CAS ? RKV_CUDA_CAS
							  : RKV_CUDA_FADD,
				      h->arg0, h->arg1, &old)) {
			rkv_log(RKV_LOG_ERROR, ep->tp->prov->comp,
				"peer %s: atomic on GPU memory failed: %s",
				ep->base.peer, rkv_cuda_strerror());
			st = RKV_WC_REM_OP_ERR;
		} else {
			respond(ep, h->seq, RKV_WC_SUCCESS, old, NULL, 0);
			return 0;
		}
	}
	if (st != RKV_WC_SUCCESS) {
		respond(ep, h->seq, st, 0, NULL, 0);
		ep_fail(ep);
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
	respond(ep, h->seq, RKV_WC_SUCCESS, old, NULL, 0);
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

/* Act on a frame that passed sw_frame_check. */
static int rx_frame(struct sw_ep *ep, const struct sw_hdr *h)
{
	const struct sw_prov *pv = ep->tp->prov;
	void *p;
	uint64_t k;
	int st;

	switch (h->type) {
	case SW_F_READ:
		if (!pv->remote_exec)
			break;
		st = sw_mrtab_check_remote(&ep->tp->mrt, h->key, h->addr,
					   h->arg0, RKV_ACCESS_REMOTE_READ, &p,
					   &k);
		if (st == RKV_WC_SUCCESS && SW_KEY_GPU1(k) && h->arg0)
			st = gpu_read(ep, h->seq, p, h->arg0,
				      (int)SW_KEY_GPU1(k) - 1);
		else if (st == RKV_WC_SUCCESS)
			k = 0;
		if (st != RKV_WC_SUCCESS) {
			respond(ep, h->seq, st, 0, NULL, 0);
			ep_fail(ep);
			return 0;
		}
		if (SW_KEY_GPU1(k))
			return 0; /* gpu_read sent it */
		respond(ep, h->seq, RKV_WC_SUCCESS, 0, p, (uint32_t)h->arg0);
		ep->tx_refs_region = h->arg0 != 0;
		return 0;
	case SW_F_WRITE:
		if (!pv->remote_exec)
			break;
		settle_reads(ep);
		st = sw_mrtab_check_remote(&ep->tp->mrt, h->key, h->addr,
					   h->len, RKV_ACCESS_REMOTE_WRITE, &p,
					   &k);
		if (st != RKV_WC_SUCCESS) {
			respond(ep, h->seq, st, 0, NULL, 0);
			ep_fail(ep);
			return 0;
		}
		if (!h->len) {
			respond(ep, h->seq, RKV_WC_SUCCESS, 0, NULL, 0);
			return 0;
		}
		memset(&ep->cur, 0, sizeof(ep->cur));
		ep->cur.kind = SW_RX_WRITE;
		ep->cur.remaining = h->len;
		ep->cur.h = *h;
		ep->cur.key = k;
		ep->cur.status = RKV_WC_SUCCESS;
		if (SW_KEY_GPU1(k)) {
			ep->cur.gpu = sw_gpu_get(ep->tp,
						 (int)SW_KEY_GPU1(k) - 1);
			if (!ep->cur.gpu)
				ep->cur.status = RKV_WC_REM_OP_ERR;
		}
		return 0;
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
		    sq_at(ep, h->seq)->opcode != RKV_WR_SEND)
			break;
		sq_at(ep, h->seq)->rnr = 1;
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
			n = ep_recv(ep, ep->cur.dst + ep->cur.off, want);
			if (n > 0) {
				sw_hb_acquire();
				ep->last_rx = rkv_now_ns();
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
				link_lost(ep, RKV_WC_RETRY_EXC_ERR,
					  "connection closed by peer");
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			char why[96];

			snprintf(why, sizeof(why), "receive failed: %s",
				 strerror(errno));
			link_lost(ep, RKV_WC_RETRY_EXC_ERR, why);
		}
		break;
	}
	sw_ep_tx_commit(ep);
}

/* ------------------------------------------------------------- progress */
static void update_interest(struct sw_ep *ep)
{
	struct epoll_event ev = { 0 };
	unsigned want = 0;

	if (!ep->in_epoll)
		return;
	if (ep->closed) {
		epoll_ctl(ep->tp->epfd, EPOLL_CTL_DEL, ep->fd, NULL);
		ep->in_epoll = false;
		return;
	}
	if (ep->base.state == RKV_EP_CONNECTED && ep->tx_len < SW_TX_HIGH)
		want |= EPOLLIN;
	if (ep->tx_len)
		want |= EPOLLOUT;
	if (want == ep->ev)
		return;
	ev.events = want;
	ev.data.u64 = ep->handle;
	if (epoll_ctl(ep->tp->epfd, EPOLL_CTL_MOD, ep->fd, &ev) == 0)
		ep->ev = want;
}

void sw_ep_settle_locked(struct sw_ep *ep)
{
	if (ep->io_err) {
		ep->io_err = false;
		link_lost(ep, RKV_WC_RETRY_EXC_ERR, "send failed");
	}
	if (ep->draining && !ep->tx_len)
		do_close(ep);
	if (ep->passive)
		update_interest(ep);
}

/*
 * A SEND to a polled peer (we accepted; the connector's endpoint makes
 * progress only when its owner polls) waits for that poll, where a NIC
 * would have acknowledged it at once: a live peer that is idle must not
 * look dead.  Alive means, on shm, that the socket is open (the kernel
 * closes it when the process dies) and, on tcp, also that the peer's
 * kernel acknowledged every byte we sent (SIOCOUTQ 0), which a dead or
 * unreachable host cannot do.  A receiver that polls but has no RECV
 * posted answers RNR, and that SEND still times out.
 */
static bool polled_peer_alive(struct sw_ep *ep)
{
	int outq = -1;

	if (!ep->passive)
		return false;
	if (ep->tp->prov->unix_fds)
		return true;
	return ioctl(ep->fd, SIOCOUTQ, &outq) == 0 && outq == 0;
}

static void tick_locked(struct sw_ep *ep, uint64_t now)
{
	struct sw_sqe *s;
	uint64_t base;

	if (ep->closed)
		return;
	if (ep->draining) {
		if (now > ep->drain_deadline)
			do_close(ep);
		return;
	}
	if (ep->base.state != RKV_EP_CONNECTED || ep->sq_head == ep->sq_tail)
		return;
	s = sq_at(ep, ep->sq_head);
	if (s->done)
		return;
	base = s->t_post;
	if (!s->rnr && ep->last_rx > base)
		base = ep->last_rx;
	if (now > base && now - base > ep->timeout_ns &&
	    !(s->opcode == RKV_WR_SEND && !s->rnr && polled_peer_alive(ep)))
		link_lost(ep, s->rnr ? RKV_WC_RNR_RETRY_EXC_ERR
				     : RKV_WC_RETRY_EXC_ERR,
			  s->rnr ? "no RECV posted within the timeout"
				 : "no response within the timeout");
}

void sw_ep_tick(struct sw_ep *ep, uint64_t now)
{
	pthread_mutex_lock(&ep->lock);
	tick_locked(ep, now);
	sw_ep_settle_locked(ep);
	pthread_mutex_unlock(&ep->lock);
}

void sw_ep_progress(struct sw_ep *ep, unsigned npoll)
{
	const struct sw_prov *pv = ep->tp->prov;
	bool gated = pv->gate != NULL;

	if (gated && !pv->gate(ep, npoll))
		return;
	pthread_mutex_lock(&ep->lock);
	if (!ep->closed) {
		if (ep->tx_len)
			tx_flush(ep);
		if (ep->base.state == RKV_EP_CONNECTED &&
		    (gated || ep->sq_head != ep->sq_tail ||
		     ep->rq_head != ep->rq_tail ||
		     ep->cur.kind != SW_RX_NONE || (npoll & 15) == 0))
			sw_ep_rx_locked(ep);
		if (ep->sq_head != ep->sq_tail || ep->draining)
			tick_locked(ep, rkv_now_ns());
	}
	sw_ep_settle_locked(ep);
	pthread_mutex_unlock(&ep->lock);
}

bool sw_ep_wait_on(struct sw_ep *ep, int *fd, short *events)
{
	bool wait = true;

	*fd = -1;
	*events = 0;
	pthread_mutex_lock(&ep->lock);
	if (ep->closed || ep->base.state == RKV_EP_ERROR) {
		/* only a failure still to report or a drain to finish */
		wait = !ep->draining && ep->sq_head == ep->sq_tail;
	} else if (ep->err_pending || ep->draining || ep->io_err ||
		   (ep->rx_len && ep->tx_len < SW_TX_HIGH)) {
		wait = false;
	} else {
		*fd = ep->fd;
		*events = POLLIN | (ep->tx_len ? POLLOUT : 0);
	}
	pthread_mutex_unlock(&ep->lock);
	return wait;
}

void sw_ep_event(struct sw_ep *ep, unsigned events)
{
	pthread_mutex_lock(&ep->lock);
	if (!ep->closed) {
		if (events & EPOLLOUT)
			tx_flush(ep);
		if (ep->rx_len && ep->tx_len < SW_TX_HIGH &&
		    ep->base.state == RKV_EP_CONNECTED)
			events |= EPOLLIN; /* parse what was held back */
		if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
			if (ep->base.state == RKV_EP_CONNECTED)
				sw_ep_rx_locked(ep);
			else if (events & (EPOLLHUP | EPOLLERR))
				do_close(ep);
		}
	}
	sw_ep_settle_locked(ep);
	pthread_mutex_unlock(&ep->lock);
}

/* ------------------------------------------------------------- lifetime */
int sw_ep_alloc(struct sw_tp *tp, struct sw_cq *cq, int fd, bool passive,
		const char *peer, struct sw_ep **out)
{
	struct sw_ep *ep = rkv_calloc(1, sizeof(*ep));
	pthread_condattr_t ca;

	if (!ep)
		return -ENOMEM;
	ep->fd = -1;
	ep->sq_cap = tp->base.opts.max_send_wr;
	ep->rq_cap = tp->base.opts.max_recv_wr;
	ep->sq = rkv_calloc(ep->sq_cap, sizeof(*ep->sq));
	ep->rq = rkv_calloc(ep->rq_cap, sizeof(*ep->rq));
	ep->rxbuf = rkv_malloc(SW_RXBUF);
	if (!ep->sq || !ep->rq || !ep->rxbuf)
		goto free_bufs;
	if (pthread_mutex_init(&ep->lock, NULL))
		goto free_bufs;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&ep->cond, &ca)) {
		pthread_condattr_destroy(&ca);
		goto destroy_lock;
	}
	pthread_condattr_destroy(&ca);
	ep->tp = tp;
	ep->cq = cq;
	ep->fd = fd;
	ep->passive = passive;
	ep->timeout_ns = (uint64_t)tp->base.opts.timeout_ms * 1000000ull;
	ep->last_rx = rkv_now_ns();
	ep->base.tp = &tp->base;
	ep->base.cq = &cq->base;
	ep->base.state = RKV_EP_CONNECTED;
	snprintf(ep->base.peer, sizeof(ep->base.peer), "%s", peer);
	*out = ep;
	return 0;

destroy_lock:
	pthread_mutex_destroy(&ep->lock);
free_bufs:
	rkv_free(ep->sq);
	rkv_free(ep->rq);
	rkv_free(ep->rxbuf);
	rkv_free(ep);
	return -ENOMEM;
}

void sw_ep_free(struct sw_ep *ep)
{
	if (!ep)
		return;
	if (ep->fd >= 0)
		close(ep->fd);
	for (unsigned i = 0; i < ep->nfdq; i++)
		close(ep->fdq[i]);
	for (unsigned i = 0; i < ep->ntx_fds; i++)
		if (ep->tx_fds_close[i])
			close(ep->tx_fds[i]);
	free_unexp(ep);
	pthread_cond_destroy(&ep->cond);
	pthread_mutex_destroy(&ep->lock);
	rkv_free(ep->txbuf);
	rkv_free(ep->rxbuf);
	rkv_free(ep->sq);
	rkv_free(ep->rq);
	rkv_free(ep);
}
