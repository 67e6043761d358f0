/* SPDX-License-Identifier: MIT */
/*
 * rkv-bench-failover - the probe of bench/run-failover.sh: how long the
 * keys of a server that dies stay unreadable.
 *
 *   rkv-bench-failover --cluster etcd://HOST:PORT/CLUSTER --victim NAME
 *                      [--keys N] [--timeout-s S]
 *
 * Puts N keys (default 16) whose primary is NAME, prints "ready", then
 * gets them round robin, one at a time, as fast as they answer.  It
 * prints "fail NS ERROR" at the first get that fails and "ok NS" at the
 * first one that succeeds after it (CLOCK_REALTIME nanoseconds; the
 * script compares them with the time of its kill), and exits 0; a value
 * that comes back wrong exits 1, no failover within S seconds (default
 * 60) exits 3, bad arguments or no cluster 2.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rkv.h"

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	const char *url = NULL, *victim = NULL;
	unsigned nkeys = 16, timeout_s = 60, n = 0;
	char keys[64][32];
	struct rkv_client_opts o;
	struct rkv_client *c;
	uint64_t t_fail = 0, end;
	int rc;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--cluster"))
			url = argv[i + 1];
		else if (!strcmp(argv[i], "--victim"))
			victim = argv[i + 1];
		else if (!strcmp(argv[i], "--keys"))
			nkeys = (unsigned)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--timeout-s"))
			timeout_s = (unsigned)atoi(argv[i + 1]);
		else
			break;
	}
	if (!url || !victim || !nkeys || nkeys > 64 || argc % 2 == 0) {
		fprintf(stderr, "usage: rkv-bench-failover --cluster "
				"etcd://HOST:PORT/CLUSTER --victim NAME "
				"[--keys 1-64] [--timeout-s S]\n");
		return 2;
	}
	rkv_client_opts_init(&o);
	o.cluster_file = url;
	o.timeout_ms = 500;
	o.name = "bench-failover";
	rc = rkv_client_create(&o, &c);
	if (rc) {
		fprintf(stderr, "rkv-bench-failover: %s: %s\n", url,
			strerror(-rc));
		return 2;
	}
	for (unsigned i = 0; n < nkeys && i < 1000000; i++) {
		unsigned rep[3];
		size_t kl = (size_t)snprintf(keys[n], sizeof(keys[n]),
					     "fo:%s:%u", victim, i);

		rkv_client_replicas(c, keys[n], kl, rep, 3);
		if (strcmp(rkv_client_server_name(c, rep[0]), victim))
			continue;
		rc = rkv_put(c, keys[n], kl, keys[n], kl);
		if (rc) {
			fprintf(stderr, "rkv-bench-failover: put: %s\n",
				strerror(-rc));
			return 2;
		}
		n++;
	}
	if (n < nkeys) {
		fprintf(stderr, "rkv-bench-failover: %s is the primary of no "
				"key (not in the map?)\n", victim);
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	end = real_ns() + (uint64_t)timeout_s * 1000000000ull;
	for (unsigned i = 0; real_ns() < end; i = (i + 1) % n) {
		char buf[64];
		size_t len = 0;

		rc = rkv_get(c, keys[i], strlen(keys[i]), buf, sizeof(buf),
			     &len);
		if (rc && !t_fail) {
			t_fail = real_ns();
			printf("fail %llu %s\n", (unsigned long long)t_fail,
			       strerror(-rc));
			fflush(stdout);
		} else if (!rc && t_fail) {
			printf("ok %llu\n", (unsigned long long)real_ns());
			if (len != strlen(keys[i]) ||
			    memcmp(buf, keys[i], len)) {
				printf("wrong value for %s\n", keys[i]);
				return 1;
			}
			rkv_client_destroy(c);
			return 0;
		}
	}
	printf("timeout\n");
	return 3;
}
