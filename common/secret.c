/* SPDX-License-Identifier: MIT */
/*
 * secret.c - the one reader of secret files, shared by server and client,
 * so both refuse the same files for the same reasons.
 */
#include "secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rkv_secret_read(const char *path, unsigned char *buf, size_t *len,
		    char *why, size_t whylen)
{
	unsigned char tmp[RKV_SECRET_MAX + 1];
	struct stat st;
	size_t n = 0;
	int fd, rc = 0;

	*len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		rc = -errno;
		snprintf(why, whylen, "cannot read: %s", strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st)) {
		rc = -errno;
		snprintf(why, whylen, "%s", strerror(-rc));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, whylen, "not a regular file");
		rc = -EINVAL;
		goto out;
	}
	if (st.st_mode & 077) {
		snprintf(why, whylen,
			 "mode %04o gives group or others access; chmod 600 it",
			 (unsigned)(st.st_mode & 07777));
		rc = -EPERM;
		goto out;
	}
	while (n < sizeof(tmp)) {
		ssize_t r = read(fd, tmp + n, sizeof(tmp) - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			snprintf(why, whylen, "cannot read: %s", strerror(-rc));
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > RKV_SECRET_MAX) {
		snprintf(why, whylen, "longer than %d bytes", RKV_SECRET_MAX);
		rc = -EINVAL;
		goto out;
	}
	if (n && tmp[n - 1] == '\n') {
		n--;
		if (n && tmp[n - 1] == '\r')
			n--;
	}
	if (!n) {
		snprintf(why, whylen, "empty");
		rc = -EINVAL;
		goto out;
	}
	memcpy(buf, tmp, n);
	*len = n;
out:
	explicit_bzero(tmp, sizeof(tmp));
	close(fd);
	return rc;
}
