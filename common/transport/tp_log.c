/* SPDX-License-Identifier: MIT */
/*
 * tp_log.c - the per-context log sink (rkv_tp_set_log).
 *
 * Each context carries a struct rkv_tp_sink; the rkv_tp_log() macro of
 * transport_internal.h checks the level against it before anything is
 * formatted, and rkv_tp_sink_emit() hands the message to the context's
 * callback or, when none is set, to the global rkv_log path (its sink or
 * stderr), byte for byte what rkv_log itself would have written.  errno
 * is the same after a log call as before it.
 */
#include "transport_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

struct rkv_tp_sink rkv_tp_sink_of(const struct rkv_tp_opts *opts)
{
	struct rkv_tp_sink s = { .fn = opts->log_fn,
				 .arg = opts->log_arg,
				 .min = opts->log_min };

	return s;
}

void rkv_tp_set_log(struct rkv_tp *tp, rkv_log_fn fn, void *arg,
		    enum rkv_log_level min)
{
	if (!tp)
		return;
	tp->opts.log_fn = fn;
	tp->opts.log_arg = arg;
	tp->opts.log_min = min;
	tp->log = rkv_tp_sink_of(&tp->opts);
}

void rkv_tp_sink_emit(const struct rkv_tp_sink *s, enum rkv_log_level level,
		      const char *comp, const char *func, int line,
		      const char *fmt, ...)
{
	rkv_log_fn fn = s->fn;
	va_list ap;

	va_start(ap, fmt);
	if (!fn) {
		rkv_log_vemit(level, comp, func, line, fmt, ap);
	} else {
		int saved = errno;
		char msg[1024];

		vsnprintf(msg, sizeof(msg), fmt, ap);
		fn(level, comp, func, line, msg, s->arg);
		errno = saved;
	}
	va_end(ap);
}
