/* SPDX-License-Identifier: MIT */
/*
 * auth.c - the shared secrets and the challenge-response that proves a
 * client knows one (see proto/msg.h): loading --secret-file (full access)
 * and --read-only-secret-file (read-only access, decided here, not by the
 * client) with their permission checks, nonces from getrandom(), and the check of a response:
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

static int load_one(const char *opt, const char *file, unsigned char *buf,
		    size_t *len, char *err, size_t errlen)
{
	char why[128];
	size_t n = 0;
	int rc;

	*len = 0;
	if (!file[0])
		return 0;
	rc = rkv_secret_read(file, buf, &n, why, sizeof(why));
	if (rc) {
		rkv_msgf(err, errlen, "%s %s: %s", opt, file, why);
		return rc;
	}
	*len = n;
	return 0;
}

void rkv_srv_wipe_secrets(struct rkv_srv_config *cfg)
{
	rkv_srv_wipe(cfg->secret, sizeof(cfg->secret));
	rkv_srv_wipe(cfg->ro_secret, sizeof(cfg->ro_secret));
}

int rkv_srv_secret_load(struct rkv_srv_config *cfg, char *err, size_t errlen)
{
	int rc;

	_Static_assert(RKV_SRV_SECRET_MAX == RKV_SECRET_MAX, "secret size");
	rc = load_one("--secret-file", cfg->secret_file, cfg->secret,
		      &cfg->secret_len, err, errlen);
	if (!rc)
		rc = load_one("--read-only-secret-file", cfg->ro_secret_file,
			      cfg->ro_secret, &cfg->ro_secret_len, err,
			      errlen);
	if (!rc && cfg->secret_len && cfg->secret_len == cfg->ro_secret_len &&
	    CRYPTO_memcmp(cfg->secret, cfg->ro_secret, cfg->secret_len) == 0) {
		rkv_msgf(err, errlen,
			 "--read-only-secret-file %s holds the same secret as "
			 "--secret-file %s: it would grant writing; make a "
			 "second secret", cfg->ro_secret_file, cfg->secret_file);
		rc = -EINVAL;
	}
	if (rc) {
		rkv_srv_wipe_secrets(cfg);
		cfg->secret_len = cfg->ro_secret_len = 0;
	}
	return rc;
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

/* Whether mac answers nonce with this secret (0 bytes: never). */
static int proves(const unsigned char *secret, size_t len,
		  const uint8_t *nonce, const char *name, const uint8_t *mac)
{
	uint8_t want[RKV_AUTH_MAC_LEN];
	int ok;

	if (rkv_auth_mac(secret, len, nonce, name, want))
		ok = 0; /* no secret, or libcrypto failed: refuse */
	else
		ok = CRYPTO_memcmp(want, mac, RKV_AUTH_MAC_LEN) == 0;
	rkv_srv_wipe(want, sizeof(want));
	return ok;
}

enum rkv_srv_access rkv_srv_auth_check(const struct rkv_srv_config *cfg,
				       const uint8_t *nonce, const char *name,
				       const uint8_t *mac)
{
	/* both tried, so the time taken does not tell which one matched */
	int full = proves(cfg->secret, cfg->secret_len, nonce, name, mac);
	int ro = proves(cfg->ro_secret, cfg->ro_secret_len, nonce, name, mac);

	return full ? RKV_SRV_ACCESS_FULL
	       : ro ? RKV_SRV_ACCESS_READ
		    : RKV_SRV_ACCESS_NONE;
}
