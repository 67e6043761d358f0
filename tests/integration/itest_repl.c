/* SPDX-License-Identifier: MIT */
/*
 * itest_repl.c - replication (docs/DESIGN.md §9.7) on real rkv-server
 * processes (--provider tcp|shm|verbs), three servers and a cluster file
 * with "replicas R":
 *   - every acknowledged put is on exactly R servers, read back from each
 *     server alone (a client of that one server reads its own index), and
 *     on no other; a delete leaves a tombstone that every replica reads as
 *     absent; a key written again after its delete is back on R servers;
 *   - rmw counters from several processes are exact on every replica;
 *   - round trips: cached put, rmw and delete 3 (one more than r = 1 for
 *     put and rmw), cached get 1, whatever R;
 *   - writers SIGKILLed mid-write: the next writer of each key (after the
 *     lease) leaves the same value on every replica, and a counter holds
 *     every acknowledged increment and at most one unacknowledged one per
 *     killed writer;
 *   - a backup down: writes of its keys fail at once with an error (they
 *     cannot be on R servers), gets from live primaries still work, keys
 *     it does not hold are unaffected;
 *   - a map asking for more replicas than it lists servers is refused;
 *   - values over 256 KiB (to 16 MiB) are replicated like small ones;
 *   - indexes that grow: a full backup asked for a level by the writer.
 * Linearizability under contention and faults at R > 1 is itest_lin's.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rkv.h"
#include "rtime.h"
#include "srv.h"
#include "test.h"

static const char *g_prov = "tcp";

#define NSRV 3
#define NKEYS 300

static const char *const g_names[NSRV] = { "r-alpha", "r-bravo",
					    "r-charlie" };

static int start_all(struct test_srv *s, const char *const *more)
{
	for (unsigned i = 0; i < NSRV; i++)
		if (test_srv_start_named(&s[i], g_prov, g_names[i], NULL, more))
			return -1;
	return 0;
}

static void stop_all(struct test_srv *s)
{
	for (unsigned i = 0; i < NSRV; i++)
		if (s[i].pid > 0)
			test_srv_stop(&s[i]);
}

static void write_cluster(char *path, size_t cap, const struct test_srv *s,
			  unsigned nsrv, unsigned replicas)
{
	FILE *f;
	int fd;

	snprintf(path, cap, "/tmp/rkv-repl-%d-XXXXXX", (int)getpid());
	fd = mkstemp(path);
	ASSERT_TRUE(fd >= 0);
	f = fdopen(fd, "w");
	ASSERT_TRUE(f != NULL);
	fprintf(f, "replicas %u\n", replicas);
	for (unsigned i = 0; i < nsrv; i++)
		fprintf(f, "%s %s\n", g_names[i], s[i].addr);
	fclose(f);
}

/* A client of server i alone: it reads that server's own copies. */
static void direct_clients(const struct test_srv *s, struct rkv_client **d)
{
	for (unsigned i = 0; i < NSRV; i++) {
		d[i] = test_client_at(s[i].addr, 5000, 0);
		ASSERT_TRUE(d[i] != NULL);
	}
}

static void destroy_all(struct rkv_client **d)
{
	for (unsigned i = 0; i < NSRV; i++)
		rkv_client_destroy(d[i]);
}

/* How many servers hold generation gen of key i; *other: how many hold
 * something else (a stale or foreign value). */
static unsigned holders(struct rkv_client **d, unsigned i, unsigned gen,
			unsigned *other)
{
	unsigned n = 0;

	for (unsigned k = 0; k < NSRV; k++) {
		int rc = test_kcheck(d[k], i, gen);

		n += rc == 0;
		*other += rc != 0 && rc != -ENOENT;
	}
	return n;
}

/* ------------------------------------------------------------ copies */

