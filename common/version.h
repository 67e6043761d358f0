/* SPDX-License-Identifier: MIT */
/*
 * version.h - rkv's release version, written once: every tool's
 * --version line and the installed pkg-config file (the Makefile reads
 * RKV_VERSION from this file).  `make RKV_VERSION=X.Y.Z` overrides it
 * with -DRKV_VERSION; objects already built keep the version they were
 * compiled with (make clean first).
 *
 * The wire protocol has its own number, RKV_PROTO_VERSION in proto/msg.h:
 * common depends on nothing, so a tool passes that number in.
 */
#ifndef RKV_COMMON_VERSION_H
#define RKV_COMMON_VERSION_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef RKV_VERSION
#define RKV_VERSION "0.4.0"
#endif

/* The transport providers of every build (common/transport). */
#define RKV_VERSION_PROVIDERS "tcp shm verbs"

/* Optional parts this build carries (WITH_ETCD, WITH_CUDA). */
#if defined(RKV_WITH_ETCD) && defined(RKV_WITH_CUDA)
#define RKV_VERSION_WITH ", with etcd cuda"
#elif defined(RKV_WITH_ETCD)
#define RKV_VERSION_WITH ", with etcd"
#elif defined(RKV_WITH_CUDA)
#define RKV_VERSION_WITH ", with cuda"
#else
#define RKV_VERSION_WITH ""
#endif

/*
 * Print a tool's --version line on stdout, e.g.
 *   rkv 0.4.0 (protocol 3, providers tcp shm verbs, with etcd cuda)
 * prog: the tool's name; proto: RKV_PROTO_VERSION.  Returns 0, or -1 when
 * stdout cannot be written (the tool then exits non-zero).
 */
static inline int rkv_version_print(const char *prog, unsigned proto)
{
	if (printf("%s %s (protocol %u, providers %s%s)\n", prog, RKV_VERSION,
		   proto, RKV_VERSION_PROVIDERS, RKV_VERSION_WITH) < 0 ||
	    fflush(stdout))
		return -1;
	return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* RKV_COMMON_VERSION_H */
