/* SPDX-License-Identifier: MIT */
/*
 * rkv-bench-kv - load keys into rkv servers, then run a mixed workload
 * through librkv's pipelined interface and report throughput, latency
 * percentiles and round trips per operation type.
 *
 *   rkv-bench-kv --servers ADDR[,ADDR] [--keys N] [--ops N | --seconds S]
 *                [--mix GET:PUT:RMW:DEL] [--value-size B] [--inflight K]
 *                [--json FILE] [--label TEXT] [--no-load]
 *   rkv-bench-kv --servers ADDR --get-loop N [--hot H] [--value-size B]
 *                [--json FILE] [--label TEXT] [--no-load]
 *
 *   rkv-bench-kv --servers ADDR --big SIZE[,SIZE...] [--reps N] [--warm BYTES]
 *                [--json FILE]
 *
 * --big: one thread, for each SIZE (bytes, or with K/M suffix) N
 * synchronous rkv_put of one key with a value of that size, then N
 * synchronous rkv_get of it (its location cached), each timed alone; the
 * p50s and the bytes per second they make.  bench/run-big.sh sets them
 * beside the transport's own READ and WRITE of the same bytes.  --warm:
 * before each size's timed puts, untimed puts of it until its blocks have
 * covered BYTES (the server's region: a block lands where the last grant
 * ended), then a pause of WARM_PAUSE_MS for the replaced blocks to come
 * back from their grace period, so that the timed puts write memory that
 * was written before, as the raw WRITE's buffer is, instead of pages
 * touched for the first time (the server's --big-grace must be shorter
 * than the pause).
 *
 * --get-loop: one thread, N synchronous rkv_get calls cycling over H hot
 * keys (default 16, values of 1024 bytes unless --value-size), every one
 * with its location cached (a warm-up pass reads each key twice first).
 * Each get is timed alone (every sample kept: exact percentiles); the same
 * loop with the rkv_get call replaced by nothing (a compiler barrier) is
 * timed too, and its p50 is the harness's own cost (two clock reads, a
 * store): the store's figure is the get's p50 less the harness's.
 *
 * A progress line is printed every second on a terminal (or with
 * --progress).  Not a test: figures depend on the machine.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hist.h"
#include "msg.h"
#include "rkv.h"
#include "rtime.h"
#include "size.h"
#include "version.h"

#define NTYPES 4
static const char *const type_name[NTYPES] = { "get", "put", "delete", "rmw" };

struct slot {
	struct rkv_op op;
	char key[32];
	char val[4096];
	char buf[4096];
};

static uint64_t g_rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	g_rng ^= g_rng << 13;
	g_rng ^= g_rng >> 7;
	g_rng ^= g_rng << 17;
	return g_rng;
}

static int inc_fn(const void *old, size_t old_len, void *out, size_t cap,
		  size_t *out_len, void *arg)
{
	uint64_t v = 0;

	(void)cap;
	(void)arg;
	if (old && old_len >= 8)
		memcpy(&v, old, 8);
	v++;
	memcpy(out, &v, 8);
	*out_len = 8;
	return RKV_RMW_WRITE;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: rkv-bench-kv --servers ADDR[,ADDR] [--keys N] "
		   "[--ops N | --seconds S] [--mix GET:PUT:RMW:DEL]\n"
		   "       [--value-size B] [--inflight K] [--json FILE] "
		   "[--label TEXT] [--no-load] [--progress]\n"
		   "       rkv-bench-kv --servers ADDR[,ADDR] --get-loop N "
		   "[--hot H] [--value-size B] [--json FILE]\n"
		   "       [--label TEXT] [--no-load]\n"
		   "       rkv-bench-kv --servers ADDR --big SIZE[,SIZE...] "
		   "[--reps N] [--warm BYTES] [--json FILE]\n"
		   "       rkv-bench-kv --help | --version\n");
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Sort the n samples of s; set quantiles 0.5 and 0.99 and the mean. */
static void quantiles(uint32_t *s, uint64_t n, uint64_t *p50, uint64_t *p99,
		      double *mean)
{
	double sum = 0;

	qsort(s, n, sizeof(*s), cmp_u32);
	for (uint64_t i = 0; i < n; i++)
		sum += s[i];
	*p50 = s[(n - 1) / 2];
	*p99 = s[(n - 1) * 99 / 100];
	*mean = sum / (double)n;
}

