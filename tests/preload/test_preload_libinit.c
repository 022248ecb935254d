// SPDX-License-Identifier: MIT
/*
 * Socket calls from another shared library's constructor and destructor
 * (pl_libinit_lib.c): one library linked, initialised before the
 * preload; one dlopen'ed, initialised after it, whose sockets are
 * offloaded; both finalised before the preload's exit teardown. Run by
 * ctest on the kernel and under the preload
 * with the same assertions: each constructor's calls worked, its sockets
 * still work in main, and each destructor's (checked there, which turns
 * the exit status into a failure).
 *
 * Environment: PL_TEST_ADDR, as test_preload_calls.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

int pl_libinit_ctor_line(void);
int pl_libinit_use(void);

static int check(const char *which, int (*ctor_line)(void), int (*use)(void))
{
	int line = ctor_line();

	if (line) {
		printf("test_preload_libinit: FAIL: %s library's constructor, "
		       "line %d\n", which, line);
		return 1;
	}
	line = use();
	if (line) {
		printf("test_preload_libinit: FAIL: %s library's sockets in "
		       "main, line %d\n", which, line);
		return 1;
	}
	printf("test_preload_libinit: sockets work in a %s library's "
	       "constructor and in main\n", which);
	return 0;
}

int main(void)
{
	void *h;
	int (*ctor_line)(void), (*use)(void);

	setvbuf(stdout, NULL, _IONBF, 0);
	if (check("linked", pl_libinit_ctor_line, pl_libinit_use))
		return 1;
	h = dlopen(PL_LIBINIT_DL, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("test_preload_libinit: FAIL: %s\n", dlerror());
		return 1;
	}
	*(void **)&ctor_line = dlsym(h, "pl_libinit_ctor_line");
	*(void **)&use = dlsym(h, "pl_libinit_use");
	if (!ctor_line || !use) {
		printf("test_preload_libinit: FAIL: %s\n", dlerror());
		return 1;
	}
	/* Not closed: its destructor runs at exit, before the preload's
	 * teardown. */
	return check("dlopen'ed", ctor_line, use);
}
