/* SPDX-License-Identifier: MIT */
/*
 * itest_emb.c - integration tests of the parameter server's sparse
 * embedding tables (rkv_emb_* in client/rkv_ps.h): real rkv-server
 * processes and librkv clients on one provider (--provider
 * tcp|shm|verbs).
 *
 * Covers lazy rows (a 10M-row table is one stored record; an untouched
 * row reads as the documented seeded formula, computed here
 * independently), SGD, Adagrad and Adam steps bit for bit against a
 * reference written here with duplicate ids, rows spread over two servers,
 * concurrent pushing processes that lose no step (weights and the stored
 * step count agree), pushers killed with SIGKILL in the middle of pushes
 * (every row is one whole step or none, the locks come back after the
 * lease), pushers paused past the lease and grace and woken (no step lost
 * or doubled), generations (rows of an older table read as initial, a newer
 * table's rows are -ESTALE to an old handle, delete removes every row),
 * and bad input that changes nothing.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ps_internal.h"
#include "rkv.h"
#include "rkv_ps.h"
#include "rtime.h"
#include "srv.h"
#include "test.h"

static const char *g_prov = "tcp";
static int g_verbs;

/* ------------------------------------------------------------ helpers */

struct pc {
	struct rkv_client *c;
	struct rkv_ps *ps;
};

static int pc_open(struct pc *p, const char *list, int read_only)
{
	struct rkv_client_opts o;

	p->c = NULL;
	p->ps = NULL;
	rkv_client_opts_init(&o);
	o.servers = list;
	o.timeout_ms = 20000;
	o.read_only = read_only;
	o.max_inflight = 256;
	if (rkv_client_create(&o, &p->c))
		return -1;
	if (rkv_ps_create(p->c, &p->ps)) {
		rkv_client_destroy(p->c);
		return -1;
	}
	return 0;
}

static void pc_close(struct pc *p)
{
	rkv_ps_destroy(p->ps);
	rkv_client_destroy(p->c);
}

/* n servers started with extra (may be NULL), their list in list. */
static int servers(struct test_srv *s, unsigned n, const char *const *extra,
		   char *list, size_t cap)
{
	list[0] = '\0';
	for (unsigned i = 0; i < n; i++) {
		int rc = test_srv_start(&s[i], g_prov, extra);

		if (rc) {
			printf("#   cannot start rkv-server (%s): %s\n", g_prov,
			       strerror(-rc));
			return -1;
		}
		if (i)
			strncat(list, ",", cap - strlen(list) - 1);
		strncat(list, s[i].addr, cap - strlen(list) - 1);
	}
	return 0;
}

static void stop_all(struct test_srv *s, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		EXPECT_EQ(test_srv_stop(&s[i]), 0);
}

static uint64_t keys_on(struct rkv_client *c, unsigned nsrv)
{
	uint64_t k = 0;

	for (unsigned i = 0; i < nsrv; i++) {
		struct rkv_server_stats st;

		if (rkv_server_stats(c, i, &st) == 0)
			k += st.keys;
	}
	return k;
}

/* The stored header of row id of table name: 0, or -errno. */
static int row_hdr(struct rkv_client *c, const char *name, uint64_t id,
		   struct ps_shard_hdr *h)
{
	static char buf[1 << 16];
	char key[256];
	size_t vl = 0;
	int n = snprintf(key, sizeof(key), "emb/%s/%llu", name,
			 (unsigned long long)id);
	int rc = rkv_get(c, key, (size_t)n, buf, sizeof(buf), &vl);

	if (rc)
		return rc;
	if (vl < sizeof(*h))
		return -EIO;
	memcpy(h, buf, sizeof(*h));
	return 0;
}

/* ------------------------------------------- the reference, written here */

/* splitmix64's output function, as rkv_ps.h names it. */
static uint64_t ref_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static float ref_init(uint64_t seed, uint64_t id, uint32_t dim, uint32_t j,
		      float scale)
{
	uint64_t z = ref_mix(seed + 0x9e3779b97f4a7c15ull * (id * dim + j + 1));
	float u = (float)(z >> 40) / 16777216.0f;

	return (2.0f * u - 1.0f) * scale;
}

struct ref_row {
	float w[16], a[16], v[16];
	uint64_t t;
	int live;
};

struct ref {
	struct rkv_emb_conf c;
	struct ref_row rows[64];
};

