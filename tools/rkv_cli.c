/* SPDX-License-Identifier: MIT */
/*
 * rkv_cli.c - rkv, the command-line client.
 *
 *   rkv [--servers A,B | --cluster FILE] [--raw | --no-raw | --json]
 *       get KEY | put KEY VALUE | del KEY | exists KEY... | mget KEY... |
 *       mput KEY VALUE... | incr KEY [BY] | decr KEY [BY] | stat | ping
 *   rkv [OPTIONS] --pipe     (one command a line on stdin)
 *   rkv [OPTIONS]            (at a terminal: a prompt, tools/rkv_line.c)
 *   rkv --version
 *
 * A KEY or VALUE argument is its own bytes, "-" all of stdin (one such
 * argument per command, read once connected), "@FILE" the file's bytes
 * (read before connecting), "@@..." the argument less its first "@".
 * incr and decr keep 8-byte little-endian signed counters with rkv_rmw,
 * so concurrent clients never lose an update.
 *
 * --secret-file FILE (default $RKV_SECRET_FILE) answers the challenge of
 * servers started with --secret-file; --read-only asks for read-only
 * rkeys (put and del then fail with "Permission denied").
 *
 * Exit status: 0 success, 1 key not found, 2 any other error.  Every error
 * is exactly one line on stderr that names what failed: the option or
 * argument for a bad command line (checked before anything connects, the
 * key and value limits of rkv.h included), the server address for a
 * connection or an operation, with librkv's own word for the cause when
 * its log callback gave one (no command at all: that one line, then the
 * usage as a hint).  No error line shows more than SHOWN_MAX bytes of a
 * key or value.  librkv logs nothing else here; set
 * RKV_LOG_LEVEL=debug|info|warn|error to see its messages as they come.
 *
 * --pipe and the prompt (line mode) answer every command with one line
 * on stdout, an error as "(error) ..." there too, and go on; --pipe
 * batches gets and puts in a row (see "--pipe and the prompt" below).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "msg.h"
#include "rkv.h"
#include "rkv_admin.h"
#include "rkv_line.h"
#include "transport.h"
#include "version.h"

/* bytes of escaped key or value an error line shows (under 64) */
#define SHOWN_MAX 48
/* --pipe: most gets (or puts) in one rkv_mget (rkv_mput); librkv posts
 * 64 ops at most at once */
#define BATCH_MAX 64

/*
 * librkv's log callback: the first message at warn or above that says
 * more than the error code does becomes the detail of the error line;
 * with RKV_LOG_LEVEL set, every message at that level or above is shown
 * too (the user asked for them).
 */
struct cli_log {
	int show_from;     /* RKV_LOG_LEVEL as 0..3; 4: show none */
	int nmsgs;         /* warn-or-above messages since the last reset */
	char msgs[4][256]; /* the first three of them, and the last */
};

static struct cli_log g_log = { .show_from = 4 };

static void on_log(int level, const char *msg, void *arg)
{
	static const char *const names[] = { "debug", "info", "warn", "error" };
	struct cli_log *l = arg;

	if (level >= l->show_from)
		fprintf(stderr, "rkv: librkv %s: %s\n",
			names[level < 0 ? 0 : level > 3 ? 3 : level], msg);
	/* the last message often sums up the others (every server down) */
	if (level >= 2)
		snprintf(l->msgs[l->nmsgs < 4 ? l->nmsgs++ : 3],
			 sizeof(l->msgs[0]), "%s", msg);
}

static void log_reset(void)
{
	g_log.nmsgs = 0;
}

/* The first logged message that does not merely repeat strerror(-rc). */
static const char *log_detail(int rc)
{
	const char *plain = strerror(-rc);

	for (int i = 0; i < g_log.nmsgs; i++)
		if (!strstr(g_log.msgs[i], plain))
			return g_log.msgs[i];
	return NULL;
}

static void log_level_from_env(void)
{
	static const char *const names[] = { "debug", "info", "warn", "error" };
	const char *s = getenv("RKV_LOG_LEVEL");

	for (int i = 0; s && i < 4; i++)
		if (!strcmp(s, names[i]))
			g_log.show_from = i;
}

/* How values and results are printed (--raw, --no-raw, --json). */
enum out_mode {
	OUT_AUTO,  /* get: exact bytes to a pipe or file, printable to a tty */
	OUT_RAW,   /* the exact bytes */
	OUT_PRINT, /* printable: \xNN and \\ escapes, a newline after */
	OUT_JSON,  /* one JSON object per command */
};

static enum out_mode g_mode = OUT_AUTO;

/*
 * --pipe and the prompt (line mode): every command answers one line on
 * stdout, an error as "(error) ..." there too (--json: {"error":"..."}),
 * so answers and errors stay in the order of the commands.
 */
static int g_line;
static unsigned long g_line_errors; /* error lines so far */

static void out_json_chars(const char *p, size_t n);

