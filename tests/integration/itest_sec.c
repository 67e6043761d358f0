/* SPDX-License-Identifier: MIT */
/*
 * itest_sec.c - security tests against real rkv-server processes on one
 * provider (--provider tcp|shm|verbs): shared-secret authentication
 * (right, wrong and missing secrets, a secret file open to others, a
 * replayed response, garbage and misplaced requests before the response),
 * least privilege (read-only clients and raw read-only connections that try
 * WRITE, CAS and FETCH_ADD with the rkeys they were given), and limits
 * (--max-clients floods, --max-chunks, --max-inflight, and clients that
 * stop posting RECVs while sending requests); on shm, attacks on the
 * provider's own channel (MR table and descriptors before HELLO, other
 * uids, read-only descriptors).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "layout.h"
#include "log.h"
#include "msg.h"
#include "rkv.h"
#include "rkv_ext.h"
#include "rtime.h"
#include "raw.h"
#include "srv.h"
#include "sw.h"
#include "test.h"
#include "transport.h"

static const char *g_prov = "tcp";
static int g_verbs;
static char g_dir[256];        /* temporary directory for secret files */
static char g_secret[300];     /* mode 0600 */
static char g_wrong[300];      /* mode 0600, another secret */
static const char k_secret[] = "itest-sec secret 0123456789abcdef";
static char g_ro[300];         /* mode 0600, the read-only secret */
static const char k_ro[] = "itest-sec read-only secret 0123456789";

/* ------------------------------------------------------------ helpers */

static int start(struct test_srv *s, const char *const *extra)
{
	int rc = test_srv_start(s, g_prov, extra);

	if (rc)
		printf("#   cannot start rkv-server (%s): %s\n", g_prov,
		       strerror(-rc));
	return rc;
}

static int start_auth(struct test_srv *s, const char *const *more)
{
	const char *extra[16] = { "--secret-file", g_secret };
	int n = 2;

	for (int i = 0; more && more[i] && n < 15; i++)
		extra[n++] = more[i];
	extra[n] = NULL;
	return start(s, extra);
}

static char g_log[1024]; /* last error the client logged */

static void log_cb(int level, const char *msg, void *arg)
{
	(void)arg;
	if (level >= 3)
		snprintf(g_log, sizeof(g_log), "%s", msg);
}

static int connect_c(const char *addr, const char *secret_file, int ro,
		     struct rkv_client **out)
{
	struct rkv_client_opts o;

	rkv_client_opts_init(&o);
	o.servers = addr;
	o.timeout_ms = 5000;
	o.secret_file = secret_file;
	o.read_only = ro;
	o.log_fn = log_cb;
	g_log[0] = '\0';
	*out = NULL;
	return rkv_client_create(&o, out);
}

static int write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		close(fd);
		return -EIO;
	}
	close(fd);
	return chmod(path, mode) ? -errno : 0;
}

static int kput(struct rkv_client *c, const char *k, const char *v)
{
	return rkv_put(c, k, strlen(k), v, strlen(v));
}

static int kget(struct rkv_client *c, const char *k, char *buf, size_t cap)
{
	size_t len = 0;
	int rc = rkv_get(c, k, strlen(k), buf, cap - 1, &len);

	buf[rc == 0 ? len : 0] = '\0';
	return rc;
}

static long rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* ------------------------------------------------ raw transport client */

static int raw_hello(struct test_raw *r, unsigned flags, const char *name,
		     struct rkv_msg *out)
{
	struct rkv_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_HELLO;
	m.u.hello.flags = flags;
	snprintf(m.u.hello.name, sizeof(m.u.hello.name), "%s", name);
	return test_raw_call(r, &m, out);
}

static void mac_with(const char *key, const uint8_t *nonce,
		     const char *name_in, uint8_t *mac)
{
	unsigned char msg[RKV_AUTH_NONCE_LEN + RKV_NAME_MAX + 11];
	char name[RKV_NAME_MAX] = { 0 };
	unsigned len = 0;

	snprintf(name, sizeof(name), "%s", name_in);
	memcpy(msg, nonce, RKV_AUTH_NONCE_LEN);
	memcpy(msg + RKV_AUTH_NONCE_LEN, name, RKV_NAME_MAX);
	memcpy(msg + RKV_AUTH_NONCE_LEN + RKV_NAME_MAX, "rkv-auth-v1", 11);
	HMAC(EVP_sha256(), key, (int)strlen(key), msg, sizeof(msg), mac,
	     &len);
}

static void mac_of(const uint8_t *nonce, const char *name_in, uint8_t *mac)
{
	mac_with(k_secret, nonce, name_in, mac);
}

/* One one-sided WR, signaled; returns its completion status. */
static int raw_onesided(struct test_raw *r, enum rkv_wr_opcode op, uint64_t addr,
			uint32_t rkey, uint32_t len, uint64_t cmp,
			uint64_t swap)
{
	int atomic = op == RKV_WR_CAS || op == RKV_WR_FETCH_ADD;
	struct rkv_wr w = { .wr_id = 7, .opcode = op,
			    .flags = RKV_WR_SIGNALED,
			    .local = atomic ? (void *)&r->word : r->data,
			    .length = atomic ? 8 : len, .lkey = r->mr->lkey,
			    .remote_addr = addr, .rkey = rkey,
			    .compare_add = cmp, .swap = swap };
	uint64_t end = rkv_now_ms() + 5000;
	int rc = rkv_post(r->ep, &w, NULL);

	if (rc)
		return rc < 0 ? 1000 : rc;
	while (rkv_now_ms() < end) {
		struct rkv_wc wc[4];
		int k = rkv_cq_poll(r->cq, wc, 4);

		for (int i = 0; i < k; i++)
			if (wc[i].wr_id == 7)
				return (int)wc[i].status;
	}
	return 999;
}

/* READ the whole index (len bytes: 16 buckets of 32 slots) into idx and find its
 * first used slot: *word, at word index *wi.  0, or -1 (said why). */
static int first_slot(struct test_raw *r, const struct rkv_msg_hello_reply *h,
		      char *idx, size_t len, uint64_t *word, unsigned *wi)
{
	int st;

	*word = 0;
	if (h->nbuckets * h->bucket_slots * 8 != len) {
		printf("#   %llu buckets of %u slots, not %zu bytes\n",
		       (unsigned long long)h->nbuckets, h->bucket_slots, len);
		return -1;
	}
	st = raw_onesided(r, RKV_WR_READ, h->index_addr, h->index_rkey,
			  (uint32_t)len, 0, 0);
	if (st != RKV_WC_SUCCESS) {
		printf("#   index READ: %s\n",
		       rkv_wc_status_str((enum rkv_wc_status)st));
		return -1;
	}
	memcpy(idx, r->data, len);
	for (unsigned i = 0; i < len / 8 && !*word; i++) {
		memcpy(word, idx + i * 8, 8);
		*wi = i;
	}
	return *word ? 0 : -1;
}

/* A WRITE, CAS (compare word) or FETCH_ADD of 64 bytes / one word at addr
 * that must complete with REM_ACCESS_ERR; says so when it does not. */
static int refused_op(struct test_raw *r, enum rkv_wr_opcode op, int data,
		      uint64_t addr, uint32_t rkey, uint64_t word)
{
	int st;

	memset(r->data, 0x5a, 64);
	st = raw_onesided(r, op, addr, rkey, 64, op == RKV_WR_CAS ? word : 1,
			  0);
	if (st != RKV_WC_REM_ACCESS_ERR)
		printf("#   %s on %s: %s\n", rkv_wr_opcode_str(op),
		       data ? "data" : "index",
		       rkv_wc_status_str((enum rkv_wc_status)st));
	return st == RKV_WC_REM_ACCESS_ERR;
}

/* -------------------------------------------------------- authentication */

