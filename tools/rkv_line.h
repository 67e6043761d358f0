/* SPDX-License-Identifier: MIT */
/*
 * rkv_line.h - the prompt of rkv with no command at a terminal: line
 * editing and history through libedit when the build found its header
 * (tools/rkv_line.c), else nothing (rkv_line_open says so).
 */
#ifndef RKV_TOOLS_RKV_LINE_H
#define RKV_TOOLS_RKV_LINE_H

/* Whether this build has line editing (libedit). */
int rkv_line_available(void);
/* Start reading lines at prompt (copied), history from $HOME/.rkv_history.
 * Returns 0, or -ENOTSUP when built without libedit. */
int rkv_line_open(const char *prompt);
/* The next line, malloc'ed, no newline; NULL at end of input (Ctrl-D). */
char *rkv_line_read(void);
/* Save the history, release what rkv_line_open took. */
void rkv_line_close(void);

#endif
