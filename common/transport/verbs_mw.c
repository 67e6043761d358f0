/* SPDX-License-Identifier: MIT */
/*
 * verbs_mw.c - per-endpoint rkeys: type-2B memory windows (rkv_ep_rkey).
 *
 * On one protection domain an MR's rkey works from every QP of it, so an
 * rkey that leaks (a log, a core dump, a sniffed packet, a peer that was
 * once authorized) works from any connection until the MR goes away
 * (ReDMArk, USENIX Security'21).  A windowed MR (RKV_ACCESS_WINDOWED) is
 * registered with IBV_ACCESS_MW_BIND and no remote access of its own, so
 * its rkey reaches nothing; each endpoint that is to reach it gets a
 * type-2B window over the whole MR, bound to that endpoint's QP with an
 * IBV_WR_BIND_MW on its send queue.  The device honours a type-2 window's
 * rkey only on the QP it is bound to: the same rkey on another connection,
 * or on a raw QP of the same PD, completes with a remote access error.
 *
 * Ordering: the bind goes on the send queue ahead of the SEND that hands
 * the rkey out, and a send queue executes in order (mlx5 fences the WR
 * after a bind itself), so no peer holds the rkey before the window
 * exists.  The bind is unsignaled: success costs no completion; a failed
 * bind puts the QP in error and the caller's next completions say so.
 *
 * Lifetime: a window is on its MR's list and its endpoint's, both under
 * the context's mr_lock, and is deallocated (ibv_dealloc_mw invalidates
 * it) when either goes: rkv_mr_dereg (rkey rotation, a fence) or
 * rkv_ep_destroy.  Rebinding after rotation is a new window over the new
 * MR, asked for when the new rkeys go out.
 *
 * Cost: one WR on the send queue per endpoint and region, once; none on
 * the datapath (the responder checks a window's rkey as it checks an
 * MR's).  Limit: the device's max_mw windows in all, which the context's
 * description line reports (rxe of Linux 6.1: 524,287); a server with
 * R regions holds R per client, twice while a rotation overlaps.
 */
#include "verbs_internal.h"

#include <errno.h>
#include <string.h>

#include "../alloc.h"
#include "../log.h"

static void win_free(struct verbs_tp *vt, struct verbs_win *w)
{
	int rc = ibv_dealloc_mw(w->mw);

	if (rc)
		verbs_log(&vt->base, RKV_LOG_WARN,
			  "ibv_dealloc_mw(rkey 0x%x): %s", w->rkey,
			  strerror(rc));
	rkv_free(w);
}

int verbs_ep_rkey(struct rkv_ep *base, struct rkv_mr *mr, uint32_t *rkey)
{
	struct verbs_ep *ep = container_of(base, struct verbs_ep, base);
	struct verbs_tp *vt = container_of(base->tp, struct verbs_tp, base);
	struct verbs_mr *vm = container_of(mr, struct verbs_mr, base);
	struct verbs_win *w;
	int rc;

	if (!ep->qp || ep->hw_err)
		return -ENOTCONN;
	pthread_mutex_lock(&vt->mr_lock);
	for (w = ep->wins; w; w = w->ep_next) {
		if (w->vm == vm) {
			*rkey = w->rkey;
			pthread_mutex_unlock(&vt->mr_lock);
			return 0;
		}
	}
	w = rkv_calloc(1, sizeof(*w));
	if (!w) {
		rc = -ENOMEM;
		goto out;
	}
	errno = 0;
	w->mw = ibv_alloc_mw(vt->pd, IBV_MW_TYPE_2);
	if (!w->mw) {
		rc = rkv_verbs_neg_errno(ENOMEM);
		verbs_log(&vt->base, RKV_LOG_WARN,
			  "ibv_alloc_mw (type 2) for QP 0x%x: %s (the device "
			  "allows %d windows)", ep->qp_num, strerror(-rc),
			  vt->dev_attr.max_mw);
		rkv_free(w);
		goto out;
	}
	/* a new key byte: a window's rkey is never one it had before */
	w->rkey = ibv_inc_rkey(w->mw->rkey);
	w->vm = vm;
	w->ep = ep;
	rc = verbs_post_bind(ep, w);
	if (rc) {
		win_free(vt, w);
		goto out;
	}
	w->mr_next = vm->wins;
	vm->wins = w;
	w->ep_next = ep->wins;
	ep->wins = w;
	*rkey = w->rkey;
out:
	pthread_mutex_unlock(&vt->mr_lock);
	return rc;
}

/* Take w off the list that is not being walked (by_mr: its endpoint's). */
static void unlink_other(struct verbs_win *w, int by_mr)
{
	struct verbs_win **pp = by_mr ? &w->ep->wins : &w->vm->wins;

	for (; *pp; pp = by_mr ? &(*pp)->ep_next : &(*pp)->mr_next) {
		if (*pp == w) {
			*pp = by_mr ? w->ep_next : w->mr_next;
			return;
		}
	}
}

void verbs_mr_drop_windows(struct verbs_tp *vt, struct verbs_mr *vm)
{
	while (vm->wins) {
		struct verbs_win *w = vm->wins;

		vm->wins = w->mr_next;
		unlink_other(w, 1);
		win_free(vt, w);
	}
}

void verbs_ep_drop_windows(struct verbs_tp *vt, struct verbs_ep *ep)
{
	while (ep->wins) {
		struct verbs_win *w = ep->wins;

		ep->wins = w->ep_next;
		unlink_other(w, 0);
		win_free(vt, w);
	}
}
