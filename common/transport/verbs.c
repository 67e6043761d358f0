/* SPDX-License-Identifier: MIT */
/* verbs.c - placeholder until the verbs provider lands: every call fails. */
#include "transport_internal.h"

#include <errno.h>
#include <stddef.h>

static int verbs_create(const struct rkv_tp_opts *opts, struct rkv_tp **out)
{
	(void)opts;
	(void)out;
	return -ENOSYS;
}

const struct rkv_tp_ops rkv_tp_verbs_ops = {
	.name = "verbs",
	.create = verbs_create,
};

int rkv_tp_verbs_available(char *why, size_t whylen)
{
	if (why && whylen)
		why[0] = '\0';
	return 0;
}