static struct ref_row *ref_row(struct ref *r, uint64_t id)
{
	struct ref_row *x = &r->rows[id];

	if (!x->live) {
		for (uint32_t j = 0; j < r->c.dim; j++) {
			x->w[j] = ref_init(r->c.seed, id, r->c.dim, j,
					   r->c.init_scale);
			x->a[j] = r->c.optim == RKV_EMB_ADAGRAD ?
					  r->c.init_accum : 0.0f;
			x->v[j] = 0.0f;
		}
		x->live = 1;
	}
	return x;
}

/* One push: sum duplicates in order, then one step per distinct row. */
static void ref_push(struct ref *r, const uint64_t *ids, size_t n,
		     const float *g)
{
	static float sum[64][16];
	int seen[64] = { 0 };
	uint32_t d = r->c.dim;

	for (size_t k = 0; k < n; k++) {
		for (uint32_t j = 0; j < d; j++)
			sum[ids[k]][j] = seen[ids[k]] ?
						 sum[ids[k]][j] + g[k * d + j] :
						 g[k * d + j];
		seen[ids[k]] = 1;
	}
	for (uint64_t id = 0; id < 64; id++) {
		struct ref_row *x;
		const float *s = sum[id];

		if (!seen[id])
			continue;
		x = ref_row(r, id);
		x->t++;
		for (uint32_t j = 0; j < d; j++) {
			if (r->c.optim == RKV_EMB_SGD) {
				x->w[j] -= r->c.lr * s[j];
			} else if (r->c.optim == RKV_EMB_ADAGRAD) {
				x->a[j] += s[j] * s[j];
				x->w[j] -= r->c.lr * s[j] /
					   (sqrtf(x->a[j]) + r->c.eps);
			} else {
				double t = (double)x->t;
				float sc = (float)(r->c.lr /
						   (1 - pow(r->c.beta1, t)));
				float cc = (float)sqrt(1 - pow(r->c.beta2, t));

				x->a[j] = r->c.beta1 * x->a[j] +
					  (1.0f - r->c.beta1) * s[j];
				x->v[j] = r->c.beta2 * x->v[j] +
					  (1.0f - r->c.beta2) * (s[j] * s[j]);
				x->w[j] -= sc * x->a[j] /
					   (sqrtf(x->v[j]) / cc + r->c.eps);
			}
		}
	}
}

/* ---------------------------------------------------------- the tests */

/* Lazy rows: the seeded formula, nothing stored, spread over servers. */
static void t_lazy(void)
{
	struct test_srv s[2];
	struct pc p;
	struct rkv_ps_emb *e = NULL;
	struct rkv_emb_conf c;
	char list[512];
	static float rows[4][64];
	uint64_t ids[4] = { 0, 9999999, 4242, 0 };

	ASSERT_EQ(servers(s, 2, NULL, list, sizeof(list)), 0);
	ASSERT_EQ(pc_open(&p, list, 0), 0);
	rkv_emb_conf_init(&c);
	c.num_rows = 10000000;
	c.dim = 64;
	c.init_scale = 0.5f;
	c.seed = 99;
	uint64_t k0 = keys_on(p.c, 2);

	EXPECT_EQ(rkv_emb_create(p.ps, "big", &c), 0);
	EXPECT_EQ(rkv_emb_create(p.ps, "big", &c), -EEXIST);
	EXPECT_EQ(keys_on(p.c, 2), k0 + 1); /* one record for 10M rows */
	ASSERT_EQ(rkv_emb_open(p.ps, "big", &e), 0);
	EXPECT_EQ(rkv_emb_pull(e, ids, 4, &rows[0][0]), 0);
	int bad = 0;

	for (int k = 0; k < 4; k++)
		for (uint32_t j = 0; j < 64; j++)
			bad += rows[k][j] != ref_init(99, ids[k], 64, j, 0.5f);
	EXPECT_EQ(bad, 0);
	EXPECT_TRUE(rows[0][0] != rows[0][1] && rows[1][0] != rows[0][0]);
	EXPECT_EQ(keys_on(p.c, 2), k0 + 1); /* pulls write nothing */
	/* pushed rows land on both servers */
	static uint64_t many[400];
	static float g[400][64];

	for (int i = 0; i < 400; i++)
		many[i] = (uint64_t)i * 24989;
	EXPECT_EQ(rkv_emb_push(e, many, 400, &g[0][0]), 0);
	struct rkv_server_stats s0, s1;

	EXPECT_EQ(rkv_server_stats(p.c, 0, &s0), 0);
	EXPECT_EQ(rkv_server_stats(p.c, 1, &s1), 0);
	printf("#   400 rows: %llu and %llu keys on the two servers\n",
	       (unsigned long long)s0.keys, (unsigned long long)s1.keys);
	EXPECT_TRUE(s0.keys > 100 && s1.keys > 100);
	EXPECT_EQ(s0.keys + s1.keys, k0 + 401);
	rkv_emb_close(e);
	pc_close(&p);
	stop_all(s, 2);
}

