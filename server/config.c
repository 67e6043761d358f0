/* SPDX-License-Identifier: MIT */
/*
 * config.c - rkv-server's settings: one table (name, type, bounds, default,
 * help), like Redis's static_configs[], drives defaults, getopt_long
 * parsing, --help and the printed effective configuration, so a setting is
 * added in one place.  Values are checked one by one when parsed (syntax,
 * bounds, alignment) and together in rkv_srv_config_finish (exclusive
 * options, grace > lease, chunk <= memory).  Every error is one line that
 * names the option; nothing here prints except to the FILE given.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "server_internal.h"
#include "size.h"
#include "version.h"

enum cfg_type {
	T_ADDR,  /* provider address, checked with rkv_tp_addr_parse */
	T_STR,   /* free string */
	T_SIZE,  /* bytes with K/M/G/T suffix */
	T_U64,   /* unsigned decimal */
	T_I64,   /* signed decimal */
	T_LEVEL, /* log level name */
};

enum cfg_flags {
	F_ALIGN64 = 1u << 0, /* multiple of 64 */
	F_POW2 = 1u << 1,    /* power of two */
};

struct cfg_row {
	const char *name;    /* long option, without "--" */
	enum cfg_type type;
	size_t off;          /* field in struct rkv_srv_config */
	size_t cap;          /* T_ADDR/T_STR: field size */
	int64_t min, max;    /* bounds (numbers) */
	unsigned flags;      /* enum cfg_flags */
	const char *def;     /* default, parsed like the CLI; NULL = unset */
	const char *metavar;
	const char *help;
};

#define FIELD(f) offsetof(struct rkv_srv_config, f)
#define CAP(f) sizeof(((struct rkv_srv_config *)0)->f)

