/* SPDX-License-Identifier: MIT */
/*
 * shm.c - the shm provider: same-host transport over memfd mappings.  This
 * file holds the context and its memory; shm_conn.c the socket, handshake
 * and admission, shm_map.c what a peer may map and the initiator's
 * mappings of it, shm_post.c the one-sided operations.
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
 * Exported memfds are mode 0400, so a peer of another uid cannot reopen
 * its read-only fd through /proc/self/fd writable; the MR table is also
 * sealed F_SEAL_FUTURE_WRITE after we mapped it, so nobody (root included)
 * can map it writable.
 *
 * GPU regions (rkv_tp_mem_alloc_gpu): the memory is cudaMalloc'ed and its
 * "memfd" is a small sealed descriptor (struct shm_gpu_desc: CUDA IPC
 * handle, device PCI id, length, owner pid) that rides the same MAP_REQ /
 * SCM_RIGHTS path (shm_map.c, shm_post.c).
 */
#include "shm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../alloc.h"
#include "../log.h"
#include "../rtime.h"

#define SHM_MAX_MEMS 65535u
#define SHM_EXPORT_MODE 0400 /* of every memfd a peer may receive */

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

static size_t page_round(size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (len + pg - 1) & ~(pg - 1);
}

struct shm_ep *shm_ep_get(struct sw_ep *ep)
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
	se = shm_ep_get(ep);
	if (se)
		__atomic_store_n(&se->grant, (int)grant, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ep->lock);
	return se ? 0 : -ENOMEM;
}

/* ------------------------------------------------------------- memory */
/* A memfd of len bytes that can never shrink or grow (a peer that maps it
 * cannot take SIGBUS); with seal_all no other seal can be added later. */
int shm_memfd_new(const char *name, size_t len, bool seal_all)
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

	fd = shm_memfd_new("rkv-shm", plen, true);
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

/*
 * rkv_tp_mem_renew: a fresh memfd, filled by move while mapped aside, then
 * mapped over the old one at the same address (MAP_FIXED replaces the
 * mapping in one step: our own accesses see either memfd, and move left
 * both alike).  The memory gets a new id, so a peer that asks for it maps
 * the new memfd; a peer's mapping of the old id stays what it was.
 */
static int shm_mem_renew(struct rkv_tp *btp, void *addr, size_t len,
			 rkv_tp_move_fn move, void *arg)
{
	struct shm_tp *t = shm_of(container_of(btp, struct sw_tp, base));
	struct shm_mem *m = NULL;
	unsigned id = 0;
	void *aside, *p;
	size_t plen;
	int fd, rc, old_fd;

	pthread_mutex_lock(&t->mem_lock);
	for (unsigned i = 0; i < t->nmems; i++) {
		if (t->mems[i].fd >= 0 && t->mems[i].gpu < 0 &&
		    t->mems[i].base == addr && page_round(len) == t->mems[i].len) {
			m = &t->mems[i];
			id = i;
			break;
		}
	}
	rc = !m ? -EINVAL : t->nmems >= SHM_MAX_MEMS ? -ENOMEM : 0;
	plen = m ? m->len : 0;
	pthread_mutex_unlock(&t->mem_lock);
	if (rc)
		return rc;
	fd = shm_memfd_new("rkv-shm", plen, true);
	if (fd < 0)
		return fd;
	aside = mmap(NULL, plen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (aside == MAP_FAILED) {
		rc = -errno;
		close(fd);
		return rc;
	}
	/* The table grows first, so nothing can fail after move ran. */
	rc = mems_add(t, -1, NULL, 0, -1);
	if (rc) {
		munmap(aside, plen);
		close(fd);
		return rc;
	}
	move(aside, addr, len, arg);
	p = mmap(addr, plen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 fd, 0);
	munmap(aside, plen);
	pthread_mutex_lock(&t->mem_lock);
	m = &t->mems[id];
	old_fd = m->fd;
	if (p == MAP_FAILED) {
		/* (MAP_FIXED over our own mapping of the same size does not
		 * fail short of the kernel running out of memory; the old
		 * memory then stays, moved out) */
		rc = -errno;
		close(fd);
		old_fd = -1;
	} else {
		m->fd = -1;
		m->base = NULL;
		t->mems[t->nmems - 1].fd = fd;
		t->mems[t->nmems - 1].base = addr;
		t->mems[t->nmems - 1].len = plen;
	}
	pthread_mutex_unlock(&t->mem_lock);
	if (old_fd >= 0)
		close(old_fd);
	return rc;
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
			sw_log(tp, RKV_LOG_WARN,
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
	t->tab_fd = shm_memfd_new("rkv-shm-mrtab", SW_MRTAB_BYTES, false);
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
	shm_lis_forget(t);
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
	.mem_renew = shm_mem_renew,
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
	.listener_fd = sw_listener_fd,
	.accept = sw_accept,
	.connect = shm_connect,
	.ep_destroy = sw_ep_destroy,
	.post = shm_post,
	.post_recv = sw_ep_post_recv,
	.ep_grant = shm_ep_grant,
};
