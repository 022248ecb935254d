// SPDX-License-Identifier: MIT
/*
 * Nothing silently ignored (docs/preload.md "What falls back, what is
 * refused"; issue #35 item 8): an option or call qpsock cannot honour
 * sends a fresh socket to the kernel, and once the socket moved data it
 * is refused, never taken and ignored. Run twice by ctest, on the kernel
 * (loopback) and under libqpsock-preload.so (emu), with the same
 * assertions:
 *   - what the kernel would do with a socket that has the option (three
 *     100-byte datagrams for UDP_SEGMENT 100 and 300 bytes) holds in
 *     both runs, or
 *   - where the call may be refused, either it succeeded and the
 *     datagrams are what the kernel makes of it, or it failed with the
 *     errno docs/preload.md gives and they are what they were.
 * A socket that falls back is the kernel's: under the preload it no
 * longer reaches emu's wire. So these tests send what must reach a
 * fallen-back socket through 127.0.0.1, and assert what the kernel does
 * with a datagram that arrives on another interface than the one a
 * socket is bound to ("local_on_lo": the local address is lo's on the
 * kernel, emu's under the preload). test_preload_fallback.sh checks, in
 * the preload's --debug and --stats lines, that each socket that had to
 * fall back did and each refusal was said.
 *
 * Environment: PL_TEST_ADDR, the local address (127.0.0.1 on the
 * kernel, the emu context's under the preload).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>

static struct in_addr local;
static bool local_on_lo;

#define EQ(a, b) CU_ASSERT_EQUAL((long)(a), (long)(b))
/* A call that must fail with @e. */
#define FAILS(call, e) do { \
	errno = 0; \
	EQ((call), -1); \
	EQ(errno, (e)); \
} while (0)

#define MC_GROUP "239.1.2.4"

static struct sockaddr_in sin_of(struct in_addr a, unsigned short port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_addr = a,
				 .sin_port = htons(port) };

	return s;
}

static struct sockaddr_in sin_at(unsigned short port)
{
	return sin_of(local, port);
}

static struct sockaddr_in lo_at(unsigned short port)
{
	struct in_addr lo = { .s_addr = htonl(INADDR_LOOPBACK) };

	return sin_of(lo, port);
}

static struct sockaddr_in any_at(unsigned short port)
{
	struct in_addr any = { .s_addr = htonl(INADDR_ANY) };

	return sin_of(any, port);
}

/* @fd bound to @a; its address in *@out. */
static void bind_to(int fd, struct sockaddr_in a, struct sockaddr_in *out)
{
	socklen_t l = sizeof(*out);

	CU_ASSERT_FATAL(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CU_ASSERT_FATAL(getsockname(fd, (struct sockaddr *)out, &l) == 0);
}

/* A new socket bound to @a (port 0: the kernel's or emu's choice). */
static int bound_at(struct sockaddr_in a, struct sockaddr_in *out)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	CU_ASSERT_FATAL(fd >= 0);
	bind_to(fd, a, out);
	return fd;
}

/* On the local address: offloaded under the preload. */
static int bound(struct sockaddr_in *out)
{
	return bound_at(sin_at(0), out);
}

/* On 127.0.0.1: the kernel's in both runs. */
static int bound_lo(struct sockaddr_in *out)
{
	return bound_at(lo_at(0), out);
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* The sizes of the datagrams that arrive at @fd, until none for 300 ms;
 * how many. */
static int sizes(int fd, int *out, int max)
{
	static char buf[70000];
	int n = 0;
	ssize_t r;

	while (n < max && readable(fd, n ? 300 : 2000)) {
		r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r < 0)
			break;
		out[n++] = (int)r;
	}
	return n;
}

/* Exactly @n datagrams of @size each arrive at @fd. */
static void expect(int fd, int n, int size)
{
	int got[8], k = sizes(fd, got, 8), i;

	EQ(k, n);
	for (i = 0; i < k && i < n; i++)
		EQ(got[i], size);
}

static void none(int fd)
{
	CU_ASSERT(!readable(fd, 300));
}

/* Either the call succeeded, or it failed with @e: whether it was
 * honoured. */
static bool honoured(int r, int e)
{
	if (r == 0)
		return true;
	EQ(r, -1);
	EQ(errno, e);
	return false;
}

