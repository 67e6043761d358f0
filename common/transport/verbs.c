/* SPDX-License-Identifier: MIT */
/*
 * verbs.c - the verbs provider: rdma-core RC queue pairs.  This file holds
 * the device choice, memory registration, completion queues and the
 * datapath (post, post_recv, poll); verbs_cm.c makes the connections.
 *
 * Device choice: the first device (ibv_get_device_list order) with an ACTIVE
 * port, unless opts->device / opts->port name one; GID: a RoCE v2 GID of an
 * IPv4 address on Ethernet ports (index 0 on InfiniBand), unless
 * opts->gid_index names one.  rdma_cm picks the GID of each connection from
 * its address; ours is what rkv_tp_describe reports and what a raw-verbs
 * user of the context would take.
 *
 * Datapath invariants:
 *   - one rkv_post = one ibv_post_send (one doorbell), built in the
 *     endpoint's scratch array; each WR's record (caller's wr_id, opcode)
 *     goes in the endpoint's send ring, and the ibv wr_id is its sequence
 *     number (see verbs_internal.h).
 *   - WRITE and SEND go inline when they fit the QP's max_inline_data and
 *     the local range lies in one of this context's MRs (inline data is not
 *     checked by the device, and a bad lkey must still fail with
 *     LOC_PROT_ERR).
 *   - an error completion puts the endpoint in RKV_EP_ERROR; the device
 *     flushes what follows (kick_flush() helps rxe with RECVs).
 * Every rdma-core result is turned into 0 / -errno here, once.
 */
#include "verbs_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../alloc.h"
#include "../gpu/gpu.h"
#include "../log.h"

/* Empty polls between two looks at the CQ's rdma_cm events (disconnects):
 * a read() on a non-blocking fd, ~0.5 us, so not on every poll. */
#define CM_CHECK_EVERY 64
#define POLL_BATCH 32

static const char *port_state_str(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_DOWN: return "DOWN";
	case IBV_PORT_INIT: return "INIT";
	case IBV_PORT_ARMED: return "ARMED";
	case IBV_PORT_ACTIVE: return "ACTIVE";
	case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
	default: return "NOP";
	}
}

int rkv_tp_verbs_available(char *why, size_t whylen)
{
	struct ibv_device **list;
	int n = 0, found = 0;
	char first[96] = "";

	rkv_msgf(why, whylen, "%s", "");
	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list) {
		rkv_msgf(why, whylen,
			 "no RDMA device: ibv_get_device_list: %s",
			 strerror(errno ? errno : ENODEV));
		return 0;
	}
	for (int i = 0; i < n && !found; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);
		struct ibv_device_attr da;

		if (!ctx) {
			if (!first[0])
				snprintf(first, sizeof(first), "%s: open: %s",
					 ibv_get_device_name(list[i]),
					 strerror(errno ? errno : ENODEV));
			continue;
		}
		if (ibv_query_device(ctx, &da) == 0) {
			for (unsigned p = 1; p <= da.phys_port_cnt; p++) {
				struct ibv_port_attr pa;

				if (ibv_query_port(ctx, (uint8_t)p, &pa))
					continue;
				if (pa.state == IBV_PORT_ACTIVE) {
					found = 1;
					break;
				}
				if (!first[0])
					snprintf(first, sizeof(first),
						 "%s port %u %s",
						 ibv_get_device_name(list[i]),
						 p, port_state_str(pa.state));
			}
		}
		ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	if (found)
		return 1;
	if (n == 0)
		rkv_msgf(why, whylen, "no RDMA device found");
	else
		rkv_msgf(why, whylen, "no RDMA device with an active port (%s)",
			 first);
	return 0;
}

/* ------------------------------------------------------------ context */

static int gid_is_zero(const union ibv_gid *g)
{
	static const union ibv_gid zero;

	return memcmp(g, &zero, sizeof(zero)) == 0;
}

static int gid_is_v4mapped(const union ibv_gid *g)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return memcmp(g->raw, pfx, sizeof(pfx)) == 0;
}

enum gid_kind { GID_UNKNOWN = 0, GID_IB, GID_ROCE_V1, GID_ROCE_V2 };

static const char *gid_kind_str(enum gid_kind k)
{
	switch (k) {
	case GID_IB: return "IB";
	case GID_ROCE_V1: return "RoCE v1";
	case GID_ROCE_V2: return "RoCE v2";
	default: return "?";
	}
}

