/* SPDX-License-Identifier: MIT */
/*
 * itest_ps.c - integration tests of the parameter-server API
 * (client/rkv_ps.h): real rkv-server processes and librkv clients on one
 * provider (--provider tcp|shm|verbs).
 *
 * Covers create/open/pull/push/delete across servers with every rule and
 * the shard versions, asynchronous requests, bad input (each error leaves
 * everything unchanged), exact sums from 8 concurrent pushing processes,
 * workers killed with SIGKILL in the middle of pushes (each shard is
 * either updated or not, locks come back after the lease, the others
 * finish), pulls during pushes (a shard is never a mixture of two
 * versions), counters and barriers among processes, and the training
 * example against its single-process run.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "ps_internal.h"
#include "rkv.h"
#include "rkv_ps.h"
#include "rtime.h"
#include "srv.h"
#include "test.h"
#include "transport.h"

static const char *g_prov = "tcp";
static int g_verbs;

/* ------------------------------------------------------------ helpers */

static int start(struct test_srv *s, const char *const *extra)
{
	int rc = test_srv_start(s, g_prov, extra);

	if (rc)
		printf("#   cannot start rkv-server (%s): %s\n", g_prov,
		       strerror(-rc));
	return rc;
}

static void list_of(struct test_srv *s, unsigned n, char *list, size_t cap)
{
	list[0] = '\0';
	for (unsigned i = 0; i < n; i++) {
		if (i)
			strncat(list, ",", cap - strlen(list) - 1);
		strncat(list, s[i].addr, cap - strlen(list) - 1);
	}
}

static struct rkv_client *client_list(const char *list, unsigned timeout_ms)
{
	struct rkv_client_opts o;
	struct rkv_client *c = NULL;

	rkv_client_opts_init(&o);
	o.servers = list;
	o.timeout_ms = timeout_ms;
	if (rkv_client_create(&o, &c))
		return NULL;
	return c;
}

static struct rkv_client *client_of(struct test_srv *s, unsigned n,
				    unsigned timeout_ms)
{
	char list[1024];

	list_of(s, n, list, sizeof(list));
	return client_list(list, timeout_ms);
}

static void stop_all(struct test_srv *s, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		EXPECT_EQ(test_srv_stop(&s[i]), 0);
}

/* A client and a PS engine in one (for children). */
struct pc {
	struct rkv_client *c;
	struct rkv_ps *ps;
};

static int pc_open(struct pc *p, const char *list, unsigned timeout_ms)
{
	p->ps = NULL;
	p->c = client_list(list, timeout_ms);
	if (!p->c)
		return -1;
	if (rkv_ps_create(p->c, &p->ps)) {
		rkv_client_destroy(p->c);
		return -1;
	}
	return 0;
}

/* Two servers (extra: their arguments, may be NULL), their address list,
 * and when p is not NULL a PS client on both with a float32 tensor name
 * of len elements in shards of shard.  Returns 0 or -1. */
static int two_servers(struct test_srv s[2], const char *const *extra,
		       char *list, size_t cap, struct pc *p, const char *name,
		       uint64_t len, uint64_t shard)
{
	for (int i = 0; i < 2; i++)
		if (start(&s[i], extra))
			return -1;
	list_of(s, 2, list, cap);
	if (!p)
		return 0;
	if (pc_open(p, list, 10000))
		return -1;
	return rkv_ps_tensor_create(p->ps, name, RKV_PS_FLOAT32, len, shard,
				    NULL) ? -1 : 0;
}

static void pc_close(struct pc *p)
{
	rkv_ps_destroy(p->ps);
	rkv_client_destroy(p->c);
}

/* Every element of shard s of buf (shard elements se, length len) equals
 * the first one; returns 0 when uniform. */
static int shard_uniform(const float *buf, uint64_t len, uint32_t se,
			 uint64_t s)
{
	uint64_t a = s * se, b = a + se < len ? a + se : len;

	for (uint64_t i = a + 1; i < b; i++)
		if (buf[i] != buf[a])
			return -1;
	return 0;
}

/* ---------------------------------------------------------- the tests */

