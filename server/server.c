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
 * rkv_srv_create_why is a goto ladder; rkv_srv_destroy mirrors it and
 * accepts a partly built server.  A failure is not logged where it happens
 * but described in the caller's why buffer, so that rkv-server says it in
 * one line (rkv_srv_create logs that line instead).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "datamem.h"
#include "rtime.h"
#include "server_internal.h"

/* Every region a client reaches is windowed: each client gets rkeys of its
 * own connection (rkv_ep_rkey) where the transport can (--rkey-windows). */
#define DATA_ACCESS                                                            \
	(RKV_ACCESS_LOCAL_WRITE | RKV_ACCESS_REMOTE_READ |                     \
	 RKV_ACCESS_REMOTE_WRITE | RKV_ACCESS_REMOTE_ATOMIC |                  \
	 RKV_ACCESS_WINDOWED)
#define ALL_ACCESS (RKV_ACCESS_ALL | RKV_ACCESS_WINDOWED)
#define RO_ACCESS (RKV_ACCESS_REMOTE_READ | RKV_ACCESS_WINDOWED)

/*
 * The transport's log sink.  While the server starts, the transport's
 * messages are held back: a start that fails is then one line from
 * rkv-server, whose cause names the first warning or error held (a host
 * that does not resolve, an address in use), and a start that works logs
 * them after the configuration (tplog_release).  From then on each
 * message goes straight to rkv_log_emit (the global sink, its format).
 * The transport's own thread logs too: the lock orders it with the
 * release.
 */
#define TPLOG_HELD_MAX 16

struct rkv_srv_tplog {
	pthread_mutex_t lock;
	int holding;            /* 1 until tplog_release */
	unsigned n, dropped;    /* held; not held (beyond TPLOG_HELD_MAX) */
	struct {
		enum rkv_log_level level;
		int line;
		char comp[16], func[48], msg[256];
	} held[TPLOG_HELD_MAX];
};

static void tplog_sink(enum rkv_log_level level, const char *comp,
		       const char *func, int line, const char *msg, void *arg)
{
	struct rkv_srv_tplog *l = arg;

	pthread_mutex_lock(&l->lock);
	if (l->holding) {
		if (l->n < TPLOG_HELD_MAX) {
			l->held[l->n].level = level;
			l->held[l->n].line = line;
			snprintf(l->held[l->n].comp, sizeof(l->held[0].comp),
				 "%s", comp);
			snprintf(l->held[l->n].func, sizeof(l->held[0].func),
				 "%s", func);
			snprintf(l->held[l->n].msg, sizeof(l->held[0].msg), "%s",
				 msg);
			l->n++;
		} else {
			l->dropped++;
		}
		pthread_mutex_unlock(&l->lock);
		return;
	}
	pthread_mutex_unlock(&l->lock);
	rkv_log_emit(level, comp, func, line, "%s", msg);
}

/* Log what was held, in order, and stop holding. */
static void tplog_release(struct rkv_srv_tplog *l)
{
	pthread_mutex_lock(&l->lock);
	for (unsigned i = 0; i < l->n; i++)
		rkv_log_emit(l->held[i].level, l->held[i].comp,
			     l->held[i].func, l->held[i].line, "%s",
			     l->held[i].msg);
	if (l->dropped)
		rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
			"%u more transport messages of the start not shown",
			l->dropped);
	l->n = 0;
	l->holding = 0;
	pthread_mutex_unlock(&l->lock);
}

/* The first warning or error held, "comp: msg" into buf; 0 if none. */
static int tplog_cause(struct rkv_srv_tplog *l, char *buf, size_t len)
{
	int found = 0;

	pthread_mutex_lock(&l->lock);
	for (unsigned i = 0; i < l->n && !found; i++) {
		if (l->held[i].level >= RKV_LOG_WARN) {
			snprintf(buf, len, "%s: %s", l->held[i].comp,
				 l->held[i].msg);
			found = 1;
		}
	}
	pthread_mutex_unlock(&l->lock);
	return found;
}

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
		      void **mem, struct rkv_mr **mr, struct rkv_mr **ro_mr,
		      char *why, size_t whylen)
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
		rkv_msgf(why, whylen,
			 "%s region: cannot allocate %zu bytes of %s: %s%s%s",
			 what, len, where, strerror(-rc), gpu >= 0 ? ": " : "",
			 gpu >= 0 ? rkv_tp_gpu_why(srv->tp) : "");
		return rc;
	}
	rc = region_mr(srv, dm, *mem, len, access, mr);
	if (rc) {
		rkv_msgf(why, whylen,
			 "%s region: cannot register %zu bytes of %s: %s%s%s",
			 what, len, where, strerror(-rc), gpu >= 0 ? ": " : "",
			 gpu >= 0 ? rkv_tp_gpu_why(srv->tp) : "");
		return rc;
	}
	rc = region_mr(srv, dm, *mem, len, RO_ACCESS, ro_mr);
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
	char why[256] = "";
	int rc = rkv_srv_create_why(cfg, out, why, sizeof(why));

	if (rc)
		rkv_log(RKV_LOG_ERROR, RKV_SRV_COMP, "cannot start on %s: %s",
			cfg->listen, why[0] ? why : strerror(-rc));
	else
		tplog_release((*out)->tplog);
	return rc;
}

