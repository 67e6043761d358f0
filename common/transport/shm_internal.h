/* SPDX-License-Identifier: MIT */
/*
 * shm_internal.h - objects of the shm provider, shared by shm.c (context
 * and memory), shm_conn.c (socket files, handshake, doorbell), shm_map.c
 * (grants and mappings) and shm_post.c (one-sided operations).  The
 * provider runs on the software engine of sw.h: a struct shm_tp embeds a
 * struct sw_tp, a struct shm_ep hangs off sw_ep.prov.
 */
#ifndef RKV_COMMON_TRANSPORT_SHM_INTERNAL_H
#define RKV_COMMON_TRANSPORT_SHM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sw.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A memory of rkv_tp_mem_alloc(_gpu); its id is its index in mems. */
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

struct shm_lis; /* a socket file we listen on (shm_conn.c) */

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

/* The shm context of tp. */
static inline struct shm_tp *shm_of(struct sw_tp *tp)
{
	return container_of(tp, struct shm_tp, sw);
}

/* shm.c: context and memory */
/* ep's shm part, made on first use (NULL: no memory). */
struct shm_ep *shm_ep_get(struct sw_ep *ep);
/* A sealed memfd of len bytes (mode 0400); the fd or -errno. */
int shm_memfd_new(const char *name, size_t len, bool seal_all);

/* shm_conn.c: socket files, listen, connect, handshake, doorbell */
int shm_listen(struct rkv_tp *tp, const struct rkv_tp_addr *a,
	       struct rkv_listener **out);
void shm_listener_destroy(struct rkv_listener *l);
/* Forget the socket files of listeners never destroyed (kept on disk). */
void shm_lis_forget(struct shm_tp *t);
int shm_connect(struct rkv_tp *tp, const struct rkv_tp_addr *a,
		struct rkv_cq *cq, int timeout_ms, struct rkv_ep **out);
/* The struct sw_prov hooks of the handshake and the doorbell. */
int shm_hello_fds(struct sw_tp *tp, struct sw_ep *ep, bool connector,
		  int *fds, bool *close_after, unsigned *nfds);
int shm_ep_setup(struct sw_ep *ep, const int *fds, unsigned nfds);
void shm_ep_fini(struct sw_ep *ep);
void shm_after_tx(struct sw_ep *ep);
bool shm_gate(struct sw_ep *ep, unsigned npoll);

/* shm_map.c: grants and the initiator's mappings */
/* mmap a sealed memfd (size want, 0: any), writable if rw; 0 or -errno. */
int shm_map_fd(int fd, bool rw, size_t want, void **out, size_t *len);
/* MAP_REQ at the target, MAP_RESP at the initiator (sw_prov.frame). */
int shm_frame(struct sw_ep *ep, const struct sw_hdr *h);
/* Map the peer's MR table (once per endpoint); a WC status. */
int shm_tab_get(struct sw_ep *ep, struct shm_ep *se);
/* Translate rkey (table entry idx, key word k) into se->rc; a WC status. */
int shm_rc_fill(struct sw_ep *ep, struct shm_ep *se, uint32_t idx,
		uint32_t rkey, uint64_t k);

/* shm_post.c: one-sided operations */
int shm_post(struct rkv_ep *ep, struct rkv_wr *wr, struct rkv_wr **bad);

#ifdef __cplusplus
}
#endif
#endif