static int get_int(int fd, int level, int name)
{
	int v = -12345;
	socklen_t l = sizeof(v);

	EQ(getsockopt(fd, level, name, &v, &l), 0);
	return v;
}

static char payload[70000];

/* A kernel socket on 127.0.0.1 that sends 300 bytes as three
 * 100-byte segments to 127.0.0.1:@port. */
static void gso_send(unsigned short port)
{
	struct sockaddr_in a, to = lo_at(port);
	int fd = bound_lo(&a), v = 100;

	EQ(setsockopt(fd, IPPROTO_UDP, UDP_SEGMENT, &v, sizeof(v)), 0);
	EQ(sendto(fd, payload, 300, 0, (struct sockaddr *)&to, sizeof(to)),
	   300);
	close(fd);
}

/* One datagram from a socket on the local address (offloaded under the
 * preload: it crosses emu's wire) to the local address, @port. */
static void local_send(unsigned short port)
{
	struct sockaddr_in a, to = sin_at(port);
	int fd = bound(&a);

	EQ(sendto(fd, "d", 1, 0, (struct sockaddr *)&to, sizeof(to)), 1);
	close(fd);
}

static void test_segment_fresh(void)
{
	struct sockaddr_in a, r;
	int fs = socket(AF_INET, SOCK_DGRAM, 0), fr = bound_lo(&r), v = 100;

	CU_ASSERT_FATAL(fs >= 0);
	EQ(setsockopt(fs, IPPROTO_UDP, UDP_SEGMENT, &v, sizeof(v)), 0);
	EQ(get_int(fs, IPPROTO_UDP, UDP_SEGMENT), 100);
	bind_to(fs, any_at(0), &a);
	EQ(sendto(fs, payload, 300, 0, (struct sockaddr *)&r, sizeof(r)), 300);
	expect(fr, 3, 100);
	close(fs);
	close(fr);
}

static void test_segment_moved(void)
{
	struct sockaddr_in a, b;
	int fs = bound(&a), fr = bound(&b), v;

	/* The kernel's checks come first, and asking nothing is taken. */
	v = 70000;
	FAILS(setsockopt(fs, IPPROTO_UDP, UDP_SEGMENT, &v, sizeof(v)), EINVAL);
	v = 0;
	EQ(setsockopt(fs, IPPROTO_UDP, UDP_SEGMENT, &v, sizeof(v)), 0);
	v = 100;
	if (honoured(setsockopt(fs, IPPROTO_UDP, UDP_SEGMENT, &v, sizeof(v)),
		     ENOPROTOOPT)) {
		EQ(sendto(fs, payload, 300, 0, (struct sockaddr *)&b,
			  sizeof(b)), 300);
		expect(fr, 3, 100);
	} else {
		EQ(get_int(fs, IPPROTO_UDP, UDP_SEGMENT), 0);
		EQ(sendto(fs, payload, 300, 0, (struct sockaddr *)&b,
			  sizeof(b)), 300);
		expect(fr, 1, 300);
	}
	close(fs);
	close(fr);
}

/* sendmsg of @len bytes to @to with a UDP_SEGMENT control message of
 * @size, @clen its length. */