int rkv_srv_create_why(const struct rkv_srv_config *cfg, struct rkv_srv **out,
		       char *why, size_t whylen)
{
	struct rkv_tp_opts opts;
	struct rkv_tp_addr a;
	struct rkv_srv *srv;
	char dmwhy[256];
	unsigned depth;
	int rc;

	*out = NULL;
	rc = rkv_tp_addr_parse(cfg->listen, &a);
	if (rc) {
		rkv_msgf(why, whylen, "--listen: '%s' is not an address",
			 cfg->listen);
		return rc;
	}
	srv = rkv_calloc(1, sizeof(*srv));
	if (srv)
		srv->tplog = rkv_calloc(1, sizeof(*srv->tplog));
	if (!srv || !srv->tplog) {
		rkv_free(srv);
		rkv_msgf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&srv->tplog->lock, NULL);
	srv->tplog->holding = 1;
	srv->cfg = *cfg;
	srv->server_id = random_id();
	srv->next_client_id = 1;
	srv->start_ms = rkv_now_ms();

	/* First: a GPU that cannot be used stops us before anything runs. */
	rc = rkv_srv_datamem_open(cfg->data_gpu, dmwhy, sizeof(dmwhy),
				  &srv->datamem);
	if (rc) {
		rkv_msgf(why, whylen, "--data-memory %s: %s",
			 cfg->data_memory[0] ? cfg->data_memory : "host", dmwhy);
		goto err;
	}

	rkv_tp_opts_init(&opts);
	opts.provider = a.provider;
	opts.device = cfg->device[0] ? cfg->device : NULL;
	opts.port = (int)cfg->port;
	opts.gid_index = (int)cfg->gid_index;
	opts.mtu = (unsigned)cfg->mtu;
	opts.traffic_class = (int)cfg->traffic_class;
	opts.service_level = (int)cfg->service_level;
	opts.max_rd_atomic = (unsigned)cfg->max_rd_atomic;
	opts.rkey_windows = cfg->rkey_windows;
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
	opts.log_fn = tplog_sink;
	opts.log_arg = srv->tplog;
	opts.log_min = (enum rkv_log_level)cfg->log_level;
	rc = rkv_tp_create(&opts, &srv->tp);
	if (rc) {
		rkv_msgf(why, whylen, "cannot open the %s transport: %s",
			 rkv_tp_provider_str(a.provider), strerror(-rc));
		goto err;
	}
	if (!rkv_tp_has_atomics(srv->tp)) {
		rc = -EOPNOTSUPP;
		rkv_msgf(why, whylen, "%s reports no remote atomics: rkv needs "
			 "8-byte RDMA compare-and-swap and fetch-and-add (its "
			 "locks, inserts and counters); use a device or "
			 "fabric configuration that has them",
			 rkv_tp_describe(srv->tp));
		goto err;
	}

	/* the buckets, then the partition table (layout.h), zero: every
	 * partition owned until a migration says otherwise */
	srv->index_len = (size_t)(rkv_srv_nslots(cfg) * 8) + RKV_INDEX_EXTRA;
	rc = reg_region(srv, "index", NULL, srv->index_len, ALL_ACCESS,
			&srv->index_mem, &srv->index_mr, &srv->index_ro_mr,
			why, whylen);
	if (rc)
		goto err;
	rkv_srv_levels_set(srv, 1);
	srv->data_len = (size_t)cfg->memory;
	rc = reg_region(srv, "data", srv->datamem, srv->data_len, DATA_ACCESS,
			&srv->data_mem, &srv->data_mr, &srv->data_ro_mr, why,
			whylen);
	if (rc)
		goto err;

	if (cfg->counters) {
		size_t pg = 4096;

		srv->ctr_len = ((size_t)cfg->counters * 8 + pg - 1) & ~(pg - 1);
		rc = rkv_tp_mem_alloc(srv->tp, srv->ctr_len, &srv->ctr_mem);
		if (rc) {
			srv->ctr_mem = NULL;
			rkv_msgf(why, whylen,
				 "counter region: cannot allocate %zu bytes: %s",
				 srv->ctr_len, strerror(-rc));
			goto err;
		}
		rc = rkv_mr_reg(srv->tp, srv->ctr_mem, srv->ctr_len,
				ALL_ACCESS, &srv->ctr_mr);
		if (rc) {
			rkv_msgf(why, whylen,
				 "counter region: cannot register: %s",
				 strerror(-rc));
			goto err;
		}
		srv->ctr_names = rkv_calloc(cfg->counters,
					    sizeof(*srv->ctr_names));
		if (!srv->ctr_names) {
			rc = -ENOMEM;
			rkv_msgf(why, whylen, "counter names: out of memory");
			goto err;
		}
	}

	rc = rkv_space_create(cfg->memory, cfg->grace_ms, cfg->big_grace_ms,
			      &srv->space);
	if (rc) {
		rkv_msgf(why, whylen, "space manager: %s", strerror(-rc));
		goto err;
	}

	srv->nslots = (uint32_t)cfg->max_clients + RKV_CTRL_OVERFLOW;
	srv->conns = rkv_calloc(srv->nslots, sizeof(*srv->conns));
	srv->gens = rkv_calloc(srv->nslots, sizeof(*srv->gens));
	if (!srv->conns || !srv->gens) {
		rc = -ENOMEM;
		rkv_msgf(why, whylen, "connection table: out of memory");
		goto err;
	}

	/* every connection keeps at most RECVS + SENDS WRs outstanding */
	depth = srv->nslots * ((unsigned)cfg->max_inflight + RKV_CTRL_SENDS);
	if (depth > (1u << 20))
		depth = 1u << 20;
	rc = rkv_cq_create(srv->tp, depth, &srv->cq);
	if (rc) {
		rkv_msgf(why, whylen, "cannot create a CQ of %u entries: %s",
			 depth, strerror(-rc));
		goto err;
	}
	rc = rkv_listen(srv->tp, cfg->listen, &srv->listener);
	if (rc) {
		rkv_msgf(why, whylen, "cannot listen: %s%s", strerror(-rc),
			 rc == -EADDRINUSE ? " (another server there?)" : "");
		goto err;
	}
	if (!srv->cfg.name[0] &&
	    rkv_server_name_from_addr(rkv_listener_addr(srv->listener),
				      srv->cfg.name, sizeof(srv->cfg.name))) {
		rkv_msgf(why, whylen, "the address %s makes no server name: "
			 "give --name", rkv_listener_addr(srv->listener));
		rc = -EINVAL;
		goto err;
	}
	*out = srv;
	return 0;

err:
	if (why && whylen) {
		size_t used = strlen(why);
		char cause[300];

		/* what the transport said, when it says more than rc */
		if (tplog_cause(srv->tplog, cause, sizeof(cause)) &&
		    !strstr(cause, strerror(-rc)))
			snprintf(why + used, whylen - used, " (%s)", cause);
	}
	rkv_srv_destroy(srv);
	return rc;
}

