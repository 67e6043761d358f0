/* SPDX-License-Identifier: MIT */
/*
 * report.c - what rkv-ycsb prints and keeps: the table per operation type,
 * one JSON object per phase appended to a file (one per line, so runs
 * accumulate), a small JSON reader for that file, latency CDFs drawn with
 * gnuplot, and the markdown comparison bench/run-ycsb.sh puts in its
 * results.
 *
 * Each operation type's JSON carries "cdf": [[q, us], ...] at 104 quantiles
 * (0.01 .. 0.99, then 0.995, 0.999, 0.9995, 0.9999, 1), from rkv_hist, so
 * any run's CDF can be drawn later without the raw samples.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ycsb.h"

static const char *const g_dist[] = { "uniform",	"zipfian",
				       "latest",	"hotspot",
				       "exponential", "sequential" };
static const char *const g_flen[] = { "constant", "uniform", "zipfian" };

#define NQ 104
static double quantile_at(int i)
{
	static const double tail[] = { 0.995, 0.999, 0.9995, 0.9999, 1.0 };

	return i < 99 ? (double)(i + 1) / 100.0 : tail[i - 99];
}

static double us(const struct rkv_hist *h, double q)
{
	if (q >= 1.0)
		return (double)h->max / 1e3;
	return (double)rkv_hist_quantile(h, q) / 1e3;
}

/* A run whose workload has operations the store cannot do (a hash index
 * and YCSB's scans) is not that workload: its throughput would count
 * the other operations only, a figure no peer's can be set beside.  The
 * first skipped type, or -1. */
static int not_run(const struct ycsb_result *r)
{
	for (int t = 0; t < YCSB_NTYPES; t++)
		if (r->skipped[t])
			return t;
	return -1;
}

