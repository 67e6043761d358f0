/* SPDX-License-Identifier: MIT */
/*
 * etcd_proc.h - start, kill, restart and stop a real single-member etcd
 * for tests: on 127.0.0.1 with ports of its own, a fresh data folder
 * under $TMPDIR (default /tmp), its output in that folder's etcd.log.
 * The etcd binary is $RKV_ETCD_BIN, else /usr/bin/etcd, else etcd on
 * $PATH.  An etcd started here dies with the test process that started
 * it (PR_SET_PDEATHSIG), so a crashed or timed-out test leaves none; the
 * signal comes when the *thread* that started it exits, so start and
 * restart it from the main thread (or one that outlives it).  Not
 * thread-safe: one thread manages a struct test_etcd.
 */
#ifndef RKV_TESTS_LIB_ETCD_PROC_H
#define RKV_TESTS_LIB_ETCD_PROC_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct test_etcd {
	pid_t pid;                 /* 0 while not running */
	int client_port, peer_port;
	char dir[256];             /* temp folder: data/ and etcd.log */
	char url[64];              /* "etcd://127.0.0.1:P" */
};

/*
 * Start etcd on two free ports and a fresh folder, and wait (15 s at
 * most) until it serves a read.  Returns 0, -ENOENT when etcd is not
 * installed (why says so: tests skip with it), or -errno with why
 * (-ETIMEDOUT when it never answered; the last line of its log then).
 */
int test_etcd_start(struct test_etcd *t, char *why, size_t why_len);
/* SIGKILL by pid and reap; the folder stays (for test_etcd_restart). */
void test_etcd_kill(struct test_etcd *t);
/* Start it again (killing it first if it runs) on the same ports and
 * folder, and wait as test_etcd_start does.  Returns 0 or -errno. */
int test_etcd_restart(struct test_etcd *t, char *why, size_t why_len);
/* SIGTERM, up to 5 s for it to exit, then SIGKILL; reap; remove the
 * folder.  A stopped or never started t is fine. */
void test_etcd_stop(struct test_etcd *t);

#ifdef __cplusplus
}
#endif
#endif
