/* SPDX-License-Identifier: MIT */
/*
 * rkv_cli.c - rkv, the command-line client.
 *
 *   rkv [--servers A,B | --cluster FILE] get KEY
 *   rkv ... put KEY VALUE        (VALUE "-" reads stdin)
 *   rkv ... del KEY
 *   rkv ... stat                 (per-server counters)
 *   rkv --version
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
 * usage as a hint).  librkv logs nothing else here; set
 * RKV_LOG_LEVEL=debug|info|warn|error to see its messages as they come.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "msg.h"
#include "rkv.h"
#include "rkv_admin.h"
#include "transport.h"
#include "version.h"

#define SHOWN_KEY_MAX 48 /* bytes of a key shown in an error line */

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

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rkv [--servers [NAME=]ADDR[,...] | --cluster FILE]\n"
		"           [--timeout MS] [--read-only] [--secret-file FILE]\n"
		"           COMMAND\n"
		"       rkv --help | --version\n"
		"commands:\n"
		"  get KEY            print the value (exit 1 if absent)\n"
		"  put KEY VALUE      store VALUE (\"-\": read stdin)\n"
		"  del KEY            delete (exit 1 if absent)\n"
		"  stat               per-server counters\n"
		"  admin ...          a cluster in etcd (rkv admin --help)\n"
		"ADDR: tcp://HOST:PORT, shm:///NAME, verbs://HOST:PORT\n"
		"cluster FILE: one server per line, \"NAME ADDR\" or \"ADDR\", "
		"any order;\n  or etcd://HOST:PORT/CLUSTER (rkv admin)\n"
		"default servers: $RKV_SERVERS, else tcp://127.0.0.1:7000\n"
		"default secret file: $RKV_SECRET_FILE (mode 0600 or "
		"stricter)\n"
		"keys: 1 to %u bytes; values: at most %u bytes\n"
		"exit status: 0 done, 1 key not found, 2 any other error\n",
		RKV_KEY_MAX, RKV_VALUE_MAX);
}

/* A key as an error line shows it: printable bytes, at most
 * SHOWN_KEY_MAX of them. */
static const char *shown_key(const char *key)
{
	static char buf[SHOWN_KEY_MAX + 4];
	size_t n = strlen(key), i;

	for (i = 0; i < n && i < SHOWN_KEY_MAX; i++)
		buf[i] = key[i] >= 0x20 && key[i] < 0x7f ? key[i] : '?';
	snprintf(buf + i, sizeof(buf) - i, "%s", n > SHOWN_KEY_MAX ? "..." : "");
	return buf;
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
		fprintf(stderr, "rkv: out of memory\n");
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
			fprintf(stderr,
				"rkv: %s: '%s' is not an address (tcp://HOST:PORT, "
				"shm:///NAME or verbs://HOST:PORT)\n",
				from, s);
			rc = 2;
			break;
		}
		if (n++ == 0) {
			first = a;
		} else if (a.provider != first.provider) {
			fprintf(stderr,
				"rkv: %s: '%s' is not a %s address like the first "
				"(one client uses one transport)\n",
				from, s, rkv_tp_provider_str(first.provider));
			rc = 2;
			break;
		}
	}
	if (!rc && !n) {
		fprintf(stderr, "rkv: %s: no address\n", from);
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
				fprintf(stderr, "rkv: option '--%s' takes no "
						"value (try --help)\n", o->name);
				return;
			}
		}
	}
	if (opt && strncmp(arg, "--", 2))
		fprintf(stderr, "rkv: unknown option '-%c' (try --help)\n", opt);
	else
		fprintf(stderr, "rkv: unknown option '%s' (try --help)\n", arg);
}

static int check_key(const char *cmd, const char *key)
{
	size_t n = strlen(key);

	if (n == 0) {
		fprintf(stderr, "rkv: %s: the key is empty\n", cmd);
		return 2;
	}
	if (n > RKV_KEY_MAX) {
		fprintf(stderr,
			"rkv: %s %s: the key is %zu bytes, longer than %u "
			"(RKV_KEY_MAX)\n",
			cmd, shown_key(key), n, RKV_KEY_MAX);
		return 2;
	}
	return 0;
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
	fprintf(stderr, "rkv: cannot connect to %s: %s%s%s%s%s%s\n", where,
		strerror(-rc), detail || hint ? " (" : "", detail ? detail : "",
		detail && hint ? "; " : "", hint ? hint : "",
		detail || hint ? ")" : "");
	return 2;
}

