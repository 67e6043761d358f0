/* SPDX-License-Identifier: MIT */
/*
 * etcd.c - the etcd v3 client of etcd.h over etcd's HTTP/JSON gateway.
 *
 * Each call is one POST of a JSON request (cJSON builds it) to a /v3/...
 * path of the gateway, through the handle's one CURL easy handle, which
 * keeps the connection alive between calls and reconnects when etcd
 * closed it.  The gateway speaks proto3 JSON: bytes fields (keys, values)
 * are base64, 64-bit integers are strings ("revision":"12"), and fields
 * at their zero value are left out (a missing "value" is an empty value,
 * a missing "succeeded" is false).
 *
 * Everything read is untrusted: the answer is bounded
 * (RKV_ETCD_MAX_RESPONSE, -EMSGSIZE past it), cJSON bounds nesting, and
 * every field is type-checked before use, so a garbage server gets
 * -EPROTO and a reason, never a crash.  Reasons are sanitized to one
 * printable line.
 *
 * The watch is a stream: the write callback splits the answer into its
 * newline-separated JSON messages as they arrive and stops the transfer
 * (returns short) at the first event, which closes the connection.
 */
#include "etcd.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "log.h"

#ifdef RKV_WITH_ETCD
#include <cjson/cJSON.h>
#include <curl/curl.h>

/* The answer being read, reused between calls. */
struct body {
	char *p;
	size_t len, cap;
	int err; /* why the write callback stopped: -EMSGSIZE, -ENOMEM */
};

/* State of one rkv_etcd_wait while its stream is read. */
struct watch {
	bool created; /* etcd confirmed the watch */
	int result;   /* 0 while undecided, then 1 or -errno */
	int64_t rev;  /* result 1: the revision to report */
};

struct rkv_etcd {
	CURL *curl;
	struct curl_slist *hdrs;
	unsigned timeout_ms;
	char base[300];  /* "http://HOST:PORT", where requests go */
	char name[256];  /* the URL as the caller gave it, for reasons */
	char why[512];   /* reason of the last failure */
	char errbuf[CURL_ERROR_SIZE];
	struct body resp;
	struct watch *watch; /* non-NULL during rkv_etcd_wait */
};

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init_rc;

/* ------------------------------------------------------------- reasons */

/* Replace anything unprintable (a hostile server's newlines too). */
static void one_line(char *s)
{
	for (; *s; s++) {
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			*s = '?';
	}
}

/* A reason, made one printable line. */
#define SAY(buf, len, ...)                                                     \
	do {                                                                   \
		rkv_msgf((buf), (len), __VA_ARGS__);                           \
		if ((buf) && (len))                                            \
			one_line(buf);                                         \
	} while (0)
#define WHY(e, ...) SAY((e)->why, sizeof((e)->why), __VA_ARGS__)

/* ------------------------------------------------------------- base64 */

static const char g_b64[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Encode n bytes into a new NUL-terminated string (rkv_free it). */
static char *b64_encode(const void *in, size_t n)
{
	const unsigned char *s = in;
	char *out = rkv_malloc((n + 2) / 3 * 4 + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		*o++ = g_b64[v >> 18];
		*o++ = g_b64[(v >> 12) & 63];
		*o++ = i + 1 < n ? g_b64[(v >> 6) & 63] : '=';
		*o++ = i + 2 < n ? g_b64[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

static int b64_val(char c)
{
	const char *p = c ? strchr(g_b64, c) : NULL;

	return p ? (int)(p - g_b64) : -1;
}

/* One quad into up to 3 bytes; '=' only as the last one or two of the
 * last quad.  Returns the byte count or -1. */
static int b64_quad(const char *q, bool last, unsigned char *out)
{
	int v[4], n = 3;

	for (int i = 0; i < 4; i++) {
		v[i] = b64_val(q[i]);
		if (v[i] >= 0)
			continue;
		if (!last || q[i] != '=' || i < 2 || (i == 2 && q[3] != '='))
			return -1;
		v[i] = 0;
		n = n < i - 1 ? n : i - 1;
	}
	uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
		     (uint32_t)v[2] << 6 | (uint32_t)v[3];

	out[0] = (unsigned char)(w >> 16);
	out[1] = (unsigned char)(w >> 8);
	out[2] = (unsigned char)w;
	return n;
}

/* Decode s into a new NUL-terminated buffer (*out, *len without the NUL).
 * Returns 0, -EPROTO for bad base64, -ENOMEM. */
static int b64_decode(const char *s, char **out, size_t *len)
{
	size_t n = strlen(s), o = 0;
	char *d;

	if (n % 4)
		return -EPROTO;
	d = rkv_malloc(n / 4 * 3 + 1);
	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < n; i += 4) {
		int k = b64_quad(s + i, i + 4 == n, (unsigned char *)d + o);

		if (k < 0) {
			rkv_free(d);
			return -EPROTO;
		}
		o += (size_t)k;
	}
	d[o] = '\0';
	*out = d;
	*len = o;
	return 0;
}

/* ----------------------------------------------------------------- JSON */

/*
 * A request body, formatted: every variable part of etcd's requests is
 * base64 or a number, so nothing needs JSON escaping.  Returns a new
 * string (rkv_free it) or NULL.
 */
__attribute__((format(printf, 1, 2))) static char *reqf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	s = n < 0 ? NULL : rkv_malloc((size_t)n + 1);
	if (!s)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

/* A proto3 int64: a string of digits or (from other writers) a number
 * that a double holds exactly.  Absent: 0.  Returns 0 or -EPROTO. */
static int j_i64(const cJSON *o, const char *name, int64_t *out)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);
	char *end;

	*out = 0;
	if (!it || cJSON_IsNull(it))
		return 0;
	if (cJSON_IsNumber(it)) {
		double d = it->valuedouble;

		if (!(d >= -9007199254740992.0 && d <= 9007199254740992.0) ||
		    d != (double)(int64_t)d)
			return -EPROTO;
		*out = (int64_t)d;
		return 0;
	}
	if (!cJSON_IsString(it) || !it->valuestring[0] ||
	    isspace((unsigned char)it->valuestring[0]))
		return -EPROTO;
	errno = 0;
	long long v = strtoll(it->valuestring, &end, 10);

	if (errno || *end)
		return -EPROTO;
	*out = v;
	return 0;
}

/* A bytes field into a new NUL-terminated buffer; absent: "" (proto3
 * leaves empty bytes out).  Returns 0, -EPROTO, -ENOMEM. */
static int j_bytes(const cJSON *o, const char *name, char **out, size_t *len)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);

	if (!it)
		return b64_decode("", out, len);
	if (!cJSON_IsString(it))
		return -EPROTO;
	return b64_decode(it->valuestring, out, len);
}

