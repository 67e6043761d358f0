/* SPDX-License-Identifier: MIT */
/*
 * etcd.h - a small etcd v3 client: get, range, put, compare-and-swap put,
 * delete, leases and a one-shot watch, over the HTTP/JSON gateway that
 * etcd 3.4 serves on its client port (POST /v3/kv/range and friends),
 * with libcurl and cJSON.  rkv servers register under a lease and clients
 * read and watch a cluster map with it; this layer knows nothing of
 * either, only of byte keys and values.
 *
 * One struct rkv_etcd is one HTTP connection (one CURL easy handle, kept
 * alive between calls and re-opened when it drops); one thread at a time
 * may use it.  Every call is one blocking request bounded by the handle's
 * timeout (rkv_etcd_wait: by its own).  Nothing is printed: every failure
 * returns -errno and leaves a one-line reason, naming the URL, in
 * rkv_etcd_why().
 *
 * Errors common to every call:
 *   -ECONNREFUSED  nothing listens at the URL
 *   -EHOSTUNREACH  the host cannot be resolved or reached
 *   -ETIMEDOUT     no complete answer within the timeout
 *   -ECONNRESET    the connection dropped before a complete answer
 *   -EPROTO        it answered, but not as an etcd v3 gateway: not HTTP,
 *                  an HTTP error status, not JSON, or JSON of the wrong
 *                  shape (bad base64, a number that is not one, ...)
 *   -EMSGSIZE      the answer is larger than RKV_ETCD_MAX_RESPONSE
 *   -ENOMEM        out of memory
 *   -EAGAIN        etcd is up but cannot serve now (no leader: gRPC
 *                  UNAVAILABLE); retry
 *   -EACCES        etcd refused the request (authentication)
 *   -ENOSPC        etcd's quota is exhausted (or too many requests)
 *   -EIO           any other transport failure (the reason has curl's)
 * Keys are NUL-terminated strings (at most RKV_ETCD_KEY_MAX bytes);
 * values are bytes, NULs included.
 */
#ifndef RKV_COMMON_ETCD_H
#define RKV_COMMON_ETCD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest answer read from etcd; a longer one fails with -EMSGSIZE. */
#define RKV_ETCD_MAX_RESPONSE (16u << 20)
/* Longest key (etcd's own limit is its 1.5 MiB request size). */
#define RKV_ETCD_KEY_MAX 4096u
/* Longest value accepted by put (etcd's default request limit, 1.5 MiB,
 * less the base64 growth and the JSON around it). */
#define RKV_ETCD_VAL_MAX (1u << 20)

struct rkv_etcd;

/* One key as etcd holds it.  key and val are malloc'd (rkv_malloc) and
 * NUL-terminated; val_len does not count the NUL, and val may hold NULs. */
struct rkv_etcd_kv {
	char *key;
	char *val;
	size_t val_len;
	int64_t create_rev; /* revision of the put that created the key */
	int64_t mod_rev;    /* revision of its last put */
	int64_t version;    /* puts since creation, 1 for a new key */
	int64_t lease;      /* lease ID, 0 for none */
};

/*
 * Open a handle on the etcd at url: "etcd://HOST:PORT" or
 * "http://HOST:PORT" (HOST a name, an IPv4 address or [IPv6]; PORT
 * 1-65535; any path after it is ignored, the caller handles a /NAME
 * suffix itself).  timeout_ms (> 0) bounds every later call, connection
 * included.  Does not contact etcd: the first call does (and says so if
 * it fails).  why (may be NULL) gets a one-line reason on failure.
 * Returns 0 and *out, -EINVAL for a bad url or timeout, -ENOMEM.
 * Thread-safe (the process's curl_global_init runs once).
 */
int rkv_etcd_open(const char *url, unsigned timeout_ms, struct rkv_etcd **out,
		  char *why, size_t why_len);
/* Close the connection and free the handle.  NULL is a no-op. */
void rkv_etcd_close(struct rkv_etcd *e);
/* The reason of the handle's last failure, one line naming the URL ("" if
 * none yet).  Valid until the next call on e. */
const char *rkv_etcd_why(const struct rkv_etcd *e);

/* Free what one caller-owned entry holds (as filled by rkv_etcd_get) and
 * clear it.  NULL and cleared entries are fine. */
