/* SPDX-License-Identifier: MIT */
/*
 * itest_scan.c - rkv_scan's promises (client/rkv.h), end to end, on one
 * provider (--provider tcp|shm|verbs):
 *
 *   t_tiny          1- and 2-bucket indexes, full to the last slot: every
 *                   key once with its value; deletes are seen; the rounds
 *                   are the ones rkv.h states (2 partition-table READs, 1
 *                   per 32 KiB of index, 1 per 62 blocks);
 *   t_concurrent    scans while another process updates every key of a
 *                   known set and inserts and deletes others: each key of
 *                   the set comes exactly once per scan, with a value it
 *                   held during the scan (its generation no older than the
 *                   last one acknowledged before the scan, no newer than
 *                   the last one begun after it), every value well formed;
 *   t_hot_key       one key rewritten as fast as a client can: still once;
 *   t_stop          the callback's non-zero answer stops the scan and is
 *                   returned;
 *   t_server_down   of two servers one is killed: the other's keys all
 *                   come, and the scan names the dead one;
 *   t_read_only     a read-only client scans (nothing it does writes).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rkv.h"
#include "rtime.h"
#include "srv.h"
#include "test.h"

static const char *g_prov = "tcp";

#define NSTABLE 3000u  /* keys present from before each scan to after it */
#define NCHURN 300u    /* keys inserted and deleted during the scans */
#define VAL_MAX 600u

/* What the writer shares with the scanner: per stable key the last
 * generation acknowledged and the last one begun. */
struct shared {
	volatile uint64_t acked[NSTABLE], begun[NSTABLE];
	volatile int stop;
	volatile uint64_t rounds;
};

static size_t key_of(char *k, size_t cap, char tag, unsigned i)
{
	return (size_t)snprintf(k, cap, "%c:%05u", tag, i);
}

/* "KEY|GEN|" then a pattern of both, to a length that varies with gen,
 * so a value read whole is recognized and a torn one is not. */
static size_t val_of(char *v, const char *key, uint64_t gen)
{
	size_t len = 40 + (size_t)(gen * 37 % (VAL_MAX - 40));
	int n = snprintf(v, len, "%s|%llu|", key, (unsigned long long)gen);

	for (size_t j = (size_t)n; j < len; j++)
		v[j] = (char)('a' + (j * 13 + gen + (unsigned char)key[2]) % 26);
	return len;
}

/* The generation a value of key says, or -1 when it is not one val_of
 * wrote for key. */
static long long val_gen(const char *key, size_t key_len, const void *val,
			 size_t len)
{
	char want[VAL_MAX], k[32];
	unsigned long long gen;
	const char *v = val;

	if (len >= VAL_MAX || key_len >= sizeof(k) ||
	    len <= key_len + 1 || memcmp(v, key, key_len) || v[key_len] != '|')
		return -1;
	memcpy(k, key, key_len);
	k[key_len] = '\0';
	if (sscanf(v + key_len + 1, "%llu|", &gen) != 1)
		return -1;
	if (val_of(want, k, gen) != len || memcmp(want, v, len))
		return -1;
	return (long long)gen;
}

/* ------------------------------------------------------------ collect */

struct seen {
	unsigned stable[NSTABLE];    /* times each came */
	long long gen[NSTABLE];      /* the generation it came with */
	unsigned churn;              /* churn keys that came */
	unsigned bad;                /* values not well formed */
	unsigned stranger;           /* keys of neither set */
	unsigned calls;
	unsigned stop_after;         /* t_stop: answer 7 at this call */
};

static int collect(const void *key, size_t key_len, const void *val,
		   size_t val_len, void *arg)
{
	struct seen *s = arg;
	const char *k = key;
	unsigned i;
	long long g = val_gen(key, key_len, val, val_len);

	s->calls++;
	if (g < 0) {
		if (s->bad++ < 3)
			printf("#   bad value for key %.*s (%zu bytes)\n",
			       (int)key_len, k, val_len);
	}
	if (key_len == 7 && k[1] == ':' && sscanf(k + 2, "%5u", &i) == 1) {
		if (k[0] == 's' && i < NSTABLE) {
			s->stable[i]++;
			s->gen[i] = g;
		} else if (k[0] == 'c' && i < NCHURN) {
			s->churn++;
		} else {
			s->stranger++;
		}
	} else {
		s->stranger++;
	}
	return s->stop_after && s->calls == s->stop_after ? 7 : 0;
}

