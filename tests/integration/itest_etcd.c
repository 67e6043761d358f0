/* SPDX-License-Identifier: MIT */
/*
 * itest_etcd.c - a cluster kept in a real etcd (Debian's, started here on
 * loopback with a temporary data dir; every test skips with the reason
 * when etcd is not installed), with real rkv-servers and clients on one
 * provider (--provider tcp|shm|verbs):
 *   - servers register with --cluster, `rkv admin init` makes the map,
 *     clients start from etcd://HOST:PORT/CLUSTER and serve every key;
 *   - a second server under a taken name is refused, naming the first;
 *   - etcd down: a client start fails within its connect timeout naming
 *     etcd, a server start retries for --etcd-wait and comes up when etcd
 *     does; etcd killed under load changes nothing for running clients,
 *     and once it is back the servers are registered again;
 *   - a map edited into nonsense, or a server of another protocol
 *     version, is refused with the reason and changes nothing.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd.h"
#include "etcd_proc.h"
#include "msg.h"
#include "rkv.h"
#include "rtime.h"
#include "srv.h"
#include "test.h"

static const char *g_prov = "tcp";
static int g_verbs;
static int g_seq;

#define NSRV 3
#define NKEYS 300

static const char *const g_names[NSRV] = { "alpha", "bravo", "charlie" };

struct env {
	struct test_etcd etcd;
	char url[128];            /* etcd://127.0.0.1:P/CLUSTER */
	struct test_srv s[NSRV];
};

/* etcd, and a fresh cluster name in it; 77 (skip) without etcd. */
static int env_etcd(struct env *v)
{
	char why[300] = "";
	int rc;

	memset(v, 0, sizeof(*v));
	rc = test_etcd_start(&v->etcd, why, sizeof(why));
	if (rc == -ENOENT || rc == -EOPNOTSUPP) {
		rkv_test_skip("etcd not installed: %s", why);
		return 77;
	}
	if (rc) {
		printf("#   cannot start etcd: %s\n", why);
		return -1;
	}
	snprintf(v->url, sizeof(v->url), "%s/c%d", v->etcd.url, g_seq++);
	return 0;
}

static int start_srv(struct env *v, unsigned i, const char *name,
		     const char *wait_s)
{
	const char *extra[] = { "--name", name, "--cluster", v->url,
				"--etcd-wait", wait_s ? wait_s : "10", NULL };

	return test_srv_start(&v->s[i], g_prov, extra);
}

static void env_stop(struct env *v)
{
	for (unsigned i = 0; i < NSRV; i++)
		if (v->s[i].pid > 0)
			test_srv_stop(&v->s[i]);
	test_etcd_stop(&v->etcd);
}

/* Run a shell command line; its exit status, its output in out. */
static int run_cmd(const char *cmd, char *out, size_t cap)
{
	char line[2048];
	FILE *p;
	size_t n = 0;
	int st;

	snprintf(line, sizeof(line), "%s 2>&1", cmd);
	p = popen(line, "r");
	if (!p)
		return -1;
	n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static int admin(struct env *v, const char *args, char *out, size_t cap)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "%s/rkv admin --cluster %s %s",
		 test_bin_dir(), v->url, args);
	return run_cmd(cmd, out, cap);
}