static const struct cfg_row g_rows[] = {
	{ "listen", T_ADDR, FIELD(listen), CAP(listen), 0, 0, 0,
	  "tcp://127.0.0.1:7000", "ADDR",
	  "tcp://HOST:PORT, shm:///NAME, verbs://HOST:PORT or auto://HOST:PORT"
	  " (port 0 picks a free one)" },
	{ "name", T_STR, FIELD(name), CAP(name), 0, 0, 0, NULL, "NAME",
	  "this server's name in the cluster map, which places keys by name "
	  "(1-63 of A-Z a-z 0-9 . _ : - [ ]; default: the listening address "
	  "without its provider, e.g. 127.0.0.1:7000)" },
	{ "cluster", T_STR, FIELD(cluster), CAP(cluster), 0, 0, 0, NULL, "URL",
	  "register in the cluster etcd://HOST:PORT/CLUSTER (under a 5 s "
	  "lease, renewed; the data path never waits on etcd)" },
	{ "etcd-wait", T_U64, FIELD(etcd_wait_s), 0, 0, 3600, 0, "30",
	  "SECONDS", "with --cluster: how long a start waits for etcd" },
	{ "memory", T_SIZE, FIELD(memory), 0, 4096,
	  (int64_t)RKV_MAX_DATA_REGION, F_ALIGN64, "256M", "SIZE",
	  "data region bytes (K/M/G/T suffixes)" },
	{ "buckets", T_U64, FIELD(buckets), 0, 1, 1ll << 32, F_POW2, NULL, "N",
	  "index buckets, a power of two (default: from --capacity)" },
	{ "bucket-slots", T_U64, FIELD(bucket_slots), 0, RKV_BUCKET_SLOTS_MIN,
	  RKV_BUCKET_SLOTS_MAX, F_POW2, "32", "N",
	  "slots a bucket holds: 8, 16, 32 or 64 (the index takes 66-79, "
	  "83-86, 92-94 or 96-97 % of its slots before it refuses a key; a "
	  "cold lookup reads 2 buckets)" },
	{ "capacity", T_U64, FIELD(capacity), 0, 1, 6ll << 32, 0, NULL,
	  "KEYS", "keys the index takes from the start (it grows past them): "
	  "sizes its first level so they fill at most half of 8-slot "
	  "buckets, 3/4 of larger ones (default: the index starts small)" },
	{ "index-max", T_SIZE, FIELD(index_max), 0, 0,
	  (int64_t)1 << 42, 0, NULL, "SIZE",
	  "bytes the index may grow to, adding levels of 7 and 56 times its "
	  "first while keys arrive (default: --memory / 8; 0, or --buckets "
	  "alone: a fixed index)" },
	{ "lease", T_U64, FIELD(lease_ms), 0, 1, 60000, 0, "100", "MS",
	  "slot lock lease in milliseconds" },
	{ "grace", T_U64, FIELD(grace_ms), 0, 1, 3600000, 0, "1000", "MS",
	  "block reuse grace period in milliseconds (> --lease)" },
	{ "big-grace", T_U64, FIELD(big_grace_ms), 0, 1, 3600000, 0, NULL,
	  "MS", "grace period of blocks over 256 KiB, longer than the slowest "
	  "read of the largest value (>= --grace; default: --grace, at least "
	  "5000)" },
	{ "idle-spin", T_U64, FIELD(idle_spin_us), 0, 0, 1000000, 0, "1000",
	  "US", "after its last control message the loop stays awake this "
	  "long (150 us naps), then blocks until the next (0: at once)" },
	{ "chunk", T_SIZE, FIELD(chunk), 0, 4096, RKV_SRV_CHUNK_MAX, F_ALIGN64,
	  "1M", "SIZE", "default chunk a client carves blocks from" },
	{ "max-value", T_SIZE, FIELD(max_value), 0, 0, RKV_VALUE_LIMIT, 0,
	  "64M", "SIZE", "largest value a client may put (at most 1 GiB less "
	  "1,056 bytes); clients learn it when they connect" },
	{ "counters", T_U64, FIELD(counters), 0, 0, 1 << 20, 0, "4096", "N",
	  "8-byte counter words for FETCH_ADD (barriers); 0: none" },
	{ "max-clients", T_U64, FIELD(max_clients), 0, 1, 65536, 0, "1024",
	  "N", "most clients connected at once (beyond: -EUSERS)" },
	{ "max-clients-per-peer", T_U64, FIELD(max_clients_peer), 0, 1, 65536,
	  0, "256", "N",
	  "tcp/verbs: clients connected at once from one peer address, each "
	  "a connection (a QP on verbs) (beyond: -EUSERS)" },
	{ "max-chunks", T_U64, FIELD(max_chunks), 0, 1, 1 << 20, 0, "4096",
	  "N", "chunk grants one client may hold (beyond: -EDQUOT)" },
	{ "max-inflight", T_U64, FIELD(max_inflight), 0, 1, RKV_CTRL_RECVS_MAX,
	  0, "8", "N",
	  "control requests one client may have unanswered (RECVs posted)" },
	{ "secret-file", T_STR, FIELD(secret_file), CAP(secret_file), 0, 0, 0,
	  NULL, "FILE",
	  "shared secret clients must prove (HMAC challenge); mode 0600 or "
	  "stricter" },
	{ "read-only-secret-file", T_STR, FIELD(ro_secret_file),
	  CAP(ro_secret_file), 0, 0, 0, NULL, "FILE",
	  "a second secret: clients that prove it may only read, whatever "
	  "they ask (the server hands them read-only rkeys)" },
	{ "data-memory", T_STR, FIELD(data_memory), CAP(data_memory), 0, 0, 0,
	  "host", "WHERE",
	  "data region in host memory, or gpu[:N] (CUDA device N, default 0)" },
	{ "rotate-rkeys", T_U64, FIELD(rotate_s), 0, 0, 86400, 0, "0", "SECONDS",
	  "register the regions anew and hand clients new rkeys this often; "
	  "0: never" },
	{ "rkey-windows", T_STR, FIELD(rkey_windows_s), CAP(rkey_windows_s),
	  0, 0, 0, "auto", "auto|on|off",
	  "rkeys that work on one client's connection only (verbs: type-2B "
	  "memory windows bound to its QP; tcp: salted per connection); "
	  "auto: where the device has them, on: refuse to start without" },
	{ "max-handshakes", T_U64, FIELD(max_handshakes), 0, 0, 1 << 20, 0,
	  "0", "N",
	  "tcp/shm: connections accepted whose transport HELLO has not come;"
	  " beyond, the oldest is closed (0: min(1024, fd limit / 2))" },
	{ "max-handshakes-per-peer", T_U64, FIELD(max_handshakes_peer), 0, 1,
	  1 << 20, 0, "64", "N",
	  "tcp: such connections from one peer address (beyond: its oldest "
	  "is closed)" },
	{ "shm-mode", T_STR, FIELD(shm_mode_s), CAP(shm_mode_s), 0, 0, 0,
	  "0600", "MODE",
	  "shm: mode of the socket file, octal (who may connect, with "
	  "--shm-group)" },
	{ "shm-group", T_STR, FIELD(shm_group), CAP(shm_group), 0, 0, 0, NULL,
	  "GROUP",
	  "shm: group of the socket file; its members may connect (with "
	  "--shm-mode 0660)" },
	{ "shm-allow-uid", T_STR, FIELD(shm_allow), CAP(shm_allow), 0, 0, 0,
	  NULL, "USERS",
	  "shm: users (uids or names, comma-separated, at most 8) who may "
	  "connect besides root and the server's own" },
	{ "device", T_STR, FIELD(device), CAP(device), 0, 0, 0, NULL, "NAME",
	  "verbs: RDMA device (default: first with an active port)" },
	{ "port", T_I64, FIELD(port), 0, 0, 255, 0, "0", "N",
	  "verbs: device port (0 chooses)" },
	{ "gid-index", T_I64, FIELD(gid_index), 0, -1, 1023, 0, "-1", "N",
	  "verbs: GID index (-1 chooses RoCEv2)" },
	{ "mtu", T_I64, FIELD(mtu), 0, 0, 4096, 0, "0", "BYTES",
	  "verbs: path MTU of the QPs, 256-4096 (0: the port's active MTU)" },
	{ "traffic-class", T_I64, FIELD(traffic_class), 0, -1, 255, 0, "-1",
	  "N", "verbs: traffic class of RoCE v2 packets, DSCP << 2 | ECN "
	  "(e.g. 106: DSCP 26, ECN capable; -1: the device's)" },
	{ "service-level", T_I64, FIELD(service_level), 0, -1, 15, 0, "-1",
	  "N", "verbs: InfiniBand service level of the QPs (-1: the path's)" },
	{ "max-rd-atomic", T_I64, FIELD(max_rd_atomic), 0, 0, 255, 0, "0", "N",
	  "verbs: READs and atomics a QP keeps in flight and takes in "
	  "(0: the device's limit, at most 16)" },
	{ "metrics", T_STR, FIELD(metrics), CAP(metrics), 0, 0, 0, NULL,
	  "HOST:PORT",
	  "serve the counters in Prometheus' text format at "
	  "http://HOST:PORT/metrics (port 0 picks a free one; the URL is "
	  "logged)" },
	{ "log-level", T_LEVEL, FIELD(log_level), 0, 0, 0, 0, "info", "LEVEL",
	  "debug, info, warn or error" },
};

