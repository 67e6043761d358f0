/* SPDX-License-Identifier: MIT */
/*
 * main.c - rkv-server: parse the command line, create the server, print the
 * effective configuration (stderr) and, once ready, exactly one line
 * "rkv-server: listening on ADDR" on stdout (scripts read the port from
 * it), then run the control loop until SIGINT or SIGTERM.
 *
 * Every reason not to start is one line on stderr, "rkv-server: ..."
 * naming the option or the address, and nothing else of ours: the
 * configuration is printed only once the server is up.  Whatever happens
 * after that goes through rkv_log (common/log.h: its sink, its format).
 *
 * The loop spins while there is work and for --idle-spin after it, then
 * blocks (rkv_srv_wait) on the CQ, the listener and the metrics sockets,
 * waking at least every WAIT_MS for the timers (grace, handshakes): the
 * CPU serves only the control plane, never a get or put, so an idle
 * server costs next to nothing and a blocked one answers the first
 * message after a wake-up (docs/DESIGN.md §4 has the figures).  Where the
 * provider cannot block it naps NAP_US between passes instead.
 *
 * --data-memory gpu[:N] is checked first (driver, device): when the GPU
 * cannot be used the server prints one line naming the cause and exits 1
 * before it builds anything.
 *
 * Exit status: 0 after a signal, 1 when the server cannot start, 2 for a
 * bad command line or an unusable --secret-file (unreadable, empty, or
 * open to group or others).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "datamem.h"
#include "rtime.h"
#include "server_internal.h"

#define WAIT_MS 20
#define NAP_US 150

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

static int setup_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL))
		return -errno;
	sa.sa_handler = SIG_IGN;
	if (sigaction(SIGPIPE, &sa, NULL))
		return -errno;
	return 0;
}

static int run(struct rkv_srv *srv, struct rkv_srv_metrics *metrics,
	       uint64_t spin_us)
{
	const struct timespec nap = { 0, NAP_US * 1000L };
	struct pollfd fds[RKV_CQ_WAIT_FDS - 1];
	uint64_t last_ms = 0, busy_ns = rkv_now_ns();
	const uint64_t spin_ns = spin_us * 1000u;
	int can_block = 1;

	while (!g_stop) {
		uint64_t now = rkv_now_ms();
		int rc = rkv_srv_poll(srv, now);
		unsigned n;

		if (rc < 0)
			return rc;
		if (metrics && now != last_ms) {
			last_ms = now; /* at most once a millisecond */
			rc += rkv_srv_metrics_poll(metrics, srv, now);
		}
		if (rc > 0) {
			busy_ns = rkv_now_ns();
			continue;
		}
		if (rkv_now_ns() - busy_ns < spin_ns || !can_block) {
			/* naps, not a spin: the thread that brings the next
			 * message may need this core */
			nanosleep(&nap, NULL);
			continue;
		}
		n = rkv_srv_metrics_fds(metrics, fds,
					sizeof(fds) / sizeof(fds[0]));
		rc = rkv_srv_wait(srv, fds, n, WAIT_MS * 1000u);
		if (rc < 0) {
			/* cannot block here (or no longer): nap as before */
			if (rc != -EOPNOTSUPP)
				rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
					"cannot wait for the control plane "
					"(%s): napping %u us instead",
					strerror(-rc), NAP_US);
			can_block = 0;
		}
		last_ms = 0; /* what woke us may be the metrics' */
	}
	return 0;
}

static void warn_weak(const char *opt, size_t len)
{
	if (len && len < RKV_SRV_SECRET_WEAK)
		rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
			"%s: only %zu bytes; a captured challenge and response "
			"allow guessing a short secret offline (use e.g. 32 "
			"random bytes)",
			opt, len);
}

