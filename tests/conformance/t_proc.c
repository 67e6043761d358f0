/* SPDX-License-Identifier: MIT */
/*
 * t_proc.c - tests across processes: atomics from several processes on the
 * same words give exact totals; a peer that dies (server or client side)
 * or stops answering gives error completions within a bound, never a hang.
 *
 * Children are forked before the parent creates any transport object for
 * the test, and wait on a pipe for the address; each creates its own
 * context.  A child reports through its exit status; the parent reaps with
 * a deadline and SIGKILLs stragglers by PID.
 */
#include "conf.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rtime.h"

struct addr_msg {
	char addr[320];
	uint64_t raddr;  /* main region start */
	uint32_t rkey;
};

static int write_full(int fd, const void *p, size_t n)
{
	const char *b = p;

	while (n) {
		ssize_t r = write(fd, b, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EIO;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Read n bytes within timeout_ms.  Returns 0, -ETIMEDOUT or -EIO. */
static int read_full(int fd, void *p, size_t n, unsigned timeout_ms)
{
	uint64_t deadline = rkv_now_ms() + timeout_ms;
	char *b = p;

	while (n) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = (int64_t)(deadline - rkv_now_ms());
		ssize_t r;

		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		r = read(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EIO;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

static void small_opts(struct conf_fix_opts *o)
{
	conf_fix_opts_init(o);
	o->region_len = 64u << 10;
	o->local_len = 64u << 10;
}

/* ------------------------------------------------ atomics from processes */

enum {
	NPROC = 4,
	FA_CHAIN = 16,
	EX_OK = 0,
	EX_SETUP = 10,
	EX_POST = 11,
	EX_TIMEOUT = 12,
	EX_STATUS = 13,
	EX_ORDER = 14,
	EX_CAS = 15,
};
#define W_FA 0       /* += 1 */
#define W_FA2 64     /* += 0x100000001 (carry across the halves) */
#define W_CAS 128    /* read-CAS increments */

static int child_wait1(struct conf_cli *c)
{
	int rc;

	conf_stash_clear(&c->st);
	rc = conf_wait(NULL, c, 1, 0, conf_bound_ms());
	if (rc)
		return EX_TIMEOUT;
	if (c->st.wc[0].status != RKV_WC_SUCCESS) {
		fprintf(stderr, "child %d: %s\n", (int)getpid(),
			rkv_wc_status_str(c->st.wc[0].status));
		return EX_STATUS;
	}
	return EX_OK;
}

/* A child client: read the server's address from fd, open c with o and
 * connect.  Returns EX_OK or EX_SETUP (c closed again). */
static int child_connect(int fd, const struct conf_fix_opts *o,
			 struct conf_cli *c, struct addr_msg *m)
{
	if (read_full(fd, m, sizeof(*m), 4 * conf_bound_ms()))
		return EX_SETUP;
	if (conf_cli_open(c, o))
		return EX_SETUP;
	if (conf_cli_connect(c, m->addr, (int)conf_bound_ms())) {
		conf_cli_close(c);
		return EX_SETUP;
	}
	return EX_OK;
}

static int atomics_child_run(int fd, unsigned nfa, unsigned ncas)
{
	struct conf_fix_opts o;
	struct conf_cli c;
	struct addr_msg m;
	struct rkv_wr w[FA_CHAIN], *bad;
	uint64_t last = 0, expect = 0;
	unsigned done = 0, tries = 0;
	int rc, first = 1;

	small_opts(&o);
	if (child_connect(fd, &o, &c, &m))
		return EX_SETUP;
	rc = EX_OK;
	/* FETCH_ADDs in chains of 16, the last signaled. */
	for (unsigned n = 0; n < nfa && rc == EX_OK; n += FA_CHAIN) {
		for (int j = 0; j < FA_CHAIN; j++) {
			conf_wr(&w[j], RKV_WR_FETCH_ADD, (uint64_t)j,
				j == FA_CHAIN - 1 ? RKV_WR_SIGNALED : 0,
				c.loc + 8 * j, 8, c.loc_mr->lkey,
				m.raddr + (j & 1 ? W_FA2 : W_FA), m.rkey);
			w[j].compare_add = j & 1 ? 0x100000001ull : 1;
			w[j].next = j + 1 < FA_CHAIN ? &w[j + 1] : NULL;
		}
		if (rkv_post(c.ep, w, &bad)) {
			rc = EX_POST;
			break;
		}
		rc = child_wait1(&c);
		for (int j = 0; j < FA_CHAIN && rc == EX_OK; j += 2) {
			uint64_t v;

			memcpy(&v, c.loc + 8 * j, 8);
			/* This process's view of a word that only grows. */
			if (!first && v <= last)
				rc = EX_ORDER;
			first = 0;
			last = v;
		}
	}
	/* CAS increments: the returned old value is the next compare. */
	while (rc == EX_OK && done < ncas) {
		if (++tries > ncas * 200) {
			rc = EX_CAS;
			break;
		}
		conf_wr(&w[0], RKV_WR_CAS, 1, RKV_WR_SIGNALED, c.loc, 8,
			c.loc_mr->lkey, m.raddr + W_CAS, m.rkey);
		w[0].compare_add = expect;
		w[0].swap = expect + 1;
		if (rkv_post(c.ep, w, &bad)) {
			rc = EX_POST;
			break;
		}
		rc = child_wait1(&c);
		if (rc == EX_OK) {
			uint64_t old;

			memcpy(&old, c.loc, 8);
			if (old == expect) {
				done++;
				expect++;
			} else {
				expect = old;
			}
		}
	}
	conf_cli_close(&c);
	return rc;
}

static void t_atomics_multiprocess(void)
{
	const unsigned nfa = conf_scale(2000, 304);  /* multiple of 16 */
	const unsigned ncas = conf_scale(500, 100);
	struct conf_fix_opts o;
	struct conf_srv s;
	struct rkv_ep *eps[NPROC] = { 0 };
	pid_t pid[NPROC];
	int fds[NPROC], nacc = 0;
	struct addr_msg m;
	uint64_t t0;
	uint8_t *reg;

	for (int i = 0; i < NPROC; i++) {
		int p[2];

		pid[i] = -1;
		fds[i] = -1;
		if (pipe(p)) {
			g_test_failures++;
			goto reap;
		}
		fflush(stdout);
		pid[i] = fork();
		if (pid[i] == 0) {
			int rc;

			for (int j = 0; j < i; j++)
				close(fds[j]);
			close(p[1]);
			conf_child_init(240);
			rc = atomics_child_run(p[0], nfa, ncas);
			close(p[0]);
			/* _exit: the parent's heap (and any leak in it) is
			 * not this child's to report. */
			_exit(rc);
		}
		close(p[0]);
		if (pid[i] < 0) {
			close(p[1]);
			g_test_failures++;
			goto reap;
		}
		conf_child_add(pid[i]);
		fds[i] = p[1];
	}
	small_opts(&o);
	if (conf_srv_open(&s, &o)) {
		g_test_failures++;
		goto reap;
	}
	reg = s.reg;
	if (!rkv_tp_has_atomics(s.tp)) {
		rkv_test_skip("context has no atomics");
		goto out_srv;
	}
	memset(&m, 0, sizeof(m));
	snprintf(m.addr, sizeof(m.addr), "%s", s.addr);
	m.raddr = conf_raddr(&s, 0);
	m.rkey = s.mr->rkey;
	for (int i = 0; i < NPROC; i++)
		write_full(fds[i], &m, sizeof(m));
	t0 = rkv_now_ms();
	for (; nacc < NPROC; nacc++) {
		if (rkv_accept(s.lis, s.cq, (int)conf_bound_ms(), &eps[nacc])) {
			printf("#   accepted %d of %d\n", nacc, NPROC);
			g_test_failures++;
			break;
		}
	}
	/* Keep the server's CQ polled while the children work. */
	for (int live = NPROC; live > 0;) {
		live = 0;
		conf_progress(&s, NULL);
		conf_stash_clear(&s.st);
		for (int i = 0; i < NPROC; i++) {
			int st;

			if (pid[i] <= 0)
				continue;
			if (waitpid(pid[i], &st, WNOHANG) == pid[i]) {
				conf_child_del(pid[i]);
				pid[i] = -1;
				if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
					printf("#   child %d: %s %d\n", i,
					       WIFEXITED(st) ? "exit" : "signal",
					       WIFEXITED(st) ? WEXITSTATUS(st) :
							       WTERMSIG(st));
					g_test_failures++;
				}
				continue;
			}
			live++;
		}
		if (live && rkv_now_ms() - t0 > 8 * conf_bound_ms()) {
			printf("#   children still running after %u ms\n",
			       8 * conf_bound_ms());
			g_test_failures++;
			break;
		}
		if (live)
			conf_sleep_ms(1);
	}
	printf("#   %d processes x (%u FETCH_ADD + %u CAS) in %" PRIu64
	       " ms\n",
	       NPROC, nfa, ncas, rkv_now_ms() - t0);
	EXPECT_EQ_U64(conf_rd64(reg + W_FA), (uint64_t)NPROC * nfa / 2);
	EXPECT_EQ_U64(conf_rd64(reg + W_FA2),
		      (uint64_t)NPROC * nfa / 2 * 0x100000001ull);
	EXPECT_EQ_U64(conf_rd64(reg + W_CAS), (uint64_t)NPROC * ncas);
out_srv:
	for (int i = 0; i < nacc; i++)
		rkv_ep_destroy(eps[i]);
	conf_srv_close(&s);
reap:
	for (int i = 0; i < NPROC; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		/* Exit statuses were checked above; here only stragglers. */
		if (pid[i] > 0 &&
		    conf_child_reap(pid[i], 2 * conf_bound_ms()) == -ETIMEDOUT)
			g_test_failures++;
	}
}

/* ------------------------------------------------------------ peer death */

static unsigned death_bound_ms(void)
{
	return conf_scale(5000, 30000);
}

/* A server in a child: listen, send the address, accept, poll forever. */
static pid_t spawn_server(int *rfd)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct conf_fix_opts o;
		struct conf_srv s;
		struct addr_msg m;

		close(p[0]);
		conf_child_init(120);
		small_opts(&o);
		if (conf_srv_open(&s, &o))
			_exit(EX_SETUP);
		conf_fill(s.reg, s.reg_len, 33);
		memset(&m, 0, sizeof(m));
		snprintf(m.addr, sizeof(m.addr), "%s", s.addr);
		m.raddr = conf_raddr(&s, 0);
		m.rkey = s.mr->rkey;
		write_full(p[1], &m, sizeof(m));
		if (conf_srv_accept(&s, (int)conf_bound_ms()))
			_exit(EX_SETUP);
		for (;;) {
			conf_progress(&s, NULL);
			conf_stash_clear(&s.st);
			conf_sleep_ms(1);
		}
	}
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return -1;
	}
	conf_child_add(pid);
	*rfd = p[0];
	return pid;
}

/* Client side of a child server: connect and check one READ. */
static int connect_child(struct conf_cli *c, int fd, struct addr_msg *m)
{
	uint8_t want[64];
	struct rkv_wr w;
	struct conf_fix_opts o;

	small_opts(&o);
	o.cli_timeout_ms = 1000;
	if (read_full(fd, m, sizeof(*m), 4 * conf_bound_ms())) {
		printf("#   no address from the child server\n");
		return -EIO;
	}
	if (conf_cli_open(c, &o))
		return -EIO;
	if (conf_cli_connect(c, m->addr, (int)conf_bound_ms()))
		return -EIO;
	conf_wr(&w, RKV_WR_READ, 1, RKV_WR_SIGNALED, c->loc, 64,
		c->loc_mr->lkey, m->raddr, m->rkey);
	conf_stash_clear(&c->st);
	if (rkv_post(c->ep, &w, NULL) ||
	    conf_wait(NULL, c, 1, 0, conf_bound_ms()) ||
	    c->st.wc[0].status != RKV_WC_SUCCESS) {
		printf("#   first READ from the child server failed\n");
		return -EIO;
	}
	conf_fill(want, 64, 33);
	if (conf_diff(c->loc, want, 64) >= 0) {
		printf("#   first READ returned wrong data\n");
		return -EIO;
	}
	return 0;
}

static int is_death_status(enum rkv_wc_status s)
{
	return s == RKV_WC_RETRY_EXC_ERR || s == RKV_WC_WR_FLUSH_ERR;
}

static void t_peer_death_server(void)
{
	struct conf_cli c;
	struct addr_msg m;
	struct rkv_wr w[8];
	uint64_t t0, t_err = 0;
	int fd = -1, ok_after = 0, got_err = 0;
	pid_t pid;

	memset(&c, 0, sizeof(c));
	pid = spawn_server(&fd);
	if (pid < 0) {
		g_test_failures++;
		return;
	}
	if (connect_child(&c, fd, &m)) {
		g_test_failures++;
		goto out;
	}
	/* WRs in flight when the peer dies. */
	for (int i = 0; i < 8; i++) {
		conf_wr(&w[i], RKV_WR_READ, (uint64_t)i, RKV_WR_SIGNALED,
			c.loc + 64 * i, 64, c.loc_mr->lkey, m.raddr + 64 * i,
			m.rkey);
		w[i].next = i + 1 < 8 ? &w[i + 1] : NULL;
	}
	conf_stash_clear(&c.st);
	EXPECT_EQ(rkv_post(c.ep, w, NULL), 0);
	kill(pid, SIGKILL);
	conf_child_reap(pid, conf_bound_ms());
	pid = -1;
	t0 = rkv_now_ms();
	if (conf_wait(NULL, &c, 8, 0, death_bound_ms())) {
		printf("#   outstanding WRs: %d of 8 completed within %u ms\n",
		       c.st.n, death_bound_ms());
		g_test_failures++;
	}
	for (int i = 0; i < c.st.n; i++) {
		enum rkv_wc_status s = c.st.wc[i].status;

		if (s != RKV_WC_SUCCESS && !is_death_status(s)) {
			printf("#   outstanding WR %d: %s\n", i,
			       rkv_wc_status_str(s));
			g_test_failures++;
		}
	}
	/* New WRs: an error within the bound (a few may still succeed on
	 * shm before the provider notices, since its READ is a load). */
	while (!got_err && rkv_now_ms() - t0 < death_bound_ms()) {
		conf_stash_clear(&c.st);
		w[0].next = NULL;
		if (rkv_post(c.ep, &w[0], NULL)) {
			printf("#   rkv_post after death failed\n");
			g_test_failures++;
			break;
		}
		if (conf_wait(NULL, &c, 1, 0,
			      death_bound_ms() + conf_bound_ms()))
			break;
		if (c.st.wc[0].status == RKV_WC_SUCCESS) {
			ok_after++;
			conf_sleep_ms(20);
			continue;
		}
		got_err = 1;
		t_err = rkv_now_ms() - t0;
		if (!is_death_status(c.st.wc[0].status)) {
			printf("#   WR after death: %s\n",
			       rkv_wc_status_str(c.st.wc[0].status));
			g_test_failures++;
		}
	}
	printf("#   first error %" PRIu64 " ms after the kill; %d WRs "
	       "succeeded after it\n", t_err, ok_after);
	EXPECT_TRUE(got_err);
	EXPECT_EQ(rkv_ep_state(c.ep), RKV_EP_ERROR);
	/* And every later WR fails fast. */
	conf_stash_clear(&c.st);
	w[1].next = NULL;
	w[1].flags = 0; /* a failing unsignaled WR completes too */
	EXPECT_EQ(rkv_post(c.ep, &w[0], NULL), 0);
	EXPECT_EQ(rkv_post(c.ep, &w[1], NULL), 0);
	EXPECT_EQ(conf_wait(NULL, &c, 2, 0, death_bound_ms()), 0);
	for (int i = 0; i < c.st.n; i++)
		EXPECT_TRUE(is_death_status(c.st.wc[i].status));
out:
	if (pid > 0) {
		kill(pid, SIGKILL);
		conf_child_reap(pid, conf_bound_ms());
	}
	if (fd >= 0)
		close(fd);
	conf_cli_close(&c);
}

/* -------------------------------------------- a child client, and pipes */

/*
 * Fork a child client with two pipes: p (parent to child), q (child to
 * parent).  Returns the child's pid (0 in the child, which keeps p[0] and
 * q[1]), or -1 with a failure counted; the parent keeps p[1] and q[0],
 * and the ends it does not keep are -1.
 */
static pid_t fork_child(int p[2], int q[2])
{
	pid_t pid;

	if (pipe(p) || pipe(q)) {
		g_test_failures++;
		return -1;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(p[1]);
		close(q[0]);
		conf_child_init(120);
		return 0;
	}
	close(p[0]);
	close(q[1]);
	p[0] = q[1] = -1;
	if (pid < 0) {
		g_test_failures++;
		return -1;
	}
	conf_child_add(pid);
	return pid;
}

/* Open s (o), tell the child at fd its address and main region, and
 * accept it.  Returns 0, or -1 with a failure counted. */
static int serve_child(struct conf_srv *s, const struct conf_fix_opts *o,
		       int fd)
{
	struct addr_msg m;

	if (conf_srv_open(s, o)) {
		g_test_failures++;
		return -1;
	}
	memset(&m, 0, sizeof(m));
	snprintf(m.addr, sizeof(m.addr), "%s", s->addr);
	m.raddr = conf_raddr(s, 0);
	m.rkey = s->mr->rkey;
	write_full(fd, &m, sizeof(m));
	if (conf_srv_accept(s, (int)conf_bound_ms())) {
		g_test_failures++;
		return -1;
	}
	return 0;
}

/* Until pid has stopped (SIGSTOP is asynchronous), progressing s if it
 * is given.  Returns 0, or -1 with a failure counted. */
static int wait_stopped(pid_t pid, struct conf_srv *s)
{
	uint64_t t0 = rkv_now_ms();
	int st;

	for (;;) {
		if (waitpid(pid, &st, WNOHANG | WUNTRACED) == pid &&
		    WIFSTOPPED(st))
			return 0;
		if (rkv_now_ms() - t0 > conf_bound_ms()) {
			printf("#   child did not stop\n");
			g_test_failures++;
			return -1;
		}
		if (s)
			conf_progress(s, NULL);
		conf_sleep_ms(1);
	}
}

/* Kill the child (if any) by its PID and reap it; close s and the pipes. */
static void end_child(pid_t pid, struct conf_srv *s, int p[2], int q[2])
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		conf_child_reap(pid, conf_bound_ms());
	}
	conf_srv_close(s);
	for (int i = 0; i < 2; i++) {
		if (p[i] >= 0)
			close(p[i]);
		if (q[i] >= 0)
			close(q[i]);
	}
}