#define WARM_PAUSE_MS 1500u /* after --warm's puts (a --big-grace more) */

/* --big: per size, reps timed puts then reps timed cached gets of one
 * key; one line each.  0, or 2 on an error (printed). */
static int big_loop(struct rkv_client *c, const uint64_t *sizes,
		    unsigned nsizes, uint64_t reps, uint64_t warm,
		    const char *json, const char *servers)
{
	uint64_t max = 0;
	FILE *jf = NULL;

	for (unsigned i = 0; i < nsizes; i++)
		if (sizes[i] > max)
			max = sizes[i];
	char *val = malloc(max), *buf = malloc(max);
	uint32_t *smp = malloc(reps * sizeof(*smp));

	if (!val || !buf || !smp) {
		fprintf(stderr, "rkv-bench-kv: out of memory\n");
		return 2;
	}
	for (uint64_t i = 0; i < max; i++)
		val[i] = (char)(i * 131 + 7);
	if (json && !(jf = fopen(json, "w"))) {
		fprintf(stderr, "rkv-bench-kv: %s: %s\n", json, strerror(errno));
		return 2;
	}
	if (jf)
		fprintf(jf, "[");
	printf("big: %llu puts then %llu cached gets of each size, one at a "
	       "time, on %s\n", (unsigned long long)reps,
	       (unsigned long long)reps, servers);
	for (unsigned z = 0; z < nsizes; z++) {
		uint64_t n = sizes[z], p50[2], p99[2], t0;
		double mean[2];
		char k[32];
		size_t kl = (size_t)snprintf(k, sizeof(k), "big-%llu",
					     (unsigned long long)n), vl = 0;

		for (uint64_t w = 0; warm && w < (warm + n - 1) / n + 1; w++) {
			int rc = rkv_put(c, k, kl, val, n);

			if (rc) {
				fprintf(stderr, "rkv-bench-kv: warm-up put of "
					"%llu bytes: %s\n",
					(unsigned long long)n, strerror(-rc));
				return 2;
			}
		}
		if (warm) {
			uint64_t until = rkv_now_ms() + WARM_PAUSE_MS;

			/* polled: the client sends its block returns */
			while (rkv_now_ms() < until) {
				(void)rkv_poll(c, NULL, 0);
				usleep(1000);
			}
		}
		for (int kind = 0; kind < 2; kind++) {
			/* one untimed first: buffers registered, location
			 * cached */
			for (uint64_t r = 0; r <= reps; r++) {
				int rc;

				t0 = rkv_now_ns();
				rc = kind == 0 ? rkv_put(c, k, kl, val, n)
					       : rkv_get(c, k, kl, buf, max, &vl);
				uint64_t d = rkv_now_ns() - t0;

				if (rc || (kind == 1 && vl != n)) {
					fprintf(stderr, "rkv-bench-kv: %s of "
						"%llu bytes: %s\n",
						kind ? "get" : "put",
						(unsigned long long)n,
						rc ? strerror(-rc) : "wrong length");
					return 2;
				}
				if (r)
					smp[r - 1] = (uint32_t)(d < UINT32_MAX ? d
									: UINT32_MAX);
			}
			quantiles(smp, reps, &p50[kind], &p99[kind],
				  &mean[kind]);
		}
		if (memcmp(buf, val, n)) {
			fprintf(stderr, "rkv-bench-kv: get of %llu bytes: "
				"another value\n", (unsigned long long)n);
			return 2;
		}
		printf("big %llu put p50 %llu ns p99 %llu ns (%.0f MB/s) get "
		       "p50 %llu ns p99 %llu ns (%.0f MB/s)\n",
		       (unsigned long long)n, (unsigned long long)p50[0],
		       (unsigned long long)p99[0], (double)n * 1e3 / (double)p50[0],
		       (unsigned long long)p50[1], (unsigned long long)p99[1],
		       (double)n * 1e3 / (double)p50[1]);
		if (jf)
			fprintf(jf, "%s{\"size\":%llu,\"put_p50_ns\":%llu,"
				"\"get_p50_ns\":%llu}", z ? "," : "",
				(unsigned long long)n,
				(unsigned long long)p50[0],
				(unsigned long long)p50[1]);
		(void)rkv_delete(c, k, kl);
	}
	if (jf) {
		fprintf(jf, "]\n");
		fclose(jf);
	}
	free(val);
	free(buf);
	free(smp);
	return 0;
}