int main(int argc, char **argv)
{
	struct rkv_srv_config cfg;
	struct rkv_srv *srv;
	struct rkv_srv_reg *reg = NULL;
	struct rkv_srv_metrics *metrics = NULL;
	enum rkv_log_level env_level;
	char err[256];
	int rc;

	rkv_srv_config_init(&cfg);
	/* RKV_LOG_LEVEL sets the default; --log-level overrides it */
	if (rkv_log_level_from_env()) {
		fprintf(stderr, "rkv-server: RKV_LOG_LEVEL: '%s' is not one of "
				"debug, info, warn, error\n",
			getenv("RKV_LOG_LEVEL"));
		return 2;
	}
	if (getenv("RKV_LOG_LEVEL")) {
		env_level = rkv_log_get_level();
		if (env_level != RKV_LOG_OFF)
			cfg.log_level = env_level;
	}
	rc = rkv_srv_config_parse(&cfg, argc, argv, stdout, err, sizeof(err));
	if (rc == 1)
		return 0;
	if (rc) {
		fprintf(stderr, "rkv-server: %s\n", err);
		return 2;
	}
	if ((cfg.secret_file[0] || cfg.ro_secret_file[0]) &&
	    rkv_srv_secret_load(&cfg, err, sizeof(err))) {
		fprintf(stderr, "rkv-server: %s\n", err);
		return 2;
	}
	rkv_log_set_level((enum rkv_log_level)cfg.log_level);
	if (cfg.check_fabric) {
		rkv_srv_wipe_secrets(&cfg);
		return rkv_srv_check_fabric(&cfg, stdout);
	}
	if (cfg.data_gpu >= 0) {
		struct rkv_srv_datamem *dm = NULL;

		if (rkv_srv_datamem_open(cfg.data_gpu, err, sizeof(err), &dm)) {
			fprintf(stderr, "rkv-server: --data-memory %s: %s\n",
				cfg.data_memory, err);
			rkv_srv_wipe_secrets(&cfg);
			return 1;
		}
		rkv_srv_datamem_close(&dm);
	}

	rc = setup_signals();
	if (rc) {
		fprintf(stderr, "rkv-server: cannot handle SIGINT and SIGTERM: "
				"%s\n", strerror(-rc));
		rkv_srv_wipe_secrets(&cfg);
		return 1;
	}
	err[0] = '\0';
	rc = rkv_srv_create_why(&cfg, &srv, err, sizeof(err));
	rkv_srv_wipe_secrets(&cfg); /* srv has its copy */
	if (rc) {
		fprintf(stderr, "rkv-server: cannot start on %s: %s\n",
			cfg.listen, err[0] ? err : strerror(-rc));
		return 1;
	}
	if (cfg.cluster[0]) {
		err[0] = '\0';
		rc = rkv_srv_reg_start(cfg.cluster, rkv_srv_name(srv),
				       rkv_srv_addr(srv),
				       (unsigned)cfg.etcd_wait_s, &reg, err,
				       sizeof(err));
		if (rc) {
			fprintf(stderr, "rkv-server: --cluster %s: %s\n",
				cfg.cluster, err[0] ? err : strerror(-rc));
			rkv_srv_destroy(srv);
			return 1;
		}
		rc = rkv_srv_reg_fence(reg, srv);
		if (rc)
			rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
				"cluster %s: cannot read its map (%s): clients "
				"of an older map may find this server empty",
				cfg.cluster, strerror(-rc));
	}
	if (cfg.metrics[0]) {
		err[0] = '\0';
		rc = rkv_srv_metrics_start(cfg.metrics, &metrics, err,
					   sizeof(err));
		if (rc) {
			fprintf(stderr, "rkv-server: --metrics %s: %s\n",
				cfg.metrics, err[0] ? err : strerror(-rc));
			rkv_srv_reg_stop(reg);
			rkv_srv_destroy(srv);
			return 1;
		}
	}
	/* the configuration and the start lines only once the server runs:
	 * a start that fails prints the one line above and nothing else */
	rkv_srv_config_print(&cfg, stderr);
	warn_weak("--secret-file", cfg.secret_len);
	warn_weak("--read-only-secret-file", cfg.ro_secret_len);
	rkv_srv_log_start(srv);
	printf("rkv-server: listening on %s\n", rkv_srv_addr(srv));
	rkv_log(RKV_LOG_INFO, RKV_SRV_COMP, "serving as '%s'", rkv_srv_name(srv));
	if (metrics)
		rkv_log(RKV_LOG_INFO, RKV_SRV_COMP, "metrics at %s",
			rkv_srv_metrics_url(metrics));
	fflush(stdout);

	rc = run(srv, metrics, cfg.idle_spin_us);
	if (rc)
		rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP, "control loop failed: %s",
			strerror(-rc));
	rkv_srv_reg_stop(reg); /* deregistered before it stops serving */
	rkv_srv_log_summary(srv);
	rkv_srv_metrics_stop(metrics);
	rkv_srv_destroy(srv);
	return rc ? 1 : 0;
}