/* The client dies: the server's RECVs and a SEND to it end in errors. */
static void t_peer_death_client(void)
{
	struct conf_fix_opts o;
	struct conf_srv s;
	struct addr_msg m;
	struct rkv_recv_wr r[4];
	struct rkv_wr w;
	int p[2] = { -1, -1 }, q[2] = { -1, -1 };
	char ready = 0;
	uint64_t marker, t0;
	pid_t pid;

	memset(&s, 0, sizeof(s));
	pid = fork_child(p, q);
	if (pid == 0) {
		struct conf_cli c;
		struct conf_fix_opts co;
		struct rkv_wr cw;
		uint64_t v = 0x5151515151515151ull;

		small_opts(&co);
		if (child_connect(p[0], &co, &c, &m))
			_exit(EX_SETUP);
		memcpy(c.loc, &v, 8);
		conf_wr(&cw, RKV_WR_WRITE, 1, RKV_WR_SIGNALED, c.loc, 8,
			c.loc_mr->lkey, m.raddr, m.rkey);
		if (rkv_post(c.ep, &cw, NULL) ||
		    conf_wait(NULL, &c, 1, 0, conf_bound_ms()) ||
		    c.st.wc[0].status != RKV_WC_SUCCESS)
			_exit(EX_STATUS);
		write_full(q[1], "R", 1);
		for (;;)
			pause();
	}
	if (pid < 0)
		goto out;
	small_opts(&o);
	o.srv_timeout_ms = 1000;
	if (serve_child(&s, &o, p[1]))
		goto out;
	for (int i = 0; i < 4; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].wr_id = 10 + (uint64_t)i;
		r[i].local = s.loc + 256 * i;
		r[i].length = 256;
		r[i].lkey = s.loc_mr->lkey;
		r[i].next = i + 1 < 4 ? &r[i + 1] : NULL;
	}
	EXPECT_EQ(rkv_post_recv(s.ep, r, NULL), 0);
	/* Wait for the child's WRITE, polling our CQ meanwhile. */
	t0 = rkv_now_ms();
	while (rkv_now_ms() - t0 < conf_bound_ms()) {
		struct pollfd pfd = { .fd = q[0], .events = POLLIN };

		conf_progress(&s, NULL);
		if (poll(&pfd, 1, 1) == 1 && read(q[0], &ready, 1) == 1)
			break;
	}
	if (ready != 'R') {
		printf("#   the child client never got ready\n");
		g_test_failures++;
		goto out;
	}
	marker = conf_rd64(s.reg);
	EXPECT_EQ_U64(marker, 0x5151515151515151ull);
	kill(pid, SIGKILL);
	conf_child_reap(pid, conf_bound_ms());
	pid = -1;
	t0 = rkv_now_ms();
	conf_wr(&w, RKV_WR_SEND, 20, RKV_WR_SIGNALED, s.loc + 2048, 8,
		s.loc_mr->lkey, 0, 0);
	EXPECT_EQ(rkv_post(s.ep, &w, NULL), 0);
	if (conf_wait(&s, NULL, 0, 5, death_bound_ms())) {
		printf("#   %d of 5 completions within %u ms\n", s.st.n,
		       death_bound_ms());
		g_test_failures++;
	}
	printf("#   %d completions %" PRIu64 " ms after the kill:", s.st.n,
	       rkv_now_ms() - t0);
	for (int i = 0; i < s.st.n; i++)
		printf(" [%" PRIu64 " %s]", s.st.wc[i].wr_id,
		       rkv_wc_status_str(s.st.wc[i].status));
	printf("\n");
	for (int i = 0; i < s.st.n; i++)
		EXPECT_TRUE(is_death_status(s.st.wc[i].status));
	EXPECT_EQ(rkv_ep_state(s.ep), RKV_EP_ERROR);
