/* SPDX-License-Identifier: MIT */
/*
 * conf.h - the transport conformance suite: one set of tests that runs
 * unchanged against every provider (conformance --provider tcp|shm|verbs).
 *
 * A fixture is a "server" half (context, listener, CQ, registered regions)
 * and a "client" half (context, CQ, local buffer), connected by accepting in
 * a second thread while the main thread connects (rdma_cm needs both to make
 * progress in one process).  The halves also work alone, for tests that
 * fork one side into a child process.
 *
 * Completions are gathered by conf_progress(), which polls both CQs (the
 * software providers drive progress from cq_poll) into per-half stashes;
 * every wait is bounded, so a provider bug gives a failure, never a hang.
 */
#ifndef RKV_TESTS_CONFORMANCE_CONF_H
#define RKV_TESTS_CONFORMANCE_CONF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tests/lib/test.h"
#include "transport.h"

/* Sanitizer builds: RSS checks are meaningless (quarantine, shadow). */
#define CONF_SANITIZED RKV_TEST_SANITIZED
#if defined(__SANITIZE_THREAD__)
#define CONF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CONF_TSAN 1
#endif
#endif
#ifndef CONF_TSAN
#define CONF_TSAN 0
#endif

#define CONF_GUARD 4096u           /* bytes around the main region */
#define CONF_SIDE_LEN (64u << 10)  /* read-only / write-only / scratch */
#define CONF_STASH 4096            /* completions kept per half */
#define CONF_CQ_DEPTH 4096u

extern enum rkv_tp_provider g_conf_provider;
extern const char *g_conf_verbs_ip;

/* Run a test, remembering its name for the watchdog message. */
void conf_run(const char *name, void (*fn)(void));
#define CONF_TEST(fn) conf_run(#fn, fn)

/* The test groups, one per file. */
void conf_tests_ops(void);
void conf_tests_order(void);
void conf_tests_errors(void);
void conf_tests_proc(void);
void conf_tests_stress(void);
void conf_tests_input(void);

/* Per-provider scale: software providers vs verbs (Soft-RoCE is slow). */
unsigned conf_scale(unsigned sw, unsigned verbs);
/* Bound for any single wait, ms: 10 s software, 30 s verbs. */
unsigned conf_bound_ms(void);
/* A fresh listen address for the provider under test. */
void conf_listen_addr(char *buf, size_t len);
/* Remember / forget a child PID so the watchdog can kill it. */
void conf_child_add(pid_t pid);
void conf_child_del(pid_t pid);
/* In a forked child: default SIGALRM, no inherited PIDs, alarm(secs). */
void conf_child_init(unsigned secs);
/* Wait for pid up to timeout_ms; SIGKILL it after.  Returns the waitpid
 * status, or -ETIMEDOUT (it was killed). */
int conf_child_reap(pid_t pid, unsigned timeout_ms);

struct conf_stash {
	struct rkv_wc *wc;
	int n;
};

struct conf_fix_opts {
	size_t region_len;      /* server main region (ALL access) */
	size_t local_len;       /* client local buffer */
	unsigned srv_timeout_ms; /* 0: provider default */
	unsigned cli_timeout_ms;
	unsigned cli_max_send_wr; /* 0: default */
};

struct conf_srv {
	struct rkv_tp *tp;
	struct rkv_listener *lis;
	struct rkv_cq *cq;
	struct rkv_ep *ep;      /* the accepted endpoint */
	uint8_t *mem;           /* guard | region | guard */
	size_t mem_len;
	uint8_t *reg;           /* main region, RKV_ACCESS_ALL */
	size_t reg_len;
	struct rkv_mr *mr;
	uint8_t *ro;            /* CONF_SIDE_LEN, REMOTE_READ only */
	struct rkv_mr *ro_mr;
	uint8_t *wo;            /* CONF_SIDE_LEN, LOCAL+REMOTE_WRITE only */
	struct rkv_mr *wo_mr;
	uint8_t *loc;           /* CONF_SIDE_LEN, local SEND/RECV buffer */
	struct rkv_mr *loc_mr;
	struct conf_stash st;
	char addr[320];         /* bound listener address */
};

struct conf_cli {
	struct rkv_tp *tp;
	struct rkv_cq *cq;
	struct rkv_ep *ep;
	uint8_t *loc;           /* local buffer, LOCAL_WRITE */
	size_t loc_len;
	struct rkv_mr *loc_mr;
	struct conf_stash st;
};

struct conf_fix {
	struct conf_srv s;
	struct conf_cli c;
};

void conf_fix_opts_init(struct conf_fix_opts *o);

