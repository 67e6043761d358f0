/* SPDX-License-Identifier: MIT */
/*
 * itest_cluster.c - a static cluster of real rkv-server processes, as a
 * user meets it (--provider tcp|shm|verbs):
 *   - placement by name: clients whose cluster files list the servers in
 *     other orders, or by NAME=ADDR lists, find every key another wrote;
 *   - a server whose name is not the one the map gives is refused (-ENXIO,
 *     with a message naming both), and so is a map naming one twice;
 *   - a dead server costs only its own keys: killed under a client, and
 *     down before a client starts; the other servers' keys keep working,
 *     without waiting on the dead one, its keys fail at once with an error
 *     and the server's name, and the client reconnects by itself when it
 *     is back (its keys then lost: no replication yet);
 *   - every server down: create fails with the reason.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rkv.h"
#include "rtime.h"
#include "srv.h"
#include "test.h"

static const char *g_prov = "tcp";
static int g_verbs;

#define NSRV 3
#define NKEYS 600

static const char *const g_names[NSRV] = { "alpha", "bravo", "charlie" };

static int start_named(struct test_srv *s, const char *name,
		       const char *listen)
{
	return test_srv_start_named(s, g_prov, name, listen, NULL);
}

static int start_three(struct test_srv *s)
{
	for (unsigned i = 0; i < NSRV; i++)
		if (start_named(&s[i], g_names[i], NULL))
			return -1;
	return 0;
}

static void stop_all(struct test_srv *s)
{
	for (unsigned i = 0; i < NSRV; i++)
		if (s[i].pid > 0)
			test_srv_stop(&s[i]);
}

/* A cluster file listing s in the order of ord ("NAME ADDR" lines). */
static void write_cluster(char *path, size_t cap, struct test_srv *s,
			  const unsigned *ord, const char *const *names)
{
	FILE *f;

	snprintf(path, cap, "/tmp/rkv-cluster-%d-XXXXXX", (int)getpid());
	int fd = mkstemp(path);

	ASSERT_TRUE(fd >= 0);
	f = fdopen(fd, "w");
	ASSERT_TRUE(f != NULL);
	fprintf(f, "# a test cluster\n");
	for (unsigned i = 0; i < NSRV; i++)
		fprintf(f, "%s %s\n", names[ord[i]], s[ord[i]].addr);
	fclose(f);
}

static int is_down_err(int rc)
{
	return rc == -ECONNRESET || rc == -ECONNREFUSED || rc == -ETIMEDOUT ||
	       rc == -EHOSTUNREACH || rc == -ENETUNREACH;
}

/* ---------------------------------------------------------- the tests */

/* Listing order and list form change no key's server. */
static void t_order_free(void)
{
	static const unsigned fwd[NSRV] = { 0, 1, 2 }, rev[NSRV] = { 2, 0, 1 };
	struct test_srv s[NSRV];
	char f1[64], f2[64], list[1024];
	struct rkv_client *a, *b, *l;
	struct rkv_client_opts o;
	unsigned per[NSRV] = { 0 }, bad = 0, differ = 0;

	ASSERT_EQ(start_three(s), 0);
	write_cluster(f1, sizeof(f1), s, fwd, g_names);
	write_cluster(f2, sizeof(f2), s, rev, g_names);
	a = test_client_cluster(f1, 5000, 2000, NULL, NULL);
	b = test_client_cluster(f2, 5000, 2000, NULL, NULL);
	snprintf(list, sizeof(list), "%s=%s,%s=%s,%s=%s", g_names[1], s[1].addr,
		 g_names[2], s[2].addr, g_names[0], s[0].addr);
	rkv_client_opts_init(&o);
	o.servers = list;
	l = NULL;
	EXPECT_EQ(rkv_client_create(&o, &l), 0);
	ASSERT_TRUE(a && b && l);
	EXPECT_EQ(rkv_client_nservers(a), NSRV);
	for (unsigned i = 0; i < NKEYS; i++) {
		EXPECT_EQ(test_kput(a, i, 1), 0);
		per[test_kowner(a, i)]++;
		differ += strcmp(rkv_client_server_name(a, test_kowner(a, i)),
				 rkv_client_server_name(b, test_kowner(b, i))) != 0;
		differ += strcmp(rkv_client_server_name(a, test_kowner(a, i)),
				 rkv_client_server_name(l, test_kowner(l, i))) != 0;
	}
	for (unsigned i = 0; i < NKEYS; i++) {
		bad += test_kcheck(b, i, 1) != 0;
		bad += test_kcheck(l, i, 1) != 0;
	}
	printf("#   %u keys: %u/%u/%u per server\n", NKEYS, per[0], per[1],
	       per[2]);
	EXPECT_EQ(differ, 0);
	EXPECT_EQ(bad, 0);
	for (unsigned i = 0; i < NSRV; i++)
		EXPECT_TRUE(per[i] > NKEYS / NSRV / 2);
	rkv_client_destroy(a);
	rkv_client_destroy(b);
	rkv_client_destroy(l);
	unlink(f1);
	unlink(f2);
	stop_all(s);
}