/*
 * One line for a failed operation on key (stat: key NULL) at server addr.
 * Returns the exit status: 1 for -ENOENT, else 2.
 */
static int fail_op(const char *cmd, const char *key, const char *addr, int rc,
		   const struct rkv_client_opts *o)
{
	const char *detail = log_detail(rc), *hint = NULL;
	char what[SHOWN_KEY_MAX + 16];

	snprintf(what, sizeof(what), "%s%s%s", cmd, key ? " " : "",
		 key ? shown_key(key) : "");
	if (rc == -ENOENT) {
		fprintf(stderr, "rkv: %s: not found\n", what);
		return 1;
	}
	if (rc == -EACCES && o->read_only) {
		fprintf(stderr, "rkv: %s: %s (a --read-only client cannot "
				"write)\n", what, strerror(-rc));
		return 2;
	}
	switch (rc) {
	case -ENOSPC:
		hint = "full: its index (--capacity) or data memory (--memory)";
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
	fprintf(stderr, "rkv: %s: %s (server %s%s%s%s%s)\n", what,
		strerror(-rc), addr, detail ? ": " : "", detail ? detail : "",
		hint ? (detail ? "; " : ": ") : "", hint ? hint : "");
	return 2;
}

/*
 * All of stdin, at most RKV_VALUE_MAX + 1 bytes (one more than a value may
 * hold, so that a larger input is seen as such).  NULL with errno set on a
 * read error.
 */
static char *read_stdin(size_t *len)
{
	size_t cap = RKV_VALUE_MAX + 1, n = 0;
	char *buf = malloc(cap);

	if (!buf)
		return NULL;
	while (n < cap) {
		ssize_t r = read(0, buf + n, cap - n);

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

static void print_stats(const char *addr, const struct rkv_server_stats *st)
{
	printf("server %s\n", addr);
	printf("  uptime_ms       %llu\n", (unsigned long long)st->uptime_ms);
	printf("  clients         %llu (total %llu)\n",
	       (unsigned long long)st->clients,
	       (unsigned long long)st->clients_total);
	printf("  keys            %llu\n", (unsigned long long)st->keys);
	printf("  buckets         %llu\n", (unsigned long long)st->nbuckets);
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
}

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

/* Run cmd (its arguments in argv[1..]) on c.  Returns the exit status. */
static int run(struct rkv_client *c, const struct rkv_client_opts *o,
	       const char *cmd, char **argv)
{
	const char *key = argv[1];
	size_t klen = key ? strlen(key) : 0;
	char label[400];
	const char *addr = key ? server_label(c, rkv_client_route(c, key, klen),
					      label, sizeof(label))
			       : NULL;
	int rc, status = 0;

	log_reset();
	if (!strcmp(cmd, "get")) {
		static char buf[RKV_VALUE_MAX];
		size_t len = 0;

		rc = rkv_get(c, key, klen, buf, sizeof(buf), &len);
		if (rc)
			return fail_op(cmd, key, addr, rc, o);
		if (fwrite(buf, 1, len, stdout) != len ||
		    (isatty(1) && putchar('\n') == EOF) || fflush(stdout)) {
			fprintf(stderr, "rkv: get %s: cannot write stdout: %s\n",
				shown_key(key), strerror(errno));
			return 2;
		}
		return 0;
	}
	if (!strcmp(cmd, "put")) {
		const char *v = argv[2];
		char *in = NULL;
		size_t len = strlen(v);

		if (!strcmp(v, "-")) {
			in = read_stdin(&len);
			if (!in) {
				fprintf(stderr, "rkv: put %s: cannot read stdin: "
						"%s\n", shown_key(key),
					strerror(errno));
				return 2;
			}
			v = in;
		}
		if (len > RKV_VALUE_MAX) { /* stdin; main checked argv */
			fprintf(stderr,
				"rkv: put %s: the value on stdin is larger than "
				"%u bytes (RKV_VALUE_MAX)\n",
				shown_key(key), RKV_VALUE_MAX);
			free(in);
			return 2;
		}
		rc = rkv_put(c, key, klen, v, len);
		free(in);
		return rc ? fail_op(cmd, key, addr, rc, o) : 0;
	}
	if (!strcmp(cmd, "del")) {
		rc = rkv_delete(c, key, klen);
		return rc ? fail_op(cmd, key, addr, rc, o) : 0;
	}
	for (unsigned i = 0; i < rkv_client_nservers(c); i++) {
		struct rkv_server_stats st;
		const char *a = server_label(c, i, label, sizeof(label));

		log_reset();
		rc = rkv_server_stats(c, i, &st);
		if (rc) {
			/* one line in all: the first server that failed */
			if (!status)
				status = fail_op(cmd, NULL, a, rc, o);
			continue;
		}
		print_stats(a, &st);
	}
	return status;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "servers", required_argument, NULL, 's' },
		{ "cluster", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ "read-only", no_argument, NULL, 'r' },
		{ "secret-file", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct rkv_client_opts opts;
	struct rkv_client *c = NULL;
	const char *servers = getenv("RKV_SERVERS"), *cluster = NULL;
	const char *secret = getenv("RKV_SECRET_FILE");
	const char *servers_from = "$RKV_SERVERS";
	int ch, rc, status;

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
				fprintf(stderr, "rkv: --timeout: '%s' is not a "
						"number of milliseconds (1 to "
						"3600000)\n", optarg);
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
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			return rkv_version_print("rkv", RKV_PROTO_VERSION) ? 2 : 0;
		case ':':
			fprintf(stderr, "rkv: option '%s' needs a value (try "
					"--help)\n", argv[optind - 1]);
			return 2;
		default:
			bad_option(argv[optind - 1], optopt, longopts);
			return 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1) {
		/* a first line that says what is missing, then the hint */
		fprintf(stderr, "rkv: no command: give one of get, put, del, "
				"stat or admin\n");
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[0];
	int need = !strcmp(cmd, "get") || !strcmp(cmd, "del") ? 2 :
		   !strcmp(cmd, "put") ? 3 : !strcmp(cmd, "stat") ? 1 : -1;

	if (need < 0) {
		fprintf(stderr, "rkv: unknown command '%s': get, put, del or "
				"stat (try --help)\n", cmd);
		return 2;
	}
	if (argc != need) {
		fprintf(stderr, "rkv: %s takes %s, not %d argument%s\n", cmd,
			need == 1 ? "no arguments" : need == 2 ? "KEY"
							       : "KEY VALUE",
			argc - 1, argc == 2 ? "" : "s");
		return 2;
	}
	if (need > 1 && check_key(cmd, argv[1]))
		return 2;
	if (need == 3 && strcmp(argv[2], "-") &&
	    strlen(argv[2]) > RKV_VALUE_MAX) {
		fprintf(stderr, "rkv: put %s: the value is %zu bytes, larger "
				"than %u (RKV_VALUE_MAX)\n", shown_key(argv[1]),
			strlen(argv[2]), RKV_VALUE_MAX);
		return 2;
	}
	if (cluster) {
		opts.cluster_file = cluster;
	} else {
		if (!servers || !*servers) {
			servers = "tcp://127.0.0.1:7000";
			servers_from = "the default server";
		}
		if (check_servers(servers, servers_from))
			return 2;
		opts.servers = servers;
	}
	log_level_from_env();
	opts.name = "rkv-cli";
	opts.secret_file = secret && *secret ? secret : NULL;
	opts.max_inflight = 4;
	opts.cache_entries = 16;
	opts.log_fn = on_log;
	opts.log_arg = &g_log;
	rc = rkv_client_create(&opts, &c);
	if (rc)
		return fail_connect(cluster ? cluster : opts.servers, rc, &opts);
	status = run(c, &opts, cmd, argv);
	rkv_client_destroy(c);
	return status;
}
