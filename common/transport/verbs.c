/* SPDX-License-Identifier: MIT */
/*
 * verbs.c - the verbs provider: rdma-core RC queue pairs.  This file holds
 * the device choice and the context; verbs_mr.c registers memory,
 * verbs_cq.c holds the completion queues, verbs_qp.c the queue pairs,
 * verbs_post.c the datapath (post, post_recv) and verbs_cm.c makes the
 * connections.  Every rdma-core result is turned into 0 / -errno in these
 * files, once.
 *
 * Device choice: the first device (ibv_get_device_list order) with an ACTIVE
 * port, unless opts->device / opts->port name one; GID: a RoCE v2 GID of an
 * IPv4 address on Ethernet ports (index 0 on InfiniBand), unless
 * opts->gid_index names one.  rdma_cm picks the GID of each connection from
 * its address; ours is what rkv_tp_describe reports and what a raw-verbs
 * user of the context would take.
 */
#include "verbs_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../alloc.h"
#include "../log.h"

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

int rkv_verbs_gid_is_v4mapped(const union ibv_gid *g)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return memcmp(g->raw, pfx, sizeof(pfx)) == 0;
}

const char *rkv_verbs_gid_kind_str(enum verbs_gid_kind k)
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
int rkv_verbs_query_gid(struct ibv_context *ctx, uint8_t port, int idx,
			union ibv_gid *gid, enum verbs_gid_kind *kind)
{
	struct ibv_gid_entry e;
	char path[256], buf[32] = "";
	FILE *f;

	if (ibv_query_gid_ex(ctx, port, (uint32_t)idx, &e, 0) == 0) {
		*gid = e.gid;
		*kind = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? GID_ROCE_V2 :
			e.gid_type == IBV_GID_TYPE_ROCE_V1 ? GID_ROCE_V1 :
							       GID_IB;
		return gid_is_zero(gid) ? -ENODATA : 0;
	}
	if (ibv_query_gid(ctx, port, idx, gid))
		return -EINVAL;
	if (gid_is_zero(gid))
		return -ENODATA;
	*kind = GID_UNKNOWN;
	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/%u/gid_attrs/types/%d",
		 ibv_get_device_name(ctx->device), port, idx);
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

/*
 * The QP knobs of o, checked against the port: vt->path_mtu,
 * traffic_class and service_level, and their part of the description
 * (link layer, MTU, traffic class, SL).  -EINVAL with a line on a bad
 * value: an MTU that is no IB MTU or above the port's active one, a
 * traffic class above 255, an SL above 15.
 */
