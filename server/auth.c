/* SPDX-License-Identifier: MIT */
/*
 * auth.c - the shared secret and the challenge-response that proves a
 * client knows it (see proto/msg.h): loading --secret-file with its
 * permission check, nonces from getrandom(), HMAC-SHA256 from OpenSSL's
 * libcrypto and a constant-time comparison (CRYPTO_memcmp).  Nothing here
 * is home-made cryptography.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "server_internal.h"

#include "secret.h"

void rkv_srv_wipe(void *p, size_t n)
{
	OPENSSL_cleanse(p, n);
}

int rkv_srv_secret_load(struct rkv_srv_config *cfg, char *err, size_t errlen)
{
	char why[128];
	size_t n = 0;
	int rc;

	_Static_assert(RKV_SRV_SECRET_MAX == RKV_SECRET_MAX, "secret size");
	cfg->secret_len = 0;
	rc = rkv_secret_read(cfg->secret_file, cfg->secret, &n, why,
			     sizeof(why));
	if (rc) {
		rkv_msgf(err, errlen, "--secret-file %s: %s", cfg->secret_file,
			 why);
		return rc;
	}
	cfg->secret_len = n;
	return 0;
}

int rkv_srv_auth_nonce(uint8_t *nonce)
{
	size_t got = 0;

	while (got < RKV_AUTH_NONCE_LEN) {
		ssize_t r = getrandom(nonce + got, RKV_AUTH_NONCE_LEN - got, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		got += (size_t)r;
	}
	return 0;
}

int rkv_srv_auth_mac(const unsigned char *secret, size_t secret_len,
		     const uint8_t *nonce, const char *name, uint8_t *mac)
{
	unsigned char msg[RKV_AUTH_NONCE_LEN + RKV_NAME_MAX +
			  sizeof(RKV_AUTH_CONTEXT) - 1];
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
	return r && len == RKV_AUTH_MAC_LEN ? 0 : -EIO;
}

int rkv_srv_auth_check(const struct rkv_srv_config *cfg, const uint8_t *nonce,
		       const char *name, const uint8_t *mac)
{
	uint8_t want[RKV_AUTH_MAC_LEN];
	int ok;

	if (rkv_srv_auth_mac(cfg->secret, cfg->secret_len, nonce, name, want))
		return 0;
	ok = CRYPTO_memcmp(want, mac, RKV_AUTH_MAC_LEN) == 0;
	rkv_srv_wipe(want, sizeof(want));
	return ok;
}
