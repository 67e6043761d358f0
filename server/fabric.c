/* SPDX-License-Identifier: MIT */
/*
 * fabric.c - `rkv-server --check-fabric`: the transport's findings about
 * the RDMA device (common/transport/verbs_check.c), then what only the
 * server knows or the host's tools tell: whether the memlock limit lets it
 * register its regions, and the netdev's PFC and RoCE ECN settings where
 * `dcb` (iproute2) or the driver's sysfs files show them.  One line each,
 * "ok", "info", "WARN" or "ERROR" first; the last line counts them.
 * Exit status 0 without errors, 2 with.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "server_internal.h"
#include "transport.h"

struct tally {
	FILE *out;
	unsigned n[4];
};

static void line(enum rkv_check_level lvl, const char *msg, void *arg)
{
	static const char *const tag[] = { "ok   ", "info ", "WARN ", "ERROR" };
	struct tally *t = arg;

	t->n[lvl]++;
	fprintf(t->out, "%s %s\n", tag[lvl], msg);
}

static void size_txt(uint64_t b, char *out, size_t len)
{
	if (b >= (1ull << 30))
		snprintf(out, len, "%.1f GiB", (double)b / (1ull << 30));
	else
		snprintf(out, len, "%.1f MiB", (double)b / (1ull << 20));
}

static void check_memlock(const struct rkv_srv_config *cfg, struct tally *t)
{
	uint64_t need = cfg->memory + rkv_srv_nslots(cfg) * 8 +
			RKV_INDEX_EXTRA;
	struct rlimit rl;
	char a[32], b[32];

	size_txt(need, a, sizeof(a));
	if (geteuid() == 0) {
		line(RKV_CHECK_OK, "memlock: running as root (CAP_IPC_LOCK): "
		     "the limit does not apply", t);
		return;
	}
	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur >= need) {
		char msg[160];

		snprintf(msg, sizeof(msg), "memlock: the limit covers the %s "
			 "this server registers (--memory and the index)", a);
		line(RKV_CHECK_OK, msg, t);
		return;
	}
	size_txt(rl.rlim_cur, b, sizeof(b));
	char msg[400];

	snprintf(msg, sizeof(msg), "memlock: the limit is %s, below the %s "
		 "this server registers (--memory and the index): raise it "
		 "(ulimit -l unlimited; LimitMEMLOCK=infinity in a systemd "
		 "unit; memlock in /etc/security/limits.conf)", b, a);
	line(RKV_CHECK_ERROR, msg, t);
}

/* PFC and ECN of netdev nd, from `dcb pfc show` and mlx5's sysfs. */
static void check_pfc_ecn(const char *nd, struct tally *t)
{
	char cmd[200], out[400] = "", path[200], msg[600];
	FILE *p;
	int found_ecn = 0;

	snprintf(cmd, sizeof(cmd),
		 "command -v dcb >/dev/null 2>&1 && dcb pfc show dev %s 2>&1",
		 nd);
	p = popen(cmd, "r");
	if (p) {
		size_t n = fread(out, 1, sizeof(out) - 1, p);

		out[n] = 0;
		pclose(p);
	}
	for (char *c = out; *c; c++)
		if (*c == '\n')
			*c = ' ';
	if (out[0] && strstr(out, "pfc-cap")) {
		snprintf(msg, sizeof(msg), "PFC on %s: %s(the traffic class's "
			 "priority should be lossless on every host and "
			 "switch)", nd, out);
		line(strstr(out, "prio-pfc 0:off 1:off 2:off 3:off 4:off "
				 "5:off 6:off 7:off") ? RKV_CHECK_WARN
						      : RKV_CHECK_INFO, msg, t);
	} else {
		snprintf(msg, sizeof(msg), "PFC on %s: not readable here (no "
			 "`dcb` tool from iproute2, or the driver has no DCB): "
			 "check that the switches run PFC on the priority "
			 "rkv's --traffic-class maps to", nd);
		line(RKV_CHECK_INFO, msg, t);
	}
	for (int rp = 0; rp < 2; rp++) {
		char v[16] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/sys/class/net/%s/ecn/%s/enable/3",
			 nd, rp ? "roce_rp" : "roce_np");
		f = fopen(path, "r");
		if (!f)
			continue;
		found_ecn = 1;
		if (fgets(v, sizeof(v), f))
			v[strcspn(v, "\n")] = 0;
		fclose(f);
		snprintf(msg, sizeof(msg), "ECN (%s) on %s, priority 3: %s",
			 rp ? "reaction point" : "notification point", nd,
			 v[0] == '1' ? "on" : "off");
		line(v[0] == '1' ? RKV_CHECK_OK : RKV_CHECK_WARN, msg, t);
	}
	if (!found_ecn) {
		snprintf(msg, sizeof(msg), "ECN on %s: the driver exposes no "
			 "RoCE ECN settings (mlx5 has /sys/class/net/IF/ecn)",
			 nd);
		line(RKV_CHECK_INFO, msg, t);
	}
}

int rkv_srv_check_fabric(const struct rkv_srv_config *cfg, FILE *out)
{
	struct tally t = { .out = out };
	struct rkv_tp_opts o;
	char nd[64] = "";

	rkv_tp_opts_init(&o);
	o.device = cfg->device[0] ? cfg->device : NULL;
	o.port = (int)cfg->port;
	o.gid_index = (int)cfg->gid_index;
	o.mtu = (unsigned)cfg->mtu;
	rkv_tp_check_fabric(&o, line, &t, nd, sizeof(nd));
	if (t.n[RKV_CHECK_OK] + t.n[RKV_CHECK_WARN] > 0) {
		check_memlock(cfg, &t);
		if (nd[0])
			check_pfc_ecn(nd, &t);
	}
	fprintf(out, "%u ok, %u info, %u warnings, %u errors\n",
		t.n[RKV_CHECK_OK], t.n[RKV_CHECK_INFO], t.n[RKV_CHECK_WARN],
		t.n[RKV_CHECK_ERROR]);
	return t.n[RKV_CHECK_ERROR] ? 2 : 0;
}
