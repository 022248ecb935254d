/* SPDX-License-Identifier: MIT */
/*
 * stat_esc - strings from a stats segment, made safe to print: the file
 * is written by whoever could create it, and a command name is whatever
 * its process chose (PR_SET_NAME), terminal escape sequences included.
 */
#ifndef QPS_STAT_ESC_H
#define QPS_STAT_ESC_H

#include <stddef.h>

/* Room sr_escape needs for @n bytes of input. */
#define SR_ESC_LEN(n) (4 * (n) + 1)

/* @in, up to its first NUL or @inlen bytes, into @out (@outlen bytes,
 * always terminated): printable ASCII as is, every other byte and the
 * backslash itself as \ooo, so the output is printable ASCII and says
 * which bytes were there. */
void sr_escape(char *out, size_t outlen, const char *in, size_t inlen);

#endif /* QPS_STAT_ESC_H */
