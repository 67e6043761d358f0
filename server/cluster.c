/* SPDX-License-Identifier: MIT */
/*
 * cluster.c - rkv-server's registration in its cluster's etcd
 * (--cluster etcd://HOST:PORT/CLUSTER; common/registry.h).
 *
 * At start the server grants itself a lease of RKV_REG_TTL_S seconds and
 * creates /rkv/CLUSTER/servers/NAME under it (create-only: a name held by
 * another live server is refused, naming that server; a registration of
 * the same address is the server's own previous run, taken over).  etcd
 * unreachable at start: retried with backoff for --etcd-wait seconds,
 * each try logged, then the start fails.  A thread renews the lease every
 * TTL/3; when etcd is unreachable the server keeps serving (the data path
 * never touches etcd) and says so once; when the lease has lapsed (etcd
 * was away longer than the TTL, or the server was paused) it registers
 * anew.  At a clean stop the lease is revoked, so the registration goes
 * at once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "etcd.h"
#include "registry.h"
#include "rtime.h"
#include "server_internal.h"

#define ETCD_CALL_MS 2000
#define RETRY_FIRST_MS 200
#define RETRY_MAX_MS 2000

struct rkv_srv_reg {
	struct rkv_reg_url u;
	char url[RKV_SRV_PATH_MAX];
	char name[RKV_SERVER_NAME_MAX];
	char key[RKV_REG_KEY_MAX];
	struct rkv_reg_server me;
	struct rkv_etcd *e;
	int64_t lease;
	pthread_t thr;
	int thr_up;
	pthread_mutex_t mu;       /* stop, with cv */
	pthread_cond_t cv;
	pthread_mutex_t emu;      /* e: one caller at a time once thr is up */
	int stop;
	int etcd_down;            /* said so already */
	struct rkv_srv *srv;      /* set under emu once serving */
	uint64_t until_ms;        /* the lease word's value (emu) */
};

/* etcd's lease outlives t0 (CLOCK_REALTIME ms, taken before the grant or
 * keepalive was sent) by the TTL: the lease word promises less. */
static void lease_known(struct rkv_srv_reg *r, uint64_t t0)
{
	r->until_ms = t0 + RKV_REG_TTL_S * 1000ull - RKV_LEASE_MARGIN_MS;
	if (r->srv)
		rkv_srv_lease_set(r->srv, r->until_ms);
}

static int transient(int rc)
{
	return rc == -ECONNREFUSED || rc == -ETIMEDOUT || rc == -EHOSTUNREACH ||
	       rc == -ECONNRESET || rc == -EAGAIN || rc == -EIO;
}

/* Create our key under a new lease.  0, -EADDRINUSE (the name is
 * another live server's: why says whose), or an etcd error. */
