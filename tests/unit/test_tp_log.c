/* SPDX-License-Identifier: MIT */
/*
 * test_tp_log.c - the per-context log sink of the transport
 * (rkv_tp_set_log, rkv_tp_opts.log_fn), on tcp and shm.
 *
 * Each provider test gives a server-side and a client-side context a sink
 * that records what it gets, turns the global rkv_log up to debug (so that
 * any message that escaped its context's sink would print), sends fd 1 and
 * 2 to a temporary file, and provokes messages:
 *   - a connect to an address nobody listens on, and to an address of
 *     another provider (a warning on the client's sink);
 *   - garbage sent to the listener in place of a HELLO (a warning on the
 *     server's sink), and on tcp garbage after a good HELLO (the passive
 *     endpoint drops the connection with a warning), on shm a HELLO
 *     without its doorbell descriptor (refused by rkv_accept, a warning);
 *   - an ordinary disconnect each way: one side destroys its endpoint, the
 *     other sees EOF and flushes its RECVs.
 * It then checks that the sinks got the warnings, that the disconnects
 * logged nothing above debug, and that not one byte reached stdout or
 * stderr.  A pure test checks the filter (below min: not even formatted)
 * and that errno survives a log call.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "rtime.h"
#include "sw.h"
#include "test.h"
#include "transport.h"
#include "transport_internal.h"

/* ------------------------------------------------------------ the sink */
struct rec {
	pthread_mutex_t lock;
	unsigned n[RKV_LOG_OFF];  /* messages per level */
	char text[16384];         /* "level comp: msg\n" lines, truncated */
	size_t len;
};

static void rec_init(struct rec *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
}

static void rec_clear(struct rec *r)
{
	pthread_mutex_lock(&r->lock);
	memset(r->n, 0, sizeof(r->n));
	r->text[0] = '\0';
	r->len = 0;
	pthread_mutex_unlock(&r->lock);
}

/* The sink: any thread (the transport thread too). */
static void rec_sink(enum rkv_log_level level, const char *comp,
		     const char *func, int line, const char *msg, void *arg)
{
	struct rec *r = arg;
	int k;

	(void)func;
	(void)line;
	pthread_mutex_lock(&r->lock);
	if ((unsigned)level < RKV_LOG_OFF)
		r->n[level]++;
	k = snprintf(r->text + r->len, sizeof(r->text) - r->len,
		     "%s %s: %s\n", rkv_log_level_str(level), comp, msg);
	if (k > 0 && r->len + (size_t)k < sizeof(r->text))
		r->len += (size_t)k;
	pthread_mutex_unlock(&r->lock);
}

/* Messages at min or above. */
static unsigned rec_count(struct rec *r, enum rkv_log_level min)
{
	unsigned n = 0;

	pthread_mutex_lock(&r->lock);
	for (int l = min; l < RKV_LOG_OFF; l++)
		n += r->n[l];
	pthread_mutex_unlock(&r->lock);
	return n;
}

/* Whether a line of the record holds both words (b may be NULL). */
static bool rec_has(struct rec *r, const char *a, const char *b)
{
	bool hit = false;
	char *line, *save = NULL, copy[sizeof(r->text)];

	pthread_mutex_lock(&r->lock);
	memcpy(copy, r->text, r->len + 1);
	pthread_mutex_unlock(&r->lock);
	for (line = strtok_r(copy, "\n", &save); line && !hit;
	     line = strtok_r(NULL, "\n", &save))
		hit = strstr(line, a) && (!b || strstr(line, b));
	return hit;
}

/* Wait up to ms for a line with both words. */
static bool rec_wait(struct rec *r, const char *a, const char *b, unsigned ms)
{
	uint64_t end = rkv_now_ms() + ms;

	while (!rec_has(r, a, b)) {
		if (rkv_now_ms() > end)
			return false;
		usleep(2000);
	}
	return true;
}

static void rec_dump(struct rec *r, const char *who)
{
	pthread_mutex_lock(&r->lock);
	printf("#   %s's sink got:\n", who);
	for (char *p = r->text; *p;) {
		char *e = strchr(p, '\n');

		printf("#     %.*s\n", e ? (int)(e - p) : (int)strlen(p), p);
		p = e ? e + 1 : p + strlen(p);
	}
	pthread_mutex_unlock(&r->lock);
}

/* ------------------------------------------- stdout and stderr to a file */
struct capture {
	int saved_out, saved_err;
	int fd;
	char path[64];
};