static void copies(unsigned r)
{
	struct test_srv s[NSRV];
	struct rkv_client *c, *d[NSRV];
	char f[64];
	unsigned wrong = 0, other = 0, gone = 0, back = 0, absent = 0;

	ASSERT_EQ(start_all(s, NULL), 0);
	write_cluster(f, sizeof(f), s, NSRV, r);
	c = test_client_cluster(f, 5000, 2000, NULL, NULL);
	ASSERT_TRUE(c != NULL);
	direct_clients(s, d);
	for (unsigned i = 0; i < NKEYS; i++)
		EXPECT_EQ(test_kput(c, i, 1), 0);
	for (unsigned i = 0; i < NKEYS; i++) /* an update of each */
		EXPECT_EQ(test_kput(c, i, 2), 0);
	for (unsigned i = 0; i < NKEYS; i++) {
		EXPECT_EQ(test_kcheck(c, i, 2), 0);
		wrong += holders(d, i, 2, &other) != r;
	}
	printf("#   r=%u: %u keys, %u not on exactly %u servers, %u stale "
	       "or foreign copies\n", r, NKEYS, wrong, r, other);
	EXPECT_EQ(wrong, 0);
	EXPECT_EQ(other, 0);
	/* delete every third key: absent through the cluster and on every
	 * server; then write it again */
	for (unsigned i = 0; i < NKEYS; i += 3) {
		char k[32];

		snprintf(k, sizeof(k), "user:%u", i);
		EXPECT_EQ(rkv_delete(c, k, strlen(k)), 0);
		EXPECT_EQ(rkv_delete(c, k, strlen(k)), -ENOENT);
		EXPECT_EQ(test_kcheck(c, i, 2), -ENOENT);
		for (unsigned k2 = 0; k2 < NSRV; k2++)
			absent += test_kcheck(d[k2], i, 2) == -ENOENT;
		gone++;
	}
	EXPECT_EQ(absent, gone * NSRV);
	for (unsigned i = 0; i < NKEYS; i += 3) {
		EXPECT_EQ(test_kput(c, i, 3), 0);
		back += holders(d, i, 3, &other) == r;
	}
	EXPECT_EQ(back, gone);
	EXPECT_EQ(other, 0);
	/* a fresh client (no cache) finds every key */
	rkv_client_destroy(c);
	c = test_client_cluster(f, 5000, 2000, NULL, NULL);
	ASSERT_TRUE(c != NULL);
	for (unsigned i = 0; i < NKEYS; i++)
		EXPECT_EQ(test_kcheck(c, i, i % 3 ? 2 : 3), 0);
	rkv_client_destroy(c);
	destroy_all(d);
	unlink(f);
	stop_all(s);
}

static void t_copies_r2(void) { copies(2); }

/* Indexes that grow (layout.h "Levels"): three servers of 2 buckets that
 * may add one level of 14; 400 keys at r = 2 put about 267 copies on
 * each, more than its first level's 64 slots, so each grows, the
 * backups asked by the writers' legs; every key ends on exactly 2. */
static void t_grows_r2(void)
{
	static const char *const more[] = { "--buckets", "2", "--index-max",
					    "16K", NULL };
	struct test_srv s[NSRV];
	struct rkv_client *c, *d[NSRV];
	struct rkv_server_stats st;
	struct rkv_client_stats cs;
	unsigned wrong = 0, other = 0;
	char f[64];

	ASSERT_EQ(start_all(s, more), 0);
	write_cluster(f, sizeof(f), s, NSRV, 2);
	c = test_client_cluster(f, 5000, 2000, NULL, NULL);
	ASSERT_TRUE(c != NULL);
	direct_clients(s, d);
	for (unsigned i = 0; i < 400; i++)
		EXPECT_EQ(test_kput(c, i, 1), 0);
	rkv_client_stats(c, &cs);
	for (unsigned i = 0; i < 400; i++) {
		EXPECT_EQ(test_kcheck(c, i, 1), 0);
		wrong += holders(d, i, 1, &other) != 2;
	}
	for (unsigned k = 0; k < NSRV; k++) {
		ASSERT_EQ(rkv_server_stats(d[k], 0, &st), 0);
		printf("#   %s: %llu copies, %llu of %llu levels\n", g_names[k],
		       (unsigned long long)st.keys,
		       (unsigned long long)st.levels,
		       (unsigned long long)st.levels_max);
		EXPECT_EQ(st.levels, 2);
	}
	printf("#   400 keys at r=2: %u not on exactly 2 servers, %u stale or "
	       "foreign copies; %llu levels asked for\n", wrong, other,
	       (unsigned long long)cs.grows);
	EXPECT_EQ(wrong, 0);
	EXPECT_EQ(other, 0);
	rkv_client_destroy(c);
	destroy_all(d);
	unlink(f);
	stop_all(s);
}
static void t_copies_r3(void) { copies(3); }

/* --------------------------------------------------------------- RTTs */