/* The "header" every unary answer carries, and its revision: its absence
 * is how a 200 answer of some other JSON service shows. */
static int j_header_rev(struct rkv_etcd *e, const cJSON *o, int64_t *rev)
{
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "header");
	int64_t r;

	if (!cJSON_IsObject(h) || j_i64(h, "revision", &r) || r <= 0) {
		WHY(e, "%s answered JSON without an etcd header: not an etcd v3 gateway",
		    e->name);
		return -EPROTO;
	}
	if (rev)
		*rev = r;
	return 0;
}

/* ------------------------------------------------------------- HTTP */

static void curl_init_once(void)
{
	g_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int body_append(struct body *b, const char *p, size_t n)
{
	if (n > RKV_ETCD_MAX_RESPONSE - b->len) {
		b->err = -EMSGSIZE;
		return -1;
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *q;

		while (cap < b->len + n + 1)
			cap *= 2;
		q = rkv_realloc(b->p, cap);
		if (!q) {
			b->err = -ENOMEM;
			return -1;
		}
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

static bool watch_line(struct rkv_etcd *e, const char *p, size_t n);

/* Hand each complete line of a 200 watch stream to watch_line; true once
 * the wait is decided. */
static bool watch_scan(struct rkv_etcd *e)
{
	struct body *b = &e->resp;
	long code = 0;
	char *nl;

	curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200)
		return false;
	while ((nl = memchr(b->p, '\n', b->len))) {
		size_t n = (size_t)(nl - b->p);

		if (watch_line(e, b->p, n))
			return true;
		memmove(b->p, nl + 1, b->len - n - 1);
		b->len -= n + 1;
		b->p[b->len] = '\0';
	}
	return false;
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *arg)
{
	struct rkv_etcd *e = arg;
	size_t n = size * nmemb;

	if (body_append(&e->resp, p, n))
		return 0;
	if (e->watch && watch_scan(e))
		return 0;
	return n;
}

static int curl_setup(struct rkv_etcd *e)
{
	CURL *c = curl_easy_init();

	e->curl = c;
	if (!c)
		return -ENOMEM;
	e->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	/* no "Expect: 100-continue" wait for bodies over 1 KiB */
	if (e->hdrs)
		e->hdrs = curl_slist_append(e->hdrs, "Expect:");
	if (!e->hdrs)
		return -ENOMEM;
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROXY, ""); /* never $http_proxy */
#if CURL_AT_LEAST_VERSION(7, 85, 0)
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
#else
	curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)CURLPROTO_HTTP);
#endif
	curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, e->hdrs);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, e);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, e->errbuf);
	return 0;
}