/* Nothing may be printed by the test itself until capture_end. */
static int capture_begin(struct capture *c)
{
	snprintf(c->path, sizeof(c->path), "/tmp/rkv-tplog-XXXXXX");
	c->fd = mkstemp(c->path);
	if (c->fd < 0)
		return -errno;
	fflush(stdout);
	fflush(stderr);
	c->saved_out = dup(STDOUT_FILENO);
	c->saved_err = dup(STDERR_FILENO);
	if (c->saved_out < 0 || c->saved_err < 0 ||
	    dup2(c->fd, STDOUT_FILENO) < 0 || dup2(c->fd, STDERR_FILENO) < 0)
		return -errno;
	return 0;
}

/* Restore fd 1 and 2; returns the bytes written meanwhile (shown). */
static long capture_end(struct capture *c)
{
	struct stat st;
	char buf[1024];
	ssize_t n;

	fflush(stdout);
	fflush(stderr);
	dup2(c->saved_out, STDOUT_FILENO);
	dup2(c->saved_err, STDERR_FILENO);
	close(c->saved_out);
	close(c->saved_err);
	if (fstat(c->fd, &st))
		st.st_size = -1;
	if (st.st_size > 0) {
		printf("#   written to stdout/stderr meanwhile:\n");
		lseek(c->fd, 0, SEEK_SET);
		while ((n = read(c->fd, buf, sizeof(buf) - 1)) > 0) {
			buf[n] = '\0';
			printf("#     %s", buf);
		}
		printf("\n");
	}
	close(c->fd);
	unlink(c->path);
	return (long)st.st_size;
}

/* ------------------------------------------------------------ fixtures */
struct side {
	struct rkv_tp *tp;
	struct rkv_cq *cq;
	struct rkv_mr *mr;
	char buf[4][256];
	struct rec rec;
};

/* A library's sink: everything goes nowhere. */
static void discard_sink(enum rkv_log_level level, const char *comp,
			 const char *func, int line, const char *msg, void *arg)
{
	(void)level;
	(void)comp;
	(void)func;
	(void)line;
	(void)msg;
	(void)arg;
}

/*
 * A context whose sink is rec, given to rkv_tp_create (server), or a sink
 * that discards given to rkv_tp_create and replaced by rec with
 * rkv_tp_set_log before any use (client), so that both ways are exercised.
 */
static int side_open(struct side *s, enum rkv_tp_provider p, bool by_opts)
{
	struct rkv_tp_opts o;
	int rc;

	rec_init(&s->rec);
	rkv_tp_opts_init(&o);
	o.provider = p;
	o.timeout_ms = 1000;
	o.log_fn = by_opts ? rec_sink : discard_sink;
	o.log_arg = &s->rec;
	o.log_min = RKV_LOG_DEBUG;
	rc = rkv_tp_create(&o, &s->tp);
	if (rc)
		return rc;
	if (!by_opts)
		rkv_tp_set_log(s->tp, rec_sink, &s->rec, RKV_LOG_DEBUG);
	rc = rkv_cq_create(s->tp, 64, &s->cq);
	if (!rc)
		rc = rkv_mr_reg(s->tp, s->buf, sizeof(s->buf),
				RKV_ACCESS_LOCAL_WRITE, &s->mr);
	return rc;
}

static void side_close(struct side *s)
{
	if (s->mr)
		rkv_mr_dereg(s->mr);
	if (s->cq)
		rkv_cq_destroy(s->cq);
	rkv_tp_destroy(s->tp);
	pthread_mutex_destroy(&s->rec.lock);
}

static int post_recvs(struct side *s, struct rkv_ep *ep)
{
	for (int i = 0; i < 4; i++) {
		struct rkv_recv_wr w = { .wr_id = 10 + (uint64_t)i,
					 .local = s->buf[i],
					 .length = sizeof(s->buf[i]),
					 .lkey = s->mr->lkey };
		int rc = rkv_post_recv(ep, &w, NULL);

		if (rc)
			return rc;
	}
	return 0;
}

/* Poll s's CQ until a completion with status st arrives (up to ms). */
static bool wait_wc(struct side *s, enum rkv_wc_status st, unsigned ms)
{
	uint64_t end = rkv_now_ms() + ms;
	struct rkv_wc wc[8];

	while (rkv_now_ms() <= end) {
		int n = rkv_cq_poll(s->cq, wc, 8);

		for (int i = 0; i < n; i++)
			if (wc[i].status == st)
				return true;
		if (n <= 0)
			usleep(1000);
	}
	return false;
}

