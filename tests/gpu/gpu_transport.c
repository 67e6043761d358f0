/* SPDX-License-Identifier: MIT */
/*
 * gpu_transport.c - GPU-resident regions on the tcp and shm providers, and
 * the GPU bandwidth benchmark.
 *
 * A forked child is the target: it allocates GPU memory with
 * rkv_tp_mem_alloc_gpu, registers it three times (all access, read-only,
 * no atomics) and serves connections; the parent is the initiator (so shm
 * goes through a real CUDA IPC handle).  Checked: READ of a pattern the
 * target wrote, WRITE/READ round trips across the 4 MiB staging chunks,
 * CAS and FETCH_ADD on a GPU word, the refusals a NIC would give (bounds,
 * bad rkey, read-only, no-atomic MRs) with REM_ACCESS_ERR, and a
 * concurrency torture (threads, each with its own endpoint, adding to one
 * GPU word and round-tripping private blocks), and local buffers in GPU
 * memory at the initiator (WRITE from, READ into device memory, atomic
 * results into device memory).
 *
 * --bench: READ and WRITE of 1..256 MiB beside cudaMemcpy of the same
 * bytes (device <-> the same pinned host buffer); the shm goal is READ at
 * least 0.7x of device-to-host copy bandwidth, reported as "# GOAL ...".
 *
 *   gpu_transport [--provider tcp|shm] [--bench]   (default: both)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_test.h"
#include "test.h"

#define REGION (260ull << 20) /* bench reads up to 256 MiB */
#define PATTERN_LEN (1u << 20)
#define WORD_OFF (200ull << 20) /* atomics here */
#define TORTURE_THREADS 4
#define TORTURE_ITERS 300

struct target_info {
	char addr[300];
	uint64_t base;
	uint64_t len;
	uint32_t rkey_all, rkey_ro, rkey_na;
};

static const char *g_prov;
static struct target_info g_t;
static pid_t g_child;
static int g_cmd[2], g_ack[2];

static uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i * 7 + 3);
}

/* ------------------------------------------------------------- target */
static int target_main(const char *prov, int info_fd)
{
	struct rkv_tp_opts o;
	struct rkv_tp *tp;
	struct rkv_cq *cq;
	struct rkv_listener *l;
	struct rkv_mr *all, *ro, *na;
	struct target_info ti;
	struct rkv_ep *eps[64];
	unsigned neps = 0;
	uint8_t *pat;
	void *g = NULL;
	char addr[128];

	rkv_tp_opts_init(&o);
	if (rkv_tp_provider_parse(prov, &o.provider) ||
	    rkv_tp_create(&o, &tp) || rkv_cq_create(tp, 4096, &cq))
		return 1;
	if (rkv_tp_mem_alloc_gpu(tp, 0, REGION, &g)) {
		fprintf(stderr, "target: %s\n", rkv_tp_gpu_why(tp));
		return 1;
	}
	if (rkv_mr_reg_gpu(tp, g, REGION, RKV_ACCESS_ALL, 0, &all) ||
	    rkv_mr_reg_gpu(tp, g, REGION, RKV_ACCESS_REMOTE_READ, 0, &ro) ||
	    rkv_mr_reg_gpu(tp, g, REGION,
			   RKV_ACCESS_LOCAL_WRITE | RKV_ACCESS_REMOTE_READ |
				   RKV_ACCESS_REMOTE_WRITE,
			   0, &na)) {
		fprintf(stderr, "target: reg: %s\n", rkv_tp_gpu_why(tp));
		return 1;
	}
	pat = malloc(PATTERN_LEN);
	for (uint64_t i = 0; i < PATTERN_LEN; i++)
		pat[i] = pattern(i);
	if (rkv_cuda_copy(0, g, pat, PATTERN_LEN))
		return 1;
	free(pat);
	if (strcmp(prov, "shm") == 0)
		snprintf(addr, sizeof(addr), "shm:///rkv-gpu-%d", (int)getpid());
	else
		snprintf(addr, sizeof(addr), "tcp://127.0.0.1:0");
	if (rkv_listen(tp, addr, &l))
		return 1;
	memset(&ti, 0, sizeof(ti));
	snprintf(ti.addr, sizeof(ti.addr), "%s", rkv_listener_addr(l));
	ti.base = (uint64_t)(uintptr_t)g;
	ti.len = REGION;
	ti.rkey_all = all->rkey;
	ti.rkey_ro = ro->rkey;
	ti.rkey_na = na->rkey;
	if (write(info_fd, &ti, sizeof(ti)) != (ssize_t)sizeof(ti))
		return 1;
	close(info_fd);
	for (;;) {
		struct rkv_ep *ep;
		char c;
		ssize_t n;

		if (rkv_accept(l, cq, 20, &ep) == 0 && neps < 64)
			eps[neps++] = ep;
		{
			struct rkv_wc wc[16];

			rkv_cq_poll(cq, wc, 16);
		}
		n = read(g_cmd[0], &c, 1);
		if (n == 0)
			break; /* parent done */
		if (n == 1 && c == 'D') { /* revoke the read-only MR */
			rkv_mr_dereg(ro);
			ro = NULL;
			if (write(g_ack[1], "d", 1) != 1)
				break;
		}
	}
	for (unsigned i = 0; i < neps; i++)
		rkv_ep_destroy(eps[i]);
	rkv_listener_destroy(l);
	rkv_mr_dereg(ro);
	rkv_mr_dereg(na);
	rkv_mr_dereg(all);
	rkv_tp_mem_free_gpu(tp, 0, g, REGION);
	rkv_cq_destroy(cq);
	rkv_tp_destroy(tp);
	return 0;
}

