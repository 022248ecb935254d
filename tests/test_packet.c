// SPDX-License-Identifier: MIT
/*
 * The packet provider on a veth pair between two network namespaces that
 * this test creates (names carry the pid) and always deletes, even when it
 * crashes: a watchdog child deletes them once the test process is gone.
 * The test thread lives in namespace A (qpsock side); kernel peers are
 * sockets created in namespace B by switching there for the socket()
 * call only, or programs started there (sockperf). Traffic stays on
 * this veth pair. Needs root; exits 77 (skipped) with a message when not
 * root or when namespaces cannot be made.
 *
 * Namespace B keeps its veth's TX checksum offload on, so kernel
 * senders' frames arrive with TP_STATUS_CSUMNOTREADY and a partial UDP
 * checksum: every kernel -> qpsock case also checks that the provider
 * completes it (no BAD_UDP_CSUM).
 */
#define _GNU_SOURCE
#include "t_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frames.h"
#include "qps_int.h"

#define IP_A "10.77.0.1"
#define IP_B "10.77.0.2"
#define MAC_A "02:77:00:00:00:01"
#define MAC_B "02:77:00:00:00:02"
#define MAC_B2 "02:77:00:00:00:22"
#define GROUP "239.1.2.3"
#define RECV_MS 2000

static char ns_a[32], ns_b[32], if_a[IF_NAMESIZE], if_b[IF_NAMESIZE];
static int fd_ns_a = -1, fd_ns_b = -1;
static const struct qps_provider_ops *P;
/* The provider under test: $QPS_TEST_PROVIDER, packet by default. The
 * suite is the same for every provider on a host netdev; where they
 * differ on purpose, a case asks the device's caps or says why. */
static const char *prov = "packet";

/*
 * Whether the provider takes frames from the host's stack rather than
 * tapping a copy (xdp, docs/xdp.md "What differs from packet"): its
 * address rules take only the context's bound ports, a fragment reaches
 * the context only after its first one did, and an interface holds one
 * context at a time. No device cap says so; the provider's documented
 * behaviour does.
 */
static bool steals_from_host(void)
{
	return strcmp(prov, "xdp") == 0;
}

/* --- namespaces -------------------------------------------------------- */

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st != 0)
		fprintf(stderr, "\n  test_packet: '%s' failed (%d)\n", cmd, st);
	return st;
}

static void ns_delete(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd),
		 "ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null",
		 ns_a, ns_b);
	if (system(cmd)) {
		/* Already gone. */
	}
}

/* A child that deletes the namespaces once we are gone, however we go:
 * it blocks on a pipe whose only writer is this process. */
static int watchdog(void)
{
	int p[2], fd;
	pid_t pid;
	char c;

	if (pipe(p) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		close(p[1]);
		fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
		}
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		ns_delete();
		_exit(0);
	}
	close(p[0]);
	fcntl(p[1], F_SETFD, FD_CLOEXEC);
	return 0;
}

static int ns_enter(int fd)
{
	return setns(fd, CLONE_NEWNET) < 0 ? -errno : 0;
}

static int ns_setup(void)
{
	char path[64];
	int pid = (int)getpid();

	snprintf(ns_a, sizeof(ns_a), "qpspa%d", pid);
	snprintf(ns_b, sizeof(ns_b), "qpspb%d", pid);
	snprintf(if_a, sizeof(if_a), "qpa%d", pid % 10000000);
	snprintf(if_b, sizeof(if_b), "qpb%d", pid % 10000000);
	if (watchdog() < 0 || sh("ip netns add %s", ns_a) ||
	    sh("ip netns add %s", ns_b))
		return -1;
	if (sh("ip link add %s netns %s type veth peer name %s netns %s",
	       if_a, ns_a, if_b, ns_b) ||
	    sh("ip -n %s link set %s address " MAC_A, ns_a, if_a) ||
	    sh("ip -n %s link set %s address " MAC_B, ns_b, if_b) ||
	    sh("ip netns exec %s sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
	       ns_a) ||
	    sh("ip netns exec %s sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
	       ns_b) ||
	    sh("ip -n %s addr add " IP_A "/24 dev %s", ns_a, if_a) ||
	    sh("ip -n %s addr add " IP_B "/24 dev %s", ns_b, if_b) ||
	    sh("ip -n %s link set lo up && ip -n %s link set lo up", ns_a,
	       ns_b) ||
	    sh("ip -n %s link set %s up && ip -n %s link set %s up", ns_a,
	       if_a, ns_b, if_b) ||
	    sh("ip -n %s route add 224.0.0.0/4 dev %s", ns_b, if_b))
		return -1;
	snprintf(path, sizeof(path), "/var/run/netns/%s", ns_a);
	fd_ns_a = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/var/run/netns/%s", ns_b);
	fd_ns_b = open(path, O_RDONLY | O_CLOEXEC);
	if (fd_ns_a < 0 || fd_ns_b < 0 || ns_enter(fd_ns_a) < 0)
		return -1;
	return 0;
}

/* --- helpers ------------------------------------------------------------ */

static uint32_t ip4(const char *s)
{
	struct in_addr a;

	inet_pton(AF_INET, s, &a);
	return a.s_addr;
}

static void mac_parse(const char *s, uint8_t mac[6])
{
	unsigned int m[6];
	int i;

	sscanf(s, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4],
	       &m[5]);
	for (i = 0; i < 6; i++)
		mac[i] = (uint8_t)m[i];
}

/* A socket in namespace B (the kernel peer), bound to @ip:@port when
 * @port is not 0. */
static int sock_b(int type, int proto, const char *ip, unsigned short port)
{
	struct sockaddr_in sin = t_sin(ip ? ip : "0.0.0.0", port);
	int fd, one = 1;

	if (ns_enter(fd_ns_b) < 0)
		return -1;
	fd = socket(AF_INET, type | SOCK_CLOEXEC, proto);
	if (fd >= 0 && port) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
			close(fd);
			fd = -1;
		}
	}
	ns_enter(fd_ns_a);
	return fd;
}

/* A raw AF_PACKET socket on B's veth, for injecting frames. */
static int raw_b(int *ifindex)
{
	int fd;

	if (ns_enter(fd_ns_b) < 0)
		return -1;
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	*ifindex = (int)if_nametoindex(if_b);
	ns_enter(fd_ns_a);
	return fd;
}

static int ifindex_b(void)
{
	int i;

	ns_enter(fd_ns_b);
	i = (int)if_nametoindex(if_b);
	ns_enter(fd_ns_a);
	return i;
}

/* Receive on a kernel socket until @want datagrams arrived, or @ms
 * without one. */
static int kernel_recv(int fd, int want, int ms,
		       void (*check)(int, const uint8_t *, ssize_t))
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint8_t buf[2048];
	int got = 0;
	ssize_t n;

	while (got < want && poll(&pfd, 1, ms) > 0) {
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0)
			continue;
		if (check)
			check(got, buf, n);
		got++;
	}
	return got;
}

/* Datagrams arriving within the next 200 ms (that should not). */
static int kernel_quiet(int fd)
{
	return kernel_recv(fd, 1 << 30, 200, NULL);
}

/* @stats false: no shared-memory stats, so no stats thread (the context
 * has no thread of its own until it sends); else the default. */
static int ctx_open_stats(const char *ifname, const char *ip, bool stats,
			  struct qps_ctx **ctx)
{
	struct qps_ctx_attr attr = {
		.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV,
		.provider = prov,
		.dev = ifname,
	};

	if (!stats)
		attr.comp_mask |= QPS_CTX_ATTR_STATS;	/* .stats = 0 */
	if (ip) {
		attr.comp_mask |= QPS_CTX_ATTR_ADDR;
		attr.addr.s_addr = ip4(ip);
	}
	return qps_ctx_create(&attr, ctx);
}

static int ctx_open(const char *ifname, const char *ip, struct qps_ctx **ctx)
{
	return ctx_open_stats(ifname, ip, true, ctx);
}

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 31 + i * 7);
}

static size_t size_of(int i)
{
	static const size_t sizes[] = { 1, 18, 64, 300, 1000, 1472 };

	return sizes[i % 6];
}

/* --- open errors --------------------------------------------------------- */

static void test_open_errors(void)
{
	struct qps_ctx *ctx = NULL;
	pid_t pid;
	int st;

	CU_ASSERT_EQUAL(ctx_open("qpsnosuchif0", NULL, &ctx), -ENODEV);
	CU_ASSERT_EQUAL(ctx_open(if_a, "10.77.9.9", &ctx), -EADDRNOTAVAIL);
	CU_ASSERT_EQUAL(ctx_open("lo", NULL, &ctx), -EOPNOTSUPP);
	/* A second veth pair left down. */
	CU_ASSERT_EQUAL_FATAL(sh("ip link add qpsd%d type veth peer name "
				 "qpse%d", (int)getpid() % 100000,
				 (int)getpid() % 100000), 0);
	{
		char name[IF_NAMESIZE];

		snprintf(name, sizeof(name), "qpsd%d", (int)getpid() % 100000);
		CU_ASSERT_EQUAL(ctx_open(name, NULL, &ctx), -ENETDOWN);
		sh("ip link del %s", name);
	}
	CU_ASSERT_PTR_NULL(ctx);
	/* Without CAP_NET_RAW: a child that gave up root. */
	pid = fork();
	if (pid == 0) {
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(2);
		_exit(ctx_open(if_a, NULL, &ctx) == -EPERM ? 0 : 1);
	}
	CU_ASSERT_FATAL(pid > 0);
	CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	/* A context killed without closing leaves nothing on the
	 * interface (xdp: its program goes with the process, a bpf_link),
	 * and the next one opens. */
	pid = fork();
	if (pid == 0) {
		if (ctx_open(if_a, NULL, &ctx) != 0)
			_exit(1);
		kill(getpid(), SIGKILL);
		_exit(1);
	}
	CU_ASSERT_FATAL(pid > 0);
	CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
	CU_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	CU_ASSERT_EQUAL_FATAL(ctx_open(if_a, NULL, &ctx), 0);
	/* An interface with another XDP program on it (here: this
	 * context's) refuses an xdp context. */
	if (steals_from_host()) {
		struct qps_ctx *ctx2 = NULL;

		CU_ASSERT_EQUAL(ctx_open(if_a, NULL, &ctx2), -EBUSY);
		CU_ASSERT_PTR_NULL(ctx2);
	}
	CU_ASSERT_EQUAL(qps_ctx_destroy(ctx), 0);
	{
		char cmd[160];

		snprintf(cmd, sizeof(cmd), "ip -n %s link show %s | grep -q "
			 "' xdp'", ns_a, if_a);
		CU_ASSERT_NOT_EQUAL(system(cmd), 0);
	}
}

/* --- modes: what the provider logs is what it reports -------------------- */

/* ctx_open with stderr caught in @log (NUL-terminated). */
static int ctx_open_logged(struct qps_ctx **ctx, char *log, size_t len)
{
	FILE *f = tmpfile();
	int saved, ret;
	size_t n = 0;

	log[0] = '\0';
	if (!f)
		return ctx_open(if_a, NULL, ctx);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fileno(f), STDERR_FILENO);
	ret = ctx_open(if_a, NULL, ctx);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(f);
	n = fread(log, 1, len - 1, f);
	log[n] = '\0';
	fclose(f);
	fputs(log, stderr);
	return ret;
}

static void test_query_modes(void)
{
	struct qps_ctx_info_ex x;
	struct qps_ctx_info info;
	struct qps_ctx *ctx = NULL;
	char log[4096], want[160];

	CU_ASSERT_EQUAL_FATAL(ctx_open_logged(&ctx, log, sizeof(log)), 0);
	CU_ASSERT_EQUAL_FATAL(qps_ctx_query(ctx, &info), 0);
	memset(&x, 0xab, sizeof(x));
	CU_ASSERT_EQUAL(qps_ctx_query_ex(ctx, &x, sizeof(x)),
			(int)sizeof(x));
	CU_ASSERT(memcmp(&x.base, &info, sizeof(info)) == 0);
	CU_ASSERT(x.flags & QPS_CTX_INFO_F_HOST_NETDEV);
	/* A software send path: WR chains, nothing for BlueFlame. */
	CU_ASSERT_FALSE(x.flags & (QPS_CTX_INFO_F_TX_DIRECT |
				   QPS_CTX_INFO_F_BLUEFLAME));
	printf("\n    %s: flags 0x%x, receive queues %u from %u ", prov,
	       x.flags, x.rx_queues, x.rx_queue);
	if (strcmp(prov, "xdp") == 0) {
		const char *bp = getenv("QPS_XDP_BUSY_POLL");
		const char *at = getenv("QPS_XDP_ATTACH");
		bool busy = x.flags & QPS_CTX_INFO_F_XDP_BUSY_POLL;
		bool native = at && strcmp(at, "native") == 0;

		/* veth: generic XDP unless asked for native (xdp_obj.c),
		 * and no zero-copy. */
		CU_ASSERT_EQUAL(!!(x.flags & QPS_CTX_INFO_F_XDP_NATIVE),
				native);
		CU_ASSERT_FALSE(x.flags & QPS_CTX_INFO_F_XDP_ZEROCOPY);
		if (!bp || strcmp(bp, "1") != 0)
			CU_ASSERT_FALSE(busy);
		CU_ASSERT_FALSE(x.flags & QPS_CTX_INFO_F_PACKET_RING);
		CU_ASSERT_EQUAL(x.rx_queue, 0);
		CU_ASSERT_EQUAL(x.rx_queues, 1);
		snprintf(want, sizeof(want), "qpsock xdp: %s: %s XDP, %s, %s, "
			 "%u receive queue", if_a,
			 x.flags & QPS_CTX_INFO_F_XDP_NATIVE ? "native" :
							       "generic (SKB)",
			 x.flags & QPS_CTX_INFO_F_XDP_ZEROCOPY ? "zero-copy" :
								 "copy mode",
			 busy ? "preferred busy polling" : "no busy polling",
			 x.rx_queues);
		if (!strstr(log, want)) {
			printf("\n    not logged: \"%s\" ", want);
			CU_FAIL("the log says other modes than qps_ctx_query_ex");
		}
	} else if (strcmp(prov, "packet") == 0) {
		CU_ASSERT_EQUAL(x.flags, QPS_CTX_INFO_F_HOST_NETDEV |
					 QPS_CTX_INFO_F_PACKET_RING);
		CU_ASSERT_EQUAL(x.rx_queues, 0);
	}
	CU_ASSERT_EQUAL(qps_ctx_destroy(ctx), 0);
}