/* A failed transfer: errno from curl's code and the socket's errno. */
static int curl_errno(struct rkv_etcd *e, CURLcode rc)
{
	long os = 0;

	curl_easy_getinfo(e->curl, CURLINFO_OS_ERRNO, &os);
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
		if (os == EHOSTUNREACH || os == ENETUNREACH)
			return -EHOSTUNREACH;
		return os == ETIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	case CURLE_WRITE_ERROR:
		return e->resp.err ? e->resp.err : -EIO;
	case CURLE_GOT_NOTHING:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_PARTIAL_FILE:
		return -ECONNRESET;
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_BAD_CONTENT_ENCODING:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return -EPROTO;
	default:
		return -EIO;
	}
}

static int curl_failed(struct rkv_etcd *e, CURLcode rc, const char *path)
{
	int r = curl_errno(e, rc);

	if (r == -EMSGSIZE)
		WHY(e, "%s %s: answer over %u bytes", e->name, path,
		    RKV_ETCD_MAX_RESPONSE);
	else
		WHY(e, "%s %s: %s (%s)", e->name, path, strerror(-r),
		    e->errbuf[0] ? e->errbuf : curl_easy_strerror(rc));
	return r;
}

/* gRPC status code (as the gateway reports errors) to errno. */
static int grpc_errno(int64_t code)
{
	switch (code) {
	case 3: /* INVALID_ARGUMENT */
		return -EINVAL;
	case 4: /* DEADLINE_EXCEEDED */
		return -ETIMEDOUT;
	case 5: /* NOT_FOUND: lease not found */
		return -ENOENT;
	case 7: /* PERMISSION_DENIED */
	case 16: /* UNAUTHENTICATED */
		return -EACCES;
	case 8: /* RESOURCE_EXHAUSTED: quota, too many requests */
		return -ENOSPC;
	case 14: /* UNAVAILABLE: no leader, request timed out */
		return -EAGAIN;
	default:
		return -EPROTO;
	}
}

/* An error object of the gateway: {"error":"...","message":"...",
 * "code":5} (unary) or {"grpc_code":5,"message":"..."} (stream).  Returns
 * -errno, or 0 when o is not one. */
static int grpc_error(struct rkv_etcd *e, const cJSON *o, long http)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "message");
	int64_t code = 0;

	if (j_i64(o, "code", &code) || !code)
		j_i64(o, "grpc_code", &code);
	if (code <= 0)
		return 0;
	if (!cJSON_IsString(m))
		m = cJSON_GetObjectItemCaseSensitive(o, "error");
	WHY(e, "%s answered HTTP %ld: %.200s (gRPC code %" PRId64 ")",
	    e->name, http, cJSON_IsString(m) ? m->valuestring : "?", code);
	return grpc_errno(code);
}

/* A non-200 answer: an etcd error, or something that is not etcd. */
static int http_failed(struct rkv_etcd *e, long http)
{
	cJSON *j = cJSON_ParseWithLength(e->resp.p ? e->resp.p : "",
					 e->resp.len);
	int r = cJSON_IsObject(j) ? grpc_error(e, j, http) : 0;

	cJSON_Delete(j);
	if (r)
		return r;
	WHY(e, "%s answered HTTP %ld: not an etcd v3 gateway", e->name, http);
	return -EPROTO;
}

/* POST body to path; a 200 answer lies in e->resp.  timeout_ms bounds it
 * all, connection included. */
static int post(struct rkv_etcd *e, const char *path, const char *body,
		unsigned timeout_ms)
{
	char url[sizeof(e->base) + 64];
	unsigned conn_ms = timeout_ms < e->timeout_ms ? timeout_ms : e->timeout_ms;
	long http = 0;
	CURLcode rc;

	snprintf(url, sizeof(url), "%s%s", e->base, path);
	e->resp.len = 0;
	e->resp.err = 0;
	e->errbuf[0] = '\0';
	curl_easy_setopt(e->curl, CURLOPT_URL, url);
	curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(e->curl, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)strlen(body));
	curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(e->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)conn_ms);
	rc = curl_easy_perform(e->curl);
	if (e->watch && e->watch->result)
		return 0; /* decided by the stream, which we stopped */
	if (rc != CURLE_OK)
		return curl_failed(e, rc, path);
	curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &http);
	if (http != 200)
		return http_failed(e, http);
	return 0;
}

/* One unary call: body (consumed; NULL: out of memory) to path, the
 * answer's JSON object in *ans (cJSON_Delete it). */
static int call(struct rkv_etcd *e, const char *path, char *body, cJSON **ans)
{
	int r;

	if (!body) {
		WHY(e, "%s %s: out of memory", e->name, path);
		return -ENOMEM;
	}
	r = post(e, path, body, e->timeout_ms);
	rkv_free(body);
	if (r)
		return r;
	*ans = cJSON_ParseWithLength(e->resp.p ? e->resp.p : "", e->resp.len);
	if (cJSON_IsObject(*ans))
		return 0;
	cJSON_Delete(*ans);
	WHY(e, "%s %s answered HTTP 200 but not a JSON object: not an etcd v3 gateway",
	    e->name, path);
	return -EPROTO;
}

/* ------------------------------------------------------------ open/close */