void ycsb_report_print(FILE *f, const struct ycsb_result *r)
{
	double s = r->seconds > 0 ? r->seconds : 1e-9;
	int nr = not_run(r);

	if (nr >= 0)
		fprintf(f, "[%s] %s: not run: %s: %s: %s (%" PRIu64
			   " skipped, %" PRIu64 " other ops in %.2f s)\n",
			!strcmp(r->phase, "load") ? "LOAD" : "RUN", r->label,
			ycsb_op_str((enum ycsb_op_type)nr), r->db,
			r->skip_why[nr] ? r->skip_why[nr] : "skipped",
			r->skipped[nr], r->ops, r->seconds);
	else
		fprintf(f, "[%s] %s: %" PRIu64 " ops in %.2f s: %.0f ops/s\n",
			!strcmp(r->phase, "load") ? "LOAD" : "RUN", r->label,
			r->ops, r->seconds, (double)r->ops / s);
	fprintf(f, "  %-18s %9s %10s %8s %8s %8s %9s %9s %7s %8s %6s\n", "op",
		"count", "ops/s", "p50 us", "p90 us", "p99 us", "p99.9 us",
		"max us", "errors", "retries", "RTT/op");
	for (int t = 0; t < YCSB_NTYPES; t++) {
		const struct rkv_hist *h = &r->hist[t];
		char retr[24] = "-", rtt[24] = "-";

		if (!r->count[t])
			continue;
		if (r->ds.has_retries)
			snprintf(retr, sizeof(retr), "%" PRIu64,
				 r->ds.retries[t]);
		if (r->ds.has_rtts)
			snprintf(rtt, sizeof(rtt), "%.2f",
				 (double)r->rtts[t] / (double)r->count[t]);
		fprintf(f, "  %-18s %9" PRIu64 " %10.0f %8.1f %8.1f %8.1f "
			   "%9.1f %9.1f %7" PRIu64 " %8s %6s\n",
			ycsb_op_str(t), r->count[t], (double)r->count[t] / s,
			us(h, 0.5), us(h, 0.9), us(h, 0.99), us(h, 0.999),
			us(h, 1.0), r->errors[t], retr, rtt);
	}
	for (int t = 0; t < YCSB_NTYPES; t++)
		if (r->skipped[t])
			fprintf(f, "  %s: %" PRIu64 " skipped: %s: %s\n",
				ycsb_op_str(t), r->skipped[t], r->db,
				r->skip_why[t] ? r->skip_why[t] : "skipped");
	if (r->count[YCSB_SCAN])
		fprintf(f, "  SCAN: %.1f records per scan\n",
			(double)r->records[YCSB_SCAN] /
			(double)r->count[YCSB_SCAN]);
	if (!strcmp(r->db, "rkv"))
		fprintf(f, "  rkv: location cache %" PRIu64 " hits, %" PRIu64
			   " misses; lock waits %" PRIu64 ", steals %" PRIu64
			   "; doorbells %" PRIu64 "\n",
			r->ds.cache_hits, r->ds.cache_misses, r->ds.lock_waits,
			r->ds.lock_steals, r->ds.doorbells);
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

int ycsb_report_json(const char *path, const struct ycsb_result *r)
{
	const struct ycsb_props *p = r->p;
	double s = r->seconds > 0 ? r->seconds : 1e-9;
	char when[32];
	time_t now = time(NULL);
	struct tm tm;
	int first = 1;
	FILE *f = fopen(path, "a");

	if (!f)
		return -errno;
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	fprintf(f, "{\"time\":\"%s\",\"phase\":\"%s\",\"db\":", when, r->phase);
	json_str(f, r->db);
	fprintf(f, ",\"label\":");
	json_str(f, r->label);
	fprintf(f, ",\"servers\":");
	json_str(f, r->servers);
	fprintf(f, ",\"workload\":");
	json_str(f, r->workload);
	fprintf(f, ",\"threads\":%u,\"batch\":%u,\"target\":%.0f,\"seed\":%"
		   PRIu64 ",\"recordcount\":%" PRIu64 ",\"operationcount\":%"
		   PRIu64 ",\"fieldcount\":%u,\"fieldlength\":%u,"
		   "\"fieldlengthdistribution\":\"%s\",\"writeallfields\":%s,"
		   "\"requestdistribution\":\"%s\",\"seconds\":%.4f,\"ops\":%"
		   PRIu64 ",\"ops_per_s\":%.1f,",
		r->threads, r->batch, r->target, r->seed, p->recordcount,
		p->operationcount, p->fieldcount, p->fieldlength,
		g_flen[p->flendist], p->writeallfields ? "true" : "false",
		g_dist[p->reqdist], r->seconds, r->ops, (double)r->ops / s);
	int nr = not_run(r);

	if (nr >= 0) {
		fprintf(f, "\"not_run\":");
		json_str(f, r->skip_why[nr] ? r->skip_why[nr] : "skipped");
		fprintf(f, ",");
	}
	fprintf(f, "\"ops_by_type\":[");
	for (int t = 0; t < YCSB_NTYPES; t++) {
		const struct rkv_hist *h = &r->hist[t];

		if (!r->count[t] && !r->skipped[t])
			continue;
		fprintf(f, "%s{\"op\":\"%s\",\"count\":%" PRIu64 ",\"ops_per_s\""
			   ":%.1f,\"mean_us\":%.3f,\"p50_us\":%.3f,\"p90_us\":"
			   "%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,\"max_us\":"
			   "%.3f,\"errors\":%" PRIu64 ",\"skipped\":%" PRIu64,
			first ? "" : ",", ycsb_op_str(t), r->count[t],
			(double)r->count[t] / s, rkv_hist_mean(h) / 1e3,
			us(h, 0.5), us(h, 0.9), us(h, 0.99), us(h, 0.999),
			us(h, 1.0), r->errors[t], r->skipped[t]);
		first = 0;
		if (r->skipped[t] && r->skip_why[t]) {
			fprintf(f, ",\"skip_reason\":");
			json_str(f, r->skip_why[t]);
		}
		if (r->ds.has_retries)
			fprintf(f, ",\"retries\":%" PRIu64, r->ds.retries[t]);
		if (r->ds.has_rtts && r->count[t])
			fprintf(f, ",\"rtt_per_op\":%.4f",
				(double)r->rtts[t] / (double)r->count[t]);
		if (r->count[YCSB_SCAN] && t == YCSB_SCAN)
			fprintf(f, ",\"records_per_scan\":%.2f",
				(double)r->records[t] / (double)r->count[t]);
		fprintf(f, ",\"cdf\":[");
		for (int i = 0; r->count[t] && i < NQ; i++)
			fprintf(f, "%s[%g,%.3f]", i ? "," : "", quantile_at(i),
				us(h, quantile_at(i)));
		fprintf(f, "]}");
	}
	fprintf(f, "]");
	if (!strcmp(r->db, "rkv"))
		fprintf(f, ",\"rkv\":{\"cache_hits\":%" PRIu64 ",\"cache_misses\""
			   ":%" PRIu64 ",\"lock_waits\":%" PRIu64 ",\"lock_steals\""
			   ":%" PRIu64 ",\"doorbells\":%" PRIu64 "}",
			r->ds.cache_hits, r->ds.cache_misses, r->ds.lock_waits,
			r->ds.lock_steals, r->ds.doorbells);
	fprintf(f, "}\n");
	if (fclose(f))
		return -errno;
	return 0;
}

/* ------------------------------------------------------- a JSON reader */

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
	enum jtype type;
	double num;
	char *str;
	size_t n;               /* array / object members */
	struct jv **kids;
	char **keys;            /* object member names */
};