/* --- qpsock -> kernel ------------------------------------------------- */

static void check_unicast(int i, const uint8_t *buf, ssize_t n)
{
	uint8_t want[1500];

	fill(want, size_of(i), (unsigned int)i);
	CU_ASSERT_EQUAL(n, (ssize_t)size_of(i));
	if (n == (ssize_t)size_of(i))
		CU_ASSERT_EQUAL(memcmp(buf, want, (size_t)n), 0);
}

static void test_qpsock_to_kernel(void)
{
	struct sockaddr_in dst = t_sin(IP_B, 5000);
	struct qps_stats st0, st1;
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	uint8_t buf[1500];
	int fd, i, n = 120;

	fd = sock_b(SOCK_DGRAM, 0, IP_B, 5000);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL_FATAL(ctx_open(if_a, NULL, &ctx), 0);
	CU_ASSERT_EQUAL_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	qps_ctx_stats(ctx, &st0, sizeof(st0));
	for (i = 0; i < n; i++) {
		/* Bursts of 8 under MSG_MORE: one kick each. */
		int more = (i % 8 != 7 && i != n - 1) ? QPS_MSG_MORE : 0;

		fill(buf, size_of(i), (unsigned int)i);
		CU_ASSERT_EQUAL(qps_sendto(ep, buf, size_of(i), more,
					   (struct sockaddr *)&dst,
					   sizeof(dst)), (ssize_t)size_of(i));
	}
	CU_ASSERT_EQUAL(qps_sendto(ep, buf, 65508, 0, (struct sockaddr *)&dst,
				   sizeof(dst)), -EMSGSIZE);
	CU_ASSERT_EQUAL(kernel_recv(fd, n, RECV_MS, check_unicast), n);
	/* Nothing more, nothing late. */
	CU_ASSERT_EQUAL(kernel_quiet(fd), 0);
	qps_ctx_progress(ctx);
	qps_ctx_stats(ctx, &st1, sizeof(st1));
	CU_ASSERT_EQUAL(st1.wqes - st0.wqes, (uint64_t)n);
	/* One ring per burst, but for the bounded delay's: a sender slower
	 * than db_delay_us (under a sanitizer, on a loaded machine) has its
	 * burst rung by the flusher too. */
	CU_ASSERT(st1.doorbells - st0.doorbells -
		  (st1.tx_flush_timer - st0.tx_flush_timer) <=
		  (uint64_t)n / 8 + 2);
	CU_ASSERT_EQUAL(st1.tx_errors, 0);
	qps_ctx_destroy(ctx);
	close(fd);
}

/* --- kernel -> qpsock --------------------------------------------------- */

static void test_kernel_to_qpsock(void)
{
	struct sockaddr_in dst = t_sin(IP_A, 6000), src, bind_a =
		t_sin("0.0.0.0", 6000);
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	struct qps_stats st;
	uint8_t buf[1500], want[1500];
	socklen_t slen;
	int fd, i, n = 120, tmo = RECV_MS, got = 0;
	ssize_t r;

	CU_ASSERT_EQUAL_FATAL(ctx_open(if_a, IP_A, &ctx), 0);
	CU_ASSERT_EQUAL_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	CU_ASSERT_EQUAL(qps_setopt(ep, QPS_OPT_RCVTIMEO, &tmo, sizeof(tmo)),
			0);
	CU_ASSERT_EQUAL_FATAL(qps_bind(ep, (struct sockaddr *)&bind_a,
				       sizeof(bind_a)), 0);
	fd = sock_b(SOCK_DGRAM, 0, IP_B, 6001);
	CU_ASSERT_FATAL(fd >= 0);
	for (i = 0; i < n; i++) {
		fill(buf, size_of(i), (unsigned int)i + 1000);
		CU_ASSERT_EQUAL(sendto(fd, buf, size_of(i), 0,
				       (struct sockaddr *)&dst, sizeof(dst)),
				(ssize_t)size_of(i));
	}
	for (i = 0; i < n; i++) {
		slen = sizeof(src);
		r = qps_recvfrom(ep, buf, sizeof(buf), 0,
				 (struct sockaddr *)&src, &slen);
		if (r < 0)
			break;
		fill(want, size_of(i), (unsigned int)i + 1000);
		CU_ASSERT_EQUAL(r, (ssize_t)size_of(i));
		CU_ASSERT(r == (ssize_t)size_of(i) &&
			  !memcmp(buf, want, (size_t)r));
		CU_ASSERT_EQUAL(src.sin_addr.s_addr, ip4(IP_B));
		CU_ASSERT_EQUAL(ntohs(src.sin_port), 6001);
		got++;
	}
	CU_ASSERT_EQUAL(got, n);
	CU_ASSERT_EQUAL(qps_recv(ep, buf, sizeof(buf), QPS_MSG_DONTWAIT),
			-EAGAIN);
	qps_ctx_stats(ctx, &st, sizeof(st));
	CU_ASSERT_EQUAL(st.rx_packets, (uint64_t)n);
	/* Partial checksums (CSUMNOTREADY) were completed, not rejected. */
	CU_ASSERT_EQUAL(st.rx_bad[QPS_RX_BAD_UDP_CSUM], 0);
	qps_ctx_destroy(ctx);
	close(fd);
}

/* --- timestamps ------------------------------------------------------------ */

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * QPS_OPT_TIMESTAMP on packet: a kernel sender's datagrams carry the
 * kernel's software receive time (the ring header's; veth has no hardware
 * stamping, so never a device stamp), between the send and the receive
 * and rising; asking for device stamps alone gives none. qpsock's own
 * datagrams are reported once each, in order, with the software time.
 */
static void test_timestamps(void)
{
	struct sockaddr_in dst = t_sin(IP_A, 6100), bind_a =
		t_sin("0.0.0.0", 6100), kdst = t_sin(IP_B, 6101);
	struct qps_txts rep[32];
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	uint8_t buf[256];
	uint64_t t0, last = 0;
	int fd, i, n = 32, tmo = RECV_MS, got = 0, tries;
	int rxf = QPS_TS_RX_SOFTWARE | QPS_TS_RX_DEVICE;
	int txf = QPS_TS_TX_SOFTWARE | QPS_TS_TX_DEVICE, devonly =
		QPS_TS_RX_DEVICE;

	CU_ASSERT_EQUAL_FATAL(ctx_open(if_a, IP_A, &ctx), 0);
	CU_ASSERT_EQUAL_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	T_EQ(qps_setopt(ep, QPS_OPT_RCVTIMEO, &tmo, sizeof(tmo)), 0);
	T_EQ(qps_setopt(ep, QPS_OPT_TIMESTAMP, &rxf, sizeof(rxf)), 0);
	CU_ASSERT_EQUAL_FATAL(qps_bind(ep, (struct sockaddr *)&bind_a,
				       sizeof(bind_a)), 0);
	fd = sock_b(SOCK_DGRAM, 0, IP_B, 6101);
	CU_ASSERT_FATAL(fd >= 0);
	t0 = realtime_ns();
	for (i = 0; i < n; i++) {
		struct qps_rxmsg m = { .buf = buf, .len = sizeof(buf) };
		uint64_t before = realtime_ns();

		T_EQ(sendto(fd, &i, sizeof(i), 0, (struct sockaddr *)&dst,
			    sizeof(dst)), (ssize_t)sizeof(i));
		if (qps_recvmsg(ep, &m, 0) != (ssize_t)sizeof(i))
			break;
		T_EQ(m.flags & (QPS_RXMSG_TS_SOFTWARE | QPS_RXMSG_TS_DEVICE),
		     QPS_RXMSG_TS_SOFTWARE);
		T_GE(m.ts_ns, before);
		T_LE(m.ts_ns, realtime_ns());
		T_GE(m.ts_ns, last);
		last = m.ts_ns;
		got++;
	}
	T_EQ(got, n);
	printf("\n    %d kernel software stamps, %llu us from first to "
	       "last", got, (unsigned long long)((last - t0) / 1000));

	/* Device stamps only: veth has none to give. */
	T_EQ(qps_setopt(ep, QPS_OPT_TIMESTAMP, &devonly, sizeof(devonly)), 0);
	T_EQ(sendto(fd, "d", 1, 0, (struct sockaddr *)&dst, sizeof(dst)), 1);
	{
		struct qps_rxmsg m = { .buf = buf, .len = sizeof(buf) };

		T_EQ(qps_recvmsg(ep, &m, 0), 1);
		T_EQ(m.flags & (QPS_RXMSG_TS_SOFTWARE | QPS_RXMSG_TS_DEVICE),
		     0);
	}

	/* Transmit: every datagram reported, numbered in order; the
	 * software time only (the kernel frees TX frames without one). */
	T_EQ(qps_setopt(ep, QPS_OPT_TIMESTAMP, &txf, sizeof(txf)), 0);
	for (i = 0; i < n; i++)
		T_EQ(qps_sendto(ep, &i, sizeof(i), 0,
				(struct sockaddr *)&kdst, sizeof(kdst)),
		     (ssize_t)sizeof(i));
	got = 0;
	for (tries = 0; got < n && tries < 1000; tries++) {
		int k = qps_recv_txts(ep, rep + got, (unsigned int)(n - got),
				      0);

		if (k == -EAGAIN) {
			usleep(1000);
			continue;
		}
		T_GE(k, 1);
		if (k < 0)
			break;
		got += k;
	}
	T_EQ(got, n);
	for (i = 0; i < got; i++) {
		T_EQ(rep[i].id, (uint32_t)i);
		T_EQ(rep[i].flags, QPS_TXTS_SOFTWARE);
		T_GE(rep[i].sw_ns, t0);
	}
	printf(", %d transmit reports\n", got);
	qps_ctx_destroy(ctx);
	close(fd);
}

/* --- multicast ------------------------------------------------------------ */

static void test_mcast_qpsock_to_kernel(void)
{
	struct sockaddr_in dst = t_sin(GROUP, 5100);
	struct ip_mreqn mr = { .imr_ifindex = ifindex_b() };
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	uint8_t buf[1500];
	int joined, other, i, n = 100;

	/* Bound to the group: only its own membership counts. */
	joined = sock_b(SOCK_DGRAM, 0, GROUP, 5100);
	other = sock_b(SOCK_DGRAM, 0, "239.1.2.4", 5100);
	CU_ASSERT_FATAL(joined >= 0 && other >= 0);
	CU_ASSERT_EQUAL_FATAL(ctx_open(if_a, NULL, &ctx), 0);
	CU_ASSERT_EQUAL_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	/* Before the join: nobody gets anything. */
	for (i = 0; i < 20; i++)
		qps_sendto(ep, "x", 1, 0, (struct sockaddr *)&dst, sizeof(dst));
	CU_ASSERT_EQUAL(kernel_quiet(joined), 0);
	mr.imr_multiaddr.s_addr = ip4(GROUP);
	CU_ASSERT_EQUAL_FATAL(setsockopt(joined, IPPROTO_IP, IP_ADD_MEMBERSHIP,
					 &mr, sizeof(mr)), 0);
	for (i = 0; i < n; i++) {
		fill(buf, size_of(i), (unsigned int)i);
		CU_ASSERT_EQUAL(qps_sendto(ep, buf, size_of(i), 0,
					   (struct sockaddr *)&dst,
					   sizeof(dst)), (ssize_t)size_of(i));
	}
	CU_ASSERT_EQUAL(kernel_recv(joined, n, RECV_MS, check_unicast), n);
	CU_ASSERT_EQUAL(kernel_quiet(joined), 0);
	CU_ASSERT_EQUAL(kernel_quiet(other), 0);
	qps_ctx_destroy(ctx);
	close(joined);
	close(other);
}

/* A provider-level port: device, CQs, QP, posted buffers. */
struct port {
	struct qps_dev *dev;
	struct qps_dev_info info;
	struct qps_cq *scq, *rcq;
	struct qps_qp *qp;
	struct qps_mr *mr;
	uint8_t *bufs;
	uint32_t nbufs;
};

#define PBUF 2048u

static int port_open(struct port *p, struct qps_dev *shared, uint32_t nbufs)
{
	struct qps_dev_attr da = { .dev = if_a };
	struct qps_qp_init_attr qa;
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;
	uint32_t i;
	int ret;

	memset(p, 0, sizeof(*p));
	if (shared) {
		p->dev = shared;
	} else {
		ret = P->open(&da, &p->dev);
		if (ret < 0)
			return ret;
		p->dev->ops = P;
	}
	P->query(p->dev, &p->info);
	if (P->create_cq(p->dev, 256, &p->scq) || P->create_cq(p->dev, 256,
							       &p->rcq))
		return -1;
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RAW_PACKET;
	qa.send_cq = p->scq;
	qa.recv_cq = p->rcq;
	qa.cap.max_send_wr = 64;
	qa.cap.max_recv_wr = nbufs;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	ret = P->create_qp(p->dev, &qa, &p->qp);
	if (ret < 0)
		return ret;
	p->nbufs = nbufs;
	p->bufs = calloc(nbufs, PBUF);
	if (!p->bufs || P->reg_mr(p->dev, p->bufs, (size_t)nbufs * PBUF,
				  &p->mr))
		return -1;
	for (i = 0; i < nbufs; i++) {
		sge = (struct ibv_sge){ (uintptr_t)(p->bufs + i * PBUF), PBUF,
					p->mr->lkey };
		wr = (struct ibv_recv_wr){ .wr_id = i, .sg_list = &sge,
					   .num_sge = 1 };
		if (P->post_recv(p->qp, &wr, &bad))
			return -1;
	}
	return 0;
}

static void port_close(struct port *p, bool close_dev)
{
	if (p->qp)
		P->destroy_qp(p->qp);
	if (p->mr)
		P->dereg_mr(p->mr);
	if (p->scq)
		P->destroy_cq(p->scq);
	if (p->rcq)
		P->destroy_cq(p->rcq);
	free(p->bufs);
	if (close_dev && p->dev)
		P->close(p->dev);
}

/* Receive completions for up to @ms; returns how many, with each frame's
 * UDP destination port counted in @ports[port - base] (< 8). */