void rkv_etcd_kv_fini(struct rkv_etcd_kv *kv);
/* Free an array of n entries returned by rkv_etcd_range: every entry's
 * key and value, then the array.  NULL is a no-op. */
void rkv_etcd_kv_free(struct rkv_etcd_kv *kvs, size_t n);

/*
 * Read key into *out (caller-owned; release with rkv_etcd_kv_fini).  rev
 * (may be NULL) gets the store's revision at the read.  Returns 0,
 * -ENOENT when the key is absent (*out cleared, *rev still set), -EINVAL
 * for an empty or too long key, or a common error.
 */
int rkv_etcd_get(struct rkv_etcd *e, const char *key, struct rkv_etcd_kv *out,
		 int64_t *rev);
/*
 * Every key that starts with prefix ("" for all keys), sorted by key, in
 * *kvs (an array of *n, NULL when *n is 0; release with rkv_etcd_kv_free)
 * and the store's revision at the read in *rev (may be NULL).  Returns 0
 * or a common error (-EMSGSIZE when they do not fit one answer).
 */
int rkv_etcd_range(struct rkv_etcd *e, const char *prefix,
		   struct rkv_etcd_kv **kvs, size_t *n, int64_t *rev);
/*
 * Put len bytes of val under key, attached to lease (0: none; the key is
 * deleted when the lease expires or is revoked).  Returns 0, -ENOENT when
 * the lease does not exist (any more), -EINVAL (empty key, key or value
 * too long), or a common error.
 */
int rkv_etcd_put(struct rkv_etcd *e, const char *key, const void *val,
		 size_t len, int64_t lease);
/*
 * Compare-and-swap by revision, in one etcd transaction: put as
 * rkv_etcd_put does only if key's mod_rev is expect_mod_rev (0: only if
 * the key does not exist).  Returns 0 when it put, -ECANCELED when the
 * compare failed (nothing written), or as rkv_etcd_put.
 */
int rkv_etcd_put_if(struct rkv_etcd *e, const char *key, const void *val,
		    size_t len, int64_t lease, int64_t expect_mod_rev);
/* Delete key.  Returns 0, -ENOENT when it did not exist, or a common
 * error. */
int rkv_etcd_delete(struct rkv_etcd *e, const char *key);

/*
 * Grant a lease of ttl_s seconds (1 to 9000000000; etcd raises a TTL
 * below its minimum, about 1.5 election timeouts, to that minimum) and
 * return its ID in *id.  Returns 0, -EINVAL for ttl_s 0, or a common
 * error.
 */
int rkv_etcd_lease_grant(struct rkv_etcd *e, unsigned ttl_s, int64_t *id);
/*
 * Renew lease id to its full TTL; ttl_left (may be NULL) gets the seconds
 * it now has.  Returns 0, -ENOENT once the lease has expired or been
 * revoked (its keys are gone), or a common error.
 */
int rkv_etcd_lease_keepalive(struct rkv_etcd *e, int64_t id,
			     int64_t *ttl_left);
/* Revoke lease id, deleting its keys.  Returns 0, -ENOENT when it does
 * not exist (any more), or a common error. */
int rkv_etcd_lease_revoke(struct rkv_etcd *e, int64_t id);

/*
 * Wait until a key under prefix ("" for any key) is put or deleted at a
 * revision after after_rev, or timeout_ms passes: a watch from revision
 * after_rev + 1 on the streaming /v3/watch, closed at its first event (so
 * a change already made after after_rev returns at once).  Returns:
 *   1  changed; *rev (may be NULL) is the revision of the latest event of
 *      that first answer.  Also 1 when etcd has compacted its history
 *      past after_rev (changes may have been lost; *rev is the compact
 *      revision): in both cases the caller re-reads (rkv_etcd_range) and
 *      waits again from the revision that read returns
 *   0  timeout_ms passed, with the watch in place, and nothing changed
 *   -ETIMEDOUT  etcd did not even set the watch up within timeout_ms
 *   -EINVAL for timeout_ms 0 or after_rev < 0, or a common error.
 * The connection is closed afterwards (an HTTP stream cannot be
 * abandoned otherwise); the next call opens a new one.
 */
int rkv_etcd_wait(struct rkv_etcd *e, const char *prefix, int64_t after_rev,
		  unsigned timeout_ms, int64_t *rev);

#ifdef __cplusplus
}
#endif
#endif