static void t_auth_secret(void)
{
	struct test_srv s;
	struct rkv_client *c = NULL, *c2 = NULL;
	struct rkv_client_opts o;
	struct rkv_server_stats st;
	char buf[64];
	int rc;

	ASSERT_EQ(start_auth(&s, NULL), 0);
	/* the right secret, from a file */
	ASSERT_EQ(connect_c(s.addr, g_secret, 0, &c), 0);
	EXPECT_EQ(kput(c, "k", "v1"), 0);
	EXPECT_EQ(kget(c, "k", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "v1");
	/* the right secret, as bytes */
	rkv_client_opts_init(&o);
	o.servers = s.addr;
	o.secret = k_secret;
	o.secret_len = strlen(k_secret);
	EXPECT_EQ(rkv_client_create(&o, &c2), 0);
	if (c2) {
		EXPECT_EQ(kget(c2, "k", buf, sizeof(buf)), 0);
		rkv_client_destroy(c2);
		c2 = NULL;
	}
	/* a wrong secret */
	rc = connect_c(s.addr, g_wrong, 0, &c2);
	EXPECT_EQ(rc, -EACCES);
	EXPECT_TRUE(c2 == NULL);
	EXPECT_TRUE(strstr(g_log, "authentication failed") != NULL);
	printf("#   wrong secret: %s\n", g_log);
	/* no secret at all */
	rc = connect_c(s.addr, NULL, 0, &c2);
	EXPECT_EQ(rc, -EACCES);
	EXPECT_TRUE(strstr(g_log, "requires authentication") != NULL);
	printf("#   no secret: %s\n", g_log);
	/* both of them counted (the second when its connection closes) */
	int ok = 0;

	for (int i = 0; i < 50 && !ok; i++) {
		EXPECT_EQ(rkv_server_stats(c, 0, &st), 0);
		ok = st.auth_failures == 2;
		if (!ok)
			usleep(100 * 1000);
	}
	EXPECT_EQ(st.auth_failures, 2);
	EXPECT_EQ(st.clients, 1);
	/* the authenticated client is unaffected */
	EXPECT_EQ(kget(c, "k", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "v1");
	rkv_client_destroy(c);
	EXPECT_EQ(test_srv_stop(&s), 0);

	/* a client with a secret talks to a server without one */
	ASSERT_EQ(start(&s, NULL), 0);
	EXPECT_EQ(connect_c(s.addr, g_secret, 0, &c), 0);
	if (c)
		EXPECT_EQ(kput(c, "k", "v"), 0);
	rkv_client_destroy(c);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

/* Run rkv-server with a bad --secret-file: exit 2, one line on stderr. */
/* Run rkv-server with --listen and args (at most 6) until it exits; its
 * stderr in err.  Returns its exit status. */
static int server_exit_args(const char *const *args, char *err,
			    size_t errlen)
{
	char path[600], listen[300], tmp[300];
	const char *argv[10];
	int st = -1, na = 0;

	snprintf(path, sizeof(path), "%s/rkv-server", test_bin_dir());
	snprintf(tmp, sizeof(tmp), "%s/stderr", g_dir);
	test_srv_listen_addr(g_prov, listen, sizeof(listen));
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int nul = open("/dev/null", O_RDWR);

		dup2(nul, 0);
		dup2(nul, 1);
		dup2(fd, 2);
		argv[na++] = path;
		argv[na++] = "--listen";
		argv[na++] = listen;
		for (int i = 0; args[i] && na < 9; i++)
			argv[na++] = args[i];
		argv[na] = NULL;
		execv(path, (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
		usleep(10000);
		if (i == 499) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
	}
	FILE *f = fopen(tmp, "r");

	err[0] = '\0';
	if (f) {
		size_t n = fread(err, 1, errlen - 1, f);

		err[n] = '\0';
		fclose(f);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int server_exit(const char *secret_file, char *err, size_t errlen)
{
	const char *args[] = { "--secret-file", secret_file, NULL };

	return server_exit_args(args, err, errlen);
}

static void t_secret_file_checks(void)
{
	char p644[300], p640[300], empty[300], nl[300], err[512];
	struct rkv_client *c = NULL;

	snprintf(p644, sizeof(p644), "%s/world", g_dir);
	snprintf(p640, sizeof(p640), "%s/group", g_dir);
	snprintf(empty, sizeof(empty), "%s/empty", g_dir);
	snprintf(nl, sizeof(nl), "%s/newline", g_dir);
	ASSERT_EQ(write_file(p644, k_secret, 0644), 0);
	ASSERT_EQ(write_file(p640, k_secret, 0640), 0);
	ASSERT_EQ(write_file(empty, "\n", 0600), 0);
	EXPECT_EQ(server_exit(p644, err, sizeof(err)), 2);
	printf("#   %s", err);
	EXPECT_TRUE(strstr(err, "chmod 600") != NULL);
	EXPECT_TRUE(strchr(err, '\n') == strrchr(err, '\n')); /* one line */
	EXPECT_EQ(server_exit(p640, err, sizeof(err)), 2);
	EXPECT_EQ(server_exit(empty, err, sizeof(err)), 2);
	EXPECT_TRUE(strstr(err, "empty") != NULL);
	snprintf(nl, sizeof(nl), "%s/absent", g_dir);
	EXPECT_EQ(server_exit(nl, err, sizeof(err)), 2);
	/* the client refuses such a file too */
	EXPECT_EQ(connect_c("tcp://127.0.0.1:1", p644, 0, &c), -EPERM);
	EXPECT_TRUE(strstr(g_log, "chmod 600") != NULL);
	/* a trailing newline is not part of the secret */
	struct test_srv s;

	snprintf(nl, sizeof(nl), "%s/newline", g_dir);
	char text[128];

	snprintf(text, sizeof(text), "%s\n", k_secret);
	ASSERT_EQ(write_file(nl, text, 0600), 0);
	ASSERT_EQ(start_auth(&s, NULL), 0);
	EXPECT_EQ(connect_c(s.addr, nl, 0, &c), 0);
	rkv_client_destroy(c);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

/* A response is bound to its connection's nonce: replaying it elsewhere
 * fails; nothing about the regions is sent before success. */
static void t_replay(void)
{
	struct test_srv s;
	struct test_raw r1, r2;
	struct rkv_msg m, d1, d2, d;
	uint8_t mac[RKV_AUTH_MAC_LEN];

	ASSERT_EQ(start_auth(&s, NULL), 0);
	ASSERT_EQ(test_raw_open(&r1, s.addr, 4), 0);
	ASSERT_EQ(test_raw_open(&r2, s.addr, 4), 0);
	ASSERT_EQ(raw_hello(&r1, 0, "replay", &d1), 0);
	ASSERT_EQ(raw_hello(&r2, 0, "replay", &d2), 0);
	ASSERT_EQ(d1.hdr.type, RKV_MSG_AUTH_CHALLENGE);
	ASSERT_EQ(d2.hdr.type, RKV_MSG_AUTH_CHALLENGE);
	EXPECT_EQ(d1.u.auth_challenge.alg, RKV_AUTH_HMAC_SHA256);
	EXPECT_TRUE(memcmp(d1.u.auth_challenge.nonce, d2.u.auth_challenge.nonce,
			   RKV_AUTH_NONCE_LEN) != 0);
	/* the response for nonce A, replayed on connection 2 */
	mac_of(d1.u.auth_challenge.nonce, "replay", mac);
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_AUTH_RESPONSE;
	memcpy(m.u.auth_response.mac, mac, sizeof(mac));
	ASSERT_EQ(test_raw_call(&r2, &m, &d), 0);
	EXPECT_EQ(d.hdr.type, RKV_MSG_ERROR);
	EXPECT_EQ(d.u.error.status, -EACCES);
	EXPECT_STREQ(d.u.error.text, "authentication failed");
	EXPECT_TRUE(test_raw_wait(&r2, &d, 3000) == -ECONNRESET); /* closed */
	test_raw_close(&r2);
	/* on connection 1 it is right (it was a real response) */
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_AUTH_RESPONSE;
	memcpy(m.u.auth_response.mac, mac, sizeof(mac));
	ASSERT_EQ(test_raw_call(&r1, &m, &d), 0);
	EXPECT_EQ(d.hdr.type, RKV_MSG_HELLO_REPLY);
	EXPECT_EQ(d.u.hello_reply.status, 0);
	EXPECT_EQ(d.u.hello_reply.server_id, d1.u.auth_challenge.server_id);
	/* and once in, a second response changes nothing */
	ASSERT_EQ(test_raw_call(&r1, &m, &d), 0);
	EXPECT_EQ(d.hdr.type, RKV_MSG_ERROR);
	EXPECT_EQ(d.u.error.status, -EALREADY);
	test_raw_close(&r1);

	/* the same name with a response computed for another name fails */
	ASSERT_EQ(test_raw_open(&r1, s.addr, 4), 0);
	ASSERT_EQ(raw_hello(&r1, 0, "alice", &d1), 0);
	ASSERT_EQ(d1.hdr.type, RKV_MSG_AUTH_CHALLENGE);
	mac_of(d1.u.auth_challenge.nonce, "mallory", mac);
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_AUTH_RESPONSE;
	memcpy(m.u.auth_response.mac, mac, sizeof(mac));
	ASSERT_EQ(test_raw_call(&r1, &m, &d), 0);
	EXPECT_EQ(d.u.error.status, -EACCES);
	test_raw_close(&r1);

	/* any request other than the response is an authentication failure */
	ASSERT_EQ(test_raw_open(&r1, s.addr, 4), 0);
	ASSERT_EQ(raw_hello(&r1, 0, "eager", &d1), 0);
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_CHUNK_ALLOC;
	ASSERT_EQ(test_raw_call(&r1, &m, &d), 0);
	EXPECT_EQ(d.hdr.type, RKV_MSG_ERROR);
	EXPECT_EQ(d.u.error.status, -EACCES);
	test_raw_close(&r1);
	/* a response before HELLO */
	ASSERT_EQ(test_raw_open(&r1, s.addr, 4), 0);
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_AUTH_RESPONSE;
	ASSERT_EQ(test_raw_call(&r1, &m, &d), 0);
	EXPECT_EQ(d.hdr.type, RKV_MSG_ERROR);
	EXPECT_EQ(d.u.error.status, -EPERM);
	test_raw_close(&r1);

	struct rkv_client *c = NULL;
	struct rkv_server_stats st;

	ASSERT_EQ(connect_c(s.addr, g_secret, 0, &c), 0);
	EXPECT_EQ(rkv_server_stats(c, 0, &st), 0);
	EXPECT_EQ(st.auth_failures, 3);
	rkv_client_destroy(c);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

static void t_garbage_before_auth(void)
{
	struct test_srv s;
	struct rkv_client *c = NULL;
	struct test_raw r;
	struct rkv_msg d;
	unsigned char junk[300];
	char buf[16];

	ASSERT_EQ(start_auth(&s, NULL), 0);
	ASSERT_EQ(connect_c(s.addr, g_secret, 0, &c), 0);
	EXPECT_EQ(kput(c, "keep", "me"), 0);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 29 + 3);
	/* garbage instead of HELLO */
	ASSERT_EQ(test_raw_open(&r, s.addr, 4), 0);
	EXPECT_EQ(test_raw_send_bytes(&r, junk, sizeof(junk)), 0);
	EXPECT_TRUE(test_raw_wait(&r, &d, 3000) < 0);
	test_raw_close(&r);
	/* garbage instead of the response */
	ASSERT_EQ(test_raw_open(&r, s.addr, 4), 0);
	ASSERT_EQ(raw_hello(&r, 0, "junk", &d), 0);
	EXPECT_EQ(d.hdr.type, RKV_MSG_AUTH_CHALLENGE);
	EXPECT_EQ(test_raw_send_bytes(&r, junk, sizeof(junk)), 0);
	EXPECT_TRUE(test_raw_wait(&r, &d, 3000) < 0);
	test_raw_close(&r);
	/* a truncated response */
	ASSERT_EQ(test_raw_open(&r, s.addr, 4), 0);
	ASSERT_EQ(raw_hello(&r, 0, "short", &d), 0);
	{
		struct rkv_msg m;
		char wire[RKV_MSG_MAX];

		memset(&m, 0, sizeof(m));
		m.hdr.type = RKV_MSG_AUTH_RESPONSE;
		int n = rkv_msg_encode(&m, wire, sizeof(wire));

		EXPECT_EQ(test_raw_send_bytes(&r, wire, (size_t)n - 1), 0);
	}
	EXPECT_TRUE(test_raw_wait(&r, &d, 3000) < 0);
	test_raw_close(&r);
	EXPECT_EQ(kget(c, "keep", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "me");
	struct rkv_server_stats st;
	int ok = 0;

	for (int i = 0; i < 30 && !ok; i++) {
		EXPECT_EQ(rkv_server_stats(c, 0, &st), 0);
		ok = st.bad_msgs >= 3 && st.auth_failures >= 2;
		if (!ok)
			usleep(100 * 1000);
	}
	EXPECT_TRUE(ok);
	EXPECT_EQ(st.clients, 1);
	rkv_client_destroy(c);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

/* --------------------------------------------------------- least privilege */

static int keep_fn(const void *old, size_t old_len, void *out, size_t cap,
		   size_t *out_len, void *arg)
{
	(void)old;
	(void)old_len;
	(void)cap;
	memcpy(out, "rmw", 3);
	*out_len = 3;
	*(int *)arg += 1;
	return RKV_RMW_WRITE;
}

static void t_read_only_client(void)
{
	struct test_srv s;
	struct rkv_client *rw = NULL, *ro = NULL;
	char buf[64];
	int calls = 0;

	ASSERT_EQ(start_auth(&s, NULL), 0);
	ASSERT_EQ(connect_c(s.addr, g_secret, 0, &rw), 0);
	ASSERT_EQ(connect_c(s.addr, g_secret, 1, &ro), 0);
	EXPECT_EQ(kput(rw, "a", "old-a"), 0);
	EXPECT_EQ(kput(rw, "b", "old-b"), 0);
	EXPECT_EQ(kget(ro, "a", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "old-a");
	uint64_t t0 = rkv_now_ms();

	EXPECT_EQ(kput(ro, "a", "new"), -EACCES);
	EXPECT_EQ(kput(ro, "fresh", "new"), -EACCES);
	EXPECT_EQ(rkv_delete(ro, "b", 1), -EACCES);
	EXPECT_EQ(rkv_rmw(ro, "a", 1, keep_fn, &calls), -EACCES);
	EXPECT_EQ(calls, 0);
	EXPECT_TRUE(rkv_now_ms() - t0 < 1000 * RKV_TEST_SLACK); /* promptly */
	/* nothing changed; the read-only client still reads */
	EXPECT_EQ(kget(rw, "a", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "old-a");
	EXPECT_EQ(kget(rw, "b", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "old-b");
	EXPECT_EQ(kget(rw, "fresh", buf, sizeof(buf)), -ENOENT);
	EXPECT_EQ(kget(ro, "b", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "old-b");
	rkv_client_destroy(ro);
	rkv_client_destroy(rw);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

/* Connect (raw) with HELLO flags, answer the challenge if there is one,
 * and take the geometry from HELLO_REPLY. */
static int raw_login_with(struct test_raw *r, const char *addr,
			  unsigned flags, const char *key,
			  struct rkv_msg_hello_reply *h)
{
	struct rkv_msg m, d;
	int rc = test_raw_open(r, addr, 4);

	if (!rc)
		rc = raw_hello(r, flags, "ro-raw", &d);
	if (!rc && d.hdr.type == RKV_MSG_AUTH_CHALLENGE) {
		memset(&m, 0, sizeof(m));
		m.hdr.type = RKV_MSG_AUTH_RESPONSE;
		mac_with(key, d.u.auth_challenge.nonce, "ro-raw",
			 m.u.auth_response.mac);
		rc = test_raw_call(r, &m, &d);
	}
	if (!rc && (d.hdr.type != RKV_MSG_HELLO_REPLY ||
		    d.u.hello_reply.status))
		rc = -EPROTO;
	if (!rc)
		*h = d.u.hello_reply;
	return rc;
}

static int raw_login(struct test_raw *r, const char *addr, unsigned flags,
		     struct rkv_msg_hello_reply *h)
{
	return raw_login_with(r, addr, flags, k_secret, h);
}

/* Connect read-only (raw): raw_login with RKV_HELLO_READ_ONLY. */
static int ro_conn(struct test_raw *r, const char *addr,
		   struct rkv_msg_hello_reply *h)
{
	return raw_login(r, addr, RKV_HELLO_READ_ONLY, h);
}

static void t_read_only_raw(void)
{
	const char *more[] = { "--buckets", "16", "--memory", "4M", NULL };
	struct test_srv s;
	struct rkv_client *rw = NULL;
	struct rkv_msg_hello_reply h, h2;
	struct test_raw r;
	static char idx0[4096], idx1[4096], blk0[512];
	char buf[64];
	uint64_t word = 0, blk_addr;
	unsigned wi = 0;

	ASSERT_EQ(start_auth(&s, more), 0);
	ASSERT_EQ(connect_c(s.addr, g_secret, 0, &rw), 0);
	EXPECT_EQ(kput(rw, "victim", "precious"), 0);
	ASSERT_EQ(ro_conn(&r, s.addr, &h), 0);
	EXPECT_EQ(h.counters_count, 0); /* no counter region for read-only */
	/* reading is allowed: find the victim's slot */
	ASSERT_EQ(first_slot(&r, &h, idx0, sizeof(idx0), &word, &wi), 0);
	blk_addr = h.data_addr + (word & ((1ull << 34) - 1)) * 64;
	ASSERT_EQ(raw_onesided(&r, RKV_WR_READ, blk_addr, h.data_rkey,
			       sizeof(blk0), 0, 0), RKV_WC_SUCCESS);
	memcpy(blk0, r.data, sizeof(blk0));
	test_raw_close(&r);
	/* each forbidden operation on a fresh connection (an error
	 * completion puts the endpoint in error) */
	struct {
		enum rkv_wr_opcode op;
		int data;
	} tries[] = { { RKV_WR_WRITE, 0 }, { RKV_WR_CAS, 0 },
		      { RKV_WR_FETCH_ADD, 0 }, { RKV_WR_WRITE, 1 },
		      { RKV_WR_CAS, 1 }, { RKV_WR_FETCH_ADD, 1 } };

	for (size_t t = 0; t < sizeof(tries) / sizeof(tries[0]); t++) {
		ASSERT_EQ(ro_conn(&r, s.addr, &h2), 0);
		EXPECT_EQ(h2.index_addr, h.index_addr);
		uint64_t addr = tries[t].data ? blk_addr
					      : h.index_addr + wi * 8ull;
		/* this connection's own keys (tcp, verbs: per connection) */
		uint32_t rkey = tries[t].data ? h2.data_rkey : h2.index_rkey;

		EXPECT_TRUE(refused_op(&r, tries[t].op, tries[t].data, addr,
				       rkey, word));
		test_raw_close(&r);
	}
	/* memory unchanged */
	ASSERT_EQ(ro_conn(&r, s.addr, &h2), 0);
	ASSERT_EQ(raw_onesided(&r, RKV_WR_READ, h.index_addr, h2.index_rkey,
			       sizeof(idx1), 0, 0), RKV_WC_SUCCESS);
	memcpy(idx1, r.data, sizeof(idx1));
	EXPECT_TRUE(memcmp(idx0, idx1, sizeof(idx0)) == 0);
	ASSERT_EQ(raw_onesided(&r, RKV_WR_READ, blk_addr, h2.data_rkey,
			       sizeof(blk0), 0, 0), RKV_WC_SUCCESS);
	EXPECT_TRUE(memcmp(blk0, r.data, sizeof(blk0)) == 0);
	test_raw_close(&r);
	EXPECT_EQ(kget(rw, "victim", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "precious");
	rkv_client_destroy(rw);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

/* Round trips of the gets since the last call. */
static unsigned get_rtts(struct rkv_client *c)
{
	struct rkv_client_stats st;

	rkv_client_stats(c, &st);
	rkv_client_stats_reset(c);
	return (unsigned)st.get.rtts;
}

/*
 * A writer that scribbles over a published block (every writer holds the
 * data region's rkey): no reader answers the scribbled value.  A 1 MiB
 * value is read cold, then from its cached location (on tcp and shm
 * straight into the caller's buffer, its checksum verified over the two
 * pieces), then 64 bytes in its middle are overwritten by a raw WRITE:
 * the cached get, a fresh client's cold get (the value copied out as it
 * is verified) and a small value's get all fail with -EIO (the block read
 * twice under one slot word) rather than return it.  A put or delete by
 * a client that had not cached the key mends it; a block whose key bytes
 * were scribbled is -EIO to every op on that key.
 */
static void t_scribbled_block(void)
{
	const char *more[] = { "--buckets", "16", "--memory", "16M", NULL };
	const size_t n = 1u << 20;
	unsigned char *v = malloc(n), *r = malloc(n);
	static char idx[4096];
	struct rkv_msg_hello_reply h;
	struct rkv_client *rw = NULL, *rd = NULL, *fresh = NULL;
	struct test_raw raw;
	struct test_srv s;
	uint64_t word = 0, blk_addr, big_w = 0, small_w = 0, keyed_w = 0;
	unsigned wi = 0;
	size_t len = 0;
	int rc;

	ASSERT_TRUE(v && r);
	for (size_t i = 0; i < n; i++)
		v[i] = (unsigned char)(i * 7 + 1);
	ASSERT_EQ(start_auth(&s, more), 0);
	ASSERT_EQ(connect_c(s.addr, g_secret, 0, &rw), 0);
	ASSERT_EQ(connect_c(s.addr, g_secret, 0, &rd), 0);
	EXPECT_EQ(rkv_put(rw, "big", 3, v, n), 0);
	for (int i = 0; i < 2; i++) { /* cold, then cached */
		memset(r, 0, n);
		EXPECT_EQ(rkv_get(rd, "big", 3, r, n, &len), 0);
		EXPECT_TRUE(len == n && memcmp(r, v, n) == 0);
	}
	EXPECT_EQ(rkv_put(rw, "small", 5, v, 1000), 0);
	EXPECT_EQ(rkv_get(rd, "small", 5, r, n, &len), 0);
	EXPECT_EQ(rkv_put(rw, "keyed", 5, v, 5000), 0);
	/* the two keys' slots: the big value's block is the larger */
	ASSERT_EQ(raw_login(&raw, s.addr, 0, &h), 0);
	ASSERT_EQ(first_slot(&raw, &h, idx, sizeof(idx), &word, &wi), 0);
	for (unsigned i = 0; i < sizeof(idx) / 8; i++) {
		uint64_t w;

		memcpy(&w, idx + i * 8, 8);
		if (w && rkv_slot_size(w) > n)
			big_w = w;
		else if (w && rkv_slot_size(w) > 4096)
			keyed_w = w;
		else if (w)
			small_w = w;
	}
	ASSERT_TRUE(big_w && small_w && keyed_w);
	blk_addr = h.data_addr + (big_w & ((1ull << 34) - 1)) * 64;
	memset(raw.data, 0xee, 64);
	EXPECT_EQ(raw_onesided(&raw, RKV_WR_WRITE, blk_addr + n / 2,
			       h.data_rkey, 64, 0, 0), RKV_WC_SUCCESS);
	blk_addr = h.data_addr + (small_w & ((1ull << 34) - 1)) * 64;
	EXPECT_EQ(raw_onesided(&raw, RKV_WR_WRITE, blk_addr + 512,
			       h.data_rkey, 64, 0, 0), RKV_WC_SUCCESS);
	/* the third one's key bytes (after the 32-byte header) */
	blk_addr = h.data_addr + (keyed_w & ((1ull << 34) - 1)) * 64;
	EXPECT_EQ(raw_onesided(&raw, RKV_WR_WRITE, blk_addr + 32,
			       h.data_rkey, 4, 0, 0), RKV_WC_SUCCESS);
	test_raw_close(&raw);
	/* read twice, failing twice under the same slot word: corrupt, said
	 * at once (not retried until the deadline as a torn read) */
	get_rtts(rd);
	rc = rkv_get(rd, "big", 3, r, n, &len);
	printf("#   cached get of the scribbled block: %s, %u round trips\n",
	       strerror(-rc), get_rtts(rd));
	EXPECT_EQ(rc, -EIO);
	ASSERT_EQ(connect_c(s.addr, g_secret, 0, &fresh), 0);
	rc = rkv_get(fresh, "big", 3, r, n, &len);
	printf("#   cold get of the scribbled block: %s, %u round trips\n",
	       strerror(-rc), get_rtts(fresh));
	EXPECT_EQ(rc, -EIO);
	/* a small value's block, scribbled the same way */
	EXPECT_EQ(rkv_get(rd, "small", 5, r, n, &len), -EIO);
	EXPECT_EQ(rkv_get(fresh, "small", 5, r, n, &len), -EIO);
	EXPECT_TRUE(get_rtts(fresh) < 12);
	/* header and key intact: a put or a delete by a client that has not
	 * seen it replaces it (the key is mended by writing it) */
	EXPECT_EQ(rkv_put(fresh, "big", 3, v, n / 2), 0);
	EXPECT_EQ(rkv_get(rd, "big", 3, r, n, &len), 0);
	EXPECT_TRUE(len == n / 2 && memcmp(r, v, n / 2) == 0);
	EXPECT_EQ(rkv_delete(fresh, "small", 5), 0);
	EXPECT_EQ(rkv_get(rd, "small", 5, r, n, &len), -ENOENT);
	/* its key scribbled: nobody can tell whose it is; everyone gets
	 * -EIO, a write too (an insert beside it could make two copies) */
	EXPECT_EQ(rkv_get(fresh, "keyed", 5, r, n, &len), -EIO);
	EXPECT_EQ(rkv_put(fresh, "keyed", 5, v, 10), -EIO);
	EXPECT_EQ(rkv_get(rd, "keyed", 5, r, n, &len), -EIO);
	/* other keys are untouched */
	EXPECT_EQ(rkv_put(fresh, "other", 5, v, 10), 0);
	EXPECT_EQ(rkv_get(rd, "other", 5, r, n, &len), 0);
	rkv_client_destroy(fresh);
	rkv_client_destroy(rd);
	rkv_client_destroy(rw);
	EXPECT_EQ(test_srv_stop(&s), 0);
	free(v);
	free(r);
}

/* ------------------------------------------- read-only credentials */

static int start_ro(struct test_srv *s, int with_full)
{
	const char *both[] = { "--buckets", "16", "--memory", "4M",
			       "--secret-file", g_secret,
			       "--read-only-secret-file", g_ro, NULL };
	const char *ro_only[] = { "--buckets", "16", "--memory", "4M",
				  "--read-only-secret-file", g_ro, NULL };

	return start(s, with_full ? both : ro_only);
}

/* The server, not the client, decides: a client that proves the
 * read-only secret reads and cannot write, without asking for it. */
static void t_ro_secret(void)
{
	struct test_srv s;
	struct rkv_client *rw = NULL, *ro = NULL, *bad = NULL;
	struct rkv_server_stats st;
	struct rkv_ext_info info;
	char buf[64];
	int calls = 0;

	ASSERT_EQ(start_ro(&s, 1), 0);
	ASSERT_EQ(connect_c(s.addr, g_secret, 0, &rw), 0);
	ASSERT_EQ(connect_c(s.addr, g_ro, 0, &ro), 0); /* does not ask */
	EXPECT_EQ(kput(rw, "a", "old-a"), 0);
	EXPECT_EQ(kget(ro, "a", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "old-a");
	rkv_ext_info(ro, &info);
	EXPECT_EQ(info.read_only, 1);
	EXPECT_EQ(kput(ro, "a", "new"), -EACCES);
	EXPECT_EQ(kput(ro, "fresh", "new"), -EACCES);
	EXPECT_EQ(rkv_delete(ro, "a", 1), -EACCES);
	EXPECT_EQ(rkv_rmw(ro, "a", 1, keep_fn, &calls), -EACCES);
	EXPECT_EQ(calls, 0);
	EXPECT_EQ(kget(rw, "a", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "old-a");
	EXPECT_EQ(kget(rw, "fresh", buf, sizeof(buf)), -ENOENT);
	EXPECT_EQ(kput(rw, "a", "newer"), 0); /* full access still writes */
	EXPECT_EQ(kget(ro, "a", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "newer");
	/* neither secret: refused */
	EXPECT_EQ(connect_c(s.addr, g_wrong, 0, &bad), -EACCES);
	EXPECT_EQ(connect_c(s.addr, NULL, 0, &bad), -EACCES);
	/* the one without a secret gave up after the challenge: the server
	 * counts that when it sees the connection close */
	for (int i = 0; i < 200; i++) {
		ASSERT_EQ(rkv_server_stats(rw, 0, &st), 0);
		if (st.auth_failures >= 2)
			break;
		usleep(10000);
	}
	EXPECT_EQ(st.auth_failures, 2);
	rkv_client_destroy(ro);
	rkv_client_destroy(rw);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

/* A raw peer with the read-only secret that does not ask for read-only
 * rkeys gets them anyway: its WRITE, CAS and FETCH_ADD are refused on
 * the wire, its chunk request too, and every denial is counted. */
static void t_ro_secret_raw(void)
{
	struct test_srv s;
	struct rkv_client *rw = NULL;
	struct rkv_msg_hello_reply h, hf;
	struct rkv_server_stats st;
	struct rkv_msg m, d;
	struct test_raw r;
	static char idx0[4096];
	char buf[64];
	uint64_t word = 0;
	unsigned wi = 0;

	ASSERT_EQ(start_ro(&s, 1), 0);
	ASSERT_EQ(connect_c(s.addr, g_secret, 0, &rw), 0);
	EXPECT_EQ(kput(rw, "victim", "precious"), 0);
	/* the full secret's rkeys, for comparison */
	ASSERT_EQ(raw_login_with(&r, s.addr, 0, k_secret, &hf), 0);
	EXPECT_EQ(hf.flags & RKV_HELLO_REPLY_READ_ONLY, 0);
	test_raw_close(&r);
	ASSERT_EQ(raw_login_with(&r, s.addr, 0, k_ro, &h), 0);
	EXPECT_EQ(h.flags & RKV_HELLO_REPLY_READ_ONLY,
		  RKV_HELLO_REPLY_READ_ONLY);
	EXPECT_EQ(h.counters_count, 0);
	ASSERT_EQ(first_slot(&r, &h, idx0, sizeof(idx0), &word, &wi), 0);
	/* asking for a chunk is refused and counted */
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_CHUNK_ALLOC;
	ASSERT_EQ(test_raw_call(&r, &m, &d), 0);
	EXPECT_EQ(d.hdr.type, RKV_MSG_CHUNK_GRANT);
	EXPECT_EQ(d.u.chunk_grant.status, -EPERM);
	test_raw_close(&r);
	enum rkv_wr_opcode ops[] = { RKV_WR_WRITE, RKV_WR_CAS,
				     RKV_WR_FETCH_ADD };

	for (size_t t = 0; t < 3; t++) {
		ASSERT_EQ(raw_login_with(&r, s.addr, 0, k_ro, &h), 0);
		EXPECT_TRUE(refused_op(&r, ops[t], 0,
				       h.index_addr + wi * 8ull, h.index_rkey,
				       word));
		test_raw_close(&r);
	}
	EXPECT_EQ(kget(rw, "victim", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "precious");
	ASSERT_EQ(rkv_server_stats(rw, 0, &st), 0);
	EXPECT_EQ(st.denied, 1);
	EXPECT_EQ(st.auth_failures, 0);
	rkv_client_destroy(rw);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

/* Bad credential files refuse the start, naming the option and file;
 * a read-only secret alone lets clients read and nobody write. */
static void t_ro_secret_checks(void)
{
	char err[512], same[300], missing[300];
	const char *dup[] = { "--secret-file", g_secret,
			      "--read-only-secret-file", same, NULL };
	const char *gone[] = { "--secret-file", g_secret,
			       "--read-only-secret-file", missing, NULL };
	struct test_srv s;
	struct rkv_client *ro = NULL, *none = NULL;
	char buf[64];

	snprintf(same, sizeof(same), "%s/same", g_dir);
	snprintf(missing, sizeof(missing), "%s/no-such-file", g_dir);
	ASSERT_EQ(write_file(same, k_secret, 0600), 0);
	EXPECT_EQ(server_exit_args(dup, err, sizeof(err)), 2);
	printf("#   %s", err);
	EXPECT_TRUE(strstr(err, "same secret") != NULL);
	EXPECT_TRUE(strstr(err, same) != NULL);
	EXPECT_EQ(server_exit_args(gone, err, sizeof(err)), 2);
	printf("#   %s", err);
	EXPECT_TRUE(strstr(err, "--read-only-secret-file") != NULL);
	EXPECT_TRUE(strstr(err, missing) != NULL);
	EXPECT_TRUE(strchr(err, '\n') == strrchr(err, '\n')); /* one line */
	/* read-only secret alone */
	ASSERT_EQ(start_ro(&s, 0), 0);
	EXPECT_EQ(connect_c(s.addr, NULL, 0, &none), -EACCES);
	ASSERT_EQ(connect_c(s.addr, g_ro, 0, &ro), 0);
	EXPECT_EQ(kget(ro, "k", buf, sizeof(buf)), -ENOENT);
	EXPECT_EQ(kput(ro, "k", "v"), -EACCES);
	rkv_client_destroy(ro);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

/* $RKV_SECRET_FILE is the default secret of every librkv program. */
static void t_secret_env(void)
{
	struct test_srv s;
	struct rkv_client_opts o;
	struct rkv_client *c = NULL;
	char buf[32];

	ASSERT_EQ(start_auth(&s, NULL), 0);
	setenv("RKV_SECRET_FILE", g_secret, 1);
	rkv_client_opts_init(&o);
	unsetenv("RKV_SECRET_FILE");
	EXPECT_STREQ(o.secret_file ? o.secret_file : "(null)", g_secret);
	o.servers = s.addr;
	EXPECT_EQ(rkv_client_create(&o, &c), 0);
	if (c) {
		EXPECT_EQ(kput(c, "env", "ok"), 0);
		EXPECT_EQ(kget(c, "env", buf, sizeof(buf)), 0);
		EXPECT_STREQ(buf, "ok");
		rkv_client_destroy(c);
	}
	setenv("RKV_SECRET_FILE", "", 1); /* empty: no secret */
	rkv_client_opts_init(&o);
	unsetenv("RKV_SECRET_FILE");
	EXPECT_TRUE(o.secret_file == NULL);
	o.servers = s.addr;
	c = NULL;
	EXPECT_EQ(rkv_client_create(&o, &c), -EACCES);
	rkv_client_destroy(c);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

/* ------------------------------------------------------------ rotation */

/*
 * A connection for a thief of leaked rkeys: on tcp and verbs one that
 * never says HELLO (the rkey is the capability); on shm such a connection
 * reaches nothing at all (itest_shmsec), so the thief says HELLO there and
 * uses another client's keys.  RECVs for the RKEY_UPDATEs it ignores.
 */
static int thief_open(struct test_raw *r, const char *addr)
{
	struct rkv_msg d;
	int rc = test_raw_open(r, addr, RAW_RECVS);

	if (!rc && !strcmp(g_prov, "shm")) {
		rc = raw_hello(r, 0, "thief", &d);
		if (!rc && d.hdr.type != RKV_MSG_HELLO_REPLY)
			rc = -EPROTO;
	}
	return rc;
}

/*
 * --rotate-rkeys 1: clients keep getting and putting through several
 * rotations with no error and no wrong value (a busy one, an idle one
 * that wakes after old keys were revoked, a read-only one); an rkey
 * leaked to another connection (tcp: one that never said HELLO) stops
 * working; a raw client that does not acknowledge receives the update and
 * is not waited for beyond the overlap; an RKEY_ACK for an epoch never
 * sent drops the connection.
 */
/* Whether a server of g_prov with --rkey-windows WIN gives rkeys that work
 * on their own connection only (shm: the grant model instead). */
static int per_conn_keys(const char *win)
{
	return strcmp(g_prov, "shm") != 0 && strcmp(win, "off") != 0;
}

static void rotate_rkeys(const char *win)
{
	const char *more[] = { "--buckets", "256", "--memory", "64M",
			       "--grace", "300", "--rotate-rkeys", "1",
			       "--rkey-windows", win, NULL };
	/* per-connection keys: the thief's use fails from the start */
	enum rkv_wc_status leak_st = per_conn_keys(win) ?
					     RKV_WC_REM_ACCESS_ERR :
					     RKV_WC_SUCCESS;
	struct test_srv s;
	struct rkv_client *busy = NULL, *idle = NULL, *ro = NULL;
	struct rkv_client_stats st;
	struct rkv_msg d, m;
	struct test_raw leak, thief;
	struct rkv_msg_hello_reply h;
	char k[32], v[64], buf[128];
	unsigned long ops = 0, errs = 0, wrong = 0;
	int rc;

	ASSERT_EQ(start(&s, more), 0);
	ASSERT_EQ(connect_c(s.addr, NULL, 0, &busy), 0);
	ASSERT_EQ(connect_c(s.addr, NULL, 0, &idle), 0);
	ASSERT_EQ(connect_c(s.addr, NULL, 1, &ro), 0);
	for (int i = 0; i < 64; i++) {
		snprintf(k, sizeof(k), "rot-%d", i);
		snprintf(v, sizeof(v), "v%d-0", i);
		ASSERT_EQ(kput(busy, k, v), 0);
	}
	EXPECT_EQ(kput(idle, "idle", "before"), 0);
	/* the leak: a client's rkeys, used from a connection without HELLO */
	ASSERT_EQ(test_raw_open(&leak, s.addr, 4), 0);
	ASSERT_EQ(raw_hello(&leak, 0, "leaker", &d), 0);
	ASSERT_EQ(d.hdr.type, RKV_MSG_HELLO_REPLY);
	h = d.u.hello_reply;
	ASSERT_EQ(thief_open(&thief, s.addr), 0);
	EXPECT_EQ(raw_onesided(&thief, RKV_WR_READ, h.index_addr, h.index_rkey,
			       64, 0, 0), leak_st);
	if (leak_st != RKV_WC_SUCCESS) { /* its endpoint is in error now */
		test_raw_close(&thief);
		ASSERT_EQ(thief_open(&thief, s.addr), 0);
	}

	/* ~3.5 s of puts and checked gets: at least two rotations */
	uint64_t end = rkv_now_ms() + 3500;
	unsigned gen = 0;

	while (rkv_now_ms() < end) {
		int i = (int)(ops % 64);

		if (i == 0)
			gen++;
		snprintf(k, sizeof(k), "rot-%d", i);
		snprintf(v, sizeof(v), "v%d-%u", i, gen);
		rc = kput(busy, k, v);
		if (rc && !errs++)
			printf("#   first put error at %lu: %s\n", ops,
			       strerror(-rc));
		rc = kget(busy, k, buf, sizeof(buf));
		if (rc && !errs++)
			printf("#   first get error at %lu: %s\n", ops,
			       strerror(-rc));
		else if (!rc && strcmp(buf, v))
			wrong++;
		if (ops % 97 == 0) { /* the read-only client reads along */
			rc = kget(ro, k, buf, sizeof(buf));
			if (rc)
				errs++;
			else if (strncmp(buf, "v", 1))
				wrong++;
		}
		ops++;
	}
	printf("#   %lu put+get pairs, %lu errors, %lu wrong\n", ops, errs,
	       wrong);
	EXPECT_TRUE(ops > 100);
	EXPECT_EQ(errs, 0);
	EXPECT_EQ(wrong, 0);
	rkv_client_stats(busy, &st);
	EXPECT_TRUE(st.rkey_updates >= 2);
	/* the idle client slept through rotations and revocations */
	EXPECT_EQ(kget(idle, "idle", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "before");
	EXPECT_EQ(kput(idle, "idle", "after"), 0);
	EXPECT_EQ(kget(busy, "idle", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "after");
	rkv_client_stats(idle, &st);
	EXPECT_TRUE(st.rkey_updates >= 2);
	rkv_client_stats(ro, &st);
	EXPECT_TRUE(st.rkey_updates >= 2);
	EXPECT_EQ(kput(ro, "ro", "x"), -EACCES);

	/* the leaked keys are dead, for the thief and for the leaker */
	EXPECT_EQ(raw_onesided(&thief, RKV_WR_READ, h.index_addr, h.index_rkey,
			       64, 0, 0), RKV_WC_REM_ACCESS_ERR);
	test_raw_close(&thief);
	ASSERT_EQ(thief_open(&thief, s.addr), 0);
	EXPECT_EQ(raw_onesided(&thief, RKV_WR_READ, h.data_addr, h.data_rkey,
			       64, 0, 0), RKV_WC_REM_ACCESS_ERR);
	test_raw_close(&thief);
	/* the leaker was told (epoch 1 first), with other keys */
	ASSERT_EQ(test_raw_wait(&leak, &d, 3000), 0);
	EXPECT_EQ(d.hdr.type, RKV_MSG_RKEY_UPDATE);
	EXPECT_EQ(d.hdr.req_id, 0);
	EXPECT_EQ(d.u.rkey_update.epoch, 1);
	EXPECT_TRUE(d.u.rkey_update.index_rkey != h.index_rkey);
	EXPECT_TRUE(d.u.rkey_update.data_rkey != h.data_rkey);
	/* an acknowledgement of an epoch never sent: dropped */
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_RKEY_ACK;
	m.u.rkey_ack.epoch = 1000;
	EXPECT_EQ(test_raw_send(&leak, &m), 0);
	do
		rc = test_raw_wait(&leak, &d, 3000);
	while (rc == 0 && d.hdr.type == RKV_MSG_RKEY_UPDATE);
	EXPECT_TRUE(rc == -ECONNRESET ||
		    (rc == 0 && d.hdr.type == RKV_MSG_ERROR));
	test_raw_close(&leak);
	/* a new client gets current keys and works */
	rkv_client_destroy(idle);
	idle = NULL;
	ASSERT_EQ(connect_c(s.addr, NULL, 0, &idle), 0);
	EXPECT_EQ(kget(idle, "rot-1", buf, sizeof(buf)), 0);
	rkv_client_destroy(ro);
	rkv_client_destroy(idle);
	rkv_client_destroy(busy);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

static void t_rotate_rkeys(void)
{
	rotate_rkeys("auto");
}

/* Rotation alone: the leaked keys work until the rotation revokes them. */
static void t_rotate_rkeys_nowin(void)
{
	rotate_rkeys("off");
}

/*
 * Per-connection rkeys (--rkey-windows, default auto): the rkeys a client
 * got at HELLO work on its connection and on no other: not on another
 * client's (authenticated, given rkeys of its own), not on a connection
 * that never said HELLO; each client's keys differ.  With --rkey-windows
 * off the same replay succeeds (what the check is there to refuse).
 * verbs: type-2B windows bound to the client's QP; tcp: keys salted per
 * connection.  shm: the grant model instead (itest_shmsec).
 */
static void conn_rkeys(const char *win)
{
	const char *more[] = { "--buckets", "16", "--memory", "4M",
			       "--rkey-windows", win, NULL };
	int own = per_conn_keys(win);
	enum rkv_wc_status other = own ? RKV_WC_REM_ACCESS_ERR : RKV_WC_SUCCESS;
	struct test_srv s;
	struct test_raw a, b, thief;
	struct rkv_msg d;
	struct rkv_msg_hello_reply ha, hb;
	uint64_t ctr;

	if (!strcmp(g_prov, "shm")) {
		rkv_test_skip("shm: a peer maps what its grant allows "
			      "(itest_shmsec)");
		return;
	}
	ASSERT_EQ(start(&s, more), 0);
	ASSERT_EQ(test_raw_open(&a, s.addr, 4), 0);
	ASSERT_EQ(raw_hello(&a, 0, "alice", &d), 0);
	ASSERT_EQ(d.hdr.type, RKV_MSG_HELLO_REPLY);
	ha = d.u.hello_reply;
	ASSERT_EQ(test_raw_open(&b, s.addr, 4), 0);
	ASSERT_EQ(raw_hello(&b, 0, "bob", &d), 0);
	ASSERT_EQ(d.hdr.type, RKV_MSG_HELLO_REPLY);
	hb = d.u.hello_reply;
	ctr = ha.counters_addr;
	if (own) {
		EXPECT_TRUE(ha.index_rkey != hb.index_rkey);
		EXPECT_TRUE(ha.data_rkey != hb.data_rkey);
		EXPECT_TRUE(ha.counters_rkey != hb.counters_rkey);
	}
	/* each on its own connection: READ, WRITE, CAS, FETCH_ADD */
	EXPECT_EQ(raw_onesided(&a, RKV_WR_READ, ha.index_addr, ha.index_rkey,
			       64, 0, 0), RKV_WC_SUCCESS);
	EXPECT_EQ(raw_onesided(&a, RKV_WR_READ, ha.data_addr, ha.data_rkey,
			       64, 0, 0), RKV_WC_SUCCESS);
	EXPECT_EQ(raw_onesided(&a, RKV_WR_FETCH_ADD, ctr, ha.counters_rkey, 8,
			       5, 0), RKV_WC_SUCCESS);
	EXPECT_EQ(raw_onesided(&b, RKV_WR_CAS, ctr, hb.counters_rkey, 8, 5,
			       7), RKV_WC_SUCCESS);
	EXPECT_EQ(raw_onesided(&b, RKV_WR_READ, hb.index_addr, hb.index_rkey,
			       64, 0, 0), RKV_WC_SUCCESS);
	/* alice's keys from bob's connection: every region */
	EXPECT_EQ(raw_onesided(&b, RKV_WR_FETCH_ADD, ctr, ha.counters_rkey, 8,
			       1, 0), other);
	if (other != RKV_WC_SUCCESS) {
		test_raw_close(&b);
		ASSERT_EQ(test_raw_open(&b, s.addr, 4), 0);
		ASSERT_EQ(raw_hello(&b, 0, "bob", &d), 0);
	}
	EXPECT_EQ(raw_onesided(&b, RKV_WR_READ, ha.data_addr, ha.data_rkey,
			       64, 0, 0), other);
	/* ... and from a connection that never said HELLO */
	ASSERT_EQ(test_raw_open(&thief, s.addr, 4), 0);
	EXPECT_EQ(raw_onesided(&thief, RKV_WR_READ, ha.index_addr,
			       ha.index_rkey, 64, 0, 0), other);
	test_raw_close(&thief);
	ASSERT_EQ(test_raw_open(&thief, s.addr, 4), 0);
	EXPECT_EQ(raw_onesided(&thief, RKV_WR_WRITE, ctr, ha.counters_rkey, 8,
			       0, 0), other);
	test_raw_close(&thief);
	/* alice's keys still work for alice; the counter saw only hers and
	 * bob's CAS (plus the replays where keys are not per connection) */
	EXPECT_EQ(raw_onesided(&a, RKV_WR_READ, ctr, ha.counters_rkey, 8, 0,
			       0), RKV_WC_SUCCESS);
	if (own) {
		uint64_t v;

		memcpy(&v, a.data, 8);
		EXPECT_EQ(v, 7);
	}
	test_raw_close(&a);
	test_raw_close(&b);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

static void t_conn_rkeys(void)
{
	conn_rkeys("auto");
}

static void t_conn_rkeys_off(void)
{
	conn_rkeys("off");
}

/* ------------------------------------------------------------------ limits */

/*
 * A cap on clients (--max-clients, or --max-clients-per-peer: all of
 * ours come from one address): n clients get in, the next one, writer or
 * read-only, is refused with -EUSERS and a line naming the cap (what);
 * connections that never say HELLO do not count; the full server still
 * serves its clients, and two leaving make room for two.
 */
static void client_cap(const char *opt, const char *what)
{
	const char *more[] = { opt, "4", NULL };
	struct test_srv s;
	struct rkv_client *c[6] = { NULL };
	struct test_raw idle[10];
	int rc;

	ASSERT_EQ(start_auth(&s, more), 0);
	for (int i = 0; i < 10; i++)
		ASSERT_EQ(test_raw_open(&idle[i], s.addr, 1), 0);
	for (int i = 0; i < 4; i++)
		EXPECT_EQ(connect_c(s.addr, g_secret, 0, &c[i]), 0);
	EXPECT_EQ(connect_c(s.addr, g_secret, 0, &c[4]), -EUSERS);
	printf("#   fifth client: %s\n", g_log);
	EXPECT_TRUE(strstr(g_log, what) != NULL);
	EXPECT_EQ(connect_c(s.addr, g_secret, 1, &c[5]), -EUSERS);
	for (int i = 0; i < 10; i++)
		test_raw_close(&idle[i]);
	if (c[0])
		EXPECT_EQ(kput(c[0], "x", "1"), 0);
	rkv_client_destroy(c[1]);
	rkv_client_destroy(c[2]);
	c[1] = c[2] = NULL;
	rc = -1;
	for (int i = 0; i < 50 && rc; i++) {
		rc = connect_c(s.addr, g_secret, 0, &c[1]);
		if (rc)
			usleep(100 * 1000);
	}
	EXPECT_EQ(rc, 0);
	EXPECT_EQ(connect_c(s.addr, g_secret, 0, &c[2]), 0);
	EXPECT_EQ(connect_c(s.addr, g_secret, 0, &c[4]), -EUSERS);
	for (int i = 0; i < 6; i++)
		rkv_client_destroy(c[i]);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

static void t_max_clients(void)
{
	client_cap("--max-clients", "server full");
}

/* tcp, verbs: per peer address, below --max-clients (1024) */
static void t_max_clients_per_peer(void)
{
	if (!strcmp(g_prov, "shm")) {
		rkv_test_skip("shm: local peers are admitted by uid");
		return;
	}
	client_cap("--max-clients-per-peer", "--max-clients-per-peer");
}

static void t_max_chunks(void)
{
	const char *more[] = { "--max-chunks", "2", "--chunk", "64K", NULL };
	struct test_srv s;
	struct rkv_msg_hello_reply h;
	struct rkv_msg m, d;
	struct rkv_client *c = NULL;
	struct test_raw r;
	uint64_t off[3] = { 0 };
	static char val[8000];
	char k[32];

	ASSERT_EQ(start_auth(&s, more), 0);
	/* a raw read-write client: two grants, then EDQUOT */
	ASSERT_EQ(test_raw_open(&r, s.addr, 4), 0);
	{
		struct rkv_msg hm;

		ASSERT_EQ(raw_hello(&r, 0, "chunky", &hm), 0);
		ASSERT_EQ(hm.hdr.type, RKV_MSG_AUTH_CHALLENGE);
		memset(&m, 0, sizeof(m));
		m.hdr.type = RKV_MSG_AUTH_RESPONSE;
		mac_of(hm.u.auth_challenge.nonce, "chunky",
		       m.u.auth_response.mac);
		ASSERT_EQ(test_raw_call(&r, &m, &d), 0);
		ASSERT_EQ(d.hdr.type, RKV_MSG_HELLO_REPLY);
		h = d.u.hello_reply;
		(void)h;
	}
	/* the raw client posted 4 RECVs; the challenge and HELLO_REPLY used
	 * buffers 0 and 1: repost them (RECVs complete in posting order) */
	for (unsigned i = 0; i < 2; i++) {
		struct rkv_recv_wr rw = { .wr_id = 100 + i, .local = r.recv[i],
					  .length = RKV_MSG_MAX,
					  .lkey = r.mr->lkey };

		EXPECT_EQ(rkv_post_recv(r.ep, &rw, NULL), 0);
	}
	for (int i = 0; i < 3; i++) {
		memset(&m, 0, sizeof(m));
		m.hdr.type = RKV_MSG_CHUNK_ALLOC;
		ASSERT_EQ(test_raw_call(&r, &m, &d), 0);
		ASSERT_EQ(d.hdr.type, RKV_MSG_CHUNK_GRANT);
		EXPECT_EQ(d.u.chunk_grant.status, i < 2 ? 0 : -EDQUOT);
		off[i] = d.u.chunk_grant.offset;
	}
	/* retire one, and the next grant works */
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_CHUNK_RETIRE;
	m.u.chunk_retire.offset = off[0];
	m.u.chunk_retire.len = 64 << 10;
	ASSERT_EQ(test_raw_call(&r, &m, &d), 0);
	EXPECT_EQ(d.hdr.type, RKV_MSG_ACK);
	EXPECT_EQ(d.u.ack.status, 0);
	{
		struct rkv_recv_wr a = { .wr_id = 102, .local = r.recv[2],
					 .length = RKV_MSG_MAX,
					 .lkey = r.mr->lkey };
		struct rkv_recv_wr b = { .wr_id = 103, .local = r.recv[3],
					 .length = RKV_MSG_MAX,
					 .lkey = r.mr->lkey };
		EXPECT_EQ(rkv_post_recv(r.ep, &a, NULL), 0);
		EXPECT_EQ(rkv_post_recv(r.ep, &b, NULL), 0);
	}
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_CHUNK_ALLOC;
	ASSERT_EQ(test_raw_call(&r, &m, &d), 0);
	EXPECT_EQ(d.u.chunk_grant.status, 0);
	test_raw_close(&r);
	/* librkv retires full chunks before asking for more: many chunks'
	 * worth of puts work under the limit */
	ASSERT_EQ(connect_c(s.addr, g_secret, 0, &c), 0);
	int rc = 0, n;

	for (n = 0; n < 60 && !rc; n++) {
		snprintf(k, sizeof(k), "v%d", n);
		memset(val, 'a' + n % 26, sizeof(val));
		rc = rkv_put(c, k, strlen(k), val, sizeof(val));
	}
	EXPECT_EQ(rc, 0);
	struct rkv_client_stats cs;

	rkv_client_stats(c, &cs);
	printf("#   60 puts of 8000 bytes with --max-chunks 2: %llu chunks\n",
	       (unsigned long long)cs.chunks);
	EXPECT_TRUE(cs.chunks >= 5);
	rkv_client_destroy(c);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

static void t_max_inflight(void)
{
	const char *more[] = { "--max-inflight", "2", NULL };
	struct test_srv s;
	struct rkv_client *c = NULL;
	struct rkv_msg m, d;
	struct test_raw r;
	char buf[16];

	ASSERT_EQ(start(&s, more), 0);
	/* librkv keeps working (it has at most 4 requests out; the extra
	 * ones wait for a RECV) */
	ASSERT_EQ(connect_c(s.addr, NULL, 0, &c), 0);
	for (int i = 0; i < 20; i++) {
		snprintf(buf, sizeof(buf), "%d", i);
		EXPECT_EQ(kput(c, buf, buf), 0);
	}
	struct rkv_server_stats st;

	EXPECT_EQ(rkv_server_stats(c, 0, &st), 0);
	/* a raw client with 6 requests out and RECVs for all replies */
	ASSERT_EQ(test_raw_open(&r, s.addr, 8), 0);
	ASSERT_EQ(raw_hello(&r, 0, "burst", &d), 0);
	int sent = 0, got = 0;

	for (int i = 0; i < 6; i++) {
		struct rkv_wr w = { .wr_id = 1, .opcode = RKV_WR_SEND,
				    .flags = RKV_WR_SIGNALED,
				    .local = r.send, .lkey = r.mr->lkey };

		memset(&m, 0, sizeof(m));
		m.hdr.type = RKV_MSG_STATS;
		m.hdr.req_id = 50 + (uint32_t)i;
		w.length = (uint32_t)rkv_msg_encode(&m, r.send, RKV_MSG_MAX);
		if (rkv_post(r.ep, &w, NULL) == 0)
			sent++;
	}
	for (int i = 0; i < sent; i++)
		if (test_raw_wait(&r, &d, 5000) == 0 &&
		    d.hdr.type == RKV_MSG_STATS_REPLY)
			got++;
	printf("#   --max-inflight 2: %d requests sent at once, %d answered\n",
	       sent, got);
	EXPECT_EQ(sent, 6);
	EXPECT_EQ(got, 6);
	test_raw_close(&r);
	EXPECT_EQ(kget(c, "7", buf, sizeof(buf)), 0);
	rkv_client_destroy(c);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

/* Clients that post no RECV after HELLO and keep sending requests: the
 * server's replies fail after the transport timeout and it drops them; it
 * serves others meanwhile and its memory stays bounded. */
/* FENCE (failover) from peers that may not fence, and what a fence does
 * to HELLOs of older maps; shm refuses it. */
static int raw_hello_epoch(struct test_raw *r, unsigned flags,
			   uint32_t epoch, struct rkv_msg *out)
{
	struct rkv_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_HELLO;
	m.u.hello.flags = flags;
	m.u.hello.map_epoch = epoch;
	snprintf(m.u.hello.name, sizeof(m.u.hello.name), "fencer");
	return test_raw_call(r, &m, out);
}

static int raw_fence(struct test_raw *r, uint32_t epoch)
{
	struct rkv_msg m, d;

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_FENCE;
	m.hdr.req_id = 9;
	m.u.fence.epoch = epoch;
	if (test_raw_call(r, &m, &d))
		return -EIO;
	/* the new rkeys a fence sends to the connections that stay */
	while (d.hdr.type == RKV_MSG_RKEY_UPDATE && !d.hdr.req_id)
		if (test_raw_wait(r, &d, 3000))
			return -EIO;
	if (d.hdr.type == RKV_MSG_ERROR)
		return d.u.error.status ? d.u.error.status : -EPROTO;
	return d.hdr.type == RKV_MSG_ACK ? d.u.ack.status : -EPROTO;
}

static void t_fence(void)
{
	struct test_srv s;
	struct test_raw a, b, c;
	struct rkv_msg d;

	ASSERT_EQ(start(&s, NULL), 0);
	/* no map (epoch 0), a read-only one, an older map: refused */
	ASSERT_EQ(test_raw_open(&a, s.addr, 4), 0);
	ASSERT_EQ(raw_hello_epoch(&a, 0, 0, &d), 0);
	EXPECT_EQ(raw_fence(&a, 5), -EPERM);
	test_raw_close(&a);
	ASSERT_EQ(test_raw_open(&a, s.addr, 4), 0);
	ASSERT_EQ(raw_hello_epoch(&a, RKV_HELLO_READ_ONLY, 5, &d), 0);
	EXPECT_EQ(raw_fence(&a, 5), -EPERM);
	test_raw_close(&a);
	ASSERT_EQ(test_raw_open(&a, s.addr, 4), 0);
	ASSERT_EQ(raw_hello_epoch(&a, 0, 4, &d), 0);
	EXPECT_EQ(raw_fence(&a, 5), -EPERM);
	/* before HELLO: refused, the connection closed */
	ASSERT_EQ(test_raw_open(&b, s.addr, 4), 0);
	EXPECT_TRUE(raw_fence(&b, 5) != 0);
	test_raw_close(&b);
	/* a client of map 5 fences; one of map 4 is told, then refused */
	ASSERT_EQ(test_raw_open(&b, s.addr, 4), 0);
	ASSERT_EQ(raw_hello_epoch(&b, 0, 5, &d), 0);
	int rc = raw_fence(&b, 5);

	{
		EXPECT_EQ(rc, 0);
		EXPECT_EQ(raw_fence(&b, 5), 0); /* again: a no-op */
		EXPECT_EQ(test_raw_wait(&a, &d, 3000), 0);
		EXPECT_TRUE(d.hdr.type == RKV_MSG_ERROR && !d.hdr.req_id &&
			    d.u.error.status == -ESTALE);
		ASSERT_EQ(test_raw_open(&c, s.addr, 4), 0);
		ASSERT_EQ(raw_hello_epoch(&c, 0, 4, &d), 0);
		EXPECT_TRUE(d.hdr.type == RKV_MSG_HELLO_REPLY &&
			    d.u.hello_reply.status == -ESTALE &&
			    d.u.hello_reply.fence_epoch == 5);
		test_raw_close(&c);
		/* no map, or the new one: served */
		ASSERT_EQ(test_raw_open(&c, s.addr, 4), 0);
		ASSERT_EQ(raw_hello_epoch(&c, 0, 0, &d), 0);
		EXPECT_TRUE(d.hdr.type == RKV_MSG_HELLO_REPLY &&
			    d.u.hello_reply.status == 0);
		test_raw_close(&c);
	}
	test_raw_close(&a);
	test_raw_close(&b);
	test_srv_stop(&s);
}

/* One signaled one-sided WR on r (result in r->word, data in r->data);
 * other completions (RECVs) are dropped.  Returns the WC status or -1. */
static int raw_op(struct test_raw *r, enum rkv_wr_opcode op, uint64_t raddr,
		  uint32_t rkey, uint32_t len, uint64_t cmp, uint64_t swap)
{
	struct rkv_wr w = {
		.wr_id = 7, .opcode = op, .flags = RKV_WR_SIGNALED,
		.local = op == RKV_WR_READ ? (void *)r->data : (void *)&r->word,
		.length = len, .lkey = r->mr->lkey, .remote_addr = raddr,
		.rkey = rkey, .compare_add = cmp, .swap = swap };
	uint64_t end = rkv_now_ms() + 5000;

	if (rkv_post(r->ep, &w, NULL))
		return -1;
	while (rkv_now_ms() < end) {
		struct rkv_wc wc;

		if (rkv_cq_poll(r->cq, &wc, 1) == 1 && wc.wr_id == 7)
			return (int)wc.status;
	}
	return -1;
}

struct late_fence {
	struct test_raw *fencer;
	uint32_t epoch;
	int rc;
};

static void late_fence_hook(void *arg)
{
	struct late_fence *lf = arg;

	rkv_shm_set_access_hook(NULL, NULL);
	lf->rc = raw_fence(lf->fencer, lf->epoch);
}

/*
 * shm: a fenced client's operation that passed its rkey check before the
 * fence and lands after it (the access hook fences in between) changes
 * nothing the server serves: a CAS finds a poisoned word and fails, a
 * READ finds the poison and the partition word GONE at the fence epoch.
 */
static void t_fence_late_access(void)
{
	struct test_srv s;
	struct test_raw a, b, c;
	struct late_fence lf = { .fencer = &b };
	struct rkv_msg d;
	uint64_t base, nb, bb, x = 0x0123456789abcull, slot3, last, pw;
	uint32_t rk;
	/* one level: the partition table follows its last bucket (the
	 * move of an index with levels: test_server t_index_fence_move) */
	static const char *const fixed[] = { "--index-max", "0", NULL };

	if (strcmp(g_prov, "shm")) {
		rkv_test_skip("shm only: other providers execute every "
			      "access at the target");
		return;
	}
	ASSERT_EQ(start(&s, fixed), 0);
	ASSERT_EQ(test_raw_open(&a, s.addr, 4), 0);
	ASSERT_EQ(raw_hello_epoch(&a, 0, 4, &d), 0);
	ASSERT_EQ(d.hdr.type, RKV_MSG_HELLO_REPLY);
	ASSERT_EQ(d.u.hello_reply.status, 0);
	base = d.u.hello_reply.index_addr;
	nb = d.u.hello_reply.nbuckets;
	rk = d.u.hello_reply.index_rkey;
	slot3 = base + 3 * 8;
	bb = d.u.hello_reply.bucket_slots * 8u;
	last = base + (nb - 1) * bb;
	EXPECT_EQ(raw_op(&a, RKV_WR_CAS, slot3, rk, 8, 0, x), 0);
	EXPECT_EQ_U64(a.word, 0);
	ASSERT_EQ(test_raw_open(&b, s.addr, 4), 0);
	ASSERT_EQ(raw_hello_epoch(&b, 0, 5, &d), 0);
	/* the CAS passes its check, the fence runs, the CAS lands */
	lf.epoch = 5;
	rkv_shm_set_access_hook(late_fence_hook, &lf);
	EXPECT_EQ(raw_op(&a, RKV_WR_CAS, slot3, rk, 8, x, x + 1), 0);
	rkv_shm_set_access_hook(NULL, NULL);
	EXPECT_EQ(lf.rc, 0);
	EXPECT_TRUE(a.word != x); /* failed: it did not change x */
	EXPECT_EQ_U64(a.word, rkv_slot_bump(x) | RKV_SLOT_MOVED);
	test_raw_close(&a);
	/* a client of map 5 reads it unchanged and the partitions owned */
	ASSERT_EQ(test_raw_open(&c, s.addr, 4), 0);
	ASSERT_EQ(raw_hello_epoch(&c, 0, 5, &d), 0);
	ASSERT_EQ(d.u.hello_reply.status, 0);
	rk = d.u.hello_reply.index_rkey;
	EXPECT_EQ(d.u.hello_reply.index_addr, base);
	EXPECT_EQ(raw_op(&c, RKV_WR_READ, slot3, rk, 8, 0, 0), 0);
	memcpy(&pw, c.data, 8);
	EXPECT_EQ_U64(pw, x);
	/* a READ of map 5's client over the last bucket and the first
	 * partition word lands after a fence at 6 */
	lf.epoch = 6;
	lf.fencer = &b;
	test_raw_close(&b);
	ASSERT_EQ(test_raw_open(&b, s.addr, 4), 0);
	ASSERT_EQ(raw_hello_epoch(&b, 0, 6, &d), 0);
	rkv_shm_set_access_hook(late_fence_hook, &lf);
	EXPECT_EQ(raw_op(&c, RKV_WR_READ, last, rk, bb + 8, 0, 0), 0);
	rkv_shm_set_access_hook(NULL, NULL);
	EXPECT_EQ(lf.rc, 0);
	for (unsigned i = 0; i < bb / 8; i++) {
		uint64_t w;

		memcpy(&w, c.data + 8 * i, 8);
		EXPECT_TRUE(rkv_slot_moved(w));
	}
	memcpy(&pw, c.data + bb, 8);
	EXPECT_EQ(rkv_part_state(pw), (unsigned)RKV_PART_GONE);
	EXPECT_EQ(rkv_part_epoch(pw), 6u);
	test_raw_close(&c);
	/* map 6: still x, partitions owned */
	ASSERT_EQ(test_raw_open(&c, s.addr, 4), 0);
	ASSERT_EQ(raw_hello_epoch(&c, 0, 6, &d), 0);
	ASSERT_EQ(d.u.hello_reply.status, 0);
	rk = d.u.hello_reply.index_rkey;
	EXPECT_EQ(raw_op(&c, RKV_WR_READ, slot3, rk, 8, 0, 0), 0);
	memcpy(&pw, c.data, 8);
	EXPECT_EQ_U64(pw, x);
	EXPECT_EQ(raw_op(&c, RKV_WR_READ, last + bb, rk, 8, 0, 0), 0);
	memcpy(&pw, c.data, 8);
	EXPECT_EQ_U64(pw, 0);
	test_raw_close(&c);
	test_raw_close(&b);
	test_srv_stop(&s);
}

static void t_silent_clients(void)
{
	enum { NSILENT = 6, NREQ = 60 };
	struct test_srv s;
	struct rkv_client *c = NULL;
	static struct test_raw r[NSILENT];
	struct rkv_msg m, d;
	struct rkv_server_stats st;
	char buf[32];
	long rss0, rss1;
	uint64_t worst = 0, t0;

	ASSERT_EQ(start(&s, NULL), 0);
	ASSERT_EQ(connect_c(s.addr, NULL, 0, &c), 0);
	EXPECT_EQ(kput(c, "alive", "yes"), 0);
	rss0 = rss_kb(s.pid);
	for (int i = 0; i < NSILENT; i++) {
		ASSERT_EQ(test_raw_open(&r[i], s.addr, 1), 0);
		ASSERT_EQ(raw_hello(&r[i], 0, "silent", &d), 0);
		EXPECT_EQ(d.hdr.type, RKV_MSG_HELLO_REPLY);
		memset(&m, 0, sizeof(m));
		m.hdr.type = RKV_MSG_STATS;
		int n = rkv_msg_encode(&m, r[i].send, RKV_MSG_MAX);

		/* even: a flood (its own SENDs find no RECV: RNR); odd: a
		 * few requests that land, whose replies find no RECV */
		int nreq = i % 2 ? 4 : NREQ;

		for (int k = 0; k < nreq; k++) {
			struct rkv_wr w = { .wr_id = 1,
					    .opcode = RKV_WR_SEND,
					    .local = r[i].send,
					    .length = (uint32_t)n,
					    .lkey = r[i].mr->lkey,
					    .flags = k % 16 == 15
							     ? RKV_WR_SIGNALED
							     : 0 };
			if (rkv_post(r[i].ep, &w, NULL))
				break;
		}
	}
	/* the server keeps serving the others */
	t0 = rkv_now_ms();
	int gone = 0;

	while (rkv_now_ms() - t0 < (g_verbs ? 30000u : 12000u)) {
		for (int i = 0; i < NSILENT; i++) {
			struct rkv_wc wc[16];

			(void)rkv_cq_poll(r[i].cq, wc, 16); /* reap, no RECV */
		}
		uint64_t a = rkv_now_ms();

		EXPECT_EQ(kget(c, "alive", buf, sizeof(buf)), 0);
		EXPECT_EQ(rkv_server_stats(c, 0, &st), 0);
		uint64_t b = rkv_now_ms() - a;

		if (b > worst)
			worst = b;
		if (st.clients == 1) {
			gone = 1;
			break;
		}
		usleep(20 * 1000);
	}
	rss1 = rss_kb(s.pid);
	printf("#   silent clients dropped after %llu ms (%d); slowest get+stats "
	       "%llu ms; server RSS %ld -> %ld KiB\n",
	       (unsigned long long)(rkv_now_ms() - t0), gone,
	       (unsigned long long)worst, rss0, rss1);
	EXPECT_TRUE(gone);
	/* a server that waited on a silent client's SEND would stall a
	 * whole transport timeout (2 s) per client; sanitizers on a loaded
	 * machine slow one get+stats down, never by six timeouts (12 s) */
	EXPECT_TRUE(worst < 1000 * RKV_TEST_SLACK);
	if (!RKV_TEST_SANITIZED && rss0 > 0 && rss1 > 0)
		EXPECT_TRUE(rss1 - rss0 < 64 * 1024);
	for (int i = 0; i < NSILENT; i++)
		test_raw_close(&r[i]);
	/* and new clients are served */
	struct rkv_client *c2 = NULL;

	EXPECT_EQ(connect_c(s.addr, NULL, 0, &c2), 0);
	if (c2)
		EXPECT_EQ(kget(c2, "alive", buf, sizeof(buf)), 0);
	rkv_client_destroy(c2);
	rkv_client_destroy(c);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

/* ------------------------------------------- shm: the provider's channel */

/*
 * On shm the transport's own channel carries the MR table and the memfd
 * descriptors; these tests attack it as a local process would: before
 * HELLO (through the transport, and speaking the frame protocol by hand),
 * from another uid (socket file mode, SO_PEERCRED), and as an
 * authenticated read-only client (its descriptors and mappings).
 */
#define NOBODY 65534
/* The shm handshake's wire constants (common/transport/shm_conn.c): protocol
 * word at u64 [16] of the connector's doorbell page, MAP_REQ of the MR
 * table. */
#define SHM_PROTO ((0x53564b52ull << 32) | 2u)
#define SHM_MEMID_TABLE 0xffffffffull

static const char *const k_small[] = { "--buckets", "16", "--memory", "4M",
				       NULL };

static int shm_only(void)
{
	if (!strcmp(g_prov, "shm"))
		return 1;
	rkv_test_skip("the shm provider's own channel");
	return 0;
}

static int put_victim(const char *addr)
{
	struct rkv_client *c = NULL;
	int rc = connect_c(addr, g_secret, 0, &c);

	if (!rc)
		rc = kput(c, "victim", "precious");
	rkv_client_destroy(c);
	return rc;
}

static int victim_intact(const char *addr)
{
	struct rkv_client *c = NULL;
	char buf[64];
	int ok = !connect_c(addr, g_secret, 0, &c) &&
		 !kget(c, "victim", buf, sizeof(buf)) &&
		 !strcmp(buf, "precious");

	rkv_client_destroy(c);
	return ok;
}

/* The victim's index word and block address, read by a writer. */
struct victim {
	struct rkv_msg_hello_reply h; /* a writer's geometry and rkeys */
	uint64_t word_addr, word;
	uint64_t blk_addr;
};

static int find_victim(const char *addr, struct victim *v)
{
	struct test_raw r;
	static char idx[4096];
	int rc = raw_login(&r, addr, 0, &v->h);

	v->word = 0;
	if (!rc && v->h.nbuckets * v->h.bucket_slots * 8 != sizeof(idx))
		rc = -EPROTO;
	if (!rc && raw_onesided(&r, RKV_WR_READ, v->h.index_addr, v->h.index_rkey,
			    sizeof(idx), 0, 0) != RKV_WC_SUCCESS)
		rc = -EIO;
	if (!rc)
		memcpy(idx, r.data, sizeof(idx));
	for (unsigned i = 0; !rc && i < sizeof(idx) / 8 && !v->word; i++) {
		memcpy(&v->word, idx + i * 8, 8);
		v->word_addr = v->h.index_addr + i * 8ull;
	}
	if (!rc && !v->word)
		rc = -ENOENT;
	if (!rc)
		v->blk_addr = v->h.data_addr +
			      (v->word & ((1ull << 34) - 1)) * 64;
	test_raw_close(&r);
	return rc;
}

/* ------------------------------------- the shm frame protocol, by hand */

struct hand {
	int fd;
	uint64_t seq;
	unsigned got_fds; /* descriptors that came with any frame */
	int fds[8];
	unsigned nfds;
};

static void hand_take_fds(struct hand *h, struct msghdr *m)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		     i++) {
			int f;

			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(f));
			h->got_fds++;
			if (h->nfds < 8)
				h->fds[h->nfds++] = f;
			else
				close(f);
		}
	}
}

/* Read exactly n bytes (taking descriptors along); 0, -ECONNRESET,
 * -ETIMEDOUT. */
static int hand_read(struct hand *h, void *buf, size_t n, int wait_ms)
{
	size_t got = 0;

	while (got < n) {
		char cb[CMSG_SPACE(sizeof(int) * 8)];
		struct iovec iov = { (char *)buf + got, n - got };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = cb,
				    .msg_controllen = sizeof(cb) };
		struct pollfd p = { .fd = h->fd, .events = POLLIN };
		ssize_t k;

		if (poll(&p, 1, wait_ms) <= 0)
			return -ETIMEDOUT;
		k = recvmsg(h->fd, &m, MSG_CMSG_CLOEXEC);
		if (k <= 0)
			return -ECONNRESET;
		hand_take_fds(h, &m);
		got += (size_t)k;
	}
	return 0;
}

static int hand_send(struct hand *h, const struct sw_hdr *hd,
		     const void *payload, const int *fds, unsigned nfds)
{
	uint8_t b[SW_HDR_LEN + RKV_MSG_MAX];
	char cb[CMSG_SPACE(sizeof(int) * 2)];
	struct iovec iov = { b, SW_HDR_LEN + hd->len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	sw_hdr_encode(hd, b);
	if (hd->len)
		memcpy(b + SW_HDR_LEN, payload, hd->len);
	if (nfds) {
		struct cmsghdr *c;

		memset(cb, 0, sizeof(cb));
		m.msg_control = cb;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	return sendmsg(h->fd, &m, MSG_NOSIGNAL) == (ssize_t)iov.iov_len
		       ? 0
		       : -EIO;
}

/* A sealed memfd of len bytes (what the shm provider accepts). */
static int sealed_memfd(size_t len)
{
	int fd = memfd_create("hand", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0 || ftruncate(fd, (off_t)len) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/*
 * Connect to the listener of shm:///NAME (its socket file, else the
 * abstract name older builds used) and do the handshake: v2 sends only a
 * doorbell page with the protocol word, v1 the MR table first as older
 * connectors did.  Returns 0 when HELLO_ACK came (descriptors that came
 * with it counted in got_fds), -ECONNRESET when the server closed.
 */
static int hand_open(struct hand *h, const char *addr, int v1)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *name = addr + strlen("shm:///");
	const char *dir = getenv("RKV_SHM_DIR");
	uint8_t b[SW_HDR_LEN];
	struct sw_hdr ack, hello = { .type = SW_F_HELLO };
	int fds[2], n = 0, rc;
	uint64_t *db;

	memset(h, 0, sizeof(*h));
	h->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (h->fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s",
		 dir && *dir ? dir : "/run/rkv", name);
	if (connect(h->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		socklen_t sl;

		memset(sa.sun_path, 0, sizeof(sa.sun_path));
		sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
				 (size_t)snprintf(sa.sun_path + 1,
						  sizeof(sa.sun_path) - 1,
						  "rkv-shm-%s", name));
		if (connect(h->fd, (struct sockaddr *)&sa, sl))
			return -errno;
	}
	if (v1)
		fds[n++] = sealed_memfd(SW_MRTAB_BYTES);
	fds[n] = sealed_memfd(4096);
	db = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fds[n], 0);
	if (db != MAP_FAILED) {
		db[16] = SHM_PROTO;
		munmap(db, 4096);
	}
	n++;
	rc = hand_send(h, &hello, NULL, fds, (unsigned)n);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	if (!rc)
		rc = hand_read(h, b, sizeof(b), 3000);
	if (!rc && (sw_frame_check(b, sizeof(b), &ack) ||
		    ack.type != SW_F_HELLO_ACK))
		rc = -EPROTO;
	return rc;
}

static void hand_close(struct hand *h)
{
	for (unsigned i = 0; i < h->nfds; i++)
		close(h->fds[i]);
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	h->nfds = 0;
}

/*
 * The next frame for us; acknowledges the server's SENDs (RESP success)
 * and returns their message in *msg (when msg is not NULL) as type
 * SW_F_SEND.  Returns the frame type, or -errno.
 */
static int hand_next(struct hand *h, struct sw_hdr *hd, struct rkv_msg *msg)
{
	uint8_t b[SW_HDR_LEN], pl[RKV_MSG_MAX];
	int rc = hand_read(h, b, sizeof(b), 3000);

	if (!rc && sw_frame_check(b, sizeof(b), hd))
		rc = -EPROTO;
	if (!rc && hd->len > sizeof(pl))
		rc = -EMSGSIZE;
	if (!rc && hd->len)
		rc = hand_read(h, pl, hd->len, 3000);
	if (rc)
		return rc;
	if (hd->type == SW_F_SEND) {
		struct sw_hdr a = { .type = SW_F_RESP, .seq = hd->seq };

		rc = hand_send(h, &a, NULL, NULL, 0);
		if (!rc && msg)
			rc = rkv_msg_decode(pl, hd->len, msg);
		if (rc)
			return rc;
	}
	return hd->type;
}

/* SEND m, and wait for the server's next message into out. */
static int hand_call(struct hand *h, struct rkv_msg *m, struct rkv_msg *out)
{
	char wire[RKV_MSG_MAX];
	int n = rkv_msg_encode(m, wire, sizeof(wire)), t;
	struct sw_hdr hd = { .type = SW_F_SEND, .len = (uint32_t)n,
			     .seq = ++h->seq };

	if (n < 0 || hand_send(h, &hd, wire, NULL, 0))
		return -EIO;
	do
		t = hand_next(h, &hd, out);
	while (t > 0 && t != SW_F_SEND);
	return t < 0 ? t : 0;
}

/* HELLO (flags) and the proof of the secret, by hand. */
static int hand_login(struct hand *h, unsigned flags)
{
	struct rkv_msg m, d;
	int rc;

	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_HELLO;
	m.hdr.req_id = 1;
	m.u.hello.flags = flags;
	snprintf(m.u.hello.name, sizeof(m.u.hello.name), "hand");
	rc = hand_call(h, &m, &d);
	if (!rc && d.hdr.type == RKV_MSG_AUTH_CHALLENGE) {
		memset(&m, 0, sizeof(m));
		m.hdr.type = RKV_MSG_AUTH_RESPONSE;
		m.hdr.req_id = 2;
		mac_of(d.u.auth_challenge.nonce, "hand", m.u.auth_response.mac);
		rc = hand_call(h, &m, &d);
	}
	if (!rc && (d.hdr.type != RKV_MSG_HELLO_REPLY ||
		    d.u.hello_reply.status))
		rc = -EPROTO;
	return rc;
}

/* MAP_REQ memid (SHM_MEMID_TABLE: the MR table); the status of the
 * answer, *fd the descriptor that came with it (-1: none), or -errno. */
static int hand_map(struct hand *h, uint64_t memid, int rw, int *fd)
{
	struct sw_hdr hd = { .type = SW_F_MAP_REQ, .seq = ++h->seq,
			     .arg0 = memid, .arg1 = (uint64_t)rw };
	uint64_t seq = hd.seq;
	int t;

	*fd = -1;
	for (unsigned i = 0; i < h->nfds; i++)
		close(h->fds[i]);
	h->nfds = 0;
	if (hand_send(h, &hd, NULL, NULL, 0))
		return -EIO;
	do
		t = hand_next(h, &hd, NULL);
	while (t > 0 && !(t == SW_F_MAP_RESP && hd.seq == seq));
	if (t < 0)
		return t;
	if (h->nfds)
		*fd = h->fds[--h->nfds];
	return (int)hd.key;
}

/*
 * What a read-only descriptor must refuse: access mode, writable mmap,
 * mprotect to writable, a store (SIGSEGV in a child), write(2); with
 * strict (a process without CAP_DAC_OVERRIDE/CAP_FOWNER) also reopening
 * it writable through /proc/self/fd and changing its mode; with sealed (the
 * MR table) a writable mapping of such a reopened descriptor, whoever we
 * are.  Returns the number of violations (each printed).
 */
static int ro_violations(int fd, const char *what, int strict, int sealed)
{
	struct stat st;
	char path[64];
	int bad = 0, rfd, wst = 0;
	void *p;
	pid_t pid;

	if (fstat(fd, &st) || st.st_size <= 0) {
		printf("#   %s: fstat\n", what);
		return 1;
	}
	if ((fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDONLY) {
		printf("#   %s: descriptor not O_RDONLY\n", what);
		bad++;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	if (p != MAP_FAILED) {
		printf("#   %s: mapped writable\n", what);
		munmap(p, (size_t)st.st_size);
		bad++;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		printf("#   %s: cannot even map it read-only\n", what);
		return bad + 1;
	}
	if (!mprotect(p, (size_t)st.st_size, PROT_READ | PROT_WRITE)) {
		printf("#   %s: mprotect(PROT_WRITE) worked\n", what);
		bad++;
	}
	/* the store must fault: the child dies of SIGSEGV (under ASan its
	 * handler reports the fault and exits with its own status instead);
	 * only a store that worked reaches the exit status 42 */
	pid = fork();
	if (pid == 0) {
		*(volatile char *)p = 1;
		_exit(42);
	}
	if (pid < 0 || waitpid(pid, &wst, 0) != pid ||
	    (WIFEXITED(wst) && WEXITSTATUS(wst) == 42) ||
	    (!WIFSIGNALED(wst) && !(WIFEXITED(wst) && RKV_TEST_SANITIZED)) ||
	    (WIFSIGNALED(wst) && WTERMSIG(wst) != SIGSEGV)) {
		printf("#   %s: a store into the mapping did not fault\n",
		       what);
		bad++;
	}
	munmap(p, (size_t)st.st_size);
	if (write(fd, "x", 1) >= 0) {
		printf("#   %s: write(2) worked\n", what);
		bad++;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rfd = open(path, O_RDWR | O_CLOEXEC);
	if (rfd >= 0) {
		p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
			 MAP_SHARED, rfd, 0);
		if (strict || (sealed && p != MAP_FAILED)) {
			printf("#   %s: reopened O_RDWR%s\n", what,
			       p != MAP_FAILED ? " and mapped writable" : "");
			bad++;
		}
		if (p != MAP_FAILED)
			munmap(p, (size_t)st.st_size);
		close(rfd);
	}
	if (strict && !fchmod(fd, 0666)) {
		printf("#   %s: fchmod worked\n", what);
		bad++;
	}
	return bad;
}

/* Become nobody (root only).  0 or -errno. */
static int become_nobody(void)
{
	if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
		return -errno;
	return 0;
}

/* Run fn in a child; its exit status (0: passed), -1 when it died. */
static int in_child(int (*fn)(const char *addr, const void *arg),
		    const char *addr, const void *arg)
{
	int st = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(fn(addr, arg));
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ------------------------------------------------------ unauthenticated */

/* A raw transport peer that never said HELLO: no READ, WRITE or CAS. */
static void t_shm_unauth_onesided(void)
{
	struct test_srv s;
	struct victim v;
	struct test_raw r;
	static const struct {
		enum rkv_wr_opcode op;
		int data;
	} tries[] = { { RKV_WR_READ, 1 }, { RKV_WR_READ, 0 },
		      { RKV_WR_WRITE, 1 }, { RKV_WR_CAS, 0 },
		      { RKV_WR_FETCH_ADD, 0 } };

	if (!shm_only())
		return;
	ASSERT_EQ(start_auth(&s, k_small), 0);
	ASSERT_EQ(put_victim(s.addr), 0);
	ASSERT_EQ(find_victim(s.addr, &v), 0);
	for (size_t t = 0; t < sizeof(tries) / sizeof(tries[0]); t++) {
		uint64_t addr = tries[t].data ? v.blk_addr : v.word_addr;
		uint32_t rkey = tries[t].data ? v.h.data_rkey : v.h.index_rkey;

		ASSERT_EQ(test_raw_open(&r, s.addr, 1), 0);
		EXPECT_TRUE(refused_op(&r, tries[t].op, tries[t].data, addr,
				       rkey, v.word));
		test_raw_close(&r);
	}
	EXPECT_TRUE(victim_intact(s.addr));
	EXPECT_EQ(test_srv_stop(&s), 0);
}

/* By hand, before HELLO: no descriptor in the handshake or for MAP_REQ. */
static void t_shm_unauth_map_req(void)
{
	struct test_srv s;
	struct hand h;
	int acked = 0;

	if (!shm_only())
		return;
	ASSERT_EQ(start_auth(&s, k_small), 0);
	ASSERT_EQ(put_victim(s.addr), 0);
	for (int v1 = 1; v1 >= 0; v1--) {
		int rc = hand_open(&h, s.addr, v1);

		printf("#   v%d handshake: %s, %u descriptors\n", v1 ? 1 : 2,
		       rc ? strerror(-rc) : "acknowledged", h.got_fds);
		EXPECT_EQ(h.got_fds, 0);
		if (!rc) {
			acked++;
			for (uint64_t id = 0; id < 4; id++) {
				for (int rw = 0; rw < 2; rw++) {
					int fd, st = hand_map(&h, id, rw, &fd);

					if (fd >= 0) {
						printf("#   MAP_REQ %u (%s) "
						       "before HELLO: a "
						       "descriptor\n",
						       (unsigned)id,
						       rw ? "rw" : "ro");
						close(fd);
					}
					EXPECT_TRUE(fd < 0);
					EXPECT_TRUE(st != RKV_WC_SUCCESS);
				}
			}
			int fd, st = hand_map(&h, SHM_MEMID_TABLE, 0, &fd);

			EXPECT_TRUE(fd < 0 && st != RKV_WC_SUCCESS);
			if (fd >= 0)
				close(fd);
			EXPECT_EQ(h.got_fds, 0);
		}
		hand_close(&h);
	}
	EXPECT_TRUE(acked > 0); /* the MAP_REQs were asked on some build */
	EXPECT_EQ(test_srv_stop(&s), 0);
}

/* ------------------------------------------------------------ other uids */

/* In a child as nobody: connect (and HELLO with the secret); exit 0 if
 * that worked, 1 if refused, 2 on setup errors. */
static int nobody_connect(const char *addr, const void *arg)
{
	struct rkv_msg_hello_reply h;
	struct test_raw r;
	int rc;

	(void)arg;
	if (become_nobody())
		return 2;
	rc = raw_login(&r, addr, 0, &h);
	test_raw_close(&r);
	return rc ? 1 : 0;
}

static void t_shm_other_uid(void)
{
	const char *open_mode[] = { "--buckets", "16", "--memory", "4M",
				    "--shm-mode", "0666", NULL };
	const char *allowed[] = { "--buckets", "16", "--memory", "4M",
				  "--shm-mode", "0666", "--shm-allow-uid",
				  "65534", NULL };
	const char *dir = getenv("RKV_SHM_DIR");
	struct test_srv s;
	struct stat st;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 300];

	if (!shm_only())
		return;
	if (geteuid() != 0) {
		rkv_test_skip("needs root (to become nobody)");
		return;
	}
	/* default: a socket file only its owner can connect to */
	ASSERT_EQ(start_auth(&s, k_small), 0);
	snprintf(path, sizeof(path), "%s/%s", dir && *dir ? dir : "/run/rkv",
		 s.addr + strlen("shm:///"));
	EXPECT_EQ(lstat(path, &st), 0);
	EXPECT_TRUE(S_ISSOCK(st.st_mode));
	EXPECT_EQ(st.st_mode & 0777, 0600);
	EXPECT_EQ(st.st_uid, geteuid());
	EXPECT_EQ(in_child(nobody_connect, s.addr, NULL), 1);
	EXPECT_EQ(test_srv_stop(&s), 0);
	EXPECT_TRUE(lstat(path, &st) != 0); /* removed on exit */
	/* a socket anyone may open: SO_PEERCRED still refuses nobody */
	ASSERT_EQ(start_auth(&s, open_mode), 0);
	EXPECT_EQ(in_child(nobody_connect, s.addr, NULL), 1);
	EXPECT_EQ(test_srv_stop(&s), 0);
	/* ... unless the operator admits it */
	ASSERT_EQ(start_auth(&s, allowed), 0);
	EXPECT_EQ(in_child(nobody_connect, s.addr, NULL), 0);
	EXPECT_EQ(test_srv_stop(&s), 0);
}

/* ------------------------------------------------------------- read-only */

/*
 * A read-only client, authenticated: every descriptor it gets is
 * read-only, none is writable on request, and WRITE/CAS with the writable
 * rkeys (a writer's, as the MR table shows them) fail; strict as for
 * ro_violations.  Returns the number of violations.
 */
static int ro_attack(const char *addr, const struct victim *v, int strict)
{
	struct rkv_msg_hello_reply h;
	struct test_raw r;
	struct hand hd;
	int bad = 0, got = 0, fd, st;
	char what[64];

	if (hand_open(&hd, addr, 0) && hand_open(&hd, addr, 1)) {
		printf("#   no handshake\n");
		return 1;
	}
	if (hand_login(&hd, RKV_HELLO_READ_ONLY)) {
		printf("#   read-only login by hand failed\n");
		hand_close(&hd);
		return 1;
	}
	for (uint64_t id = 0; id < 4; id++) {
		st = hand_map(&hd, id, 1, &fd);
		if (fd >= 0 || st == RKV_WC_SUCCESS) {
			printf("#   memfd %u: writable descriptor given\n",
			       (unsigned)id);
			if (fd >= 0)
				close(fd);
			bad++;
		}
		st = hand_map(&hd, id, 0, &fd);
		if (fd >= 0) {
			snprintf(what, sizeof(what), "memfd %u", (unsigned)id);
			bad += ro_violations(fd, what, strict, 0);
			close(fd);
			got++;
		}
	}
	st = hand_map(&hd, SHM_MEMID_TABLE, 0, &fd);
	if (fd >= 0) {
		bad += ro_violations(fd, "MR table", strict, 1);
		close(fd);
	}
	hand_close(&hd);
	if (got < 2) {
		printf("#   %d read-only descriptors (index, data expected)\n",
		       got);
		bad++;
	}
	/* through the transport, with the writer's rkeys */
	for (int t = 0; t < 2; t++) {
		if (raw_login(&r, addr, RKV_HELLO_READ_ONLY, &h)) {
			printf("#   read-only login failed\n");
			return bad + 1;
		}
		st = t ? raw_onesided(&r, RKV_WR_CAS, v->word_addr,
				  v->h.index_rkey, 8, v->word, 1)
		       : raw_onesided(&r, RKV_WR_WRITE, v->blk_addr,
				  v->h.data_rkey, 64, 0, 0);
		if (st != RKV_WC_REM_ACCESS_ERR) {
			printf("#   read-only %s with a writer's rkey: %s\n",
			       t ? "CAS" : "WRITE",
			       rkv_wc_status_str((enum rkv_wc_status)st));
			bad++;
		}
		test_raw_close(&r);
	}
	return bad;
}

static int ro_attack_nobody(const char *addr, const void *arg)
{
	if (become_nobody())
		return 100;
	return ro_attack(addr, arg, 1) ? 1 : 0;
}

static void t_shm_read_only(void)
{
	const char *allowed[] = { "--buckets", "16", "--memory", "4M",
				  "--shm-mode", "0666", "--shm-allow-uid",
				  "nobody", NULL };
	struct test_srv s;
	struct victim v;

	if (!shm_only())
		return;
	/* as this user (root: it could reopen the region memfds writable,
	 * as it could ptrace the server; not the table) */
	ASSERT_EQ(start_auth(&s, k_small), 0);
	ASSERT_EQ(put_victim(s.addr), 0);
	ASSERT_EQ(find_victim(s.addr, &v), 0);
	EXPECT_EQ(ro_attack(s.addr, &v, geteuid() != 0), 0);
	EXPECT_TRUE(victim_intact(s.addr));
	EXPECT_EQ(test_srv_stop(&s), 0);
	if (geteuid() != 0)
		return;
	/* as another user the operator admitted */
	ASSERT_EQ(start_auth(&s, allowed), 0);
	ASSERT_EQ(put_victim(s.addr), 0);
	ASSERT_EQ(find_victim(s.addr, &v), 0);
	EXPECT_EQ(in_child(ro_attack_nobody, s.addr, &v), 0);
	EXPECT_TRUE(victim_intact(s.addr));
	EXPECT_EQ(test_srv_stop(&s), 0);
}

int main(int argc, char **argv)
{
	g_prov = test_itest_init(argc, argv, 600);
	if (!g_prov)
		return 77;
	g_verbs = !strcmp(g_prov, "verbs");
	snprintf(g_dir, sizeof(g_dir), "/tmp/rkv-itest-sec-XXXXXX");
	if (!mkdtemp(g_dir)) {
		printf("1..0 # SKIP cannot create a temporary directory\n");
		return 77;
	}
	snprintf(g_secret, sizeof(g_secret), "%s/secret", g_dir);
	snprintf(g_wrong, sizeof(g_wrong), "%s/wrong", g_dir);
	snprintf(g_ro, sizeof(g_ro), "%s/read-only", g_dir);
	if (write_file(g_secret, k_secret, 0600) ||
	    write_file(g_wrong, "not the secret 0123456789", 0600) ||
	    write_file(g_ro, k_ro, 0600)) {
		printf("1..0 # SKIP cannot write secret files\n");
		return 77;
	}
	RKV_TEST(t_auth_secret);
	RKV_TEST(t_secret_file_checks);
	RKV_TEST(t_replay);
	RKV_TEST(t_garbage_before_auth);
	RKV_TEST(t_read_only_client);
	RKV_TEST(t_read_only_raw);
	RKV_TEST(t_scribbled_block);
	RKV_TEST(t_ro_secret);
	RKV_TEST(t_ro_secret_raw);
	RKV_TEST(t_ro_secret_checks);
	RKV_TEST(t_secret_env);
	RKV_TEST(t_rotate_rkeys);
	RKV_TEST(t_rotate_rkeys_nowin);
	RKV_TEST(t_conn_rkeys);
	RKV_TEST(t_conn_rkeys_off);
	RKV_TEST(t_max_clients);
	RKV_TEST(t_max_clients_per_peer);
	RKV_TEST(t_max_chunks);
	RKV_TEST(t_max_inflight);
	RKV_TEST(t_silent_clients);
	RKV_TEST(t_fence);
	RKV_TEST(t_fence_late_access);
	RKV_TEST(t_shm_unauth_onesided);
	RKV_TEST(t_shm_unauth_map_req);
	RKV_TEST(t_shm_other_uid);
	RKV_TEST(t_shm_read_only);
	int rc = rkv_test_done();
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
	if (system(cmd)) {
		/* leftover temporary files only */
	}
	return rc;
}