static int port_drain(struct port *p, int ms, uint16_t base, int ports[8])
{
	struct ibv_wc wc[16];
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;
	struct qps_frame_info fi;
	struct timespec ts = { 0, 2000000 };
	int n, i, got = 0, t;

	for (t = 0; t < ms / 2; t++) {
		n = P->poll_cq(p->rcq, 16, wc);
		for (i = 0; i < n; i++) {
			uint8_t *b = p->bufs + wc[i].wr_id * PBUF;

			CU_ASSERT_EQUAL(wc[i].status, IBV_WC_SUCCESS);
			if (wc[i].status == IBV_WC_SUCCESS &&
			    qps_frame_parse(b, wc[i].byte_len, &fi) ==
			    QPS_RX_OK) {
				unsigned int d = ntohs(fi.hdr.dport) - base;

				if (ports && d < 8)
					ports[d]++;
			}
			got++;
			sge = (struct ibv_sge){ (uintptr_t)b, PBUF,
						p->mr->lkey };
			wr = (struct ibv_recv_wr){ .wr_id = wc[i].wr_id,
						   .sg_list = &sge,
						   .num_sge = 1 };
			P->post_recv(p->qp, &wr, &bad);
		}
		if (!n)
			nanosleep(&ts, NULL);
	}
	return got;
}

static struct ibv_flow_attr *rule(void *buf, const char *mac, const char *ip,
				  uint16_t port, uint16_t prio)
{
	struct qps_flow_match m;

	memset(&m, 0, sizeof(m));
	if (mac) {
		mac_parse(mac, m.dst_mac);
		m.match_mac = true;
	}
	m.dst_ip = ip ? ip4(ip) : 0;
	m.dst_port = htons(port);
	m.priority = prio;
	m.type = IBV_FLOW_ATTR_NORMAL;
	return qps_flow_attr_build(buf, &m);
}

static void kernel_send_n(int fd, const char *ip, uint16_t port, int n)
{
	struct sockaddr_in d = t_sin(ip, port);
	char msg[32];
	int i;

	for (i = 0; i < n; i++) {
		snprintf(msg, sizeof(msg), "m%d", i);
		sendto(fd, msg, strlen(msg), 0, (struct sockaddr *)&d,
		       sizeof(d));
	}
}

static bool file_has(const char *path, const char *needle)
{
	char line[512];
	bool found = false;
	FILE *f = fopen(path, "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

/* Kernel sender -> qpsock multicast receiver. Through qps_join when the
 * core has it, else at the provider level (mcast_attach + a rule). */
static void test_mcast_kernel_to_qpsock(void)
{
	uint8_t abuf[QPS_FLOW_ATTR_MAX] __attribute__((aligned(8)));
	struct ip_mreqn mif = { .imr_ifindex = ifindex_b() };
	struct qps_flow *fl = NULL;
	struct port p;
	int fd, ports[8] = { 0 };

	fd = sock_b(SOCK_DGRAM, 0, NULL, 0);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mif,
				   sizeof(mif)), 0);
	CU_ASSERT_EQUAL_FATAL(port_open(&p, NULL, 128), 0);
	CU_ASSERT_EQUAL(P->mcast_attach(p.dev, (struct in_addr){ ip4(GROUP) },
					(struct in_addr){ 0 }), 0);
	/* A second attach is counted, not an error. */
	CU_ASSERT_EQUAL(P->mcast_attach(p.dev, (struct in_addr){ ip4(GROUP) },
					(struct in_addr){ 0 }), 0);
	CU_ASSERT_EQUAL(P->mcast_attach(p.dev, (struct in_addr){ ip4(IP_B) },
					(struct in_addr){ 0 }), -EINVAL);
	/* The kernel of namespace A joined: IGMP and the MAC filter. */
	CU_ASSERT(file_has("/proc/thread-self/net/igmp", "030201EF"));
	CU_ASSERT(file_has("/proc/thread-self/net/dev_mcast", "01005e010203"));
	CU_ASSERT_EQUAL_FATAL(P->create_flow(p.qp, rule(abuf, "01:00:5e:01:02:03",
						       GROUP, 5200, 1), &fl), 0);
	kernel_send_n(fd, GROUP, 5200, 50);
	kernel_send_n(fd, GROUP, 5201, 30);	/* other port: not ours */
	kernel_send_n(fd, "239.1.2.9", 5200, 30); /* other group */
	CU_ASSERT_EQUAL(port_drain(&p, 300, 5200, ports), 50);
	CU_ASSERT_EQUAL(ports[0], 50);
	CU_ASSERT_EQUAL(P->destroy_flow(fl), 0);
	CU_ASSERT_EQUAL(P->mcast_detach(p.dev, (struct in_addr){ ip4(GROUP) },
					(struct in_addr){ 0 }), 0);
	CU_ASSERT(file_has("/proc/thread-self/net/igmp", "030201EF"));
	CU_ASSERT_EQUAL(P->mcast_detach(p.dev, (struct in_addr){ ip4(GROUP) },
					(struct in_addr){ 0 }), 0);
	CU_ASSERT(!file_has("/proc/thread-self/net/igmp", "030201EF"));
	CU_ASSERT_EQUAL(P->mcast_detach(p.dev, (struct in_addr){ ip4(GROUP) },
					(struct in_addr){ 0 }), -ENOENT);
	port_close(&p, true);
	close(fd);
}

#ifdef QPS_IFINDEX
/* The same through the core: qps_join / qps_leave on an endpoint. */
static void test_mcast_join(void)
{
	struct sockaddr_in any = t_sin("0.0.0.0", 5500);
	struct ip_mreqn mif = { .imr_ifindex = ifindex_b() };
	struct qps_mreq mr = { .group.s_addr = ip4(GROUP) };
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	uint8_t buf[64];
	int fd, tmo = 300, got = 0;
	ssize_t r;

	fd = sock_b(SOCK_DGRAM, 0, NULL, 0);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mif,
				   sizeof(mif)), 0);
	CU_ASSERT_EQUAL_FATAL(ctx_open(if_a, NULL, &ctx), 0);
	CU_ASSERT_EQUAL_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	CU_ASSERT_EQUAL(qps_setopt(ep, QPS_OPT_RCVTIMEO, &tmo, sizeof(tmo)),
			0);
	CU_ASSERT_EQUAL_FATAL(qps_bind(ep, (struct sockaddr *)&any,
				       sizeof(any)), 0);
	CU_ASSERT_EQUAL_FATAL(qps_join(ep, &mr, sizeof(mr)), 0);
	CU_ASSERT(file_has("/proc/thread-self/net/igmp", "030201EF"));
	kernel_send_n(fd, GROUP, 5500, 40);
	kernel_send_n(fd, GROUP, 5501, 10);
	kernel_send_n(fd, "239.1.2.9", 5500, 10);
	while ((r = qps_recv(ep, buf, sizeof(buf), 0)) > 0)
		got++;
	CU_ASSERT_EQUAL(r, -ETIMEDOUT);
	CU_ASSERT_EQUAL(got, 40);
	CU_ASSERT_EQUAL(qps_leave(ep, &mr, sizeof(mr)), 0);
	CU_ASSERT(!file_has("/proc/thread-self/net/igmp", "030201EF"));
	kernel_send_n(fd, GROUP, 5500, 10);
	CU_ASSERT_EQUAL(qps_recv(ep, buf, sizeof(buf), 0), -ETIMEDOUT);
	qps_ctx_destroy(ctx);
	close(fd);
}
#endif

/* --- steering ------------------------------------------------------------ */

static void test_steering(void)
{
	uint8_t b1[QPS_FLOW_ATTR_MAX] __attribute__((aligned(8)));
	uint8_t b2[QPS_FLOW_ATTR_MAX] __attribute__((aligned(8)));
	uint8_t b3[QPS_FLOW_ATTR_MAX] __attribute__((aligned(8)));
	struct qps_flow *f1, *f2, *f3;
	struct port p1, p2;
	int fd, c1[8], c2[8], held[3], i;

	fd = sock_b(SOCK_DGRAM, 0, NULL, 0);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL_FATAL(port_open(&p1, NULL, 128), 0);
	CU_ASSERT_EQUAL_FATAL(port_open(&p2, p1.dev, 128), 0);
	/* An address rule takes the address's bound ports (on xdp only
	 * those: docs/xdp.md), so the ports are held as an endpoint's. */
	for (i = 0; i < 3; i++) {
		uint16_t port = htons((uint16_t)(7001 + i));

		held[i] = P->hold_port(p1.dev, -1,
				       (struct in_addr){ ip4(IP_A) }, &port, 0);
		CU_ASSERT_FATAL(held[i] >= 0);
	}
	/* p1: port 7001; p2: port 7002, and (weaker) anything else to us. */
	CU_ASSERT_EQUAL_FATAL(P->create_flow(p1.qp, rule(b1, MAC_A, IP_A, 7001,
							 1), &f1), 0);
	CU_ASSERT_EQUAL_FATAL(P->create_flow(p2.qp, rule(b2, MAC_A, IP_A, 7002,
							 1), &f2), 0);
	CU_ASSERT_EQUAL_FATAL(P->create_flow(p2.qp, rule(b3, MAC_A, IP_A, 0,
							 5), &f3), 0);
	kernel_send_n(fd, IP_A, 7001, 30);
	kernel_send_n(fd, IP_A, 7002, 20);
	kernel_send_n(fd, IP_A, 7003, 10);
	memset(c1, 0, sizeof(c1));
	memset(c2, 0, sizeof(c2));
	CU_ASSERT_EQUAL(port_drain(&p1, 300, 7000, c1), 30);
	CU_ASSERT_EQUAL(port_drain(&p2, 300, 7000, c2), 30);
	CU_ASSERT_EQUAL(c1[1], 30);
	CU_ASSERT_EQUAL(c2[2], 20);
	CU_ASSERT_EQUAL(c2[3], 10);
	CU_ASSERT_EQUAL(c2[1], 0);	/* no duplicates of the stronger rule */
	/* Without the port-7001 rule its frames fall to the weaker one. */
	CU_ASSERT_EQUAL(P->destroy_flow(f1), 0);
	kernel_send_n(fd, IP_A, 7001, 15);
	memset(c1, 0, sizeof(c1));
	memset(c2, 0, sizeof(c2));
	CU_ASSERT_EQUAL(port_drain(&p1, 200, 7000, c1), 0);
	CU_ASSERT_EQUAL(port_drain(&p2, 300, 7000, c2), 15);
	CU_ASSERT_EQUAL(c2[1], 15);
	/* A rule the provider cannot express. */
	{
		struct ibv_flow_attr *a = rule(b1, MAC_A, IP_A, 7001, 1);

		a->flags = 1;
		CU_ASSERT_EQUAL(P->create_flow(p1.qp, a, &f1), -EOPNOTSUPP);
	}
	CU_ASSERT_EQUAL(P->destroy_qp(p2.qp), -EBUSY);
	P->destroy_flow(f2);
	P->destroy_flow(f3);
	for (i = 0; i < 3; i++)
		close(held[i]);
	port_close(&p2, false);
	port_close(&p1, true);
	close(fd);
}

/* A WR chain is one kick; frames over the MTU never reach the ring. */
static void test_doorbell_and_mtu(void)
{
	struct qps_dev_counters c0, c1;
	struct ibv_send_wr wr[32], *bad;
	struct ibv_sge sge[32];
	struct ibv_wc wc[64];
	struct qps_frame_hdr h;
	struct port p;
	uint8_t *frames;
	int fd, i, n = 0, t;
	size_t flen[32];

	fd = sock_b(SOCK_DGRAM, 0, IP_B, 5300);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL_FATAL(port_open(&p, NULL, 8), 0);
	frames = p.bufs;	/* 8 x 2048 registered bytes: reuse them */
	memset(&h, 0, sizeof(h));
	memcpy(h.src_mac, p.info.mac, 6);
	mac_parse(MAC_B, h.dst_mac);
	h.saddr = p.info.addr.s_addr;
	h.daddr = ip4(IP_B);
	h.sport = htons(5301);
	h.dport = htons(5300);
	flen[0] = (size_t)qps_frame_build(frames, &h, 10);
	for (i = 0; i < 32; i++) {
		sge[i] = (struct ibv_sge){ (uintptr_t)frames,
					   (uint32_t)flen[0], p.mr->lkey };
		wr[i] = (struct ibv_send_wr){ .wr_id = (uint64_t)i,
					      .sg_list = &sge[i],
					      .num_sge = 1,
					      .opcode = IBV_WR_SEND,
					      .send_flags = IBV_SEND_SIGNALED,
					      .next = i < 31 ? &wr[i + 1] :
							       NULL };
	}
	/* WR 5: one byte over MTU + 14; WR 9: outside its region. */
	sge[5].length = p.info.mtu + 15;
	sge[5].addr = (uintptr_t)(frames + 2048);
	sge[9].lkey = p.mr->lkey + 256;
	P->counters(p.dev, &c0);
	CU_ASSERT_EQUAL(P->post_send(p.qp, wr, &bad), 0);
	P->counters(p.dev, &c1);
	CU_ASSERT_EQUAL(c1.doorbells - c0.doorbells, 1);
	CU_ASSERT_EQUAL(c1.wqes - c0.wqes, 30);
	for (t = 0; t < 100 && n < 32; t++) {
		int k = P->poll_cq(p.scq, 64, wc + n);

		CU_ASSERT(k >= 0);
		n += k > 0 ? k : 0;
	}
	CU_ASSERT_EQUAL(n, 32);
	for (i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(wc[i].wr_id, (uint64_t)i);	/* in order */
		CU_ASSERT_EQUAL(wc[i].status, i == 5 ? IBV_WC_LOC_LEN_ERR :
					      i == 9 ? IBV_WC_LOC_PROT_ERR :
					      IBV_WC_SUCCESS);
	}
	P->counters(p.dev, &c1);
	CU_ASSERT_EQUAL(c1.tx_drops - c0.tx_drops, 2);
	CU_ASSERT_EQUAL(kernel_recv(fd, 30, RECV_MS, NULL), 30);
	CU_ASSERT_EQUAL(kernel_quiet(fd), 0);
	port_close(&p, true);
	close(fd);
}

/* --- neighbour change ----------------------------------------------------- */

