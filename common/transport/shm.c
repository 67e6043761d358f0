/* SPDX-License-Identifier: MIT */
/*
 * shm.c - the shm provider: same-host transport over memfd mappings.
 *
 * rkv_tp_mem_alloc hands out memfd-backed MAP_SHARED memory (sealed against
 * shrinking, so a mapping peer can never take SIGBUS); remote-accessible
 * MRs must lie inside it.  The context's MR table lives in a memfd too,
 * which every connected peer maps read-only.  One-sided operations are the
 * initiator's own memcpy and __atomic operations on its mapping of the
 * target's memfd, done synchronously inside rkv_post:
 *
 *   rkey -> table index (O(1)) -> acquire load of the entry's key word ->
 *   compare with the cached key -> bounds and access -> the access.
 *
 * Deregistration clears the key word, so every later access fails at once.
 * The initiator maps the peer's MR table and each memfd the first time an
 * rkey needs it, asking the peer over the endpoint's unix socket (MAP_REQ;
 * the fd comes back by SCM_RIGHTS) and caches the mappings per endpoint.
 *
 * What a peer gets is the endpoint's grant (rkv_ep_grant): an accepted
 * endpoint starts at opts.accept_grant (rkv-server: NONE until the client
 * authenticated), a connected one at WRITE.  NONE answers every MAP_REQ
 * with an error, so nothing of this process's memory - table, descriptor,
 * mapping - reaches the peer; READ hands out only read-only descriptors
 * (a new O_RDONLY open of the memfd: no writable mapping can be made from
 * it, nor mprotect'ed writable), never for GPU memory; WRITE hands a
 * writable descriptor of a memfd some live MR allows remote write or
 * atomics on.  Exported memfds are mode 0400, so a peer of another uid
 * cannot reopen its read-only fd through /proc/self/fd writable; the MR
 * table is also sealed F_SEAL_FUTURE_WRITE after we mapped it, so nobody
 * (root included) can map it writable.
 *
 * The unix socket is a file, $RKV_SHM_DIR/NAME (default /run/rkv/NAME),
 * made with opts.shm_mode (0600) and opts.shm_gid before it listens; an
 * accepted peer whose SO_PEERCRED is not admitted (root, our euid,
 * opts.shm_uids, opts.shm_gid) is closed before anything is sent to it.
 * The socket also carries SEND/RECV and the handshake: the connector's
 * HELLO carries one fd, its doorbell page (sealed, with its protocol word,
 * SHM_PROTO, at byte 128), the acceptor writes its own word at byte 192
 * and answers HELLO_ACK with no fd at all.  So that rkv_cq_poll needs no
 * syscall when nothing arrived, the doorbell page holds two counters: a
 * sender bumps the peer's counter after every write to the socket, and the
 * poller reads its socket only when its counter moved - or every ~1 ms,
 * which is how a dead peer (EOF) is noticed even while only one-sided
 * traffic runs.  Passive endpoints are served by the context's transport
 * thread as on tcp.
 *
 * GPU regions (rkv_tp_mem_alloc_gpu): the memory is cudaMalloc'ed and its
 * "memfd" is a small sealed descriptor (struct shm_gpu_desc: CUDA IPC
 * handle, device PCI id, length, owner pid) that rides the same MAP_REQ /
 * SCM_RIGHTS path.  The initiator opens the IPC handle on the device with
 * that PCI id (the owner's own pointer when it is the same process) and
 * READ/WRITE become CUDA copies between its buffer and the device memory,
 * CAS/FETCH_ADD a device atomic - all complete before rkv_post returns.
 * The rkey, bounds and access checks are the same as for host memory;
 * unlike a read-only mmap, an IPC mapping is always writable, so for GPU
 * regions those checks are the only guard (as the NIC's are on verbs).
 */
#include "sw.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include "../alloc.h"
#include "../log.h"
#include "../rtime.h"

#define SHM_MAX_MEMS 65535u
#define SHM_CHECK_NS 1000000ull /* socket check period while idle */
#define SHM_DB_PAGE 4096
/* The doorbell page: u64 words [0] connector -> acceptor writes, [8]
 * acceptor -> connector (next cache line), [16] the connector's protocol
 * word, [24] the acceptor's. */
#define SHM_DB_PROTO_C 16
#define SHM_DB_PROTO_A 24
/* "RKVS" and the shm handshake version.  1: tables in the handshake;
 * 2: no fd from the acceptor, the table by MAP_REQ after a grant. */
#define SHM_PROTO ((0x53564b52ull << 32) | 2u)
/* MAP_REQ arg0 naming the MR table instead of a memfd. */
#define SHM_MEMID_TABLE 0xffffffffull
#define SHM_DIR_DEFAULT "/run/rkv"
#define SHM_EXPORT_MODE 0400 /* of every memfd a peer may receive */

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif
#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

struct shm_mem {
	int fd;       /* -1 once freed (ids are never reused); GPU: the
		       * descriptor memfd */
	uint8_t *base;
	size_t len;
	int gpu;      /* -1: memfd mapping; else CUDA device memory */
};

/* What a GPU memory's "memfd" holds (sealed, read by the initiator). */
#define SHM_GPU_MAGIC 0x47564b52u /* "RKVG" */
struct shm_gpu_desc {
	uint32_t magic;
	uint32_t version;  /* 1 */
	int32_t pid;       /* owner process */
	int32_t gpu;       /* owner's device index */
	uint64_t base;     /* device address in the owner */
	uint64_t len;      /* bytes */
	char pci[32];      /* device PCI bus id */
	uint8_t handle[RKV_CUDA_IPC_BYTES];
};