/* The hot keys' names: key<10 digits>, as the mixed run's. */
static int hot_key(char *k, size_t cap, uint64_t i)
{
	return snprintf(k, cap, "key%010llu", (unsigned long long)i);
}

/*
 * --get-loop: n cached gets of hot keys, one at a time, each timed with
 * two clock reads; then the same loop with no get (the harness).  Values
 * are checked for length (every get must find its key).  0, or 2 on an
 * error (printed).
 */
static int get_loop(struct rkv_client *c, uint64_t n, uint64_t hot,
		    uint64_t vsize, int no_load, const char *json,
		    const char *label, const char *servers)
{
	char (*keys)[32] = calloc(hot, sizeof(*keys));
	int *klen = calloc(hot, sizeof(*klen));
	char *val = malloc(vsize), buf[4096];
	uint32_t *smp = malloc(n * sizeof(*smp));
	struct rkv_client_stats st;
	uint64_t errs = 0, t0, t1, g50, g99, h50, h99;
	double gmean, hmean;
	size_t vl;
	int rc;

	if (!keys || !klen || !val || !smp) {
		fprintf(stderr, "rkv-bench-kv: out of memory\n");
		return 2;
	}
	memset(val, 'v', vsize);
	for (uint64_t i = 0; i < hot; i++) {
		klen[i] = hot_key(keys[i], sizeof(keys[i]), i);
		rc = no_load ? 0 : rkv_put(c, keys[i], (size_t)klen[i], val,
					   vsize);
		if (rc) {
			fprintf(stderr, "rkv-bench-kv: put %s: %s\n", keys[i],
				strerror(-rc));
			return 2;
		}
	}
	/* warm-up: the first get may locate the key, the second is cached */
	for (int pass = 0; pass < 2; pass++)
		for (uint64_t i = 0; i < hot; i++) {
			rc = rkv_get(c, keys[i], (size_t)klen[i], buf,
				     sizeof(buf), &vl);
			if (rc) {
				fprintf(stderr, "rkv-bench-kv: get %s: %s\n",
					keys[i], strerror(-rc));
				return 2;
			}
		}
	rkv_client_stats_reset(c);
	uint64_t start = rkv_now_ns();

	for (uint64_t i = 0, k = 0; i < n; i++) {
		t0 = rkv_now_ns();
		rc = rkv_get(c, keys[k], (size_t)klen[k], buf, sizeof(buf),
			     &vl);
		t1 = rkv_now_ns();
		smp[i] = (uint32_t)(t1 - t0 < UINT32_MAX ? t1 - t0 : UINT32_MAX);
		if (rc || vl != vsize)
			errs++;
		if (++k == hot)
			k = 0;
	}
	double secs = (double)(rkv_now_ns() - start) / 1e9;

	rkv_client_stats(c, &st);
	quantiles(smp, n, &g50, &g99, &gmean);
	/* the harness: the same loop, the get replaced by nothing */
	for (uint64_t i = 0, k = 0; i < n; i++) {
		t0 = rkv_now_ns();
		__asm__ __volatile__("" : : "r"(keys[k]) : "memory");
		t1 = rkv_now_ns();
		smp[i] = (uint32_t)(t1 - t0 < UINT32_MAX ? t1 - t0 : UINT32_MAX);
		if (++k == hot)
			k = 0;
	}
	quantiles(smp, n, &h50, &h99, &hmean);
	uint64_t net = g50 > h50 ? g50 - h50 : 0;
	double rtt = st.get.ops ? (double)st.get.rtts / (double)st.get.ops : 0;

	printf("get-loop: %llu gets of %llu hot keys (%llu-byte values) in "
	       "%.2f s on %s\n",
	       (unsigned long long)n, (unsigned long long)hot,
	       (unsigned long long)vsize, secs, servers);
	printf("get     p50 %llu ns, p99 %llu ns, mean %.0f ns\n",
	       (unsigned long long)g50, (unsigned long long)g99, gmean);
	printf("harness p50 %llu ns, p99 %llu ns (the loop without the get)\n",
	       (unsigned long long)h50, (unsigned long long)h99);
	printf("store   p50 %llu ns (get less harness); RTT/get %.2f; cache "
	       "hits %llu, misses %llu; errors %llu\n",
	       (unsigned long long)net, rtt,
	       (unsigned long long)st.cache_hits,
	       (unsigned long long)st.cache_misses, (unsigned long long)errs);
	if (json) {
		FILE *jf = fopen(json, "w");

		if (!jf) {
			fprintf(stderr, "rkv-bench-kv: cannot write %s: %s\n",
				json, strerror(errno));
			return 2;
		}
		fprintf(jf, "{\"label\":\"%s\",\"servers\":\"%s\","
			    "\"mode\":\"get-loop\",\"gets\":%llu,\"hot\":%llu,"
			    "\"value_size\":%llu,\"seconds\":%.3f,"
			    "\"p50_ns\":%llu,\"p99_ns\":%llu,\"mean_ns\":%.1f,"
			    "\"harness_p50_ns\":%llu,\"harness_p99_ns\":%llu,"
			    "\"store_p50_ns\":%llu,\"rtt_per_get\":%.3f,"
			    "\"cache_hits\":%llu,\"cache_misses\":%llu,"
			    "\"errors\":%llu}\n",
			label, servers, (unsigned long long)n,
			(unsigned long long)hot, (unsigned long long)vsize,
			secs, (unsigned long long)g50, (unsigned long long)g99,
			gmean, (unsigned long long)h50,
			(unsigned long long)h99, (unsigned long long)net, rtt,
			(unsigned long long)st.cache_hits,
			(unsigned long long)st.cache_misses,
			(unsigned long long)errs);
		fclose(jf);
	}
	free(smp);
	free(val);
	free(klen);
	free(keys);
	return errs ? 2 : 0;
}

