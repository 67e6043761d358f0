/* SPDX-License-Identifier: MIT */
/*
 * test_etcd.c - common/etcd.h against a real etcd (tests/lib/etcd_proc.h)
 * and against fake servers: put/get of binary values, range over a
 * prefix, compare-and-swap by revision, leases that expire or are kept
 * alive or revoked, the one-shot watch, etcd killed (calls fail fast with
 * -ECONNREFUSED) and restarted (the same handle works, the data
 * persisted), per-call latency on loopback; then a port with nothing
 * listening, bad URLs, and a garbage server of many kinds (-EPROTO,
 * -EMSGSIZE, -ETIMEDOUT, never a crash).  Without etcd installed the
 * tests that need it skip, saying so; the others run anyway.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "etcd.h"
#include "etcd_proc.h"
#include "rtime.h"
#include "test.h"

#define TIMEOUT_MS 2000u

static struct test_etcd g_etcd;
static int g_etcd_rc = 1; /* 1: not started yet */
static char g_etcd_why[512];

static long ms_since(uint64_t t0)
{
	return (long)((rkv_now_ns() - t0) / 1000000u);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The shared etcd, started at the first test that needs it.  NULL (and
 * the test skips, or fails when etcd is there but would not start). */
static struct rkv_etcd *need_etcd(void)
{
	struct rkv_etcd *e = NULL;
	char why[256];

	if (g_etcd_rc == 1) {
		uint64_t t0 = rkv_now_ns();

		g_etcd_rc = test_etcd_start(&g_etcd, g_etcd_why,
					    sizeof(g_etcd_why));
		if (!g_etcd_rc)
			printf("# etcd %s up in %ld ms (%s)\n", g_etcd.url,
			       ms_since(t0), g_etcd.dir);
	}
	if (g_etcd_rc == -ENOENT) {
		rkv_test_skip("%s", g_etcd_why);
		return NULL;
	}
	if (g_etcd_rc) {
		printf("#   cannot start etcd: %s\n", g_etcd_why);
		g_test_failures++;
		return NULL;
	}
	if (rkv_etcd_open(g_etcd.url, TIMEOUT_MS, &e, why, sizeof(why))) {
		printf("#   rkv_etcd_open %s: %s\n", g_etcd.url, why);
		g_test_failures++;
	}
	return e;
}

/* ------------------------------------------------------------- against etcd */

static void t_put_get(void)
{
	struct rkv_etcd *e = need_etcd();
	struct rkv_etcd_kv kv;
	char bin[300], *big, longkey[RKV_ETCD_KEY_MAX + 2];
	int64_t rev = 0, crev;

	if (!e)
		return;
	ASSERT_EQ(rkv_etcd_put(e, "pg/k", "hello", 5, 0), 0);
	ASSERT_EQ(rkv_etcd_get(e, "pg/k", &kv, &rev), 0);
	EXPECT_STREQ(kv.key, "pg/k");
	EXPECT_EQ(kv.val_len, 5);
	EXPECT_STREQ(kv.val, "hello");
	EXPECT_EQ(kv.version, 1);
	EXPECT_EQ(kv.create_rev, kv.mod_rev);
	EXPECT_EQ(kv.lease, 0);
	EXPECT_TRUE(kv.mod_rev > 0 && rev >= kv.mod_rev);
	crev = kv.create_rev;
	rkv_etcd_kv_fini(&kv);

	/* binary, NULs included: every byte value, twice */
	for (size_t i = 0; i < sizeof(bin); i++)
		bin[i] = (char)(i * 7);
	bin[0] = bin[1] = bin[299] = '\0';
	ASSERT_EQ(rkv_etcd_put(e, "pg/k", bin, sizeof(bin), 0), 0);
	ASSERT_EQ(rkv_etcd_get(e, "pg/k", &kv, NULL), 0);
	EXPECT_EQ(kv.val_len, sizeof(bin));
	EXPECT_TRUE(memcmp(kv.val, bin, sizeof(bin)) == 0);
	EXPECT_EQ(kv.val[kv.val_len], '\0');
	EXPECT_EQ(kv.version, 2);
	EXPECT_EQ(kv.create_rev, crev);
	EXPECT_TRUE(kv.mod_rev > crev);
	rkv_etcd_kv_fini(&kv);

	/* empty value (proto3 leaves it out of the answer) */
	ASSERT_EQ(rkv_etcd_put(e, "pg/empty", NULL, 0, 0), 0);
	ASSERT_EQ(rkv_etcd_get(e, "pg/empty", &kv, NULL), 0);
	EXPECT_EQ(kv.val_len, 0);
	EXPECT_STREQ(kv.val, "");
	rkv_etcd_kv_fini(&kv);

	/* large (over curl's 1 KiB Expect: threshold), and odd key bytes */
	big = malloc(200000);
	ASSERT_TRUE(big != NULL);
	for (size_t i = 0; i < 200000; i++)
		big[i] = (char)(i % 251);
	EXPECT_EQ(rkv_etcd_put(e, "pg/\"{}\\ \xc3\xbc\x01", big, 200000, 0), 0);
	EXPECT_EQ(rkv_etcd_get(e, "pg/\"{}\\ \xc3\xbc\x01", &kv, NULL), 0);
	EXPECT_EQ(kv.val_len, 200000);
	EXPECT_TRUE(kv.val && memcmp(kv.val, big, 200000) == 0);
	rkv_etcd_kv_fini(&kv);
	free(big);

	/* limits, checked before any request */
	EXPECT_EQ(rkv_etcd_put(e, "pg/k", "x", RKV_ETCD_VAL_MAX + 1, 0), -EINVAL);
	EXPECT_EQ(rkv_etcd_put(e, "", "x", 1, 0), -EINVAL);
	memset(longkey, 'k', sizeof(longkey) - 1);
	longkey[sizeof(longkey) - 1] = '\0';
	EXPECT_EQ(rkv_etcd_get(e, longkey, &kv, NULL), -EINVAL);
	EXPECT_TRUE(strstr(rkv_etcd_why(e), "at most") != NULL);

	/* absent, delete */
	EXPECT_EQ(rkv_etcd_get(e, "pg/none", &kv, &rev), -ENOENT);
	EXPECT_TRUE(kv.key == NULL && kv.val == NULL && rev > 0);
	EXPECT_EQ(rkv_etcd_delete(e, "pg/k"), 0);
	EXPECT_EQ(rkv_etcd_delete(e, "pg/k"), -ENOENT);
	EXPECT_EQ(rkv_etcd_get(e, "pg/k", &kv, NULL), -ENOENT);
	rkv_etcd_close(e);
}

static void t_range(void)
{
	static const char *const put[] = { "rg/b", "rg/a", "rg0", "rg",
					   "rf/x", "rg/\xff", "rg/c" };
	static const char *const want[] = { "rg/a", "rg/b", "rg/c", "rg/\xff" };
	struct rkv_etcd *e = need_etcd();
	struct rkv_etcd_kv *kvs;
	int64_t rev = 0;
	size_t n;

	if (!e)
		return;
	for (size_t i = 0; i < sizeof(put) / sizeof(put[0]); i++)
		ASSERT_EQ(rkv_etcd_put(e, put[i], put[i], strlen(put[i]), 0), 0);
	ASSERT_EQ(rkv_etcd_range(e, "rg/", &kvs, &n, &rev), 0);
	EXPECT_EQ(n, 4);
	for (size_t i = 0; i < n && i < 4; i++) {
		EXPECT_STREQ(kvs[i].key, want[i]);
		EXPECT_STREQ(kvs[i].val, want[i]);
		EXPECT_TRUE(kvs[i].mod_rev > 0 && kvs[i].mod_rev <= rev);
	}
	rkv_etcd_kv_free(kvs, n);
	/* nothing under it */
	ASSERT_EQ(rkv_etcd_range(e, "nothing/", &kvs, &n, &rev), 0);
	EXPECT_EQ(n, 0);
	EXPECT_TRUE(kvs == NULL && rev > 0);
	/* a prefix of 0xff bytes has no end key */
	ASSERT_EQ(rkv_etcd_range(e, "rg/\xff", &kvs, &n, NULL), 0);
	EXPECT_EQ(n, 1);
	rkv_etcd_kv_free(kvs, n);
	/* "" is every key, in order */
	ASSERT_EQ(rkv_etcd_range(e, "", &kvs, &n, NULL), 0);
	EXPECT_TRUE(n >= 7);
	for (size_t i = 1; i < n; i++)
		EXPECT_TRUE(strcmp(kvs[i - 1].key, kvs[i].key) < 0);
	rkv_etcd_kv_free(kvs, n);
	rkv_etcd_close(e);
}

static void t_put_if(void)
{
	struct rkv_etcd *e = need_etcd();
	struct rkv_etcd_kv kv;
	int64_t m1;

	if (!e)
		return;
	rkv_etcd_delete(e, "pi/k");
	/* create when absent, and only then */
	EXPECT_EQ(rkv_etcd_put_if(e, "pi/k", "v1", 2, 0, 0), 0);
	EXPECT_EQ(rkv_etcd_put_if(e, "pi/k", "v2", 2, 0, 0), -ECANCELED);
	EXPECT_TRUE(strstr(rkv_etcd_why(e), "pi/k") != NULL);
	ASSERT_EQ(rkv_etcd_get(e, "pi/k", &kv, NULL), 0);
	EXPECT_STREQ(kv.val, "v1");
	m1 = kv.mod_rev;
	rkv_etcd_kv_fini(&kv);
	/* swap at the current revision; a stale one fails */
	EXPECT_EQ(rkv_etcd_put_if(e, "pi/k", "v3", 2, 0, m1), 0);
	EXPECT_EQ(rkv_etcd_put_if(e, "pi/k", "v4", 2, 0, m1), -ECANCELED);
	EXPECT_EQ(rkv_etcd_put_if(e, "pi/k", "v5", 2, 0, m1 + 1000), -ECANCELED);
	ASSERT_EQ(rkv_etcd_get(e, "pi/k", &kv, NULL), 0);
	EXPECT_STREQ(kv.val, "v3");
	EXPECT_TRUE(kv.mod_rev > m1);
	rkv_etcd_kv_fini(&kv);
	/* deleted: absent again */
	EXPECT_EQ(rkv_etcd_delete(e, "pi/k"), 0);
	EXPECT_EQ(rkv_etcd_put_if(e, "pi/k", "v6", 2, 0, m1), -ECANCELED);
	EXPECT_EQ(rkv_etcd_put_if(e, "pi/k", "v6", 2, 0, 0), 0);
	EXPECT_EQ(rkv_etcd_put_if(e, "pi/k", "v7", 2, 0, -1), -EINVAL);
	rkv_etcd_close(e);
}

static void t_lease(void)
{
	struct rkv_etcd *e = need_etcd();
	struct rkv_etcd_kv kv;
	int64_t a = 0, b = 0, ttl = 0;
	uint64_t t0;
	int r = 0;

	if (!e)
		return;
	ASSERT_EQ(rkv_etcd_lease_grant(e, 1, &a), 0);
	ASSERT_EQ(rkv_etcd_lease_grant(e, 1, &b), 0);
	EXPECT_TRUE(a != 0 && b != 0 && a != b);
	EXPECT_EQ(rkv_etcd_lease_keepalive(e, a, &ttl), 0);
	EXPECT_TRUE(ttl >= 1 && ttl <= 2);
	ASSERT_EQ(rkv_etcd_put(e, "ls/a", "a", 1, a), 0);
	ASSERT_EQ(rkv_etcd_put(e, "ls/b", "b", 1, b), 0);
	ASSERT_EQ(rkv_etcd_get(e, "ls/a", &kv, NULL), 0);
	EXPECT_EQ(kv.lease, a);
	rkv_etcd_kv_fini(&kv);
	/* a expires; b, kept alive, stays */
	t0 = rkv_now_ns();
	while (ms_since(t0) < 6000) {
		EXPECT_EQ(rkv_etcd_lease_keepalive(e, b, NULL), 0);
		r = rkv_etcd_get(e, "ls/a", &kv, NULL);
		rkv_etcd_kv_fini(&kv);
		if (r == -ENOENT)
			break;
		sleep_ms(200);
	}
	printf("# lease of TTL 1 s: its key gone after %ld ms\n", ms_since(t0));
	EXPECT_EQ(r, -ENOENT);
	EXPECT_TRUE(ms_since(t0) >= 500);
	EXPECT_EQ(rkv_etcd_get(e, "ls/b", &kv, NULL), 0);
	EXPECT_EQ(kv.lease, b);
	rkv_etcd_kv_fini(&kv);
	EXPECT_EQ(rkv_etcd_lease_keepalive(e, a, &ttl), -ENOENT);
	EXPECT_TRUE(strstr(rkv_etcd_why(e), "expired") != NULL);
	/* revoke deletes at once */
	EXPECT_EQ(rkv_etcd_lease_revoke(e, b), 0);
	EXPECT_EQ(rkv_etcd_get(e, "ls/b", &kv, NULL), -ENOENT);
	EXPECT_EQ(rkv_etcd_lease_revoke(e, b), -ENOENT);
	EXPECT_EQ(rkv_etcd_put(e, "ls/c", "c", 1, b), -ENOENT);
	EXPECT_EQ(rkv_etcd_lease_grant(e, 0, &a), -EINVAL);
	rkv_etcd_close(e);
}

/* Another handle changes key after delay_ms (value NULL: deletes it). */
struct changer {
	pthread_t th;
	const char *key, *val;
	long delay_ms;
	int rc;
};

static void *change_fn(void *arg)
{
	struct changer *c = arg;
	struct rkv_etcd *e;

	c->rc = rkv_etcd_open(g_etcd.url, TIMEOUT_MS, &e, NULL, 0);
	if (c->rc)
		return NULL;
	sleep_ms(c->delay_ms);
	c->rc = c->val ? rkv_etcd_put(e, c->key, c->val, strlen(c->val), 0)
		       : rkv_etcd_delete(e, c->key);
	rkv_etcd_close(e);
	return NULL;
}

static void change_later(struct changer *c, const char *key, const char *val,
			 long delay_ms)
{
	*c = (struct changer){ .key = key, .val = val, .delay_ms = delay_ms };
	if (pthread_create(&c->th, NULL, change_fn, c))
		c->rc = -EAGAIN;
}

static void t_wait(void)
{
	struct rkv_etcd *e = need_etcd();
	struct rkv_etcd_kv *kvs, kv;
	struct changer c;
	int64_t rev0 = 0, rev = 0, rev2 = 0;
	uint64_t t0;
	size_t n;

	if (!e)
		return;
	ASSERT_EQ(rkv_etcd_range(e, "wt/", &kvs, &n, &rev0), 0);
	rkv_etcd_kv_free(kvs, n);
	/* a put by another handle wakes it */
	change_later(&c, "wt/x", "1", 200);
	t0 = rkv_now_ns();
	EXPECT_EQ(rkv_etcd_wait(e, "wt/", rev0, 5000, &rev), 1);
	printf("# wait woke %ld ms after it began (put at 200 ms)\n", ms_since(t0));
	EXPECT_TRUE(ms_since(t0) >= 150 && ms_since(t0) < 3000);
	pthread_join(c.th, NULL);
	EXPECT_EQ(c.rc, 0);
	ASSERT_EQ(rkv_etcd_get(e, "wt/x", &kv, NULL), 0);
	EXPECT_EQ(rev, kv.mod_rev);
	rkv_etcd_kv_fini(&kv);
	/* nothing after rev: a timeout, within its bound */
	t0 = rkv_now_ns();
	EXPECT_EQ(rkv_etcd_wait(e, "wt/", rev, 300, &rev2), 0);
	EXPECT_TRUE(ms_since(t0) >= 250 && ms_since(t0) < 1500);
	EXPECT_EQ(rev2, 0);
	/* a change made before the wait began returns at once */
	t0 = rkv_now_ns();
	EXPECT_EQ(rkv_etcd_wait(e, "wt/", rev0, 5000, &rev2), 1);
	EXPECT_EQ(rev2, rev);
	EXPECT_TRUE(ms_since(t0) < 1000);
	/* another prefix does not wake it ("wt" is a prefix of "wtx/") */
	change_later(&c, "wtx/y", "1", 50);
	EXPECT_EQ(rkv_etcd_wait(e, "wt/", rev, 500, NULL), 0);
	pthread_join(c.th, NULL);
	/* a delete does */
	change_later(&c, "wt/x", NULL, 50);
	EXPECT_EQ(rkv_etcd_wait(e, "wt/", rev, 5000, &rev2), 1);
	EXPECT_TRUE(rev2 > rev);
	pthread_join(c.th, NULL);
	EXPECT_EQ(c.rc, 0);
	/* the handle goes on after the stream it stopped */
	EXPECT_EQ(rkv_etcd_get(e, "wt/x", &kv, NULL), -ENOENT);
	EXPECT_EQ(rkv_etcd_wait(e, "wt/", -1, 100, NULL), -EINVAL);
	EXPECT_EQ(rkv_etcd_wait(e, "wt/", 0, 0, NULL), -EINVAL);
	rkv_etcd_close(e);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Median and 90th percentile (us) of n calls of one kind. */
static void latency(struct rkv_etcd *e, bool put, int n, double *med,
		    double *p90)
{
	uint64_t ns[200];
	struct rkv_etcd_kv kv;

	for (int i = 0; i < n; i++) {
		uint64_t t0 = rkv_now_ns();

		if (put) {
			EXPECT_EQ(rkv_etcd_put(e, "lt/k", "value", 5, 0), 0);
		} else {
			EXPECT_EQ(rkv_etcd_get(e, "lt/k", &kv, NULL), 0);
			rkv_etcd_kv_fini(&kv);
		}
		ns[i] = rkv_now_ns() - t0;
	}
	qsort(ns, (size_t)n, sizeof(ns[0]), cmp_u64);
	*med = (double)ns[n / 2] / 1e3;
	*p90 = (double)ns[n * 9 / 10] / 1e3;
}

static void t_latency(void)
{
	struct rkv_etcd *e = need_etcd();
	double gm, g90, pm, p90;

	if (!e)
		return;
	ASSERT_EQ(rkv_etcd_put(e, "lt/k", "value", 5, 0), 0);
	latency(e, false, 20, &gm, &g90); /* warm up */
	latency(e, false, 200, &gm, &g90);
	latency(e, true, 100, &pm, &p90);
	printf("# etcd on loopback, one kept-alive connection: get median %.0f us"
	       " (p90 %.0f us, 200 calls), put median %.0f us (p90 %.0f us,"
	       " 100 calls)\n", gm, g90, pm, p90);
	/* a sanity bound, not a performance goal */
	EXPECT_TRUE(gm < 50000.0 * RKV_TEST_SLACK);
	rkv_etcd_close(e);
}

struct waiter {
	pthread_t th;
	int64_t after;
	int rc;
	uint64_t done_ns;
};

static void *wait_fn(void *arg)
{
	struct waiter *w = arg;
	struct rkv_etcd *e = NULL;

	w->rc = rkv_etcd_open(g_etcd.url, TIMEOUT_MS, &e, NULL, 0);
	if (!w->rc)
		w->rc = rkv_etcd_wait(e, "kr/", w->after, 10000, NULL);
	w->done_ns = rkv_now_ns();
	rkv_etcd_close(e);
	return NULL;
}

/* etcd killed: every call fails fast, naming the URL; restarted: the
 * same handle works, and the data is still there. */
static void t_kill_restart(void)
{
	struct rkv_etcd *e = need_etcd();
	struct rkv_etcd_kv kv;
	struct waiter w = { 0 };
	int64_t rev = 0, id;
	char why[512];
	uint64_t t0;

	if (!e)
		return;
	ASSERT_EQ(rkv_etcd_put(e, "kr/k", "persist", 7, 0), 0);
	ASSERT_EQ(rkv_etcd_get(e, "kr/k", &kv, &rev), 0);
	rkv_etcd_kv_fini(&kv);
	w.after = rev;
	ASSERT_EQ(pthread_create(&w.th, NULL, wait_fn, &w), 0);
	sleep_ms(300); /* its watch is in place */
	t0 = rkv_now_ns();
	test_etcd_kill(&g_etcd);
	pthread_join(w.th, NULL);
	printf("# a wait in progress failed %ld ms after the kill: %d\n",
	       (long)((w.done_ns - t0) / 1000000u), w.rc);
	EXPECT_TRUE(w.rc < 0);
	EXPECT_TRUE(w.done_ns - t0 < 1000000000ull * RKV_TEST_SLACK);

	t0 = rkv_now_ns();
	EXPECT_EQ(rkv_etcd_get(e, "kr/k", &kv, NULL), -ECONNREFUSED);
	EXPECT_TRUE(ms_since(t0) < 1000);
	EXPECT_TRUE(strstr(rkv_etcd_why(e), g_etcd.url) != NULL);
	printf("# why: %s\n", rkv_etcd_why(e));
	EXPECT_EQ(rkv_etcd_put(e, "kr/k", "x", 1, 0), -ECONNREFUSED);
	EXPECT_EQ(rkv_etcd_put_if(e, "kr/k", "x", 1, 0, 0), -ECONNREFUSED);
	EXPECT_EQ(rkv_etcd_delete(e, "kr/k"), -ECONNREFUSED);
	EXPECT_EQ(rkv_etcd_lease_grant(e, 5, &id), -ECONNREFUSED);
	EXPECT_EQ(rkv_etcd_wait(e, "kr/", rev, 500, NULL), -ECONNREFUSED);
	EXPECT_TRUE(ms_since(t0) < 1000);

	t0 = rkv_now_ns();
	ASSERT_EQ(test_etcd_restart(&g_etcd, why, sizeof(why)), 0);
	printf("# restarted in %ld ms\n", ms_since(t0));
	ASSERT_EQ(rkv_etcd_get(e, "kr/k", &kv, NULL), 0);
	EXPECT_STREQ(kv.val, "persist");
	rkv_etcd_kv_fini(&kv);
	EXPECT_EQ(rkv_etcd_put(e, "kr/k2", "y", 1, 0), 0);
	rkv_etcd_close(e);
}

/* --------------------------------------------------- without a real etcd */

/* A port of 127.0.0.1 that nothing listens on (bound, then closed). */
static int dead_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;

	if (fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
	    !getsockname(fd, (struct sockaddr *)&sa, &sl))
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static void t_refused(void)
{
	struct rkv_etcd *e;
	struct rkv_etcd_kv kv, *kvs;
	char url[64];
	int64_t id;
	size_t n;
	uint64_t t0;
	int port = dead_port();

	ASSERT_TRUE(port > 0);
	snprintf(url, sizeof(url), "etcd://127.0.0.1:%d", port);
	ASSERT_EQ(rkv_etcd_open(url, TIMEOUT_MS, &e, NULL, 0), 0);
	t0 = rkv_now_ns();
	EXPECT_EQ(rkv_etcd_get(e, "k", &kv, NULL), -ECONNREFUSED);
	EXPECT_TRUE(strstr(rkv_etcd_why(e), url) != NULL);
	EXPECT_EQ(rkv_etcd_range(e, "k", &kvs, &n, NULL), -ECONNREFUSED);
	EXPECT_EQ(rkv_etcd_lease_grant(e, 1, &id), -ECONNREFUSED);
	EXPECT_EQ(rkv_etcd_lease_keepalive(e, 1, NULL), -ECONNREFUSED);
	EXPECT_EQ(rkv_etcd_wait(e, "", 0, 1000, NULL), -ECONNREFUSED);
	EXPECT_TRUE(ms_since(t0) < 1000);
	printf("# why: %s\n", rkv_etcd_why(e));
	rkv_etcd_close(e);
	/* a name that does not resolve */
	ASSERT_EQ(rkv_etcd_open("etcd://no-such-host.invalid:2379", TIMEOUT_MS,
				&e, NULL, 0), 0);
	int r = rkv_etcd_get(e, "k", &kv, NULL);

	EXPECT_TRUE(r == -EHOSTUNREACH || r == -ETIMEDOUT);
	EXPECT_TRUE(strstr(rkv_etcd_why(e), "no-such-host.invalid") != NULL);
	rkv_etcd_close(e);
}

static void t_bad_url(void)
{
	static const char *const bad[] = {
		"", "etcd://", "etcd://host", "etcd://host:", "etcd://host:0",
		"etcd://host:65536", "etcd://host:12ab", "etcd://host:123456",
		"https://host:2379", "ftp://host:21", "host:2379", "etcd://:2379",
		"etcd://ho st:2379", "etcd://[::1:2379", "etcd://[]:2379",
		"etcd://user@host:2379", "etcd://host:2379?x", "ETCD://host:1",
		"etcd://host:-1",
	};
	static const char *const good[] = {
		"etcd://127.0.0.1:2379", "http://localhost:2379/rkv/a",
		"etcd://[::1]:2379", "etcd://etcd-0.example.com:1",
		"http://h:65535/",
	};
	struct rkv_etcd *e = (struct rkv_etcd *)1;
	char why[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		EXPECT_EQ(rkv_etcd_open(bad[i], 1000, &e, why, sizeof(why)),
			  -EINVAL);
		EXPECT_TRUE(e == NULL);
		if (!strstr(why, "bad etcd URL")) {
			printf("#   %s: why \"%s\"\n", bad[i], why);
			g_test_failures++;
		}
	}
	EXPECT_EQ(rkv_etcd_open(NULL, 1000, &e, why, sizeof(why)), -EINVAL);
	EXPECT_EQ(rkv_etcd_open(good[0], 0, &e, why, sizeof(why)), -EINVAL);
	EXPECT_EQ(rkv_etcd_open(good[0], 1000, NULL, NULL, 0), -EINVAL);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		EXPECT_EQ(rkv_etcd_open(good[i], 1000, &e, why, sizeof(why)), 0);
		EXPECT_STREQ(rkv_etcd_why(e), "");
		rkv_etcd_close(e);
	}
	rkv_etcd_close(NULL);
	rkv_etcd_kv_fini(NULL);
	rkv_etcd_kv_free(NULL, 3);
}

/* ------------------------------------------------------ a garbage server */

/* What the fake server answers to each request. */
enum fake_mode {
	FAKE_404,	/* plain HTTP 404 */
	FAKE_HTML,	/* 200, not JSON */
	FAKE_BYTES,	/* random bytes, not HTTP */
	FAKE_NOHDR,	/* 200 JSON without etcd's header */
	FAKE_DEEP,	/* 200, JSON nested 100000 deep */
	FAKE_BADKV,	/* 200 range answer with bad base64 */
	FAKE_NUMS,	/* 200 range answer, numbers as JSON numbers */
	FAKE_BADNUM,	/* 200 range answer, revision "12x" */
	FAKE_HUGE,	/* 200 with 17 MiB of body */
	FAKE_SILENT,	/* reads the request, never answers */
	FAKE_CLOSE,	/* closes without answering */
	FAKE_GRPC404,	/* etcd's own error: lease not found */
	FAKE_GRPC503,	/* etcd's own error: unavailable */
	FAKE_WATCH_JUNK,    /* 200 stream of a non-JSON line */
	FAKE_WATCH_COMPACT, /* created, then canceled: compacted */
	FAKE_WATCH_EVENTS,  /* created, then events at revisions 8 and 9 */
};

struct fake {
	int fd, port;
	pthread_t th;
	atomic_int mode;
	atomic_bool stop;
};

/* Read one request: its headers and Content-Length bytes of body. */
static void read_request(int c)
{
	char buf[8192];
	size_t got = 0, need = SIZE_MAX;

	while (got < need && got < sizeof(buf) - 1) {
		struct pollfd p = { .fd = c, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, 2000) <= 0)
			return;
		r = read(c, buf + got, sizeof(buf) - 1 - got);
		if (r <= 0)
			return;
		got += (size_t)r;
		buf[got] = '\0';
		char *end = strstr(buf, "\r\n\r\n"), *cl = strcasestr(buf, "content-length:");

		if (end && need == SIZE_MAX)
			need = (size_t)(end + 4 - buf) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
	}
}