/* The GID at idx and its type: ibv_query_gid_ex, or sysfs on kernels
 * without the GID-table ioctl.  Returns 0 or -errno (-ENODATA: empty). */
static int query_gid(struct verbs_tp *vt, int idx, union ibv_gid *gid,
		     enum gid_kind *kind)
{
	struct ibv_gid_entry e;
	char path[256], buf[32] = "";
	FILE *f;

	if (ibv_query_gid_ex(vt->ctx, vt->port, (uint32_t)idx, &e, 0) == 0) {
		*gid = e.gid;
		*kind = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? GID_ROCE_V2 :
			e.gid_type == IBV_GID_TYPE_ROCE_V1 ? GID_ROCE_V1 :
							       GID_IB;
		return gid_is_zero(gid) ? -ENODATA : 0;
	}
	if (ibv_query_gid(vt->ctx, vt->port, idx, gid))
		return -EINVAL;
	if (gid_is_zero(gid))
		return -ENODATA;
	*kind = GID_UNKNOWN;
	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/%u/gid_attrs/types/%d",
		 ibv_get_device_name(vt->ctx->device), vt->port, idx);
	f = fopen(path, "r");
	if (f) {
		if (fgets(buf, sizeof(buf), f)) {
			if (strstr(buf, "v2"))
				*kind = GID_ROCE_V2;
			else if (strstr(buf, "RoCE") || strstr(buf, "IB/RoCE"))
				*kind = GID_ROCE_V1;
		}
		fclose(f);
	}
	return 0;
}

/* Sets vt->gid_index and the GID part of the description. */
static int choose_gid(struct verbs_tp *vt, const struct rkv_tp_opts *o,
		      const struct ibv_port_attr *pa, char *desc, size_t len)
{
	const char *dev = ibv_get_device_name(vt->ctx->device);
	union ibv_gid gid, g;
	enum gid_kind kind = GID_UNKNOWN, k;
	char txt[INET6_ADDRSTRLEN];
	int best = -1, any_v2 = -1, any = -1;

	if (o->gid_index >= 0) {
		if (o->gid_index >= pa->gid_tbl_len ||
		    query_gid(vt, o->gid_index, &gid, &kind)) {
			rkv_log(RKV_LOG_ERROR, VERBS_COMP,
				"%s port %u: gid_index %d is not a valid GID (table has %d entries)",
				dev, vt->port, o->gid_index, pa->gid_tbl_len);
			return -EINVAL;
		}
		best = o->gid_index;
	} else if (pa->link_layer != IBV_LINK_LAYER_ETHERNET) {
		if (query_gid(vt, 0, &gid, &kind) == 0)
			best = 0;
		kind = GID_IB;
	} else {
		for (int i = 0; i < pa->gid_tbl_len && best < 0; i++) {
			if (query_gid(vt, i, &g, &k))
				continue;
			if (any < 0)
				any = i;
			if (k != GID_ROCE_V2)
				continue;
			if (any_v2 < 0)
				any_v2 = i;
			if (gid_is_v4mapped(&g))
				best = i;
		}
		if (best < 0)
			best = any_v2 >= 0 ? any_v2 : any;
		if (best >= 0)
			query_gid(vt, best, &gid, &kind);
	}
	if (best < 0) {
		rkv_log(RKV_LOG_ERROR, VERBS_COMP,
			"%s port %u: no usable GID (is an IP address configured on its netdev?)",
			dev, vt->port);
		return -ENODEV;
	}
	vt->gid_index = best;
	if (!inet_ntop(AF_INET6, gid.raw, txt, sizeof(txt)))
		snprintf(txt, sizeof(txt), "?");
	snprintf(desc, len, "%s port %u gid[%d] %s (%s)", dev, vt->port, best,
		 txt, gid_kind_str(kind));
	return 0;
}

/* Whether ctx has an ACTIVE port that opts allow; sets vt on success.
 * Returns 0, -EAGAIN (try the next device), or a final -errno. */
