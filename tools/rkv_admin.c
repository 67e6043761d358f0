/* SPDX-License-Identifier: MIT */
/*
 * rkv_admin.c - `rkv admin`: the operator's view and changes of a cluster
 * kept in etcd (common/registry.h).
 *
 *   rkv admin --cluster etcd://HOST:PORT/CLUSTER status
 *   rkv admin --cluster URL init [NAME...]
 *   rkv admin --cluster URL map
 *
 * status: the map's epoch and servers, each with its state (up: registered
 * and answering; down: not registered or not answering) and its keys, and
 * the registered servers the map does not hold.  init: the first map
 * (epoch 1) from the registered servers (all, or those named), put with
 * compare-and-swap (only if there is none), refusing a server of another
 * protocol version or a bad name.  map: the map's text.  join NAME and
 * drain NAME: the next map (epoch + 1, with the registered server NAME
 * added, or NAME taken out) is put in etcd as "next", the keys that move
 * are moved live (client/migrate.h), then the next map is published with
 * compare-and-swap on the map's revision, "next" removed and the moved
 * slots cleaned.  A migration that stopped half-way (an error, a kill) is
 * resumed by the next join or drain, whatever it names.  failover NAME: a
 * dead server's backups promoted (client/failover.h): the next map (NAME
 * out) as "next", every survivor fenced at its epoch, their copies made
 * consistent, the map published, then the copies NAME held written again
 * on the servers that replace it ("rebuild" in etcd until that is done;
 * `rkv admin rebuild` finishes one that stopped).  sweep: one fenced step
 * with the same servers that drops the tombstones of deleted keys.
 * Every error is one line; exit 0 done, 2 on an error.
 */
#include "rkv_admin.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "cmap.h"
#include "etcd.h"
#include "failover.h"
#include "migrate.h"
#include "msg.h"
#include "registry.h"
#include "rkv.h"
#include "rtime.h"

#define ETCD_MS 3000

struct admin {
	const char *url;
	struct rkv_reg_url u;
	struct rkv_etcd *e;
	unsigned timeout_ms;
	struct rkv_reg_server *reg; /* the registered servers */
	size_t nreg;
	unsigned long long rb_done, rb_total; /* load_rebuild: progress */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rkv admin --cluster etcd://HOST:PORT/CLUSTER COMMAND\n"
		"commands:\n"
		"  status          the map, each server's state and keys, the\n"
		"                  registered servers not in the map\n"
		"  init [--replicas R] [NAME...]\n"
		"                  make the first map (epoch 1) of the registered\n"
		"                  servers (all, or those named), keeping R copies\n"
		"                  of each key (1-3, default 1)\n"
		"  map             print the map\n"
		"  join NAME       add the registered server NAME, moving its\n"
		"                  share of the keys to it while clients work\n"
		"  drain NAME      move NAME's keys to the others, then take it\n"
		"                  out of the map (it may be stopped after)\n"
		"                  (at replicas 2-3 the new copies are made\n"
		"                  first, then the map changes; a join or drain\n"
		"                  that stopped half-way is resumed by the next\n"
		"                  join or drain)\n"
		"  failover NAME   NAME is dead (its registration lapsed): its\n"
		"                  backups become primaries in the next map, then\n"
		"                  the missing copies are written again (maps of\n"
		"                  replicas 2-3, tcp and verbs); run again to\n"
		"                  resume one that stopped\n"
		"  rebuild         finish the copies a stopped failover left\n"
		"  sweep           drop the tombstones deletes leave at replicas\n"
		"                  2-3 (their slots and blocks), in one fenced\n"
		"                  step (clients wait for its map meanwhile)\n"
		"  watch [--grace MS] [--sweep-every S]\n"
		"                  the coordinator: fail over each server of the\n"
		"                  map whose registration lapsed (5 s without\n"
		"                  renewing) or that restarted empty, MS\n"
		"                  (default 0) after; sweep every S seconds\n"
		"                  (default: never); one per cluster (others\n"
		"                  wait)\n"
		"default cluster: $RKV_CLUSTER\n");
}

/* One line "rkv admin: CMD: ..."; returns the exit status, 2. */
static int fail(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int fail(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rkv admin: %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 2;
}

/* The registered servers, sorted by name (etcd's order). */
static int load_registered(struct admin *a, const char *cmd)
{
	char prefix[RKV_REG_KEY_MAX], why[300];
	struct rkv_etcd_kv *kvs = NULL;
	size_t n = 0, plen;
	int rc;

	rkv_reg_servers_prefix(&a->u, prefix, sizeof(prefix));
	plen = strlen(prefix);
	rc = rkv_etcd_range(a->e, prefix, &kvs, &n, NULL);
	if (rc)
		return fail(cmd, "%s", rkv_etcd_why(a->e));
	rkv_free(a->reg); /* a watch loads them again and again */
	a->nreg = 0;
	a->reg = rkv_calloc(n ? n : 1, sizeof(*a->reg));
	if (!a->reg) {
		rkv_etcd_kv_free(kvs, n);
		return fail(cmd, "%s", "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		if (rkv_reg_server_parse(kvs[i].key + plen, kvs[i].val,
					 kvs[i].val_len, &a->reg[a->nreg], why,
					 sizeof(why)) == 0)
			a->nreg++;
		else
			fprintf(stderr, "rkv admin: %s: ignoring %s: %s\n", cmd,
				kvs[i].key, why);
	}
	rkv_etcd_kv_free(kvs, n);
	return 0;
}

static const struct rkv_reg_server *registered(const struct admin *a,
						const char *name)
{
	for (size_t i = 0; i < a->nreg; i++)
		if (!strcmp(a->reg[i].name, name))
			return &a->reg[i];
	return NULL;
}

/* The run of server s registered now is not the one the map was made
 * with (a restart: it holds none of the copies the map gives it). */
static int restarted(const struct admin *a, const struct rkv_map_server *s)
{
	const struct rkv_reg_server *r = registered(a, s->name);

	return r && s->boot && r->boot != s->boot;
}

/* Registered, as the run the map was made with. */
static int alive(const struct admin *a, const struct rkv_map_server *s)
{
	return registered(a, s->name) && !restarted(a, s);
}

/* The map at key: 0 and *m (mod revision in *rev), 1 when there is none,
 * or the exit status of an error already said. */
static int load_map_at(struct admin *a, const char *cmd, const char *key,
		       const char *what, struct rkv_map *m, int64_t *rev)
{
	char why[300] = "";
	struct rkv_etcd_kv kv = { 0 };
	int rc;

	rc = rkv_etcd_get(a->e, key, &kv, NULL);
	if (rc == -ENOENT)
		return 1;
	if (rc)
		return fail(cmd, "%s", rkv_etcd_why(a->e));
	*rev = kv.mod_rev;
	rc = strlen(kv.val) == kv.val_len
		     ? rkv_map_parse(kv.val, m, why, sizeof(why))
		     : -EINVAL;
	if (!rc && !m->epoch)
		rc = -EINVAL;
	rkv_etcd_kv_fini(&kv);
	if (rc) {
		fprintf(stderr, "rkv admin: %s: the %s in etcd (%s) is not a "
				"cluster map: %s\n", cmd, what, key,
			rc == -EINVAL && !why[0] ? "no epoch line or a NUL byte"
						 : why);
		return 2;
	}
	return 0;
}

static int load_map(struct admin *a, const char *cmd, struct rkv_map *m,
		    int64_t *rev)
{
	char key[RKV_REG_KEY_MAX];

	rkv_reg_map_key(&a->u, key, sizeof(key));
	return load_map_at(a, cmd, key, "map", m, rev);
}

/* The registered servers and the map (its revision in *rev): 0, or the
 * exit status of the failure said (no map yet too). */
static int load_cluster(struct admin *a, const char *cmd, struct rkv_map *m,
			int64_t *rev)
{
	int rc = load_registered(a, cmd);

	if (!rc)
		rc = load_map(a, cmd, m, rev);
	if (rc == 1)
		rc = fail(cmd, "cluster %s has no map yet (rkv admin init)",
			  a->u.cluster);
	return rc;
}

/* The migration in progress ("next"): as load_map. */
static int load_next(struct admin *a, const char *cmd, struct rkv_map *n)
{
	char key[RKV_REG_KEY_MAX];
	int64_t rev;

	rkv_reg_next_key(&a->u, key, sizeof(key));
	return load_map_at(a, cmd, key, "next map", n, &rev);
}