static int put_gen(struct rkv_client *c, char tag, unsigned i, uint64_t gen)
{
	char k[32], v[VAL_MAX];
	size_t kl = key_of(k, sizeof(k), tag, i);

	return rkv_put(c, k, kl, v, val_of(v, k, gen));
}

/* ------------------------------------------------------------- tests */

static struct rkv_client *client_at(const char *addr)
{
	return test_client_at(addr, 10000, 0);
}

/* A server of nbuckets buckets filled to its last slot: every key once. */
static void tiny(const char *nbuckets, unsigned nkeys)
{
	const char *args[] = { "--buckets", nbuckets, "--memory", "8M", NULL };
	struct test_srv s;
	struct rkv_client *c;
	struct rkv_scan_stats st;
	struct seen *sn = calloc(1, sizeof(*sn));
	unsigned n = 0;
	int rc;

	ASSERT_TRUE(sn);
	ASSERT_EQ(test_srv_start(&s, g_prov, args), 0);
	c = client_at(s.addr);
	EXPECT_TRUE(c);
	if (!c)
		goto out;
	/* fill: keys until the index refuses one, then every slot is full */
	for (unsigned i = 0; i < NSTABLE && n < nkeys; i++) {
		rc = put_gen(c, 's', i, 1);
		if (rc == -ENOSPC)
			continue;
		EXPECT_EQ(rc, 0);
		n++;
	}
	EXPECT_EQ(n, nkeys);
	EXPECT_EQ(rkv_scan(c, collect, sn, &st), 0);
	EXPECT_EQ(st.keys, n);
	EXPECT_EQ(sn->calls, n);
	EXPECT_EQ(sn->bad, 0);
	EXPECT_EQ(sn->stranger, 0);
	EXPECT_EQ(st.failed_server, -1);
	for (unsigned i = 0; i < NSTABLE; i++)
		EXPECT_TRUE(sn->stable[i] <= 1);
	/* one server: 2 table READs, 1 index chunk, 1 round of blocks */
	EXPECT_EQ(st.rounds, 4);
	/* delete half: they are gone from the next scan */
	memset(sn, 0, sizeof(*sn));
	for (unsigned i = 0, d = 0; i < NSTABLE && d < n / 2; i++) {
		char k[32];
		size_t kl = key_of(k, sizeof(k), 's', i);

		if (!rkv_delete(c, k, kl))
			d++;
	}
	{
		struct seen *after = calloc(1, sizeof(*after));

		ASSERT_TRUE(after);
		EXPECT_EQ(rkv_scan(c, collect, after, &st), 0);
		EXPECT_EQ(after->calls, n - n / 2);
		for (unsigned i = 0; i < NSTABLE; i++) {
			char k[32], v[VAL_MAX];
			size_t kl = key_of(k, sizeof(k), 's', i), vl;
			int present = !rkv_get(c, k, kl, v, sizeof(v), &vl);

			EXPECT_EQ(after->stable[i], present);
		}
		free(after);
	}
	rkv_client_destroy(c);
out:
	test_srv_stop(&s);
	free(sn);
}

static void t_tiny(void)
{
	tiny("1", 8);
	tiny("2", 16);
}

/* The writer of t_concurrent: its own client, until sh->stop. */
static void writer(const char *addr, struct shared *sh, int hot)
{
	struct rkv_client *c = client_at(addr);
	uint64_t gen = 2;

	if (!c)
		_exit(3);
	while (!sh->stop) {
		for (unsigned i = 0; i < NSTABLE && !sh->stop;
		     i += hot ? NSTABLE : 1) {
			sh->begun[i] = gen;
			__sync_synchronize();
			if (put_gen(c, 's', i, gen))
				_exit(4);
			__sync_synchronize();
			sh->acked[i] = gen;
			if (!hot && i % 10 == 0) {
				/* churn: an insert and, later, its delete */
				char k[32];
				unsigned j = (unsigned)(gen + i) % NCHURN;
				size_t kl = key_of(k, sizeof(k), 'c', j);

				if (gen % 2)
					put_gen(c, 'c', j, gen);
				else
					rkv_delete(c, k, kl);
			}
		}
		gen++;
		sh->rounds++;
	}
	rkv_client_destroy(c);
	_exit(0);
}

