// SPDX-License-Identifier: MIT
/*
 * The definitions after ours, found with dlsym(RTLD_NEXT). Resolution
 * happens once, on the first call that needs it. dlsym can allocate, and
 * an allocator's own initialisation may call read() or open() (jemalloc
 * does, under its init lock): such a call arrives here on the resolving
 * thread, which must not wait for itself, so pl_sym_ready() says "not
 * ready" to that thread only and its calls go to the kernel by syscall.
 * Other threads wait for the resolver, which never blocks.
 */
#include <dlfcn.h>
#include <sched.h>

#include "preload.h"

struct pl_real pl_real;

enum { SYM_NONE, SYM_BUSY, SYM_DONE };
static int sym_state;
static __thread int sym_resolving __attribute__((tls_model("initial-exec")));

#define RESOLVE(name) \
	(*(void **)&pl_real.name = dlsym(RTLD_NEXT, #name))

static void sym_resolve(void)
{
	RESOLVE(socket);
	RESOLVE(bind);
	RESOLVE(connect);
	RESOLVE(close);
	RESOLVE(close_range);
	RESOLVE(closefrom);
	RESOLVE(fclose);
	RESOLVE(freopen);
	RESOLVE(freopen64);
	RESOLVE(shutdown);
	RESOLVE(dup);
	RESOLVE(dup2);
	RESOLVE(dup3);
	RESOLVE(fcntl);
	RESOLVE(fcntl64);
	RESOLVE(ioctl);
	RESOLVE(getsockname);
	RESOLVE(getpeername);
	RESOLVE(setsockopt);
	RESOLVE(getsockopt);
	RESOLVE(send);
	RESOLVE(sendto);
	RESOLVE(sendmsg);
	RESOLVE(sendmmsg);
	RESOLVE(write);
	RESOLVE(writev);
	RESOLVE(recv);
	RESOLVE(recvfrom);
	RESOLVE(recvmsg);
	RESOLVE(recvmmsg);
	RESOLVE(read);
	RESOLVE(readv);
	RESOLVE(sendfile);
	RESOLVE(sendfile64);
	RESOLVE(splice);
	RESOLVE(poll);
	RESOLVE(ppoll);
	RESOLVE(select);
	RESOLVE(pselect);
	RESOLVE(epoll_ctl);
	RESOLVE(epoll_pwait);
	RESOLVE(sigaction);
	RESOLVE(epoll_pwait2);
	RESOLVE(syscall);
	RESOLVE(execve);
	RESOLVE(execvpe);
	RESOLVE(fexecve);
	/* An older libc without fcntl64: the plain one is the same call. */
	if (!pl_real.fcntl64)
		pl_real.fcntl64 = pl_real.fcntl;
}

bool pl_sym_ready(void)
{
	int st = __atomic_load_n(&sym_state, __ATOMIC_ACQUIRE);

	if (st == SYM_DONE)
		return true;
	if (sym_resolving)
		return false;
	st = SYM_NONE;
	if (__atomic_compare_exchange_n(&sym_state, &st, SYM_BUSY, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		sym_resolving = 1;
		sym_resolve();
		sym_resolving = 0;
		/* Release: the pointers are written before anyone reads
		 * SYM_DONE. */
		__atomic_store_n(&sym_state, SYM_DONE, __ATOMIC_RELEASE);
		return true;
	}
	while (__atomic_load_n(&sym_state, __ATOMIC_ACQUIRE) != SYM_DONE)
		sched_yield();
	return true;
}
