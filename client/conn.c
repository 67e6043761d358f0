/* SPDX-License-Identifier: MIT */
/*
 * conn.c - connecting to a server: HELLO, authentication, its name and
 * geometry (conn.h).
 *
 * Authentication: a server with a secret answers HELLO with a challenge;
 * the client answers HMAC-SHA256(secret, nonce || name || context),
 * computed by rkv_auth_mac (proto/auth.h) as the server does, and only
 * then gets the rkeys.  The secret never goes on the wire.
 */
#include "conn.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "alloc.h"
#include "auth.h"
#include "rtime.h"
#include "secret.h"

/* peer_connect: transport connects reset in the handshake tried again */
#define CONNECT_TRIES 3
#define CONNECT_RESET_WAIT_US 5000u

int conn_load_secret(const void *secret, size_t secret_len,
		     const char *path, unsigned char **out, size_t *out_len,
		     char *why, size_t why_len)
{
	unsigned char buf[RKV_SECRET_MAX];
	size_t n = 0;
	int rc;

	*out = NULL;
	*out_len = 0;
	if (secret && path)
		return -EINVAL;
	if (secret) {
		if (!secret_len || secret_len > RKV_SECRET_MAX)
			return -EINVAL;
		*out = rkv_malloc(secret_len);
		if (!*out)
			return -ENOMEM;
		memcpy(*out, secret, secret_len);
		*out_len = secret_len;
		return 0;
	}
	if (!path)
		return 0;
	rc = rkv_secret_read(path, buf, &n, why, why_len);
	if (rc)
		return rc;
	*out = rkv_malloc(n);
	if (*out) {
		memcpy(*out, buf, n);
		*out_len = n;
	}
	OPENSSL_cleanse(buf, sizeof(buf));
	return *out ? 0 : -ENOMEM;
}

/* ------------------------------------------------------------- connect */

void peer_init(struct peer *p, struct engine *e, unsigned idx,
	       const struct rkv_map_server *s, int check_name,
	       char *ctrl_mem)
{
	memset(p, 0, sizeof(*p));
	p->idx = idx;
	snprintf(p->addr, sizeof(p->addr), "%s", s->addr);
	snprintf(p->name, sizeof(p->name), "%s", s->name);
	if (s->named)
		snprintf(p->label, sizeof(p->label), "%s (%s)", s->name,
			 s->addr);
	else
		snprintf(p->label, sizeof(p->label), "%s", s->addr);
	p->check_name = check_name;
	p->link.eng = e;
	p->link.name = p->label;
	ctrl_init(&p->ctrl, &p->link, ctrl_mem);
}

void peer_reset(struct peer *p)
{
	char *mem = p->ctrl.recv[0].mem;

	rkv_ep_destroy(p->link.ep);
	p->link.ep = NULL;
	p->link.dead = 0;
	p->link.fenced = 0;
	p->link.pend_head = p->link.pend_tail = NULL;
	p->link.pend_n = 0;
	ctrl_init(&p->ctrl, &p->link, mem);
	memset(&p->g, 0, sizeof(p->g));
	p->grow_busy = 0; /* its reply will not come */
}

int peer_err_transient(int err)
{
	switch (err) {
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -ECONNABORTED:
	case -ESTALE: /* fenced: the cluster has a newer map */
	case -ETIMEDOUT:
	case -EHOSTUNREACH:
	case -EHOSTDOWN:
	case -ENETUNREACH:
	case -ENETDOWN:
	case -ENOTCONN:
	case -EPIPE:
	case -ESHUTDOWN:
	case -EUSERS:   /* its --max-clients: may pass */
	case -EADDRNOTAVAIL:
		return 1;
	default:
		return 0;
	}
}

/* The server answered HELLO with a challenge: prove the secret.  On
 * success *reply holds the server's answer to the response. */
static int authenticate(struct peer *p, const struct conn_opts *o,
			const struct rkv_msg *hello, struct rkv_msg *reply)
{
	const struct rkv_msg_auth_challenge *ch = &reply->u.auth_challenge;
	struct engine *e = p->link.eng;
	struct rkv_msg m;
	int rc;

	if (!o->secret) {
		eng_log(e, RKV_LOG_ERROR,
			"server %s requires authentication and no secret is "
			"configured (the client's secret_file, or "
			"$RKV_SECRET_FILE for the rkv tools)",
			p->label);
		return -EACCES;
	}
	if (ch->alg != RKV_AUTH_HMAC_SHA256) {
		eng_log(e, RKV_LOG_ERROR,
			"server %s: unknown authentication algorithm %u",
			p->label, ch->alg);
		return -EPROTO;
	}
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_AUTH_RESPONSE;
	/* the transcript the server checks: proto/auth.h */
	rc = rkv_auth_mac(o->secret, o->secret_len, ch->nonce,
			  hello->u.hello.name, m.u.auth_response.mac);
	if (rc)
		return rc;
	rc = ctrl_call(&p->ctrl, &m, reply, o->timeout_ms);
	OPENSSL_cleanse(&m.u.auth_response, sizeof(m.u.auth_response));
	if (rc == -ECONNRESET && reply->hdr.type != RKV_MSG_ERROR)
		rc = -EACCES; /* closed on us without a word */
	if (rc) {
		eng_log(e, RKV_LOG_ERROR,
			"server %s: authentication failed (%s)", p->label,
			strerror(-rc));
		return rc;
	}
	if (reply->hdr.type == RKV_MSG_ERROR &&
	    reply->u.error.status == -EACCES) {
		eng_log(e, RKV_LOG_ERROR,
			"server %s: authentication failed (wrong secret?)",
			p->label);
		return -EACCES;
	}
	return 0;
}

