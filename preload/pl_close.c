// SPDX-License-Identifier: MIT
/*
 * The ways an fd is closed besides close() (pl_socket.c): close_range,
 * closefrom, and the stdio calls that close a stream's fd inside glibc
 * with an inline system call, past close(). Each unmaps the offloaded
 * fds it closes before the kernel frees their numbers, so the number's
 * next user (a file, a pipe) is never read through a dead endpoint, and
 * a socket() racing with us never has its new mapping removed.
 *
 * A vfork child has fds of its own but our memory: its closes are the
 * kernel's alone, as close() does.
 */
#include <limits.h>
#include <linux/close_range.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

/* Unmaps the offloaded fds in [@first, @last]. */
static void unmap_range(unsigned int first, unsigned int last)
{
	int fd;

	if (first > INT_MAX || pl_vforked())
		return;
	for (fd = pl_fdtab_next((int)first);
	     fd >= 0 && (unsigned int)fd <= last;
	     fd = pl_fdtab_next(fd + 1))
		pl_unref(pl_remove(fd));
	pl_epset_close_range(first, last);
}

PL_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	if (!pl_sym_ready() || !pl_real.close_range)
		return (int)syscall(SYS_close_range, first, last, flags);
	/* CLOSE_RANGE_CLOEXEC only marks: the fds stay open, and an exec
	 * reads the mark (pl_exec.c). An invalid call closes nothing. */
	if (first <= last &&
	    !(flags & ~(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC)) &&
	    !(flags & CLOSE_RANGE_CLOEXEC))
		unmap_range(first, last);
	return pl_real.close_range(first, last, flags);
}

PL_EXPORT void closefrom(int lowfd)
{
	if (lowfd < 0)
		lowfd = 0;
	if (!pl_sym_ready() || !pl_real.closefrom) {
		syscall(SYS_close_range, lowfd, ~0U, 0);
		return;
	}
	unmap_range((unsigned int)lowfd, ~0U);
	pl_real.closefrom(lowfd);
}

/* A stream's fd, unmapped before libc closes it. Output still buffered
 * is flushed first, while the fd is still the endpoint's. */
static struct pl_sock *stream_unmap(FILE *f)
{
	int fd = f ? fileno(f) : -1;

	if (fd < 0 || !pl_mapped(fd) || pl_vforked())
		return NULL;
	if (__fpending(f))
		(void)fflush(f);
	pl_epset_close(fd);
	return pl_remove(fd);
}

PL_EXPORT int fclose(FILE *f)
{
	struct pl_sock *s;
	int r, e;

	if (!pl_sym_ready()) {
		errno = EAGAIN;
		return EOF;
	}
	s = stream_unmap(f);
	r = pl_real.fclose(f);
	e = errno;
	pl_unref(s);
	errno = e;
	return r;
}

/* The stream's old fd is closed and the file opened, maybe on the same
 * number. With no path, the same file is reopened, fd and all. */
static FILE *reopen(FILE *(*real)(const char *, const char *, FILE *),
		    const char *path, const char *mode, FILE *f)
{
	struct pl_sock *s;
	FILE *r;
	int e;

	if (!pl_sym_ready() || !real) {
		errno = EAGAIN;
		return NULL;
	}
	s = path ? stream_unmap(f) : NULL;
	r = real(path, mode, f);
	e = errno;
	pl_unref(s);
	errno = e;
	return r;
}

PL_EXPORT FILE *freopen(const char *path, const char *mode, FILE *f)
{
	return reopen(pl_sym_ready() ? pl_real.freopen : NULL, path, mode, f);
}

PL_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *f)
{
	return reopen(pl_sym_ready() ? pl_real.freopen64 : NULL, path, mode,
		      f);
}