/* Every optimizer bit for bit against the reference above. */
static void t_exact(void)
{
	const enum rkv_emb_optim opts[3] = { RKV_EMB_SGD, RKV_EMB_ADAGRAD,
					     RKV_EMB_ADAM };
	struct test_srv s[2];
	struct pc p;
	char list[512];

	ASSERT_EQ(servers(s, 2, NULL, list, sizeof(list)), 0);
	ASSERT_EQ(pc_open(&p, list, 0), 0);
	srand(3);
	for (int o = 0; o < 3; o++) {
		static struct ref r;
		struct rkv_ps_emb *e = NULL;
		char name[32];
		uint64_t ids[48];
		static float g[48 * 16], got[64 * 16];
		uint64_t all[64];
		int bad = 0;

		memset(&r, 0, sizeof(r));
		rkv_emb_conf_init(&r.c);
		r.c.num_rows = 64;
		r.c.dim = 16;
		r.c.optim = opts[o];
		r.c.lr = 0.03f;
		r.c.beta1 = 0.85f;
		r.c.beta2 = 0.995f;
		r.c.eps = o == 1 ? 1e-10f : 1e-7f;
		r.c.init_accum = 0.05f;
		r.c.init_scale = 0.2f;
		r.c.seed = 5 + (uint64_t)o;
		snprintf(name, sizeof(name), "ex%d", o);
		ASSERT_EQ(rkv_emb_create(p.ps, name, &r.c), 0);
		ASSERT_EQ(rkv_emb_open(p.ps, name, &e), 0);
		for (int i = 0; i < 64; i++)
			all[i] = (uint64_t)i;
		for (int step = 0; step < 15; step++) {
			for (int k = 0; k < 48; k++)
				ids[k] = (uint64_t)(rand() % 40);
			ids[1] = ids[7] = ids[30] = 9; /* duplicates */
			for (int k = 0; k < 48 * 16; k++)
				g[k] = (float)(rand() % 2001 - 1000) / 700.0f;
			EXPECT_EQ(rkv_emb_push(e, ids, 48, g), 0);
			ref_push(&r, ids, 48, g);
		}
		EXPECT_EQ(rkv_emb_pull(e, all, 64, got), 0);
		for (int i = 0; i < 64; i++)
			for (int j = 0; j < 16; j++)
				bad += got[i * 16 + j] != ref_row(&r, all[i])->w[j];
		printf("#   %s: %d of 1024 weights differ from the reference\n",
		       rkv_emb_optim_str(opts[o]), bad);
		EXPECT_EQ(bad, 0);
		struct ps_shard_hdr h;

		EXPECT_EQ(row_hdr(p.c, name, 9, &h), 0);
		EXPECT_EQ(h.version, 15); /* row 9: one step per push */
		rkv_emb_close(e);
	}
	pc_close(&p);
	stop_all(s, 2);
}

#define CC_ROWS 32u

/* Child: push every row CC_ROWS ids (each twice) with gradient 1, n times;
 * a byte to fd after each acknowledged push (fd < 0: none). */
static void push_child(const char *list, const char *name, unsigned n, int fd)
{
	struct pc p;
	struct rkv_ps_emb *e;
	uint64_t ids[2 * CC_ROWS];
	static float g[2 * CC_ROWS * 8];

	if (pc_open(&p, list, 0))
		_exit(3);
	if (rkv_emb_open(p.ps, name, &e))
		_exit(4);
	for (unsigned i = 0; i < 2 * CC_ROWS; i++)
		ids[i] = i % CC_ROWS;
	for (unsigned i = 0; i < 2 * CC_ROWS * 8; i++)
		g[i] = 0.5f;
	for (unsigned k = 0; !n || k < n; k++) {
		int rc = rkv_emb_push(e, ids, 2 * CC_ROWS, g);

		if (rc) {
			printf("#   pusher: %s\n", strerror(-rc));
			fflush(stdout);
			_exit(5);
		}
		if (fd >= 0)
			(void)!write(fd, "x", 1);
	}
	rkv_emb_close(e);
	pc_close(&p);
	_exit(0);
}