static ssize_t gso_msg(int fd, struct sockaddr_in *to, size_t len,
		       uint16_t size, size_t clen)
{
	char ctl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { payload, len };
	struct msghdr m = { .msg_name = to, .msg_namelen = sizeof(*to),
			    .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = ctl,
			    .msg_controllen = CMSG_SPACE(clen) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	c->cmsg_level = IPPROTO_UDP;
	c->cmsg_type = UDP_SEGMENT;
	c->cmsg_len = CMSG_LEN(clen);
	memcpy(CMSG_DATA(c), &size, sizeof(size));
	return sendmsg(fd, &m, 0);
}

static void test_segment_cmsg(void)
{
	struct sockaddr_in a, b, r;
	int fs = bound(&a), fr = bound(&b), fa, fl;
	ssize_t n;

	n = gso_msg(fs, &b, 300, 100, sizeof(uint16_t));
	if (n == 300) {
		expect(fr, 3, 100);
	} else {
		EQ(n, -1);
		EQ(errno, EIO);
		none(fr);
	}
	/* A size the datagram does not exceed asks nothing. */
	EQ(gso_msg(fs, &b, 300, 500, sizeof(uint16_t)), 300);
	expect(fr, 1, 300);
	FAILS(gso_msg(fs, &b, 300, 100, sizeof(int)), EINVAL);
	/* To this host the kernel socket sends, segments included. */
	fa = bound_at(any_at(0), &a);
	fl = bound_lo(&r);
	EQ(gso_msg(fa, &r, 300, 100, sizeof(uint16_t)), 300);
	expect(fl, 3, 100);
	close(fs);
	close(fr);
	close(fa);
	close(fl);
}

/* One datagram at @fd: its size, and the UDP_GRO size it carries in
 * *@gro (0: none). */
static ssize_t recv_gro(int fd, int *gro)
{
	char ctl[256];
	struct iovec iov = { payload, sizeof(payload) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c;
	ssize_t n;

	*gro = 0;
	if (!readable(fd, 2000))
		return -1;
	n = recvmsg(fd, &m, MSG_DONTWAIT);
	for (c = n >= 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO)
			memcpy(gro, CMSG_DATA(c), sizeof(*gro));
	return n;
}

static void test_gro_fresh(void)
{
	int fr = socket(AF_INET, SOCK_DGRAM, 0), one = 1, gro;
	struct sockaddr_in a;

	CU_ASSERT_FATAL(fr >= 0);
	EQ(setsockopt(fr, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)), 0);
	bind_to(fr, any_at(0), &a);
	/* Segments sent on loopback reach a GRO socket whole. */
	gso_send(ntohs(a.sin_port));
	EQ(recv_gro(fr, &gro), 300);
	EQ(gro, 100);
	close(fr);
}

static void test_gro_moved(void)
{
	struct sockaddr_in a;
	int fr = bound_at(any_at(0), &a), one = 1, gro;

	if (honoured(setsockopt(fr, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)),
		     ENOPROTOOPT)) {
		gso_send(ntohs(a.sin_port));
		EQ(recv_gro(fr, &gro), 300);
		EQ(gro, 100);
	} else {
		gso_send(ntohs(a.sin_port));
		EQ(recv_gro(fr, &gro), 100);
		EQ(gro, 0);
		expect(fr, 2, 100);
	}
	close(fr);
}

/* A port on 127.0.0.1 nobody holds. */
static struct sockaddr_in closed_port(void)
{
	struct sockaddr_in a;
	int fd = bound_lo(&a);

	close(fd);
	return a;
}

/* Waits up to 2 s for an error on @fd's queue: ECONNREFUSED from an
 * ICMP port unreachable. */
static void expect_refused(int fd)
{
	char ctl[256], b[16];
	struct iovec iov = { b, sizeof(b) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct sock_extended_err ee = { 0 };
	struct cmsghdr *c;
	ssize_t n = -1;
	int i;

	for (i = 0; i < 200 && n < 0; i++) {
		m.msg_control = ctl;
		m.msg_controllen = sizeof(ctl);
		n = recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT);
		if (n < 0)
			usleep(10000);
	}
	EQ(n, 1);
	for (c = n >= 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVERR)
			memcpy(&ee, CMSG_DATA(c), sizeof(ee));
	EQ(ee.ee_errno, ECONNREFUSED);
	EQ(ee.ee_origin, SO_EE_ORIGIN_ICMP);
}

static void errq_empty(int fd)
{
	char b[16];
	struct iovec iov = { b, sizeof(b) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	FAILS(recvmsg(fd, &m, MSG_ERRQUEUE), EAGAIN);
	FAILS(recv(fd, b, sizeof(b), MSG_ERRQUEUE), EAGAIN);
}

static void test_recverr_fresh(void)
{
	struct sockaddr_in a, dead = closed_port();
	int fe = socket(AF_INET, SOCK_DGRAM, 0), one = 1;

	CU_ASSERT_FATAL(fe >= 0);
	EQ(setsockopt(fe, IPPROTO_IP, IP_RECVERR, &one, sizeof(one)), 0);
	bind_to(fe, any_at(0), &a);
	errq_empty(fe);
	EQ(sendto(fe, "x", 1, 0, (struct sockaddr *)&dead, sizeof(dead)), 1);
	expect_refused(fe);
	close(fe);
}

static void test_recverr_moved(void)
{
	struct sockaddr_in a, dead = closed_port();
	int fe = bound_at(any_at(0), &a), fp = bound(&a), one = 1, r;

	/* No error queue: nothing in it. */
	errq_empty(fp);
	r = setsockopt(fe, IPPROTO_IP, IP_RECVERR, &one, sizeof(one));
	EQ(sendto(fe, "x", 1, 0, (struct sockaddr *)&dead, sizeof(dead)), 1);
	if (honoured(r, ENOPROTOOPT)) {
		expect_refused(fe);
	} else {
		usleep(100000);
		errq_empty(fe);
	}
	close(fe);
	close(fp);
}

/* The device @fd is bound to, "" when none. */
static void bound_dev(int fd, char *name, size_t n)
{
	socklen_t l = (socklen_t)n;

	memset(name, 0, n);
	EQ(getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, name, &l), 0);
}