static void send_all(int c, const void *p, size_t n)
{
	while (n) {
		ssize_t r = send(c, p, n, MSG_NOSIGNAL);

		if (r <= 0)
			return;
		p = (const char *)p + r;
		n -= (size_t)r;
	}
}

static void send_http(int c, const char *status, const char *body)
{
	char hdr[256];

	snprintf(hdr, sizeof(hdr),
		 "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
		 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
		 status, strlen(body));
	send_all(c, hdr, strlen(hdr));
	send_all(c, body, strlen(body));
}

static void send_huge(int c)
{
	static char chunk[65536];
	size_t total = 17u << 20;
	char hdr[128];

	memset(chunk, ' ', sizeof(chunk));
	snprintf(hdr, sizeof(hdr),
		 "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", total);
	send_all(c, hdr, strlen(hdr));
	for (size_t i = 0; i < total; i += sizeof(chunk))
		send_all(c, chunk, sizeof(chunk));
}

static void send_deep(int c)
{
	size_t n = 100000;
	char *b = malloc(n + 1);

	if (!b)
		return;
	memset(b, '[', n);
	b[n] = '\0';
	send_http(c, "200 OK", b);
	free(b);
}

static void send_bytes(int c)
{
	unsigned char b[4096];
	uint32_t x = 12345;

	for (size_t i = 0; i < sizeof(b); i++) {
		x = x * 1103515245u + 12345u;
		b[i] = (unsigned char)(x >> 16);
	}
	b[0] = 0x9c; /* not "HTTP" */
	send_all(c, b, sizeof(b));
}