/* One error line: "rkv: ..." on stderr, or in line mode the answer. */
static void err_line(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void err_line(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	if (!g_line) {
		fputs("rkv: ", stderr);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		return;
	}
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	g_line_errors++;
	if (g_mode == OUT_JSON) {
		fputs("{\"error\":\"", stdout);
		out_json_chars(buf, (size_t)n);
		puts("\"}");
	} else {
		printf("(error) %.*s\n", n, buf);
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rkv [--servers [NAME=]ADDR[,...] | --cluster FILE]\n"
		"           [--timeout MS] [--read-only] [--secret-file FILE]\n"
		"           [--raw | --no-raw | --json] [--client-stats] COMMAND\n"
		"       rkv [OPTIONS] --pipe     commands from stdin, one a line\n"
		"       rkv [OPTIONS]            at a terminal: a prompt\n"
		"       rkv --help | --version\n"
		"commands:\n"
		"  get KEY            print the value (exit 1 if absent)\n"
		"  put KEY VALUE      store VALUE\n"
		"  del KEY            delete (exit 1 if absent)\n"
		"  exists KEY...      print how many of the keys are present\n"
		"  mget KEY...        print each value on a line of its own,\n"
		"                     (nil) if absent (exit 1 if any is)\n"
		"  mput KEY VALUE [KEY VALUE...]\n"
		"                     store each pair\n"
		"  incr KEY [BY]      add BY (default 1) to a counter and print\n"
		"                     it: 8 bytes, little-endian, signed; an\n"
		"                     absent key counts from 0; atomic (rmw)\n"
		"  decr KEY [BY]      subtract BY (default 1) likewise\n"
		"                     (a negative BY after \"--\": incr k -- -5)\n"
		"  scan [PATTERN] [--count N]\n"
		"                     the keys that match PATTERN (a glob:\n"
		"                     * ? [a-z] [^a] \\x; default: all), one a\n"
		"                     line, N at most; read one-sided from\n"
		"                     every server's index (no server CPU,\n"
		"                     writers never wait).  Under concurrent\n"
		"                     writes a key present from start to end\n"
		"                     is listed, once unless it was deleted\n"
		"                     and put again or its partition migrated\n"
		"                     meanwhile; keys put or deleted during\n"
		"                     the scan may or may not be; no order.\n"
		"                     A server that is down: the others' keys,\n"
		"                     then an error naming it (exit 2)\n"
		"  stat               per-server counters\n"
		"  cluster            the map: its epoch, each server's name,\n"
		"                     address, partitions, state and keys\n"
		"                     (exit 2 when a server is down)\n"
		"  ping               PONG when every server answers\n"
		"  admin ...          a cluster in etcd (rkv admin --help)\n"
		"KEY, VALUE: the argument's bytes; \"-\": all of stdin (one\n"
		"  argument per command); \"@FILE\": the bytes of FILE;\n"
		"  \"@@...\": the argument less its first @ (@@x is \"@x\")\n"
		"output:\n"
		"  (default)  printable: bytes outside printable ASCII as \\xNN,\n"
		"             \\ as \\\\, a newline after each value; but get\n"
		"             to a pipe or file writes the exact bytes\n"
		"  --raw      the exact bytes: get adds no newline; mget ends\n"
		"             each value with one, an absent one is empty\n"
		"  --no-raw   printable, even when stdout is not a terminal\n"
		"  --json     one JSON object per command:\n"
		"             get: {\"key\":K,\"value\":V} (V null if absent)\n"
		"             mget: {\"values\":[{\"key\":K,\"value\":V},...]}\n"
		"             put: {\"key\":K,\"ok\":true}  del: {\"key\":K,"
		"\"deleted\":B}\n"
		"             mput: {\"stored\":N}  exists: {\"exists\":N}\n"
		"             incr, decr: {\"key\":K,\"value\":N}\n"
		"             stat: {\"servers\":[{\"server\":S,COUNTER:N,...}]}\n"
		"             scan: {\"keys\":[{\"key\":K},...],\"count\":N}\n"
		"             cluster: {\"epoch\":E,\"partitions\":4096,\"servers\":\n"
		"               [{\"name\":N,\"addr\":A,\"up\":B,\"partitions\":P,\n"
		"               \"keys\":K (up) or \"error\":E (down)},...]}\n"
		"             a key or value that is not UTF-8 comes as\n"
		"             \"key_base64\" or \"value_base64\" instead\n"
		"  exists, incr and decr print a decimal number in every mode\n"
		"--pipe and the prompt: one command a line, words split on\n"
		"  blanks, \"...\" keeps blanks, escapes \\n \\r \\t \\0 \\\\ \\\" \\xHH;\n"
		"  a word is its bytes (no - or @FILE); one answer line each:\n"
		"  get \"VALUE\" (quoted, printable) or (nil), put OK, del 1 or 0,\n"
		"  mget the values and scan the keys on one line ((empty):\n"
		"  none), stat one line, errors\n"
		"  \"(error) ...\" (--json: one object each, {\"error\":...});\n"
		"  --pipe sends gets in a row, and puts, in batches of %u\n"
		"  (rkv_mget, rkv_mput); exit 2 if any line failed, else 0;\n"
		"  help, quit or exit (or end of input, Ctrl-D) at the prompt\n"
		"  %s\n"
		"ADDR: tcp://HOST:PORT, shm:///NAME, verbs://HOST:PORT\n"
		"cluster FILE: one server per line, \"NAME ADDR\" or \"ADDR\", "
		"any order;\n  or etcd://HOST:PORT/CLUSTER (rkv admin)\n"
		"default servers: $RKV_SERVERS, else tcp://127.0.0.1:7000\n"
		"default secret file: $RKV_SECRET_FILE (mode 0600 or "
		"stricter)\n"
		"keys: 1 to %u bytes; values: at most %u bytes\n"
		"--client-stats: at the end, the client's own counters on\n"
		"  stderr (ops and RTTs by kind, mget batches, doorbells)\n"
		"exit status: 0 done, 1 key not found, 2 any other error\n",
		(unsigned)BATCH_MAX,
		rkv_line_available() ? "prompt: line editing and history "
				       "(~/.rkv_history) by libedit"
				     : "no prompt in this build (built without "
				       "libedit)",
		RKV_KEY_MAX, RKV_VALUE_MAX);
}

/* c as printable output shows it, into e (4 bytes); returns the length. */
static size_t escape_byte(unsigned char c, char *e)
{
	static const char hex[] = "0123456789abcdef";

	if (c == '\\') {
		e[0] = e[1] = '\\';
		return 2;
	}
	if (c >= 0x20 && c < 0x7f) {
		e[0] = (char)c;
		return 1;
	}
	e[0] = '\\';
	e[1] = 'x';
	e[2] = hex[c >> 4];
	e[3] = hex[c & 15];
	return 4;
}

/*
 * Bytes of a key or value (or any argument) as an error line shows them:
 * escaped as printable output is, at most SHOWN_MAX bytes of it, then
 * "... (N bytes)" if that was not all (with_len 0: just "...", for a
 * line that gives the length itself).  Four buffers in turn, so one line
 * can show several.
 */
static const char *shown(const char *p, size_t n, int with_len)
{
	static char bufs[4][SHOWN_MAX + 40]; /* and "... (N bytes)" */
	static unsigned next;
	char *buf = bufs[next++ % 4];
	size_t o = 0, i;

	for (i = 0; i < n; i++) {
		char e[4];
		size_t el = escape_byte((unsigned char)p[i], e);

		if (o + el > SHOWN_MAX)
			break;
		memcpy(buf + o, e, el);
		o += el;
	}
	buf[o] = '\0';
	if (i < n)
		snprintf(buf + o, sizeof(bufs[0]) - o,
			 with_len ? "... (%zu bytes)" : "...", n);
	return buf;
}

static const char *shown_str(const char *s)
{
	return shown(s, strlen(s), 1);
}

/*
 * A key or value of the command line: the argument's own bytes, or those
 * of a file (@FILE) or of stdin (-).
 */
struct blob {
	const char *p;
	size_t len;
	size_t size;      /* the whole input's length; 0: unknown (over cap) */
	char *owned;      /* malloc'ed bytes read from a file or stdin */
	const char *file; /* the FILE of @FILE, else NULL */
	int is_key;
	int from_stdin;   /* "-": read once connected */
};

/* A key as the error lines about it show it ("-" while stdin is unread). */
static const char *key_shown(const struct blob *key, int with_len)
{
	return key->from_stdin && !key->p ? "-"
					  : shown(key->p, key->len, with_len);
}

/* the most read from a file or stdin: one byte more than a value may
 * hold, so that a larger input is seen as such */
#define READ_CAP (RKV_VALUE_MAX + 1)

/*
 * All of fd, at most READ_CAP bytes.  NULL with errno set on a read
 * error.
 */
static char *read_all(int fd, size_t *len)
{
	size_t n = 0;
	char *buf = malloc(READ_CAP);

	if (!buf)
		return NULL;
	while (n < READ_CAP) {
		ssize_t r = read(fd, buf + n, READ_CAP - n);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			free(buf);
			return NULL;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*len = n;
	return buf;
}

/* " on stdin", " in 'FILE'" or "": where b came from, for an error line */
static const char *blob_where(const struct blob *b)
{
	static char buf[SHOWN_MAX + 48];

	if (b->from_stdin)
		return " on stdin";
	if (!b->file)
		return "";
	snprintf(buf, sizeof(buf), " in '%s'", shown_str(b->file));
	return buf;
}

/* b read from a file: the bytes of path.  Returns 0, or 2 after a line. */
static int blob_read_file(const char *cmd, struct blob *b, const char *path)
{
	const char *what = b->is_key ? "key" : "value";
	struct stat st;
	int fd, err;

	b->file = path;
	if (!*path) {
		err_line("%s: '@' names no %s file (\"@@\" is a "
				"literal \"@\")\n", cmd, what);
		return 2;
	}
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		err_line("%s: cannot open %s file '%s': %s\n", cmd,
			what, shown_str(path), strerror(errno));
		return 2;
	}
	b->owned = read_all(fd, &b->len);
	err = errno;
	if (b->owned && b->len == READ_CAP && !fstat(fd, &st) &&
	    S_ISREG(st.st_mode))
		b->size = (size_t)st.st_size;
	else if (b->owned)
		b->size = b->len < READ_CAP ? b->len : 0;
	close(fd);
	if (!b->owned) {
		err_line("%s: cannot read %s file '%s': %s\n", cmd,
			what, shown_str(path), strerror(err));
		return 2;
	}
	b->p = b->owned;
	return 0;
}

/*
 * b from the argument arg: its bytes, "@FILE" (read now), "@@..." (arg
 * less its first @), or "-" (stdin, read later by blob_read_stdin).
 * Returns 0, or 2 after one line.
 */
static int blob_from_arg(const char *cmd, struct blob *b, const char *arg,
			 int is_key)
{
	*b = (struct blob){ .is_key = is_key };
	if (!strcmp(arg, "-")) {
		b->from_stdin = 1;
		return 0;
	}
	if (arg[0] == '@' && arg[1] != '@')
		return blob_read_file(cmd, b, arg + 1);
	b->p = arg[0] == '@' ? arg + 1 : arg;
	b->len = b->size = strlen(b->p);
	return 0;
}

/* The "-" blob: all of stdin.  Returns 0, or 2 after one line naming
 * key (the key b is the value of; NULL when b is a key). */
static int blob_read_stdin(const char *cmd, struct blob *b,
			   const struct blob *key)
{
	b->owned = read_all(0, &b->len);
	if (!b->owned) {
		err_line("%s%s%s: cannot read stdin: %s\n", cmd,
			key ? " " : "", key ? key_shown(key, 1) : "",
			strerror(errno));
		return 2;
	}
	b->p = b->owned;
	b->size = b->len < READ_CAP ? b->len : 0;
	return 0;
}

/*
 * Check b against the limits of rkv.h: a key of 1 to RKV_KEY_MAX bytes,
 * a value of at most RKV_VALUE_MAX (key: the key of that value).
 * Returns 0, or 2 after one line that names the limit.
 */
static int check_blob(const char *cmd, const struct blob *b,
		      const struct blob *key)
{
	const char *where = blob_where(b);

	if (b->is_key && !b->len) {
		err_line("%s: the key%s is empty\n", cmd, where);
		return 2;
	}
	if (b->is_key && b->len > RKV_KEY_MAX) {
		if (b->size)
			err_line("%s %s: the key%s is %zu bytes, "
					"longer than %u (RKV_KEY_MAX)\n", cmd,
				shown(b->p, b->len, 0), where, b->size,
				RKV_KEY_MAX);
		else
			err_line("%s %s: the key%s is longer than "
					"%u bytes (RKV_KEY_MAX)\n", cmd,
				shown(b->p, b->len, 0), where, RKV_KEY_MAX);
		return 2;
	}
	if (b->is_key || b->len <= RKV_VALUE_MAX)
		return 0;
	if (b->size)
		err_line("%s %s: the value of %zu bytes%s is over "
				"the limit of %u bytes (RKV_VALUE_MAX)\n", cmd,
			key_shown(key, 1), b->size, where,
			RKV_VALUE_MAX);
	else
		err_line("%s %s: the value%s is larger than %u "
				"bytes (RKV_VALUE_MAX)\n", cmd,
			key_shown(key, 1), where, RKV_VALUE_MAX);
	return 2;
}
/*
 * Check --servers (or $RKV_SERVERS) before connecting: each address must
 * parse and all must use one provider (a client has one transport).
 * Returns 0, or 2 after one line naming the address.
 */
static int check_servers(const char *servers, const char *from)
{
	struct rkv_tp_addr a, first = { .port = 0 };
	char *copy = strdup(servers), *save = NULL;
	int rc = 0, n = 0;

	if (!copy) {
		err_line("out of memory\n");
		return 2;
	}
	for (char *s = strtok_r(copy, ",", &save); s;
	     s = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(s, '='), *sch = strstr(s, "://");

		while (*s == ' ' || *s == '\t')
			s++;
		if (eq && sch && eq < sch)
			s = eq + 1; /* NAME=ADDR: librkv checks the name */
		if (rkv_tp_addr_parse(s, &a)) {
			err_line(
				"%s: '%s' is not an address (tcp://HOST:PORT, "
				"shm:///NAME or verbs://HOST:PORT)\n",
				from, shown_str(s));
			rc = 2;
			break;
		}
		if (n++ == 0) {
			first = a;
		} else if (a.provider != first.provider) {
			err_line(
				"%s: '%s' is not a %s address like the first "
				"(one client uses one transport)\n",
				from, shown_str(s), rkv_tp_provider_str(first.provider));
			rc = 2;
			break;
		}
	}
	if (!rc && !n) {
		err_line("%s: no address\n", from);
		rc = 2;
	}
	free(copy);
	return rc;
}

/* One line for an option getopt_long refused ('?'): arg is the word it
 * came in, opt the short option (0 for a long one). */
static void bad_option(const char *arg, int opt,
		       const struct option *longopts)
{
	const char *eq = strchr(arg, '=');

	if (!strncmp(arg, "--", 2) && eq) {
		for (const struct option *o = longopts; o->name; o++) {
			if (o->has_arg == no_argument &&
			    strlen(o->name) == (size_t)(eq - arg - 2) &&
			    !strncmp(o->name, arg + 2, (size_t)(eq - arg - 2))) {
				err_line("option '--%s' takes no "
						"value (try --help)\n", o->name);
				return;
			}
		}
	}
	if (arg[0] == '-' && arg[1] >= '0' && arg[1] <= '9' &&
	    strspn(arg + 1, "0123456789") == strlen(arg + 1))
		/* options may follow the command: "--" ends them */
		err_line("'%s' is taken for an option: put \"--\" "
				"before a negative number\n", shown_str(arg));
	else if (opt && strncmp(arg, "--", 2))
		err_line("unknown option '-%c' (try --help)\n", opt);
	else
		err_line("unknown option '%s' (try --help)\n",
			shown_str(arg));
}

/* Why a failed connect may have failed, beyond the error code. */
static const char *connect_hint(int rc, const struct rkv_client_opts *o)
{
	static char buf[64];

	switch (rc) {
	case -EACCES:
		return "wrong or no secret: --secret-file or $RKV_SECRET_FILE";
	case -EPERM:
		return o->secret_file ? "the secret file is open to group or "
					"others: chmod 600 it"
				      : NULL;
	case -ECONNREFUSED:
		return "is rkv-server running there?";
	case -ETIMEDOUT:
		snprintf(buf, sizeof(buf), "no answer within %u ms: --timeout",
			 o->connect_timeout_ms);
		return buf;
	case -EUSERS:
		return "the server has its --max-clients clients";
	case -EPROTO:
		return "not an rkv-server, or another protocol version";
	default:
		return NULL;
	}
}

static int fail_connect(const char *where, int rc,
			const struct rkv_client_opts *o)
{
	const char *detail = log_detail(rc);
	const char *hint = detail ? NULL : connect_hint(rc, o);

	if (!strncmp(where, "etcd://", 7) && !detail &&
	    (rc == -ECONNREFUSED || rc == -ETIMEDOUT || rc == -EHOSTUNREACH))
		hint = "is etcd running there?";
	err_line("cannot connect to %s: %s%s%s%s%s%s\n", where,
		strerror(-rc), detail || hint ? " (" : "", detail ? detail : "",
		detail && hint ? "; " : "", hint ? hint : "",
		detail || hint ? ")" : "");
	return 2;
}

/* What a command works on, for the functions that run it. */
struct ctx {
	struct rkv_client *c;
	const struct rkv_client_opts *o;
	const char *cmd;
	struct blob *args; /* its keys and values, in order */
	size_t nargs;
	int64_t by;        /* incr, decr */
	char label[400];   /* the server of the last key_addr */
};

/* "NAME (ADDR)", or ADDR when the name is the address's own. */
static const char *server_label(struct rkv_client *c, unsigned i, char *buf,
				size_t cap)
{
	const char *a = rkv_client_server_addr(c, i);
	const char *n = rkv_client_server_name(c, i);
	const char *rest = strstr(a, "://");

	rest = rest ? rest + 3 : a;
	while (*rest == '/')
		rest++;
	if (!strcmp(n, rest))
		return a;
	snprintf(buf, cap, "%s (%s)", n, a);
	return buf;
}

/* The server an error on key names: the one it routes to, or with
 * replicas, the first of its servers that is down (a write fails with a
 * backup's error). */
static const char *key_addr(struct ctx *x, const struct blob *key)
{
	unsigned rep[4], n = rkv_client_replicas(x->c, key->p, key->len, rep,
						 4), si = rep[0];

	for (unsigned i = 0; i < n && i < 4; i++)
		if (rkv_client_server_status(x->c, rep[i])) {
			si = rep[i];
			break;
		}
	return server_label(x->c, si, x->label, sizeof(x->label));
}

/*
 * One line for a failed operation on key (stat: key NULL) at server addr.
 * Returns the exit status: 1 for -ENOENT, else 2.
 */
static int fail_op(const struct ctx *x, const struct blob *key,
		   const char *addr, int rc)
{
	const char *detail = log_detail(rc), *hint = NULL;
	char what[SHOWN_MAX + 48];
	unsigned rep[1];

	snprintf(what, sizeof(what), "%s%s%s", x->cmd, key ? " " : "",
		 key ? shown(key->p, key->len, 1) : "");
	if (rc == -ENOENT) {
		err_line("%s: not found\n", what);
		return 1;
	}
	if (rc == -EACCES && x->o->read_only) {
		err_line("%s: %s (a --read-only client cannot "
				"write)\n", what, strerror(-rc));
		return 2;
	}
	if (rc == -EACCES) {
		/* the server made us read-only: its --read-only-secret-file */
		err_line("%s: %s (server %s grants this secret "
				"read-only access)\n", what, strerror(-rc),
			addr);
		return 2;
	}
	switch (rc) {
	case -ENOSPC:
		hint = "full: its index (--index-max) or data memory "
		       "(--memory)";
		if (key && rkv_client_replicas(x->c, key->p, key->len, rep,
					       1) > 1)
			hint = rkv_client_map_epoch(x->c)
				       ? "full: its index (--index-max) or data "
					 "memory (--memory); with replicas a "
					 "deleted key keeps its slot until "
					 "`rkv admin sweep`"
				       : "full: its index (--index-max) or data "
					 "memory (--memory); with replicas a "
					 "deleted key keeps its slot (swept in "
					 "clusters kept in etcd only)";
		break;
	case -EMSGSIZE:
		hint = "the value is over its --max-value";
		break;
	case -EDQUOT:
		hint = "this client holds its --max-chunks chunks";
		break;
	case -ETIMEDOUT:
		hint = "no answer within --timeout";
		break;
	case -ECONNRESET:
	case -ENOTCONN:
	case -EPIPE:
	case -ECONNABORTED:
	case -ESHUTDOWN:
		hint = "connection lost: did the server stop?";
		break;
	case -ECONNREFUSED:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
		hint = "the server is down: its keys fail until it is back";
		break;
	default:
		break;
	}
	err_line("%s: %s (server %s%s%s%s%s)\n", what,
		strerror(-rc), addr, detail ? ": " : "", detail ? detail : "",
		hint ? (detail ? "; " : ": ") : "", hint ? hint : "");
	return 2;
}

/* ------------------------------------------------------------ output */

static void out_printable(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char e[4];

		fwrite(e, 1, escape_byte((unsigned char)p[i], e), stdout);
	}
}

