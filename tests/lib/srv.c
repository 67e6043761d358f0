/* SPDX-License-Identifier: MIT */
/*
 * srv.c - server processes for integration tests.  Each server is started
 * by fork/exec and stopped by its PID only; its stdout is read until the
 * "rkv-server: listening on ADDR" line, its stderr goes to the test's.
 */
#include "srv.h"

#include "log.h"
#include "rkv.h"
#include "test.h"
#include "transport.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char g_bin[PATH_MAX];
static unsigned g_seq;

const char *test_itest_init(int argc, char **argv, unsigned watchdog_s)
{
	const char *prov = "tcp";

	for (int i = 1; i < argc - 1; i++)
		if (!strcmp(argv[i], "--provider"))
			prov = argv[i + 1];
	rkv_test_init(argc, argv, watchdog_s);
	rkv_log_set_level(RKV_LOG_OFF);
	signal(SIGPIPE, SIG_IGN);
	test_srv_setup(argv[0]);
	if (!strcmp(prov, "verbs")) {
		struct rkv_tp_opts o;
		struct rkv_tp *tp;

		rkv_tp_opts_init(&o);
		o.provider = RKV_TP_VERBS;
		if (!getenv("RKV_VERBS_IP") || rkv_tp_create(&o, &tp)) {
			printf("1..0 # SKIP no RDMA device or RKV_VERBS_IP "
			       "unset\n");
			return NULL;
		}
		rkv_tp_destroy(tp);
	}
	return prov;
}

void test_srv_setup(const char *argv0)
{
	const char *env = getenv("RKV_BIN_DIR");
	char tmp[PATH_MAX - 16];

	if (env && *env) {
		snprintf(g_bin, sizeof(g_bin), "%s", env);
		return;
	}
	snprintf(tmp, sizeof(tmp), "%s", argv0);
	char *slash = strrchr(tmp, '/');

	if (slash)
		*slash = '\0';
	else
		snprintf(tmp, sizeof(tmp), ".");
	snprintf(g_bin, sizeof(g_bin), "%s/../bin", tmp);
}

const char *test_bin_dir(void)
{
	return g_bin;
}

void test_srv_listen_addr(const char *provider, char *buf, size_t len)
{
	if (!strcmp(provider, "shm")) {
		snprintf(buf, len, "shm:///rkv-test-%d-%u", (int)getpid(),
			 g_seq++);
	} else if (!strcmp(provider, "verbs")) {
		const char *ip = getenv("RKV_VERBS_IP");

		snprintf(buf, len, "verbs://%s:0", ip && *ip ? ip : "127.0.0.1");
	} else {
		snprintf(buf, len, "tcp://127.0.0.1:0");
	}
}

int test_srv_start_named(struct test_srv *s, const char *provider,
			 const char *name, const char *listen,
			 const char *const *more)
{
	const char *extra[24] = { "--name", name };
	unsigned n = 2;
	int rc;

	if (listen) {
		extra[n++] = "--listen";
		extra[n++] = listen;
	}
	for (unsigned k = 0; more && more[k] && n < 23; k++)
		extra[n++] = more[k];
	extra[n] = NULL;
	rc = test_srv_start(s, provider, extra);
	if (rc)
		printf("#   cannot start rkv-server %s (%s): %s\n", name,
		       provider, strerror(-rc));
	return rc;
}

int test_srv_start(struct test_srv *s, const char *provider,
		   const char *const *extra)
{
	char path[PATH_MAX + 32], listen[300];
	const char *argv[64];
	int pfd[2], n = 0;

	memset(s, 0, sizeof(*s));
	snprintf(path, sizeof(path), "%s/rkv-server", g_bin);
	test_srv_listen_addr(provider, listen, sizeof(listen));
	argv[n++] = path;
	argv[n++] = "--listen";
	argv[n++] = listen;
	argv[n++] = "--log-level";
	argv[n++] = getenv("RKV_TEST_SERVER_LOG") ? getenv("RKV_TEST_SERVER_LOG")
						 : "error";
	for (int i = 0; extra && extra[i] && n < 62; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	pid_t pid = fork();

	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -errno;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);

		/* a test that dies or times out takes its servers with it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);

		dup2(devnull, 0);
		dup2(pfd[1], 1);
		execv(path, (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	s->pid = pid;
	/* read stdout until the listening line */
	char buf[1024];
	size_t got = 0;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };

		clock_gettime(CLOCK_MONOTONIC, &t1);
		long ms = (t1.tv_sec - t0.tv_sec) * 1000 +
			  (t1.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms > 10000)
			break;
		if (poll(&p, 1, (int)(10000 - ms)) <= 0)
			continue;
		ssize_t r = read(pfd[0], buf + got, sizeof(buf) - 1 - got);

		if (r <= 0)
			break;
		got += (size_t)r;
		buf[got] = '\0';
		char *l = strstr(buf, "listening on ");

		if (l && strchr(l, '\n')) {
			l += strlen("listening on ");
			*strchr(l, '\n') = '\0';
			snprintf(s->addr, sizeof(s->addr), "%s", l);
			close(pfd[0]);
			return 0;
		}
		if (got == sizeof(buf) - 1)
			got = 0;
	}
	close(pfd[0]);
	test_srv_kill(s);
	return -ETIMEDOUT;
}

