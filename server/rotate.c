/* SPDX-License-Identifier: MIT */
/*
 * rotate.c - rkey rotation (--rotate-rkeys SECONDS).
 *
 * An rkey is a capability: whoever learns it can READ, WRITE or CAS the
 * region from any connection until the registration goes away.  Rotation
 * bounds how long a leaked rkey works.  Every period the server registers
 * each region again (same memory, same access: rkv_srv_region_reg), makes
 * the new registrations current (HELLO hands them out from then on), sends
 * RKEY_UPDATE to every ready client and keeps the old registrations until
 * every client has acknowledged the update, or at the latest
 * RKV_ROTATE_OVERLAP_MS after it (proto/msg.h), then deregisters them.
 *
 * Why an acknowledged update is enough: the RKEY_ACK travels on the same RC
 * endpoint as the client's one-sided WRs and the client sends it after it
 * switched keys, so every WR carrying an old rkey was executed before the
 * ACK arrived.  A client that does not answer in time (stopped, or not
 * calling into librkv) keeps working if it wakes before the deadline; after
 * it, its WRs with old rkeys fail with a remote access error and nothing
 * changes in memory.  librkv polls its completion queue before it builds
 * WRs when it has been idle, so an idle client picks the update up before
 * it posts anything.  Nothing is ever done twice and values never move:
 * addresses stay the same, only the keys change.
 *
 * Cost: one registration per region per period (on verbs the pages are
 * already pinned; a few milliseconds per GiB on the server's control
 * thread, none on the data path) and one small message each way per
 * client.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "alloc.h"
#include "server_internal.h"

enum { R_INDEX, R_INDEX_RO, R_DATA, R_DATA_RO, R_CTR, R_N };

struct rkv_srv_rotation {
	uint32_t epoch;          /* current; 0 = the registrations of start */
	uint64_t next_ms;        /* next rotation */
	uint64_t update_ms;      /* when epoch's updates went out */
	struct rkv_mr *old[R_N]; /* being retired; all NULL when none */
	int retiring;
	uint64_t rotations, forced, failures;
};

static struct rkv_mr **cur_mr(struct rkv_srv *srv, int i)
{
	switch (i) {
	case R_INDEX: return &srv->index_mr;
	case R_INDEX_RO: return &srv->index_ro_mr;
	case R_DATA: return &srv->data_mr;
	case R_DATA_RO: return &srv->data_ro_mr;
	default: return &srv->ctr_mr;
	}
}

static enum rkv_srv_region region_of(int i)
{
	return i <= R_INDEX_RO ? RKV_SRV_REGION_INDEX
	       : i <= R_DATA_RO ? RKV_SRV_REGION_DATA
				: RKV_SRV_REGION_COUNTERS;
}

uint32_t rkv_srv_rotate_epoch(const struct rkv_srv *srv)
{
	return srv->rot ? srv->rot->epoch : 0;
}

static void retire_old(struct rkv_srv *srv, uint64_t now_ms, unsigned late)
{
	struct rkv_srv_rotation *r = srv->rot;

	for (int i = 0; i < R_N; i++) {
		rkv_mr_dereg(r->old[i]);
		r->old[i] = NULL;
	}
	r->retiring = 0;
	if (late) {
		r->forced++;
		rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
			"rkey epoch %" PRIu32 ": old rkeys revoked after %"
			PRIu64 " ms; %u client(s) had not acknowledged (their "
			"operations with old rkeys now fail)",
			r->epoch, now_ms - r->update_ms, late);
	} else {
		rkv_log(RKV_LOG_DEBUG, RKV_SRV_COMP,
			"rkey epoch %" PRIu32 ": old rkeys revoked, every "
			"client acknowledged in %" PRIu64 " ms",
			r->epoch, now_ms - r->update_ms);
	}
}

/* Send the update where it is due; returns clients still unacknowledged. */
static unsigned push_updates(struct rkv_srv *srv, uint64_t now_ms)
{
	uint32_t epoch = srv->rot->epoch;
	unsigned waiting = 0;

	for (uint32_t i = 0; i < srv->nslots; i++) {
		struct rkv_srv_conn *c = srv->conns[i];

		if (!c || c->state != RKV_CONN_READY || c->rkey_epoch == epoch)
			continue;
		if (c->rkey_sent != epoch &&
		    rkv_srv_ctrl_send_rkeys(c, epoch, now_ms) < 0 &&
		    srv->conns[i] != c)
			continue; /* closed */
		waiting++;
	}
	return waiting;
}

static void rotate(struct rkv_srv *srv, uint64_t now_ms)
{
	struct rkv_srv_rotation *r = srv->rot;
	struct rkv_mr *fresh[R_N] = { 0 };
	int i, rc = 0;

	for (i = 0; i < R_N; i++) {
		struct rkv_mr *cur = *cur_mr(srv, i);

		if (!cur)
			continue;
		rc = rkv_srv_region_reg(srv, region_of(i), cur->access,
					&fresh[i]);
		if (rc)
			break;
	}
	if (rc) {
		r->failures++;
		rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
			"rkey rotation: cannot register the regions again "
			"(%s); the current rkeys stay, retrying in %" PRIu64
			" s",
			strerror(-rc), srv->cfg.rotate_s);
		for (i = 0; i < R_N; i++)
			rkv_mr_dereg(fresh[i]);
		return;
	}
	for (i = 0; i < R_N; i++) {
		r->old[i] = fresh[i] ? *cur_mr(srv, i) : NULL;
		if (fresh[i])
			*cur_mr(srv, i) = fresh[i];
	}
	r->epoch++;
	r->retiring = 1;
	r->update_ms = now_ms;
	r->rotations++;
	rkv_log(RKV_LOG_INFO, RKV_SRV_COMP,
		"rkey epoch %" PRIu32 ": index rkey %" PRIu32 ", data rkey %"
		PRIu32 "; telling %" PRIu32 " client(s)",
		r->epoch, srv->index_mr ? srv->index_mr->rkey : 0,
		srv->data_mr->rkey,
		srv->nclients);
}