static void test_bindtodevice(void)
{
	struct sockaddr_in a, r, m;
	int fs = socket(AF_INET, SOCK_DGRAM, 0), fr, fc, fm, ret;
	char name[32], buf[8];

	CU_ASSERT_FATAL(fs >= 0);
	ret = setsockopt(fs, SOL_SOCKET, SO_BINDTODEVICE, "lo", 3);
	if (ret < 0 && errno == EPERM) {
		printf("SO_BINDTODEVICE not permitted (kernel before 5.7, not "
		       "root): skipped ");
		close(fs);
		return;
	}
	EQ(ret, 0);
	bound_dev(fs, name, sizeof(name));
	CU_ASSERT(strcmp(name, "lo") == 0);
	bind_to(fs, any_at(0), &a);
	/* It sends on lo: 127.0.0.1 gets it. */
	fr = bound_lo(&r);
	EQ(sendto(fs, "s", 1, 0, (struct sockaddr *)&r, sizeof(r)), 1);
	EQ(readable(fr, 2000), true);
	EQ(recv(fr, buf, sizeof(buf), MSG_DONTWAIT), 1);
	/* It receives what lo delivers, and nothing else. */
	local_send(ntohs(a.sin_port));
	EQ(readable(fs, 500), local_on_lo);
	FAILS(setsockopt(fs, SOL_SOCKET, SO_BINDTODEVICE, "qps-none0", 10),
	      ENODEV);

	/* Clearing asks nothing: the socket keeps its endpoint (the local
	 * address is emu's under the preload, which the kernel refuses). */
	fc = socket(AF_INET, SOCK_DGRAM, 0);
	EQ(setsockopt(fc, SOL_SOCKET, SO_BINDTODEVICE, "", 0), 0);
	bind_to(fc, sin_at(0), &m);

	/* Bound through qpsock: bound to lo, or refused and unchanged. */
	fm = bound(&m);
	FAILS(setsockopt(fm, SOL_SOCKET, SO_BINDTODEVICE, "qps-none0", 10),
	      ENODEV);
	if (honoured(setsockopt(fm, SOL_SOCKET, SO_BINDTODEVICE, "lo", 3),
		     ENOPROTOOPT)) {
		local_send(ntohs(m.sin_port));
		EQ(readable(fm, 500), local_on_lo);
	} else {
		bound_dev(fm, name, sizeof(name));
		EQ(name[0], '\0');
		local_send(ntohs(m.sin_port));
		EQ(readable(fm, 2000), true);
	}
	EQ(setsockopt(fm, SOL_SOCKET, SO_BINDTODEVICE, "", 0), 0);
	close(fs);
	close(fr);
	close(fc);
	close(fm);
}

/* A member of the group on the local address's interface, bound to
 * INADDR_ANY; its port in *@port. */
static int mc_member(unsigned short *port)
{
	struct ip_mreq mr = { .imr_interface = local };
	struct sockaddr_in a;
	int fd = bound_at(any_at(0), &a);

	inet_pton(AF_INET, MC_GROUP, &mr.imr_multiaddr);
	EQ(setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr)), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static void mc_send(int fd, unsigned short port)
{
	struct sockaddr_in g = { .sin_family = AF_INET,
				 .sin_port = htons(port) };

	inet_pton(AF_INET, MC_GROUP, &g.sin_addr);
	EQ(sendto(fd, "m", 1, 0, (struct sockaddr *)&g, sizeof(g)), 1);
}

/* Whether @fd got a group datagram, taken. */
static bool mc_got(int fd, int ms)
{
	char b[8];

	return readable(fd, ms) && recv(fd, b, sizeof(b), MSG_DONTWAIT) == 1;
}