#define NROWS (sizeof(g_rows) / sizeof(g_rows[0]))
_Static_assert(NROWS <= sizeof(uint64_t) * 8, "set_mask holds every row");

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || *end ? -EINVAL : 0;
}

static int parse_i64(const char *s, int64_t *out)
{
	char *end;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	long long v = strtoll(s, &end, 10);

	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

/*
 * A big block (over 256 KiB) is one READ of up to the largest value, which
 * on a loaded host over tcp, or on an emulated NIC, takes seconds (64 MiB:
 * 1.05 s on tcp beside make test, 2.25 s in the Soft-RoCE guest); a read
 * slower than the block's grace period is retried, so that period must be
 * longer than the slowest read.  Small blocks keep --grace.
 */
#define BIG_GRACE_MIN_MS 5000u

static uint64_t big_grace_default(uint64_t grace_ms)
{
	return grace_ms > BIG_GRACE_MIN_MS ? grace_ms : BIG_GRACE_MIN_MS;
}

uint64_t rkv_srv_buckets_for(uint64_t keys, unsigned slots)
{
	/* inserts balance a key's two buckets, and the first refusal comes
	 * at 66-79 % of the slots of 8-slot buckets, 83-86 % of 16, 92-94 %
	 * of 32 and 96-97 % of 64 (lower the larger the index:
	 * docs/DESIGN.md §4): keys fill at most half of 8-slot buckets, 3/4
	 * of larger ones, so --capacity keys always fit */
	uint64_t per = slots <= 8 ? slots / 2 : slots / 4 * 3;
	uint64_t need = (keys + per - 1) / per, n = 2;

	while (n < need && n < (1ull << 62))
		n <<= 1;
	return n;
}

/* Level 0 of an index that starts small: 1/64 of --index-max (its three
 * levels reach it), at least this many buckets. */
#define START_BUCKETS_MIN 2u

static int is_set(const struct rkv_srv_config *cfg, const char *name);
static void size_str(uint64_t v, char *buf, size_t n);

/*
 * Level 0's buckets (nbuckets) and the levels the index may grow to
 * (layout.h "Levels"): --buckets alone fixes the index (one level);
 * otherwise it may grow while its levels fit in --index-max (default
 * --memory / 8: 8-byte slots for blocks of 64 bytes and more), from
 * --buckets, from --capacity, or from 1/64 of --index-max.
 */
static int index_levels(struct rkv_srv_config *cfg, char *err, size_t errlen)
{
	uint64_t bb = cfg->bucket_slots * 8u, imax, n0;
	unsigned lv = 1;
	char a[32], b[32];

	if (cfg->buckets)
		n0 = cfg->buckets;
	else if (cfg->capacity)
		n0 = rkv_srv_buckets_for(cfg->capacity,
					 (unsigned)cfg->bucket_slots);
	else
		n0 = 0;
	if (n0 > (1ull << 32)) {
		rkv_msgf(err, errlen,
			 "--capacity: %" PRIu64 " keys need more than 2^32 buckets",
			 cfg->capacity);
		return -EINVAL;
	}
	cfg->levels_max = 1;
	if ((cfg->buckets && !is_set(cfg, "index-max")) ||
	    (is_set(cfg, "index-max") && !cfg->index_max)) {
		cfg->nbuckets = n0 ? n0 : rkv_srv_buckets_for(1000000,
				(unsigned)cfg->bucket_slots);
		return 0;
	}
	imax = is_set(cfg, "index-max") ? cfg->index_max : cfg->memory / 8;
	if (!n0) {
		uint64_t want = imax / bb / 64;

		n0 = START_BUCKETS_MIN;
		while (n0 * 2 <= want && n0 < (1ull << 32))
			n0 *= 2;
	}
	cfg->nbuckets = n0;
	if (is_set(cfg, "index-max") && n0 * bb > imax) {
		size_str(imax, a, sizeof(a));
		size_str(n0 * bb, b, sizeof(b));
		rkv_msgf(err, errlen,
			 "--index-max: %s is less than the index %s asks for "
			 "(%s)",
			 a, cfg->buckets ? "--buckets" : "--capacity", b);
		return -EINVAL;
	}
	while (lv < RKV_INDEX_LEVELS_MAX &&
	       rkv_index_nbuckets(n0, lv + 1) <= (1ull << 36) / bb &&
	       rkv_index_nbuckets(n0, lv + 1) * bb <= imax)
		lv++;
	cfg->levels_max = lv;
	return 0;
}

static const struct cfg_row *find_row(const char *name)
{
	for (size_t i = 0; i < NROWS; i++)
		if (strcmp(g_rows[i].name, name) == 0)
			return &g_rows[i];
	return NULL;
}

static void size_str(uint64_t v, char *buf, size_t n)
{
	static const char suf[] = "TGMK";

	for (int i = 0; i < 4; i++) {
		unsigned shift = 10u * (unsigned)(4 - i);

		if (v && v % (1ull << shift) == 0) {
			snprintf(buf, n, "%" PRIu64 "%c", v >> shift, suf[i]);
			return;
		}
	}
	snprintf(buf, n, "%" PRIu64, v);
}

static int set_row(struct rkv_srv_config *cfg, const struct cfg_row *r,
		   const char *value, char *err, size_t errlen)
{
	char *field = (char *)cfg + r->off;
	uint64_t u;
	int64_t i;
	enum rkv_log_level lv;

	switch (r->type) {
	case T_ADDR: {
		struct rkv_tp_addr a;

		if (strlen(value) >= r->cap || rkv_tp_addr_parse(value, &a)) {
			rkv_msgf(err, errlen,
				 "--%s: '%s' is not an address (tcp://HOST:PORT, "
				 "shm:///NAME, verbs://HOST:PORT, auto://HOST:PORT)",
				 r->name, value);
			return -EINVAL;
		}
		memcpy(field, value, strlen(value) + 1);
		return 0;
	}
	case T_STR:
		if (strlen(value) >= r->cap) {
			rkv_msgf(err, errlen,
				 "--%s: '%s' is longer than %zu bytes",
				 r->name, value, r->cap - 1);
			return -EINVAL;
		}
		memcpy(field, value, strlen(value) + 1);
		return 0;
	case T_LEVEL:
		if (rkv_log_level_parse(value, &lv) || lv == RKV_LOG_OFF) {
			rkv_msgf(err, errlen,
				 "--%s: '%s' is not one of debug, info, warn, error",
				 r->name, value);
			return -EINVAL;
		}
		*(int64_t *)(void *)field = lv;
		return 0;
	case T_SIZE:
	case T_U64:
		if (r->type == T_SIZE ? rkv_parse_size(value, &u)
				      : parse_u64(value, &u)) {
			rkv_msgf(err, errlen, "--%s: '%s' is not %s", r->name,
				 value,
				 r->type == T_SIZE
				 ? "a size (a number with an optional "
				 "K, M, G or T suffix)"
				 : "a non-negative integer");
			return -EINVAL;
		}
		if (u < (uint64_t)r->min || u > (uint64_t)r->max) {
			char lo[32], hi[32];

			if (r->type == T_SIZE) {
				size_str((uint64_t)r->min, lo, sizeof(lo));
				size_str((uint64_t)r->max, hi, sizeof(hi));
			} else {
				snprintf(lo, sizeof(lo), "%" PRId64, r->min);
				snprintf(hi, sizeof(hi), "%" PRId64, r->max);
			}
			rkv_msgf(err, errlen,
				 "--%s: %s is out of range [%s, %s]",
				 r->name, value, lo, hi);
			return -EINVAL;
		}
		if ((r->flags & F_ALIGN64) && u % 64) {
			rkv_msgf(err, errlen,
				 "--%s: %s is not a multiple of 64",
				 r->name, value);
			return -EINVAL;
		}
		if ((r->flags & F_POW2) && (u & (u - 1))) {
			rkv_msgf(err, errlen, "--%s: %s is not a power of two",
				 r->name, value);
			return -EINVAL;
		}
		*(uint64_t *)(void *)field = u;
		return 0;
	case T_I64:
		if (parse_i64(value, &i)) {
			rkv_msgf(err, errlen, "--%s: '%s' is not an integer",
				 r->name, value);
			return -EINVAL;
		}
		if (i < r->min || i > r->max) {
			rkv_msgf(err, errlen,
				 "--%s: %s is out of range [%" PRId64 ", %" PRId64
				 "]",
				 r->name, value, r->min, r->max);
			return -EINVAL;
		}
		*(int64_t *)(void *)field = i;
		return 0;
	}
	return -EINVAL;
}

void rkv_srv_config_init(struct rkv_srv_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < NROWS; i++) {
		if (g_rows[i].def &&
		    set_row(cfg, &g_rows[i], g_rows[i].def, NULL, 0) != 0)
			abort(); /* a bad default is a bug in the table */
	}
	index_levels(cfg, NULL, 0);
	cfg->big_grace_ms = big_grace_default(cfg->grace_ms);
	cfg->data_gpu = -1;
	cfg->shm_mode = 0600;
	cfg->shm_gid = -1;
}