static int choose_knobs(struct verbs_tp *vt, const struct rkv_tp_opts *o,
			const struct ibv_port_attr *pa, char *desc, size_t len)
{
	const char *dev = ibv_get_device_name(vt->ctx->device);
	int eth = pa->link_layer == IBV_LINK_LAYER_ETHERNET, mtu = 0;

	for (int m = IBV_MTU_256; m <= IBV_MTU_4096; m++)
		if (o->mtu && (unsigned)rkv_verbs_mtu_bytes(m) == o->mtu)
			mtu = m;
	if (o->mtu && !mtu) {
		verbs_log(&vt->base, RKV_LOG_ERROR,
			  "mtu %u: an InfiniBand MTU is 256, 512, 1024, 2048 or 4096",
			  o->mtu);
		return -EINVAL;
	}
	if (mtu > (int)pa->active_mtu) {
		verbs_log(&vt->base, RKV_LOG_ERROR,
			  "mtu %u: %s port %u runs an active MTU of %d (its netdev's MTU bounds it on RoCE)",
			  o->mtu, dev, vt->port, rkv_verbs_mtu_bytes(pa->active_mtu));
		return -EINVAL;
	}
	if (o->traffic_class > 255 || o->service_level > 15) {
		verbs_log(&vt->base, RKV_LOG_ERROR, "%s",
			  o->traffic_class > 255 ?
				  "traffic class: 0-255 (DSCP << 2 | ECN)" :
				  "service level: 0-15");
		return -EINVAL;
	}
	vt->path_mtu = mtu;
	vt->traffic_class = o->traffic_class < 0 ? -1 : o->traffic_class;
	vt->service_level = o->service_level < 0 ? -1 : o->service_level;
	if (eth && vt->service_level >= 0) {
		/* RoCE has no SL: its priority is the traffic class's DSCP
		 * (or the VLAN's PCP, which the netdev sets) */
		verbs_log(&vt->base, RKV_LOG_WARN,
			  "service level %d: %s port %u is Ethernet (RoCE), which has no service level; ignored (set the priority with the traffic class)",
			  vt->service_level, dev, vt->port);
		vt->service_level = -1;
	}
	snprintf(desc, len, ", %s, mtu %d%s", eth ? "Ethernet" : "InfiniBand",
		 rkv_verbs_mtu_bytes(mtu ? mtu : (int)pa->active_mtu),
		 mtu ? "" : " (port's)");
	if (vt->traffic_class >= 0)
		snprintf(desc + strlen(desc), len - strlen(desc),
			 ", traffic class %d (DSCP %d, ECN %d)",
			 vt->traffic_class, vt->traffic_class >> 2,
			 vt->traffic_class & 3);
	if (vt->service_level >= 0)
		snprintf(desc + strlen(desc), len - strlen(desc), ", SL %d",
			 vt->service_level);
	return 0;
}

int rkv_verbs_default_gid(struct ibv_context *ctx, uint8_t port,
			  int tbl_len)
{
	int any_v2 = -1, any = -1;
	enum verbs_gid_kind k;
	union ibv_gid g;

	for (int i = 0; i < tbl_len; i++) {
		if (rkv_verbs_query_gid(ctx, port, i, &g, &k))
			continue;
		if (any < 0)
			any = i;
		if (k != GID_ROCE_V2)
			continue;
		if (rkv_verbs_gid_is_v4mapped(&g))
			return i;
		if (any_v2 < 0)
			any_v2 = i;
	}
	return any_v2 >= 0 ? any_v2 : any;
}