/* The next map of a change still to publish over m (as load_next).  One
 * of epoch m's or older was published already: a run killed between
 * publishing the map and removing "next" left it; it is removed here. */
static int load_pending_next(struct admin *a, const char *cmd,
			     const struct rkv_map *m, struct rkv_map *n)
{
	char key[RKV_REG_KEY_MAX];
	int rc = load_next(a, cmd, n);

	if (rc != 0 || n->epoch > m->epoch)
		return rc;
	rkv_reg_next_key(&a->u, key, sizeof(key));
	if (rkv_etcd_delete(a->e, key) && rkv_etcd_delete(a->e, key))
		return fail(cmd, "removing the next map of epoch %llu, "
			    "published already: %s",
			    (unsigned long long)n->epoch, rkv_etcd_why(a->e));
	return 1;
}

/* The options of the clients rkv admin makes: its --timeout to connect,
 * at least 10 s an operation (long: a migration's or a rebuild's). */
static void admin_client_opts(const struct admin *a, struct rkv_client_opts *co,
			      unsigned op_ms)
{
	rkv_client_opts_init(co);
	co->timeout_ms = op_ms;
	co->connect_timeout_ms = a->timeout_ms;
	co->name = "rkv-admin";
}

#define ADMIN_LONG_MS(a) ((a)->timeout_ms > 10000 ? (a)->timeout_ms : 10000)

/* Keys of each server of the map: a client of the map, STATS to each. */
static void keys_of(struct admin *a, const struct rkv_map *m, long long *keys)
{
	struct rkv_client_opts o;
	struct rkv_client *c = NULL;

	for (unsigned i = 0; i < m->n; i++)
		keys[i] = -1;
	rkv_client_opts_init(&o);
	o.cluster_file = a->url;
	o.timeout_ms = a->timeout_ms;
	o.connect_timeout_ms = a->timeout_ms;
	o.name = "rkv-admin";
	if (rkv_client_create(&o, &c))
		return;
	for (unsigned i = 0; i < m->n && i < rkv_client_nservers(c); i++) {
		struct rkv_server_stats st;

		if (rkv_client_server_status(c, i) == 0 &&
		    rkv_server_stats(c, i, &st) == 0)
			keys[i] = (long long)st.keys;
	}
	rkv_client_destroy(c);
}

/* At r > 1: how many partitions have all their copies on servers that
 * are up, how many fewer (degraded: their writes fail until the server
 * is back; gets are served while the primary is up) and how many none. */
static void print_copies(const struct rkv_map *m, const long long *keys)
{
	unsigned r = rkv_map_r(m), full = 0, degraded = 0, none = 0;
	unsigned prim_down = 0;

	for (unsigned p = 0; p < RKV_MAP_PARTS; p++) {
		const uint16_t *rep = rkv_map_replicas(m, p);
		unsigned up = 0, n = rkv_map_nrep(m, p);

		for (unsigned i = 0; i < n; i++)
			up += keys[rep[i]] >= 0;
		full += up == n;
		degraded += up > 0 && up < n;
		none += up == 0;
		prim_down += keys[rep[0]] < 0;
	}
	if (full == RKV_MAP_PARTS) {
		printf("copies: all %u partitions have their %u copies up\n",
		       RKV_MAP_PARTS, r);
		return;
	}
	printf("copies: DEGRADED: %u of %u partitions have all %u copies up, "
	       "%u fewer, %u none; writes to the %u fail until their servers "
	       "are back or failed over (rkv admin failover NAME), gets fail "
	       "for the %u whose primary is down\n", full, RKV_MAP_PARTS, r, degraded, none,
	       degraded + none, prim_down);
}

static int load_rebuild(struct admin *a, const char *cmd, uint8_t *parts,
			int *have);

static int cmd_status(struct admin *a)
{
	struct rkv_map *m = rkv_malloc(sizeof(*m));
	long long keys[RKV_MAP_SERVERS_MAX];
	int64_t rev = 0;
	int rc;

	if (!m)
		return fail("status", "%s", "out of memory");
	rc = load_registered(a, "status");
	if (!rc)
		rc = load_map(a, "status", m, &rev);
	if (rc > 1) {
		rkv_free(m);
		return rc;
	}
	printf("cluster %s at %s\n", a->u.cluster, a->u.endpoint);
	if (rc == 1) {
		printf("no map yet: `rkv admin --cluster %s init` makes one of "
		       "the registered servers\n", a->url);
		m->n = 0;
	} else {
		struct rkv_map *n = rkv_malloc(sizeof(*n));
		int nx = n ? load_next(a, "status", n) : 1;

		if (nx == 0 && n->epoch <= m->epoch)
			nx = 1; /* published already (a run killed after) */

		printf("map epoch %llu, %u servers", (unsigned long long)m->epoch,
		       m->n);
		if (rkv_map_r(m) > 1)
			printf(", %u copies of each key", rkv_map_r(m));
		printf(" (etcd revision %lld); migration: ", (long long)rev);
		if (nx == 0 && rkv_map_r(m) > 1) {
			printf("to epoch %llu with %u servers, stopped before "
			       "publishing or under way (rkv admin join, drain "
			       "or failover resumes it)\n",
			       (unsigned long long)n->epoch, n->n);
		} else if (nx == 0) {
			struct rkv_client_opts co;
			struct rkv_mig_opts mo = { .base = &co, .from = m,
						   .to = n };
			struct rkv_mig_progress pr = { 0 };
			char why[300] = "", done[64] = "progress unknown";

			admin_client_opts(a, &co, a->timeout_ms);
			if (!rkv_mig_progress_read(&mo, &pr, why, sizeof(why)))
				snprintf(done, sizeof(done),
					 "%u/%u partitions moved",
					 pr.parts_done, pr.parts_total);
			printf("to epoch %llu with %u servers, %s, under way "
			       "or stopped (rkv admin join, drain or failover "
			       "resumes it)\n", (unsigned long long)n->epoch, n->n,
			       done);
		} else {
			printf("none\n");
		}
		rkv_free(n);
		keys_of(a, m, keys);
	}
	if (m->n)
		printf("%-20s %-32s %-6s %s\n", "NAME", "ADDRESS", "STATE",
		       "KEYS");
	for (unsigned i = 0; i < m->n; i++) {
		const struct rkv_reg_server *r = registered(a, m->srv[i].name);
		char k[32];

		snprintf(k, sizeof(k), keys[i] >= 0 ? "%lld" : "-", keys[i]);
		printf("%-20s %-32s %-6s %s%s%s%s\n", m->srv[i].name,
		       m->srv[i].addr, keys[i] >= 0 ? "up" : "down", k,
		       !r ? "  (not registered)"
		       : strcmp(r->addr, m->srv[i].addr)
			       ? "  (registered at another address)"
			       : "",
		       !restarted(a, &m->srv[i]) ? ""
		       : rkv_map_r(m) > 1
			       ? "  (restarted empty since the map was made: "
				 "it serves none of its copies; rkv admin "
				 "failover, then join)"
			       : "  (restarted since the map was made: the "
				 "keys it held are lost)",
		       m->srv[i].state == RKV_MAP_JOINING
			       ? "  (joining: its copies are being made; "
				 "rkv admin join resumes a join that stopped, "
				 "drain undoes it)"
		       : m->srv[i].state == RKV_MAP_LEAVING
			       ? "  (leaving: its copies are being made "
				 "elsewhere; rkv admin drain resumes it, join "
				 "undoes it)"
			       : "");
	}
	if (m->n && rkv_map_r(m) > 1) {
		static uint8_t parts[RKV_MAP_PARTS];
		unsigned np = 0;
		int have = 0;

		print_copies(m, keys);
		memset(parts, 0, sizeof(parts));
		if (!load_rebuild(a, "status", parts, &have) && have) {
			for (unsigned p = 0; p < RKV_MAP_PARTS; p++)
				np += parts[p];
			printf("rebuild: %u partitions of a failover, join or "
			       "drain wait for their copies to be written "
			       "again", np);
			if (a->rb_total)
				printf(", %llu of %llu keys written when last "
				       "reported", a->rb_done, a->rb_total);
			printf("; under way or stopped (rkv admin rebuild "
			       "resumes it)\n");
		}
	}
	for (size_t i = 0; i < a->nreg; i++)
		if (rkv_map_find(m, a->reg[i].name) < 0)
			printf("registered, not in the map: %s %s (protocol "
			       "%u, pid %ld)\n", a->reg[i].name,
			       a->reg[i].addr, a->reg[i].proto, a->reg[i].pid);
	rkv_free(m);
	return 0;
}