static void test_neigh_change(void)
{
	struct sockaddr_in peer = t_sin(IP_B, 5400);
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	struct timespec ts = { 0, 50000000 };
	uint64_t gen0;
	int fd, i;

	fd = sock_b(SOCK_DGRAM, 0, IP_B, 5400);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL_FATAL(ctx_open(if_a, NULL, &ctx), 0);
	CU_ASSERT_EQUAL_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	CU_ASSERT_EQUAL_FATAL(qps_connect(ep, (struct sockaddr *)&peer,
					  sizeof(peer)), 0);
	for (i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(qps_send(ep, "a", 1, 0), 1);
	CU_ASSERT_EQUAL(kernel_recv(fd, 10, RECV_MS, NULL), 10);
	gen0 = qps_route_gen(ctx);

	/* The peer changes its MAC: our cached one is wrong now, and its
	 * kernel drops what we send (PACKET_OTHERHOST). */
	CU_ASSERT_EQUAL_FATAL(sh("ip -n %s link set %s address " MAC_B2, ns_b,
				 if_b), 0);
	for (i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(qps_send(ep, "b", 1, 0), 1);
	CU_ASSERT_EQUAL(kernel_quiet(fd), 0);

	/* The neighbour entry follows; so must the endpoint. */
	CU_ASSERT_EQUAL_FATAL(sh("ip -n %s neigh replace " IP_B " lladdr "
				 MAC_B2 " dev %s nud permanent", ns_a, if_a),
			      0);
	nanosleep(&ts, NULL);
	CU_ASSERT_NOT_EQUAL(qps_route_gen(ctx), gen0);
	for (i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(qps_send(ep, "c", 1, 0), 1);
	CU_ASSERT_EQUAL(kernel_recv(fd, 10, RECV_MS, NULL), 10);

	qps_ctx_destroy(ctx);
	close(fd);
	sh("ip -n %s link set %s address " MAC_B, ns_b, if_b);
	sh("ip -n %s neigh replace " IP_B " lladdr " MAC_B " dev %s nud "
	   "permanent", ns_a, if_a);
}

/* --- interface down and up ------------------------------------------------ */

/* qpsock -> kernel: send @n datagrams; returns how many were accepted and
 * stores the first refusal's -errno in *@err (0 if none). */
static int send_n(struct qps_ep *ep, int n, int flags, int *err)
{
	int i, ok = 0;

	*err = 0;
	for (i = 0; i < n; i++) {
		ssize_t r = qps_send(ep, "updown", 6, flags);

		if (r == 6)
			ok++;
		else if (!*err)
			*err = (int)r;
	}
	return ok;
}

/* Receive up to @want datagrams on @ep (it has a receive timeout). */
static int qps_recv_n(struct qps_ep *ep, int want)
{
	uint8_t buf[64];
	int got = 0;

	while (got < want && qps_recv(ep, buf, sizeof(buf), 0) >= 0)
		got++;
	return got;
}

/* Wait up to 2 s for the carrier on A's veth (LOWER_UP). */
static int link_wait_carrier(void)
{
	return sh("for i in $(seq 40); do ip -n %s link show %s | "
		  "grep -q LOWER_UP && exit 0; sleep 0.05; done; exit 1",
		  ns_a, if_a);
}

/* Whether the device's event descriptor reports something within @ms. */
static bool event_fd_ready(struct qps_ctx *ctx, int ms)
{
	struct pollfd pfd = { .fd = qps_ctx_fd(ctx), .events = POLLIN };

	return pfd.fd >= 0 && poll(&pfd, 1, ms) > 0;
}

/* A blocking receive on @rx times out after @tmo ms, asleep: not
 * spinning on a descriptor that stays readable. */
static void recv_sleeps(struct qps_ep *rx, int tmo)
{
	struct timespec t0, t1, c0, c1;
	long ms, cpu_ms;
	int x;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	T_EQ(qps_recv(rx, &x, sizeof(x), 0), -ETIMEDOUT);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 +
	     (t1.tv_nsec - t0.tv_nsec) / 1000000;
	cpu_ms = (c1.tv_sec - c0.tv_sec) * 1000 +
		 (c1.tv_nsec - c0.tv_nsec) / 1000000;
	printf("\n    while down: blocking receive timed out after %ld ms, "
	       "%ld ms CPU", ms, cpu_ms);
	T_GE(ms, tmo - 10);
	T_LE(cpu_ms, tmo / 10);
}

/*
 * The carrier goes (the peer's end is down, ours stays up): the route
 * stays and sends are accepted; the kernel drops each kick at the device
 * but leaves the frames in the ring, so they wait, and non-blocking sends
 * meet back-pressure once the queue is full. Progress kicks them again and
 * they arrive once the carrier is back: held, not lost, not errors.
 */
static void carrier_lost(struct qps_ctx *ctx, struct qps_ep *ep, int kfd)
{
	struct qps_stats c0 = t_ctx_stats(ctx), c1;
	int i, k, held, err;

	T_EQ_FATAL(sh("ip -n %s link set %s down", ns_b, if_b), 0);
	T_EQ(send_n(ep, 20, 0, &err), 20);
	for (i = 0; i < 10; i++)
		qps_ctx_progress(ctx);
	held = 20 + send_n(ep, 2000, QPS_MSG_DONTWAIT, &err);
	T_EQ(err, -EAGAIN);
	T_LE(held, 2000);
	T_EQ(kernel_quiet(kfd), 0);
	T_EQ_FATAL(sh("ip -n %s link set %s up", ns_b, if_b), 0);
	T_EQ(link_wait_carrier(), 0);
	for (i = 0; i < 20; i++) {
		qps_ctx_progress(ctx);
		t_sleep_ms(5);
	}
	k = kernel_recv(kfd, held, RECV_MS, NULL);
	c1 = t_ctx_stats(ctx);
	printf("\n    carrier lost: %d accepted before -EAGAIN, %d received "
	       "after it came back, tx_errors +%llu\n", held, k,
	       (unsigned long long)(c1.tx_errors - c0.tx_errors));
	/* None lost silently. A device that says it dropped a frame only
	 * after taking it (xdp in copy mode, docs/xdp.md) may count the one
	 * it was sending when the carrier went as an error. */
	T_EQ(k + (int)(c1.tx_errors - c0.tx_errors), held);
	T_LE(c1.tx_errors - c0.tx_errors, 1);
}

/*
 * Both ends change address. The peer's: reconnect and go on. Ours: a
 * context keeps the address it was opened with, so the old one can no
 * longer be opened and a context opened on the new one works both ways.
 * Restores both addresses.
 */
static void addr_change(struct qps_ctx *outer, struct qps_ep *ep, int tmo)
{
	struct sockaddr_in peer = t_sin("10.77.0.12", 5500);
	struct qps_ctx *ctx;
	struct qps_ep *ep2, *rx;
	int kfd, kfd_tx, err;

	T_EQ_FATAL(sh("ip -n %s addr del " IP_B "/24 dev %s && ip -n %s "
		      "addr add 10.77.0.12/24 dev %s", ns_b, if_b, ns_b, if_b),
		   0);
	kfd = sock_b(SOCK_DGRAM, 0, "10.77.0.12", 5500);
	kfd_tx = sock_b(SOCK_DGRAM, 0, "10.77.0.12", 6501);
	CU_ASSERT_FATAL(kfd >= 0 && kfd_tx >= 0);
	T_EQ(qps_connect(ep, (struct sockaddr *)&peer, sizeof(peer)), 0);
	T_EQ(send_n(ep, 20, 0, &err), 20);
	T_EQ(kernel_recv(kfd, 20, RECV_MS, NULL), 20);
	/* Gone before the next one opens: an xdp interface holds one
	 * context at a time (docs/xdp.md). */
	qps_ctx_destroy(outer);

	T_EQ_FATAL(sh("ip -n %s addr del " IP_A "/24 dev %s && ip -n %s "
		      "addr add 10.77.0.11/24 dev %s", ns_a, if_a, ns_a, if_a),
		   0);
	T_EQ(ctx_open(if_a, IP_A, &ctx), -EADDRNOTAVAIL);
	T_EQ_FATAL(ctx_open(if_a, "10.77.0.11", &ctx), 0);
	CU_ASSERT_EQUAL_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep2), 0);
	T_EQ(qps_connect(ep2, (struct sockaddr *)&peer, sizeof(peer)), 0);
	T_EQ(send_n(ep2, 20, 0, &err), 20);
	T_EQ(kernel_recv(kfd, 20, RECV_MS, NULL), 20);
	rx = t_ep_bound(ctx, "0.0.0.0", 6502, tmo);
	kernel_send_n(kfd_tx, "10.77.0.11", 6502, 20);
	T_EQ(qps_recv_n(rx, 20), 20);
	qps_ctx_destroy(ctx);

	close(kfd);
	close(kfd_tx);
	sh("ip -n %s addr del 10.77.0.11/24 dev %s; ip -n %s addr add "
	   IP_A "/24 dev %s", ns_a, if_a, ns_a, if_a);
	sh("ip -n %s addr del 10.77.0.12/24 dev %s; ip -n %s addr add "
	   IP_B "/24 dev %s; ip -n %s route add 224.0.0.0/4 dev %s", ns_b,
	   if_b, ns_b, if_b, ns_b, if_b);
}

/*
 * The interface goes down under traffic and comes back. What was accepted
 * before or during the outage is either received by the kernel peer or
 * counted (tx_errors: the kick failed with ENETDOWN and the frames
 * completed with an error); nothing hangs; receiving times out asleep; the
 * event descriptor does not stay readable from the socket error the kernel
 * leaves on the ring sockets; traffic resumes both ways after up. Then the
 * carrier alone goes, and both ends change address.
 */
static void test_link_down_up(void)
{
	struct sockaddr_in peer = t_sin(IP_B, 5500);
	struct qps_ctx_attr attr = { 0 };
	struct qps_stats st0, st1;
	struct qps_ctx *ctx;
	struct qps_ep *ep, *rx;
	int kfd, kfd_tx, i, err, accepted = 0, got = 0, tmo = 300;
	int rcvbuf = 8 << 20;

	kfd = sock_b(SOCK_DGRAM, 0, IP_B, 5500);
	kfd_tx = sock_b(SOCK_DGRAM, 0, IP_B, 6501);
	CU_ASSERT_FATAL(kfd >= 0 && kfd_tx >= 0);
	/* Room for a whole held queue arriving at once (carrier_lost). */
	T_EQ(setsockopt(kfd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
			sizeof(rcvbuf)), 0);
	/* A postponed doorbell waits up to 1 s: the burst below is still
	 * unrung when the link goes down. */
	attr.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV |
			 QPS_CTX_ATTR_ADDR | QPS_CTX_ATTR_DB_DELAY;
	attr.provider = prov;
	attr.dev = if_a;
	attr.addr.s_addr = ip4(IP_A);
	attr.db_delay_us = 1000000;
	CU_ASSERT_EQUAL_FATAL(qps_ctx_create(&attr, &ctx), 0);
	CU_ASSERT_EQUAL_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	CU_ASSERT_EQUAL_FATAL(qps_connect(ep, (struct sockaddr *)&peer,
					  sizeof(peer)), 0);
	rx = t_ep_bound(ctx, "0.0.0.0", 6500, tmo);
	st0 = t_ctx_stats(ctx);

	/* Up: both ways. */
	accepted += send_n(ep, 20, 0, &err);
	T_EQ(err, 0);
	got += kernel_recv(kfd, 20, RECV_MS, NULL);
	T_EQ(got, 20);
	kernel_send_n(kfd_tx, IP_A, 6500, 20);
	T_EQ(qps_recv_n(rx, 20), 20);

	/* Down in the middle of a burst: 8 datagrams wait for their
	 * doorbell (MSG_MORE) when the link goes; the flush kicks into a
	 * down interface. */
	accepted += send_n(ep, 8, QPS_MSG_MORE, &err);
	T_EQ(err, 0);
	T_EQ_FATAL(sh("ip -n %s link set %s down", ns_a, if_a), 0);
	qps_flush(ep);
	/* While down: the route is gone, so a send is refused with
	 * -EHOSTUNREACH; one that still found a cached destination is
	 * accepted and then counted as a send error. */
	accepted += send_n(ep, 20, 0, &err);
	CU_ASSERT(err == 0 || err == -EHOSTUNREACH);
	for (i = 0; i < 10; i++)
		qps_ctx_progress(ctx);
	got += kernel_quiet(kfd);
	recv_sleeps(rx, tmo);
	T_EQ(event_fd_ready(ctx, 0), false);
	st1 = t_ctx_stats(ctx);
	printf("\n    while down: send -> %d, tx_errors +%llu, dev_tx_drops "
	       "+%llu, kernel got %d of %d accepted\n", err,
	       (unsigned long long)(st1.tx_errors - st0.tx_errors),
	       (unsigned long long)(st1.dev_tx_drops - st0.dev_tx_drops),
	       got, accepted);
	/* The unrung burst hit the down interface: every frame of it is
	 * a counted error, none was lost silently. */
	T_EQ(st1.tx_errors - st0.tx_errors, accepted - got);
	T_GE(st1.tx_errors - st0.tx_errors, 8);

	/* Up again: traffic resumes both ways, nothing is left readable. */
	T_EQ_FATAL(sh("ip -n %s link set %s up", ns_a, if_a), 0);
	T_EQ(link_wait_carrier(), 0);
	accepted += send_n(ep, 20, 0, &err);
	T_EQ(err, 0);
	got += kernel_recv(kfd, 20, RECV_MS, NULL);
	kernel_send_n(kfd_tx, IP_A, 6500, 20);
	T_EQ(qps_recv_n(rx, 20), 20);
	st1 = t_ctx_stats(ctx);
	T_EQ(accepted, got + (int)(st1.tx_errors - st0.tx_errors));
	T_EQ(qps_recv(rx, &i, sizeof(i), QPS_MSG_DONTWAIT), -EAGAIN);
	T_EQ(event_fd_ready(ctx, 100), false);

	carrier_lost(ctx, ep, kfd);
	close(kfd);
	close(kfd_tx);
	addr_change(ctx, ep, tmo);
}

/* --- bad frames -------------------------------------------------------------- */

static size_t good_frame(uint8_t *f, uint16_t dport, const char *payload)
{
	struct qps_frame_hdr h;
	size_t len = strlen(payload);

	memset(&h, 0, sizeof(h));
	mac_parse(MAC_A, h.dst_mac);
	mac_parse(MAC_B, h.src_mac);
	h.saddr = ip4(IP_B);
	h.daddr = ip4(IP_A);
	h.sport = htons(5555);
	h.dport = htons(dport);
	memcpy(f + QPS_HDRS_LEN, payload, len);
	return (size_t)qps_frame_build(f, &h, len);
}

static void inject(int fd, int ifindex, const uint8_t *f, size_t len)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET,
				   .sll_ifindex = ifindex, .sll_halen = 6 };

	memcpy(sll.sll_addr, f, 6);
	CU_ASSERT_EQUAL(sendto(fd, f, len, 0, (struct sockaddr *)&sll,
			       sizeof(sll)), (ssize_t)len);
}

