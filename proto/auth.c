/* SPDX-License-Identifier: MIT */
/*
 * auth.c - the HMAC-SHA256 authentication transcript (proto/auth.h).  The
 * MAC is OpenSSL's one-shot HMAC(); nothing here is home-made
 * cryptography.  The transcript holds no secret, but it is wiped anyway,
 * as the server wipes the nonce once a response is checked.
 */
#include "auth.h"

#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

_Static_assert(RKV_AUTH_MAC_LEN == 32, "HMAC-SHA256 is 32 bytes");

int rkv_auth_mac(const unsigned char *secret, size_t secret_len,
		 const uint8_t *nonce, const char *name, uint8_t *mac)
{
	unsigned char msg[RKV_AUTH_TRANSCRIPT_LEN];
	unsigned int len = 0;
	unsigned char *r;

	if (!secret_len || secret_len > (size_t)INT32_MAX)
		return -EINVAL;
	memcpy(msg, nonce, RKV_AUTH_NONCE_LEN);
	memcpy(msg + RKV_AUTH_NONCE_LEN, name, RKV_NAME_MAX);
	memcpy(msg + RKV_AUTH_NONCE_LEN + RKV_NAME_MAX, RKV_AUTH_CONTEXT,
	       sizeof(RKV_AUTH_CONTEXT) - 1);
	r = HMAC(EVP_sha256(), secret, (int)secret_len, msg, sizeof(msg), mac,
		 &len);
	OPENSSL_cleanse(msg, sizeof(msg));
	return r && len == RKV_AUTH_MAC_LEN ? 0 : -EIO;
}