static int add_server(struct rkv_map *m, const struct rkv_reg_server *r)
{
	char why[300];

	if (r->proto != RKV_PROTO_VERSION) {
		fprintf(stderr, "rkv admin: init: server %s (%s) speaks protocol "
				"%u, this rkv speaks %u: not added\n",
			r->name, r->addr, r->proto, RKV_PROTO_VERSION);
		return 2;
	}
	if (rkv_map_add(m, r->name, r->addr, why, sizeof(why))) {
		fprintf(stderr, "rkv admin: init: server %s: %s\n", r->name,
			why);
		return 2;
	}
	m->srv[m->n - 1].boot = r->boot;
	return 0;
}

static int cmd_init(struct admin *a, int argc, char **argv)
{
	struct rkv_map *m = rkv_malloc(sizeof(*m));
	char key[RKV_REG_KEY_MAX], *text = NULL;
	int rc, len = 0;
	int64_t rev;

	if (!m)
		return fail("init", "%s", "out of memory");
	rkv_map_init(m);
	if (argc >= 1 && !strncmp(argv[0], "--replicas", 10)) {
		const char *v = argv[0][10] == '=' ? argv[0] + 11
			      : argc >= 2 && !argv[0][10] ? argv[1] : NULL;
		char *end = NULL;
		unsigned long r = v ? strtoul(v, &end, 10) : 0;

		if (!v || !*v || *end || r < 1 || r > RKV_MAP_REPLICAS_MAX) {
			rkv_free(m);
			return fail("init", "--replicas wants a number from 1 "
				    "to %u", RKV_MAP_REPLICAS_MAX);
		}
		m->replicas = (unsigned)r;
		argc -= argv[0][10] == '=' ? 1 : 2;
		argv += argv[0][10] == '=' ? 1 : 2;
	}
	rc = load_registered(a, "init");
	if (!rc && argc == 0 && a->nreg == 0)
		rc = fail("init", "no server is registered in cluster %s "
			  "(start them with --cluster)", a->u.cluster);
	for (size_t i = 0; !rc && argc == 0 && i < a->nreg; i++)
		rc = add_server(m, &a->reg[i]);
	for (int i = 0; !rc && i < argc; i++) {
		const struct rkv_reg_server *r = registered(a, argv[i]);

		rc = r ? add_server(m, r)
		       : fail("init", "server '%s' is not registered (is it "
			      "running with --cluster?)", argv[i]);
	}
	if (!rc && m->replicas > m->n)
		rc = fail("init", "--replicas %u needs at least %u servers; "
			  "%u %s registered", m->replicas, m->replicas, m->n,
			  m->n == 1 ? "is" : "are");
	text = rkv_malloc(RKV_MAP_SERVERS_MAX * 400 + 64);
	if (!rc && !text)
		rc = fail("init", "%s", "out of memory");
	if (!rc) {
		m->epoch = 1;
		rkv_map_place(m);
		len = rkv_map_format(m, text, RKV_MAP_SERVERS_MAX * 400 + 64);
		rkv_reg_map_key(&a->u, key, sizeof(key));
		rc = rkv_etcd_put_if(a->e, key, text, (size_t)len, 0, 0);
		if (rc == -ECANCELED) {
			struct rkv_map *old = rkv_malloc(sizeof(*old));

			rc = 2;
			if (old && load_map(a, "init", old, &rev) == 0)
				fprintf(stderr, "rkv admin: init: cluster %s "
						"already has a map (epoch %llu, "
						"%u servers): nothing changed\n",
					a->u.cluster,
					(unsigned long long)old->epoch,
					old->n);
			rkv_free(old);
		} else if (rc) {
			rc = fail("init", "%s", rkv_etcd_why(a->e));
		}
	}
	if (!rc) {
		printf("cluster %s: map epoch 1 with %u servers:", a->u.cluster,
		       m->n);
		for (unsigned i = 0; i < m->n; i++)
			printf(" %s", m->srv[i].name);
		if (m->replicas > 1)
			printf("; %u copies of each key", m->replicas);
		printf("\n");
	}
	rkv_free(text);
	rkv_free(m);
	return rc;
}

static int cmd_map(struct admin *a)
{
	struct rkv_map *m = rkv_malloc(sizeof(*m));
	char *text = rkv_malloc(RKV_MAP_SERVERS_MAX * 400 + 64);
	int64_t rev = 0;
	int rc = m && text ? load_map(a, "map", m, &rev)
			   : fail("map", "%s", "out of memory");

	if (rc == 1)
		rc = fail("map", "cluster %s has no map yet", a->u.cluster);
	if (!rc && rkv_map_format(m, text, RKV_MAP_SERVERS_MAX * 400 + 64) > 0)
		fputs(text, stdout);
	rkv_free(text);
	rkv_free(m);
	return rc;
}

/* ---------------------------------------------------- join and drain */

#define MAP_TEXT_MAX (RKV_MAP_SERVERS_MAX * 400 + 64)

/* to: the servers of m but the one named skip (NULL: none), members, or
 * in their states in m with keep_state; of m's next epoch and r; not
 * placed yet.  0, or the exit status of the failure said. */
static int servers_of(const char *cmd, const struct rkv_map *m,
		      const char *skip, int keep_state, struct rkv_map *to)
{
	rkv_map_init(to);
	for (unsigned i = 0; i < m->n; i++) {
		if (skip && !strcmp(m->srv[i].name, skip))
			continue;
		if (rkv_map_add(to, m->srv[i].name, m->srv[i].addr, NULL, 0))
			return fail(cmd, "%s", "the map is full");
		to->srv[to->n - 1].boot = m->srv[i].boot;
		if (keep_state)
			to->srv[to->n - 1].state = m->srv[i].state;
	}
	to->epoch = m->epoch + 1;
	to->replicas = m->replicas;
	return 0;
}

/* The map after cmd (join or drain) of name: *to, or an error said. */
static int next_map(struct admin *a, const char *cmd, const char *name,
		    const struct rkv_map *m, struct rkv_map *to)
{
	int in = rkv_map_find(m, name), rc;

	if (!strcmp(cmd, "join")) {
		const struct rkv_reg_server *r = registered(a, name);

		if (in >= 0)
			return fail(cmd, "server '%s' is in the map already",
				    name);
		if (!r)
			return fail(cmd, "server '%s' is not registered (is it "
				    "running with --cluster %s?)", name,
				    a->url);
		rc = servers_of(cmd, m, NULL, 0, to);
		if (!rc && add_server(to, r))
			rc = 2;
	} else {
		if (in < 0)
			return fail(cmd, "server '%s' is not in the map", name);
		if (m->n == 1)
			return fail(cmd, "server '%s' is the only one: its keys "
				    "have nowhere to go", name);
		rc = servers_of(cmd, m, name, 0, to);
	}
	if (rc)
		return rc;
	if (to->replicas > to->n)
		return fail(cmd, "the map keeps %u copies of each key: it "
			    "cannot have fewer than %u servers", to->replicas,
			    to->replicas);
	rkv_map_place(to);
	return 0;
}

static void progress(void *arg, const struct rkv_mig_progress *p)
{
	static unsigned last_tenth = ~0u;
	int tty = *(const int *)arg;
	unsigned pct = p->parts_total ? p->parts_done * 100u / p->parts_total
				      : 100;

	if (tty) {
		char bar[41];
		unsigned k = pct * 40u / 100u;

		memset(bar, '#', k);
		memset(bar + k, '.', 40 - k);
		bar[40] = '\0';
		printf("\r[%s] %3u%%  %u/%u partitions, %llu keys, %.1f s ",
		       bar, pct, p->parts_done, p->parts_total,
		       (unsigned long long)p->keys_moved,
		       (double)p->elapsed_ms / 1000.0);
		fflush(stdout);
	} else if (pct / 10 != last_tenth) {
		last_tenth = pct / 10;
		printf("moved %u/%u partitions (%u%%), %llu keys, %.1f s\n",
		       p->parts_done, p->parts_total, pct,
		       (unsigned long long)p->keys_moved,
		       (double)p->elapsed_ms / 1000.0);
	}
}

/* Put to as the next map (only if there is none). */
static int put_next(struct admin *a, const char *cmd, const struct rkv_map *to,
		    char *text)
{
	char key[RKV_REG_KEY_MAX];
	int len = rkv_map_format(to, text, MAP_TEXT_MAX);

	rkv_reg_next_key(&a->u, key, sizeof(key));
	if (len <= 0 || rkv_etcd_put_if(a->e, key, text, (size_t)len, 0, 0))
		return fail(cmd, "putting the next map: %s",
			    len <= 0 ? "too long" : rkv_etcd_why(a->e));
	return 0;
}