/* Whether p holds well-formed UTF-8 (no overlong forms, no surrogates,
 * nothing past U+10FFFF): what a JSON string may carry as it is. */
static int utf8_valid(const unsigned char *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned c = p[i], need;
		uint32_t cp, min;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			need = 1, cp = c & 0x1f, min = 0x80;
		else if ((c & 0xf0) == 0xe0)
			need = 2, cp = c & 0x0f, min = 0x800;
		else if (c >= 0xf0 && c <= 0xf4)
			need = 3, cp = c & 0x07, min = 0x10000;
		else
			return 0;
		if (n - i <= need)
			return 0;
		for (unsigned k = 1; k <= need; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += need + 1;
	}
	return 1;
}

/* p as the inside of a JSON string: ", \ and control bytes escaped. */
static void out_json_chars(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];

		switch (c) {
		case '"':
			fputs("\\\"", stdout);
			break;
		case '\\':
			fputs("\\\\", stdout);
			break;
		case '\n':
			fputs("\\n", stdout);
			break;
		case '\r':
			fputs("\\r", stdout);
			break;
		case '\t':
			fputs("\\t", stdout);
			break;
		default:
			if (c < 0x20 || c == 0x7f)
				printf("\\u%04x", c);
			else
				putchar(c);
		}
	}
}

static void out_base64(const unsigned char *p, size_t n)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				  "abcdefghijklmnopqrstuvwxyz0123456789+/";

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		putchar(b64[v >> 18 & 63]);
		putchar(b64[v >> 12 & 63]);
		putchar(i + 1 < n ? b64[v >> 6 & 63] : '=');
		putchar(i + 2 < n ? b64[v & 63] : '=');
	}
}

/* "name":"p" for UTF-8 bytes, else "name_base64":"..." (JSON strings
 * hold text only). */
static void out_json_bytes(const char *name, const char *p, size_t n)
{
	if (utf8_valid((const unsigned char *)p, n)) {
		printf("\"%s\":\"", name);
		out_json_chars(p, n);
	} else {
		printf("\"%s_base64\":\"", name);
		out_base64((const unsigned char *)p, n);
	}
	putchar('"');
}

/* A value of get or mget (NULL: absent) in g_mode; auto: as mode_auto. */
static void out_value(const char *p, size_t n, enum out_mode mode_auto)
{
	enum out_mode m = g_mode == OUT_AUTO ? mode_auto : g_mode;

	if (m == OUT_RAW) {
		if (p)
			fwrite(p, 1, n, stdout);
	} else if (p) {
		out_printable(p, n);
	} else {
		fputs("(nil)", stdout);
	}
}

/* A value as line mode answers it: in double quotes, printable, a " as
 * \" (the way a line gives it), so that no value reads as (nil). */
static void out_quoted(const char *p, size_t n)
{
	putchar('"');
	for (size_t i = 0; i < n; i++) {
		char e[4];

		if (p[i] == '"')
			fputs("\\\"", stdout);
		else
			fwrite(e, 1, escape_byte((unsigned char)p[i], e), stdout);
	}
	putchar('"');
}

/* ---------------------------------------------------------- commands */

static int cmd_get(struct ctx *x)
{
	static char buf[RKV_VALUE_MAX];
	const struct blob *key = &x->args[0];
	size_t len = 0;
	int rc = rkv_get(x->c, key->p, key->len, buf, sizeof(buf), &len);

	if (rc == -ENOENT && g_mode == OUT_JSON) {
		/* the object says so; no error line besides */
		putchar('{');
		out_json_bytes("key", key->p, key->len);
		puts(",\"value\":null}");
		return 1;
	}
	if (rc)
		return fail_op(x, key, key_addr(x, key), rc);
	if (g_mode == OUT_JSON) {
		putchar('{');
		out_json_bytes("key", key->p, key->len);
		putchar(',');
		out_json_bytes("value", buf, len);
		puts("}");
		return 0;
	}
	/* to a pipe or file the exact bytes, as rkv always wrote them */
	out_value(buf, len, isatty(1) ? OUT_PRINT : OUT_RAW);
	if (g_mode == OUT_PRINT || (g_mode == OUT_AUTO && isatty(1)))
		putchar('\n');
	return 0;
}

static int cmd_put(struct ctx *x)
{
	const struct blob *key = &x->args[0], *v = &x->args[1];
	int rc = rkv_put(x->c, key->p, key->len, v->p, v->len);

	if (rc)
		return fail_op(x, key, key_addr(x, key), rc);
	if (g_mode == OUT_JSON) {
		putchar('{');
		out_json_bytes("key", key->p, key->len);
		puts(",\"ok\":true}");
	} else if (g_line) {
		puts("OK");
	}
	return 0;
}

static int cmd_del(struct ctx *x)
{
	const struct blob *key = &x->args[0];
	int rc = rkv_delete(x->c, key->p, key->len);

	if (g_mode == OUT_JSON && (!rc || rc == -ENOENT)) {
		putchar('{');
		out_json_bytes("key", key->p, key->len);
		printf(",\"deleted\":%s}\n", rc ? "false" : "true");
		return rc && !g_line ? 1 : 0;
	}
	if (g_line && (!rc || rc == -ENOENT)) {
		/* line mode: how many were deleted, as redis answers */
		puts(rc ? "0" : "1");
		return 0;
	}
	return rc ? fail_op(x, key, key_addr(x, key), rc) : 0;
}

