/* SPDX-License-Identifier: MIT */
/*
 * report.c - the result rows of rkv-bench-transport and their output: one
 * Markdown table (readable as plain text too), a goals section whose ratios
 * come from this run's rows only, and a small hand-written JSON emitter
 * carrying the same figures.
 *
 * Goals (from the design): tcp 8 B READ p50 <= libfabric tcp;ofi_rxm's;
 * shm 8 B READ and CAS p50 < 0.2 us; verbs READ/CAS p50 within 1.2x of
 * perftest in the same guest (perftest rows arrive through --ref).  A goal
 * whose rows are missing prints "n/a" with the reason, never a failure.
 */
#include "bench_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "transport.h"

static const char *const g_op_names[BENCH_OP_NR] = {
	[BENCH_OP_READ] = "read",
	[BENCH_OP_WRITE] = "write",
	[BENCH_OP_CAS] = "cas",
};

const char *bench_op_str(enum bench_op op)
{
	return (unsigned)op < BENCH_OP_NR ? g_op_names[op] : "?";
}

unsigned bench_points(const struct bench_opts *o, struct bench_point *pts)
{
	unsigned chains[2] = { 1, o->chain }, n = 0;
	unsigned nchains = o->chain > 1 ? 2 : 1;

	for (int op = 0; op < BENCH_OP_NR; op++) {
		if (!(o->ops & (1u << op)))
			continue;
		for (unsigned c = 0; c < nchains; c++) {
			for (unsigned s = 0; s < o->nsizes; s++) {
				struct bench_point *p = &pts[n++];

				p->op = (enum bench_op)op;
				p->size = op == BENCH_OP_CAS ? 8 : o->sizes[s];
				p->chain = chains[c];
				if (op == BENCH_OP_CAS)
					break;
			}
		}
	}
	return n;
}

struct bench_row *bench_row_add(struct bench_report *r, const char *provider,
				enum bench_op op, size_t size, unsigned chain)
{
	struct bench_row *row;

	if (r->nrows == BENCH_MAX_ROWS)
		return NULL;
	row = &r->rows[r->nrows++];
	memset(row, 0, sizeof(*row));
	snprintf(row->provider, sizeof(row->provider), "%s", provider);
	row->op = op;
	row->size = size;
	row->chain = chain;
	return row;
}

void bench_row_keep_best(struct bench_row *best, const struct bench_row *run)
{
	if (!run->count)
		return;
	if (!best->count || run->p50_ns < best->p50_ns)
		*best = *run;
}

int bench_point_best(bench_point_fn fn, void *pair, const struct bench_opts *o,
		     enum bench_op op, size_t size, unsigned chain,
		     struct bench_row *row)
{
	for (unsigned i = 0; i < o->repeat; i++) {
		struct bench_row run = *row;
		int rc;

		run.count = 0;
		run.note[0] = '\0';
		rc = fn(pair, o, op, size, chain, &run);
		if (rc) {
			memcpy(row->note, run.note, sizeof(row->note));
			return rc;
		}
		bench_row_keep_best(row, &run);
	}
	return 0;
}

void bench_run_points(struct bench_report *r, const char *name,
		      const struct bench_opts *o, bench_point_fn fn, void *pair,
		      const char *(*unsupported)(void *pair, enum bench_op op))
{
	struct bench_point pts[BENCH_MAX_POINTS];
	unsigned npts = bench_points(o, pts);
	char failed[96] = "";

	for (unsigned i = 0; i < npts; i++) {
		const struct bench_point *pt = &pts[i];
		struct bench_row *row;
		const char *why;

		row = bench_row_add(r, name, pt->op, pt->size, pt->chain);
		if (!row)
			break;
		if (failed[0]) {
			snprintf(row->note, sizeof(row->note), "not run: %s",
				 failed);
			continue;
		}
		why = unsupported ? unsupported(pair, pt->op) : NULL;
		if (why) {
			snprintf(row->note, sizeof(row->note), "%s", why);
			continue;
		}
		if (bench_point_best(fn, pair, o, pt->op, pt->size, pt->chain,
				     row))
			snprintf(failed, sizeof(failed), "%s %zu B failed",
				 bench_op_str(pt->op), pt->size);
	}
}

int bench_check_cas(struct bench_row *row, uint64_t got, uint64_t want)
{
	if (got == want)
		return 0;
	snprintf(row->note, sizeof(row->note),
		 "CAS returned %llu, expected %llu", (unsigned long long)got,
		 (unsigned long long)want);
	return -EIO;
}