void rkv_srv_log_start(const struct rkv_srv *srv)
{
	const struct rkv_srv_config *cfg = &srv->cfg;

	tplog_release(srv->tplog);

	/* with per-connection rkeys the MRs' own are handed to nobody */
	rkv_log(RKV_LOG_INFO, RKV_SRV_COMP,
		"server %08x: index %" PRIu64 " buckets (%zu bytes at most, "
		"%u levels) rkey %u, "
		"data %zu bytes in %s rkey %u, values up to %" PRIu64
		" bytes, %s%s",
		srv->server_id, cfg->nbuckets, srv->index_len,
		cfg->levels_max, srv->index_mr->rkey, srv->data_len,
		rkv_srv_datamem_describe(srv->datamem), srv->data_mr->rkey,
		cfg->max_value, rkv_tp_describe(srv->tp),
		rkv_tp_windows(srv->tp) ? " (the rkeys above are the "
					  "regions'; each client gets its own)"
					: "");
	if (cfg->secret_len && cfg->ro_secret_len)
		rkv_log(RKV_LOG_INFO, RKV_SRV_COMP,
			"clients must authenticate (full access: secret from "
			"%s; read-only: secret from %s)",
			cfg->secret_file, cfg->ro_secret_file);
	else if (cfg->secret_len)
		rkv_log(RKV_LOG_INFO, RKV_SRV_COMP,
			"clients must authenticate (secret from %s)",
			cfg->secret_file);
	else if (cfg->ro_secret_len)
		rkv_log(RKV_LOG_INFO, RKV_SRV_COMP,
			"clients must authenticate and may only read (secret "
			"from %s; no --secret-file: no client may write)",
			cfg->ro_secret_file);
	else
		rkv_log(RKV_LOG_WARN, RKV_SRV_COMP,
			"accepting any client (no --secret-file)");
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
	if (srv->tplog) { /* after the transport: its threads log into it */
		pthread_mutex_destroy(&srv->tplog->lock);
		rkv_free(srv->tplog);
	}
	rkv_srv_datamem_close(&srv->datamem);
	rkv_srv_wipe_secrets(&srv->cfg);
	rkv_free(srv);
}