/* a status rkv_mget or rkv_mput cannot leave: the item was not reached */
#define NOT_RUN 1

/* mget, mput and exists: items of the keys (and values) of x. */
static struct rkv_kv *kv_items(struct ctx *x, size_t n, size_t step)
{
	struct rkv_kv *items = calloc(n ? n : 1, sizeof(*items));

	if (!items) {
		err_line("%s: out of memory\n", x->cmd);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		const struct blob *k = &x->args[i * step];

		items[i].key = k->p;
		items[i].key_len = k->len;
		items[i].status = NOT_RUN;
		if (step == 2) {
			items[i].val = (void *)x->args[i * step + 1].p;
			items[i].val_len = x->args[i * step + 1].len;
		}
	}
	return items;
}

/* The first item that failed other than with -ENOENT (or -ENOBUFS, when
 * ok_nobufs), as one line; rc: the call's own error for items it did not
 * reach.  Returns 2, or 0 when none failed. */
static int kv_failed(struct ctx *x, const struct rkv_kv *items, size_t n,
		     size_t step, int rc, int ok_nobufs)
{
	for (size_t i = 0; i < n; i++) {
		int st = items[i].status == NOT_RUN ? rc : items[i].status;

		if (!st || st == -ENOENT || (ok_nobufs && st == -ENOBUFS))
			continue;
		return fail_op(x, &x->args[i * step],
			       key_addr(x, &x->args[i * step]), st);
	}
	return 0;
}

/* exists: an rkv_mget into no room; -ENOBUFS says the key is there. */
static int cmd_exists(struct ctx *x)
{
	struct rkv_kv *items = kv_items(x, x->nargs, 1);
	static char none[1]; /* room for no byte, but a real pointer */
	size_t count = 0;
	int rc, status;

	if (!items)
		return 2;
	for (size_t i = 0; i < x->nargs; i++)
		items[i].val = none;
	rc = rkv_mget(x->c, items, x->nargs);
	status = kv_failed(x, items, x->nargs, 1, rc, 1);
	for (size_t i = 0; i < x->nargs; i++)
		count += !items[i].status || items[i].status == -ENOBUFS;
	free(items);
	if (status)
		return status;
	printf(g_mode == OUT_JSON ? "{\"exists\":%zu}\n" : "%zu\n", count);
	return 0;
}

/* mget bytes of room per key; a longer value is fetched again alone */
#define MGET_ROOM 4096

/* The values of an mget once read: items[i].val and its status. */
static void mget_print(const struct ctx *x, const struct rkv_kv *items)
{
	if (g_mode == OUT_JSON)
		fputs("{\"values\":[", stdout);
	for (size_t i = 0; i < x->nargs; i++) {
		const struct rkv_kv *it = &items[i];
		const char *v = it->status ? NULL : it->val;

		if (g_mode != OUT_JSON && g_line) {
			/* line mode: one line for all, quoted, (nil) */
			if (i)
				putchar(' ');
			if (v)
				out_quoted(v, it->val_len);
			else
				fputs("(nil)", stdout);
			continue;
		}
		if (g_mode != OUT_JSON) {
			/* one line each: printable unless --raw */
			out_value(v, it->val_len, OUT_PRINT);
			putchar('\n');
			continue;
		}
		printf("%s{", i ? "," : "");
		out_json_bytes("key", it->key, it->key_len);
		if (v) {
			putchar(',');
			out_json_bytes("value", v, it->val_len);
		} else {
			fputs(",\"value\":null", stdout);
		}
		putchar('}');
	}
	if (g_mode == OUT_JSON)
		puts("]}");
	else if (g_line)
		putchar('\n');
}

/* An mget item whose value did not fit its MGET_ROOM: its own buffer
 * and rkv_get.  Returns 0 or -errno (the item's status is set). */
static int mget_refetch(struct ctx *x, struct rkv_kv *it, char **owned)
{
	char *buf = malloc(RKV_VALUE_MAX);
	int rc;

	if (!buf)
		return it->status = -ENOMEM;
	rc = rkv_get(x->c, it->key, it->key_len, buf, RKV_VALUE_MAX,
		     &it->val_len);
	it->status = rc;
	it->val = buf;
	*owned = buf;
	return rc == -ENOENT ? 0 : rc;
}

static int cmd_mget(struct ctx *x)
{
	size_t n = x->nargs;
	struct rkv_kv *items = kv_items(x, n, 1);
	char *room = malloc(n * MGET_ROOM), **owned = calloc(n, sizeof(char *));
	int rc = -ENOMEM, status, absent = 0;

	if (items && room && owned) {
		for (size_t i = 0; i < n; i++) {
			items[i].val = room + i * MGET_ROOM;
			items[i].val_cap = MGET_ROOM;
		}
		rc = rkv_mget(x->c, items, n);
	}
	status = items ? kv_failed(x, items, n, 1, rc, 1) : 2;
	for (size_t i = 0; !status && i < n; i++) {
		if (items[i].status == -ENOBUFS &&
		    mget_refetch(x, &items[i], &owned[i]))
			status = fail_op(x, &x->args[i],
					 key_addr(x, &x->args[i]),
					 items[i].status);
		absent |= items[i].status == -ENOENT;
	}
	if (!status)
		mget_print(x, items);
	for (size_t i = 0; owned && i < n; i++)
		free(owned[i]);
	free(owned);
	free(room);
	free(items);
	/* line mode: (nil) is the answer, not an error */
	return status ? status : g_line ? 0 : absent;
}

static int cmd_mput(struct ctx *x)
{
	size_t n = x->nargs / 2;
	struct rkv_kv *items = kv_items(x, n, 2);
	int rc, status;

	if (!items)
		return 2;
	rc = rkv_mput(x->c, items, n);
	status = kv_failed(x, items, n, 2, rc, 0);
	free(items);
	if (!status && g_mode == OUT_JSON)
		printf("{\"stored\":%zu}\n", n);
	else if (!status && g_line)
		puts("OK");
	return status;
}

/* incr and decr: the rmw callback's arguments and what it found. */
struct incr_arg {
	int64_t by;
	int down;       /* decr: subtract by */
	int64_t old;    /* the counter's value before */
	int64_t val;    /* after */
	int bad;        /* the value is no counter: */
	size_t bad_len; /* its length */
	int overflow;
};

static int incr_fn(const void *old, size_t old_len, void *out,
		   size_t out_cap, size_t *out_len, void *arg)
{
	struct incr_arg *a = arg;
	const unsigned char *b = old;
	unsigned char *o = out;
	uint64_t u = 0;

	/* it may run again after a lost race: each run starts afresh */
	a->bad = 0;
	a->overflow = 0;
	if (old && old_len != 8) {
		a->bad = 1;
		a->bad_len = old_len;
		return -EILSEQ;
	}
	for (int i = 7; old && i >= 0; i--)
		u = u << 8 | b[i];
	a->old = (int64_t)u;
	a->overflow = a->down ? __builtin_sub_overflow(a->old, a->by, &a->val)
			      : __builtin_add_overflow(a->old, a->by, &a->val);
	if (a->overflow)
		return -ERANGE;
	if (out_cap < 8)
		return -EMSGSIZE;
	u = (uint64_t)a->val;
	for (int i = 0; i < 8; i++, u >>= 8)
		o[i] = (unsigned char)u;
	*out_len = 8;
	return RKV_RMW_WRITE;
}

static int cmd_incr(struct ctx *x)
{
	const struct blob *key = &x->args[0];
	struct incr_arg a = { .by = x->by, .down = !strcmp(x->cmd, "decr") };
	int rc = rkv_rmw(x->c, key->p, key->len, incr_fn, &a);

	if (rc == -EILSEQ && a.bad) {
		err_line("%s %s: the value is %zu bytes, not a "
				"counter (8 bytes, little-endian, signed)\n",
			x->cmd, shown(key->p, key->len, 1), a.bad_len);
		return 2;
	}
	if (rc == -ERANGE && a.overflow) {
		err_line("%s %s: %" PRId64 " %s %" PRId64
				" overflows the 64-bit signed counter\n",
			x->cmd, shown(key->p, key->len, 1), a.old,
			a.down ? "-" : "+", a.by);
		return 2;
	}
	if (rc)
		return fail_op(x, key, key_addr(x, key), rc);
	if (g_mode == OUT_JSON) {
		putchar('{');
		out_json_bytes("key", key->p, key->len);
		printf(",\"value\":%" PRId64 "}\n", a.val);
	} else {
		printf("%" PRId64 "\n", a.val);
	}
	return 0;
}

static void print_stats(const char *addr, const struct rkv_server_stats *st)
{
	printf("server %s\n", addr);
	printf("  uptime_ms       %llu\n", (unsigned long long)st->uptime_ms);
	printf("  clients         %llu   (connected now; %llu since start)\n",
	       (unsigned long long)st->clients,
	       (unsigned long long)st->clients_total);
	printf("  keys            %llu\n", (unsigned long long)st->keys);
	printf("  buckets         %llu   (%llu of at most %llu levels)\n",
	       (unsigned long long)st->nbuckets,
	       (unsigned long long)st->levels,
	       (unsigned long long)st->levels_max);
	printf("  bucket_slots    %llu   (%.1f %% of the index's slots used)\n",
	       (unsigned long long)st->bucket_slots,
	       st->nbuckets && st->bucket_slots
		       ? 100.0 * (double)st->keys /
				 ((double)st->nbuckets *
				  (double)st->bucket_slots)
		       : 0.0);
	printf("  data_len        %llu\n", (unsigned long long)st->data_len);
	printf("  data_free       %llu\n", (unsigned long long)st->data_free);
	printf("  data_grace      %llu\n", (unsigned long long)st->data_grace);
	printf("  chunks_granted  %llu\n",
	       (unsigned long long)st->chunks_granted);
	printf("  blocks_returned %llu\n",
	       (unsigned long long)st->blocks_returned);
	printf("  rebuilds        %llu\n", (unsigned long long)st->rebuilds);
	printf("  bad_msgs        %llu\n", (unsigned long long)st->bad_msgs);
	printf("  ctrl_msgs       %llu\n", (unsigned long long)st->ctrl_msgs);
	printf("  auth_failures   %llu\n",
	       (unsigned long long)st->auth_failures);
	printf("  denied          %llu   (writes refused to read-only "
	       "clients)\n", (unsigned long long)st->denied);
}

/* One server of stat --json: {"server":ADDR,"uptime_ms":N,...}; in line
 * mode without --json "server ADDR uptime_ms N ..." (json 0). */