int rkv_srv_config_set(struct rkv_srv_config *cfg, const char *name,
		       const char *value, char *err, size_t errlen)
{
	const struct cfg_row *r = find_row(name);
	int rc;

	if (!r) {
		rkv_msgf(err, errlen,
			 "unknown option '--%s' (see --help)", name);
		return -EINVAL;
	}
	rc = set_row(cfg, r, value, err, errlen);
	if (rc == 0)
		cfg->set_mask |= 1ull << (r - g_rows);
	return rc;
}

static int is_set(const struct rkv_srv_config *cfg, const char *name)
{
	const struct cfg_row *r = find_row(name);

	return r && (cfg->set_mask & (1ull << (r - g_rows)));
}

/* A user or group: a decimal id, or a name looked up; -1 if neither. */
static int64_t id_of(const char *s, int group)
{
	uint64_t v;

	if (!parse_u64(s, &v))
		return v < UINT32_MAX ? (int64_t)v : -1;
	if (group) {
		const struct group *g = getgrnam(s);

		return g ? (int64_t)g->gr_gid : -1;
	}
	const struct passwd *pw = getpwnam(s);

	return pw ? (int64_t)pw->pw_uid : -1;
}

/* --shm-mode, --shm-group, --shm-allow-uid into their derived fields. */
static int shm_finish(struct rkv_srv_config *cfg, char *err, size_t errlen)
{
	char list[sizeof(cfg->shm_allow)], *tok, *save = NULL;
	char *end;
	unsigned long mode;

	errno = 0;
	mode = strtoul(cfg->shm_mode_s, &end, 8);
	if (errno || !cfg->shm_mode_s[0] || *end || mode > 0777) {
		rkv_msgf(err, errlen,
			 "--shm-mode: '%s' is not an octal mode (0 to 0777)",
			 cfg->shm_mode_s);
		return -EINVAL;
	}
	cfg->shm_mode = (unsigned)mode;
	cfg->shm_gid = -1;
	if (cfg->shm_group[0]) {
		int64_t g = id_of(cfg->shm_group, 1);

		if (g < 0) {
			rkv_msgf(err, errlen, "--shm-group: no group '%s'",
				 cfg->shm_group);
			return -EINVAL;
		}
		cfg->shm_gid = (int)g;
	}
	cfg->shm_nuids = 0;
	memcpy(list, cfg->shm_allow, sizeof(list));
	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int64_t u = id_of(tok, 0);

		if (u < 0 || cfg->shm_nuids == RKV_TP_SHM_UIDS) {
			rkv_msgf(err, errlen,
				 u < 0 ? "--shm-allow-uid: no user '%s'"
				       : "--shm-allow-uid: more than 8 users "
					 "('%s')",
				 tok);
			return -EINVAL;
		}
		cfg->shm_uids[cfg->shm_nuids++] = (uint32_t)u;
	}
	return 0;
}

