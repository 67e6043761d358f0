/* SPDX-License-Identifier: MIT */
/*
 * main.c - rkv-bench-transport: latency and rate of one-sided READ, WRITE
 * and CAS on rkv's transport providers, beside the libfabric peer, printed
 * as one table (see bench_internal.h for what a row means).
 *
 * Every point runs in one process: an in-process server context accepts in
 * a thread while the client connects, then the client posts and polls.
 * This is a benchmark, not a test: it never fails on a figure, only on bad
 * usage; a provider that is missing or breaks becomes a row with a note.
 */
#include "bench_internal.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "msg.h"
#include "size.h"
#include "transport.h"
#include "version.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rkv-bench-transport [options]\n"
		"  --provider P    tcp|shm|verbs|all, comma-separated (default all)\n"
		"  --iters N       measured posts per point (default 10000)\n"
		"  --warmup N      unmeasured posts per point (default 1000)\n"
		"  --repeat R      run each point R times, keep the lowest p50\n"
		"                  (default 1)\n"
		"  --sizes LIST    READ/WRITE sizes (bytes, K or M), up to 64 MiB\n"
		"                  (default 8,64,4096)\n"
		"  --ops LIST      read,write,cas (default all three)\n"
		"  --chain K       also measure chains of K WRs per post (max %d)\n"
		"  --spread SIZE   READ and WRITE a new place of a server region\n"
		"                  of SIZE bytes (K/M/G; written once before) on\n"
		"                  each post, as a store's out-of-place writes do\n"
		"                  (default: the same place every time)\n"
		"  --addr ADDR     verbs listen address\n"
		"                  (default verbs://$RKV_VERBS_IP:0)\n"
		"  --json FILE     also write the figures as JSON\n"
		"  --same-context  rkv: one context for server and client\n"
		"  --peers LIST    libfabric: run the libfabric peer too\n"
		"  --lf-prov LIST  libfabric providers, ';' within a name,\n"
		"                  ',' between (default \"tcp;ofi_rxm,shm\")\n"
		"  --lf-progress M thread (default): a target thread polls its CQ;\n"
		"                  inline: the initiator polls both CQs\n"
		"  --ref SPEC      reference row PROVIDER,OP,SIZE,P50_US[,P99_US]\n"
		"                  (e.g. perftest,read,8,46.1); repeatable\n"
		"  --log-level L   debug|info|warn|error|off (default warn)\n"
		"  --version       print the version and exit\n",
		BENCH_MAX_CHAIN);
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_providers(const char *s, struct bench_opts *o)
{
	char buf[128], *save = NULL, *t;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	o->providers = 0;
	o->all = 0;
	for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		enum rkv_tp_provider p;

		if (!strcmp(t, "all")) {
			o->all = 1;
			o->providers |= 1u << RKV_TP_TCP | 1u << RKV_TP_SHM |
					1u << RKV_TP_VERBS;
			continue;
		}
		if (!strcmp(t, "none"))
			continue;
		if (rkv_tp_provider_parse(t, &p) || p == RKV_TP_AUTO)
			return -EINVAL;
		o->providers |= 1u << p;
	}
	return 0;
}

static int parse_sizes(const char *s, struct bench_opts *o)
{
	uint64_t v[BENCH_MAX_SIZES];
	int rc = rkv_parse_size_list(s, 1, 1ull << 26, v, BENCH_MAX_SIZES,
				     &o->nsizes);

	for (unsigned i = 0; !rc && i < o->nsizes; i++)
		o->sizes[i] = (size_t)v[i];
	return rc;
}

static int parse_ops(const char *s, struct bench_opts *o)
{
	char buf[128], *save = NULL, *t;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	o->ops = 0;
	for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int i, found = 0;

		for (i = 0; i < BENCH_OP_NR; i++) {
			if (!strcmp(t, bench_op_str((enum bench_op)i))) {
				o->ops |= 1u << i;
				found = 1;
			}
		}
		if (!found)
			return -EINVAL;
	}
	return o->ops ? 0 : -EINVAL;
}

enum {
	OPT_PROVIDER = 256,
	OPT_ITERS,
	OPT_WARMUP,
	OPT_REPEAT,
	OPT_SIZES,
	OPT_OPS,
	OPT_CHAIN,
	OPT_SPREAD,
	OPT_ADDR,
	OPT_JSON,
	OPT_SAME_CTX,
	OPT_PEERS,
	OPT_LF_PROV,
	OPT_LF_PROGRESS,
	OPT_REF,
	OPT_LOG_LEVEL,
	OPT_HELP,
	OPT_VERSION,
};

