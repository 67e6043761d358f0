/* SPDX-License-Identifier: MIT */
/*
 * shm_conn.c - connections of the shm provider: the unix socket file,
 * listen and connect, who may connect, and the handshake with its
 * doorbell page.
 *
 * The unix socket is a file, $RKV_SHM_DIR/NAME (default /run/rkv/NAME),
 * made with opts.shm_mode (0600) and opts.shm_gid before it listens; an
 * accepted peer whose SO_PEERCRED is not admitted (root, our euid,
 * opts.shm_uids, opts.shm_gid) is closed before anything is sent to it.
 * The socket also carries SEND/RECV and the handshake: the connector's
 * HELLO carries one fd, its doorbell page (sealed, with its protocol word,
 * SHM_PROTO, at byte 128), the acceptor writes its own word at byte 192
 * and answers HELLO_ACK with no fd at all.  So that rkv_cq_poll needs no
 * syscall when nothing arrived, the doorbell page holds two counters: a
 * sender bumps the peer's counter after every write to the socket, and the
 * poller reads its socket only when its counter moved - or every ~1 ms,
 * which is how a dead peer (EOF) is noticed even while only one-sided
 * traffic runs.  Passive endpoints are served by the context's transport
 * thread as on tcp.
 */
#include "shm_internal.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include "../alloc.h"
#include "../log.h"
#include "../rtime.h"

#define SHM_CHECK_NS 1000000ull /* socket check period while idle */
#define SHM_DB_PAGE 4096
/* The doorbell page: u64 words [0] connector -> acceptor writes, [8]
 * acceptor -> connector (next cache line), [16] the connector's protocol
 * word, [24] the acceptor's. */
#define SHM_DB_PROTO_C 16
#define SHM_DB_PROTO_A 24
/* "RKVS" and the shm handshake version.  1: tables in the handshake;
 * 2: no fd from the acceptor, the table by MAP_REQ after a grant. */
#define SHM_PROTO ((0x53564b52ull << 32) | 2u)
#define SHM_DIR_DEFAULT "/run/rkv"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

/* A socket file we listen on (unlinked by the listener's destroy). */
struct shm_lis {
	struct shm_lis *next;
	struct rkv_listener *l;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t dev;
	ino_t ino;
	pid_t pid;  /* the process that bound it */
};

/* ------------------------------------------------------------- sockets */
static const char *shm_dir(void)
{
	const char *d = getenv("RKV_SHM_DIR");

	return d && *d ? d : SHM_DIR_DEFAULT;
}

/* The socket file of shm:///name; -ENAMETOOLONG when it does not fit. */
static int un_addr(const char *name, struct sockaddr_un *sa, socklen_t *sl)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", shm_dir(),
		     name);
	if (n < 0 || (size_t)n >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	*sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n +
			  1);
	return 0;
}

/* Bind fd to sa; a socket file nobody listens on (a dead process's) is
 * replaced, anything else is left alone (-EADDRINUSE). */
static int bind_path(int fd, const struct sockaddr_un *sa, socklen_t sl)
{
	struct stat st;
	int probe, rc;

	if (!bind(fd, (const struct sockaddr *)sa, sl))
		return 0;
	if (errno != EADDRINUSE)
		return -errno;
	if (lstat(sa->sun_path, &st) || !S_ISSOCK(st.st_mode))
		return -EADDRINUSE;
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe < 0)
		return -errno;
	rc = connect(probe, (const struct sockaddr *)sa, sl) ? -errno : 0;
	close(probe);
	if (rc != -ECONNREFUSED)
		return -EADDRINUSE;
	if (unlink(sa->sun_path) && errno != ENOENT)
		return -EADDRINUSE;
	return bind(fd, (const struct sockaddr *)sa, sl) ? -errno : 0;
}