/* A socket file we listen on (unlinked by the listener's destroy). */
struct shm_lis {
	struct shm_lis *next;
	struct rkv_listener *l;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t dev;
	ino_t ino;
	pid_t pid;  /* the process that bound it */
};

struct shm_tp {
	struct sw_tp sw;
	int tab_fd;              /* memfd of the MR table */
	struct sw_mrent *tab;
	pthread_mutex_t mem_lock; /* guards mems and lis */
	struct shm_mem *mems;
	unsigned nmems, mems_cap;
	struct shm_lis *lis;
};

/* Initiator's cache of one peer rkey. */
struct shm_rc {
	uint64_t key;   /* the entry's key word when cached */
	uint8_t *base;  /* local address of the region's first byte */
	uint64_t addr;  /* region start in the peer's address space */
	uint64_t len;
	int gpu;        /* -1: host mapping; else local CUDA device */
};

struct shm_map {
	uint8_t *ro, *rw;
	size_t ro_len, rw_len;
	uint8_t *dev;   /* GPU memory: device address here */
	size_t dev_len;
	int gpu;        /* local device of dev */
	bool ipc;       /* dev came from rkv_cuda_ipc_open (close it) */
};

struct shm_credit {
	uint64_t ticket; /* CQ ticket of the signaled completion */
	uint32_t count;  /* WRs it covers */
};

struct shm_ep {
	int grant;                       /* atomic: enum rkv_grant */
	bool refusal_logged;             /* a MAP_REQ was refused (ep->lock) */
	const struct sw_mrent *peer_tab; /* read-only mapping; NULL until the
					  * first one-sided WR fetches it */
	uint64_t *db;                    /* doorbell page */
	uint64_t *db_tx, *db_rx;
	uint64_t db_seen;
	uint64_t last_check;             /* ns */
	struct shm_rc *rc;               /* SW_MR_MAX entries, lazily */
	struct shm_map *maps;            /* by peer memid */
	unsigned nmaps;
	/* Send-queue slots of one-sided WRs done in rkv_post: as on verbs
	 * they stay taken until the signaled completion that covers them
	 * has been polled.  Poster only. */
	struct shm_credit *cr;           /* max_send_wr entries */
	uint32_t cr_head, cr_tail;
	uint32_t fast_out;               /* slots taken */
	uint32_t unsig;                  /* unsignaled WRs not yet covered */
	/* A MAP_REQ in flight; guarded by the endpoint's lock. */
	uint64_t map_seq;
	bool map_done;
	int map_fd;
	int map_status;
};

static size_t page_round(size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (len + pg - 1) & ~(pg - 1);
}

static struct shm_tp *shm_of(struct sw_tp *tp)
{
	return container_of(tp, struct shm_tp, sw);
}

static struct shm_ep *sep_get(struct sw_ep *ep)
{
	struct shm_ep *se = ep->prov;

	if (!se) {
		se = rkv_calloc(1, sizeof(*se));
		if (!se)
			return NULL;
		se->map_fd = -1;
		se->grant = ep->passive ? (int)ep->tp->base.opts.accept_grant
					: RKV_GRANT_WRITE;
		ep->prov = se;
	}
	return se;
}

static int shm_ep_grant(struct rkv_ep *bep, enum rkv_grant grant)
{
	struct sw_ep *ep = container_of(bep, struct sw_ep, base);
	struct shm_ep *se;

	pthread_mutex_lock(&ep->lock);
	se = sep_get(ep);
	if (se)
		__atomic_store_n(&se->grant, (int)grant, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ep->lock);
	return se ? 0 : -ENOMEM;
}

/* ------------------------------------------------------------- memory */
/* A memfd of len bytes that can never shrink or grow (a peer that maps it
 * cannot take SIGBUS); with seal_all no other seal can be added later. */
static int new_memfd(const char *name, size_t len, bool seal_all)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)len) ||
	    fcntl(fd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | (seal_all ? F_SEAL_SEAL : 0)) ||
	    fchmod(fd, SHM_EXPORT_MODE)) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

/* Append a memory to the table (ids are indexes, never reused). */
static int mems_add(struct shm_tp *t, int fd, void *base, size_t len, int gpu)
{
	int rc = 0;

	pthread_mutex_lock(&t->mem_lock);
	if (t->nmems == SHM_MAX_MEMS) {
		rc = -ENOMEM;
	} else if (t->nmems == t->mems_cap) {
		unsigned cap = t->mems_cap ? t->mems_cap * 2 : 16;
		struct shm_mem *n = rkv_realloc(t->mems, cap * sizeof(*n));

		if (n) {
			t->mems = n;
			t->mems_cap = cap;
		} else {
			rc = -ENOMEM;
		}
	}
	if (!rc) {
		t->mems[t->nmems].fd = fd;
		t->mems[t->nmems].base = base;
		t->mems[t->nmems].len = len;
		t->mems[t->nmems].gpu = gpu;
		t->nmems++;
	}
	pthread_mutex_unlock(&t->mem_lock);
	return rc;
}

static int shm_mem_alloc(struct rkv_tp *btp, size_t len, void **out)
{
	struct shm_tp *t = shm_of(container_of(btp, struct sw_tp, base));
	size_t plen = page_round(len);
	void *p;
	int fd, rc;

	fd = new_memfd("rkv-shm", plen, true);
	if (fd < 0)
		return fd;
	p = mmap(NULL, plen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		goto close_fd;
	}
	rc = mems_add(t, fd, p, plen, -1);
	if (rc)
		goto unmap;
	*out = p;
	return 0;

unmap:
	munmap(p, plen);
close_fd:
	close(fd);
	return rc;
}