int rkv_srv_config_finish(struct rkv_srv_config *cfg, char *err,
			  size_t errlen)
{
	int rc;

	char a[32], b[32];

	if (is_set(cfg, "buckets") && is_set(cfg, "capacity")) {
		rkv_msgf(err, errlen,
			 "--buckets and --capacity size the same index: give one");
		return -EINVAL;
	}
	rc = shm_finish(cfg, err, errlen);
	if (rc)
		return rc;
	if (!strcmp(cfg->rkey_windows_s, "auto")) {
		cfg->rkey_windows = RKV_WINDOWS_AUTO;
	} else if (!strcmp(cfg->rkey_windows_s, "on")) {
		cfg->rkey_windows = RKV_WINDOWS_ON;
	} else if (!strcmp(cfg->rkey_windows_s, "off")) {
		cfg->rkey_windows = RKV_WINDOWS_OFF;
	} else {
		rkv_msgf(err, errlen, "--rkey-windows: '%s' is not auto, on "
			 "or off", cfg->rkey_windows_s);
		return -EINVAL;
	}
	if (cfg->name[0] && rkv_server_name_check(cfg->name)) {
		rkv_msgf(err, errlen,
			 "--name: '%s' is not a server name (1-63 of A-Z a-z "
			 "0-9 . _ : - [ ])", cfg->name);
		return -EINVAL;
	}
	if (strcmp(cfg->data_memory, "host") == 0) {
		cfg->data_gpu = -1;
	} else if (strcmp(cfg->data_memory, "gpu") == 0) {
		cfg->data_gpu = 0;
	} else if (strncmp(cfg->data_memory, "gpu:", 4) == 0 &&
		   cfg->data_memory[4] >= '0' && cfg->data_memory[4] <= '9' &&
		   strlen(cfg->data_memory) <= 7 &&
		   strspn(cfg->data_memory + 4, "0123456789") ==
			   strlen(cfg->data_memory + 4)) {
		cfg->data_gpu = atoi(cfg->data_memory + 4);
	} else {
		rkv_msgf(err, errlen,
			 "--data-memory: '%s' is not host, gpu or gpu:N",
			 cfg->data_memory);
		return -EINVAL;
	}
	if (cfg->grace_ms <= cfg->lease_ms) {
		rkv_msgf(err, errlen,
			 "--grace: %" PRIu64 " ms must be longer than --lease (%"
			 PRIu64 " ms)",
			 cfg->grace_ms, cfg->lease_ms);
		return -EINVAL;
	}
	if (!is_set(cfg, "big-grace")) {
		cfg->big_grace_ms = big_grace_default(cfg->grace_ms);
	} else if (cfg->big_grace_ms < cfg->grace_ms) {
		rkv_msgf(err, errlen,
			 "--big-grace: %" PRIu64 " ms must be at least --grace (%"
			 PRIu64 " ms)",
			 cfg->big_grace_ms, cfg->grace_ms);
		return -EINVAL;
	}
	if (cfg->chunk > cfg->memory) {
		size_str(cfg->chunk, a, sizeof(a));
		size_str(cfg->memory, b, sizeof(b));
		rkv_msgf(err, errlen,
			 "--chunk: %s is larger than --memory (%s)", a,
			 b);
		return -EINVAL;
	}
	return index_levels(cfg, err, errlen);
}