static int parse_u64(const char *opt, const char *s, uint64_t min,
		     uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max) {
		fprintf(stderr, "rkv-bench-kv: %s: bad value '%s' (%llu..%llu)\n",
			opt, s, (unsigned long long)min,
			(unsigned long long)max);
		return -1;
	}
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "servers", required_argument, NULL, 's' },
		{ "keys", required_argument, NULL, 'k' },
		{ "ops", required_argument, NULL, 'n' },
		{ "seconds", required_argument, NULL, 'S' },
		{ "mix", required_argument, NULL, 'm' },
		{ "value-size", required_argument, NULL, 'v' },
		{ "inflight", required_argument, NULL, 'i' },
		{ "json", required_argument, NULL, 'j' },
		{ "label", required_argument, NULL, 'l' },
		{ "no-load", no_argument, NULL, 'N' },
		{ "progress", no_argument, NULL, 'P' },
		{ "get-loop", required_argument, NULL, 'G' },
		{ "hot", required_argument, NULL, 'H' },
		{ "big", required_argument, NULL, 'B' },
		{ "reps", required_argument, NULL, 'R' },
		{ "warm", required_argument, NULL, 'W' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *servers = NULL, *json = NULL, *label = "";
	uint64_t keys = 100000, ops = 0, seconds = 0, vsize = 1000,
		 inflight = 16, get_n = 0, hot = 16, big[16], reps = 10, warm = 0;
	unsigned nbig = 0;
	int vsize_set = 0;
	unsigned mix[NTYPES] = { 70, 20, 0, 10 };
	int no_load = 0, progress = isatty(1), ch;

	while ((ch = getopt_long(argc, argv, "s:k:n:S:m:v:i:j:l:NPhG:H:B:R:W:", lo,
				 NULL)) != -1) {
		switch (ch) {
		case 's': servers = optarg; break;
		case 'k':
			if (parse_u64("--keys", optarg, 1, 100000000, &keys))
				return 2;
			break;
		case 'n':
			if (parse_u64("--ops", optarg, 1, 1ull << 40, &ops))
				return 2;
			break;
		case 'S':
			if (parse_u64("--seconds", optarg, 1, 86400, &seconds))
				return 2;
			break;
		case 'm':
			if (sscanf(optarg, "%u:%u:%u:%u", &mix[0], &mix[1],
				   &mix[3], &mix[2]) != 4 ||
			    mix[0] + mix[1] + mix[2] + mix[3] != 100) {
				fprintf(stderr, "rkv-bench-kv: --mix: want "
						"GET:PUT:RMW:DEL summing to 100, "
						"got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'v':
			if (parse_u64("--value-size", optarg, 8, 4096, &vsize))
				return 2;
			vsize_set = 1;
			break;
		case 'i':
			if (parse_u64("--inflight", optarg, 1, 256, &inflight))
				return 2;
			break;
		case 'j': json = optarg; break;
		case 'l': label = optarg; break;
		case 'N': no_load = 1; break;
		case 'P': progress = 1; break;
		case 'G':
			if (parse_u64("--get-loop", optarg, 1, 100000000,
				      &get_n))
				return 2;
			break;
		case 'H':
			if (parse_u64("--hot", optarg, 1, 1000000, &hot))
				return 2;
			break;
		case 'B':
			if (rkv_parse_size_list(optarg, 1, 1ull << 30, big, 16,
						&nbig)) {
				fprintf(stderr, "rkv-bench-kv: --big: want "
						"SIZE[,SIZE...] of 1 B to 1 GiB "
						"(K/M/G suffixes), got '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'R':
			if (parse_u64("--reps", optarg, 1, 1000000, &reps))
				return 2;
			break;
		case 'W':
			if (rkv_parse_size(optarg, &warm) || !warm ||
			    warm > (1ull << 40)) {
				fprintf(stderr, "rkv-bench-kv: --warm: want a "
					"size (bytes, K, M or G), got '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		case 'V':
			return rkv_version_print("rkv-bench-kv",
						 RKV_PROTO_VERSION) ? 2 : 0;
		default: usage(stderr); return 2;
		}
	}
	if (!servers) {
		fprintf(stderr, "rkv-bench-kv: --servers is required\n");
		return 2;
	}
	if (!ops && !seconds)
		ops = 200000;

	struct rkv_client_opts o;
	struct rkv_client *c;
	int rc;

	rkv_client_opts_init(&o);
	o.servers = servers;
	o.max_inflight = (unsigned)inflight;
	o.max_value = 4096;
	for (unsigned i = 0; i < nbig; i++)
		if (big[i] > o.max_value)
			o.max_value = big[i];
	o.name = "rkv-bench-kv";
	rc = rkv_client_create(&o, &c);
	if (rc) {
		fprintf(stderr, "rkv-bench-kv: cannot connect to %s: %s "
				"(is rkv-server running?)\n",
			servers, strerror(-rc));
		return 2;
	}
	if (nbig) {
		rc = big_loop(c, big, nbig, reps, warm, json, servers);
		rkv_client_destroy(c);
		return rc;
	}
	if (get_n) {
		rc = get_loop(c, get_n, hot, vsize_set ? vsize : 1024, no_load,
			      json, label, servers);
		rkv_client_destroy(c);
		return rc;
	}
	struct slot *sl = calloc(inflight, sizeof(*sl));
	struct rkv_op *done[64];
	struct rkv_hist h[NTYPES];
	uint64_t errs[NTYPES] = { 0 }, cnt[NTYPES] = { 0 };

	if (!sl) {
		fprintf(stderr, "rkv-bench-kv: out of memory\n");
		return 2;
	}
	for (int t = 0; t < NTYPES; t++)
		rkv_hist_init(&h[t]);

	/* load phase: put every key once, pipelined */
	uint64_t next = 0, finished = 0, t0 = rkv_now_ns(), last = t0;

	for (uint64_t i = 0; i < inflight; i++) {
		memset(sl[i].val, 'a' + (int)(i % 26), sizeof(sl[i].val));
		sl[i].op.user = &sl[i];
	}
	if (!no_load) {
		while (finished < keys) {
			for (uint64_t i = 0; i < inflight && next < keys; i++) {
				struct slot *s = &sl[i];

				if (s->op.status == -EINPROGRESS)
					continue;
				int n = snprintf(s->key, sizeof(s->key),
						 "key%010llu",
						 (unsigned long long)next);
				s->op = (struct rkv_op){
					.type = RKV_OP_PUT, .key = s->key,
					.key_len = (size_t)n, .val = s->val,
					.val_len = vsize, .user = s };
				if (rkv_submit(c, &s->op))
					break;
				next++;
			}
			int n = rkv_poll(c, done, 64);

			if (n < 0) {
				fprintf(stderr, "rkv-bench-kv: %s\n",
					strerror(-n));
				return 2;
			}
			for (int i = 0; i < n; i++) {
				if (done[i]->status) {
					fprintf(stderr,
						"rkv-bench-kv: load: put %.*s: %s\n",
						(int)done[i]->key_len,
						(const char *)done[i]->key,
						strerror(-done[i]->status));
					return 2;
				}
				done[i]->status = 0;
				finished++;
			}
			uint64_t now = rkv_now_ns();

			if (progress && now - last > 1000000000ull) {
				fprintf(stderr, "\rload: %llu/%llu keys",
					(unsigned long long)finished,
					(unsigned long long)keys);
				last = now;
			}
		}
		double s = (double)(rkv_now_ns() - t0) / 1e9;

		if (progress)
			fprintf(stderr, "\r");
		printf("load: %llu keys of %llu bytes in %.2f s (%.0f puts/s)\n",
		       (unsigned long long)keys, (unsigned long long)vsize, s,
		       (double)keys / s);
	}
	rkv_client_stats_reset(c);

	/* run phase */
	uint64_t started = 0, end_ns = seconds ? rkv_now_ns() + seconds * 1000000000ull : 0;

	finished = 0;
	t0 = last = rkv_now_ns();
	uint64_t last_done = 0;

	for (;;) {
		int more = seconds ? rkv_now_ns() < end_ns : started < ops;

		for (uint64_t i = 0; more && i < inflight; i++) {
			struct slot *s = &sl[i];

			if (!seconds && started >= ops)
				break;

			if (s->op.status == -EINPROGRESS)
				continue;
			unsigned r = (unsigned)(rnd() % 100), t = 0;

			while (t < NTYPES - 1 && r >= mix[t]) {
				r -= mix[t];
				t++;
			}
			int n = snprintf(s->key, sizeof(s->key), "key%010llu",
					 (unsigned long long)(rnd() % keys));

			s->op = (struct rkv_op){ .type = (enum rkv_op_type)t,
						 .key = s->key,
						 .key_len = (size_t)n,
						 .val = s->val, .val_len = vsize,
						 .buf = s->buf,
						 .buf_cap = sizeof(s->buf),
						 .fn = inc_fn, .user = s };
			if (rkv_submit(c, &s->op))
				break;
			started++;
		}
		if (!more && rkv_inflight(c) == 0)
			break;
		int n = rkv_poll(c, done, 64);

		if (n < 0) {
			fprintf(stderr, "rkv-bench-kv: %s\n", strerror(-n));
			return 2;
		}
		for (int i = 0; i < n; i++) {
			struct rkv_op *op = done[i];
			unsigned t = op->type;

			cnt[t]++;
			rkv_hist_add(&h[t], op->latency_ns);
			if (op->status && op->status != -ENOENT)
				errs[t]++;
			op->status = 0;
			finished++;
		}
		uint64_t now = rkv_now_ns();

		if (progress && now - last >= 1000000000ull) {
			double el = (double)(now - t0) / 1e9;
			double rate = (double)(finished - last_done) /
				      ((double)(now - last) / 1e9);
			double left = seconds ? (double)(end_ns - now) / 1e9 :
				      rate > 0 ? (double)(ops - finished) / rate : 0;

			fprintf(stderr, "\r%.0fs: %llu ops, %.0f ops/s, ~%.0fs left   ",
				el, (unsigned long long)finished, rate,
				left > 0 ? left : 0);
			last = now;
			last_done = finished;
		}
	}
	double secs = (double)(rkv_now_ns() - t0) / 1e9;
	struct rkv_client_stats st;

	if (progress)
		fprintf(stderr, "\r%60s\r", "");
	rkv_client_stats(c, &st);
	const struct rkv_op_stats *ost[NTYPES] = { &st.get, &st.put, &st.del,
						   &st.rmw };

	printf("run: %llu ops in %.2f s: %.0f ops/s (%s, %llu in flight)\n",
	       (unsigned long long)finished, secs, (double)finished / secs,
	       servers, (unsigned long long)inflight);
	printf("%-7s %10s %12s %9s %9s %9s %9s %8s %8s %7s\n", "op", "count",
	       "ops/s", "p50 us", "p99 us", "p999 us", "max us", "RTT/op",
	       "retries", "errors");
	FILE *jf = json ? fopen(json, "w") : NULL;

	if (json && !jf) {
		fprintf(stderr, "rkv-bench-kv: cannot write %s: %s\n", json,
			strerror(errno));
		return 2;
	}
	if (jf)
		fprintf(jf, "{\"label\":\"%s\",\"servers\":\"%s\",\"seconds\":%.3f,"
			    "\"ops\":%llu,\"ops_per_s\":%.1f,\"types\":[",
			label, servers, secs, (unsigned long long)finished,
			(double)finished / secs);
	int first = 1;

	for (int t = 0; t < NTYPES; t++) {
		if (!cnt[t])
			continue;
		double rtt = ost[t]->ops ? (double)ost[t]->rtts /
						   (double)ost[t]->ops : 0;

		printf("%-7s %10llu %12.0f %9.2f %9.2f %9.2f %9.2f %8.2f %8llu %7llu\n",
		       type_name[t], (unsigned long long)cnt[t],
		       (double)cnt[t] / secs,
		       rkv_hist_quantile(&h[t], 0.5) / 1e3,
		       rkv_hist_quantile(&h[t], 0.99) / 1e3,
		       rkv_hist_quantile(&h[t], 0.999) / 1e3,
		       (double)h[t].max / 1e3, rtt,
		       (unsigned long long)ost[t]->retries,
		       (unsigned long long)errs[t]);
		if (jf)
			fprintf(jf, "%s{\"op\":\"%s\",\"count\":%llu,\"ops_per_s\":%.1f,"
				    "\"p50_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,"
				    "\"rtt_per_op\":%.3f,\"errors\":%llu}",
				first ? "" : ",", type_name[t],
				(unsigned long long)cnt[t], (double)cnt[t] / secs,
				rkv_hist_quantile(&h[t], 0.5) / 1e3,
				rkv_hist_quantile(&h[t], 0.99) / 1e3,
				rkv_hist_quantile(&h[t], 0.999) / 1e3, rtt,
				(unsigned long long)errs[t]);
		first = 0;
	}
	printf("cache hits %llu, misses %llu; lock waits %llu, steals %llu; "
	       "doorbells %llu\n",
	       (unsigned long long)st.cache_hits,
	       (unsigned long long)st.cache_misses,
	       (unsigned long long)st.lock_waits,
	       (unsigned long long)st.lock_steals,
	       (unsigned long long)st.doorbells);
	if (jf) {
		fprintf(jf, "]}\n");
		fclose(jf);
	}
	rkv_client_destroy(c);
	free(sl);
	return 0;
}
