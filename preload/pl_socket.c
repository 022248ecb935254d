// SPDX-License-Identifier: MIT
/*
 * Socket lifetime and addressing calls. Each looks the fd up; an fd that
 * is not offloaded goes to libc untouched.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

/* The core's own sockets (host port, IGMP, interface queries) must never
 * be offloaded: they are the ones made by code inside libqpsock. */
static bool from_core(const void *ret_addr)
{
	static void *core_base;
	Dl_info di;

	if (!core_base && dladdr((void *)qps_ctx_create, &di))
		core_base = di.dli_fbase;
	return dladdr(ret_addr, &di) && di.dli_fbase == core_base;
}

static bool wanted(int domain, int type, int protocol)
{
	return domain == AF_INET && (type & 0xf) == SOCK_DGRAM &&
	       (protocol == 0 || protocol == IPPROTO_UDP) && pl_conf.offload &&
	       __atomic_load_n(&pl_state, __ATOMIC_ACQUIRE) == PL_RUNNING;
}

PL_EXPORT int socket(int domain, int type, int protocol)
{
	int fd;

	if (!pl_sym_ready())
		return (int)syscall(SYS_socket, domain, type, protocol);
	fd = pl_real.socket(domain, type, protocol);
	if (fd >= 0 && wanted(domain, type, protocol) &&
	    !from_core(__builtin_return_address(0)))
		pl_sock_offload(fd, type);
	return fd;
}

PL_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	char why[PL_WHY_MAX];
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return (int)syscall(SYS_bind, fd, addr, len);
	s = pl_get(fd);
	if (!s)
		return pl_real.bind(fd, addr, len);
	if (s->fresh && pl_policy_bind(s, addr, len, why, sizeof(why))) {
		pl_sock_fallback(fd, s, why);
		pl_put(s);
		return pl_real.bind(fd, addr, len);
	}
	r = qps_bind(s->ep, addr, len);
	if (r == 0) {
		s->fresh = false;
		pl_joins_apply(s);
	}
	pl_put(s);
	return (int)pl_ret(r);
}

PL_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	char why[PL_WHY_MAX];
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return (int)syscall(SYS_connect, fd, addr, len);
	s = pl_get(fd);
	if (!s)
		return pl_real.connect(fd, addr, len);
	if (s->fresh && pl_policy_dest(s, addr, len, why, sizeof(why))) {
		pl_sock_fallback(fd, s, why);
		pl_put(s);
		return pl_real.connect(fd, addr, len);
	}
	if (addr && addr->sa_family == AF_INET)
		pl_joins_before_tx(s);
	r = qps_connect(s->ep, addr, len);
	if (r == 0 && addr && addr->sa_family == AF_INET)
		s->fresh = false;
	pl_put(s);
	return (int)pl_ret(r);
}

PL_EXPORT int close(int fd)
{
	struct pl_sock *s;
	int r, e;

	if (!pl_sym_ready())
		return (int)syscall(SYS_close, fd);
	if (pl_mapped(fd) && pl_vforked())
		return pl_real.close(fd);
	/* Unmapped before the number is free, so a socket() racing with
	 * us never has its new mapping removed. */
	s = pl_remove(fd);
	pl_epset_close(fd);
	r = pl_real.close(fd);
	e = errno;
	pl_unref(s);
	errno = e;
	return r;
}

PL_EXPORT int shutdown(int fd, int how)
{
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return (int)syscall(SYS_shutdown, fd, how);
	s = pl_get(fd);
	if (!s)
		return pl_real.shutdown(fd, how);
	r = qps_shutdown(s->ep, how);
	pl_put(s);
	return (int)pl_ret(r);
}

PL_EXPORT int dup(int fd)
{
	int r;

	if (!pl_sym_ready())
		return (int)syscall(SYS_dup, fd);
	r = pl_real.dup(fd);
	if (r >= 0)
		pl_dup_map(fd, r);
	return r;
}

