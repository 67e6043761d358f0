/* SPDX-License-Identifier: MIT */
/*
 * bench_internal.h - shared state of rkv-bench-transport: the options, the
 * result rows every driver appends to (rkv providers, the libfabric peer,
 * reference rows given on the command line such as perftest's), and the
 * report that prints them as one table, a goals section and JSON.
 *
 * A row is one (provider, op, size, chain) point.  Latency is per post:
 * one WR for chain 1, one chain of K WRs otherwise; Mops/s counts WRs.
 * A row with a non-empty note and no samples says why a point is missing
 * (provider unavailable, failed setup, timeout), so a run never fails
 * because one provider does.
 */
#ifndef RKV_BENCH_TRANSPORT_BENCH_INTERNAL_H
#define RKV_BENCH_TRANSPORT_BENCH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hist.h"

#define BENCH_MAX_SIZES 16
#define BENCH_MAX_ROWS 512
#define BENCH_MAX_CHAIN 64
/* A posted WR (or chain) that has not completed after this is a failure. */
#define BENCH_OP_TIMEOUT_NS (5ull * 1000000000ull)

enum bench_op {
	BENCH_OP_READ = 0,
	BENCH_OP_WRITE,
	BENCH_OP_CAS,
	BENCH_OP_NR,
};

struct bench_opts {
	unsigned providers;          /* bit per enum rkv_tp_provider */
	int all;                     /* --provider all: skip verbs quietly */
	unsigned iters;              /* measured posts per point */
	unsigned warmup;             /* unmeasured posts per point */
	unsigned repeat;             /* runs per point; the lowest p50 wins */
	size_t sizes[BENCH_MAX_SIZES]; /* READ/WRITE sizes; CAS is 8 B */
	unsigned nsizes;
	unsigned ops;                /* bit per enum bench_op */
	unsigned chain;              /* 0: unchained; K: also chains of K */
	size_t spread;               /* 0, or READ/WRITE at successive places
	                              * of a server region this large */
	const char *addr;            /* verbs listen address */
	const char *json;            /* output file or NULL */
	int same_ctx;                /* server and client share a context */
	int peer_libfabric;          /* --peers libfabric */
	const char *lf_provs;        /* comma-separated libfabric providers */
	int lf_target_thread;        /* libfabric target progress in a thread */
};

struct bench_row {
	char provider[48];
	enum bench_op op;
	size_t size;
	unsigned chain;      /* WRs per post */
	uint64_t count;      /* posts measured; 0 when note says why */
	double p50_ns;       /* per post */
	double p99_ns;
	double mops;         /* WRs per microsecond */
	int ref;             /* reference row from --ref (p99/Mops unknown) */
	char note[160];
};

/* One point to measure, in table order. */
struct bench_point {
	enum bench_op op;
	size_t size;
	unsigned chain;
};

#define BENCH_MAX_POINTS (BENCH_OP_NR * 2 * BENCH_MAX_SIZES)

struct bench_report {
	struct bench_row rows[BENCH_MAX_ROWS];
	unsigned nrows;
};

const char *bench_op_str(enum bench_op op);

/*
 * The points o asks for, in table order: per op, unchained then chained,
 * per size (CAS: 8 B only).  Returns the count (<= BENCH_MAX_POINTS).
 */
unsigned bench_points(const struct bench_opts *o, struct bench_point *pts);

/* Append a row; returns it (zeroed but for the key), or NULL when full. */
struct bench_row *bench_row_add(struct bench_report *r, const char *provider,
				enum bench_op op, size_t size, unsigned chain);
/*
 * Keep the better of two measurements of one point in best: a run with
 * samples beats one without, then the lower p50 wins.  On a shared machine
 * the best of a few runs is the one least disturbed by other tenants.
 */
void bench_row_keep_best(struct bench_row *best, const struct bench_row *run);

/* Measures one point into row; returns 0 or -errno with row->note set. */
typedef int (*bench_point_fn)(void *pair, const struct bench_opts *o,
			      enum bench_op op, size_t size, unsigned chain,
			      struct bench_row *row);
/* Run a point o->repeat times through fn and keep the lowest p50. */
int bench_point_best(bench_point_fn fn, void *pair, const struct bench_opts *o,
		     enum bench_op op, size_t size, unsigned chain,
		     struct bench_row *row);
/*
 * Measure every point of o for one provider into rows named name: fn does
 * a point, unsupported (may be NULL) returns why a point cannot run on this
 * pair or NULL.  After a failed point the endpoints are in error state, so
 * the remaining points are noted "not run".
 */
void bench_run_points(struct bench_report *r, const char *name,
		      const struct bench_opts *o, bench_point_fn fn, void *pair,
		      const char *(*unsupported)(void *pair, enum bench_op op));
/* A CAS chain's last result must be the expected old value: else note
 * it in row and return -EIO. */
int bench_check_cas(struct bench_row *row, uint64_t got, uint64_t want);
/* Fill count, p50, p99 and Mops/s from a point's histogram and times. */
void bench_row_finish(struct bench_row *row, const struct rkv_hist *h,
		      uint64_t iters, unsigned chain, uint64_t t_start,
		      uint64_t t_end);
/* Append a row that only carries a note (provider unavailable, ...). */
void bench_row_note(struct bench_report *r, const char *provider,
		    enum bench_op op, size_t size, unsigned chain,
		    const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Find a measured row; NULL when absent or failed. */
const struct bench_row *bench_row_find(const struct bench_report *r,
				       const char *provider, enum bench_op op,
				       size_t size, unsigned chain);

/*
 * Parse a reference row "PROVIDER,OP,SIZE,P50_US[,P99_US]" (for instance
 * "perftest,read,8,46.10") and append it.  Returns 0 or -EINVAL.
 */
int bench_ref_add(struct bench_report *r, const char *spec);

/* Measure every rkv provider selected in o. */
void bench_rkv_run(const struct bench_opts *o, struct bench_report *r);
/* Measure the libfabric peer on the providers in o->lf_provs. */
void bench_libfabric_run(const struct bench_opts *o, struct bench_report *r);

/* Print the table and the goals to stdout; write JSON when o->json. */
int bench_report_print(const struct bench_opts *o,
		       const struct bench_report *r);

#endif
