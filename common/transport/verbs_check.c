/* SPDX-License-Identifier: MIT */
/*
 * verbs_check.c - `rkv-server --check-fabric`'s transport half: what can
 * be read on this host about the RDMA device rkv would use, and what
 * breaks RoCE in production, one line each with what to do: no device;
 * a port that is not ACTIVE; no remote atomics; GID types (RoCE v1 is not
 * routable); the RDMA MTU against the netdev's (RoCE's path MTU is bounded
 * by the Ethernet MTU less 58 bytes of headers, so 1500 caps it at 1024).
 * The device, port and GID index of opts narrow it as rkv_tp_create
 * would.  Nothing is changed; lines go to fn.
 */
#include "verbs_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void say(rkv_tp_check_fn fn, void *arg, enum rkv_check_level lvl,
		const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void say(rkv_tp_check_fn fn, void *arg, enum rkv_check_level lvl,
		const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fn(lvl, line, arg);
}

/* The largest RDMA MTU an Ethernet MTU carries: the IP, UDP and RoCE
 * headers (BTH and its extensions, ICRC) take up to 80 bytes of it, as
 * the kernel's rxe and mlx5 reckon. */
static int roce_mtu_for(int eth_mtu)
{
	int best = 0;

	for (int m = IBV_MTU_256; m <= IBV_MTU_4096; m++)
		if (rkv_verbs_mtu_bytes(m) + 80 <= eth_mtu)
			best = rkv_verbs_mtu_bytes(m);
	return best;
}

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	int ok = f && fgets(buf, (int)len, f);

	if (f)
		fclose(f);
	if (!ok)
		return -1;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

/* The GID at idx and its type; -1 for an empty entry. */
static int gid_at(struct ibv_context *ctx, unsigned port, int idx,
		  union ibv_gid *g)
{
	enum verbs_gid_kind k;

	if (rkv_verbs_query_gid(ctx, (uint8_t)port, idx, g, &k))
		return -1;
	return (int)k;
}

static void check_port(struct ibv_context *ctx, const char *dev, unsigned p,
		       const struct rkv_tp_opts *o, rkv_tp_check_fn fn,
		       void *arg, char *netdev, size_t ndlen)
{
	struct ibv_port_attr pa;
	int eth, v2 = -1, chosen = -1, n = 0;
	char list[160] = "", path[256], nd[64] = "", buf[64];

	if (ibv_query_port(ctx, (uint8_t)p, &pa)) {
		say(fn, arg, RKV_CHECK_ERROR, "%s port %u: ibv_query_port: %s",
		    dev, p, strerror(errno));
		return;
	}
	eth = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	if (pa.state != IBV_PORT_ACTIVE) {
		say(fn, arg, RKV_CHECK_WARN,
		    "%s port %u is not ACTIVE (state %d): check the cable, the "
		    "switch port and (RoCE) that its netdev is up",
		    dev, p, (int)pa.state);
		return;
	}
	for (int i = 0; i < pa.gid_tbl_len && i < 256; i++) {
		union ibv_gid g;
		int k = gid_at(ctx, p, i, &g);

		if (k < 0)
			continue;
		if (k == GID_ROCE_V2 && v2 < 0)
			v2 = i;
		if (n++ < 8) {
			char a[INET6_ADDRSTRLEN];

			inet_ntop(AF_INET6, g.raw, a, sizeof(a));
			snprintf(list + strlen(list), sizeof(list) - strlen(list),
				 "%s[%d] %s %s", n > 1 ? ", " : "", i,
				 rkv_verbs_gid_kind_str((enum verbs_gid_kind)k),
				 a);
		}
		if (!nd[0] && eth) {
			snprintf(path, sizeof(path),
				 "/sys/class/infiniband/%s/ports/%u/gid_attrs/ndevs/%d",
				 dev, p, i);
			read_line(path, nd, sizeof(nd));
		}
	}
	say(fn, arg, RKV_CHECK_OK, "%s port %u: ACTIVE, %s%s%s, GIDs: %s", dev,
	    p, eth ? "Ethernet (RoCE)" : "InfiniBand", nd[0] ? ", netdev " : "",
	    nd, n ? list : "none");
	if (n == 0) {
		say(fn, arg, RKV_CHECK_ERROR,
		    "%s port %u has no GID: %s", dev, p,
		    eth ? "configure an IP address on its netdev" :
			  "is the subnet manager running?");
		return;
	}
	/* as rkv_tp_create picks: a v2 GID of an IPv4 address first */
	chosen = o->gid_index >= 0 ? o->gid_index :
		 eth ? rkv_verbs_default_gid(ctx, (uint8_t)p, pa.gid_tbl_len) :
		       0;
	if (eth && chosen >= 0) {
		union ibv_gid g;
		int k = gid_at(ctx, p, chosen, &g);

		if (k < 0)
			say(fn, arg, RKV_CHECK_ERROR,
			    "GID index %d is empty: the server would refuse to "
			    "start", chosen);
		else if (k == GID_ROCE_V2)
			say(fn, arg, RKV_CHECK_OK,
			    "GID index %d is RoCE v2 (routable, UDP port 4791)",
			    chosen);
		else
			say(fn, arg, RKV_CHECK_WARN,
			    "GID index %d is %s: RoCE v1 does not cross an IP "
			    "router and most fabrics run v2%s", chosen,
			    rkv_verbs_gid_kind_str((enum verbs_gid_kind)k),
			    v2 >= 0 ? "; use --gid-index of a v2 GID" :
				      "; no v2 GID here: check the netdev's "
				      "IP address and the kernel's RoCE mode");
	}
	snprintf(buf, sizeof(buf), "%d", rkv_verbs_mtu_bytes(pa.active_mtu));
	if (eth && nd[0]) {
		char mtu_s[32];
		int eth_mtu = 0, can;

		snprintf(path, sizeof(path), "/sys/class/net/%s/mtu", nd);
		if (!read_line(path, mtu_s, sizeof(mtu_s)))
			eth_mtu = atoi(mtu_s);
		can = roce_mtu_for(eth_mtu);
		if (eth_mtu && can > rkv_verbs_mtu_bytes(pa.active_mtu))
			say(fn, arg, RKV_CHECK_WARN,
			    "MTU: the port runs %s although netdev %s (MTU %d) "
			    "carries %d: the port's MTU is stale or capped by "
			    "the device (max %d)", buf, nd, eth_mtu, can,
			    rkv_verbs_mtu_bytes(pa.max_mtu));
		else if (eth_mtu && can < 4096)
			say(fn, arg, RKV_CHECK_INFO,
			    "MTU: the port runs %s, all that netdev %s's MTU %d "
			    "carries; an RDMA MTU of 4096 needs an Ethernet MTU "
			    "of at least 4176 (4200 is usual) on every host and switch port",
			    buf, nd, eth_mtu);
		else if (eth_mtu)
			say(fn, arg, RKV_CHECK_OK, "MTU: %s (netdev %s MTU %d)",
			    buf, nd, eth_mtu);
	} else {
		say(fn, arg, RKV_CHECK_OK, "MTU: %s (max %d)", buf,
		    rkv_verbs_mtu_bytes(pa.max_mtu));
	}
	if (o->mtu && (int)o->mtu > rkv_verbs_mtu_bytes(pa.active_mtu))
		say(fn, arg, RKV_CHECK_ERROR,
		    "--mtu %u is above the port's active MTU %s: the server "
		    "would refuse to start", o->mtu, buf);
	if (netdev && !netdev[0] && nd[0])
		snprintf(netdev, ndlen, "%s", nd);
}

