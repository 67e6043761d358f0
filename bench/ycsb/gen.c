/* SPDX-License-Identifier: MIT */
/*
 * gen.c - YCSB's generators in C, with YCSB's arithmetic:
 *
 *   ZipfianGenerator          Gray et al., "Quickly Generating Billion-Record
 *                             Synthetic Databases" (SIGMOD 1994); zeta grows
 *                             incrementally when the item count grows, and
 *                             eta keeps using the original item count, as
 *                             YCSB's does.
 *   ScrambledZipfianGenerator a zipfian over 1e10 items with the zeta YCSB
 *                             precomputed, hashed with fnvhash64 and taken
 *                             modulo the key space.
 *   SkewedLatestGenerator     last acknowledged insert minus a zipfian.
 *   AcknowledgedCounter       the run phase's insert sequence.
 *
 * The random source is xoshiro256** per thread (YCSB uses Java's
 * ThreadLocalRandom, so the numbers differ; the distributions do not).
 * A run is reproducible: the same seed and thread count give every thread
 * the same operation stream; only the "latest" basis and the run phase's
 * insert key numbers depend on when other threads' inserts finish, exactly
 * as in YCSB.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ycsb.h"

static const char *const g_op_names[YCSB_NTYPES] = {
	"READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE",
};

const char *ycsb_op_str(enum ycsb_op_type t)
{
	return (unsigned)t < YCSB_NTYPES ? g_op_names[t] : "?";
}

/* ---------------------------------------------------------------- rng */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void ycsb_rng_seed(struct ycsb_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t ycsb_rng_next(struct ycsb_rng *r)
{
	uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return res;
}

double ycsb_rng_double(struct ycsb_rng *r)
{
	return (double)(ycsb_rng_next(r) >> 11) * 0x1.0p-53;
}

/* UniformLongGenerator(lb, ub): lb + uniform in [0, ub - lb]. */
static uint64_t uniform(struct ycsb_rng *r, uint64_t lb, uint64_t ub)
{
	uint64_t n = ub - lb + 1;

	return lb + (uint64_t)(ycsb_rng_double(r) * (double)n) % n;
}

/* ---------------------------------------------------------------- fnv */

int64_t ycsb_fnvhash64(int64_t val)
{
	/* Utils.fnvhash64: Java longs, so the shift is arithmetic and the
	 * result goes through Math.abs (Long.MIN_VALUE stays negative). */
	uint64_t h = 0xCBF29CE484222325ull;
	int64_t v = val;

	for (int i = 0; i < 8; i++) {
		uint64_t octet = (uint64_t)v & 0xff;

		v >>= 8;
		h ^= octet;
		h *= 1099511628211ull;
	}
	int64_t s = (int64_t)h;

	return s < 0 && s != INT64_MIN ? -s : s;
}

/* ------------------------------------------------------------ zipfian */

double ycsb_zeta(uint64_t st, uint64_t n, double theta, double initialsum)
{
	double sum = initialsum;

	for (uint64_t i = st; i < n; i++)
		sum += 1.0 / pow((double)(i + 1), theta);
	return sum;
}

void ycsb_zipf_init(struct ycsb_zipf *z, uint64_t min, uint64_t max,
		    double theta, double zetan)
{
	z->items = max - min + 1;
	z->base = min;
	z->theta = theta;
	z->zeta2theta = ycsb_zeta(0, 2, theta, 0);
	z->alpha = 1.0 / (1.0 - theta);
	z->zetan = zetan;
	z->countforzeta = z->items;
	z->eta = (1 - pow(2.0 / (double)z->items, 1 - theta)) /
		 (1 - z->zeta2theta / zetan);
}

uint64_t ycsb_zipf_next(struct ycsb_zipf *z, struct ycsb_rng *r,
			uint64_t itemcount)
{
	if (itemcount > z->countforzeta) {
		/* more items: extend zeta incrementally (eta keeps the
		 * original item count, as YCSB's does) */
		z->zetan = ycsb_zeta(z->countforzeta, itemcount, z->theta,
				     z->zetan);
		z->countforzeta = itemcount;
		z->eta = (1 - pow(2.0 / (double)z->items, 1 - z->theta)) /
			 (1 - z->zeta2theta / z->zetan);
	}
	double u = ycsb_rng_double(r), uz = u * z->zetan;

	if (uz < 1.0)
		return z->base;
	if (uz < 1.0 + pow(0.5, z->theta))
		return z->base + 1;
	return z->base + (uint64_t)((double)itemcount *
				    pow(z->eta * u - z->eta + 1, z->alpha));
}

/* ----------------------------------------------------- acked counter */

int ycsb_acked_init(struct ycsb_acked *a, uint64_t start)
{
	a->window = calloc(YCSB_ACK_WINDOW, 1);
	if (!a->window)
		return -ENOMEM;
	pthread_mutex_init(&a->lock, NULL);
	atomic_init(&a->counter, start);
	atomic_init(&a->limit, start);
	return 0;
}

void ycsb_acked_fini(struct ycsb_acked *a)
{
	if (!a->window)
		return;
	pthread_mutex_destroy(&a->lock);
	free(a->window);
	a->window = NULL;
}

uint64_t ycsb_acked_next(struct ycsb_acked *a)
{
	return atomic_fetch_add_explicit(&a->counter, 1, memory_order_relaxed);
}

uint64_t ycsb_acked_last(struct ycsb_acked *a)
{
	/* lastValue() = first unacknowledged - 1; acquire pairs with the
	 * release in ack(), so every key up to it was inserted before */
	return atomic_load_explicit(&a->limit, memory_order_acquire) - 1;
}

int ycsb_acked_ack(struct ycsb_acked *a, uint64_t v)
{
	uint64_t next;

	pthread_mutex_lock(&a->lock);
	next = atomic_load_explicit(&a->limit, memory_order_relaxed);
	if (v < next || v - next >= YCSB_ACK_WINDOW) {
		pthread_mutex_unlock(&a->lock);
		return -EOVERFLOW;
	}
	a->window[v & (YCSB_ACK_WINDOW - 1)] = 1;
	while (a->window[next & (YCSB_ACK_WINDOW - 1)]) {
		a->window[next & (YCSB_ACK_WINDOW - 1)] = 0;
		next++;
	}
	atomic_store_explicit(&a->limit, next, memory_order_release);
	pthread_mutex_unlock(&a->lock);
	return 0;
}

/* ----------------------------------------------------------- workload */

int ycsb_wl_init(struct ycsb_wl *wl, const struct ycsb_props *p,
		 struct ycsb_acked *acked)
{
	memset(wl, 0, sizeof(*wl));
	wl->p = p;
	wl->acked = acked;
	wl->insertcount = p->insertcount ? p->insertcount :
			  p->recordcount - p->insertstart;
	/* CoreWorkload: the scrambled zipfian's key space also holds the
	 * inserts expected in the run (x2 "fudge factor"), so popular keys
	 * stay popular as the key space grows. */
	uint64_t expectednewkeys = (uint64_t)((double)p->operationcount *
					      p->prop[YCSB_INSERT] * 2.0);

	wl->sz_itemcount = wl->insertcount + expectednewkeys + 1;
	if (p->reqdist == YCSB_DIST_LATEST && p->recordcount >= 2)
		wl->zetan_latest = ycsb_zeta(0, p->recordcount - 1,
					     YCSB_ZIPFIAN_CONSTANT, 0);
	if (p->scanzipf)
		wl->zetan_scan = ycsb_zeta(0, p->maxscanlength -
					   p->minscanlength + 1,
					   YCSB_ZIPFIAN_CONSTANT, 0);
	/* new ExponentialGenerator(percentile, recordcount * frac) */
	wl->exp_gamma = -log(1.0 - p->exp_percentile / 100.0) /
			((double)p->recordcount * p->exp_frac);
	wl->hot_keys = (uint64_t)((double)wl->insertcount * p->hot_data);
	wl->record_len = ycsb_hdr_len(p) +
			 (size_t)p->fieldcount * p->fieldlength;
	if (p->flendist == YCSB_FLEN_ZIPFIAN)
		wl->zetan_flen = ycsb_zeta(0, p->fieldlength -
					   p->minfieldlength + 1,
					   YCSB_ZIPFIAN_CONSTANT, 0);
	atomic_init(&wl->seq_next, 0);
	wl->seq = &wl->seq_next;
	return 0;
}

void ycsb_gen_init(struct ycsb_gen *g, const struct ycsb_wl *wl,
		   uint64_t seed, unsigned tid)
{
	const struct ycsb_props *p = wl->p;

	memset(g, 0, sizeof(*g));
	g->wl = wl;
	g->tid = tid;
	ycsb_rng_seed(&g->rng, seed * 0x9e3779b97f4a7c15ull + tid + 1);
	if (p->reqdist == YCSB_DIST_ZIPFIAN)
		ycsb_zipf_init(&g->keyzipf, 0, YCSB_SZ_ITEM_COUNT,
			       YCSB_ZIPFIAN_CONSTANT, YCSB_SZ_ZETAN);
	else if (p->reqdist == YCSB_DIST_LATEST && p->recordcount >= 2)
		/* new ZipfianGenerator(basis.lastValue()) = [0, last - 1] */
		ycsb_zipf_init(&g->keyzipf, 0, p->recordcount - 2,
			       YCSB_ZIPFIAN_CONSTANT, wl->zetan_latest);
	if (p->scanzipf)
		ycsb_zipf_init(&g->scanzipf, p->minscanlength,
			       p->maxscanlength, YCSB_ZIPFIAN_CONSTANT,
			       wl->zetan_scan);
	if (p->flendist == YCSB_FLEN_ZIPFIAN)
		ycsb_zipf_init(&g->flenzipf, p->minfieldlength,
			       p->fieldlength, YCSB_ZIPFIAN_CONSTANT,
			       wl->zetan_flen);
	ycsb_gen_fields_seed(g, seed, 0);
}

void ycsb_gen_fields_seed(struct ycsb_gen *g, uint64_t seed, int load)
{
	ycsb_rng_seed(&g->frng, (seed ^ 0x6a09e667f3bcc909ull) *
				0xbf58476d1ce4e5b9ull + g->tid * 2 +
				(unsigned)load);
}

unsigned ycsb_gen_field(struct ycsb_gen *g)
{
	/* fieldchooser = new UniformLongGenerator(0, fieldcount - 1) */
	return (unsigned)uniform(&g->frng, 0, g->wl->p->fieldcount - 1);
}

unsigned ycsb_gen_field_len(struct ycsb_gen *g)
{
	const struct ycsb_props *p = g->wl->p;

	switch (p->flendist) {
	case YCSB_FLEN_UNIFORM:
		return (unsigned)uniform(&g->frng, p->minfieldlength,
					 p->fieldlength);
	case YCSB_FLEN_ZIPFIAN:
		return (unsigned)ycsb_zipf_next(&g->flenzipf, &g->frng,
						g->flenzipf.items);
	case YCSB_FLEN_CONSTANT:
	default:
		return p->fieldlength;
	}
}

enum ycsb_op_type ycsb_gen_next_type(struct ycsb_gen *g)
{
	/* DiscreteGenerator over the non-zero proportions, in YCSB's order */
	const double *w = g->wl->p->prop;
	double sum = 0, val;
	int last = YCSB_READ;

	for (int t = 0; t < YCSB_NTYPES; t++)
		sum += w[t];
	val = ycsb_rng_double(&g->rng);
	g->seq++;
	for (int t = 0; t < YCSB_NTYPES; t++) {
		if (w[t] <= 0)
			continue;
		last = t;
		if (val < w[t] / sum)
			return (enum ycsb_op_type)t;
		val -= w[t] / sum;
	}
	return (enum ycsb_op_type)last;
}

static uint64_t choose(struct ycsb_gen *g)
{
	const struct ycsb_wl *wl = g->wl;
	const struct ycsb_props *p = wl->p;

	switch (p->reqdist) {
	case YCSB_DIST_ZIPFIAN: {
		uint64_t r = ycsb_zipf_next(&g->keyzipf, &g->rng,
					    g->keyzipf.items);

		return p->insertstart +
		       (uint64_t)ycsb_fnvhash64((int64_t)r) % wl->sz_itemcount;
	}
	case YCSB_DIST_LATEST: {
		uint64_t max = ycsb_acked_last(wl->acked);

		return max - ycsb_zipf_next(&g->keyzipf, &g->rng, max);
	}
	case YCSB_DIST_HOTSPOT: {
		/* HotspotIntegerGenerator over [insertstart, + insertcount) */
		uint64_t hot = wl->hot_keys, cold = wl->insertcount - hot;
		int in_hot = ycsb_rng_double(&g->rng) < p->hot_opn;

		if (!hot || !cold)
			in_hot = hot != 0;
		if (in_hot)
			return p->insertstart + ycsb_rng_next(&g->rng) % hot;
		return p->insertstart + hot + ycsb_rng_next(&g->rng) % cold;
	}
	case YCSB_DIST_SEQUENTIAL: {
		/* SequentialGenerator: countstart + counter++ % interval */
		uint64_t n = atomic_fetch_add(wl->seq, 1);

		return p->insertstart + n % wl->insertcount;
	}
	case YCSB_DIST_UNIFORM:
	default:
		return uniform(&g->rng, p->insertstart,
			       p->insertstart + wl->insertcount - 1);
	}
}

uint64_t ycsb_gen_next_keynum(struct ycsb_gen *g)
{
	uint64_t k;

	if (g->wl->p->reqdist == YCSB_DIST_EXPONENTIAL) {
		/* CoreWorkload.nextKeynum: the last insert minus an
		 * exponential, again while that is below 0 */
		uint64_t last = ycsb_acked_last(g->wl->acked), off;

		do {
			double u = 1.0 - ycsb_rng_double(&g->rng); /* (0, 1] */

			off = (uint64_t)(-log(u) / g->wl->exp_gamma);
		} while (off > last);
		return last - off;
	}
	/* CoreWorkload.nextKeynum: skip keys not inserted yet */
	do {
		k = choose(g);
	} while (k > ycsb_acked_last(g->wl->acked));
	return k;
}

unsigned ycsb_gen_scan_len(struct ycsb_gen *g)
{
	const struct ycsb_props *p = g->wl->p;

	if (p->scanzipf)
		return (unsigned)ycsb_zipf_next(&g->scanzipf, &g->rng,
						g->scanzipf.items);
	return (unsigned)uniform(&g->rng, p->minscanlength, p->maxscanlength);
}

size_t ycsb_key_name(const struct ycsb_props *p, uint64_t keynum, char *buf)
{
	char num[24];
	int n, fill;

	if (p->ordered)
		n = snprintf(num, sizeof(num), "%" PRIu64, keynum);
	else
		n = snprintf(num, sizeof(num), "%" PRId64,
			     ycsb_fnvhash64((int64_t)keynum));
	fill = (int)p->zeropadding - n;
	if (fill < 0)
		fill = 0;
	memcpy(buf, "user", 4);
	memset(buf + 4, '0', (size_t)fill);
	memcpy(buf + 4 + fill, num, (size_t)n + 1);
	return 4 + (size_t)fill + (size_t)n;
}

/* ------------------------------------------------------------ records */

static uint64_t fnv1a(const char *s, size_t n)
{
	uint64_t h = 0xCBF29CE484222325ull;

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ull;
	}
	return h;
}

