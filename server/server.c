/* SPDX-License-Identifier: MIT */
/*
 * server.c - the server object: the transport context, the two regions
 * (index and data, memory from rkv_tp_mem_alloc so that every provider,
 * shm included, can expose it), their registrations (once, at start), the
 * space manager, the CQ and the listener; and one pass of the control loop.
 *
 * Besides the full-access registrations, each region is registered a second
 * time for remote read only: clients that say RKV_HELLO_READ_ONLY get those
 * rkeys, so the NIC (or the software provider) refuses their writes.
 *
 * With --secret-file, a client gets no rkey or address before it proved
 * knowledge of the secret (ctrl.c, auth.c); without it, any client that
 * connects is served, and the server says so at start.
 *
 * A third, small region holds the counter words (--counters): remote
 * atomic access for every read-write client, named by COUNTER_OPEN.
 *
 * The data region lives where --data-memory says (datamem.c: host memory
 * or a CUDA device; the index and counters stay in host memory).  The
 * backend is opened first, before the transport: a GPU that cannot be
 * used refuses the start before anything was built.  A GPU region that
 * cannot be registered (verbs: neither dma-buf nor peer memory) is an
 * error too, never a silent copy through host memory.
 *
 * rkv_srv_create is a goto ladder; rkv_srv_destroy mirrors it and accepts a
 * partly built server.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "datamem.h"
#include "rtime.h"
#include "server_internal.h"

#define DATA_ACCESS                                                            \
	(RKV_ACCESS_LOCAL_WRITE | RKV_ACCESS_REMOTE_READ |                     \
	 RKV_ACCESS_REMOTE_WRITE | RKV_ACCESS_REMOTE_ATOMIC)

static uint32_t random_id(void)
{
	uint32_t id = 0;

	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != sizeof(id))
		id = (uint32_t)(rkv_now_ns() ^ ((uint64_t)getpid() << 16));
	return id ? id : 1;
}

/* Register memory of region what: the data region through its backend. */
static int region_mr(struct rkv_srv *srv, struct rkv_srv_datamem *dm,
		     void *mem, size_t len, unsigned access,
		     struct rkv_mr **out)
{
	if (dm)
		return rkv_srv_datamem_reg(dm, srv->tp, mem, len, access, out);
	return rkv_mr_reg(srv->tp, mem, len, access, out);
}

static int reg_region(struct rkv_srv *srv, const char *what,
		      struct rkv_srv_datamem *dm, size_t len, unsigned access,
		      void **mem, struct rkv_mr **mr, struct rkv_mr **ro_mr)
{
	const char *where = dm ? rkv_srv_datamem_describe(dm) : "host memory";
	int gpu = dm ? rkv_srv_datamem_gpu(dm) : -1;
	int rc;

	if (dm)
		rc = rkv_srv_datamem_alloc(dm, srv->tp, len, mem);
	else
		rc = rkv_tp_mem_alloc(srv->tp, len, mem);
	if (rc) {
		*mem = NULL;
		rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP,
			"%s region: cannot allocate %zu bytes of %s: %s%s%s",
			what, len, where, strerror(-rc), gpu >= 0 ? ": " : "",
			gpu >= 0 ? rkv_tp_gpu_why(srv->tp) : "");
		return rc;
	}
	rc = region_mr(srv, dm, *mem, len, access, mr);
	if (rc) {
		rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP,
			"%s region: cannot register %zu bytes of %s: %s%s%s",
			what, len, where, strerror(-rc), gpu >= 0 ? ": " : "",
			gpu >= 0 ? rkv_tp_gpu_why(srv->tp) : "");
		return rc;
	}
	rc = region_mr(srv, dm, *mem, len, RKV_ACCESS_REMOTE_READ, ro_mr);
	if (rc) {
		/* not fatal: read-only clients are refused instead */
		rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
			"%s region: no read-only registration (%s); "
			"read-only clients will be refused",
			what, strerror(-rc));
		*ro_mr = NULL;
	}
	return 0;
}

int rkv_srv_region_reg(struct rkv_srv *srv, enum rkv_srv_region which,
		       unsigned access, struct rkv_mr **out)
{
	switch (which) {
	case RKV_SRV_REGION_INDEX:
		return rkv_mr_reg(srv->tp, srv->index_mem, srv->index_len,
				  access, out);
	case RKV_SRV_REGION_DATA:
		/* the same way as at start: GPU memory stays GPU-registered */
		return region_mr(srv, srv->datamem, srv->data_mem,
				 srv->data_len, access, out);
	case RKV_SRV_REGION_COUNTERS:
		if (!srv->ctr_mem)
			return -ENOENT;
		return rkv_mr_reg(srv->tp, srv->ctr_mem, srv->ctr_len, access,
				  out);
	}
	return -ENOENT;
}