static void print_stats_json(const char *addr,
			     const struct rkv_server_stats *st, int json)
{
	const struct {
		const char *name;
		uint64_t v;
	} f[] = {
		{ "uptime_ms", st->uptime_ms },
		{ "clients", st->clients },
		{ "clients_total", st->clients_total },
		{ "keys", st->keys },
		{ "buckets", st->nbuckets },
		{ "bucket_slots", st->bucket_slots },
		{ "levels", st->levels },
		{ "levels_max", st->levels_max },
		{ "data_len", st->data_len },
		{ "data_free", st->data_free },
		{ "data_grace", st->data_grace },
		{ "chunks_granted", st->chunks_granted },
		{ "blocks_returned", st->blocks_returned },
		{ "rebuilds", st->rebuilds },
		{ "bad_msgs", st->bad_msgs },
		{ "ctrl_msgs", st->ctrl_msgs },
		{ "auth_failures", st->auth_failures },
		{ "denied", st->denied },
	};

	if (!json) {
		printf("server %s", addr);
		for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
			printf(" %s %" PRIu64, f[i].name, f[i].v);
		return;
	}
	putchar('{');
	out_json_bytes("server", addr, strlen(addr));
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		printf(",\"%s\":%" PRIu64, f[i].name, f[i].v);
	putchar('}');
}

/*
 * stat and ping in line mode: every server asked before anything is
 * printed, so that the answer is one line, or one error line.  ping
 * prints PONG (--json {"pong":N}, N the servers that answered).
 */
static int stat_line(struct ctx *x, int ping)
{
	unsigned n = rkv_client_nservers(x->c);
	struct rkv_server_stats *st = calloc(n ? n : 1, sizeof(*st));
	int json = g_mode == OUT_JSON;

	if (!st) {
		err_line("%s: out of memory\n", x->cmd);
		return 2;
	}
	for (unsigned i = 0; i < n; i++) {
		int rc;

		log_reset();
		rc = rkv_server_stats(x->c, i, &st[i]);
		if (rc) {
			free(st);
			return fail_op(x, NULL, server_label(x->c, i, x->label,
							     sizeof(x->label)),
				       rc);
		}
	}
	if (ping)
		printf(json ? "{\"pong\":%u}\n" : "PONG\n", n);
	if (!ping && json)
		fputs("{\"servers\":[", stdout);
	for (unsigned i = 0; !ping && i < n; i++) {
		if (i)
			fputs(json ? "," : "; ", stdout);
		print_stats_json(server_label(x->c, i, x->label,
					      sizeof(x->label)),
				 &st[i], json);
	}
	if (!ping)
		puts(json ? "]}" : "");
	free(st);
	return 0;
}

/* ping: every server answers its statistics request.  PONG, or the
 * first that did not, as one line. */
static int cmd_ping(struct ctx *x)
{
	return stat_line(x, 1);
}

static int cmd_stat(struct ctx *x)
{
	int status = 0, shown_one = 0;

	if (g_line)
		return stat_line(x, 0);
	if (g_mode == OUT_JSON)
		fputs("{\"servers\":[", stdout);
	for (unsigned i = 0; i < rkv_client_nservers(x->c); i++) {
		struct rkv_server_stats st;
		const char *a = server_label(x->c, i, x->label,
					     sizeof(x->label));
		int rc;

		log_reset();
		rc = rkv_server_stats(x->c, i, &st);
		if (rc) {
			/* one line in all: the first server that failed */
			if (!status)
				status = fail_op(x, NULL, a, rc);
			continue;
		}
		if (g_mode != OUT_JSON) {
			print_stats(a, &st);
			continue;
		}
		if (shown_one++)
			putchar(',');
		print_stats_json(a, &st, 1);
	}
	if (g_mode == OUT_JSON)
		puts("]}");
	return status;
}

/* Whether the n bytes of s match glob pattern pat (pn bytes), byte by
 * byte: * any run, ? one byte, [abc] [a-z] [^...] or [!...] a set,
 * \ the next byte as it is (Redis' KEYS and SCAN MATCH). */
static int glob_match(const char *pat, size_t pn, const char *s, size_t n)
{
	size_t pi = 0, si = 0, star_p = (size_t)-1, star_s = 0;

	while (si < n) {
		if (pi < pn && pat[pi] == '*') {
			star_p = pi++;
			star_s = si;
			continue;
		}
		if (pi < pn && pat[pi] == '[') {
			size_t q = pi + 1;
			int neg = 0, hit = 0;
			unsigned char c = (unsigned char)s[si];

			if (q < pn && (pat[q] == '^' || pat[q] == '!')) {
				neg = 1;
				q++;
			}
			while (q < pn && (pat[q] != ']' || q == pi + 1 + neg)) {
				unsigned char lo, hi;

				if (pat[q] == '\\' && q + 1 < pn)
					q++;
				lo = hi = (unsigned char)pat[q];
				if (q + 2 < pn && pat[q + 1] == '-' &&
				    pat[q + 2] != ']') {
					q += 2;
					if (pat[q] == '\\' && q + 1 < pn)
						q++;
					hi = (unsigned char)pat[q];
					if (lo > hi) {
						unsigned char t = lo;

						lo = hi;
						hi = t;
					}
				}
				hit |= c >= lo && c <= hi;
				q++;
			}
			if (q < pn && hit != neg) { /* q at the closing ] */
				pi = q + 1;
				si++;
				continue;
			}
			if (q >= pn && pat[pi] == s[si]) { /* no ]: a plain [ */
				pi++;
				si++;
				continue;
			}
		} else if (pi < pn && (pat[pi] == '?' ||
				       (pat[pi] == '\\' && pi + 1 < pn
					? pat[pi + 1] == s[si]
					: pat[pi] == s[si]))) {
			pi += pat[pi] == '\\' && pi + 1 < pn ? 2 : 1;
			si++;
			continue;
		}
		if (star_p == (size_t)-1)
			return 0;
		pi = star_p + 1; /* the last * takes one byte more */
		si = ++star_s;
	}
	while (pi < pn && pat[pi] == '*')
		pi++;
	return pi == pn;
}

/* --count of a one-shot scan (getopt takes it off the command line) */
static const char *g_count;

struct scan_arg {
	const char *pat;   /* NULL: every key */
	size_t pat_len;
	uint64_t max;      /* --count; 0: no limit */
	uint64_t shown;
	int json;
	/* line mode: the keys, kept until the scan ends (one answer line:
	 * the keys, or the error) */
	char *keep;
	size_t keep_len, keep_cap;
	int oom;
};

/* Line mode: key kept, its length before it. */
static int scan_keep(struct scan_arg *a, const void *key, size_t key_len)
{
	size_t need = a->keep_len + sizeof(size_t) + key_len;

	if (need > a->keep_cap) {
		size_t cap = a->keep_cap ? a->keep_cap : 4096;
		char *p;

		while (cap < need)
			cap *= 2;
		p = realloc(a->keep, cap);
		if (!p) {
			a->oom = 1;
			return -ENOMEM;
		}
		a->keep = p;
		a->keep_cap = cap;
	}
	memcpy(a->keep + a->keep_len, &key_len, sizeof(size_t));
	memcpy(a->keep + a->keep_len + sizeof(size_t), key, key_len);
	a->keep_len = need;
	return 0;
}

/* Line mode: the kept keys, on one line. */
static void scan_print_kept(const struct scan_arg *a)
{
	for (size_t o = 0, k = 0; o < a->keep_len; k++) {
		size_t len;

		memcpy(&len, a->keep + o, sizeof(size_t));
		o += sizeof(size_t);
		if (g_mode == OUT_JSON) {
			fputs(k ? ",{" : "{", stdout);
			out_json_bytes("key", a->keep + o, len);
			putchar('}');
		} else {
			if (k)
				putchar(' ');
			out_quoted(a->keep + o, len);
		}
		o += len;
	}
}

static int scan_fn(const void *key, size_t key_len, const void *val,
		   size_t val_len, void *arg)
{
	struct scan_arg *a = arg;

	(void)val;
	(void)val_len;
	if (a->pat && !glob_match(a->pat, a->pat_len, key, key_len))
		return 0;
	if (g_line) {
		if (scan_keep(a, key, key_len))
			return -ENOMEM;
	} else if (a->json) {
		fputs(a->shown ? ",{" : "{", stdout);
		out_json_bytes("key", key, key_len);
		putchar('}');
	} else if (g_mode == OUT_RAW) {
		fwrite(key, 1, key_len, stdout);
		putchar('\n');
	} else {
		out_printable(key, key_len);
		putchar('\n');
	}
	a->shown++;
	return a->max && a->shown == a->max ? 1 : 0;
}

/* --count N of scan.  Returns 0, or 2 after one line. */
static int parse_count(const char *s, size_t len, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (!*s || *end || errno || strlen(s) != len || v == 0 || *s == '-') {
		err_line("scan: --count '%s' is not a number of keys (1 or "
			 "more)\n", shown(s, len, 1));
		return 2;
	}
	*out = v;
	return 0;
}

/*
 * scan [PATTERN] [--count N]: the keys of every server that match,
 * one-sided (rkv_scan), as they come.  A server that failed is named
 * after the keys of the others.
 */
static int cmd_scan(struct ctx *x)
{
	struct scan_arg a = { .json = g_mode == OUT_JSON };
	struct rkv_scan_stats st;
	int rc;

	if (g_count && parse_count(g_count, strlen(g_count), &a.max))
		return 2;
	for (size_t i = 0; i < x->nargs; i++) {
		const struct blob *b = &x->args[i];

		if (b->len == 7 && !memcmp(b->p, "--count", 7)) {
			if (i + 1 == x->nargs) {
				err_line("scan: --count needs a number\n");
				return 2;
			}
			if (parse_count(x->args[i + 1].p, x->args[i + 1].len,
					&a.max))
				return 2;
			i++;
		} else if (a.pat) {
			err_line("scan takes [PATTERN] [--count N], not two "
				 "patterns\n");
			return 2;
		} else {
			a.pat = b->p;
			a.pat_len = b->len;
		}
	}
	if (a.json && !g_line)
		fputs("{\"keys\":[", stdout);
	rc = rkv_scan(x->c, scan_fn, &a, &st);
	if (rc == 1)
		rc = 0; /* --count reached */
	if (g_line && !rc) {
		if (a.json)
			fputs("{\"keys\":[", stdout);
		scan_print_kept(&a);
		if (a.json)
			printf("],\"count\":%llu}\n",
			       (unsigned long long)a.shown);
		else
			puts(a.shown ? "" : "(empty)");
	} else if (a.json && !g_line) {
		printf("],\"count\":%llu}\n", (unsigned long long)a.shown);
	}
	free(a.keep);
	if (!rc)
		return 0;
	if (a.oom) {
		err_line("scan: out of memory for the keys\n");
		return 2;
	}
	if (st.failed_server >= 0)
		return fail_op(x, NULL, server_label(x->c,
						     (unsigned)st.failed_server,
						     x->label,
						     sizeof(x->label)),
			       rc);
	err_line("scan: %s%s%s\n", strerror(-rc),
		 log_detail(rc) ? ": " : "",
		 log_detail(rc) ? log_detail(rc) : "");
	return 2;
}