/*
 * After the next map is in etcd: name must still be unregistered.  A
 * server whose lease lapsed registers anew only after it read the map
 * and the next map, and reads them again once registered (server/
 * cluster.c); if it registered after our first look it may have missed
 * the next map the first time, but not the second, so it fences itself;
 * if it registered before this look, it may have missed both: then it is
 * alive, and the failover is undone (next removed).  A run registered
 * since the map was made (another boot) started empty and serves none
 * of its copies (server/cluster.c refuse_map): it counts as gone.  0 or
 * the status of the failure said.
 */
static int still_gone(struct admin *a, const char *cmd,
		      const struct rkv_map_server *s)
{
	const char *name = s->name;
	char key[RKV_REG_KEY_MAX];
	struct rkv_etcd_kv kv = { 0 };
	struct rkv_reg_server now;
	int rc;

	rkv_reg_server_key(&a->u, name, key, sizeof(key));
	rc = rkv_etcd_get(a->e, key, &kv, NULL);
	/* a run that started after the map was made fences itself */
	if (!rc && s->boot &&
	    !rkv_reg_server_parse(name, kv.val, kv.val_len, &now, NULL, 0) &&
	    now.boot != s->boot)
		rc = -ENOENT;
	rkv_etcd_kv_fini(&kv);
	if (rc == -ENOENT)
		return 0;
	rkv_reg_next_key(&a->u, key, sizeof(key));
	(void)rkv_etcd_delete(a->e, key);
	if (rc)
		return fail(cmd, "reading the registration of '%s': %s; the "
			    "next map was removed, nothing changed", name,
			    rkv_etcd_why(a->e));
	return fail(cmd, "server '%s' registered again as the failover "
		    "began (it is alive): the next map was removed, nothing "
		    "changed", name);
}

/* Publish to (CAS on the map's revision rev), remove "next". */
static int publish(struct admin *a, const char *cmd, const struct rkv_map *to,
		   int64_t rev)
{
	char key[RKV_REG_KEY_MAX], *text = rkv_malloc(MAP_TEXT_MAX);
	int rc, len;

	if (!text)
		return fail(cmd, "%s", "out of memory");
	len = rkv_map_format(to, text, MAP_TEXT_MAX);
	rkv_reg_map_key(&a->u, key, sizeof(key));
	rc = len > 0 ? rkv_etcd_put_if(a->e, key, text, (size_t)len, 0, rev)
		     : -EINVAL;
	rkv_free(text);
	if (rc == -ECANCELED)
		return fail(cmd, "the map in etcd changed during the migration "
			    "(someone else changed it): not published");
	if (rc)
		return fail(cmd, "publishing the map: %s", rkv_etcd_why(a->e));
	rkv_reg_next_key(&a->u, key, sizeof(key));
	rc = rkv_etcd_delete(a->e, key);
	if (rc && rc != -ENOENT)
		return fail(cmd, "removing the next map: %s",
			    rkv_etcd_why(a->e));
	return 0;
}

static int move_repl(struct admin *a, const char *cmd, const char *name,
		     struct rkv_map *m, int64_t rev);

static int cmd_move(struct admin *a, const char *cmd, int argc, char **argv)
{
	struct rkv_map *m = rkv_malloc(sizeof(*m)), *to = rkv_malloc(sizeof(*to));
	char why[300] = "", *text = rkv_malloc(MAP_TEXT_MAX);
	struct rkv_client_opts co;
	struct rkv_mig_progress pr = { 0 }, cl = { 0 };
	int tty = isatty(1), rc;
	int64_t rev = 0;

	if (!m || !to || !text) {
		rc = fail(cmd, "%s", "out of memory");
		goto out;
	}
	if (argc != 1) {
		rc = fail(cmd, "%s", "give one server name");
		goto out;
	}
	rc = load_cluster(a, cmd, m, &rev);
	if (!rc && rkv_map_r(m) > 1) {
		rc = move_repl(a, cmd, argv[0], m, rev);
		goto out;
	}
	if (!rc)
		rc = load_pending_next(a, cmd, m, to);
	if (rc == 0) {
		if (to->epoch != m->epoch + 1) {
			rc = fail(cmd, "the next map in etcd is of epoch %llu, "
				  "not %llu: remove it by hand",
				  (unsigned long long)to->epoch,
				  (unsigned long long)m->epoch + 1);
			goto out;
		}
		printf("resuming the migration to epoch %llu (%u servers)\n",
		       (unsigned long long)to->epoch, to->n);
	} else if (rc == 1) {
		rc = next_map(a, cmd, argv[0], m, to);
		if (!rc)
			rc = put_next(a, cmd, to, text);
	}
	if (rc)
		goto out;
	printf("%s %s: epoch %llu -> %llu\n", cmd, argv[0],
	       (unsigned long long)m->epoch, (unsigned long long)to->epoch);
	admin_client_opts(a, &co, ADMIN_LONG_MS(a));
	struct rkv_mig_opts mo = { .base = &co, .from = m, .to = to,
				   .progress = progress, .arg = &tty };

	rc = rkv_mig_run(&mo, &pr, why, sizeof(why));
	if (tty)
		printf("\n");
	if (rc) {
		rc = fail(cmd, "migration stopped: %s (run it again to resume; "
			  "clients keep working)", why);
		goto out;
	}
	rc = publish(a, cmd, to, rev);
	if (rc)
		goto out;
	rc = rkv_mig_cleanup(&mo, &cl, why, sizeof(why));
	if (rc)
		fprintf(stderr, "rkv admin: %s: the map is published; cleaning "
				"moved slots failed: %s (the next join or drain "
				"cleans them)\n", cmd, why);
	printf("cluster %s: map epoch %llu with %u servers; %u partitions, "
	       "%llu keys (%llu bytes) moved in %.2f s, longest freeze %llu ms;"
	       " %llu moved slots cleaned\n", a->u.cluster,
	       (unsigned long long)to->epoch, to->n, pr.parts_total,
	       (unsigned long long)pr.keys_moved,
	       (unsigned long long)pr.bytes_moved,
	       (double)pr.elapsed_ms / 1000.0,
	       (unsigned long long)pr.freeze_max_ms,
	       (unsigned long long)cl.blocks_freed);
	rc = 0;
out:
	rkv_free(text);
	rkv_free(to);
	rkv_free(m);
	return rc;
}

/* ------------------------------------------------------------ failover */

/* The partitions a rebuild still owes, from etcd ("parts HEX" with a bit
 * per partition), OR-ed into parts.  0 (none: 1), or an exit status. */
static int load_rebuild(struct admin *a, const char *cmd, uint8_t *parts,
			int *have)
{
	char key[RKV_REG_KEY_MAX];
	struct rkv_etcd_kv kv = { 0 };
	const char *h, *pr;
	int rc;

	*have = 0;
	a->rb_done = a->rb_total = 0;
	rkv_reg_rebuild_key(&a->u, key, sizeof(key));
	rc = rkv_etcd_get(a->e, key, &kv, NULL);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return fail(cmd, "%s", rkv_etcd_why(a->e));
	h = strstr(kv.val, "parts ");
	if (!h || strlen(h + 6) < RKV_MAP_PARTS / 4) {
		rkv_etcd_kv_fini(&kv);
		return fail(cmd, "the rebuild record in etcd (%s) does not "
			    "parse: it holds \"epoch N\" and \"parts\" with "
			    "%u hex digits", key, RKV_MAP_PARTS / 4);
	}
	h += 6;
	for (unsigned p = 0; p < RKV_MAP_PARTS; p++) {
		char c = h[p / 4];
		unsigned v = c >= 'a' ? (unsigned)(c - 'a' + 10)
				      : (unsigned)(c - '0');

		if (v >> (3 - p % 4) & 1)
			parts[p] = 1;
	}
	*have = 1;
	pr = strstr(kv.val, "\nprogress ");
	if (pr && sscanf(pr + 10, "%llu %llu", &a->rb_done, &a->rb_total) != 2)
		a->rb_done = a->rb_total = 0;
	rkv_etcd_kv_fini(&kv);
	return 0;
}

/* The record: "epoch E", "parts HEX", and while a rebuild runs
 * "progress DONE TOTAL" (keys), for `rkv admin status`. */