static int register_once(struct rkv_srv_reg *r, char *why, size_t why_len)
{
	char val[1024];
	struct rkv_etcd_kv kv = { 0 };
	struct rkv_reg_server other;
	int64_t lease = 0;
	int n = rkv_reg_server_format(&r->me, val, sizeof(val)), rc;

	if (n < 0)
		return n;
	rc = rkv_etcd_lease_grant(r->e, RKV_REG_TTL_S, &lease);
	if (rc)
		goto etcd_err;
	rc = rkv_etcd_put_if(r->e, r->key, val, (size_t)n, lease, 0);
	if (rc == -ECANCELED) {
		rc = rkv_etcd_get(r->e, r->key, &kv, NULL);
		if (rc == -ENOENT)
			rc = -EAGAIN; /* it just lapsed: try again */
		if (rc)
			goto etcd_err;
		if (rkv_reg_server_parse(r->name, kv.val, kv.val_len, &other,
					 NULL, 0) == 0 &&
		    strcmp(other.addr, r->me.addr) != 0) {
			rkv_msgf(why, why_len,
				 "the name '%s' is taken in cluster %s by a live "
				 "server at %s (pid %ld): give this one another "
				 "--name",
				 r->name, r->u.cluster, other.addr, other.pid);
			rc = -EADDRINUSE;
			goto out;
		}
		/* our own address: a previous run of this server */
		rc = rkv_etcd_put_if(r->e, r->key, val, (size_t)n, lease,
				     kv.mod_rev);
		if (rc == -ECANCELED)
			rc = -EAGAIN;
	}
	if (rc)
		goto etcd_err;
	r->lease = lease;
	rkv_etcd_kv_fini(&kv);
	return 0;
etcd_err:
	if (rc == -EAGAIN)
		rkv_msgf(why, why_len, "the registration of '%s' changed "
			 "meanwhile", r->name);
	else
		rkv_msgf(why, why_len, "%s", rkv_etcd_why(r->e));
out:
	rkv_etcd_kv_fini(&kv);
	if (lease)
		rkv_etcd_lease_revoke(r->e, lease);
	return rc;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int parse_map(const struct rkv_etcd_kv *kv, struct rkv_map *m);

/* The registration lapsed: if the map no longer holds us (a failover
 * replaced us while we were paused or cut off), serve none of its
 * clients from now on (emu held). */
static void check_removed(struct rkv_srv_reg *r)
{
	struct rkv_map *m = rkv_malloc(sizeof(*m));
	char key[RKV_REG_KEY_MAX];

	/* the published map, then the one a failover is making */
	for (int i = 0; m && r->srv && i < 2; i++) {
		struct rkv_etcd_kv kv = { 0 };
		int out;

		if (i == 0)
			rkv_reg_map_key(&r->u, key, sizeof(key));
		else
			rkv_reg_next_key(&r->u, key, sizeof(key));
		/* a next map without us at r = 1 is a drain, which reads
		 * our keys still: only a failover's (r > 1) fences us */
		out = !rkv_etcd_get(r->e, key, &kv, NULL) && !parse_map(&kv, m) &&
		      rkv_map_find(m, r->name) < 0 &&
		      (i == 0 || rkv_map_r(m) > 1);
		rkv_etcd_kv_fini(&kv);
		if (!out)
			continue;
		if (!atomic_exchange(&r->srv->removed, 1))
			rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP,
				"cluster %s: the %s map (epoch %llu) no longer "
				"holds '%s' (failed over while this server was "
				"away): refusing the clients of older maps; "
				"restart it empty to serve again",
				r->u.cluster, i ? "next" : "current",
				(unsigned long long)m->epoch, r->name);
		rkv_srv_lease_set(r->srv, 0);
		atomic_store(&r->srv->self_fence, (uint32_t)m->epoch);
		break;
	}
	rkv_free(m);
}

/* Keep the lease alive; register anew when it lapsed. */
static void renew(struct rkv_srv_reg *r)
{
	char why[512] = "";
	uint64_t t0 = rkv_wall_coarse_ms();
	int rc = rkv_etcd_lease_keepalive(r->e, r->lease, NULL);

	if (!rc)
		lease_known(r, t0);
	if (rc == -ENOENT) {
		rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
			"cluster %s: the registration lapsed; registering anew",
			r->u.cluster);
		check_removed(r);
		t0 = rkv_wall_coarse_ms();
		rc = register_once(r, why, sizeof(why));
		if (rc == -EADDRINUSE)
			rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP, "cluster %s: %s",
				r->u.cluster, why);
		/* again once registered: a failover that began after the
		 * first look wrote its next map before it checked that we
		 * are not registered (rkv admin failover) */
		if (!rc) {
			check_removed(r);
			lease_known(r, t0);
		}
	}
	if (rc && transient(rc)) {
		if (!r->etcd_down)
			rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
				"cluster %s: etcd unreachable (%s); serving goes "
				"on, the registration lapses after %u s",
				r->u.cluster, rkv_etcd_why(r->e),
				RKV_REG_TTL_S);
		r->etcd_down = 1;
	} else if (!rc && r->etcd_down) {
		rkv_log(RKV_LOG_INFO, RKV_SRV_COMP,
			"cluster %s: etcd reachable again", r->u.cluster);
		r->etcd_down = 0;
	}
}

