/* SPDX-License-Identifier: MIT */
/*
 * fixture.c - the conformance fixture: a server half and a client half of
 * one provider, connected through rkv_listen / rkv_accept / rkv_connect, and
 * the bounded polling helpers every test uses.  Nothing here waits without
 * a deadline.
 */
#include "conf.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "rtime.h"

void conf_fix_opts_init(struct conf_fix_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->region_len = 8u << 20;
	o->local_len = 8u << 20;
}

static int tp_open(const struct conf_fix_opts *o, unsigned timeout_ms,
		   unsigned max_send_wr, struct rkv_tp **out)
{
	struct rkv_tp_opts to;

	(void)o;
	rkv_tp_opts_init(&to);
	to.provider = g_conf_provider;
	if (timeout_ms)
		to.timeout_ms = timeout_ms;
	if (max_send_wr)
		to.max_send_wr = max_send_wr;
	return rkv_tp_create(&to, out);
}

static int stash_init(struct conf_stash *st)
{
	st->n = 0;
	st->wc = rkv_calloc(CONF_STASH, sizeof(*st->wc));
	return st->wc ? 0 : -ENOMEM;
}

void conf_stash_clear(struct conf_stash *st)
{
	st->n = 0;
}

/* Allocate provider memory and register it; *mem and *mr set on success. */
static int region(struct rkv_tp *tp, size_t len, unsigned access,
		  uint8_t **mem, struct rkv_mr **mr, const char *what)
{
	void *p = NULL;
	int rc;

	rc = rkv_tp_mem_alloc(tp, len, &p);
	if (rc) {
		printf("#   mem_alloc(%s, %zu): %s\n", what, len, strerror(-rc));
		return rc;
	}
	rc = rkv_mr_reg(tp, p, len, access, mr);
	if (rc) {
		printf("#   mr_reg(%s, %zu): %s\n", what, len, strerror(-rc));
		rkv_tp_mem_free(tp, p, len);
		return rc;
	}
	*mem = p;
	return 0;
}

int conf_srv_open(struct conf_srv *s, const struct conf_fix_opts *o)
{
	struct conf_fix_opts def;
	char addr[320];
	void *p = NULL;
	int rc;

	if (!o) {
		conf_fix_opts_init(&def);
		o = &def;
	}
	memset(s, 0, sizeof(*s));
	rc = stash_init(&s->st);
	if (rc)
		goto fail;
	rc = tp_open(o, o->srv_timeout_ms, 0, &s->tp);
	if (rc) {
		printf("#   server rkv_tp_create(%s): %s\n",
		       rkv_tp_provider_str(g_conf_provider), strerror(-rc));
		goto fail;
	}
	s->reg_len = o->region_len;
	s->mem_len = o->region_len + 2 * CONF_GUARD;
	rc = rkv_tp_mem_alloc(s->tp, s->mem_len, &p);
	if (rc) {
		printf("#   mem_alloc(region): %s\n", strerror(-rc));
		goto fail;
	}
	s->mem = p;
	s->reg = s->mem + CONF_GUARD;
	rc = rkv_mr_reg(s->tp, s->reg, s->reg_len, RKV_ACCESS_ALL, &s->mr);
	if (rc) {
		printf("#   mr_reg(region): %s\n", strerror(-rc));
		goto fail;
	}
	rc = region(s->tp, CONF_SIDE_LEN, RKV_ACCESS_REMOTE_READ, &s->ro,
		    &s->ro_mr, "read-only");
	if (rc)
		goto fail;
	rc = region(s->tp, CONF_SIDE_LEN,
		    RKV_ACCESS_LOCAL_WRITE | RKV_ACCESS_REMOTE_WRITE, &s->wo,
		    &s->wo_mr, "write-only");
	if (rc)
		goto fail;
	rc = region(s->tp, CONF_SIDE_LEN, RKV_ACCESS_LOCAL_WRITE, &s->loc,
		    &s->loc_mr, "server local");
	if (rc)
		goto fail;
	rc = rkv_cq_create(s->tp, CONF_CQ_DEPTH, &s->cq);
	if (rc) {
		printf("#   server cq_create: %s\n", strerror(-rc));
		goto fail;
	}
	conf_listen_addr(addr, sizeof(addr));
	rc = rkv_listen(s->tp, addr, &s->lis);
	if (rc) {
		printf("#   rkv_listen(%s): %s\n", addr, strerror(-rc));
		goto fail;
	}
	snprintf(s->addr, sizeof(s->addr), "%s", rkv_listener_addr(s->lis));
	return 0;
fail:
	conf_srv_close(s);
	return rc;
}