/* Sets vt->gid_index and the GID part of the description. */
static int choose_gid(struct verbs_tp *vt, const struct rkv_tp_opts *o,
		      const struct ibv_port_attr *pa, char *desc, size_t len)
{
	const char *dev = ibv_get_device_name(vt->ctx->device);
	union ibv_gid gid;
	enum verbs_gid_kind kind = GID_UNKNOWN;
	char txt[INET6_ADDRSTRLEN];
	int best = -1;

	if (o->gid_index >= 0) {
		if (o->gid_index >= pa->gid_tbl_len ||
		    rkv_verbs_query_gid(vt->ctx, vt->port, o->gid_index, &gid, &kind)) {
			verbs_log(&vt->base, RKV_LOG_ERROR,
				  "%s port %u: gid_index %d is not a valid GID (table has %d entries)",
				  dev, vt->port, o->gid_index, pa->gid_tbl_len);
			return -EINVAL;
		}
		best = o->gid_index;
	} else if (pa->link_layer != IBV_LINK_LAYER_ETHERNET) {
		if (rkv_verbs_query_gid(vt->ctx, vt->port, 0, &gid, &kind) == 0)
			best = 0;
		kind = GID_IB;
	} else {
		best = rkv_verbs_default_gid(vt->ctx, vt->port,
					     pa->gid_tbl_len);
		if (best >= 0)
			rkv_verbs_query_gid(vt->ctx, vt->port, best, &gid, &kind);
	}
	if (best < 0) {
		verbs_log(&vt->base, RKV_LOG_ERROR,
			  "%s port %u: no usable GID (is an IP address configured on its netdev?)",
			  dev, vt->port);
		return -ENODEV;
	}
	vt->gid_index = best;
	if (!inet_ntop(AF_INET6, gid.raw, txt, sizeof(txt)))
		snprintf(txt, sizeof(txt), "?");
	snprintf(desc, len, "%s port %u gid[%d] %s (%s)", dev, vt->port, best,
		 txt, rkv_verbs_gid_kind_str(kind));
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
		verbs_log(&vt->base, RKV_LOG_WARN, "ibv_query_device(%s): %s",
			  name, strerror(errno));
		return -EAGAIN;
	}
	hi = da.phys_port_cnt;
	if (o->port > 0) {
		if ((unsigned)o->port > da.phys_port_cnt) {
			if (!o->device)
				return -EAGAIN;
			verbs_log(&vt->base, RKV_LOG_ERROR,
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
			verbs_log(&vt->base, RKV_LOG_ERROR,
				  "device %s port %u is %s, not ACTIVE", name,
				  p, port_state_str(pa.state));
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
		verbs_log(&vt->base, RKV_LOG_ERROR, "ibv_get_device_list: %s",
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
			verbs_log(&vt->base, RKV_LOG_WARN,
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
		verbs_log(&vt->base, RKV_LOG_ERROR,
			  "no RDMA device named '%s' (devices: %s)", o->device,
			  names);
	else if (o->port > 0)
		verbs_log(&vt->base, RKV_LOG_ERROR,
			  "no RDMA device%s%s whose port %d is ACTIVE (devices: %s)",
			  o->device ? " " : "", o->device ? o->device : "",
			  o->port, names);
	else
		verbs_log(&vt->base, RKV_LOG_ERROR,
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

/*
 * Per-endpoint rkeys (verbs_mw.c): type-2B memory windows where the
 * device has them and opts do not say off; the description says which.
 */
static int choose_windows(struct verbs_tp *vt, const struct rkv_tp_opts *o)
{
	size_t n = strlen(vt->base.describe);
	char *d = vt->base.describe + n;
	size_t room = sizeof(vt->base.describe) - n;
	int has = (vt->dev_attr.device_cap_flags &
		   IBV_DEVICE_MEM_WINDOW_TYPE_2B) && vt->dev_attr.max_mw > 0;

	if (o->rkey_windows == RKV_WINDOWS_OFF) {
		snprintf(d, room, ", rkeys per region (windows off)");
		return 0;
	}
	if (!has) {
		verbs_log(&vt->base,
			  o->rkey_windows == RKV_WINDOWS_ON ? RKV_LOG_ERROR
							    : RKV_LOG_INFO,
			  "%s has no type-2B memory windows (device_cap_flags "
			  "0x%x, max_mw %d): %s",
			  ibv_get_device_name(vt->ctx->device),
			  (unsigned)vt->dev_attr.device_cap_flags,
			  vt->dev_attr.max_mw,
			  o->rkey_windows == RKV_WINDOWS_ON ?
				  "per-connection rkeys were required" :
				  "an rkey works from any connection");
		if (o->rkey_windows == RKV_WINDOWS_ON)
			return -EOPNOTSUPP;
		snprintf(d, room, ", rkeys per region (no memory windows)");
		return 0;
	}
	vt->base.windows = 1;
	snprintf(d, room, ", rkeys per connection (type-2B windows, max %d)",
		 vt->dev_attr.max_mw);
	return 0;
}

static void verbs_destroy(struct rkv_tp *tp)
{
	struct verbs_tp *vt = container_of(tp, struct verbs_tp, base);

	for (unsigned i = 0; i < VERBS_MR_BUCKETS; i++) {
		if (vt->mr_tab[i])
			verbs_log(tp, RKV_LOG_WARN,
				  "context destroyed with MRs still registered");
	}
	if (vt->pd) {
		int rc = ibv_dealloc_pd(vt->pd);

		if (rc)
			verbs_log(tp, RKV_LOG_WARN,
				  "ibv_dealloc_pd: %s (objects still use it?)",
				  strerror(rc));
	}
	if (vt->ctx && ibv_close_device(vt->ctx))
		verbs_log(tp, RKV_LOG_WARN, "ibv_close_device: %s",
			  strerror(errno));
	pthread_mutex_destroy(&vt->mr_lock);
	rkv_free(vt);
}

static int verbs_create(const struct rkv_tp_opts *o, struct rkv_tp **out)
{
	struct rkv_tp_sink sink = rkv_tp_sink_of(o);
	struct verbs_tp *vt;
	struct ibv_port_attr pa;
	char why[200];
	uint64_t budget_us;
	int rc;

	if (!rkv_tp_verbs_available(why, sizeof(why))) {
		rkv_tp_slog(&sink, RKV_LOG_ERROR, VERBS_COMP,
			    "verbs provider: %s", why);
		return -ENODEV;
	}
	vt = rkv_calloc(1, sizeof(*vt));
	if (!vt)
		return -ENOMEM;
	/* what the messages of the device choice (and of verbs_destroy on
	 * failure) need; rkv_tp_create sets both again once we return */
	vt->base.opts = *o;
	vt->base.log = sink;
	pthread_mutex_init(&vt->mr_lock, NULL);
	atomic_init(&vt->mr_gen, 1);
	rc = choose_device(vt, o, &pa);
	if (rc)
		goto fail;
	rc = choose_gid(vt, o, &pa, vt->base.describe,
			sizeof(vt->base.describe));
	if (!rc)
		rc = choose_knobs(vt, o, &pa,
				  vt->base.describe + strlen(vt->base.describe),
				  sizeof(vt->base.describe) -
					  strlen(vt->base.describe));
	if (rc)
		goto fail;
	vt->max_msg_sz = pa.max_msg_sz ? pa.max_msg_sz : UINT32_MAX;
	/* pieces of longer READs and WRITEs: whole pages when it can */
	vt->split_sz = vt->max_msg_sz >= 4096 ? vt->max_msg_sz & ~4095u :
						vt->max_msg_sz;
	errno = 0;
	vt->pd = ibv_alloc_pd(vt->ctx);
	if (!vt->pd) {
		rc = rkv_verbs_neg_errno(ENOMEM);
		verbs_log(&vt->base, RKV_LOG_ERROR, "ibv_alloc_pd(%s): %s",
			  ibv_get_device_name(vt->ctx->device), strerror(-rc));
		goto fail;
	}
	vt->base.has_atomics = vt->dev_attr.atomic_cap != IBV_ATOMIC_NONE;
	vt->quirk_rxe = vt->dev_attr.vendor_id == 0xffffff; /* RXE_VENDOR_ID */
	{
		/* asked (or 16), within the device's limits and a byte */
		int want = o->max_rd_atomic ? (int)o->max_rd_atomic :
					      VERBS_MAX_RD_ATOMIC;

		if (want > 255)
			want = 255;
		vt->rd_atomic = (uint8_t)(vt->dev_attr.max_qp_rd_atom < want ?
						  vt->dev_attr.max_qp_rd_atom :
						  want);
		vt->init_depth = (uint8_t)(vt->dev_attr.max_qp_init_rd_atom <
							   want ?
						   vt->dev_attr.max_qp_init_rd_atom :
						   want);
	}
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
		 ", rd_atomic %u/%u%s", vt->init_depth, vt->rd_atomic,
		 vt->base.has_atomics ? "" : ", no atomics");
	rc = choose_windows(vt, o);
	if (rc)
		goto fail;
	*out = &vt->base;
	return 0;

fail:
	verbs_destroy(&vt->base);
	return rc;
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
	.listener_fd = rkv_verbs_listener_fd,
	.accept = rkv_verbs_accept,
	.connect = rkv_verbs_connect,
	.ep_destroy = rkv_verbs_ep_destroy,
	.post = verbs_post,
	.post_recv = verbs_post_recv,
	.ep_path = rkv_verbs_ep_path,
	.ep_rkey = verbs_ep_rkey,
};
