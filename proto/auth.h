/* SPDX-License-Identifier: MIT */
/*
 * auth.h - the authentication transcript of the control protocol
 * (proto/msg.h, AUTH_CHALLENGE / AUTH_RESPONSE): the one function that
 * both the client's response and the server's check compute, so the two
 * sides cannot drift apart byte by byte.
 *
 * This is proto's only use of an outside library: HMAC-SHA256 from
 * OpenSSL's libcrypto, which every binary that links librkv_proto.a or
 * librkv.so already links (the Makefile's LDLIBS_SYS).  It lives in its
 * own translation unit so that programs linking the other proto objects
 * alone (the fuzz harnesses, built without -lcrypto) never pull it in.
 */
#ifndef RKV_PROTO_AUTH_H
#define RKV_PROTO_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "msg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the MACed message: nonce || name || context (no NUL). */
#define RKV_AUTH_TRANSCRIPT_LEN                                                \
	(RKV_AUTH_NONCE_LEN + RKV_NAME_MAX + sizeof(RKV_AUTH_CONTEXT) - 1)

/*
 * mac = HMAC-SHA256(secret, nonce[RKV_AUTH_NONCE_LEN] ||
 *                   name[RKV_NAME_MAX] || RKV_AUTH_CONTEXT)
 * where name is the HELLO's name field exactly as sent (all RKV_NAME_MAX
 * bytes, NUL padding included) and mac has room for RKV_AUTH_MAC_LEN bytes.
 * The client sends mac; the server computes it and compares in constant
 * time.  The transcript's stack copy is wiped before returning.
 * Returns 0, -EINVAL (secret_len 0 or above INT32_MAX; mac untouched) or
 * -EIO (libcrypto failed).  Thread-safe; allocates nothing.
 */
int rkv_auth_mac(const unsigned char *secret, size_t secret_len,
		 const uint8_t *nonce, const char *name, uint8_t *mac);

#ifdef __cplusplus
}
#endif
#endif