/* A map that names a server wrongly is refused, and says how. */
static void t_wrong_name(void)
{
	static const unsigned fwd[NSRV] = { 0, 1, 2 };
	static const char *const swapped[NSRV] = { "bravo", "alpha",
						   "charlie" };
	struct test_srv s[NSRV];
	struct test_logbuf lb = { .len = 0 };
	char f[64];
	int rc = 0;

	ASSERT_EQ(start_three(s), 0);
	write_cluster(f, sizeof(f), s, fwd, swapped);
	EXPECT_TRUE(test_client_cluster(f, 5000, 2000, &lb, &rc) == NULL);
	EXPECT_EQ(rc, -ENXIO);
	if (!strstr(lb.text, "calls itself 'alpha', not 'bravo'"))
		printf("#   log: %s", lb.text);
	EXPECT_TRUE(strstr(lb.text, "calls itself 'alpha', not 'bravo'") !=
		    NULL);
	unlink(f);
	/* one name twice */
	FILE *fp;

	snprintf(f, sizeof(f), "/tmp/rkv-cluster-%d-XXXXXX", (int)getpid());
	int fd = mkstemp(f);

	ASSERT_TRUE(fd >= 0);
	fp = fdopen(fd, "w");
	ASSERT_TRUE(fp != NULL);
	fprintf(fp, "alpha %s\nalpha %s\n", s[0].addr, s[1].addr);
	fclose(fp);
	lb.len = 0;
	lb.text[0] = '\0';
	EXPECT_TRUE(test_client_cluster(f, 5000, 2000, &lb, &rc) == NULL);
	EXPECT_EQ(rc, -EINVAL);
	EXPECT_TRUE(strstr(lb.text, "line 2: server name 'alpha' listed "
				    "twice") != NULL);
	unlink(f);
	stop_all(s);
}

/* Servers without --name are named after their address: a plain
 * --servers list of addresses works, in any order. */
static void t_derived_names(void)
{
	struct test_srv s[2];
	char l1[700], l2[700];
	struct rkv_client *a, *b;
	unsigned bad = 0;

	ASSERT_EQ(test_srv_start(&s[0], g_prov, NULL), 0);
	ASSERT_EQ(test_srv_start(&s[1], g_prov, NULL), 0);
	snprintf(l1, sizeof(l1), "%s,%s", s[0].addr, s[1].addr);
	snprintf(l2, sizeof(l2), "%s,%s", s[1].addr, s[0].addr);
	a = test_client_at(l1, 5000, 0);
	b = test_client_at(l2, 5000, 0);
	ASSERT_TRUE(a && b);
	for (unsigned i = 0; i < 200; i++)
		EXPECT_EQ(test_kput(a, i, 3), 0);
	for (unsigned i = 0; i < 200; i++)
		bad += test_kcheck(b, i, 3) != 0;
	EXPECT_EQ(bad, 0);
	rkv_client_destroy(a);
	rkv_client_destroy(b);
	test_srv_stop(&s[0]);
	test_srv_stop(&s[1]);
}