static void t_basic(void)
{
	const uint64_t len = 100000;
	struct test_srv s[3];
	struct pc p;
	struct rkv_ps_tensor *t = NULL, *t2 = NULL;
	struct rkv_ps_info info;
	char list[1024];
	float *init, *buf, *v;
	uint64_t vmin = 9, vmax = 9;

	for (int i = 0; i < 3; i++)
		ASSERT_EQ(start(&s[i], NULL), 0);
	list_of(s, 3, list, sizeof(list));
	ASSERT_EQ(pc_open(&p, list, 10000), 0);
	init = calloc(len, sizeof(float));
	buf = calloc(len, sizeof(float));
	v = calloc(len, sizeof(float));
	ASSERT_TRUE(init && buf && v);
	for (uint64_t i = 0; i < len; i++) {
		init[i] = (float)(i % 1000);
		v[i] = (float)(i % 7);
	}
	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "w", RKV_PS_FLOAT32, len, 4096,
				       init), 0);
	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "w", RKV_PS_FLOAT32, len, 4096,
				       NULL), -EEXIST);
	ASSERT_EQ(rkv_ps_tensor_open(p.ps, "w", RKV_PS_FLOAT32, len, &t), 0);
	rkv_ps_tensor_info(t, &info);
	EXPECT_EQ(info.len, len);
	EXPECT_EQ(info.shard_elems, 4096);
	EXPECT_EQ(info.nshards, 25);
	/* shards spread over the servers */
	unsigned per[3] = { 0 };

	for (int i = 0; i < 25; i++) {
		char k[32];

		snprintf(k, sizeof(k), "ps/w/%d", i);
		per[rkv_client_route(p.c, k, strlen(k))]++;
	}
	EXPECT_TRUE(per[0] && per[1] && per[2]);
	EXPECT_EQ(rkv_ps_pull(t, buf, len, &vmin, &vmax), 0);
	EXPECT_EQ(vmin, 0);
	EXPECT_EQ(vmax, 0);
	EXPECT_TRUE(memcmp(buf, init, len * 4) == 0);
	/* SUM, SGD, ASSIGN: versions 1, 2, 3 */
	EXPECT_EQ(rkv_ps_push(t, RKV_PS_SUM, v, len, 0), 0);
	EXPECT_EQ(rkv_ps_pull(t, buf, len, &vmin, &vmax), 0);
	EXPECT_EQ(vmin, 1);
	EXPECT_EQ(vmax, 1);
	int bad = 0;

	for (uint64_t i = 0; i < len; i++)
		bad += buf[i] != init[i] + v[i];
	EXPECT_EQ(bad, 0);
	EXPECT_EQ(rkv_ps_push(t, RKV_PS_SGD, v, len, 0.5f), 0);
	EXPECT_EQ(rkv_ps_pull(t, buf, len, NULL, NULL), 0);
	bad = 0;
	for (uint64_t i = 0; i < len; i++)
		bad += buf[i] != init[i] + v[i] - 0.5f * v[i];
	EXPECT_EQ(bad, 0);
	EXPECT_EQ(rkv_ps_push(t, RKV_PS_ASSIGN, init, len, 0), 0);
	EXPECT_EQ(rkv_ps_pull(t, buf, len, &vmin, &vmax), 0);
	EXPECT_EQ(vmin, 3);
	EXPECT_EQ(vmax, 3);
	EXPECT_TRUE(memcmp(buf, init, len * 4) == 0);

	/* async: two pushes and a pull in flight together, then pull_many */
	struct rkv_ps_req *r1, *r2, *r3;
	float small[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, sbuf[16];

	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "small", RKV_PS_FLOAT32, 10, 0,
				       NULL), 0);
	ASSERT_EQ(rkv_ps_tensor_open(p.ps, "small", RKV_PS_FLOAT32, 0, &t2), 0);
	ASSERT_EQ(rkv_ps_push_async(t, RKV_PS_SUM, v, len, 0, &r1), 0);
	ASSERT_EQ(rkv_ps_push_async(t2, RKV_PS_SUM, small, 10, 0, &r2), 0);
	int rc, spins = 0;

	while ((rc = rkv_ps_test(r2)) == -EINPROGRESS && spins < 1000000)
		spins++;
	EXPECT_EQ(rc, 0);
	EXPECT_EQ(rkv_ps_wait(r2, NULL, NULL), 0);
	EXPECT_EQ(rkv_ps_wait(r1, NULL, NULL), 0);
	ASSERT_EQ(rkv_ps_pull_async(t2, sbuf, 16, &r3), 0);
	EXPECT_EQ(rkv_ps_wait(r3, &vmin, &vmax), 0);
	EXPECT_EQ(vmax, 1);
	EXPECT_TRUE(memcmp(sbuf, small, sizeof(small)) == 0);
	struct rkv_ps_io io[2] = {
		{ .t = t, .buf = buf, .n = len },
		{ .t = t2, .buf = sbuf, .n = 16 },
	};

	EXPECT_EQ(rkv_ps_pull_many(p.ps, io, 2), 0);
	EXPECT_EQ(io[0].status, 0);
	EXPECT_EQ(io[0].vmin, 4);
	EXPECT_EQ(io[1].vmax, 1);
	bad = 0;
	for (uint64_t i = 0; i < len; i++)
		bad += buf[i] != init[i] + v[i];
	EXPECT_EQ(bad, 0);

	/* delete: gone for new opens; the old handle fails cleanly */
	EXPECT_EQ(rkv_ps_tensor_delete(p.ps, "w"), 0);
	struct rkv_ps_tensor *t3 = NULL;

	EXPECT_EQ(rkv_ps_tensor_open(p.ps, "w", RKV_PS_FLOAT32, 0, &t3),
		  -ENOENT);
	rc = rkv_ps_pull(t, buf, len, NULL, NULL);
	EXPECT_EQ(rc, -ENOENT);
	EXPECT_EQ(rkv_ps_push(t, RKV_PS_SUM, v, len, 0), -ENOENT);
	/* a new incarnation: the stale handle gets -ESTALE */
	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "w", RKV_PS_FLOAT32, len, 4096,
				       NULL), 0);
	EXPECT_EQ(rkv_ps_pull(t, buf, len, NULL, NULL), -ESTALE);
	EXPECT_EQ(rkv_ps_push(t, RKV_PS_SUM, v, len, 0), -ESTALE);
	EXPECT_EQ(rkv_ps_tensor_delete(p.ps, "w"), 0);
	EXPECT_EQ(rkv_ps_tensor_delete(p.ps, "w"), -ENOENT);
	rkv_ps_tensor_close(t);
	rkv_ps_tensor_close(t2);
	pc_close(&p);
	free(init);
	free(buf);
	free(v);
	stop_all(s, 3);
}

