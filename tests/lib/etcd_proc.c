/* SPDX-License-Identifier: MIT */
/*
 * etcd_proc.c - a real etcd for tests (etcd_proc.h).  The process is
 * started by fork/exec and signalled by its PID only.  Ports come from
 * binding 127.0.0.1:0 and closing again, so another process can take one
 * before etcd binds it: a start whose etcd exits saying "address already
 * in use" is retried on new ports.  Readiness is a read through
 * common/etcd.h that gets an answer (the key is absent): the gateway
 * listens and the member has elected itself.
 */
#include "etcd_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "etcd.h"

#define START_TIMEOUT_MS 15000
#define STOP_TIMEOUT_MS 5000
#define START_TRIES 3

static void msg(char *why, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void msg(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!why || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void rm_tree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* $RKV_ETCD_BIN, /usr/bin/etcd, or etcd on $PATH. */
static int find_etcd(char *path, size_t len)
{
	const char *env = getenv("RKV_ETCD_BIN"), *p = getenv("PATH");

	if (env && *env) {
		snprintf(path, len, "%s", env);
		return access(path, X_OK) ? -ENOENT : 0;
	}
	snprintf(path, len, "/usr/bin/etcd");
	if (!access(path, X_OK))
		return 0;
	while (p && *p) {
		size_t n = strcspn(p, ":");

		snprintf(path, len, "%.*s/etcd", (int)n, p);
		if (n && !access(path, X_OK))
			return 0;
		p += n + (p[n] == ':');
	}
	return -ENOENT;
}

/* Two distinct free ports of 127.0.0.1 (held together while chosen). */
static int free_ports(int *a, int *b)
{
	int fd[2] = { -1, -1 }, port[2] = { 0, 0 }, r = 0;

	for (int i = 0; i < 2 && !r; i++) {
		struct sockaddr_in sa = { .sin_family = AF_INET,
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t sl = sizeof(sa);

		fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd[i] < 0 || bind(fd[i], (struct sockaddr *)&sa, sizeof(sa)) ||
		    getsockname(fd[i], (struct sockaddr *)&sa, &sl))
			r = -errno;
		else
			port[i] = ntohs(sa.sin_port);
	}
	for (int i = 0; i < 2; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	*a = port[0];
	*b = port[1];
	return r;
}

/* The last non-empty line of the folder's etcd.log, for a reason. */
static void log_tail(const struct test_etcd *t, char *buf, size_t len)
{
	char path[300], tail[512];
	ssize_t n = 0;
	int fd;

	snprintf(buf, len, "(no log)");
	snprintf(path, sizeof(path), "%s/etcd.log", t->dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	off_t end = lseek(fd, 0, SEEK_END);

	if (end > 0 && lseek(fd, end > (off_t)sizeof(tail) - 1 ?
				     end - (off_t)sizeof(tail) + 1 : 0,
			     SEEK_SET) >= 0)
		n = read(fd, tail, sizeof(tail) - 1);
	close(fd);
	if (n <= 0)
		return;
	tail[n] = '\0';
	while (n && (tail[n - 1] == '\n' || tail[n - 1] == '\r'))
		tail[--n] = '\0';
	char *l = strrchr(tail, '\n');

	snprintf(buf, len, "%.*s", (int)(len - 1), l ? l + 1 : tail);
}

static void child_exec(const struct test_etcd *t, const char *bin)
{
	char data[300], log[300], name[32], token[48], curl_[64], purl[64],
		cluster[96];
	const char *argv[] = {
		bin, "--name", name, "--data-dir", data,
		"--listen-client-urls", curl_, "--advertise-client-urls", curl_,
		"--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
		"--initial-cluster", cluster, "--initial-cluster-state", "new",
		"--initial-cluster-token", token,
		"--logger", "zap", "--log-outputs", "stderr",
		"--log-level", "error",
		/* one member: a short election timeout starts it quickly and
		 * makes etcd's minimum lease TTL 1 s */
		"--heartbeat-interval", "100", "--election-timeout", "500",
		NULL
	};
	int fd;

	/* a test that dies or times out takes its etcd with it */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	snprintf(name, sizeof(name), "rkv-test");
	snprintf(token, sizeof(token), "rkv-test-%d", t->peer_port);
	snprintf(data, sizeof(data), "%s/data", t->dir);
	snprintf(log, sizeof(log), "%s/etcd.log", t->dir);
	snprintf(curl_, sizeof(curl_), "http://127.0.0.1:%d", t->client_port);
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", t->peer_port);
	snprintf(cluster, sizeof(cluster), "%s=%s", name, purl);
	fd = open("/dev/null", O_RDONLY);
	if (fd >= 0)
		dup2(fd, 0);
	fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	close_range(3, ~0u, 0);
	execv(bin, (char *const *)argv);
	_exit(127);
}

static int spawn(struct test_etcd *t, const char *bin)
{
	pid_t parent = getpid(), pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (getppid() != parent) /* it died before PDEATHSIG was set */
			_exit(1);
		child_exec(t, bin);
	}
	t->pid = pid;
	return 0;
}

/* Wait until etcd answers a read, or it exits, or the bound passes. */
static int wait_ready(struct test_etcd *t, char *why, size_t why_len)
{
	long deadline = now_ms() + START_TIMEOUT_MS;
	struct rkv_etcd *e;
	struct rkv_etcd_kv kv;
	char tail[300];
	int r, st;

	r = rkv_etcd_open(t->url, 500, &e, why, why_len);
	if (r)
		return r;
	do {
		r = rkv_etcd_get(e, "rkv-test-etcd-probe", &kv, NULL);
		rkv_etcd_kv_fini(&kv);
		if (r == 0 || r == -ENOENT)
			break;
		if (waitpid(t->pid, &st, WNOHANG) == t->pid) {
			t->pid = 0;
			log_tail(t, tail, sizeof(tail));
			msg(why, why_len, "etcd exited (status 0x%x): %s", st, tail);
			r = strstr(tail, "address already in use") ? -EADDRINUSE
								     : -ECHILD;
			break;
		}
		sleep_ms(50);
	} while (now_ms() < deadline);
	if (r && r != -ENOENT && r != -EADDRINUSE && r != -ECHILD) {
		log_tail(t, tail, sizeof(tail));
		msg(why, why_len, "etcd at %s did not answer within %d ms (%s); log: %s",
		    t->url, START_TIMEOUT_MS, rkv_etcd_why(e), tail);
		r = -ETIMEDOUT;
	}
	rkv_etcd_close(e);
	return r == -ENOENT ? 0 : r;
}

/* Start the process of t (ports and folder set) and wait for it. */
static int run(struct test_etcd *t, char *why, size_t why_len)
{
	char bin[PATH_MAX];
	int r;

	if (find_etcd(bin, sizeof(bin))) {
		msg(why, why_len, "etcd is not installed (no %s; apt-get install etcd-server)",
		    getenv("RKV_ETCD_BIN") ? getenv("RKV_ETCD_BIN")
					   : "/usr/bin/etcd or etcd on PATH");
		return -ENOENT;
	}
	snprintf(t->url, sizeof(t->url), "etcd://127.0.0.1:%d", t->client_port);
	r = spawn(t, bin);
	if (r) {
		msg(why, why_len, "fork: %s", strerror(-r));
		return r;
	}
	r = wait_ready(t, why, why_len);
	if (r)
		test_etcd_kill(t);
	return r;
}

int test_etcd_start(struct test_etcd *t, char *why, size_t why_len)
{
	const char *tmp = getenv("TMPDIR");
	int r = -EADDRINUSE;

	memset(t, 0, sizeof(*t));
	snprintf(t->dir, sizeof(t->dir), "%s/rkv-etcd-XXXXXX",
		 tmp && *tmp && strlen(tmp) < 200 ? tmp : "/tmp");
	if (!mkdtemp(t->dir)) {
		r = -errno;
		msg(why, why_len, "mkdtemp %s: %s", t->dir, strerror(-r));
		t->dir[0] = '\0';
		return r;
	}
	for (int i = 0; i < START_TRIES && r == -EADDRINUSE; i++) {
		char data[300];

		/* a member of the last try's ports must not be found */
		snprintf(data, sizeof(data), "%s/data", t->dir);
		rm_tree(data);
		r = free_ports(&t->client_port, &t->peer_port);
		if (r) {
			msg(why, why_len, "no free port: %s", strerror(-r));
			break;
		}
		r = run(t, why, why_len);
	}
	if (r)
		test_etcd_stop(t);
	return r;
}

void test_etcd_kill(struct test_etcd *t)
{
	if (t->pid <= 0)
		return;
	kill(t->pid, SIGKILL);
	while (waitpid(t->pid, NULL, 0) < 0 && errno == EINTR)
		;
	t->pid = 0;
}

int test_etcd_restart(struct test_etcd *t, char *why, size_t why_len)
{
	test_etcd_kill(t);
	if (!t->dir[0] || !t->client_port) {
		msg(why, why_len, "restart of an etcd that was never started");
		return -EINVAL;
	}
	return run(t, why, why_len);
}


void test_etcd_stop(struct test_etcd *t)
{
	if (t->pid > 0) {
		long deadline = now_ms() + STOP_TIMEOUT_MS;
		pid_t w;

		kill(t->pid, SIGTERM);
		while ((w = waitpid(t->pid, NULL, WNOHANG)) == 0 &&
		       now_ms() < deadline)
			sleep_ms(10);
		if (w != t->pid)
			test_etcd_kill(t);
		t->pid = 0;
	}
	if (t->dir[0] && strstr(t->dir, "/rkv-etcd-"))
		rm_tree(t->dir);
	t->dir[0] = '\0';
}