void bench_row_finish(struct bench_row *row, const struct rkv_hist *h,
		      uint64_t iters, unsigned chain, uint64_t t_start,
		      uint64_t t_end)
{
	row->count = h->count;
	row->p50_ns = (double)rkv_hist_quantile(h, 0.50);
	row->p99_ns = (double)rkv_hist_quantile(h, 0.99);
	if (t_end > t_start)
		row->mops = (double)iters * chain /
			    ((double)(t_end - t_start) / 1000.0);
}

void bench_row_note(struct bench_report *r, const char *provider,
		    enum bench_op op, size_t size, unsigned chain,
		    const char *fmt, ...)
{
	struct bench_row *row = bench_row_add(r, provider, op, size, chain);
	va_list ap;

	if (!row)
		return;
	va_start(ap, fmt);
	vsnprintf(row->note, sizeof(row->note), fmt, ap);
	va_end(ap);
}

const struct bench_row *bench_row_find(const struct bench_report *r,
				       const char *provider, enum bench_op op,
				       size_t size, unsigned chain)
{
	for (unsigned i = 0; i < r->nrows; i++) {
		const struct bench_row *row = &r->rows[i];

		if (row->count && row->op == op && row->size == size &&
		    row->chain == chain && !strcmp(row->provider, provider))
			return row;
	}
	return NULL;
}

int bench_ref_add(struct bench_report *r, const char *spec)
{
	char buf[160], *f[6], *save = NULL, *t, *end;
	struct bench_row *row;
	unsigned n = 0;
	int op = -1;
	double p50, p99 = 0;
	unsigned long size;

	if (strlen(spec) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, spec);
	for (t = strtok_r(buf, ",", &save); t && n < 6;
	     t = strtok_r(NULL, ",", &save))
		f[n++] = t;
	if (n < 4 || n > 5)
		return -EINVAL;
	for (int i = 0; i < BENCH_OP_NR; i++)
		if (!strcmp(f[1], g_op_names[i]))
			op = i;
	if (op < 0)
		return -EINVAL;
	errno = 0;
	size = strtoul(f[2], &end, 10);
	if (errno || *end || end == f[2])
		return -EINVAL;
	p50 = strtod(f[3], &end);
	if (*end || end == f[3] || !(p50 > 0))
		return -EINVAL;
	if (n == 5) {
		p99 = strtod(f[4], &end);
		if (*end || end == f[4] || p99 < 0)
			return -EINVAL;
	}
	row = bench_row_add(r, f[0], (enum bench_op)op, size, 1);
	if (!row)
		return -ENOSPC;
	row->count = 1;
	row->ref = 1;
	row->p50_ns = p50 * 1000.0;
	row->p99_ns = p99 * 1000.0;
	snprintf(row->note, sizeof(row->note), "reference (--ref)");
	return 0;
}

/* ------------------------------------------------------------- table */

static void fmt_us(char *buf, size_t len, double ns)
{
	if (ns > 0)
		snprintf(buf, len, "%.2f", ns / 1000.0);
	else
		snprintf(buf, len, "-");
}

static void print_table(const struct bench_report *r)
{
	printf("| %-22s | %-5s | %5s | %5s | %9s | %9s | %7s | %s\n",
	       "provider", "op", "size", "chain", "p50 us", "p99 us",
	       "Mops/s", "note |");
	printf("|%s|%s|%s|%s|%s|%s|%s|%s|\n", "------------------------",
	       "-------", "------:", "------:", "----------:", "----------:",
	       "--------:", "------");
	for (unsigned i = 0; i < r->nrows; i++) {
		const struct bench_row *row = &r->rows[i];
		char p50[24], p99[24], mops[24], sz[24], ch[16];

		fmt_us(p50, sizeof(p50), row->count ? row->p50_ns : 0);
		fmt_us(p99, sizeof(p99), row->count ? row->p99_ns : 0);
		if (row->count && row->mops > 0)
			snprintf(mops, sizeof(mops), "%.3f", row->mops);
		else
			snprintf(mops, sizeof(mops), "-");
		/* chain 0: a provider-wide note, no op or size. */
		if (row->chain) {
			snprintf(sz, sizeof(sz), "%zu", row->size);
			snprintf(ch, sizeof(ch), "%u", row->chain);
		} else {
			snprintf(sz, sizeof(sz), "-");
			snprintf(ch, sizeof(ch), "-");
		}
		printf("| %-22s | %-5s | %5s | %5s | %9s | %9s | %7s | %s |\n",
		       row->provider, row->chain ? bench_op_str(row->op) : "-",
		       sz, ch, p50, p99, mops, row->note);
	}
}

