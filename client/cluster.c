/* SPDX-License-Identifier: MIT */
/*
 * cluster.c - a client's cluster map from etcd (cluster_file
 * "etcd://HOST:PORT/CLUSTER"; common/registry.h).
 *
 * At create the client reads /rkv/CLUSTER/map, the map `rkv admin` put
 * there, and parses it like a cluster file (proto/cmap.h, with its epoch).
 * etcd unreachable: retried with backoff within the connect timeout, each
 * try logged, then create fails naming etcd.  No map yet, or a map that
 * does not parse (edited by hand), fails create with the reason; nothing
 * is connected.  After create the client never talks to etcd: the data
 * path does not wait on it, and etcd going down changes nothing for
 * clients already running.
 */
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "etcd.h"
#include "registry.h"
#include "rtime.h"

#define RETRY_FIRST_MS 100
#define RETRY_MAX_MS 1000

static int transient(int rc)
{
	return rc == -ECONNREFUSED || rc == -ETIMEDOUT || rc == -EHOSTUNREACH ||
	       rc == -ECONNRESET || rc == -EAGAIN || rc == -EIO;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The map's text, retried while etcd is unreachable. */
static int read_map(struct rkv_client *c, struct rkv_etcd *e,
		    const struct rkv_reg_url *u, const char *key,
		    struct rkv_etcd_kv *kv)
{
	uint64_t end = rkv_now_ms() + c->opts.connect_timeout_ms;
	unsigned backoff = RETRY_FIRST_MS;
	int rc;

	for (;;) {
		rc = rkv_etcd_get(e, key, kv, NULL);
		if (!transient(rc) || rkv_now_ms() + backoff > end)
			break;
		clog_(c, RKV_LOG_WARN, "cluster %s: %s; retrying", u->cluster,
		      rkv_etcd_why(e));
		sleep_ms(backoff);
		backoff = backoff * 2 < RETRY_MAX_MS ? backoff * 2 : RETRY_MAX_MS;
	}
	if (rc == -ENOENT)
		clog_(c, RKV_LOG_ERROR,
		      "cluster %s has no map in etcd (%s) yet: make it with "
		      "`rkv admin --cluster %s init`",
		      u->cluster, u->endpoint, c->opts.cluster_file);
	if (rc == -ENOENT)
		return -ENODATA; /* not "no such key" */
	if (rc)
		clog_(c, RKV_LOG_ERROR, "cluster %s: %s", u->cluster,
		      rkv_etcd_why(e));
	return rc;
}

int cluster_load(struct rkv_client *c, const char *url)
{
	struct rkv_etcd_kv kv = { 0 };
	struct rkv_etcd *e = NULL;
	struct rkv_reg_url u;
	char why[300] = "", key[RKV_REG_KEY_MAX];
	int rc;

	rc = rkv_reg_parse_url(url, &u, why, sizeof(why));
	if (!rc)
		rc = rkv_etcd_open(u.endpoint, c->opts.connect_timeout_ms, &e,
				   why, sizeof(why));
	if (rc) {
		clog_(c, RKV_LOG_ERROR, "cluster %s: %s", url, why);
		return rc;
	}
	rkv_reg_map_key(&u, key, sizeof(key));
	rc = read_map(c, e, &u, key, &kv);
	if (!rc) {
		if (strlen(kv.val) != kv.val_len) {
			snprintf(why, sizeof(why), "it holds a NUL byte");
			rc = -EINVAL;
		} else {
			rc = rkv_map_parse(kv.val, c->map, why, sizeof(why));
		}
		if (!rc && !c->map->epoch) {
			snprintf(why, sizeof(why), "no epoch line");
			rc = -EINVAL;
		}
		if (rc)
			clog_(c, RKV_LOG_ERROR,
			      "cluster %s: the map in etcd (%s, revision %lld) "
			      "is not a cluster map: %s",
			      u.cluster, key, (long long)kv.mod_rev, why);
		else
			clog_(c, RKV_LOG_DEBUG,
			      "cluster %s: map epoch %llu, %u servers",
			      u.cluster, (unsigned long long)c->map->epoch,
			      c->map->n);
	}
	rkv_etcd_kv_fini(&kv);
	rkv_etcd_close(e);
	return rc;
}
