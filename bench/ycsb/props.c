/* SPDX-License-Identifier: MIT */
/*
 * props.c - YCSB workload properties: one table of the properties rkv-ycsb
 * knows (name, kind, bounds, where it goes), a reader for Java-style
 * property files, and the -p name=value override.  Unknown properties and
 * malformed values are errors that name the file, the line and the
 * property; properties of YCSB that do not change what rkv-ycsb does
 * (measurement settings, the table name, ...) are accepted and ignored.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ycsb.h"

enum kind {
	K_U64,      /* unsigned integer in [min, max] */
	K_U32,
	K_PROP,     /* double in [0, 1] */
	K_DOUBLE,   /* double >= 0 */
	K_BOOL,
	K_DIST,     /* requestdistribution */
	K_ORDER,    /* insertorder */
	K_SCANDIST, /* scanlengthdistribution */
	K_FIELDDIST,/* fieldlengthdistribution: constant|uniform|zipfian */
	K_WORKLOAD, /* workload class: CoreWorkload only */
	K_IGNORE,   /* accepted, no effect */
};

struct prop_def {
	const char *name;
	enum kind kind;
	size_t off;
	uint64_t min, max;
};

#define P(f) offsetof(struct ycsb_props, f)

static const struct prop_def g_defs[] = {
	{ "recordcount", K_U64, P(recordcount), 0, 1ull << 40 },
	{ "operationcount", K_U64, P(operationcount), 0, 1ull << 48 },
	{ "insertstart", K_U64, P(insertstart), 0, 1ull << 40 },
	{ "insertcount", K_U64, P(insertcount), 0, 1ull << 40 },
	{ "readproportion", K_PROP, P(prop[YCSB_READ]), 0, 0 },
	{ "updateproportion", K_PROP, P(prop[YCSB_UPDATE]), 0, 0 },
	{ "insertproportion", K_PROP, P(prop[YCSB_INSERT]), 0, 0 },
	{ "scanproportion", K_PROP, P(prop[YCSB_SCAN]), 0, 0 },
	{ "readmodifywriteproportion", K_PROP, P(prop[YCSB_RMW]), 0, 0 },
	{ "requestdistribution", K_DIST, P(reqdist), 0, 0 },
	{ "hotspotdatafraction", K_PROP, P(hot_data), 0, 0 },
	{ "hotspotopnfraction", K_PROP, P(hot_opn), 0, 0 },
	{ "exponential.percentile", K_DOUBLE, P(exp_percentile), 0, 0 },
	{ "exponential.frac", K_DOUBLE, P(exp_frac), 0, 0 },
	{ "fieldcount", K_U32, P(fieldcount), 1, 1024 },
	{ "fieldlength", K_U32, P(fieldlength), 1, RKV_VALUE_MAX },
	{ "minfieldlength", K_U32, P(minfieldlength), 1, RKV_VALUE_MAX },
	{ "fieldlengthdistribution", K_FIELDDIST, 0, 0, 0 },
	{ "insertorder", K_ORDER, P(ordered), 0, 0 },
	{ "zeropadding", K_U32, P(zeropadding), 1, 20 },
	{ "minscanlength", K_U32, P(minscanlength), 1, 100000 },
	{ "maxscanlength", K_U32, P(maxscanlength), 1, 100000 },
	{ "scanlengthdistribution", K_SCANDIST, P(scanzipf), 0, 0 },
	{ "dataintegrity", K_BOOL, P(dataintegrity), 0, 0 },
	{ "threadcount", K_U32, P(threads), 1, 1024 },
	{ "target", K_DOUBLE, P(target), 0, 0 },
	{ "maxexecutiontime", K_U64, P(maxexecutiontime), 0, 1ull << 32 },
	{ "workload", K_WORKLOAD, 0, 0, 0 },
	{ "writeallfields", K_BOOL, P(writeallfields), 0, 0 },
	/* kept, but every store here reads whole records (README) */
	{ "readallfields", K_BOOL, P(readallfields), 0, 0 },
	/* YCSB properties with no effect here (documented in README) */
	{ "fieldlengthhistogram", K_IGNORE, 0, 0, 0 },
	{ "table", K_IGNORE, 0, 0, 0 },
	{ "fieldnameprefix", K_IGNORE, 0, 0, 0 },
	{ "measurementtype", K_IGNORE, 0, 0, 0 },
	{ "measurement.interval", K_IGNORE, 0, 0, 0 },
	{ "hdrhistogram.percentiles", K_IGNORE, 0, 0, 0 },
	{ "histogram.buckets", K_IGNORE, 0, 0, 0 },
	{ "status.interval", K_IGNORE, 0, 0, 0 },
	{ "exporter", K_IGNORE, 0, 0, 0 },
	{ "exportfile", K_IGNORE, 0, 0, 0 },
	{ "readallfieldsbyname", K_IGNORE, 0, 0, 0 },
	/* the rest of YCSB's workload_template: measurement and error
	 * reporting of the Java client, a column family, insertion retries
	 * (rkv-ycsb retries nothing and reports every error) */
	{ "timeseries.granularity", K_IGNORE, 0, 0, 0 },
	{ "columnfamily", K_IGNORE, 0, 0, 0 },
	{ "measurement.raw.output_file", K_IGNORE, 0, 0, 0 },
	{ "measurement.trackjvm", K_IGNORE, 0, 0, 0 },
	{ "reportlatencyforeacherror", K_IGNORE, 0, 0, 0 },
	{ "latencytrackederrors", K_IGNORE, 0, 0, 0 },
	{ "core_workload_insertion_retry_limit", K_IGNORE, 0, 0, 0 },
	{ "core_workload_insertion_retry_interval", K_IGNORE, 0, 0, 0 },
};