/* ------------------------------------------------------------- goals */

enum goal_kind {
	GOAL_RATIO_LE, /* a.p50 / b.p50 <= limit */
	GOAL_ABS_LT,   /* a.p50 < limit (us) */
	GOAL_INFO,     /* a.p50 / b.p50, shown without a limit */
};

struct goal {
	char name[128];
	double value;   /* ratio, or us */
	double limit;
	enum goal_kind kind;
	int state;      /* 1 met, 0 missed, -1 n/a */
	char why[128];  /* n/a reason */
};

#define MAX_GOALS 32

struct goals {
	struct goal g[MAX_GOALS];
	unsigned n;
};

static void goal_ratio(struct goals *gs, const struct bench_report *r,
		       const char *pa, const char *pb, enum bench_op op,
		       size_t size, double limit)
{
	const struct bench_row *a = bench_row_find(r, pa, op, size, 1);
	const struct bench_row *b = bench_row_find(r, pb, op, size, 1);
	struct goal *g;

	if (gs->n == MAX_GOALS)
		return;
	g = &gs->g[gs->n++];
	memset(g, 0, sizeof(*g));
	snprintf(g->name, sizeof(g->name), "%s %zu B %s p50 / %s", pa, size,
		 bench_op_str(op), pb);
	g->kind = limit > 0 ? GOAL_RATIO_LE : GOAL_INFO;
	g->limit = limit;
	if (!a || !b) {
		g->state = -1;
		snprintf(g->why, sizeof(g->why), "no %s row",
			 !a ? pa : pb);
		return;
	}
	g->value = a->p50_ns / b->p50_ns;
	g->state = g->kind == GOAL_INFO ? 2 : g->value <= limit;
}

static void goal_abs(struct goals *gs, const struct bench_report *r,
		     const char *pa, enum bench_op op, size_t size,
		     double limit_us)
{
	const struct bench_row *a = bench_row_find(r, pa, op, size, 1);
	struct goal *g;

	if (gs->n == MAX_GOALS)
		return;
	g = &gs->g[gs->n++];
	memset(g, 0, sizeof(*g));
	snprintf(g->name, sizeof(g->name), "%s %zu B %s p50 (us)", pa, size,
		 bench_op_str(op));
	g->kind = GOAL_ABS_LT;
	g->limit = limit_us;
	if (!a) {
		g->state = -1;
		snprintf(g->why, sizeof(g->why), "no %s row", pa);
		return;
	}
	g->value = a->p50_ns / 1000.0;
	g->state = g->value < limit_us;
}

static void compute_goals(const struct bench_opts *o,
			  const struct bench_report *r, struct goals *gs)
{
	gs->n = 0;
	if (o->providers & (1u << RKV_TP_TCP)) {
		goal_ratio(gs, r, "tcp", "libfabric tcp;ofi_rxm", BENCH_OP_READ,
			   8, 1.0);
	}
	if (o->providers & (1u << RKV_TP_SHM)) {
		goal_abs(gs, r, "shm", BENCH_OP_READ, 8, 0.2);
		goal_abs(gs, r, "shm", BENCH_OP_CAS, 8, 0.2);
	}
	/* verbs against perftest: only for the perftest rows given. */
	for (unsigned i = 0; i < r->nrows; i++) {
		const struct bench_row *ref = &r->rows[i];

		if (!ref->ref || strcmp(ref->provider, "perftest"))
			continue;
		/* The goal is on READ and CAS; WRITE is for information. */
		goal_ratio(gs, r, "verbs", "perftest", ref->op, ref->size,
			   ref->op == BENCH_OP_WRITE ? 0 : 1.2);
		/* ib_write_lat is a ping-pong of WRITEs and reports half its
		 * round trip; rkv's WRITE completes on the ACK, a full one. */
		if (ref->op == BENCH_OP_WRITE && gs->n &&
		    gs->g[gs->n - 1].state > 0)
			snprintf(gs->g[gs->n - 1].why,
				 sizeof(gs->g[gs->n - 1].why),
				 "ib_write_lat reports half a round trip");
	}
}

static const char *goal_state_str(int s)
{
	return s > 1 ? "info" : s > 0 ? "met" : s == 0 ? "MISSED" : "n/a";
}