int shm_listen(struct rkv_tp *btp, const struct rkv_tp_addr *a,
		      struct rkv_listener **out)
{
	struct sw_tp *tp = container_of(btp, struct sw_tp, base);
	struct shm_tp *t = shm_of(tp);
	const struct rkv_tp_opts *o = &btp->opts;
	struct sockaddr_un sa;
	struct shm_lis *li;
	struct stat st;
	socklen_t sl;
	char addr[128];
	const char *why = "bind";
	int fd, rc;

	rc = un_addr(a->name, &sa, &sl);
	if (rc)
		return rc;
	li = rkv_calloc(1, sizeof(*li));
	if (!li)
		return -ENOMEM;
	if (mkdir(shm_dir(), 0755) && errno != EEXIST) {
		rc = -errno;
		sw_log(tp, RKV_LOG_WARN,
		       "listen on shm:///%s: cannot make %s: %s (set "
		       "RKV_SHM_DIR to a directory of yours)", a->name,
		       shm_dir(), strerror(-rc));
		goto free_li;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		goto free_li;
	}
	rc = bind_path(fd, &sa, sl);
	if (rc)
		goto close_fd;
	/* Nobody can connect before listen(): set who may, first. */
	why = "chmod/chown";
	if (chmod(sa.sun_path, o->shm_mode) ||
	    (o->shm_gid >= 0 && chown(sa.sun_path, (uid_t)-1,
				      (gid_t)o->shm_gid)) ||
	    lstat(sa.sun_path, &st)) {
		rc = -errno;
		goto unlink_path;
	}
	why = "listen";
	if (listen(fd, 128)) {
		rc = -errno;
		goto unlink_path;
	}
	snprintf(addr, sizeof(addr), "shm:///%s", a->name);
	rc = sw_listener_create(tp, fd, addr, out);
	if (rc)
		goto unlink_path;
	memcpy(li->path, sa.sun_path, sizeof(li->path));
	li->dev = st.st_dev;
	li->ino = st.st_ino;
	li->pid = getpid();
	li->l = *out;
	pthread_mutex_lock(&t->mem_lock);
	li->next = t->lis;
	t->lis = li;
	pthread_mutex_unlock(&t->mem_lock);
	return 0;

unlink_path:
	unlink(sa.sun_path);
close_fd:
	sw_log(tp, RKV_LOG_WARN, "listen on shm:///%s (%s): %s: %s", a->name,
	       sa.sun_path, why, strerror(-rc));
	close(fd);
free_li:
	rkv_free(li);
	return rc;
}

void shm_listener_destroy(struct rkv_listener *bl)
{
	struct sw_listener *l = container_of(bl, struct sw_listener, base);
	struct shm_tp *t = shm_of(l->tp);
	struct shm_lis **pp, *li = NULL;
	struct stat st;

	pthread_mutex_lock(&t->mem_lock);
	for (pp = &t->lis; *pp; pp = &(*pp)->next) {
		if ((*pp)->l == bl) {
			li = *pp;
			*pp = li->next;
			break;
		}
	}
	pthread_mutex_unlock(&t->mem_lock);
	/* Only the binder removes the file, and only while it is ours (a
	 * forked child's copy, or a successor's socket, stays). */
	if (li && li->pid == getpid() && !lstat(li->path, &st) &&
	    st.st_dev == li->dev && st.st_ino == li->ino)
		unlink(li->path);
	rkv_free(li);
	sw_listener_destroy(bl);
}

void shm_lis_forget(struct shm_tp *t)
{
	while (t->lis) { /* listeners not destroyed: forget, keep the file */
		struct shm_lis *li = t->lis;

		t->lis = li->next;
		rkv_free(li);
	}
}

int shm_connect(struct rkv_tp *btp, const struct rkv_tp_addr *a,
		       struct rkv_cq *bcq, int timeout_ms, struct rkv_ep **out)
{
	struct sw_tp *tp = container_of(btp, struct sw_tp, base);
	struct sw_cq *cq = container_of(bcq, struct sw_cq, base);
	uint64_t deadline = rkv_now_ns() + (uint64_t)(timeout_ms < 0 ? 0
								: timeout_ms) *
						   1000000ull;
	struct sockaddr_un sa;
	socklen_t sl;
	char peer[128];
	int fd, left, rc;