/*
 * cluster: the client's map (its epoch; each server's name, address,
 * partitions) and each server's state and keys (a stats call each).
 * Exit 2, after the table, when a server is down.
 */
static int cmd_cluster(struct ctx *x)
{
	uint64_t epoch = rkv_client_map_epoch(x->c);
	unsigned n = rkv_client_nservers(x->c), shown_n = 0, down = 0;

	if (g_mode == OUT_JSON)
		printf("{\"epoch\":%llu,\"partitions\":4096,\"servers\":[",
		       (unsigned long long)epoch);
	else if (g_line)
		printf("epoch %llu:", (unsigned long long)epoch);
	else if (epoch)
		printf("cluster map epoch %llu, 4096 partitions\n",
		       (unsigned long long)epoch);
	else
		puts("static cluster map (no etcd), 4096 partitions");
	for (unsigned i = 0; i < n; i++) {
		unsigned parts = rkv_client_server_parts(x->c, i);
		const char *name = rkv_client_server_name(x->c, i);
		const char *addr = rkv_client_server_addr(x->c, i);
		struct rkv_server_stats st;
		int rc;

		if (!parts)
			continue; /* a server of an older map */
		log_reset();
		rc = rkv_server_stats(x->c, i, &st);
		down += rc != 0;
		if (g_mode == OUT_JSON) {
			printf("%s{", shown_n ? "," : "");
			out_json_bytes("name", name, strlen(name));
			putchar(',');
			out_json_bytes("addr", addr, strlen(addr));
			printf(",\"up\":%s,\"partitions\":%u",
			       rc ? "false" : "true", parts);
			if (rc)
				printf(",\"error\":\"%s\"}", strerror(-rc));
			else
				printf(",\"keys\":%llu}",
				       (unsigned long long)st.keys);
		} else if (g_line) {
			printf("%s %s %s %s %u partitions", shown_n ? "," : "",
			       name, addr, rc ? "down" : "up", parts);
			if (!rc)
				printf(" %llu keys", (unsigned long long)st.keys);
		} else {
			printf("  %-20s %-28s %-4s %5u partitions (%4.1f%%)",
			       name, addr, rc ? "down" : "up", parts,
			       parts * 100.0 / 4096);
			if (rc)
				printf("  %s\n", strerror(-rc));
			else
				printf("  %llu keys\n",
				       (unsigned long long)st.keys);
		}
		shown_n++;
	}
	if (g_mode == OUT_JSON)
		puts("]}");
	else if (g_line)
		putchar('\n');
	if (!down)
		return 0;
	if (!g_line)
		err_line("cluster: %u of %u servers down\n", down, shown_n);
	return 2;
}

/* The commands: how many arguments each takes and what they are. */
enum arg_kind {
	ARGS_NONE,  /* no arguments */
	ARGS_KEYS,  /* KEY... */
	ARGS_PAIRS, /* KEY VALUE [KEY VALUE...] */
	ARGS_KEY_BY, /* KEY [BY] */
	ARGS_WORDS  /* words as they are (scan's PATTERN, --count N) */
};

static const struct cmd_def {
	const char *name;
	int min, max;     /* arguments; max -1: any number */
	enum arg_kind kind;
	const char *args; /* as "takes ..." names them */
	int (*fn)(struct ctx *x);
} cmds[] = {
	{ "get", 1, 1, ARGS_KEYS, "KEY", cmd_get },
	{ "put", 2, 2, ARGS_PAIRS, "KEY VALUE", cmd_put },
	{ "del", 1, 1, ARGS_KEYS, "KEY", cmd_del },
	{ "exists", 1, -1, ARGS_KEYS, "KEY...", cmd_exists },
	{ "mget", 1, -1, ARGS_KEYS, "KEY...", cmd_mget },
	{ "mput", 2, -1, ARGS_PAIRS, "KEY VALUE [KEY VALUE...]", cmd_mput },
	{ "incr", 1, 2, ARGS_KEY_BY, "KEY [BY]", cmd_incr },
	{ "decr", 1, 2, ARGS_KEY_BY, "KEY [BY]", cmd_incr },
	{ "scan", 0, 3, ARGS_WORDS, "[PATTERN] [--count N]", cmd_scan },
	{ "cluster", 0, 0, ARGS_NONE, "no arguments", cmd_cluster },
	{ "stat", 0, 0, ARGS_NONE, "no arguments", cmd_stat },
	{ "ping", 0, 0, ARGS_NONE, "no arguments", cmd_ping },
};

static const struct cmd_def *find_cmd(const char *name)
{
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(cmds[i].name, name))
			return &cmds[i];
	return NULL;
}

/* BY of incr and decr.  Returns 0, or 2 after one line. */
static int parse_by(const char *cmd, const char *s, size_t len, int64_t *by)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (!*s || *end || errno || strlen(s) != len) {
		err_line("%s: BY '%s' is not a whole number from "
				"%" PRId64 " to %" PRId64 "\n", cmd,
			shown_str(s), INT64_MIN, INT64_MAX);
		return 2;
	}
	*by = v;
	return 0;
}

/*
 * The arguments of d (argc of them in argv) into x: their count, the
 * keys' and values' bytes (files read now, stdin marked), their limits,
 * BY.  lens: line mode, where argument i is the lens[i] bytes of argv[i]
 * as they are (no "-" or @FILE: stdin holds the commands, and a line
 * quotes any byte).  Returns 0, or 2 after one line.
 */
static int load_args(const struct cmd_def *d, int argc, char **argv,
		     const size_t *lens, struct ctx *x)
{
	int stdin_args = 0;

	if (argc < d->min || (d->max >= 0 && argc > d->max) ||
	    (d->kind == ARGS_PAIRS && argc % 2)) {
		err_line("%s takes %s, not %d argument%s\n",
			d->name, d->args, argc, argc == 1 ? "" : "s");
		return 2;
	}
	x->cmd = d->name;
	x->by = 1;
	x->nargs = d->kind == ARGS_KEY_BY ? 1 : (size_t)argc;
	x->args = calloc(x->nargs ? x->nargs : 1, sizeof(*x->args));
	if (!x->args) {
		err_line("out of memory\n");
		return 2;
	}
	for (size_t i = 0; i < x->nargs; i++) {
		int is_key = d->kind != ARGS_PAIRS || i % 2 == 0;
		struct blob *b = &x->args[i];

		if (d->kind == ARGS_WORDS) {
			size_t len = lens ? lens[i] : strlen(argv[i]);

			*b = (struct blob){ .p = argv[i], .len = len,
					    .size = len };
			continue;
		}
		if (lens)
			*b = (struct blob){ .p = argv[i], .len = lens[i],
					    .size = lens[i], .is_key = is_key };
		else if (blob_from_arg(d->name, b, argv[i], is_key))
			return 2;
		stdin_args += b->from_stdin;
		if (stdin_args > 1) {
			err_line("%s: more than one argument is "
					"\"-\" (stdin is read once)\n", d->name);
			return 2;
		}
		if (!b->from_stdin &&
		    check_blob(d->name, b, is_key ? NULL : b - 1))
			return 2;
	}
	if (d->kind == ARGS_KEY_BY && argc == 2)
		return parse_by(d->name, argv[1],
				lens ? lens[1] : strlen(argv[1]), &x->by);
	return 0;
}

/* Once connected: the argument that is "-", from stdin.  Returns 0, or
 * 2 after one line. */
static int load_stdin(struct ctx *x)
{
	for (size_t i = 0; i < x->nargs; i++) {
		struct blob *b = &x->args[i], *key = b->is_key ? NULL : b - 1;

		if (b->from_stdin)
			return blob_read_stdin(x->cmd, b, key) ||
				       check_blob(x->cmd, b, key)
				       ? 2
				       : 0;
	}
	return 0;
}

static void free_args(struct ctx *x)
{
	for (size_t i = 0; x->args && i < x->nargs; i++)
		free(x->args[i].owned);
	free(x->args);
}

/* ------------------------------------------------ --pipe and the prompt */

/*
 * Line mode: one command a line, its words split on blanks, a word in
 * "double quotes" keeping its blanks, and in or out of quotes \n \r \t
 * \0 \\ \" \' \xHH and \ before any other byte for that byte.  Answers:
 * a value in quotes (out_quoted), (nil), OK, a number, PONG; one line
 * each.  With --pipe, gets in a row and puts in a row go out together as
 * one rkv_mget or rkv_mput of up to BATCH_MAX items (each server's
 * first round in one doorbell); the batch is answered before a line of
 * another kind runs and before a read of stdin could block, so a peer
 * that waits for each answer gets it.
 */
/* bytes of the words of the lines in a batch: one line holding the
 * largest key and value, every byte escaped as \xHH, fits */
#define ARENA_CAP (4u * (RKV_KEY_MAX + RKV_VALUE_MAX) + 4096u)
/* the longest line read (its words always fit the arena) */
#define LINE_CAP (ARENA_CAP - 1)

struct tok {
	char *p; /* NUL-terminated, but may hold NULs: len counts */
	size_t len;
};

struct line_ctx {
	struct ctx *x;
	/* the batch: gets (RKV_OP_GET) or puts (RKV_OP_PUT) */
	enum rkv_op_type type;
	size_t n;
	struct rkv_kv items[BATCH_MAX];
	char *room;   /* BATCH_MAX * MGET_ROOM: the values of its gets */
	char *big;    /* RKV_VALUE_MAX: a value over its MGET_ROOM */
	char *arena;  /* the words of its lines, and of the line at hand */
	size_t used;  /* arena bytes its lines hold */
	/* the words of the line at hand */
	struct tok *toks;
	size_t ntoks, cap_toks;
	int interactive; /* the prompt, not --pipe */
	int quit;
};

static int hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* One more word of the line at hand.  Returns 0 or -ENOMEM. */
static int tok_add(struct line_ctx *l, char *p, size_t len)
{
	if (l->ntoks == l->cap_toks) {
		size_t cap = l->cap_toks ? 2 * l->cap_toks : 16;
		struct tok *t = realloc(l->toks, cap * sizeof(*t));

		if (!t)
			return -ENOMEM;
		l->toks = t;
		l->cap_toks = cap;
	}
	l->toks[l->ntoks++] = (struct tok){ .p = p, .len = len };
	return 0;
}

