/* SPDX-License-Identifier: MIT */
/*
 * verbs_mr.c - memory of the verbs provider: rkv_tp_mem_alloc, host and
 * GPU (GPUDirect RDMA) registrations, and the context's lkey table that
 * the datapath checks local buffers against (verbs_post.c).
 */
#include "verbs_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../alloc.h"
#include "../gpu/gpu.h"
#include "../log.h"

static size_t page_round(size_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t p = pg > 0 ? (size_t)pg : 4096;

	return (len + p - 1) / p * p;
}

int verbs_mem_alloc(struct rkv_tp *tp, size_t len, void **out)
{
	void *p;

	(void)tp;
	if (page_round(len) < len)
		return -EINVAL;
	p = mmap(NULL, page_round(len), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return rkv_verbs_neg_errno(ENOMEM);
	*out = p;
	return 0;
}

void verbs_mem_free(struct rkv_tp *tp, void *addr, size_t len)
{
	(void)tp;
	if (munmap(addr, page_round(len)))
		verbs_log(tp, RKV_LOG_WARN, "munmap(%p, %zu): %s", addr, len,
			  strerror(errno));
}

/* The MR's own access: a windowed MR (where this context binds windows)
 * gets none remote, only the right to bind windows (verbs_mw.c). */
static int ibv_access_of(const struct verbs_tp *vt, unsigned a)
{
	int f = 0;

	if ((a & RKV_ACCESS_WINDOWED) && vt->base.windows)
		return ((a & RKV_ACCESS_LOCAL_WRITE) ? IBV_ACCESS_LOCAL_WRITE
						     : 0) |
		       IBV_ACCESS_MW_BIND;

	if (a & RKV_ACCESS_LOCAL_WRITE)
		f |= IBV_ACCESS_LOCAL_WRITE;
	if (a & RKV_ACCESS_REMOTE_WRITE)
		f |= IBV_ACCESS_REMOTE_WRITE;
	if (a & RKV_ACCESS_REMOTE_READ)
		f |= IBV_ACCESS_REMOTE_READ;
	if (a & RKV_ACCESS_REMOTE_ATOMIC)
		f |= IBV_ACCESS_REMOTE_ATOMIC;
	return f;
}

static void mr_insert(struct verbs_tp *vt, struct verbs_mr *vm)
{
	unsigned b;

	vm->base.lkey = vm->mr->lkey;
	vm->base.rkey = vm->mr->rkey;
	b = verbs_mr_bucket(vm->base.lkey);
	pthread_mutex_lock(&vt->mr_lock);
	vm->hnext = vt->mr_tab[b];
	vt->mr_tab[b] = vm;
	pthread_mutex_unlock(&vt->mr_lock);
}

int verbs_mr_reg(struct rkv_tp *tp, void *addr, size_t len,
			unsigned access, struct rkv_mr **out)
{
	struct verbs_tp *vt = container_of(tp, struct verbs_tp, base);
	struct verbs_mr *vm;
	int rc;

	vm = rkv_calloc(1, sizeof(*vm));
	if (!vm)
		return -ENOMEM;
	errno = 0;
	vm->mr = ibv_reg_mr(vt->pd, addr, len, ibv_access_of(vt, access));
	if (!vm->mr) {
		rc = rkv_verbs_neg_errno(ENOMEM);
		verbs_log(tp, RKV_LOG_ERROR,
			  "ibv_reg_mr(%p, %zu, access 0x%x): %s", addr, len,
			  access, strerror(-rc));
		rkv_free(vm);
		return rc;
	}
	mr_insert(vt, vm);
	*out = &vm->base;
	return 0;
}

/*
 * GPUDirect RDMA.  First dma-buf: the CUDA driver exports the range as a
 * dma-buf fd (cuMemGetHandleForAddressRange) and the NIC driver maps it
 * (ibv_reg_dmabuf_mr; iova = the device address, so remote addresses are
 * the same as on every other provider).  Else plain ibv_reg_mr, which works
 * when a peer-memory client (nvidia-peermem) lets the NIC driver pin GPU
 * pages.  Else fail, saying what each step lacked: never a silent bounce
 * through host memory.
 */
int verbs_mr_reg_gpu(struct rkv_tp *tp, void *addr, size_t len,
			    unsigned access, int gpu, struct rkv_mr **out)
{
	struct verbs_tp *vt = container_of(tp, struct verbs_tp, base);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(pg - 1);
	size_t off = (uintptr_t)addr - a;
	size_t elen = (off + len + pg - 1) & ~(pg - 1);
	char why_dmabuf[200] = "", why_peer[160] = "";
	struct verbs_mr *vm;
	int fd = -1, rc;

	vm = rkv_calloc(1, sizeof(*vm));
	if (!vm)
		return -ENOMEM;
	rc = rkv_cuda_dmabuf_fd(gpu, (void *)a, elen, &fd, why_dmabuf,
				sizeof(why_dmabuf));
	if (rc == 0) {
		errno = 0;
		vm->mr = ibv_reg_dmabuf_mr(vt->pd, off, len,
					   (uint64_t)(uintptr_t)addr, fd,
					   ibv_access_of(vt, access));
		if (!vm->mr)
			snprintf(why_dmabuf, sizeof(why_dmabuf),
				 "ibv_reg_dmabuf_mr failed: %s (the RDMA "
				 "driver or kernel has no dma-buf support)",
				 strerror(errno ? errno : EOPNOTSUPP));
		close(fd);
	}
	if (!vm->mr) {
		errno = 0;
		vm->mr = ibv_reg_mr(vt->pd, addr, len, ibv_access_of(vt, access));
		if (!vm->mr)
			snprintf(why_peer, sizeof(why_peer),
				 "ibv_reg_mr failed: %s (no peer-memory "
				 "support: is the nvidia-peermem module "
				 "loaded?)",
				 strerror(errno ? errno : EFAULT));
		else
			verbs_log(tp, RKV_LOG_INFO,
				  "GPU %d memory registered through peer memory "
				  "(dma-buf: %s)", gpu, why_dmabuf);
	}
	if (!vm->mr) {
		snprintf(tp->gpu_why, sizeof(tp->gpu_why),
			 "GPU %d memory cannot be registered for GPUDirect "
			 "RDMA on %s: dma-buf: %s; peer memory: %s",
			 gpu, ibv_get_device_name(vt->ctx->device), why_dmabuf,
			 why_peer);
		verbs_log(tp, RKV_LOG_ERROR, "%s", tp->gpu_why);
		rkv_free(vm);
		return -EOPNOTSUPP;
	}
	mr_insert(vt, vm);
	*out = &vm->base;
	return 0;
}

int verbs_mr_dereg(struct rkv_mr *mr)
{
	struct verbs_mr *vm = container_of(mr, struct verbs_mr, base);
	struct verbs_tp *vt = container_of(mr->tp, struct verbs_tp, base);
	struct verbs_mr **pp;
	int rc;

	pthread_mutex_lock(&vt->mr_lock);
	verbs_mr_drop_windows(vt, vm); /* their rkeys die first */
	rc = ibv_dereg_mr(vm->mr);
	if (rc == 0) {
		for (pp = &vt->mr_tab[verbs_mr_bucket(mr->lkey)]; *pp;
		     pp = &(*pp)->hnext) {
			if (*pp == vm) {
				*pp = vm->hnext;
				break;
			}
		}
		/* Invalidates the endpoints' inline caches; pairs with the
		 * acquire load in local_ok().  Skips 0, the "empty" value. */
		if (atomic_fetch_add_explicit(&vt->mr_gen, 1,
					      memory_order_release) + 1 == 0)
			atomic_fetch_add_explicit(&vt->mr_gen, 1,
						  memory_order_release);
	}
	pthread_mutex_unlock(&vt->mr_lock);
	if (rc) {
		verbs_log(mr->tp, RKV_LOG_ERROR, "ibv_dereg_mr(lkey 0x%x): %s",
			  mr->lkey, strerror(rc));
		return -rc;
	}
	rkv_free(vm);
	return 0;
}