static void jv_free(struct jv *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n; i++) {
		jv_free(v->kids[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->kids);
	free(v->keys);
	free(v->str);
	free(v);
}

static void skip_ws(const char **s)
{
	while (**s == ' ' || **s == '\t' || **s == '\n' || **s == '\r')
		(*s)++;
}

static char *parse_str(const char **s)
{
	size_t cap = 32, n = 0;
	char *out;

	if (**s != '"')
		return NULL;
	(*s)++;
	out = malloc(cap);
	while (out && **s && **s != '"') {
		char ch = *(*s)++;

		if (ch == '\\') {
			ch = *(*s)++;
			if (ch == 'n')
				ch = '\n';
			else if (ch == 't')
				ch = '\t';
			else if (ch == 'u') {
				unsigned cp = 0;

				if (sscanf(*s, "%4x", &cp) != 1)
					break;
				*s += 4;
				ch = cp < 0x80 ? (char)cp : '?';
			} else if (!ch) {
				break;
			}
		}
		if (n + 2 > cap) {
			char *o = realloc(out, cap *= 2);

			if (!o)
				break;
			out = o;
		}
		out[n++] = ch;
	}
	if (!out || **s != '"') {
		free(out);
		return NULL;
	}
	(*s)++;
	out[n] = 0;
	return out;
}

static int add_kid(struct jv *v, struct jv *kid, char *key)
{
	struct jv **k = realloc(v->kids, (v->n + 1) * sizeof(*k));

	if (!k)
		return -1;
	v->kids = k;
	if (key) {
		char **ks = realloc(v->keys, (v->n + 1) * sizeof(*ks));

		if (!ks)
			return -1;
		v->keys = ks;
		ks[v->n] = key;
	}
	k[v->n++] = kid;
	return 0;
}

static struct jv *jv_parse(const char **s, int depth)
{
	struct jv *v;

	if (depth > 32)
		return NULL;
	skip_ws(s);
	v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	if (**s == '{' || **s == '[') {
		char close = **s == '{' ? '}' : ']';

		v->type = close == '}' ? J_OBJ : J_ARR;
		(*s)++;
		skip_ws(s);
		if (**s == close) {
			(*s)++;
			return v;
		}
		for (;;) {
			char *key = NULL;
			struct jv *kid;

			skip_ws(s);
			if (v->type == J_OBJ) {
				key = parse_str(s);
				skip_ws(s);
				if (!key || **s != ':') {
					free(key);
					goto err;
				}
				(*s)++;
			}
			kid = jv_parse(s, depth + 1);
			if (!kid || add_kid(v, kid, key)) {
				jv_free(kid);
				free(key);
				goto err;
			}
			skip_ws(s);
			if (**s == ',') {
				(*s)++;
				continue;
			}
			if (**s != close)
				goto err;
			(*s)++;
			return v;
		}
	} else if (**s == '"') {
		v->type = J_STR;
		v->str = parse_str(s);
		if (!v->str)
			goto err;
	} else if (!strncmp(*s, "true", 4) || !strncmp(*s, "false", 5)) {
		v->type = J_BOOL;
		v->num = **s == 't';
		*s += **s == 't' ? 4 : 5;
	} else if (!strncmp(*s, "null", 4)) {
		*s += 4;
	} else {
		char *end;

		v->type = J_NUM;
		v->num = strtod(*s, &end);
		if (end == *s)
			goto err;
		*s = end;
	}
	return v;
err:
	jv_free(v);
	return NULL;
}

static const struct jv *jget(const struct jv *o, const char *key)
{
	if (!o || o->type != J_OBJ)
		return NULL;
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->keys[i], key))
			return o->kids[i];
	return NULL;
}

