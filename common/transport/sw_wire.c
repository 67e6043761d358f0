/* SPDX-License-Identifier: MIT */
/*
 * sw_wire.c - the wire of the software providers: the 48-byte frame
 * header (fixed little-endian), the frame parser every receiver runs
 * before it trusts a byte (sw_frame_check), and socket I/O that carries
 * file descriptors (SCM_RIGHTS) for shm.  Also the ThreadSanitizer edges
 * for data a message carries between two ends in one process.
 */
#include "sw.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

#ifdef SW_TSAN
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
#endif

void sw_tsan_region_reads_begin(void)
{
#ifdef SW_TSAN
	AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
#endif
}

void sw_tsan_region_reads_end(void)
{
#ifdef SW_TSAN
	AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
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

ssize_t sw_sock_send(struct sw_ep *ep, struct iovec *iov, unsigned n)
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
