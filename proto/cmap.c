/* SPDX-License-Identifier: MIT */
/*
 * cmap.c - the cluster map and rendezvous placement (cmap.h).
 */
#include "cmap.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

#define SEED_NAME 0x9fb21c651e98df25ull
#define PART_MIX 0x9e3779b97f4a7c15ull

static int name_char(int ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
	       ch == ':' || ch == '-' || ch == '[' || ch == ']';
}

int rkv_server_name_check(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n >= RKV_SERVER_NAME_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!name_char((unsigned char)name[i]))
			return -EINVAL;
	return 0;
}

int rkv_server_name_from_addr(const char *addr, char *name, size_t cap)
{
	const char *p = strstr(addr, "://");

	p = p ? p + 3 : addr;
	while (*p == '/')
		p++; /* shm:///NAME */
	if (snprintf(name, cap, "%s", p) >= (int)cap)
		return -EINVAL;
	return rkv_server_name_check(name);
}

void rkv_map_init(struct rkv_map *m)
{
	memset(m, 0, sizeof(*m));
}

static void set_why(char *why, size_t why_len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_why(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (!why || !why_len)
		return;
	va_start(ap, fmt);
	vsnprintf(why, why_len, fmt, ap);
	va_end(ap);
}

int rkv_map_add(struct rkv_map *m, const char *name, const char *addr,
		char *why, size_t why_len)
{
	struct rkv_map_server *s;

	if (m->n >= RKV_MAP_SERVERS_MAX) {
		set_why(why, why_len, "more than %u servers",
			RKV_MAP_SERVERS_MAX);
		return -EINVAL;
	}
	s = &m->srv[m->n];
	memset(s, 0, sizeof(*s));
	if (!addr || !*addr || strlen(addr) >= RKV_MAP_ADDR_MAX ||
	    !strstr(addr, "://")) {
		set_why(why, why_len, "'%s' is not a server address "
			"(PROVIDER://HOST:PORT)", addr ? addr : "");
		return -EINVAL;
	}
	snprintf(s->addr, sizeof(s->addr), "%s", addr);
	if (name) {
		if (rkv_server_name_check(name)) {
			set_why(why, why_len, "'%s' is not a server name (1-63 "
				"of A-Z a-z 0-9 . _ : - [ ])", name);
			return -EINVAL;
		}
		snprintf(s->name, sizeof(s->name), "%s", name);
		s->named = 1;
	} else if (rkv_server_name_from_addr(addr, s->name,
					     sizeof(s->name))) {
		set_why(why, why_len, "address '%s' makes no server name: "
			"give one (NAME ADDRESS)", addr);
		return -EINVAL;
	}
	for (unsigned i = 0; i < m->n; i++) {
		if (strcmp(m->srv[i].name, s->name) == 0) {
			set_why(why, why_len, "server name '%s' listed twice",
				s->name);
			return -EINVAL;
		}
		if (strcmp(m->srv[i].addr, s->addr) == 0) {
			set_why(why, why_len, "address '%s' listed twice",
				s->addr);
			return -EINVAL;
		}
	}
	s->name_hash = rkv_hash64(s->name, strlen(s->name), SEED_NAME);
	m->n++;
	return 0;
}

uint64_t rkv_map_score(const struct rkv_map_server *s, unsigned part)
{
	return rkv_mix64(s->name_hash ^ rkv_mix64((uint64_t)(part + 1) * PART_MIX));
}

/* a ranks above b for partition p: the higher score; ties (never seen
 * for distinct names) go to the larger name hash, still independent of
 * the order servers are listed in */
static int ranks_above(const struct rkv_map *m, unsigned a, uint64_t sa,
		       unsigned b, uint64_t sb)
{
	return sa > sb ||
	       (sa == sb && m->srv[a].name_hash > m->srv[b].name_hash);
}

int rkv_map_transit(const struct rkv_map *m)
{
	for (unsigned i = 0; i < m->n; i++)
		if (m->srv[i].state != RKV_MAP_MEMBER)
			return (int)i;
	return -1;
}

unsigned rkv_map_r(const struct rkv_map *m)
{
	unsigned r = m->replicas ? m->replicas : 1;

	if (r > RKV_MAP_REPLICAS_MAX)
		r = RKV_MAP_REPLICAS_MAX;
	return r < m->n ? r : (m->n ? m->n : 1);
}

int rkv_map_holds(const struct rkv_map *m, unsigned part, unsigned s)
{
	for (unsigned k = 0; k < m->nrep[part]; k++)
		if (m->rep[part][k] == s)
			return 1;
	return 0;
}

/* The r best servers for partition p in score order into top (how many:
 * the return), leaving out those in state skip (joining or leaving). */
static unsigned best_r(const struct rkv_map *m, unsigned p, unsigned r,
		       int skip, unsigned *top)
{
	uint64_t score[RKV_MAP_REPLICAS_MAX] = { 0 };
	unsigned k = 0;

	/* the r best, kept sorted: insertion into a short list */
	for (unsigned i = 0; i < m->n; i++) {
		uint64_t sc;
		unsigned j = k;

		if (m->srv[i].state == skip)
			continue;
		sc = rkv_map_score(&m->srv[i], p);
		while (j > 0 && ranks_above(m, i, sc, top[j - 1], score[j - 1]))
			j--;
		if (j >= r)
			continue;
		for (unsigned t = (k < r ? k : r - 1); t > j; t--) {
			top[t] = top[t - 1];
			score[t] = score[t - 1];
		}
		top[j] = i;
		score[j] = sc;
		if (k < r)
			k++;
	}
	return k;
}

void rkv_map_place(struct rkv_map *m)
{
	unsigned r = rkv_map_r(m);
	int transit = rkv_map_transit(m);

	if (!m->n)
		return;
	if (m->n == 1) {
		/* one server holds every partition (a client of one server
		 * places its map on every connect: no scores to compute) */
		memset(m->rep, 0, sizeof(m->rep));
		memset(m->owner, 0, sizeof(m->owner));
		memset(m->nrep, 1, sizeof(m->nrep));
		return;
	}
	for (unsigned p = 0; p < RKV_MAP_PARTS; p++) {
		unsigned top[RKV_MAP_SET_MAX] = { 0 }, k;

		/* in transit: the set before the move (without the server
		 * joining), then the one server the set after the move
		 * (without the server leaving) adds */
		k = best_r(m, p, r, RKV_MAP_JOINING, top);
		if (transit >= 0) {
			unsigned after[RKV_MAP_REPLICAS_MAX];
			unsigned ka = best_r(m, p, r, RKV_MAP_LEAVING, after);

			for (unsigned a = 0; a < ka; a++) {
				unsigned in = 0;

				for (unsigned b = 0; b < k; b++)
					in |= top[b] == after[a];
				if (!in && k < RKV_MAP_SET_MAX)
					top[k++] = after[a];
			}
		}
		for (unsigned j = 0; j < RKV_MAP_SET_MAX; j++)
			m->rep[p][j] = (uint16_t)(j < k ? top[j] : top[0]);
		m->nrep[p] = (uint8_t)k;
		m->owner[p] = (uint16_t)top[0];
	}
}

int rkv_map_find(const struct rkv_map *m, const char *name)
{
	for (unsigned i = 0; i < m->n; i++)
		if (strcmp(m->srv[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* One line of the text form: "NAME ADDRESS", "ADDRESS" or nothing. */
static int parse_line(struct rkv_map *m, char *line, char *why,
		      size_t why_len)
{
	char *tok[3] = { NULL };
	unsigned nt = 0;
	int state = RKV_MAP_MEMBER, rc, have_boot = 0;
	uint64_t boot = 0;
	char *h = strchr(line, '#'), *save = NULL;

	if (h)
		*h = '\0';
	for (char *t = strtok_r(line, " \t\r\n", &save); t;
	     t = strtok_r(NULL, " \t\r\n", &save)) {
		if (nt >= 2 && !have_boot && !strncmp(t, "boot=", 5)) {
			char *end;

			errno = 0;
			boot = strtoull(t + 5, &end, 16);
			if (errno || *end || !t[5] || !boot || t[5] == '-') {
				set_why(why, why_len, "'%s': a server's boot is "
					"boot=HEX, not 0", t);
				return -EINVAL;
			}
			have_boot = 1;
			continue;
		}
		if (nt == 3 || have_boot) {
			set_why(why, why_len, "'%s': want NAME ADDRESS "
				"[joining|leaving] [boot=HEX] or ADDRESS", t);
			return -EINVAL;
		}
		tok[nt++] = t;
	}
	if (nt == 0)
		return 0;
	if (have_boot && (!strcmp(tok[0], "epoch") ||
			  !strcmp(tok[0], "replicas"))) {
		set_why(why, why_len, "'%s': boot= belongs on a server line",
			tok[0]);
		return -EINVAL;
	}
	if (nt == 2 && strcmp(tok[0], "epoch") == 0) {
		char *end;
		unsigned long long e;

		if (m->n || m->epoch) {
			set_why(why, why_len, "'epoch' must come once, before "
				"the servers");
			return -EINVAL;
		}
		errno = 0;
		e = strtoull(tok[1], &end, 10);
		if (errno || *end || !e || tok[1][0] == '-') {
			set_why(why, why_len, "'%s' is not an epoch (1, 2, ...)",
				tok[1]);
			return -EINVAL;
		}
		m->epoch = e;
		return 0;
	}
	if (nt == 2 && strcmp(tok[0], "replicas") == 0) {
		if (m->n || m->replicas) {
			set_why(why, why_len, "'replicas' must come once, before "
				"the servers");
			return -EINVAL;
		}
		if (strlen(tok[1]) != 1 || tok[1][0] < '1' ||
		    tok[1][0] > '0' + (int)RKV_MAP_REPLICAS_MAX) {
			set_why(why, why_len, "'%s' is not a replica count "
				"(1 to %u)", tok[1], RKV_MAP_REPLICAS_MAX);
			return -EINVAL;
		}
		m->replicas = (unsigned)(tok[1][0] - '0');
		return 0;
	}
	if (nt == 3) {
		if (!strcmp(tok[2], "joining"))
			state = RKV_MAP_JOINING;
		else if (!strcmp(tok[2], "leaving"))
			state = RKV_MAP_LEAVING;
		else {
			set_why(why, why_len, "'%s': a server is 'joining' or "
				"'leaving', or neither", tok[2]);
			return -EINVAL;
		}
		if (rkv_map_transit(m) >= 0) {
			set_why(why, why_len, "two servers in transit ('%s' "
				"and '%s')", m->srv[rkv_map_transit(m)].name,
				tok[0]);
			return -EINVAL;
		}
	}
	if (nt == 1)
		return rkv_map_add(m, NULL, tok[0], why, why_len);
	rc = rkv_map_add(m, tok[0], tok[1], why, why_len);
	if (!rc) {
		m->srv[m->n - 1].state = state;
		m->srv[m->n - 1].boot = boot;
	}
	return rc;
}

/* The end of a parse: some servers, placed. */
static int finish_parse(struct rkv_map *m, char *why, size_t why_len)
{
	if (!m->n) {
		set_why(why, why_len, "no servers listed");
		return -EINVAL;
	}
	if (m->replicas > m->n) {
		set_why(why, why_len, "replicas %u, but only %u server%s listed",
			m->replicas, m->n, m->n == 1 ? " is" : "s are");
		return -EINVAL;
	}
	if (rkv_map_transit(m) >= 0 && m->replicas < 2) {
		set_why(why, why_len, "a server in transit ('%s') needs "
			"replicas 2 or more", m->srv[rkv_map_transit(m)].name);
		return -EINVAL;
	}
	rkv_map_place(m);
	return 0;
}

int rkv_map_parse(const char *text, struct rkv_map *m, char *why,
		  size_t why_len)
{
	char line[1024], reason[256] = "";
	unsigned lineno = 0;

	rkv_map_init(m);
	while (*text) {
		size_t len = strcspn(text, "\n");
		int rc;

		lineno++;
		if (len >= sizeof(line)) {
			snprintf(why, why_len, "line %u: too long", lineno);
			return -EINVAL;
		}
		memcpy(line, text, len);
		line[len] = '\0';
		text += len;
		if (*text == '\n')
			text++;
		rc = parse_line(m, line, reason, sizeof(reason));
		if (rc) {
			snprintf(why, why_len, "line %u: %s", lineno, reason);
			return rc;
		}
	}
	return finish_parse(m, why, why_len);
}

int rkv_map_parse_list(const char *list, struct rkv_map *m, char *why,
		       size_t why_len)
{
	char item[RKV_SERVER_NAME_MAX + RKV_MAP_ADDR_MAX + 1];

	rkv_map_init(m);
	while (list && *list) {
		size_t len = strcspn(list, ",");
		char *a = item, *eq, *end, *sch;
		int rc;

		if (len >= sizeof(item)) {
			set_why(why, why_len, "a server address is too long");
			return -EINVAL;
		}
		memcpy(item, list, len);
		item[len] = '\0';
		list += len;
		if (*list == ',')
			list++;
		while (*a == ' ' || *a == '\t')
			a++;
		end = a + strlen(a);
		while (end > a && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (!*a)
			continue;
		eq = strchr(a, '=');
		sch = strstr(a, "://");
		if (eq && sch && eq < sch) {
			*eq = '\0';
			rc = rkv_map_add(m, a, eq + 1, why, why_len);
		} else {
			rc = rkv_map_add(m, NULL, a, why, why_len);
		}
		if (rc)
			return rc;
	}
	return finish_parse(m, why, why_len);
}

int rkv_map_format(const struct rkv_map *m, char *buf, size_t cap)
{
	size_t off = 0;
	int n;

	n = m->epoch ? snprintf(buf, cap, "epoch %llu\n",
				(unsigned long long)m->epoch)
		     : snprintf(buf, cap, "%s", "");
	if (n < 0 || (size_t)n >= cap)
		return -ENOSPC;
	off = (size_t)n;
	if (m->replicas > 1) {
		n = snprintf(buf + off, cap - off, "replicas %u\n", m->replicas);
		if (n < 0 || (size_t)n >= cap - off)
			return -ENOSPC;
		off += (size_t)n;
	}
	for (unsigned i = 0; i < m->n; i++) {
		const char *st = m->srv[i].state == RKV_MAP_JOINING ? " joining"
				 : m->srv[i].state == RKV_MAP_LEAVING ? " leaving"
								      : "";

		char b[32] = "";

		if (m->srv[i].boot)
			snprintf(b, sizeof(b), " boot=%016llx",
				 (unsigned long long)m->srv[i].boot);
		n = snprintf(buf + off, cap - off, "%s %s%s%s\n",
			     m->srv[i].name, m->srv[i].addr, st, b);
		if (n < 0 || (size_t)n >= cap - off)
			return -ENOSPC;
		off += (size_t)n;
	}
	return (int)off;
}