int conf_srv_accept(struct conf_srv *s, int timeout_ms)
{
	int rc = rkv_accept(s->lis, s->cq, timeout_ms, &s->ep);

	if (rc)
		printf("#   rkv_accept(%s): %s\n", s->addr, strerror(-rc));
	return rc;
}

static void unreg(struct rkv_tp *tp, struct rkv_mr **mr, uint8_t **mem,
		  size_t len)
{
	if (*mr) {
		int rc = rkv_mr_dereg(*mr);

		if (rc)
			printf("#   rkv_mr_dereg: %s\n", strerror(-rc));
	}
	if (*mem)
		rkv_tp_mem_free(tp, *mem, len);
	*mr = NULL;
	*mem = NULL;
}

void conf_srv_close(struct conf_srv *s)
{
	if (s->ep)
		rkv_ep_destroy(s->ep);
	if (s->lis)
		rkv_listener_destroy(s->lis);
	if (s->cq)
		rkv_cq_destroy(s->cq);
	if (s->tp) {
		unreg(s->tp, &s->loc_mr, &s->loc, CONF_SIDE_LEN);
		unreg(s->tp, &s->wo_mr, &s->wo, CONF_SIDE_LEN);
		unreg(s->tp, &s->ro_mr, &s->ro, CONF_SIDE_LEN);
		unreg(s->tp, &s->mr, &s->mem, s->mem_len);
		rkv_tp_destroy(s->tp);
	}
	rkv_free(s->st.wc);
	memset(s, 0, sizeof(*s));
}

int conf_cli_open(struct conf_cli *c, const struct conf_fix_opts *o)
{
	struct conf_fix_opts def;
	int rc;

	if (!o) {
		conf_fix_opts_init(&def);
		o = &def;
	}
	memset(c, 0, sizeof(*c));
	rc = stash_init(&c->st);
	if (rc)
		goto fail;
	rc = tp_open(o, o->cli_timeout_ms, o->cli_max_send_wr, &c->tp);
	if (rc) {
		printf("#   client rkv_tp_create(%s): %s\n",
		       rkv_tp_provider_str(g_conf_provider), strerror(-rc));
		goto fail;
	}
	c->loc_len = o->local_len;
	rc = region(c->tp, c->loc_len, RKV_ACCESS_LOCAL_WRITE, &c->loc,
		    &c->loc_mr, "client local");
	if (rc)
		goto fail;
	rc = rkv_cq_create(c->tp, CONF_CQ_DEPTH, &c->cq);
	if (rc) {
		printf("#   client cq_create: %s\n", strerror(-rc));
		goto fail;
	}
	return 0;
fail:
	conf_cli_close(c);
	return rc;
}

int conf_cli_connect(struct conf_cli *c, const char *addr, int timeout_ms)
{
	int rc = rkv_connect(c->tp, addr, c->cq, timeout_ms, &c->ep);

	if (rc)
		printf("#   rkv_connect(%s): %s\n", addr, strerror(-rc));
	return rc;
}

void conf_cli_close(struct conf_cli *c)
{
	if (c->ep)
		rkv_ep_destroy(c->ep);
	if (c->cq)
		rkv_cq_destroy(c->cq);
	if (c->tp) {
		unreg(c->tp, &c->loc_mr, &c->loc, c->loc_len);
		rkv_tp_destroy(c->tp);
	}
	rkv_free(c->st.wc);
	memset(c, 0, sizeof(*c));
}

struct accept_arg {
	struct conf_srv *s;
	int timeout_ms;
	int rc;
};

static void *accept_main(void *p)
{
	struct accept_arg *a = p;

	a->rc = conf_srv_accept(a->s, a->timeout_ms);
	return NULL;
}