static int target_start(const char *prov)
{
	int info[2];

	char fi[16], fc[16], fa[16];
	const char *args[] = { prov, fi, fc, fa, NULL };

	/* the parent's ends are close-on-exec, the target's are inherited */
	if (pipe2(info, O_CLOEXEC) || pipe2(g_cmd, O_CLOEXEC) ||
	    pipe2(g_ack, O_CLOEXEC))
		return -1;
	if (fcntl(info[1], F_SETFD, 0) || fcntl(g_cmd[0], F_SETFD, 0) ||
	    fcntl(g_ack[1], F_SETFD, 0))
		return -1;
	snprintf(fi, sizeof(fi), "%d", info[1]);
	snprintf(fc, sizeof(fc), "%d", g_cmd[0]);
	snprintf(fa, sizeof(fa), "%d", g_ack[1]);
	g_child = gpu_spawn(args);
	if (g_child < 0)
		return -1;
	close(info[1]);
	close(g_cmd[0]);
	close(g_ack[1]);
	if (read(info[0], &g_t, sizeof(g_t)) != (ssize_t)sizeof(g_t)) {
		close(info[0]);
		return -1;
	}
	close(info[0]);
	return 0;
}

static void target_stop(void)
{
	int st;

	close(g_cmd[1]);
	close(g_ack[0]);
	if (waitpid(g_child, &st, 0) == g_child)
		EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---------------------------------------------------------- initiator */
struct ini {
	struct rkv_tp *tp;
	struct rkv_cq *cq;
	struct rkv_ep *ep;
	uint8_t *buf;  /* pinned, registered */
	size_t len;
	struct rkv_mr *mr;
};

static int ini_open(struct ini *x, size_t len)
{
	struct rkv_tp_opts o;

	memset(x, 0, sizeof(*x));
	rkv_tp_opts_init(&o);
	if (rkv_tp_provider_parse(g_prov, &o.provider) ||
	    rkv_tp_create(&o, &x->tp) || rkv_cq_create(x->tp, 4096, &x->cq))
		return -1;
	if (rkv_cuda_host_alloc(len, (void **)&x->buf))
		return -1;
	x->len = len;
	if (rkv_mr_reg(x->tp, x->buf, len, RKV_ACCESS_LOCAL_WRITE, &x->mr))
		return -1;
	return rkv_connect(x->tp, g_t.addr, x->cq, 5000, &x->ep);
}

static int ini_reconnect(struct ini *x)
{
	rkv_ep_destroy(x->ep);
	x->ep = NULL;
	return rkv_connect(x->tp, g_t.addr, x->cq, 5000, &x->ep);
}

static void ini_close(struct ini *x)
{
	rkv_ep_destroy(x->ep);
	rkv_mr_dereg(x->mr);
	rkv_cuda_host_free(x->buf);
	rkv_cq_destroy(x->cq);
	rkv_tp_destroy(x->tp);
}

static int op(struct ini *x, enum rkv_wr_opcode opc, uint64_t off,
	      uint32_t len, uint32_t rkey, void *local)
{
	struct rkv_wr wr = { .opcode = opc, .local = local ? local : x->buf,
			     .length = len, .lkey = x->mr->lkey,
			     .remote_addr = g_t.base + off, .rkey = rkey };

	return gpu_post_wait(x->ep, x->cq, &wr);
}

static int atomic(struct ini *x, enum rkv_wr_opcode opc, uint64_t off,
		  uint32_t rkey, uint64_t a, uint64_t b, uint64_t *old)
{
	struct rkv_wr wr = { .opcode = opc, .local = x->buf, .length = 8,
			     .lkey = x->mr->lkey,
			     .remote_addr = g_t.base + off, .rkey = rkey,
			     .compare_add = a, .swap = b };
	int st = gpu_post_wait(x->ep, x->cq, &wr);

	memcpy(old, x->buf, 8);
	return st;
}

static struct ini g_x;

static void t_read_pattern(void)
{
	unsigned bad = 0;

	memset(g_x.buf, 0, PATTERN_LEN);
	ASSERT_EQ(op(&g_x, RKV_WR_READ, 0, PATTERN_LEN, g_t.rkey_all, NULL),
		  RKV_WC_SUCCESS);
	for (uint64_t i = 0; i < PATTERN_LEN; i++)
		bad += g_x.buf[i] != pattern(i);
	EXPECT_EQ(bad, 0);
	/* a small read through the read-only MR */
	ASSERT_EQ(op(&g_x, RKV_WR_READ, 100, 8, g_t.rkey_ro, NULL),
		  RKV_WC_SUCCESS);
	EXPECT_EQ(g_x.buf[0], pattern(100));
}

static void t_write_read(void)
{
	static const uint32_t sizes[] = { 1, 8, 4095, 65539, (4u << 20) + 5,
					  (9u << 20) + 11 };
	uint64_t off = (1u << 20) + 3;

	for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint32_t n = sizes[s];
		uint8_t *w = g_x.buf, *r = g_x.buf + (16u << 20);
		unsigned bad = 0;

		for (uint32_t i = 0; i < n; i++)
			w[i] = (uint8_t)(i * 13 + s);
		ASSERT_EQ(op(&g_x, RKV_WR_WRITE, off, n, g_t.rkey_all, w),
			  RKV_WC_SUCCESS);
		memset(r, 0, n);
		ASSERT_EQ(op(&g_x, RKV_WR_READ, off, n, g_t.rkey_all, r),
			  RKV_WC_SUCCESS);
		for (uint32_t i = 0; i < n; i++)
			bad += r[i] != w[i];
		if (bad)
			printf("#   size %u: %u bytes differ\n", n, bad);
		EXPECT_EQ(bad, 0);
	}
}