/* Each row of table name: weight == -steps (SGD, lr 1, gradient 0.5
 * twice, rows start at 0), every element alike, and the stored step count
 * equal to it.  *lo and *hi get the smallest and largest. */
static int rows_consistent(struct pc *p, const char *name, uint64_t *lo,
			   uint64_t *hi)
{
	struct rkv_ps_emb *e;
	uint64_t ids[CC_ROWS];
	static float w[CC_ROWS * 8];
	int bad = 0;

	*lo = UINT64_MAX;
	*hi = 0;
	if (rkv_emb_open(p->ps, name, &e))
		return -1;
	for (unsigned i = 0; i < CC_ROWS; i++)
		ids[i] = i;
	if (rkv_emb_pull(e, ids, CC_ROWS, w)) {
		rkv_emb_close(e);
		return -1;
	}
	for (unsigned i = 0; i < CC_ROWS; i++) {
		struct ps_shard_hdr h = { 0 };
		uint64_t steps = (uint64_t)-w[i * 8];

		for (unsigned j = 1; j < 8; j++)
			bad += w[i * 8 + j] != w[i * 8];
		if (row_hdr(p->c, name, i, &h) == 0)
			bad += h.version != steps;
		else
			bad += steps != 0;
		*lo = steps < *lo ? steps : *lo;
		*hi = steps > *hi ? steps : *hi;
	}
	rkv_emb_close(e);
	return bad;
}

static int sgd_table(struct pc *p, const char *name)
{
	struct rkv_emb_conf c;

	rkv_emb_conf_init(&c);
	c.num_rows = CC_ROWS;
	c.dim = 8;
	c.lr = 1.0f;
	c.init_scale = 0.0f;
	return rkv_emb_create(p->ps, name, &c);
}

/* nproc processes make `pushes` pushes each to the same rows of table
 * name on two servers (started with extra), while `pauses` times one of
 * them is SIGSTOPped for 600 ms (past lease 50 ms + grace 300 ms when
 * extra sets them), perhaps holding a row's lock; then every row must
 * hold exactly nproc * pushes steps. */
