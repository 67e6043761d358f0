/* SPDX-License-Identifier: MIT */
/*
 * auth.c - the shared secret and the challenge-response that proves a
 * client knows it (see proto/msg.h): loading --secret-file with its
 * permission check, nonces from getrandom(), and the check of a response:
 * the expected MAC from rkv_auth_mac (proto/auth.h, the transcript the
 * client computes too; HMAC-SHA256 from OpenSSL's libcrypto), compared in
 * constant time (CRYPTO_memcmp) and wiped.  Nothing here is home-made
 * cryptography.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "server_internal.h"

#include "auth.h"
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

int rkv_srv_auth_check(const struct rkv_srv_config *cfg, const uint8_t *nonce,
		       const char *name, const uint8_t *mac)
{
	uint8_t want[RKV_AUTH_MAC_LEN];
	int ok;

	if (rkv_auth_mac(cfg->secret, cfg->secret_len, nonce, name, want))
		ok = 0; /* no secret, or libcrypto failed: refuse */
	else
		ok = CRYPTO_memcmp(want, mac, RKV_AUTH_MAC_LEN) == 0;
	rkv_srv_wipe(want, sizeof(want));
	return ok;
}
