/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - rkv-server --metrics HOST:PORT: the server's counters in the
 * Prometheus text exposition format (version 0.0.4) at GET /metrics, over
 * plain HTTP/1.x, one request per connection.
 *
 * The control loop polls it (rkv_srv_metrics_poll, at most once a
 * millisecond): non-blocking sockets, no thread, so the counters are read
 * where they are changed and need no lock.  At most METRICS_CONNS
 * connections at once (the oldest is closed for a newcomer); a request
 * must come whole within METRICS_REQ_MS and METRICS_REQ_MAX bytes.
 */
#include "server_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"
#include "version.h"

#define METRICS_CONNS 16
#define METRICS_REQ_MAX 4096
#define METRICS_REQ_MS 2000
#define METRICS_BODY_MAX 16384

struct mconn {
	int fd;                      /* -1: free */
	uint64_t since_ms;
	char req[METRICS_REQ_MAX];
	size_t got;
	char *out;                   /* the answer being sent, or NULL */
	size_t out_len, out_off;
};

struct rkv_srv_metrics {
	int fd;
	char url[96];
	struct mconn c[METRICS_CONNS];
	uint64_t scrapes;
};

/* ---------------------------------------------------------- the body */

struct body {
	char *p;
	size_t len, cap;
};

static void put(struct body *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct body *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->len >= b->cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		b->len = b->len + (size_t)n < b->cap ? b->len + (size_t)n
						      : b->cap;
}

/* One metric without labels: its HELP, TYPE and value. */
static void metric(struct body *b, const char *name, const char *type,
		   const char *help, uint64_t v)
{
	put(b, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", name, help,
	    name, type, name, v);
}

/* A label value as the format wants it: \ " and newline escaped. */
static void put_label(struct body *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			put(b, "\\%c", *s);
		else if (*s == '\n')
			put(b, "\\n");
		else
			put(b, "%c", *s);
	}
}

static size_t render(struct rkv_srv_metrics *m, struct rkv_srv *srv,
		     uint64_t now_ms, char *out, size_t cap)
{
	struct body b = { .p = out, .cap = cap };
	struct rkv_space_stats st;
	uint64_t slots = rkv_srv_used_slots(srv);

	rkv_space_get_stats(srv->space, &st);
	put(&b, "# HELP rkv_server_info The server: its name, provider and "
		"version (value 1).\n# TYPE rkv_server_info gauge\n"
		"rkv_server_info{name=\"");
	put_label(&b, rkv_srv_name(srv));
	put(&b, "\",address=\"");
	put_label(&b, rkv_srv_addr(srv));
	put(&b, "\",version=\"%s\"} 1\n", RKV_VERSION);
	metric(&b, "rkv_uptime_seconds", "gauge", "Seconds since the server "
	       "started.", (now_ms - srv->start_ms) / 1000);
	metric(&b, "rkv_clients", "gauge", "Clients connected now.",
	       srv->nclients);
	metric(&b, "rkv_clients_connected_total", "counter", "Clients that "
	       "completed a handshake since start.", srv->clients_total);
	metric(&b, "rkv_keys", "gauge", "Keys in the index (committed slots).",
	       rkv_srv_index_count(srv->index_mem, slots));
	metric(&b, "rkv_index_slots", "gauge", "Slots of the index's "
	       "levels in use.", slots);
	metric(&b, "rkv_data_bytes", "gauge", "Bytes of the data region.",
	       st.len);
	metric(&b, "rkv_data_free_bytes", "gauge", "Bytes of the data region "
	       "free to grant.", st.free);
	metric(&b, "rkv_data_grace_bytes", "gauge", "Bytes returned and "
	       "waiting out the grace period before reuse.", st.grace);
	put(&b, "# HELP rkv_chunk_requests_total Chunk requests (CHUNK_ALLOC) "
		"by result.\n# TYPE rkv_chunk_requests_total counter\n");
	put(&b, "rkv_chunk_requests_total{result=\"granted\"} %" PRIu64 "\n",
	    st.grants);
	for (int r = 0; r < RKV_SRV_CHUNK_REFUSALS; r++)
		put(&b, "rkv_chunk_requests_total{result=\"%s\"} %" PRIu64 "\n",
		    rkv_srv_chunk_refusal_str(r), srv->chunk_refused[r]);
	metric(&b, "rkv_blocks_returned_total", "counter", "Blocks clients "
	       "returned (BLOCK_RETURN).", st.returns);
	metric(&b, "rkv_rebuilds_total", "counter", "Space rebuilt from the "
	       "index after a client left holding chunks.", st.rebuilds);
	metric(&b, "rkv_rebuilt_bytes_total", "counter", "Bytes those rebuilds "
	       "gave back.", st.rebuilt_bytes);
	metric(&b, "rkv_control_messages_total", "counter", "Control messages "
	       "served.", srv->ctrl_msgs);
	metric(&b, "rkv_bad_messages_total", "counter", "Malformed control "
	       "messages (the connection is closed).", srv->bad_msgs);
	metric(&b, "rkv_bad_extents_total", "counter", "Returned extents that "
	       "were not the client's (ignored).", srv->bad_extents);
	metric(&b, "rkv_auth_failures_total", "counter", "Wrong, missing or "
	       "abandoned authentication responses.", srv->auth_failures);
	metric(&b, "rkv_denied_total", "counter", "Writes refused to "
	       "read-only clients.", srv->denied);
	metric(&b, "rkv_rkey_rotations_total", "counter", "Times the regions "
	       "were registered anew (--rotate-rkeys).",
	       rkv_srv_rotate_epoch(srv));
	metric(&b, "rkv_polls_total", "counter", "Passes of the control loop.",
	       srv->polls);
	metric(&b, "rkv_idle_polls_total", "counter", "Passes that found "
	       "nothing to do.", srv->idle_polls);
	metric(&b, "rkv_completions_total", "counter", "Completions the "
	       "control loop handled.", srv->completions);
	put(&b, "# HELP rkv_transport_info The transport provider in use "
		"(value 1).\n# TYPE rkv_transport_info gauge\n"
		"rkv_transport_info{provider=\"");
	put_label(&b, rkv_srv_describe(srv));
	put(&b, "\"} 1\n");
	metric(&b, "rkv_metrics_scrapes_total", "counter", "Requests for "
	       "/metrics served (this one included).", m->scrapes);
	return b.len;
}

