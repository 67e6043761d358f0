/* SPDX-License-Identifier: MIT */
/*
 * srv.h - start and stop rkv-server processes for integration tests.  The
 * server binary is found next to the test (../bin/rkv-server relative to
 * the test binary) or in $RKV_BIN_DIR.  Servers listen on 127.0.0.1 with
 * port 0 (tcp), a unique abstract name (shm), or $RKV_VERBS_IP (verbs).
 */
#ifndef RKV_TESTS_LIB_SRV_H
#define RKV_TESTS_LIB_SRV_H

#include <stddef.h>
#include <sys/types.h>

struct rkv_client;

struct test_srv {
	pid_t pid;
	char addr[300];
};

/*
 * The common start of an integration test: --provider tcp|shm|verbs
 * (default tcp), the harness with a watchdog of watchdog_s, logs off,
 * SIGPIPE ignored, binaries found next to argv[0].  Returns the provider,
 * or NULL after printing a TAP skip line when it is verbs and there is no
 * RDMA device or RKV_VERBS_IP is unset (the test then exits 77).
 */
const char *test_itest_init(int argc, char **argv, unsigned watchdog_s);

/* Remember argv[0] to find ../bin. */
void test_srv_setup(const char *argv0);
/* Directory holding the project's binaries. */
const char *test_bin_dir(void);
/* Listen address for a new server of provider ("tcp", "shm", "verbs"). */
void test_srv_listen_addr(const char *provider, char *buf, size_t len);
/*
 * Start rkv-server with extra arguments (NULL-terminated list, may be
 * NULL) on a fresh address of provider; waits for its "listening on"
 * line (10 s at most).  Returns 0 or -errno.
 */
int test_srv_start(struct test_srv *s, const char *provider,
		   const char *const *extra);
/* The same under --name name (listen: --listen, NULL for a fresh
 * address; more: further arguments, may be NULL); a failure is printed
 * as a TAP comment naming the server. */
int test_srv_start_named(struct test_srv *s, const char *provider,
			 const char *name, const char *listen,
			 const char *const *more);
/* SIGTERM, wait (5 s), then SIGKILL.  Returns the exit status or -1. */
int test_srv_stop(struct test_srv *s);
/* SIGKILL at once. */
void test_srv_kill(struct test_srv *s);
/*
 * A librkv client of the servers in addr (a --servers list) with the given
 * operation timeout and max_value (0: the library's default).  NULL when
 * rkv_client_create fails.
 */
struct rkv_client *test_client_at(const char *addr, unsigned timeout_ms,
				  size_t max_value);
/* An rmw_fn of librkv: the 8-byte counter (absent or of another length:
 * 0) plus (uintptr_t)arg. */
int test_rmw_add(const void *old, size_t old_len, void *out, size_t cap,
		 size_t *out_len, void *arg);

/* A value of len bytes that says which (len, seed) it is: any byte of
 * another value, or of a torn one, differs. */
void test_big_fill(unsigned char *v, size_t len, unsigned seed);
/* An rmw_fn of librkv: the old value with its first byte flipped, the
 * same length (absent, or longer than out's room: -EINVAL). */
int test_rmw_flip_first(const void *old, size_t old_len, void *out,
			size_t cap, size_t *out_len, void *arg);

/* A log_fn of librkv that keeps the messages, one per line, in text
 * (what does not fit is dropped): log_arg is a struct test_logbuf. */
struct test_logbuf {
	char text[8192];
	size_t len;
};
void test_log_to_buf(int level, const char *msg, void *arg);

/* A client of a cluster file or etcd://HOST:PORT/CLUSTER (lb: its log,
 * may be NULL); NULL with the error in *rc (may be NULL). */
struct rkv_client *test_client_cluster(const char *cluster,
				       unsigned timeout_ms,
				       unsigned connect_ms,
				       struct test_logbuf *lb, int *rc);
/* Key i ("user:I") set to generation gen's value; its check: 0 when it
 * holds that value, else the error (-EBADMSG: another value). */
int test_kput(struct rkv_client *c, unsigned i, unsigned gen);
int test_kcheck(struct rkv_client *c, unsigned i, unsigned gen);
/* The server index key i routes to. */
unsigned test_kowner(struct rkv_client *c, unsigned i);

/* An rmw_fn that refuses: -ECANCELED, nothing written. */
int test_rmw_cancel(const void *old, size_t old_len, void *out, size_t cap,
		    size_t *out_len, void *arg);

/* A stale lock holder (test_rmw_steal's arg): the rmw of client A with
 * it runs, the first time, while A holds the key's lock, a put of "b"
 * by client b (which waits a lease, steals A's lock, installs on the
 * backups and releases; its status in b_rc), then writes "a"; any later
 * run gives up (-ECANCELED), so A's retry writes nothing. */
struct test_steal {
	struct rkv_client *b;
	const char *key;
	unsigned calls;
	int b_rc;
};

int test_rmw_steal(const void *old, size_t old_len, void *out, size_t cap,
		   size_t *out_len, void *arg);
#endif