static void fix_ip_csum(uint8_t *f)
{
	uint16_t c;

	f[24] = f[25] = 0;
	c = qps_csum_fold(qps_csum_partial(f + 14, 20, 0));
	memcpy(f + 24, &c, 2);
}

static void test_bad_frames(void)
{
	struct sockaddr_in any = t_sin("0.0.0.0", 6100);
	struct qps_stats s0, s1;
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	uint8_t f[256], buf[64];
	int fd, ifx = 0, tmo = RECV_MS, i;
	size_t len;

	fd = raw_b(&ifx);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL_FATAL(ctx_open(if_a, NULL, &ctx), 0);
	CU_ASSERT_EQUAL_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	CU_ASSERT_EQUAL(qps_setopt(ep, QPS_OPT_RCVTIMEO, &tmo, sizeof(tmo)),
			0);
	CU_ASSERT_EQUAL_FATAL(qps_bind(ep, (struct sockaddr *)&any,
				       sizeof(any)), 0);
	qps_ctx_stats(ctx, &s0, sizeof(s0));

	len = good_frame(f, 6100, "good-1");
	inject(fd, ifx, f, len);
	/* Runt: Ethernet + 10 bytes of "IPv4". */
	good_frame(f, 6100, "runt");
	inject(fd, ifx, f, QPS_ETH_HLEN + 10);
	/* IHL 4. */
	len = good_frame(f, 6100, "ihl");
	f[14] = 0x44;
	fix_ip_csum(f);
	inject(fd, ifx, f, len);
	/* IPv4 header checksum off by one. */
	len = good_frame(f, 6100, "ipcsum");
	f[24] ^= 1;
	inject(fd, ifx, f, len);
	/* UDP checksum wrong. */
	len = good_frame(f, 6100, "udpcsum");
	f[40] ^= 0x55;
	inject(fd, ifx, f, len);
	/* First fragment (MF set). */
	len = good_frame(f, 6100, "frag");
	f[20] |= 0x20;
	fix_ip_csum(f);
	inject(fd, ifx, f, len);
	len = good_frame(f, 6100, "good-2");
	inject(fd, ifx, f, len);

	for (i = 1; i <= 2; i++) {
		char want[16];

		snprintf(want, sizeof(want), "good-%d", i);
		memset(buf, 0, sizeof(buf));
		CU_ASSERT_EQUAL(qps_recv(ep, buf, sizeof(buf), 0), 6);
		CU_ASSERT_STRING_EQUAL((char *)buf, want);
	}
	CU_ASSERT_EQUAL(qps_recv(ep, buf, sizeof(buf), QPS_MSG_DONTWAIT),
			-EAGAIN);
	qps_ctx_stats(ctx, &s1, sizeof(s1));
	CU_ASSERT_EQUAL(s1.rx_bad[QPS_RX_SHORT_IP] - s0.rx_bad[QPS_RX_SHORT_IP],
			1);
	CU_ASSERT_EQUAL(s1.rx_bad[QPS_RX_BAD_IHL] - s0.rx_bad[QPS_RX_BAD_IHL],
			1);
	CU_ASSERT_EQUAL(s1.rx_bad[QPS_RX_BAD_IP_CSUM] -
			s0.rx_bad[QPS_RX_BAD_IP_CSUM], 1);
	CU_ASSERT_EQUAL(s1.rx_bad[QPS_RX_BAD_UDP_CSUM] -
			s0.rx_bad[QPS_RX_BAD_UDP_CSUM], 1);
	CU_ASSERT_EQUAL(s1.rx_bad[QPS_RX_FRAGMENT] -
			s0.rx_bad[QPS_RX_FRAGMENT], 1);
	CU_ASSERT_EQUAL(s1.rx_packets - s0.rx_packets, 2);
	qps_ctx_destroy(ctx);
	close(fd);
}

/* --- sockperf against qps_echo ----------------------------------------------- */

#ifdef QPS_ECHO_BIN
static pid_t spawn(int ns_fd, const char *out, char *const argv[])
{
	pid_t pid = fork();
	int fd;

	if (pid != 0)
		return pid;
	if (ns_fd >= 0 && ns_enter(ns_fd) < 0)
		_exit(126);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	execvp(argv[0], argv);
	_exit(127);
}

/* Wait up to @ms for @pid; kill it when late. Exit status or -1. */
static int reap(pid_t pid, int ms)
{
	struct timespec ts = { 0, 10000000 };
	int st, i;

	for (i = 0; i < ms / 10; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

static double sockperf_latency(const char *path, long *received)
{
	char line[512], *p;
	double lat = -1;
	FILE *f = fopen(path, "re");

	*received = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		p = strstr(line, "Summary: Latency is ");
		if (p)
			lat = strtod(p + strlen("Summary: Latency is "), NULL);
		p = strstr(line, "[Valid Duration]");
		if (p && (p = strstr(p, "ReceivedMessages=")))
			*received = strtol(p + strlen("ReceivedMessages="),
					   NULL, 10);
	}
	fclose(f);
	return lat;
}

/* sockperf (kernel, namespace B) against qps_echo (namespace A); @group
 * non-NULL: multicast ping-pong through qps_join. */
static void sockperf_vs_echo(const char *mode, const char *group,
			     const char *port)
{
	char echo_out[64], perf_out[64];
	char *echo_argv[] = { QPS_ECHO_BIN, "--provider", (char *)prov, "-d", if_a, "-p",
			      (char *)port, "-t", "20", group ? "-g" : NULL,
			      (char *)group, NULL };
	char *perf_argv[] = { "sockperf", (char *)mode, "-i",
			      group ? (char *)group : IP_A, "-p", (char *)port,
			      "-t", "2", "-m", "64", "--mc-tx-if", IP_B,
			      "--mc-rx-if", IP_B, NULL };
	struct timespec ts = { 0, 300000000 };
	pid_t echo, perf;
	long received;
	double lat;

	if (system("command -v sockperf >/dev/null 2>&1")) {
		CU_FAIL("sockperf is not installed (scripts/install-deps.sh "
			"installs it)");
		return;
	}
	snprintf(echo_out, sizeof(echo_out), "/tmp/qps-echo-%d.log",
		 (int)getpid());
	snprintf(perf_out, sizeof(perf_out), "/tmp/qps-sockperf-%d.log",
		 (int)getpid());
	echo = spawn(-1, echo_out, echo_argv);	/* namespace A, as we are */
	CU_ASSERT_FATAL(echo > 0);
	nanosleep(&ts, NULL);
	perf = spawn(fd_ns_b, perf_out, perf_argv);
	CU_ASSERT_FATAL(perf > 0);
	CU_ASSERT_EQUAL(reap(perf, 20000), 0);
	kill(echo, SIGINT);
	CU_ASSERT_EQUAL(reap(echo, 5000), 0);
	lat = sockperf_latency(perf_out, &received);
	fprintf(stderr, "\n  sockperf %s %s -> qps_echo: latency %.3f us, "
		"%ld replies in the valid window\n", mode,
		group ? group : IP_A, lat, received);
	CU_ASSERT(lat > 0 && lat < 100000);
	/* under-load asks a reply for 1 message in 100, 10000 a second. */
	CU_ASSERT(received > 50);
	CU_ASSERT(file_has(echo_out, "messages received and handled"));
	if (lat <= 0 || received <= 50)
		sh("cat %s %s >&2", perf_out, echo_out);
	unlink(echo_out);
	unlink(perf_out);
}

static void test_sockperf_pingpong(void)
{
	sockperf_vs_echo("ping-pong", NULL, "11111");
}

static void test_sockperf_underload(void)
{
	sockperf_vs_echo("under-load", NULL, "11112");
}

#ifdef QPS_IFINDEX
static void test_sockperf_mcast(void)
{
	sockperf_vs_echo("ping-pong", GROUP, "11113");
}
#endif
#endif

/* --- the MTU changes under a sender ------------------------------------------ */

static int send_sized(struct qps_ep *ep, int n, size_t len, int flags)
{
	static uint8_t buf[1472];
	int i, ok = 0;

	for (i = 0; i < n; i++)
		ok += qps_send(ep, buf, len, flags) == (ssize_t)len;
	return ok;
}

/*
 * A's MTU is lowered under a running sender, with frames posted and
 * waiting for their doorbell: every datagram qps_send() accepted either
 * arrives or is counted in tx_errors, none is lost as a success; the
 * context's max_payload follows the MTU down and back up; datagrams
 * that no longer fit one frame leave in fragments.
 */
static void test_mtu_lowered(void)
{
	struct sockaddr_in peer = t_sin(IP_B, 7800);
	struct qps_ctx_attr attr = { 0 };
	struct qps_stats st0, st1;
	static uint8_t big[1400];
	struct qps_ctx_info info;
	uint64_t frags0;
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	int kfd, accepted = 0, got, i, rcvbuf = 8 << 20;

	kfd = sock_b(SOCK_DGRAM, 0, IP_B, 7800);
	CU_ASSERT_FATAL(kfd >= 0);
	T_EQ(setsockopt(kfd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
			sizeof(rcvbuf)), 0);
	attr.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV |
			 QPS_CTX_ATTR_ADDR | QPS_CTX_ATTR_DB_DELAY;
	attr.provider = prov;
	attr.dev = if_a;
	attr.addr.s_addr = ip4(IP_A);
	attr.db_delay_us = 1000000;	/* the MORE burst waits for us */
	T_EQ_FATAL(qps_ctx_create(&attr, &ctx), 0);
	T_EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	T_EQ_FATAL(qps_connect(ep, (struct sockaddr *)&peer, sizeof(peer)), 0);
	st0 = t_ctx_stats(ctx);

	accepted += send_sized(ep, 100, 1400, 0);
	accepted += send_sized(ep, 50, 1400, QPS_MSG_MORE);
	T_EQ_FATAL(sh("ip -n %s link set %s mtu 1000", ns_a, if_a), 0);
	qps_flush(ep);
	t_sleep_ms(5);
	/* The context follows: max_payload is the new MTU's, and a
	 * datagram above it now leaves in fragments. */
	T_EQ(qps_ctx_query(ctx, &info), 0);
	T_EQ(info.mtu, 1000);
	T_EQ(info.max_payload, 1000 - 28);
	frags0 = t_ctx_stats(ctx).tx_frags;
	accepted += send_sized(ep, 100, 1400, 0);
	T_EQ(t_ctx_stats(ctx).tx_frags - frags0, 200);
	accepted += send_sized(ep, 100, 500, 0);
	for (i = 0; i < 20; i++) {
		qps_ctx_progress(ctx);
		t_sleep_ms(2);
	}
	got = kernel_recv(kfd, accepted, RECV_MS, NULL);
	st1 = t_ctx_stats(ctx);
	printf("\n    MTU 1500 -> 1000 under a sender: %d accepted, %d "
	       "received, tx_errors +%llu\n", accepted, got,
	       (unsigned long long)(st1.tx_errors - st0.tx_errors));
	T_EQ((uint64_t)accepted, (uint64_t)got + st1.tx_errors -
				 st0.tx_errors);
	T_GE(got, 200);
	/* Raised again: back to what the send slots were made for. */
	T_EQ_FATAL(sh("ip -n %s link set %s mtu 1500", ns_a, if_a), 0);
	t_sleep_ms(5);
	T_EQ(qps_send(ep, big, 1400, 0), 1400);
	T_EQ(qps_ctx_query(ctx, &info), 0);
	T_EQ(info.max_payload, 1472);
	T_EQ(qps_ctx_destroy(ctx), 0);
	close(kfd);
}

/* --- fragments ---------------------------------------------------------------- */

static const size_t frag_sizes[] = { 1473, 3000, 8972, 65507 };
#define NFRAG_SIZES (sizeof(frag_sizes) / sizeof(frag_sizes[0]))

/*
 * Datagrams above the MTU both ways with the kernel's UDP: the kernel
 * reassembles what qpsock fragments, qpsock reassembles what the kernel
 * fragments, payload bytes compared; at MTU 1500 each leaves in
 * ceil((8 + n) / 1480) fragments.
 */
static void test_fragments(void)
{
	struct sockaddr_in to_b = t_sin(IP_B, 7900), to_a = t_sin(IP_A, 7901),
			   any = t_sin("0.0.0.0", 7901), src;
	static uint8_t out[65507], in[65536];
	struct qps_stats st0, st1;
	struct pollfd pfd;
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	uint64_t frags = 0;
	int kfd, i, tmo = RECV_MS, rcvbuf = 4 << 20;
	socklen_t sl;
	ssize_t r;

	kfd = sock_b(SOCK_DGRAM, 0, IP_B, 7900);
	CU_ASSERT_FATAL(kfd >= 0);
	T_EQ(setsockopt(kfd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
			sizeof(rcvbuf)), 0);
	T_EQ_FATAL(ctx_open(if_a, IP_A, &ctx), 0);
	T_EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	T_EQ(qps_setopt(ep, QPS_OPT_RCVTIMEO, &tmo, sizeof(tmo)), 0);
	T_EQ_FATAL(qps_bind(ep, (struct sockaddr *)&any, sizeof(any)), 0);
	st0 = t_ctx_stats(ctx);

	/* qpsock -> kernel */
	for (i = 0; i < (int)NFRAG_SIZES; i++) {
		size_t n = frag_sizes[i];

		fill(out, n, (unsigned int)i + 70);
		T_EQ(qps_sendto(ep, out, n, 0, (struct sockaddr *)&to_b,
				sizeof(to_b)), (ssize_t)n);
		frags += (8 + n + 1479) / 1480;
		pfd = (struct pollfd){ .fd = kfd, .events = POLLIN };
		T_EQ(poll(&pfd, 1, RECV_MS), 1);
		r = recv(kfd, in, sizeof(in), MSG_DONTWAIT);
		T_EQ(r, (ssize_t)n);
		CU_ASSERT(r == (ssize_t)n && !memcmp(in, out, n));
	}
	/* kernel -> qpsock */
	for (i = 0; i < (int)NFRAG_SIZES; i++) {
		size_t n = frag_sizes[i];

		fill(out, n, (unsigned int)i + 90);
		T_EQ(sendto(kfd, out, n, 0, (struct sockaddr *)&to_a,
			    sizeof(to_a)), (ssize_t)n);
		sl = sizeof(src);
		memset(in, 0, n);
		r = qps_recvfrom(ep, in, sizeof(in), 0,
				 (struct sockaddr *)&src, &sl);
		T_EQ(r, (ssize_t)n);
		CU_ASSERT(r == (ssize_t)n && !memcmp(in, out, n));
		T_EQ(src.sin_addr.s_addr, ip4(IP_B));
		T_EQ(ntohs(src.sin_port), 7900);
	}
	st1 = t_ctx_stats(ctx);
	T_EQ(st1.tx_frags - st0.tx_frags, frags);
	T_EQ(st1.rx_reasm_ok - st0.rx_reasm_ok, NFRAG_SIZES);
	T_EQ(st1.rx_reasm_bytes, 0);
	T_EQ(st1.tx_errors, 0);
	printf("\n    1473..65507 B both ways: %llu fragments sent, "
	       "%llu received, %llu datagrams reassembled\n",
	       (unsigned long long)(st1.tx_frags - st0.tx_frags),
	       (unsigned long long)(st1.rx_bad[QPS_RX_FRAGMENT] -
				    st0.rx_bad[QPS_RX_FRAGMENT]),
	       (unsigned long long)(st1.rx_reasm_ok - st0.rx_reasm_ok));
	T_EQ(qps_ctx_destroy(ctx), 0);
	close(kfd);
}

/* Non-blocking calls never wait for ARP: a send to a neighbour nobody
 * answers for is -EAGAIN at once (resolution started), a connect to it
 * succeeds; the blocking send waits and then says -EHOSTUNREACH, and a
 * non-blocking one after that refusal says so too. */
static void test_neigh_nowait(void)
{
	struct sockaddr_in silent = t_sin("10.77.0.99", 7990);
	struct qps_ctx *ctx;
	struct qps_ep *ep, *cx;
	struct timespec t0, t1;
	long ms;

	T_EQ_FATAL(ctx_open(if_a, IP_A, &ctx), 0);
	T_EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	T_EQ(qps_sendto(ep, "n", 1, QPS_MSG_DONTWAIT,
			(struct sockaddr *)&silent, sizeof(silent)), -EAGAIN);
	T_EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &cx), 0);
	T_EQ(qps_set_nonblock(cx, 1), 0);
	T_EQ(qps_connect(cx, (struct sockaddr *)&silent, sizeof(silent)), 0);
	T_EQ(qps_send(cx, "n", 1, 0), -EAGAIN);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 +
	     (t1.tv_nsec - t0.tv_nsec) / 1000000;
	T_LE(ms, 500);
	/* Blocking: ARP's own time, then the refusal, which the
	 * non-blocking call then gives at once. */
	T_EQ(qps_sendto(ep, "n", 1, 0, (struct sockaddr *)&silent,
			sizeof(silent)), -EHOSTUNREACH);
	T_EQ(qps_sendto(ep, "n", 1, QPS_MSG_DONTWAIT,
			(struct sockaddr *)&silent, sizeof(silent)),
	     -EHOSTUNREACH);
	T_EQ(qps_ctx_destroy(ctx), 0);
}

