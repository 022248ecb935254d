// SPDX-License-Identifier: MIT
/*
 * dump_peer - the process test_dump_e2e.sh captures with qps_dump. Two
 * contexts on one wire (emu, or the verbs double: QPS_PROVIDER, t_util.c):
 * A (198.19.0.1) sends, B (198.19.0.2) receives.
 *
 *   dump_peer exchange DIR
 *	creates DIR/ready, waits for DIR/go, then sends a known exchange:
 *	unicast A -> B, multicast to a group B joined, one datagram large
 *	enough to be fragmented; receives all of it on B. Writes DIR/sent
 *	(each payload in hex, one a line, in the order sent), DIR/t0 and
 *	DIR/t1 (CLOCK_REALTIME ns around it), then exits.
 *   dump_peer ud DIR
 *	the same on two UD contexts: N_UD unicast datagrams A -> B, their
 *	payloads into DIR/sent as above.
 *   dump_peer flood DIR MS
 *	creates DIR/ready and sends A -> B for MS ms in windows of 32,
 *	receiving each window whole before the next, so the receiver never
 *	overflows; writes "sent received tx_errors" to DIR/result. Exit 1
 *	if anything sent was not received.
 *
 * Exit status 0, or 1 on any failure (with a message).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <qpsock/qpsock.h>

#include "t_util.h"

#define IP_A "198.19.0.1"
#define IP_B "198.19.0.2"
#define PORT_U 40001
#define PORT_M 40002
#define MC_GROUP "239.1.2.3"
#define N_UCAST 3
#define N_MCAST 2
#define N_UD 2
#define BIG_LEN 3000
#define WINDOW 32
#define FLOOD_LEN 200

#define CHECK(expr) do { \
	long long v_ = (long long)(expr); \
	if (v_ < 0) { \
		fprintf(stderr, "dump_peer: %s:%d: %s = %lld\n", __FILE__, \
			__LINE__, #expr, v_); \
		exit(1); \
	} \
} while (0)

static char dir[512];

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static FILE *open_in_dir(const char *name, const char *mode)
{
	char path[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, mode);
	if (!f) {
		perror(path);
		exit(1);
	}
	return f;
}

static void touch(const char *name)
{
	fclose(open_in_dir(name, "w"));
}

static void wait_file(const char *name, int ms)
{
	char path[600];
	int i;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	for (i = 0; i < ms; i++) {
		if (access(path, F_OK) == 0)
			return;
		usleep(1000);
	}
	fprintf(stderr, "dump_peer: %s never came\n", path);
	exit(1);
}

static struct qps_ep *ep_bound(struct qps_ctx *ctx, const char *ip,
			       unsigned short port)
{
	struct sockaddr_in s = t_sin(ip, port);
	struct qps_ep *ep = NULL;
	int ms = 5000;

	CHECK(qps_ep_create(ctx, QPS_EP_DGRAM, &ep));
	CHECK(qps_bind(ep, (struct sockaddr *)&s, sizeof(s)));
	CHECK(qps_setopt(ep, QPS_OPT_RCVTIMEO, &ms, sizeof(ms)));
	return ep;
}

static void send_rec(FILE *log, struct qps_ep *ep, const char *ip,
		     unsigned short port, const uint8_t *buf, size_t len)
{
	struct sockaddr_in to = t_sin(ip, port);
	size_t i;

	CHECK(qps_sendto(ep, buf, len, 0, (struct sockaddr *)&to,
			 sizeof(to)));
	for (i = 0; i < len; i++)
		fprintf(log, "%02x", buf[i]);
	fputc('\n', log);
}

static void recv_check(struct qps_ep *ep, const uint8_t *want, size_t len)
{
	static uint8_t got[BIG_LEN + 16];
	ssize_t n = qps_recv(ep, got, sizeof(got), 0);

	CHECK(n);
	if ((size_t)n != len || memcmp(got, want, len)) {
		fprintf(stderr, "dump_peer: received %zd bytes, not the %zu "
			"sent\n", n, len);
		exit(1);
	}
}

static void contexts(struct qps_ctx **a, struct qps_ctx **b)
{
	char wire[64];

	snprintf(wire, sizeof(wire), "t-dump-%d", (int)getpid());
	CHECK(t_ctx_emu(wire, IP_A, a));
	CHECK(t_ctx_emu(wire, IP_B, b));
}

static int exchange(void)
{
	static uint8_t big[BIG_LEN];
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eu, *em;
	struct qps_mreq m;
	uint8_t buf[64];
	FILE *log, *f;
	int i, len;

	contexts(&a, &b);
	ea = ep_bound(a, IP_A, 40000);
	eu = ep_bound(b, IP_B, PORT_U);
	em = ep_bound(b, MC_GROUP, PORT_M);
	memset(&m, 0, sizeof(m));
	inet_pton(AF_INET, MC_GROUP, &m.group);
	CHECK(qps_join(em, &m, sizeof(m)));
	for (i = 0; i < BIG_LEN; i++)
		big[i] = (uint8_t)(i * 7 + 3);
	touch("ready");
	wait_file("go", 20000);
	f = open_in_dir("t0", "w");
	fprintf(f, "%llu\n", (unsigned long long)realtime_ns());
	fclose(f);
	log = open_in_dir("sent", "w");
	for (i = 0; i < N_UCAST; i++) {
		len = snprintf((char *)buf, sizeof(buf), "unicast %d", i);
		send_rec(log, ea, IP_B, PORT_U, buf, (size_t)len);
		recv_check(eu, buf, (size_t)len);
	}
	for (i = 0; i < N_MCAST; i++) {
		len = snprintf((char *)buf, sizeof(buf), "multicast %d", i);
		send_rec(log, ea, MC_GROUP, PORT_M, buf, (size_t)len);
		recv_check(em, buf, (size_t)len);
	}
	send_rec(log, ea, IP_B, PORT_U, big, sizeof(big));
	recv_check(eu, big, sizeof(big));
	fclose(log);
	f = open_in_dir("t1", "w");
	fprintf(f, "%llu\n", (unsigned long long)realtime_ns());
	fclose(f);
	/* Time for the dumper to read the last records; it sees the
	 * contexts go when they are destroyed. */
	usleep(50000);
	qps_ep_close(ea);
	qps_ep_close(eu);
	qps_ep_close(em);
	qps_ctx_destroy(a);
	qps_ctx_destroy(b);
	return 0;
}

