/* SPDX-License-Identifier: MIT */
/*
 * transport.c - the provider-independent half of the transport: names,
 * address parsing, option defaults, provider selection (auto), and the
 * argument checks that are the same on every provider, so that a WR that is
 * malformed fails the same way on verbs, tcp and shm.
 */
#include "transport_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../gpu/gpu.h"
#include "../log.h"
#include "fake.h"

static const char *const provider_names[] = {
	[RKV_TP_AUTO] = "auto",
	[RKV_TP_VERBS] = "verbs",
	[RKV_TP_TCP] = "tcp",
	[RKV_TP_SHM] = "shm",
};

const char *rkv_tp_provider_str(enum rkv_tp_provider p)
{
	if (p == RKV_TP_FAKE)
		return "fake";
	if ((unsigned)p > RKV_TP_SHM)
		return "?";
	return provider_names[p];
}

int rkv_tp_provider_parse(const char *name, enum rkv_tp_provider *out)
{
	for (unsigned i = 0; i <= RKV_TP_SHM; i++) {
		if (name && strcmp(name, provider_names[i]) == 0) {
			*out = (enum rkv_tp_provider)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *rkv_wc_status_str(enum rkv_wc_status s)
{
	switch (s) {
	case RKV_WC_SUCCESS: return "success";
	case RKV_WC_LOC_LEN_ERR: return "local length error";
	case RKV_WC_LOC_PROT_ERR: return "local protection error";
	case RKV_WC_WR_FLUSH_ERR: return "work request flushed";
	case RKV_WC_REM_INV_REQ_ERR: return "remote invalid request";
	case RKV_WC_REM_ACCESS_ERR: return "remote access error";
	case RKV_WC_REM_OP_ERR: return "remote operation error";
	case RKV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
	case RKV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
	case RKV_WC_GENERAL_ERR: return "general error";
	}
	return "unknown status";
}

const char *rkv_wr_opcode_str(enum rkv_wr_opcode op)
{
	switch (op) {
	case RKV_WR_READ: return "READ";
	case RKV_WR_WRITE: return "WRITE";
	case RKV_WR_CAS: return "CAS";
	case RKV_WR_FETCH_ADD: return "FETCH_ADD";
	case RKV_WR_SEND: return "SEND";
	case RKV_WR_RECV: return "RECV";
	}
	return "?";
}

const char *rkv_ep_state_str(enum rkv_ep_state s)
{
	switch (s) {
	case RKV_EP_CONNECTED: return "connected";
	case RKV_EP_ERROR: return "error";
	}
	return "?";
}

void rkv_tp_opts_init(struct rkv_tp_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->opts_size = sizeof(*opts);
	opts->provider = RKV_TP_AUTO;
	opts->gid_index = -1;
	opts->timeout_ms = 2000;
	opts->max_send_wr = 256;
	opts->max_recv_wr = 256;
	opts->max_inline = 64;
	opts->max_unexpected = 4096;
	opts->max_unexpected_bytes = 64u << 20;
	opts->accept_grant = RKV_GRANT_WRITE;
	opts->shm_mode = 0600;
	opts->shm_gid = -1;
	opts->log_min = RKV_LOG_WARN;
	opts->traffic_class = -1;
	opts->service_level = -1;
}

/* Parse "HOST:PORT" or "[V6]:PORT" into out. */
static int parse_host_port(const char *s, struct rkv_tp_addr *out)
{
	const char *colon, *host = s;
	size_t hlen;

	if (*s == '[') {
		const char *end = strchr(s, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		host = s + 1;
		hlen = (size_t)(end - host);
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -EINVAL;
		hlen = (size_t)(colon - s);
		if (memchr(s, ':', hlen))
			return -EINVAL; /* bare IPv6 needs brackets */
	}
	if (hlen == 0 || hlen >= sizeof(out->host))
		return -EINVAL;
	for (size_t i = 0; i < hlen; i++) {
		char c = host[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '-' ||
		      c == ':' || c == '_' || c == '%'))
			return -EINVAL;
	}
	const char *p = colon + 1;
	char *end;
	long port;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	errno = 0;
	port = strtol(p, &end, 10);
	if (errno || *end || port < 0 || port > 65535)
		return -EINVAL;
	memcpy(out->host, host, hlen);
	out->host[hlen] = '\0';
	out->port = (uint16_t)port;
	return 0;
}

int rkv_tp_addr_parse(const char *s, struct rkv_tp_addr *out)
{
	static const struct {
		const char *scheme;
		enum rkv_tp_provider p;
	} schemes[] = {
		{ "tcp://", RKV_TP_TCP },
		{ "verbs://", RKV_TP_VERBS },
		{ "shm://", RKV_TP_SHM },
		{ "auto://", RKV_TP_AUTO },
		{ "fake://", RKV_TP_FAKE }, /* tests: fake.h */
	};

	if (!s || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		size_t n = strlen(schemes[i].scheme);

		if (strncmp(s, schemes[i].scheme, n) != 0)
			continue;
		out->provider = schemes[i].p;
		s += n;
		if (out->provider != RKV_TP_SHM && out->provider != RKV_TP_FAKE)
			return parse_host_port(s, out);
		/* shm:///NAME (and fake:///NAME) */
		if (*s != '/')
			return -EINVAL;
		s++;
		size_t len = strlen(s);

		if (len == 0 || len >= sizeof(out->name))
			return -EINVAL;
		for (size_t j = 0; j < len; j++) {
			char c = s[j];

			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
			      c == '-'))
				return -EINVAL;
		}
		memcpy(out->name, s, len + 1);
		return 0;
	}
	return -EINVAL;
}

static const struct rkv_tp_ops *ops_of(enum rkv_tp_provider p)
{
	if (p == RKV_TP_FAKE) /* not in the enum: tests only */
		return &rkv_tp_fake_ops;
	switch (p) {
	case RKV_TP_VERBS: return &rkv_tp_verbs_ops;
	case RKV_TP_TCP: return &rkv_tp_tcp_ops;
	case RKV_TP_SHM: return &rkv_tp_shm_ops;
	default: return NULL;
	}
}

int rkv_tp_create(const struct rkv_tp_opts *opts, struct rkv_tp **out)
{
	struct rkv_tp_opts o;
	const struct rkv_tp_ops *ops;
	struct rkv_tp *tp = NULL;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	rkv_tp_opts_init(&o);
	if (opts) {
		if (opts->opts_size == 0 || opts->opts_size > sizeof(o))
			return -EINVAL;
		memcpy(&o, opts, opts->opts_size);
		o.opts_size = sizeof(o);
	}
	if (o.max_send_wr == 0 || o.max_send_wr > 16384 ||
	    o.max_recv_wr == 0 || o.max_recv_wr > 16384 ||
	    o.timeout_ms == 0 || o.max_inline > 4096 ||
	    o.max_unexpected > (1u << 20) ||
	    o.max_unexpected_bytes > (1ull << 32) ||
	    o.accept_grant > RKV_GRANT_WRITE || o.shm_mode > 0777 ||
	    o.shm_nuids > RKV_TP_SHM_UIDS ||
	    o.rkey_windows < RKV_WINDOWS_OFF || o.rkey_windows > RKV_WINDOWS_ON ||
	    (unsigned)o.log_min > RKV_LOG_OFF)
		return -EINVAL;
	if (o.provider == RKV_TP_AUTO) {
		struct rkv_tp_sink sink = rkv_tp_sink_of(&o);
		char why[160];

		if (rkv_tp_verbs_available(why, sizeof(why))) {
			o.provider = RKV_TP_VERBS;
		} else {
			rkv_tp_slog(&sink, RKV_LOG_INFO, "transport",
				    "auto: no usable RDMA device (%s), using tcp",
				    why);
			o.provider = RKV_TP_TCP;
		}
	}
	ops = ops_of(o.provider);
	if (!ops)
		return -EINVAL;
	rc = ops->create(&o, &tp);
	if (rc)
		return rc;
	tp->ops = ops;
	tp->provider = o.provider;
	tp->opts = o;
	tp->log = rkv_tp_sink_of(&o);
	rkv_tp_log(tp, RKV_LOG_INFO, "transport", "provider %s: %s",
		   ops->name, tp->describe);
	*out = tp;
	return 0;
}

void rkv_tp_destroy(struct rkv_tp *tp)
{
	if (tp)
		tp->ops->destroy(tp);
}

enum rkv_tp_provider rkv_tp_provider(const struct rkv_tp *tp)
{
	return tp->provider;
}

int rkv_tp_digests(const struct rkv_tp *tp)
{
	return tp->provider == RKV_TP_SHM || tp->provider == RKV_TP_TCP;
}

const char *rkv_tp_describe(const struct rkv_tp *tp)
{
	return tp->describe;
}

int rkv_tp_has_atomics(const struct rkv_tp *tp)
{
	return tp->has_atomics;
}

int rkv_tp_mem_alloc(struct rkv_tp *tp, size_t len, void **out)
{
	if (!tp || !out || len == 0)
		return -EINVAL;
	return tp->ops->mem_alloc(tp, len, out);
}

void rkv_tp_mem_free(struct rkv_tp *tp, void *addr, size_t len)
{
	if (tp && addr)
		tp->ops->mem_free(tp, addr, len);
}

int rkv_tp_mem_renew(struct rkv_tp *tp, void *addr, size_t len,
		     rkv_tp_move_fn move, void *arg)
{
	if (!tp || !addr || !len || !move)
		return -EINVAL;
	if (!tp->ops->mem_renew)
		return -EOPNOTSUPP;
	return tp->ops->mem_renew(tp, addr, len, move, arg);
}

/* Arguments every registration checks; as verbs, remote write or atomic
 * needs local write. */
static bool mr_args_bad(const struct rkv_tp *tp, const void *addr, size_t len,
			unsigned access, struct rkv_mr **out)
{
	return !tp || !addr || !out || len == 0 ||
	       (access & ~(RKV_ACCESS_ALL | RKV_ACCESS_WINDOWED)) ||
	       (uintptr_t)addr + len < (uintptr_t)addr ||
	       ((access & (RKV_ACCESS_REMOTE_WRITE |
			   RKV_ACCESS_REMOTE_ATOMIC)) &&
		!(access & RKV_ACCESS_LOCAL_WRITE));
}

int rkv_mr_reg(struct rkv_tp *tp, void *addr, size_t len, unsigned access,
	       struct rkv_mr **out)
{
	if (mr_args_bad(tp, addr, len, access, out))
		return -EINVAL;
	int rc = tp->ops->mr_reg(tp, addr, len, access, out);

	if (rc == 0) {
		(*out)->addr = addr;
		(*out)->length = len;
		(*out)->access = access;
		(*out)->tp = tp;
		(*out)->gpu = -1;
	}
	return rc;
}

const char *rkv_tp_gpu_why(const struct rkv_tp *tp)
{
	return tp ? tp->gpu_why : "";
}

int rkv_tp_mem_alloc_gpu(struct rkv_tp *tp, int gpu, size_t len, void **out)
{
	int rc;

	if (!tp || !out || len == 0 || gpu < 0)
		return -EINVAL;
	tp->gpu_why[0] = 0;
	rc = rkv_cuda_probe(gpu, tp->gpu_why, sizeof(tp->gpu_why));
	if (rc)
		return rc;
	if (tp->ops->mem_alloc_gpu)
		return tp->ops->mem_alloc_gpu(tp, gpu, len, out);
	rc = rkv_cuda_malloc(gpu, len, out);
	if (rc)
		snprintf(tp->gpu_why, sizeof(tp->gpu_why),
			 "cudaMalloc of %zu bytes on GPU %d failed: %s", len,
			 gpu, rkv_cuda_strerror());
	return rc;
}

void rkv_tp_mem_free_gpu(struct rkv_tp *tp, int gpu, void *addr, size_t len)
{
	if (!tp || !addr || gpu < 0)
		return;
	if (tp->ops->mem_free_gpu)
		tp->ops->mem_free_gpu(tp, gpu, addr, len);
	else
		rkv_cuda_free(gpu, addr);
}

int rkv_mr_reg_gpu(struct rkv_tp *tp, void *addr, size_t len,
		   unsigned access, int gpu, struct rkv_mr **out)
{
	int rc;

	if (gpu < 0 || mr_args_bad(tp, addr, len, access, out))
		return -EINVAL;
	tp->gpu_why[0] = 0;
	/* No CUDA in the build, no driver, no such device: say so here
	 * rather than fail every later access. */
	rc = rkv_cuda_probe(gpu, tp->gpu_why, sizeof(tp->gpu_why));
	if (rc)
		return rc;
	if (!tp->ops->mr_reg_gpu) {
		snprintf(tp->gpu_why, sizeof(tp->gpu_why),
			 "the %s provider cannot register GPU memory",
			 tp->ops->name);
		return -EOPNOTSUPP;
	}
	rc = tp->ops->mr_reg_gpu(tp, addr, len, access, gpu, out);
	if (rc == 0) {
		(*out)->addr = addr;
		(*out)->length = len;
		(*out)->access = access;
		(*out)->tp = tp;
		(*out)->gpu = gpu;
	}
	return rc;
}

int rkv_mr_dereg(struct rkv_mr *mr)
{
	if (!mr)
		return 0;
	return mr->tp->ops->mr_dereg(mr);
}

int rkv_cq_create(struct rkv_tp *tp, unsigned depth, struct rkv_cq **out)
{
	int rc;

	if (!tp || !out || depth == 0 || depth > (1u << 20))
		return -EINVAL;
	rc = tp->ops->cq_create(tp, depth, out);
	if (rc == 0) {
		(*out)->tp = tp;
		(*out)->depth = depth;
	}
	return rc;
}

void rkv_cq_destroy(struct rkv_cq *cq)
{
	if (cq)
		cq->tp->ops->cq_destroy(cq);
}

int rkv_cq_poll(struct rkv_cq *cq, struct rkv_wc *wc, int max)
{
	if (max <= 0)
		return max == 0 ? 0 : -EINVAL;
	return cq->tp->ops->cq_poll(cq, wc, max);
}

int rkv_cq_wait(struct rkv_cq *cq, unsigned timeout_us)
{
	return rkv_cq_wait_fds(cq, NULL, 0, timeout_us);
}

int rkv_cq_wait_fds(struct rkv_cq *cq, struct pollfd *fds, unsigned nfds,
		    unsigned timeout_us)
{
	if (!cq || (nfds && !fds) || nfds > RKV_CQ_WAIT_FDS)
		return -EINVAL;
	for (unsigned i = 0; i < nfds; i++)
		fds[i].revents = 0;
	if (!cq->tp->ops->cq_wait)
		return -EOPNOTSUPP;
	return cq->tp->ops->cq_wait(cq, fds, nfds, timeout_us);
}

static int check_scheme(const struct rkv_tp *tp, const char *s,
			struct rkv_tp_addr *a)
{
	int rc = rkv_tp_addr_parse(s, a);

	if (rc) {
		rkv_tp_log(tp, RKV_LOG_WARN, "transport",
			   "unparsable address '%s'", s ? s : "(null)");
		return rc;
	}
	if (a->provider == RKV_TP_AUTO)
		a->provider = tp->provider;
	if (a->provider != tp->provider) {
		rkv_tp_log(tp, RKV_LOG_WARN, "transport",
			   "address '%s' is for provider %s, context is %s", s,
			   rkv_tp_provider_str(a->provider),
			   rkv_tp_provider_str(tp->provider));
		return -EPROTONOSUPPORT;
	}
	return 0;
}

int rkv_listen(struct rkv_tp *tp, const char *addr, struct rkv_listener **out)
{
	struct rkv_tp_addr a;
	int rc;

	if (!tp || !out)
		return -EINVAL;
	rc = check_scheme(tp, addr, &a);
	if (rc)
		return rc;
	rc = tp->ops->listen(tp, &a, out);
	if (rc == 0)
		(*out)->tp = tp;
	return rc;
}

const char *rkv_listener_addr(const struct rkv_listener *l)
{
	return l->addr;
}

int rkv_listener_fd(const struct rkv_listener *l)
{
	if (!l || !l->tp->ops->listener_fd)
		return -1;
	return l->tp->ops->listener_fd(l);
}

void rkv_listener_destroy(struct rkv_listener *l)
{
	if (l)
		l->tp->ops->listener_destroy(l);
}

int rkv_accept(struct rkv_listener *l, struct rkv_cq *cq, int timeout_ms,
	       struct rkv_ep **out)
{
	int rc;

	if (!l || !cq || !out || cq->tp != l->tp)
		return -EINVAL;
	rc = l->tp->ops->accept(l, cq, timeout_ms, out);
	if (rc == 0) {
		(*out)->tp = l->tp;
		(*out)->cq = cq;
	}
	return rc;
}

int rkv_connect(struct rkv_tp *tp, const char *addr, struct rkv_cq *cq,
		int timeout_ms, struct rkv_ep **out)
{
	struct rkv_tp_addr a;
	int rc;

	if (!tp || !cq || !out || cq->tp != tp)
		return -EINVAL;
	rc = check_scheme(tp, addr, &a);
	if (rc)
		return rc;
	rc = tp->ops->connect(tp, &a, cq, timeout_ms, out);
	if (rc == 0) {
		(*out)->tp = tp;
		(*out)->cq = cq;
	}
	return rc;
}

void rkv_ep_destroy(struct rkv_ep *ep)
{
	if (ep)
		ep->tp->ops->ep_destroy(ep);
}

const char *rkv_grant_str(enum rkv_grant g)
{
	switch (g) {
	case RKV_GRANT_NONE: return "none";
	case RKV_GRANT_READ: return "read";
	case RKV_GRANT_WRITE: return "write";
	}
	return "?";
}

int rkv_ep_grant(struct rkv_ep *ep, enum rkv_grant grant)
{
	if (!ep || (unsigned)grant > RKV_GRANT_WRITE)
		return -EINVAL;
	return ep->tp->ops->ep_grant ? ep->tp->ops->ep_grant(ep, grant) : 0;
}

int rkv_ep_path(struct rkv_ep *ep, struct rkv_ep_path *out)
{
	if (!ep || !out)
		return -EINVAL;
	return ep->tp->ops->ep_path ? ep->tp->ops->ep_path(ep, out)
				    : -EOPNOTSUPP;
}

int rkv_ep_rkey(struct rkv_ep *ep, struct rkv_mr *mr, uint32_t *rkey)
{
	if (!ep || !mr || !rkey || mr->tp != ep->tp)
		return -EINVAL;
	if (!(mr->access & RKV_ACCESS_WINDOWED) || !ep->tp->windows ||
	    !ep->tp->ops->ep_rkey) {
		*rkey = mr->rkey;
		return 0;
	}
	return ep->tp->ops->ep_rkey(ep, mr, rkey);
}

int rkv_tp_windows(const struct rkv_tp *tp)
{
	return tp ? tp->windows : 0;
}

enum rkv_ep_state rkv_ep_state(const struct rkv_ep *ep)
{
	/* providers' threads set it (atomically) while the owner polls */
	return __atomic_load_n(&ep->state, __ATOMIC_ACQUIRE);
}

const char *rkv_ep_peer(const struct rkv_ep *ep)
{
	return ep->peer;
}

int rkv_post(struct rkv_ep *ep, struct rkv_wr *wr, struct rkv_wr **bad)
{
	struct rkv_wr *w;

	if (bad)
		*bad = NULL;
	if (!ep || !wr)
		return -EINVAL;
	for (w = wr; w; w = w->next) {
		int rc = 0;

		switch (w->opcode) {
		case RKV_WR_READ:
		case RKV_WR_WRITE:
		case RKV_WR_SEND:
			if (w->length > RKV_TP_MAX_MSG)
				rc = -EINVAL;
			else if (w->length && !w->local)
				rc = -EINVAL;
			break;
		case RKV_WR_CAS:
		case RKV_WR_FETCH_ADD:
			if (w->length != 8 || !w->local ||
			    (w->remote_addr & 7) || ((uintptr_t)w->local & 7))
				rc = -EINVAL;
			else if (!ep->tp->has_atomics)
				rc = -EOPNOTSUPP;
			break;
		default:
			rc = -EINVAL;
		}
		if (rc) {
			if (bad)
				*bad = w;
			return rc;
		}
	}
	return ep->tp->ops->post(ep, wr, bad);
}

int rkv_post_recv(struct rkv_ep *ep, struct rkv_recv_wr *wr,
		  struct rkv_recv_wr **bad)
{
	struct rkv_recv_wr *w;

	if (bad)
		*bad = NULL;
	if (!ep || !wr)
		return -EINVAL;
	for (w = wr; w; w = w->next) {
		if (w->length > RKV_TP_MAX_MSG || (w->length && !w->local)) {
			if (bad)
				*bad = w;
			return -EINVAL;
		}
	}
	return ep->tp->ops->post_recv(ep, wr, bad);
}