#define HOST_CHARS "abcdefghijklmnopqrstuvwxyz" \
	"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_"
#define IPV6_CHARS "0123456789abcdefABCDEF:."

/* The end of the HOST in "HOST:PORT...": a name, an IPv4 address or an
 * [IPv6] one.  NULL when there is none. */
static const char *host_end(const char *h)
{
	const char *end;

	if (*h != '[') {
		end = h + strspn(h, HOST_CHARS);
		return end > h && end - h <= 253 ? end : NULL;
	}
	end = strchr(h, ']');
	if (!end || end == h + 1 ||
	    strspn(h + 1, IPV6_CHARS) != (size_t)(end - h - 1))
		return NULL;
	return end + 1;
}

/* "etcd://HOST:PORT[/...]" or "http://..." to "http://HOST:PORT". */
static int parse_url(const char *url, char *base, size_t len, char *why,
		     size_t why_len)
{
	const char *h, *end;
	unsigned long port;
	char *pe;

	if (!url || (strncmp(url, "etcd://", 7) && strncmp(url, "http://", 7)))
		goto bad;
	h = url + 7;
	end = host_end(h);
	if (!end || *end != ':' || !isdigit((unsigned char)end[1]))
		goto bad;
	errno = 0;
	port = strtoul(end + 1, &pe, 10);
	if (errno || port == 0 || port > 65535 || (*pe && *pe != '/'))
		goto bad;
	snprintf(base, len, "http://%.*s:%lu", (int)(end - h), h, port);
	return 0;
bad:
	SAY(why, why_len,
	    "bad etcd URL \"%.200s\": expected etcd://HOST:PORT or http://HOST:PORT",
	    url ? url : "(null)");
	return -EINVAL;
}

int rkv_etcd_open(const char *url, unsigned timeout_ms, struct rkv_etcd **out,
		  char *why, size_t why_len)
{
	struct rkv_etcd *e;
	char base[sizeof(e->base)];
	int r;

	if (out)
		*out = NULL;
	r = parse_url(url, base, sizeof(base), why, why_len);
	if (r)
		return r;
	if (!out || !timeout_ms) {
		SAY(why, why_len, "%.200s: timeout_ms must be > 0", url);
		return -EINVAL;
	}
	pthread_once(&g_curl_once, curl_init_once);
	e = g_curl_init_rc == CURLE_OK ? rkv_calloc(1, sizeof(*e)) : NULL;
	if (!e)
		goto nomem;
	e->timeout_ms = timeout_ms;
	snprintf(e->base, sizeof(e->base), "%s", base);
	snprintf(e->name, sizeof(e->name), "%s", url);
	one_line(e->name);
	if (curl_setup(e))
		goto free_e;
	*out = e;
	return 0;
free_e:
	rkv_etcd_close(e);
nomem:
	SAY(why, why_len, "%.200s: out of memory", url);
	return -ENOMEM;
}

void rkv_etcd_close(struct rkv_etcd *e)
{
	if (!e)
		return;
	if (e->curl)
		curl_easy_cleanup(e->curl);
	curl_slist_free_all(e->hdrs);
	rkv_free(e->resp.p);
	rkv_free(e);
}

const char *rkv_etcd_why(const struct rkv_etcd *e)
{
	return e ? e->why : "no etcd handle";
}

void rkv_etcd_kv_fini(struct rkv_etcd_kv *kv)
{
	if (!kv)
		return;
	rkv_free(kv->key);
	rkv_free(kv->val);
	memset(kv, 0, sizeof(*kv));
}

void rkv_etcd_kv_free(struct rkv_etcd_kv *kvs, size_t n)
{
	if (!kvs)
		return;
	for (size_t i = 0; i < n; i++)
		rkv_etcd_kv_fini(&kvs[i]);
	rkv_free(kvs);
}

/* ------------------------------------------------------------------ KV */

static int check_key(struct rkv_etcd *e, const char *key, bool empty_ok)
{
	size_t n = key ? strlen(key) : 0;

	if (!n && !empty_ok) {
		WHY(e, "%s: empty key", e->name);
		return -EINVAL;
	}
	if (n > RKV_ETCD_KEY_MAX) {
		WHY(e, "%s: key of %zu bytes (at most %u)", e->name, n,
		    RKV_ETCD_KEY_MAX);
		return -EINVAL;
	}
	return 0;
}

/* One kv object of an answer into *kv.  A key must be a non-empty
 * string without NUL bytes (the API's keys are C strings). */