static const char g_alpha[65] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void fill_field(char *out, size_t len, uint64_t seed)
{
	uint64_t x = seed;
	size_t i = 0;

	while (i < len) {
		uint64_t r = splitmix64(&x);

		for (int k = 0; k < 10 && i < len; k++, r >>= 6)
			out[i++] = g_alpha[r & 63];
	}
}

unsigned ycsb_len_width(const struct ycsb_props *p)
{
	unsigned w = 1;

	if (p->flendist == YCSB_FLEN_CONSTANT)
		return 0;
	while (w < 8 && (p->fieldlength >> (4 * w)))
		w++;
	return w;
}

size_t ycsb_hdr_len(const struct ycsb_props *p)
{
	return (size_t)ycsb_len_width(p) * p->fieldcount;
}

/* hex digits of the version a field of len bytes holds */
static unsigned tag_width(size_t len)
{
	return len < 2 ? 0 : len - 1 < 16 ? (unsigned)(len - 1) : 16;
}

void ycsb_field_fill(const char *key, size_t key_len, unsigned f,
		     uint64_t version, size_t len, char *out)
{
	unsigned t = tag_width(len);
	uint64_t v = t < 16 ? version & ((1ull << (4 * t)) - 1) : version;
	size_t body = t ? len - t - 1 : len;

	if (t) {
		static const char hex[] = "0123456789abcdef";

		for (unsigned i = 0; i < t; i++)
			out[i] = hex[(v >> (4 * (t - 1 - i))) & 15];
		out[t] = ':';
	}
	fill_field(out + len - body, body,
		   fnv1a(key, key_len) ^
		   ((uint64_t)(f + 1) * 0x9e3779b97f4a7c15ull) ^
		   (v * 0xd6e8feb86659fd93ull));
}