static void shm_mem_free(struct rkv_tp *btp, void *addr, size_t len)
{
	struct shm_tp *t = shm_of(container_of(btp, struct sw_tp, base));

	(void)len;
	pthread_mutex_lock(&t->mem_lock);
	for (unsigned i = 0; i < t->nmems; i++) {
		struct shm_mem *m = &t->mems[i];

		if (m->fd >= 0 && m->gpu < 0 && m->base == addr) {
			munmap(m->base, m->len);
			close(m->fd);
			m->fd = -1;
			m->base = NULL;
			break;
		}
	}
	pthread_mutex_unlock(&t->mem_lock);
}

static int mr_reg_on(struct rkv_tp *btp, void *addr, size_t len,
		     unsigned access, int gpu, struct rkv_mr **out)
{
	struct sw_tp *tp = container_of(btp, struct sw_tp, base);
	struct shm_tp *t = shm_of(tp);
	unsigned memid1 = 0;
	uint64_t memoff = 0;
	struct sw_mr *mr;
	int rc;

	if (access & (RKV_ACCESS_REMOTE_READ | RKV_ACCESS_REMOTE_WRITE |
		      RKV_ACCESS_REMOTE_ATOMIC)) {
		uint8_t *p = addr;

		pthread_mutex_lock(&t->mem_lock);
		for (unsigned i = 0; i < t->nmems; i++) {
			struct shm_mem *m = &t->mems[i];

			if (m->fd >= 0 && m->gpu == gpu && p >= m->base &&
			    p - m->base <= (ptrdiff_t)m->len &&
			    len <= m->len - (size_t)(p - m->base)) {
				memid1 = i + 1;
				memoff = (uint64_t)(p - m->base);
				break;
			}
		}
		pthread_mutex_unlock(&t->mem_lock);
		if (!memid1) {
			rkv_log(RKV_LOG_WARN, "shm",
				"remote access to %p+%zu: not memory from %s",
				addr, len,
				gpu < 0 ? "rkv_tp_mem_alloc"
					: "rkv_tp_mem_alloc_gpu on that GPU");
			if (gpu >= 0)
				snprintf(btp->gpu_why, sizeof(btp->gpu_why),
					 "shm: GPU memory must come from "
					 "rkv_tp_mem_alloc_gpu to be shared");
			return -EFAULT;
		}
	}
	rc = sw_mrtab_reg_gpu(&tp->mrt, addr, len, access, memid1, memoff, gpu,
			      &mr);
	if (rc)
		return rc;
	*out = &mr->base;
	return 0;
}

static int shm_mr_reg(struct rkv_tp *btp, void *addr, size_t len,
		      unsigned access, struct rkv_mr **out)
{
	return mr_reg_on(btp, addr, len, access, -1, out);
}

static int shm_mr_reg_gpu(struct rkv_tp *btp, void *addr, size_t len,
			  unsigned access, int gpu, struct rkv_mr **out)
{
	return mr_reg_on(btp, addr, len, access, gpu, out);
}

/* GPU memory: cudaMalloc, and a sealed descriptor memfd for peers. */
static int shm_mem_alloc_gpu(struct rkv_tp *btp, int gpu, size_t len,
			     void **out)
{
	struct shm_tp *t = shm_of(container_of(btp, struct sw_tp, base));
	size_t glen = (len + RKV_CUDA_ALIGN - 1) & ~(RKV_CUDA_ALIGN - 1);
	struct shm_gpu_desc d;
	void *p = NULL;
	int fd = -1, rc;

	memset(&d, 0, sizeof(d));
	rc = rkv_cuda_malloc(gpu, glen, &p);
	if (rc) {
		snprintf(btp->gpu_why, sizeof(btp->gpu_why),
			 "cudaMalloc of %zu bytes on GPU %d failed: %s", glen,
			 gpu, rkv_cuda_strerror());
		return rc;
	}
	d.magic = SHM_GPU_MAGIC;
	d.version = 1;
	d.pid = (int32_t)getpid();
	d.gpu = gpu;
	d.base = (uint64_t)(uintptr_t)p;
	d.len = glen;
	rc = rkv_cuda_pci_id(gpu, d.pci, sizeof(d.pci));
	if (!rc)
		rc = rkv_cuda_ipc_get(gpu, p, d.handle);
	if (rc) {
		snprintf(btp->gpu_why, sizeof(btp->gpu_why),
			 "shm: no CUDA IPC handle for GPU %d memory: %s", gpu,
			 rkv_cuda_strerror());
		goto free_dev;
	}
	fd = memfd_create("rkv-shm-gpu", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 ||
	    pwrite(fd, &d, sizeof(d), 0) != (ssize_t)sizeof(d) ||
	    fcntl(fd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) ||
	    fchmod(fd, SHM_EXPORT_MODE)) {
		rc = -errno;
		goto close_fd;
	}
	rc = mems_add(t, fd, p, glen, gpu);
	if (rc)
		goto close_fd;
	*out = p;
	return 0;

close_fd:
	if (fd >= 0)
		close(fd);
free_dev:
	rkv_cuda_free(gpu, p);
	return rc ? rc : -EIO;
}