int conf_fix_create(struct conf_fix *f, const struct conf_fix_opts *o)
{
	struct accept_arg a;
	pthread_t th;
	int rc;

	memset(f, 0, sizeof(*f));
	rc = conf_srv_open(&f->s, o);
	if (rc)
		return rc;
	rc = conf_cli_open(&f->c, o);
	if (rc)
		goto fail;
	a.s = &f->s;
	a.timeout_ms = (int)conf_bound_ms();
	a.rc = -EINVAL;
	rc = -pthread_create(&th, NULL, accept_main, &a);
	if (rc) {
		printf("#   pthread_create: %s\n", strerror(-rc));
		goto fail;
	}
	rc = conf_cli_connect(&f->c, f->s.addr, (int)conf_bound_ms());
	pthread_join(th, NULL);
	if (rc == 0)
		rc = a.rc;
	if (rc)
		goto fail;
	return 0;
fail:
	conf_fix_destroy(f);
	return rc;
}

void conf_fix_destroy(struct conf_fix *f)
{
	/* Endpoints first (the client's, then the server's), then the rest. */
	if (f->c.ep) {
		rkv_ep_destroy(f->c.ep);
		f->c.ep = NULL;
	}
	conf_srv_close(&f->s);
	conf_cli_close(&f->c);
}

static int poll_into(struct rkv_cq *cq, struct conf_stash *st)
{
	int room = CONF_STASH - st->n, rc;

	if (!cq || room <= 0)
		return 0;
	if (room > 64)
		room = 64;
	rc = rkv_cq_poll(cq, st->wc + st->n, room);
	if (rc > 0)
		st->n += rc;
	return rc;
}

int conf_progress(struct conf_srv *s, struct conf_cli *c)
{
	int a = 0, b = 0;

	if (c) {
		a = poll_into(c->cq, &c->st);
		if (a < 0) {
			printf("#   client rkv_cq_poll: %s\n", strerror(-a));
			return a;
		}
	}
	if (s) {
		b = poll_into(s->cq, &s->st);
		if (b < 0) {
			printf("#   server rkv_cq_poll: %s\n", strerror(-b));
			return b;
		}
	}
	return a + b;
}

int conf_wait(struct conf_srv *s, struct conf_cli *c, int ncli, int nsrv,
	      unsigned timeout_ms)
{
	uint64_t deadline = rkv_now_ms() + timeout_ms;
	unsigned idle = 0;

	for (;;) {
		int rc;

		if ((!c || c->st.n >= ncli) && (!s || s->st.n >= nsrv))
			return 0;
		rc = conf_progress(s, c);
		if (rc < 0)
			return rc;
		if (rc > 0) {
			idle = 0;
			continue;
		}
		if (rkv_now_ms() > deadline)
			return -ETIMEDOUT;
		/* Two cores shared with provider threads: give them time. */
		if (++idle < 64)
			sched_yield();
		else
			conf_sleep_ms(0);
	}
}

void conf_quiesce(struct conf_srv *s, struct conf_cli *c, unsigned ms)
{
	uint64_t deadline = rkv_now_ms() + ms;

	while (rkv_now_ms() < deadline) {
		if (conf_progress(s, c) <= 0)
			conf_sleep_ms(1);
	}
}

uint64_t conf_raddr(const struct conf_srv *s, size_t off)
{
	return (uint64_t)(uintptr_t)(s->reg + off);
}

void conf_wr(struct rkv_wr *w, enum rkv_wr_opcode op, uint64_t wr_id,
	     unsigned flags, void *local, uint32_t len, uint32_t lkey,
	     uint64_t raddr, uint32_t rkey)
{
	memset(w, 0, sizeof(*w));
	w->opcode = op;
	w->wr_id = wr_id;
	w->flags = flags;
	w->local = local;
	w->length = len;
	w->lkey = lkey;
	w->remote_addr = raddr;
	w->rkey = rkey;
}

int conf_post_wait(struct conf_fix *f, struct rkv_wr *chain, int nexpect)
{
	struct rkv_wr *bad = NULL;
	int rc;

	conf_stash_clear(&f->c.st);
	rc = rkv_post(f->c.ep, chain, &bad);
	if (rc) {
		printf("#   rkv_post: %s\n", strerror(-rc));
		return rc;
	}
	rc = conf_wait(&f->s, &f->c, nexpect, 0, conf_bound_ms());
	if (rc == -ETIMEDOUT)
		printf("#   timed out: %d of %d completions after %u ms\n",
		       f->c.st.n, nexpect, conf_bound_ms());
	return rc;
}