static void concurrent(int hot, unsigned scans)
{
	const char *args[] = { "--buckets", "1024", "--memory", "64M", NULL };
	struct test_srv s;
	struct rkv_client *c;
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct seen *sn = calloc(1, sizeof(*sn));
	static uint64_t before[NSTABLE], after[NSTABLE];
	uint64_t retries = 0, churn = 0;
	pid_t w;
	int st;

	ASSERT_TRUE(sh != MAP_FAILED && sn);
	ASSERT_EQ(test_srv_start(&s, g_prov, args), 0);
	c = client_at(s.addr);
	EXPECT_TRUE(c);
	if (!c)
		goto out;
	for (unsigned i = 0; i < NSTABLE; i++) {
		EXPECT_EQ(put_gen(c, 's', i, 1), 0);
		sh->acked[i] = sh->begun[i] = 1;
	}
	w = fork();
	ASSERT_TRUE(w >= 0);
	if (w == 0)
		writer(s.addr, sh, hot);
	/* the writer is at work before the first scan */
	for (uint64_t t0 = rkv_now_ms(); !sh->rounds &&
	     rkv_now_ms() - t0 < 20000;)
		usleep(1000);
	for (unsigned n = 0; n < scans; n++) {
		struct rkv_scan_stats ss;
		int rc;

		memset(sn, 0, sizeof(*sn));
		for (unsigned i = 0; i < NSTABLE; i++)
			before[i] = sh->acked[i];
		__sync_synchronize();
		rc = rkv_scan(c, collect, sn, &ss);
		__sync_synchronize();
		for (unsigned i = 0; i < NSTABLE; i++)
			after[i] = sh->begun[i];
		EXPECT_EQ(rc, 0);
		EXPECT_EQ(sn->bad, 0);
		EXPECT_EQ(sn->stranger, 0);
		for (unsigned i = 0; i < NSTABLE; i++) {
			if (sn->stable[i] != 1) {
				g_test_failures++;
				printf("#   scan %u: key s:%05u came %u times\n",
				       n, i, sn->stable[i]);
				break;
			}
			if (sn->gen[i] < (long long)before[i] ||
			    sn->gen[i] > (long long)after[i]) {
				g_test_failures++;
				printf("#   scan %u: key s:%05u came with "
				       "generation %lld, not in [%llu, %llu]\n",
				       n, i, sn->gen[i],
				       (unsigned long long)before[i],
				       (unsigned long long)after[i]);
				break;
			}
		}
		retries += ss.retries;
		churn += sn->churn;
	}
	printf("# %s: %u scans of %u keys under writes: %llu slots read "
	       "again (changed), %llu churn keys seen, writer rounds %llu\n",
	       hot ? "hot key" : "every key", scans, NSTABLE,
	       (unsigned long long)retries, (unsigned long long)churn,
	       (unsigned long long)sh->rounds);
	sh->stop = 1;
	EXPECT_EQ(waitpid(w, &st, 0), w);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	rkv_client_destroy(c);
out:
	test_srv_stop(&s);
	munmap(sh, sizeof(*sh));
	free(sn);
}

static void t_concurrent(void)
{
	concurrent(0, 20);
}

static void t_hot_key(void)
{
	concurrent(1, 200);
}

static void t_stop(void)
{
	struct test_srv s;
	struct rkv_client *c;
	struct seen *sn = calloc(1, sizeof(*sn));
	struct rkv_scan_stats st;

	ASSERT_TRUE(sn);
	ASSERT_EQ(test_srv_start(&s, g_prov, NULL), 0);
	c = client_at(s.addr);
	EXPECT_TRUE(c);
	for (unsigned i = 0; c && i < 100; i++)
		EXPECT_EQ(put_gen(c, 's', i, 1), 0);
	sn->stop_after = 3;
	EXPECT_EQ(rkv_scan(c, collect, sn, &st), 7);
	EXPECT_EQ(sn->calls, 3);
	EXPECT_EQ(rkv_scan(c, NULL, sn, &st), -EINVAL);
	rkv_client_destroy(c);
	test_srv_stop(&s);
	free(sn);
}

