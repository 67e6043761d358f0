/* SPDX-License-Identifier: MIT */
/*
 * secret.h - reading a shared secret from a file that only its owner may
 * read (rkv-server --secret-file, the client's secret_file).
 */
#ifndef RKV_COMMON_SECRET_H
#define RKV_COMMON_SECRET_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RKV_SECRET_MAX 4096 /* bytes */

/*
 * Read the secret in path into buf (RKV_SECRET_MAX bytes), dropping one
 * trailing "\n" or "\r\n".  Refuses a file that is not regular, that group
 * or others may access (-EPERM: "chmod 600 it"), that is empty or longer
 * than RKV_SECRET_MAX (-EINVAL).  Returns 0 with *len set, or -errno with
 * a one-line reason in why (without the path).  No bytes of the secret are
 * left on the stack.
 */
int rkv_secret_read(const char *path, unsigned char *buf, size_t *len,
		    char *why, size_t whylen);

#ifdef __cplusplus
}
#endif
#endif
