/* SPDX-License-Identifier: MIT */
/*
 * itest_quiet.c - librkv never prints (--provider tcp|shm|verbs).  Every
 * kind of call is made to fail - no server, a wrong and a missing secret,
 * a server killed under a live client, bad arguments, a read-only client
 * writing, a value too large, a buffer too small, counters and tensors on
 * a dead server - with the process's global log at its most verbose
 * (RKV_LOG_DEBUG, the stderr sink) and fds 1 and 2 sent to a file: the
 * file must stay empty.  With a log callback set, the same failures must
 * reach the callback (the messages are routed, not lost), transport
 * messages included.
 *
 *   t_silent     no callback: nothing printed, every call fails cleanly
 *   t_routed     a callback: nothing printed, the callback got the lines
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "rkv.h"
#include "rkv_ps.h"
#include "srv.h"
#include "test.h"

static const char *g_prov = "tcp";
static char g_dir[256];
static char g_secret[300], g_wrong[300];

struct lines {
	unsigned n;              /* lines received */
	unsigned transport;      /* of them, the transport's ("tcp: ...") */
	char last[256];
};

static void count_cb(int level, const char *msg, void *arg)
{
	struct lines *l = arg;

	(void)level;
	l->n++;
	if (!strncmp(msg, "tcp: ", 5) || !strncmp(msg, "shm: ", 5) ||
	    !strncmp(msg, "verbs: ", 7) || !strncmp(msg, "transport: ", 11))
		l->transport++;
	snprintf(l->last, sizeof(l->last), "%s", msg);
}

/* fds 1 and 2 to a fresh file while the calls run */
struct capture {
	int saved1, saved2, fd;
	char path[300];
};

