/* SPDX-License-Identifier: MIT */
/*
 * ycsb.h - internals of rkv-ycsb, a YCSB-like load generator that drives
 * rkv, Redis and memcached with the same operation stream.
 *
 * Pieces: props.c reads YCSB workload property files; gen.c holds YCSB's
 * generators (zipfian, scrambled zipfian, skewed latest, uniform, the
 * acknowledged insert counter), key names and record bytes; drv_*.c are the
 * store drivers behind one asynchronous vtable; report.c prints tables,
 * writes and reads the JSON lines and draws CDFs; main.c runs the threads.
 *
 * Every worker thread owns its driver (one connection) and its generator
 * state; the only shared state is the insert key counter and its
 * acknowledgements (as YCSB's CoreWorkload shares them) and the progress
 * counter.
 */
#ifndef RKV_BENCH_YCSB_YCSB_H
#define RKV_BENCH_YCSB_YCSB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hist.h"
#include "rkv.h"

#ifdef __cplusplus
extern "C" {
#endif

#define YCSB_PROG "rkv-ycsb"

/* Operation types, in YCSB's order (CoreWorkload's operation chooser). */
enum ycsb_op_type {
	YCSB_READ = 0,
	YCSB_UPDATE,
	YCSB_INSERT,
	YCSB_SCAN,
	YCSB_RMW,
	YCSB_NTYPES,
};

const char *ycsb_op_str(enum ycsb_op_type t);

enum ycsb_dist {
	YCSB_DIST_UNIFORM = 0,
	YCSB_DIST_ZIPFIAN,
	YCSB_DIST_LATEST,
	YCSB_DIST_HOTSPOT,
	YCSB_DIST_EXPONENTIAL,
	YCSB_DIST_SEQUENTIAL,
};

/* fieldlengthdistribution (YCSB's histogram needs a file: refused) */
enum ycsb_flen {
	YCSB_FLEN_CONSTANT = 0,
	YCSB_FLEN_UNIFORM,
	YCSB_FLEN_ZIPFIAN,
};

/* The workload: YCSB CoreWorkload properties plus a few client ones. */
struct ycsb_props {
	uint64_t recordcount;       /* records loaded (and the key space) */
	uint64_t operationcount;    /* operations in the run phase */
	uint64_t insertstart;       /* first key number of the load phase */
	uint64_t insertcount;       /* keys this load inserts; 0: recordcount -
				     * insertstart */
	double prop[YCSB_NTYPES];   /* operation proportions (weights) */
	enum ycsb_dist reqdist;     /* requestdistribution */
	double hot_data, hot_opn;   /* hotspotdatafraction, hotspotopnfraction */
	double exp_percentile;      /* exponential.percentile */
	double exp_frac;            /* exponential.frac */
	unsigned fieldcount;        /* fields per record */
	unsigned fieldlength;       /* bytes per field (the most, when the
				     * length is not constant) */
	unsigned minfieldlength;    /* the least (uniform, zipfian) */
	enum ycsb_flen flendist;    /* fieldlengthdistribution */
	int writeallfields;         /* an update writes every field */
	int readallfields;          /* accepted; every read reads all */
	int ordered;                /* insertorder=ordered */
	unsigned zeropadding;       /* key number padding (ordered keys) */
	unsigned minscanlength, maxscanlength;
	int scanzipf;               /* scanlengthdistribution=zipfian */
	int dataintegrity;          /* check every value read */
	unsigned threads;           /* threadcount */
	double target;              /* total ops/s; 0: unthrottled */
	uint64_t maxexecutiontime;  /* seconds; 0: none */
	char workload_name[64];     /* basename of the last -P file */
};

void ycsb_props_init(struct ycsb_props *p);
/*
 * Read a property file (YCSB/Java properties: name=value, name:value or
 * "name value"; # and ! comments).  Returns 0, or -1 after printing one line
 * naming the file, line and property.
 */
int ycsb_props_load(struct ycsb_props *p, const char *path);
/* Apply one "name=value" (from -p).  Returns 0 or -1 after printing. */
int ycsb_props_set_arg(struct ycsb_props *p, const char *arg);
/* Check the whole set (after all files and -p).  0 or -1 after printing. */
int ycsb_props_check(const struct ycsb_props *p);

/* ---------------------------------------------------------- generators */

/* xoshiro256** with splitmix64 seeding: each thread has its own. */
struct ycsb_rng {
	uint64_t s[4];
};

void ycsb_rng_seed(struct ycsb_rng *r, uint64_t seed);
uint64_t ycsb_rng_next(struct ycsb_rng *r);
double ycsb_rng_double(struct ycsb_rng *r);           /* [0, 1) */

/* YCSB's Utils.fnvhash64 (FNV-1a over the 8 bytes of val, then abs). */
int64_t ycsb_fnvhash64(int64_t val);

/* YCSB's ZipfianGenerator (Gray et al., SIGMOD 1994). */
struct ycsb_zipf {
	uint64_t items;      /* item count it was built for */
	uint64_t base;
	double theta, zeta2theta, alpha, zetan, eta;
	uint64_t countforzeta;
};

double ycsb_zeta(uint64_t st, uint64_t n, double theta, double initialsum);
void ycsb_zipf_init(struct ycsb_zipf *z, uint64_t min, uint64_t max,
		    double theta, double zetan);
/* nextLong(itemcount): grows zetan incrementally when itemcount grew. */
uint64_t ycsb_zipf_next(struct ycsb_zipf *z, struct ycsb_rng *r,
			uint64_t itemcount);

#define YCSB_ZIPFIAN_CONSTANT 0.99
/* ScrambledZipfianGenerator: a zipfian over 1e10 items, zeta precomputed. */
#define YCSB_SZ_ITEM_COUNT 10000000000ull
#define YCSB_SZ_ZETAN 26.46902820178302

/*
 * The insert key sequence shared by all threads: YCSB's
 * AcknowledgedCounterGenerator.  next() hands out key numbers; ack() marks
 * one finished; last() is the highest number below which every insert was
 * acknowledged (what "latest" and the key chooser may read).
 */
struct ycsb_acked {
	pthread_mutex_t lock;
	_Atomic uint64_t counter;   /* next key number */
	_Atomic uint64_t limit;     /* first not yet acknowledged */
	uint8_t *window;            /* YCSB_ACK_WINDOW flags */
};

#define YCSB_ACK_WINDOW (1u << 20)

int ycsb_acked_init(struct ycsb_acked *a, uint64_t start);
void ycsb_acked_fini(struct ycsb_acked *a);
uint64_t ycsb_acked_next(struct ycsb_acked *a);
uint64_t ycsb_acked_last(struct ycsb_acked *a);
/* Returns 0, or -EOVERFLOW when more than the window is outstanding. */
int ycsb_acked_ack(struct ycsb_acked *a, uint64_t v);

/* Shared, read-only after setup: what every thread's generator needs. */
struct ycsb_wl {
	const struct ycsb_props *p;
	size_t record_len;          /* the longest record: header +
				     * fieldcount * fieldlength */
	double zetan_flen;          /* zeta of the field length zipfian */
	uint64_t insertcount;       /* load phase keys */
	double zetan_latest;        /* zeta(recordcount - 1) for "latest" */
	double zetan_scan;          /* zeta of the scan length zipfian */
	uint64_t sz_itemcount;      /* scrambled zipfian key space */
	struct ycsb_acked *acked;   /* run phase insert sequence */
	double exp_gamma;           /* ExponentialGenerator's gamma */
	uint64_t hot_keys;          /* hotspot: keys in the hot set */
	_Atomic uint64_t seq_next;  /* SequentialGenerator's counter, shared
				     * by the threads as YCSB's is ... */
	_Atomic uint64_t *seq;      /* ... (&seq_next) */
};

int ycsb_wl_init(struct ycsb_wl *wl, const struct ycsb_props *p,
		 struct ycsb_acked *acked);

/* One thread's generator state. */
struct ycsb_gen {
	const struct ycsb_wl *wl;
	struct ycsb_rng rng;
	struct ycsb_zipf keyzipf;   /* scrambled (zipfian) or latest's */
	struct ycsb_zipf scanzipf;
	struct ycsb_rng frng;       /* field choice and field lengths: a
				     * stream of its own, so keys and op
				     * types do not depend on them */
	struct ycsb_zipf flenzipf;
	uint64_t seq;               /* operations generated */
	unsigned tid;
};

void ycsb_gen_init(struct ycsb_gen *g, const struct ycsb_wl *wl,
		   uint64_t seed, unsigned tid);
/* The next run-phase operation: its type, key number, scan length. */
enum ycsb_op_type ycsb_gen_next_type(struct ycsb_gen *g);
uint64_t ycsb_gen_next_keynum(struct ycsb_gen *g);
unsigned ycsb_gen_scan_len(struct ycsb_gen *g);
/* Start the field stream of a phase (load 1, run 0) afresh, so a run's
 * field choices and lengths do not depend on whether this process
 * loaded first. */
void ycsb_gen_fields_seed(struct ycsb_gen *g, uint64_t seed, int load);
/* CoreWorkload's fieldchooser (uniform over the fields) and
 * fieldlengthgenerator (constant, uniform or zipfian in
 * minfieldlength..fieldlength). */
unsigned ycsb_gen_field(struct ycsb_gen *g);
unsigned ycsb_gen_field_len(struct ycsb_gen *g);

/* CoreWorkload.buildKeyName: "user" + (hashed ? fnvhash64(n) : n).
 * Returns the length written (buf holds at least 32 bytes). */
size_t ycsb_key_name(const struct ycsb_props *p, uint64_t keynum, char *buf);

/*
 * Records.  A record is fieldcount fields stored as one value.  With
 * fieldlengthdistribution=constant the fields are fieldlength bytes each,
 * field f at f * fieldlength, and nothing else (the record is
 * fieldcount * fieldlength bytes); otherwise the record starts with a
 * header of every field's length in ycsb_len_width() hex digits, then the
 * fields, each of its own length.
 *
 * A field of L bytes holds its version: when L >= 2, the version's low
 * min(L - 1, 16) hex digits and ':', then bytes derived from the key, the
 * field number and that (possibly truncated) version; a 1-byte field is
 * one derived byte.  Fields written at different times have different
 * versions, so any record read can be checked byte for byte field by
 * field (dataintegrity), whichever fields updates rewrote.
 */
/* hex digits per length in the header; 0 when constant (no header) */
unsigned ycsb_len_width(const struct ycsb_props *p);
size_t ycsb_hdr_len(const struct ycsb_props *p);
/* Write field f of len bytes at version into out. */
void ycsb_field_fill(const char *key, size_t key_len, unsigned f,
		     uint64_t version, size_t len, char *out);
/* Write a whole record (field i of lens[i] bytes; lens NULL: constant)
 * into out; returns its length. */
size_t ycsb_record_fill(const struct ycsb_props *p, const char *key,
			size_t key_len, uint64_t version,
			const unsigned *lens, char *out);
/* Where field f of the record buf (len bytes) is, and how long.  0, or
 * -EBADMSG when buf's length or header is not a record's. */
int ycsb_record_field(const struct ycsb_props *p, const char *buf,
		      size_t len, unsigned f, size_t *off, size_t *flen);
/* 0 when buf has a record's shape: constant, fieldcount * fieldlength
 * bytes; else a header of lengths within min..fieldlength adding up to
 * len.  -EBADMSG otherwise.  Every read is checked so. */
int ycsb_record_shape(const struct ycsb_props *p, const char *buf,
		      size_t len);
/* 0 when buf is a well-formed record for key, every field byte for
 * byte; -EBADMSG otherwise.  scratch: ycsb_wl.record_len bytes. */
int ycsb_record_check(const struct ycsb_props *p, const char *key,
		      size_t key_len, const char *buf, size_t len,
		      char *scratch);
/* Replace field f of the record old (old_len bytes) by fld (flen bytes)
 * into out (cap bytes), the other fields as they were.  Returns the new
 * length, -EBADMSG when old is not a record, -EMSGSIZE when out is too
 * small. */
long ycsb_record_splice(const struct ycsb_props *p, const char *old,
			size_t old_len, unsigned f, const char *fld,
			size_t flen, char *out, size_t cap);

/* -------------------------------------------------------------- drivers */

/* One operation in flight; owned by the worker, lent to the driver. */
struct ycsb_op {
	enum ycsb_op_type type;
	uint64_t keynum;
	char key[32];
	size_t key_len;
	uint64_t version;           /* of the record or field written */
	unsigned scan_len;
	int one_field;              /* update/rmw writes field `field` only
				     * (writeallfields=false) */
	unsigned field;
	char *val;                  /* record to write, or the one field */
	size_t val_len;
	char *buf;                  /* read destination (buf_cap bytes) */
	size_t buf_cap;
	/* results, set by the driver */
	int status;                 /* 0, -ENOENT, -errno */
	size_t out_len;             /* bytes read into buf */
	unsigned rtts;              /* round trips (rkv), else 0 */
	unsigned records;           /* scan: records returned */
	/* harness */
	uint64_t t_submit;          /* ns */
	int busy;                   /* submitted, not yet returned */
	/* driver private */
	struct ycsb_drv *drv;       /* the driver that has it */
	int stage;
	unsigned pending;           /* replies still expected (redis) */
	struct rkv_op rop;          /* rkv */
};

struct ycsb_drv;

struct ycsb_drv_cfg {
	const char *servers;        /* rkv addresses, or host:port */
	const char *provider;       /* rkv: tcp|shm|verbs|auto, or NULL */
	unsigned batch;             /* operations in flight */
	size_t record_len;          /* the longest record */
	const struct ycsb_props *p; /* record layout (splice, shape) */
	int scan_index;             /* keep the redis scan index */
	unsigned tid;
};

struct ycsb_drv_stats {
	uint64_t retries[YCSB_NTYPES];  /* rkv: from rkv_client_stats */
	uint64_t cache_hits, cache_misses, lock_waits, lock_steals;
	uint64_t doorbells;
	int has_rtts;                   /* rtts per op are meaningful */
	int has_retries;
};

/*
 * A store behind the workload.  Operations are asynchronous: submit queues
 * one (-EAGAIN when batch are in flight), poll makes progress and hands back
 * finished ones (it may block, and only when something is in flight).
 */
struct ycsb_drv_ops {
	const char *name;
	/* NULL when the store can do t, else why not ("not supported by ...") */
	const char *(*unsupported)(enum ycsb_op_type t);
	/* Connect; on failure write one line (no newline) to err, return
	 * -errno. */
	int (*create)(const struct ycsb_drv_cfg *cfg, struct ycsb_drv **out,
		      char *err, size_t errlen);
	void (*destroy)(struct ycsb_drv *d);
	int (*submit)(struct ycsb_drv *d, struct ycsb_op *op);
	int (*poll)(struct ycsb_drv *d, struct ycsb_op **done, int max);
	unsigned (*inflight)(const struct ycsb_drv *d);
	/* Counters since the last reset, typed by YCSB operation mix. */
	void (*stats)(struct ycsb_drv *d, const uint64_t *counts,
		      struct ycsb_drv_stats *st);
	void (*stats_reset)(struct ycsb_drv *d);
};

extern const struct ycsb_drv_ops ycsb_drv_rkv;
extern const struct ycsb_drv_ops ycsb_drv_redis;
extern const struct ycsb_drv_ops ycsb_drv_memcached;

/* Split "host:port" (default_port when absent).  0 or -EINVAL. */
int ycsb_hostport(const char *s, char *host, size_t hostlen, int *port,
		  int default_port);

/* --------------------------------------------------------------- report */

/* What one phase measured, merged over threads. */
struct ycsb_result {
	const char *phase;          /* "load" or "run" */
	const char *db;
	const char *label;
	const char *servers;
	const char *workload;
	unsigned threads, batch;
	double target;
	uint64_t seed;
	double seconds;
	uint64_t ops;               /* finished (not skipped) */
	uint64_t count[YCSB_NTYPES];
	uint64_t errors[YCSB_NTYPES];
	uint64_t skipped[YCSB_NTYPES];
	uint64_t rtts[YCSB_NTYPES];
	uint64_t records[YCSB_NTYPES]; /* scan records */
	const char *skip_why[YCSB_NTYPES];
	struct rkv_hist hist[YCSB_NTYPES];
	struct ycsb_drv_stats ds;
	const struct ycsb_props *p;
};

void ycsb_report_print(FILE *f, const struct ycsb_result *r);
/* Append one JSON line.  0 or -errno. */
int ycsb_report_json(const char *path, const struct ycsb_result *r);
/* Draw latency CDFs of every run-phase object in json_path into png.
 * 0, or -1 after printing why. */
int ycsb_report_plot(const char *json_path, const char *png);
/* Print a markdown comparison (stores x workloads) of json_path. */
int ycsb_report_summary(const char *json_path, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