static int try_device(struct verbs_tp *vt, struct ibv_context *ctx,
		      const struct rkv_tp_opts *o, struct ibv_port_attr *pa_out)
{
	const char *name = ibv_get_device_name(ctx->device);
	struct ibv_device_attr da;
	unsigned lo = 1, hi;

	if (ibv_query_device(ctx, &da)) {
		rkv_log(RKV_LOG_WARN, VERBS_COMP, "ibv_query_device(%s): %s",
			name, strerror(errno));
		return -EAGAIN;
	}
	hi = da.phys_port_cnt;
	if (o->port > 0) {
		if ((unsigned)o->port > da.phys_port_cnt) {
			if (!o->device)
				return -EAGAIN;
			rkv_log(RKV_LOG_ERROR, VERBS_COMP,
				"device %s has no port %d (it has %u)", name,
				o->port, da.phys_port_cnt);
			return -EINVAL;
		}
		lo = hi = (unsigned)o->port;
	}
	for (unsigned p = lo; p <= hi; p++) {
		struct ibv_port_attr pa;

		if (ibv_query_port(ctx, (uint8_t)p, &pa))
			continue;
		if (pa.state == IBV_PORT_ACTIVE) {
			vt->ctx = ctx;
			vt->port = (uint8_t)p;
			vt->dev_attr = da;
			*pa_out = pa;
			return 0;
		}
		if (o->device && o->port > 0) {
			rkv_log(RKV_LOG_ERROR, VERBS_COMP,
				"device %s port %u is %s, not ACTIVE", name, p,
				port_state_str(pa.state));
			return -ENODEV;
		}
	}
	return -EAGAIN;
}

/* Opens the device (vt->ctx) and picks the port the overrides allow. */
static int choose_device(struct verbs_tp *vt, const struct rkv_tp_opts *o,
			 struct ibv_port_attr *pa_out)
{
	struct ibv_device **list;
	char names[128] = "";
	int n = 0, matched = 0, rc = -EAGAIN;

	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list) {
		rkv_log(RKV_LOG_ERROR, VERBS_COMP, "ibv_get_device_list: %s",
			strerror(errno ? errno : ENODEV));
		return -ENODEV;
	}
	for (int i = 0; i < n && rc == -EAGAIN; i++) {
		const char *name = ibv_get_device_name(list[i]);
		struct ibv_context *ctx;

		if (strlen(names) + strlen(name) + 2 < sizeof(names))
			snprintf(names + strlen(names),
				 sizeof(names) - strlen(names), "%s%s",
				 names[0] ? " " : "", name);
		if (o->device && strcmp(o->device, name) != 0)
			continue;
		matched = 1;
		errno = 0;
		ctx = ibv_open_device(list[i]);
		if (!ctx) {
			rkv_log(RKV_LOG_WARN, VERBS_COMP,
				"ibv_open_device(%s): %s", name,
				strerror(errno ? errno : ENODEV));
			continue;
		}
		rc = try_device(vt, ctx, o, pa_out);
		if (rc == 0)
			vt->guid = ibv_get_device_guid(list[i]);
		else
			ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	if (rc != -EAGAIN)
		return rc;
	if (o->device && !matched)
		rkv_log(RKV_LOG_ERROR, VERBS_COMP,
			"no RDMA device named '%s' (devices: %s)", o->device,
			names);
	else if (o->port > 0)
		rkv_log(RKV_LOG_ERROR, VERBS_COMP,
			"no RDMA device%s%s whose port %d is ACTIVE (devices: %s)",
			o->device ? " " : "", o->device ? o->device : "",
			o->port, names);
	else
		rkv_log(RKV_LOG_ERROR, VERBS_COMP,
			"no RDMA device%s%s with an ACTIVE port (devices: %s)",
			o->device ? " " : "", o->device ? o->device : "",
			names);
	return -ENODEV;
}

/* Largest n with 4.096 us << n <= budget_us, within 1..31. */
static uint8_t ack_timeout_code(uint64_t budget_us)
{
	uint8_t n = 1;

	while (n < 31 && (4096ull << (n + 1)) <= budget_us * 1000)
		n++;
	return n;
}

/* IB encoding of the RNR NAK delay, in units of 10 us, codes 1..31 (code 0
 * means 655 ms).  Largest code whose delay fits the budget. */
static uint8_t rnr_timer_code(uint64_t budget_us)
{
	static const uint16_t t10us[32] = {
		0,    1,    2,    3,    4,     6,     8,     12,
		16,   24,   32,   48,   64,    96,    128,   192,
		256,  384,  512,  768,  1024,  1536,  2048,  3072,
		4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
	};
	uint8_t c = 1;

	while (c < 31 && (uint64_t)t10us[c + 1] * 10 <= budget_us)
		c++;
	return c;
}