static int parse_kv(const cJSON *o, struct rkv_etcd_kv *kv)
{
	size_t klen = 0;
	int r;

	memset(kv, 0, sizeof(*kv));
	if (!cJSON_IsObject(o))
		return -EPROTO;
	r = j_bytes(o, "key", &kv->key, &klen);
	if (!r)
		r = j_bytes(o, "value", &kv->val, &kv->val_len);
	if (!r && (j_i64(o, "create_revision", &kv->create_rev) ||
		   j_i64(o, "mod_revision", &kv->mod_rev) ||
		   j_i64(o, "version", &kv->version) ||
		   j_i64(o, "lease", &kv->lease) || !klen ||
		   strlen(kv->key) != klen))
		r = -EPROTO;
	if (r)
		rkv_etcd_kv_fini(kv);
	return r;
}

/* The "kvs" array of a range answer (absent: none) into a new array. */
static int parse_kvs(struct rkv_etcd *e, const cJSON *ans,
		     struct rkv_etcd_kv **kvs, size_t *n)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(ans, "kvs"), *it;
	size_t cnt = 0, want = (size_t)cJSON_GetArraySize(a);
	int r = 0;

	*kvs = NULL;
	*n = 0;
	if (a && !cJSON_IsArray(a))
		r = -EPROTO;
	if (r || !want)
		goto out;
	*kvs = rkv_calloc(want, sizeof(**kvs));
	if (!*kvs) {
		r = -ENOMEM;
		goto out;
	}
	cJSON_ArrayForEach(it, a) {
		r = parse_kv(it, &(*kvs)[cnt]);
		if (r)
			break;
		cnt++;
	}
	if (r) {
		rkv_etcd_kv_free(*kvs, cnt);
		*kvs = NULL;
		cnt = 0;
	}
	*n = cnt;
out:
	if (r == -ENOMEM)
		WHY(e, "%s: out of memory", e->name);
	else if (r)
		WHY(e, "%s answered a malformed key-value (not an object, bad base64, an empty key or one with a NUL byte, or a bad number)",
		    e->name);
	return r;
}

/*
 * Base64 of the range of every key with prefix p: p itself, and etcd's
 * range_end, the key after all of them (p with its last byte below 0xff
 * incremented and the rest dropped).  "" (all keys) and a prefix of 0xff
 * bytes alone end at "\0", etcd's "no end"; "" starts at "\0" too.
 * Returns 0 or -ENOMEM.
 */
static int prefix_b64(const char *p, char **key, char **end)
{
	char buf[RKV_ETCD_KEY_MAX + 1];
	size_t n = strlen(p), m = n;

	memcpy(buf, p, n);
	while (m && (unsigned char)buf[m - 1] == 0xff)
		m--;
	if (m)
		buf[m - 1] = (char)((unsigned char)buf[m - 1] + 1);
	*key = b64_encode(n ? p : "", n ? n : 1);
	*end = b64_encode(m ? buf : "", m ? m : 1);
	if (*key && *end)
		return 0;
	rkv_free(*key);
	rkv_free(*end);
	return -ENOMEM;
}

int rkv_etcd_get(struct rkv_etcd *e, const char *key, struct rkv_etcd_kv *out,
		 int64_t *rev)
{
	struct rkv_etcd_kv *kvs;
	char *k;
	cJSON *ans;
	size_t n;
	int r;

	memset(out, 0, sizeof(*out));
	r = check_key(e, key, false);
	if (r)
		return r;
	k = b64_encode(key, strlen(key));
	r = call(e, "/v3/kv/range", k ? reqf("{\"key\":\"%s\"}", k) : NULL, &ans);
	rkv_free(k);
	if (r)
		return r;
	r = j_header_rev(e, ans, rev);
	if (!r)
		r = parse_kvs(e, ans, &kvs, &n);
	cJSON_Delete(ans);
	if (r)
		return r;
	if (!n) {
		WHY(e, "%s: no key \"%.200s\"", e->name, key);
		return -ENOENT;
	}
	*out = kvs[0];
	memset(&kvs[0], 0, sizeof(kvs[0]));
	rkv_etcd_kv_free(kvs, n);
	return 0;
}

int rkv_etcd_range(struct rkv_etcd *e, const char *prefix,
		   struct rkv_etcd_kv **kvs, size_t *n, int64_t *rev)
{
	char *k = NULL, *end = NULL, *body = NULL;
	cJSON *ans;
	int r;

	*kvs = NULL;
	*n = 0;
	r = check_key(e, prefix, true);
	if (r)
		return r;
	if (!prefix_b64(prefix ? prefix : "", &k, &end))
		body = reqf("{\"key\":\"%s\",\"range_end\":\"%s\","
			    "\"sort_order\":\"ASCEND\",\"sort_target\":\"KEY\"}",
			    k, end);
	rkv_free(k);
	rkv_free(end);
	r = call(e, "/v3/kv/range", body, &ans);
	if (r)
		return r;
	r = j_header_rev(e, ans, rev);
	if (!r)
		r = parse_kvs(e, ans, kvs, n);
	cJSON_Delete(ans);
	return r;
}

