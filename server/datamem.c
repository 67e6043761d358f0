/* SPDX-License-Identifier: MIT */
/*
 * datamem.c - the server's data-region backend (datamem.h): a thin layer
 * over common/mem.h that picks the transport's host or GPU allocation and
 * registration calls.
 */
#include "datamem.h"

#include <errno.h>

#include "alloc.h"
#include "mem.h"

struct rkv_srv_datamem {
	struct rkv_mem *mem; /* host or CUDA backend */
};

int rkv_srv_datamem_open(int gpu, char *why, size_t whylen,
			 struct rkv_srv_datamem **out)
{
	struct rkv_srv_datamem *dm;
	int rc;

	*out = NULL;
	dm = rkv_calloc(1, sizeof(*dm));
	if (!dm)
		return -ENOMEM;
	rc = rkv_mem_open(gpu, why, whylen, &dm->mem);
	if (rc) {
		rkv_free(dm);
		return rc;
	}
	*out = dm;
	return 0;
}

void rkv_srv_datamem_close(struct rkv_srv_datamem **dm)
{
	if (!dm || !*dm)
		return;
	rkv_mem_close(&(*dm)->mem);
	rkv_free(*dm);
	*dm = NULL;
}

int rkv_srv_datamem_gpu(const struct rkv_srv_datamem *dm)
{
	return dm->mem->gpu;
}

const char *rkv_srv_datamem_describe(const struct rkv_srv_datamem *dm)
{
	return dm->mem->describe;
}

int rkv_srv_datamem_alloc(struct rkv_srv_datamem *dm, struct rkv_tp *tp,
			  size_t len, void **out)
{
	if (dm->mem->gpu < 0)
		return rkv_tp_mem_alloc(tp, len, out);
	/* rkv_tp_mem_alloc_gpu zeroes (cudaMemset) */
	return rkv_tp_mem_alloc_gpu(tp, dm->mem->gpu, len, out);
}

void rkv_srv_datamem_free(struct rkv_srv_datamem *dm, struct rkv_tp *tp,
			  void *p, size_t len)
{
	if (!p)
		return;
	if (dm->mem->gpu < 0)
		rkv_tp_mem_free(tp, p, len);
	else
		rkv_tp_mem_free_gpu(tp, dm->mem->gpu, p, len);
}

int rkv_srv_datamem_reg(struct rkv_srv_datamem *dm, struct rkv_tp *tp,
			void *p, size_t len, unsigned access,
			struct rkv_mr **out)
{
	if (dm->mem->gpu < 0)
		return rkv_mr_reg(tp, p, len, access, out);
	return rkv_mr_reg_gpu(tp, p, len, access, dm->mem->gpu, out);
}