static void t_atomics(void)
{
	uint64_t old = 0, zero = 0;

	ASSERT_EQ(op(&g_x, RKV_WR_WRITE, WORD_OFF, 8, g_t.rkey_all, &zero),
		  RKV_WC_SUCCESS);
	EXPECT_EQ(atomic(&g_x, RKV_WR_CAS, WORD_OFF, g_t.rkey_all, 0, 42,
			 &old), RKV_WC_SUCCESS);
	EXPECT_EQ(old, 0);
	EXPECT_EQ(atomic(&g_x, RKV_WR_CAS, WORD_OFF, g_t.rkey_all, 0, 7,
			 &old), RKV_WC_SUCCESS);
	EXPECT_EQ(old, 42); /* failed compare leaves 42 */
	EXPECT_EQ(atomic(&g_x, RKV_WR_FETCH_ADD, WORD_OFF, g_t.rkey_all, 8,
			 0, &old), RKV_WC_SUCCESS);
	EXPECT_EQ(old, 42);
	ASSERT_EQ(op(&g_x, RKV_WR_READ, WORD_OFF, 8, g_t.rkey_all, NULL),
		  RKV_WC_SUCCESS);
	memcpy(&old, g_x.buf, 8);
	EXPECT_EQ(old, 50);
}

/* Each refusal is REM_ACCESS_ERR, changes nothing, and errors the ep. */
static void t_refusals(void)
{
	uint64_t old, v = 0x1122334455667788ull;

	EXPECT_EQ(op(&g_x, RKV_WR_READ, REGION - 4, 8, g_t.rkey_all, NULL),
		  RKV_WC_REM_ACCESS_ERR);
	ASSERT_EQ(ini_reconnect(&g_x), 0);
	EXPECT_EQ(op(&g_x, RKV_WR_READ, 0, 8, g_t.rkey_all ^ 0x4000, NULL),
		  RKV_WC_REM_ACCESS_ERR);
	ASSERT_EQ(ini_reconnect(&g_x), 0);
	EXPECT_EQ(op(&g_x, RKV_WR_WRITE, WORD_OFF, 8, g_t.rkey_ro, &v),
		  RKV_WC_REM_ACCESS_ERR);
	ASSERT_EQ(ini_reconnect(&g_x), 0);
	EXPECT_EQ(atomic(&g_x, RKV_WR_FETCH_ADD, WORD_OFF, g_t.rkey_na, 1, 0,
			 &old), RKV_WC_REM_ACCESS_ERR);
	ASSERT_EQ(ini_reconnect(&g_x), 0);
	ASSERT_EQ(op(&g_x, RKV_WR_READ, WORD_OFF, 8, g_t.rkey_all, NULL),
		  RKV_WC_SUCCESS);
	memcpy(&old, g_x.buf, 8);
	EXPECT_EQ(old, 50); /* untouched */
	/* deregistration revokes at once */
	{
		char c;

		ASSERT_EQ(write(g_cmd[1], "D", 1), 1);
		ASSERT_EQ(read(g_ack[0], &c, 1), 1);
	}
	EXPECT_EQ(op(&g_x, RKV_WR_READ, 0, 8, g_t.rkey_ro, NULL),
		  RKV_WC_REM_ACCESS_ERR);
	ASSERT_EQ(ini_reconnect(&g_x), 0);
}

