/* SPDX-License-Identifier: MIT */
/*
 * registry.h - where a cluster lives in etcd, and how it is written.
 *
 * A cluster is named by a URL "etcd://HOST:PORT/CLUSTER" (CLUSTER: 1-63 of
 * A-Z a-z 0-9 . _ -).  Under it, in etcd:
 *   /rkv/CLUSTER/servers/NAME  a running server's registration, put under
 *                             the server's lease: it disappears when the
 *                             server stops, or stops renewing (dead,
 *                             paused, cut off) for the lease's TTL
 *   /rkv/CLUSTER/map           the cluster map, in the text form of
 *                             proto/cmap.h with its "epoch N" line; put
 *                             only by `rkv admin`, with compare-and-swap
 *                             on the key's revision, so no two maps ever
 *                             have one epoch
 * A registration is text too, one "KEY VALUE" per line:
 *   addr ADDRESS   where clients reach it
 *   proto N        its protocol version (proto/msg.h)
 *   pid N          its process id (for the operator)
 * This layer knows the paths and the registration's format only; it
 * parses no map (proto/cmap.h does).
 */
#ifndef RKV_COMMON_REGISTRY_H
#define RKV_COMMON_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#define RKV_REG_CLUSTER_MAX 64   /* bytes, NUL included */
#define RKV_REG_NAME_MAX 64      /* server names: proto/cmap.h's */
#define RKV_REG_ADDR_MAX 300
#define RKV_REG_KEY_MAX 256
#define RKV_REG_TTL_S 5          /* a registration's lease */

struct rkv_reg_url {
	char endpoint[RKV_REG_ADDR_MAX]; /* "etcd://HOST:PORT" */
	char cluster[RKV_REG_CLUSTER_MAX];
};

struct rkv_reg_server {
	char name[RKV_REG_NAME_MAX];
	char addr[RKV_REG_ADDR_MAX];
	unsigned proto;
	long pid;
	/* this run of the server: random, never 0 (0: a registration
	 * without one).  A server starts empty, so a map that recorded
	 * another boot for its name holds none of this run's copies. */
	uint64_t boot;
};

/* Whether s is meant as a registry URL (starts with "etcd://"). */
int rkv_reg_is_url(const char *s);
/* Parse "etcd://HOST:PORT/CLUSTER".  0, or -EINVAL with why. */
int rkv_reg_parse_url(const char *url, struct rkv_reg_url *u, char *why,
		      size_t why_len);
/* The etcd keys of a cluster. */
void rkv_reg_map_key(const struct rkv_reg_url *u, char *buf, size_t cap);
/* The map a migration in progress moves to ("next"), beside "map". */
void rkv_reg_next_key(const struct rkv_reg_url *u, char *buf, size_t cap);
/* "/rkv/CLUSTER/rebuild": the partitions a failover left with fewer
 * copies than the map keeps, until their rebuild ends. */
void rkv_reg_rebuild_key(const struct rkv_reg_url *u, char *buf, size_t cap);
void rkv_reg_servers_prefix(const struct rkv_reg_url *u, char *buf,
			    size_t cap);
void rkv_reg_server_key(const struct rkv_reg_url *u, const char *name,
			char *buf, size_t cap);

/* A registration as text into buf; returns its length or -ENOSPC. */
int rkv_reg_server_format(const struct rkv_reg_server *s, char *buf,
			  size_t cap);
/* Parse the registration val (len bytes) of the server named name (the
 * last part of its key).  0, or -EINVAL with why (unknown lines are
 * ignored: a later version may add some). */
int rkv_reg_server_parse(const char *name, const char *val, size_t len,
			 struct rkv_reg_server *out, char *why, size_t why_len);

#endif