static const char *jstr(const struct jv *o, const char *key)
{
	const struct jv *v = jget(o, key);

	return v && v->type == J_STR ? v->str : "";
}

static double jnum(const struct jv *o, const char *key)
{
	const struct jv *v = jget(o, key);

	return v && v->type == J_NUM ? v->num : NAN;
}

/* Read every line of path as a JSON object.  Returns the count or -1. */
static int read_runs(const char *path, struct jv ***out)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned lineno = 0;
	struct jv **runs = NULL;
	int n = 0;

	if (!f) {
		fprintf(stderr, "%s: cannot read %s: %s\n", YCSB_PROG, path,
			strerror(errno));
		return -1;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		const char *s = line;
		struct jv *v, **nr;

		lineno++;
		skip_ws(&s);
		if (!*s)
			continue;
		v = jv_parse(&s, 0);
		skip_ws(&s);
		if (!v || v->type != J_OBJ || *s) {
			fprintf(stderr, "%s: %s:%u: not a JSON object of "
					"rkv-ycsb\n", YCSB_PROG, path, lineno);
			jv_free(v);
			continue;
		}
		nr = realloc(runs, (size_t)(n + 1) * sizeof(*nr));
		if (!nr) {
			jv_free(v);
			break;
		}
		runs = nr;
		runs[n++] = v;
	}
	free(line);
	fclose(f);
	*out = runs;
	return n;
}

static void free_runs(struct jv **runs, int n)
{
	for (int i = 0; i < n; i++)
		jv_free(runs[i]);
	free(runs);
}

/* Colour by store: how many distinct labels come before run i's. */
static int label_index(struct jv **runs, int i)
{
	const char *want = jstr(runs[i], "label");
	int k = 0;

	for (int j = 0; j < i; j++) {
		const char *l = jstr(runs[j], "label");
		int seen = !strcmp(l, want);

		for (int m = 0; m < j && !seen; m++)
			seen = !strcmp(jstr(runs[m], "label"), l);
		if (!strcmp(l, want))
			return k;
		if (!seen)
			k++;
	}
	return k;
}