void ycsb_props_init(struct ycsb_props *p)
{
	/* CoreWorkload's defaults */
	memset(p, 0, sizeof(*p));
	p->recordcount = 0;
	p->operationcount = 0;
	p->prop[YCSB_READ] = 0.95;
	p->prop[YCSB_UPDATE] = 0.05;
	p->reqdist = YCSB_DIST_UNIFORM;
	p->hot_data = 0.2;
	p->hot_opn = 0.8;
	p->exp_percentile = 95;
	p->exp_frac = 0.8571428571;
	p->fieldcount = 10;
	p->fieldlength = 100;
	p->minfieldlength = 1;
	p->flendist = YCSB_FLEN_CONSTANT;
	p->writeallfields = 0;
	p->readallfields = 1;
	p->zeropadding = 1;
	p->minscanlength = 1;
	p->maxscanlength = 1000;
	p->threads = 1;
}

static const struct prop_def *find_def(const char *name)
{
	for (size_t i = 0; i < sizeof(g_defs) / sizeof(g_defs[0]); i++)
		if (!strcmp(g_defs[i].name, name))
			return &g_defs[i];
	return NULL;
}

static int parse_bool(const char *v, int *out)
{
	if (!strcasecmp(v, "true")) {
		*out = 1;
		return 0;
	}
	if (!strcasecmp(v, "false")) {
		*out = 0;
		return 0;
	}
	return -1;
}

/*
 * Set name to value.  where: "FILE:LINE" or "-p".  On a bad value prints
 * "rkv-ycsb: WHERE: NAME: bad value 'V' (want ...)".
 */
