/* SPDX-License-Identifier: MIT */
/*
 * chunks.h - a client's space on one server: the chunks granted to it,
 * carved into blocks by a bump pointer, and the blocks it hands back.
 *
 * A chunk comes with a grant id; every block carved from it carries that
 * id in its header and every return names it, so the server frees a
 * returned block only while that grant still owns it (server/space.c).
 * The first CHUNK_ALLOC asks for 16 KiB, each later one twice as much up
 * to the server's chunk size: a short-lived client keeps little.
 */
#ifndef RKV_CLIENT_CHUNKS_H
#define RKV_CLIENT_CHUNKS_H

#include <stdint.h>

#include "conn.h"

#define CHUNKS_MAX 8          /* chunks held per server at once */

struct chunk {
	uint64_t off;        /* data-region offset */
	uint64_t len;
	uint64_t used;       /* bump pointer */
	uint32_t grant;      /* grant id: blocks carry it, returns name it */
	unsigned pending;    /* carved blocks not yet published or returned */
	int active;          /* 1: carving from it; 0: retiring */
	int in_use;
};

struct space {
	struct peer *p;
	struct chunk chunk[CHUNKS_MAX];
	int chunk_req;            /* a CHUNK_ALLOC is in flight ... */
	int chunk_ahead;          /* ... asked ahead of need (space_alloc) */
	uint32_t chunk_next;      /* bytes the next CHUNK_ALLOC asks for */
	int err;                  /* -ENOSPC from the last grant, until ... */
	uint64_t err_ms;          /* ... this time (ask again later) */
	uint64_t busy_since_ms;   /* first -EBUSY (space in grace) of a run */
	struct rkv_extent *ret;   /* blocks to return */
	unsigned ret_n, ret_cap;
	uint64_t ret_oldest_ms;
	/* a CHUNK_ALLOC was answered (or failed): ops parked for space go
	 * on (set by the op layer) */
	void (*ready)(void *arg, struct space *sp);
	void *ready_arg;
};

/* A block being carved: where, and what its header and return name. */
struct blk_ref {
	uint64_t off;
	int chunk;
	uint32_t grant;
};

void space_init(struct space *sp, struct peer *p);
void space_fini(struct space *sp);
/* Carve size bytes into *b.  0, -EAGAIN (a chunk was asked for: wait for
 * ready), or -errno (-ENOSPC, -EACCES for a read-only client, the link's
 * error). */
int space_alloc(struct space *sp, uint32_t size, struct blk_ref *b);
/* A block carved from chunk ci was published or returned. */
void space_settle(struct space *sp, int ci);
/* Queue [off, off + size) of grant for a BLOCK_RETURN. */
void space_return(struct space *sp, uint64_t off, uint32_t size,
		  uint32_t grant);
/* Once per ms: send returns that waited long enough, retire chunks. */
void space_tick(struct space *sp, uint64_t now_ms);
/* 1 while a CHUNK_ALLOC is in flight. */
int space_asking(const struct space *sp);
/* Leaving: hand back the unwritten tails, stop carving. */
void space_leave(struct space *sp);
/* Leaving: send what is queued; returns what is still outstanding
 * (returns, chunks to retire), 0 when done. */
unsigned space_drain(struct space *sp);

#endif