static void capture_start(struct capture *cap)
{
	fflush(stdout);
	fflush(stderr);
	snprintf(cap->path, sizeof(cap->path), "%s/out", g_dir);
	cap->fd = open(cap->path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	cap->saved1 = dup(1);
	cap->saved2 = dup(2);
	dup2(cap->fd, 1);
	dup2(cap->fd, 2);
}

/* Restore fds 1 and 2; the bytes printed meanwhile. */
static long capture_end(struct capture *cap)
{
	struct stat st;
	char head[200] = "";

	fflush(stdout);
	fflush(stderr);
	dup2(cap->saved1, 1);
	dup2(cap->saved2, 2);
	close(cap->saved1);
	close(cap->saved2);
	close(cap->fd);
	if (stat(cap->path, &st))
		return -1;
	if (st.st_size) {
		FILE *f = fopen(cap->path, "r");

		if (f) {
			if (!fgets(head, sizeof(head), f))
				head[0] = '\0';
			fclose(f);
		}
		head[strcspn(head, "\n")] = '\0';
		printf("#   printed %lld bytes, first line: %s\n",
		       (long long)st.st_size, head);
	}
	return (long)st.st_size;
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -EIO;
}

static int make_client(const char *servers, const char *secret_file,
		       int read_only, struct lines *l, struct rkv_client **c)
{
	struct rkv_client_opts o;

	rkv_client_opts_init(&o);
	o.servers = servers;
	o.secret_file = secret_file;
	o.read_only = read_only;
	o.timeout_ms = 1000;
	o.connect_timeout_ms = 1000;
	o.max_value = 4096;
	if (l) {
		o.log_fn = count_cb;
		o.log_arg = l;
	}
	return rkv_client_create(&o, c);
}

/* Every failure; returns how many calls did not fail as they should. */
static char g_bad[256]; /* lines of the calls that did not fail */

static unsigned fail_everything(const struct test_srv *plain,
				const struct test_srv *sec,
				struct test_srv *victim, struct lines *l)
{
	char nobody[300], big[8192], buf[4];
	struct rkv_client_opts o;
	struct rkv_client *c = NULL, *ro = NULL;
	struct rkv_ps *ps = NULL;
	struct rkv_ps_tensor *t = NULL;
	uint64_t id;
	size_t n;
	unsigned bad = 0;

#define MUST_FAIL(call)                                                        \
	do {                                                                   \
		if ((call) >= 0) {                                             \
			size_t u_ = strlen(g_bad);                             \
			snprintf(g_bad + u_, sizeof(g_bad) - u_, " %d",        \
				 __LINE__);                                    \
			bad++;                                                 \
		}                                                              \
	} while (0)
	/* bad arguments */
	MUST_FAIL(rkv_client_create(NULL, &c));
	rkv_client_opts_init(&o);
	o.servers = "nonsense://x";
	MUST_FAIL(rkv_client_create(&o, &c));
	o.servers = "";
	MUST_FAIL(rkv_client_create(&o, &c));
	o.servers = NULL;
	o.cluster_file = "/nonexistent/rkv-cluster";
	MUST_FAIL(rkv_client_create(&o, &c));
	/* no server there */
	test_srv_listen_addr(g_prov, nobody, sizeof(nobody));
	MUST_FAIL(make_client(nobody, NULL, 0, l, &c));
	/* one live server, one missing: a client (the missing one's keys
	 * fail), which says so through the callback only */
	{
		char two[700];
		unsigned before = l ? l->n : 0;

		snprintf(two, sizeof(two), "%s,%s", plain->addr, nobody);
		if (make_client(two, NULL, 0, l, &c) == 0) {
			MUST_FAIL(rkv_client_server_status(c, 1));
			rkv_client_destroy(c);
			c = NULL;
		} else {
			MUST_FAIL(0);
		}
		if (l && l->n == before)
			MUST_FAIL(0); /* the callback heard nothing */
	}
	/* wrong and missing secrets, a secret file that does not exist */
	MUST_FAIL(make_client(sec->addr, g_wrong, 0, l, &c));
	MUST_FAIL(make_client(sec->addr, NULL, 0, l, &c));
	MUST_FAIL(make_client(sec->addr, "/nonexistent/secret", 0, l, &c));
	/* a live client: bad keys and values, a small buffer */
	if (make_client(plain->addr, NULL, 0, l, &c) == 0) {
		memset(big, 'k', sizeof(big));
		MUST_FAIL(rkv_put(c, NULL, 0, "v", 1));
		MUST_FAIL(rkv_put(c, big, RKV_KEY_MAX + 1, "v", 1));
		MUST_FAIL(rkv_put(c, "k", 1, big, sizeof(big)));
		MUST_FAIL(rkv_get(c, "absent", 6, buf, sizeof(buf), &n));
		if (rkv_put(c, "k", 1, "0123456789", 10) == 0)
			MUST_FAIL(rkv_get(c, "k", 1, buf, sizeof(buf), &n));
		MUST_FAIL(rkv_rmw(c, "k", 1, test_rmw_cancel, NULL));
		MUST_FAIL(rkv_delete(c, "absent", 6));
		MUST_FAIL(rkv_server_stats(c, 7, NULL));
		MUST_FAIL(rkv_counter_open(c, "", &id));
		MUST_FAIL(rkv_ps_tensor_open(NULL, "x", RKV_PS_FLOAT32, 8, &t));
		rkv_client_destroy(c);
		c = NULL;
	} else {
		bad++;
	}
	/* a read-only client writing */
	if (make_client(plain->addr, NULL, 1, l, &ro) == 0) {
		MUST_FAIL(rkv_put(ro, "k", 1, "v", 1));
		MUST_FAIL(rkv_delete(ro, "k", 1));
		rkv_client_destroy(ro);
	} else {
		bad++;
	}
	/* a server killed under a live client */
	{
		if (make_client(victim->addr, NULL, 0, l, &c) == 0) {
			if (rkv_ps_create(c, &ps))
				bad++;
			rkv_put(c, "before", 6, "v", 1);
			test_srv_kill(victim);
			/* shm: one-sided WRs reach the mapping directly; the
			 * death is seen on the endpoint's socket shortly (5 s
			 * at most, sanitizers included) */
			for (int i = 0; i < 50; i++) {
				if (rkv_put(c, "after", 5, "v", 1) < 0)
					break;
				usleep(100000);
			}
			MUST_FAIL(rkv_put(c, "after", 5, "v", 1));
			MUST_FAIL(rkv_get(c, "before", 6, buf, sizeof(buf), &n));
			MUST_FAIL(rkv_server_stats(c, 0,
						   &(struct rkv_server_stats){ 0 }));
			MUST_FAIL(rkv_counter_open(c, "ctr", &id));
			if (ps) {
				MUST_FAIL(rkv_ps_tensor_create(ps, "w",
							       RKV_PS_FLOAT32, 64,
							       16, NULL));
				rkv_ps_destroy(ps);
			}
			rkv_client_destroy(c);
		} else {
			bad++;
			test_srv_kill(victim);
		}
	}
#undef MUST_FAIL
	return bad;
}

static void setup(struct test_srv *plain, struct test_srv *sec,
		  struct test_srv *victim)
{
	const char *extra[] = { "--secret-file", g_secret, NULL };

	snprintf(g_dir, sizeof(g_dir), "/tmp/rkv-quiet-%d", (int)getpid());
	mkdir(g_dir, 0700);
	snprintf(g_secret, sizeof(g_secret), "%s/secret", g_dir);
	snprintf(g_wrong, sizeof(g_wrong), "%s/wrong", g_dir);
	ASSERT_EQ(write_file(g_secret, "itest-quiet secret 0123456789"), 0);
	ASSERT_EQ(write_file(g_wrong, "another secret entirely 9876"), 0);
	ASSERT_EQ(test_srv_start(plain, g_prov, NULL), 0);
	ASSERT_EQ(test_srv_start(sec, g_prov, extra), 0);
	/* started here: a server's own output is not the library's */
	ASSERT_EQ(test_srv_start(victim, g_prov, NULL), 0);
}

static void teardown(struct test_srv *plain, struct test_srv *sec)
{
	char p[300];

	test_srv_stop(plain);
	test_srv_stop(sec);
	unlink(g_secret);
	unlink(g_wrong);
	snprintf(p, sizeof(p), "%s/out", g_dir);
	unlink(p);
	rmdir(g_dir);
}

static void t_silent(void)
{
	struct test_srv plain, sec, victim;
	struct capture cap;
	unsigned bad;
	long printed;

	setup(&plain, &sec, &victim);
	/* anything not routed to a callback would print now */
	rkv_log_set_level(RKV_LOG_DEBUG);
	capture_start(&cap);
	g_bad[0] = '\0';
	bad = fail_everything(&plain, &sec, &victim, NULL);
	printed = capture_end(&cap);
	rkv_log_set_level(RKV_LOG_OFF);
	if (bad)
		printf("#   calls that did not fail, at lines:%s\n", g_bad);
	EXPECT_EQ(bad, 0u);
	EXPECT_EQ(printed, 0L);
	teardown(&plain, &sec);
}

static void t_routed(void)
{
	struct test_srv plain, sec, victim;
	struct capture cap;
	struct lines l = { 0 };
	unsigned bad;
	long printed;

	setup(&plain, &sec, &victim);
	rkv_log_set_level(RKV_LOG_DEBUG);
	capture_start(&cap);
	g_bad[0] = '\0';
	bad = fail_everything(&plain, &sec, &victim, &l);
	printed = capture_end(&cap);
	rkv_log_set_level(RKV_LOG_OFF);
	printf("#   %u lines to the callback (%u of the transport), last: %s\n",
	       l.n, l.transport, l.last);
	if (bad)
		printf("#   calls that did not fail, at lines:%s\n", g_bad);
	EXPECT_EQ(bad, 0u);
	EXPECT_EQ(printed, 0L);
	EXPECT_TRUE(l.n > 0);
	teardown(&plain, &sec);
}

int main(int argc, char **argv)
{
	g_prov = test_itest_init(argc, argv, 300);
	if (!g_prov)
		return 77;
	RKV_TEST(t_silent);
	RKV_TEST(t_routed);
	return rkv_test_done();
}
