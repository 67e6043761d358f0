/* SPDX-License-Identifier: MIT */
/* shm.c - placeholder until the shm provider lands: every call fails. */
#include "transport_internal.h"

#include <errno.h>

static int shm_create(const struct rkv_tp_opts *opts, struct rkv_tp **out)
{
	(void)opts;
	(void)out;
	return -ENOSYS;
}

const struct rkv_tp_ops rkv_tp_shm_ops = {
	.name = "shm",
	.create = shm_create,
};