static int check_put(struct rkv_etcd *e, const char *key, const void *val,
		     size_t len)
{
	int r = check_key(e, key, false);

	if (r)
		return r;
	if (len > RKV_ETCD_VAL_MAX || (len && !val)) {
		WHY(e, "%s: value of %zu bytes (at most %u)", e->name, len,
		    RKV_ETCD_VAL_MAX);
		return -EINVAL;
	}
	return 0;
}

/*
 * A put request, alone or (expect >= 0) as the success branch of a txn
 * that compares the key's mod_revision with expect.  NULL: no memory.
 */
static char *put_body(const char *key, const void *val, size_t len,
		      int64_t lease, int64_t expect)
{
	char *k = b64_encode(key, strlen(key));
	char *v = b64_encode(len ? val : "", len);
	char *body = NULL;

	if (k && v && expect < 0)
		body = reqf("{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%" PRId64
			    "\"}", k, v, lease);
	else if (k && v)
		body = reqf("{\"compare\":[{\"key\":\"%s\",\"target\":\"MOD\","
			    "\"result\":\"EQUAL\",\"mod_revision\":\"%" PRId64 "\"}],"
			    "\"success\":[{\"request_put\":{\"key\":\"%s\","
			    "\"value\":\"%s\",\"lease\":\"%" PRId64 "\"}}]}",
			    k, expect, k, v, lease);
	rkv_free(k);
	rkv_free(v);
	return body;
}

int rkv_etcd_put(struct rkv_etcd *e, const char *key, const void *val,
		 size_t len, int64_t lease)
{
	cJSON *ans;
	int r = check_put(e, key, val, len);

	if (r)
		return r;
	r = call(e, "/v3/kv/put", put_body(key, val, len, lease, -1), &ans);
	if (r)
		return r;
	r = j_header_rev(e, ans, NULL);
	cJSON_Delete(ans);
	return r;
}

/* A txn answer: 0 (it put), -ECANCELED (the compare failed), -EPROTO. */
static int txn_result(struct rkv_etcd *e, const cJSON *ans, const char *key,
		      int64_t expect)
{
	const cJSON *ok = cJSON_GetObjectItemCaseSensitive(ans, "succeeded");
	int r = j_header_rev(e, ans, NULL);

	if (r)
		return r;
	if (ok && !cJSON_IsBool(ok)) {
		WHY(e, "%s answered a txn whose succeeded is not a bool", e->name);
		return -EPROTO;
	}
	if (!cJSON_IsTrue(ok)) { /* proto3 leaves false out */
		WHY(e, "%s: \"%.200s\" is not at revision %" PRId64, e->name,
		    key, expect);
		return -ECANCELED;
	}
	return 0;
}

int rkv_etcd_put_if(struct rkv_etcd *e, const char *key, const void *val,
		    size_t len, int64_t lease, int64_t expect_mod_rev)
{
	cJSON *ans;
	int r = check_put(e, key, val, len);

	if (!r && expect_mod_rev < 0) {
		WHY(e, "%s: expected revision %" PRId64 " < 0", e->name,
		    expect_mod_rev);
		r = -EINVAL;
	}
	if (r)
		return r;
	r = call(e, "/v3/kv/txn",
		 put_body(key, val, len, lease, expect_mod_rev), &ans);
	if (r)
		return r;
	r = txn_result(e, ans, key, expect_mod_rev);
	cJSON_Delete(ans);
	return r;
}

int rkv_etcd_delete(struct rkv_etcd *e, const char *key)
{
	cJSON *ans;
	char *k;
	int64_t n = 0;
	int r = check_key(e, key, false);

	if (r)
		return r;
	k = b64_encode(key, strlen(key));
	r = call(e, "/v3/kv/deleterange",
		 k ? reqf("{\"key\":\"%s\"}", k) : NULL, &ans);
	rkv_free(k);
	if (r)
		return r;
	r = j_header_rev(e, ans, NULL);
	if (!r && (j_i64(ans, "deleted", &n) || n < 0)) {
		WHY(e, "%s answered a bad deleted count", e->name);
		r = -EPROTO;
	} else if (!r && !n) {
		WHY(e, "%s: no key \"%.200s\"", e->name, key);
		r = -ENOENT;
	}
	cJSON_Delete(ans);
	return r;
}

/* --------------------------------------------------------------- leases */

int rkv_etcd_lease_grant(struct rkv_etcd *e, unsigned ttl_s, int64_t *id)
{
	cJSON *ans;
	int r;

	*id = 0;
	if (!ttl_s) {
		WHY(e, "%s: lease TTL of 0 s", e->name);
		return -EINVAL;
	}
	r = call(e, "/v3/lease/grant", reqf("{\"TTL\":\"%u\"}", ttl_s), &ans);
	if (r)
		return r;
	r = j_header_rev(e, ans, NULL);
	if (!r && (j_i64(ans, "ID", id) || *id == 0)) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(ans, "error");

		WHY(e, "%s granted no lease: %.200s", e->name,
		    cJSON_IsString(m) ? m->valuestring : "no ID");
		*id = 0;
		r = -EPROTO;
	}
	cJSON_Delete(ans);
	return r;
}