static void shm_mem_free_gpu(struct rkv_tp *btp, int gpu, void *addr,
			     size_t len)
{
	struct shm_tp *t = shm_of(container_of(btp, struct sw_tp, base));

	(void)len;
	pthread_mutex_lock(&t->mem_lock);
	for (unsigned i = 0; i < t->nmems; i++) {
		struct shm_mem *m = &t->mems[i];

		if (m->fd >= 0 && m->gpu == gpu && m->base == addr) {
			rkv_cuda_free(gpu, m->base);
			close(m->fd);
			m->fd = -1;
			m->base = NULL;
			break;
		}
	}
	pthread_mutex_unlock(&t->mem_lock);
}

/* ---------------------------------------------------- handshake and fds */
/* A read-only descriptor of fd's file (a new open file description). */
static int reopen_ro(int fd)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open(path, O_RDONLY | O_CLOEXEC);
}

static int map_fd(int fd, bool rw, size_t want, void **out, size_t *len)
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

/*
 * The connector's HELLO carries its doorbell page (our memory, so nothing
 * of the acceptor's); the acceptor's HELLO_ACK carries nothing: its table
 * and memory go out only by MAP_REQ, under the endpoint's grant.
 */
static int shm_hello_fds(struct sw_tp *tp, struct sw_ep *ep, bool connector,
			 int *fds, bool *close_after, unsigned *nfds)
{
	struct shm_ep *se = sep_get(ep);
	void *p;
	size_t l;
	int dfd, rc;

	(void)tp;
	if (!se)
		return -ENOMEM;
	*nfds = 0;
	if (!connector)
		return 0;
	dfd = new_memfd("rkv-shm-db", SHM_DB_PAGE, true);
	if (dfd < 0)
		return dfd;
	rc = map_fd(dfd, true, SHM_DB_PAGE, &p, &l);
	if (rc) {
		close(dfd);
		return rc;
	}
	se->db = p;
	se->db_tx = &se->db[0];
	se->db_rx = &se->db[8];
	__atomic_store_n(&se->db[SHM_DB_PROTO_C], SHM_PROTO, __ATOMIC_RELEASE);
	fds[0] = dfd;
	close_after[0] = true;
	*nfds = 1;
	return 0;
}

/* Whether the peer on an accepted socket may connect (SO_PEERCRED: as of
 * its connect); -EACCES, logged, if not. */
static int peer_admitted(struct sw_ep *ep)
{
	const struct rkv_tp_opts *o = &ep->tp->base.opts;
	struct ucred cr;
	socklen_t sl = sizeof(cr);

	if (getsockopt(ep->fd, SOL_SOCKET, SO_PEERCRED, &cr, &sl))
		return -errno;
	if (cr.uid == 0 || cr.uid == geteuid())
		return 0;
	for (unsigned i = 0; i < o->shm_nuids; i++)
		if (cr.uid == o->shm_uids[i])
			return 0;
	if (o->shm_gid >= 0) {
		gid_t g[NGROUPS_MAX > 1024 ? 1024 : NGROUPS_MAX];

		if (cr.gid == (gid_t)o->shm_gid)
			return 0;
		sl = sizeof(g);
		if (getsockopt(ep->fd, SOL_SOCKET, SO_PEERGROUPS, g, &sl) == 0)
			for (size_t i = 0; i < sl / sizeof(g[0]); i++)
				if (g[i] == (gid_t)o->shm_gid)
					return 0;
	}
	rkv_log(RKV_LOG_WARN, "shm",
		"%s: peer pid %d uid %u gid %u is not admitted, closing",
		ep->base.peer, (int)cr.pid, (unsigned)cr.uid,
		(unsigned)cr.gid);
	return -EACCES;
}

static int shm_ep_setup(struct sw_ep *ep, const int *fds, unsigned nfds)
{
	struct shm_ep *se = sep_get(ep);
	void *p;
	size_t l;
	int rc;

	if (!se)
		return -ENOMEM;
	if (ep->passive) {
		rc = peer_admitted(ep);
		if (rc)
			return rc;
		if (nfds != 1) {
			rkv_log(RKV_LOG_WARN, "shm",
				"%s: handshake with %u descriptors, not 1 "
				"(a peer of an older shm protocol?)",
				ep->base.peer, nfds);
			return -EPROTO;
		}
		rc = map_fd(fds[0], true, SHM_DB_PAGE, &p, &l);
		if (rc) {
			rkv_log(RKV_LOG_WARN, "shm",
				"%s: bad doorbell descriptor", ep->base.peer);
			return rc;
		}
		se->db = p;
		se->db_tx = &se->db[8];
		se->db_rx = &se->db[0];
		if (__atomic_load_n(&se->db[SHM_DB_PROTO_C],
				    __ATOMIC_ACQUIRE) != SHM_PROTO) {
			rkv_log(RKV_LOG_WARN, "shm",
				"%s: peer speaks another shm protocol",
				ep->base.peer);
			return -EPROTO;
		}
		__atomic_store_n(&se->db[SHM_DB_PROTO_A], SHM_PROTO,
				 __ATOMIC_RELEASE);
	} else if (nfds ||
		   __atomic_load_n(&se->db[SHM_DB_PROTO_A], __ATOMIC_ACQUIRE) !=
			   SHM_PROTO) {
		rkv_log(RKV_LOG_WARN, "shm",
			"%s: the acceptor speaks another shm protocol "
			"(an older rkv?)",
			ep->base.peer);
		return -EPROTO;
	}
	se->cr = rkv_calloc(ep->sq_cap, sizeof(*se->cr));
	if (!se->cr)
		return -ENOMEM;
	se->last_check = rkv_now_ns();
	return 0;
}