static void pushers_exact(const char *name, const char **extra,
			  unsigned nproc, unsigned pushes, unsigned pauses)
{
	struct test_srv s[2];
	struct pc p;
	char list[512];
	pid_t pid[8];
	uint64_t lo, hi;

	ASSERT_TRUE(nproc <= 8);
	ASSERT_EQ(servers(s, 2, extra, list, sizeof(list)), 0);
	ASSERT_EQ(pc_open(&p, list, 0), 0);
	ASSERT_EQ(sgd_table(&p, name), 0);
	for (unsigned i = 0; i < nproc; i++) {
		pid[i] = fork();
		if (pid[i] == 0)
			push_child(list, name, pushes, -1);
	}
	srand(13);
	for (unsigned round = 0; round < pauses; round++) {
		unsigned i = round % nproc;

		usleep((useconds_t)(20000 + rand() % 60000));
		kill(pid[i], SIGSTOP);
		usleep(600000);
		kill(pid[i], SIGCONT);
	}
	for (unsigned i = 0; i < nproc; i++) {
		int st = -1;

		waitpid(pid[i], &st, 0);
		EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	EXPECT_EQ(rows_consistent(&p, name, &lo, &hi), 0);
	printf("#   %u x %u pushes, %u pauses of 600 ms: rows hold "
	       "%llu..%llu steps\n", nproc, pushes, pauses,
	       (unsigned long long)lo, (unsigned long long)hi);
	EXPECT_EQ(lo, nproc * pushes);
	EXPECT_EQ(hi, nproc * pushes);
	pc_close(&p);
	stop_all(s, 2);
}

/* 6 processes pushing the same rows: no step lost or doubled. */
static void t_concurrent(void)
{
	pushers_exact("cc", NULL, 6, g_verbs ? 10 : 40, 0);
}

/* Pushers killed in the middle: each row is whole steps, every
 * acknowledged push in it, the locks back within the lease. */
static void t_killed(void)
{
	const char *extra[] = { "--lease", "50", "--grace", "300", NULL };
	const unsigned nkill = 3;
	struct test_srv s[2];
	struct pc p;
	char list[512], ch[256];
	pid_t pid[4];
	int pfd[2];
	uint64_t lo, hi, acked = 0;
	ssize_t n;

	ASSERT_EQ(servers(s, 2, extra, list, sizeof(list)), 0);
	ASSERT_EQ(pc_open(&p, list, 0), 0);
	ASSERT_EQ(sgd_table(&p, "kill"), 0);
	ASSERT_EQ(pipe(pfd), 0);
	srand(11);
	for (unsigned i = 0; i <= nkill; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			close(pfd[0]);
			push_child(list, "kill", i < nkill ? 0 : 200, pfd[1]);
		}
	}
	close(pfd[1]);
	for (unsigned i = 0; i < nkill; i++) {
		usleep((useconds_t)(80000 + rand() % 150000));
		kill(pid[i], SIGKILL);
		waitpid(pid[i], NULL, 0);
	}
	while ((n = read(pfd[0], ch, sizeof(ch))) > 0)
		acked += (uint64_t)n;
	close(pfd[0]);
	int st = -1;

	waitpid(pid[nkill], &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	EXPECT_EQ(rows_consistent(&p, "kill", &lo, &hi), 0);
	printf("#   acknowledged %llu pushes; rows hold %llu..%llu steps\n",
	       (unsigned long long)acked, (unsigned long long)lo,
	       (unsigned long long)hi);
	EXPECT_TRUE(lo >= acked);
	EXPECT_TRUE(hi <= acked + nkill);
	EXPECT_TRUE(acked >= 200);
	pc_close(&p);
	stop_all(s, 2);
}

/* Pushers paused (SIGSTOP) longer than the lease and the grace period,
 * perhaps holding a row's lock, then woken: the others took the lock over
 * meanwhile, and every push still counts exactly once. */
static void t_paused(void)
{
	const char *extra[] = { "--lease", "50", "--grace", "300", NULL };

	pushers_exact("pause", extra, 3, g_verbs ? 40 : 150, 4);
}

/* Generations, delete, forged rows, and bad input. */
static void t_generations_and_bad_input(void)
{
	struct test_srv s[1];
	struct pc p, ro;
	struct rkv_ps_emb *e1 = NULL, *e2 = NULL, *e3 = NULL;
	struct rkv_emb_conf c;
	char list[512];
	uint64_t ids[3] = { 1, 2, 3 }, bad_ids[2] = { 1, 50 };
	float g[3 * 4] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 }, w[3 * 4];
	struct ps_shard_hdr h;

	ASSERT_EQ(servers(s, 1, NULL, list, sizeof(list)), 0);
	ASSERT_EQ(pc_open(&p, list, 0), 0);
	rkv_emb_conf_init(&c);
	c.num_rows = 50;
	c.dim = 4;
	c.init_scale = 0.0f;
	c.lr = 0.5f;
	ASSERT_EQ(rkv_emb_create(p.ps, "g", &c), 0);
	ASSERT_EQ(rkv_emb_open(p.ps, "g", &e1), 0);
	EXPECT_EQ(rkv_emb_push(e1, ids, 3, g), 0);
	/* bad input: nothing changes */
	EXPECT_EQ(rkv_emb_push(e1, bad_ids, 2, g), -ERANGE);
	EXPECT_EQ(rkv_emb_pull(e1, bad_ids, 2, w), -ERANGE);
	EXPECT_EQ(row_hdr(p.c, "g", 1, &h), 0);
	EXPECT_EQ(h.version, 1);
	EXPECT_EQ(rkv_emb_push(e1, ids, 3, NULL), -EINVAL);
	EXPECT_EQ(rkv_emb_open(p.ps, "nope", &e3), -ENOENT);
	EXPECT_EQ(rkv_emb_open(p.ps, "a/b", &e3), -EINVAL);
	struct rkv_emb_conf b = c;

	b.dim = 0;
	EXPECT_EQ(rkv_emb_create(p.ps, "b", &b), -EINVAL);
	b = c;
	b.lr = NAN;
	EXPECT_EQ(rkv_emb_create(p.ps, "b", &b), -EINVAL);
	b = c;
	b.optim = RKV_EMB_ADAM;
	b.beta1 = 1.0f;
	EXPECT_EQ(rkv_emb_create(p.ps, "b", &b), -EINVAL);
	b = c;
	b.optim = (enum rkv_emb_optim)7;
	EXPECT_EQ(rkv_emb_create(p.ps, "b", &b), -EINVAL);
	b = c;
	b.dim = 100000; /* a row larger than max_value */
	EXPECT_EQ(rkv_emb_create(p.ps, "b", &b), -EMSGSIZE);
	EXPECT_EQ(rkv_emb_open(p.ps, "b", &e3), -ENOENT);
	EXPECT_EQ(rkv_put(p.c, "emb/kv", 6, "x", 1), 0); /* not a table */
	EXPECT_EQ(rkv_emb_open(p.ps, "kv", &e3), -EINVAL);
	EXPECT_EQ(rkv_emb_create(p.ps, "kv", &c), -EINVAL);
	/* read-only clients pull, never push */
	ASSERT_EQ(pc_open(&ro, list, 1), 0);
	ASSERT_EQ(rkv_emb_open(ro.ps, "g", &e3), 0);
	EXPECT_EQ(rkv_emb_pull(e3, ids, 3, w), 0);
	EXPECT_EQ(w[0], -0.5f);
	EXPECT_EQ(rkv_emb_push(e3, ids, 3, g), -EROFS);
	EXPECT_EQ(rkv_emb_create(ro.ps, "r", &c), -EACCES);
	rkv_emb_close(e3);
	pc_close(&ro);
	/* delete: every row goes, the tombstone keeps the generation */
	EXPECT_EQ(rkv_emb_delete(p.ps, "g"), 0);
	EXPECT_EQ(row_hdr(p.c, "g", 1, &h), -ENOENT);
	EXPECT_EQ(rkv_emb_delete(p.ps, "g"), -ENOENT);
	EXPECT_EQ(rkv_emb_open(p.ps, "g", &e3), -ENOENT);
	/* the old handle pushes to a row nobody pushed since: left for the
	 * next delete, and the next generation ignores it */
	EXPECT_EQ(rkv_emb_push(e1, ids, 1, g), 0);
	ASSERT_EQ(rkv_emb_create(p.ps, "g", &c), 0);
	ASSERT_EQ(rkv_emb_open(p.ps, "g", &e2), 0);
	EXPECT_EQ(rkv_emb_pull(e2, ids, 3, w), 0);
	EXPECT_EQ(w[0], 0.0f); /* row 1 of generation 1 reads as initial */
	EXPECT_EQ(rkv_emb_push(e2, ids, 2, g), 0);
	EXPECT_EQ(row_hdr(p.c, "g", 1, &h), 0);
	EXPECT_EQ(h.nonce, 2);
	EXPECT_EQ(h.version, 1); /* the old row was replaced, not stepped */
	/* the old handle meets a row of the newer generation */
	EXPECT_EQ(rkv_emb_pull(e1, ids, 1, w), -ESTALE);
	EXPECT_EQ(rkv_emb_push(e1, ids, 1, g), -ESTALE);
	EXPECT_EQ(row_hdr(p.c, "g", 1, &h), 0);
	EXPECT_EQ(h.version, 1);
	/* a forged row that is not a row */
	EXPECT_EQ(rkv_put(p.c, "emb/g/7", 7, "junk", 4), 0);
	uint64_t seven = 7;

	EXPECT_EQ(rkv_emb_pull(e2, &seven, 1, w), -ESTALE);
	EXPECT_EQ(rkv_emb_delete(p.ps, "g"), 0);
	size_t vl = 0;

	EXPECT_EQ(rkv_get(p.c, "emb/g/7", 7, w, sizeof(w), &vl), 0);
	rkv_emb_close(e1);
	rkv_emb_close(e2);
	pc_close(&p);
	stop_all(s, 1);
}

int main(int argc, char **argv)
{
	g_prov = test_itest_init(argc, argv, 300);
	if (!g_prov)
		return 77;
	g_verbs = !strcmp(g_prov, "verbs");
	RKV_TEST(t_lazy);
	RKV_TEST(t_exact);
	RKV_TEST(t_concurrent);
	RKV_TEST(t_killed);
	RKV_TEST(t_paused);
	RKV_TEST(t_generations_and_bad_input);
	return rkv_test_done();
}
