// SPDX-License-Identifier: MIT
/*
 * sendfile and splice on an offloaded socket. The kernel's would move
 * data between the other fd and the kernel socket, which sends where
 * the kernel routes and receives nothing: so each is done here, as one
 * datagram through the endpoint, the way the kernel does it for UDP:
 *   - sendfile(sock, file): what is there of @count bytes from the file
 *     is one datagram (EMSGSIZE past 65507 bytes, the file untouched);
 *   - splice(pipe, sock): what is in the pipe, up to @len, is one
 *     datagram; the pipe gives it up only once sent (tee first), as
 *     the kernel consumes its buffers only once sent;
 *   - splice(sock, pipe): one datagram into the pipe, cut to @len and to
 *     the room the pipe has (the rest is dropped, as by recv).
 * vmsplice and tee take pipes only, which a socket is not: the kernel
 * refuses them (EBADF, EINVAL) and they are not interposed.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

/* One byte more than a datagram holds, so an oversize one is the core's
 * EMSGSIZE, as the kernel's. */
#define PL_SPLICE_MAX 65508

static long send_buf(struct pl_sock *s, void *buf, size_t len, int flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	return pl_sendmsg_sock(s, &m, flags);
}

static long recv_buf(struct pl_sock *s, void *buf, size_t len)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	return pl_recvmsg_sock(s, &m, 0);
}

static long sendfile_sock(struct pl_sock *s, int in, off64_t *off,
			  size_t count)
{
	size_t n = count < PL_SPLICE_MAX ? count : PL_SPLICE_MAX;
	off64_t pos;
	ssize_t got;
	char *buf;
	long r;

	if (!count)
		return 0;
	pos = off ? *off : lseek64(in, 0, SEEK_CUR);
	if (off && pos < 0)
		return -EINVAL;
	buf = malloc(n);
	if (!buf)
		return -ENOMEM;
	/* Read where the kernel would, and move the offset only by what
	 * was sent. A file without one (a pipe, a socket, offloaded or
	 * not) gives its bytes up. */
	got = pos >= 0 ? pread64(in, buf, n, pos) : read(in, buf, n);
	if (got < 0)
		r = -errno;
	else
		r = got ? send_buf(s, buf, (size_t)got, 0) : 0;
	free(buf);
	if (r > 0 && pos >= 0) {
		if (off)
			*off = pos + r;
		else
			(void)lseek64(in, pos + r, SEEK_SET);
	}
	return r;
}

