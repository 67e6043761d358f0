/* SPDX-License-Identifier: MIT */
/*
 * t_input.c - bad input at the edges of the API and on the wire:
 * unparsable addresses (-EINVAL), another provider's scheme
 * (-EPROTONOSUPPORT), unknown provider names, an address already in use
 * (-EADDRINUSE), nobody listening (-ECONNREFUSED; shm may say -ENOENT),
 * accept timeout (-ETIMEDOUT), bad MR arguments; and on tcp and shm, raw
 * sockets that connect to the listener and send garbage, a truncated
 * frame, or nothing at all: the listener keeps serving, and clients
 * connected before and after still read correct data.
 */
#include "conf.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "rtime.h"

/* A bare context and CQ of the provider under test. */
struct bare {
	struct rkv_tp *tp;
	struct rkv_cq *cq;
};

static int bare_open(struct bare *b)
{
	struct rkv_tp_opts o;
	int rc;

	memset(b, 0, sizeof(*b));
	rkv_tp_opts_init(&o);
	o.provider = g_conf_provider;
	rc = rkv_tp_create(&o, &b->tp);
	if (rc) {
		printf("#   rkv_tp_create: %s\n", strerror(-rc));
		return rc;
	}
	rc = rkv_cq_create(b->tp, 64, &b->cq);
	if (rc) {
		printf("#   rkv_cq_create: %s\n", strerror(-rc));
		rkv_tp_destroy(b->tp);
		b->tp = NULL;
	}
	return rc;
}

static void bare_close(struct bare *b)
{
	if (b->cq)
		rkv_cq_destroy(b->cq);
	if (b->tp)
		rkv_tp_destroy(b->tp);
}

#define BARE_OR_FAIL(b)                                                        \
	do {                                                                   \
		if (bare_open(b)) {                                            \
			g_test_failures++;                                     \
			return;                                                \
		}                                                              \
	} while (0)

static void t_bad_addresses(void)
{
	static const char *const bad[] = {
		"tcp://", "tcp://host", "tcp://1.2.3.4:99999", "foo://x:1",
		"shm://noslash", "", "tcp://:80", "tcp://1.2.3.4:",
		"tcp://1.2.3.4:80x", "tcp://::1:80", "tcp://a b:80",
		"shm:///", "shm:///bad name", "shm:///a/b",
		"verbs://1.2.3.4:-1", "verbs://", "auto://nohost",
		("shm:///0123456789012345678901234567890123456789012345678901"
		 "2345678901234567890"),
	};
	struct rkv_listener *l = NULL;
	struct rkv_ep *ep = NULL;
	struct bare b;

	BARE_OR_FAIL(&b);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = rkv_listen(b.tp, bad[i], &l);

		if (rc != -EINVAL) {
			printf("#   rkv_listen(\"%s\") = %d, expected -EINVAL\n",
			       bad[i], rc);
			g_test_failures++;
			if (rc == 0)
				rkv_listener_destroy(l);
		}
		rc = rkv_connect(b.tp, bad[i], b.cq, 1000, &ep);
		if (rc != -EINVAL) {
			printf("#   rkv_connect(\"%s\") = %d, expected -EINVAL\n",
			       bad[i], rc);
			g_test_failures++;
			if (rc == 0)
				rkv_ep_destroy(ep);
		}
	}
	EXPECT_EQ(rkv_listen(b.tp, NULL, &l), -EINVAL);
	EXPECT_EQ(rkv_connect(b.tp, NULL, b.cq, 1000, &ep), -EINVAL);
	bare_close(&b);
}