static int save_rebuild_at(struct admin *a, const char *cmd,
			   const uint8_t *parts, uint64_t epoch, uint64_t done,
			   uint64_t total)
{
	char key[RKV_REG_KEY_MAX], text[RKV_MAP_PARTS / 4 + 128];
	int n = snprintf(text, sizeof(text), "epoch %llu\nparts ",
			 (unsigned long long)epoch);

	for (unsigned p = 0; p < RKV_MAP_PARTS; p += 4) {
		unsigned v = (unsigned)parts[p] << 3 | parts[p + 1] << 2 |
			     parts[p + 2] << 1 | parts[p + 3];

		text[n++] = "0123456789abcdef"[v];
	}
	text[n++] = '\n';
	if (total)
		n += snprintf(text + n, sizeof(text) - (size_t)n,
			      "progress %llu %llu\n", (unsigned long long)done,
			      (unsigned long long)total);
	rkv_reg_rebuild_key(&a->u, key, sizeof(key));
	if (rkv_etcd_put(a->e, key, text, (size_t)n, 0))
		return fail(cmd, "recording the rebuild: %s",
			    rkv_etcd_why(a->e));
	return 0;
}

static int save_rebuild(struct admin *a, const char *cmd,
			const uint8_t *parts, uint64_t epoch)
{
	return save_rebuild_at(a, cmd, parts, epoch, 0, 0);
}

struct fo_prog {
	int tty;
	struct admin *a;
	const uint8_t *parts;
	uint64_t epoch, saved_ms;
};

static void fo_progress(void *arg, uint64_t done, uint64_t total)
{
	static uint64_t last;
	struct fo_prog *pg = arg;
	int tty = pg->tty;
	uint64_t now = rkv_now_ms();

	/* how far, in etcd, twice a second: rkv admin status shows it */
	if (done < total && now - pg->saved_ms >= 500) {
		pg->saved_ms = now;
		(void)save_rebuild_at(pg->a, "rebuild", pg->parts, pg->epoch,
				      done, total);
	}

	if (tty) {
		printf("\rrebuilt %llu/%llu keys ", (unsigned long long)done,
		       (unsigned long long)total);
		fflush(stdout);
	} else if (done == total || done - last >= 10000) {
		last = done;
		printf("rebuilt %llu/%llu keys\n", (unsigned long long)done,
		       (unsigned long long)total);
	}
}

/* The copies the map is short of, written again; the record removed. */
static int rebuild(struct admin *a, const char *cmd, const struct rkv_map *m,
		   const uint8_t *parts)
{
	char key[RKV_REG_KEY_MAX], why[300] = "";
	struct rkv_client_opts co;
	struct fo_prog pg = { .tty = isatty(1), .a = a, .parts = parts,
			      .epoch = m->epoch, .saved_ms = rkv_now_ms() };
	struct rkv_fo_stats st = { 0 };
	unsigned n = 0;
	int rc;

	admin_client_opts(a, &co, ADMIN_LONG_MS(a));
	struct rkv_fo_opts fo = { .base = &co, .from = m, .to = m,
				  .parts = parts, .progress = fo_progress,
				  .arg = &pg };

	rc = rkv_fo_rebuild(&fo, &st, why, sizeof(why));
	if (pg.tty)
		printf("\n");
	if (rc)
		return fail(cmd, "rebuild stopped: %s (clients keep working; "
			    "`rkv admin rebuild` resumes it)", why);
	rkv_reg_rebuild_key(&a->u, key, sizeof(key));
	rc = rkv_etcd_delete(a->e, key);
	if (rc && rc != -ENOENT)
		return fail(cmd, "removing the rebuild record: %s",
			    rkv_etcd_why(a->e));
	for (unsigned p = 0; p < RKV_MAP_PARTS; p++)
		n += parts[p];
	printf("cluster %s: %u partitions rebuilt, %llu keys written again "
	       "in %.2f s\n", a->u.cluster, n, (unsigned long long)st.rebuilt,
	       (double)st.elapsed_ms / 1000.0);
	return 0;
}

static int cmd_rebuild(struct admin *a)
{
	static uint8_t parts[RKV_MAP_PARTS];
	struct rkv_map *m = rkv_malloc(sizeof(*m));
	int64_t rev;
	int rc, have = 0;

	if (!m)
		return fail("rebuild", "%s", "out of memory");
	rc = load_map(a, "rebuild", m, &rev);
	if (rc == 1)
		rc = fail("rebuild", "cluster %s has no map yet", a->u.cluster);
	if (!rc)
		rc = load_rebuild(a, "rebuild", parts, &have);
	if (!rc && !have) {
		printf("cluster %s: nothing to rebuild\n", a->u.cluster);
		goto out;
	}
	if (!rc)
		rc = rebuild(a, "rebuild", m, parts);
out:
	rkv_free(m);
	return rc;
}

/* to: m without name, of the next epoch. */
static int failover_map(const char *cmd, const char *name,
			const struct rkv_map *m, struct rkv_map *to)
{
	/* a join or drain under way stays so: a server joining is never
	 * made a primary before it holds its copies */
	int rc = servers_of(cmd, m, name, 1, to);

	if (rc)
		return rc;
	if (to->replicas > to->n)
		return fail(cmd, "the map keeps %u copies of each key and "
			    "would have %u server%s left: nothing changed",
			    to->replicas, to->n, to->n == 1 ? "" : "s");
	rkv_map_place(to);
	return 0;
}

static int same_servers(const struct rkv_map *x, const struct rkv_map *y)
{
	if (x->n != y->n || rkv_map_r(x) != rkv_map_r(y))
		return 0;
	for (unsigned i = 0; i < x->n; i++)
		if (rkv_map_find(y, x->srv[i].name) < 0)
			return 0;
	return 1;
}

/* ------------------------------------------- join and drain at r > 1 */

/* A fenced step: every server fenced at fo->to's epoch, the partitions
 * reconciled (st non-NULL), their words set, then fo->to published (a
 * CAS on the map's revision rev).  0, or the exit status of the failure
 * said (nothing published: running it again resumes). */
static int fenced_publish(struct admin *a, const char *cmd,
			  const struct rkv_fo_opts *fo, struct rkv_fo_stats *st,
			  int64_t rev)
{
	char why[300] = "";
	int rc = rkv_fo_fence(fo, why, sizeof(why));

	if (!rc && st)
		rc = rkv_fo_reconcile(fo, st, why, sizeof(why));
	if (!rc)
		rc = rkv_fo_own(fo, why, sizeof(why));
	if (rc)
		return fail(cmd, "stopped: %s (nothing published; run it again "
			    "to resume)", why);
	/* a server that restarted before its words were set would serve
	 * its copies empty; one that restarts after refuses the map */
	rc = load_registered(a, cmd);
	for (unsigned i = 0; !rc && i < fo->to->n; i++)
		if (restarted(a, &fo->to->srv[i]))
			rc = fail(cmd, "stopped: server '%s' restarted (empty) "
				  "during the change; nothing published: fail "
				  "it over (rkv admin failover %s, or watch), "
				  "then run this again", fo->to->srv[i].name,
				  fo->to->srv[i].name);
	return rc ? rc : publish(a, cmd, fo->to, rev);
}

/* x and y list the same servers in the same states, with the same r. */
static int same_members(const struct rkv_map *x, const struct rkv_map *y)
{
	if (!same_servers(x, y))
		return 0;
	for (unsigned i = 0; i < x->n; i++)
		if (x->srv[i].state !=
		    y->srv[rkv_map_find(y, x->srv[i].name)].state)
			return 0;
	return 1;
}

/* to: m with name in transit (joining: from its registration; leaving),
 * of the next epoch. */
static int transit_map(struct admin *a, const char *cmd, const char *name,
		       const struct rkv_map *m, struct rkv_map *to)
{
	int in = rkv_map_find(m, name), join = !strcmp(cmd, "join");

	if (join && in >= 0)
		return fail(cmd, "server '%s' is in the map already", name);
	if (!join && in < 0)
		return fail(cmd, "server '%s' is not in the map", name);
	if (!join && m->n - 1 < rkv_map_r(m))
		return fail(cmd, "the map keeps %u copies of each key: it "
			    "cannot have fewer than %u servers; nothing "
			    "changed", rkv_map_r(m), rkv_map_r(m));
	if (servers_of(cmd, m, NULL, 0, to))
		return 2;
	if (join) {
		const struct rkv_reg_server *r = registered(a, name);

		if (!r)
			return fail(cmd, "server '%s' is not registered (is it "
				    "running with --cluster %s?)", name,
				    a->url);
		if (add_server(to, r))
			return 2;
		to->srv[to->n - 1].state = RKV_MAP_JOINING;
	} else {
		to->srv[in].state = RKV_MAP_LEAVING;
	}
	rkv_map_place(to);
	return 0;
}

