/* SPDX-License-Identifier: MIT */
/*
 * transport_internal.h - the provider interface behind transport.h.
 *
 * transport.c owns argument checks that are the same for every provider and
 * dispatches through struct rkv_tp_ops.  Each provider embeds the base
 * structs below as the first member of its own and recovers its type with
 * container_of.  Only files in common/transport/ include this header.
 */
#ifndef RKV_COMMON_TRANSPORT_TRANSPORT_INTERNAL_H
#define RKV_COMMON_TRANSPORT_TRANSPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../log.h"
#include "transport.h"

#ifndef container_of
#define container_of(ptr, type, member)                                        \
	((type *)(void *)((char *)(ptr)-offsetof(type, member)))
#endif

struct rkv_tp_ops {
	const char *name;
	/* Fill the provider part; tp->opts is already validated. */
	int (*create)(const struct rkv_tp_opts *opts, struct rkv_tp **out);
	void (*destroy)(struct rkv_tp *tp);
	int (*mem_alloc)(struct rkv_tp *tp, size_t len, void **out);
	void (*mem_free)(struct rkv_tp *tp, void *addr, size_t len);
	/* NULL: rkv_tp_mem_renew returns -EOPNOTSUPP */
	int (*mem_renew)(struct rkv_tp *tp, void *addr, size_t len,
			 rkv_tp_move_fn move, void *arg);
	int (*mr_reg)(struct rkv_tp *tp, void *addr, size_t len,
		      unsigned access, struct rkv_mr **out);
	int (*mr_dereg)(struct rkv_mr *mr);
	/* GPU memory (gpu >= 0, probed).  NULL mem_alloc_gpu/mem_free_gpu:
	 * plain cudaMalloc/cudaFree; NULL mr_reg_gpu: -EOPNOTSUPP. */
	int (*mem_alloc_gpu)(struct rkv_tp *tp, int gpu, size_t len,
			     void **out);
	void (*mem_free_gpu)(struct rkv_tp *tp, int gpu, void *addr,
			     size_t len);
	int (*mr_reg_gpu)(struct rkv_tp *tp, void *addr, size_t len,
			  unsigned access, int gpu, struct rkv_mr **out);
	int (*cq_create)(struct rkv_tp *tp, unsigned depth,
			 struct rkv_cq **out);
	void (*cq_destroy)(struct rkv_cq *cq);
	int (*cq_poll)(struct rkv_cq *cq, struct rkv_wc *wc, int max);
	/* NULL: rkv_cq_wait returns -EOPNOTSUPP.  fds[0 .. nfds): the
	 * caller's too (revents set). */
	int (*cq_wait)(struct rkv_cq *cq, struct pollfd *fds, unsigned nfds,
		       unsigned timeout_us);
	int (*listen)(struct rkv_tp *tp, const struct rkv_tp_addr *addr,
		      struct rkv_listener **out);
	void (*listener_destroy)(struct rkv_listener *l);
	/* NULL: rkv_listener_fd is -1 */
	int (*listener_fd)(const struct rkv_listener *l);
	int (*accept)(struct rkv_listener *l, struct rkv_cq *cq,
		      int timeout_ms, struct rkv_ep **out);
	int (*connect)(struct rkv_tp *tp, const struct rkv_tp_addr *addr,
		       struct rkv_cq *cq, int timeout_ms, struct rkv_ep **out);
	void (*ep_destroy)(struct rkv_ep *ep);
	/* WRs are already checked by transport.c (opcode, atomics' length
	 * and alignment, length limit). */
	int (*post)(struct rkv_ep *ep, struct rkv_wr *wr, struct rkv_wr **bad);
	int (*post_recv)(struct rkv_ep *ep, struct rkv_recv_wr *wr,
			 struct rkv_recv_wr **bad);
	/* NULL: rkv_ep_grant is a no-op. */
	int (*ep_grant)(struct rkv_ep *ep, enum rkv_grant grant);
	/* NULL: rkv_ep_path returns -EOPNOTSUPP. */
	int (*ep_path)(struct rkv_ep *ep, struct rkv_ep_path *out);
	/* NULL: rkv_ep_rkey gives mr->rkey.  Called for windowed MRs only. */
	int (*ep_rkey)(struct rkv_ep *ep, struct rkv_mr *mr, uint32_t *rkey);
};

