// SPDX-License-Identifier: MIT
/*
 * syscall(): a program (or a runtime: Go's cgo, some JITs, libraries
 * that avoid libc wrappers) that calls syscall(SYS_recvfrom, fd, ...)
 * on an offloaded fd would reach the kernel socket, which receives
 * nothing. The socket, data, fd, poll and epoll numbers go to our own
 * definitions, the way a libc call would; everything else, and every
 * data call on an fd that is not ours, goes to libc's syscall()
 * unchanged.
 *
 * The preload itself calls syscall() where pl_real is not usable (on the
 * thread resolving it, pl_sym.c). Those calls land here too, so this
 * path must reach the kernel without pl_real or libc's syscall: the
 * system call instruction, inline. Hence x86_64 and aarch64 only;
 * elsewhere syscall() is not interposed (docs/preload.md).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

#if defined(__x86_64__) || defined(__aarch64__)

static long raw6(long n, long a, long b, long c, long d, long e, long f)
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8),
			   "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
#else
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;

	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
#endif
}

/* Calls whose first argument is an fd, ours only when it is mapped. */
static bool fd_call(long n)
{
	switch (n) {
	case SYS_bind:
	case SYS_connect:
	case SYS_shutdown:
	case SYS_getsockname:
	case SYS_getpeername:
	case SYS_setsockopt:
	case SYS_getsockopt:
	case SYS_sendto:
	case SYS_sendmsg:
	case SYS_sendmmsg:
	case SYS_recvfrom:
	case SYS_recvmsg:
	case SYS_recvmmsg:
	case SYS_read:
	case SYS_write:
	case SYS_readv:
	case SYS_writev:
	case SYS_sendfile:
	case SYS_epoll_ctl:
		return true;
	default:
		return false;
	}
}

static long fd_dispatch(long n, long *a)
{
	int fd = (int)a[0];

	switch (n) {
	case SYS_bind:
		return bind(fd, (const struct sockaddr *)a[1], (socklen_t)a[2]);
	case SYS_connect:
		return connect(fd, (const struct sockaddr *)a[1],
			       (socklen_t)a[2]);
	case SYS_shutdown:
		return shutdown(fd, (int)a[1]);
	case SYS_getsockname:
		return getsockname(fd, (struct sockaddr *)a[1],
				   (socklen_t *)a[2]);
	case SYS_getpeername:
		return getpeername(fd, (struct sockaddr *)a[1],
				   (socklen_t *)a[2]);
	case SYS_setsockopt:
		return setsockopt(fd, (int)a[1], (int)a[2],
				  (const void *)a[3], (socklen_t)a[4]);
	case SYS_getsockopt:
		return getsockopt(fd, (int)a[1], (int)a[2], (void *)a[3],
				  (socklen_t *)a[4]);
	case SYS_sendto:
		return sendto(fd, (const void *)a[1], (size_t)a[2], (int)a[3],
			      (const struct sockaddr *)a[4], (socklen_t)a[5]);
	case SYS_sendmsg:
		return sendmsg(fd, (const struct msghdr *)a[1], (int)a[2]);
	case SYS_sendmmsg:
		return sendmmsg(fd, (struct mmsghdr *)a[1], (unsigned int)a[2],
				(int)a[3]);
	case SYS_recvfrom:
		return recvfrom(fd, (void *)a[1], (size_t)a[2], (int)a[3],
				(struct sockaddr *)a[4], (socklen_t *)a[5]);
	case SYS_recvmsg:
		return recvmsg(fd, (struct msghdr *)a[1], (int)a[2]);
	case SYS_recvmmsg:
		return recvmmsg(fd, (struct mmsghdr *)a[1], (unsigned int)a[2],
				(int)a[3], (struct timespec *)a[4]);
	case SYS_read:
		return read(fd, (void *)a[1], (size_t)a[2]);
	case SYS_write:
		return write(fd, (const void *)a[1], (size_t)a[2]);
	case SYS_readv:
		return readv(fd, (const struct iovec *)a[1], (int)a[2]);
	case SYS_writev:
		return writev(fd, (const struct iovec *)a[1], (int)a[2]);
	case SYS_sendfile:
		return sendfile64(fd, (int)a[1], (off64_t *)a[2], (size_t)a[3]);
	default:
		/* SYS_epoll_ctl: the target fd is the third argument. */
		return epoll_ctl(fd, (int)a[1], (int)a[2],
				 (struct epoll_event *)a[3]);
	}
}

static bool pollfds_mapped(const struct pollfd *p, unsigned long n)
{
	unsigned long i;

	for (i = 0; p && i < n; i++)
		if (pl_mapped(p[i].fd))
			return true;
	return false;
}