/* A kernel sender's group datagrams above the MTU, through qps_join: the
 * first fragment matches the port's rule, the others the group's own. */
static void test_mcast_fragments(void)
{
	struct sockaddr_in any = t_sin("0.0.0.0", 5600), to, src;
	struct ip_mreqn mif = { .imr_ifindex = ifindex_b() };
	struct qps_mreq mr = { .group.s_addr = ip4(GROUP) };
	static uint8_t out[65507], in[65536];
	struct qps_stats st0, st1;
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	int kfd, i, tmo = RECV_MS;
	socklen_t sl;
	ssize_t r;

	kfd = sock_b(SOCK_DGRAM, 0, IP_B, 5601);
	CU_ASSERT_FATAL(kfd >= 0);
	T_EQ(setsockopt(kfd, IPPROTO_IP, IP_MULTICAST_IF, &mif, sizeof(mif)),
	     0);
	T_EQ_FATAL(ctx_open(if_a, IP_A, &ctx), 0);
	T_EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	T_EQ(qps_setopt(ep, QPS_OPT_RCVTIMEO, &tmo, sizeof(tmo)), 0);
	T_EQ_FATAL(qps_bind(ep, (struct sockaddr *)&any, sizeof(any)), 0);
	T_EQ_FATAL(qps_join(ep, &mr, sizeof(mr)), 0);
	st0 = t_ctx_stats(ctx);
	for (i = 0; i < (int)NFRAG_SIZES; i++) {
		size_t n = frag_sizes[i];

		fill(out, n, (unsigned int)i + 110);
		to = t_sin(GROUP, 5600);
		T_EQ(sendto(kfd, out, n, 0, (struct sockaddr *)&to,
			    sizeof(to)), (ssize_t)n);
		/* Same group, a port nobody here holds; another group. */
		to.sin_port = htons(5602);
		T_EQ(sendto(kfd, out, n, 0, (struct sockaddr *)&to,
			    sizeof(to)), (ssize_t)n);
		to = t_sin("239.1.2.9", 5600);
		T_EQ(sendto(kfd, out, n, 0, (struct sockaddr *)&to,
			    sizeof(to)), (ssize_t)n);
		sl = sizeof(src);
		memset(in, 0, n);
		r = qps_recvfrom(ep, in, sizeof(in), 0,
				 (struct sockaddr *)&src, &sl);
		T_EQ(r, (ssize_t)n);
		CU_ASSERT(r == (ssize_t)n && !memcmp(in, out, n));
		T_EQ(src.sin_addr.s_addr, ip4(IP_B));
		T_EQ(ntohs(src.sin_port), 5601);
	}
	T_EQ(qps_recv(ep, in, sizeof(in), 0), -ETIMEDOUT);
	st1 = t_ctx_stats(ctx);
	/* The group's unbound port: its datagrams are reassembled and
	 * dropped, or on xdp left to the host's sockets. */
	if (steals_from_host()) {
		T_EQ(st1.rx_reasm_ok - st0.rx_reasm_ok, NFRAG_SIZES);
		T_EQ(st1.rx_no_endpoint - st0.rx_no_endpoint, 0);
	} else {
		T_EQ(st1.rx_reasm_ok - st0.rx_reasm_ok, 2 * NFRAG_SIZES);
		T_EQ(st1.rx_no_endpoint - st0.rx_no_endpoint, NFRAG_SIZES);
	}
	T_EQ(st1.rx_reasm_bytes, 0);
	T_EQ(qps_ctx_destroy(ctx), 0);
	close(kfd);
}

/* Fragments of one datagram of @len bytes (ID @id) to A's port @dport, cut
 * at @unit IP payload bytes: frame i in f[i], its length in fl[i]. */
#define WF_MAX 8
static unsigned int wire_frags(uint8_t f[][1600], size_t fl[], size_t len,
			       size_t unit, uint16_t id, uint16_t dport,
			       uint8_t seed)
{
	static uint8_t whole[8 + 8000];
	struct qps_frame_hdr h;
	size_t off, total = 8 + len;
	unsigned int n = 0;

	memset(&h, 0, sizeof(h));
	mac_parse(MAC_A, h.dst_mac);
	mac_parse(MAC_B, h.src_mac);
	h.saddr = ip4(IP_B);
	h.daddr = ip4(IP_A);
	h.sport = htons(5556);
	h.dport = htons(dport);
	h.ip_id = htons(id);
	fill(whole + 8, len, seed);
	qps_udp_hdr_build(whole, &h, len, qps_csum_partial(whole + 8, len, 0));
	for (off = 0; off < total && n < WF_MAX; off += unit, n++) {
		size_t k = total - off < unit ? total - off : unit;

		memcpy(f[n] + QPS_ETH_HLEN + QPS_IP_HLEN, whole + off, k);
		fl[n] = (size_t)qps_frame_build_frag(f[n], &h, k, off,
						     off + k < total);
	}
	return n;
}

/*
 * The reassembly on the wire, with frames a raw socket of B puts there:
 * out of order and duplicated (delivered once), overlapping (dropped),
 * a hole (timed out at ipfrag_time_ms), and a flood of first fragments
 * against a small ipfrag_mem (capped, counted); traffic goes on after.
 */
static void test_fragments_wire(void)
{
	struct sockaddr_in any = t_sin("0.0.0.0", 7960);
	static uint8_t f[WF_MAX][1600], g[WF_MAX][1600], in[8192], want[8192];
	size_t fl[WF_MAX], gl[WF_MAX];
	struct qps_ctx_attr attr = { 0 };
	struct qps_stats st0, st1;
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	int raw, ifi, tmo = 500, i;
	unsigned int n;

	if (steals_from_host()) {
		printf("\n    skipped on %s: a fragment before its first one "
		       "is the host's (docs/xdp.md)", prov);
		return;
	}
	attr.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV |
			 QPS_CTX_ATTR_ADDR | QPS_CTX_ATTR_IPFRAG;
	attr.provider = prov;
	attr.dev = if_a;
	attr.addr.s_addr = ip4(IP_A);
	attr.ipfrag_mem = 64 * 1024;
	attr.ipfrag_time_ms = 200;
	T_EQ_FATAL(qps_ctx_create(&attr, &ctx), 0);
	T_EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	T_EQ(qps_setopt(ep, QPS_OPT_RCVTIMEO, &tmo, sizeof(tmo)), 0);
	T_EQ_FATAL(qps_bind(ep, (struct sockaddr *)&any, sizeof(any)), 0);
	raw = raw_b(&ifi);
	CU_ASSERT_FATAL(raw >= 0);
	st0 = t_ctx_stats(ctx);

	/* Reversed, the middle one twice: one datagram. */
	n = wire_frags(f, fl, 4000, 1480, 101, 7960, 1);
	T_EQ_FATAL(n, 3);
	inject(raw, ifi, f[2], fl[2]);
	inject(raw, ifi, f[1], fl[1]);
	inject(raw, ifi, f[1], fl[1]);
	inject(raw, ifi, f[0], fl[0]);
	fill(want, 4000, 1);
	T_EQ(qps_recv(ep, in, sizeof(in), 0), 4000);
	CU_ASSERT(!memcmp(in, want, 4000));

	/* Overlapping: 1480 bytes at 1472 against 0..1480: dropped whole,
	 * and the rest of it can no longer complete anything. */
	n = wire_frags(f, fl, 4000, 1480, 102, 7960, 2);
	(void)wire_frags(g, gl, 4000, 1472, 102, 7960, 2);
	inject(raw, ifi, f[0], fl[0]);
	inject(raw, ifi, g[1], gl[1]);
	inject(raw, ifi, f[1], fl[1]);
	inject(raw, ifi, f[2], fl[2]);
	/* A hole: the last fragment of another datagram never comes. */
	n = wire_frags(f, fl, 4000, 1480, 103, 7960, 3);
	inject(raw, ifi, f[0], fl[0]);
	inject(raw, ifi, f[1], fl[1]);
	T_EQ(qps_recv(ep, in, sizeof(in), 0), -ETIMEDOUT);

	/* A flood of first fragments: held up to the cap, then counted. */
	for (i = 0; i < 200; i++) {
		n = wire_frags(f, fl, 4000, 1480, (uint16_t)(1000 + i), 7960,
			       4);
		inject(raw, ifi, f[0], fl[0]);
	}
	t_sleep_ms(50);
	qps_ctx_progress(ctx);
	st1 = t_ctx_stats(ctx);
	T_LE(st1.rx_reasm_bytes, 64 * 1024);
	T_GE(st1.rx_reasm_mem - st0.rx_reasm_mem, 150);
	/* After the lifetime, everything held is gone: a bounded batch at
	 * each progress call. */
	t_sleep_ms(300);
	for (i = 0; i < 20; i++) {
		qps_ctx_progress(ctx);
		st1 = t_ctx_stats(ctx);
		if (!st1.rx_reasm_bytes)
			break;
	}
	T_EQ(st1.rx_reasm_bytes, 0);
	T_EQ(st1.rx_reasm_ok - st0.rx_reasm_ok, 1);
	T_EQ(st1.rx_reasm_dup - st0.rx_reasm_dup, 1);
	T_EQ(st1.rx_reasm_overlap - st0.rx_reasm_overlap, 1);
	T_GE(st1.rx_reasm_timeout - st0.rx_reasm_timeout, 2);
	T_EQ(st1.rx_reasm_mem - st0.rx_reasm_mem +
	     st1.rx_reasm_timeout - st0.rx_reasm_timeout, 200 + 2);
	printf("\n    fragments on the wire: ok %llu, dup %llu, overlap %llu, "
	       "timeout %llu, mem %llu\n",
	       (unsigned long long)(st1.rx_reasm_ok - st0.rx_reasm_ok),
	       (unsigned long long)(st1.rx_reasm_dup - st0.rx_reasm_dup),
	       (unsigned long long)(st1.rx_reasm_overlap -
				    st0.rx_reasm_overlap),
	       (unsigned long long)(st1.rx_reasm_timeout -
				    st0.rx_reasm_timeout),
	       (unsigned long long)(st1.rx_reasm_mem - st0.rx_reasm_mem));

	/* Traffic goes on. */
	n = wire_frags(f, fl, 3000, 1480, 104, 7960, 5);
	for (i = 0; i < (int)n; i++)
		inject(raw, ifi, f[i], fl[i]);
	fill(want, 3000, 5);
	T_EQ(qps_recv(ep, in, sizeof(in), 0), 3000);
	CU_ASSERT(!memcmp(in, want, 3000));
	T_EQ(qps_ctx_destroy(ctx), 0);
	close(raw);
}

/* --- multicast loopback ------------------------------------------------------ */

/* A kernel socket of A's namespace (this thread's) on GROUP:@port,
 * joined on A's veth. */
