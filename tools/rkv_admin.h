/* SPDX-License-Identifier: MIT */
/*
 * rkv_admin.h - `rkv admin ...` (tools/rkv_admin.c), run by the rkv CLI
 * when its first argument is "admin".
 */
#ifndef RKV_TOOLS_RKV_ADMIN_H
#define RKV_TOOLS_RKV_ADMIN_H

/* argv[0] is "admin".  Returns the exit status. */
int rkv_admin_main(int argc, char **argv);

#endif