/* Three servers registered and a map of them: 0, or 77 / -1. */
static int env_cluster(struct env *v)
{
	char out[4096];
	int rc = env_etcd(v);

	if (rc)
		return rc;
	for (unsigned i = 0; i < NSRV; i++) {
		rc = start_srv(v, i, g_names[i], NULL);
		if (rc) {
			printf("#   cannot start %s: %s\n", g_names[i],
			       strerror(-rc));
			return -1;
		}
	}
	rc = admin(v, "init", out, sizeof(out));
	if (rc != 0 || !strstr(out, "map epoch 1 with 3 servers")) {
		printf("#   rkv admin init: exit %d: %s", rc, out);
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------- the tests */

static void t_serve_from_etcd(void)
{
	struct env v;
	struct rkv_client *a, *b;
	char out[4096];
	unsigned bad = 0;
	int rc = env_cluster(&v);

	if (rc == 77)
		return;
	ASSERT_EQ(rc, 0);
	a = test_client_cluster(v.url, 3000, 5000, NULL, NULL);
	b = test_client_cluster(v.url, 3000, 5000, NULL, NULL);
	ASSERT_TRUE(a && b);
	EXPECT_EQ(rkv_client_nservers(a), NSRV);
	for (unsigned i = 0; i < NKEYS; i++)
		EXPECT_EQ(test_kput(a, i, 1), 0);
	for (unsigned i = 0; i < NKEYS; i++)
		bad += test_kcheck(b, i, 1) != 0;
	EXPECT_EQ(bad, 0);
	rc = admin(&v, "status", out, sizeof(out));
	EXPECT_EQ(rc, 0);
	EXPECT_TRUE(strstr(out, "map epoch 1, 3 servers") != NULL);
	unsigned up = 0;

	for (const char *p = out; (p = strstr(p, " up ")); p++)
		up++;
	if (up != NSRV)
		printf("#   status:\n%s", out);
	EXPECT_EQ(up, NSRV);
	/* a second init changes nothing */
	rc = admin(&v, "init", out, sizeof(out));
	EXPECT_EQ(rc, 2);
	EXPECT_TRUE(strstr(out, "already has a map (epoch 1") != NULL);
	/* join and drain say they are not built, and change nothing */
	rc = admin(&v, "join delta", out, sizeof(out));
	EXPECT_EQ(rc, 2);
	EXPECT_TRUE(strstr(out, "not built yet") != NULL);
	rkv_client_destroy(a);
	rkv_client_destroy(b);
	env_stop(&v);
}

/* A second server under a taken name: refused at start, naming the
 * first; the first keeps its registration. */
static void t_name_taken(void)
{
	struct env v;
	char cmd[1024], out[4096], listen[300];
	int rc = env_cluster(&v);

	if (rc == 77)
		return;
	ASSERT_EQ(rc, 0);
	test_srv_listen_addr(g_prov, listen, sizeof(listen));
	snprintf(cmd, sizeof(cmd),
		 "timeout 20 %s/rkv-server --listen %s --name bravo --cluster %s "
		 "--log-level error", test_bin_dir(), listen, v.url);
	rc = run_cmd(cmd, out, sizeof(out));
	EXPECT_EQ(rc, 1);
	if (!strstr(out, "the name 'bravo' is taken in cluster"))
		printf("#   %s", out);
	EXPECT_TRUE(strstr(out, "the name 'bravo' is taken in cluster") !=
		    NULL);
	EXPECT_TRUE(strstr(out, v.s[1].addr) != NULL);
	rc = admin(&v, "status", out, sizeof(out));
	EXPECT_TRUE(rc == 0 && strstr(out, v.s[1].addr) &&
		    !strstr(out, "not registered"));
	env_stop(&v);
}

/* etcd down at start: clients fail within their connect timeout naming
 * etcd; a server retries for --etcd-wait, and comes up with etcd. */
static void t_etcd_down_at_start(void)
{
	struct env v;
	struct test_logbuf lb = { .len = 0 };
	char why[300], cmd[2048], out[4096], listen[300];
	int rc = env_cluster(&v);

	if (rc == 77)
		return;
	ASSERT_EQ(rc, 0);
	test_etcd_kill(&v.etcd);
	uint64_t t0 = rkv_now_ms();

	EXPECT_TRUE(test_client_cluster(v.url, 3000, 1000, &lb, &rc) == NULL);
	uint64_t ms = rkv_now_ms() - t0;

	printf("#   client with etcd down: %s after %llu ms\n", strerror(-rc),
	       (unsigned long long)ms);
	EXPECT_EQ(rc, -ECONNREFUSED);
	EXPECT_TRUE(ms < 3000);
	EXPECT_TRUE(strstr(lb.text, v.etcd.url + strlen("etcd://")) != NULL);
	/* a server gives up after --etcd-wait */
	test_srv_listen_addr(g_prov, listen, sizeof(listen));
	snprintf(cmd, sizeof(cmd),
		 "timeout 30 %s/rkv-server --listen %s --name delta --cluster %s "
		 "--etcd-wait 1 --log-level error", test_bin_dir(), listen,
		 v.url);
	t0 = rkv_now_ms();
	rc = run_cmd(cmd, out, sizeof(out));
	ms = rkv_now_ms() - t0;
	EXPECT_EQ(rc, 1);
	EXPECT_TRUE(strstr(out, "rkv-server: --cluster") &&
		    strstr(out, "Connection refused"));
	EXPECT_TRUE(ms < 10000);
	/* and one that waits long enough comes up once etcd is back: it
	 * starts (in the background, its PID in a file) while etcd is down */
	{
		char dir[] = "/tmp/rkv-itest-etcd-XXXXXX";
		char pidf[64], outf[64], buf[4096] = "";
		long pid = 0;

		ASSERT_TRUE(mkdtemp(dir) != NULL);
		snprintf(pidf, sizeof(pidf), "%s/pid", dir);
		snprintf(outf, sizeof(outf), "%s/out", dir);
		test_srv_listen_addr(g_prov, listen, sizeof(listen));
		snprintf(cmd, sizeof(cmd),
			 "%s/rkv-server --listen %s --name echo --cluster %s "
			 "--etcd-wait 20 --log-level error >%s 2>&1 & echo $! >%s",
			 test_bin_dir(), listen, v.url, outf, pidf);
		EXPECT_EQ(system(cmd), 0);
		usleep(1500000);
		ASSERT_EQ(test_etcd_restart(&v.etcd, why, sizeof(why)), 0);
		FILE *f = fopen(pidf, "r");

		if (f) {
			if (fscanf(f, "%ld", &pid) != 1)
				pid = 0;
			fclose(f);
		}
		EXPECT_TRUE(pid > 0);
		for (int i = 0; i < 100 && !strstr(buf, "listening on"); i++) {
			usleep(100000);
			f = fopen(outf, "r");
			if (f) {
				buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
				fclose(f);
			}
		}
		EXPECT_TRUE(strstr(buf, "listening on") != NULL);
		rc = admin(&v, "status", out, sizeof(out));
		EXPECT_TRUE(strstr(out, "registered, not in the map: echo") !=
			    NULL);
		if (pid > 0) {
			kill((pid_t)pid, SIGTERM);
			for (int i = 0; i < 50 && kill((pid_t)pid, 0) == 0; i++)
				usleep(100000);
			kill((pid_t)pid, SIGKILL);
		}
		unlink(pidf);
		unlink(outf);
		rmdir(dir);
	}
	env_stop(&v);
}

/* etcd killed under load for longer than a registration's lease: running
 * clients do not notice; once etcd is back every server is registered
 * (etcd gives the leases a new TTL when it restarts, so the servers'
 * renewals go on) and new clients start. */
static void t_etcd_killed_under_load(void)
{
	struct env v;
	struct rkv_client *c, *d;
	char why[300], out[4096];
	unsigned ops = 0, bad = 0;
	int rc = env_cluster(&v);

	if (rc == 77)
		return;
	ASSERT_EQ(rc, 0);
	c = test_client_cluster(v.url, 3000, 5000, NULL, NULL);
	ASSERT_TRUE(c != NULL);
	for (unsigned i = 0; i < NKEYS; i++)
		EXPECT_EQ(test_kput(c, i, 1), 0);
	test_etcd_kill(&v.etcd);
	uint64_t end = rkv_now_ms() + 6500; /* past the 5 s lease */

	for (unsigned gen = 2; rkv_now_ms() < end; gen++) {
		for (unsigned i = 0; i < NKEYS; i += 7) {
			bad += test_kput(c, i, gen) != 0;
			bad += test_kcheck(c, i, gen) != 0;
			ops += 2;
		}
	}
	printf("#   etcd down 6.5 s: %u ops, %u failed\n", ops, bad);
	EXPECT_EQ(bad, 0);
	ASSERT_EQ(test_etcd_restart(&v.etcd, why, sizeof(why)), 0);
	/* the servers re-register within a renewal period or two */
	int registered = 0;

	for (int i = 0; i < 60 && !registered; i++) {
		usleep(200000);
		rc = admin(&v, "status", out, sizeof(out));
		registered = rc == 0 && !strstr(out, "not registered");
	}
	if (!registered)
		printf("#   status:\n%s", out);
	EXPECT_TRUE(registered);
	d = test_client_cluster(v.url, 3000, 5000, NULL, NULL);
	EXPECT_TRUE(d != NULL);
	if (d) {
		EXPECT_EQ(test_kput(d, 1, 99), 0);
		EXPECT_EQ(test_kcheck(c, 1, 99), 0);
		rkv_client_destroy(d);
	}
	rkv_client_destroy(c);
	env_stop(&v);
}

/* A server paused past its lease: its registration lapses (status says
 * so), and when it runs again it registers anew by itself. */
static void t_server_paused(void)
{
	struct env v;
	char out[4096];
	int rc = env_cluster(&v), gone = 0, back = 0;

	if (rc == 77)
		return;
	ASSERT_EQ(rc, 0);
	kill(v.s[1].pid, SIGSTOP);
	for (int i = 0; i < 60 && !gone; i++) { /* TTL 5 s, at most 12 s */
		usleep(200000);
		rc = admin(&v, "status", out, sizeof(out));
		gone = rc == 0 && strstr(out, "not registered") != NULL;
	}
	EXPECT_TRUE(gone);
	kill(v.s[1].pid, SIGCONT);
	for (int i = 0; i < 60 && !back; i++) {
		usleep(200000);
		rc = admin(&v, "status", out, sizeof(out));
		back = rc == 0 && !strstr(out, "not registered") &&
		       !strstr(out, " down ");
	}
	if (!back)
		printf("#   status:\n%s", out);
	EXPECT_TRUE(back);
	env_stop(&v);
}

/* Nonsense in etcd: a map edited by hand, a server of another protocol
 * version: refused with the reason, nothing changed. */
static void t_bad_input(void)
{
	struct env v;
	struct test_logbuf lb = { .len = 0 };
	struct rkv_etcd *e = NULL;
	char key[256], out[4096], why[300];
	int rc = env_etcd(&v);

	if (rc == 77)
		return;
	ASSERT_EQ(rc, 0);
	ASSERT_EQ(rkv_etcd_open(v.etcd.url, 3000, &e, why, sizeof(why)), 0);
	/* a server of protocol 2 */
	snprintf(key, sizeof(key), "/rkv/%s/servers/old",
		 strrchr(v.url, '/') + 1);
	static const char old[] = "addr tcp://127.0.0.1:9\nproto 2\npid 1\n";

	ASSERT_EQ(rkv_etcd_put(e, key, old, strlen(old), 0), 0);
	rc = admin(&v, "init old", out, sizeof(out));
	EXPECT_EQ(rc, 2);
	char want[64];

	snprintf(want, sizeof(want), "speaks protocol 2, this rkv speaks %u",
		 RKV_PROTO_VERSION);
	EXPECT_TRUE(strstr(out, want) != NULL);
	rc = admin(&v, "map", out, sizeof(out));
	EXPECT_TRUE(rc == 2 && strstr(out, "has no map yet"));
	/* no map: a client says how to make one */
	EXPECT_TRUE(test_client_cluster(v.url, 3000, 1000, &lb, &rc) == NULL);
	EXPECT_EQ(rc, -ENODATA);
	EXPECT_TRUE(strstr(lb.text, "rkv admin --cluster") != NULL);
	/* a map edited into nonsense */
	snprintf(key, sizeof(key), "/rkv/%s/map", strrchr(v.url, '/') + 1);
	static const char junk[] = "epoch 3\nalpha tcp://h:1\nalpha tcp://h:2\n";

	ASSERT_EQ(rkv_etcd_put(e, key, junk, strlen(junk), 0), 0);
	lb.len = 0;
	lb.text[0] = '\0';
	EXPECT_TRUE(test_client_cluster(v.url, 3000, 1000, &lb, &rc) == NULL);
	EXPECT_EQ(rc, -EINVAL);
	EXPECT_TRUE(strstr(lb.text, "is not a cluster map: line 3: server name "
				    "'alpha' listed twice") != NULL);
	rc = admin(&v, "status", out, sizeof(out));
	EXPECT_EQ(rc, 2);
	EXPECT_TRUE(strstr(out, "is not a cluster map") != NULL);
	static const char noepoch[] = "alpha tcp://h:1\n";

	ASSERT_EQ(rkv_etcd_put(e, key, noepoch, strlen(noepoch), 0), 0);
	EXPECT_TRUE(test_client_cluster(v.url, 3000, 1000, NULL, &rc) == NULL);
	EXPECT_EQ(rc, -EINVAL);
	/* bad URLs */
	EXPECT_TRUE(test_client_cluster("etcd://127.0.0.1", 3000, 1000, NULL, &rc) == NULL);
	EXPECT_EQ(rc, -EINVAL);
	EXPECT_TRUE(test_client_cluster("etcd://127.0.0.1:2379/", 3000, 1000, NULL, &rc) ==
		    NULL);
	EXPECT_EQ(rc, -EINVAL);
	rkv_etcd_close(e);
	env_stop(&v);
}

int main(int argc, char **argv)
{
	g_prov = test_itest_init(argc, argv, 300);
	if (!g_prov)
		return 77;
	g_verbs = !strcmp(g_prov, "verbs");
	signal(SIGPIPE, SIG_IGN);
	RKV_TEST(t_serve_from_etcd);
	RKV_TEST(t_name_taken);
	RKV_TEST(t_etcd_down_at_start);
	RKV_TEST(t_etcd_killed_under_load);
	RKV_TEST(t_server_paused);
	RKV_TEST(t_bad_input);
	return rkv_test_done();
}
