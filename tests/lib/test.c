/* SPDX-License-Identifier: MIT */
/*
 * test.c - TAP runner behind test.h.  Each test runs in the calling process;
 * the watchdog covers the whole binary.  Output is line-buffered so a crash
 * leaves the TAP stream readable up to the failing test.
 */
#include "test.h"

#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

int g_test_failures;
int g_test_skipped;
char g_test_skip_why[256];

static int g_num, g_pass, g_fail, g_skip;
static const char *g_filter;

void rkv_test_init(int argc, char **argv, unsigned watchdog_s)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
			g_filter = argv[++i];
	}
	if (watchdog_s)
		alarm(watchdog_s);
}

const char *rkv_test_filter(void)
{
	return g_filter;
}

void rkv_test_skip(const char *fmt, ...)
{
	va_list ap;

	g_test_skipped = 1;
	va_start(ap, fmt);
	vsnprintf(g_test_skip_why, sizeof(g_test_skip_why), fmt, ap);
	va_end(ap);
}

void rkv_test_run(const char *name, void (*fn)(void))
{
	if (g_filter && !strstr(name, g_filter))
		return;
	g_test_failures = 0;
	g_test_skipped = 0;
	g_test_skip_why[0] = '\0';
	g_num++;
	fn();
	if (g_test_failures) {
		g_fail++;
		printf("not ok %d - %s\n", g_num, name);
	} else if (g_test_skipped) {
		g_skip++;
		printf("ok %d - %s # SKIP %s\n", g_num, name, g_test_skip_why);
	} else {
		g_pass++;
		printf("ok %d - %s\n", g_num, name);
	}
}

int rkv_test_done(void)
{
	printf("1..%d\n", g_num);
	printf("# %d passed, %d failed, %d skipped\n", g_pass, g_fail, g_skip);
	if (g_fail)
		return 1;
	if (g_num && g_skip == g_num)
		return 77;
	return 0;
}