/* to: m (in transit) with its server a member, or gone; or with undo
 * the map before the move (a joining server gone, a leaving one kept);
 * next epoch. */
static int settled_map(const char *cmd, const struct rkv_map *m, int undo,
		       struct rkv_map *to)
{
	int t = rkv_map_transit(m);
	int drop = t >= 0 && (m->srv[t].state == RKV_MAP_LEAVING) != undo;

	if (servers_of(cmd, m, drop ? m->srv[t].name : NULL, 0, to))
		return 2;
	if (to->replicas > to->n)
		return fail(cmd, "the map keeps %u copies of each key: it "
			    "cannot have fewer than %u servers (a failover "
			    "during the drain left too few)", to->replicas,
			    to->replicas);
	rkv_map_place(to);
	return 0;
}

/* Put to (the map after m) as the next map, or check that the next map
 * in etcd is it: a run that stopped is resumed (next: room to read it). */
static int next_is(struct admin *a, const char *cmd, const struct rkv_map *m,
		   const struct rkv_map *to, struct rkv_map *next, char *text)
{
	int have = load_pending_next(a, cmd, m, next);

	if (have > 1)
		return have;
	if (have == 1)
		return put_next(a, cmd, to, text);
	if (next->epoch != to->epoch || !same_members(next, to))
		return fail(cmd, "another change to epoch %llu is under way "
			    "(the next map in etcd): finish it first",
			    (unsigned long long)next->epoch);
	printf("resuming the change to epoch %llu\n",
	       (unsigned long long)to->epoch);
	return 0;
}

/*
 * join or drain of name at r > 1 (docs/DESIGN.md §9.7, "Join and
 * drain"): two epochs, each fenced.
 *  1. E+1: name in transit.  Where the final map places a server that is
 *     not in a partition's replica set, it is one more backup there (r +
 *     1 copies), the primary unchanged; every server is fenced at E+1, so
 *     no write of an older client misses it; its partition words are
 *     set; the map is published; then every live key of those
 *     partitions is written again (the rebuild): from then on the new
 *     backup holds every acknowledged value.
 *  2. E+2: the final map.  Every server is fenced at E+2 (the leaving
 *     one too), the partitions reconciled as in a failover (the new
 *     primary, which held a full copy in E+1, wins), the words set, the
 *     map published, and the copies on servers that left a partition's
 *     set emptied.
 * Each step resumes: from the next map in etcd, the map's server in
 * transit and the rebuild record.
 */
static int move_repl(struct admin *a, const char *cmd, const char *name,
		     struct rkv_map *m, int64_t rev)
{
	static uint8_t parts[RKV_MAP_PARTS];
	struct rkv_map *next = rkv_malloc(sizeof(*next));
	struct rkv_map *to = rkv_malloc(sizeof(*to));
	char why[300] = "", *text = rkv_malloc(MAP_TEXT_MAX);
	int join = !strcmp(cmd, "join"), t = rkv_map_transit(m), rc, have;
	/* the opposite move of the server in transit undoes it (a join
	 * whose copies cannot be made: a newcomer too small, say) */
	int undo = t >= 0 && !strcmp(m->srv[t].name, name) &&
		   (m->srv[t].state == RKV_MAP_JOINING) != join;
	struct rkv_client_opts co;
	struct rkv_fo_stats st = { 0 };
	unsigned np;

	if (!next || !to || !text) {
		rc = fail(cmd, "%s", "out of memory");
		goto out;
	}
	if (t >= 0 && strcmp(m->srv[t].name, name)) {
		int j = m->srv[t].state == RKV_MAP_JOINING;

		rc = fail(cmd, "server '%s' is %s the cluster: finish that "
			  "first (rkv admin %s %s) or undo it (rkv admin %s "
			  "%s)", m->srv[t].name, j ? "joining" : "leaving",
			  j ? "join" : "drain", m->srv[t].name,
			  j ? "drain" : "join", m->srv[t].name);
		goto out;
	}
	admin_client_opts(a, &co, ADMIN_LONG_MS(a));
	if (t < 0) {
		/* 1: name in transit */
		rc = transit_map(a, cmd, name, m, to);
		if (!rc)
			rc = next_is(a, cmd, m, to, next, text);
		if (rc)
			goto out;
		memset(parts, 0, sizeof(parts));
		np = rkv_fo_parts_moved(m, to, parts);
		rc = load_rebuild(a, cmd, parts, &have); /* a failover's too */
		if (!rc)
			rc = save_rebuild(a, cmd, parts, to->epoch);
		if (rc)
			goto out;
		printf("%s %s: epoch %llu -> %llu, %u partitions get a copy "
		       "%s\n", cmd, name, (unsigned long long)m->epoch,
		       (unsigned long long)to->epoch, np,
		       join ? "there" : "elsewhere");
		struct rkv_fo_opts fo = { .base = &co, .from = m, .to = to,
					  .parts = parts, .fence_from = 1 };

		/* no reconcile: every primary stays, and a fenced writer's
		 * lock is stolen after a lease like a dead one's */
		rc = fenced_publish(a, cmd, &fo, NULL, rev);
		if (rc)
			goto out;
		rc = load_map(a, cmd, m, &rev);
		if (rc == 1)
			rc = fail(cmd, "%s", "the map vanished from etcd");
		if (rc)
			goto out;
		printf("cluster %s: map epoch %llu published, '%s' %s\n",
		       a->u.cluster, (unsigned long long)m->epoch, name,
		       join ? "joining" : "leaving");
		fflush(stdout);
	}
	/* the copies the transit adds (and any a failover still owes); an
	 * undo goes back to the sets before it, whose copies are whole */
	memset(parts, 0, sizeof(parts));
	rc = undo ? 0 : load_rebuild(a, cmd, parts, &have);
	if (!rc && !undo && have)
		rc = rebuild(a, cmd, m, parts);
	if (rc)
		goto out;
	/* 2: the final map */
	if (undo)
		printf("%s %s: undoing the %s under way\n", cmd, name,
		       join ? "drain" : "join");
	rc = settled_map(cmd, m, undo, to);
	if (!rc)
		rc = next_is(a, cmd, m, to, next, text);
	if (rc)
		goto out;
	memset(parts, 0, sizeof(parts));
	np = rkv_fo_parts_moved(m, to, parts);
	struct rkv_fo_opts fo2 = { .base = &co, .from = m, .to = to,
				   .parts = parts, .fence_from = 1 };

	rc = fenced_publish(a, cmd, &fo2, &st, rev);
	if (rc)
		goto out;
	printf("cluster %s: map epoch %llu with %u servers; %u partitions "
	       "changed their replicas (%llu keys, %llu copies emptied, %llu "
	       "keys written again)\n", a->u.cluster,
	       (unsigned long long)to->epoch, to->n, np,
	       (unsigned long long)st.keys, (unsigned long long)st.emptied,
	       (unsigned long long)st.fixed);
	if (undo) {
		/* the record the undone move left (perhaps with a
		 * failover's partitions): written again in the final map */
		memset(parts, 0, sizeof(parts));
		rc = load_rebuild(a, cmd, parts, &have);
		if (!rc && have)
			rc = rebuild(a, cmd, to, parts);
		if (rc)
			goto out;
	}
	if (join) {
		/* the servers a partition left hold copies nobody reads */
		rc = rkv_fo_cleanup(&fo2, &st, why, sizeof(why));
		if (rc)
			fprintf(stderr, "rkv admin: %s: the map is published; "
					"emptying the copies of servers that "
					"left a replica set failed: %s (they "
					"are never read)\n", cmd, why);
		else
			printf("cluster %s: %llu copies emptied on servers "
			       "that left a replica set\n", a->u.cluster,
			       (unsigned long long)st.dropped);
	} else {
		printf("cluster %s: '%s' holds no copy the cluster reads; it "
		       "may be stopped\n", a->u.cluster, name);
	}
	rc = 0;
out:
	rkv_free(text);
	rkv_free(to);
	rkv_free(next);
	return rc;
}

/* The maps of a fenced step: the published one, the one it makes, room
 * for a pending next, and a map's text. */
struct step {
	struct rkv_map *m, *to, *next;
	char *text;
};