int ycsb_report_plot(const char *json_path, const char *png)
{
	struct jv **runs;
	int n = read_runs(json_path, &runs), nw = 0, curves = 0, rc = -1;
	const char *wls[64];
	char script[] = "/tmp/rkv-ycsb-plot-XXXXXX";
	FILE *f;
	int fd;

	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		const char *w = jstr(runs[i], "workload");
		int k;

		if (strcmp(jstr(runs[i], "phase"), "run"))
			continue;
		for (k = 0; k < nw && strcmp(wls[k], w); k++)
			;
		if (k == nw && nw < 64)
			wls[nw++] = w;
	}
	if (!nw) {
		fprintf(stderr, "%s: %s: no run-phase results to plot\n",
			YCSB_PROG, json_path);
		goto out;
	}
	fd = mkstemp(script);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		fprintf(stderr, "%s: cannot write a gnuplot script: %s\n",
			YCSB_PROG, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	int cols = nw < 2 ? 1 : 2, rows = (nw + cols - 1) / cols;

	fprintf(f, "set terminal pngcairo size %d,%d noenhanced font ',9'\n",
		cols * 700, rows * 450);
	fprintf(f, "set output '%s'\n", png);
	/* datablocks first: one per (run, operation type) */
	for (int i = 0; i < n; i++) {
		const struct jv *ops = jget(runs[i], "ops_by_type");

		if (strcmp(jstr(runs[i], "phase"), "run") || !ops ||
		    ops->type != J_ARR)
			continue;
		for (size_t j = 0; j < ops->n; j++) {
			const struct jv *cdf = jget(ops->kids[j], "cdf");

			if (!cdf || cdf->type != J_ARR || !cdf->n)
				continue;
			fprintf(f, "$d%d_%zu << EOD\n", i, j);
			for (size_t k = 0; k < cdf->n; k++) {
				const struct jv *pt = cdf->kids[k];

				if (pt->type == J_ARR && pt->n == 2)
					fprintf(f, "%g %g\n", pt->kids[1]->num,
						pt->kids[0]->num);
			}
			fprintf(f, "EOD\n");
		}
	}
	fprintf(f, "set multiplot layout %d,%d title 'rkv-ycsb latency CDFs "
		   "(%s)'\n", rows, cols, json_path);
	fprintf(f, "set logscale x\nset xlabel 'latency (us)'\n"
		   "set ylabel 'fraction of operations'\nset yrange [0:1]\n"
		   "set key bottom right\nset grid\n");
	for (int k = 0; k < nw; k++) {
		int first = 1;

		fprintf(f, "set title '%s'\nplot ", wls[k]);
		for (int i = 0; i < n; i++) {
			const struct jv *ops = jget(runs[i], "ops_by_type");

			if (strcmp(jstr(runs[i], "phase"), "run") ||
			    strcmp(jstr(runs[i], "workload"), wls[k]) || !ops ||
			    ops->type != J_ARR)
				continue;
			for (size_t j = 0; j < ops->n; j++) {
				const struct jv *cdf = jget(ops->kids[j], "cdf");

				if (!cdf || cdf->type != J_ARR || !cdf->n)
					continue;
				fprintf(f, "%s$d%d_%zu with lines lw 2 lc %d dt %d "
					   "title '%s %s'", first ? "" : ", ",
					i, j, label_index(runs, i) + 1,
					(int)j + 1, jstr(runs[i], "label"),
					jstr(ops->kids[j], "op"));
				first = 0;
				curves++;
			}
		}
		if (first)
			fprintf(f, "0 notitle");
		fprintf(f, "\n");
	}
	fprintf(f, "unset multiplot\n");
	fclose(f);

	pid_t pid = fork();

	if (pid == 0) {
		execlp("gnuplot", "gnuplot", script, (char *)NULL);
		fprintf(stderr, "%s: cannot run gnuplot: %s (install it with: "
				"apt-get install gnuplot-nox)\n", YCSB_PROG,
			strerror(errno));
		_exit(127);
	}
	int st = 0;

	if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) ||
	    WEXITSTATUS(st)) {
		fprintf(stderr, "%s: gnuplot failed; script kept in %s\n",
			YCSB_PROG, script);
		goto out;
	}
	unlink(script);
	printf("%s: %d CDF curve(s) of %d workload(s) drawn in %s\n",
	       YCSB_PROG, curves, nw, png);
	rc = 0;
out:
	free_runs(runs, n);
	return rc;
}

/* ---------------------------------------------------- markdown summary */

static const struct jv *find_run(struct jv **runs, int n, const char *label,
				 const char *wl)
{
	const struct jv *best = NULL;

	/* the last run of that store and workload */
	for (int i = 0; i < n; i++)
		if (!strcmp(jstr(runs[i], "phase"), "run") &&
		    !strcmp(jstr(runs[i], "label"), label) &&
		    !strcmp(jstr(runs[i], "workload"), wl))
			best = runs[i];
	return best;
}

static double worst_p99(const struct jv *run)
{
	const struct jv *ops = jget(run, "ops_by_type");
	double w = NAN;

	for (size_t j = 0; ops && j < ops->n; j++) {
		double v = jnum(ops->kids[j], "p99_us");

		if (jnum(ops->kids[j], "count") > 0 && (isnan(w) || v > w))
			w = v;
	}
	return w;
}

static double tput(struct jv **runs, int n, const char *label, const char *wl)
{
	const struct jv *r = find_run(runs, n, label, wl);

	return r && !*jstr(r, "not_run") ? jnum(r, "ops_per_s") : NAN;
}