static uint64_t rtts_of(struct rkv_client *c, int kind)
{
	struct rkv_client_stats st;

	rkv_client_stats(c, &st);
	return kind == 0 ? st.get.rtts : kind == 1 ? st.put.rtts :
	       kind == 2 ? st.rmw.rtts : st.del.rtts;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The RTTs of one op (kind as rtts_of; get: check) on key k by a fresh
 * client of cluster file f. */
static uint64_t cold_rtts(const char *f, int kind, unsigned k, unsigned v,
			  int get)
{
	struct rkv_client *c = test_client_cluster(f, 5000, 2000, NULL, NULL);
	uint64_t t;

	if (!c)
		return UINT64_MAX;
	t = rtts_of(c, kind);
	if ((get ? test_kcheck(c, k, v) : test_kput(c, k, v)) != 0)
		t = UINT64_MAX; /* fails the budget check below */
	else
		t = rtts_of(c, kind) - t;
	rkv_client_destroy(c);
	return t;
}

static void t_round_trips(void)
{
	struct test_srv s[NSRV];
	char f[64];

	ASSERT_EQ(start_all(s, NULL), 0);
	for (unsigned r = 1; r <= 3; r++) {
		struct rkv_client *c;
		uint64_t t, put, get, rmw, del;
		unsigned add = 1;

		write_cluster(f, sizeof(f), s, NSRV, r);
		c = test_client_cluster(f, 5000, 2000, NULL, NULL);
		ASSERT_TRUE(c != NULL);
		EXPECT_EQ(test_kput(c, 7, 1), 0);  /* insert */
		EXPECT_EQ(test_kput(c, 7, 2), 0);  /* caches every copy */
		t = rtts_of(c, 1);
		EXPECT_EQ(test_kput(c, 7, 3), 0);
		put = rtts_of(c, 1) - t;
		t = rtts_of(c, 0);
		EXPECT_EQ(test_kcheck(c, 7, 3), 0);
		get = rtts_of(c, 0) - t;
		t = rtts_of(c, 2);
		EXPECT_EQ(rkv_rmw(c, "user:7", 6, test_rmw_add,
				  (void *)(uintptr_t)add), 0);
		rmw = rtts_of(c, 2) - t;
		t = rtts_of(c, 3);
		EXPECT_EQ(rkv_delete(c, "user:7", 6), 0);
		del = rtts_of(c, 3) - t;
		printf("#   r=%u cached: put %llu, get %llu, rmw %llu, delete "
		       "%llu RTTs\n", r, (unsigned long long)put,
		       (unsigned long long)get, (unsigned long long)rmw,
		       (unsigned long long)del);
		rkv_client_destroy(c);
		/* cold: a fresh client each time.  The legs run beside the
		 * primary's rounds; on a loaded machine a leg's round can
		 * land after the primary's and count once more, so each
		 * figure is the best of three tries (the protocol's count) */
		uint64_t ins = UINT64_MAX, cold = UINT64_MAX, cget = UINT64_MAX;

		/* keys new at every r (a delete at r > 1 leaves a
		 * tombstone: a put over it is not a new key's) */
		unsigned k0 = 100 * r;

		for (unsigned k = 0; k < 3; k++) {
			ins = min_u64(ins, cold_rtts(f, 1, k0 + k, 1, 0));
			cold = min_u64(cold, cold_rtts(f, 1, k0 + k, 2, 0));
			cget = min_u64(cget, cold_rtts(f, 0, k0 + k, 2, 1));
		}
		printf("#   r=%u cold: put of a new key %llu, put %llu, get %llu "
		       "RTTs\n", r, (unsigned long long)ins,
		       (unsigned long long)cold, (unsigned long long)cget);
		EXPECT_EQ(cget, 2);
		EXPECT_EQ(ins, r == 1 ? 3 : 5);
		EXPECT_EQ(cold, r == 1 ? 3 : 4);
		c = test_client_cluster(f, 5000, 2000, NULL, NULL);
		ASSERT_TRUE(c != NULL);
		for (unsigned k = 0; k < 3; k++) {
			char key[16];
			int kl = snprintf(key, sizeof(key), "user:%u",
					  k0 + k);

			EXPECT_EQ(rkv_delete(c, key, (size_t)kl), 0);
		}
		EXPECT_EQ(get, 1);
		EXPECT_EQ(put, r == 1 ? 2 : 3);
		EXPECT_EQ(rmw, r == 1 ? 2 : 3);
		EXPECT_EQ(del, r == 1 ? 1 : 3);
		rkv_client_destroy(c);
		unlink(f);
	}
	stop_all(s);
}

/* ---------------------------------------------------------- counters */

#define NCOUNT 4

static void count_child(const char *f, unsigned n, int wfd)
{
	struct rkv_client *c = test_client_cluster(f, 10000, 2000, NULL, NULL);
	unsigned ok = 0;

	if (!c)
		_exit(3);
	for (unsigned i = 0; i < n; i++) {
		char k[16];

		snprintf(k, sizeof(k), "ctr:%u", i % NCOUNT);
		if (rkv_rmw(c, k, strlen(k), test_rmw_add,
			    (void *)(uintptr_t)1) == 0) {
			ok++;
			/* acknowledged increments, as they happen, so a
			 * killed child's count survives it */
			if (write(wfd, "+", 1) != 1)
				_exit(4);
		}
	}
	rkv_client_destroy(c);
	_exit(ok == n ? 0 : 1);
}

static uint64_t read_ctr(struct rkv_client *c, unsigned i, int *rc)
{
	char k[16];
	uint64_t v = 0;
	size_t len = 0;

	snprintf(k, sizeof(k), "ctr:%u", i);
	*rc = rkv_get(c, k, strlen(k), &v, sizeof(v), &len);
	if (!*rc && len != sizeof(v))
		*rc = -EBADMSG;
	return v;
}

/* nproc processes x n increments over NCOUNT counters; with kill, one
 * of them is SIGKILLed every few ms (and replaced) for a while. */
static void counters(unsigned r, int kill_some)
{
	const char *more[] = { "--lease", "50", "--grace", "200", NULL };
	struct test_srv s[NSRV];
	struct rkv_client *c, *d[NSRV];
	enum { NPROC = 4, N = 300 };
	pid_t pid[NPROC];
	int pfd[2];
	char f[64];
	unsigned killed = 0, acked = 0, bad = 0;
	uint64_t total = 0;

	ASSERT_EQ(start_all(s, more), 0);
	write_cluster(f, sizeof(f), s, NSRV, r);
	ASSERT_EQ(pipe(pfd), 0);
	fflush(stdout);
	for (unsigned p = 0; p < NPROC; p++) {
		pid[p] = fork();
		if (pid[p] == 0) {
			close(pfd[0]);
			count_child(f, N, pfd[1]);
		}
	}
	if (kill_some) {
		for (unsigned round = 0; round < 12; round++) {
			unsigned p = round % NPROC;
			int st;

			usleep(20000 + (round * 7919) % 30000);
			if (waitpid(pid[p], &st, WNOHANG) == pid[p]) {
				bad += !WIFEXITED(st) || WEXITSTATUS(st);
			} else {
				kill(pid[p], SIGKILL);
				waitpid(pid[p], NULL, 0);
				killed++;
			}
			pid[p] = fork();
			if (pid[p] == 0) {
				close(pfd[0]);
				count_child(f, N / 4, pfd[1]);
			}
		}
	}
	close(pfd[1]);
	for (unsigned p = 0; p < NPROC; p++) {
		int st;

		waitpid(pid[p], &st, 0);
		bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	for (char b; read(pfd[0], &b, 1) == 1;)
		acked++;
	close(pfd[0]);
	/* one more increment of each counter: it steals what a killed
	 * writer held and settles every replica on one value */
	c = test_client_cluster(f, 10000, 2000, NULL, NULL);
	ASSERT_TRUE(c != NULL);
	direct_clients(s, d);
	for (unsigned i = 0; i < NCOUNT; i++) {
		char k[16];
		int rc;
		uint64_t v;
		unsigned same = 0;

		snprintf(k, sizeof(k), "ctr:%u", i);
		EXPECT_EQ(rkv_rmw(c, k, strlen(k), test_rmw_add,
				  (void *)(uintptr_t)1), 0);
		v = read_ctr(c, i, &rc);
		EXPECT_EQ(rc, 0);
		total += v - 1;
		for (unsigned k2 = 0; k2 < NSRV; k2++) {
			int rc2;
			uint64_t w = read_ctr(d[k2], i, &rc2);

			same += rc2 == 0 && w == v;
			EXPECT_TRUE(rc2 == 0 || rc2 == -ENOENT);
		}
		EXPECT_EQ(same, r);
	}
	printf("#   r=%u: %u increments acknowledged, %llu counted, %u "
	       "writers killed\n", r, acked, (unsigned long long)total,
	       killed);
	EXPECT_EQ(bad, 0);
	EXPECT_TRUE(total >= acked);
	EXPECT_TRUE(total <= acked + killed);
	if (!kill_some)
		EXPECT_EQ(total, (uint64_t)NPROC * N);
	rkv_client_destroy(c);
	destroy_all(d);
	unlink(f);
	stop_all(s);
}

static void t_counters_r2(void) { counters(2, 0); }
static void t_counters_r3_kill9(void) { counters(3, 1); }

/* ------------------------------------------------------- backup down */

static void t_backup_down(void)
{
	struct test_srv s[NSRV];
	struct rkv_client *c;
	char f[64];
	unsigned fail_write = 0, ok_write = 0, ok_read = 0, slow = 0;

	ASSERT_EQ(start_all(s, NULL), 0);
	write_cluster(f, sizeof(f), s, 2, 2); /* two servers, both copies */
	c = test_client_cluster(f, 3000, 2000, NULL, NULL);
	ASSERT_TRUE(c != NULL);
	for (unsigned i = 0; i < 100; i++)
		EXPECT_EQ(test_kput(c, i, 1), 0);
	test_srv_kill(&s[1]);
	/* until the client has seen it go (shm: its memory stays mapped in
	 * the client, so a WR may still land there before the transport
	 * sees the peer's socket close) */
	for (unsigned i = 0, n = 0; n < 200; i++) {
		if (test_kowner(c, i % 100) != 1)
			continue;
		if (test_kcheck(c, i % 100, 1) != 0)
			break;
		usleep(10000);
		n++;
	}
	for (unsigned i = 0; i < 100; i++) {
		uint64_t t0 = rkv_now_ms();
		int rc = test_kput(c, i, 2);

		if (rkv_now_ms() - t0 > 2000)
			slow++;
		if (rc == 0)
			ok_write++;
		else
			fail_write++;
		/* keys whose primary lives still read their last
		 * acknowledged value */
		if (test_kowner(c, i) == 0)
			ok_read += test_kcheck(c, i, 1) == 0;
	}
	printf("#   one of two servers down: %u writes failed, %u succeeded, "
	       "%u reads of live primaries ok, %u slow\n", fail_write,
	       ok_write, ok_read, slow);
	EXPECT_EQ(ok_write, 0);
	EXPECT_EQ(fail_write, 100);
	EXPECT_TRUE(ok_read > 20);
	EXPECT_TRUE(slow < 3);
	rkv_client_destroy(c);
	unlink(f);
	stop_all(s);
}

/* ------------------------------------------------- a stale lock holder */

/* The install's sequence check in the real code: A's lock was stolen by
 * B, whose value is on the backup with a higher sequence; A's install
 * must leave it (docs/DESIGN.md §9.7 step 2), and A's release fails.
 * keeps: rmws that write nothing first (each release that wrote nothing
 * used to bump the lock sequence one further from the header's: after
 * 255 the taker got h + 256 and the thief h + 1, and the taker's install
 * overwrote the thief's value on the backup: "a" there, "b" on the
 * primary). */
static void stale_holder(const char *key, unsigned keeps)
{
	struct test_srv s[NSRV];
	struct rkv_client *a, *b, *d[NSRV];
	struct test_steal arg = { .key = key };
	unsigned rep[3], kept = 0;
	char f[64], v[8];
	size_t len = 0;

	ASSERT_EQ(start_all(s, NULL), 0);
	write_cluster(f, sizeof(f), s, 2, 2);
	a = test_client_cluster(f, 5000, 2000, NULL, NULL);
	b = test_client_cluster(f, 5000, 2000, NULL, NULL);
	ASSERT_TRUE(a && b);
	direct_clients(s, d);
	arg.b = b;
	EXPECT_EQ(rkv_put(a, arg.key, strlen(arg.key), "0", 1), 0);
	for (unsigned i = 0; i < keeps; i++)
		kept += rkv_rmw(a, arg.key, strlen(arg.key), test_rmw_cancel,
				NULL) == -ECANCELED;
	EXPECT_EQ(kept, keeps);
	EXPECT_EQ(rkv_client_replicas(a, arg.key, strlen(arg.key), rep, 3), 2);
	EXPECT_EQ(rkv_rmw(a, arg.key, strlen(arg.key), test_rmw_steal, &arg),
		  -ECANCELED);
	EXPECT_EQ(arg.b_rc, 0);
	EXPECT_EQ(arg.calls, 2);
	for (unsigned i = 0; i < 2; i++) {
		memset(v, 0, sizeof(v));
		EXPECT_EQ(rkv_get(d[rep[i]], arg.key, strlen(arg.key), v,
				  sizeof(v), &len), 0);
		printf("#   after %u kept rmws: %s %s holds \"%.*s\"\n", keeps,
		       i ? "backup" : "primary", g_names[rep[i]], (int)len, v);
		EXPECT_TRUE(len == 1 && v[0] == 'b');
	}
	rkv_client_destroy(a);
	rkv_client_destroy(b);
	destroy_all(d);
	unlink(f);
	stop_all(s);
}

static void t_stale_holder(void) { stale_holder("stale-key", 0); }
static void t_keeps_then_steal(void) { stale_holder("kept-key", 255); }

/* A backup made primary (as a failover does: here a map without the old
 * primary), its word as the backup's install left it: A's rmw takes the
 * lock there and B, in A's callback, steals it.  B's sequence must be
 * above A's, or A's install (made after B's) overwrites B's value on the
 * other backup while B's release succeeds on the primary: the primary
 * then holds "b" and its backup "a".  Backups that counted their own
 * versions made A's sequence s + 256 and B's s + 1 here. */
static void t_promoted_backup(void)
{
	struct test_srv s[NSRV];
	struct rkv_client *c, *a, *b, *d[NSRV];
	struct test_steal arg = { .key = "promoted-key" };
	unsigned rep[3], rep2[3];
	char f1[64], f2[64], v[8];
	size_t len = 0;
	FILE *fp;
	int fd;

	ASSERT_EQ(start_all(s, NULL), 0);
	write_cluster(f1, sizeof(f1), s, NSRV, 2);
	c = test_client_cluster(f1, 5000, 2000, NULL, NULL);
	ASSERT_TRUE(c != NULL);
	/* a few writes, so the backup's word has been installed over */
	for (unsigned i = 0; i < 3; i++)
		EXPECT_EQ(rkv_put(c, arg.key, strlen(arg.key), "0", 1), 0);
	EXPECT_EQ(rkv_client_replicas(c, arg.key, strlen(arg.key), rep, 3), 2);
	rkv_client_destroy(c);
	/* the map without the primary: its backup leads */
	snprintf(f2, sizeof(f2), "/tmp/rkv-repl-%d-XXXXXX", (int)getpid());
	fd = mkstemp(f2);
	ASSERT_TRUE(fd >= 0);
	fp = fdopen(fd, "w");
	ASSERT_TRUE(fp != NULL);
	fprintf(fp, "replicas 2\n");
	for (unsigned i = 0; i < NSRV; i++)
		if (i != rep[0])
			fprintf(fp, "%s %s\n", g_names[i], s[i].addr);
	fclose(fp);
	a = test_client_cluster(f2, 5000, 2000, NULL, NULL);
	b = test_client_cluster(f2, 5000, 2000, NULL, NULL);
	ASSERT_TRUE(a && b);
	EXPECT_EQ(rkv_client_replicas(a, arg.key, strlen(arg.key), rep2, 3),
		  2);
	EXPECT_STREQ(rkv_client_server_name(a, rep2[0]), g_names[rep[1]]);
	direct_clients(s, d);
	arg.b = b;
	EXPECT_EQ(rkv_rmw(a, arg.key, strlen(arg.key), test_rmw_steal, &arg),
		  -ECANCELED);
	EXPECT_EQ(arg.b_rc, 0);
	for (unsigned i = 0; i < NSRV; i++) {
		if (i == rep[0])
			continue;
		memset(v, 0, sizeof(v));
		EXPECT_EQ(rkv_get(d[i], arg.key, strlen(arg.key), v,
				  sizeof(v), &len), 0);
		printf("#   %s %s holds \"%.*s\"\n",
		       i == rep[1] ? "primary" : "backup", g_names[i], (int)len,
		       v);
		EXPECT_TRUE(len == 1 && v[0] == 'b');
	}
	rkv_client_destroy(a);
	rkv_client_destroy(b);
	destroy_all(d);
	unlink(f1);
	unlink(f2);
	stop_all(s);
}

/* ------------------------------------------------- primary restarted */

/* A server that restarts comes back empty.  Its keys' backups still hold
 * them: a write of a key it is primary for must fail (it would find the
 * backups ahead and leave them, losing itself there), not succeed; a key
 * it was a backup of is written again on it by its next write. */
static void t_primary_restarted(void)
{
	struct test_srv s[NSRV];
	struct test_logbuf lb = { .len = 0 };
	struct rkv_client *c, *d[NSRV];
	char f[64], addr[sizeof(s[0].addr)];
	unsigned refused = 0, rewritten = 0, n0 = 0, n1 = 0;

	ASSERT_EQ(start_all(s, NULL), 0);
	write_cluster(f, sizeof(f), s, 2, 2);
	c = test_client_cluster(f, 3000, 2000, NULL, NULL);
	ASSERT_TRUE(c != NULL);
	for (unsigned i = 0; i < 100; i++)
		EXPECT_EQ(test_kput(c, i, 1), 0);
	rkv_client_destroy(c);
	snprintf(addr, sizeof(addr), "%s", s[0].addr);
	EXPECT_EQ(test_srv_stop(&s[0]), 0);
	ASSERT_EQ(test_srv_start_named(&s[0], g_prov, g_names[0], addr, NULL),
		  0);
	c = test_client_cluster(f, 3000, 2000, &lb, NULL);
	ASSERT_TRUE(c != NULL);
	direct_clients(s, d);
	for (unsigned i = 0; i < 100; i++) {
		int rc = test_kput(c, i, 2);
		unsigned other = 0;

		if (test_kowner(c, i) == 0) {
			n0++;
			refused += rc == -EIO;
			/* the backup's copy is untouched */
			EXPECT_EQ(test_kcheck(d[1], i, 1), 0);
		} else {
			n1++;
			rewritten += rc == 0 && holders(d, i, 2, &other) == 2;
		}
	}
	printf("#   primary restarted empty: %u/%u of its keys' writes "
	       "refused, %u/%u of its backup keys written on both\n",
	       refused, n0, rewritten, n1);
	printf("#   %.*s\n", (int)strcspn(lb.text, "\n"), lb.text);
	EXPECT_EQ(refused, n0);
	EXPECT_EQ(rewritten, n1);
	EXPECT_TRUE(n0 > 20 && n1 > 20);
	EXPECT_TRUE(strstr(lb.text, "lost its contents") != NULL);
	rkv_client_destroy(c);
	destroy_all(d);
	unlink(f);
	stop_all(s);
}

/* --------------------------------------------------------- big values */

/* How many servers hold exactly want[0..n) under key k; *other: how many
 * hold something else. */
static unsigned big_holders(struct rkv_client **d, const char *k,
			    const unsigned char *want, size_t n,
			    unsigned char *r, size_t cap, unsigned *other)
{
	unsigned have = 0;

	for (unsigned i = 0; i < NSRV; i++) {
		size_t len = 0;
		int rc = rkv_get(d[i], k, strlen(k), r, cap, &len);

		if (rc == 0 && len == n && !memcmp(r, want, n))
			have++;
		else if (rc != -ENOENT)
			*other += 1;
	}
	return have;
}

/*
 * Values over the largest small block (256 KiB) at r = 2 and 3: each put
 * is on exactly r servers (read back from each alone), read cold in 2
 * RTTs and cached in 1 through the cluster, written again, changed by an
 * rmw of a client that has located none of its copies (its legs read the
 * big copies on the backups to find them), and deleted everywhere.
 */
static void big_values(unsigned r)
{
	const char *extra[] = { "--memory", "160M", "--big-grace", "20000",
				NULL };
	const size_t sizes[] = { 261025, 1u << 20, 16u << 20 };
	size_t nsz = sizeof(sizes) / sizeof(sizes[0]), max = 16u << 20;
	unsigned char *v = malloc(max), *rd = malloc(max + 1);
	struct test_srv s[NSRV];
	struct rkv_client *c, *c2, *d[NSRV];
	unsigned wrong = 0, other = 0, absent = 0;
	char f[64], k[32];

	ASSERT_TRUE(v && rd);
	ASSERT_EQ(start_all(s, extra), 0);
	write_cluster(f, sizeof(f), s, NSRV, r);
	c = test_client_cluster(f, 20000, 2000, NULL, NULL);
	c2 = test_client_cluster(f, 20000, 2000, NULL, NULL);
	ASSERT_TRUE(c && c2);
	direct_clients(s, d);
	for (size_t i = 0; i < nsz; i++) {
		size_t n = sizes[i], len = 0;
		uint64_t t;

		snprintf(k, sizeof(k), "big-%zu", n);
		test_big_fill(v, n, 1);
		uint64_t t0 = rkv_now_ns(), t1, t2;

		EXPECT_EQ(rkv_put(c, k, strlen(k), v, n), 0);
		t1 = rkv_now_ns();
		wrong += big_holders(d, k, v, n, rd, max + 1, &other) != r;
		t = rtts_of(c2, 0);
		t2 = rkv_now_ns();
		EXPECT_EQ(rkv_get(c2, k, strlen(k), rd, max + 1, &len), 0);
		if (n >= (1u << 20))
			printf("#   %zu bytes: put %.1f ms, cold get %.1f ms\n",
			       n, (double)(t1 - t0) / 1e6,
			       (double)(rkv_now_ns() - t2) / 1e6);
		EXPECT_EQ(rtts_of(c2, 0) - t, 2); /* cold */
		EXPECT_TRUE(len == n && !memcmp(rd, v, n));
		t = rtts_of(c2, 0);
		EXPECT_EQ(rkv_get(c2, k, strlen(k), rd, max + 1, &len), 0);
		EXPECT_EQ(rtts_of(c2, 0) - t, 1); /* cached */
		test_big_fill(v, n, 2);
		EXPECT_EQ(rkv_put(c, k, strlen(k), v, n), 0);
		wrong += big_holders(d, k, v, n, rd, max + 1, &other) != r;
		EXPECT_EQ(rkv_rmw(c2, k, strlen(k), test_rmw_flip_first,
				  NULL), 0);
		v[0] ^= 0xff;
		wrong += big_holders(d, k, v, n, rd, max + 1, &other) != r;
		EXPECT_EQ(rkv_get(c, k, strlen(k), rd, max + 1, &len), 0);
		EXPECT_TRUE(len == n && !memcmp(rd, v, n));
		EXPECT_EQ(rkv_delete(c, k, strlen(k)), 0);
		for (unsigned j = 0; j < NSRV; j++)
			absent += rkv_get(d[j], k, strlen(k), rd, max + 1,
					  &len) == -ENOENT;
	}
	printf("#   r=%u: %zu sizes to 16 MiB, %u puts not on exactly %u "
	       "servers, %u other copies, %u of %zu absent after delete\n",
	       r, nsz, wrong, r, other, absent, nsz * NSRV);
	EXPECT_EQ(wrong, 0);
	EXPECT_EQ(other, 0);
	EXPECT_EQ(absent, nsz * NSRV);
	rkv_client_destroy(c);
	rkv_client_destroy(c2);
	destroy_all(d);
	unlink(f);
	stop_all(s);
	free(v);
	free(rd);
}

static void t_big_values_r2(void) { big_values(2); }
static void t_big_values_r3(void) { big_values(3); }

/* ----------------------------------------------------------- refusal */

static void t_too_few_servers(void)
{
	struct test_srv s[NSRV];
	struct test_logbuf lb = { .len = 0 };
	char f[64];
	int rc = 0;

	ASSERT_EQ(start_all(s, NULL), 0);
	write_cluster(f, sizeof(f), s, 2, 3);
	EXPECT_TRUE(test_client_cluster(f, 3000, 2000, &lb, &rc) == NULL);
	EXPECT_EQ(rc, -EINVAL);
	printf("#   %s", lb.text);
	EXPECT_TRUE(strstr(lb.text, "replicas 3") != NULL);
	unlink(f);
	stop_all(s);
}

int main(int argc, char **argv)
{
	g_prov = test_itest_init(argc, argv, 600);
	if (!g_prov)
		return 77;
	RKV_TEST(t_copies_r2);
	RKV_TEST(t_copies_r3);
	RKV_TEST(t_grows_r2);
	RKV_TEST(t_round_trips);
	RKV_TEST(t_counters_r2);
	RKV_TEST(t_counters_r3_kill9);
	RKV_TEST(t_backup_down);
	RKV_TEST(t_primary_restarted);
	RKV_TEST(t_stale_holder);
	RKV_TEST(t_promoted_backup);
	RKV_TEST(t_keeps_then_steal);
	RKV_TEST(t_too_few_servers);
	RKV_TEST(t_big_values_r2);
	RKV_TEST(t_big_values_r3);
	return rkv_test_done();
}