static int sock_a_group(unsigned short port)
{
	struct sockaddr_in sin = t_sin(GROUP, port);
	struct ip_mreqn mr = { .imr_ifindex = (int)if_nametoindex(if_a) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	mr.imr_multiaddr.s_addr = ip4(GROUP);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr,
		       sizeof(mr)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int qps_recv_all(struct qps_ep *ep)
{
	uint8_t buf[64];
	int got = 0;

	while (qps_recv(ep, buf, sizeof(buf), 0) > 0)
		got++;
	return got;
}

/*
 * IP_MULTICAST_LOOP on a device that does not loop (AF_PACKET): on (the
 * default), a subscribing endpoint of the context gets each datagram
 * once, as does a subscriber across the wire; the sender gets it only if
 * it joined. Off, only the wire's subscriber does. A kernel socket of
 * this host gets no looped copy either way (docs/packet.md "Multicast
 * loopback"): checked, so a change of that promise is seen.
 */
static void test_mc_loop(void)
{
	struct sockaddr_in grp = t_sin(GROUP, 7950), any = t_sin("0.0.0.0", 7950);
	struct qps_mreq mr = { .group.s_addr = ip4(GROUP) };
	struct ip_mreqn mrb = { .imr_ifindex = ifindex_b() };
	struct qps_stats st0, st1;
	struct qps_ctx *ctx;
	struct qps_ep *sub, *tx;
	int ka, kb, i, n = 50, v, tmo = 300;
	socklen_t vl = sizeof(v);

	ka = sock_a_group(7950);
	kb = sock_b(SOCK_DGRAM, 0, GROUP, 7950);
	CU_ASSERT_FATAL(ka >= 0 && kb >= 0);
	mrb.imr_multiaddr.s_addr = ip4(GROUP);
	T_EQ_FATAL(setsockopt(kb, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mrb,
			      sizeof(mrb)), 0);
	T_EQ_FATAL(ctx_open(if_a, IP_A, &ctx), 0);
	T_EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &sub), 0);
	T_EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &tx), 0);
	T_EQ(qps_setopt(sub, QPS_OPT_RCVTIMEO, &tmo, sizeof(tmo)), 0);
	T_EQ_FATAL(qps_bind(sub, (struct sockaddr *)&any, sizeof(any)), 0);
	T_EQ_FATAL(qps_join(sub, &mr, sizeof(mr)), 0);
	T_EQ(qps_getopt(tx, QPS_OPT_MULTICAST_LOOP, &v, &vl), 0);
	T_EQ(v, 1);
	st0 = t_ctx_stats(ctx);

	for (i = 0; i < n; i++)
		T_EQ(qps_sendto(tx, "loop", 4, 0, (struct sockaddr *)&grp,
				sizeof(grp)), 4);
	T_EQ(kernel_recv(kb, n, RECV_MS, NULL), n);
	T_EQ(qps_recv_all(sub), n);
	T_EQ(kernel_quiet(ka), 0);
	T_EQ(kernel_quiet(kb), 0);
	st1 = t_ctx_stats(ctx);
	T_EQ(st1.tx_mc_loops - st0.tx_mc_loops, n);
	T_EQ(st1.tx_mc_loop_errors - st0.tx_mc_loop_errors, 0);

	/* Off: the wire only. */
	v = 0;
	T_EQ(qps_setopt(tx, QPS_OPT_MULTICAST_LOOP, &v, sizeof(v)), 0);
	for (i = 0; i < n; i++)
		T_EQ(qps_sendto(tx, "wire", 4, 0, (struct sockaddr *)&grp,
				sizeof(grp)), 4);
	T_EQ(kernel_recv(kb, n, RECV_MS, NULL), n);
	T_EQ(qps_recv_all(sub), 0);

	/* A sender that joined gets its own, once. */
	T_EQ(qps_sendto(sub, "self", 4, 0, (struct sockaddr *)&grp,
			sizeof(grp)), 4);
	T_EQ(qps_recv_all(sub), 1);
	T_EQ(kernel_recv(kb, 1, RECV_MS, NULL), 1);
	T_EQ(kernel_quiet(ka), 0);
	/* Any non-zero value is on, as IP_MULTICAST_LOOP. */
	v = 7;
	T_EQ(qps_setopt(tx, QPS_OPT_MULTICAST_LOOP, &v, sizeof(v)), 0);
	T_EQ(qps_getopt(tx, QPS_OPT_MULTICAST_LOOP, &v, &vl), 0);
	T_EQ(v, 1);
	T_EQ(qps_ctx_destroy(ctx), 0);
	close(ka);
	close(kb);
}

/* --- TTL and TOS on the wire ------------------------------------------------- */

/* One datagram on @fd with its TTL and TOS (IP_RECVTTL, IP_RECVTOS). */
static int recv_ttl_tos(int fd, int *ttl, int *tos)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int)) * 2 + 64];
	} c;
	char data[64];
	struct iovec iov = { .iov_base = data, .iov_len = sizeof(data) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = c.buf,
			    .msg_controllen = sizeof(c.buf) };
	struct cmsghdr *cm;

	*ttl = *tos = -1;
	if (poll(&pfd, 1, RECV_MS) <= 0 || recvmsg(fd, &m, 0) < 0)
		return -1;
	for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
		if (cm->cmsg_level != IPPROTO_IP)
			continue;
		if (cm->cmsg_type == IP_TTL)
			memcpy(ttl, CMSG_DATA(cm), sizeof(int));
		else if (cm->cmsg_type == IP_TOS)
			*tos = *(const uint8_t *)CMSG_DATA(cm);
	}
	return 0;
}

/*
 * The header fields a kernel receiver sees: unicast TTL 64 and multicast
 * TTL 1 by default, as a kernel socket sends them; QPS_OPT_TTL,
 * QPS_OPT_MULTICAST_TTL and QPS_OPT_TOS change them; -1 restores.
 */
static void test_ttl_tos(void)
{
	struct sockaddr_in uni = t_sin(IP_B, 5300), grp = t_sin(GROUP, 5301);
	struct ip_mreqn mr = { .imr_ifindex = ifindex_b() };
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	int ku, km, one = 1, ttl, tos, v;
	socklen_t vl = sizeof(v);

	ku = sock_b(SOCK_DGRAM, 0, IP_B, 5300);
	km = sock_b(SOCK_DGRAM, 0, GROUP, 5301);
	CU_ASSERT_FATAL(ku >= 0 && km >= 0);
	mr.imr_multiaddr.s_addr = ip4(GROUP);
	T_EQ_FATAL(setsockopt(km, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr,
			      sizeof(mr)), 0);
	setsockopt(ku, IPPROTO_IP, IP_RECVTTL, &one, sizeof(one));
	setsockopt(ku, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
	setsockopt(km, IPPROTO_IP, IP_RECVTTL, &one, sizeof(one));
	T_EQ_FATAL(ctx_open(if_a, IP_A, &ctx), 0);
	T_EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);

#define SEND_TO(d) qps_sendto(ep, "t", 1, 0, (struct sockaddr *)&(d), \
			      sizeof(d))
	T_EQ(SEND_TO(uni), 1);
	T_EQ(recv_ttl_tos(ku, &ttl, &tos), 0);
	T_EQ(ttl, 64);
	T_EQ(tos, 0);
	T_EQ(SEND_TO(grp), 1);
	T_EQ(recv_ttl_tos(km, &ttl, &tos), 0);
	T_EQ(ttl, 1);

	v = 7;
	T_EQ(qps_setopt(ep, QPS_OPT_TTL, &v, sizeof(v)), 0);
	v = 0xb8;	/* DSCP EF */
	T_EQ(qps_setopt(ep, QPS_OPT_TOS, &v, sizeof(v)), 0);
	v = 5;
	T_EQ(qps_setopt(ep, QPS_OPT_MULTICAST_TTL, &v, sizeof(v)), 0);
	T_EQ(SEND_TO(uni), 1);
	T_EQ(recv_ttl_tos(ku, &ttl, &tos), 0);
	T_EQ(ttl, 7);
	T_EQ(tos, 0xb8);
	T_EQ(SEND_TO(grp), 1);
	T_EQ(recv_ttl_tos(km, &ttl, &tos), 0);
	T_EQ(ttl, 5);

	v = -1;
	T_EQ(qps_setopt(ep, QPS_OPT_TTL, &v, sizeof(v)), 0);
	T_EQ(qps_getopt(ep, QPS_OPT_TTL, &v, &vl), 0);
	T_EQ(v, 64);
	v = 0;
	T_EQ(qps_setopt(ep, QPS_OPT_TTL, &v, sizeof(v)), -EINVAL);
	T_EQ(qps_setopt(ep, QPS_OPT_MULTICAST_TTL, &v, sizeof(v)), -EINVAL);
	v = 256;
	T_EQ(qps_setopt(ep, QPS_OPT_TOS, &v, sizeof(v)), -EINVAL);
#undef SEND_TO
	T_EQ(qps_ctx_destroy(ctx), 0);
	close(ku);
	close(km);
}

/* --- the kernel socket behind a bound port --------------------------------- */

/* A counter of /proc/net/snmp (the calling thread's namespace). */
#define IP_B_ICMP "10.77.0.60"

static long long snmp_get(const char *proto, const char *name)
{
	char head[2048], vals[2048];
	long long v = -1;
	FILE *f = fopen("/proc/thread-self/net/snmp", "re");
	size_t plen = strlen(proto);

	if (!f)
		return -1;
	while (fgets(head, sizeof(head), f) && fgets(vals, sizeof(vals), f)) {
		char *hs, *vs, *h, *val;

		if (strncmp(head, proto, plen) || head[plen] != ':')
			continue;
		h = strtok_r(head + plen + 1, " \n", &hs);
		val = strtok_r(vals + plen + 1, " \n", &vs);
		while (h && val) {
			if (!strcmp(h, name)) {
				v = atoll(val);
				break;
			}
			h = strtok_r(NULL, " \n", &hs);
			val = strtok_r(NULL, " \n", &vs);
		}
		break;
	}
	fclose(f);
	return v;
}

/*
 * The kernel never answers a qpsock port with ICMP port-unreachable: 500
 * datagrams from a kernel peer to a bound endpoint raise A's
 * OutDestUnreachs by 0, and a connected kernel sender sees no
 * ECONNREFUSED over 200 sends, all of which arrive.
 */
static void test_no_icmp(void)
{
	struct sockaddr_in dst = t_sin(IP_A, 7600);
	struct qps_ctx *ctx;
	struct qps_ep *rx;
	long long icmp0, icmp1;
	int kfd, i, refused = 0, got;

	/* The kernel limits ICMP per destination (6, then 1 a second):
	 * earlier cases used up IP_B's, so the peer sends from a fresh
	 * address, which a regression would meet at full rate. */
	T_EQ_FATAL(sh("ip -n %s addr add " IP_B_ICMP "/24 dev %s", ns_b, if_b),
		   0);
	T_EQ_FATAL(ctx_open(if_a, IP_A, &ctx), 0);
	rx = t_ep_bound(ctx, "0.0.0.0", 7600, 1000);
	kfd = sock_b(SOCK_DGRAM, 0, IP_B_ICMP, 7601);
	CU_ASSERT_FATAL(kfd >= 0);
	icmp0 = snmp_get("Icmp", "OutDestUnreachs");
	CU_ASSERT_FATAL(icmp0 >= 0);

	/* In rounds that fit the receive ring: the point is the ICMP. */
	for (i = 0, got = 0; i < 10; i++) {
		kernel_send_n(kfd, IP_A, 7600, 50);
		got += qps_recv_n(rx, 50);
	}
	T_EQ(got, 500);

	T_EQ_FATAL(connect(kfd, (struct sockaddr *)&dst, sizeof(dst)), 0);
	for (i = 0; i < 200; i++) {
		if (send(kfd, "c", 1, 0) < 0 && errno == ECONNREFUSED)
			refused++;
		/* Give an ICMP time to come back before the next send,
		 * which is the one that would read it. */
		if (i % 20 == 19)
			t_sleep_ms(2);
	}
	got = qps_recv_n(rx, 200);
	icmp1 = snmp_get("Icmp", "OutDestUnreachs");
	printf("\n    700 kernel datagrams to a qpsock port: ICMP "
	       "unreachable sent %lld, ECONNREFUSED %d, received %d of 200 "
	       "connected\n", icmp1 - icmp0, refused, got);
	T_EQ(icmp1 - icmp0, 0);
	T_EQ(refused, 0);
	T_EQ(got, 200);
	close(kfd);
	T_EQ(qps_ctx_destroy(ctx), 0);
	sh("ip -n %s addr del " IP_B_ICMP "/24 dev %s", ns_b, if_b);
}

/* A kernel UDP socket in A's namespace on @port; @reuse: SO_REUSEADDR (1),
 * SO_REUSEPORT (2). Returns the fd, or -errno of the bind. */
static int sock_a_bind(unsigned short port, int reuse)
{
	struct sockaddr_in sin = t_sin("0.0.0.0", port);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), one = 1, r;

	if (fd < 0)
		return -errno;
	if (reuse & 1)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (reuse & 2)
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* A qpsock endpoint of @ctx on 0.0.0.0:@port with @reuse as above;
 * returns the endpoint (or NULL) and the bind's result in *@ret. */
static struct qps_ep *qps_a_bind(struct qps_ctx *ctx, unsigned short port,
				 int reuse, int *ret)
{
	struct sockaddr_in sin = t_sin("0.0.0.0", port);
	struct qps_ep *ep = NULL;
	int on = 1;

	*ret = qps_ep_create(ctx, QPS_EP_DGRAM, &ep);
	if (*ret < 0)
		return NULL;
	if (reuse & 1)
		qps_setopt(ep, QPS_OPT_REUSEADDR, &on, sizeof(on));
	if (reuse & 2)
		qps_setopt(ep, QPS_OPT_REUSEPORT, &on, sizeof(on));
	*ret = qps_bind(ep, (struct sockaddr *)&sin, sizeof(sin));
	return ep;
}

/* In a child process: its own context on A's veth binds @port with
 * @reuse; the exit status is the bind's -result. The caller must have no
 * thread but its own: a child forked while another thread holds a lock
 * (the allocator's: ASan's is not released in the child) hangs on it. */