static void put_hex(char *out, unsigned w, size_t v)
{
	static const char hex[] = "0123456789abcdef";

	for (unsigned i = 0; i < w; i++)
		out[i] = hex[(v >> (4 * (w - 1 - i))) & 15];
}

static int get_hex(const char *s, unsigned w, uint64_t *v)
{
	uint64_t x = 0;

	for (unsigned i = 0; i < w; i++) {
		char c = s[i];
		unsigned d;

		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else
			return -EBADMSG;
		x = (x << 4) | d;
	}
	*v = x;
	return 0;
}

size_t ycsb_record_fill(const struct ycsb_props *p, const char *key,
			size_t key_len, uint64_t version,
			const unsigned *lens, char *out)
{
	unsigned w = ycsb_len_width(p);
	size_t off = ycsb_hdr_len(p);

	for (unsigned f = 0; f < p->fieldcount; f++) {
		size_t fl = lens ? lens[f] : p->fieldlength;

		if (w)
			put_hex(out + (size_t)f * w, w, fl);
		ycsb_field_fill(key, key_len, f, version, fl, out + off);
		off += fl;
	}
	return off;
}

int ycsb_record_shape(const struct ycsb_props *p, const char *buf,
		      size_t len)
{
	unsigned w = ycsb_len_width(p);
	size_t sum = ycsb_hdr_len(p);

	if (!w)
		return len == (size_t)p->fieldcount * p->fieldlength ?
		       0 : -EBADMSG;
	if (len < sum)
		return -EBADMSG;
	for (unsigned f = 0; f < p->fieldcount; f++) {
		uint64_t fl;

		if (get_hex(buf + (size_t)f * w, w, &fl) ||
		    fl < p->minfieldlength || fl > p->fieldlength)
			return -EBADMSG;
		sum += (size_t)fl;
	}
	return sum == len ? 0 : -EBADMSG;
}