struct fence_move {
	uint64_t nslots, used;
	uint32_t epoch;
};

static void fence_move(void *dst, void *src, size_t len, void *arg)
{
	const struct fence_move *fm = arg;

	(void)len;
	rkv_srv_index_fence_move(dst, src, fm->nslots, fm->used, fm->epoch);
}

/* shm: deregister, move the index to fresh memory, register again. */
static int fence_renew(struct rkv_srv *srv, uint32_t epoch)
{
	struct fence_move fm = {
		.nslots = rkv_srv_nslots(&srv->cfg),
		.used = rkv_srv_used_slots(srv),
		.epoch = epoch,
	};
	unsigned access[2] = { 0 };
	int rc = 0;

	for (int i = R_INDEX; i <= R_INDEX_RO; i++) {
		if (!*cur_mr(srv, i))
			continue;
		access[i] = (*cur_mr(srv, i))->access;
		rkv_mr_dereg(*cur_mr(srv, i));
		*cur_mr(srv, i) = NULL;
	}
	if (!access[R_INDEX])
		access[R_INDEX] = RKV_ACCESS_ALL | /* a failed fence before */
				  RKV_ACCESS_WINDOWED;
	rc = rkv_tp_mem_renew(srv->tp, srv->index_mem, srv->index_len,
			      fence_move, &fm);
	for (int i = R_INDEX; i <= R_INDEX_RO && !rc; i++)
		if (access[i])
			rc = rkv_srv_region_reg(srv, region_of(i), access[i],
						cur_mr(srv, i));
	if (rc)
		rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP,
			"fence at map epoch %" PRIu32 ": cannot move or "
			"register the index again (%s): no client can use it "
			"until a fence succeeds",
			epoch, strerror(-rc));
	return rc;
}

int rkv_srv_fence_index(struct rkv_srv *srv, uint32_t epoch, uint64_t now_ms)
{
	struct rkv_srv_rotation *r = srv->rot;
	struct rkv_mr *fresh[2] = { 0 };
	int rc = 0;

	if (!r) {
		r = srv->rot = rkv_calloc(1, sizeof(*r));
		if (!r)
			return -ENOMEM;
		r->next_ms = srv->cfg.rotate_s
				     ? now_ms + srv->cfg.rotate_s * 1000
				     : UINT64_MAX;
	}
	if (rkv_tp_provider(srv->tp) == RKV_TP_SHM) {
		/* what a rotation still retires goes first (only clients of
		 * the old map can hold those keys) */
		if (r->retiring)
			retire_old(srv, now_ms, 0);
		rc = fence_renew(srv, epoch);
		if (rc)
			return rc;
		goto updated;
	}
	for (int i = R_INDEX; i <= R_INDEX_RO && !rc; i++)
		if (*cur_mr(srv, i))
			rc = rkv_srv_region_reg(srv, region_of(i),
						(*cur_mr(srv, i))->access,
						&fresh[i]);
	if (rc) {
		rkv_mr_dereg(fresh[0]);
		rkv_mr_dereg(fresh[1]);
		return rc;
	}
	/* what a rotation still retires goes now too: only clients of the
	 * old map can hold those keys */
	if (r->retiring)
		retire_old(srv, now_ms, 0);
	for (int i = R_INDEX; i <= R_INDEX_RO; i++) {
		if (!fresh[i])
			continue;
		rkv_mr_dereg(*cur_mr(srv, i));
		*cur_mr(srv, i) = fresh[i];
	}
updated:
	/* a rotation epoch with nothing to retire: the tick sends the new
	 * keys to the connections that stay */
	r->epoch++;
	r->retiring = 1;
	r->update_ms = now_ms;
	return 0;
}

void rkv_srv_rotate_tick(struct rkv_srv *srv, uint64_t now_ms)
{
	struct rkv_srv_rotation *r = srv->rot;

	if (!srv->cfg.rotate_s && !r)
		return;
	if (!r) {
		r = srv->rot = rkv_calloc(1, sizeof(*r));
		if (!r)
			return; /* retried next tick */
		r->next_ms = now_ms + srv->cfg.rotate_s * 1000;
		return;
	}
	if (r->retiring) {
		unsigned waiting = push_updates(srv, now_ms);

		if (!waiting)
			retire_old(srv, now_ms, 0);
		else if (now_ms - r->update_ms >= RKV_ROTATE_OVERLAP_MS)
			retire_old(srv, now_ms, waiting);
	}
	if (!r->retiring && srv->cfg.rotate_s && now_ms >= r->next_ms) {
		r->next_ms = now_ms + srv->cfg.rotate_s * 1000;
		rotate(srv, now_ms);
		if (r->retiring && !push_updates(srv, now_ms))
			retire_old(srv, now_ms, 0);
	}
}

void rkv_srv_rotate_ack(struct rkv_srv_conn *c, uint32_t epoch)
{
	c->rkey_epoch = epoch;
}

void rkv_srv_rotate_fini(struct rkv_srv *srv)
{
	if (!srv->rot)
		return;
	for (int i = 0; i < R_N; i++)
		rkv_mr_dereg(srv->rot->old[i]);
	rkv_free(srv->rot);
	srv->rot = NULL;
}