static void step_free(struct step *sp)
{
	rkv_free(sp->text);
	rkv_free(sp->next);
	rkv_free(sp->to);
	rkv_free(sp->m);
}

/* 0, or the exit status of the failure said (all freed). */
static int step_alloc(struct step *sp, const char *cmd)
{
	sp->m = rkv_malloc(sizeof(*sp->m));
	sp->to = rkv_malloc(sizeof(*sp->to));
	sp->next = rkv_malloc(sizeof(*sp->next));
	sp->text = rkv_malloc(MAP_TEXT_MAX);
	if (sp->m && sp->to && sp->next && sp->text)
		return 0;
	step_free(sp);
	return fail(cmd, "%s", "out of memory");
}

/*
 * sweep: the tombstones that deletes leave at r > 1 (each keeps an index
 * slot and a block on every replica) dropped, in one fenced step with
 * the same servers (docs/DESIGN.md §9.7, "The sweep"): the next map
 * (epoch + 1, the same servers) as "next", every server fenced at it,
 * every key's copies reconciled as a failover does and those of a key
 * whose primary holds a tombstone emptied (backups first) and their
 * blocks returned, then the map published.  Clients wait for the new
 * map meanwhile (ops in flight at the fence fail as at a failover).
 */
static int cmd_sweep(struct admin *a)
{
	static const char *cmd = "sweep";
	static uint8_t parts[RKV_MAP_PARTS];
	struct step sp;
	struct rkv_client_opts co;
	struct rkv_fo_stats st = { 0 };
	int64_t rev = 0;
	int rc = step_alloc(&sp, cmd);

	if (rc)
		return rc;
	struct rkv_map *m = sp.m, *to = sp.to;

	rc = load_cluster(a, cmd, m, &rev);
	if (rc)
		goto out;
	if (rkv_map_r(m) < 2) {
		printf("cluster %s: one copy of each key: a delete frees its "
		       "slot, nothing to sweep\n", a->u.cluster);
		goto out;
	}
	if (rkv_map_transit(m) >= 0) {
		rc = fail(cmd, "server '%s' is in transit: finish the join or "
			  "drain first", m->srv[rkv_map_transit(m)].name);
		goto out;
	}
	for (unsigned i = 0; i < m->n; i++)
		if (!alive(a, &m->srv[i])) {
			rc = fail(cmd, "server '%s' %s: fail it over first (rkv "
				  "admin failover %s)", m->srv[i].name,
				  restarted(a, &m->srv[i])
					  ? "restarted empty"
					  : "is not registered",
				  m->srv[i].name);
			goto out;
		}
	rc = servers_of(cmd, m, NULL, 0, to);
	if (rc)
		goto out;
	rkv_map_place(to);
	rc = next_is(a, cmd, m, to, sp.next, sp.text);
	if (rc)
		goto out;
	memset(parts, 1, sizeof(parts));
	admin_client_opts(a, &co, ADMIN_LONG_MS(a));
	struct rkv_fo_opts fo = { .base = &co, .from = m, .to = to,
				  .parts = parts, .sweep = 1 };

	rc = fenced_publish(a, cmd, &fo, &st, rev);
	if (rc)
		goto out;
	printf("cluster %s: map epoch %llu published after %.2f s: %llu "
	       "deleted keys swept (%llu copies emptied, their blocks "
	       "returned), %llu keys seen, %llu locks released, %llu keys "
	       "written again\n", a->u.cluster, (unsigned long long)to->epoch,
	       (double)st.elapsed_ms / 1000.0, (unsigned long long)st.swept,
	       (unsigned long long)st.swept_copies,
	       (unsigned long long)st.keys, (unsigned long long)st.unlocked,
	       (unsigned long long)st.fixed);
out:
	step_free(&sp);
	return rc;
}

static int do_failover(struct admin *a, const char *name, int force)
{
	static const char *cmd = "failover";
	static uint8_t parts[RKV_MAP_PARTS];
	struct step sp;
	struct rkv_client_opts co;
	struct rkv_fo_stats st = { 0 };
	int64_t rev = 0;
	int rc = step_alloc(&sp, cmd), have;
	unsigned nparts;

	if (rc)
		return rc;
	struct rkv_map *m = sp.m, *to = sp.to, *next = sp.next;
	char *text = sp.text;

	memset(parts, 0, sizeof(parts));
	rc = load_cluster(a, cmd, m, &rev);
	if (rc)
		goto out;
	if (rkv_map_find(m, name) < 0) {
		rc = load_rebuild(a, cmd, parts, &have);
		if (!rc && have) {
			/* published by a run that stopped in its rebuild */
			printf("server '%s' is failed over already (map epoch "
			       "%llu); finishing the rebuild\n", name,
			       (unsigned long long)m->epoch);
			rc = rebuild(a, cmd, m, parts);
		} else if (!rc) {
			rc = fail(cmd, "server '%s' is not in the map (epoch "
				  "%llu)", name, (unsigned long long)m->epoch);
		}
		goto out;
	}
	if (rkv_map_r(m) < 2) {
		rc = fail(cmd, "the map keeps one copy of each key: '%s' held "
			  "the only copy of its keys, and no server can take "
			  "them over", name);
		goto out;
	}
	if (alive(a, &m->srv[rkv_map_find(m, name)]) && !force) {
		rc = fail(cmd, "server '%s' is registered (its lease is live): "
			  "a failover is for a server that is gone; stop it, "
			  "wait for its lease to lapse, or give --force if it "
			  "is dead for sure", name);
		goto out;
	}
	rc = failover_map(cmd, name, m, to); /* the map it makes */
	if (rc)
		goto out;
	rc = load_pending_next(a, cmd, m, next);
	if (rc == 0) {
		if (next->epoch == to->epoch && same_members(next, to)) {
			printf("resuming the failover to epoch %llu\n",
			       (unsigned long long)to->epoch);
		} else if (rkv_map_transit(next) >= 0 ||
			   rkv_map_transit(m) >= 0) {
			/* a join or drain that stopped before publishing
			 * (it needs every server, this one too): dropped,
			 * to be run again after */
			char key[RKV_REG_KEY_MAX];

			printf("a join or drain to epoch %llu stopped before "
			       "publishing: dropped (run it again after the "
			       "failover)\n", (unsigned long long)next->epoch);
			rkv_reg_next_key(&a->u, key, sizeof(key));
			rc = rkv_etcd_delete(a->e, key);
			if (rc && rc != -ENOENT) {
				rc = fail(cmd, "removing the next map: %s",
					  rkv_etcd_why(a->e));
				goto out;
			}
			rc = 1;
		} else {
			rc = fail(cmd, "a migration to epoch %llu is under way "
				  "(the next map in etcd): finish it first",
				  (unsigned long long)next->epoch);
			goto out;
		}
	}
	if (rc == 1) {
		rc = put_next(a, cmd, to, text);
		if (!rc && !force)
			rc = still_gone(a, cmd, &m->srv[rkv_map_find(m, name)]);
	}
	if (rc)
		goto out;
	nparts = rkv_fo_parts(m, name, parts);
	rc = load_rebuild(a, cmd, parts, &have); /* an earlier one's too */
	if (!rc)
		rc = save_rebuild(a, cmd, parts, to->epoch);
	if (rc)
		goto out;
	printf("failover %s: epoch %llu -> %llu, %u partitions had a copy "
	       "there\n", name, (unsigned long long)m->epoch,
	       (unsigned long long)to->epoch, nparts);
	admin_client_opts(a, &co, ADMIN_LONG_MS(a));
	struct rkv_fo_opts fo = { .base = &co, .from = m, .to = to,
				  .parts = parts };

	rc = fenced_publish(a, cmd, &fo, &st, rev);
	if (rc)
		goto out;
	printf("cluster %s: map epoch %llu with %u servers published after "
	       "%.2f s (%llu copies read, %llu keys; %llu copies emptied, "
	       "%llu locks released, %llu keys written again)\n",
	       a->u.cluster, (unsigned long long)to->epoch, to->n,
	       (double)st.elapsed_ms / 1000.0,
	       (unsigned long long)st.copies_seen,
	       (unsigned long long)st.keys, (unsigned long long)st.emptied,
	       (unsigned long long)st.unlocked, (unsigned long long)st.fixed);
	fflush(stdout);
	rc = rebuild(a, cmd, to, parts);
out:
	step_free(&sp);
	return rc;
}