int test_srv_stop(struct test_srv *s)
{
	int st = -1;

	if (s->pid <= 0)
		return -1;
	kill(s->pid, SIGTERM);
	for (int i = 0; i < 500; i++) {
		pid_t r = waitpid(s->pid, &st, WNOHANG);

		if (r == s->pid) {
			s->pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
		usleep(10000);
	}
	kill(s->pid, SIGKILL);
	waitpid(s->pid, &st, 0);
	s->pid = 0;
	return -1;
}

void test_srv_kill(struct test_srv *s)
{
	if (s->pid <= 0)
		return;
	kill(s->pid, SIGKILL);
	waitpid(s->pid, NULL, 0);
	s->pid = 0;
}

int test_rmw_add(const void *old, size_t old_len, void *out, size_t cap,
		 size_t *out_len, void *arg)
{
	uint64_t v = 0;

	(void)cap;
	if (old && old_len == 8)
		memcpy(&v, old, 8);
	v += (uint64_t)(uintptr_t)arg;
	memcpy(out, &v, 8);
	*out_len = 8;
	return RKV_RMW_WRITE;
}

void test_big_fill(unsigned char *v, size_t len, unsigned seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + len;

	for (size_t i = 0; i < len; i++) {
		if (i % 8 == 0)
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		v[i] = (unsigned char)(x >> (8 * (i % 8)));
	}
}

int test_rmw_flip_first(const void *old, size_t old_len, void *out,
			size_t cap, size_t *out_len, void *arg)
{
	(void)arg;
	if (!old || old_len > cap)
		return -EINVAL;
	memcpy(out, old, old_len);
	if (old_len)
		((unsigned char *)out)[0] ^= 0xff;
	*out_len = old_len;
	return RKV_RMW_WRITE;
}

int test_rmw_cancel(const void *old, size_t old_len, void *out, size_t cap,
		    size_t *out_len, void *arg)
{
	(void)old;
	(void)old_len;
	(void)out;
	(void)cap;
	(void)out_len;
	(void)arg;
	return -ECANCELED;
}

int test_rmw_steal(const void *old, size_t old_len, void *out, size_t cap,
		   size_t *out_len, void *arg)
{
	struct test_steal *a = arg;

	(void)old;
	(void)old_len;
	if (a->calls++ || cap < 1)
		return -ECANCELED;
	a->b_rc = rkv_put(a->b, a->key, strlen(a->key), "b", 1);
	memcpy(out, "a", 1);
	*out_len = 1;
	return RKV_RMW_WRITE;
}

struct rkv_client *test_client_at(const char *addr, unsigned timeout_ms,
				  size_t max_value)
{
	struct rkv_client_opts o;
	struct rkv_client *c = NULL;

	rkv_client_opts_init(&o);
	o.servers = addr;
	o.timeout_ms = timeout_ms;
	if (max_value)
		o.max_value = (unsigned)max_value;
	if (rkv_client_create(&o, &c))
		return NULL;
	return c;
}

void test_log_to_buf(int level, const char *msg, void *arg)
{
	struct test_logbuf *b = arg;
	int n;

	(void)level;
	if (b->len >= sizeof(b->text) - 1)
		return;
	n = snprintf(b->text + b->len, sizeof(b->text) - b->len, "%s\n", msg);
	if (n > 0)
		b->len += (size_t)n < sizeof(b->text) - b->len
				  ? (size_t)n
				  : sizeof(b->text) - b->len - 1;
}

struct rkv_client *test_client_cluster(const char *cluster,
				       unsigned timeout_ms,
				       unsigned connect_ms,
				       struct test_logbuf *lb, int *rc_out)
{
	struct rkv_client_opts o;
	struct rkv_client *c = NULL;
	int rc;

	rkv_client_opts_init(&o);
	o.cluster_file = cluster;
	o.timeout_ms = timeout_ms;
	o.connect_timeout_ms = connect_ms;
	if (lb) {
		o.log_fn = test_log_to_buf;
		o.log_arg = lb;
	}
	rc = rkv_client_create(&o, &c);
	if (rc_out)
		*rc_out = rc;
	return rc ? NULL : c;
}

static void kkey(char *k, size_t cap, unsigned i)
{
	snprintf(k, cap, "user:%u", i);
}

int test_kput(struct rkv_client *c, unsigned i, unsigned gen)
{
	char k[32], v[64];

	kkey(k, sizeof(k), i);
	snprintf(v, sizeof(v), "value-%u-of-%u", gen, i);
	return rkv_put(c, k, strlen(k), v, strlen(v));
}

int test_kcheck(struct rkv_client *c, unsigned i, unsigned gen)
{
	char k[32], v[64], buf[128];
	size_t len = 0;
	int rc;

	kkey(k, sizeof(k), i);
	snprintf(v, sizeof(v), "value-%u-of-%u", gen, i);
	rc = rkv_get(c, k, strlen(k), buf, sizeof(buf), &len);
	if (rc)
		return rc;
	return len == strlen(v) && memcmp(buf, v, len) == 0 ? 0 : -EBADMSG;
}

unsigned test_kowner(struct rkv_client *c, unsigned i)
{
	char k[32];

	kkey(k, sizeof(k), i);
	return rkv_client_route(c, k, strlen(k));
}