static void t_bad_input(void)
{
	struct test_srv s;
	struct pc p;
	struct rkv_ps_tensor *t = NULL, *t2 = NULL;
	float buf[300], v[300];
	uint64_t vmin, vmax;

	ASSERT_EQ(start(&s, NULL), 0);
	ASSERT_EQ(pc_open(&p, s.addr, 5000), 0);
	for (int i = 0; i < 300; i++)
		v[i] = 1;
	/* unknown tensor */
	EXPECT_EQ(rkv_ps_tensor_open(p.ps, "nope", RKV_PS_FLOAT32, 0, &t),
		  -ENOENT);
	EXPECT_EQ(rkv_ps_tensor_delete(p.ps, "nope"), -ENOENT);
	/* dtypes */
	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "h", RKV_PS_FLOAT16, 10, 0, NULL),
		  -EOPNOTSUPP);
	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "h", RKV_PS_BFLOAT16, 10, 0,
				       NULL), -EOPNOTSUPP);
	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "h", (enum rkv_ps_dtype)9, 10, 0,
				       NULL), -EINVAL);
	/* names, lengths, shard sizes */
	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "", RKV_PS_FLOAT32, 10, 0, NULL),
		  -EINVAL);
	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "a/b", RKV_PS_FLOAT32, 10, 0,
				       NULL), -EINVAL);
	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "z", RKV_PS_FLOAT32, 0, 0, NULL),
		  -EINVAL);
	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "z", RKV_PS_FLOAT32, 10,
				       1u << 20, NULL), -EMSGSIZE);
	/* rkv_ps.h's bound: a shard of 65,252 floats (261,024 bytes with its
	 * header) is the largest; one more element is refused */
	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "z", RKV_PS_FLOAT32, 65253, 65253,
				       NULL), -EMSGSIZE);
	EXPECT_EQ(rkv_ps_tensor_open(p.ps, "z", RKV_PS_FLOAT32, 0, &t),
		  -ENOENT); /* nothing was created */
	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "big", RKV_PS_FLOAT32, 65252,
				       65252, NULL), 0);
	EXPECT_EQ(rkv_ps_tensor_delete(p.ps, "big"), 0);
	/* the real one: 300 elements in shards of 100 */
	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "x", RKV_PS_FLOAT32, 300, 100,
				       NULL), 0);
	EXPECT_EQ(rkv_ps_tensor_open(p.ps, "x", RKV_PS_FLOAT32, 299, &t),
		  -EINVAL);
	EXPECT_EQ(rkv_ps_tensor_open(p.ps, "x", RKV_PS_FLOAT16, 300, &t),
		  -EOPNOTSUPP);
	ASSERT_EQ(rkv_ps_tensor_open(p.ps, "x", RKV_PS_FLOAT32, 300, &t), 0);
	EXPECT_EQ(rkv_ps_push(t, RKV_PS_SUM, v, 300, 0), 0);
	/* buffer too small: -ENOBUFS, buffer untouched */
	for (int i = 0; i < 300; i++)
		buf[i] = -7;
	EXPECT_EQ(rkv_ps_pull(t, buf, 299, NULL, NULL), -ENOBUFS);
	EXPECT_TRUE(buf[0] == -7 && buf[298] == -7);
	/* push of a wrong length or rule: nothing changes */
	EXPECT_EQ(rkv_ps_push(t, RKV_PS_SUM, v, 299, 0), -EINVAL);
	EXPECT_EQ(rkv_ps_push(t, RKV_PS_SUM, v, 301, 0), -EINVAL);
	EXPECT_EQ(rkv_ps_push(t, (enum rkv_ps_rule)0, v, 300, 0), -EINVAL);
	EXPECT_EQ(rkv_ps_push(t, RKV_PS_SUM, NULL, 300, 0), -EINVAL);
	EXPECT_EQ(rkv_ps_pull(t, buf, 300, &vmin, &vmax), 0);
	EXPECT_EQ(vmin, 1);
	EXPECT_EQ(vmax, 1);
	EXPECT_TRUE(buf[0] == 1 && buf[299] == 1);
	/* a tensor being created: open says -EBUSY, so no push can start;
	 * delete clears it */
	struct ps_meta m = { .magic = PS_META_MAGIC, .dtype = RKV_PS_FLOAT32,
			     .state = PS_CREATING, .len = 10,
			     .shard_elems = 10, .nonce = 77 };

	EXPECT_EQ(rkv_put(p.c, "ps/busy", 7, &m, sizeof(m)), 0);
	EXPECT_EQ(rkv_ps_tensor_open(p.ps, "busy", RKV_PS_FLOAT32, 10, &t2),
		  -EBUSY);
	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "busy", RKV_PS_FLOAT32, 10, 0,
				       NULL), -EEXIST);
	EXPECT_EQ(rkv_ps_tensor_delete(p.ps, "busy"), 0);
	EXPECT_EQ(rkv_ps_tensor_create(p.ps, "busy", RKV_PS_FLOAT32, 10, 0,
				       NULL), 0);
	EXPECT_EQ(rkv_ps_tensor_open(p.ps, "busy", RKV_PS_FLOAT32, 10, &t2), 0);
	rkv_ps_tensor_close(t2);
	/* a key that is not PS metadata */
	EXPECT_EQ(rkv_put(p.c, "ps/junk", 7, "hello", 5), 0);
	EXPECT_EQ(rkv_ps_tensor_open(p.ps, "junk", RKV_PS_FLOAT32, 0, &t2),
		  -EINVAL);
	/* counters: names */
	uint64_t id;

	EXPECT_EQ(rkv_counter_open(p.c, "", &id), -EINVAL);
	EXPECT_EQ(rkv_counter_open(p.c,
				   "0123456789012345678901234567890123456789"
				   "012345678901234567890123", &id), -EINVAL);
	EXPECT_EQ(rkv_counter_add(p.c, 0xffffffffull, 1, NULL), -EINVAL);
	rkv_ps_tensor_close(t);
	pc_close(&p);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