/* A plain socket to l's address (tcp: its port; shm: its socket file). */
static int raw_connect(const struct rkv_listener *l)
{
	struct rkv_tp_addr a;
	int fd = -1;

	if (rkv_tp_addr_parse(rkv_listener_addr(l), &a))
		return -1;
	if (a.provider == RKV_TP_SHM) {
		struct sockaddr_un u = { .sun_family = AF_UNIX };
		const char *dir = getenv("RKV_SHM_DIR");

		snprintf(u.sun_path, sizeof(u.sun_path), "%s/%s", dir, a.name);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&u, sizeof(u))) {
			close(fd);
			fd = -1;
		}
	} else {
		struct sockaddr_in in = { .sin_family = AF_INET,
					  .sin_port = htons(a.port) };

		inet_pton(AF_INET, a.host, &in.sin_addr);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&in, sizeof(in))) {
			close(fd);
			fd = -1;
		}
	}
	return fd;
}

static bool raw_send(int fd, const void *b, size_t n)
{
	return send(fd, b, n, MSG_NOSIGNAL) == (ssize_t)n;
}

/* ------------------------------------------------------------ scenarios */
/*
 * The results of one run, checked (and printed) once fd 1 and 2 are back.
 */
struct outcome {
	int refused_rc;          /* connect to nobody */
	int wrong_rc;            /* connect to another provider's address */
	bool wrong_warned;       /* ... logged on the client's sink */
	bool garbage_warned;     /* listener got garbage: server's sink */
	bool bad_hello_warned;   /* garbage after HELLO / HELLO without fd */
	int conn_rc;             /* the ordinary connection */
	bool flushed_srv;        /* client left: server's RECV flushed */
	bool flushed_cli;        /* server left: client's RECV flushed */
	unsigned disc_loud;      /* disconnect lines above debug, both sinks */
	bool disc_debug;         /* ... and the debug line that it happened */
};

static void provoke_refused(struct side *cli, struct side *srv,
			    struct outcome *o)
{
	struct rkv_listener *l = NULL;
	struct rkv_ep *ep = NULL;
	char addr[320] = "tcp://127.0.0.1:1";

	/* an address that was a listener a moment ago: nobody listens */
	if (rkv_tp_provider(srv->tp) == RKV_TP_SHM)
		snprintf(addr, sizeof(addr), "shm:///rkv-tplog-%d-none",
			 (int)getpid());
	else if (rkv_listen(srv->tp, "tcp://127.0.0.1:0", &l) == 0) {
		snprintf(addr, sizeof(addr), "%s", rkv_listener_addr(l));
		rkv_listener_destroy(l);
	}
	o->refused_rc = rkv_connect(cli->tp, addr, cli->cq, 1000, &ep);
	if (!o->refused_rc)
		rkv_ep_destroy(ep);
	o->wrong_rc = rkv_connect(cli->tp,
				  rkv_tp_provider(cli->tp) == RKV_TP_SHM
					  ? "tcp://127.0.0.1:1"
					  : "shm:///rkv-tplog-other",
				  cli->cq, 1000, &ep);
	if (!o->wrong_rc)
		rkv_ep_destroy(ep);
	o->wrong_warned = rec_has(&cli->rec, "warn transport", "provider");
}

/* Garbage in place of a HELLO, then a second bad handshake. */
static void provoke_garbage(struct side *srv, struct rkv_listener *l,
			    struct outcome *o)
{
	struct sw_hdr h = { .type = SW_F_HELLO };
	uint8_t frame[SW_HDR_LEN], junk[SW_HDR_LEN];
	bool tcp = rkv_tp_provider(srv->tp) == RKV_TP_TCP;
	struct rkv_ep *ep = NULL;
	int fd;

	memset(junk, 0x5a, sizeof(junk));
	fd = raw_connect(l);
	if (fd >= 0 && raw_send(fd, junk, sizeof(junk)))
		o->garbage_warned = rec_wait(&srv->rec, "warn", "garbage", 3000);
	if (fd >= 0)
		close(fd);
	/* a good HELLO: on tcp the endpoint is made, and then garbage; on
	 * shm the HELLO lacks its doorbell fd and rkv_accept refuses it */
	sw_hdr_encode(&h, frame);
	fd = raw_connect(l);
	if (fd >= 0 && raw_send(fd, frame, sizeof(frame))) {
		int rc = rkv_accept(l, srv->cq, 3000, &ep);

		if (tcp && rc == 0 && raw_send(fd, junk, sizeof(junk)))
			o->bad_hello_warned = rec_wait(&srv->rec, "warn",
						       "bad frame header", 3000);
		else if (!tcp && rc == -EPROTO)
			o->bad_hello_warned = rec_has(&srv->rec, "warn",
						      "descriptors");
		if (rc == 0)
			rkv_ep_destroy(ep);
	}
	if (fd >= 0)
		close(fd);
}

