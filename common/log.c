/* SPDX-License-Identifier: MIT */
/*
 * log.c - the sink behind rkv_log.  Formatting happens only for messages
 * that pass the threshold; errno is saved and restored around the sink so a
 * log call never changes what the caller is about to return.
 */
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int g_rkv_log_level = RKV_LOG_WARN;
static rkv_log_fn g_sink;
static void *g_sink_arg;

static const char *const level_names[] = {
	[RKV_LOG_DEBUG] = "debug", [RKV_LOG_INFO] = "info",
	[RKV_LOG_WARN] = "warn",   [RKV_LOG_ERROR] = "error",
	[RKV_LOG_OFF] = "off",
};

const char *rkv_log_level_str(enum rkv_log_level level)
{
	if ((unsigned)level > RKV_LOG_OFF)
		return "?";
	return level_names[level];
}

int rkv_log_level_parse(const char *s, enum rkv_log_level *out)
{
	for (int i = 0; i <= RKV_LOG_OFF; i++) {
		if (s && strcmp(s, level_names[i]) == 0) {
			*out = (enum rkv_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

void rkv_log_set_level(enum rkv_log_level level)
{
	g_rkv_log_level = (int)level;
}

enum rkv_log_level rkv_log_get_level(void)
{
	return (enum rkv_log_level)g_rkv_log_level;
}

int rkv_log_level_from_env(void)
{
	const char *s = getenv("RKV_LOG_LEVEL");
	enum rkv_log_level l;

	if (!s || !*s)
		return 0;
	if (rkv_log_level_parse(s, &l))
		return -EINVAL;
	rkv_log_set_level(l);
	return 0;
}

void rkv_log_set_sink(rkv_log_fn fn, void *arg)
{
	g_sink = fn;
	g_sink_arg = arg;
}

size_t rkv_log_fmt_time(const struct timespec *ts, char *buf, size_t len)
{
	time_t sec = ts->tv_sec;
	struct tm tm;
	size_t n;
	int k;

	if (!len)
		return 0;
	buf[0] = '\0';
	if (!gmtime_r(&sec, &tm))
		return 0;
	n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!n)
		return 0;
	k = snprintf(buf + n, len - n, ".%06ldZ", ts->tv_nsec / 1000);
	if (k < 0 || (size_t)k >= len - n) {
		buf[0] = '\0';
		return 0;
	}
	return n + (size_t)k;
}

void rkv_log_vemit(enum rkv_log_level level, const char *comp,
		   const char *func, int line, const char *fmt, va_list ap)
{
	int saved = errno;
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (g_sink) {
		g_sink(level, comp, func, line, msg, g_sink_arg);
	} else {
		struct timespec ts;
		char when[40];

		clock_gettime(CLOCK_REALTIME, &ts);
		rkv_log_fmt_time(&ts, when, sizeof(when));
		fprintf(stderr, "%s %s %s: %s (%s:%d)\n", when,
			rkv_log_level_str(level), comp, msg, func, line);
	}
	errno = saved;
}

void rkv_log_emit(enum rkv_log_level level, const char *comp,
		  const char *func, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rkv_log_vemit(level, comp, func, line, fmt, ap);
	va_end(ap);
}

void rkv_msgf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!buf || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}