out:
	end_child(pid, &s, p, q);
}

/*
 * A peer that stops answering (SIGSTOP).  On tcp nothing serves the
 * one-sided READ, so it must end with RKV_WC_RETRY_EXC_ERR after about the
 * endpoint's timeout (1 s here).  On verbs the NIC and on shm the mapping
 * still serve it, so success is right there too; a hang never is.
 */
static void t_peer_silent(void)
{
	struct conf_cli c;
	struct addr_msg m;
	struct rkv_wr w;
	uint64_t t0, dt;
	int fd = -1;
	pid_t pid;

	memset(&c, 0, sizeof(c));
	pid = spawn_server(&fd);
	if (pid < 0) {
		g_test_failures++;
		return;
	}
	if (connect_child(&c, fd, &m)) {
		g_test_failures++;
		goto out;
	}
	kill(pid, SIGSTOP);
	if (wait_stopped(pid, NULL))
		goto out;
	conf_wr(&w, RKV_WR_READ, 9, RKV_WR_SIGNALED, c.loc + 128, 64,
		c.loc_mr->lkey, m.raddr, m.rkey);
	conf_stash_clear(&c.st);
	t0 = rkv_now_ms();
	EXPECT_EQ(rkv_post(c.ep, &w, NULL), 0);
	EXPECT_EQ(conf_wait(NULL, &c, 1, 0, death_bound_ms()), 0);
	dt = rkv_now_ms() - t0;
	if (c.st.n >= 1) {
		enum rkv_wc_status s = c.st.wc[0].status;

		printf("#   READ from a stopped peer: %s after %" PRIu64 " ms\n",
		       rkv_wc_status_str(s), dt);
		if (g_conf_provider == RKV_TP_TCP)
			EXPECT_EQ(s, RKV_WC_RETRY_EXC_ERR);
		else
			EXPECT_TRUE(s == RKV_WC_SUCCESS ||
				    s == RKV_WC_RETRY_EXC_ERR);
		if (s == RKV_WC_RETRY_EXC_ERR)
			EXPECT_EQ(rkv_ep_state(c.ep), RKV_EP_ERROR);
	}
out:
	kill(pid, SIGKILL);
	conf_child_reap(pid, conf_bound_ms());
	if (fd >= 0)
		close(fd);
	conf_cli_close(&c);
}