static void t_other_scheme(void)
{
	const char *other[2];
	struct rkv_listener *l = NULL;
	struct rkv_ep *ep = NULL;
	struct bare b;

	switch (g_conf_provider) {
	case RKV_TP_TCP:
		other[0] = "shm:///rkv-conf-other";
		other[1] = "verbs://127.0.0.1:1";
		break;
	case RKV_TP_SHM:
		other[0] = "tcp://127.0.0.1:1";
		other[1] = "verbs://127.0.0.1:1";
		break;
	default:
		other[0] = "tcp://127.0.0.1:1";
		other[1] = "shm:///rkv-conf-other";
		break;
	}
	BARE_OR_FAIL(&b);
	for (int i = 0; i < 2; i++) {
		int rc = rkv_listen(b.tp, other[i], &l);

		if (rc == 0)
			rkv_listener_destroy(l);
		if (rc != -EPROTONOSUPPORT) {
			printf("#   rkv_listen(\"%s\") = %d\n", other[i], rc);
			g_test_failures++;
		}
		rc = rkv_connect(b.tp, other[i], b.cq, 1000, &ep);
		if (rc == 0)
			rkv_ep_destroy(ep);
		if (rc != -EPROTONOSUPPORT) {
			printf("#   rkv_connect(\"%s\") = %d\n", other[i], rc);
			g_test_failures++;
		}
	}
	bare_close(&b);
}