/*
 * Where the messages of a context go (rkv_tp_set_log).  Every message of
 * the transport is about some context's object, and goes out through
 * rkv_tp_log(tp, ...) (or rkv_tp_slog before the context exists), never
 * through rkv_log directly: with a sink set, the context's messages reach
 * it alone; without one, rkv_log gets them exactly as before.
 */
struct rkv_tp_sink {
	rkv_log_fn fn;           /* NULL: the global rkv_log */
	void *arg;
	enum rkv_log_level min;  /* with fn: the lowest level passed on */
};

/* Base of every provider context. */
struct rkv_tp {
	const struct rkv_tp_ops *ops;
	enum rkv_tp_provider provider;
	struct rkv_tp_opts opts;  /* effective options */
	struct rkv_tp_sink log;   /* from opts (rkv_tp_create; verbs_create sets
				   * it at once, for its own messages) */
	int has_atomics;
	int windows;              /* rkv_tp_windows(): the provider sets it */
	char describe[256];
	char gpu_why[256];        /* why the last GPU alloc/reg failed */
};

/* tp_log.c: the sink that opts ask for (providers' create). */
struct rkv_tp_sink rkv_tp_sink_of(const struct rkv_tp_opts *opts);
/* Format and hand over one message that rkv_tp_sink_wants(); errno kept. */
void rkv_tp_sink_emit(const struct rkv_tp_sink *s, enum rkv_log_level level,
		      const char *comp, const char *func, int line,
		      const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Whether a message at level passes s (or, without a sink, rkv_log). */
static inline bool rkv_tp_sink_wants(const struct rkv_tp_sink *s,
				     enum rkv_log_level level)
{
	if (s->fn)
		return level >= s->min && level < RKV_LOG_OFF;
	return (int)level >= g_rkv_log_level;
}

/* rkv_log for the messages of a context: level checked before formatting,
 * __func__ and __LINE__ added, errno kept. */
#define rkv_tp_slog(sink, level, comp, ...)                                    \
	do {                                                                   \
		const struct rkv_tp_sink *rkv_slog_s_ = (sink);                \
		if (rkv_tp_sink_wants(rkv_slog_s_, (level)))                   \
			rkv_tp_sink_emit(rkv_slog_s_, (level), (comp),         \
					 __func__, __LINE__, __VA_ARGS__);     \
	} while (0)
#define rkv_tp_log(tp, level, comp, ...)                                       \
	rkv_tp_slog(&(tp)->log, (level), (comp), __VA_ARGS__)

/* Base of every listener. */
struct rkv_listener {
	struct rkv_tp *tp;
	char addr[300]; /* bound address, scheme included */
};

/* Base of every completion queue. */
struct rkv_cq {
	struct rkv_tp *tp;
	unsigned depth;
};

/* Base of every endpoint. */
struct rkv_ep {
	struct rkv_tp *tp;
	struct rkv_cq *cq;
	enum rkv_ep_state state; /* provider updates it */
	char peer[300];
};

extern const struct rkv_tp_ops rkv_tp_verbs_ops;
extern const struct rkv_tp_ops rkv_tp_tcp_ops;
extern const struct rkv_tp_ops rkv_tp_shm_ops;

/*
 * Whether a verbs device with an active port exists (for auto).  Returns 1,
 * or 0 with a reason in why (may be NULL).  Never fails harder than that.
 */
int rkv_tp_verbs_available(char *why, size_t whylen);

#endif
