/* SPDX-License-Identifier: MIT */
/* Shared helpers for the CUnit suites. */
#ifndef QPS_T_UTIL_H
#define QPS_T_UTIL_H

#include <CUnit/CUnit.h>
#include <stddef.h>
#include <qpsock/qpsock.h>

#define T_EXIT_SKIP 77

/* Register one suite made of @tests (NULL-terminated CU_TestInfo array),
 * run it verbosely and return the process exit code: 0 all passed, 1 any
 * failure. */
int t_run(const char *suite, CU_TestInfo *tests);

/* A wire name unique to this process and @tag, so suites run in parallel
 * never share an emu wire. */
void t_wire_name(char *buf, size_t len, const char *tag);

/* Open an emu context on @wire with local address @ip (NULL = allocated). */
int t_ctx_emu(const char *wire, const char *ip, struct qps_ctx **out);

/* A struct sockaddr_in for @ip:@port. */
struct sockaddr_in t_sin(const char *ip, unsigned short port);

#endif