#define HDR "\"header\":{\"revision\":\"12\"}"

static const char g_404[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n"
			    "Connection: close\r\n\r\nNot Found";

static void fake_answer(struct fake *f, int c)
{
	switch (atomic_load(&f->mode)) {
	case FAKE_404:
		send_all(c, g_404, strlen(g_404));
		break;
	case FAKE_HTML: send_http(c, "200 OK", "<html>hello</html>"); break;
	case FAKE_BYTES: send_bytes(c); break;
	case FAKE_NOHDR: send_http(c, "200 OK", "{\"kvs\":[],\"count\":\"0\"}"); break;
	case FAKE_DEEP: send_deep(c); break;
	case FAKE_BADKV:
		send_http(c, "200 OK", "{" HDR ",\"kvs\":[{\"key\":\"!!!!\"}]}");
		break;
	case FAKE_NUMS:
		send_http(c, "200 OK", "{\"header\":{\"revision\":7},\"kvs\":[{"
			  "\"key\":\"YQ==\",\"value\":\"Yg==\",\"create_revision\":2,"
			  "\"mod_revision\":3,\"version\":\"1\",\"lease\":null}]}");
		break;
	case FAKE_BADNUM:
		send_http(c, "200 OK", "{\"header\":{\"revision\":\"12x\"}}");
		break;
	case FAKE_HUGE: send_huge(c); break;
	case FAKE_SILENT: /* until the test moves on */
		while (atomic_load(&f->mode) == FAKE_SILENT &&
		       !atomic_load(&f->stop))
			sleep_ms(20);
		break;
	case FAKE_CLOSE: break;
	case FAKE_GRPC404:
		send_http(c, "404 Not Found", "{\"error\":\"etcdserver: requested "
			  "lease not found\",\"message\":\"etcdserver: requested "
			  "lease not found\",\"code\":5}");
		break;
	case FAKE_GRPC503:
		send_http(c, "503 Service Unavailable", "{\"error\":\"etcdserver: "
			  "no leader\",\"message\":\"etcdserver: no leader\",\"code\":14}");
		break;
	case FAKE_WATCH_JUNK: send_http(c, "200 OK", "hello\n"); break;
	case FAKE_WATCH_COMPACT:
		send_http(c, "200 OK", "{\"result\":{" HDR ",\"created\":true}}\n"
			  "{\"result\":{\"canceled\":true,\"compact_revision\":\"40\"}}\n");
		break;
	case FAKE_WATCH_EVENTS:
		send_http(c, "200 OK", "{\"result\":{" HDR ",\"created\":true}}\n"
			  "{\"result\":{" HDR ",\"events\":[{\"kv\":{\"key\":\"YQ==\","
			  "\"mod_revision\":\"8\"}},{\"type\":\"DELETE\",\"kv\":{"
			  "\"key\":\"Yg==\",\"mod_revision\":9}}]}}\n");
		break;
	}
}

static void *fake_fn(void *arg)
{
	struct fake *f = arg;

	while (!atomic_load(&f->stop)) {
		struct pollfd p = { .fd = f->fd, .events = POLLIN };
		int c;

		if (poll(&p, 1, 50) <= 0)
			continue;
		c = accept(f->fd, NULL, NULL);
		if (c < 0)
			continue;
		read_request(c);
		fake_answer(f, c);
		close(c);
	}
	return NULL;
}

static int fake_start(struct fake *f)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);

	memset(f, 0, sizeof(*f));
	f->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (f->fd < 0 || bind(f->fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(f->fd, 16) || getsockname(f->fd, (struct sockaddr *)&sa, &sl))
		return -errno;
	f->port = ntohs(sa.sin_port);
	return pthread_create(&f->th, NULL, fake_fn, f) ? -EAGAIN : 0;
}