struct acceptor {
	struct side *srv;
	struct rkv_listener *l;
	struct rkv_ep *ep;
	int rc;
};

static void *accept_main(void *arg)
{
	struct acceptor *a = arg;

	a->rc = rkv_accept(a->l, a->srv->cq, 3000, &a->ep);
	return NULL;
}

/* One ordinary connection (rkv_connect waits for the HELLO_ACK that
 * rkv_accept sends: accept on a thread), RECVs posted on both ends. */
static int connect_pair(struct side *cli, struct side *srv,
			struct rkv_listener *l, struct rkv_ep **ce,
			struct rkv_ep **se)
{
	struct acceptor a = { .srv = srv, .l = l, .rc = -EINVAL };
	pthread_t th;
	int rc;

	if (pthread_create(&th, NULL, accept_main, &a))
		return -EAGAIN;
	rc = rkv_connect(cli->tp, rkv_listener_addr(l), cli->cq, 3000, ce);
	pthread_join(th, NULL);
	if (rc || a.rc) {
		if (!rc)
			rkv_ep_destroy(*ce);
		if (!a.rc)
			rkv_ep_destroy(a.ep);
		return rc ? rc : a.rc;
	}
	*se = a.ep;
	rc = post_recvs(cli, *ce);
	if (!rc)
		rc = post_recvs(srv, *se);
	return rc;
}

static void provoke_disconnects(struct side *cli, struct side *srv,
				struct rkv_listener *l, struct outcome *o)
{
	struct rkv_ep *ce = NULL, *se = NULL;

	rec_clear(&cli->rec);
	rec_clear(&srv->rec);
	/* the client leaves: the server's passive endpoint sees EOF */
	o->conn_rc = connect_pair(cli, srv, l, &ce, &se);
	if (!o->conn_rc) {
		rkv_ep_destroy(ce);
		o->flushed_srv = wait_wc(srv, RKV_WC_WR_FLUSH_ERR, 3000);
		rkv_ep_destroy(se);
	}
	/* the server leaves: the client's active endpoint sees EOF */
	ce = se = NULL;
	if (!o->conn_rc)
		o->conn_rc = connect_pair(cli, srv, l, &ce, &se);
	if (!o->conn_rc) {
		rkv_ep_destroy(se);
		o->flushed_cli = wait_wc(cli, RKV_WC_WR_FLUSH_ERR, 3000);
		rkv_ep_destroy(ce);
	}
	o->disc_loud = rec_count(&cli->rec, RKV_LOG_INFO) +
		       rec_count(&srv->rec, RKV_LOG_INFO);
	o->disc_debug = rec_has(&srv->rec, "debug", "closed by peer") &&
			rec_has(&cli->rec, "debug", "closed by peer");
}

static void run_provider(enum rkv_tp_provider p)
{
	struct outcome o = { 0 };
	struct side cli = { 0 }, srv = { 0 };
	struct rkv_listener *l = NULL;
	enum rkv_log_level lvl = rkv_log_get_level();
	struct capture cap;
	char addr[128];
	long written;
	int rc_cli, rc_srv, rc_l = -1;

	if (p == RKV_TP_SHM)
		snprintf(addr, sizeof(addr), "shm:///rkv-tplog-%d",
			 (int)getpid());
	else
		snprintf(addr, sizeof(addr), "tcp://127.0.0.1:0");
	/* anything that escapes its sink would print now */
	rkv_log_set_level(RKV_LOG_DEBUG);
	ASSERT_EQ(capture_begin(&cap), 0);
	rc_srv = side_open(&srv, p, true);
	rc_cli = side_open(&cli, p, false);
	if (!rc_srv)
		rc_l = rkv_listen(srv.tp, addr, &l);
	if (!rc_srv && !rc_cli && !rc_l) {
		provoke_refused(&cli, &srv, &o);
		provoke_garbage(&srv, l, &o);
		provoke_disconnects(&cli, &srv, l, &o);
	}
	if (l)
		rkv_listener_destroy(l);
	side_close(&cli);
	side_close(&srv);
	written = capture_end(&cap);
	rkv_log_set_level(lvl);

	ASSERT_EQ(rc_srv, 0);
	ASSERT_EQ(rc_cli, 0);
	ASSERT_EQ(rc_l, 0);
	EXPECT_EQ(written, 0);
	EXPECT_EQ(o.refused_rc, -ECONNREFUSED);
	EXPECT_EQ(o.wrong_rc, -EPROTONOSUPPORT);
	EXPECT_TRUE(o.wrong_warned);
	EXPECT_TRUE(o.garbage_warned);
	EXPECT_TRUE(o.bad_hello_warned);
	EXPECT_EQ(o.conn_rc, 0);
	EXPECT_TRUE(o.flushed_srv);
	EXPECT_TRUE(o.flushed_cli);
	EXPECT_EQ(o.disc_loud, 0);
	EXPECT_TRUE(o.disc_debug);
	if (g_test_failures || getenv("RKV_TPLOG_DUMP")) {
		rec_dump(&srv.rec, "server");
		rec_dump(&cli.rec, "client");
	}
}