struct tort {
	unsigned id;
	int fails;
};

static void *tort_thread(void *arg)
{
	struct tort *t = arg;
	struct ini x;
	uint64_t area = (100ull << 20) + t->id * (1u << 20), old;

	if (ini_open(&x, 2u << 20)) {
		t->fails++;
		return NULL;
	}
	for (unsigned i = 0; i < TORTURE_ITERS; i++) {
		uint32_t n = 1000 + (i * 7919) % 60000;
		uint8_t *w = x.buf, *r = x.buf + (1u << 20);

		if (atomic(&x, RKV_WR_FETCH_ADD, WORD_OFF + 64, g_t.rkey_all,
			   1, 0, &old) != RKV_WC_SUCCESS)
			t->fails++;
		for (uint32_t k = 0; k < n; k++)
			w[k] = (uint8_t)(k ^ i ^ t->id);
		if (op(&x, RKV_WR_WRITE, area, n, g_t.rkey_all, w) ||
		    op(&x, RKV_WR_READ, area, n, g_t.rkey_all, r) ||
		    memcmp(w, r, n))
			t->fails++;
	}
	ini_close(&x);
	return NULL;
}

static void t_torture(void)
{
	pthread_t th[TORTURE_THREADS];
	struct tort t[TORTURE_THREADS];
	uint64_t v = 0;

	ASSERT_EQ(op(&g_x, RKV_WR_WRITE, WORD_OFF + 64, 8, g_t.rkey_all, &v),
		  RKV_WC_SUCCESS);
	for (unsigned i = 0; i < TORTURE_THREADS; i++) {
		t[i].id = i;
		t[i].fails = 0;
		pthread_create(&th[i], NULL, tort_thread, &t[i]);
	}
	for (unsigned i = 0; i < TORTURE_THREADS; i++) {
		pthread_join(th[i], NULL);
		EXPECT_EQ(t[i].fails, 0);
	}
	ASSERT_EQ(op(&g_x, RKV_WR_READ, WORD_OFF + 64, 8, g_t.rkey_all, NULL),
		  RKV_WC_SUCCESS);
	memcpy(&v, g_x.buf, 8);
	EXPECT_EQ(v, (uint64_t)TORTURE_THREADS * TORTURE_ITERS);
}

/*
 * Local buffers in GPU memory (the initiator side): WRITE from and READ
 * into a registered device buffer across staging-chunk boundaries, and
 * CAS / FETCH_ADD results landing in device memory.
 */