static const struct option g_long_opts[] = {
	{ "provider", required_argument, NULL, OPT_PROVIDER },
	{ "iters", required_argument, NULL, OPT_ITERS },
	{ "warmup", required_argument, NULL, OPT_WARMUP },
	{ "repeat", required_argument, NULL, OPT_REPEAT },
	{ "sizes", required_argument, NULL, OPT_SIZES },
	{ "ops", required_argument, NULL, OPT_OPS },
	{ "chain", required_argument, NULL, OPT_CHAIN },
	{ "spread", required_argument, NULL, OPT_SPREAD },
	{ "addr", required_argument, NULL, OPT_ADDR },
	{ "json", required_argument, NULL, OPT_JSON },
	{ "same-context", no_argument, NULL, OPT_SAME_CTX },
	{ "peers", required_argument, NULL, OPT_PEERS },
	{ "lf-prov", required_argument, NULL, OPT_LF_PROV },
	{ "lf-progress", required_argument, NULL, OPT_LF_PROGRESS },
	{ "ref", required_argument, NULL, OPT_REF },
	{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

static char g_verbs_addr[300];
/* Large: BENCH_MAX_ROWS rows; static rather than on the stack. */
static struct bench_report g_report;

int main(int argc, char **argv)
{
	struct bench_opts o = {
		.iters = 10000,
		.warmup = 1000,
		.repeat = 1,
		.sizes = { 8, 64, 4096 },
		.nsizes = 3,
		.ops = (1u << BENCH_OP_NR) - 1,
		.lf_provs = "tcp;ofi_rxm,shm",
		.lf_target_thread = 1,
	};
	enum rkv_log_level lvl;
	unsigned long v;
	int c, rc;

	rkv_log_set_level(RKV_LOG_WARN);
	rkv_log_level_from_env();
	parse_providers("all", &o);
	while ((c = getopt_long(argc, argv, "h", g_long_opts, NULL)) != -1) {
		rc = 0;
		switch (c) {
		case OPT_PROVIDER:
			rc = parse_providers(optarg, &o);
			break;
		case OPT_ITERS:
			rc = parse_uint(optarg, 100000000ul, &v);
			if (!rc && v == 0)
				rc = -EINVAL;
			o.iters = (unsigned)v;
			break;
		case OPT_WARMUP:
			rc = parse_uint(optarg, 100000000ul, &v);
			o.warmup = (unsigned)v;
			break;
		case OPT_REPEAT:
			rc = parse_uint(optarg, 100, &v);
			if (!rc && v == 0)
				rc = -EINVAL;
			o.repeat = (unsigned)v;
			break;
		case OPT_SIZES:
			rc = parse_sizes(optarg, &o);
			break;
		case OPT_OPS:
			rc = parse_ops(optarg, &o);
			break;
		case OPT_CHAIN:
			rc = parse_uint(optarg, BENCH_MAX_CHAIN, &v);
			o.chain = v > 1 ? (unsigned)v : 0;
			break;
		case OPT_SPREAD: {
			uint64_t bytes;

			rc = rkv_parse_size(optarg, &bytes);
			if (!rc && bytes > (64ull << 30))
				rc = -EINVAL;
			if (!rc)
				o.spread = (size_t)bytes;
			break;
		}
		case OPT_ADDR:
			o.addr = optarg;
			break;
		case OPT_JSON:
			o.json = optarg;
			break;
		case OPT_SAME_CTX:
			o.same_ctx = 1;
			break;
		case OPT_PEERS:
			if (!strcmp(optarg, "libfabric"))
				o.peer_libfabric = 1;
			else if (strcmp(optarg, "none"))
				rc = -EINVAL;
			break;
		case OPT_LF_PROV:
			o.lf_provs = optarg;
			break;
		case OPT_LF_PROGRESS:
			if (!strcmp(optarg, "thread"))
				o.lf_target_thread = 1;
			else if (!strcmp(optarg, "inline"))
				o.lf_target_thread = 0;
			else
				rc = -EINVAL;
			break;
		case OPT_REF:
			rc = bench_ref_add(&g_report, optarg);
			break;
		case OPT_LOG_LEVEL:
			rc = rkv_log_level_parse(optarg, &lvl);
			if (!rc)
				rkv_log_set_level(lvl);
			break;
		case OPT_HELP:
		case 'h':
			usage(stdout);
			return 0;
		case OPT_VERSION:
			return rkv_version_print("rkv-bench-transport",
						 RKV_PROTO_VERSION) ? 2 : 0;
		default:
			usage(stderr);
			return 2;
		}
		if (rc) {
			fprintf(stderr, "rkv-bench-transport: bad value '%s'\n",
				optarg);
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (!o.addr) {
		const char *ip = getenv("RKV_VERBS_IP");

		snprintf(g_verbs_addr, sizeof(g_verbs_addr), "verbs://%s:0",
			 ip && *ip ? ip : "127.0.0.1");
		o.addr = g_verbs_addr;
	}

	bench_rkv_run(&o, &g_report);
	if (o.peer_libfabric)
		bench_libfabric_run(&o, &g_report);
	return bench_report_print(&o, &g_report) ? 1 : 0;
}