static void test_multicast_if(void)
{
	struct in_addr lo = { .s_addr = htonl(INADDR_LOOPBACK) }, nowhere;
	struct ip_mreq mr = { .imr_interface = local };
	struct sockaddr_in a;
	unsigned short port;
	int fm = mc_member(&port), fs, fo, fb;
	socklen_t l = sizeof(a.sin_addr);

	inet_pton(AF_INET, "203.0.113.77", &nowhere);
	/* lo: the kernel sends there, where the member is only if the
	 * local address is lo's. */
	fs = socket(AF_INET, SOCK_DGRAM, 0);
	EQ(setsockopt(fs, IPPROTO_IP, IP_MULTICAST_IF, &lo, sizeof(lo)), 0);
	mc_send(fs, port);
	EQ(mc_got(fm, 500), local_on_lo);
	/* An address on no interface: the kernel's EADDRNOTAVAIL. */
	fo = socket(AF_INET, SOCK_DGRAM, 0);
	FAILS(setsockopt(fo, IPPROTO_IP, IP_MULTICAST_IF, &nowhere,
			 sizeof(nowhere)), EADDRNOTAVAIL);
	/* The local address's interface, as an address and as ip_mreq
	 * (its interface field): the member gets it. */
	EQ(setsockopt(fo, IPPROTO_IP, IP_MULTICAST_IF, &local, sizeof(local)),
	   0);
	mc_send(fo, port);
	EQ(mc_got(fm, 2000), true);
	inet_pton(AF_INET, MC_GROUP, &mr.imr_multiaddr);
	EQ(setsockopt(fo, IPPROTO_IP, IP_MULTICAST_IF, &mr, sizeof(mr)), 0);
	mc_send(fo, port);
	EQ(mc_got(fm, 2000), true);

	/* Bound through qpsock: lo, or refused and unchanged. */
	fb = bound(&a);
	FAILS(setsockopt(fb, IPPROTO_IP, IP_MULTICAST_IF, &nowhere,
			 sizeof(nowhere)), EADDRNOTAVAIL);
	if (honoured(setsockopt(fb, IPPROTO_IP, IP_MULTICAST_IF, &lo,
				sizeof(lo)), EINVAL)) {
		mc_send(fb, port);
		EQ(mc_got(fm, 500), local_on_lo);
	} else {
		EQ(getsockopt(fb, IPPROTO_IP, IP_MULTICAST_IF, &a.sin_addr, &l),
		   0);
		EQ(a.sin_addr.s_addr, INADDR_ANY);
		mc_send(fb, port);
		EQ(mc_got(fm, 2000), true);
	}
	close(fm);
	close(fs);
	close(fo);
	close(fb);
}

/* A reuseport program that sends every datagram to the group's socket
 * @i (in the order they were bound). */
static int steer(int fd, unsigned int i)
{
	struct sock_filter code[] = {
		BPF_STMT(BPF_RET | BPF_K, i),
	};
	struct sock_fprog prog;

	/* Zeroed whole: the padding after len goes to the kernel too. */
	memset(&prog, 0, sizeof(prog));
	prog.len = 1;
	prog.filter = code;
	return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
			  sizeof(prog));
}

static int reuseport_socket(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1;

	CU_ASSERT_FATAL(fd >= 0);
	EQ(setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)), 0);
	return fd;
}

/* 8 datagrams to the local address, @port, from 8 source ports: how
 * many reach @fa and @fb. */
static void spread(unsigned short port, int fa, int fb, int *na, int *nb)
{
	char b[8];
	int i;

	for (i = 0; i < 8; i++)
		local_send(port);
	*na = *nb = 0;
	while (*na + *nb < 8 && (readable(fa, 0) || readable(fb, 500))) {
		while (recv(fa, b, sizeof(b), MSG_DONTWAIT) == 1)
			(*na)++;
		while (recv(fb, b, sizeof(b), MSG_DONTWAIT) == 1)
			(*nb)++;
	}
}

