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
#include <stdarg.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "server_internal.h"

static void errf(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

void rkv_srv_wipe(void *p, size_t n)
{
	OPENSSL_cleanse(p, n);
}

int rkv_srv_secret_load(struct rkv_srv_config *cfg, char *err, size_t errlen)
{
	const char *path = cfg->secret_file;
	unsigned char buf[RKV_SRV_SECRET_MAX + 1];
	struct stat st;
	size_t n = 0;
	int fd, rc = 0;

	cfg->secret_len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		rc = -errno;
		errf(err, errlen, "--secret-file %s: cannot read: %s", path,
		     strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st)) {
		rc = -errno;
		errf(err, errlen, "--secret-file %s: %s", path, strerror(-rc));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		errf(err, errlen, "--secret-file %s: not a regular file", path);
		rc = -EINVAL;
		goto out;
	}
	if (st.st_mode & 077) {
		errf(err, errlen,
		     "--secret-file %s: mode %04o gives group or others access; "
		     "chmod 600 it",
		     path, (unsigned)(st.st_mode & 07777));
		rc = -EPERM;
		goto out;
	}
	while (n < sizeof(buf)) {
		ssize_t r = read(fd, buf + n, sizeof(buf) - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			errf(err, errlen, "--secret-file %s: cannot read: %s",
			     path, strerror(-rc));
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > RKV_SRV_SECRET_MAX) {
		errf(err, errlen, "--secret-file %s: longer than %d bytes", path,
		     RKV_SRV_SECRET_MAX);
		rc = -EINVAL;
		goto out;
	}
	if (n && buf[n - 1] == '\n') {
		n--;
		if (n && buf[n - 1] == '\r')
			n--;
	}
	if (!n) {
		errf(err, errlen, "--secret-file %s: empty", path);
		rc = -EINVAL;
		goto out;
	}
	memcpy(cfg->secret, buf, n);
	cfg->secret_len = n;
out:
	rkv_srv_wipe(buf, sizeof(buf));
	close(fd);
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
