// SPDX-License-Identifier: MIT
/*
 * peer_udp_mmsg - the kernel UDP peer of scripts/compare-peers: message rate
 * over loopback with sendmmsg/recvmmsg, measured like qps_send_bw so the
 * two can stand side by side.
 *
 *   peer_udp_mmsg recv PORT                   count until 1 s of silence
 *   peer_udp_mmsg send HOST PORT SIZE SECS [BATCH]
 *
 * The receiver prints one JSON line: datagrams received and the delivered
 * rate (received - 1 between the first and the last arrival, as the
 * qps_send_bw server). The sender prints what it sent and its own rate;
 * datagrams the kernel dropped are the difference, and are reported.
 * Not part of qpsock: plain sockets only.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MMSG_MAX 64
#define MMSG_BUF 2048

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int num(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || !*s || *end || v < lo || v > hi) {
		fprintf(stderr, "peer_udp_mmsg: bad number '%s' (%ld..%ld)\n",
			s, lo, hi);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int do_recv(long port)
{
	static char bufs[MMSG_MAX][MMSG_BUF];
	struct mmsghdr msgs[MMSG_MAX];
	struct iovec iov[MMSG_MAX];
	struct timeval tv = { .tv_sec = 1 };
	struct sockaddr_in sin;
	uint64_t got = 0, first = 0, last = 0;
	int fd, i, n, big = 8 << 20;

	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("socket");
		return 1;
	}
	/* As deep as the kernel allows (FORCE needs CAP_NET_ADMIN). */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((uint16_t)port);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		perror("bind");
		return 1;
	}
	memset(msgs, 0, sizeof(msgs));
	for (i = 0; i < MMSG_MAX; i++) {
		iov[i].iov_base = bufs[i];
		iov[i].iov_len = MMSG_BUF;
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	printf("peer_udp_mmsg: receiving on 127.0.0.1:%ld\n", port);
	fflush(stdout);
	for (;;) {
		/* Wait without a timeout for the first datagram, then stop
		 * after 1 s of silence. */
		if (got)
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		n = recvmmsg(fd, msgs, MMSG_MAX, got ? MSG_WAITFORONE : 0, NULL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0) {
			perror("recvmmsg");
			return 1;
		}
		last = now_ns();
		if (!got)
			first = last;
		got += (uint64_t)n;
	}
	printf("{\"peer\":\"udp_mmsg\",\"role\":\"recv\",\"received\":%llu,"
	       "\"delivered_mpps\":%.6f}\n", (unsigned long long)got,
	       got > 1 && last > first ?
	       (double)(got - 1) / ((double)(last - first) / 1e9) / 1e6 : 0.0);
	close(fd);
	return 0;
}

static int do_send(const char *host, long port, long size, long secs,
		   long batch)
{
	static char buf[MMSG_BUF];
	struct mmsghdr msgs[MMSG_MAX];
	struct iovec iov;
	struct sockaddr_in sin;
	uint64_t sent = 0, t0, stop, t;
	int fd, i, n;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
		fprintf(stderr, "peer_udp_mmsg: bad IPv4 address '%s'\n", host);
		return 1;
	}
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		perror("socket/connect");
		return 1;
	}
	memset(buf, 0xa5, sizeof(buf));
	iov.iov_base = buf;
	iov.iov_len = (size_t)size;
	memset(msgs, 0, sizeof(msgs));
	for (i = 0; i < batch; i++) {
		msgs[i].msg_hdr.msg_iov = &iov;
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	t0 = now_ns();
	stop = t0 + (uint64_t)secs * 1000000000ull;
	do {
		n = sendmmsg(fd, msgs, (unsigned int)batch, 0);
		if (n < 0 && (errno == EINTR || errno == ENOBUFS ||
			      errno == EAGAIN))
			n = 0;
		if (n < 0) {
			perror("sendmmsg");
			return 1;
		}
		sent += (uint64_t)n;
		t = now_ns();
	} while (t < stop);
	printf("{\"peer\":\"udp_mmsg\",\"role\":\"send\",\"sent\":%llu,"
	       "\"msg_rate_mpps\":%.6f}\n", (unsigned long long)sent,
	       (double)sent / ((double)(t - t0) / 1e9) / 1e6);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	long port, size, secs, batch = 32;

	if (argc == 3 && !strcmp(argv[1], "recv")) {
		if (num(argv[2], 1, 65535, &port))
			return 2;
		return do_recv(port);
	}
	if ((argc == 6 || argc == 7) && !strcmp(argv[1], "send")) {
		if (num(argv[3], 1, 65535, &port) ||
		    num(argv[4], 1, MMSG_BUF, &size) ||
		    num(argv[5], 1, 3600, &secs) ||
		    (argc == 7 && num(argv[6], 1, MMSG_MAX, &batch)))
			return 2;
		return do_send(argv[2], port, size, secs, batch);
	}
	fprintf(stderr, "usage: peer_udp_mmsg recv PORT\n"
			"       peer_udp_mmsg send HOST PORT SIZE SECS [BATCH]\n");
	return 2;
}