/* Each returns 0 or -errno and prints a "# " diagnostic on failure. */
int conf_srv_open(struct conf_srv *s, const struct conf_fix_opts *o);
int conf_srv_accept(struct conf_srv *s, int timeout_ms);
void conf_srv_close(struct conf_srv *s);
int conf_cli_open(struct conf_cli *c, const struct conf_fix_opts *o);
int conf_cli_connect(struct conf_cli *c, const char *addr, int timeout_ms);
void conf_cli_close(struct conf_cli *c);
/* Both halves, connected.  o may be NULL for defaults.  A -ENODEV or a
 * provider without atomics is reported to the caller as is. */
int conf_fix_create(struct conf_fix *f, const struct conf_fix_opts *o);
void conf_fix_destroy(struct conf_fix *f);

/* Poll both halves' CQs (either may be NULL) into their stashes.
 * Returns the number gathered or a negative poll error. */
int conf_progress(struct conf_srv *s, struct conf_cli *c);
/* Until c has ncli and s has nsrv stashed completions, or timeout_ms.
 * Returns 0, -ETIMEDOUT, or a poll error. */
int conf_wait(struct conf_srv *s, struct conf_cli *c, int ncli, int nsrv,
	      unsigned timeout_ms);
/* Poll for ms milliseconds, gathering whatever arrives. */
void conf_quiesce(struct conf_srv *s, struct conf_cli *c, unsigned ms);
void conf_stash_clear(struct conf_stash *st);

/* Remote address of byte off of the server's main region. */
uint64_t conf_raddr(const struct conf_srv *s, size_t off);

void conf_wr(struct rkv_wr *w, enum rkv_wr_opcode op, uint64_t wr_id,
	     unsigned flags, void *local, uint32_t len, uint32_t lkey,
	     uint64_t raddr, uint32_t rkey);

/*
 * Post chain on the client endpoint after clearing the client stash, then
 * wait for nexpect client completions (left in f->c.st).  Returns 0, the
 * rkv_post error, or -ETIMEDOUT.
 */
int conf_post_wait(struct conf_fix *f, struct rkv_wr *chain, int nexpect);

/*
 * One signaled WR from the client, local buffer at loff.  Returns the
 * completion status (>= 0), or -errno (post failed, -ETIMEDOUT).
 */
int conf_op(struct conf_fix *f, enum rkv_wr_opcode op, size_t loff,
	    uint32_t len, uint64_t raddr, uint32_t rkey, uint64_t cmp,
	    uint64_t swap);

/*
 * Direct access by the test to registered memory.  A remote READ, WRITE or
 * atomic is executed by another thread (the tcp target thread) and ordered
 * with the test only through the socket and the completion, which
 * ThreadSanitizer cannot see, so in TSan builds these helpers ignore the
 * test's own accesses (AnnotateIgnoreReads/Writes); the provider's accesses
 * stay checked against each other.  Elsewhere they are plain accesses.
 */
void conf_mem_begin(void);
void conf_mem_end(void);
void conf_memset(void *p, int c, size_t n);
void conf_memcpy(void *dst, const void *src, size_t n);
uint64_t conf_rd64(const void *p);
void conf_wr64(void *p, uint64_t v);
uint8_t conf_rd8(const void *p);
void conf_wr8(void *p, uint8_t v);

/* Deterministic test data (these two use conf_mem_begin/end). */
void conf_fill(void *p, size_t n, uint32_t seed);
/* Index of the first byte that differs, or -1. */
long conf_diff(const void *a, const void *b, size_t n);
/* Resident set size in KiB (from /proc/self/statm). */
long conf_rss_kib(void);
/* Sleep ms milliseconds. */
void conf_sleep_ms(unsigned ms);

/* Create a connected fixture or fail the current test and return. */
#define CONF_FIX(f, o)                                                         \
	do {                                                                   \
		int _rc = conf_fix_create((f), (o));                           \
		if (_rc) {                                                     \
			printf("#   %s:%d: fixture: %s\n", __FILE__,          \
			       __LINE__, strerror(-_rc));                      \
			g_test_failures++;                                     \
			return;                                                \
		}                                                              \
	} while (0)

/* Skip the current test (after freeing f) when atomics are unsupported. */
#define CONF_NEED_ATOMICS(f)                                                   \
	do {                                                                   \
		if (!rkv_tp_has_atomics((f)->c.tp)) {                          \
			rkv_test_skip("context has no atomics");               \
			conf_fix_destroy(f);                                   \
			return;                                                \
		}                                                              \
	} while (0)

#endif