/*
 * A peer stopped (SIGSTOP) in the middle of a large WRITE into our region,
 * or of a large SEND into our RECV buffer.  We deregister the region and
 * destroy the endpoint, refill both buffers, and let the peer go on:
 * nothing may land in either after those calls returned - their owner may
 * have freed them.  tcp (shm: the peer writes through its own mapping of
 * the region, DESIGN §11; verbs: the NIC stops with the QP).
 */
#define STALL_LEN (48u << 10)   /* a SEND: into a 64 KiB RECV */
#define STALL_WLEN (8u << 20)  /* a WRITE: more than a socket holds */
static void stalled_landing(bool send)
{
	struct conf_fix_opts o;
	struct conf_srv s;
	struct addr_msg m;
	struct rkv_recv_wr r;
	int p[2] = { -1, -1 }, q[2] = { -1, -1 };
	char ready = 0;
	size_t bad_reg = 0, bad_loc = 0, done = 0, len;
	const uint8_t *in;
	uint64_t t0;
	pid_t pid = -1;

	memset(&s, 0, sizeof(s));
	pid = fork_child(p, q);
	if (pid == 0) {
		struct conf_cli c;
		struct conf_fix_opts co;
		struct rkv_wr w;

		conf_fix_opts_init(&co);
		co.local_len = STALL_WLEN;
		if (child_connect(p[0], &co, &c, &m))
			_exit(EX_SETUP);
		memset(c.loc, 0x5a, STALL_WLEN);
		/* one round trip first: the connection is all set up, and
		 * the big one's first message leaves at its post */
		conf_wr(&w, RKV_WR_WRITE, 1, RKV_WR_SIGNALED, c.loc, 8,
			c.loc_mr->lkey, m.raddr + STALL_WLEN, m.rkey);
		if (rkv_post(c.ep, &w, NULL) || child_wait1(&c) != EX_OK)
			_exit(EX_POST);
		if (send)
			conf_wr(&w, RKV_WR_SEND, 2, RKV_WR_SIGNALED, c.loc,
				STALL_LEN, c.loc_mr->lkey, 0, 0);
		else
			conf_wr(&w, RKV_WR_WRITE, 1, RKV_WR_SIGNALED, c.loc,
				STALL_WLEN, c.loc_mr->lkey, m.raddr, m.rkey);
		write_full(q[1], "R", 1);
		/* the parent's RECV is posted before it answers */
		if (read_full(p[0], &ready, 1, 4 * conf_bound_ms()) ||
		    rkv_post(c.ep, &w, NULL))
			_exit(EX_POST);
		raise(SIGSTOP);
		/* let the socket move what it can, then go */
		t0 = rkv_now_ms();
		while (rkv_now_ms() - t0 < 2000)
			conf_progress(NULL, &c);
		_exit(EX_OK);
	}
	if (pid < 0)
		goto out;
	conf_fix_opts_init(&o);
	o.region_len = STALL_WLEN + 4096;
	o.srv_timeout_ms = 1000;
	if (serve_child(&s, &o, p[1]))
		goto out;
	memset(&r, 0, sizeof(r));
	r.wr_id = 10;
	r.local = s.loc;
	r.length = STALL_LEN;
	r.lkey = s.loc_mr->lkey;
	EXPECT_EQ(rkv_post_recv(s.ep, &r, NULL), 0);
	if (read_full(q[0], &ready, 1, 4 * conf_bound_ms()) || ready != 'R') {
		printf("#   the child client never got ready\n");
		g_test_failures++;
		goto out;
	}
	write_full(p[1], "G", 1);
	/* until it has stopped itself, after its post */
	if (wait_stopped(pid, &s))
		goto out;
	/* what it sent before stopping arrives and starts */
	t0 = rkv_now_ms();
	while (rkv_now_ms() - t0 < 300u) {
		conf_progress(&s, NULL);
		if (rkv_ep_state(s.ep) == RKV_EP_ERROR)
			break;
	}
	/* it may have gone through before the child stopped (its progress
	 * thread runs until then): nothing stalled, nothing to check */
	in = send ? s.loc : s.reg;
	len = send ? STALL_LEN : STALL_WLEN;
	conf_mem_begin(); /* the provider's thread may still be writing */
	for (size_t i = 0; i < len; i++)
		done += in[i] == 0x5a;
	conf_mem_end();
	printf("#   %s stopped: %zu of %zu bytes in; the endpoint %s after "
	       "%" PRIu64 " ms\n", send ? "SEND" : "WRITE", done, len,
	       rkv_ep_state(s.ep) == RKV_EP_ERROR ? "failed" : "still up",
	       rkv_now_ms() - t0);
	EXPECT_EQ(rkv_mr_dereg(s.mr), 0);
	s.mr = NULL;
	rkv_ep_destroy(s.ep);
	s.ep = NULL;
	conf_memset(s.reg, 0x11, s.reg_len);
	conf_memset(s.loc, 0x11, STALL_LEN);
	kill(pid, SIGCONT);
	t0 = rkv_now_ms();
	while (rkv_now_ms() - t0 < 2500)
		conf_progress(&s, NULL);
	conf_mem_begin();
	for (size_t i = 0; i < s.reg_len; i++)
		bad_reg += s.reg[i] != 0x11;
	for (size_t i = 0; i < STALL_LEN; i++)
		bad_loc += s.loc[i] != 0x11;
	conf_mem_end();
	printf("#   %s stopped: bytes changed after dereg and destroy: "
	       "region %zu, RECV buffer %zu\n", send ? "SEND" : "WRITE",
	       bad_reg, bad_loc);
	EXPECT_EQ_U64(bad_reg, 0);
	EXPECT_EQ_U64(bad_loc, 0);
out:
	end_child(pid, &s, p, q);
}

static void t_stalled_landing(void)
{
	if (g_conf_provider != RKV_TP_TCP) {
		rkv_test_skip("tcp only");
		return;
	}
	stalled_landing(false);
	stalled_landing(true);
}

void conf_tests_proc(void)
{
	CONF_TEST(t_atomics_multiprocess);
	CONF_TEST(t_peer_death_server);
	CONF_TEST(t_peer_death_client);
	CONF_TEST(t_peer_silent);
	CONF_TEST(t_stalled_landing);
}