int conf_op(struct conf_fix *f, enum rkv_wr_opcode op, size_t loff,
	    uint32_t len, uint64_t raddr, uint32_t rkey, uint64_t cmp,
	    uint64_t swap)
{
	struct rkv_wr w;
	int rc;

	conf_wr(&w, op, 0x1234, RKV_WR_SIGNALED, f->c.loc + loff, len,
		f->c.loc_mr->lkey, raddr, rkey);
	w.compare_add = cmp;
	w.swap = swap;
	rc = conf_post_wait(f, &w, 1);
	if (rc)
		return rc;
	if (f->c.st.wc[0].wr_id != 0x1234) {
		printf("#   completion wr_id 0x%" PRIx64 ", expected 0x1234\n",
		       f->c.st.wc[0].wr_id);
		return -EPROTO;
	}
	if (f->c.st.wc[0].status == RKV_WC_SUCCESS &&
	    f->c.st.wc[0].opcode != op) {
		printf("#   completion opcode %s, expected %s\n",
		       rkv_wr_opcode_str(f->c.st.wc[0].opcode),
		       rkv_wr_opcode_str(op));
		return -EPROTO;
	}
	return (int)f->c.st.wc[0].status;
}

#if CONF_TSAN
/* ThreadSanitizer's dynamic annotations (tsan_interface_ann.cpp). */
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);

void conf_mem_begin(void)
{
	AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
	AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
}

void conf_mem_end(void)
{
	AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
	AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
}
#else
void conf_mem_begin(void)
{
}

void conf_mem_end(void)
{
}
#endif

void conf_memset(void *p, int c, size_t n)
{
	conf_mem_begin();
	memset(p, c, n);
	conf_mem_end();
}

void conf_memcpy(void *dst, const void *src, size_t n)
{
	conf_mem_begin();
	memcpy(dst, src, n);
	conf_mem_end();
}

uint64_t conf_rd64(const void *p)
{
	uint64_t v;

	conf_mem_begin();
	memcpy(&v, p, 8);
	conf_mem_end();
	return v;
}

void conf_wr64(void *p, uint64_t v)
{
	conf_mem_begin();
	memcpy(p, &v, 8);
	conf_mem_end();
}

uint8_t conf_rd8(const void *p)
{
	uint8_t v;

	conf_mem_begin();
	v = *(const uint8_t *)p;
	conf_mem_end();
	return v;
}

void conf_wr8(void *p, uint8_t v)
{
	conf_mem_begin();
	*(uint8_t *)p = v;
	conf_mem_end();
}

void conf_fill(void *p, size_t n, uint32_t seed)
{
	uint64_t x = 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed << 17 | seed);
	uint8_t *b = p;
	size_t i = 0;

	if (!x)
		x = 1;
	conf_mem_begin();
	while (i < n) {
		/* xorshift64: cheap and never repeats within a test's size. */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		for (int k = 0; k < 8 && i < n; k++, i++)
			b[i] = (uint8_t)(x >> (8 * k));
	}
	conf_mem_end();
}

long conf_diff(const void *a, const void *b, size_t n)
{
	const uint8_t *x = a, *y = b;
	long d = -1;

	conf_mem_begin();
	if (memcmp(a, b, n) != 0) {
		for (size_t i = 0; i < n; i++) {
			if (x[i] != y[i]) {
				d = (long)i;
				break;
			}
		}
	}
	conf_mem_end();
	return d;
}

long conf_rss_kib(void)
{
	long size = 0, rss = 0;
	FILE *fp = fopen("/proc/self/statm", "r");

	if (!fp)
		return -1;
	if (fscanf(fp, "%ld %ld", &size, &rss) != 2)
		rss = -1;
	fclose(fp);
	return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

void conf_sleep_ms(unsigned ms)
{
	struct timespec ts = {
		.tv_sec = ms / 1000,
		.tv_nsec = ms ? (long)(ms % 1000) * 1000000L : 50000L,
	};

	nanosleep(&ts, NULL);
}