static void verbs_destroy(struct rkv_tp *tp)
{
	struct verbs_tp *vt = container_of(tp, struct verbs_tp, base);

	for (unsigned i = 0; i < VERBS_MR_BUCKETS; i++) {
		if (vt->mr_tab[i])
			rkv_log(RKV_LOG_WARN, VERBS_COMP,
				"context destroyed with MRs still registered");
	}
	if (vt->pd) {
		int rc = ibv_dealloc_pd(vt->pd);

		if (rc)
			rkv_log(RKV_LOG_WARN, VERBS_COMP,
				"ibv_dealloc_pd: %s (objects still use it?)",
				strerror(rc));
	}
	if (vt->ctx && ibv_close_device(vt->ctx))
		rkv_log(RKV_LOG_WARN, VERBS_COMP, "ibv_close_device: %s",
			strerror(errno));
	pthread_mutex_destroy(&vt->mr_lock);
	rkv_free(vt);
}

static int verbs_create(const struct rkv_tp_opts *o, struct rkv_tp **out)
{
	struct verbs_tp *vt;
	struct ibv_port_attr pa;
	char why[200];
	uint64_t budget_us;
	int rc;

	if (!rkv_tp_verbs_available(why, sizeof(why))) {
		rkv_log(RKV_LOG_ERROR, VERBS_COMP, "verbs provider: %s", why);
		return -ENODEV;
	}
	vt = rkv_calloc(1, sizeof(*vt));
	if (!vt)
		return -ENOMEM;
	pthread_mutex_init(&vt->mr_lock, NULL);
	atomic_init(&vt->mr_gen, 1);
	rc = choose_device(vt, o, &pa);
	if (rc)
		goto fail;
	rc = choose_gid(vt, o, &pa, vt->base.describe,
			sizeof(vt->base.describe));
	if (rc)
		goto fail;
	vt->max_msg_sz = pa.max_msg_sz;
	errno = 0;
	vt->pd = ibv_alloc_pd(vt->ctx);
	if (!vt->pd) {
		rc = rkv_verbs_neg_errno(ENOMEM);
		rkv_log(RKV_LOG_ERROR, VERBS_COMP, "ibv_alloc_pd(%s): %s",
			ibv_get_device_name(vt->ctx->device), strerror(-rc));
		goto fail;
	}
	vt->base.has_atomics = vt->dev_attr.atomic_cap != IBV_ATOMIC_NONE;
	vt->quirk_rxe = vt->dev_attr.vendor_id == 0xffffff; /* RXE_VENDOR_ID */
	vt->rd_atomic = (uint8_t)(vt->dev_attr.max_qp_rd_atom < VERBS_MAX_RD_ATOMIC ?
					  vt->dev_attr.max_qp_rd_atom :
					  VERBS_MAX_RD_ATOMIC);
	vt->init_depth = (uint8_t)(vt->dev_attr.max_qp_init_rd_atom < VERBS_MAX_RD_ATOMIC ?
					   vt->dev_attr.max_qp_init_rd_atom :
					   VERBS_MAX_RD_ATOMIC);
	/*
	 * Dead peer: the requester gives up after 1 + retry_cnt ACK
	 * timeouts; keep them within half of timeout_ms (2000 ms -> 14,
	 * 67 ms).  Receiver not ready: 1 + rnr_retry RNR delays within half
	 * of timeout_ms too (2000 ms -> 122 ms).  Both counts are 6: 7 means
	 * "forever" for rnr_retry, and rxe treats retry_cnt 7 the same way.
	 */
	budget_us = (uint64_t)o->timeout_ms * 1000 / 2;
	vt->ack_timeout = ack_timeout_code(budget_us / (VERBS_RETRY_CNT + 1));
	vt->min_rnr_timer = rnr_timer_code(budget_us / (VERBS_RNR_RETRY + 1));
	snprintf(vt->base.describe + strlen(vt->base.describe),
		 sizeof(vt->base.describe) - strlen(vt->base.describe),
		 "%s", vt->base.has_atomics ? "" : ", no atomics");
	*out = &vt->base;
	return 0;

fail:
	verbs_destroy(&vt->base);
	return rc;
}

/* ------------------------------------------------------------- memory */

static size_t page_round(size_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t p = pg > 0 ? (size_t)pg : 4096;

	return (len + p - 1) / p * p;
}