	rc = un_addr(a->name, &sa, &sl);
	if (rc)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A full backlog answers EAGAIN: retry until the deadline. */
	while (connect(fd, (struct sockaddr *)&sa, sl)) {
		rc = -errno;

		if (rc != -EAGAIN && rc != -EINTR) {
			close(fd);
			return rc == -ENOENT ? -ECONNREFUSED : rc;
		}
		if (timeout_ms >= 0 && rkv_now_ns() >= deadline) {
			close(fd);
			return -ETIMEDOUT;
		}
		poll(NULL, 0, 1);
	}
	snprintf(peer, sizeof(peer), "shm:///%s", a->name);
	left = timeout_ms;
	if (timeout_ms > 0) {
		uint64_t now = rkv_now_ns();

		left = now >= deadline ? 1
				       : (int)((deadline - now) / 1000000ull) + 1;
	}
	return sw_connect_finish(tp, cq, fd, peer, left, out);
}

/* -------------------------------------------------- handshake and doorbell */
/*
 * The connector's HELLO carries its doorbell page (our memory, so nothing
 * of the acceptor's); the acceptor's HELLO_ACK carries nothing: its table
 * and memory go out only by MAP_REQ, under the endpoint's grant.
 */
int shm_hello_fds(struct sw_tp *tp, struct sw_ep *ep, bool connector,
			 int *fds, bool *close_after, unsigned *nfds)
{
	struct shm_ep *se = shm_ep_get(ep);
	void *p;
	size_t l;
	int dfd, rc;

	(void)tp;
	if (!se)
		return -ENOMEM;
	*nfds = 0;
	if (!connector)
		return 0;
	dfd = shm_memfd_new("rkv-shm-db", SHM_DB_PAGE, true);
	if (dfd < 0)
		return dfd;
	rc = shm_map_fd(dfd, true, SHM_DB_PAGE, &p, &l);
	if (rc) {
		close(dfd);
		return rc;
	}
	se->db = p;
	se->db_tx = &se->db[0];
	se->db_rx = &se->db[8];
	__atomic_store_n(&se->db[SHM_DB_PROTO_C], SHM_PROTO, __ATOMIC_RELEASE);
	fds[0] = dfd;
	close_after[0] = true;
	*nfds = 1;
	return 0;
}

/* Whether the peer on an accepted socket may connect (SO_PEERCRED: as of
 * its connect); -EACCES, logged, if not. */
static int peer_admitted(struct sw_ep *ep)
{
	const struct rkv_tp_opts *o = &ep->tp->base.opts;
	struct ucred cr;
	socklen_t sl = sizeof(cr);

	if (getsockopt(ep->fd, SOL_SOCKET, SO_PEERCRED, &cr, &sl))
		return -errno;
	if (cr.uid == 0 || cr.uid == geteuid())
		return 0;
	for (unsigned i = 0; i < o->shm_nuids; i++)
		if (cr.uid == o->shm_uids[i])
			return 0;
	if (o->shm_gid >= 0) {
		gid_t g[NGROUPS_MAX > 1024 ? 1024 : NGROUPS_MAX];

		if (cr.gid == (gid_t)o->shm_gid)
			return 0;
		sl = sizeof(g);
		if (getsockopt(ep->fd, SOL_SOCKET, SO_PEERGROUPS, g, &sl) == 0)
			for (size_t i = 0; i < sl / sizeof(g[0]); i++)
				if (g[i] == (gid_t)o->shm_gid)
					return 0;
	}
	sw_log(ep->tp, RKV_LOG_WARN,
	       "%s: peer pid %d uid %u gid %u is not admitted, closing",
	       ep->base.peer, (int)cr.pid, (unsigned)cr.uid, (unsigned)cr.gid);
	return -EACCES;
}

