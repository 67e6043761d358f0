/* SPDX-License-Identifier: MIT */
/*
 * rkv_line.c - the prompt's line editing and history, through libedit's
 * readline interface (Debian's libedit-dev).  Built without it
 * (RKV_WITH_LIBEDIT unset: the Makefile did not find the header), every
 * call says there is no prompt, and the rest of rkv works as before.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rkv_line.h"

#ifdef RKV_WITH_LIBEDIT
#include <editline/readline.h>

/* most lines the history file keeps */
#define HISTORY_MAX 1000

static char *g_prompt;
static char g_history[PATH_MAX];

int rkv_line_available(void)
{
	return 1;
}

int rkv_line_open(const char *prompt)
{
	const char *home = getenv("HOME");

	g_prompt = strdup(prompt);
	if (!g_prompt)
		return -ENOMEM;
	using_history();
	stifle_history(HISTORY_MAX);
	/* no HOME (a service, env -i): history for this session only */
	if (home && *home &&
	    (size_t)snprintf(g_history, sizeof(g_history), "%s/.rkv_history",
			     home) < sizeof(g_history))
		read_history(g_history);
	else
		g_history[0] = '\0';
	return 0;
}

char *rkv_line_read(void)
{
	char *line = readline(g_prompt);

	if (line && line[strspn(line, " \t")])
		add_history(line);
	return line;
}

void rkv_line_close(void)
{
	/* lines hold keys and values: the file is the user's alone */
	if (g_history[0] && !write_history(g_history))
		chmod(g_history, 0600);
	free(g_prompt);
	g_prompt = NULL;
}

#else /* !RKV_WITH_LIBEDIT */

int rkv_line_available(void)
{
	return 0;
}

int rkv_line_open(const char *prompt)
{
	(void)prompt;
	return -ENOTSUP;
}

char *rkv_line_read(void)
{
	return NULL;
}

void rkv_line_close(void)
{
}

#endif