static void *reg_thread(void *arg)
{
	struct rkv_srv_reg *r = arg;

	pthread_mutex_lock(&r->mu);
	while (!r->stop) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += RKV_REG_TTL_S / 3 ? RKV_REG_TTL_S / 3 : 1;
		pthread_cond_timedwait(&r->cv, &r->mu, &ts);
		if (r->stop)
			break;
		pthread_mutex_unlock(&r->mu);
		pthread_mutex_lock(&r->emu);
		renew(r);
		pthread_mutex_unlock(&r->emu);
		pthread_mutex_lock(&r->mu);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* This run's boot (common/registry.h): random, never 0. */
static uint64_t new_boot(void)
{
	uint64_t b = 0;

	if (getrandom(&b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		b = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^
		    ((uint64_t)getpid() << 16);
	}
	return b ? b : 1;
}

int rkv_srv_reg_start(const char *url, const char *name, const char *addr,
		      unsigned wait_s, struct rkv_srv_reg **out, char *why,
		      size_t why_len)
{
	struct rkv_srv_reg *r = rkv_calloc(1, sizeof(*r));
	uint64_t end = rkv_now_ms() + (uint64_t)wait_s * 1000;
	unsigned backoff = RETRY_FIRST_MS;
	int rc;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	rc = rkv_reg_parse_url(url, &r->u, why, why_len);
	if (rc)
		goto fail;
	snprintf(r->url, sizeof(r->url), "%s", url);
	snprintf(r->name, sizeof(r->name), "%s", name);
	rkv_reg_server_key(&r->u, name, r->key, sizeof(r->key));
	snprintf(r->me.name, sizeof(r->me.name), "%s", name);
	snprintf(r->me.addr, sizeof(r->me.addr), "%s", addr);
	r->me.proto = RKV_PROTO_VERSION;
	r->me.pid = (long)getpid();
	r->me.boot = new_boot();
	rc = rkv_etcd_open(r->u.endpoint, ETCD_CALL_MS, &r->e, why, why_len);
	if (rc)
		goto fail;
	for (;;) {
		uint64_t t0 = rkv_wall_coarse_ms();

		rc = register_once(r, why, why_len);
		if (!rc)
			lease_known(r, t0);
		if (!rc || !(transient(rc) || rc == -EAGAIN) ||
		    rkv_now_ms() + backoff > end)
			break;
		rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
			"cluster %s: %s; retrying for %u s more", r->u.cluster,
			why, (unsigned)((end - rkv_now_ms() + 999) / 1000));
		sleep_ms(backoff);
		backoff = backoff * 2 < RETRY_MAX_MS ? backoff * 2 : RETRY_MAX_MS;
	}
	if (rc)
		goto fail;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	pthread_mutex_init(&r->emu, NULL);
	rc = -pthread_create(&r->thr, NULL, reg_thread, r);
	if (rc) {
		rkv_msgf(why, why_len, "cannot start a thread: %s",
			 strerror(-rc));
		rkv_etcd_lease_revoke(r->e, r->lease);
		goto fail;
	}
	r->thr_up = 1;
	rkv_log(RKV_LOG_INFO, RKV_SRV_COMP,
		"registered as '%s' in cluster %s (%s, lease %u s)", name,
		r->u.cluster, r->u.endpoint, RKV_REG_TTL_S);
	*out = r;
	return 0;
fail:
	rkv_etcd_close(r->e);
	rkv_free(r);
	return rc;
}

static int parse_map(const struct rkv_etcd_kv *kv, struct rkv_map *m)
{
	char why[300];

	return strlen(kv->val) == kv->val_len &&
			       !rkv_map_parse(kv->val, m, why, sizeof(why)) &&
			       m->epoch
		       ? 0
		       : -EINVAL;
}

/* The map at key into *m: 0, or -errno (-ENOENT: none). */
static int get_map(struct rkv_srv_reg *r, const char *key, struct rkv_map *m)
{
	struct rkv_etcd_kv kv = { 0 };
	int rc;

	pthread_mutex_lock(&r->emu); /* the renewing thread shares r->e */
	rc = rkv_etcd_get(r->e, key, &kv, NULL);
	pthread_mutex_unlock(&r->emu);

	if (!rc)
		rc = parse_map(&kv, m);
	rkv_etcd_kv_fini(&kv);
	return rc;
}

/* Whether server s (its index in m, -1: not in it) holds a copy of
 * partition p in map m. */
static int holds(const struct rkv_map *m, unsigned p, int s)
{
	return s >= 0 && rkv_map_holds(m, p, (unsigned)s);
}

/* Whether the map m holds server s (its index; -1: not in it) with a
 * boot other than ours: a run of this server before it restarted empty. */
static int restarted(const struct rkv_map *m, int s, uint64_t boot)
{
	return s >= 0 && m->srv[s].boot && m->srv[s].boot != boot;
}

/*
 * The map m (the newest one: published, or the next) gives this server
 * copies of r > 1 that an earlier run of it held, and this run starts
 * empty.  Serving them would answer "absent" for acknowledged keys (as
 * a primary) or let a failover promote an empty backup, so no client of
 * m or older is served (fenced at m's epoch + 1) and every partition
 * says gone; rkv admin fails this server over (watch does it by
 * itself), and `rkv admin join` adds it again as a fresh member.
 */
static int refuse_map(struct rkv_srv_reg *r, struct rkv_srv *srv,
		      const struct rkv_map *m)
{
	uint32_t e = (uint32_t)m->epoch + 1;
	int rc = rkv_srv_fence(srv, e, NULL, rkv_now_ms());

	if (rc)
		return rc;
	for (unsigned p = 0; p < RKV_MAP_PARTS; p++)
		rkv_srv_part_set(srv, p, rkv_part_word(RKV_PART_GONE, e));
	rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP,
		"cluster %s: the map of epoch %llu was made with an earlier "
		"run of '%s' (this one starts empty, without the copies the "
		"map gives it): serving none of them until it is failed over "
		"(rkv admin watch does it, or rkv admin failover %s), then "
		"join it again", r->u.cluster, (unsigned long long)m->epoch,
		r->name, r->name);
	return 0;
}

