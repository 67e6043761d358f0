/* SPDX-License-Identifier: MIT */
/*
 * test_common.c - unit tests for common/: address parsing, names of enums,
 * option checks, the histogram, the log level parser and the default log
 * sink's line format.  Pure functions; no provider needs to work for these.
 */
#include <errno.h>
#include <regex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hist.h"
#include "log.h"
#include "test.h"
#include "transport.h"

static void t_addr_parse_ok(void)
{
	struct rkv_tp_addr a;

	EXPECT_EQ(rkv_tp_addr_parse("tcp://127.0.0.1:7000", &a), 0);
	EXPECT_EQ(a.provider, RKV_TP_TCP);
	EXPECT_STREQ(a.host, "127.0.0.1");
	EXPECT_EQ(a.port, 7000);

	EXPECT_EQ(rkv_tp_addr_parse("verbs://10.77.0.1:0", &a), 0);
	EXPECT_EQ(a.provider, RKV_TP_VERBS);
	EXPECT_EQ(a.port, 0);

	EXPECT_EQ(rkv_tp_addr_parse("auto://localhost:65535", &a), 0);
	EXPECT_EQ(a.provider, RKV_TP_AUTO);
	EXPECT_STREQ(a.host, "localhost");
	EXPECT_EQ(a.port, 65535);

	EXPECT_EQ(rkv_tp_addr_parse("tcp://[::1]:80", &a), 0);
	EXPECT_STREQ(a.host, "::1");
	EXPECT_EQ(a.port, 80);

	EXPECT_EQ(rkv_tp_addr_parse("shm:///rkv-0.a_b", &a), 0);
	EXPECT_EQ(a.provider, RKV_TP_SHM);
	EXPECT_STREQ(a.name, "rkv-0.a_b");
}

static void t_addr_parse_bad(void)
{
	static const char *const bad[] = {
		"", "tcp://", "tcp://host", "tcp://:80", "tcp://h:",
		"tcp://h:99999", "tcp://h:-1", "tcp://h:80x", "tcp://::1:80",
		"tcp://[::1]80", "foo://x:1", "tcp:/x:1", "shm://noslash",
		"shm:///", "shm:///a/b", "shm:///sp ace", "127.0.0.1:80",
		"tcp://ho st:80",
		"shm:///aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	};
	struct rkv_tp_addr a;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = rkv_tp_addr_parse(bad[i], &a);

		if (rc != -EINVAL)
			printf("#   '%s' parsed (rc %d)\n", bad[i], rc);
		EXPECT_EQ(rc, -EINVAL);
	}
	EXPECT_EQ(rkv_tp_addr_parse(NULL, &a), -EINVAL);
}

static void t_names(void)
{
	enum rkv_tp_provider p;

	EXPECT_STREQ(rkv_tp_provider_str(RKV_TP_SHM), "shm");
	EXPECT_EQ(rkv_tp_provider_parse("verbs", &p), 0);
	EXPECT_EQ(p, RKV_TP_VERBS);
	EXPECT_EQ(rkv_tp_provider_parse("ib", &p), -EINVAL);
	EXPECT_EQ(rkv_tp_provider_parse(NULL, &p), -EINVAL);
	EXPECT_STREQ(rkv_wc_status_str(RKV_WC_REM_ACCESS_ERR),
		     "remote access error");
	EXPECT_STREQ(rkv_wc_status_str(RKV_WC_WR_FLUSH_ERR),
		     "work request flushed");
	EXPECT_STREQ(rkv_wr_opcode_str(RKV_WR_FETCH_ADD), "FETCH_ADD");
	EXPECT_STREQ(rkv_ep_state_str(RKV_EP_ERROR), "error");
}

static void t_opts(void)
{
	struct rkv_tp_opts o;
	struct rkv_tp *tp = (struct rkv_tp *)1;

	rkv_tp_opts_init(&o);
	EXPECT_EQ(o.opts_size, sizeof(o));
	EXPECT_EQ(o.provider, RKV_TP_AUTO);
	EXPECT_EQ(o.gid_index, -1);
	o.max_send_wr = 0;
	EXPECT_EQ(rkv_tp_create(&o, &tp), -EINVAL);
	EXPECT_TRUE(tp == NULL);
	rkv_tp_opts_init(&o);
	o.opts_size = sizeof(o) + 8;
	EXPECT_EQ(rkv_tp_create(&o, &tp), -EINVAL);
	rkv_tp_opts_init(&o);
	o.provider = (enum rkv_tp_provider)42;
	EXPECT_EQ(rkv_tp_create(&o, &tp), -EINVAL);
	EXPECT_EQ(rkv_tp_create(NULL, NULL), -EINVAL);
}