static int verbs_mem_alloc(struct rkv_tp *tp, size_t len, void **out)
{
	void *p;

	(void)tp;
	if (page_round(len) < len)
		return -EINVAL;
	p = mmap(NULL, page_round(len), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return rkv_verbs_neg_errno(ENOMEM);
	*out = p;
	return 0;
}

static void verbs_mem_free(struct rkv_tp *tp, void *addr, size_t len)
{
	(void)tp;
	if (munmap(addr, page_round(len)))
		rkv_log(RKV_LOG_WARN, VERBS_COMP, "munmap(%p, %zu): %s", addr,
			len, strerror(errno));
}

static int ibv_access_of(unsigned a)
{
	int f = 0;

	if (a & RKV_ACCESS_LOCAL_WRITE)
		f |= IBV_ACCESS_LOCAL_WRITE;
	if (a & RKV_ACCESS_REMOTE_WRITE)
		f |= IBV_ACCESS_REMOTE_WRITE;
	if (a & RKV_ACCESS_REMOTE_READ)
		f |= IBV_ACCESS_REMOTE_READ;
	if (a & RKV_ACCESS_REMOTE_ATOMIC)
		f |= IBV_ACCESS_REMOTE_ATOMIC;
	return f;
}

static unsigned mr_bucket(uint32_t lkey)
{
	return (lkey ^ (lkey >> 8)) % VERBS_MR_BUCKETS;
}

static void mr_insert(struct verbs_tp *vt, struct verbs_mr *vm)
{
	unsigned b;

	vm->base.lkey = vm->mr->lkey;
	vm->base.rkey = vm->mr->rkey;
	b = mr_bucket(vm->base.lkey);
	pthread_mutex_lock(&vt->mr_lock);
	vm->hnext = vt->mr_tab[b];
	vt->mr_tab[b] = vm;
	pthread_mutex_unlock(&vt->mr_lock);
}

static int verbs_mr_reg(struct rkv_tp *tp, void *addr, size_t len,
			unsigned access, struct rkv_mr **out)
{
	struct verbs_tp *vt = container_of(tp, struct verbs_tp, base);
	struct verbs_mr *vm;
	int rc;

	vm = rkv_calloc(1, sizeof(*vm));
	if (!vm)
		return -ENOMEM;
	errno = 0;
	vm->mr = ibv_reg_mr(vt->pd, addr, len, ibv_access_of(access));
	if (!vm->mr) {
		rc = rkv_verbs_neg_errno(ENOMEM);
		rkv_log(RKV_LOG_ERROR, VERBS_COMP,
			"ibv_reg_mr(%p, %zu, access 0x%x): %s", addr, len,
			access, strerror(-rc));
		rkv_free(vm);
		return rc;
	}
	mr_insert(vt, vm);
	*out = &vm->base;
	return 0;
}

/*
 * GPUDirect RDMA.  First dma-buf: the CUDA driver exports the range as a
 * dma-buf fd (cuMemGetHandleForAddressRange) and the NIC driver maps it
 * (ibv_reg_dmabuf_mr; iova = the device address, so remote addresses are
 * the same as on every other provider).  Else plain ibv_reg_mr, which works
 * when a peer-memory client (nvidia-peermem) lets the NIC driver pin GPU
 * pages.  Else fail, saying what each step lacked: never a silent bounce
 * through host memory.
 */
static int verbs_mr_reg_gpu(struct rkv_tp *tp, void *addr, size_t len,
			    unsigned access, int gpu, struct rkv_mr **out)
{
	struct verbs_tp *vt = container_of(tp, struct verbs_tp, base);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(pg - 1);
	size_t off = (uintptr_t)addr - a;
	size_t elen = (off + len + pg - 1) & ~(pg - 1);
	char why_dmabuf[200] = "", why_peer[160] = "";
	struct verbs_mr *vm;
	int fd = -1, rc;

	vm = rkv_calloc(1, sizeof(*vm));
	if (!vm)
		return -ENOMEM;
	rc = rkv_cuda_dmabuf_fd(gpu, (void *)a, elen, &fd, why_dmabuf,
				sizeof(why_dmabuf));
	if (rc == 0) {
		errno = 0;
		vm->mr = ibv_reg_dmabuf_mr(vt->pd, off, len,
					   (uint64_t)(uintptr_t)addr, fd,
					   ibv_access_of(access));
		if (!vm->mr)
			snprintf(why_dmabuf, sizeof(why_dmabuf),
				 "ibv_reg_dmabuf_mr failed: %s (the RDMA "
				 "driver or kernel has no dma-buf support)",
				 strerror(errno ? errno : EOPNOTSUPP));
		close(fd);
	}
	if (!vm->mr) {
		errno = 0;
		vm->mr = ibv_reg_mr(vt->pd, addr, len, ibv_access_of(access));
		if (!vm->mr)
			snprintf(why_peer, sizeof(why_peer),
				 "ibv_reg_mr failed: %s (no peer-memory "
				 "support: is the nvidia-peermem module "
				 "loaded?)",
				 strerror(errno ? errno : EFAULT));
		else
			rkv_log(RKV_LOG_INFO, VERBS_COMP,
				"GPU %d memory registered through peer memory "
				"(dma-buf: %s)",
				gpu, why_dmabuf);
	}
	if (!vm->mr) {
		snprintf(tp->gpu_why, sizeof(tp->gpu_why),
			 "GPU %d memory cannot be registered for GPUDirect "
			 "RDMA on %s: dma-buf: %s; peer memory: %s",
			 gpu, ibv_get_device_name(vt->ctx->device), why_dmabuf,
			 why_peer);
		rkv_log(RKV_LOG_ERROR, VERBS_COMP, "%s", tp->gpu_why);
		rkv_free(vm);
		return -EOPNOTSUPP;
	}
	mr_insert(vt, vm);
	*out = &vm->base;
	return 0;
}

static int verbs_mr_dereg(struct rkv_mr *mr)
{
	struct verbs_mr *vm = container_of(mr, struct verbs_mr, base);
	struct verbs_tp *vt = container_of(mr->tp, struct verbs_tp, base);
	struct verbs_mr **pp;
	int rc;

	pthread_mutex_lock(&vt->mr_lock);
	rc = ibv_dereg_mr(vm->mr);
	if (rc == 0) {
		for (pp = &vt->mr_tab[mr_bucket(mr->lkey)]; *pp;
		     pp = &(*pp)->hnext) {
			if (*pp == vm) {
				*pp = vm->hnext;
				break;
			}
		}
		/* Invalidates the endpoints' inline caches; pairs with the
		 * acquire load in local_ok().  Skips 0, the "empty" value. */
		if (atomic_fetch_add_explicit(&vt->mr_gen, 1,
					      memory_order_release) + 1 == 0)
			atomic_fetch_add_explicit(&vt->mr_gen, 1,
						  memory_order_release);
	}
	pthread_mutex_unlock(&vt->mr_lock);
	if (rc) {
		rkv_log(RKV_LOG_ERROR, VERBS_COMP, "ibv_dereg_mr(lkey 0x%x): %s",
			mr->lkey, strerror(rc));
		return -rc;
	}
	rkv_free(vm);
	return 0;
}

/* ---------------------------------------------------- completion queue */

static unsigned ep_bucket(uint32_t qp_num)
{
	return (qp_num ^ (qp_num >> 8)) % VERBS_EP_BUCKETS;
}

static void cq_add(struct verbs_cq *cq, struct verbs_ep *ep)
{
	unsigned b = ep_bucket(ep->qp_num);

	pthread_mutex_lock(&cq->lock);
	ep->hnext = cq->tab[b];
	cq->tab[b] = ep;
	ep->in_tab = 1;
	cq->nep++;
	pthread_mutex_unlock(&cq->lock);
}

static void cq_del(struct verbs_cq *cq, struct verbs_ep *ep)
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

static void verbs_cq_destroy(struct rkv_cq *base)
{
	struct verbs_cq *cq = container_of(base, struct verbs_cq, base);

	if (cq->nep)
		rkv_log(RKV_LOG_WARN, VERBS_COMP,
			"CQ destroyed while %u endpoints use it", cq->nep);
	if (cq->cq) {
		int rc;

		/* ibv_destroy_cq waits until every event is acknowledged */
		if (cq->unacked)
			ibv_ack_cq_events(cq->cq, cq->unacked);
		rc = ibv_destroy_cq(cq->cq);
		if (rc)
			rkv_log(RKV_LOG_WARN, VERBS_COMP, "ibv_destroy_cq: %s",
				strerror(rc));
	}
	if (cq->comp)
		ibv_destroy_comp_channel(cq->comp);
	if (cq->ch)
		rdma_destroy_event_channel(cq->ch);
	pthread_mutex_destroy(&cq->lock);
	rkv_free(cq);
}

static int verbs_cq_create(struct rkv_tp *tp, unsigned depth,
			   struct rkv_cq **out)
{
	struct verbs_tp *vt = container_of(tp, struct verbs_tp, base);
	struct verbs_cq *cq;
	int rc;

	if (depth > (unsigned)vt->dev_attr.max_cqe) {
		rkv_log(RKV_LOG_ERROR, VERBS_COMP,
			"CQ depth %u over the device's max_cqe %d", depth,
			vt->dev_attr.max_cqe);
		return -EINVAL;
	}
	cq = rkv_calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	pthread_mutex_init(&cq->lock, NULL);
	errno = 0;
	cq->comp = ibv_create_comp_channel(vt->ctx);
	if (!cq->comp) {
		rc = rkv_verbs_neg_errno(ENOMEM);
		rkv_log(RKV_LOG_ERROR, VERBS_COMP,
			"ibv_create_comp_channel: %s", strerror(-rc));
		goto fail;
	}
	rc = rkv_verbs_set_nonblock(cq->comp->fd);
	if (rc)
		goto fail;
	errno = 0;
	cq->cq = ibv_create_cq(vt->ctx, (int)depth, NULL, cq->comp, 0);
	if (!cq->cq) {
		rc = rkv_verbs_neg_errno(ENOMEM);
		rkv_log(RKV_LOG_ERROR, VERBS_COMP, "ibv_create_cq(%u): %s",
			depth, strerror(-rc));
		goto fail;
	}
	errno = 0;
	cq->ch = rdma_create_event_channel();
	if (!cq->ch) {
		rc = rkv_verbs_neg_errno(ENOMEM);
		rkv_log(RKV_LOG_ERROR, VERBS_COMP,
			"rdma_create_event_channel: %s", strerror(-rc));
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
	w->wr_id = rq->wr_id;
	w->opcode = (enum rkv_wr_opcode)rq->opcode;
	w->status = iwc->status == IBV_WC_SUCCESS ?
			    RKV_WC_SUCCESS :
			    wc_status_fix(vt, iwc, rq, is_recv);
	w->byte_len = is_recv && iwc->status == IBV_WC_SUCCESS ?
			      iwc->byte_len : 0;
	w->ep = &ep->base;
	if (w->status != RKV_WC_SUCCESS) {
		if (ep->base.state != RKV_EP_ERROR &&
		    w->status != RKV_WC_WR_FLUSH_ERR)
			rkv_log(RKV_LOG_INFO, VERBS_COMP,
				"QP 0x%x (peer %s): %s %s (ibv status %d, vendor_err 0x%x)",
				ep->qp_num, ep->base.peer,
				rkv_wr_opcode_str(w->opcode),
				ibv_wc_status_str(iwc->status),
				(int)iwc->status, iwc->vendor_err);
		ep->base.state = RKV_EP_ERROR;
		ep->hw_err = 1;
	}
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

static int verbs_cq_poll(struct rkv_cq *base, struct rkv_wc *wc, int max)
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
			rkv_log(RKV_LOG_ERROR, VERBS_COMP,
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
 * waited on too.  Events are acknowledged in batches.
 */
static int verbs_cq_wait(struct rkv_cq *base, unsigned timeout_us)
{
	struct verbs_cq *cq = container_of(base, struct verbs_cq, base);
	struct timespec ts = { (time_t)(timeout_us / 1000000u),
			       (long)(timeout_us % 1000000u) * 1000 };
	struct pollfd pfd[2];
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
	if (ppoll(pfd, 2, &ts, NULL) < 0)
		return errno == EINTR ? 0 : -errno;
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

/* --------------------------------------------------------- queue pairs */

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
		rkv_log(RKV_LOG_INFO, VERBS_COMP,
			"ibv_create_qp with max_inline %u: %s; retrying without inline",
			o->max_inline, strerror(errno));
		a.cap.max_inline_data = 0;
		errno = 0;
		ep->qp = ibv_create_qp(vt->pd, &a);
	}
	if (!ep->qp) {
		rc = rkv_verbs_neg_errno(EINVAL);
		rkv_log(RKV_LOG_ERROR, VERBS_COMP,
			"ibv_create_qp(send %u, recv %u): %s", a.cap.max_send_wr,
			a.cap.max_recv_wr, strerror(-rc));
		return rc;
	}
	ep->qp_num = ep->qp->qp_num;
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
	cq_add(ep->vcq, ep);
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
				 IBV_QP_ACCESS_FLAGS,
			 &ia) == 0)
		rkv_log(RKV_LOG_DEBUG, VERBS_COMP,
			"QP 0x%x -> 0x%x: state %d timeout %u retry %u rnr_retry %u min_rnr_timer %u rd_atomic %u/%u mtu %d access 0x%x",
			ep->qp_num, qa.dest_qp_num, (int)qa.qp_state,
			qa.timeout, qa.retry_cnt, qa.rnr_retry,
			qa.min_rnr_timer, qa.max_rd_atomic,
			qa.max_dest_rd_atomic, (int)qa.path_mtu,
			(unsigned)qa.qp_access_flags);
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
		rkv_log(RKV_LOG_ERROR, VERBS_COMP,
			"rdma_init_qp_attr(QP 0x%x, state %d): %s", ep->qp_num,
			(int)state, strerror(-rc));
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
		rkv_log(RKV_LOG_ERROR, VERBS_COMP,
			"ibv_modify_qp(QP 0x%x -> state %d, mask 0x%x): %s",
			ep->qp_num, (int)state, (unsigned)mask, strerror(rc));
		return -rc;
	}
	if (state == IBV_QPS_RTS && g_rkv_log_level <= RKV_LOG_DEBUG)
		dump_qp(ep);
	return 0;
}