int rkv_srv_reg_fence(struct rkv_srv_reg *r, struct rkv_srv *srv)
{
	struct rkv_map *m = rkv_malloc(sizeof(*m)), *n = rkv_malloc(sizeof(*n));
	char key[RKV_REG_KEY_MAX];
	unsigned gone = 0;
	int rc = m && n ? 0 : -ENOMEM, have_next = 0, in_m = -1, in_n = -1;

	pthread_mutex_lock(&r->emu);
	r->srv = srv; /* for check_removed and the lease word, from now on */
	rkv_srv_lease_set(srv, r->until_ms);
	pthread_mutex_unlock(&r->emu);
	if (!rc) {
		rkv_reg_map_key(&r->u, key, sizeof(key));
		rc = get_map(r, key, m);
	}
	if (!rc) {
		rkv_reg_next_key(&r->u, key, sizeof(key));
		have_next = get_map(r, key, n) == 0 && n->epoch == m->epoch + 1;
		in_m = rkv_map_find(m, r->name);
		in_n = have_next ? rkv_map_find(n, r->name) : -1;
	}
	if (!rc && rkv_map_r(m) > 1 &&
	    (restarted(m, in_m, r->me.boot) ||
	     (have_next && restarted(n, in_n, r->me.boot)))) {
		rc = refuse_map(r, srv, have_next ? n : m);
		goto out;
	}
	for (unsigned p = 0; !rc && p < RKV_MAP_PARTS; p++) {
		/* ours: we hold a copy (the primary's, or a backup's at
		 * r > 1: legs write backups through this table too) */
		int mine = holds(m, p, in_m);
		uint64_t w = 0;

		if (mine && have_next && !holds(n, p, in_n))
			w = rkv_part_word(RKV_PART_GONE, (uint32_t)n->epoch);
		else if (!mine)
			w = rkv_part_word(RKV_PART_GONE, (uint32_t)m->epoch);
		if (w) {
			rkv_srv_part_set(srv, p, w);
			gone++;
		}
	}
	if (!rc)
		rkv_log(RKV_LOG_INFO, RKV_SRV_COMP,
			"cluster %s: map epoch %llu%s: %u partitions are "
			"another server's", r->u.cluster,
			(unsigned long long)m->epoch,
			have_next ? " (a migration in progress)" : "", gone);
out:
	rkv_free(m);
	rkv_free(n);
	return rc == -ENOENT ? 0 : rc;
}

void rkv_srv_reg_stop(struct rkv_srv_reg *r)
{
	if (!r)
		return;
	if (r->thr_up) {
		pthread_mutex_lock(&r->mu);
		r->stop = 1;
		pthread_cond_signal(&r->cv);
		pthread_mutex_unlock(&r->mu);
		pthread_join(r->thr, NULL);
		pthread_mutex_destroy(&r->mu);
		pthread_cond_destroy(&r->cv);
		pthread_mutex_destroy(&r->emu);
	}
	if (r->lease)
		rkv_etcd_lease_revoke(r->e, r->lease); /* gone at once */
	rkv_etcd_close(r->e);
	rkv_free(r);
}