PL_EXPORT int dup2(int fd, int newfd)
{
	int r;

	if (!pl_sym_ready())
		return (int)syscall(SYS_dup3, fd, newfd, 0);
	r = pl_real.dup2(fd, newfd);
	if (r >= 0 && fd != newfd)
		pl_dup_map(fd, r);
	return r;
}

PL_EXPORT int dup3(int fd, int newfd, int flags)
{
	int r;

	if (!pl_sym_ready())
		return (int)syscall(SYS_dup3, fd, newfd, flags);
	r = pl_real.dup3(fd, newfd, flags);
	if (r >= 0)
		pl_dup_map(fd, r);
	return r;
}

/* After the kernel's fcntl succeeded: what it means for the endpoint. */
static void fcntl_follow(int fd, int cmd, long arg, int r)
{
	struct pl_sock *s;

	if (r < 0)
		return;
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
		pl_dup_map(fd, r);
		return;
	}
	if (cmd != F_SETFL)
		return;
	s = pl_get(fd);
	if (s) {
		qps_set_nonblock(s->ep, (arg & O_NONBLOCK) != 0);
		pl_put(s);
	}
}

PL_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	long arg;
	int r;

	va_start(ap, cmd);
	arg = va_arg(ap, long);
	va_end(ap);
	if (!pl_sym_ready())
		return (int)syscall(SYS_fcntl, fd, cmd, arg);
	r = pl_real.fcntl(fd, cmd, arg);
	fcntl_follow(fd, cmd, arg, r);
	return r;
}

PL_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	long arg;
	int r;

	va_start(ap, cmd);
	arg = va_arg(ap, long);
	va_end(ap);
	if (!pl_sym_ready())
		return (int)syscall(SYS_fcntl, fd, cmd, arg);
	r = pl_real.fcntl64(fd, cmd, arg);
	fcntl_follow(fd, cmd, arg, r);
	return r;
}

/* FIONREAD on UDP: the size of the next datagram, 0 when none. */
static long next_datagram_len(struct pl_sock *s)
{
	long n = qps_recv(s->ep, NULL, 0,
			  QPS_MSG_PEEK | QPS_MSG_TRUNC | QPS_MSG_DONTWAIT);

	return n == -EAGAIN ? 0 : n;
}

PL_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	struct pl_sock *s;
	va_list ap;
	void *argp;
	long r;

	va_start(ap, req);
	argp = va_arg(ap, void *);
	va_end(ap);
	if (!pl_sym_ready())
		return (int)syscall(SYS_ioctl, fd, req, argp);
	if (req != FIONBIO && req != FIONREAD)
		return pl_real.ioctl(fd, req, argp);
	s = pl_get(fd);
	if (!s)
		return pl_real.ioctl(fd, req, argp);
	if (req == FIONBIO) {
		/* The kernel's answer (and its O_NONBLOCK) first. */
		r = pl_real.ioctl(fd, req, argp);
		if (r == 0)
			qps_set_nonblock(s->ep, *(int *)argp != 0);
		pl_put(s);
		return (int)r;
	}
	r = next_datagram_len(s);
	if (r >= 0)
		*(int *)argp = (int)r;
	pl_put(s);
	return (int)pl_ret(r < 0 ? r : 0);
}

PL_EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct pl_sock *s = pl_sym_ready() ? pl_get(fd) : NULL;
	long r;

	if (!s)
		return pl_real.getsockname ? pl_real.getsockname(fd, addr, len) :
		       (int)syscall(SYS_getsockname, fd, addr, len);
	r = qps_getsockname(s->ep, addr, len);
	pl_put(s);
	return (int)pl_ret(r == -EINVAL ? -EFAULT : r);
}

PL_EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct pl_sock *s = pl_sym_ready() ? pl_get(fd) : NULL;
	long r;

	if (!s)
		return pl_real.getpeername ? pl_real.getpeername(fd, addr, len) :
		       (int)syscall(SYS_getpeername, fd, addr, len);
	r = qps_getpeername(s->ep, addr, len);
	pl_put(s);
	return (int)pl_ret(r == -EINVAL ? -EFAULT : r);
}