static bool fdsets_mapped(int nfds, const fd_set *r, const fd_set *w,
			  const fd_set *e)
{
	int fd;

	for (fd = 0; fd < nfds && fd < FD_SETSIZE; fd++)
		if (((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) ||
		     (e && FD_ISSET(fd, e))) && pl_mapped(fd))
			return true;
	return false;
}

/* pselect6's last argument: the mask and its size, by pointer. */
struct pl_sigset_arg {
	const sigset_t *ss;
	size_t len;
};

/* The calls that are ours whatever the fd (they make, copy, close or
 * wait on several), or -ENOSYS when @n is none of them. A wait whose
 * sets hold no offloaded fd stays the kernel's, as raw as asked (the
 * time left written back, for one). */
static long any_dispatch(long n, long *a, bool *ours)
{
	*ours = true;
	switch (n) {
	case SYS_socket:
		return socket((int)a[0], (int)a[1], (int)a[2]);
	case SYS_close:
		return close((int)a[0]);
#ifdef SYS_close_range
	case SYS_close_range:
		return close_range((unsigned int)a[0], (unsigned int)a[1],
				   (int)a[2]);
#endif
	case SYS_dup:
		return dup((int)a[0]);
#ifdef SYS_dup2
	case SYS_dup2:
		return dup2((int)a[0], (int)a[1]);
#endif
	case SYS_dup3:
		return dup3((int)a[0], (int)a[1], (int)a[2]);
	case SYS_fcntl:
		return fcntl((int)a[0], (int)a[1], a[2]);
	case SYS_ioctl:
		return ioctl((int)a[0], (unsigned long)a[1], (void *)a[2]);
#ifdef SYS_poll
	case SYS_poll:
		if (!pollfds_mapped((struct pollfd *)a[0], (unsigned long)a[1]))
			break;
		return poll((struct pollfd *)a[0], (nfds_t)a[1], (int)a[2]);
#endif
	case SYS_ppoll:
		if (!pollfds_mapped((struct pollfd *)a[0], (unsigned long)a[1]))
			break;
		return ppoll((struct pollfd *)a[0], (nfds_t)a[1],
			     (const struct timespec *)a[2],
			     (const sigset_t *)a[3]);
#ifdef SYS_select
	case SYS_select:
		if (!fdsets_mapped((int)a[0], (fd_set *)a[1], (fd_set *)a[2],
				   (fd_set *)a[3]))
			break;
		return select((int)a[0], (fd_set *)a[1], (fd_set *)a[2],
			      (fd_set *)a[3], (struct timeval *)a[4]);
#endif
	case SYS_pselect6: {
		const struct pl_sigset_arg *sa = (const void *)a[5];

		if (!fdsets_mapped((int)a[0], (fd_set *)a[1], (fd_set *)a[2],
				   (fd_set *)a[3]))
			break;
		return pselect((int)a[0], (fd_set *)a[1], (fd_set *)a[2],
			       (fd_set *)a[3], (const struct timespec *)a[4],
			       sa ? sa->ss : NULL);
	}
#ifdef SYS_epoll_wait
	case SYS_epoll_wait:
		return epoll_wait((int)a[0], (struct epoll_event *)a[1],
				  (int)a[2], (int)a[3]);
#endif
	case SYS_epoll_pwait:
		return epoll_pwait((int)a[0], (struct epoll_event *)a[1],
				   (int)a[2], (int)a[3],
				   (const sigset_t *)a[4]);
	case SYS_splice:
		if (!pl_mapped((int)a[0]) && !pl_mapped((int)a[2]))
			break;
		return splice((int)a[0], (off64_t *)a[1], (int)a[2],
			      (off64_t *)a[3], (size_t)a[4],
			      (unsigned int)a[5]);
#ifdef SYS_io_uring_register
	case SYS_io_uring_register:
		return pl_unsup_uring_register(a);
#endif
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
		return epoll_pwait2((int)a[0], (struct epoll_event *)a[1],
				    (int)a[2], (const struct timespec *)a[3],
				    (const sigset_t *)a[4]);
#endif
	default:
		break;
	}
	*ours = false;
	return -ENOSYS;
}

PL_EXPORT long syscall(long n, ...)
{
	long a[6], r;
	va_list ap;
	bool ours;
	int i;

	/* As libc's: six register-sized arguments, whatever the call. */
	va_start(ap, n);
	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (!pl_sym_ready()) {
		r = raw6(n, a[0], a[1], a[2], a[3], a[4], a[5]);
		if (r < 0 && r > -4096) {
			errno = (int)-r;
			r = -1;
		}
		return r;
	}
	if (fd_call(n)) {
		int fd = (int)(n == SYS_epoll_ctl ? a[2] : a[0]);

		if (pl_mapped(fd))
			return fd_dispatch(n, a);
	} else {
		r = any_dispatch(n, a, &ours);
		if (ours)
			return r;
	}
	return pl_real.syscall(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

#endif /* __x86_64__ || __aarch64__ */