static bool is_pipe(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

static bool nonblocking(int fd, unsigned int flags)
{
	return (flags & SPLICE_F_NONBLOCK) ||
	       (pl_real.fcntl(fd, F_GETFL) & O_NONBLOCK);
}

static long splice_to_sock(struct pl_sock *s, int in,
			   const off64_t *off_in, const off64_t *off_out,
			   size_t len, unsigned int flags)
{
	/* SPLICE_F_MORE corks, as MSG_MORE, which send refuses. The send
	 * waits or not as the socket does. */
	int p[2], f = (flags & SPLICE_F_MORE) ? MSG_MORE : 0;
	ssize_t n;
	char *buf;
	long r;

	/* The kernel's answers: one end must be a pipe, which has no
	 * offset, and a socket takes none. */
	if (!is_pipe(in))
		return -EINVAL;
	if (off_in)
		return -ESPIPE;
	if (off_out)
		return -EINVAL;
	if (!len)
		return 0;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	/* A copy, so the pipe keeps its bytes if the send fails. */
	n = tee(in, p[1], len < PL_SPLICE_MAX ? len : PL_SPLICE_MAX,
		nonblocking(in, flags) ? SPLICE_F_NONBLOCK : 0);
	r = n < 0 ? -errno : 0;
	buf = n > 0 ? malloc((size_t)n) : NULL;
	if (n > 0 && !buf)
		r = -ENOMEM;
	if (buf) {
		n = pl_real.read(p[0], buf, (size_t)n);
		r = n < 0 ? -errno : send_buf(s, buf, (size_t)n, f);
		/* Sent: the pipe gives the bytes up. */
		if (r > 0)
			(void)pl_real.read(in, buf, (size_t)r);
		free(buf);
	}
	pl_real.close(p[0]);
	pl_real.close(p[1]);
	return r;
}

/* The room the pipe has, as the kernel counts it: whole pages. */
static long pipe_room(int fd)
{
	int size = pl_real.fcntl(fd, F_GETPIPE_SZ), used = 0;
	long page = sysconf(_SC_PAGESIZE);

	if (size < 0 || pl_real.ioctl(fd, FIONREAD, &used) < 0)
		return -errno;
	return (size - used) / page * page;
}

static long splice_from_sock(struct pl_sock *s, int out,
			     const off64_t *off_in, const off64_t *off_out,
			     size_t len, unsigned int flags)
{
	struct pollfd pw = { .fd = out, .events = POLLOUT };
	long room, r;
	size_t n;
	char *buf;

	if (!is_pipe(out))
		return -EINVAL;
	if (off_out)
		return -ESPIPE;
	if (off_in)
		return -EINVAL;
	if (!len)
		return 0;
	/* The kernel waits for room before it receives. */
	while ((room = pipe_room(out)) == 0) {
		if (nonblocking(out, flags))
			return -EAGAIN;
		if (pl_real.poll(&pw, 1, -1) < 0)
			return -errno;
	}
	if (room < 0)
		return room;
	n = len < (size_t)room ? len : (size_t)room;
	if (n > PL_SPLICE_MAX)
		n = PL_SPLICE_MAX;
	buf = malloc(n);
	if (!buf)
		return -ENOMEM;
	/* The receive may wait, a cancellation point. */
	pthread_cleanup_push(free, buf);
	r = recv_buf(s, buf, n);
	pthread_cleanup_pop(0);
	if (r > 0) {
		ssize_t w = pl_real.write(out, buf, (size_t)r);

		r = w < 0 ? -errno : w;
	}
	free(buf);
	return r;
}

PL_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	struct pl_sock *s;
	off64_t o = 0;
	long r;

	if (!pl_sym_ready())
		return syscall(SYS_sendfile, out, in, off, count);
	s = pl_get(out);
	if (!s)
		return pl_real.sendfile(out, in, off, count);
	if (off)
		o = *off;
	pthread_cleanup_push(pl_put_cleanup, s);
	r = sendfile_sock(s, in, off ? &o : NULL, count);
	pthread_cleanup_pop(1);
	if (off && r > 0)
		*off = (off_t)o;
	return pl_ret(r);
}

PL_EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t count)
{
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return syscall(SYS_sendfile, out, in, off, count);
	s = pl_get(out);
	if (!s)
		return pl_real.sendfile64(out, in, off, count);
	pthread_cleanup_push(pl_put_cleanup, s);
	r = sendfile_sock(s, in, off, count);
	pthread_cleanup_pop(1);
	return pl_ret(r);
}

PL_EXPORT ssize_t splice(int in, off64_t *off_in, int out, off64_t *off_out,
			 size_t len, unsigned int flags)
{
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return syscall(SYS_splice, in, off_in, out, off_out, len, flags);
	s = pl_get(out);
	if (s) {
		pthread_cleanup_push(pl_put_cleanup, s);
		r = splice_to_sock(s, in, off_in, off_out, len, flags);
		pthread_cleanup_pop(1);
		return pl_ret(r);
	}
	s = pl_get(in);
	if (!s)
		return pl_real.splice(in, off_in, out, off_out, len, flags);
	pthread_cleanup_push(pl_put_cleanup, s);
	r = splice_from_sock(s, out, off_in, off_out, len, flags);
	pthread_cleanup_pop(1);
	return pl_ret(r);
}