static void test_reuseport_cbpf(void)
{
	struct sockaddr_in a, b;
	int fa, fb, na, nb, fd = socket(AF_INET, SOCK_DGRAM, 0), bad = -1;

	/* Not in a reuseport group: the kernel's EINVAL. */
	FAILS(steer(fd, 1), EINVAL);
	close(fd);

	/* Before bind: the kernel's group, which sends everything to the
	 * second socket (under the preload, the one left on emu's wire). */
	fa = reuseport_socket();
	EQ(steer(fa, 1), 0);
	bind_to(fa, any_at(0), &a);
	fb = reuseport_socket();
	bind_to(fb, a, &b);
	spread(ntohs(a.sin_port), fa, fb, &na, &nb);
	EQ(na, 0);
	EQ(nb, 8);
	close(fa);
	close(fb);

	/* Bound through qpsock: everything to the first socket (qpsock's
	 * own choice is the last bound), or refused and all arrive. */
	fa = reuseport_socket();
	bind_to(fa, any_at(0), &a);
	fb = reuseport_socket();
	bind_to(fb, a, &b);
	FAILS(setsockopt(fa, SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF, &bad,
			 sizeof(bad)), EBADF);
	if (honoured(steer(fa, 0), EINVAL)) {
		spread(ntohs(a.sin_port), fa, fb, &na, &nb);
		EQ(na, 8);
		EQ(nb, 0);
	} else {
		spread(ntohs(a.sin_port), fa, fb, &na, &nb);
		EQ(na + nb, 8);
	}
	close(fa);
	close(fb);
}