int ycsb_record_field(const struct ycsb_props *p, const char *buf,
		      size_t len, unsigned f, size_t *off, size_t *flen)
{
	unsigned w = ycsb_len_width(p);
	size_t o = ycsb_hdr_len(p);

	if (f >= p->fieldcount || ycsb_record_shape(p, buf, len))
		return -EBADMSG;
	if (!w) {
		*off = (size_t)f * p->fieldlength;
		*flen = p->fieldlength;
		return 0;
	}
	for (unsigned i = 0; i <= f; i++) {
		uint64_t fl = 0;

		get_hex(buf + (size_t)i * w, w, &fl);
		if (i == f) {
			*off = o;
			*flen = (size_t)fl;
		}
		o += (size_t)fl;
	}
	return 0;
}

int ycsb_record_check(const struct ycsb_props *p, const char *key,
		      size_t key_len, const char *buf, size_t len,
		      char *scratch)
{
	unsigned w = ycsb_len_width(p);
	size_t o = ycsb_hdr_len(p);

	if (ycsb_record_shape(p, buf, len))
		return -EBADMSG;
	for (unsigned f = 0; f < p->fieldcount; f++) {
		uint64_t fl = p->fieldlength, v = 0;
		unsigned t;

		if (w)
			get_hex(buf + (size_t)f * w, w, &fl);
		t = tag_width((size_t)fl);
		if (t && (get_hex(buf + o, t, &v) || buf[o + t] != ':'))
			return -EBADMSG;
		ycsb_field_fill(key, key_len, f, v, (size_t)fl, scratch);
		if (memcmp(buf + o, scratch, (size_t)fl))
			return -EBADMSG;
		o += (size_t)fl;
	}
	return 0;
}

long ycsb_record_splice(const struct ycsb_props *p, const char *old,
			size_t old_len, unsigned f, const char *fld,
			size_t flen, char *out, size_t cap)
{
	unsigned w = ycsb_len_width(p);
	size_t off, ofl, nl;

	if (ycsb_record_field(p, old, old_len, f, &off, &ofl) ||
	    (!w && flen != ofl))
		return -EBADMSG;
	nl = old_len - ofl + flen;
	if (nl > cap)
		return -EMSGSIZE;
	memcpy(out, old, off);
	if (w)
		put_hex(out + (size_t)f * w, w, flen);
	memcpy(out + off, fld, flen);
	memcpy(out + off + flen, old + off + ofl, old_len - off - ofl);
	return (long)nl;
}
