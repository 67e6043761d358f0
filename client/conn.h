/* SPDX-License-Identifier: MIT */
/*
 * conn.h - librkv's servers: the list a client was given, and for each a
 * peer (the client's handle on that server): its link, its control
 * channel, and the geometry its HELLO_REPLY described.
 */
#ifndef RKV_CLIENT_CONN_H
#define RKV_CLIENT_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "link_ctrl.h"
#include "layout.h"

#define MAX_SERVERS 256
#define PEER_ADDR_MAX 300

/* A server's regions and rules, from HELLO_REPLY (rkeys: ctrl.keys). */
struct geom {
	uint32_t client_id;       /* stamped into our blocks' headers */
	uint64_t index_addr, nbuckets;
	uint64_t data_addr, data_len;
	uint32_t chunk_size, lease_ms, grace_ms;
	uint64_t counters_addr;   /* counter region (0 words: none) */
	uint32_t counters_count;
};

struct peer {
	unsigned idx;             /* position in the client's list */
	char addr[PEER_ADDR_MAX];
	struct link link;
	struct ctrl ctrl;
	struct geom g;
};

/* What connecting needs from the client's options. */
struct conn_opts {
	const char *name;         /* HELLO name */
	int read_only;
	unsigned timeout_ms;      /* connect and each handshake step */
	const unsigned char *secret; /* NULL: none */
	size_t secret_len;
};

/* The servers of opts->servers ("a,b,c") or of the cluster file (one per
 * line, # comments), into addrs[MAX_SERVERS].  Returns the count (> 0),
 * -EINVAL (none, too many, an address too long) or a file's -errno. */
int conn_parse_servers(const char *servers, const char *cluster_file,
		       char (*addrs)[PEER_ADDR_MAX]);
/* The secret of the options (bytes, or a file like rkv-server's
 * --secret-file), copied into *out (rkv_malloc; NULL: none).  why gets
 * the reason of a failure. */
int conn_load_secret(const void *secret, size_t secret_len,
		     const char *secret_file, unsigned char **out,
		     size_t *out_len, char *why, size_t why_len);

/* Set p up as server idx at addr, its control buffers at ctrl_mem. */
void peer_init(struct peer *p, struct engine *e, unsigned idx,
	       const char *addr, char *ctrl_mem);
/* Connect, HELLO, authenticate, take the geometry.  0 or -errno (the
 * reason logged). */
int peer_connect(struct peer *p, const struct conn_opts *o);

static inline uint64_t peer_slot_addr(const struct peer *p, uint64_t bucket,
				      unsigned i)
{
	return p->g.index_addr + bucket * RKV_BUCKET_SIZE + i * 8u;
}

#endif
