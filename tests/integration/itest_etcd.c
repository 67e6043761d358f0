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
 *     version, is refused with the reason and changes nothing;
 *   - join and drain under load (t_join_drain_live): linearizable, no
 *     key lost, and scans running through the moves list every key that
 *     stays, twice only in a scan that met a move;
 *   - failover (t_failover_r2, t_failover_r3): a server kill -9'd under
 *     load from several processes, `rkv admin failover` (itself killed
 *     once part-way and run again): linearizable, every acknowledged
 *     write read back, each key on r servers of the new map; with r=3 two
 *     servers lost one after the other;
 *   - a server of r = 2 restarted at once within its lease
 *     (t_restart_empty): none of its keys read absent, `rkv admin watch`
 *     fails it over, it joins again; linearizable, nothing lost;
 *   - tombstones at r = 2 filling an index, swept by `rkv admin sweep`
 *     and by `watch --sweep-every` under load (t_sweep).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "etcd.h"
#include "etcd_proc.h"
#include "lincheck.h"
#include "migrate.h"
#include "msg.h"
#include "registry.h"
#include "rkv.h"
#include "rtime.h"
#include "srv.h"
#include "test.h"

static const char *g_prov = "tcp";
static int g_verbs;
static const char *g_capacity = "30000"; /* rkv-server --capacity */
/* --index-max: two levels (a layout with room to grow, as by default),
 * 4 MiB that verbs registers at start (0: fixed) */
static const char *g_index_max = "4M";
static int g_seq;

#define NSRV 3
#define NKEYS 300

static const char *const g_names[NSRV] = { "alpha", "bravo", "charlie" };

struct env {
	struct test_etcd etcd;
	char url[128];            /* etcd://127.0.0.1:P/CLUSTER */
	struct test_srv s[NSRV + 2]; /* then: servers that join */
	const char *nm[NSRV + 2];    /* failover_live's names */
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

/* A server of the cluster, listening at listen (NULL: a fresh address),
 * with a small index: a migration reads it whole for each batch. */
static int start_srv_at(struct env *v, unsigned i, const char *name,
			const char *wait_s, const char *listen)
{
	const char *extra[] = { "--name", name, "--cluster", v->url,
				"--etcd-wait", wait_s ? wait_s : "10",
				"--capacity", g_capacity,
				"--index-max", g_index_max,
				listen ? "--listen" : NULL, listen, NULL };

	return test_srv_start(&v->s[i], g_prov, extra);
}

static int start_srv(struct env *v, unsigned i, const char *name,
		     const char *wait_s)
{
	return start_srv_at(v, i, name, wait_s, NULL);
}

static void env_stop(struct env *v)
{
	for (unsigned i = 0; i < NSRV + 2; i++)
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

/* `rkv admin ARGS` refused: exit 2, one line that says what. */
struct refusal {
	const char *args, *says;
};

static void expect_refused(struct env *v, const struct refusal *r, size_t n)
{
	char out[4096];

	for (size_t i = 0; i < n; i++) {
		int rc = admin(v, r[i].args, out, sizeof(out));

		EXPECT_EQ(rc, 2);
		EXPECT_TRUE(strstr(out, r[i].says) != NULL);
		EXPECT_TRUE(strchr(out, '\n') == strrchr(out, '\n'));
		if (!strstr(out, r[i].says) || rc != 2)
			printf("#   %s: %s", r[i].args, out);
	}
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
	/* join and drain of what cannot be: one line each, nothing changed */
	static const struct refusal refused[] = {
		{ "join delta", "server 'delta' is not registered" },
		{ "join alpha", "server 'alpha' is in the map already" },
		{ "drain delta", "server 'delta' is not in the map" },
		{ "join", "give one server name" },
		{ "drain alpha bravo", "give one server name" },
	};

	expect_refused(&v, refused, sizeof(refused) / sizeof(refused[0]));
	rc = admin(&v, "map", out, sizeof(out));
	EXPECT_TRUE(rc == 0 && strstr(out, "epoch 1\n") != NULL);
	/* one copy of each key: a delete frees its slot */
	rc = admin(&v, "sweep", out, sizeof(out));
	EXPECT_TRUE(rc == 0 && strstr(out, "nothing to sweep") != NULL);
	/* `rkv cluster`: the client's map, from etcd */
	{
		char cmd[1024];

		snprintf(cmd, sizeof(cmd), "%s/rkv --cluster %s cluster",
			 test_bin_dir(), v.url);
		rc = run_cmd(cmd, out, sizeof(out));
		EXPECT_EQ(rc, 0);
		EXPECT_TRUE(strstr(out, "cluster map epoch 1, 4096 "
				   "partitions\n") == out);
		up = 0;
		for (const char *p = out; (p = strstr(p, " up ")); p++)
			up++;
		EXPECT_EQ(up, NSRV);
		if (rc || up != NSRV)
			printf("#   rkv cluster:\n%s", out);
	}
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

/*
 * A map of replicas 2 in etcd: init refuses what cannot be, clients from
 * etcd write every key on its two servers, join and drain are refused,
 * and with one server stopped `rkv admin status` and every client's
 * counters say the cluster is degraded; the writes of the partitions it
 * held fail with its error, the others' go on, and every key whose
 * primary is up still reads its value.
 */
static void t_replicated_map(void)
{
	struct env v;
	struct rkv_client *a, *c;
	struct rkv_client_stats st;
	char out[4096];
	unsigned bad = 0, copies = 0, ok_put = 0, failed_put = 0;
	int rc = env_etcd(&v);

	if (rc == 77)
		return;
	ASSERT_EQ(rc, 0);
	for (unsigned i = 0; i < NSRV; i++)
		ASSERT_EQ(start_srv(&v, i, g_names[i], NULL), 0);
	static const struct refusal refused[] = {
		{ "init --replicas 4", "--replicas wants a number from 1 to 3" },
		{ "init --replicas", "--replicas wants a number from 1 to 3" },
		{ "init --replicas=x", "--replicas wants a number from 1 to 3" },
		{ "init --replicas 3 alpha bravo",
		  "--replicas 3 needs at least 3 servers; 2 are registered" },
	};

	expect_refused(&v, refused, sizeof(refused) / sizeof(refused[0]));
	rc = admin(&v, "init --replicas 2", out, sizeof(out));
	EXPECT_EQ(rc, 0);
	EXPECT_TRUE(strstr(out, "map epoch 1 with 3 servers: alpha bravo "
				"charlie; 2 copies of each key") != NULL);
	rc = admin(&v, "map", out, sizeof(out));
	EXPECT_TRUE(rc == 0 && strstr(out, "replicas 2\n") != NULL);
	struct test_logbuf lb = { .len = 0 };

	a = test_client_cluster(v.url, 3000, 2000, &lb, &rc);
	if (!a)
		printf("#   client: %s: %s", strerror(-rc), lb.text);
	ASSERT_TRUE(a != NULL);
	for (unsigned i = 0; i < NKEYS; i++)
		EXPECT_EQ(test_kput(a, i, 1), 0);
	/* each key on its two servers: read back by clients of one server */
	for (unsigned i = 0; i < NKEYS; i++) {
		char k[32];
		unsigned rep[3];
		unsigned n = rkv_client_replicas(a, k, (size_t)snprintf(
						 k, sizeof(k), "user:%u", i),
						 rep, 3);

		EXPECT_EQ(n, 2);
		for (unsigned j = 0; j < n && j < 2; j++) {
			struct rkv_client *one =
				test_client_at(v.s[rep[j]].addr, 3000, 0);

			if (one) {
				copies += test_kcheck(one, i, 1) == 0;
				rkv_client_destroy(one);
			}
		}
	}
	EXPECT_EQ(copies, 2 * NKEYS);
	rc = admin(&v, "status", out, sizeof(out));
	EXPECT_EQ(rc, 0);
	EXPECT_TRUE(strstr(out, "3 servers, 2 copies of each key") != NULL);
	EXPECT_TRUE(strstr(out, "copies: all 4096 partitions have their 2 "
				"copies up") != NULL);
	rc = admin(&v, "join alpha", out, sizeof(out));
	EXPECT_EQ(rc, 2);
	EXPECT_TRUE(strstr(out, "server 'alpha' is in the map already") !=
		    NULL);
	rc = admin(&v, "join nobody", out, sizeof(out));
	EXPECT_EQ(rc, 2);
	EXPECT_TRUE(strstr(out, "server 'nobody' is not registered") != NULL);
	/* bravo stops */
	ASSERT_EQ(test_srv_stop(&v.s[1]), 0);
	static const struct refusal refused2[] = {
		{ "sweep", "sweep: server 'bravo' is not registered: fail it "
			   "over first" },
		{ "watch --sweep-every 0", "--sweep-every '0' is not a number "
					   "of seconds" },
		{ "watch --sweep-every x", "--sweep-every 'x' is not a number" },
		{ "watch --grace", "the options are --grace MS and "
				   "--sweep-every S" },
	};

	expect_refused(&v, refused2, sizeof(refused2) / sizeof(refused2[0]));
	rc = admin(&v, "status", out, sizeof(out));
	EXPECT_EQ(rc, 0);
	EXPECT_TRUE(strstr(out, "copies: DEGRADED: ") != NULL);
	if (!strstr(out, "DEGRADED"))
		printf("#   status:\n%s", out);
	c = test_client_cluster(v.url, 3000, 1000, NULL, NULL);
	ASSERT_TRUE(c != NULL);
	for (unsigned i = 0; i < NKEYS; i++) {
		char k[32];
		unsigned rep[3], n;
		int on_bravo = 0;

		n = rkv_client_replicas(c, k, (size_t)snprintf(k, sizeof(k),
							     "user:%u", i),
					rep, 3);
		for (unsigned j = 0; j < n && j < 3; j++)
			on_bravo |= rep[j] == 1;
		if (rep[0] != 1)
			bad += test_kcheck(c, i, 1) != 0;
		rc = test_kput(c, i, 2);
		if (on_bravo) {
			failed_put += rc != 0;
		} else {
			ok_put += rc == 0;
			bad += test_kcheck(c, i, 2) != 0;
		}
	}
	EXPECT_EQ(bad, 0);
	rkv_client_stats(c, &st);
	EXPECT_EQ(st.servers_down, 1);
	/* bravo holds a copy of about 2/3 of the partitions */
	EXPECT_TRUE(st.parts_degraded > 4096 / 2 &&
		    st.parts_degraded < 4096 * 5 / 6);
	EXPECT_TRUE(failed_put > 0 && ok_put > 0);
	EXPECT_EQ(failed_put + ok_put, NKEYS);
	printf("#   bravo down: %llu of 4096 partitions degraded; %u puts "
	       "failed (a copy on bravo), %u went on\n",
	       (unsigned long long)st.parts_degraded, failed_put, ok_put);
	rkv_client_destroy(c);
	rkv_client_destroy(a);
	env_stop(&v);
}

/* ------------------------------------------------- join and drain live */

#define MIG_KEYS 48        /* hot keys of the linearizability check */
#define MIG_FILL 3000      /* keys that only move */
#define MIG_FRESH 12000    /* fresh keys a client puts at most */
#define MIG_CLIENTS 3
#define MIG_OP_MS 20000    /* op timeout: a frozen batch waits (slow in
			    * sanitizer builds) */

/* The load's op timeout: a migration's frozen batch waits that long; a
 * failover's clients wait for the new map (failover_live: shorter, so
 * that a client stuck in a wait shows as failures, not a hang) */
static unsigned g_op_ms = MIG_OP_MS;
/* fresh keys a load client puts at most (its children inherit it) */
static unsigned g_fresh_max = MIG_FRESH;

static uint64_t now_ns(void)
{
	return rkv_now_ns();
}

static int mig_get(struct rkv_client *c, const char *k, uint64_t *id)
{
	char buf[64];
	size_t len = 0;
	int rc = rkv_get(c, k, strlen(k), buf, sizeof(buf) - 1, &len);

	if (rc)
		return rc;
	buf[len] = '\0';
	return sscanf(buf, "v%" SCNx64, id) == 1 ? 0 : -EBADMSG;
}

/* A client of the cluster in etcd: random put/get/delete of the hot keys,
 * each logged for the checker, and puts of fresh keys (new<client>-<n>,
 * each a new insert somewhere), until stop_file exists.  Its summary
 * (ops, errors, redirects, waits, p99 and worst latency in us, fresh keys
 * acknowledged) in sum_file. */
static void mig_child(const char *url, int client, const char *log,
		      const char *stop_file, const char *sum_file)
{
	struct rkv_client *c = test_client_cluster(url, g_op_ms, 10000,
						   NULL, NULL);
	static uint32_t lat_us[1 << 20];
	uint64_t seq = 0, rnd = 0x9e3779b97f4a7c15ull * (uint64_t)(client + 1);
	unsigned nlat = 0, errors = 0, fresh = 0;
	uint64_t t_start = now_ns(), last_err_ms = 0;
	int first_err = 0, last_err = 0;
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (!c || fd < 0)
		_exit(3);
	for (;;) {
		if ((seq & 7) == 0 && access(stop_file, F_OK) == 0)
			break;
		rnd ^= rnd << 13;
		rnd ^= rnd >> 7;
		rnd ^= rnd << 17;
		unsigned key = (unsigned)(rnd % MIG_KEYS), r = (rnd >> 20) % 12;
		int kind = r < 5 ? LIN_GET : r < 9 ? LIN_PUT : LIN_DEL;
		char k[32], v[32];

		/* spread over the run: about two a millisecond */
		if (r >= 10 && fresh < g_fresh_max &&
		    fresh < (now_ns() - t_start) / 500000u) {
			/* a fresh key: an insert, never changed again */
			snprintf(k, sizeof(k), "new%d-%u", client, fresh);
			int frc = rkv_put(c, k, strlen(k), "fresh", 5);

			if (frc == 0)
				fresh++;
			else if (!errors++)
				first_err = frc;
			if (frc) {
				last_err_ms = rkv_now_ms();
				last_err = frc;
			}
			seq++;
			continue;
		}
		if (r >= 10)
			r -= 10;
		uint64_t in = kind == LIN_PUT ? (uint64_t)(client + 1) << 40 | ++seq
					      : (++seq, 0);
		uint64_t out = 0, t0 = now_ns();
		int ok = LIN_INDET, rc;

		snprintf(k, sizeof(k), "hot%u", key);
		lin_log_call(fd, client, seq, key + 1, kind, in, t0);
		if (kind == LIN_GET) {
			rc = mig_get(c, k, &out);
			if (rc == -ENOENT) {
				rc = 0;
				out = LIN_ABSENT;
			}
		} else if (kind == LIN_PUT) {
			snprintf(v, sizeof(v), "v%" PRIx64, in);
			rc = rkv_put(c, k, strlen(k), v, strlen(v));
		} else {
			rc = rkv_delete(c, k, strlen(k));
			out = rc == -ENOENT ? LIN_DEL_ABSENT : LIN_DEL_DONE;
			if (rc == -ENOENT)
				rc = 0;
		}
		uint64_t t1 = now_ns();

		if (rc == 0)
			ok = LIN_DONE;
		else if (!errors++)
			first_err = rc;
		if (rc) {
			last_err_ms = rkv_now_ms();
			last_err = rc;
		}
		lin_log_ret(fd, client, seq, out, ok, t1);
		/* a failed op waits a little, as an application would: on
		 * shm an op on a dead server's key fails in a microsecond,
		 * and a lease's outage would log millions of unknown
		 * outcomes for the checker */
		if (rc)
			usleep(200);
		if (nlat < sizeof(lat_us) / sizeof(lat_us[0]))
			lat_us[nlat++] = (uint32_t)((t1 - t0) / 1000);
	}
	close(fd);
	/* p99 and worst */
	uint32_t worst = 0, p99 = 0;
	unsigned above;

	for (unsigned i = 0; i < nlat; i++)
		worst = lat_us[i] > worst ? lat_us[i] : worst;
	for (uint32_t t = 1; t <= worst; t = t * 11 / 10 + 1) {
		above = 0;
		for (unsigned i = 0; i < nlat; i++)
			above += lat_us[i] > t;
		if (above * 100u <= nlat) {
			p99 = t;
			break;
		}
	}
	struct rkv_client_stats st;
	FILE *f = fopen(sum_file, "w");

	rkv_client_stats(c, &st);
	if (f) {
		fprintf(f, "%u %u %llu %llu %u %u %u %llu %s; the last: %s\n",
			nlat, errors, (unsigned long long)st.redirects,
			(unsigned long long)st.mig_waits, p99, worst, fresh,
			(unsigned long long)last_err_ms,
			first_err ? strerror(-first_err) : "-",
			last_err ? strerror(-last_err) : "-");
		fclose(f);
	}
	rkv_client_destroy(c);
	_exit(0);
}

/* Scans, one after the other, until stop_file exists: every filler key
 * (present throughout) must come in each, with its value; a key may
 * come twice only in a scan that met a move.  Its summary (scans, scans
 * that missed a filler key, keys that came twice, of those in scans
 * without a move, partitions moved, failed scans, bad values) in
 * sum_file. */
struct scan_tally {
	uint8_t n[MIG_FILL];
	unsigned bad;
};

static int scan_count(const void *key, size_t key_len, const void *val,
		      size_t val_len, void *arg)
{
	struct scan_tally *t = arg;
	char k[32], want[64];
	unsigned i;

	if (key_len >= sizeof(k))
		return 0;
	memcpy(k, key, key_len);
	k[key_len] = '\0';
	if (sscanf(k, "user:%u", &i) != 1 || i >= MIG_FILL)
		return 0;
	snprintf(want, sizeof(want), "value-1-of-%u", i);
	if (val_len != strlen(want) || memcmp(val, want, val_len))
		t->bad++;
	if (t->n[i] < 255)
		t->n[i]++;
	return 0;
}

static void scan_child(const char *url, const char *stop_file,
		       const char *sum_file)
{
	struct rkv_client *c = test_client_cluster(url, MIG_OP_MS, 10000,
						   NULL, NULL);
	static struct scan_tally t;
	unsigned scans = 0, missed = 0, twice = 0, twice_still = 0;
	unsigned failed = 0, bad = 0;
	unsigned long long moved = 0;
	FILE *f;

	if (!c)
		_exit(3);
	while (access(stop_file, F_OK) != 0) {
		struct rkv_scan_stats st;
		unsigned miss = 0, dup = 0;

		memset(&t, 0, sizeof(t));
		if (rkv_scan(c, scan_count, &t, &st)) {
			failed++;
			continue;
		}
		for (unsigned i = 0; i < MIG_FILL; i++) {
			miss += t.n[i] == 0;
			dup += t.n[i] > 1;
		}
		scans++;
		missed += miss > 0;
		/* a full scan reads every server's whole index: leave the
		 * two cores to the moves and the load between scans */
		usleep(20000);
		twice += dup;
		twice_still += st.parts_moved ? 0 : dup;
		moved += st.parts_moved;
		bad += t.bad;
	}
	f = fopen(sum_file, "w");
	if (f) {
		fprintf(f, "%u %u %u %u %llu %u %u\n", scans, missed, twice,
			twice_still, moved, failed, bad);
		fclose(f);
	}
	rkv_client_destroy(c);
	_exit(0);
}

static void rm_dir(const char *dir)
{
	char cmd[400];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd)) {
		/* a temporary directory left */
	}
}