static void t_provider_parse(void)
{
	static const char *const good[] = { "auto", "verbs", "tcp", "shm" };
	static const char *const bad[] = { "TCP", "", "rdma", "tcp ", "shm0" };
	enum rkv_tp_provider p;

	for (int i = 0; i < 4; i++) {
		EXPECT_EQ(rkv_tp_provider_parse(good[i], &p), 0);
		EXPECT_EQ(p, i);
		EXPECT_STREQ(rkv_tp_provider_str(p), good[i]);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		EXPECT_EQ(rkv_tp_provider_parse(bad[i], &p), -EINVAL);
	EXPECT_EQ(rkv_tp_provider_parse(NULL, &p), -EINVAL);
	EXPECT_STREQ(rkv_tp_provider_str((enum rkv_tp_provider)42), "?");
}

static void t_tp_opts_bad(void)
{
	struct rkv_tp_opts o;
	struct rkv_tp *tp = NULL;

	rkv_tp_opts_init(&o);
	o.provider = g_conf_provider;
	o.max_send_wr = 0;
	EXPECT_EQ(rkv_tp_create(&o, &tp), -EINVAL);
	rkv_tp_opts_init(&o);
	o.provider = g_conf_provider;
	o.timeout_ms = 0;
	EXPECT_EQ(rkv_tp_create(&o, &tp), -EINVAL);
	rkv_tp_opts_init(&o);
	o.provider = g_conf_provider;
	o.opts_size = sizeof(o) + 8;
	EXPECT_EQ(rkv_tp_create(&o, &tp), -EINVAL);
	EXPECT_TRUE(tp == NULL);
}

static void t_listener_addr(void)
{
	struct rkv_listener *l = NULL;
	struct rkv_tp_addr a, want;
	char addr[320];
	struct bare b;
	int rc;

	BARE_OR_FAIL(&b);
	conf_listen_addr(addr, sizeof(addr));
	rc = rkv_listen(b.tp, addr, &l);
	EXPECT_EQ(rc, 0);
	if (rc == 0) {
		const char *got = rkv_listener_addr(l);

		printf("#   listening on %s\n", got);
		EXPECT_EQ(rkv_tp_addr_parse(got, &a), 0);
		EXPECT_EQ(rkv_tp_addr_parse(addr, &want), 0);
		EXPECT_EQ(a.provider, g_conf_provider);
		if (g_conf_provider == RKV_TP_SHM)
			EXPECT_STREQ(a.name, want.name);
		else
			EXPECT_TRUE(a.port != 0);
		rkv_listener_destroy(l);
	}
	bare_close(&b);
}

static void t_addr_in_use(void)
{
	struct rkv_listener *l1 = NULL, *l2 = NULL;
	char addr[320];
	struct bare b;
	int rc;

	BARE_OR_FAIL(&b);
	conf_listen_addr(addr, sizeof(addr));
	rc = rkv_listen(b.tp, addr, &l1);
	EXPECT_EQ(rc, 0);
	if (rc == 0) {
		/* The same real port (or name) again. */
		snprintf(addr, sizeof(addr), "%s", rkv_listener_addr(l1));
		rc = rkv_listen(b.tp, addr, &l2);
		if (rc == 0)
			rkv_listener_destroy(l2);
		if (rc != -EADDRINUSE) {
			printf("#   second rkv_listen(%s) = %d (%s)\n", addr,
			       rc, strerror(rc < 0 ? -rc : 0));
			g_test_failures++;
		}
		rkv_listener_destroy(l1);
	}
	bare_close(&b);
}

static void t_connect_refused(void)
{
	struct rkv_listener *l = NULL;
	struct rkv_ep *ep = NULL;
	char addr[320];
	struct bare b;
	uint64_t t0;
	int rc;

	BARE_OR_FAIL(&b);
	conf_listen_addr(addr, sizeof(addr));
	rc = rkv_listen(b.tp, addr, &l);
	EXPECT_EQ(rc, 0);
	if (rc == 0) {
		snprintf(addr, sizeof(addr), "%s", rkv_listener_addr(l));
		rkv_listener_destroy(l);
		t0 = rkv_now_ms();
		rc = rkv_connect(b.tp, addr, b.cq, 5000, &ep);
		if (rc == 0)
			rkv_ep_destroy(ep);
		printf("#   connect to closed %s: %d (%s) after %" PRIu64
		       " ms\n", addr, rc, strerror(rc < 0 ? -rc : 0),
		       rkv_now_ms() - t0);
		if (g_conf_provider == RKV_TP_SHM)
			EXPECT_TRUE(rc == -ECONNREFUSED || rc == -ENOENT);
		else
			EXPECT_EQ(rc, -ECONNREFUSED);
	}
	bare_close(&b);
}

static void t_accept_timeout(void)
{
	struct rkv_listener *l = NULL;
	struct rkv_ep *ep = NULL;
	char addr[320];
	struct bare b;
	uint64_t t0, dt;
	int rc;

	BARE_OR_FAIL(&b);
	conf_listen_addr(addr, sizeof(addr));
	rc = rkv_listen(b.tp, addr, &l);
	EXPECT_EQ(rc, 0);
	if (rc == 0) {
		t0 = rkv_now_ms();
		rc = rkv_accept(l, b.cq, 300, &ep);
		dt = rkv_now_ms() - t0;
		if (rc == 0)
			rkv_ep_destroy(ep);
		EXPECT_EQ(rc, -ETIMEDOUT);
		if (dt < 250 || dt > 3000) {
			printf("#   accept(300 ms) returned after %" PRIu64
			       " ms\n", dt);
			g_test_failures++;
		}
		rc = rkv_accept(l, b.cq, 0, &ep);
		if (rc == 0)
			rkv_ep_destroy(ep);
		EXPECT_EQ(rc, -ETIMEDOUT);
		rkv_listener_destroy(l);
	}
	bare_close(&b);
}

static void t_mr_reg_args(void)
{
	struct rkv_mr *mr = NULL;
	void *mem = NULL;
	struct bare b;
	int rc;

	BARE_OR_FAIL(&b);
	rc = rkv_tp_mem_alloc(b.tp, 8192, &mem);
	EXPECT_EQ(rc, 0);
	if (rc == 0) {
		EXPECT_EQ(rkv_mr_reg(b.tp, mem, 0, RKV_ACCESS_ALL, &mr),
			  -EINVAL);
		EXPECT_EQ(rkv_mr_reg(b.tp, mem, 8192, 1u << 9, &mr), -EINVAL);
		EXPECT_EQ(rkv_mr_reg(b.tp, mem, 8192, RKV_ACCESS_REMOTE_WRITE,
				     &mr),
			  -EINVAL);
		EXPECT_EQ(rkv_mr_reg(b.tp, mem, 8192, RKV_ACCESS_REMOTE_ATOMIC,
				     &mr),
			  -EINVAL);
		/* Two registrations of the same memory: distinct keys. */
		{
			struct rkv_mr *a = NULL, *c = NULL;

			EXPECT_EQ(rkv_mr_reg(b.tp, mem, 8192, RKV_ACCESS_ALL,
					     &a),
				  0);
			EXPECT_EQ(rkv_mr_reg(b.tp, mem, 4096,
					     RKV_ACCESS_REMOTE_READ, &c),
				  0);
			if (a && c)
				EXPECT_TRUE(a->rkey != c->rkey);
			if (a) {
				EXPECT_TRUE(a->addr == mem);
				EXPECT_EQ(a->length, 8192);
				EXPECT_EQ(a->access, RKV_ACCESS_ALL);
				EXPECT_EQ(rkv_mr_dereg(a), 0);
			}
			if (c)
				EXPECT_EQ(rkv_mr_dereg(c), 0);
		}
		rkv_tp_mem_free(b.tp, mem, 8192);
	}
	if (g_conf_provider == RKV_TP_SHM) {
		/* Remote access needs rkv_tp_mem_alloc memory; local does
		 * not. */
		char *heap = malloc(8192);

		if (heap) {
			mr = NULL;
			EXPECT_EQ(rkv_mr_reg(b.tp, heap, 8192,
					     RKV_ACCESS_REMOTE_READ, &mr),
				  -EFAULT);
			mr = NULL;
			rc = rkv_mr_reg(b.tp, heap, 8192,
					RKV_ACCESS_LOCAL_WRITE, &mr);
			EXPECT_EQ(rc, 0);
			if (rc == 0)
				rkv_mr_dereg(mr);
			free(heap);
		}
	}
	bare_close(&b);
}

/* --------------------------------------------- raw sockets at a listener */

/*
 * Connect a raw socket to the listener: TCP for tcp, the abstract unix
 * socket for shm (its name and type found in /proc/net/unix by the
 * listen name).  Returns the fd, -EOPNOTSUPP for verbs, or -errno.
 */
static int raw_connect(const char *laddr)
{
	struct rkv_tp_addr a;
	int fd, rc;

	if (rkv_tp_addr_parse(laddr, &a))
		return -EINVAL;
	if (a.provider == RKV_TP_TCP) {
		struct sockaddr_in sin = { .sin_family = AF_INET };

		sin.sin_port = htons(a.port);
		if (inet_pton(AF_INET, a.host, &sin.sin_addr) != 1)
			return -EINVAL;
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (connect(fd, (struct sockaddr *)&sin, sizeof(sin))) {
			rc = -errno;
			close(fd);
			return rc;
		}
		return fd;
	}
	if (a.provider == RKV_TP_SHM) {
		char line[512], path[256] = "";
		unsigned type = 0, flags, t;
		FILE *fp = fopen("/proc/net/unix", "r");
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		size_t n;

		if (!fp)
			return -errno;
		while (fgets(line, sizeof(line), fp)) {
			char p[256];

			if (sscanf(line, "%*s %*s %*s %x %x %*s %*s %255s",
				   &flags, &t, p) != 3)
				continue;
			/* A listening (SO_ACCEPTCON) socket whose name (a
			 * file, or an abstract name) ends in the listen
			 * name. */
			size_t pl = strlen(p), nl = strlen(a.name);

			if ((p[0] == '@' || p[0] == '/') &&
			    (flags & 0x10000) && pl > nl &&
			    strcmp(p + pl - nl, a.name) == 0 &&
			    !isalnum((unsigned char)p[pl - nl - 1])) {
				snprintf(path, sizeof(path), "%s", p);
				type = t;
				break;
			}
		}
		fclose(fp);
		if (!path[0])
			return -ENOENT;
		n = strlen(path);
		if (n > sizeof(sun.sun_path))
			return -ENAMETOOLONG;
		memcpy(sun.sun_path, path, n);
		if (path[0] == '@')
			sun.sun_path[0] = '\0'; /* abstract */
		fd = socket(AF_UNIX, (type == 5 ? SOCK_SEQPACKET : SOCK_STREAM) |
					     SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (connect(fd, (struct sockaddr *)&sun,
			    (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
					n))) {
			rc = -errno;
			close(fd);
			return rc;
		}
		return fd;
	}
	return -EOPNOTSUPP;
}

struct acc_loop {
	struct conf_srv *s;
	struct rkv_cq *cq;
	struct rkv_ep *eps[8];
	int n;
	int stop; /* set by the main thread once its client connected */
	pthread_mutex_t lock;
};

static void *acc_loop_main(void *p)
{
	struct acc_loop *al = p;
	uint64_t deadline = rkv_now_ms() + 3 * conf_bound_ms();

	while (rkv_now_ms() < deadline) {
		struct rkv_ep *ep = NULL;
		int rc = rkv_accept(al->s->lis, al->cq, 200, &ep), stop;

		if (rc == 0 && al->n < 8)
			al->eps[al->n++] = ep;
		else if (rc == 0)
			rkv_ep_destroy(ep);
		pthread_mutex_lock(&al->lock);
		stop = al->stop;
		pthread_mutex_unlock(&al->lock);
		if (stop && rc == -ETIMEDOUT)
			break;
	}
	return NULL;
}

/* READ 64 B at off through cli and check against the server's bytes. */
static int read_check(struct conf_srv *s, struct rkv_cq *scq2,
		      struct conf_cli *c, size_t off)
{
	struct rkv_wr w;
	uint64_t deadline = rkv_now_ms() + conf_bound_ms();
	struct rkv_wc wc[8];

	memset(c->loc, 0, 64);
	conf_wr(&w, RKV_WR_READ, 3, RKV_WR_SIGNALED, c->loc, 64,
		c->loc_mr->lkey, conf_raddr(s, off), s->mr->rkey);
	conf_stash_clear(&c->st);
	if (rkv_post(c->ep, &w, NULL))
		return -1;
	while (c->st.n < 1 && rkv_now_ms() < deadline) {
		conf_progress(s, c);
		if (scq2)
			rkv_cq_poll(scq2, wc, 8);
	}
	if (c->st.n < 1) {
		printf("#   READ timed out\n");
		return -1;
	}
	if (c->st.wc[0].status != RKV_WC_SUCCESS) {
		printf("#   READ: %s\n", rkv_wc_status_str(c->st.wc[0].status));
		return -1;
	}
	return conf_diff(c->loc, s->reg + off, 64) < 0 ? 0 : -1;
}

enum raw_kind { RAW_GARBAGE, RAW_TRUNCATED, RAW_IDLE };

/*
 * A frame header as the software providers put it on the wire (sw.h):
 * 48 bytes, little-endian: magic "RKVT", version 1, type, 2 zero bytes,
 * payload length, key, seq, addr, arg0, arg1.  Types: 1 HELLO, 3 READ,
 * 4 WRITE, 7 SEND.  Only used to make plausible bad input.
 */
static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_hdr(uint8_t *p, uint8_t type, uint32_t len, uint32_t key,
		    uint64_t seq, uint64_t addr, uint64_t arg0)
{
	memset(p, 0, 48);
	memcpy(p, "RKVT", 4);
	p[4] = 1;
	p[5] = type;
	put_le(p + 8, len, 4);
	put_le(p + 12, key, 4);
	put_le(p + 16, seq, 8);
	put_le(p + 24, addr, 8);
	put_le(p + 32, arg0, 8);
}

/*
 * Fixture A connected, then raw connections of the kind given, then a
 * client B connects; A and B both read correct data.
 */
static void raw_conns(enum raw_kind kind)
{
	struct conf_fix_opts o;
	struct conf_fix f;
	struct conf_cli b;
	struct rkv_cq *cq2 = NULL;
	struct acc_loop al;
	pthread_t th;
	int fds[4], nfd = 0, rc, started = 0;

	if (g_conf_provider == RKV_TP_VERBS) {
		rkv_test_skip("raw-socket input applies to tcp and shm");
		return;
	}
	memset(&b, 0, sizeof(b));
	memset(&al, 0, sizeof(al));
	conf_fix_opts_init(&o);
	o.region_len = o.local_len = 64u << 10;
	CONF_FIX(&f, &o);
	conf_fill(f.s.reg, f.s.reg_len, 21);
	if (read_check(&f.s, NULL, &f.c, 128)) {
		g_test_failures++;
		goto out;
	}
	for (int i = 0; i < (kind == RAW_IDLE ? 1 : 3); i++) {
		uint8_t junk[4096];
		ssize_t n = 0;

		rc = raw_connect(f.s.addr);
		if (rc == -ENOENT) {
			rkv_test_skip("shm listener socket not found in "
				      "/proc/net/unix");
			goto out;
		}
		if (rc < 0) {
			printf("#   raw connect: %s\n", strerror(-rc));
			g_test_failures++;
			goto out;
		}
		fds[nfd++] = rc;
		conf_fill(junk, sizeof(junk), 300 + (uint32_t)i);
		if (kind == RAW_GARBAGE) {
			if (i == 0) {
				/* Noise led by a huge length word. */
				memset(junk, 0xff, 16);
			} else if (i == 1) {
				/* A well-formed SEND header that promises
				 * 4 GiB, then noise. */
				put_hdr(junk, 7, 0xffffffffu, 0, 0, 0, 0);
			} else {
				/* HELLO, then a WRITE with a made-up rkey
				 * and address, then noise. */
				put_hdr(junk, 1, 0, 0, 0, 0, 0);
				put_hdr(junk + 48, 4, 1024, 0x1234, 1,
					0x10000, 0);
			}
			n = send(rc, junk, sizeof(junk), MSG_NOSIGNAL);
		} else if (kind == RAW_TRUNCATED) {
			size_t len;

			put_hdr(junk, 1, 0, 0, 0, 0, 0);
			put_hdr(junk + 48, 3, 0, 0x1234, 1, 0x10000, 64);
			put_hdr(junk + 96, 4, 256, 0x1234, 2, 0x10000, 0);
			/* A header cut short; a header and half the next;
			 * a WRITE whose payload stops early. */
			len = i == 0 ? 20 : i == 1 ? 48 + 30 : 96 + 48 + 100;
			n = send(rc, junk, len, MSG_NOSIGNAL);
		}
		(void)n;
		if (kind != RAW_IDLE) {
			close(rc);
			nfd--;
		}
	}
	/* The listener still accepts a proper client... */
	rc = rkv_cq_create(f.s.tp, 64, &cq2);
	if (rc) {
		g_test_failures++;
		goto out;
	}
	al.s = &f.s;
	al.cq = cq2;
	pthread_mutex_init(&al.lock, NULL);
	if (pthread_create(&th, NULL, acc_loop_main, &al)) {
		g_test_failures++;
		pthread_mutex_destroy(&al.lock);
		goto out;
	}
	started = 1;
	if (conf_cli_open(&b, &o) == 0)
		rc = conf_cli_connect(&b, f.s.addr, (int)conf_bound_ms());
	else
		rc = -EIO;
	pthread_mutex_lock(&al.lock);
	al.stop = 1;
	pthread_mutex_unlock(&al.lock);
	pthread_join(th, NULL);
	pthread_mutex_destroy(&al.lock);
	EXPECT_EQ(rc, 0);
	printf("#   %d endpoint(s) accepted after the raw connections\n",
	       al.n);
	/* ...and both clients read correct data. */
	if (rc == 0 && read_check(&f.s, cq2, &b, 256)) {
		printf("#   client connected after the raw input failed\n");
		g_test_failures++;
	}
	if (read_check(&f.s, cq2, &f.c, 512)) {
		printf("#   client connected before the raw input failed\n");
		g_test_failures++;
	}
	EXPECT_EQ(rkv_ep_state(f.c.ep), RKV_EP_CONNECTED);
out:
	while (nfd > 0)
		close(fds[--nfd]);
	conf_cli_close(&b);
	if (started) {
		for (int i = 0; i < al.n; i++)
			rkv_ep_destroy(al.eps[i]);
	}
	if (cq2)
		rkv_cq_destroy(cq2);
	conf_fix_destroy(&f);
}

static void t_raw_garbage(void)
{
	raw_conns(RAW_GARBAGE);
}

static void t_raw_truncated(void)
{
	raw_conns(RAW_TRUNCATED);
}

static void t_raw_idle(void)
{
	raw_conns(RAW_IDLE);
}

void conf_tests_input(void)
{
	CONF_TEST(t_bad_addresses);
	CONF_TEST(t_other_scheme);
	CONF_TEST(t_provider_parse);
	CONF_TEST(t_tp_opts_bad);
	CONF_TEST(t_listener_addr);
	CONF_TEST(t_addr_in_use);
	CONF_TEST(t_connect_refused);
	CONF_TEST(t_accept_timeout);
	CONF_TEST(t_mr_reg_args);
	CONF_TEST(t_raw_garbage);
	CONF_TEST(t_raw_truncated);
	CONF_TEST(t_raw_idle);
}