static struct qps_ctx *ud_ctx(const char *wire, const char *ip)
{
	struct qps_ctx_attr attr = t_emu_attr(wire, ip);
	struct qps_ctx *c = NULL;

	attr.comp_mask |= QPS_CTX_ATTR_TRANSPORT;
	attr.transport = QPS_TRANSPORT_UD;
	CHECK(qps_ctx_create(&attr, &c));
	return c;
}

static int ud(void)
{
	struct qps_ctx *a, *b;
	struct qps_ud_addr la, lb;
	struct qps_ep *ea, *eu;
	uint8_t buf[64];
	char wire[64];
	FILE *log;
	int i, len;

	snprintf(wire, sizeof(wire), "t-dump-%d", (int)getpid());
	a = ud_ctx(wire, IP_A);
	b = ud_ctx(wire, IP_B);
	CHECK(qps_ud_local(a, &la));
	CHECK(qps_ud_local(b, &lb));
	CHECK(qps_ud_peer_set(a, &lb));
	CHECK(qps_ud_peer_set(b, &la));
	ea = ep_bound(a, IP_A, 40000);
	eu = ep_bound(b, IP_B, PORT_U);
	touch("ready");
	wait_file("go", 20000);
	log = open_in_dir("sent", "w");
	for (i = 0; i < N_UD; i++) {
		len = snprintf((char *)buf, sizeof(buf), "ud datagram %d", i);
		send_rec(log, ea, IP_B, PORT_U, buf, (size_t)len);
		recv_check(eu, buf, (size_t)len);
	}
	fclose(log);
	usleep(50000);
	qps_ep_close(ea);
	qps_ep_close(eu);
	qps_ctx_destroy(a);
	qps_ctx_destroy(b);
	return 0;
}

static int flood(int ms)
{
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eu;
	struct qps_stats st;
	uint8_t buf[FLOOD_LEN];
	uint64_t sent = 0, got = 0, end;
	FILE *f;
	int i;

	contexts(&a, &b);
	ea = ep_bound(a, IP_A, 40000);
	eu = ep_bound(b, IP_B, PORT_U);
	memset(buf, 0x5a, sizeof(buf));
	touch("ready");
	end = realtime_ns() + (uint64_t)ms * 1000000u;
	while (realtime_ns() < end) {
		struct sockaddr_in to = t_sin(IP_B, PORT_U);

		for (i = 0; i < WINDOW; i++) {
			memcpy(buf, &sent, sizeof(sent));
			CHECK(qps_sendto(ea, buf, sizeof(buf), 0,
					 (struct sockaddr *)&to, sizeof(to)));
			sent++;
		}
		for (i = 0; i < WINDOW; i++) {
			uint8_t r[FLOOD_LEN];
			uint64_t v;

			if (qps_recv(eu, r, sizeof(r), 0) != FLOOD_LEN)
				break;
			memcpy(&v, r, sizeof(v));
			if (v != got)
				break;
			got++;
		}
		if (got != sent)
			break;
	}
	CHECK(qps_ctx_stats(a, &st, sizeof(st)));
	f = open_in_dir("result", "w");
	fprintf(f, "%llu %llu %llu\n", (unsigned long long)sent,
		(unsigned long long)got, (unsigned long long)st.tx_errors);
	fclose(f);
	qps_ep_close(ea);
	qps_ep_close(eu);
	qps_ctx_destroy(a);
	qps_ctx_destroy(b);
	return got == sent && !st.tx_errors ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: dump_peer exchange DIR | "
			"ud DIR | flood DIR MS\n");
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s", argv[2]);
	if (!strcmp(argv[1], "exchange"))
		return exchange();
	if (!strcmp(argv[1], "ud"))
		return ud();
	if (!strcmp(argv[1], "flood") && argc > 3)
		return flood(atoi(argv[3]));
	fprintf(stderr, "dump_peer: unknown mode %s\n", argv[1]);
	return 1;
}