/* HELLO_REPLY: check and keep the geometry. */
static int take_geometry(struct peer *p, const struct rkv_msg_hello_reply *h)
{
	if (h->status)
		return h->status < 0 ? h->status : -EPROTO;
	if (!h->nbuckets || (h->nbuckets & (h->nbuckets - 1)) ||
	    !rkv_bucket_slots_ok(h->bucket_slots) ||
	    !h->data_len || h->data_len > RKV_MAX_DATA_REGION ||
	    !h->chunk_size || h->grace_ms <= h->lease_ms ||
	    h->big_grace_ms < h->grace_ms || !h->levels_max ||
	    h->levels_max > RKV_INDEX_LEVELS_MAX || !h->levels ||
	    h->levels > h->levels_max ||
	    rkv_index_nbuckets(h->nbuckets, h->levels_max) >
		    (1ull << 40) / h->bucket_slots)
		return -EPROTO;
	p->g = (struct geom){
		.client_id = h->client_id,
		.index_addr = h->index_addr, .nbuckets = h->nbuckets,
		.bucket_slots = h->bucket_slots,
		.levels_max = h->levels_max, .levels = h->levels,
		.data_addr = h->data_addr, .data_len = h->data_len,
		.chunk_size = h->chunk_size, .lease_ms = h->lease_ms,
		.grace_ms = h->grace_ms, .big_grace_ms = h->big_grace_ms,
		.max_value = h->max_value,
		.counters_addr = h->counters_addr,
		.counters_count = h->counters_count,
		.read_only = !!(h->flags & RKV_HELLO_REPLY_READ_ONLY),
		.leased = !!(h->flags & RKV_HELLO_REPLY_LEASED) };
	p->lease_until = 0;
	p->lease_asked_ms = 0;
	p->ctrl.keys.index = h->index_rkey;
	p->ctrl.keys.data = h->data_rkey;
	p->ctrl.keys.counters = h->counters_rkey;
	p->ctrl.keys.has_counters = h->counters_count != 0;
	return 0;
}

int peer_connect(struct peer *p, const struct conn_opts *o)
{
	struct engine *e = p->link.eng;
	struct rkv_msg m, reply;
	int rc;

	uint64_t t0 = rkv_now_ms();

	/* A reset before the transport's handshake answered leaves no state
	 * behind: a server under a flood of half-open connections from our
	 * address may close ours (sw_hs.c) or refuse it at EMFILE.  Try
	 * again while half of the timeout is left, at most CONNECT_TRIES. */
	for (unsigned t = 1;; t++) {
		rc = rkv_connect(e->tp, p->addr, e->cq, (int)o->timeout_ms,
				 &p->link.ep);
		if (rc != -ECONNRESET || t == CONNECT_TRIES ||
		    rkv_now_ms() - t0 >= o->timeout_ms / 2)
			break;
		eng_log(e, RKV_LOG_INFO, "connect %s: reset in the handshake; "
			"trying again", p->label);
		usleep(CONNECT_RESET_WAIT_US * t);
	}
	if (rc == -ENOENT)
		rc = -ECONNREFUSED; /* shm: no socket file; -ENOENT would
				     * read as "no such key" on its ops */
	if (rc) {
		eng_log(e, RKV_LOG_ERROR, "connect %s: %s", p->label,
			strerror(-rc));
		return rc;
	}
	rc = ctrl_start(&p->ctrl);
	if (rc)
		return rc;
	memset(&m, 0, sizeof(m));
	m.hdr.type = RKV_MSG_HELLO;
	m.u.hello.flags = o->read_only ? RKV_HELLO_READ_ONLY : 0;
	m.u.hello.map_epoch = o->map_epoch;
	snprintf(m.u.hello.name, sizeof(m.u.hello.name), "%s",
		 o->name ? o->name : "rkv");
	rc = ctrl_call(&p->ctrl, &m, &reply, o->timeout_ms);
	if (rc)
		return rc;
	if (reply.hdr.type == RKV_MSG_AUTH_CHALLENGE) {
		rc = authenticate(p, o, &m, &reply);
		if (rc)
			return rc;
	} else if (o->secret) {
		eng_log(e, RKV_LOG_INFO,
			"server %s does not ask for authentication", p->label);
	}
	if (reply.hdr.type == RKV_MSG_ERROR) {
		eng_log(e, RKV_LOG_ERROR, "server %s refused: %s", p->label,
			reply.u.error.text);
		return reply.u.error.status < 0 ? reply.u.error.status
						: -ECONNREFUSED;
	}
	if (reply.hdr.type != RKV_MSG_HELLO_REPLY)
		return -EPROTO;
	if (reply.u.hello_reply.status == -ESTALE) {
		p->fenced_at = reply.u.hello_reply.fence_epoch;
		eng_log(e, RKV_LOG_INFO, "server %s serves clients of map "
			"epoch %u and later (this one: %u)", p->label,
			reply.u.hello_reply.fence_epoch, o->map_epoch);
		return -ESTALE;
	}
	p->hello_epoch = o->map_epoch;
	if (p->check_name &&
	    strcmp(reply.u.hello_reply.server_name, p->name) != 0) {
		eng_log(e, RKV_LOG_ERROR,
			"server at %s calls itself '%s', not '%s' as the cluster "
			"map says (list it as \"%s %s\", or start it with "
			"--name %s)",
			p->addr, reply.u.hello_reply.server_name, p->name,
			reply.u.hello_reply.server_name, p->addr, p->name);
		return -ENXIO;
	}
	return take_geometry(p, &reply.u.hello_reply);
}