void rkv_srv_part_set(struct rkv_srv *srv, unsigned part, uint64_t word)
{
	uint64_t *tab = (uint64_t *)(void *)((char *)srv->index_mem +
					     rkv_index_part_off(
						     rkv_srv_nbuckets_max(&srv->cfg),
						     (unsigned)srv->cfg.bucket_slots));

	__atomic_store_n(&tab[part], word, __ATOMIC_RELEASE);
}

void rkv_srv_lease_set(struct rkv_srv *srv, uint64_t until_ms)
{
	uint64_t *w = (uint64_t *)(void *)((char *)srv->index_mem +
					   rkv_index_lease_off(
						   rkv_srv_nbuckets_max(&srv->cfg),
						   (unsigned)srv->cfg.bucket_slots));

	if (atomic_load(&srv->removed))
		until_ms = 0;
	__atomic_store_n(w, rkv_lease_word(until_ms), __ATOMIC_RELEASE);
}

void rkv_srv_levels_set(struct rkv_srv *srv, unsigned levels)
{
	uint64_t *w = (uint64_t *)(void *)((char *)srv->index_mem +
					   rkv_index_level_off(
						   rkv_srv_nbuckets_max(&srv->cfg),
						   (unsigned)srv->cfg.bucket_slots));

	srv->levels = levels;
	__atomic_store_n(w, (uint64_t)levels, __ATOMIC_RELEASE);
}

const char *rkv_srv_addr(const struct rkv_srv *srv)
{
	return rkv_listener_addr(srv->listener);
}

const char *rkv_srv_name(const struct rkv_srv *srv)
{
	return srv->cfg.name;
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

int rkv_srv_wait(struct rkv_srv *srv, struct pollfd *fds, unsigned nfds,
		 unsigned timeout_us)
{
	struct pollfd all[RKV_CQ_WAIT_FDS];
	int lfd = rkv_listener_fd(srv->listener);
	unsigned n = 0;
	int rc;

	if (lfd >= 0)
		all[n++] = (struct pollfd){ .fd = lfd, .events = POLLIN };
	for (unsigned i = 0; i < nfds && n < RKV_CQ_WAIT_FDS; i++)
		all[n++] = fds[i];
	rc = rkv_cq_wait_fds(srv->cq, all, n, timeout_us);
	for (unsigned i = 0; i < nfds; i++)
		fds[i].revents = i + (lfd >= 0) < n ? all[i + (lfd >= 0)].revents
						     : 0;
	return rc;
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
		" writes denied, %" PRIu64 " rebuilds (%" PRIu64
		" bytes), polls %" PRIu64 " (idle %" PRIu64 "), completions %"
		PRIu64,
		rkv_now_ms() - srv->start_ms, srv->clients_total,
		srv->ctrl_msgs, srv->bad_msgs, st.grants, st.returns,
		srv->bad_extents, srv->auth_failures, srv->denied, st.rebuilds,
		st.rebuilt_bytes, srv->polls, srv->idle_polls,
		srv->completions);
}
