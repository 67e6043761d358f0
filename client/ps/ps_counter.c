/* SPDX-License-Identifier: MIT */
/*
 * ps_counter.c - counters and barriers (rkv_ps.h): named 8-byte words in
 * the servers' counter regions, changed by one-sided FETCH_ADD and read by
 * READ, through the words of the extension point (rkv_ext.h).
 *
 * A counter id is (server index << 32 | word index).  The name routes to
 * a server by the key hash; the server gives the word.  A barrier is a
 * counter every participant adds 1 to, then reads until its generation's
 * count is reached.
 */
#include "rkv_ext.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "rkv_ps.h"
#include "rtime.h"

_Static_assert(RKV_COUNTER_NAME_LEN == RKV_EXT_WORD_NAME,
	       "public counter name limit is the word names'");

struct rkv_ps_barrier {
	struct rkv_client *c;
	uint64_t id;
	unsigned n;
};

static void nap_us(long us)
{
	struct timespec ts = { 0, us * 1000 };

	nanosleep(&ts, NULL);
}

/* A counter id is (server index << 32 | word index). */
static uint64_t make_id(unsigned server, uint32_t word)
{
	return (uint64_t)server << 32 | word;
}

int rkv_counter_open(struct rkv_client *c, const char *name, uint64_t *id)
{
	unsigned server;
	uint32_t word;
	int rc;

	if (!c || !name || !id)
		return -EINVAL;
	rc = rkv_ext_word_open(c, name, &server, &word);
	if (rc == 0)
		*id = make_id(server, word);
	return rc;
}

int rkv_counter_add(struct rkv_client *c, uint64_t id, uint64_t delta,
		    uint64_t *old)
{
	return rkv_ext_word_add(c, (unsigned)(id >> 32), (uint32_t)id, delta,
				old);
}

int rkv_counter_read(struct rkv_client *c, uint64_t id, uint64_t *val)
{
	return rkv_ext_word_read(c, (unsigned)(id >> 32), (uint32_t)id, val);
}

int rkv_ps_barrier_create(struct rkv_client *c, const char *name,
			  unsigned nworkers, struct rkv_ps_barrier **out)
{
	struct rkv_ps_barrier *b;
	uint64_t id;
	int rc;

	if (!c || !name || !out || nworkers == 0)
		return -EINVAL;
	*out = NULL;
	rc = rkv_counter_open(c, name, &id);
	if (rc)
		return rc;
	b = rkv_calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->c = c;
	b->id = id;
	b->n = nworkers;
	*out = b;
	return 0;
}

int rkv_ps_barrier_wait(struct rkv_ps_barrier *b, unsigned timeout_ms)
{
	uint64_t old, v, target, end;
	long nap = 50;
	int rc;

	if (!b)
		return -EINVAL;
	end = rkv_now_ms() + timeout_ms;
	rc = rkv_counter_add(b->c, b->id, 1, &old);
	if (rc)
		return rc;
	/* every arrival of one generation sees old in [g*n, (g+1)*n): a
	 * participant cannot arrive for generation g+1 before g ended */
	target = (old / b->n + 1) * b->n;
	for (;;) {
		if (old + 1 >= target)
			return 0; /* the last to arrive */
		rc = rkv_counter_read(b->c, b->id, &v);
		if (rc)
			return rc;
		if (v >= target)
			return 0;
		if (rkv_now_ms() > end)
			return -ETIMEDOUT;
		nap_us(nap);
		if (nap < 1000)
			nap *= 2;
	}
}

void rkv_ps_barrier_destroy(struct rkv_ps_barrier *b)
{
	rkv_free(b);
}