static void fake_stop(struct fake *f)
{
	atomic_store(&f->stop, true);
	pthread_join(f->th, NULL);
	close(f->fd);
}

/* One get against the fake server in mode m: its result, why checked
 * to name the URL and to contain what (when not NULL). */
static int fake_get(struct rkv_etcd *e, struct fake *f, enum fake_mode m,
		    const char *url, const char *what)
{
	struct rkv_etcd_kv kv;
	int r;

	atomic_store(&f->mode, (int)m);
	r = rkv_etcd_get(e, "a", &kv, NULL);
	rkv_etcd_kv_fini(&kv);
	if (r && (!strstr(rkv_etcd_why(e), url) ||
		  (what && !strstr(rkv_etcd_why(e), what)))) {
		printf("#   mode %d: why \"%s\" lacks \"%s\"\n", (int)m,
		       rkv_etcd_why(e), what ? what : url);
		g_test_failures++;
	}
	return r;
}

static void t_garbage(void)
{
	struct rkv_etcd *e;
	struct rkv_etcd_kv kv;
	struct fake f;
	char url[64];
	int64_t rev = 0;
	uint64_t t0;

	ASSERT_EQ(fake_start(&f), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", f.port);
	ASSERT_EQ(rkv_etcd_open(url, 1000, &e, NULL, 0), 0);
	EXPECT_EQ(fake_get(e, &f, FAKE_404, url, "HTTP 404: not an etcd v3 gateway"),
		  -EPROTO);
	printf("# why: %s\n", rkv_etcd_why(e));
	EXPECT_EQ(fake_get(e, &f, FAKE_HTML, url, "not a JSON object"), -EPROTO);
	EXPECT_EQ(fake_get(e, &f, FAKE_BYTES, url, NULL), -EPROTO);
	EXPECT_EQ(fake_get(e, &f, FAKE_NOHDR, url, "without an etcd header"), -EPROTO);
	EXPECT_EQ(fake_get(e, &f, FAKE_DEEP, url, "not a JSON object"), -EPROTO);
	EXPECT_EQ(fake_get(e, &f, FAKE_BADKV, url, "malformed key-value"), -EPROTO);
	EXPECT_EQ(fake_get(e, &f, FAKE_BADNUM, url, "without an etcd header"), -EPROTO);
	EXPECT_EQ(fake_get(e, &f, FAKE_HUGE, url, "answer over"), -EMSGSIZE);
	EXPECT_EQ(fake_get(e, &f, FAKE_CLOSE, url, NULL), -ECONNRESET);
	EXPECT_EQ(fake_get(e, &f, FAKE_GRPC503, url, "no leader"), -EAGAIN);
	t0 = rkv_now_ns();
	EXPECT_EQ(fake_get(e, &f, FAKE_SILENT, url, NULL), -ETIMEDOUT);
	EXPECT_TRUE(ms_since(t0) >= 900 && ms_since(t0) < 3000);
	/* numbers as JSON numbers parse too */
	atomic_store(&f.mode, FAKE_NUMS);
	EXPECT_EQ(rkv_etcd_get(e, "a", &kv, &rev), 0);
	EXPECT_EQ(rev, 7);
	EXPECT_EQ(kv.create_rev, 2);
	EXPECT_EQ(kv.mod_rev, 3);
	EXPECT_EQ(kv.version, 1);
	EXPECT_STREQ(kv.val, "b");
	rkv_etcd_kv_fini(&kv);
	/* etcd's own errors map to their errno */
	atomic_store(&f.mode, FAKE_GRPC404);
	EXPECT_EQ(rkv_etcd_lease_revoke(e, 5), -ENOENT);
	EXPECT_TRUE(strstr(rkv_etcd_why(e), "lease not found") != NULL);
	/* the watch stream */
	atomic_store(&f.mode, FAKE_WATCH_JUNK);
	EXPECT_EQ(rkv_etcd_wait(e, "p/", 3, 1000, NULL), -EPROTO);
	atomic_store(&f.mode, FAKE_404);
	EXPECT_EQ(rkv_etcd_wait(e, "p/", 3, 1000, NULL), -EPROTO);
	atomic_store(&f.mode, FAKE_WATCH_COMPACT);
	EXPECT_EQ(rkv_etcd_wait(e, "p/", 3, 1000, &rev), 1);
	EXPECT_EQ(rev, 40);
	atomic_store(&f.mode, FAKE_WATCH_EVENTS);
	EXPECT_EQ(rkv_etcd_wait(e, "p/", 3, 1000, &rev), 1);
	EXPECT_EQ(rev, 9);
	atomic_store(&f.mode, FAKE_SILENT);
	EXPECT_EQ(rkv_etcd_wait(e, "p/", 3, 300, &rev), -ETIMEDOUT);
	atomic_store(&f.mode, FAKE_BYTES);
	EXPECT_EQ(rkv_etcd_wait(e, "p/", 3, 1000, &rev), -EPROTO);
	rkv_etcd_close(e);
	fake_stop(&f);
}

int main(int argc, char **argv)
{
#ifndef RKV_WITH_ETCD
	(void)argc;
	(void)argv;
	printf("1..0 # SKIP rkv was built without etcd support (libcurl, "
	       "cJSON)\n");
	return 77;
#endif
	signal(SIGPIPE, SIG_IGN);
	rkv_test_init(argc, argv, 90);
	RKV_TEST(t_bad_url);
	RKV_TEST(t_refused);
	RKV_TEST(t_garbage);
	RKV_TEST(t_put_get);
	RKV_TEST(t_range);
	RKV_TEST(t_put_if);
	RKV_TEST(t_lease);
	RKV_TEST(t_wait);
	RKV_TEST(t_latency);
	RKV_TEST(t_kill_restart);
	test_etcd_stop(&g_etcd);
	return rkv_test_done();
}