/* ------------------------------------------------------------ HTTP */

static void conn_close(struct mconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->out);
	c->fd = -1;
	c->out = NULL;
	c->got = 0;
}

static void answer(struct mconn *c, const char *status, const char *type,
		   const char *body, size_t len)
{
	size_t cap = len + 256;

	c->out = malloc(cap);
	if (!c->out) {
		conn_close(c);
		return;
	}
	c->out_len = (size_t)snprintf(c->out, cap,
				      "HTTP/1.1 %s\r\nContent-Type: %s\r\n"
				      "Content-Length: %zu\r\n"
				      "Connection: close\r\n\r\n",
				      status, type, len);
	memcpy(c->out + c->out_len, body, len);
	c->out_len += len;
	c->out_off = 0;
}

/* A whole request head is in c->req: answer it. */
static void serve(struct rkv_srv_metrics *m, struct rkv_srv *srv,
		  struct mconn *c, uint64_t now_ms)
{
	static const char prom[] = "text/plain; version=0.0.4; charset=utf-8";
	static const char text[] = "text/plain; charset=utf-8";
	char *body;
	size_t len;
	int head;

	head = !strncmp(c->req, "HEAD ", 5);
	if (strncmp(c->req, "GET ", 4) && !head) {
		static const char no[] = "only GET /metrics\n";

		answer(c, "405 Method Not Allowed", text, no, sizeof(no) - 1);
		return;
	}
	if (strncmp(c->req + (head ? 5 : 4), "/metrics ", 9) &&
	    strncmp(c->req + (head ? 5 : 4), "/metrics?", 9)) {
		static const char nf[] = "not found: the counters are at "
					 "/metrics\n";

		answer(c, "404 Not Found", text, nf, sizeof(nf) - 1);
		return;
	}
	body = malloc(METRICS_BODY_MAX);
	if (!body) {
		conn_close(c);
		return;
	}
	m->scrapes++;
	len = render(m, srv, now_ms, body, METRICS_BODY_MAX);
	answer(c, "200 OK", prom, body, len);
	if (head && c->out)
		c->out_len -= len; /* the head alone */
	free(body);
}

static void on_conn(struct rkv_srv_metrics *m, struct rkv_srv *srv,
		    struct mconn *c, uint64_t now_ms)
{
	ssize_t n;

	if (c->out) {
		n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
			 MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			conn_close(c);
			return;
		}
		c->out_off += (size_t)n;
		if (c->out_off == c->out_len)
			conn_close(c);
		return;
	}
	if (now_ms - c->since_ms > METRICS_REQ_MS) {
		conn_close(c); /* a request that never came whole */
		return;
	}
	n = recv(c->fd, c->req + c->got, sizeof(c->req) - 1 - c->got, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(c);
		return;
	}
	c->got += (size_t)n;
	c->req[c->got] = '\0';
	if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n")) {
		serve(m, srv, c, now_ms);
		if (c->out)
			on_conn(m, srv, c, now_ms); /* most go out at once */
	} else if (c->got == sizeof(c->req) - 1) {
		static const char big[] = "request too large\n";

		answer(c, "431 Request Header Fields Too Large",
		       "text/plain", big, sizeof(big) - 1);
	}
}