static void t_counters(void)
{
	const char *extra[] = { "--counters", "4", NULL };
	struct test_srv s;
	struct rkv_client *c, *ro;
	uint64_t a, b, old = 99, val = 0;
	char name[16];

	ASSERT_EQ(start(&s, extra), 0);
	c = client_of(&s, 1, 5000);
	ASSERT_TRUE(c != NULL);
	EXPECT_EQ(rkv_counter_open(c, "ctr-a", &a), 0);
	EXPECT_EQ(rkv_counter_open(c, "ctr-a", &b), 0);
	EXPECT_EQ_U64(a, b);
	EXPECT_EQ(rkv_counter_add(c, a, 5, &old), 0);
	EXPECT_EQ(old, 0);
	EXPECT_EQ(rkv_counter_add(c, a, 2, &old), 0);
	EXPECT_EQ(old, 5);
	EXPECT_EQ(rkv_counter_read(c, a, &val), 0);
	EXPECT_EQ(val, 7);
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "ctr-%d", i);
		EXPECT_EQ(rkv_counter_open(c, name, &b), 0);
	}
	EXPECT_EQ(rkv_counter_open(c, "one-too-many", &b), -ENOSPC);
	EXPECT_EQ(rkv_counter_open(c, "ctr-a", &b), 0); /* still mapped */
	/* a read-only client gets no counters */
	struct rkv_client_opts o;

	rkv_client_opts_init(&o);
	o.servers = s.addr;
	o.read_only = 1;
	if (rkv_client_create(&o, &ro) == 0) {
		EXPECT_EQ(rkv_counter_open(ro, "ctr-a", &b), -ENODEV);
		rkv_client_destroy(ro);
	}
	rkv_client_destroy(c);
	EXPECT_EQ(test_srv_stop(&s), 0);
	/* a server without counters */
	const char *none[] = { "--counters", "0", NULL };

	ASSERT_EQ(start(&s, none), 0);
	c = client_of(&s, 1, 5000);
	ASSERT_TRUE(c != NULL);
	EXPECT_EQ(rkv_counter_open(c, "x", &a), -ENODEV);
	rkv_client_destroy(c);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

/* -------------------------------------------------- concurrent pushes */

#define SUM_LEN 3000u
#define SUM_SHARD 1000u

static void sum_child(const char *list, unsigned id, unsigned pushes)
{
	struct pc p;
	struct rkv_ps_tensor *t;
	static float v[SUM_LEN];

	if (pc_open(&p, list, 30000))
		_exit(3);
	if (rkv_ps_tensor_open(p.ps, "sum", RKV_PS_FLOAT32, SUM_LEN, &t))
		_exit(4);
	for (unsigned i = 0; i < SUM_LEN; i++)
		v[i] = (float)(id + 1 + i % 5);
	for (unsigned k = 0; k < pushes; k++)
		if (rkv_ps_push(t, RKV_PS_SUM, v, SUM_LEN, 0))
			_exit(5);
	rkv_ps_tensor_close(t);
	pc_close(&p);
	_exit(0);
}

