/* SPDX-License-Identifier: MIT */
/*
 * rkv.c - the command-line client.
 *
 *   rkv [--servers A,B | --cluster FILE] get KEY
 *   rkv ... put KEY VALUE        (VALUE "-" reads stdin)
 *   rkv ... del KEY
 *   rkv ... stat                 (per-server counters)
 *
 * --secret-file FILE (default $RKV_SECRET_FILE) answers the challenge of
 * servers started with --secret-file; --read-only asks for read-only
 * rkeys (put and del then fail with "Permission denied").
 *
 * Exit status: 0 success, 1 key not found, 2 any other error, with one
 * line on stderr saying what went wrong.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rkv.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rkv [--servers ADDR[,ADDR...] | --cluster FILE]\n"
		"           [--timeout MS] [--read-only] [--secret-file FILE]\n"
		"           COMMAND\n"
		"commands:\n"
		"  get KEY            print the value (exit 1 if absent)\n"
		"  put KEY VALUE      store VALUE (\"-\": read stdin)\n"
		"  del KEY            delete (exit 1 if absent)\n"
		"  stat               per-server counters\n"
		"ADDR: tcp://HOST:PORT, shm:///NAME, verbs://HOST:PORT\n"
		"default servers: $RKV_SERVERS, else tcp://127.0.0.1:7000\n"
		"default secret file: $RKV_SECRET_FILE (mode 0600 or "
		"stricter)\n");
}

static int fail(const char *what, int rc)
{
	fprintf(stderr, "rkv: %s: %s\n", what,
		rc == -ENOENT ? "not found" : strerror(-rc));
	return rc == -ENOENT ? 1 : 2;
}

static char *read_stdin(size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap);

	if (!buf)
		return NULL;
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *nb;

			if (cap > RKV_VALUE_MAX)
				break;
			cap *= 2;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
		}
		r = read(0, buf + n, cap - n);
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

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "servers", required_argument, NULL, 's' },
		{ "cluster", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ "read-only", no_argument, NULL, 'r' },
		{ "secret-file", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct rkv_client_opts opts;
	struct rkv_client *c = NULL;
	const char *servers = getenv("RKV_SERVERS"), *cluster = NULL;
	const char *secret = getenv("RKV_SECRET_FILE");
	int ch, rc, status = 0;

	rkv_client_opts_init(&opts);
	while ((ch = getopt_long(argc, argv, "s:c:t:rh", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			servers = optarg;
			break;
		case 'c':
			cluster = optarg;
			break;
		case 't': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || v <= 0 || v > 3600000) {
				fprintf(stderr, "rkv: --timeout: bad value '%s'\n",
					optarg);
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
		default:
			usage(stderr);
			return 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1) {
		fprintf(stderr, "rkv: no command (try --help)\n");
		return 2;
	}
	const char *cmd = argv[0];
	int need = !strcmp(cmd, "get") || !strcmp(cmd, "del") ? 2 :
		   !strcmp(cmd, "put") ? 3 : !strcmp(cmd, "stat") ? 1 : -1;

	if (need < 0) {
		fprintf(stderr, "rkv: unknown command '%s' (try --help)\n", cmd);
		return 2;
	}
	if (argc != need) {
		fprintf(stderr, "rkv: %s takes %d argument%s\n", cmd, need - 1,
			need == 2 ? "" : "s");
		return 2;
	}
	if (cluster) {
		opts.cluster_file = cluster;
	} else {
		opts.servers = servers && *servers ? servers
						   : "tcp://127.0.0.1:7000";
	}
	opts.name = "rkv-cli";
	opts.secret_file = secret && *secret ? secret : NULL;
	opts.max_inflight = 4;
	opts.cache_entries = 16;
	rc = rkv_client_create(&opts, &c);
	if (rc) {
		fprintf(stderr, "rkv: cannot connect to %s: %s%s\n",
			cluster ? cluster : opts.servers, strerror(-rc),
			rc == -EACCES ? " (authentication failed: wrong or "
					"no secret; --secret-file or "
					"$RKV_SECRET_FILE)" :
			rc == -EPERM && opts.secret_file ?
					" (secret file open to group or "
					"others? chmod 600 it)" : "");
		return 2;
	}
	if (!strcmp(cmd, "get")) {
		static char buf[RKV_VALUE_MAX];
		size_t len = 0;

		rc = rkv_get(c, argv[1], strlen(argv[1]), buf, sizeof(buf), &len);
		if (rc) {
			status = fail(argv[1], rc);
		} else if (fwrite(buf, 1, len, stdout) != len ||
			   (isatty(1) && putchar('\n') == EOF)) {
			status = fail("stdout", -EIO);
		}
	} else if (!strcmp(cmd, "put")) {
		const char *v = argv[2];
		char *in = NULL;
		size_t len = strlen(v);

		if (!strcmp(v, "-")) {
			in = read_stdin(&len);
			if (!in) {
				status = fail("stdin", -EIO);
				goto out;
			}
			v = in;
		}
		rc = rkv_put(c, argv[1], strlen(argv[1]), v, len);
		if (rc)
			status = fail(argv[1], rc);
		free(in);
	} else if (!strcmp(cmd, "del")) {
		rc = rkv_delete(c, argv[1], strlen(argv[1]));
		if (rc)
			status = fail(argv[1], rc);
	} else {
		for (unsigned i = 0; i < rkv_client_nservers(c); i++) {
			struct rkv_server_stats st;

			rc = rkv_server_stats(c, i, &st);
			if (rc) {
				status = fail(rkv_client_server_addr(c, i), rc);
				continue;
			}
			printf("server %s\n", rkv_client_server_addr(c, i));
			printf("  uptime_ms       %llu\n", (unsigned long long)st.uptime_ms);
			printf("  clients         %llu (total %llu)\n",
			       (unsigned long long)st.clients,
			       (unsigned long long)st.clients_total);
			printf("  keys            %llu\n", (unsigned long long)st.keys);
			printf("  buckets         %llu\n", (unsigned long long)st.nbuckets);
			printf("  data_len        %llu\n", (unsigned long long)st.data_len);
			printf("  data_free       %llu\n", (unsigned long long)st.data_free);
			printf("  data_grace      %llu\n", (unsigned long long)st.data_grace);
			printf("  chunks_granted  %llu\n", (unsigned long long)st.chunks_granted);
			printf("  blocks_returned %llu\n", (unsigned long long)st.blocks_returned);
			printf("  rebuilds        %llu\n", (unsigned long long)st.rebuilds);
			printf("  bad_msgs        %llu\n", (unsigned long long)st.bad_msgs);
			printf("  ctrl_msgs       %llu\n", (unsigned long long)st.ctrl_msgs);
			printf("  auth_failures   %llu\n", (unsigned long long)st.auth_failures);
		}
	}
out:
	rkv_client_destroy(c);
	return status;
}