/* A keep-alive answer, a stream of one message: {"result":{...,"TTL"}}
 * (no TTL once expired) or {"error":{...}}. */
static int keepalive_result(struct rkv_etcd *e, const cJSON *ans, int64_t id,
			    int64_t *ttl)
{
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(ans, "result");
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(ans, "error");
	int r = cJSON_IsObject(err) ? grpc_error(e, err, 200) : 0;

	if (r)
		return r;
	if (!cJSON_IsObject(res) || j_header_rev(e, res, NULL) ||
	    j_i64(res, "TTL", ttl)) {
		WHY(e, "%s answered a malformed lease keep-alive", e->name);
		return -EPROTO;
	}
	if (*ttl <= 0) {
		WHY(e, "%s: lease %" PRId64 " has expired", e->name, id);
		return -ENOENT;
	}
	return 0;
}

int rkv_etcd_lease_keepalive(struct rkv_etcd *e, int64_t id,
			     int64_t *ttl_left)
{
	int64_t ttl = 0;
	cJSON *ans;
	int r;

	if (ttl_left)
		*ttl_left = 0;
	r = call(e, "/v3/lease/keepalive",
		 reqf("{\"ID\":\"%" PRId64 "\"}", id), &ans);
	if (r)
		return r;
	r = keepalive_result(e, ans, id, &ttl);
	cJSON_Delete(ans);
	if (!r && ttl_left)
		*ttl_left = ttl;
	return r;
}

int rkv_etcd_lease_revoke(struct rkv_etcd *e, int64_t id)
{
	cJSON *ans;
	int r = call(e, "/v3/lease/revoke",
		     reqf("{\"ID\":\"%" PRId64 "\"}", id), &ans);

	if (r)
		return r;
	r = j_header_rev(e, ans, NULL);
	cJSON_Delete(ans);
	return r;
}

/* ---------------------------------------------------------------- watch */

/* The latest mod_revision of an events array (0 when empty). */
static int events_rev(const cJSON *ev, int64_t *rev)
{
	const cJSON *it;
	int64_t r;

	*rev = 0;
	cJSON_ArrayForEach(it, ev) {
		const cJSON *kv = cJSON_GetObjectItemCaseSensitive(it, "kv");

		if (!cJSON_IsObject(kv) || j_i64(kv, "mod_revision", &r) ||
		    r <= 0)
			return -EPROTO;
		*rev = r > *rev ? r : *rev;
	}
	return 0;
}

/* One watch "result": created, events, or canceled (compacted).  Returns
 * 1 decided by a change, 0 undecided, -EPROTO. */
static int watch_result(struct rkv_etcd *e, struct watch *w, const cJSON *res)
{
	const cJSON *ev = cJSON_GetObjectItemCaseSensitive(res, "events");
	int64_t compact = 0;

	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "created")))
		w->created = true;
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "canceled"))) {
		if (!j_i64(res, "compact_revision", &compact) && compact > 0) {
			w->rev = compact;
			return 1;
		}
		WHY(e, "%s canceled the watch", e->name);
		return -EPROTO;
	}
	if (ev && (!cJSON_IsArray(ev) || events_rev(ev, &w->rev))) {
		WHY(e, "%s answered malformed watch events", e->name);
		return -EPROTO;
	}
	return w->rev > 0 ? 1 : 0;
}

/* One line of the stream; true once the wait is decided (w->result). */
static bool watch_line(struct rkv_etcd *e, const char *p, size_t n)
{
	struct watch *w = e->watch;
	cJSON *j = cJSON_ParseWithLength(p, n);
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "result");
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");

	if (cJSON_IsObject(res))
		w->result = watch_result(e, w, res);
	else if (cJSON_IsObject(err))
		w->result = grpc_error(e, err, 200);
	if (!w->result && !cJSON_IsObject(res)) {
		WHY(e, "%s /v3/watch answered a line that is not a watch message: not an etcd v3 gateway",
		    e->name);
		w->result = -EPROTO;
	}
	cJSON_Delete(j);
	return w->result != 0;
}

static char *watch_body(const char *prefix, int64_t after_rev)
{
	char *k, *end, *body;

	if (prefix_b64(prefix, &k, &end))
		return NULL;
	body = reqf("{\"create_request\":{\"key\":\"%s\",\"range_end\":\"%s\","
		    "\"start_revision\":\"%" PRId64 "\"}}",
		    k, end, after_rev + 1);
	rkv_free(k);
	rkv_free(end);
	return body;
}

/* After the stream: decided, timed out with or without the watch in
 * place, or ended (a last line without its newline decides too). */