static int set_prop(struct ycsb_props *p, const char *where, const char *name,
		    const char *value)
{
	const struct prop_def *d = find_def(name);
	char *base = (char *)p, *end;
	const char *want = NULL;

	if (!d) {
		fprintf(stderr, "%s: %s: unknown property '%s'\n", YCSB_PROG,
			where, name);
		return -1;
	}
	switch (d->kind) {
	case K_U64:
	case K_U32: {
		unsigned long long v;

		errno = 0;
		v = strtoull(value, &end, 10);
		if (!*value || !isdigit((unsigned char)*value) || errno ||
		    *end || v < d->min || v > d->max) {
			fprintf(stderr, "%s: %s: %s: bad value '%s' (want an "
					"integer in %llu..%llu)\n",
				YCSB_PROG, where, name, value,
				(unsigned long long)d->min,
				(unsigned long long)d->max);
			return -1;
		}
		if (d->kind == K_U64)
			*(uint64_t *)(void *)(base + d->off) = v;
		else
			*(unsigned *)(void *)(base + d->off) = (unsigned)v;
		return 0;
	}
	case K_PROP:
	case K_DOUBLE: {
		double v;

		errno = 0;
		v = strtod(value, &end);
		if (!*value || errno || *end || !isfinite(v) || v < 0 ||
		    (d->kind == K_PROP && v > 1)) {
			fprintf(stderr, "%s: %s: %s: bad value '%s' (want a "
					"number in %s)\n",
				YCSB_PROG, where, name, value,
				d->kind == K_PROP ? "0..1" : "0..");
			return -1;
		}
		*(double *)(void *)(base + d->off) = v;
		return 0;
	}
	case K_BOOL: {
		int b;

		if (parse_bool(value, &b)) {
			want = "true or false";
			break;
		}
		*(int *)(void *)(base + d->off) = b;
		return 0;
	}
	case K_DIST:
		if (!strcmp(value, "uniform"))
			p->reqdist = YCSB_DIST_UNIFORM;
		else if (!strcmp(value, "zipfian"))
			p->reqdist = YCSB_DIST_ZIPFIAN;
		else if (!strcmp(value, "latest"))
			p->reqdist = YCSB_DIST_LATEST;
		else if (!strcmp(value, "hotspot"))
			p->reqdist = YCSB_DIST_HOTSPOT;
		else if (!strcmp(value, "exponential"))
			p->reqdist = YCSB_DIST_EXPONENTIAL;
		else if (!strcmp(value, "sequential"))
			p->reqdist = YCSB_DIST_SEQUENTIAL;
		else
			want = "uniform, zipfian, latest, hotspot, exponential "
			       "or sequential";
		break;
	case K_ORDER:
		if (!strcmp(value, "hashed"))
			p->ordered = 0;
		else if (!strcmp(value, "ordered"))
			p->ordered = 1;
		else
			want = "hashed or ordered";
		break;
	case K_SCANDIST:
		if (!strcmp(value, "uniform"))
			p->scanzipf = 0;
		else if (!strcmp(value, "zipfian"))
			p->scanzipf = 1;
		else
			want = "uniform or zipfian";
		break;
	case K_FIELDDIST:
		if (!strcmp(value, "constant"))
			p->flendist = YCSB_FLEN_CONSTANT;
		else if (!strcmp(value, "uniform"))
			p->flendist = YCSB_FLEN_UNIFORM;
		else if (!strcmp(value, "zipfian"))
			p->flendist = YCSB_FLEN_ZIPFIAN;
		else if (!strcmp(value, "histogram")) {
			fprintf(stderr, "%s: %s: %s: histogram is not supported "
					"(it reads YCSB's fieldlengthhistogram "
					"file; want constant, uniform or "
					"zipfian)\n", YCSB_PROG, where, name);
			return -1;
		} else
			want = "constant, uniform or zipfian";
		break;
	case K_WORKLOAD:
		if (strcmp(value, "site.ycsb.workloads.CoreWorkload") &&
		    strcmp(value, "com.yahoo.ycsb.workloads.CoreWorkload"))
			want = "site.ycsb.workloads.CoreWorkload";
		break;
	case K_IGNORE:
		break;
	}
	if (want) {
		fprintf(stderr, "%s: %s: %s: bad value '%s' (want %s)\n",
			YCSB_PROG, where, name, value, want);
		return -1;
	}
	return 0;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

int ycsb_props_load(struct ycsb_props *p, const char *path)
{
	char line[4096], where[1200];
	unsigned lineno = 0;
	const char *slash;
	FILE *f = fopen(path, "r");

	if (!f) {
		fprintf(stderr, "%s: cannot read workload file %s: %s\n",
			YCSB_PROG, path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *s, *sep, *name, *value;

		lineno++;
		snprintf(where, sizeof(where), "%s:%u", path, lineno);
		if (!strchr(line, '\n') && !feof(f)) {
			fprintf(stderr, "%s: %s: line too long\n", YCSB_PROG,
				where);
			goto err_close;
		}
		s = trim(line);
		if (!*s || *s == '#' || *s == '!')
			continue;
		sep = s + strcspn(s, "=: \t");
		if (!*sep) {
			fprintf(stderr, "%s: %s: '%s': want name=value\n",
				YCSB_PROG, where, s);
			goto err_close;
		}
		*sep++ = 0;
		name = trim(s);
		value = trim(sep);
		if (*value == '=' || *value == ':')
			value = trim(value + 1);
		if (value[strlen(value) > 0 ? strlen(value) - 1 : 0] == '\\') {
			fprintf(stderr, "%s: %s: %s: continued lines are not "
					"supported\n", YCSB_PROG, where, name);
			goto err_close;
		}
		if (set_prop(p, where, name, value))
			goto err_close;
	}
	if (ferror(f)) {
		fprintf(stderr, "%s: cannot read workload file %s: %s\n",
			YCSB_PROG, path, strerror(errno));
		goto err_close;
	}
	fclose(f);
	slash = strrchr(path, '/');
	snprintf(p->workload_name, sizeof(p->workload_name), "%s",
		 slash ? slash + 1 : path);
	return 0;

err_close:
	fclose(f);
	return -1;
}

int ycsb_props_set_arg(struct ycsb_props *p, const char *arg)
{
	char buf[1024], where[1100], *eq;

	snprintf(where, sizeof(where), "-p");
	if (strlen(arg) >= sizeof(buf) || !(eq = strchr(arg, '=')) ||
	    eq == arg) {
		fprintf(stderr, "%s: -p %s: want -p name=value\n", YCSB_PROG,
			arg);
		return -1;
	}
	memcpy(buf, arg, strlen(arg) + 1);
	buf[eq - arg] = 0;
	return set_prop(p, where, trim(buf), trim(buf + (eq - arg) + 1));
}

int ycsb_props_check(const struct ycsb_props *p)
{
	double sum = 0;
	uint64_t rec = (uint64_t)p->fieldcount * p->fieldlength +
		       ycsb_hdr_len(p);

	for (int t = 0; t < YCSB_NTYPES; t++)
		sum += p->prop[t];
	if (sum <= 0) {
		fprintf(stderr, "%s: every operation proportion is 0\n",
			YCSB_PROG);
		return -1;
	}
	if (rec > RKV_VALUE_MAX) {
		fprintf(stderr, "%s: fieldcount*fieldlength%s = %llu bytes: "
				"over the %u bytes rkv holds in one value\n",
			YCSB_PROG, ycsb_hdr_len(p) ? " + length header" : "",
			(unsigned long long)rec, RKV_VALUE_MAX);
		return -1;
	}
	if (p->flendist != YCSB_FLEN_CONSTANT &&
	    p->minfieldlength > p->fieldlength) {
		fprintf(stderr, "%s: minfieldlength %u > fieldlength %u\n",
			YCSB_PROG, p->minfieldlength, p->fieldlength);
		return -1;
	}
	if (p->exp_percentile <= 0 || p->exp_percentile >= 100 ||
	    p->exp_frac <= 0) {
		fprintf(stderr, "%s: exponential.percentile %g must be in "
				"(0, 100) and exponential.frac %g above 0\n",
			YCSB_PROG, p->exp_percentile, p->exp_frac);
		return -1;
	}
	if (p->minscanlength > p->maxscanlength) {
		fprintf(stderr, "%s: minscanlength %u > maxscanlength %u\n",
			YCSB_PROG, p->minscanlength, p->maxscanlength);
		return -1;
	}
	if (p->insertstart > p->recordcount) {
		fprintf(stderr, "%s: insertstart %llu > recordcount %llu\n",
			YCSB_PROG, (unsigned long long)p->insertstart,
			(unsigned long long)p->recordcount);
		return -1;
	}
	if (p->insertcount &&
	    p->insertstart + p->insertcount > p->recordcount) {
		fprintf(stderr, "%s: insertstart + insertcount > recordcount\n",
			YCSB_PROG);
		return -1;
	}
	if (p->recordcount < 2 &&
	    (p->prop[YCSB_READ] > 0 || p->prop[YCSB_UPDATE] > 0 ||
	     p->prop[YCSB_SCAN] > 0 || p->prop[YCSB_RMW] > 0)) {
		fprintf(stderr, "%s: recordcount must be at least 2\n",
			YCSB_PROG);
		return -1;
	}
	return 0;
}
