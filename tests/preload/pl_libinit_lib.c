// SPDX-License-Identifier: MIT
/*
 * A shared library that makes socket calls from its constructor and its
 * destructor, for test_preload_libinit, built twice:
 *   - linked by the test: glibc initialises it before the preload (a
 *     program's own libraries come first), so its constructor's sockets
 *     are the kernel's. Loopback only, then: the kernel would route any
 *     other address to a real interface.
 *   - PL_LIBINIT_DLOPEN, dlopen'ed by the test: initialised after the
 *     preload, so its sockets are offloaded; it uses PL_TEST_ADDR (emu's
 *     address under the preload; loopback when unset). Its destructor must still find them
 *     offloaded (glibc finalises it after the preload, whose teardown
 *     comes later, pl_ctx.c). A socket left to the kernel there has no
 *     address the kernel knows, so its exchange fails before anything is
 *     sent.
 * Everything is static but the two entries: both builds live in one
 * process and must not bind to each other's symbols.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifdef PL_LIBINIT_DLOPEN
#define WHICH "dlopen'ed"
#else
#define WHICH "linked"
#endif

static int ctor_line = -1;	/* 0: the constructor's calls worked */
static int fr = -1, fs = -1;

/* One datagram fs -> fr; 0 or the failing line. */
static int exchange(void)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);
	struct pollfd p = { .fd = fr, .events = POLLIN };
	char buf[8];

	if (getsockname(fr, (struct sockaddr *)&a, &l) < 0 || a.sin_port == 0)
		return __LINE__;
	if (sendto(fs, "lib", 3, 0, (struct sockaddr *)&a, sizeof(a)) != 3)
		return __LINE__;
	if (poll(&p, 1, 2000) != 1)
		return __LINE__;
	if (recv(fr, buf, sizeof(buf), 0) != 3 || memcmp(buf, "lib", 3))
		return __LINE__;
	return 0;
}

static int ctor_calls(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
#ifdef PL_LIBINIT_DLOPEN
	const char *e = getenv("PL_TEST_ADDR");

	if (e && inet_pton(AF_INET, e, &a.sin_addr) != 1)
		return __LINE__;
#endif
	fr = socket(AF_INET, SOCK_DGRAM, 0);
	fs = socket(AF_INET, SOCK_DGRAM, 0);
	if (fr < 0 || fs < 0)
		return __LINE__;
	if (bind(fr, (struct sockaddr *)&a, sizeof(a)) < 0)
		return __LINE__;
	return exchange();
}

__attribute__((constructor)) static void lib_init(void)
{
	ctor_line = ctor_calls();
}

__attribute__((destructor)) static void lib_fini(void)
{
	int line = exchange();
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	/* A socket made in a destructor, and closes. */
	if (!line && (fd < 0 || close(fd) < 0))
		line = __LINE__;
	if (!line && (close(fr) < 0 || close(fs) < 0))
		line = __LINE__;
	if (line) {
		printf("test_preload_libinit: FAIL: " WHICH " library's "
		       "destructor, line %d\n", line);
		_exit(1);
	}
	printf("test_preload_libinit: sockets work in a " WHICH
	       " library's destructor\n");
}

/* 0 or the line where the constructor's calls failed. */
int pl_libinit_ctor_line(void);
/* The constructor's sockets, used again: 0 or the failing line. */
int pl_libinit_use(void);

int pl_libinit_ctor_line(void)
{
	return ctor_line;
}

int pl_libinit_use(void)
{
	return exchange();
}