static void t_tcp(void)
{
	run_provider(RKV_TP_TCP);
}

static void t_shm(void)
{
	run_provider(RKV_TP_SHM);
}

/* ------------------------------------------------- the filter, errno */
static int g_formatted;

static const char *count_format(void)
{
	g_formatted++;
	return "x";
}

static struct rec *g_global_rec;

static void global_sink(enum rkv_log_level level, const char *comp,
			const char *func, int line, const char *msg, void *arg)
{
	(void)arg;
	rec_sink(level, comp, func, line, msg, g_global_rec);
}

static void t_filter(void)
{
	struct rkv_tp_opts o;
	struct rkv_tp *tp = NULL;
	struct rec r, g;
	enum rkv_log_level lvl = rkv_log_get_level();

	rec_init(&r);
	rec_init(&g);
	rkv_tp_opts_init(&o);
	o.provider = RKV_TP_TCP;
	EXPECT_EQ(o.log_min, RKV_LOG_WARN);
	o.log_min = (enum rkv_log_level)(RKV_LOG_OFF + 1);
	EXPECT_EQ(rkv_tp_create(&o, &tp), -EINVAL);
	o.log_min = RKV_LOG_WARN;
	ASSERT_EQ(rkv_tp_create(&o, &tp), 0);
	rkv_tp_set_log(tp, rec_sink, &r, RKV_LOG_WARN);
	g_formatted = 0;
	rkv_tp_log(tp, RKV_LOG_INFO, "test", "below %s", count_format());
	EXPECT_EQ(g_formatted, 0);
	EXPECT_EQ(rec_count(&r, RKV_LOG_DEBUG), 0);
	errno = EBADF;
	rkv_tp_log(tp, RKV_LOG_ERROR, "test", "at %s", count_format());
	EXPECT_EQ(errno, EBADF);
	EXPECT_EQ(g_formatted, 1);
	EXPECT_TRUE(rec_has(&r, "error test: at x", NULL));
	/* OFF: nothing, whatever the level */
	rkv_tp_set_log(tp, rec_sink, &r, RKV_LOG_OFF);
	rkv_tp_log(tp, RKV_LOG_ERROR, "test", "off %s", count_format());
	EXPECT_EQ(g_formatted, 1);
	/* no sink: the global rkv_log, its threshold and its sink */
	g_global_rec = &g;
	rkv_log_set_sink(global_sink, NULL);
	rkv_log_set_level(RKV_LOG_WARN);
	rkv_tp_set_log(tp, NULL, NULL, RKV_LOG_DEBUG);
	rkv_tp_log(tp, RKV_LOG_INFO, "test", "quiet %s", count_format());
	rkv_tp_log(tp, RKV_LOG_WARN, "test", "global %s", count_format());
	rkv_log_set_sink(NULL, NULL);
	rkv_log_set_level(lvl);
	EXPECT_EQ(g_formatted, 2);
	EXPECT_TRUE(rec_has(&g, "warn test: global x", NULL));
	EXPECT_EQ(rec_count(&g, RKV_LOG_DEBUG), 1);
	EXPECT_EQ(rec_count(&r, RKV_LOG_DEBUG), 1);
	rkv_tp_destroy(tp);
	pthread_mutex_destroy(&r.lock);
	pthread_mutex_destroy(&g.lock);
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/rkv-tplog-shm-XXXXXX";
	int rc;

	rkv_test_init(argc, argv, 120);
	if (!mkdtemp(dir)) {
		printf("1..0 # SKIP mkdtemp: %s\n", strerror(errno));
		return 77;
	}
	setenv("RKV_SHM_DIR", dir, 1);
	RKV_TEST(t_filter);
	RKV_TEST(t_tcp);
	RKV_TEST(t_shm);
	rc = rkv_test_done();
	rmdir(dir);
	return rc;
}