/* Until server d is back: keys of the others work, d's fail at once. */
static void check_partial(struct rkv_client *c, unsigned d, unsigned gen,
			  unsigned *live_ok, unsigned *dead_fail,
			  uint64_t *worst_live_ms, uint64_t *worst_dead_ms)
{
	for (unsigned i = 0; i < NKEYS; i++) {
		uint64_t t0 = rkv_now_ms(), dt;
		int rc = test_kowner(c, i) == d ? test_kput(c, i, gen) : test_kcheck(c, i, gen);

		dt = rkv_now_ms() - t0;
		if (test_kowner(c, i) != d) {
			*live_ok += rc == 0;
			if (rc)
				printf("#   live key %u: %s\n", i,
				       strerror(-rc));
			*worst_live_ms = dt > *worst_live_ms ? dt
							    : *worst_live_ms;
		} else {
			*dead_fail += is_down_err(rc);
			if (!is_down_err(rc))
				printf("#   dead key %u: %d\n", i, rc);
			*worst_dead_ms = dt > *worst_dead_ms ? dt
							    : *worst_dead_ms;
		}
	}
}

static unsigned keys_of(struct rkv_client *c, unsigned d)
{
	unsigned n = 0;

	for (unsigned i = 0; i < NKEYS; i++)
		n += test_kowner(c, i) == d;
	return n;
}

/* Wait (bounded) until put works on server d's keys again. */
static int wait_back(struct rkv_client *c, unsigned d, unsigned ms)
{
	uint64_t end = rkv_now_ms() + ms;

	for (unsigned i = 0; i < NKEYS && rkv_now_ms() < end; i++) {
		if (test_kowner(c, i) != d)
			continue;
		while (test_kput(c, i, 9) != 0) {
			if (rkv_now_ms() > end)
				return -ETIMEDOUT;
			usleep(20000);
		}
		return 0;
	}
	return -ETIMEDOUT;
}