unsigned rkv_srv_metrics_fds(const struct rkv_srv_metrics *m,
			     struct pollfd *fds, unsigned max)
{
	unsigned n = 0;

	if (!m || !max)
		return 0;
	fds[n++] = (struct pollfd){ .fd = m->fd, .events = POLLIN };
	for (int i = 0; i < METRICS_CONNS && n < max; i++)
		if (m->c[i].fd >= 0)
			fds[n++] = (struct pollfd){
				.fd = m->c[i].fd,
				.events = m->c[i].out ? POLLOUT : POLLIN };
	return n;
}

int rkv_srv_metrics_poll(struct rkv_srv_metrics *m, struct rkv_srv *srv,
			 uint64_t now_ms)
{
	int work = 0;

	if (!m)
		return 0;
	for (int k = 0; k < 8; k++) {
		int fd = accept4(m->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct mconn *c = NULL, *oldest = &m->c[0];

		if (fd < 0)
			break;
		work++;
		for (int i = 0; i < METRICS_CONNS && !c; i++) {
			if (m->c[i].fd < 0)
				c = &m->c[i];
			else if (m->c[i].since_ms < oldest->since_ms)
				oldest = &m->c[i];
		}
		if (!c) {
			conn_close(oldest); /* room for the newcomer */
			c = oldest;
		}
		c->fd = fd;
		c->since_ms = now_ms;
		c->got = 0;
	}
	for (int i = 0; i < METRICS_CONNS; i++)
		if (m->c[i].fd >= 0) {
			on_conn(m, srv, &m->c[i], now_ms);
			work++;
		}
	return work;
}

int rkv_srv_metrics_start(const char *hostport, struct rkv_srv_metrics **out,
			  char *why, size_t why_len)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	struct sockaddr_storage sa;
	socklen_t sl = sizeof(sa);
	char host[256], ip[INET6_ADDRSTRLEN];
	const char *colon = strrchr(hostport, ':');
	struct rkv_srv_metrics *m;
	int rc, one = 1;

	*out = NULL;
	if (!colon || colon == hostport || !colon[1] ||
	    (size_t)(colon - hostport) >= sizeof(host)) {
		snprintf(why, why_len, "'%s' is not HOST:PORT (e.g. "
			 "127.0.0.1:9400; port 0 picks a free one)", hostport);
		return -EINVAL;
	}
	memcpy(host, hostport, (size_t)(colon - hostport));
	host[colon - hostport] = '\0';
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc) {
		snprintf(why, why_len, "'%s': %s", hostport, gai_strerror(rc));
		return -EINVAL;
	}
	m = rkv_calloc(1, sizeof(*m));
	if (!m) {
		freeaddrinfo(ai);
		return -ENOMEM;
	}
	for (int i = 0; i < METRICS_CONNS; i++)
		m->c[i].fd = -1;
	m->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		       0);
	if (m->fd < 0 ||
	    setsockopt(m->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(m->fd, ai->ai_addr, ai->ai_addrlen) || listen(m->fd, 16) ||
	    getsockname(m->fd, (struct sockaddr *)&sa, &sl)) {
		rc = -errno;
		snprintf(why, why_len, "cannot listen on %s: %s", hostport,
			 strerror(errno));
		freeaddrinfo(ai);
		if (m->fd >= 0)
			close(m->fd);
		rkv_free(m);
		return rc;
	}
	freeaddrinfo(ai);
	if (sa.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&sa;

		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		snprintf(m->url, sizeof(m->url), "http://[%s]:%u/metrics", ip,
			 ntohs(s6->sin6_port));
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&sa;

		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		snprintf(m->url, sizeof(m->url), "http://%s:%u/metrics", ip,
			 ntohs(s4->sin_port));
	}
	*out = m;
	return 0;
}

const char *rkv_srv_metrics_url(const struct rkv_srv_metrics *m)
{
	return m->url;
}

void rkv_srv_metrics_stop(struct rkv_srv_metrics *m)
{
	if (!m)
		return;
	for (int i = 0; i < METRICS_CONNS; i++)
		conn_close(&m->c[i]);
	close(m->fd);
	rkv_free(m);
}