void rkv_verbs_ep_fini_qp(struct verbs_ep *ep)
{
	if (ep->vcq)
		cq_del(ep->vcq, ep);
	if (ep->qp) {
		int rc = ibv_destroy_qp(ep->qp);

		if (rc)
			rkv_log(RKV_LOG_WARN, VERBS_COMP,
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

/* ------------------------------------------------------------ datapath */

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
		for (vm = vt->mr_tab[mr_bucket(lkey)]; vm; vm = vm->hnext) {
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
		rkv_log(RKV_LOG_DEBUG, VERBS_COMP, "QP 0x%x to ERR: %s",
			ep->qp_num, strerror(rc));
}

/* Fill s and g from w; returns 0 or -EINVAL. */
static int build_send(struct verbs_ep *ep, struct verbs_tp *vt,
		      const struct rkv_wr *w, struct ibv_send_wr *s,
		      struct ibv_sge *g, struct verbs_req *rq)
{
	int ok = 1;

	if (w->length > vt->max_msg_sz)
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
	return 0;
}

static int verbs_post(struct rkv_ep *base, struct rkv_wr *wr,
		      struct rkv_wr **bad)
{
	struct verbs_ep *ep = container_of(base, struct verbs_ep, base);
	struct verbs_tp *vt = container_of(base->tp, struct verbs_tp, base);
	uint64_t room = ep->sq_len - (ep->shead - ep->stail);
	struct ibv_send_wr *ibad = NULL;
	struct rkv_wr *w;
	unsigned i = 0;
	int rc = 0, rc_stop = 0;

	for (w = wr; w; w = w->next, i++) {
		uint64_t seq = ep->shead + i;
		struct ibv_send_wr *s = &ep->swr[i];

		if (i == room) {
			rc_stop = -ENOMEM; /* send queue full */
			break;
		}
		rc_stop = build_send(ep, vt, w, s, &ep->ssge[i],
				     &ep->sring[seq & ep->smask]);
		if (rc_stop)
			break;
		s->wr_id = seq;
		s->next = s + 1;
	}
	if (i > 0) {
		ep->swr[i - 1].next = NULL;
		rc = ibv_post_send(ep->qp, ep->swr, &ibad);
		if (rc) {
			size_t k = 0;

			if (ibad >= ep->swr && ibad < ep->swr + i)
				k = (size_t)(ibad - ep->swr);
			ep->shead += k;
			for (w = wr; k--; w = w->next)
				;
			rkv_log(RKV_LOG_DEBUG, VERBS_COMP,
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

static int verbs_post_recv(struct rkv_ep *base, struct rkv_recv_wr *wr,
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

const struct rkv_tp_ops rkv_tp_verbs_ops = {
	.name = "verbs",
	.create = verbs_create,
	.destroy = verbs_destroy,
	.mem_alloc = verbs_mem_alloc,
	.mem_free = verbs_mem_free,
	.mr_reg = verbs_mr_reg,
	.mr_reg_gpu = verbs_mr_reg_gpu,
	.mr_dereg = verbs_mr_dereg,
	.cq_create = verbs_cq_create,
	.cq_destroy = verbs_cq_destroy,
	.cq_poll = verbs_cq_poll,
	.cq_wait = verbs_cq_wait,
	.listen = rkv_verbs_listen,
	.listener_destroy = rkv_verbs_listener_destroy,
	.accept = rkv_verbs_accept,
	.connect = rkv_verbs_connect,
	.ep_destroy = rkv_verbs_ep_destroy,
	.post = verbs_post,
	.post_recv = verbs_post_recv,
};