static void dead_server(int before_create)
{
	static const unsigned fwd[NSRV] = { 0, 1, 2 };
	struct test_srv s[NSRV];
	struct test_logbuf lb = { .len = 0 };
	struct rkv_client_stats st;
	char f[64], listen[sizeof(((struct test_srv *)0)->addr)];
	struct rkv_client *c;
	unsigned live_ok = 0, dead_fail = 0, d = 1, nd;
	uint64_t worst_live = 0, worst_dead = 0;
	int rc = 0;

	ASSERT_EQ(start_three(s), 0);
	write_cluster(f, sizeof(f), s, fwd, g_names);
	memcpy(listen, s[d].addr, sizeof(listen));
	if (before_create) {
		test_srv_kill(&s[d]);
		usleep(100000);
	}
	c = test_client_cluster(f, 2000, 2000, &lb, &rc);
	if (!c)
		printf("#   create: %s; log: %s", strerror(-rc), lb.text);
	ASSERT_TRUE(c != NULL);
	nd = keys_of(c, d);
	ASSERT_TRUE(nd > 0 && nd < NKEYS);
	if (!before_create) {
		for (unsigned i = 0; i < NKEYS; i++)
			EXPECT_EQ(test_kput(c, i, 1), 0);
		test_srv_kill(&s[d]);
		/* the first op on it finds out (tcp: the socket's end;
		 * verbs: a retry timeout), bounded by the op timeout */
		for (unsigned i = 0; i < NKEYS; i++) {
			if (test_kowner(c, i) != d)
				continue;
			uint64_t t0 = rkv_now_ms();

			while (test_kcheck(c, i, 1) == 0 &&
			       rkv_now_ms() - t0 < 10000)
				usleep(1000);
			break;
		}
	} else {
		for (unsigned i = 0; i < NKEYS; i++)
			if (test_kowner(c, i) != d)
				EXPECT_EQ(test_kput(c, i, 1), 0);
		EXPECT_TRUE(strstr(lb.text, "server bravo (") != NULL &&
			    strstr(lb.text, "is down") != NULL);
	}
	EXPECT_TRUE(rkv_client_server_status(c, d) != 0);
	check_partial(c, d, 1, &live_ok, &dead_fail, &worst_live,
		      &worst_dead);
	printf("#   server %s down: %u/%u live keys served (worst %llu ms), "
	       "%u/%u of its keys failed (worst %llu ms)\n",
	       rkv_client_server_name(c, d), live_ok, NKEYS - nd,
	       (unsigned long long)worst_live, dead_fail, nd,
	       (unsigned long long)worst_dead);
	EXPECT_EQ(live_ok, NKEYS - nd);
	EXPECT_EQ(dead_fail, nd);
	/* nobody waited on the dead server: reconnect attempts are refused
	 * at once here (loopback), and a down server's ops fail without a
	 * round trip (bounds generous for a loaded machine) */
	EXPECT_TRUE(worst_live < (g_verbs ? 3000u : 1000u));
	EXPECT_TRUE(worst_dead < (g_verbs ? 3000u : 1000u));
	/* back, at the same address and name: the client reconnects */
	ASSERT_EQ(start_named(&s[d], g_names[d], listen), 0);
	EXPECT_EQ(wait_back(c, d, g_verbs ? 30000 : 10000), 0);
	EXPECT_EQ(rkv_client_server_status(c, d), 0);
	unsigned lost = 0, kept = 0;

	for (unsigned i = 0; i < NKEYS; i++) {
		rc = test_kcheck(c, i, 1);
		if (test_kowner(c, i) == d)
			lost += rc == -ENOENT || rc == -EBADMSG;
		else
			kept += rc == 0;
	}
	printf("#   back: %u of its keys lost with it (no replication), %u "
	       "others kept\n", lost, kept);
	EXPECT_EQ(kept, NKEYS - nd);
	EXPECT_EQ(lost, nd);
	for (unsigned i = 0; i < NKEYS; i++)
		EXPECT_EQ(test_kput(c, i, 2), 0);
	unsigned bad = 0;

	for (unsigned i = 0; i < NKEYS; i++)
		bad += test_kcheck(c, i, 2) != 0;
	EXPECT_EQ(bad, 0);
	rkv_client_stats(c, &st);
	EXPECT_TRUE(st.reconnects >= 1);
	rkv_client_destroy(c);
	unlink(f);
	stop_all(s);
}

static void t_server_killed(void)
{
	dead_server(0);
}

static void t_server_down_at_create(void)
{
	dead_server(1);
}

/* Every server down: no client, and the reason. */
static void t_all_down(void)
{
	static const unsigned fwd[NSRV] = { 0, 1, 2 };
	struct test_srv s[NSRV];
	struct test_logbuf lb = { .len = 0 };
	char f[64];
	int rc = 0;

	ASSERT_EQ(start_three(s), 0);
	write_cluster(f, sizeof(f), s, fwd, g_names);
	for (unsigned i = 0; i < NSRV; i++)
		test_srv_kill(&s[i]);
	usleep(100000);
	EXPECT_TRUE(test_client_cluster(f, 2000, 2000, &lb, &rc) == NULL);
	EXPECT_TRUE(is_down_err(rc));
	EXPECT_TRUE(strstr(lb.text, "alpha (") != NULL);
	unlink(f);
}

int main(int argc, char **argv)
{
	g_prov = test_itest_init(argc, argv, 600);
	if (!g_prov)
		return 77;
	g_verbs = !strcmp(g_prov, "verbs");
	RKV_TEST(t_order_free);
	RKV_TEST(t_wrong_name);
	RKV_TEST(t_derived_names);
	RKV_TEST(t_server_killed);
	RKV_TEST(t_server_down_at_create);
	RKV_TEST(t_all_down);
	return rkv_test_done();
}