void rkv_srv_config_usage(FILE *out, const char *prog)
{
	fprintf(out, "usage: %s [options]\n\n", prog);
	fprintf(out, "rkv-server: the memory side of rkv.  Clients read and "
		     "write its regions with\none-sided RDMA; the server only "
		     "serves the control plane.\n\noptions:\n");
	for (size_t i = 0; i < NROWS; i++) {
		const struct cfg_row *r = &g_rows[i];
		char opt[48];

		snprintf(opt, sizeof(opt), "--%s %s", r->name, r->metavar);
		fprintf(out, "  %-24s %s", opt, r->help);
		if (r->def)
			fprintf(out, " [%s]", r->def);
		fputc('\n', out);
	}
	fprintf(out, "  %-24s %s\n", "-h, --help", "this text");
	fprintf(out, "  %-24s %s\n", "--version",
		"the release, protocol and providers");
	fprintf(out, "  %-24s %s\n", "--check-fabric",
		"report what breaks RDMA here (device, port, atomics, GID "
		"type, MTU, memlock, PFC/ECN) for the --device/--port/"
		"--gid-index/--mtu/--memory given, one line each, and exit");
	fprintf(out, "\nOn start it prints its configuration to stderr and, "
		     "when ready, one line\n\"rkv-server: listening on ADDR\" "
		     "to stdout.  SIGINT or SIGTERM stop it.\n");
}

