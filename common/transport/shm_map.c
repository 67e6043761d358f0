/* SPDX-License-Identifier: MIT */
/*
 * shm_map.c - what a peer of the shm provider may map, and the
 * initiator's mappings of its peer's memory.
 *
 * What a peer gets is the endpoint's grant (rkv_ep_grant): an accepted
 * endpoint starts at opts.accept_grant (rkv-server: NONE until the client
 * authenticated), a connected one at WRITE.  NONE answers every MAP_REQ
 * with an error, so nothing of this process's memory - table, descriptor,
 * mapping - reaches the peer; READ hands out only read-only descriptors
 * (a new O_RDONLY open of the memfd: no writable mapping can be made from
 * it, nor mprotect'ed writable), never for GPU memory; WRITE hands a
 * writable descriptor of a memfd some live MR allows remote write or
 * atomics on.
 *
 * The initiator asks for the peer's MR table once per endpoint and for a
 * memfd the first time an rkey of it is used (map_req waits for the
 * answer), and caches the mappings and each rkey's translation (struct
 * shm_rc) per endpoint.  A GPU region's descriptor is opened as a CUDA IPC
 * handle on the device with its PCI id (the owner's own pointer when it is
 * the same process).
 */
#include "shm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../alloc.h"
#include "../log.h"
#include "../rtime.h"

/* MAP_REQ arg0 naming the MR table instead of a memfd. */
#define SHM_MEMID_TABLE 0xffffffffull

/* --------------------------------------------- target: what a peer may map */
/* A read-only descriptor of fd's file (a new open file description). */
static int reopen_ro(int fd)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open(path, O_RDONLY | O_CLOEXEC);
}

int shm_map_fd(int fd, bool rw, size_t want, void **out, size_t *len)
{
	struct stat st;
	void *p;

	int seals;

	if (fstat(fd, &st))
		return -errno;
	if (st.st_size <= 0 || (want && (size_t)st.st_size != want))
		return -EPROTO;
	/* A peer that could shrink the file could make us take SIGBUS. */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return -EPROTO;
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | (rw ? PROT_WRITE : 0),
		 MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	*out = p;
	*len = (size_t)st.st_size;
	return 0;
}

/* Whether some live MR of memid allows remote write or atomics. */
static bool memid_writable(struct sw_tp *tp, unsigned memid)
{
	for (uint32_t i = 0; i < SW_MR_MAX; i++) {
		uint64_t k = __atomic_load_n(&tp->mrt.ent[i].key,
					     __ATOMIC_ACQUIRE);

		if ((k & SW_KEY_VALID) && SW_KEY_MEMID1(k) == memid + 1 &&
		    (SW_KEY_ACCESS(k) &
		     (RKV_ACCESS_REMOTE_WRITE | RKV_ACCESS_REMOTE_ATOMIC)))
			return true;
	}
	return false;
}

/* MAP_REQ at the target, MAP_RESP at the initiator; ep->lock held. */
int shm_frame(struct sw_ep *ep, const struct sw_hdr *h)
{
	struct shm_tp *t = shm_of(ep->tp);
	struct shm_ep *se = ep->prov;

	if (!se)
		return -EPROTO;
	if (h->type == SW_F_MAP_REQ) {
		struct sw_hdr r = { .type = SW_F_MAP_RESP, .seq = h->seq,
				    .key = RKV_WC_REM_ACCESS_ERR };
		int grant = __atomic_load_n(&se->grant, __ATOMIC_ACQUIRE);
		int fd = -1;

		if (h->arg0 == SHM_MEMID_TABLE) {
			if (grant != RKV_GRANT_NONE && !h->arg1)
				fd = reopen_ro(t->tab_fd);
		} else if (grant != RKV_GRANT_NONE) {
			pthread_mutex_lock(&t->mem_lock);
			if (h->arg0 < t->nmems && t->mems[h->arg0].fd >= 0 &&
			    (grant == RKV_GRANT_WRITE ||
			     (t->mems[h->arg0].gpu < 0 && !h->arg1))) {
				int mfd = t->mems[h->arg0].fd;

				if (!h->arg1)
					fd = reopen_ro(mfd);
				else if (memid_writable(ep->tp,
							(unsigned)h->arg0))
					fd = dup(mfd);
			}
			pthread_mutex_unlock(&t->mem_lock);
		}
		if (fd < 0 && !se->refusal_logged) {
			se->refusal_logged = true;
			sw_log(ep->tp, RKV_LOG_WARN,
			       "%s: refused a %s mapping of %s (grant %s)",
			       ep->base.peer,
			       h->arg1 ? "writable" : "read-only",
			       h->arg0 == SHM_MEMID_TABLE ? "the MR table"
							  : "a region",
			       rkv_grant_str((enum rkv_grant)grant));
		}
		if (fd >= 0) {
			if (sw_ep_tx_fd(ep, fd, true))
				close(fd);
			else
				r.key = RKV_WC_SUCCESS;
		}
		sw_ep_tx_frame(ep, &r, NULL, 0);
		return 0;
	}
	/* MAP_RESP */
	int fd = h->key == RKV_WC_SUCCESS ? sw_ep_fd_pop(ep) : -1;

	if (h->key == RKV_WC_SUCCESS && fd < 0)
		return -EPROTO;
	if (h->seq != se->map_seq || se->map_done) {
		if (fd >= 0)
			close(fd); /* answer to a request that timed out */
		return 0;
	}
	se->map_fd = fd;
	se->map_status = (int)h->key;
	se->map_done = true;
	pthread_cond_broadcast(&ep->cond);
	return 0;
}