static int qps_bind_in_child(unsigned short port, int reuse)
{
	int status = -1, ret;
	struct qps_ctx *c;
	pid_t pid = fork();

	if (pid == 0) {
		if (ctx_open(if_a, IP_A, &c) < 0)
			_exit(200);
		qps_a_bind(c, port, reuse, &ret);
		/* _exit runs no atexit handler: release the context (and
		 * its stats segment) here. */
		qps_ctx_destroy(c);
		_exit(-ret);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1000;
	return -WEXITSTATUS(status);
}

/*
 * A bound port is the host's: the outcome of each pair of binds, qpsock
 * and kernel in either order and qpsock in two processes, is the one the
 * kernel gives two kernel sockets (reuse flags on both sides or not).
 */
static void test_bind_conflicts(void)
{
	static const struct { int first, second; } reuse[] = {
		{ 0, 0 }, { 1, 0 }, { 0, 1 }, { 1, 1 }, { 2, 2 }, { 1, 2 },
	};
	struct qps_ctx *ctx;
	struct sockaddr_in got;
	socklen_t gl = sizeof(got);
	unsigned short port = 7700;
	struct qps_ep *ep;
	unsigned int i;
	int ret, k, k2, want;

	/* No stats thread: qps_bind_in_child forks. */
	T_EQ_FATAL(ctx_open_stats(if_a, IP_A, false, &ctx), 0);
	for (i = 0; i < sizeof(reuse) / sizeof(reuse[0]); i++, port += 3) {
		int f = reuse[i].first, g = reuse[i].second;

		/* What the kernel says to two kernel sockets. */
		k = sock_a_bind(port, f);
		CU_ASSERT_FATAL(k >= 0);
		k2 = sock_a_bind(port, g);
		want = k2 >= 0 ? 0 : k2;
		if (k2 >= 0)
			close(k2);
		close(k);

		/* qpsock, then kernel. */
		ep = qps_a_bind(ctx, port, f, &ret);
		T_EQ(ret, 0);
		k2 = sock_a_bind(port, g);
		T_EQ(k2 >= 0 ? 0 : k2, want);
		if (k2 >= 0)
			close(k2);
		qps_ep_close(ep);

		/* kernel, then qpsock. */
		k = sock_a_bind(port + 1, f);
		CU_ASSERT_FATAL(k >= 0);
		ep = qps_a_bind(ctx, port + 1, g, &ret);
		T_EQ(ret, want);
		qps_ep_close(ep);
		close(k);

		/* qpsock in this process, then in another (which cannot
		 * open a context of its own where an interface holds one). */
		ep = qps_a_bind(ctx, port + 2, f, &ret);
		T_EQ(ret, 0);
		if (!steals_from_host())
			T_EQ(qps_bind_in_child(port + 2, g), want);
		qps_ep_close(ep);
		printf("\n    reuse %d then %d: %s", f, g,
		       want ? "EADDRINUSE" : "shared");
	}
	/* Port 0: the kernel's ephemeral choice, held there. */
	ep = qps_a_bind(ctx, 0, 0, &ret);
	T_EQ(ret, 0);
	T_EQ(qps_getsockname(ep, (struct sockaddr *)&got, &gl), 0);
	CU_ASSERT(ntohs(got.sin_port) != 0);
	T_EQ(sock_a_bind(ntohs(got.sin_port), 0), -EADDRINUSE);
	/* Closing gives it back. */
	qps_ep_close(ep);
	k = sock_a_bind(ntohs(got.sin_port), 0);
	CU_ASSERT(k >= 0);
	if (k >= 0)
		close(k);
	printf("\n");
	T_EQ(qps_ctx_destroy(ctx), 0);
}

/* qps_ep_adopt_fd: the caller's socket is the one that holds the port, for
 * as long as the caller keeps it (the preload's kernel fd, preload.md). */
static void test_adopt_fd(void)
{
	struct sockaddr_in sin = t_sin("0.0.0.0", 7800), got, kgot;
	socklen_t gl = sizeof(got), kl = sizeof(kgot);
	struct qps_ctx *ctx;
	struct qps_ep *ep;
	int k, tcp, pfd[2], k2;

	T_EQ_FATAL(ctx_open(if_a, IP_A, &ctx), 0);
	T_EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	k = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CU_ASSERT_FATAL(k >= 0 && tcp >= 0 && pipe(pfd) == 0);
	T_EQ(qps_ep_adopt_fd(ep, -1), -EBADF);
	T_EQ(qps_ep_adopt_fd(ep, pfd[0]), -ENOTSOCK);
	T_EQ(qps_ep_adopt_fd(ep, tcp), -EINVAL);
	T_EQ(qps_ep_adopt_fd(ep, k), 0);
	T_EQ(qps_bind(ep, (struct sockaddr *)&sin, sizeof(sin)), 0);
	T_EQ(qps_ep_adopt_fd(ep, k), -EINVAL);
	/* The caller's socket is bound where the endpoint is. */
	T_EQ(getsockname(k, (struct sockaddr *)&kgot, &kl), 0);
	T_EQ(ntohs(kgot.sin_port), 7800);
	T_EQ(sock_a_bind(7800, 0), -EADDRINUSE);
	/* Closing the endpoint leaves the caller's socket, and the port. */
	T_EQ(qps_ep_close(ep), 0);
	T_EQ(sock_a_bind(7800, 0), -EADDRINUSE);
	close(k);
	k2 = sock_a_bind(7800, 0);
	CU_ASSERT(k2 >= 0);
	if (k2 >= 0)
		close(k2);

	/* Port 0: the kernel's choice on the caller's socket is the
	 * endpoint's port. */
	T_EQ_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	k = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CU_ASSERT_FATAL(k >= 0);
	T_EQ(qps_ep_adopt_fd(ep, k), 0);
	sin.sin_port = 0;
	T_EQ(qps_bind(ep, (struct sockaddr *)&sin, sizeof(sin)), 0);
	kl = sizeof(kgot);
	T_EQ(getsockname(k, (struct sockaddr *)&kgot, &kl), 0);
	T_EQ(qps_getsockname(ep, (struct sockaddr *)&got, &gl), 0);
	CU_ASSERT(kgot.sin_port != 0);
	T_EQ(kgot.sin_port, got.sin_port);
	T_EQ(qps_ep_close(ep), 0);
	close(k);
	close(tcp);
	close(pfd[0]);
	close(pfd[1]);
	T_EQ(qps_ctx_destroy(ctx), 0);
}

/* --- several receive queues --------------------------------------------- */

#define MQ_IP_A "10.78.0.1"
#define MQ_IP_B "10.78.0.2"
#define MQ_QUEUES 4
#define MQ_FLOWS 64
#define MQ_ROUNDS 8

/* Receive queues that carried frames, from the provider's line at close
 * ("... frames per receive queue: N N ..."), read from @fd (stderr's
 * capture); -1 when there is no such line. */
static int mq_queues_used(int fd)
{
	char buf[4096], *p;
	ssize_t len;
	int used = 0;

	len = pread(fd, buf, sizeof(buf) - 1, 0);
	if (len <= 0)
		return -1;
	buf[len] = 0;
	fputs(buf, stderr);
	p = strstr(buf, "frames per receive queue:");
	if (!p)
		return -1;
	p += strlen("frames per receive queue:");
	for (;;) {
		char *end;
		unsigned long long v = strtoull(p, &end, 10);

		if (end == p)
			break;
		used += v != 0;
		p = end;
	}
	return used;
}

/*
 * A veth pair with 4 queues each way: the peer's kernel picks a TX queue
 * per flow by its hash (no XPS on veth), and the receive queue of our
 * end follows that choice, so 64 flows land on several receive queues.
 * Every datagram must reach the one bound endpoint; on xdp, more than one
 * queue must have carried them (an XSK per queue: docs/xdp.md "Queues"),
 * and qps_ctx_query_ex must say it reads all four.
 */
static void test_multiqueue(void)
{
	struct sockaddr_in dst = t_sin(MQ_IP_A, 6100),
			   bind_a = t_sin("0.0.0.0", 6100);
	char a[IF_NAMESIZE], b[IF_NAMESIZE];
	int fds[MQ_FLOWS], i, r, got = 0, tmo = RECV_MS, save, cap, used;
	int pid = (int)getpid();
	bool seen[MQ_ROUNDS][MQ_FLOWS];
	struct qps_ctx *ctx;
	struct qps_ep *ep;

	snprintf(a, sizeof(a), "qma%d", pid % 10000000);
	snprintf(b, sizeof(b), "qmb%d", pid % 10000000);
	CU_ASSERT_EQUAL_FATAL(
		sh("ip link add %s netns %s numtxqueues %d numrxqueues %d "
		   "type veth peer name %s netns %s numtxqueues %d "
		   "numrxqueues %d", a, ns_a, MQ_QUEUES, MQ_QUEUES, b, ns_b,
		   MQ_QUEUES, MQ_QUEUES), 0);
	CU_ASSERT_EQUAL_FATAL(
		sh("ip -n %s link set %s address 02:78:00:00:00:01 && "
		   "ip -n %s addr add " MQ_IP_A "/24 dev %s && "
		   "ip -n %s addr add " MQ_IP_B "/24 dev %s && "
		   "ip -n %s link set %s up && ip -n %s link set %s up && "
		   "ip -n %s neigh replace " MQ_IP_A " lladdr "
		   "02:78:00:00:00:01 dev %s",
		   ns_a, a, ns_a, a, ns_b, b, ns_a, a, ns_b, b, ns_b, b), 0);
	CU_ASSERT_EQUAL_FATAL(ctx_open(a, MQ_IP_A, &ctx), 0);
	if (strcmp(prov, "xdp") == 0) {
		struct qps_ctx_info_ex x;

		CU_ASSERT_EQUAL(qps_ctx_query_ex(ctx, &x, sizeof(x)),
				(int)sizeof(x));
		CU_ASSERT_EQUAL(x.rx_queue, 0);
		CU_ASSERT_EQUAL(x.rx_queues, MQ_QUEUES);
	}
	CU_ASSERT_EQUAL_FATAL(qps_ep_create(ctx, QPS_EP_DGRAM, &ep), 0);
	CU_ASSERT_EQUAL(qps_setopt(ep, QPS_OPT_RCVTIMEO, &tmo, sizeof(tmo)),
			0);
	CU_ASSERT_EQUAL_FATAL(qps_bind(ep, (struct sockaddr *)&bind_a,
				       sizeof(bind_a)), 0);
	/* Unbound: each gets its own ephemeral source port, its own hash. */
	for (i = 0; i < MQ_FLOWS; i++) {
		fds[i] = sock_b(SOCK_DGRAM, 0, NULL, 0);
		CU_ASSERT_FATAL(fds[i] >= 0);
	}
	memset(seen, 0, sizeof(seen));
	/* A round at a time: a round fits the endpoint's posted buffers. */
	for (r = 0; r < MQ_ROUNDS; r++) {
		for (i = 0; i < MQ_FLOWS; i++) {
			uint8_t m[2] = { (uint8_t)r, (uint8_t)i };

			CU_ASSERT_EQUAL(sendto(fds[i], m, sizeof(m), 0,
					       (struct sockaddr *)&dst,
					       sizeof(dst)), 2);
		}
		for (i = 0; i < MQ_FLOWS; i++) {
			uint8_t m[16];
			ssize_t n = qps_recv(ep, m, sizeof(m), 0);

			if (n < 0)
				break;
			if (n == 2 && m[0] < MQ_ROUNDS && m[1] < MQ_FLOWS &&
			    !seen[m[0]][m[1]]) {
				seen[m[0]][m[1]] = true;
				got++;
			}
		}
	}
	CU_ASSERT_EQUAL(got, MQ_ROUNDS * MQ_FLOWS);
	if (got != MQ_ROUNDS * MQ_FLOWS)
		fprintf(stderr, "\n  test_packet: %d of %d datagrams from %d "
			"flows arrived\n", got, MQ_ROUNDS * MQ_FLOWS,
			MQ_FLOWS);
	CU_ASSERT_EQUAL(qps_ep_close(ep), 0);
	/* The provider's per-queue counts come at close, on stderr. */
	fflush(stderr);
	save = dup(2);
	cap = memfd_create("stderr", 0);
	CU_ASSERT_FATAL(save >= 0 && cap >= 0);
	dup2(cap, 2);
	CU_ASSERT_EQUAL(qps_ctx_destroy(ctx), 0);
	fflush(stderr);
	dup2(save, 2);
	close(save);
	used = mq_queues_used(cap);
	if (strcmp(prov, "xdp") == 0)
		CU_ASSERT(used > 1);
	close(cap);
	for (i = 0; i < MQ_FLOWS; i++)
		close(fds[i]);
	sh("ip -n %s link del %s", ns_a, a);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "open errors", test_open_errors },
		{ "modes: logged and reported by qps_ctx_query_ex",
		  test_query_modes },
		{ "qpsock -> kernel UDP", test_qpsock_to_kernel },
		{ "kernel UDP -> qpsock", test_kernel_to_qpsock },
		{ "timestamps: kernel receive stamps, transmit reports",
		  test_timestamps },
		{ "multicast qpsock -> kernel", test_mcast_qpsock_to_kernel },
		{ "multicast kernel -> provider", test_mcast_kernel_to_qpsock },
#ifdef QPS_IFINDEX
		{ "multicast kernel -> qps_join", test_mcast_join },
#endif
		{ "steering rules", test_steering },
		{ "doorbell per chain, MTU", test_doorbell_and_mtu },
		{ "neighbour change", test_neigh_change },
		{ "non-blocking calls never wait for ARP", test_neigh_nowait },
		{ "interface down and up", test_link_down_up },
		{ "bad frames", test_bad_frames },
		{ "no ICMP port-unreachable for a bound port", test_no_icmp },
		{ "MTU lowered under a sender", test_mtu_lowered },
		{ "fragments both ways, 1473 to 65507 bytes", test_fragments },
		{ "multicast fragments, kernel -> qps_join",
		  test_mcast_fragments },
		{ "fragments on the wire: order, duplicates, overlaps, "
		  "holes, flood", test_fragments_wire },
		{ "TTL, multicast TTL and TOS on the wire", test_ttl_tos },
		{ "multicast loop on and off", test_mc_loop },
		{ "bind conflicts with kernel sockets and processes",
		  test_bind_conflicts },
		{ "an adopted kernel socket holds the port", test_adopt_fd },
		{ "64 flows over a 4-queue veth", test_multiqueue },
#ifdef QPS_ECHO_BIN
		{ "sockperf ping-pong vs qps_echo", test_sockperf_pingpong },
		{ "sockperf under-load vs qps_echo", test_sockperf_underload },
#ifdef QPS_IFINDEX
		{ "sockperf multicast vs qps_echo", test_sockperf_mcast },
#endif
#endif
		CU_TEST_INFO_NULL,
	};
	int ret;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (geteuid() != 0) {
		printf("test_packet: skipped: needs root (network namespaces, "
		       "veth, AF_PACKET)\n");
		return T_EXIT_SKIP;
	}
	if (getenv("QPS_TEST_PROVIDER") && *getenv("QPS_TEST_PROVIDER"))
		prov = getenv("QPS_TEST_PROVIDER");
	if (qps_provider_find(prov, &P) < 0) {
		printf("test_packet: skipped: %s provider not built\n", prov);
		return T_EXIT_SKIP;
	}
	if (ns_setup() < 0) {
		ns_delete();
		printf("test_packet: skipped: cannot create network "
		       "namespaces and a veth pair here\n");
		return T_EXIT_SKIP;
	}
#ifndef QPS_ECHO_BIN
	printf("test_packet: no qps_echo (QPS_BUILD_EXAMPLES=OFF): the "
	       "sockperf case is left out\n");
#endif
	ret = t_run(prov, tests);
	ns_delete();
	return ret;
}