/* fork(), the child killed when this process dies (a test cut short by
 * its watchdog leaves no load running). */
static pid_t fork_child(void)
{
	pid_t parent = getpid(), pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
	}
	return pid;
}

/* MIG_CLIENTS mig_child processes logging into dir, until stop exists. */
static void spawn_clients(const char *url, const char *dir, const char *stop,
			  pid_t *kids)
{
	for (int i = 0; i < MIG_CLIENTS; i++) {
		char log[300], sum[300];

		snprintf(log, sizeof(log), "%s/h%d", dir, i);
		snprintf(sum, sizeof(sum), "%s/s%d", dir, i);
		kids[i] = fork_child();
		if (kids[i] == 0)
			mig_child(url, i, log, stop, sum);
	}
}

/* Create stop and wait for the clients: each must end well. */
static void stop_clients(const char *stop, const pid_t *kids)
{
	int fd = open(stop, O_WRONLY | O_CREAT, 0600);

	if (fd >= 0)
		close(fd);
	for (int i = 0; i < MIG_CLIENTS; i++) {
		int st = 0;

		waitpid(kids[i], &st, 0);
		EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

/* A get of every hot key by c, logged as client 99 in dir/hfinal. */
static void final_reads(struct rkv_client *c, const char *dir)
{
	char path[300];
	int fd;

	snprintf(path, sizeof(path), "%s/hfinal", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	for (unsigned k = 0; fd >= 0 && k < MIG_KEYS; k++) {
		char name[32];
		uint64_t id = 0;
		int rc;

		snprintf(name, sizeof(name), "hot%u", k);
		lin_log_call(fd, 99, k, k + 1, LIN_GET, 0, now_ns());
		rc = mig_get(c, name, &id);
		if (rc && rc != -ENOENT)
			printf("#   hot%u: %s\n", k, strerror(-rc));
		lin_log_ret(fd, 99, k, rc == -ENOENT ? LIN_ABSENT : id,
			    rc == 0 || rc == -ENOENT ? LIN_DONE : LIN_INDET,
			    now_ns());
		EXPECT_TRUE(rc == 0 || rc == -ENOENT);
	}
	if (fd >= 0)
		close(fd);
}

/* 3 servers grow to 4 and drain back to 3 under load from several
 * processes: the checker over the whole history (and a read of every hot
 * key at the end), every filler key read back, the moves counted. */
static void t_join_drain_live(void)
{
	char dir[] = "/tmp/rkv-itest-mig-XXXXXX", path[300], stop[300];
	char out[8192];
	char scan_sum[300];
	struct env v;
	pid_t kids[MIG_CLIENTS], scanner;
	struct rkv_client *c;
	int rc = env_cluster(&v);

	if (rc == 77)
		return;
	ASSERT_EQ(rc, 0);
	ASSERT_TRUE(mkdtemp(dir) != NULL);
	ASSERT_EQ(start_srv(&v, NSRV, "delta", NULL), 0);
	c = test_client_cluster(v.url, MIG_OP_MS, 10000, NULL, NULL);
	ASSERT_TRUE(c != NULL);
	for (unsigned i = 0; i < MIG_FILL; i++)
		ASSERT_EQ(test_kput(c, i, 1), 0);
	snprintf(stop, sizeof(stop), "%s/stop", dir);
	spawn_clients(v.url, dir, stop, kids);
	snprintf(scan_sum, sizeof(scan_sum), "%s/scan", dir);
	scanner = fork_child();
	if (scanner == 0)
		scan_child(v.url, stop, scan_sum);
	usleep(300000);
	uint64_t t0 = rkv_now_ms();

	rc = admin(&v, "join delta", out, sizeof(out));
	printf("#   join: %.0f ms: %s", (double)(rkv_now_ms() - t0),
	       strrchr(out, '\n') ? strstr(out, "cluster ") : out);
	EXPECT_EQ(rc, 0);
	/* the client made before the join follows its keys to delta */
	for (unsigned i = 0; i < MIG_FILL; i++)
		EXPECT_EQ(test_kcheck(c, i, 1), 0);
	usleep(200000);
	t0 = rkv_now_ms();
	rc = admin(&v, "drain alpha", out, sizeof(out));
	printf("#   drain: %.0f ms: %s", (double)(rkv_now_ms() - t0),
	       strstr(out, "cluster ") ? strstr(out, "cluster ") : out);
	EXPECT_EQ(rc, 0);
	usleep(200000);
	rc = admin(&v, "join alpha", out, sizeof(out));
	EXPECT_EQ(rc, 0);
	usleep(200000);
	rc = admin(&v, "drain delta", out, sizeof(out));
	EXPECT_EQ(rc, 0);
	usleep(200000);
	stop_clients(stop, kids);
	{
		/* the scans through the moves: every filler key in each */
		unsigned scans = 0, missed = 1, twice = 0, still = 1;
		unsigned failed = 1, bad = 1;
		unsigned long long moved = 0;
		int st = 0;
		FILE *f;

		waitpid(scanner, &st, 0);
		EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		f = fopen(scan_sum, "r");
		EXPECT_TRUE(f && fscanf(f, "%u %u %u %u %llu %u %u", &scans,
					&missed, &twice, &still, &moved,
					&failed, &bad) == 7);
		if (f)
			fclose(f);
		printf("#   %u scans through the moves: %u missed a key, %u "
		       "keys came twice (%u in scans that met no move), %llu "
		       "partitions moved under a scan, %u scans failed, %u "
		       "bad values\n", scans, missed, twice, still, moved,
		       failed, bad);
		EXPECT_TRUE(scans > 0);
		EXPECT_EQ(missed, 0);
		EXPECT_EQ(still, 0);
		EXPECT_EQ(failed, 0);
		EXPECT_EQ(bad, 0);
	}
	/* the final value of every hot key, as one more client */
	final_reads(c, dir);
	/* every filler key, after four moves, from a fresh client too */
	struct rkv_client *d = test_client_cluster(v.url, MIG_OP_MS, 10000,
						   NULL, NULL);
	unsigned lost = 0;

	ASSERT_TRUE(d != NULL);
	for (unsigned i = 0; i < MIG_FILL; i++)
		lost += test_kcheck(d, i, 1) != 0 || test_kcheck(c, i, 1) != 0;
	EXPECT_EQ(lost, 0);
	/* the history */
	struct lin_hist h = { 0 };
	struct lin_result res;
	unsigned long long ops = 0, errs = 0, redir = 0, waits = 0;
	unsigned p99 = 0, worst = 0, fresh[MIG_CLIENTS] = { 0 }, nfresh = 0;
	unsigned fresh_lost = 0;

	for (int i = 0; i <= MIG_CLIENTS; i++) {
		FILE *f;
		unsigned long long a, b, r, w, le;
		unsigned p, x;

		if (i == MIG_CLIENTS)
			snprintf(path, sizeof(path), "%s/hfinal", dir);
		else
			snprintf(path, sizeof(path), "%s/h%d", dir, i);
		EXPECT_EQ(lin_load(path, &h, NULL), 0);
		snprintf(path, sizeof(path), "%s/s%d", dir, i);
		f = i < MIG_CLIENTS ? fopen(path, "r") : NULL;
		char why[128] = "";

		if (f && fscanf(f, "%llu %llu %llu %llu %u %u %u %llu %127[^\n]",
				&a, &b, &r, &w, &p, &x, &fresh[i], &le,
				why) == 9) {
			if (b)
				printf("#   client %d: %llu failed, the first: "
				       "%s\n", i, b, why);
			ops += a;
			errs += b;
			redir += r;
			waits += w;
			p99 = p > p99 ? p : p99;
			worst = x > worst ? x : worst;
		}
		if (f)
			fclose(f);
	}
	/* every acknowledged fresh key is there */
	for (int i = 0; i < MIG_CLIENTS; i++) {
		for (unsigned n = 0; n < fresh[i]; n++) {
			char k[32], buf[16];
			size_t len = 0;

			snprintf(k, sizeof(k), "new%d-%u", i, n);
			fresh_lost += rkv_get(d, k, strlen(k), buf, sizeof(buf),
					      &len) != 0;
			nfresh++;
		}
	}
	printf("#   %u fresh keys put during the moves, %u of them lost\n",
	       nfresh, fresh_lost);
	EXPECT_EQ(fresh_lost, 0);
	rc = lin_check(h.ops, h.n, NULL, &res);
	printf("#   %llu ops by %d clients through join, drain, join, drain: "
	       "%llu failed, %llu redirected, %llu waited for a move; p99 "
	       "%u us, worst %u us; checker: %s (%zu ops, %zu keys)\n",
	       ops, MIG_CLIENTS, errs, redir, waits, p99, worst,
	       lin_verdict_str(rc), res.checked, res.keys);
	if (rc != LIN_OK)
		printf("#   %s\n", res.explain);
	EXPECT_EQ(rc, LIN_OK);
	EXPECT_EQ(errs, 0);
	EXPECT_TRUE(redir > 0); /* the moves were met, not missed */
	lin_hist_fini(&h);
	rkv_client_destroy(d);
	rkv_client_destroy(c);
	rm_dir(dir);
	env_stop(&v);
}

/* ------------------------------------------------------------ failover */

#define FO_CTRS 4

/* Increments of FO_CTRS counters (rmw +1) until stop exists: per
 * counter, the increments acknowledged and those with an unknown outcome
 * (an error), in sum. */
static void ctr_child(const char *url, const char *stop, const char *sum)
{
	struct rkv_client *c = test_client_cluster(url, g_op_ms, 10000,
						   NULL, NULL);
	unsigned long long ok[FO_CTRS] = { 0 }, unk[FO_CTRS] = { 0 };
	FILE *f;

	if (!c)
		_exit(3);
	for (unsigned n = 0;; n++) {
		char k[32];
		unsigned i = n % FO_CTRS;

		if ((n & 15) == 0 && access(stop, F_OK) == 0)
			break;
		snprintf(k, sizeof(k), "ctr%u", i);
		int rc = rkv_rmw(c, k, strlen(k), test_rmw_add, (void *)1);

		if (rc == 0)
			ok[i]++;
		else if (rc != -ECONNREFUSED) /* that one: nothing sent */
			unk[i]++;
		if (rc)
			usleep(200); /* as mig_child */
	}
	f = fopen(sum, "w");
	for (unsigned i = 0; f && i < FO_CTRS; i++)
		fprintf(f, "%llu %llu\n", ok[i], unk[i]);
	if (f)
		fclose(f);
	rkv_client_destroy(c);
	_exit(0);
}

/* Each counter at least its acknowledged increments and at most those
 * plus the ones with an unknown outcome.  Returns the counters off. */
static unsigned ctrs_off(struct rkv_client *d, const char *sum)
{
	FILE *f = fopen(sum, "r");
	unsigned off = 0;

	for (unsigned i = 0; i < FO_CTRS; i++) {
		unsigned long long ok = 0, unk = 0;
		uint64_t v = 0;
		size_t len = 0;
		char k[32];

		if (!f || fscanf(f, "%llu %llu", &ok, &unk) != 2) {
			off++;
			continue;
		}
		snprintf(k, sizeof(k), "ctr%u", i);
		if (rkv_get(d, k, strlen(k), &v, sizeof(v), &len) || len != 8)
			v = 0;
		printf("#   counter %u: %llu (%llu increments acknowledged, "
		       "%llu unknown)\n", i, (unsigned long long)v, ok, unk);
		off += v < ok || v > ok + unk;
	}
	if (f)
		fclose(f);
	return off;
}

/* The log of repl_setup's client (shown when it loses keys). */
static struct test_logbuf g_clog;

/* nsrv servers named names[] in a fresh cluster of v keeping r copies,
 * every filler key put by the client returned (NULL: a step failed,
 * said). */
/* Values over 256 KiB among the replicated tests' fillers: NBIG keys
 * "big:B" of about 1 MiB that say which they are. */
#define NBIG 4u
#define BIG_LEN(b) ((1u << 20) + (b) * 4099u)

static int big_put(struct rkv_client *c, unsigned b)
{
	unsigned char *v = malloc(BIG_LEN(b));
	char k[32];
	int rc;

	if (!v)
		return -ENOMEM;
	test_big_fill(v, BIG_LEN(b), b);
	snprintf(k, sizeof(k), "big:%u", b);
	rc = rkv_put(c, k, strlen(k), v, BIG_LEN(b));
	free(v);
	return rc;
}

/* 0: c reads big key b whole; else the error (-EIO: another value). */
static int big_check(struct rkv_client *c, unsigned b)
{
	size_t cap = BIG_LEN(NBIG), len = 0;
	unsigned char *v = malloc(cap), *want = malloc(cap);
	char k[32];
	int rc = -ENOMEM;

	if (v && want) {
		snprintf(k, sizeof(k), "big:%u", b);
		rc = rkv_get(c, k, strlen(k), v, cap, &len);
		test_big_fill(want, BIG_LEN(b), b);
		if (!rc && (len != BIG_LEN(b) || memcmp(v, want, len)))
			rc = -EIO;
	}
	free(v);
	free(want);
	return rc;
}

static struct rkv_client *repl_setup(struct env *v,
				     const char *const *names, unsigned nsrv,
				     unsigned r)
{
	char out[8192], args[64];
	struct rkv_client *c;

	g_op_ms = 4000;
	for (unsigned i = 0; i < nsrv; i++) {
		v->nm[i] = names[i];
		if (start_srv(v, i, names[i], NULL)) {
			printf("#   cannot start server %s\n", names[i]);
			return NULL;
		}
	}
	snprintf(args, sizeof(args), "init --replicas %u", r);
	if (admin(v, args, out, sizeof(out))) {
		printf("#   rkv admin %s: %s", args, out);
		return NULL;
	}
	g_clog.len = 0;
	g_clog.text[0] = '\0';
	c = test_client_cluster(v->url, g_op_ms, 10000, &g_clog, NULL);
	for (unsigned i = 0; c && i < MIG_FILL; i++) {
		if (test_kput(c, i, 1)) {
			printf("#   cannot put user:%u\n", i);
			rkv_client_destroy(c);
			return NULL;
		}
	}
	for (unsigned b = 0; c && b < NBIG; b++) {
		int rc = big_put(c, b);

		if (rc) {
			printf("#   cannot put big:%u: %s\n", b, strerror(-rc));
			rkv_client_destroy(c);
			return NULL;
		}
	}
	return c;
}

/* The load of the replicated tests in dir: MIG_CLIENTS clients logging
 * for the checker (stop: the file that ends them) and the counter
 * child (its sums in ctr_sum); then half a second of it. */
static void load_start(const char *url, const char *dir, char *stop,
		       char *ctr_sum, pid_t *kids, pid_t *ctr_pid)
{
	snprintf(stop, 300, "%s/stop", dir);
	spawn_clients(url, dir, stop, kids);
	snprintf(ctr_sum, 300, "%s/ctrs", dir);
	*ctr_pid = fork_child();
	if (*ctr_pid == 0)
		ctr_child(url, stop, ctr_sum);
	usleep(500000);
}

/* Whether server name is registered in v's cluster (-1: etcd failed). */
static int is_registered(struct env *v, const char *name)
{
	struct rkv_etcd *e = NULL;
	struct rkv_etcd_kv kv = { 0 };
	struct rkv_reg_url u;
	char why[300], key[RKV_REG_KEY_MAX + 64];
	int rc;

	if (rkv_reg_parse_url(v->url, &u, why, sizeof(why)) ||
	    rkv_etcd_open(v->etcd.url, 3000, &e, why, sizeof(why)))
		return -1;
	rkv_reg_servers_prefix(&u, key, sizeof(key));
	snprintf(key + strlen(key), sizeof(key) - strlen(key), "%s", name);
	rc = rkv_etcd_get(e, key, &kv, NULL);
	rkv_etcd_kv_fini(&kv);
	rkv_etcd_close(e);
	return rc == 0 ? 1 : rc == -ENOENT ? 0 : -1;
}

/* Up to max filler keys whose primary in c's map is server name. */
static unsigned primary_keys(struct rkv_client *c, const char *name,
			     unsigned *out, unsigned max)
{
	unsigned n = 0;

	for (unsigned i = 0; i < MIG_FILL && n < max; i++) {
		char k[32];
		unsigned rep[3];

		snprintf(k, sizeof(k), "user:%u", i);
		rkv_client_replicas(c, k, strlen(k), rep, 3);
		if (!strcmp(rkv_client_server_name(c, rep[0]), name))
			out[n++] = i;
	}
	return n;
}

/* Wait for server i's registration to lapse (until then a failover is
 * refused), then start `rkv admin failover` of it, quiet.  Its pid. */
static pid_t lapse_then_failover(struct env *v, unsigned i)
{
	char cmd[1024];
	pid_t pid;

	for (int tries = 0; tries < 300 && is_registered(v, v->nm[i]) != 0;
	     tries++)
		usleep(50000);
	snprintf(cmd, sizeof(cmd), "%s/rkv", test_bin_dir());
	pid = fork_child();
	if (pid == 0) {
		int nul = open("/dev/null", O_WRONLY);

		dup2(nul, 1);
		dup2(nul, 2);
		execl(cmd, cmd, "admin", "--cluster", v->url, "failover",
		      v->nm[i], (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* The map's epoch in v's cluster (0: none or etcd failed), on e. */
static uint64_t map_epoch(struct env *v, struct rkv_etcd *e)
{
	struct rkv_etcd_kv kv = { 0 };
	struct rkv_reg_url u;
	char why[300], key[RKV_REG_KEY_MAX];
	unsigned long long ep = 0;

	if (rkv_reg_parse_url(v->url, &u, why, sizeof(why)))
		return 0;
	rkv_reg_map_key(&u, key, sizeof(key));
	if (!rkv_etcd_get(e, key, &kv, NULL))
		(void)sscanf(kv.val, "epoch %llu", &ep);
	rkv_etcd_kv_fini(&kv);
	return ep;
}

/* Server i killed and failed over, the failover itself stopped once it
 * published the map (so in its rebuild), then server j killed and the
 * failover killed: the second failure lands during the first one's
 * re-replication.  The caller fails j over (FO_DEAD), which finishes
 * both rebuilds.  Returns whether the rebuild was pending when j died
 * (-1: the failover failed). */
static int fail_over_in_rebuild(struct env *v, unsigned i, unsigned j)
{
	struct rkv_etcd *e = NULL;
	char why[300];
	uint64_t ep0, end;
	pid_t pid;
	int published = 0, pending = 0;

	if (rkv_etcd_open(v->etcd.url, 3000, &e, why, sizeof(why)))
		return -1;
	ep0 = map_epoch(v, e);
	test_srv_kill(&v->s[i]);
	pid = lapse_then_failover(v, i);
	end = rkv_now_ms() + 30000;
	while (!published && rkv_now_ms() < end) {
		published = map_epoch(v, e) > ep0;
		if (!published)
			usleep(1000);
	}
	kill(pid, SIGSTOP);
	{
		char out[8192];

		admin(v, "status", out, sizeof(out));
		pending = strstr(out, "rebuild") != NULL;
	}
	test_srv_kill(&v->s[j]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	rkv_etcd_close(e);
	printf("#   failover %s stopped in its rebuild (%s) and %s killed\n",
	       v->nm[i], pending ? "pending" : "already done", v->nm[j]);
	return published ? pending : -1;
}

#define RD1_KEYS 6
#define RD1_OP_MS 400

/* A scan's tally: keys listed, and those of rk[] with their first
 * value (written anew since). */
struct stale_scan {
	const unsigned *rk;
	unsigned nrk, listed, stale;
};

static int stale_scan_fn(const void *key, size_t key_len, const void *val,
			 size_t val_len, void *arg)
{
	struct stale_scan *ss = arg;

	ss->listed++;
	for (unsigned j = 0; j < ss->nrk; j++) {
		char k[32], v[64];

		snprintf(k, sizeof(k), "user:%u", ss->rk[j]);
		snprintf(v, sizeof(v), "value-1-of-%u", ss->rk[j]);
		if (key_len == strlen(k) && !memcmp(key, k, key_len) &&
		    val_len == strlen(v) && !memcmp(val, v, val_len))
			ss->stale++;
	}
	return 0;
}

enum fo_mode {
	FO_KILL,  /* kill -9 */
	FO_PAUSE, /* SIGSTOP: cut off, not dead (the caller sends SIGCONT) */
	FO_DEAD,  /* killed already */
};

/* Kill server i (-9) and fail it over once its registration lapsed: a
 * first try killed part-way (after fo_kill_us), then a whole one.
 * Returns the ms from the kill to the map without it, or -1. */
static long fail_over(struct env *v, unsigned i, unsigned fo_kill_us,
		      enum fo_mode mode)
{
	char out[8192], args[64];
	uint64_t t0 = rkv_now_ms(), t1;
	int pause = mode == FO_PAUSE, rc;

	if (pause)
		kill(v->s[i].pid, SIGSTOP);
	else if (mode == FO_KILL)
		test_srv_kill(&v->s[i]);
	snprintf(args, sizeof(args), "failover %s", v->nm[i]);
	pid_t pid = lapse_then_failover(v, i);

	usleep(fo_kill_us);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	t1 = rkv_now_ms();
	rc = admin(v, args, out, sizeof(out));
	printf("#   failover %s (lapsed %ld ms after the %s; the failover "
	       "after one killed at %u ms: %ld ms): %s", v->nm[i],
	       (long)(t1 - t0), pause ? "SIGSTOP" : "kill", fo_kill_us / 1000,
	       (long)(rkv_now_ms() - t1), out);
	/* the first one may have finished before it was killed (the whole
	 * failover of 2,000 copies takes ~0.1 s here): the second then finds
	 * the server out of the map, with nothing left to rebuild */
	if (rc == 2 && strstr(out, "is not in the map")) {
		printf("#   (the first failover had finished)\n");
		rc = 0;
	}
	if (rc != 0)
		return -1;
	return (long)(rkv_now_ms() - t0);
}

/* Every filler key and big key on exactly the r servers the map places
 * it on (read from each server alone), with its value. */
static unsigned misplaced(struct env *v, struct rkv_client *c, unsigned r)
{
	struct rkv_client *one[NSRV + 2] = { 0 };
	unsigned bad = 0;

	for (unsigned i = 0; i < NSRV + 2; i++) {
		int in_map = 0;

		/* c is fresh: its servers are the map's (a replaced server
		 * that was paused, not killed, is up but out of it) */
		for (unsigned j = 0; v->nm[i] && j < rkv_client_nservers(c); j++)
			in_map |= !strcmp(rkv_client_server_name(c, j), v->nm[i]);
		if (v->s[i].pid > 0 && in_map)
			one[i] = test_client_at(v->s[i].addr, 3000, 0);
	}
	for (unsigned k = 0; k < MIG_FILL + NBIG; k++) {
		char key[32];
		unsigned rep[3], n, on = 0, want = 0, b = k - MIG_FILL;
		size_t kl = k < MIG_FILL ?
			(size_t)snprintf(key, sizeof(key), "user:%u", k) :
			(size_t)snprintf(key, sizeof(key), "big:%u", b);

		n = rkv_client_replicas(c, key, kl, rep, 3);
		for (unsigned i = 0; i < NSRV + 2; i++) {
			int in = 0;

			if (!one[i])
				continue;
			for (unsigned j = 0; j < n; j++)
				in |= !strcmp(rkv_client_server_name(c, rep[j]),
					      v->nm[i]);
			want += in;
			if ((k < MIG_FILL ? test_kcheck(one[i], k, 1)
					  : big_check(one[i], b)) == 0)
				on += in ? 1 : 100;
		}
		bad += n != r || want != r || on != r;
	}
	for (unsigned i = 0; i < NSRV + 2; i++)
		if (one[i])
			rkv_client_destroy(one[i]);
	return bad;
}

#define BULK_KEYS 20000u

static int bulk_put(struct rkv_client *c, unsigned i)
{
	char k[32], val[48];
	int kl = snprintf(k, sizeof(k), "bulk:%u", i);
	int vl = snprintf(val, sizeof(val), "bulk value %u", i);

	return rkv_put(c, k, (size_t)kl, val, (size_t)vl);
}

static int bulk_check(struct rkv_client *c, unsigned i)
{
	char k[32], want[48], got[64];
	int kl = snprintf(k, sizeof(k), "bulk:%u", i);
	int wl = snprintf(want, sizeof(want), "bulk value %u", i);
	size_t gl = 0;
	int rc = rkv_get(c, k, (size_t)kl, got, sizeof(got), &gl);

	if (rc)
		return rc;
	return gl == (size_t)wl && !memcmp(got, want, gl) ? 0 : -EIO;
}

/* The load stopped (its clients and the counter child must end well),
 * every hot key read once more by c (the final reads), and every filler
 * key read back by c and by a fresh client, which is returned (NULL: it
 * could not start); *lost: filler keys either missed (up to 20). */
static struct rkv_client *end_load(const char *url, const char *stop,
				   const pid_t *kids, pid_t ctr_pid,
				   struct rkv_client *c, const char *dir,
				   unsigned *lost)
{
	struct rkv_client *d;
	int st = 0;

	stop_clients(stop, kids);
	waitpid(ctr_pid, &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	final_reads(c, dir);
	d = test_client_cluster(url, g_op_ms, 10000, NULL, NULL);
	for (unsigned i = 0; d && i < MIG_FILL && *lost < 20; i++) {
		int e1 = test_kcheck(d, i, 1), e2 = test_kcheck(c, i, 1);

		if ((e1 || e2) && !*lost)
			printf("#   user:%u: new client %s, old client %s\n", i,
			       strerror(-e1), strerror(-e2));
		*lost += e1 || e2;
	}
	if (*lost && g_clog.len)
		printf("#   the old client's log:\n%s\n", g_clog.text);
	return d;
}

/* The load ended and checked (end_load): no filler key lost, every one
 * on exactly the r servers d's map places it on, the counters right.
 * The fresh client d, for the caller's history check (NULL: none). */
static struct rkv_client *end_checked(struct env *v, const char *stop,
				      const pid_t *kids, pid_t ctr_pid,
				      struct rkv_client *c, const char *dir,
				      const char *ctr_sum, unsigned r)
{
	unsigned lost = 0, bad;
	struct rkv_client *d = end_load(v->url, stop, kids, ctr_pid, c, dir,
					&lost);

	EXPECT_TRUE(d != NULL);
	if (!d)
		return NULL;
	bad = misplaced(v, d, r);
	for (unsigned b = 0; b < NBIG; b++)
		lost += big_check(d, b) != 0;
	printf("#   %u filler keys lost (%u of them of about 1 MiB), %u not on "
	       "exactly their %u servers\n", lost, NBIG, bad, r);
	EXPECT_EQ(lost, 0);
	EXPECT_EQ(bad, 0);
	EXPECT_EQ(ctrs_off(d, ctr_sum), 0);
	return d;
}

/* The load's histories in dir (MIG_CLIENTS clients and the final
 * reads), checked: linearizable, every acknowledged fresh key read back
 * by d, and no client failing in the run's last second (t_stop: when it
 * was stopped; the clients had switched maps by then). */
static void check_histories(const char *dir, struct rkv_client *d,
			    unsigned long long t_stop, const char *through)
{
	struct lin_hist h = { 0 };
	struct lin_result res;
	unsigned long long ops = 0, errs = 0;
	unsigned fresh_lost = 0, nfresh = 0;
	char path[300];
	int rc;

	for (int i = 0; i <= MIG_CLIENTS; i++) {
		unsigned long long a = 0, b = 0, x1, x2, le = 0;
		unsigned p, x, fr = 0;
		char why[128] = "";
		FILE *f;

		if (i == MIG_CLIENTS)
			snprintf(path, sizeof(path), "%s/hfinal", dir);
		else
			snprintf(path, sizeof(path), "%s/h%d", dir, i);
		EXPECT_EQ(lin_load(path, &h, NULL), 0);
		if (i == MIG_CLIENTS)
			break;
		snprintf(path, sizeof(path), "%s/s%d", dir, i);
		f = fopen(path, "r");
		if (f && fscanf(f, "%llu %llu %llu %llu %u %u %u %llu %127[^\n]",
				&a, &b, &x1, &x2, &p, &x, &fr, &le,
				why) == 9) {
			ops += a;
			errs += b;
			if (le + 1000 > t_stop)
				printf("#   client %d failed %llu ms before the "
				       "end\n", i, t_stop - le);
			EXPECT_TRUE(le + 1000 <= t_stop);
			if (b)
				printf("#   client %d: %llu failed, the first: "
				       "%s\n", i, b, why);
		}
		if (f)
			fclose(f);
		for (unsigned n = 0; n < fr; n++) {
			char k[32], buf[16];
			size_t len = 0;

			snprintf(k, sizeof(k), "new%d-%u", i, n);
			fresh_lost += rkv_get(d, k, strlen(k), buf, sizeof(buf),
					      &len) != 0;
			nfresh++;
		}
	}
	printf("#   %u fresh keys acknowledged, %u of them lost\n", nfresh,
	       fresh_lost);
	EXPECT_EQ(fresh_lost, 0);
	rc = lin_check(h.ops, h.n, NULL, &res);
	printf("#   %llu ops by %d clients through %s: %llu failed; checker: "
	       "%s (%zu ops, %zu keys)\n", ops, MIG_CLIENTS, through, errs,
	       lin_verdict_str(rc), res.checked, res.keys);
	if (rc != LIN_OK)
		printf("#   %s\n", res.explain);
	EXPECT_EQ(rc, LIN_OK);
	EXPECT_TRUE(res.checked > 100);
	lin_hist_fini(&h);
}

/* nsrv servers keeping r copies; load from MIG_CLIENTS processes (the
 * hot keys logged for the checker, fresh keys put and counted); the
 * servers of kill[0..nkill) killed and failed over one after the other.
 * Then: the history linearizable, every filler and every acknowledged
 * fresh key read back, each filler key on its r servers. */
static void failover_live(unsigned nsrv, unsigned r, const unsigned *kill_i,
			  unsigned nkill, int pause, int in_rebuild)
{
	static const char *const names[] = { "alpha", "bravo", "charlie",
					     "delta", "echo" };
	char dir[] = "/tmp/rkv-itest-fo-XXXXXX", stop[300];
	char out[8192];
	struct env v;
	pid_t kids[MIG_CLIENTS];
	struct rkv_client *c;
	int rc = env_etcd(&v);

	if (rc == 77)
		return;
	ASSERT_EQ(rc, 0);
	ASSERT_TRUE(mkdtemp(dir) != NULL);
	c = repl_setup(&v, names, nsrv, r);
	ASSERT_TRUE(c != NULL);
	/* a rebuild long enough to land a failure in */
	for (unsigned i = 0; in_rebuild && i < BULK_KEYS; i++)
		ASSERT_EQ(bulk_put(c, i), 0);
	/* a client of the first map from a file (it cannot read etcd):
	 * after the failover it must not write anywhere */
	struct rkv_client *old = NULL;
	char map1[300];

	if (pause) {
		FILE *f;

		snprintf(map1, sizeof(map1), "%s/map1", dir);
		f = fopen(map1, "w");
		ASSERT_TRUE(f != NULL);
		fprintf(f, "epoch 1\nreplicas %u\n", r);
		for (unsigned i = 0; i < nsrv; i++)
			fprintf(f, "%s %s\n", names[i], v.s[i].addr);
		fclose(f);
		old = test_client_cluster(map1, 1000, 2000, NULL, NULL);
		ASSERT_TRUE(old != NULL);
	}
	/* a reader of the first map (from a file: it cannot learn of the
	 * failover) that read bravo's keys before bravo was paused */
	struct rkv_client *rd1 = NULL;
	unsigned rk[RD1_KEYS], nrk = 0;

	if (pause) {
		/* it reaches bravo only (the others' addresses lead
		 * nowhere): no fenced survivor can tell it of the new map,
		 * as for a client cut off from them */
		char map1r[300];
		FILE *f;

		snprintf(map1r, sizeof(map1r), "%s/map1r", dir);
		f = fopen(map1r, "w");
		ASSERT_TRUE(f != NULL);
		fprintf(f, "epoch 1\nreplicas %u\n", r);
		for (unsigned i = 0; i < nsrv; i++) {
			const char *a = v.s[i].addr, *colon = strrchr(a, ':');

			if (!strcmp(names[i], "bravo"))
				fprintf(f, "%s %s\n", names[i], a);
			else if (!strncmp(a, "shm:", 4) || !colon)
				fprintf(f, "%s %s-gone\n", names[i], a);
			else
				fprintf(f, "%s %.*s:%u\n", names[i],
					(int)(colon - a), a, i + 1);
		}
		fclose(f);
		rd1 = test_client_cluster(map1r, RD1_OP_MS, 2000, NULL, NULL);
		ASSERT_TRUE(rd1 != NULL);
		nrk = primary_keys(rd1, "bravo", rk, RD1_KEYS);
		for (unsigned j = 0; j < nrk; j++)
			EXPECT_EQ(test_kcheck(rd1, rk[j], 1), 0);
		EXPECT_EQ(nrk, (unsigned)RD1_KEYS);
	}
	char ctr_sum[300];
	pid_t ctr_pid;

	load_start(v.url, dir, stop, ctr_sum, kids, &ctr_pid);
	for (unsigned k = 0; k < nkill; k++) {
		long ms;

		if (in_rebuild && k == 0) {
			/* the second failure during the first rebuild */
			EXPECT_EQ(fail_over_in_rebuild(&v, kill_i[0],
						       kill_i[1]), 1);
			continue;
		}
		ms = fail_over(&v, kill_i[k], 30000u + 50000u * k,
			       pause ? FO_PAUSE
			       : in_rebuild ? FO_DEAD : FO_KILL);
		EXPECT_TRUE(ms > 0);
		if (pause) {
			/* bravo, paused and replaced, still serves one-sided
			 * READs (verbs: its NIC; shm: its memory): its lease
			 * word has lapsed, so the old reader answers none of
			 * its keys written anew since */
			struct rkv_client *w = test_client_cluster(
				v.url, g_op_ms, 10000, NULL, NULL);
			unsigned stale = 0, fresh = 0, failed = 0;
			int first_err = 0;
			struct rkv_client_stats st;

			ASSERT_TRUE(w != NULL);
			for (unsigned j = 0; j < nrk; j++)
				EXPECT_EQ(test_kput(w, rk[j], 3), 0);
			for (unsigned j = 0; j < nrk; j++) {
				int e = test_kcheck(rd1, rk[j], 1);

				if (e == 0)
					stale++;
				else if (test_kcheck(rd1, rk[j], 3) == 0)
					fresh++;
				else
					failed++;
				if (e && !first_err)
					first_err = e;
			}
			rkv_client_stats(rd1, &st);
			printf("#   a reader of map epoch 1 while bravo is "
			       "paused and replaced: %u of %u keys stale, %u "
			       "read anew, %u failed (%llu lease waits; "
			       "the first error: %s)\n",
			       stale, nrk, fresh, failed,
			       (unsigned long long)st.lease_waits,
			       strerror(-first_err));
			EXPECT_EQ(stale, 0);
			/* nor does its scan list them (bravo's lease word) */
			struct stale_scan ss = { .rk = rk, .nrk = nrk };
			struct rkv_scan_stats sst;
			int src = rkv_scan(rd1, stale_scan_fn, &ss, &sst);

			printf("#   its scan: %s, %u keys listed, %u of them "
			       "stale\n", strerror(-src), ss.listed, ss.stale);
			EXPECT_TRUE(src != 0);
			EXPECT_EQ(ss.stale, 0);
			for (unsigned j = 0; j < nrk; j++)
				EXPECT_EQ(test_kput(w, rk[j], 1), 0);
			rkv_client_destroy(w);
			rkv_client_destroy(rd1);
			kill(v.s[kill_i[k]].pid, SIGCONT); /* wakes replaced */
		}
		usleep(500000); /* clients go on with the new map */
	}
	usleep(1500000);
	unsigned long long t_stop = rkv_now_ms();
	/* the final value of every hot key, by the client of the old map
	 * (idle through the failovers) */
	struct rkv_client *d = end_checked(&v, stop, kids, ctr_pid, c, dir,
					   ctr_sum, r);

	ASSERT_TRUE(d != NULL);
	if (in_rebuild) {
		unsigned blost = 0;

		for (unsigned i = 0; i < BULK_KEYS; i++)
			blost += bulk_check(d, i) != 0;
		rc = admin(&v, "status", out, sizeof(out));
		printf("#   %u of %u bulk keys lost; status: %s\n", blost,
		       BULK_KEYS, strstr(out, "rebuild") ? "a rebuild pending"
							 : "no rebuild pending");
		EXPECT_EQ(blost, 0);
		EXPECT_TRUE(strstr(out, "rebuild") == NULL);
	}
	if (old) {
		/* the woken server fences itself once it sees the map
		 * without it (its registration lapsed) */
		unsigned forked = 0, refused = 0;

		for (int i = 0; i < 100 && is_registered(&v, "bravo") != 1; i++)
			usleep(100000);
		usleep(300000);
		for (unsigned i = 0; i < 20; i++) {
			char k[32];

			snprintf(k, sizeof(k), "user:%u", i);
			refused += rkv_put(old, k, strlen(k), "forked", 6) != 0;
			forked += test_kcheck(d, i, 1) != 0;
		}
		printf("#   a client of map epoch 1 after bravo woke: %u of 20 "
		       "puts refused, %u keys changed\n", refused, forked);
		EXPECT_EQ(refused, 20);
		EXPECT_EQ(forked, 0);
		/* bravo's keys written anew; a fresh client of map epoch 1
		 * must not read bravo's old copies (bravo refuses it) */
		unsigned kb[20], nb = primary_keys(old, "bravo", kb, 20);
		unsigned stale = 0, served = 0;

		for (unsigned j = 0; j < nb; j++)
			EXPECT_EQ(test_kput(d, kb[j], 2), 0);
		struct rkv_client *old2 =
			test_client_cluster(map1, 1000, 2000, NULL, NULL);

		for (unsigned j = 0; old2 && j < nb; j++) {
			int krc = test_kcheck(old2, kb[j], 1);

			stale += krc == 0;
			served += krc == 0 || test_kcheck(old2, kb[j], 2) == 0;
		}
		printf("#   a new client of map epoch 1: %s; %u of %u of "
		       "bravo's rewritten keys read, %u of them stale\n",
		       old2 ? "started" : "refused at start", served, nb,
		       stale);
		EXPECT_TRUE(nb > 0);
		EXPECT_EQ(stale, 0);
		if (old2)
			rkv_client_destroy(old2);
		rkv_client_destroy(old);
	}
	{
		char label[64];

		snprintf(label, sizeof(label), "%u failover%s", nkill,
			 nkill == 1 ? "" : "s");
		check_histories(dir, d, t_stop, label);
	}
	rc = admin(&v, "status", out, sizeof(out));
	EXPECT_TRUE(strstr(out, "copies: all 4096 partitions") != NULL);
	rkv_client_destroy(d);
	rkv_client_destroy(c);
	rm_dir(dir);
	env_stop(&v);
}

/* On verbs in the Soft-RoCE guest (emulated, no KVM) each of these takes
 * 4-6 minutes: make check-rdma runs t_failover_r2 there, and these two
 * with RKV_TEST_LONG=1 (both passed in the guest when they were built). */
static int long_on_verbs(void)
{
	if (!g_verbs || getenv("RKV_TEST_LONG"))
		return 0;
	rkv_test_skip("4-6 minutes in the Soft-RoCE guest: tcp covers it in "
		      "make test; RKV_TEST_LONG=1 runs it on verbs");
	return 1;
}

static void t_failover_r2(void)
{
	static const unsigned kill_i[] = { 1 };

	failover_live(4, 2, kill_i, 1, 0, 0);
}

/* bravo paused (SIGSTOP) past its lease, failed over, then woken: its
 * clients (of the old map) must neither read nor write there. */
static void t_failover_paused(void)
{
	static const unsigned kill_i[] = { 1 };

	if (long_on_verbs())
		return;

	failover_live(4, 2, kill_i, 1, 1, 0);
}

static void t_failover_r3(void)
{
	static const unsigned kill_i[] = { 0, 2 };

	if (long_on_verbs())
		return;

	failover_live(5, 3, kill_i, 2, 0, 0);
}

/* r = 3: alpha killed and failed over; the failover stopped in its
 * rebuild, charlie killed then, the failover killed; charlie failed over,
 * which finishes both rebuilds.  As failover_live, and 20,000 more keys
 * (the rebuild's length) all read back, and no rebuild left pending. */
static void t_failover_in_rebuild(void)
{
	static const unsigned kill_i[] = { 0, 2 };

	if (long_on_verbs())
		return;
	g_capacity = "100000"; /* every key on each of the last three */
	failover_live(5, 3, kill_i, 2, 0, 1);
	g_capacity = "30000";
}

/* r = 2: a key's primary killed and failed over, the failover stopped
 * once it published (the key, the longest, is the rebuild's last: not
 * written again yet), so the new primary's copy is the one its backup
 * had.  A's rmw locks it there and B steals the lock: B's sequence must
 * be above A's, else A's install, after B's, overwrites B's value on the
 * backup while B's release succeeds on the primary.  The reconcile gives
 * the new primary's word the primary's rule; a backup's word that
 * counted its own installs gave A s + 256 and B s + 1. */
static void t_failover_steal(void)
{
	static const char *const names[] = { "alpha", "bravo", "charlie" };
	struct test_steal arg = {
		.key = "steal:a-key-longer-than-any-other-so-rebuilt-last" };
	struct rkv_client *c, *a, *b;
	struct rkv_etcd *e = NULL;
	unsigned rep[3], bad = 0, n;
	uint64_t ep0, end;
	char why[300];
	struct env v;
	int rc = env_etcd(&v), dead = -1, published = 0;
	pid_t pid;

	if (rc == 77)
		return;
	ASSERT_EQ(rc, 0);
	c = repl_setup(&v, names, 3, 2);
	ASSERT_TRUE(c != NULL);
	for (unsigned i = 0; i < 3; i++)
		EXPECT_EQ(rkv_put(c, arg.key, strlen(arg.key), "0", 1), 0);
	ASSERT_EQ(rkv_client_replicas(c, arg.key, strlen(arg.key), rep, 3), 2);
	for (unsigned i = 0; i < 3; i++)
		if (!strcmp(names[i], rkv_client_server_name(c, rep[0])))
			dead = (int)i;
	ASSERT_TRUE(dead >= 0);
	rkv_client_destroy(c);
	ASSERT_EQ(rkv_etcd_open(v.etcd.url, 3000, &e, why, sizeof(why)), 0);
	ep0 = map_epoch(&v, e);
	test_srv_kill(&v.s[dead]);
	pid = lapse_then_failover(&v, (unsigned)dead);
	end = rkv_now_ms() + 30000;
	while (!published && rkv_now_ms() < end) {
		published = map_epoch(&v, e) > ep0;
		if (!published)
			usleep(1000);
	}
	kill(pid, SIGSTOP);
	rkv_etcd_close(e);
	EXPECT_TRUE(published);
	a = test_client_cluster(v.url, g_op_ms, 10000, NULL, NULL);
	b = test_client_cluster(v.url, g_op_ms, 10000, NULL, NULL);
	ASSERT_TRUE(a && b);
	arg.b = b;
	EXPECT_EQ(rkv_rmw(a, arg.key, strlen(arg.key), test_rmw_steal, &arg),
		  -ECANCELED);
	EXPECT_EQ(arg.b_rc, 0);
	n = rkv_client_replicas(a, arg.key, strlen(arg.key), rep, 3);
	EXPECT_EQ(n, 2);
	for (unsigned k = 0; k < n; k++) {
		const char *nm = rkv_client_server_name(a, rep[k]);
		struct rkv_client *d = NULL;
		char val[8] = "";
		size_t len = 0;

		for (unsigned i = 0; i < 3; i++)
			if (!strcmp(names[i], nm))
				d = test_client_at(v.s[i].addr, 3000, 0);
		EXPECT_TRUE(d != NULL);
		rc = d ? rkv_get(d, arg.key, strlen(arg.key), val, sizeof(val),
				 &len)
		       : -ENOTCONN;
		printf("#   %s %s holds %s%.*s%s\n", k ? "backup" : "primary",
		       nm, rc ? strerror(-rc) : "\"", rc ? 0 : (int)len, val,
		       rc ? "" : "\"");
		bad += rc || len != 1 || val[0] != 'b';
		if (d)
			rkv_client_destroy(d);
	}
	EXPECT_EQ(bad, 0);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	rkv_client_destroy(a);
	rkv_client_destroy(b);
	env_stop(&v);
}

/* Start `rkv admin CMD1 ARG` (quiet) and kill -9 it after us, or (us 0)
 * once the map's epoch passed the one it had (the first half of a join
 * or drain published: it is in its rebuild). */
static void admin_killed(struct env *v, const char *cmd1, const char *arg,
			 unsigned us)
{
	struct rkv_etcd *e = NULL;
	char bin[1024], why[300];
	uint64_t ep0 = 0, end = rkv_now_ms() + 30000;
	pid_t pid;

	if (!us && rkv_etcd_open(v->etcd.url, 3000, &e, why, sizeof(why)))
		return;
	if (e)
		ep0 = map_epoch(v, e);
	snprintf(bin, sizeof(bin), "%s/rkv", test_bin_dir());
	pid = fork_child();
	if (pid == 0) {
		int nul = open("/dev/null", O_WRONLY);

		dup2(nul, 1);
		dup2(nul, 2);
		execl(bin, bin, "admin", "--cluster", v->url, cmd1, arg,
		      (char *)NULL);
		_exit(127);
	}
	if (us)
		usleep(us);
	while (e && map_epoch(v, e) <= ep0 && rkv_now_ms() < end)
		usleep(500);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	if (e)
		rkv_etcd_close(e);
}

/* r copies on 3 servers under load from several processes (hot keys
 * logged for the checker, fresh keys, counters): delta joins (a first
 * `join` kill -9'd once it published its first map, in its rebuild, then
 * one that resumes it), then alpha is drained (a first `drain` killed at
 * kill_ms, then one that resumes it, or finds it done).  Then: the history linearizable, every filler,
 * fresh key and counter right, every filler key on exactly the r servers
 * the final map places it on and no other (the copies of servers that
 * left a set emptied), the status all copies up. */
static void repl_move_live(unsigned r, unsigned kill_ms)
{
	static const char *const names[] = { "alpha", "bravo", "charlie",
					     "delta" };
	char dir[] = "/tmp/rkv-itest-fo-XXXXXX", stop[300];
	char out[8192], ctr_sum[300];
	struct env v;
	pid_t kids[MIG_CLIENTS], ctr_pid;
	struct rkv_client *c;
	int rc = env_etcd(&v);

	if (rc == 77)
		return;
	ASSERT_EQ(rc, 0);
	ASSERT_TRUE(mkdtemp(dir) != NULL);
	c = repl_setup(&v, names, 3, r);
	ASSERT_TRUE(c != NULL);
	v.nm[3] = names[3];
	ASSERT_EQ(start_srv(&v, 3, names[3], NULL), 0);
	load_start(v.url, dir, stop, ctr_sum, kids, &ctr_pid);
	/* join delta: one killed part-way, then one to the end */
	uint64_t t0 = rkv_now_ms();

	admin_killed(&v, "join", "delta", 0);
	rc = admin(&v, "status", out, sizeof(out));
	printf("#   join delta killed once its first map was out; status "
	       "says: %s\n", strstr(out, "joining") ? "joining"
						: "not joining");
	EXPECT_TRUE(strstr(out, "joining") != NULL);
	rc = admin(&v, "join delta", out, sizeof(out));
	printf("#   join delta, resumed (%.0f ms in all):\n%s",
	       (double)(rkv_now_ms() - t0), out);
	EXPECT_EQ(rc, 0);
	usleep(500000);
	t0 = rkv_now_ms();
	admin_killed(&v, "drain", "alpha", kill_ms * 1000u);
	rc = admin(&v, "drain alpha", out, sizeof(out));
	printf("#   drain alpha (one killed at %u ms first; %.0f ms in "
	       "all):\n%s", kill_ms, (double)(rkv_now_ms() - t0), out);
	if (rc == 2 && strstr(out, "'alpha' is not in the map")) {
		printf("#   (the first drain had finished)\n");
		rc = 0;
	}
	EXPECT_EQ(rc, 0);
	usleep(1500000);
	unsigned long long t_stop = rkv_now_ms();

	struct rkv_client *d = end_checked(&v, stop, kids, ctr_pid, c, dir,
					   ctr_sum, r);

	ASSERT_TRUE(d != NULL);
	EXPECT_EQ(rkv_client_nservers(d), 3);
	{
		char label[64];

		snprintf(label, sizeof(label), "a join and a drain at r=%u", r);
		check_histories(dir, d, t_stop, label);
	}
	rc = admin(&v, "status", out, sizeof(out));
	EXPECT_TRUE(strstr(out, "copies: all 4096 partitions") != NULL);
	EXPECT_TRUE(strstr(out, "joining") == NULL &&
		    strstr(out, "leaving") == NULL);
	rkv_client_destroy(d);
	rkv_client_destroy(c);
	rm_dir(dir);
	env_stop(&v);
}

static void t_join_drain_r2(void)
{
	repl_move_live(2, 40);
}

static void t_join_drain_r3(void)
{
	if (long_on_verbs())
		return;
	repl_move_live(3, 80);
}

/* A join whose copies cannot be made: delta holds 8 keys, so the
 * rebuild stops (the map stays with delta joining, and writes of the
 * partitions where it is the extra backup fail, as for any full
 * backup); `drain delta` undoes the join: every key reads back, every
 * put works again, and nothing is left to rebuild. */
static void t_join_undo(void)
{
	char out[8192];
	struct env v;
	struct rkv_client *c;
	unsigned bad = 0;
	int rc = env_etcd(&v);

	if (rc == 77)
		return;
	ASSERT_EQ(rc, 0);
	for (unsigned i = 0; i < NSRV; i++)
		ASSERT_EQ(start_srv(&v, i, g_names[i], NULL), 0);
	g_capacity = "8";
	g_index_max = "0"; /* a fixed index of 2 buckets */
	rc = start_srv(&v, NSRV, "delta", NULL);
	g_capacity = "30000";
	g_index_max = "4M";
	ASSERT_EQ(rc, 0);
	ASSERT_EQ(admin(&v, "init --replicas 2 alpha bravo charlie", out,
			sizeof(out)), 0);
	c = test_client_cluster(v.url, 3000, 10000, NULL, NULL);
	ASSERT_TRUE(c != NULL);
	for (unsigned i = 0; i < NKEYS; i++)
		ASSERT_EQ(test_kput(c, i, 1), 0);
	rc = admin(&v, "join delta", out, sizeof(out));
	printf("#   join of a server of 8 keys: exit %d: %s", rc,
	       strstr(out, "rkv admin") ? strstr(out, "rkv admin") : out);
	EXPECT_EQ(rc, 2);
	EXPECT_TRUE(strstr(out, "rebuild stopped") != NULL);
	rc = admin(&v, "status", out, sizeof(out));
	EXPECT_TRUE(strstr(out, "drain undoes it") != NULL);
	rc = admin(&v, "drain bravo", out, sizeof(out));
	EXPECT_EQ(rc, 2);
	EXPECT_TRUE(strstr(out, "or undo it (rkv admin drain delta)") != NULL);
	rc = admin(&v, "drain delta", out, sizeof(out));
	printf("#   drain delta: exit %d: %s", rc, out);
	EXPECT_EQ(rc, 0);
	EXPECT_TRUE(strstr(out, "undoing the join") != NULL);
	for (unsigned i = 0; i < NKEYS; i++) {
		bad += test_kcheck(c, i, 1) != 0;
		bad += test_kput(c, i, 2) != 0;
		bad += test_kcheck(c, i, 2) != 0;
	}
	printf("#   after the undo: %u of %u keys wrong or not written\n", bad,
	       NKEYS);
	EXPECT_EQ(bad, 0);
	rc = admin(&v, "status", out, sizeof(out));
	EXPECT_TRUE(strstr(out, "copies: all 4096 partitions") != NULL);
	EXPECT_TRUE(strstr(out, "rebuild:") == NULL);
	EXPECT_TRUE(strstr(out, "joining") == NULL);
	rkv_client_destroy(c);
	env_stop(&v);
}

/* An insert whose first round read its partition as owned, and whose
 * tentative CAS lands after the whole partition moved away: it must see
 * the move in that CAS's round and follow it, not commit on the old
 * server where nobody would read it again.  The put is held between its
 * rounds by not polling (on tcp the first round is executed by the
 * server's transport thread meanwhile; on shm it may finish at once, and
 * then the test only checks the move).  Fails with the insert's fence
 * taken out (decide() in client/op_ins.c). */
static void t_insert_meets_move(void)
{
	struct env v;
	struct rkv_map *from = rkv_malloc(sizeof(*from));
	struct rkv_map *to = rkv_malloc(sizeof(*to));
	char out[8192], why[300], key[32], nkey[RKV_REG_KEY_MAX];
	struct rkv_reg_url u;
	struct rkv_etcd *e = NULL;
	struct rkv_client *c, *d;
	int rc = env_cluster(&v);

	if (rc == 77) {
		rkv_free(from);
		rkv_free(to);
		return;
	}
	ASSERT_EQ(rc, 0);
	ASSERT_TRUE(from && to);
	ASSERT_EQ(start_srv(&v, NSRV, "delta", NULL), 0);
	c = test_client_cluster(v.url, MIG_OP_MS, 10000, NULL, NULL);
	ASSERT_TRUE(c != NULL);
	ASSERT_EQ(admin(&v, "map", out, sizeof(out)), 0);
	ASSERT_EQ(rkv_map_parse(out, from, why, sizeof(why)), 0);
	*to = *from;
	ASSERT_EQ(rkv_map_add(to, "delta", v.s[NSRV].addr, why, sizeof(why)),
		  0);
	to->epoch = 2;
	rkv_map_place(to);
	/* a fresh key of a partition that moves to delta */
	for (unsigned i = 0;; i++) {
		struct rkv_key_hash kh;

		snprintf(key, sizeof(key), "fence%u", i);
		rkv_key_hash(key, strlen(key), &kh);
		if (!strcmp(to->srv[to->owner[rkv_map_part(kh.route)]].name,
			    "delta"))
			break;
	}
	/* a chunk of the key's old server in hand first, so the put's first
	 * round is posted at once (not after a CHUNK_ALLOC) */
	{
		struct rkv_key_hash kh;
		unsigned owner;

		rkv_key_hash(key, strlen(key), &kh);
		owner = from->owner[rkv_map_part(kh.route)];
		for (unsigned i = 0;; i++) {
			char w[32];

			snprintf(w, sizeof(w), "warm%u", i);
			rkv_key_hash(w, strlen(w), &kh);
			if (from->owner[rkv_map_part(kh.route)] != owner)
				continue;
			ASSERT_EQ(rkv_put(c, w, strlen(w), "w", 1), 0);
			break;
		}
	}
	/* the map it moves to, where clients that meet the move read it */
	ASSERT_EQ(rkv_reg_parse_url(v.url, &u, why, sizeof(why)), 0);
	rkv_reg_next_key(&u, nkey, sizeof(nkey));
	ASSERT_EQ(rkv_etcd_open(v.etcd.url, 3000, &e, why, sizeof(why)), 0);
	int len = rkv_map_format(to, out, sizeof(out));

	ASSERT_TRUE(len > 0);
	ASSERT_EQ(rkv_etcd_put(e, nkey, out, (size_t)len, 0), 0);
	struct rkv_op op = { .type = RKV_OP_PUT, .key = key,
			     .key_len = strlen(key), .val = "fenced",
			     .val_len = 6 };
	struct rkv_op *done[1];
	int n;

	ASSERT_EQ(rkv_submit(c, &op), 0);
	n = rkv_poll(c, done, 1); /* its first round: the buckets, owned */
	usleep(100000);
	struct rkv_client_opts co;
	struct rkv_mig_opts mo = { .base = &co, .from = from, .to = to };
	struct rkv_mig_progress pr;

	rkv_client_opts_init(&co);
	co.timeout_ms = MIG_OP_MS;
	co.connect_timeout_ms = 3000;
	rc = rkv_mig_run(&mo, &pr, why, sizeof(why));
	if (rc)
		printf("#   migration: %s\n", why);
	ASSERT_EQ(rc, 0);
	printf("#   the put %s the move (%llu keys moved)\n",
	       n ? "finished before" : "waits between its rounds through",
	       (unsigned long long)pr.keys_moved);
	for (uint64_t end = rkv_now_ms() + 10000; n == 0 && rkv_now_ms() < end;) {
		rkv_wait(c, 1000);
		n = rkv_poll(c, done, 1);
	}
	EXPECT_EQ(n, 1);
	EXPECT_EQ(op.status, 0);
	/* a new client of the published map (epoch 1) finds it */
	d = test_client_cluster(v.url, MIG_OP_MS, 10000, NULL, NULL);
	ASSERT_TRUE(d != NULL);
	char buf[16] = "";
	size_t got = 0;

	EXPECT_EQ(rkv_get(d, key, strlen(key), buf, sizeof(buf) - 1, &got), 0);
	EXPECT_TRUE(got == 6 && !memcmp(buf, "fenced", 6));
	rkv_client_destroy(d);
	rkv_client_destroy(c);
	rkv_etcd_close(e);
	rkv_free(from);
	rkv_free(to);
	env_stop(&v);
}

/* rkv admin killed in the middle of a join: status says a migration is
 * under way, the next join resumes it, and no key is lost. */
static void t_join_killed(void)
{
	char cmd[1024], out[8192];
	struct env v;
	struct rkv_client *c;
	unsigned lost = 0;
	int rc = env_cluster(&v);

	if (rc == 77)
		return;
	ASSERT_EQ(rc, 0);
	ASSERT_EQ(start_srv(&v, NSRV, "delta", NULL), 0);
	c = test_client_cluster(v.url, MIG_OP_MS, 10000, NULL, NULL);
	ASSERT_TRUE(c != NULL);
	for (unsigned i = 0; i < MIG_FILL; i++)
		ASSERT_EQ(test_kput(c, i, 1), 0);
	snprintf(cmd, sizeof(cmd), "%s/rkv", test_bin_dir());
	pid_t pid = fork_child();

	if (pid == 0) {
		int nul = open("/dev/null", O_WRONLY);

		dup2(nul, 1);
		dup2(nul, 2);
		execl(cmd, cmd, "admin", "--cluster", v.url, "join", "delta",
		      (char *)NULL);
		_exit(127);
	}
	/* kill it once it has started moving (its next map is in etcd) */
	struct rkv_etcd *e = NULL;
	struct rkv_reg_url u;
	char why[300], nkey[RKV_REG_KEY_MAX];

	ASSERT_EQ(rkv_reg_parse_url(v.url, &u, why, sizeof(why)), 0);
	rkv_reg_next_key(&u, nkey, sizeof(nkey));
	ASSERT_EQ(rkv_etcd_open(v.etcd.url, 3000, &e, why, sizeof(why)), 0);
	for (int i = 0; i < 20000; i++) {
		struct rkv_etcd_kv kv = { 0 };

		rc = rkv_etcd_get(e, nkey, &kv, NULL);
		rkv_etcd_kv_fini(&kv);
		if (rc == 0)
			break;
		usleep(200);
	}
	usleep(5000); /* into the moving */
	kill(pid, SIGKILL);
	rkv_etcd_close(e);
	waitpid(pid, NULL, 0);
	rc = admin(&v, "status", out, sizeof(out));
	int stopped = strstr(out, "migration: to epoch 2") != NULL;

	printf("#   killed %s\n", stopped ? "during the migration"
				       : "after it finished");
	if (stopped) { /* and status says how far it got */
		const char *pm = strstr(out, "partitions moved");

		EXPECT_TRUE(pm != NULL);
		if (pm)
			printf("#   status: %.*s\n", (int)(pm - out > 60 ? 60
								     : pm - out) + 16,
			       pm - (pm - out > 60 ? 60 : pm - out));
	}
	rc = admin(&v, "join delta", out, sizeof(out));
	if (stopped) {
		EXPECT_EQ(rc, 0);
		EXPECT_TRUE(strstr(out, "resuming the migration to epoch 2"));
	} else {
		EXPECT_EQ(rc, 2);
		EXPECT_TRUE(strstr(out, "is in the map already"));
	}
	rc = admin(&v, "status", out, sizeof(out));
	EXPECT_TRUE(strstr(out, "map epoch 2, 4 servers") &&
		    strstr(out, "migration: none"));
	for (unsigned i = 0; i < MIG_FILL; i++)
		lost += test_kcheck(c, i, 1) != 0;
	EXPECT_EQ(lost, 0);
	rkv_client_destroy(c);
	env_stop(&v);
}

/* After a join, the old owner of a moved key restarts empty.  A client
 * of the old map that never met the move asks it for the key: the
 * restarted server must send it on (its partition table is set from the
 * map in etcd at start), not answer "absent". */
static void t_restart_after_join(void)
{
	struct env v;
	struct rkv_map *m1 = rkv_malloc(sizeof(*m1));
	struct rkv_map *m2 = rkv_malloc(sizeof(*m2));
	char out[8192], why[300], k[32];
	struct rkv_client *a;
	unsigned key = 0;
	int x = -1, rc = env_cluster(&v);

	if (rc == 77 || !m1 || !m2) {
		rkv_free(m1);
		rkv_free(m2);
		if (rc != 77)
			ASSERT_TRUE(0);
		return;
	}
	ASSERT_EQ(rc, 0);
	ASSERT_EQ(start_srv(&v, NSRV, "delta", NULL), 0);
	static struct test_logbuf lb;

	a = test_client_cluster(v.url, MIG_OP_MS, 10000, &lb, NULL);
	ASSERT_TRUE(a != NULL);
	ASSERT_EQ(admin(&v, "map", out, sizeof(out)), 0);
	ASSERT_EQ(rkv_map_parse(out, m1, why, sizeof(why)), 0);
	for (unsigned i = 0; i < 200; i++)
		ASSERT_EQ(test_kput(a, i, 1), 0);
	ASSERT_EQ(admin(&v, "join delta", out, sizeof(out)), 0);
	ASSERT_EQ(admin(&v, "map", out, sizeof(out)), 0);
	ASSERT_EQ(rkv_map_parse(out, m2, why, sizeof(why)), 0);
	/* a key that moved to delta, and the server it moved from */
	for (unsigned i = 0; i < 200 && x < 0; i++) {
		struct rkv_key_hash kh;
		unsigned part;

		snprintf(k, sizeof(k), "user:%u", i);
		rkv_key_hash(k, strlen(k), &kh);
		part = rkv_map_part(kh.route);
		if (strcmp(m2->srv[m2->owner[part]].name, "delta"))
			continue;
		for (int s = 0; s < NSRV; s++)
			if (!strcmp(m1->srv[m1->owner[part]].name, g_names[s]))
				x = s;
		key = i;
	}
	ASSERT_TRUE(x >= 0);
	char at[sizeof(v.s[x].addr)];

	snprintf(at, sizeof(at), "%s", v.s[x].addr);
	EXPECT_EQ(test_srv_stop(&v.s[x]), 0);
	ASSERT_EQ(start_srv_at(&v, (unsigned)x, g_names[x], NULL, at), 0);
	/* the client reconnects by itself (its ops fail with the old
	 * connection's error meanwhile); then the key is found, never
	 * "absent" */
	for (int i = 0; i < 200; i++) {
		rc = test_kcheck(a, key, 1);
		if (rc == 0 || rc == -ENOENT || rc == -EBADMSG)
			break;
		usleep(50000);
	}
	if (rc)
		printf("#   key %u (from %s to delta) after %s restarted: %s; "
		       "the client said:\n%s\n", key, g_names[x], g_names[x],
		       strerror(-rc), lb.text);
	EXPECT_EQ(rc, 0);
	rkv_client_destroy(a);
	rkv_free(m1);
	rkv_free(m2);
	env_stop(&v);
}

/* The watch's output in path, each line shown. */
static void show_watch(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512];

	while (f && fgets(line, sizeof(line), f))
		printf("#   watch: %s", line);
	if (f)
		fclose(f);
}

/* Start `rkv admin watch OPT VAL` of v's cluster, its output in
 * out_path.  Its pid. */
static pid_t start_watch(struct env *v, const char *out_path,
			 const char *opt, const char *val)
{
	char bin[1024];
	pid_t pid;

	snprintf(bin, sizeof(bin), "%s/rkv", test_bin_dir());
	pid = fork_child();
	if (pid == 0) {
		int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(bin, bin, "admin", "--cluster", v->url, "watch", opt,
		      val, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/*
 * r = 2 on 3 servers under load; bravo kill -9'd and started again at
 * once at its address, within its lease (it takes its registration
 * over: nothing lapses).  It starts empty, so it must serve none of the
 * copies the map gives it: no get of its keys answers "absent" (it
 * answers nothing: the ops wait for a newer map, or time out), status
 * says it restarted, `rkv admin watch` fails it over by itself, and it
 * joins again as a fresh member.  Then: linearizable, nothing lost,
 * counters exact, every key on its 2 servers.
 */
static void t_restart_empty(void)
{
	char dir[] = "/tmp/rkv-itest-fo-XXXXXX", stop[300], ctr_sum[300];
	char out[8192], wout[300], at[sizeof(((struct env *)0)->s[0].addr)];
	struct env v;
	struct rkv_etcd *e = NULL;
	pid_t kids[MIG_CLIENTS], ctr_pid, wpid;
	struct rkv_client *c, *r1, *d;
	unsigned kb[40], nb, absent = 0, read = 0, failed = 0;
	uint64_t end;
	int rc = env_etcd(&v);

	if (rc == 77)
		return;
	ASSERT_EQ(rc, 0);
	ASSERT_TRUE(mkdtemp(dir) != NULL);
	c = repl_setup(&v, g_names, NSRV, 2);
	ASSERT_TRUE(c != NULL);
	load_start(v.url, dir, stop, ctr_sum, kids, &ctr_pid);
	snprintf(at, sizeof(at), "%s", v.s[1].addr);
	test_srv_kill(&v.s[1]);
	ASSERT_EQ(start_srv_at(&v, 1, "bravo", NULL, at), 0);
	EXPECT_EQ(is_registered(&v, "bravo"), 1);
	/* a fresh client: bravo's primary keys never read as absent */
	r1 = test_client_cluster(v.url, 300, 2000, NULL, NULL);
	ASSERT_TRUE(r1 != NULL);
	nb = primary_keys(r1, "bravo", kb, 40);
	for (unsigned j = 0; j < nb; j++) {
		rc = test_kcheck(r1, kb[j], 1);
		absent += rc == -ENOENT;
		read += rc == 0;
		failed += rc != 0 && rc != -ENOENT;
	}
	rkv_client_destroy(r1);
	printf("#   bravo restarted within its lease: of %u of its keys %u "
	       "read, %u absent, %u failed\n", nb, read, absent, failed);
	EXPECT_TRUE(nb > 0);
	EXPECT_EQ(absent, 0);
	EXPECT_EQ(admin(&v, "status", out, sizeof(out)), 0);
	EXPECT_TRUE(strstr(out, "restarted empty") != NULL);
	/* a failover refused without --force is not the answer here: the
	 * coordinator fails it over by itself */
	snprintf(wout, sizeof(wout), "%s/watch.out", dir);
	wpid = start_watch(&v, wout, "--grace", "0");
	ASSERT_EQ(rkv_etcd_open(v.etcd.url, 3000, &e, out, sizeof(out)), 0);
	end = rkv_now_ms() + 60000;
	while (map_epoch(&v, e) < 2 && rkv_now_ms() < end)
		usleep(20000);
	EXPECT_TRUE(map_epoch(&v, e) >= 2);
	do { /* and its rebuild */
		usleep(100000);
		rc = admin(&v, "status", out, sizeof(out));
	} while (strstr(out, "rebuild") && rkv_now_ms() < end);
	kill(wpid, SIGTERM);
	waitpid(wpid, NULL, 0);
	show_watch(wout);
	EXPECT_TRUE(strstr(out, "rebuild") == NULL);
	EXPECT_TRUE(strstr(out, "registered, not in the map: bravo") != NULL);
	rc = admin(&v, "join bravo", out, sizeof(out));
	if (rc)
		printf("#   join bravo: %s", out);
	EXPECT_EQ(rc, 0);
	/* the idle client c reconnects to bravo by itself: its first ops
	 * of bravo's keys may fail while it does (a dead link is tried
	 * again after 100 ms) */
	for (int i = 0; i < 100 && test_kcheck(c, kb[0], 1) != 0; i++)
		usleep(20000);
	EXPECT_EQ(test_kcheck(c, kb[0], 1), 0);
	usleep(1500000);
	unsigned long long t_stop = rkv_now_ms();

	d = end_checked(&v, stop, kids, ctr_pid, c, dir, ctr_sum, 2);
	ASSERT_TRUE(d != NULL);
	check_histories(dir, d, t_stop, "a restart within the lease");
	rc = admin(&v, "status", out, sizeof(out));
	EXPECT_TRUE(strstr(out, "copies: all 4096 partitions") != NULL);
	EXPECT_TRUE(strstr(out, "restarted") == NULL);
	rkv_etcd_close(e);
	rkv_client_destroy(d);
	rkv_client_destroy(c);
	rm_dir(dir);
	env_stop(&v);
}

/* Put and delete "churn:I" for I from *next on until a put fails (its
 * error returned) or max pairs are done (0). */
static int churn(struct rkv_client *c, unsigned *next, unsigned max)
{
	for (unsigned n = 0; n < max; n++, (*next)++) {
		char k[32];
		int kl = snprintf(k, sizeof(k), "churn:%u", *next);
		int rc = rkv_put(c, k, (size_t)kl, "x", 1);

		if (rc)
			return rc;
		rc = rkv_delete(c, k, (size_t)kl);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * r = 2 on 3 small servers under load (its hot keys put, read and
 * deleted): distinct keys put and deleted until the tombstones fill an
 * index (-ENOSPC with no churn key live); `rkv admin sweep` drops them,
 * and as many pairs again go through; `rkv admin watch --sweep-every 1`
 * sweeps by itself.  Then: linearizable through both sweeps, nothing
 * lost, counters exact, every key on its 2 servers.
 */
static void t_sweep(void)
{
	char dir[] = "/tmp/rkv-itest-fo-XXXXXX", stop[300], ctr_sum[300];
	char out[8192], wout[300];
	struct env v;
	struct rkv_etcd *e = NULL;
	pid_t kids[MIG_CLIENTS], ctr_pid, wpid;
	struct rkv_client *c, *d;
	unsigned next = 0, first, again;
	uint64_t ep, end;
	int rc = env_etcd(&v);

	if (rc == 77)
		return;
	ASSERT_EQ(rc, 0);
	ASSERT_TRUE(mkdtemp(dir) != NULL);
	g_capacity = "6000";
	g_index_max = "0"; /* tombstones fill it: no level to grow */
	c = repl_setup(&v, g_names, NSRV, 2);
	g_capacity = "30000";
	g_index_max = "4M";
	ASSERT_TRUE(c != NULL);
	g_fresh_max = 300; /* live keys that would take the room back */
	load_start(v.url, dir, stop, ctr_sum, kids, &ctr_pid);
	g_fresh_max = MIG_FRESH;
	rc = churn(c, &next, 400000);
	first = next;
	printf("#   %u keys put and deleted, then: %s\n", first, strerror(-rc));
	EXPECT_EQ(rc, -ENOSPC);
	rc = admin(&v, "sweep", out, sizeof(out));
	printf("#   sweep: %s", out);
	EXPECT_EQ(rc, 0);
	EXPECT_TRUE(strstr(out, "deleted keys swept") != NULL);
	/* the slots are back: as many pairs again (the load's fresh keys
	 * take a few of them) */
	rc = churn(c, &next, first * 9 / 10);
	again = next - first;
	printf("#   after the sweep: %u more pairs, %s\n", again,
	       rc ? strerror(-rc) : "no refusal");
	EXPECT_EQ(rc, 0);
	/* the coordinator sweeps by itself when asked */
	ASSERT_EQ(rkv_etcd_open(v.etcd.url, 3000, &e, out, sizeof(out)), 0);
	ep = map_epoch(&v, e);
	snprintf(wout, sizeof(wout), "%s/watch.out", dir);
	wpid = start_watch(&v, wout, "--sweep-every", "1");
	end = rkv_now_ms() + 30000;
	while (map_epoch(&v, e) <= ep && rkv_now_ms() < end)
		usleep(20000);
	EXPECT_TRUE(map_epoch(&v, e) > ep);
	kill(wpid, SIGTERM);
	waitpid(wpid, NULL, 0);
	show_watch(wout);
	usleep(1500000);
	unsigned long long t_stop = rkv_now_ms();

	d = end_checked(&v, stop, kids, ctr_pid, c, dir, ctr_sum, 2);
	ASSERT_TRUE(d != NULL);
	check_histories(dir, d, t_stop, "two sweeps");
	rkv_etcd_close(e);
	rkv_client_destroy(d);
	rkv_client_destroy(c);
	rm_dir(dir);
	env_stop(&v);
}

int main(int argc, char **argv)
{
	g_prov = test_itest_init(argc, argv, 840);
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
	RKV_TEST(t_replicated_map);
	RKV_TEST(t_join_drain_live);
	RKV_TEST(t_insert_meets_move);
	RKV_TEST(t_join_killed);
	RKV_TEST(t_restart_after_join);
	RKV_TEST(t_failover_r2);
	RKV_TEST(t_failover_r3);
	RKV_TEST(t_failover_steal);
	RKV_TEST(t_failover_paused);
	RKV_TEST(t_failover_in_rebuild);
	RKV_TEST(t_join_drain_r2);
	RKV_TEST(t_join_drain_r3);
	RKV_TEST(t_join_undo);
	RKV_TEST(t_restart_empty);
	RKV_TEST(t_sweep);
	return rkv_test_done();
}