static void print_goals(const struct goals *gs)
{
	if (!gs->n)
		return;
	printf("\ngoals (ratios from this run):\n\n");
	for (unsigned i = 0; i < gs->n; i++) {
		const struct goal *g = &gs->g[i];
		const char *rel = g->kind == GOAL_RATIO_LE ? "<=" : "<";

		if (g->kind == GOAL_INFO && g->state > 0)
			printf("- %-48s %8.2f  (information: %s)\n",
			       g->name, g->value, g->why);
		else if (g->state < 0 && g->kind == GOAL_INFO)
			printf("- %-48s %8s  (information)  n/a: %s\n",
			       g->name, "-", g->why);
		else if (g->state < 0)
			printf("- %-48s %8s  (goal %s %.2f)  n/a: %s\n",
			       g->name, "-", rel, g->limit, g->why);
		else
			printf("- %-48s %8.2f  (goal %s %.2f)  %s\n",
			       g->name, g->value, rel, g->limit,
			       goal_state_str(g->state));
	}
}

/* -------------------------------------------------------------- json */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_num(FILE *f, double v)
{
	if (v > 0)
		fprintf(f, "%.4f", v);
	else
		fputs("null", f);
}

static int write_json(const struct bench_opts *o,
		      const struct bench_report *r, const struct goals *gs)
{
	FILE *f = fopen(o->json, "w");
	char date[64] = "", host[128] = "";
	time_t now = time(NULL);
	struct tm tm;

	if (!f)
		return -errno;
	if (gmtime_r(&now, &tm))
		strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (gethostname(host, sizeof(host) - 1))
		host[0] = '\0';
	fputs("{\n  \"benchmark\": \"rkv-bench-transport\",\n  \"date\": ", f);
	json_str(f, date);
	fputs(",\n  \"host\": ", f);
	json_str(f, host);
	fprintf(f, ",\n  \"iters\": %u,\n  \"warmup\": %u,\n", o->iters,
		o->warmup);
	fprintf(f, "  \"repeat\": %u,\n  \"chain\": %u,\n", o->repeat,
		o->chain);
	fprintf(f, "  \"libfabric_progress\": \"%s\",\n",
		o->lf_target_thread ? "thread" : "inline");
	fprintf(f, "  \"same_context\": %s,\n", o->same_ctx ? "true" : "false");
	fputs("  \"rows\": [", f);
	for (unsigned i = 0; i < r->nrows; i++) {
		const struct bench_row *row = &r->rows[i];

		fputs(i ? ",\n    {" : "\n    {", f);
		fputs("\"provider\": ", f);
		json_str(f, row->provider);
		fputs(", \"op\": ", f);
		json_str(f, row->chain ? bench_op_str(row->op) : "");
		fprintf(f, ", \"size\": %zu, \"chain\": %u, \"count\": %llu",
			row->size, row->chain,
			(unsigned long long)(row->ref ? 0 : row->count));
		fputs(", \"p50_us\": ", f);
		json_num(f, row->count ? row->p50_ns / 1000.0 : 0);
		fputs(", \"p99_us\": ", f);
		json_num(f, row->count ? row->p99_ns / 1000.0 : 0);
		fputs(", \"mops\": ", f);
		json_num(f, row->count ? row->mops : 0);
		fprintf(f, ", \"reference\": %s, \"note\": ",
			row->ref ? "true" : "false");
		json_str(f, row->note);
		fputc('}', f);
	}
	fputs("\n  ],\n  \"goals\": [", f);
	for (unsigned i = 0; i < gs->n; i++) {
		const struct goal *g = &gs->g[i];

		fputs(i ? ",\n    {" : "\n    {", f);
		fputs("\"name\": ", f);
		json_str(f, g->name);
		fprintf(f, ", \"kind\": \"%s\", \"limit\": %.4f, \"value\": ",
			g->kind == GOAL_RATIO_LE ? "ratio_le" :
			g->kind == GOAL_ABS_LT ? "us_lt" : "ratio_info",
			g->limit);
		if (g->state < 0)
			fputs("null", f);
		else
			fprintf(f, "%.4f", g->value);
		fputs(", \"state\": ", f);
		json_str(f, goal_state_str(g->state));
		fputs(", \"why\": ", f);
		json_str(f, g->why);
		fputc('}', f);
	}
	fputs("\n  ]\n}\n", f);
	if (fclose(f))
		return -errno;
	return 0;
}

int bench_report_print(const struct bench_opts *o,
		       const struct bench_report *r)
{
	static struct goals gs;
	int rc;

	compute_goals(o, r, &gs);
	print_table(r);
	print_goals(&gs);
	fflush(stdout);
	if (!o->json)
		return 0;
	rc = write_json(o, r, &gs);
	if (rc)
		fprintf(stderr, "rkv-bench-transport: writing %s: %s\n",
			o->json, strerror(-rc));
	return rc;
}
