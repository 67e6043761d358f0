/* SPDX-License-Identifier: MIT */
/*
 * log.h - one logging macro for the whole tree.
 *
 * rkv_log(level, comp, fmt, ...) checks the level before formatting, adds
 * __func__ and __LINE__, and keeps errno intact.  Messages go to a sink: by
 * default stderr for levels at or above the threshold.  Libraries (librkv)
 * set the threshold to RKV_LOG_OFF unless the user asks otherwise; tools set
 * it from --log-level or the RKV_LOG_LEVEL environment variable.
 * Debug messages compile away unless DEBUG is defined.
 *
 * The default sink writes one line per message to stderr:
 *   2026-12-02T03:07:19.123456Z warn tcp: message (func:line)
 * with an ISO 8601 UTC timestamp to the microsecond.
 */
#ifndef RKV_COMMON_LOG_H
#define RKV_COMMON_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rkv_log_level {
	RKV_LOG_DEBUG = 0,
	RKV_LOG_INFO,
	RKV_LOG_WARN,
	RKV_LOG_ERROR,
	RKV_LOG_OFF,
};

typedef void (*rkv_log_fn)(enum rkv_log_level level, const char *comp,
			   const char *func, int line, const char *msg,
			   void *arg);

const char *rkv_log_level_str(enum rkv_log_level level);
/* Parse "debug", "info", "warn", "error", "off".  Returns 0 or -EINVAL. */
int rkv_log_level_parse(const char *s, enum rkv_log_level *out);
/* Threshold; messages below it are dropped before formatting. */
void rkv_log_set_level(enum rkv_log_level level);
enum rkv_log_level rkv_log_get_level(void);
/* Read RKV_LOG_LEVEL from the environment if set.  Returns 0 or -EINVAL. */
int rkv_log_level_from_env(void);
/* Replace the sink (NULL restores stderr). */
void rkv_log_set_sink(rkv_log_fn fn, void *arg);

extern int g_rkv_log_level;

void rkv_log_emit(enum rkv_log_level level, const char *comp,
		  const char *func, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* rkv_log_emit with a va_list: the sink (or stderr) gets the message
 * whatever the threshold; callers check it first. */
void rkv_log_vemit(enum rkv_log_level level, const char *comp,
		   const char *func, int line, const char *fmt, va_list ap)
	__attribute__((format(printf, 5, 0)));
/*
 * The default sink's timestamp of ts (CLOCK_REALTIME) as ISO 8601 UTC with
 * microseconds, "2026-12-02T03:07:19.123456Z" (27 characters), into buf.
 * Returns the length written, or 0 when len is too small (buf is then "").
 */
size_t rkv_log_fmt_time(const struct timespec *ts, char *buf, size_t len);

#define rkv_log(level, comp, ...)                                              \
	do {                                                                   \
		if ((int)(level) >= g_rkv_log_level)                           \
			rkv_log_emit((level), (comp), __func__, __LINE__,      \
				     __VA_ARGS__);                             \
	} while (0)

/*
 * Format a one-line message into a caller's buffer (the err/why
 * out-parameters of functions that say why they failed); nothing when buf
 * is NULL or len is 0.
 */
void rkv_msgf(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#ifdef DEBUG
#define rkv_dlog(comp, ...) rkv_log(RKV_LOG_DEBUG, comp, __VA_ARGS__)
#else
#define rkv_dlog(comp, ...)                                                    \
	do {                                                                   \
	} while (0)
#endif

#ifdef __cplusplus
}
#endif
#endif