/* -------------------------------- initiator: mappings of the peer's memory */
/*
 * Open GPU memory from its descriptor fd: the owner's pointer in the same
 * process, else its IPC handle on the local device with the same PCI id.
 */
static int gpu_open(struct sw_ep *ep, int fd, uint8_t **dev, size_t *len,
		    int *gpu, bool *ipc)
{
	struct shm_gpu_desc d;
	void *p = NULL;
	int rc;

	if (pread(fd, &d, sizeof(d), 0) != (ssize_t)sizeof(d) ||
	    d.magic != SHM_GPU_MAGIC || d.version != 1 || !d.len ||
	    d.base + d.len < d.base || memchr(d.pci, 0, sizeof(d.pci)) == NULL)
		return -EPROTO;
	rc = rkv_cuda_device_by_pci(d.pci, gpu);
	if (rc) {
		sw_log(ep->tp, RKV_LOG_WARN,
		       "%s: GPU region on device %s, which this process "
		       "cannot use: %s", ep->base.peer, d.pci,
		       rkv_cuda_strerror());
		return rc;
	}
	if (d.pid == (int32_t)getpid()) {
		*dev = (uint8_t *)(uintptr_t)d.base;
		*ipc = false;
	} else {
		rc = rkv_cuda_ipc_open(*gpu, d.handle, &p);
		if (rc) {
			sw_log(ep->tp, RKV_LOG_WARN,
			       "%s: cannot open the CUDA IPC handle of a GPU "
			       "region: %s", ep->base.peer,
			       rkv_cuda_strerror());
			return rc;
		}
		*dev = p;
		*ipc = true;
	}
	*len = (size_t)d.len;
	return 0;
}

/*
 * Ask the peer for the descriptor of its memfd memid (SHM_MEMID_TABLE: its
 * MR table), writable if rw, and wait for it; returns a WC status with *fd
 * (the caller closes it) on success.
 */
static int map_req(struct sw_ep *ep, struct shm_ep *se, uint64_t memid,
		   bool rw, int *fdp)
{
	uint64_t deadline;
	int fd, st;

	pthread_mutex_lock(&ep->lock);
	if (ep->base.state != RKV_EP_CONNECTED || ep->closed) {
		pthread_mutex_unlock(&ep->lock);
		return RKV_WC_WR_FLUSH_ERR;
	}
	{
		struct sw_hdr h = { .type = SW_F_MAP_REQ,
				    .seq = ++se->map_seq,
				    .arg0 = memid,
				    .arg1 = rw };

		se->map_done = false;
		sw_ep_tx_frame(ep, &h, NULL, 0);
		sw_ep_tx_commit(ep);
		sw_ep_settle_locked(ep);
	}
	deadline = rkv_now_ns() + ep->timeout_ns;
	while (!se->map_done && ep->base.state == RKV_EP_CONNECTED &&
	       rkv_now_ns() < deadline) {
		if (ep->passive) {
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_nsec += 1000000;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&ep->cond, &ep->lock, &ts);
		} else {
			sw_ep_rx_locked(ep);
			sw_ep_settle_locked(ep);
			if (!se->map_done) {
				pthread_mutex_unlock(&ep->lock);
				sched_yield();
				pthread_mutex_lock(&ep->lock);
			}
		}
	}
	fd = se->map_fd;
	st = se->map_status;
	se->map_fd = -1;
	if (!se->map_done) {
		bool live = ep->base.state == RKV_EP_CONNECTED;

		se->map_done = true; /* a late answer is dropped */
		pthread_mutex_unlock(&ep->lock);
		if (fd >= 0)
			close(fd);
		return live ? RKV_WC_RETRY_EXC_ERR : RKV_WC_WR_FLUSH_ERR;
	}
	pthread_mutex_unlock(&ep->lock);
	if (st != RKV_WC_SUCCESS || fd < 0) {
		if (fd >= 0)
			close(fd);
		return RKV_WC_REM_ACCESS_ERR;
	}
	*fdp = fd;
	return RKV_WC_SUCCESS;
}