static void t_server_down(void)
{
	struct test_srv a, b;
	struct rkv_client *c;
	struct seen *sn = calloc(1, sizeof(*sn));
	struct rkv_scan_stats st;
	char list[700];
	unsigned on_a = 0;
	int rc;

	ASSERT_TRUE(sn);
	ASSERT_EQ(test_srv_start(&a, g_prov, NULL), 0);
	ASSERT_EQ(test_srv_start(&b, g_prov, NULL), 0);
	snprintf(list, sizeof(list), "%s,%s", a.addr, b.addr);
	c = test_client_at(list, 2000, 0);
	EXPECT_TRUE(c);
	if (!c)
		goto out;
	for (unsigned i = 0; i < 1000; i++) {
		char k[32];
		size_t kl = key_of(k, sizeof(k), 's', i);

		EXPECT_EQ(put_gen(c, 's', i, 1), 0);
		on_a += rkv_client_route(c, k, kl) == 0;
	}
	EXPECT_TRUE(on_a > 300 && on_a < 700);
	EXPECT_EQ(rkv_scan(c, collect, sn, &st), 0);
	EXPECT_EQ(sn->calls, 1000);
	test_srv_kill(&b);
	/* the client learns it when an op or the scan fails */
	for (int tries = 0; tries < 200; tries++) {
		memset(sn, 0, sizeof(*sn));
		rc = rkv_scan(c, collect, sn, &st);
		if (rc)
			break;
		usleep(10000);
	}
	EXPECT_TRUE(rc < 0);
	EXPECT_EQ(st.failed_server, 1);
	EXPECT_EQ(sn->bad, 0);
	EXPECT_EQ(sn->stranger, 0);
	/* the scan that saw it fail may have listed some of its keys
	 * first (on shm its memory stays mapped, and readable, until the
	 * closed socket is seen): each at most once; a's keys all, once */
	unsigned of_b = 0;

	for (unsigned i = 0; i < 1000; i++) {
		char k[32];
		size_t kl = key_of(k, sizeof(k), 's', i);

		if (rkv_client_route(c, k, kl) == 0)
			EXPECT_EQ(sn->stable[i], 1);
		else
			EXPECT_TRUE(sn->stable[i] <= 1);
		of_b += rkv_client_route(c, k, kl) != 0 && sn->stable[i];
	}
	EXPECT_EQ(sn->calls, on_a + of_b);
	printf("#   the failing scan listed %u of the dead server's keys "
	       "before it saw the failure\n", of_b);
	/* known down now: skipped from the start, a's keys only */
	memset(sn, 0, sizeof(*sn));
	EXPECT_TRUE(rkv_scan(c, collect, sn, &st) < 0);
	EXPECT_EQ(st.failed_server, 1);
	EXPECT_EQ(sn->calls, on_a);
	for (unsigned i = 0; i < 1000; i++) {
		char k[32];
		size_t kl = key_of(k, sizeof(k), 's', i);

		EXPECT_EQ(sn->stable[i], rkv_client_route(c, k, kl) == 0);
	}
	rkv_client_destroy(c);
out:
	test_srv_stop(&a);
	free(sn);
}

static void t_read_only(void)
{
	struct test_srv s;
	struct rkv_client *w, *r = NULL;
	struct rkv_client_opts o;
	struct seen *sn = calloc(1, sizeof(*sn));
	struct rkv_scan_stats st;
	char k[32];

	ASSERT_TRUE(sn);
	ASSERT_EQ(test_srv_start(&s, g_prov, NULL), 0);
	w = client_at(s.addr);
	EXPECT_TRUE(w);
	for (unsigned i = 0; w && i < 50; i++)
		EXPECT_EQ(put_gen(w, 's', i, 1), 0);
	rkv_client_opts_init(&o);
	o.servers = s.addr;
	o.read_only = 1;
	EXPECT_EQ(rkv_client_create(&o, &r), 0);
	if (r) {
		EXPECT_EQ(rkv_scan(r, collect, sn, &st), 0);
		EXPECT_EQ(sn->calls, 50);
		EXPECT_EQ(rkv_put(r, k, key_of(k, sizeof(k), 's', 1), "x", 1),
			  -EACCES);
	}
	rkv_client_destroy(r);
	rkv_client_destroy(w);
	test_srv_stop(&s);
	free(sn);
}

int main(int argc, char **argv)
{
	g_prov = test_itest_init(argc, argv, 600);
	if (!g_prov)
		return 77;
	RKV_TEST(t_tiny);
	RKV_TEST(t_stop);
	RKV_TEST(t_read_only);
	RKV_TEST(t_server_down);
	RKV_TEST(t_concurrent);
	RKV_TEST(t_hot_key);
	return rkv_test_done();
}