int rkv_srv_create(const struct rkv_srv_config *cfg, struct rkv_srv **out)
{
	struct rkv_tp_opts opts;
	struct rkv_tp_addr a;
	struct rkv_srv *srv;
	char why[256];
	unsigned depth;
	int rc;

	*out = NULL;
	rc = rkv_tp_addr_parse(cfg->listen, &a);
	if (rc) {
		rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP, "bad address '%s'",
			cfg->listen);
		return rc;
	}
	srv = rkv_calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->cfg = *cfg;
	srv->server_id = random_id();
	srv->next_client_id = 1;
	srv->start_ms = rkv_now_ms();

	/* First: a GPU that cannot be used stops us before anything runs. */
	rc = rkv_srv_datamem_open(cfg->data_gpu, why, sizeof(why),
				  &srv->datamem);
	if (rc) {
		rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP, "--data-memory %s: %s",
			cfg->data_memory[0] ? cfg->data_memory : "host", why);
		goto err;
	}

	rkv_tp_opts_init(&opts);
	opts.provider = a.provider;
	opts.device = cfg->device[0] ? cfg->device : NULL;
	opts.port = (int)cfg->port;
	opts.gid_index = (int)cfg->gid_index;
	/* tcp/shm: requests beyond the RECVs posted wait in the transport;
	 * bound that to --max-inflight + the send buffers' worth, like the
	 * RECVs themselves (a flooding client then gets RNR errors) */
	opts.max_unexpected = (unsigned)cfg->max_inflight + RKV_CTRL_SENDS;
	opts.max_unexpected_bytes =
		(size_t)opts.max_unexpected * RKV_MSG_MAX;
	opts.max_handshakes = (unsigned)cfg->max_handshakes;
	opts.max_handshakes_per_peer = (unsigned)cfg->max_handshakes_peer;
	/* shm: nothing of ours reaches a peer before ctrl.c grants it (after
	 * HELLO, and the secret's proof when one is set); only the users
	 * --shm-mode/--shm-group/--shm-allow-uid name may connect */
	opts.accept_grant = RKV_GRANT_NONE;
	opts.shm_mode = cfg->shm_mode;
	opts.shm_gid = cfg->shm_gid;
	opts.shm_nuids = cfg->shm_nuids;
	memcpy(opts.shm_uids, cfg->shm_uids, sizeof(opts.shm_uids));
	rc = rkv_tp_create(&opts, &srv->tp);
	if (rc) {
		rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP,
			"cannot open the %s transport: %s",
			rkv_tp_provider_str(a.provider), strerror(-rc));
		goto err;
	}

	srv->index_len = (size_t)(cfg->nbuckets * RKV_BUCKET_SIZE);
	rc = reg_region(srv, "index", NULL, srv->index_len, RKV_ACCESS_ALL,
			&srv->index_mem, &srv->index_mr, &srv->index_ro_mr);
	if (rc)
		goto err;
	srv->data_len = (size_t)cfg->memory;
	rc = reg_region(srv, "data", srv->datamem, srv->data_len, DATA_ACCESS,
			&srv->data_mem, &srv->data_mr, &srv->data_ro_mr);
	if (rc)
		goto err;

	if (cfg->counters) {
		size_t pg = 4096;

		srv->ctr_len = ((size_t)cfg->counters * 8 + pg - 1) & ~(pg - 1);
		rc = rkv_tp_mem_alloc(srv->tp, srv->ctr_len, &srv->ctr_mem);
		if (rc) {
			srv->ctr_mem = NULL;
			rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP,
				"counter region: cannot allocate %zu bytes: %s",
				srv->ctr_len, strerror(-rc));
			goto err;
		}
		rc = rkv_mr_reg(srv->tp, srv->ctr_mem, srv->ctr_len,
				RKV_ACCESS_ALL, &srv->ctr_mr);
		if (rc) {
			rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP,
				"counter region: cannot register: %s",
				strerror(-rc));
			goto err;
		}
		srv->ctr_names = rkv_calloc(cfg->counters,
					    sizeof(*srv->ctr_names));
		if (!srv->ctr_names) {
			rc = -ENOMEM;
			goto err;
		}
	}

	rc = rkv_space_create(cfg->memory, cfg->grace_ms, &srv->space);
	if (rc)
		goto err;

	srv->nslots = (uint32_t)cfg->max_clients + RKV_CTRL_OVERFLOW;
	srv->conns = rkv_calloc(srv->nslots, sizeof(*srv->conns));
	srv->gens = rkv_calloc(srv->nslots, sizeof(*srv->gens));
	if (!srv->conns || !srv->gens) {
		rc = -ENOMEM;
		goto err;
	}

	/* every connection keeps at most RECVS + SENDS WRs outstanding */
	depth = srv->nslots * ((unsigned)cfg->max_inflight + RKV_CTRL_SENDS);
	if (depth > (1u << 20))
		depth = 1u << 20;
	rc = rkv_cq_create(srv->tp, depth, &srv->cq);
	if (rc) {
		rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP,
			"cannot create a CQ of %u entries: %s", depth,
			strerror(-rc));
		goto err;
	}
	rc = rkv_listen(srv->tp, cfg->listen, &srv->listener);
	if (rc) {
		rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP, "cannot listen on %s: %s",
			cfg->listen, strerror(-rc));
		goto err;
	}
	rkv_log(RKV_LOG_INFO, RKV_SRV_COMP,
		"server %08x: index %" PRIu64 " buckets (%zu bytes) rkey %u, "
		"data %zu bytes in %s rkey %u, %s",
		srv->server_id, cfg->nbuckets, srv->index_len,
		srv->index_mr->rkey, srv->data_len,
		rkv_srv_datamem_describe(srv->datamem), srv->data_mr->rkey,
		rkv_tp_describe(srv->tp));
	if (cfg->secret_len)
		rkv_log(RKV_LOG_INFO, RKV_SRV_COMP,
			"clients must authenticate (secret from %s)",
			cfg->secret_file);
	else
		rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
			"accepting any client (no --secret-file)");
	*out = srv;
	return 0;

