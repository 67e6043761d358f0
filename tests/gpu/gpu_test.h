/* SPDX-License-Identifier: MIT */
/*
 * gpu_test.h - shared by the GPU tests (tests/gpu/gpu_*.c): skip with the
 * reason when no CUDA device is usable, and post-and-wait helpers.
 * Every GPU test prints TAP, exits 0/1/77, and skips (77, "1..0 # SKIP
 * why") on a machine without a usable GPU, so `make test` passes there.
 */
#ifndef RKV_TESTS_GPU_GPU_TEST_H
#define RKV_TESTS_GPU_GPU_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "rtime.h"
#include "transport.h"

/* Exit 77 with the reason unless CUDA device 0 is usable. */
static inline void gpu_test_require(void)
{
	char why[256];

	if (rkv_cuda_probe(0, why, sizeof(why))) {
		printf("1..0 # SKIP no usable GPU: %s\n", why);
		fflush(stdout);
		exit(77);
	}
}

/*
 * CUDA is not fork-safe: a child forked after its parent used CUDA fails
 * every CUDA call (and may hang).  The tests start their helper processes
 * with gpu_spawn(), which forks and execs this same binary as
 * "ARGV0 --child ARG..."; main() calls gpu_child_of() first thing, before
 * anything touches CUDA, and runs the child's part when it returns argv.
 */
static const char *g_gpu_argv0 = "gpu-test";

/* NULL unless this process is a spawned child; then its ARGs (NULL-ended). */
static inline char **gpu_child_of(int argc, char **argv)
{
	if (argc > 0)
		g_gpu_argv0 = argv[0];
	if (argc > 1 && strcmp(argv[1], "--child") == 0)
		return argv + 2;
	return NULL;
}

/* Fork and exec this binary with "--child" and args (NULL-ended, at most
 * 8).  File descriptors without FD_CLOEXEC stay open in the child.
 * Returns the child's PID, or -1. */
static inline pid_t gpu_spawn(const char *const *args)
{
	char *argv[11];
	unsigned n = 0;
	pid_t pid;

	argv[n++] = (char *)g_gpu_argv0;
	argv[n++] = (char *)"--child";
	while (*args && n < 10)
		argv[n++] = (char *)*args++;
	argv[n] = NULL;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid == 0) {
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	return pid;
}

/* The torture processes' "--child ID ADDR" (a server address). */
static inline pid_t gpu_spawn_client(unsigned id, const char *addr)
{
	char ids[16];
	const char *args[] = { ids, addr, NULL };

	snprintf(ids, sizeof(ids), "%u", id);
	return gpu_spawn(args);
}

/* Run n torture processes (ids 0..n-1) against addr to their end.
 * Returns how many could not start or did not exit 0. */
static inline unsigned gpu_run_clients(unsigned n, const char *addr)
{
	pid_t pid[16];
	unsigned bad = 0;

	if (n > 16)
		return n;
	for (unsigned i = 0; i < n; i++)
		pid[i] = gpu_spawn_client(i, addr);
	for (unsigned i = 0; i < n; i++) {
		int st = 0;

		if (pid[i] <= 0 || waitpid(pid[i], &st, 0) != pid[i] ||
		    !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad++;
	}
	return bad;
}

/* The options of every GPU test: --provider tcp|shm (*only) and, when
 * bench is not NULL, --bench. */
static inline void gpu_test_args(int argc, char **argv, const char **only,
				 int *bench)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--provider") == 0 && i + 1 < argc)
			*only = argv[++i];
		else if (bench && strcmp(argv[i], "--bench") == 0)
			*bench = 1;
	}
}

/* In such a child: copies ADDR to addr, returns ID, or -1 when malformed. */
static inline int gpu_client_args(char **child, char *addr, size_t len)
{
	if (!child[0] || !child[1] || strlen(child[1]) >= len)
		return -1;
	snprintf(addr, len, "%s", child[1]);
	return atoi(child[0]);
}

/* Post one signaled WR and wait (10 s) for its completion status. */
static inline int gpu_post_wait(struct rkv_ep *ep, struct rkv_cq *cq,
				struct rkv_wr *wr)
{
	struct rkv_wc wc;
	uint64_t end = rkv_now_ms() + 10000;
	int n;

	wr->flags |= RKV_WR_SIGNALED;
	wr->next = NULL;
	if (rkv_post(ep, wr, NULL))
		return -1;
	while (rkv_now_ms() < end) {
		n = rkv_cq_poll(cq, &wc, 1);
		if (n < 0)
			return -1;
		if (n == 1)
			return (int)wc.status;
	}
	return -2;
}

#endif