int shm_ep_setup(struct sw_ep *ep, const int *fds, unsigned nfds)
{
	struct shm_ep *se = shm_ep_get(ep);
	void *p;
	size_t l;
	int rc;

	if (!se)
		return -ENOMEM;
	if (ep->passive) {
		rc = peer_admitted(ep);
		if (rc)
			return rc;
		if (nfds != 1) {
			sw_log(ep->tp, RKV_LOG_WARN,
			       "%s: handshake with %u descriptors, not 1 "
			       "(a peer of an older shm protocol?)",
			       ep->base.peer, nfds);
			return -EPROTO;
		}
		rc = shm_map_fd(fds[0], true, SHM_DB_PAGE, &p, &l);
		if (rc) {
			sw_log(ep->tp, RKV_LOG_WARN,
			       "%s: bad doorbell descriptor", ep->base.peer);
			return rc;
		}
		se->db = p;
		se->db_tx = &se->db[8];
		se->db_rx = &se->db[0];
		if (__atomic_load_n(&se->db[SHM_DB_PROTO_C],
				    __ATOMIC_ACQUIRE) != SHM_PROTO) {
			sw_log(ep->tp, RKV_LOG_WARN,
			       "%s: peer speaks another shm protocol",
			       ep->base.peer);
			return -EPROTO;
		}
		__atomic_store_n(&se->db[SHM_DB_PROTO_A], SHM_PROTO,
				 __ATOMIC_RELEASE);
	} else if (nfds ||
		   __atomic_load_n(&se->db[SHM_DB_PROTO_A], __ATOMIC_ACQUIRE) !=
			   SHM_PROTO) {
		sw_log(ep->tp, RKV_LOG_WARN,
		       "%s: the acceptor speaks another shm protocol "
		       "(an older rkv?)", ep->base.peer);
		return -EPROTO;
	}
	se->cr = rkv_calloc(ep->sq_cap, sizeof(*se->cr));
	if (!se->cr)
		return -ENOMEM;
	se->last_check = rkv_now_ns();
	return 0;
}

void shm_ep_fini(struct sw_ep *ep)
{
	struct shm_ep *se = ep->prov;

	if (!se)
		return;
	if (se->peer_tab)
		munmap((void *)se->peer_tab, SW_MRTAB_BYTES);
	if (se->db)
		munmap(se->db, SHM_DB_PAGE);
	for (unsigned i = 0; i < se->nmaps; i++) {
		if (se->maps[i].ro)
			munmap(se->maps[i].ro, se->maps[i].ro_len);
		if (se->maps[i].rw)
			munmap(se->maps[i].rw, se->maps[i].rw_len);
		if (se->maps[i].ipc)
			rkv_cuda_ipc_close(se->maps[i].gpu, se->maps[i].dev);
	}
	if (se->map_fd >= 0)
		close(se->map_fd);
	rkv_free(se->maps);
	rkv_free(se->rc);
	rkv_free(se->cr);
	rkv_free(se);
	ep->prov = NULL;
}

void shm_after_tx(struct sw_ep *ep)
{
	struct shm_ep *se = ep->prov;

	/* Orders after the bytes written: a poller that sees the new count
	 * finds them in the socket. */
	if (se && se->db_tx)
		__atomic_fetch_add(se->db_tx, 1, __ATOMIC_RELEASE);
}

bool shm_gate(struct sw_ep *ep, unsigned npoll)
{
	struct shm_ep *se = ep->prov;
	uint64_t v;

	if (!se || !se->db_rx)
		return true;
	v = __atomic_load_n(se->db_rx, __ATOMIC_ACQUIRE);
	if (v != se->db_seen) {
		se->db_seen = v;
		return true;
	}
	/* The clock costs 20-40 ns: read it every 16th poll only (a busy
	 * poller polls far more often than SHM_CHECK_NS; one that waits
	 * blocks on the socket instead). */
	if ((npoll & 15) == 0) {
		uint64_t now = rkv_now_ns();

		if (now - se->last_check >= SHM_CHECK_NS) {
			se->last_check = now;
			return true;
		}
	}
	return false;
}
