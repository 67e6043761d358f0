/* SPDX-License-Identifier: MIT */
/* tcp.c - placeholder until the tcp provider lands: every call fails. */
#include "transport_internal.h"

#include <errno.h>

static int tcp_create(const struct rkv_tp_opts *opts, struct rkv_tp **out)
{
	(void)opts;
	(void)out;
	return -ENOSYS;
}

const struct rkv_tp_ops rkv_tp_tcp_ops = {
	.name = "tcp",
	.create = tcp_create,
};