static void t_concurrent_sum(void)
{
	const unsigned nproc = 8, pushes = g_verbs ? 10 : 25;
	struct test_srv s[2];
	struct pc p;
	struct rkv_ps_tensor *t;
	char list[1024];
	static float buf[SUM_LEN];
	pid_t pid[8];
	uint64_t vmin, vmax;

	ASSERT_EQ(two_servers(s, NULL, list, sizeof(list), &p, "sum", SUM_LEN,
			      SUM_SHARD),
		  0);
	uint64_t t0 = rkv_now_ms();

	for (unsigned i = 0; i < nproc; i++) {
		pid[i] = fork();
		if (pid[i] == 0)
			sum_child(list, i, pushes);
	}
	for (unsigned i = 0; i < nproc; i++) {
		int st = -1;

		waitpid(pid[i], &st, 0);
		EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	printf("#   %u processes x %u pushes of %u floats: %llu ms\n", nproc,
	       pushes, SUM_LEN, (unsigned long long)(rkv_now_ms() - t0));
	ASSERT_EQ(rkv_ps_tensor_open(p.ps, "sum", RKV_PS_FLOAT32, SUM_LEN, &t),
		  0);
	EXPECT_EQ(rkv_ps_pull(t, buf, SUM_LEN, &vmin, &vmax), 0);
	EXPECT_EQ(vmin, nproc * pushes);
	EXPECT_EQ(vmax, nproc * pushes);
	int bad = 0;

	for (unsigned i = 0; i < SUM_LEN; i++) {
		/* sum over ids of (id + 1 + i % 5), pushes times: exact in
		 * float (integers far below 2^24) */
		float want = (float)(pushes * (nproc * (nproc + 1) / 2 +
					       nproc * (i % 5)));

		bad += buf[i] != want;
	}
	EXPECT_EQ(bad, 0);
	rkv_ps_tensor_close(t);
	pc_close(&p);
	stop_all(s, 2);
}


/* ------------------------------------------ ASSIGN (write-only path) */

#define AR_LEN 4096u
#define AR_SHARD 1024u
#define AR_BASE 1000.0f

/* A shard written only by ASSIGN (AR_BASE or AR_BASE + 1) and SUM (+1)
 * holds A + k or k for an integer k, the same in every element. */
static int ar_shard_ok(const float *buf, uint64_t s)
{
	float v = buf[s * AR_SHARD];

	if (shard_uniform(buf, AR_LEN, AR_SHARD, s))
		return -1;
	if (v >= AR_BASE)
		v -= v >= AR_BASE + 1 ? AR_BASE + 1 : AR_BASE;
	return v == (float)(int)v && v >= 0 ? 0 : -1;
}

/* Child: pushes ASSIGN (kind 0) of AR_BASE + id % 2, SUM (kind 1) of
 * ones, or pulls (kind 2, checking every shard), n times. */
static void ar_child(const char *list, int kind, unsigned id, unsigned n)
{
	struct pc p;
	struct rkv_ps_tensor *t;
	static float v[AR_LEN];

	if (pc_open(&p, list, 20000))
		_exit(3);
	if (rkv_ps_tensor_open(p.ps, "ar", RKV_PS_FLOAT32, AR_LEN, &t))
		_exit(4);
	for (unsigned i = 0; i < AR_LEN; i++)
		v[i] = kind == 0 ? AR_BASE + (float)(id % 2) : 1;
	for (unsigned k = 0; k < n; k++) {
		int rc = kind == 2 ? rkv_ps_pull(t, v, AR_LEN, NULL, NULL) :
				     rkv_ps_push(t, kind ? RKV_PS_SUM :
							   RKV_PS_ASSIGN,
						 v, AR_LEN, 0);

		if (rc) {
			printf("#   child %u: %s\n", id, strerror(-rc));
			fflush(stdout);
			_exit(5);
		}
		for (unsigned s = 0; kind == 2 && s < AR_LEN / AR_SHARD; s++)
			if (ar_shard_ok(v, s))
				_exit(6);
	}
	rkv_ps_tensor_close(t);
	pc_close(&p);
	_exit(0);
}

/* ASSIGN racing SUM on the same shards: every push counts exactly once in
 * each shard's version, a shard is always one push's result, and pulls
 * during the race never see a mixture. */
static void t_assign_race(void)
{
	const unsigned n = g_verbs ? 20 : 60, kinds[] = { 0, 0, 1, 1, 2 };
	const unsigned nproc = sizeof(kinds) / sizeof(kinds[0]);
	const char *extra[] = { "--grace", "300", NULL };
	struct test_srv s[2];
	struct pc p;
	struct rkv_ps_tensor *t;
	char list[1024];
	static float buf[AR_LEN];
	pid_t pid[8];
	uint64_t vmin, vmax;

	ASSERT_EQ(two_servers(s, extra, list, sizeof(list), &p, "ar", AR_LEN,
			      AR_SHARD),
		  0);
	for (unsigned i = 0; i < nproc; i++) {
		pid[i] = fork();
		if (pid[i] == 0)
			ar_child(list, (int)kinds[i], i, n);
	}
	for (unsigned i = 0; i < nproc; i++) {
		int st = -1;

		waitpid(pid[i], &st, 0);
		EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	ASSERT_EQ(rkv_ps_tensor_open(p.ps, "ar", RKV_PS_FLOAT32, AR_LEN, &t),
		  0);
	EXPECT_EQ(rkv_ps_pull(t, buf, AR_LEN, &vmin, &vmax), 0);
	EXPECT_EQ_U64(vmin, 4ull * n);
	EXPECT_EQ_U64(vmax, 4ull * n);
	for (unsigned i = 0; i < AR_LEN / AR_SHARD; i++)
		EXPECT_EQ(ar_shard_ok(buf, i), 0);
	rkv_ps_tensor_close(t);
	pc_close(&p);
	stop_all(s, 2);
}

/* ASSIGN versions and values in one process, mixed with SUM; a handle of
 * a deleted and re-created tensor still gets -ESTALE on ASSIGN (the
 * write-only path must not write over the new incarnation); pulls into
 * more buffers at once than the engine keeps registrations for. */
static void t_assign_versions(void)
{
	const uint64_t len = 70000; /* 5 shards, the last one short */
	struct test_srv s[1];
	struct pc p;
	struct rkv_ps_tensor *t, *t2, *u[12];
	struct rkv_ps_req *r[12];
	static float v[70000], w[70000], many[12][4096];
	uint64_t vmin, vmax;
	char name[16];

	ASSERT_EQ(start(&s[0], NULL), 0);
	ASSERT_EQ(pc_open(&p, s[0].addr, 10000), 0);
	ASSERT_EQ(rkv_ps_tensor_create(p.ps, "av", RKV_PS_FLOAT32, len, 0,
				       NULL), 0);
	ASSERT_EQ(rkv_ps_tensor_open(p.ps, "av", RKV_PS_FLOAT32, len, &t), 0);
	for (uint64_t i = 0; i < len; i++)
		v[i] = (float)(i % 1000);
	for (unsigned k = 1; k <= 3; k++) {
		EXPECT_EQ(rkv_ps_push(t, RKV_PS_ASSIGN, v, len, 0), 0);
		EXPECT_EQ(rkv_ps_pull(t, w, len, &vmin, &vmax), 0);
		EXPECT_EQ_U64(vmin, k);
		EXPECT_EQ_U64(vmax, k);
	}
	EXPECT_EQ(memcmp(v, w, sizeof(v)), 0);
	EXPECT_EQ(rkv_ps_push(t, RKV_PS_SUM, v, len, 0), 0);
	EXPECT_EQ(rkv_ps_push(t, RKV_PS_ASSIGN, v, len, 0), 0);
	EXPECT_EQ(rkv_ps_push(t, RKV_PS_SUM, v, len, 0), 0);
	EXPECT_EQ(rkv_ps_pull(t, w, len, &vmin, &vmax), 0);
	EXPECT_EQ_U64(vmin, 6);
	EXPECT_EQ_U64(vmax, 6);
	int bad = 0;

	for (uint64_t i = 0; i < len; i++)
		bad += w[i] != 2 * v[i];
	EXPECT_EQ(bad, 0);
	/* delete and re-create under the old handle */
	EXPECT_EQ(rkv_ps_tensor_delete(p.ps, "av"), 0);
	ASSERT_EQ(rkv_ps_tensor_create(p.ps, "av", RKV_PS_FLOAT32, len, 0,
				       NULL), 0);
	ASSERT_EQ(rkv_ps_tensor_open(p.ps, "av", RKV_PS_FLOAT32, len, &t2), 0);
	EXPECT_EQ(rkv_ps_pull(t2, w, len, NULL, NULL), 0);
	EXPECT_EQ(rkv_ps_push(t, RKV_PS_ASSIGN, v, len, 0), -ESTALE);
	EXPECT_EQ(rkv_ps_pull(t2, w, len, &vmin, &vmax), 0);
	EXPECT_EQ_U64(vmax, 0);
	EXPECT_EQ(w[len - 1], 0);
	rkv_ps_tensor_close(t);
	rkv_ps_tensor_close(t2);
	/* 12 pulls in flight into 12 buffers */
	for (unsigned i = 0; i < 12; i++) {
		snprintf(name, sizeof(name), "m%u", i);
		for (unsigned j = 0; j < 4096; j++)
			v[j] = (float)(i * 10000 + j);
		ASSERT_EQ(rkv_ps_tensor_create(p.ps, name, RKV_PS_FLOAT32,
					       4096, 1024, v), 0);
		ASSERT_EQ(rkv_ps_tensor_open(p.ps, name, RKV_PS_FLOAT32, 4096,
					     &u[i]), 0);
	}
	for (unsigned i = 0; i < 12; i++)
		ASSERT_EQ(rkv_ps_pull_async(u[i], many[i], 4096, &r[i]), 0);
	bad = 0;
	for (unsigned i = 0; i < 12; i++) {
		EXPECT_EQ(rkv_ps_wait(r[i], NULL, NULL), 0);
		for (unsigned j = 0; j < 4096; j++)
			bad += many[i][j] != (float)(i * 10000 + j);
		rkv_ps_tensor_close(u[i]);
	}
	EXPECT_EQ(bad, 0);
	pc_close(&p);
	stop_all(s, 1);
}

/* ------------------------------------------------ killed in a push */

#define KILL_LEN 4096u
#define KILL_SHARD 1024u

/* Push all-ones SUM forever (run_ms 0) or for run_ms, writing a byte to
 * fd after each acknowledged push. */
static void kill_child(const char *list, uint64_t run_ms, int fd)
{
	struct pc p;
	struct rkv_ps_tensor *t;
	static float v[KILL_LEN];

	if (pc_open(&p, list, 20000))
		_exit(3);
	if (rkv_ps_tensor_open(p.ps, "kill", RKV_PS_FLOAT32, KILL_LEN, &t))
		_exit(4);
	for (unsigned i = 0; i < KILL_LEN; i++)
		v[i] = 1;
	uint64_t end = rkv_now_ms() + run_ms;

	while (!run_ms || rkv_now_ms() < end) {
		int rc = rkv_ps_push(t, RKV_PS_SUM, v, KILL_LEN, 0);

		if (rc) {
			printf("#   pusher: %s\n", strerror(-rc));
			fflush(stdout);
			_exit(5);
		}
		(void)!write(fd, "x", 1);
	}
	rkv_ps_tensor_close(t);
	pc_close(&p);
	_exit(0);
}

static void t_kill_during_push(void)
{
	const char *extra[] = { "--lease", "50", "--grace", "300", NULL };
	const unsigned nkill = 3, nlive = 2;
	const uint64_t live_ms = 1500; /* longer than the kills take */
	struct test_srv s[2];
	struct pc p;
	struct rkv_ps_tensor *t;
	char list[1024];
	static float buf[KILL_LEN];
	pid_t pid[5];
	int pfd[2];

	ASSERT_EQ(two_servers(s, extra, list, sizeof(list), &p, "kill", KILL_LEN,
			      KILL_SHARD),
		  0);
	ASSERT_EQ(pipe(pfd), 0);
	srand(7);
	for (unsigned i = 0; i < nkill + nlive; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			close(pfd[0]);
			kill_child(list, i < nkill ? 0 : live_ms, pfd[1]);
		}
	}
	close(pfd[1]);
	for (unsigned i = 0; i < nkill; i++) {
		usleep((useconds_t)(100000 + rand() % 200000));
		kill(pid[i], SIGKILL);
		waitpid(pid[i], NULL, 0);
	}
	uint64_t t0 = rkv_now_ms();
	uint64_t acked = 0;
	char ch[256];
	ssize_t r;

	/* a byte per acknowledged push: drain the pipe while the live
	 * workers run (more than a pipe's 64 KiB of pushes would block them
	 * forever), until the last writer has exited */
	while ((r = read(pfd[0], ch, sizeof(ch))) > 0)
		acked += (uint64_t)r;
	close(pfd[0]);
	for (unsigned i = nkill; i < nkill + nlive; i++) {
		int st = -1;

		waitpid(pid[i], &st, 0);
		EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	printf("#   live workers finished %llu ms after the last kill\n",
	       (unsigned long long)(rkv_now_ms() - t0));
	/* every lock is free again within the lease: a push now is quick */
	ASSERT_EQ(rkv_ps_tensor_open(p.ps, "kill", RKV_PS_FLOAT32, KILL_LEN,
				     &t), 0);
	EXPECT_EQ(rkv_ps_pull(t, buf, KILL_LEN, NULL, NULL), 0);
	uint64_t lo = UINT64_MAX, hi = 0;

	for (uint64_t sh = 0; sh < KILL_LEN / KILL_SHARD; sh++) {
		/* no partial update inside a shard */
		EXPECT_EQ(shard_uniform(buf, KILL_LEN, KILL_SHARD, sh), 0);
		uint64_t val = (uint64_t)buf[sh * KILL_SHARD];

		lo = val < lo ? val : lo;
		hi = val > hi ? val : hi;
	}
	/* every acknowledged push is in every shard; a killed worker adds
	 * at most one unacknowledged push to some shards */
	printf("#   acknowledged %llu, shards hold %llu..%llu\n",
	       (unsigned long long)acked, (unsigned long long)lo,
	       (unsigned long long)hi);
	EXPECT_TRUE(lo >= acked);
	EXPECT_TRUE(hi <= acked + nkill);
	EXPECT_TRUE(acked >= 10);
	static float ones[KILL_LEN];

	for (unsigned i = 0; i < KILL_LEN; i++)
		ones[i] = 1;
	t0 = rkv_now_ms();
	EXPECT_EQ(rkv_ps_push(t, RKV_PS_SUM, ones, KILL_LEN, 0), 0);
	EXPECT_TRUE(rkv_now_ms() - t0 < 50 + 1000 * RKV_TEST_SLACK);
	rkv_ps_tensor_close(t);
	pc_close(&p);
	stop_all(s, 2);
}

/* ------------------------------------------------ pulls during pushes */

#define MIX_LEN 8192u
#define MIX_SHARD 2048u

static void t_pull_no_mix(void)
{
	/* every push unlinks a block that is reused only after the grace
	 * period: keep it short so fast pushes do not fill the region */
	const char *extra[] = { "--grace", "300", NULL };
	struct test_srv s[2];
	struct pc p;
	struct rkv_ps_tensor *t;
	char list[1024];
	static float buf[MIX_LEN];
	pid_t pid[2];
	const uint64_t run_ms = 1500;

	ASSERT_EQ(two_servers(s, extra, list, sizeof(list), &p, "mix", MIX_LEN,
			      MIX_SHARD),
		  0);
	for (int w = 0; w < 2; w++) {
		pid[w] = fork();
		if (pid[w] == 0) {
			struct pc cp;
			struct rkv_ps_tensor *ct;
			static float v[MIX_LEN];
			uint64_t end = rkv_now_ms() + run_ms;

			if (pc_open(&cp, list, 10000) ||
			    rkv_ps_tensor_open(cp.ps, "mix", RKV_PS_FLOAT32,
					       MIX_LEN, &ct))
				_exit(3);
			/* constant vectors, a different value each push */
			for (unsigned k = 1; rkv_now_ms() < end; k++) {
				float val = (float)(k * 2 + (unsigned)w);

				for (unsigned i = 0; i < MIX_LEN; i++)
					v[i] = val;
				int prc = rkv_ps_push(ct, RKV_PS_ASSIGN, v,
						      MIX_LEN, 0);

				if (prc) {
					printf("#   pusher %d: %s\n", w,
					       strerror(-prc));
					fflush(stdout);
					_exit(4);
				}
			}
			rkv_ps_tensor_close(ct);
			pc_close(&cp);
			_exit(0);
		}
	}
	ASSERT_EQ(rkv_ps_tensor_open(p.ps, "mix", RKV_PS_FLOAT32, MIX_LEN, &t),
		  0);
	uint64_t end = rkv_now_ms() + run_ms, pulls = 0, mixed = 0;
	uint64_t last_v = 0, vmin, vmax;
	int back = 0;

	while (rkv_now_ms() < end) {
		EXPECT_EQ(rkv_ps_pull(t, buf, MIX_LEN, &vmin, &vmax), 0);
		for (uint64_t sh = 0; sh < MIX_LEN / MIX_SHARD; sh++)
			mixed += shard_uniform(buf, MIX_LEN, MIX_SHARD, sh) != 0;
		back += vmax < last_v; /* versions never go back */
		last_v = vmax;
		pulls++;
	}
	for (int w = 0; w < 2; w++) {
		int st = -1;

		waitpid(pid[w], &st, 0);
		EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	printf("#   %llu pulls during pushes, last version %llu\n",
	       (unsigned long long)pulls, (unsigned long long)last_v);
	EXPECT_EQ(mixed, 0);
	EXPECT_EQ(back, 0);
	EXPECT_TRUE(pulls > 5 && last_v > 5);
	rkv_ps_tensor_close(t);
	pc_close(&p);
	stop_all(s, 2);
}

/* ----------------------------------------------------------- barrier */

static void t_barrier(void)
{
	const unsigned n = 5, rounds = 15;
	struct test_srv s[2];
	struct rkv_client *c;
	struct rkv_ps_barrier *b;
	char list[1024], bname[40], aname[40];
	pid_t pid[5];

	ASSERT_EQ(two_servers(s, NULL, list, sizeof(list), NULL, NULL, 0, 0),
		  0);
	snprintf(bname, sizeof(bname), "bar-%d", (int)getpid());
	snprintf(aname, sizeof(aname), "arr-%d", (int)getpid());
	for (unsigned w = 0; w < n; w++) {
		pid[w] = fork();
		if (pid[w] == 0) {
			struct rkv_client *cc = client_list(list, 10000);
			struct rkv_ps_barrier *cb;
			uint64_t arr, v;

			if (!cc || rkv_ps_barrier_create(cc, bname, n, &cb) ||
			    rkv_counter_open(cc, aname, &arr))
				_exit(3);
			for (unsigned r = 1; r <= rounds; r++) {
				if (w == r % n)
					usleep(20000); /* a late one */
				if (rkv_counter_add(cc, arr, 1, NULL))
					_exit(4);
				if (rkv_ps_barrier_wait(cb, 20000))
					_exit(5);
				/* everyone arrived for round r */
				if (rkv_counter_read(cc, arr, &v) ||
				    v < (uint64_t)r * n)
					_exit(6);
			}
			rkv_ps_barrier_destroy(cb);
			rkv_client_destroy(cc);
			_exit(0);
		}
	}
	for (unsigned w = 0; w < n; w++) {
		int st = -1;

		waitpid(pid[w], &st, 0);
		EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		if (WIFEXITED(st) && WEXITSTATUS(st))
			printf("#   worker %u exit %d\n", w, WEXITSTATUS(st));
	}
	/* a barrier nobody else reaches times out */
	c = client_list(list, 5000);
	ASSERT_TRUE(c != NULL);
	ASSERT_EQ(rkv_ps_barrier_create(c, "lonely", 2, &b), 0);
	uint64_t t0 = rkv_now_ms();

	EXPECT_EQ(rkv_ps_barrier_wait(b, 200), -ETIMEDOUT);
	EXPECT_TRUE(rkv_now_ms() - t0 >= 200);
	EXPECT_TRUE(rkv_now_ms() - t0 < 2000 * RKV_TEST_SLACK);
	rkv_ps_barrier_destroy(b);
	/* one participant: never waits */
	ASSERT_EQ(rkv_ps_barrier_create(c, "solo", 1, &b), 0);
	for (int i = 0; i < 3; i++)
		EXPECT_EQ(rkv_ps_barrier_wait(b, 100), 0);
	rkv_ps_barrier_destroy(b);
	rkv_client_destroy(c);
	stop_all(s, 2);
}

/* ----------------------------------------------------------- example */

static int read_params(const char *path, double *p, int max)
{
	FILE *f = fopen(path, "r");
	int n = 0;

	if (!f)
		return -1;
	while (n < max && fscanf(f, "%lf", &p[n]) == 1)
		n++;
	fclose(f);
	return n;
}

static void t_example(void)
{
	char bin[600], cmd[2000], f1[64], f2[64];
	double a[4096], b[4096];
	int na, nb, rc;

	snprintf(bin, sizeof(bin), "%s/rkv-example-train", test_bin_dir());
	if (access(bin, X_OK)) {
		rkv_test_skip("%s not built", bin);
		return;
	}
	snprintf(f1, sizeof(f1), "/tmp/rkv-itest-ps-%d-dist", (int)getpid());
	snprintf(f2, sizeof(f2), "/tmp/rkv-itest-ps-%d-single", (int)getpid());
	snprintf(cmd, sizeof(cmd),
		 "%s --provider %s --workers 4 --nservers 2 --steps 20 "
		 "--out %s > /dev/null", bin, g_prov, f1);
	rc = system(cmd);
	EXPECT_EQ(rc, 0);
	snprintf(cmd, sizeof(cmd),
		 "%s --single --workers 4 --steps 20 --out %s > /dev/null", bin,
		 f2);
	EXPECT_EQ(system(cmd), 0);
	na = read_params(f1, a, 4096);
	nb = read_params(f2, b, 4096);
	EXPECT_TRUE(na > 10);
	EXPECT_EQ(na, nb);
	int bad = 0;
	double worst = 0;

	for (int i = 0; i < na && i < nb; i++) {
		double d = fabs(a[i] - b[i]);
		double tol = 1e-4 * (fabs(b[i]) > 1 ? fabs(b[i]) : 1);

		if (d > worst)
			worst = d;
		bad += d > tol;
	}
	printf("#   %d parameters, largest difference %.3g\n", na, worst);
	EXPECT_EQ(bad, 0);
	unlink(f1);
	unlink(f2);
}

int main(int argc, char **argv)
{
	g_prov = test_itest_init(argc, argv, 300);
	if (!g_prov)
		return 77;
	g_verbs = !strcmp(g_prov, "verbs");
	RKV_TEST(t_basic);
	RKV_TEST(t_bad_input);
	RKV_TEST(t_counters);
	RKV_TEST(t_concurrent_sum);
	RKV_TEST(t_assign_race);
	RKV_TEST(t_assign_versions);
	RKV_TEST(t_kill_during_push);
	RKV_TEST(t_pull_no_mix);
	RKV_TEST(t_barrier);
	RKV_TEST(t_example);
	return rkv_test_done();
}