err:
	rkv_srv_destroy(srv);
	return rc;
}

void rkv_srv_destroy(struct rkv_srv *srv)
{
	if (!srv)
		return;
	if (srv->conns)
		rkv_srv_ctrl_close_all(srv);
	rkv_srv_rotate_fini(srv);
	rkv_listener_destroy(srv->listener);
	rkv_cq_destroy(srv->cq);
	rkv_free(srv->gens);
	rkv_free(srv->conns);
	rkv_space_destroy(srv->space);
	rkv_free(srv->ctr_names);
	rkv_mr_dereg(srv->ctr_mr);
	if (srv->ctr_mem)
		rkv_tp_mem_free(srv->tp, srv->ctr_mem, srv->ctr_len);
	rkv_mr_dereg(srv->data_ro_mr);
	rkv_mr_dereg(srv->data_mr);
	if (srv->data_mem)
		rkv_srv_datamem_free(srv->datamem, srv->tp, srv->data_mem,
				     srv->data_len);
	rkv_mr_dereg(srv->index_ro_mr);
	rkv_mr_dereg(srv->index_mr);
	if (srv->index_mem)
		rkv_tp_mem_free(srv->tp, srv->index_mem, srv->index_len);
	rkv_tp_destroy(srv->tp);
	rkv_srv_datamem_close(&srv->datamem);
	rkv_srv_wipe(srv->cfg.secret, sizeof(srv->cfg.secret));
	rkv_free(srv);
}

const char *rkv_srv_addr(const struct rkv_srv *srv)
{
	return rkv_listener_addr(srv->listener);
}

const char *rkv_srv_describe(const struct rkv_srv *srv)
{
	return rkv_tp_describe(srv->tp);
}

int rkv_srv_warn_ok(struct rkv_srv *srv, uint64_t now_ms)
{
	if (now_ms - srv->warn_window_ms >= 1000) {
		if (srv->warn_suppressed)
			rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
				"%" PRIu64 " similar warnings suppressed",
				srv->warn_suppressed);
		srv->warn_window_ms = now_ms;
		srv->warn_n = 0;
		srv->warn_suppressed = 0;
	}
	if (srv->warn_n < RKV_CTRL_WARN_PER_S) {
		srv->warn_n++;
		return 1;
	}
	srv->warn_suppressed++;
	return 0;
}

int rkv_srv_poll(struct rkv_srv *srv, uint64_t now_ms)
{
	int work = 0, rc;

	srv->polls++;
	rc = rkv_srv_ctrl_poll(srv, now_ms);
	if (rc < 0)
		return rc;
	work += rc;
	/* accepting and housekeeping at most once a millisecond */
	if (now_ms != srv->last_tick_ms) {
		srv->last_tick_ms = now_ms;
		work += rkv_srv_ctrl_accept(srv, now_ms);
		rkv_srv_ctrl_tick(srv, now_ms);
		if (rkv_space_tick(srv->space, now_ms))
			work++;
	}
	if (!work)
		srv->idle_polls++;
	return work;
}

void rkv_srv_log_summary(const struct rkv_srv *srv)
{
	struct rkv_space_stats st;

	rkv_space_get_stats(srv->space, &st);
	rkv_log(RKV_LOG_INFO, RKV_SRV_COMP,
		"stopping after %" PRIu64 " ms: %" PRIu64 " clients, %" PRIu64
		" control messages, %" PRIu64 " bad messages, %" PRIu64
		" chunks granted, %" PRIu64 " blocks returned, %" PRIu64
		" bad extents, %" PRIu64 " auth failures, %" PRIu64
		" rebuilds (%" PRIu64
		" bytes), polls %" PRIu64 " (idle %" PRIu64 "), completions %"
		PRIu64,
		rkv_now_ms() - srv->start_ms, srv->clients_total,
		srv->ctrl_msgs, srv->bad_msgs, st.grants, st.returns,
		srv->bad_extents, srv->auth_failures, st.rebuilds,
		st.rebuilt_bytes, srv->polls, srv->idle_polls,
		srv->completions);
}