int rkv_tp_check_fabric(const struct rkv_tp_opts *o, rkv_tp_check_fn fn,
			void *arg, char *netdev, size_t ndlen)
{
	struct ibv_device **list;
	int n = 0, seen = 0;

	if (netdev && ndlen)
		netdev[0] = 0;
	list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		say(fn, arg, RKV_CHECK_ERROR,
		    "no RDMA device on this host: load its driver (Soft-RoCE: "
		    "modprobe rdma_rxe; rdma link add rxe0 type rxe netdev "
		    "IFACE), or run rkv over tcp:// or shm://");
		if (list)
			ibv_free_device_list(list);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		const char *dev = ibv_get_device_name(list[i]);
		struct ibv_device_attr da;
		struct ibv_context *ctx;

		if (o->device && strcmp(o->device, dev))
			continue;
		seen++;
		ctx = ibv_open_device(list[i]);
		if (!ctx || ibv_query_device(ctx, &da)) {
			say(fn, arg, RKV_CHECK_ERROR,
			    "%s: cannot open or query it: %s", dev,
			    strerror(errno));
			if (ctx)
				ibv_close_device(ctx);
			continue;
		}
		if (da.atomic_cap == IBV_ATOMIC_NONE)
			say(fn, arg, RKV_CHECK_ERROR,
			    "%s reports atomic_cap NONE: rkv needs 8-byte RDMA "
			    "compare-and-swap and fetch-and-add (iWARP has "
			    "none; on RoCE check the firmware's settings)",
			    dev);
		else
			say(fn, arg, RKV_CHECK_OK,
			    "%s: remote atomics (%s), %d QPs, %d outstanding "
			    "READ/atomics per QP", dev,
			    da.atomic_cap == IBV_ATOMIC_HCA ? "within the HCA"
							    : "global",
			    da.max_qp, da.max_qp_rd_atom);
		if ((da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) &&
		    da.max_mw > 0)
			say(fn, arg, RKV_CHECK_OK,
			    "%s: type-2B memory windows (%d): each client's "
			    "rkeys work on its own QP only", dev, da.max_mw);
		else
			say(fn, arg, RKV_CHECK_WARN,
			    "%s has no type-2B memory windows: an rkey works "
			    "from any QP of the server (--rkey-windows auto "
			    "falls back to per-region rkeys); keep "
			    "--secret-file and --rotate-rkeys", dev);
		for (unsigned p = 1; p <= da.phys_port_cnt; p++)
			if (!o->port || (unsigned)o->port == p)
				check_port(ctx, dev, p, o, fn, arg, netdev,
					   ndlen);
		ibv_close_device(ctx);
	}
	if (o->device && !seen)
		say(fn, arg, RKV_CHECK_ERROR, "--device %s: no such device "
		    "(ibv_devices lists them)", o->device);
	ibv_free_device_list(list);
	return 0;
}
