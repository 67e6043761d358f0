/* SPDX-License-Identifier: MIT */
/*
 * registry.c - the cluster registry's paths and registrations
 * (registry.h).
 */
#include "registry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define SCHEME "etcd://"

int rkv_reg_is_url(const char *s)
{
	return s && strncmp(s, SCHEME, strlen(SCHEME)) == 0;
}

static int cluster_char(int ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
}

int rkv_reg_parse_url(const char *url, struct rkv_reg_url *u, char *why,
		      size_t why_len)
{
	const char *hp, *slash, *name;
	size_t hlen, nlen;

	memset(u, 0, sizeof(*u));
	if (!rkv_reg_is_url(url)) {
		rkv_msgf(why, why_len, "'%.200s' is not etcd://HOST:PORT/CLUSTER",
			 url ? url : "");
		return -EINVAL;
	}
	hp = url + strlen(SCHEME);
	slash = strchr(hp, '/');
	hlen = slash ? (size_t)(slash - hp) : strlen(hp);
	name = slash ? slash + 1 : "";
	nlen = strlen(name);
	if (hlen == 0 || !memchr(hp, ':', hlen) ||
	    hlen + strlen(SCHEME) >= sizeof(u->endpoint)) {
		rkv_msgf(why, why_len, "'%.200s': want etcd://HOST:PORT/CLUSTER",
			 url);
		return -EINVAL;
	}
	if (nlen == 0 || nlen >= sizeof(u->cluster)) {
		rkv_msgf(why, why_len,
			 "'%.200s': name the cluster (etcd://HOST:PORT/CLUSTER, "
			 "1-63 characters)", url);
		return -EINVAL;
	}
	for (size_t i = 0; i < nlen; i++) {
		if (!cluster_char((unsigned char)name[i])) {
			rkv_msgf(why, why_len,
				 "'%.200s': a cluster name is made of A-Z a-z "
				 "0-9 . _ -", url);
			return -EINVAL;
		}
	}
	snprintf(u->endpoint, sizeof(u->endpoint), "%s%.*s", SCHEME,
		 (int)hlen, hp);
	snprintf(u->cluster, sizeof(u->cluster), "%s", name);
	return 0;
}

void rkv_reg_map_key(const struct rkv_reg_url *u, char *buf, size_t cap)
{
	snprintf(buf, cap, "/rkv/%s/map", u->cluster);
}

void rkv_reg_next_key(const struct rkv_reg_url *u, char *buf, size_t cap)
{
	snprintf(buf, cap, "/rkv/%s/next", u->cluster);
}

void rkv_reg_rebuild_key(const struct rkv_reg_url *u, char *buf, size_t cap)
{
	snprintf(buf, cap, "/rkv/%s/rebuild", u->cluster);
}

void rkv_reg_servers_prefix(const struct rkv_reg_url *u, char *buf,
			    size_t cap)
{
	snprintf(buf, cap, "/rkv/%s/servers/", u->cluster);
}

void rkv_reg_server_key(const struct rkv_reg_url *u, const char *name,
			char *buf, size_t cap)
{
	snprintf(buf, cap, "/rkv/%s/servers/%s", u->cluster, name);
}

int rkv_reg_server_format(const struct rkv_reg_server *s, char *buf,
			  size_t cap)
{
	int n = snprintf(buf, cap, "addr %s\nproto %u\npid %ld\n"
			 "boot %016llx\n", s->addr, s->proto, s->pid,
			 (unsigned long long)s->boot);

	return n < 0 || (size_t)n >= cap ? -ENOSPC : n;
}

int rkv_reg_server_parse(const char *name, const char *val, size_t len,
			 struct rkv_reg_server *out, char *why, size_t why_len)
{
	char line[512];
	size_t off = 0;

	memset(out, 0, sizeof(*out));
	if (!name || !*name || strlen(name) >= sizeof(out->name)) {
		rkv_msgf(why, why_len, "a registration with a bad name");
		return -EINVAL;
	}
	snprintf(out->name, sizeof(out->name), "%s", name);
	while (off < len) {
		const char *nl = memchr(val + off, '\n', len - off);
		size_t l = nl ? (size_t)(nl - (val + off)) : len - off;
		char *sp, *end;

		if (l >= sizeof(line) || memchr(val + off, '\0', l)) {
			rkv_msgf(why, why_len, "server %s: a registration line "
				 "is not text", name);
			return -EINVAL;
		}
		memcpy(line, val + off, l);
		line[l] = '\0';
		off += l + (nl ? 1 : 0);
		sp = strchr(line, ' ');
		if (!sp)
			continue;
		*sp++ = '\0';
		if (!strcmp(line, "addr")) {
			snprintf(out->addr, sizeof(out->addr), "%s", sp);
		} else if (!strcmp(line, "proto")) {
			out->proto = (unsigned)strtoul(sp, &end, 10);
			if (*end)
				out->proto = 0;
		} else if (!strcmp(line, "pid")) {
			out->pid = strtol(sp, &end, 10);
		} else if (!strcmp(line, "boot")) {
			out->boot = strtoull(sp, &end, 16);
			if (*end)
				out->boot = 0;
		}
	}
	if (!out->addr[0] || !out->proto) {
		rkv_msgf(why, why_len, "server %s: its registration lacks %s",
			 name, out->addr[0] ? "a protocol version"
					    : "an address");
		return -EINVAL;
	}
	return 0;
}
