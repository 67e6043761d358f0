/* SPDX-License-Identifier: MIT */
/*
 * main.c - entry point of the transport conformance suite.
 *
 *   conformance --provider tcp|shm|verbs [-t NAME_FILTER]
 *
 * Prints TAP through tests/lib and exits 0 (pass), 1 (fail) or 77 (skip).
 * verbs needs RKV_VERBS_IP (else SOFTROCE_IP) naming the address of an RDMA
 * netdev; without it, or when rkv_tp_create says -ENODEV, the whole binary
 * skips with the reason.  A watchdog alarm names the test that hung, kills
 * any child processes the suite started and ends the run.
 */
#include "conf.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "rtime.h"
#include "tests/lib/test.h"

#define WATCHDOG_S 540 /* under tests/run.sh's 600 s per binary */
#define MAX_CHILDREN 32

enum rkv_tp_provider g_conf_provider = RKV_TP_TCP;
const char *g_conf_verbs_ip;

static const char *g_current = "(startup)";
static volatile sig_atomic_t g_children[MAX_CHILDREN];
static unsigned g_listen_seq;

unsigned conf_scale(unsigned sw, unsigned verbs)
{
	return g_conf_provider == RKV_TP_VERBS ? verbs : sw;
}

unsigned conf_bound_ms(void)
{
	return g_conf_provider == RKV_TP_VERBS ? 30000 : 10000;
}

void conf_listen_addr(char *buf, size_t len)
{
	switch (g_conf_provider) {
	case RKV_TP_SHM:
		snprintf(buf, len, "shm:///rkv-conf-%d-%u", (int)getpid(),
			 g_listen_seq++);
		break;
	case RKV_TP_VERBS:
		snprintf(buf, len, "verbs://%s:0", g_conf_verbs_ip);
		break;
	default:
		snprintf(buf, len, "tcp://127.0.0.1:0");
		break;
	}
}

void conf_child_add(pid_t pid)
{
	for (int i = 0; i < MAX_CHILDREN; i++) {
		if (g_children[i] == 0) {
			g_children[i] = pid;
			return;
		}
	}
}

void conf_child_del(pid_t pid)
{
	for (int i = 0; i < MAX_CHILDREN; i++) {
		if (g_children[i] == pid)
			g_children[i] = 0;
	}
}

void conf_child_init(unsigned secs)
{
	signal(SIGALRM, SIG_DFL);
	for (int i = 0; i < MAX_CHILDREN; i++)
		g_children[i] = 0;
	g_current = "(child)";
	alarm(secs);
}

int conf_child_reap(pid_t pid, unsigned timeout_ms)
{
	uint64_t deadline = rkv_now_ms() + timeout_ms;
	int status = 0;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid) {
			conf_child_del(pid);
			return status;
		}
		if (r < 0) {
			conf_child_del(pid);
			return -errno;
		}
		if (rkv_now_ms() > deadline)
			break;
		conf_sleep_ms(5);
	}
	printf("#   child %d still running after %u ms: killed\n", (int)pid,
	       timeout_ms);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	conf_child_del(pid);
	return -ETIMEDOUT;
}

static void put(const char *s)
{
	ssize_t r = write(STDOUT_FILENO, s, strlen(s));

	(void)r;
}

static void on_alarm(int sig)
{
	(void)sig;
	put("# watchdog: test ");
	put(g_current);
	put(" did not finish; killing children and aborting\n");
	for (int i = 0; i < MAX_CHILDREN; i++) {
		if (g_children[i] > 0)
			kill((pid_t)g_children[i], SIGKILL);
	}
	signal(SIGALRM, SIG_DFL);
	raise(SIGALRM);
}

void conf_run(const char *name, void (*fn)(void))
{
	const char *flt = rkv_test_filter();

	if (flt && !strstr(name, flt))
		return;
	g_current = name;
	fflush(stdout);
	rkv_test_run(name, fn);
	for (int i = 0; i < MAX_CHILDREN; i++) {
		if (g_children[i] > 0) {
			printf("# %s left child %d: killed\n", name,
			       (int)g_children[i]);
			kill((pid_t)g_children[i], SIGKILL);
			waitpid((pid_t)g_children[i], NULL, 0);
			g_children[i] = 0;
		}
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: conformance --provider tcp|shm|verbs [-t FILTER]\n");
	exit(2);
}

/* Exit 77 with the reason when verbs cannot run here. */
static void verbs_or_skip(void)
{
	struct rkv_tp_opts o;
	struct rkv_tp *tp = NULL;
	int rc;

	g_conf_verbs_ip = getenv("RKV_VERBS_IP");
	if (!g_conf_verbs_ip || !*g_conf_verbs_ip)
		g_conf_verbs_ip = getenv("SOFTROCE_IP");
	if (!g_conf_verbs_ip || !*g_conf_verbs_ip) {
		printf("1..0 # SKIP verbs: neither RKV_VERBS_IP nor "
		       "SOFTROCE_IP is set (address of an RDMA netdev)\n");
		exit(77);
	}
	rkv_tp_opts_init(&o);
	o.provider = RKV_TP_VERBS;
	rc = rkv_tp_create(&o, &tp);
	if (rc == -ENODEV) {
		printf("1..0 # SKIP verbs: no RDMA device with an active port "
		       "(rkv_tp_create: %s)\n", strerror(-rc));
		exit(77);
	}
	if (rc == 0) {
		printf("# verbs: %s, address %s\n", rkv_tp_describe(tp),
		       g_conf_verbs_ip);
		rkv_tp_destroy(tp);
	}
}

int main(int argc, char **argv)
{
	const char *prov = NULL;
	struct sigaction sa;

	for (int i = 1; i < argc; i++) {
		if ((strcmp(argv[i], "--provider") == 0 ||
		     strcmp(argv[i], "-p") == 0) && i + 1 < argc)
			prov = argv[++i];
		else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
			i++;
		else
			usage();
	}
	if (!prov)
		prov = "tcp";
	if (rkv_tp_provider_parse(prov, &g_conf_provider) ||
	    g_conf_provider == RKV_TP_AUTO)
		usage();
	/* Expected errors are the point of half the tests: keep stderr
	 * quiet unless RKV_LOG_LEVEL asks for more. */
	rkv_log_set_level(RKV_LOG_ERROR);
	if (rkv_log_level_from_env())
		fprintf(stderr, "conformance: bad RKV_LOG_LEVEL ignored\n");

	rkv_test_init(argc, argv, WATCHDOG_S);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);

	if (g_conf_provider == RKV_TP_VERBS)
		verbs_or_skip();
	printf("# conformance: provider %s\n", prov);

	conf_tests_input();
	conf_tests_ops();
	conf_tests_order();
	conf_tests_errors();
	conf_tests_proc();
	conf_tests_stress();
	return rkv_test_done();
}