/*
 * Split line (len bytes) into l->toks, their bytes at dst (room for
 * len + 1: escapes only shrink, each word's NUL takes its blank).
 * Returns the bytes of dst used, or -1 after *why is set.
 */
static long tokenize(struct line_ctx *l, const char *line, size_t len,
		     char *dst, const char **why)
{
	size_t i = 0, o = 0;

	l->ntoks = 0;
	for (;;) {
		size_t start = o;
		int quoted = 0;

		while (i < len && (line[i] == ' ' || line[i] == '\t'))
			i++;
		if (i == len)
			return (long)o;
		if (line[i] == '"') {
			quoted = 1;
			i++;
		}
		for (;;) {
			int c, h1, h2;

			if (i == len) {
				if (quoted) {
					*why = "a quote is not closed";
					return -1;
				}
				break;
			}
			c = (unsigned char)line[i];
			if (quoted && c == '"') {
				i++;
				if (i < len && line[i] != ' ' && line[i] != '\t') {
					*why = "a closing quote must end its word";
					return -1;
				}
				break;
			}
			if (!quoted && (c == ' ' || c == '\t'))
				break;
			i++;
			if (c == '\\') {
				if (i == len) {
					*why = "a line ends in a lone \\";
					return -1;
				}
				c = (unsigned char)line[i++];
				switch (c) {
				case 'n': c = '\n'; break;
				case 'r': c = '\r'; break;
				case 't': c = '\t'; break;
				case '0': c = '\0'; break;
				case 'x':
					h1 = i < len ? hex_digit(line[i]) : -1;
					h2 = i + 1 < len ? hex_digit(line[i + 1])
							 : -1;
					if (h1 < 0 || h2 < 0) {
						*why = "\\x needs two hex digits";
						return -1;
					}
					c = h1 << 4 | h2;
					i += 2;
					break;
				default:
					break; /* \\ \" \' \  and the rest */
				}
			}
			dst[o++] = (char)c;
		}
		dst[o++] = '\0';
		if (tok_add(l, dst + start, o - 1 - start)) {
			*why = "out of memory";
			return -1;
		}
	}
}

/* The answer to batched item it whose status is st. */
static void batch_answer(struct line_ctx *l, struct rkv_kv *it, int st)
{
	struct ctx *x = l->x;
	struct blob key = { .p = it->key, .len = it->key_len, .is_key = 1 };

	x->cmd = l->type == RKV_OP_GET ? "get" : "put";
	if (l->type == RKV_OP_GET && st == -ENOBUFS) {
		st = rkv_get(x->c, it->key, it->key_len, l->big,
			     RKV_VALUE_MAX, &it->val_len);
		it->val = l->big;
	}
	if (st && st != -ENOENT) {
		fail_op(x, &key, key_addr(x, &key), st);
		return;
	}
	if (g_mode == OUT_JSON) {
		putchar('{');
		out_json_bytes("key", key.p, key.len);
		if (l->type == RKV_OP_PUT)
			fputs(",\"ok\":true", stdout);
		else if (st)
			fputs(",\"value\":null", stdout);
		if (l->type == RKV_OP_GET && !st) {
			putchar(',');
			out_json_bytes("value", it->val, it->val_len);
		}
		puts("}");
	} else if (l->type == RKV_OP_PUT) {
		puts("OK");
	} else if (st) {
		puts("(nil)");
	} else {
		out_quoted(it->val, it->val_len);
		putchar('\n');
	}
}

/* Run the batch and answer each of its lines, in order. */
static void batch_flush(struct line_ctx *l)
{
	int rc;

	if (l->n) {
		for (size_t i = 0; i < l->n; i++) {
			l->items[i].status = NOT_RUN;
			if (l->type == RKV_OP_GET) {
				l->items[i].val = l->room + i * MGET_ROOM;
				l->items[i].val_cap = MGET_ROOM;
			}
		}
		log_reset();
		rc = l->type == RKV_OP_GET ? rkv_mget(l->x->c, l->items, l->n)
					   : rkv_mput(l->x->c, l->items, l->n);
		for (size_t i = 0; i < l->n; i++) {
			struct rkv_kv *it = &l->items[i];

			batch_answer(l, it, it->status == NOT_RUN ? rc
								 : it->status);
		}
	}
	l->n = 0;
	l->used = 0;
}

/* A get or put of the line at hand (words at the arena's used bytes,
 * end_used after them) into the batch; 0 when it is another line. */
static int batch_add(struct line_ctx *l, size_t end_used)
{
	const struct tok *t = l->toks;
	int get = l->ntoks == 2 && t[0].len == 3 && !strcmp(t[0].p, "get");
	int put = l->ntoks == 3 && t[0].len == 3 && !strcmp(t[0].p, "put");
	enum rkv_op_type type = get ? RKV_OP_GET : RKV_OP_PUT;
	struct rkv_kv *it;

	/* anything load_args would refuse goes there, for its error line */
	if ((!get && !put) || !t[1].len || t[1].len > RKV_KEY_MAX ||
	    (put && t[2].len > RKV_VALUE_MAX))
		return 0;
	if (l->n && l->type != type)
		batch_flush(l);
	/* two puts of one key in one batch could land in either order */
	for (size_t i = 0; put && i < l->n; i++) {
		if (l->items[i].key_len == t[1].len &&
		    !memcmp(l->items[i].key, t[1].p, t[1].len)) {
			batch_flush(l);
			break;
		}
	}
	l->type = type;
	it = &l->items[l->n++];
	*it = (struct rkv_kv){ .key = t[1].p, .key_len = t[1].len };
	if (put) {
		it->val = t[2].p;
		it->val_len = t[2].len;
	}
	/* a flush above left these words where they are: keep them */
	l->used = end_used;
	if (l->n == BATCH_MAX)
		batch_flush(l);
	return 1;
}

static void line_help(int interactive)
{
	if (!interactive) {
		/* --pipe: one line, as for every command */
		puts("commands: get KEY | put KEY VALUE | del KEY | exists KEY... "
		     "| mget KEY... | mput KEY VALUE... | incr KEY [BY] | "
		     "decr KEY [BY] | scan [PATTERN] [--count N] | stat | cluster | "
		     "ping | help | quit");
		return;
	}
	puts("  get KEY               the value, in quotes; (nil) if absent\n"
	     "  put KEY VALUE         store VALUE: OK\n"
	     "  del KEY               1 if it was deleted, 0 if absent\n"
	     "  exists KEY...         how many of the keys are present\n"
	     "  mget KEY...           the values on one line\n"
	     "  mput KEY VALUE...     store each pair: OK\n"
	     "  incr KEY [BY]         add BY (default 1) to an 8-byte counter\n"
	     "  decr KEY [BY]         subtract BY likewise\n"
	     "  scan [PAT] [--count N] the keys matching the glob PAT, quoted, on "
	     "one line\n"
	     "  stat                  per-server counters, one line\n"
	     "  cluster               the map and each server's state, one line\n"
	     "  ping                  PONG when every server answers\n"
	     "  help, quit, exit      (or Ctrl-D)\n"
	     "words split on blanks; \"...\" keeps blanks; \\n \\t \\\\ \\\" "
	     "\\xHH escapes");
}

/* A line that is not batched: its command, at once. */
static void line_cmd(struct line_ctx *l)
{
	struct tok *t = l->toks;
	const struct cmd_def *d;
	char **argv;
	size_t *lens;
	int rc;

	if (!strcmp(t[0].p, "quit") || !strcmp(t[0].p, "exit")) {
		l->quit = 1;
		return;
	}
	if (!strcmp(t[0].p, "help")) {
		line_help(l->interactive);
		return;
	}
	d = find_cmd(t[0].p);
	if (!d || strlen(t[0].p) != t[0].len) {
		err_line("unknown command '%s': get, put, del, exists, mget, "
			 "mput, incr, decr, scan, stat, cluster, ping, help or quit\n",
			 shown(t[0].p, t[0].len, 1));
		return;
	}
	/* on the heap: a line of a million bytes may hold 500000 words */
	argv = malloc(l->ntoks * sizeof(*argv));
	lens = malloc(l->ntoks * sizeof(*lens));
	if (!argv || !lens || l->ntoks > INT_MAX) {
		err_line("%s: out of memory\n", d->name);
		free(argv);
		free(lens);
		return;
	}
	for (size_t i = 1; i < l->ntoks; i++) {
		argv[i - 1] = t[i].p;
		lens[i - 1] = t[i].len;
	}
	rc = load_args(d, (int)l->ntoks - 1, argv, lens, l->x);
	log_reset();
	if (!rc)
		d->fn(l->x);
	free(argv);
	free(lens);
	free_args(l->x);
	l->x->args = NULL;
	l->x->nargs = 0;
}

/* One line of input (len bytes, no newline). */
static void line_run(struct line_ctx *l, const char *line, size_t len)
{
	const char *why = NULL;
	size_t skip = strspn(line, " \t");
	long used;

	if (len && line[len - 1] == '\r')
		len--; /* CRLF input */
	if (skip >= len || line[skip] == '#')
		return; /* a blank line or a comment asks nothing */
	if (l->used + len + 1 > ARENA_CAP)
		batch_flush(l);
	used = tokenize(l, line, len, l->arena + l->used, &why);
	if (used < 0) {
		batch_flush(l);
		err_line("%s\n", why);
		return;
	}
	/* command words in any case, as redis-cli takes them */
	for (char *p = l->toks[0].p; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	if (batch_add(l, l->used + (size_t)used))
		return;
	batch_flush(l);
	line_cmd(l);
}

/* Answer all that is pending: before blocking, and at the end. */
static void line_sync(struct line_ctx *l)
{
	batch_flush(l);
	fflush(stdout);
}

/* stdin as lines, read in large blocks for --pipe. */
struct reader {
	char *buf;
	size_t cap, start, end;
	int eof, skipping; /* skipping: the rest of a line over LINE_CAP */
};

/*
 * The next line of stdin into *len bytes (no newline): NULL at the end.
 * Before a read that may block, the pending answers go out.
 */
static char *reader_next(struct line_ctx *l, struct reader *r, size_t *len)
{
	for (;;) {
		char *p = r->buf + r->start;
		char *nl = memchr(p, '\n', r->end - r->start);
		ssize_t n;

		if (nl && r->skipping) {
			r->skipping = 0;
			r->start = (size_t)(nl + 1 - r->buf);
			continue;
		}
		if (nl || (r->eof && r->start < r->end && !r->skipping)) {
			*len = nl ? (size_t)(nl - p) : r->end - r->start;
			r->start = nl ? (size_t)(nl + 1 - r->buf) : r->end;
			return p;
		}
		if (r->eof)
			return NULL;
		memmove(r->buf, p, r->end - r->start);
		r->end -= r->start;
		r->start = 0;
		if (r->skipping)
			r->end = 0;
		if (r->end == r->cap && r->cap >= LINE_CAP) {
			line_sync(l);
			err_line("a line is longer than %u bytes\n", LINE_CAP);
			r->skipping = 1;
			r->end = 0;
		} else if (r->end == r->cap) {
			size_t cap = 2 * r->cap < LINE_CAP ? 2 * r->cap
							     : LINE_CAP;
			char *b = realloc(r->buf, cap);

			if (!b) {
				line_sync(l);
				err_line("out of memory\n");
				return NULL;
			}
			r->buf = b;
			r->cap = cap;
		}
		line_sync(l);
		n = read(0, r->buf + r->end, r->cap - r->end);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err_line("cannot read stdin: %s\n", strerror(errno));
			return NULL;
		}
		if (n == 0)
			r->eof = 1;
		r->end += (size_t)n;
	}
}