int rkv_srv_config_parse(struct rkv_srv_config *cfg, int argc, char **argv,
			 FILE *out, char *err, size_t errlen)
{
	struct option opts[NROWS + 4];
	int c, rc;

	for (size_t i = 0; i < NROWS; i++) {
		opts[i] = (struct option){ .name = g_rows[i].name,
					   .has_arg = required_argument,
					   .flag = NULL,
					   .val = 256 + (int)i };
	}
	opts[NROWS] = (struct option){ "help", no_argument, NULL, 'h' };
	opts[NROWS + 1] = (struct option){ "version", no_argument, NULL, 'V' };
	opts[NROWS + 2] = (struct option){ "check-fabric", no_argument, NULL,
					   'F' };
	opts[NROWS + 3] = (struct option){ NULL, 0, NULL, 0 };

	optind = 0; /* glibc: full reinitialisation, so tests can reparse */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (c == 'h') {
			rkv_srv_config_usage(out, argv[0]);
			return 1;
		}
		if (c == 'F') {
			cfg->check_fabric = 1;
			continue;
		}
		if (c == 'V')
			return rkv_version_print("rkv-server",
						 RKV_PROTO_VERSION) ? -EIO : 1;
		if (c == '?') {
			rkv_msgf(err, errlen,
				 "unknown option '%s' (see --help)",
				 argv[optind - 1]);
			return -EINVAL;
		}
		if (c == ':') {
			rkv_msgf(err, errlen, "option '%s' needs a value",
				 argv[optind - 1]);
			return -EINVAL;
		}
		rc = rkv_srv_config_set(cfg, g_rows[c - 256].name, optarg, err,
					errlen);
		if (rc)
			return rc;
	}
	if (optind < argc) {
		rkv_msgf(err, errlen, "unexpected argument '%s' (see --help)",
			 argv[optind]);
		return -EINVAL;
	}
	return rkv_srv_config_finish(cfg, err, errlen);
}

