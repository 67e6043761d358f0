/* SPDX-License-Identifier: MIT */
/*
 * counter_region.c - the counter region's name table.  The region is
 * cfg.counters 8-byte words registered for remote read, write and atomics;
 * clients change the words only with one-sided FETCH_ADD / CAS and read
 * them with READ, so the server never touches a word after start (the
 * memory comes zeroed from rkv_tp_mem_alloc).  This file only maps names
 * to word indexes for COUNTER_OPEN: the first open of a name takes the
 * next unnamed word, later opens of the same name get the same index, and
 * a name is never unmapped while the server runs (a word's value outlives
 * every client that used it; reuse a name only for the same purpose).
 *
 * The lookup is a linear scan: COUNTER_OPEN is a control-plane request
 * made once per barrier or counter, and the table is at most 2^20 names.
 */
#include <errno.h>
#include <string.h>

#include "server_internal.h"

int rkv_srv_counter_lookup(struct rkv_srv *srv, const char *name)
{
	size_t len;

	if (!srv->ctr_names || !srv->cfg.counters)
		return -ENODEV;
	len = strnlen(name, RKV_COUNTER_NAME_MAX);
	if (len == 0 || len == RKV_COUNTER_NAME_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < srv->ctr_used; i++)
		if (strcmp(srv->ctr_names[i], name) == 0)
			return (int)i;
	if (srv->ctr_used >= srv->cfg.counters)
		return -ENOSPC;
	memcpy(srv->ctr_names[srv->ctr_used], name, len + 1);
	return (int)srv->ctr_used++;
}