/* The prompt: "rkv ADDR> ", or "rkv N servers> ". */
static void line_prompt(struct rkv_client *c, char *buf, size_t cap)
{
	unsigned n = rkv_client_nservers(c);

	if (n == 1)
		snprintf(buf, cap, "rkv %s> ", rkv_client_server_addr(c, 0));
	else
		snprintf(buf, cap, "rkv %u servers> ", n);
}

/*
 * --pipe (interactive 0) or the prompt: the commands of stdin, one a
 * line.  Returns the exit status: 0 when no line failed, else 2.
 */
static int run_lines(struct ctx *x, int interactive)
{
	struct line_ctx l = { .x = x, .interactive = interactive };
	struct reader r = { .cap = 1 << 16 };
	char prompt[300];
	char *line;
	size_t len;

	l.room = malloc((size_t)BATCH_MAX * MGET_ROOM);
	l.big = malloc(RKV_VALUE_MAX);
	l.arena = malloc(ARENA_CAP);
	r.buf = malloc(r.cap);
	if (!l.room || !l.big || !l.arena || !r.buf) {
		err_line("out of memory\n");
	} else if (interactive) {
		line_prompt(x->c, prompt, sizeof(prompt));
		if (rkv_line_open(prompt))
			err_line("cannot start the prompt\n");
		while (!l.quit && (line = rkv_line_read())) {
			line_run(&l, line, strlen(line));
			line_sync(&l);
			free(line);
		}
		if (!l.quit)
			putchar('\n'); /* Ctrl-D: the shell's prompt on a line */
		rkv_line_close();
	} else {
		while (!l.quit && (line = reader_next(&l, &r, &len)))
			line_run(&l, line, len);
	}
	line_sync(&l);
	free(r.buf);
	free(l.toks);
	free(l.arena);
	free(l.big);
	free(l.room);
	return g_line_errors ? 2 : 0;
}

/* --raw, --no-raw, --json: one of them.  Returns 0, or 2 after a line. */
/* --client-stats: the client's own counters, one line on stderr. */
static void print_client_stats(const struct rkv_client *c)
{
	struct rkv_client_stats st;

	rkv_client_stats(c, &st);
	fprintf(stderr, "rkv: client: get %llu (%llu RTTs), put %llu (%llu "
		"RTTs), del %llu (%llu RTTs), rmw %llu (%llu RTTs), retries "
		"%llu, mget batches %llu (%llu RTTs), doorbells %llu, cache "
		"hits %llu misses %llu\n",
		(unsigned long long)st.get.ops, (unsigned long long)st.get.rtts,
		(unsigned long long)st.put.ops, (unsigned long long)st.put.rtts,
		(unsigned long long)st.del.ops, (unsigned long long)st.del.rtts,
		(unsigned long long)st.rmw.ops, (unsigned long long)st.rmw.rtts,
		(unsigned long long)(st.get.retries + st.put.retries +
				     st.del.retries + st.rmw.retries),
		(unsigned long long)st.mget_batches,
		(unsigned long long)st.mget_rtts,
		(unsigned long long)st.doorbells,
		(unsigned long long)st.cache_hits,
		(unsigned long long)st.cache_misses);
	if (st.servers_down)
		fprintf(stderr, "rkv: client: DEGRADED: %llu server%s down, "
			"writes to %llu of 4096 partitions fail until %s "
			"back\n", (unsigned long long)st.servers_down,
			st.servers_down == 1 ? "" : "s",
			(unsigned long long)st.parts_degraded,
			st.servers_down == 1 ? "it is" : "they are");
	if (st.lease_waits)
		fprintf(stderr, "rkv: client: %llu read%s waited: a server's "
			"registration was not known live (paused, cut off from "
			"etcd, or replaced)\n",
			(unsigned long long)st.lease_waits,
			st.lease_waits == 1 ? "" : "s");
}

static int set_mode(enum out_mode m, const char *opt)
{
	if (g_mode != OUT_AUTO && g_mode != m) {
		err_line("%s: give one of --raw, --no-raw and "
				"--json\n", opt);
		return 2;
	}
	g_mode = m;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "servers", required_argument, NULL, 's' },
		{ "cluster", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ "read-only", no_argument, NULL, 'r' },
		{ "secret-file", required_argument, NULL, 'S' },
		{ "raw", no_argument, NULL, 'R' },
		{ "no-raw", no_argument, NULL, 'P' },
		{ "json", no_argument, NULL, 'J' },
		{ "pipe", no_argument, NULL, 'L' },
		{ "count", required_argument, NULL, 'C' },
		{ "client-stats", no_argument, NULL, 'X' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct rkv_client_opts opts;
	struct ctx x = { .c = NULL };
	const struct cmd_def *d;
	const char *servers = getenv("RKV_SERVERS"), *cluster = NULL;
	const char *secret = getenv("RKV_SECRET_FILE");
	const char *servers_from = "$RKV_SERVERS";
	int ch, rc, status, pipe = 0, line, tty, client_stats = 0;

	if (argc > 1 && !strcmp(argv[1], "admin"))
		return rkv_admin_main(argc - 1, argv + 1);
	rkv_client_opts_init(&opts);
	opterr = 0; /* one line of ours instead of getopt's and the usage */
	while ((ch = getopt_long(argc, argv, ":s:c:t:rh", longopts, NULL)) !=
	       -1) {
		switch (ch) {
		case 's':
			servers = optarg;
			servers_from = "--servers";
			break;
		case 'c':
			cluster = optarg;
			break;
		case 't': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (!*optarg || *end || v <= 0 || v > 3600000) {
				err_line("--timeout: '%s' is not a "
						"number of milliseconds (1 to "
						"3600000)\n", shown_str(optarg));
				return 2;
			}
			opts.timeout_ms = (unsigned)v;
			opts.connect_timeout_ms = (unsigned)v;
			break;
		}
		case 'r':
			opts.read_only = 1;
			break;
		case 'S':
			secret = optarg;
			break;
		case 'R':
		case 'P':
		case 'J':
			if (set_mode(ch == 'R' ? OUT_RAW : ch == 'P' ? OUT_PRINT
								  : OUT_JSON,
				     argv[optind - 1]))
				return 2;
			break;
		case 'L':
			pipe = 1;
			break;
		case 'C':
			g_count = optarg;
			break;
		case 'X':
			client_stats = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			return rkv_version_print("rkv", RKV_PROTO_VERSION) ? 2 : 0;
		case ':':
			err_line("option '%s' needs a value (try "
					"--help)\n", argv[optind - 1]);
			return 2;
		default:
			bad_option(argv[optind - 1], optopt, longopts);
			return 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (pipe && argc) {
		err_line("--pipe reads its commands from stdin: no command "
			 "'%s' with it\n", shown_str(argv[0]));
		return 2;
	}
	/* no command at a terminal: the prompt, when this build has one */
	tty = isatty(0) && isatty(1);
	line = pipe || (argc < 1 && tty && rkv_line_available());
	if (argc < 1 && !line) {
		/* a first line that says what is missing, then the hint */
		err_line("no command: give one of get, put, del, "
			 "stat or admin%s\n",
			 tty ? " (this rkv was built without libedit: no "
			       "prompt)"
			     : "");
		usage(stderr);
		return 2;
	}
	if (line && g_mode == OUT_RAW) {
		err_line("--raw: %s answers one line per command, printable "
			 "or --json\n", pipe ? "--pipe" : "the prompt");
		return 2;
	}
	if (g_count && (line || strcmp(argv[0], "scan"))) {
		err_line("--count goes with scan only%s\n",
			 line ? " (in a line: scan [PATTERN] --count N)" : "");
		return 2;
	}
	d = line ? NULL : find_cmd(argv[0]);
	if (!line && !d) {
		err_line("unknown command '%s': get, put, del, exists, mget, "
			 "mput, incr, decr, scan, stat, cluster or ping (try --help)\n",
			 shown_str(argv[0]));
		return 2;
	}
	if (!line && load_args(d, argc - 1, argv + 1, NULL, &x)) {
		free_args(&x);
		return 2;
	}
	if (cluster) {
		opts.cluster_file = cluster;
	} else {
		if (!servers || !*servers) {
			servers = "tcp://127.0.0.1:7000";
			servers_from = "the default server";
		}
		if (check_servers(servers, servers_from)) {
			free_args(&x);
			return 2;
		}
		opts.servers = servers;
	}
	log_level_from_env();
	opts.name = "rkv-cli";
	opts.secret_file = secret && *secret ? secret : NULL;
	/* one command: little to cache; lines: a batch in flight at once */
	opts.max_inflight = line ? BATCH_MAX : 4;
	opts.cache_entries = line ? 65536 : 16;
	opts.log_fn = on_log;
	opts.log_arg = &g_log;
	rc = rkv_client_create(&opts, &x.c);
	if (rc) {
		free_args(&x);
		return fail_connect(cluster ? cluster : opts.servers, rc, &opts);
	}
	x.o = &opts;
	log_reset();
	if (line) {
		g_line = 1;
		status = run_lines(&x, !pipe);
		g_line = 0; /* a write error below goes to stderr */
	} else {
		status = load_stdin(&x);
		if (!status)
			status = d->fn(&x);
	}
	if (fflush(stdout) && status < 2) {
		err_line("%s: cannot write stdout: %s\n",
			 x.cmd ? x.cmd : "--pipe", strerror(errno));
		status = 2;
	}
	if (client_stats)
		print_client_stats(x.c);
	rkv_client_destroy(x.c);
	free_args(&x);
	return status;
}