static void t_local_gpu(void)
{
	const size_t n = 9u << 20; /* > 2 staging chunks */
	const uint64_t off = 100ull << 20;
	struct rkv_mr *dmr = NULL;
	uint8_t *dev = NULL, *h = malloc(n);
	uint64_t w = 0;
	unsigned bad = 0;
	struct rkv_wr wr;

	ASSERT_TRUE(h != NULL);
	ASSERT_EQ(rkv_tp_mem_alloc_gpu(g_x.tp, 0, 16u << 20, (void **)&dev),
		  0);
	ASSERT_EQ(rkv_mr_reg_gpu(g_x.tp, dev, 16u << 20,
				 RKV_ACCESS_LOCAL_WRITE, 0, &dmr),
		  0);
	for (size_t i = 0; i < n; i++)
		h[i] = pattern(i + 11);
	ASSERT_EQ(rkv_cuda_copy(0, dev, h, n), 0);
	wr = (struct rkv_wr){ .opcode = RKV_WR_WRITE, .local = dev,
			      .length = (uint32_t)n, .lkey = dmr->lkey,
			      .remote_addr = g_t.base + off,
			      .rkey = g_t.rkey_all };
	EXPECT_EQ(gpu_post_wait(g_x.ep, g_x.cq, &wr), RKV_WC_SUCCESS);
	memset(g_x.buf, 0, n);
	ASSERT_EQ(op(&g_x, RKV_WR_READ, off, (uint32_t)n, g_t.rkey_all, NULL),
		  RKV_WC_SUCCESS);
	EXPECT_TRUE(memcmp(g_x.buf, h, n) == 0);
	/* READ into device memory */
	ASSERT_EQ(rkv_cuda_memset(0, dev, 0, 16u << 20), 0);
	wr = (struct rkv_wr){ .opcode = RKV_WR_READ, .local = dev + 1,
			      .length = PATTERN_LEN, .lkey = dmr->lkey,
			      .remote_addr = g_t.base, .rkey = g_t.rkey_all };
	EXPECT_EQ(gpu_post_wait(g_x.ep, g_x.cq, &wr), RKV_WC_SUCCESS);
	ASSERT_EQ(rkv_cuda_copy(0, h, dev + 1, PATTERN_LEN), 0);
	for (uint64_t i = 0; i < PATTERN_LEN; i++)
		bad += h[i] != pattern(i);
	EXPECT_EQ(bad, 0);
	/* atomics whose result lands in device memory */
	memset(g_x.buf, 0, 8);
	ASSERT_EQ(op(&g_x, RKV_WR_WRITE, off, 8, g_t.rkey_all, NULL),
		  RKV_WC_SUCCESS);
	wr = (struct rkv_wr){ .opcode = RKV_WR_FETCH_ADD, .local = dev + 64,
			      .length = 8, .lkey = dmr->lkey,
			      .remote_addr = g_t.base + off,
			      .rkey = g_t.rkey_all, .compare_add = 5 };
	EXPECT_EQ(gpu_post_wait(g_x.ep, g_x.cq, &wr), RKV_WC_SUCCESS);
	wr = (struct rkv_wr){ .opcode = RKV_WR_CAS, .local = dev + 72,
			      .length = 8, .lkey = dmr->lkey,
			      .remote_addr = g_t.base + off,
			      .rkey = g_t.rkey_all, .compare_add = 5,
			      .swap = 9 };
	EXPECT_EQ(gpu_post_wait(g_x.ep, g_x.cq, &wr), RKV_WC_SUCCESS);
	ASSERT_EQ(rkv_cuda_copy(0, &w, dev + 64, 8), 0);
	EXPECT_EQ(w, 0);
	ASSERT_EQ(rkv_cuda_copy(0, &w, dev + 72, 8), 0);
	EXPECT_EQ(w, 5);
	ASSERT_EQ(op(&g_x, RKV_WR_READ, off, 8, g_t.rkey_all, NULL),
		  RKV_WC_SUCCESS);
	memcpy(&w, g_x.buf, 8);
	EXPECT_EQ(w, 9);
	rkv_mr_dereg(dmr);
	rkv_tp_mem_free_gpu(g_x.tp, 0, dev, 16u << 20);
	free(h);
}