/* A file of @n bytes of payload, at offset 0. */
static int payload_file(size_t n)
{
	char path[] = "/tmp/qps-fallback-XXXXXX";
	int fd = mkstemp(path);

	CU_ASSERT_FATAL(fd >= 0);
	unlink(path);
	EQ(write(fd, payload, n), n);
	EQ(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

/* One datagram of @n bytes at @fd, payload from @from. */
static void expect_bytes(int fd, size_t n, size_t from)
{
	static char buf[70000];

	EQ(readable(fd, 2000), true);
	EQ(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), n);
	CU_ASSERT(memcmp(buf, payload + from, n) == 0);
}

static void test_sendfile(void)
{
	struct sockaddr_in a, b;
	int fs = bound(&a), fr = bound(&b), ff = payload_file(70000);
	off_t off = 1000;
	off64_t off64 = 2000;

	EQ(connect(fs, (struct sockaddr *)&b, sizeof(b)), 0);
	EQ(sendfile(fs, ff, NULL, 300), 300);
	expect_bytes(fr, 300, 0);
	EQ(lseek(ff, 0, SEEK_CUR), 300);
	/* An offset: read there, the file's own untouched. */
	EQ(sendfile(fs, ff, &off, 50), 50);
	EQ(off, 1050);
	expect_bytes(fr, 50, 1000);
	EQ(sendfile64(fs, ff, &off64, 10), 10);
	EQ(off64, 2010);
	expect_bytes(fr, 10, 2000);
	EQ(syscall(SYS_sendfile, fs, ff, NULL, 5), 5);
	expect_bytes(fr, 5, 300);
	EQ(lseek(ff, 0, SEEK_CUR), 305);
	EQ(sendfile(fs, ff, NULL, 0), 0);
	/* What is left of the file; nothing at its end. */
	EQ(lseek(ff, 69900, SEEK_SET), 69900);
	EQ(sendfile(fs, ff, NULL, 300), 100);
	expect_bytes(fr, 100, 69900);
	EQ(sendfile(fs, ff, NULL, 300), 0);
	/* More than a datagram holds: nothing sent, nothing read. */
	EQ(lseek(ff, 0, SEEK_SET), 0);
	FAILS(sendfile(fs, ff, NULL, 70000), EMSGSIZE);
	EQ(lseek(ff, 0, SEEK_CUR), 0);
	none(fr);
	close(fs);
	close(fr);
	close(ff);
}

static void test_splice(void)
{
	struct sockaddr_in a, b;
	int fs = bound(&a), fr = bound(&b), p[2];
	struct iovec iov = { payload, 10 };
	loff_t off = 0;
	char buf[2048];

	CU_ASSERT_FATAL(pipe(p) == 0);
	EQ(connect(fs, (struct sockaddr *)&b, sizeof(b)), 0);
	/* Pipe to socket: what is in the pipe, up to len, one datagram. */
	EQ(write(p[1], payload, 300), 300);
	EQ(write(p[1], payload + 300, 200), 200);
	EQ(splice(p[0], NULL, fs, NULL, 1000, 0), 500);
	expect_bytes(fr, 500, 0);
	EQ(write(p[1], payload, 300), 300);
	EQ(splice(p[0], NULL, fs, NULL, 100, 0), 100);
	expect_bytes(fr, 100, 0);
	EQ(splice(p[0], NULL, fs, NULL, 1000, SPLICE_F_NONBLOCK), 200);
	expect_bytes(fr, 200, 100);
	FAILS(splice(p[0], NULL, fs, NULL, 1000, SPLICE_F_NONBLOCK), EAGAIN);
	FAILS(splice(p[0], &off, fs, NULL, 10, 0), ESPIPE);

	/* Socket to pipe: one datagram, cut to len. */
	EQ(fcntl(fr, F_SETFL, O_NONBLOCK), 0);
	EQ(send(fs, payload, 500, 0), 500);
	EQ(readable(fr, 2000), true);
	EQ(splice(fr, NULL, p[1], NULL, 100, 0), 100);
	EQ(send(fs, payload + 500, 400, 0), 400);
	EQ(readable(fr, 2000), true);
	EQ(splice(fr, NULL, p[1], NULL, 1000, 0), 400);
	EQ(read(p[0], buf, sizeof(buf)), 500);
	CU_ASSERT(memcmp(buf, payload, 100) == 0);
	CU_ASSERT(memcmp(buf + 100, payload + 500, 400) == 0);
	FAILS(splice(fr, NULL, p[1], NULL, 1000, 0), EAGAIN);

	/* Pipes only, which a socket is not: the kernel's. */
	FAILS(vmsplice(fs, &iov, 1, 0), EBADF);
	FAILS(tee(fs, p[1], 10, 0), EINVAL);
	close(fs);
	close(fr);
	close(p[0]);
	close(p[1]);
}

/* A ring of its own, by the raw system calls: what liburing does, but
 * through glibc's syscall(), which the preload can see. */
struct ring {
	int fd;
	struct io_uring_params p;
	void *sq, *cq;
	size_t sq_len, cq_len;
	struct io_uring_sqe *sqes;
};

static bool ring_open(struct ring *r)
{
	memset(r, 0, sizeof(*r));
	r->fd = (int)syscall(SYS_io_uring_setup, 4, &r->p);
	if (r->fd < 0)
		return false;
	r->sq_len = r->p.sq_off.array + r->p.sq_entries * sizeof(unsigned);
	r->cq_len = r->p.cq_off.cqes +
		    r->p.cq_entries * sizeof(struct io_uring_cqe);
	r->sq = mmap(NULL, r->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		     r->fd, IORING_OFF_SQ_RING);
	r->cq = mmap(NULL, r->cq_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		     r->fd, IORING_OFF_CQ_RING);
	r->sqes = mmap(NULL, r->p.sq_entries * sizeof(struct io_uring_sqe),
		       PROT_READ | PROT_WRITE, MAP_SHARED, r->fd,
		       IORING_OFF_SQES);
	CU_ASSERT_FATAL(r->sq != MAP_FAILED && r->cq != MAP_FAILED &&
			r->sqes != MAP_FAILED);
	return true;
}

static void ring_close(struct ring *r)
{
	munmap(r->sq, r->sq_len);
	munmap(r->cq, r->cq_len);
	munmap(r->sqes, r->p.sq_entries * sizeof(struct io_uring_sqe));
	close(r->fd);
}

static unsigned *ring_u(void *base, unsigned off)
{
	return (unsigned *)((char *)base + off);
}

/* A receive of up to @len bytes on the ring's registered file 0. */
static void ring_recv(struct ring *r, void *buf, unsigned len)
{
	unsigned tail = __atomic_load_n(ring_u(r->sq, r->p.sq_off.tail),
					__ATOMIC_ACQUIRE);
	unsigned i = tail & *ring_u(r->sq, r->p.sq_off.ring_mask);
	struct io_uring_sqe *e = &r->sqes[i];

	memset(e, 0, sizeof(*e));
	e->opcode = IORING_OP_RECV;
	e->flags = IOSQE_FIXED_FILE;
	e->fd = 0;
	e->addr = (uintptr_t)buf;
	e->len = len;
	ring_u(r->sq, r->p.sq_off.array)[i] = i;
	__atomic_store_n(ring_u(r->sq, r->p.sq_off.tail), tail + 1,
			 __ATOMIC_RELEASE);
	EQ(syscall(SYS_io_uring_enter, r->fd, 1, 0, 0, NULL, 0), 1);
}

/* The result of the one completion within @ms, or -ETIME. */
static int ring_done(struct ring *r, int ms)
{
	unsigned *head = ring_u(r->cq, r->p.cq_off.head);
	struct io_uring_cqe *cqes =
		(struct io_uring_cqe *)((char *)r->cq + r->p.cq_off.cqes);
	int i, res;

	for (i = 0; i < ms; i++) {
		if (__atomic_load_n(ring_u(r->cq, r->p.cq_off.tail),
				    __ATOMIC_ACQUIRE) != *head) {
			res = cqes[*head & *ring_u(r->cq,
						   r->p.cq_off.ring_mask)].res;
			__atomic_store_n(head, *head + 1, __ATOMIC_RELEASE);
			return res;
		}
		usleep(1000);
	}
	return -ETIME;
}

static long ring_register(struct ring *r, int fd)
{
	return syscall(SYS_io_uring_register, r->fd, IORING_REGISTER_FILES,
		       &fd, 1);
}

static void test_io_uring(void)
{
	struct sockaddr_in a, s;
	struct ring r;
	char buf[16];
	int ff, fo, fk, res;

	if (!ring_open(&r)) {
		printf("io_uring unavailable (%s): skipped ",
		       strerror(errno));
		return;
	}
	/* Registered fresh: the kernel's socket, which io_uring serves. */
	ff = socket(AF_INET, SOCK_DGRAM, 0);
	EQ(ring_register(&r, ff), 0);
	bind_to(ff, any_at(0), &a);
	ring_recv(&r, buf, sizeof(buf));
	fk = bound_lo(&s);
	s = lo_at(ntohs(a.sin_port));
	EQ(sendto(fk, "u", 1, 0, (struct sockaddr *)&s, sizeof(s)), 1);
	EQ(ring_done(&r, 2000), 1);
	EQ(syscall(SYS_io_uring_register, r.fd, IORING_UNREGISTER_FILES,
		   NULL, 0), 0);

	/* Bound through qpsock: the ring's receive gets what the socket
	 * gets, or the registration is refused (EBADF) and the socket
	 * still receives. */
	fo = bound(&a);
	res = (int)ring_register(&r, fo);
	if (honoured(res, EBADF)) {
		ring_recv(&r, buf, sizeof(buf));
		local_send(ntohs(a.sin_port));
		EQ(ring_done(&r, 2000), 1);
	} else {
		local_send(ntohs(a.sin_port));
		EQ(readable(fo, 2000), true);
		EQ(recv(fo, buf, sizeof(buf), MSG_DONTWAIT), 1);
	}
	close(ff);
	close(fo);
	close(fk);
	ring_close(&r);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "UDP_SEGMENT before bind", test_segment_fresh },
		{ "UDP_SEGMENT once bound", test_segment_moved },
		{ "UDP_SEGMENT control message", test_segment_cmsg },
		{ "UDP_GRO before bind", test_gro_fresh },
		{ "UDP_GRO once bound", test_gro_moved },
		{ "IP_RECVERR before bind, MSG_ERRQUEUE", test_recverr_fresh },
		{ "IP_RECVERR once bound, MSG_ERRQUEUE", test_recverr_moved },
		{ "SO_BINDTODEVICE", test_bindtodevice },
		{ "IP_MULTICAST_IF", test_multicast_if },
		{ "SO_ATTACH_REUSEPORT_CBPF, _EBPF", test_reuseport_cbpf },
		{ "sendfile, sendfile64", test_sendfile },
		{ "splice, vmsplice, tee", test_splice },
		{ "io_uring registered files", test_io_uring },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "preload fallback", NULL, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	const char *a = getenv("PL_TEST_ADDR"), *lp = getenv("LD_PRELOAD");
	unsigned int failed;
	size_t i;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (inet_pton(AF_INET, a ? a : "127.0.0.1", &local) != 1) {
		fprintf(stderr, "PL_TEST_ADDR: not an IPv4 address\n");
		return 2;
	}
	local_on_lo = (ntohl(local.s_addr) >> 24) == 127;
	for (i = 0; i < sizeof(payload); i++)
		payload[i] = (char)(i % 251);
	printf("test_preload_fallback: %s, local address %s\n",
	       lp && strstr(lp, "qpsock-preload") ?
	       "under libqpsock-preload.so" : "on the kernel",
	       a ? a : "127.0.0.1");
	if (CU_initialize_registry() != CUE_SUCCESS ||
	    CU_register_suites(suites) != CUE_SUCCESS)
		return 2;
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