/* Map the peer's MR table (once per endpoint); returns a WC status. */
int shm_tab_get(struct sw_ep *ep, struct shm_ep *se)
{
	void *p;
	size_t l;
	int fd, st, rc;

	st = map_req(ep, se, SHM_MEMID_TABLE, false, &fd);
	if (st != RKV_WC_SUCCESS)
		return st;
	rc = shm_map_fd(fd, false, SW_MRTAB_BYTES, &p, &l);
	close(fd);
	if (rc) {
		sw_log(ep->tp, RKV_LOG_WARN, "%s: bad MR table descriptor: %s",
		       ep->base.peer, strerror(-rc));
		return RKV_WC_REM_ACCESS_ERR;
	}
	se->peer_tab = p;
	return RKV_WC_SUCCESS;
}

/* Map the peer's memfd memid (read-write if rw); returns a WC status. */
static int map_get(struct sw_ep *ep, struct shm_ep *se, unsigned memid,
		   bool rw, bool gpu, uint8_t **base, size_t *len, int *dgpu)
{
	struct shm_map *m;
	void *p;
	size_t l;
	int fd, st, rc, g = -1;
	bool ipc = false;

	if (memid < se->nmaps) {
		m = &se->maps[memid];
		if (gpu && m->dev) {
			*base = m->dev;
			*len = m->dev_len;
			*dgpu = m->gpu;
			return RKV_WC_SUCCESS;
		}
		if (!gpu && (m->rw || (!rw && m->ro))) {
			*base = m->rw ? m->rw : m->ro;
			*len = m->rw ? m->rw_len : m->ro_len;
			return RKV_WC_SUCCESS;
		}
	}
	st = map_req(ep, se, memid, rw, &fd);
	if (st != RKV_WC_SUCCESS)
		return st;
	if (gpu) {
		uint8_t *dp = NULL;

		rc = gpu_open(ep, fd, &dp, &l, &g, &ipc);
		p = dp;
	} else {
		rc = shm_map_fd(fd, rw, 0, &p, &l);
	}
	close(fd);
	if (rc) {
		sw_log(ep->tp, RKV_LOG_WARN, "%s: cannot map region %u: %s",
		       ep->base.peer, memid, strerror(-rc));
		return RKV_WC_REM_ACCESS_ERR;
	}
	if (memid >= se->nmaps) {
		unsigned n = memid + 1 > se->nmaps * 2 ? memid + 1
						       : se->nmaps * 2;
		struct shm_map *nm = rkv_realloc(se->maps, n * sizeof(*nm));

		if (!nm) {
			if (ipc)
				rkv_cuda_ipc_close(g, p);
			else if (!gpu)
				munmap(p, l);
			return RKV_WC_GENERAL_ERR;
		}
		memset(nm + se->nmaps, 0, (n - se->nmaps) * sizeof(*nm));
		se->maps = nm;
		se->nmaps = n;
	}
	m = &se->maps[memid];
	if (gpu) {
		m->dev = p;
		m->dev_len = l;
		m->gpu = g;
		m->ipc = ipc;
		*dgpu = g;
	} else if (rw) {
		m->rw = p;
		m->rw_len = l;
	} else {
		m->ro = p;
		m->ro_len = l;
	}
	*base = p;
	*len = l;
	return RKV_WC_SUCCESS;
}

/* Cache rkey (entry idx, current key word k); returns a WC status. */
int shm_rc_fill(struct sw_ep *ep, struct shm_ep *se, uint32_t idx,
		uint32_t rkey, uint64_t k)
{
	const struct sw_mrent *e = &se->peer_tab[idx];
	struct shm_rc *c;
	uint64_t addr, len, off;
	unsigned memid1;
	uint8_t *base;
	size_t mlen;
	int st, dgpu = -1;

	if (!(k & SW_KEY_VALID) || (uint32_t)k != rkey)
		return RKV_WC_REM_ACCESS_ERR;
	if (!se->rc) {
		se->rc = rkv_calloc(SW_MR_MAX, sizeof(*se->rc));
		if (!se->rc)
			return RKV_WC_GENERAL_ERR;
	}
	addr = __atomic_load_n(&e->addr, __ATOMIC_ACQUIRE);
	len = __atomic_load_n(&e->len, __ATOMIC_ACQUIRE);
	off = __atomic_load_n(&e->memoff, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&e->key, __ATOMIC_RELAXED) != k)
		return RKV_WC_REM_ACCESS_ERR;
	memid1 = SW_KEY_MEMID1(k);
	if (!memid1)
		return RKV_WC_REM_ACCESS_ERR;
	st = map_get(ep, se, memid1 - 1,
		     SW_KEY_ACCESS(k) & (RKV_ACCESS_REMOTE_WRITE |
					 RKV_ACCESS_REMOTE_ATOMIC),
		     SW_KEY_GPU1(k) != 0, &base, &mlen, &dgpu);
	if (st != RKV_WC_SUCCESS)
		return st;
	/* The table is the peer's word: never trust it past the mapping. */
	if (off > mlen || len > mlen - off || addr + len < addr)
		return RKV_WC_REM_ACCESS_ERR;
	c = &se->rc[idx];
	c->base = base + off;
	c->addr = addr;
	c->len = len;
	c->gpu = dgpu;
	c->key = k;
	return RKV_WC_SUCCESS;
}