/* ------------------------------------------------------------ bench */
static double best_gbps(struct ini *x, enum rkv_wr_opcode opc, size_t n,
			void *dev)
{
	double best = 0;

	for (int rep = 0; rep < 3; rep++) {
		uint64_t t0 = rkv_now_ns(), dt;
		int rc;

		if (dev)
			rc = opc == RKV_WR_READ
				     ? rkv_cuda_copy(0, x->buf, dev, n)
				     : rkv_cuda_copy(0, dev, x->buf, n);
		else
			rc = op(x, opc, 0, (uint32_t)n, g_t.rkey_all, NULL);
		dt = rkv_now_ns() - t0;
		if (rc)
			return -1;
		if (dt && n / (double)dt > best)
			best = n / (double)dt; /* bytes/ns = GB/s */
	}
	return best;
}

static void t_bench(void)
{
	static const size_t mib[] = { 1, 4, 16, 64, 256 };
	void *dev = NULL;
	double r_sum = 0, c_sum = 0;

	ASSERT_EQ(rkv_cuda_malloc(0, 256u << 20, &dev), 0);
	printf("# %s bandwidth, GB/s (best of 3), target GPU memory <-> "
	       "pinned host buffer\n",
	       g_prov);
	printf("# %8s %10s %10s %12s %12s %7s\n", "MiB", "READ", "WRITE",
	       "memcpy D2H", "memcpy H2D", "R/D2H");
	for (unsigned i = 0; i < sizeof(mib) / sizeof(mib[0]); i++) {
		size_t n = mib[i] << 20;
		double r = best_gbps(&g_x, RKV_WR_READ, n, NULL);
		double w = best_gbps(&g_x, RKV_WR_WRITE, n, NULL);
		double cr = best_gbps(&g_x, RKV_WR_READ, n, dev);
		double cw = best_gbps(&g_x, RKV_WR_WRITE, n, dev);

		EXPECT_TRUE(r > 0 && w > 0 && cr > 0 && cw > 0);
		printf("# %8zu %10.2f %10.2f %12.2f %12.2f %7.2f\n", mib[i], r,
		       w, cr, cw, cr > 0 ? r / cr : 0);
		if (mib[i] >= 16) {
			r_sum += r;
			c_sum += cr;
		}
	}
	if (strcmp(g_prov, "shm") == 0 && c_sum > 0)
		printf("# GOAL %s: shm READ %.2fx of cudaMemcpy D2H "
		       "(16-256 MiB; goal >= 0.70x)\n",
		       r_sum / c_sum >= 0.7 ? "MET" : "MISSED", r_sum / c_sum);
	rkv_cuda_free(0, dev);
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	int bench = 0;
	char **child = gpu_child_of(argc, argv);

	signal(SIGPIPE, SIG_IGN);
	if (child) { /* the target: PROVIDER INFO_FD CMD_FD ACK_FD */
		int fl;

		if (!child[0] || !child[1] || !child[2] || !child[3])
			return 2;
		g_cmd[0] = atoi(child[2]);
		g_ack[1] = atoi(child[3]);
		/* non-blocking command pipe: the loop polls it */
		fl = fcntl(g_cmd[0], F_GETFL);
		if (fl < 0 || fcntl(g_cmd[0], F_SETFL, fl | O_NONBLOCK))
			return 2;
		return target_main(child[0], atoi(child[1]));
	}
	gpu_test_args(argc, argv, &only, &bench);
	gpu_test_require();
	rkv_test_init(argc, argv, bench ? 600 : 300);
	for (int p = 0; p < 2; p++) {
		g_prov = p ? "shm" : "tcp";
		if (only && strcmp(only, g_prov) != 0)
			continue;
		printf("# provider %s\n", g_prov);
		if (target_start(g_prov) || ini_open(&g_x, 260u << 20)) {
			printf("not ok - %s: cannot start the target or "
			       "connect\n", g_prov);
			g_test_failures++;
			return 1;
		}
		RKV_TEST(t_read_pattern);
		RKV_TEST(t_write_read);
		RKV_TEST(t_atomics);
		RKV_TEST(t_refusals);
		RKV_TEST(t_torture);
		RKV_TEST(t_local_gpu);
		if (bench)
			RKV_TEST(t_bench);
		ini_close(&g_x);
		target_stop();
	}
	return rkv_test_done();
}