static int watch_end(struct rkv_etcd *e, struct watch *w, int r)
{
	if (!r && !w->result && e->resp.len)
		watch_line(e, e->resp.p, e->resp.len);
	if (w->result)
		return w->result;
	if (r == -ETIMEDOUT && w->created)
		return 0;
	if (r == -ETIMEDOUT)
		WHY(e, "%s /v3/watch: no answer within the timeout", e->name);
	if (!r) {
		WHY(e, "%s closed the watch stream without an event", e->name);
		r = -ECONNRESET;
	}
	return r;
}

int rkv_etcd_wait(struct rkv_etcd *e, const char *prefix, int64_t after_rev,
		  unsigned timeout_ms, int64_t *rev)
{
	struct watch w = { 0 };
	char *body;
	int r;

	if (rev)
		*rev = 0;
	r = check_key(e, prefix, true);
	if (r)
		return r;
	if (!timeout_ms || after_rev < 0 || after_rev == INT64_MAX) {
		WHY(e, "%s: wait needs timeout_ms > 0 and after_rev >= 0",
		    e->name);
		return -EINVAL;
	}
	body = watch_body(prefix ? prefix : "", after_rev);
	if (!body) {
		WHY(e, "%s /v3/watch: out of memory", e->name);
		return -ENOMEM;
	}
	/* the stream is stopped, not finished: never reuse its connection */
	e->watch = &w;
	curl_easy_setopt(e->curl, CURLOPT_FORBID_REUSE, 1L);
	r = post(e, "/v3/watch", body, timeout_ms);
	curl_easy_setopt(e->curl, CURLOPT_FORBID_REUSE, 0L);
	rkv_free(body);
	r = watch_end(e, &w, r);
	e->watch = NULL;
	if (r == 1 && rev)
		*rev = w.rev;
	return r;
}

#else /* !RKV_WITH_ETCD: built without libcurl or cJSON */

int rkv_etcd_open(const char *url, unsigned timeout_ms, struct rkv_etcd **out,
		  char *why, size_t why_len)
{
	(void)url;
	(void)timeout_ms;
	*out = NULL;
	if (why && why_len)
		snprintf(why, why_len, "rkv was built without etcd support "
			 "(libcurl and cJSON: libcurl4-openssl-dev, "
			 "libcjson-dev)");
	return -EOPNOTSUPP;
}

/* Nothing below is reached: no handle is ever opened. */
void rkv_etcd_close(struct rkv_etcd *e) { (void)e; }
const char *rkv_etcd_why(const struct rkv_etcd *e)
{
	(void)e;
	return "rkv was built without etcd support";
}
void rkv_etcd_kv_fini(struct rkv_etcd_kv *kv) { (void)kv; }
void rkv_etcd_kv_free(struct rkv_etcd_kv *kvs, size_t n)
{
	(void)kvs;
	(void)n;
}
int rkv_etcd_get(struct rkv_etcd *e, const char *key, struct rkv_etcd_kv *out,
		 int64_t *rev)
{
	(void)e, (void)key, (void)out, (void)rev;
	return -EOPNOTSUPP;
}
int rkv_etcd_range(struct rkv_etcd *e, const char *prefix,
		   struct rkv_etcd_kv **kvs, size_t *n, int64_t *rev)
{
	(void)e, (void)prefix, (void)kvs, (void)n, (void)rev;
	return -EOPNOTSUPP;
}
int rkv_etcd_put(struct rkv_etcd *e, const char *key, const void *val,
		 size_t len, int64_t lease)
{
	(void)e, (void)key, (void)val, (void)len, (void)lease;
	return -EOPNOTSUPP;
}
int rkv_etcd_put_if(struct rkv_etcd *e, const char *key, const void *val,
		    size_t len, int64_t lease, int64_t expect_mod_rev)
{
	(void)e, (void)key, (void)val, (void)len, (void)lease;
	(void)expect_mod_rev;
	return -EOPNOTSUPP;
}
int rkv_etcd_delete(struct rkv_etcd *e, const char *key)
{
	(void)e, (void)key;
	return -EOPNOTSUPP;
}
int rkv_etcd_lease_grant(struct rkv_etcd *e, unsigned ttl_s, int64_t *id)
{
	(void)e, (void)ttl_s, (void)id;
	return -EOPNOTSUPP;
}
int rkv_etcd_lease_keepalive(struct rkv_etcd *e, int64_t id,
			     int64_t *ttl_left)
{
	(void)e, (void)id, (void)ttl_left;
	return -EOPNOTSUPP;
}
int rkv_etcd_lease_revoke(struct rkv_etcd *e, int64_t id)
{
	(void)e, (void)id;
	return -EOPNOTSUPP;
}
int rkv_etcd_wait(struct rkv_etcd *e, const char *prefix, int64_t after_rev,
		  unsigned timeout_ms, int64_t *rev)
{
	(void)e, (void)prefix, (void)after_rev, (void)timeout_ms, (void)rev;
	return -EOPNOTSUPP;
}
#endif