static int cmd_failover(struct admin *a, int argc, char **argv)
{
	const char *name = NULL;
	int force = 0;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--force"))
			force = 1;
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else
			return fail("failover", "'%s': give one server name "
				    "(and --force)", argv[i]);
	}
	if (!name)
		return fail("failover", "%s", "give the dead server's name");
	return do_failover(a, name, force);
}

/* --------------------------------------------------------------- watch */

static volatile sig_atomic_t g_watch_stop;

static void watch_signal(int sig)
{
	(void)sig;
	g_watch_stop = 1;
}

static void watch_sleep(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * The coordinator: every 500 ms, a server of the map that is not
 * registered (its lease lapsed) or registered as a later run (it
 * restarted empty) for --grace ms more is failed over (a failover that
 * stopped is tried again the same way); a rebuild that stopped is
 * finished; with --sweep-every S the tombstones are swept every S s.  One coordinator
 * per cluster: the key "coordinator" is held under a lease; another
 * watch waits for it.
 */
static int cmd_watch(struct admin *a, int argc, char **argv)
{
	static const char *cmd = "watch";
	char key[RKV_REG_KEY_MAX], me[128];
	uint64_t gone_since[RKV_MAP_SERVERS_MAX] = { 0 };
	char gone_name[RKV_MAP_SERVERS_MAX][RKV_SERVER_NAME_MAX] = { { 0 } };
	unsigned grace = 0, sweep_s = 0;
	uint64_t next_rebuild = 0, next_sweep = 0;
	int64_t lease = 0;
	int said_wait = 0, rc = 0;
	struct rkv_map *m;

	for (int i = 0; i < argc; i++) {
		char *end;

		if (!strcmp(argv[i], "--grace") && i + 1 < argc) {
			grace = (unsigned)strtoul(argv[++i], &end, 10);
			if (*end || !*argv[i])
				return fail(cmd, "--grace '%s' is not a number "
					    "of milliseconds", argv[i]);
		} else if (!strcmp(argv[i], "--sweep-every") && i + 1 < argc) {
			sweep_s = (unsigned)strtoul(argv[++i], &end, 10);
			if (*end || !*argv[i] || !sweep_s)
				return fail(cmd, "--sweep-every '%s' is not a "
					    "number of seconds (1 or more)",
					    argv[i]);
		} else {
			return fail(cmd, "'%s': the options are --grace MS and "
				    "--sweep-every S", argv[i]);
		}
	}
	m = rkv_malloc(sizeof(*m));
	if (!m)
		return fail(cmd, "%s", "out of memory");
	signal(SIGINT, watch_signal);
	signal(SIGTERM, watch_signal);
	snprintf(key, sizeof(key), "/rkv/%s/coordinator", a->u.cluster);
	snprintf(me, sizeof(me), "pid %ld", (long)getpid());
	printf("watching cluster %s (failover %u ms after a server's "
	       "registration lapses)\n", a->u.cluster, grace);
	fflush(stdout);
	while (!g_watch_stop) {
		int64_t rev = 0;

		watch_sleep(500);
		/* the coordinator's key, under a lease of ours */
		if (lease && rkv_etcd_lease_keepalive(a->e, lease, NULL))
			lease = 0;
		if (!lease) {
			if (rkv_etcd_lease_grant(a->e, RKV_REG_TTL_S, &lease))
				continue; /* etcd away: try again */
			if (rkv_etcd_put_if(a->e, key, me, strlen(me), lease,
					    0)) {
				rkv_etcd_lease_revoke(a->e, lease);
				lease = 0;
				if (!said_wait++)
					printf("another coordinator holds %s: "
					       "waiting\n", key);
				fflush(stdout);
				continue;
			}
			printf("coordinator of cluster %s\n", a->u.cluster);
			fflush(stdout);
		}
		if (load_registered(a, cmd) || load_map(a, cmd, m, &rev))
			continue;
		if (rkv_map_r(m) < 2)
			continue; /* nothing to promote */
		uint64_t now = rkv_now_ms();

		for (unsigned i = 0; i < m->n && !g_watch_stop; i++) {
			if (alive(a, &m->srv[i])) {
				gone_since[i] = 0;
				continue;
			}
			if (!gone_since[i] ||
			    strcmp(gone_name[i], m->srv[i].name)) {
				gone_since[i] = now;
				snprintf(gone_name[i], sizeof(gone_name[i]),
					 "%s", m->srv[i].name);
				printf("server %s %s\n", m->srv[i].name,
				       restarted(a, &m->srv[i])
					       ? "restarted empty"
					       : "is not registered");
				fflush(stdout);
			}
			if (now - gone_since[i] < grace)
				continue;
			printf("failing over %s\n", m->srv[i].name);
			fflush(stdout);
			rc = do_failover(a, m->srv[i].name, 0);
			printf("failover of %s %s\n", m->srv[i].name,
			       rc ? "stopped (tried again)" : "done");
			fflush(stdout);
			memset(gone_since, 0, sizeof(gone_since));
			break; /* the map changed: look again */
		}
		/* a rebuild that stopped after its map was published */
		static uint8_t parts[RKV_MAP_PARTS];
		int have = 0;

		memset(parts, 0, sizeof(parts));
		if (!g_watch_stop && now >= next_rebuild &&
		    !load_rebuild(a, cmd, parts, &have) && have) {
			next_rebuild = now + 10000;
			printf("finishing a rebuild\n");
			fflush(stdout);
			rc = rebuild(a, cmd, m, parts);
			if (rc)
				printf("rebuild stopped (tried again)\n");
			fflush(stdout);
		}
		/* the tombstones of deletes, when asked to */
		if (!next_sweep)
			next_sweep = now + sweep_s * 1000ull;
		if (sweep_s && !g_watch_stop && now >= next_sweep) {
			next_sweep = now + sweep_s * 1000ull;
			printf("sweeping\n");
			fflush(stdout);
			rc = cmd_sweep(a);
			if (rc)
				printf("sweep stopped (tried again)\n");
			fflush(stdout);
		}
	}
	if (lease)
		rkv_etcd_lease_revoke(a->e, lease);
	rkv_free(m);
	printf("watch stopped\n");
	return rc ? 2 : 0;
}

int rkv_admin_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "cluster", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct admin a = { .url = getenv("RKV_CLUSTER"), .timeout_ms = ETCD_MS };
	char why[300];
	const char *cmd;
	int ch, rc;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			a.url = optarg;
			break;
		case 't':
			a.timeout_ms = (unsigned)strtoul(optarg, NULL, 10);
			if (!a.timeout_ms)
				return fail("--timeout", "'%s' is not a number "
					    "of milliseconds", optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return fail(argv[optind - 1], "%s",
				    "unknown option (try --help)");
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	cmd = argv[optind];
	if (!a.url || !*a.url)
		return fail(cmd, "%s", "no cluster: --cluster "
			    "etcd://HOST:PORT/CLUSTER or $RKV_CLUSTER");
	if (rkv_reg_parse_url(a.url, &a.u, why, sizeof(why)))
		return fail(cmd, "%s", why);
	if (strcmp(cmd, "status") && strcmp(cmd, "init") && strcmp(cmd, "map") &&
	    strcmp(cmd, "join") && strcmp(cmd, "drain") &&
	    strcmp(cmd, "failover") && strcmp(cmd, "rebuild") &&
	    strcmp(cmd, "watch") && strcmp(cmd, "sweep"))
		return fail(cmd, "%s", "unknown command (try --help)");
	if (rkv_etcd_open(a.u.endpoint, a.timeout_ms, &a.e, why, sizeof(why)))
		return fail(cmd, "%s", why);
	if (!strcmp(cmd, "status"))
		rc = cmd_status(&a);
	else if (!strcmp(cmd, "init"))
		rc = cmd_init(&a, argc - optind - 1, argv + optind + 1);
	else if (!strcmp(cmd, "join") || !strcmp(cmd, "drain"))
		rc = cmd_move(&a, cmd, argc - optind - 1, argv + optind + 1);
	else if (!strcmp(cmd, "failover"))
		rc = cmd_failover(&a, argc - optind - 1, argv + optind + 1);
	else if (!strcmp(cmd, "rebuild"))
		rc = cmd_rebuild(&a);
	else if (!strcmp(cmd, "watch"))
		rc = cmd_watch(&a, argc - optind - 1, argv + optind + 1);
	else if (!strcmp(cmd, "sweep"))
		rc = cmd_sweep(&a);
	else
		rc = cmd_map(&a);
	rkv_free(a.reg);
	rkv_etcd_close(a.e);
	return rc;
}