int ycsb_report_summary(const char *json_path, FILE *out)
{
	struct jv **runs;
	int n = read_runs(json_path, &runs), nl = 0, nw = 0;
	const char *labels[32], *wls[32];

	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		const char *l = jstr(runs[i], "label"),
			   *w = jstr(runs[i], "workload");
		int k;

		if (strcmp(jstr(runs[i], "phase"), "run"))
			continue;
		for (k = 0; k < nl && strcmp(labels[k], l); k++)
			;
		if (k == nl && nl < 32)
			labels[nl++] = l;
		for (k = 0; k < nw && strcmp(wls[k], w); k++)
			;
		if (k == nw && nw < 32)
			wls[nw++] = w;
	}
	/* throughput and the worst operation type's p99, per store */
	fprintf(out, "| workload |");
	for (int k = 0; k < nl; k++)
		fprintf(out, " %s ops/s | %s p99 us |", labels[k], labels[k]);
	fprintf(out, "\n|---|");
	for (int k = 0; k < nl; k++)
		fprintf(out, "---:|---:|");
	fprintf(out, "\n");
	for (int w = 0; w < nw; w++) {
		fprintf(out, "| %s |", wls[w]);
		for (int k = 0; k < nl; k++) {
			const struct jv *r = find_run(runs, n, labels[k],
						      wls[w]);

			if (!r)
				fprintf(out, " - | - |");
			else if (*jstr(r, "not_run"))
				fprintf(out, " not run | - |");
			else
				fprintf(out, " %.0f | %.0f |",
					jnum(r, "ops_per_s"), worst_p99(r));
		}
		fprintf(out, "\n");
	}
	/* ratios of rkv labels to peers */
	int hdr = 0;

	for (int a = 0; a < nl; a++) {
		if (strncmp(labels[a], "rkv", 3))
			continue;
		for (int b = 0; b < nl; b++) {
			if (!strncmp(labels[b], "rkv", 3))
				continue;
			if (!hdr) {
				fprintf(out, "\n| ratio (throughput) |");
				for (int w = 0; w < nw; w++)
					fprintf(out, " %s |", wls[w]);
				fprintf(out, "\n|---|");
				for (int w = 0; w < nw; w++)
					fprintf(out, "---:|");
				fprintf(out, "\n");
				hdr = 1;
			}
			fprintf(out, "| %s / %s |", labels[a], labels[b]);
			for (int w = 0; w < nw; w++) {
				double x = tput(runs, n, labels[a], wls[w]),
				       y = tput(runs, n, labels[b], wls[w]);

				if (isnan(x) || isnan(y) || y <= 0)
					fprintf(out, " - |");
				else
					fprintf(out, " %.2fx |", x / y);
			}
			fprintf(out, "\n");
		}
	}
	/* RTTs per operation for rkv */
	hdr = 0;
	for (int k = 0; k < nl; k++) {
		for (int w = 0; w < nw; w++) {
			const struct jv *r = find_run(runs, n, labels[k],
						      wls[w]);
			const struct jv *ops = r ? jget(r, "ops_by_type") : NULL;

			if (!r || strcmp(jstr(r, "db"), "rkv") || !ops)
				continue;
			if (!hdr) {
				fprintf(out, "\n| rkv RTTs per operation | "
					     "workload | READ | UPDATE | "
					     "INSERT | READ-MODIFY-WRITE | "
					     "retries |\n"
					     "|---|---|---:|---:|---:|---:|"
					     "---:|\n");
				hdr = 1;
			}
			fprintf(out, "| %s | %s |", labels[k], wls[w]);
			static const char *const names[] = {
				"READ", "UPDATE", "INSERT",
				"READ-MODIFY-WRITE" };
			double retries = 0;

			for (int t = 0; t < 4; t++) {
				double v = NAN;

				for (size_t j = 0; j < ops->n; j++)
					if (!strcmp(jstr(ops->kids[j], "op"),
						    names[t]))
						v = jnum(ops->kids[j],
							 "rtt_per_op");
				if (isnan(v))
					fprintf(out, " - |");
				else
					fprintf(out, " %.2f |", v);
			}
			for (size_t j = 0; j < ops->n; j++) {
				double v = jnum(ops->kids[j], "retries");

				if (!isnan(v))
					retries += v;
			}
			fprintf(out, " %.0f |\n", retries);
		}
	}
	free_runs(runs, n);
	return 0;
}