static void shm_ep_fini(struct sw_ep *ep)
{
	struct shm_ep *se = ep->prov;

	if (!se)
		return;
	if (se->peer_tab)
		munmap((void *)se->peer_tab, SW_MRTAB_BYTES);
	if (se->db)
		munmap(se->db, SHM_DB_PAGE);
	for (unsigned i = 0; i < se->nmaps; i++) {
		if (se->maps[i].ro)
			munmap(se->maps[i].ro, se->maps[i].ro_len);
		if (se->maps[i].rw)
			munmap(se->maps[i].rw, se->maps[i].rw_len);
		if (se->maps[i].ipc)
			rkv_cuda_ipc_close(se->maps[i].gpu, se->maps[i].dev);
	}
	if (se->map_fd >= 0)
		close(se->map_fd);
	rkv_free(se->maps);
	rkv_free(se->rc);
	rkv_free(se->cr);
	rkv_free(se);
	ep->prov = NULL;
}

static void shm_after_tx(struct sw_ep *ep)
{
	struct shm_ep *se = ep->prov;

	/* Orders after the bytes written: a poller that sees the new count
	 * finds them in the socket. */
	if (se && se->db_tx)
		__atomic_fetch_add(se->db_tx, 1, __ATOMIC_RELEASE);
}

static bool shm_gate(struct sw_ep *ep, unsigned npoll)
{
	struct shm_ep *se = ep->prov;
	uint64_t v;

	if (!se || !se->db_rx)
		return true;
	v = __atomic_load_n(se->db_rx, __ATOMIC_ACQUIRE);
	if (v != se->db_seen) {
		se->db_seen = v;
		return true;
	}
	/* The clock costs ~20 ns: read it every 4th poll only. */
	if ((npoll & 3) == 0) {
		uint64_t now = rkv_now_ns();

		if (now - se->last_check >= SHM_CHECK_NS) {
			se->last_check = now;
			return true;
		}
	}
	return false;
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
static int shm_frame(struct sw_ep *ep, const struct sw_hdr *h)
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
			rkv_log(RKV_LOG_WARN, "shm",
				"%s: refused a %s mapping of %s (grant %s)",
				ep->base.peer, h->arg1 ? "writable" : "read-only",
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
		rkv_log(RKV_LOG_WARN, "shm",
			"%s: GPU region on device %s, which this process "
			"cannot use: %s",
			ep->base.peer, d.pci, rkv_cuda_strerror());
		return rc;
	}
	if (d.pid == (int32_t)getpid()) {
		*dev = (uint8_t *)(uintptr_t)d.base;
		*ipc = false;
	} else {
		rc = rkv_cuda_ipc_open(*gpu, d.handle, &p);
		if (rc) {
			rkv_log(RKV_LOG_WARN, "shm",
				"%s: cannot open the CUDA IPC handle of a GPU "
				"region: %s",
				ep->base.peer, rkv_cuda_strerror());
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
static int tab_get(struct sw_ep *ep, struct shm_ep *se)
{
	void *p;
	size_t l;
	int fd, st, rc;

	st = map_req(ep, se, SHM_MEMID_TABLE, false, &fd);
	if (st != RKV_WC_SUCCESS)
		return st;
	rc = map_fd(fd, false, SW_MRTAB_BYTES, &p, &l);
	close(fd);
	if (rc) {
		rkv_log(RKV_LOG_WARN, "shm", "%s: bad MR table descriptor: %s",
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
		rc = map_fd(fd, rw, 0, &p, &l);
	}
	close(fd);
	if (rc) {
		rkv_log(RKV_LOG_WARN, "shm", "%s: cannot map region %u: %s",
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
static int rc_fill(struct sw_ep *ep, struct shm_ep *se, uint32_t idx,
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

/*
 * A one-sided WR where the target memory p (checked) is on gpu, or, with
 * gpu -1, host memory and the local buffer is on lgpu; done when this
 * returns.  Copies are cudaMemcpyDefault, so host<->device and
 * device<->device (peer) need nothing else.
 */
static int exec_gpu(int tgpu, int lgpu, const struct rkv_wr *wr, uint8_t *p)
{
	int gpu = tgpu >= 0 ? tgpu : lgpu;
	int rc = 0;

	switch (wr->opcode) {
	case RKV_WR_READ:
		rc = rkv_cuda_copy(gpu, wr->local, p, wr->length);
		break;
	case RKV_WR_WRITE:
		rc = rkv_cuda_copy(gpu, p, wr->local, wr->length);
		break;
	case RKV_WR_CAS:
	case RKV_WR_FETCH_ADD: {
		uint64_t old = 0;

		if (tgpu < 0) {
			/* host word, result into local device memory */
			old = wr->opcode == RKV_WR_CAS ? wr->compare_add : 0;
			if (wr->opcode == RKV_WR_CAS)
				__atomic_compare_exchange_n(
					(uint64_t *)(void *)p, &old, wr->swap,
					false, __ATOMIC_SEQ_CST,
					__ATOMIC_SEQ_CST);
			else
				old = __atomic_fetch_add((uint64_t *)(void *)p,
							 wr->compare_add,
							 __ATOMIC_SEQ_CST);
		} else {
			rc = rkv_cuda_atomic64(
				gpu, (uint64_t *)(void *)p,
				wr->opcode == RKV_WR_CAS ? RKV_CUDA_CAS
							 : RKV_CUDA_FADD,
				wr->compare_add, wr->swap, &old);
		}
		if (!rc && lgpu >= 0)
			rc = rkv_cuda_copy(lgpu, wr->local, &old, 8);
		else if (!rc)
			memcpy(wr->local, &old, 8);
		break;
	}
	default:
		return RKV_WC_GENERAL_ERR;
	}
	if (rc) {
		rkv_log(RKV_LOG_WARN, "shm", "%s on GPU %d memory failed: %s",
			rkv_wr_opcode_str(wr->opcode), gpu,
			rkv_cuda_strerror());
		return RKV_WC_REM_OP_ERR;
	}
	return RKV_WC_SUCCESS;
}

/* Execute a one-sided WR now; returns its WC status. */
static int shm_exec(struct sw_ep *ep, struct shm_ep *se,
		    const struct rkv_wr *wr)
{
	uint32_t idx = wr->rkey & SW_MR_IDX_MASK;
	struct shm_rc *c;
	unsigned need;
	uint64_t k, off;
	uint8_t *p;
	int st, lgpu = -1;

	if (wr->length &&
	    sw_mrtab_check_local(&ep->tp->mrt, wr->local, wr->length,
				 wr->lkey, wr->opcode != RKV_WR_WRITE, &lgpu))
		return RKV_WC_LOC_PROT_ERR;
	if (!se->peer_tab) {
		st = tab_get(ep, se);
		if (st != RKV_WC_SUCCESS)
			return st;
	}
	k = __atomic_load_n(&se->peer_tab[idx].key, __ATOMIC_ACQUIRE);
	if (!se->rc || se->rc[idx].key != k) {
		st = rc_fill(ep, se, idx, wr->rkey, k);
		if (st != RKV_WC_SUCCESS)
			return st;
	}
	c = &se->rc[idx];
	if (!(k & SW_KEY_VALID) || (uint32_t)k != wr->rkey)
		return RKV_WC_REM_ACCESS_ERR;
	need = wr->opcode == RKV_WR_READ    ? RKV_ACCESS_REMOTE_READ
	       : wr->opcode == RKV_WR_WRITE ? RKV_ACCESS_REMOTE_WRITE
					    : RKV_ACCESS_REMOTE_ATOMIC;
	if (!(SW_KEY_ACCESS(k) & need))
		return RKV_WC_REM_ACCESS_ERR;
	off = wr->remote_addr - c->addr;
	if (wr->remote_addr < c->addr || wr->length > c->len ||
	    off > c->len - wr->length)
		return RKV_WC_REM_ACCESS_ERR;
	p = c->base + off;
	if (c->gpu >= 0 || lgpu >= 0)
		return exec_gpu(c->gpu, lgpu, wr, p);
	switch (wr->opcode) {
	case RKV_WR_READ:
		if (wr->length)
			memcpy(wr->local, p, wr->length);
		break;
	case RKV_WR_WRITE:
		if (wr->length)
			memcpy(p, wr->local, wr->length);
		break;
	case RKV_WR_CAS: {
		uint64_t old = wr->compare_add;

		__atomic_compare_exchange_n((uint64_t *)(void *)p, &old,
					    wr->swap, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
		*(uint64_t *)wr->local = old;
		break;
	}
	case RKV_WR_FETCH_ADD:
		*(uint64_t *)wr->local = __atomic_fetch_add(
			(uint64_t *)(void *)p, wr->compare_add,
			__ATOMIC_SEQ_CST);
		break;
	default:
		return RKV_WC_GENERAL_ERR;
	}
	return RKV_WC_SUCCESS;
}

/* Whether the send queue has room for one more WR (frees the slots of
 * completions polled since). */
static bool take_slot(struct sw_ep *ep, struct shm_ep *se)
{
	uint64_t done = __atomic_load_n(&ep->cq->consumed, __ATOMIC_ACQUIRE);

	while (se->cr_head != se->cr_tail &&
	       se->cr[se->cr_head % ep->sq_cap].ticket < done) {
		se->fast_out -= se->cr[se->cr_head % ep->sq_cap].count;
		se->cr_head++;
	}
	return se->fast_out +
		       (uint32_t)(ep->sq_tail -
				  __atomic_load_n(&ep->sq_head,
						  __ATOMIC_ACQUIRE)) <
	       ep->sq_cap;
}

static int shm_post(struct rkv_ep *bep, struct rkv_wr *wr, struct rkv_wr **bad)
{
	struct sw_ep *ep = container_of(bep, struct sw_ep, base);
	struct shm_ep *se = ep->prov;

	for (; wr; wr = wr->next) {
		int st = -1, rc;

		if (!take_slot(ep, se)) {
			if (bad)
				*bad = wr;
			return -ENOMEM;
		}
		if (wr->opcode != RKV_WR_SEND &&
		    __atomic_load_n(&ep->base.state, __ATOMIC_ACQUIRE) ==
			    RKV_EP_CONNECTED &&
		    !__atomic_load_n(&ep->err_pending, __ATOMIC_RELAXED)) {
			st = shm_exec(ep, se, wr);
			/* Fast path: nothing outstanding ahead of it. */
			if (st == RKV_WC_SUCCESS &&
			    __atomic_load_n(&ep->sq_head, __ATOMIC_ACQUIRE) ==
				    ep->sq_tail) {
				se->fast_out++;
				if (wr->flags & RKV_WR_SIGNALED) {
					struct rkv_wc wc = {
						.wr_id = wr->wr_id,
						.status = RKV_WC_SUCCESS,
						.opcode = wr->opcode,
						.ep = bep,
					};
					struct shm_credit *c =
						&se->cr[se->cr_tail++ %
							ep->sq_cap];

					c->ticket = sw_cq_push(ep->cq, &wc);
					c->count = se->unsig + 1;
					se->unsig = 0;
				} else {
					se->unsig++;
				}
				continue;
			}
		}
		/* The engine's queue accounts for this one; unsignaled WRs
		 * before it are let go (approximation, keeps slots from
		 * leaking). */
		se->fast_out -= se->unsig;
		se->unsig = 0;
		pthread_mutex_lock(&ep->lock);
		rc = sw_ep_post_one_locked(ep, wr, st, rkv_now_ns());
		sw_ep_tx_commit(ep);
		sw_ep_settle_locked(ep);
		pthread_mutex_unlock(&ep->lock);
		if (rc) {
			if (bad)
				*bad = wr;
			return rc;
		}
	}
	return 0;
}

/* ------------------------------------------------------------- sockets */
static const char *shm_dir(void)
{
	const char *d = getenv("RKV_SHM_DIR");

	return d && *d ? d : SHM_DIR_DEFAULT;
}

/* The socket file of shm:///name; -ENAMETOOLONG when it does not fit. */
static int un_addr(const char *name, struct sockaddr_un *sa, socklen_t *sl)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", shm_dir(),
		     name);
	if (n < 0 || (size_t)n >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	*sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n +
			  1);
	return 0;
}

/* Bind fd to sa; a socket file nobody listens on (a dead process's) is
 * replaced, anything else is left alone (-EADDRINUSE). */
static int bind_path(int fd, const struct sockaddr_un *sa, socklen_t sl)
{
	struct stat st;
	int probe, rc;

	if (!bind(fd, (const struct sockaddr *)sa, sl))
		return 0;
	if (errno != EADDRINUSE)
		return -errno;
	if (lstat(sa->sun_path, &st) || !S_ISSOCK(st.st_mode))
		return -EADDRINUSE;
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe < 0)
		return -errno;
	rc = connect(probe, (const struct sockaddr *)sa, sl) ? -errno : 0;
	close(probe);
	if (rc != -ECONNREFUSED)
		return -EADDRINUSE;
	if (unlink(sa->sun_path) && errno != ENOENT)
		return -EADDRINUSE;
	return bind(fd, (const struct sockaddr *)sa, sl) ? -errno : 0;
}

static int shm_listen(struct rkv_tp *btp, const struct rkv_tp_addr *a,
		      struct rkv_listener **out)
{
	struct sw_tp *tp = container_of(btp, struct sw_tp, base);
	struct shm_tp *t = shm_of(tp);
	const struct rkv_tp_opts *o = &btp->opts;
	struct sockaddr_un sa;
	struct shm_lis *li;
	struct stat st;
	socklen_t sl;
	char addr[128];
	const char *why = "bind";
	int fd, rc;

	rc = un_addr(a->name, &sa, &sl);
	if (rc)
		return rc;
	li = rkv_calloc(1, sizeof(*li));
	if (!li)
		return -ENOMEM;
	if (mkdir(shm_dir(), 0755) && errno != EEXIST) {
		rc = -errno;
		rkv_log(RKV_LOG_WARN, "shm",
			"listen on shm:///%s: cannot make %s: %s (set "
			"RKV_SHM_DIR to a directory of yours)",
			a->name, shm_dir(), strerror(-rc));
		goto free_li;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		goto free_li;
	}
	rc = bind_path(fd, &sa, sl);
	if (rc)
		goto close_fd;
	/* Nobody can connect before listen(): set who may, first. */
	why = "chmod/chown";
	if (chmod(sa.sun_path, o->shm_mode) ||
	    (o->shm_gid >= 0 && chown(sa.sun_path, (uid_t)-1,
				      (gid_t)o->shm_gid)) ||
	    lstat(sa.sun_path, &st)) {
		rc = -errno;
		goto unlink_path;
	}
	why = "listen";
	if (listen(fd, 128)) {
		rc = -errno;
		goto unlink_path;
	}
	snprintf(addr, sizeof(addr), "shm:///%s", a->name);
	rc = sw_listener_create(tp, fd, addr, out);
	if (rc)
		goto unlink_path;
	memcpy(li->path, sa.sun_path, sizeof(li->path));
	li->dev = st.st_dev;
	li->ino = st.st_ino;
	li->pid = getpid();
	li->l = *out;
	pthread_mutex_lock(&t->mem_lock);
	li->next = t->lis;
	t->lis = li;
	pthread_mutex_unlock(&t->mem_lock);
	return 0;

unlink_path:
	unlink(sa.sun_path);
close_fd:
	rkv_log(RKV_LOG_WARN, "shm", "listen on shm:///%s (%s): %s: %s",
		a->name, sa.sun_path, why, strerror(-rc));
	close(fd);
free_li:
	rkv_free(li);
	return rc;
}

static void shm_listener_destroy(struct rkv_listener *bl)
{
	struct sw_listener *l = container_of(bl, struct sw_listener, base);
	struct shm_tp *t = shm_of(l->tp);
	struct shm_lis **pp, *li = NULL;
	struct stat st;

	pthread_mutex_lock(&t->mem_lock);
	for (pp = &t->lis; *pp; pp = &(*pp)->next) {
		if ((*pp)->l == bl) {
			li = *pp;
			*pp = li->next;
			break;
		}
	}
	pthread_mutex_unlock(&t->mem_lock);
	/* Only the binder removes the file, and only while it is ours (a
	 * forked child's copy, or a successor's socket, stays). */
	if (li && li->pid == getpid() && !lstat(li->path, &st) &&
	    st.st_dev == li->dev && st.st_ino == li->ino)
		unlink(li->path);
	rkv_free(li);
	sw_listener_destroy(bl);
}

static int shm_connect(struct rkv_tp *btp, const struct rkv_tp_addr *a,
		       struct rkv_cq *bcq, int timeout_ms, struct rkv_ep **out)
{
	struct sw_tp *tp = container_of(btp, struct sw_tp, base);
	struct sw_cq *cq = container_of(bcq, struct sw_cq, base);
	uint64_t deadline = rkv_now_ns() + (uint64_t)(timeout_ms < 0 ? 0
								: timeout_ms) *
						   1000000ull;
	struct sockaddr_un sa;
	socklen_t sl;
	char peer[128];
	int fd, left, rc;

	rc = un_addr(a->name, &sa, &sl);
	if (rc)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A full backlog answers EAGAIN: retry until the deadline. */
	while (connect(fd, (struct sockaddr *)&sa, sl)) {
		rc = -errno;

		if (rc != -EAGAIN && rc != -EINTR) {
			close(fd);
			return rc == -ENOENT ? -ECONNREFUSED : rc;
		}
		if (timeout_ms >= 0 && rkv_now_ns() >= deadline) {
			close(fd);
			return -ETIMEDOUT;
		}
		poll(NULL, 0, 1);
	}
	snprintf(peer, sizeof(peer), "shm:///%s", a->name);
	left = timeout_ms;
	if (timeout_ms > 0) {
		uint64_t now = rkv_now_ns();

		left = now >= deadline ? 1
				       : (int)((deadline - now) / 1000000ull) + 1;
	}
	return sw_connect_finish(tp, cq, fd, peer, left, out);
}

/* --------------------------------------------------------------- context */
static const struct sw_prov shm_prov = {
	.comp = "shm",
	.remote_exec = false,
	.unix_fds = true,
	.frame = shm_frame,
	.gate = shm_gate,
	.after_tx = shm_after_tx,
	.ep_setup = shm_ep_setup,
	.ep_fini = shm_ep_fini,
	.hello_fds = shm_hello_fds,
};

static int shm_create(const struct rkv_tp_opts *opts, struct rkv_tp **out)
{
	struct shm_tp *t = rkv_calloc(1, sizeof(*t));
	void *p;
	int rc;

	if (!t)
		return -ENOMEM;
	t->tab_fd = new_memfd("rkv-shm-mrtab", SW_MRTAB_BYTES, false);
	if (t->tab_fd < 0) {
		rc = t->tab_fd;
		goto free_t;
	}
	p = mmap(NULL, SW_MRTAB_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
		 t->tab_fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		goto close_tab;
	}
	t->tab = p;
	/* Ours stays the only writable mapping there will ever be. */
	if (fcntl(t->tab_fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL)) {
		rc = -errno;
		goto unmap_tab;
	}
	if (pthread_mutex_init(&t->mem_lock, NULL)) {
		rc = -ENOMEM;
		goto unmap_tab;
	}
	rc = sw_tp_init(&t->sw, &shm_prov, t->tab);
	if (rc)
		goto destroy_lock;
	snprintf(t->sw.base.describe, sizeof(t->sw.base.describe),
		 "shm (memfd mappings, initiator-side loads/stores/atomics, timeout %u ms)",
		 opts->timeout_ms);
	*out = &t->sw.base;
	return 0;

destroy_lock:
	pthread_mutex_destroy(&t->mem_lock);
unmap_tab:
	munmap(t->tab, SW_MRTAB_BYTES);
close_tab:
	close(t->tab_fd);
free_t:
	rkv_free(t);
	return rc;
}

static void shm_destroy(struct rkv_tp *btp)
{
	struct shm_tp *t = shm_of(container_of(btp, struct sw_tp, base));

	sw_tp_fini(&t->sw);
	while (t->lis) { /* listeners not destroyed: forget, keep the file */
		struct shm_lis *li = t->lis;

		t->lis = li->next;
		rkv_free(li);
	}
	for (unsigned i = 0; i < t->nmems; i++) {
		if (t->mems[i].fd < 0)
			continue;
		if (t->mems[i].gpu >= 0)
			rkv_cuda_free(t->mems[i].gpu, t->mems[i].base);
		else
			munmap(t->mems[i].base, t->mems[i].len);
		close(t->mems[i].fd);
	}
	rkv_free(t->mems);
	pthread_mutex_destroy(&t->mem_lock);
	munmap(t->tab, SW_MRTAB_BYTES);
	close(t->tab_fd);
	rkv_free(t);
}

const struct rkv_tp_ops rkv_tp_shm_ops = {
	.name = "shm",
	.create = shm_create,
	.destroy = shm_destroy,
	.mem_alloc = shm_mem_alloc,
	.mem_free = shm_mem_free,
	.mr_reg = shm_mr_reg,
	.mr_dereg = sw_mr_dereg,
	.mem_alloc_gpu = shm_mem_alloc_gpu,
	.mem_free_gpu = shm_mem_free_gpu,
	.mr_reg_gpu = shm_mr_reg_gpu,
	.cq_create = sw_cq_create,
	.cq_destroy = sw_cq_destroy,
	.cq_poll = sw_cq_poll,
	.cq_wait = sw_cq_wait,
	.listen = shm_listen,
	.listener_destroy = shm_listener_destroy,
	.accept = sw_accept,
	.connect = shm_connect,
	.ep_destroy = sw_ep_destroy,
	.post = shm_post,
	.post_recv = sw_ep_post_recv,
	.ep_grant = shm_ep_grant,
};
