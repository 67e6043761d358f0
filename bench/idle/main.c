/* SPDX-License-Identifier: MIT */
/*
 * rkv-bench-idle - what a server's sleep costs the first request after it:
 * the round trip of a control message (server stats: the server's CPU
 * answers it; run the server with few --buckets, as stats counts the
 * keys) and of a get (one-sided: on tcp the transport thread serves it)
 * right after the client sat idle for --gap-ms, beside one sent straight
 * after it.
 *
 *   rkv-bench-idle --servers ADDR [--tries N] [--gap-ms G]
 *
 * Prints two lines, "idle-wake stats|get gap_ms G first p50 P us p90 Q us
 * max M us warm p50 P us max M us".  Not a test: figures depend on the
 * machine.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hist.h"
#include "rkv.h"
#include "rtime.h"

/* one request of kind get (1) or stats (0): its round trip in *ns */
static int req_ns(struct rkv_client *c, int get, uint64_t *ns)
{
	struct rkv_server_stats st;
	char v[16];
	size_t vl;
	uint64_t t0 = rkv_now_ns();
	int rc = get ? rkv_get(c, "idle", 4, v, sizeof(v), &vl)
		     : rkv_server_stats(c, 0, &st);

	*ns = rkv_now_ns() - t0;
	return rc;
}


static int probe(struct rkv_client *c, int get, long tries, long gap_ms)
{
	struct rkv_hist first, warm;

	rkv_hist_init(&first);
	rkv_hist_init(&warm);
	for (long i = 0; i < tries; i++) {
		struct timespec ts = { gap_ms / 1000, (gap_ms % 1000) * 1000000L };
		uint64_t a, b;
		int rc;

		nanosleep(&ts, NULL);
		rc = req_ns(c, get, &a);
		if (!rc)
			rc = req_ns(c, get, &b);
		if (rc) {
			fprintf(stderr, "rkv-bench-idle: %s: %s\n",
				get ? "get" : "server stats", strerror(-rc));
			return rc;
		}
		rkv_hist_add(&first, a);
		rkv_hist_add(&warm, b);
	}
	printf("idle-wake %s gap_ms %ld first p50 %.1f us p90 %.1f us max "
	       "%.1f us warm p50 %.1f us max %.1f us\n",
	       get ? "get" : "stats", gap_ms,
	       rkv_hist_quantile(&first, 0.5) / 1e3,
	       rkv_hist_quantile(&first, 0.9) / 1e3,
	       rkv_hist_quantile(&first, 1.0) / 1e3,
	       rkv_hist_quantile(&warm, 0.5) / 1e3,
	       rkv_hist_quantile(&warm, 1.0) / 1e3);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "servers", required_argument, NULL, 's' },
		{ "tries", required_argument, NULL, 'n' },
		{ "gap-ms", required_argument, NULL, 'g' },
		{ NULL, 0, NULL, 0 } };
	const char *servers = NULL;
	long tries = 50, gap_ms = 50;
	struct rkv_client_opts o;
	struct rkv_client *c;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		char *end = NULL;

		switch (opt) {
		case 's':
			servers = optarg;
			break;
		case 'n':
		case 'g': {
			long v = strtol(optarg, &end, 10);

			if (!*optarg || *end || v < 1 || v > 100000) {
				fprintf(stderr, "rkv-bench-idle: --%s: '%s' "
						"is not a number in 1..100000\n",
					opt == 'n' ? "tries" : "gap-ms", optarg);
				return 2;
			}
			*(opt == 'n' ? &tries : &gap_ms) = v;
			break;
		}
		default:
			return 2;
		}
	}
	if (!servers || optind < argc) {
		fprintf(stderr, "usage: rkv-bench-idle --servers ADDR "
				"[--tries N] [--gap-ms G]\n");
		return 2;
	}
	rkv_client_opts_init(&o);
	o.servers = servers;
	o.name = "rkv-bench-idle";
	rc = rkv_client_create(&o, &c);
	if (rc) {
		fprintf(stderr, "rkv-bench-idle: cannot connect to %s: %s\n",
			servers, strerror(-rc));
		return 1;
	}
	rc = rkv_put(c, "idle", 4, "value", 5);
	if (rc)
		fprintf(stderr, "rkv-bench-idle: put: %s\n", strerror(-rc));
	if (!rc)
		rc = probe(c, 0, tries, gap_ms);
	if (!rc)
		rc = probe(c, 1, tries, gap_ms);
	rkv_client_destroy(c);
	return rc ? 1 : 0;
}