void rkv_srv_config_print(const struct rkv_srv_config *cfg, FILE *out)
{
	char buf[64];

	fprintf(out, "rkv-server configuration:\n");
	for (size_t i = 0; i < NROWS; i++) {
		const struct cfg_row *r = &g_rows[i];
		const char *field = (const char *)cfg + r->off;
		const char *from = (cfg->set_mask & (1ull << i)) ? "" : " (default)";

		fprintf(out, "  %-12s ", r->name);
		switch (r->type) {
		case T_ADDR:
		case T_STR:
			fprintf(out, "%s",
				*field ? field
				       : r->off == FIELD(secret_file)
						 ? (cfg->ro_secret_file[0]
							    ? "(none: no client may write)"
							    : "(none: any client is served)")
				       : r->off == FIELD(ro_secret_file)
						 ? "(none)"
				       : r->off == FIELD(name)
						 ? "(the listening address)"
				       : r->off == FIELD(cluster)
						 ? "(none: a static cluster)"
				       : r->off == FIELD(shm_group) ||
						 r->off == FIELD(shm_allow)
						 ? "(none)"
						 : "(auto)");
			break;
		case T_SIZE:
			if (r->off == FIELD(index_max) && !cfg->index_max) {
				fprintf(out, "%s", cfg->levels_max > 1
						   ? "(--memory / 8)"
						   : "(none: a fixed index)");
				break;
			}
			size_str(*(const uint64_t *)(const void *)field, buf,
				 sizeof(buf));
			fprintf(out, "%s", buf);
			break;
		case T_U64:
			if (r->off == FIELD(buckets)) {
				uint64_t n0s = cfg->nbuckets *
					       cfg->bucket_slots;

				size_str(n0s * 8, buf, sizeof(buf));
				fprintf(out,
					"%" PRIu64 " (index %s, %" PRIu64
					" keys for sure, at %u%%",
					cfg->nbuckets, buf,
					n0s * (cfg->bucket_slots <= 8 ? 2 : 3) /
						4,
					cfg->bucket_slots <= 8 ? 50 : 75);
				if (cfg->levels_max > 1) {
					size_str(rkv_srv_nslots(cfg) * 8, buf,
						 sizeof(buf));
					fprintf(out, "; grows online to %u "
						"levels, %s", cfg->levels_max,
						buf);
				} else {
					fprintf(out, "; fixed");
				}
				fprintf(out, ")");
				from = is_set(cfg, "buckets") ? ""
							      : " (derived)";
			} else if (r->off == FIELD(capacity) &&
				   !cfg->capacity) {
				fprintf(out, "(none: the index starts small)");
			} else {
				fprintf(out, "%" PRIu64,
					*(const uint64_t *)(const void *)field);
				if (r->off == FIELD(big_grace_ms) &&
				    !is_set(cfg, "big-grace"))
					from = " (derived)";
			}
			break;
		case T_I64:
			fprintf(out, "%" PRId64,
				*(const int64_t *)(const void *)field);
			break;
		case T_LEVEL:
			fprintf(out, "%s",
				rkv_log_level_str((enum rkv_log_level) *
						  (const int64_t *)(const void *)
							  field));
			break;
		}
		fprintf(out, "%s\n", from);
	}
	fflush(out);
}