static void t_hist(void)
{
	struct rkv_hist h, h2;

	rkv_hist_init(&h);
	EXPECT_EQ(rkv_hist_quantile(&h, 0.5), 0);
	for (uint64_t v = 1; v <= 10000; v++)
		rkv_hist_add(&h, v * 100); /* 100 ns .. 1 ms */
	EXPECT_EQ(h.count, 10000);
	EXPECT_EQ(h.min, 100);
	EXPECT_EQ(h.max, 1000000);
	uint64_t p50 = rkv_hist_quantile(&h, 0.5);
	uint64_t p99 = rkv_hist_quantile(&h, 0.99);

	/* within the 1/32 bucket resolution of the true values */
	EXPECT_TRUE(p50 > 500000 * 31 / 32 && p50 < 500000 * 33 / 32);
	EXPECT_TRUE(p99 > 990000 * 31 / 32 && p99 < 990000 * 33 / 32);
	EXPECT_EQ(rkv_hist_quantile(&h, 1.0), 1000000);
	EXPECT_EQ(rkv_hist_quantile(&h, 0.0), 100);
	EXPECT_TRUE(rkv_hist_mean(&h) > 500049 && rkv_hist_mean(&h) < 500051);

	rkv_hist_init(&h2);
	rkv_hist_add(&h2, 3);
	rkv_hist_add(&h2, UINT64_MAX / 2);
	rkv_hist_merge(&h2, &h);
	EXPECT_EQ(h2.count, 10002);
	EXPECT_EQ(h2.min, 3);
	EXPECT_EQ(rkv_hist_quantile(&h2, 0.0), 3);
	/* small exact values get exact buckets */
	rkv_hist_init(&h);
	for (int i = 0; i < 10; i++)
		rkv_hist_add(&h, 7);
	EXPECT_EQ(rkv_hist_quantile(&h, 0.5), 7);
}

static void t_log_level(void)
{
	enum rkv_log_level l;

	EXPECT_EQ(rkv_log_level_parse("debug", &l), 0);
	EXPECT_EQ(l, RKV_LOG_DEBUG);
	EXPECT_EQ(rkv_log_level_parse("off", &l), 0);
	EXPECT_EQ(l, RKV_LOG_OFF);
	EXPECT_EQ(rkv_log_level_parse("verbose", &l), -EINVAL);
	EXPECT_STREQ(rkv_log_level_str(RKV_LOG_WARN), "warn");
}

/* The default sink: "2026-12-02T03:07:19.123456Z warn tcp: msg (f:l)". */
static void t_log_format(void)
{
	struct timespec ts = { .tv_sec = 1796180839, .tv_nsec = 123456789 };
	char buf[64], path[] = "/tmp/rkv-logfmt-XXXXXX", line[256] = "";
	regex_t re;
	int fd, saved;
	ssize_t n;

	EXPECT_EQ(rkv_log_fmt_time(&ts, buf, sizeof(buf)), 27);
	EXPECT_STREQ(buf, "2026-12-02T03:07:19.123456Z");
	ts.tv_nsec = 999;
	rkv_log_fmt_time(&ts, buf, sizeof(buf));
	EXPECT_STREQ(buf, "2026-12-02T03:07:19.000000Z");
	EXPECT_EQ(rkv_log_fmt_time(&ts, buf, 27), 0); /* no room for NUL */
	EXPECT_STREQ(buf, "");

	/* the whole line, as the default sink writes it to stderr */
	fd = mkstemp(path);
	ASSERT_TRUE(fd >= 0);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	rkv_log_emit(RKV_LOG_WARN, "tcp", "fn", 42, "hello %d", 7);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	n = pread(fd, line, sizeof(line) - 1, 0);
	close(fd);
	unlink(path);
	ASSERT_TRUE(n > 0);
	line[n] = '\0';
	ASSERT_EQ(regcomp(&re,
			  "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:"
			  "[0-9]{2}\\.[0-9]{6}Z warn tcp: hello 7 \\(fn:42\\)\n$",
			  REG_EXTENDED | REG_NOSUB),
		  0);
	if (regexec(&re, line, 0, NULL, 0))
		printf("#   line: %s", line);
	EXPECT_EQ(regexec(&re, line, 0, NULL, 0), 0);
	regfree(&re);
}

int main(int argc, char **argv)
{
	rkv_test_init(argc, argv, 30);
	rkv_log_set_level(RKV_LOG_OFF);
	RKV_TEST(t_addr_parse_ok);
	RKV_TEST(t_addr_parse_bad);
	RKV_TEST(t_names);
	RKV_TEST(t_opts);
	RKV_TEST(t_hist);
	RKV_TEST(t_log_level);
	RKV_TEST(t_log_format);
	return rkv_test_done();
}
