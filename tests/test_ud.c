// SPDX-License-Identifier: MIT
/*
 * Suite "ud": the UD transport end to end (QPS_TRANSPORT_UD), and its
 * frame code (src/ud_frame.c) on its own.
 *
 * Contexts on one emu wire (or the verbs provider over the libibverbs
 * test double, as test_ud_verbs) exchange datagrams; payloads carry a tag
 * and a sequence number and every receiver checks each one exactly once.
 * Malformed UD messages come from a bare UD QP the test drives through
 * qps_emu_ops itself, so they reach the context's QP as a peer would send
 * them. Internal state (buffer references) is read through src/.
 */
#include "t_traffic.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/emu.h"
#include "qps_int.h"
#include "sq.h"
#include "ud.h"

#define IP_A "198.18.0.1"
#define IP_B "198.18.0.2"
#define IP_C "198.18.0.3"
#define IP_D "198.18.0.4"
#define GRP1 "239.2.2.1"
#define GRP2 "239.2.2.2"

#define PORT_RX 7000
#define PORT_TX 7100

#define EQ T_EQ
#define EQ_FATAL T_EQ_FATAL

/* ------------------------------------------------------------------ */
/* ud_frame.c alone.                                                    */

#define F_PAYLOAD 7
#define F_LEN (QPS_UD_GRH_LEN + QPS_UD_HDR_LEN + F_PAYLOAD)

/* A valid message from 10.0.0.1:1234 to 10.0.0.2:5678, QPN 0x12345,
 * behind a RoCE v2 GRH (@v6 false) or an IPv6-format one. */
static void frame_make(uint8_t *f, bool v6)
{
	struct qps_ud_hdr_info h = {
		.sport = htons(1234), .dport = htons(5678),
		.src_qpn = 0x12345,
	};
	static const uint8_t sa[4] = { 10, 0, 0, 1 }, da[4] = { 10, 0, 0, 2 };
	uint8_t *ip = f + 20;

	memset(f, 0, F_LEN);
	if (v6) {
		f[0] = 0x60;
		f[6] = 0x1b;
		f[7] = 9;
		f[18] = f[19] = 0xff;
		memcpy(f + 20, sa, 4);
		f[34] = f[35] = 0xff;
		memcpy(f + 36, da, 4);
	} else {
		ip[0] = 0x45;
		ip[8] = 9;
		ip[9] = 17;
		memcpy(ip + 12, sa, 4);
		memcpy(ip + 16, da, 4);
	}
	EQ(qps_ud_hdr_build(f + QPS_UD_GRH_LEN, &h, F_PAYLOAD),
	   QPS_UD_HDR_LEN + F_PAYLOAD);
	memcpy(f + QPS_UD_GRH_LEN + QPS_UD_HDR_LEN, "payload", F_PAYLOAD);
}

/* Parse @len bytes of @f from a heap copy of exactly that size, so a
 * read past the end is caught by ASan. */
static int parse_exact(const uint8_t *f, uint32_t len,
		       struct qps_frame_info *fi, uint32_t *qpn)
{
	uint8_t *b = malloc(len ? len : 1);
	int ret;

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	memcpy(b, f, len);
	ret = qps_ud_parse(b, len, fi, qpn);
	free(b);
	return ret;
}

static void test_parse_valid(void)
{
	struct qps_frame_info fi;
	uint8_t f[F_LEN];
	uint32_t qpn;
	int v6;

	for (v6 = 0; v6 < 2; v6++) {
		frame_make(f, v6);
		memset(&fi, 0, sizeof(fi));
		qpn = 0;
		EQ(qps_ud_parse(f, F_LEN, &fi, &qpn), 0);
		EQ(qpn, 0x12345);
		EQ(fi.hdr.saddr, t_ip4("10.0.0.1"));
		EQ(fi.hdr.daddr, t_ip4("10.0.0.2"));
		EQ(ntohs(fi.hdr.sport), 1234);
		EQ(ntohs(fi.hdr.dport), 5678);
		EQ(fi.hdr.ttl, 9);
		EQ(fi.payload_len, F_PAYLOAD);
		CU_ASSERT_PTR_EQUAL(fi.payload,
				    f + QPS_UD_GRH_LEN + QPS_UD_HDR_LEN);
		CU_ASSERT(!memcmp(fi.payload, "payload", F_PAYLOAD));
		/* Both outputs are optional. */
		EQ(qps_ud_parse(f, F_LEN, NULL, NULL), 0);
	}

	/* An empty payload is a datagram too. */
	{
		struct qps_ud_hdr_info h = { .src_qpn = 1 };

		frame_make(f, false);
		EQ(qps_ud_hdr_build(f + QPS_UD_GRH_LEN, &h, 0),
		   QPS_UD_HDR_LEN);
		EQ(parse_exact(f, QPS_UD_GRH_LEN + QPS_UD_HDR_LEN, &fi, &qpn),
		   0);
		EQ(fi.payload_len, 0);
	}
}

static void test_parse_build_limits(void)
{
	struct qps_ud_hdr_info h = { .src_qpn = 0xabcdef12u };
	struct qps_frame_info fi;
	uint8_t f[F_LEN];
	uint32_t qpn;

	EQ(qps_ud_hdr_build(f, &h, 65536), -EMSGSIZE);
	EQ(qps_ud_hdr_build(f, &h, 65535), QPS_UD_HDR_LEN + 65535);
	/* The QPN is 24 bits: the high byte is not sent. */
	frame_make(f, false);
	EQ(qps_ud_hdr_build(f + QPS_UD_GRH_LEN, &h, F_PAYLOAD),
	   QPS_UD_HDR_LEN + F_PAYLOAD);
	EQ(qps_ud_parse(f, F_LEN, &fi, &qpn), 0);
	EQ(qpn, 0xcdef12);
}

/* Every prefix of a valid message is rejected, and by the right rule:
 * inside the GRH -EPROTO, inside the header or payload -EBADMSG. */
static void test_parse_truncated(void)
{
	uint8_t f[F_LEN];
	uint32_t len;
	int v6;

	for (v6 = 0; v6 < 2; v6++) {
		frame_make(f, v6);
		for (len = 0; len < F_LEN; len++)
			EQ(parse_exact(f, len, NULL, NULL),
			   len < QPS_UD_GRH_LEN ? -EPROTO : -EBADMSG);
		EQ(parse_exact(f, F_LEN, NULL, NULL), 0);
	}
}

struct bad_case {
	const char *what;
	bool v6;
	uint32_t off;	/* byte to overwrite */
	uint8_t val;
	int want;
};

static void test_parse_malformed(void)
{
	static const struct bad_case cases[] = {
		/* RoCE v2 GRH */
		{ "IPv4 version 5", false, 20, 0x55, -EPROTO },
		{ "IPv4 IHL 6", false, 20, 0x46, -EPROTO },
		{ "IPv4 protocol TCP", false, 29, 6, -EPROTO },
		{ "nonzero pad, not v6", false, 3, 1, -EPROTO },
		{ "source 224.x", false, 32, 224, -EPROTO },
		{ "source 239.x", false, 32, 239, -EPROTO },
		/* IPv6-format GRH */
		{ "v6: version 4", true, 0, 0x40, -EPROTO },
		{ "v6: SGID not mapped", true, 18, 0xfe, -EPROTO },
		{ "v6: SGID prefix", true, 8, 0xfe, -EPROTO },
		{ "v6: DGID not mapped", true, 34, 0, -EPROTO },
		{ "v6: source multicast", true, 20, 230, -EPROTO },
		/* UD header */
		{ "bad magic", false, 40, 0x52, -EBADMSG },
		{ "zero magic", false, 40, 0, -EBADMSG },
		{ "flags 1", false, 41, 1, -EBADMSG },
		{ "flags 0x80", true, 41, 0x80, -EBADMSG },
		{ "length + 1", false, 43, F_PAYLOAD + 1, -EBADMSG },
		{ "length - 1", false, 43, F_PAYLOAD - 1, -EBADMSG },
		{ "length high byte", false, 42, 1, -EBADMSG },
		{ "QPN high byte", false, 48, 1, -EBADMSG },
	};
	uint8_t f[F_LEN + 1];
	unsigned int i;
	int ret;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct bad_case *c = &cases[i];

		frame_make(f, c->v6);
		f[c->off] = c->val;
		ret = parse_exact(f, F_LEN, NULL, NULL);
		if (ret != c->want)
			fprintf(stderr, "\n    case \"%s\": %d\n", c->what,
				ret);
		EQ(ret, c->want);
	}

	/* Zero and broadcast sources: nobody to answer. */
	frame_make(f, false);
	memset(f + 32, 0, 4);
	EQ(parse_exact(f, F_LEN, NULL, NULL), -EPROTO);
	memset(f + 32, 0xff, 4);
	EQ(parse_exact(f, F_LEN, NULL, NULL), -EPROTO);
	/* A trailing byte the header does not account for. */
	frame_make(f, false);
	f[F_LEN] = 0;
	EQ(parse_exact(f, F_LEN + 1, NULL, NULL), -EBADMSG);
	/* A multicast destination is fine (a group datagram). */
	frame_make(f, false);
	f[36] = 239;
	EQ(parse_exact(f, F_LEN, NULL, NULL), 0);
}

/* ------------------------------------------------------------------ */
/* Contexts, endpoints, traffic.                                        */

/* The wires the suite used: removed at exit even when a failed test left
 * a port open (a passing test leaves none). */
#define WIRES_MAX 24
static char g_wires[WIRES_MAX][64];
static int g_nwires;

static void ud_wire(char *wire, size_t len, const char *tag)
{
	t_wire_name(wire, len, tag);
	if (g_nwires < WIRES_MAX)
		snprintf(g_wires[g_nwires++], sizeof(g_wires[0]), "%s", wire);
}

static void wires_unlink(void)
{
	char name[sizeof(QPS_EMU_SHM_PREFIX) + sizeof(g_wires[0])];
	int i;

	for (i = 0; i < g_nwires; i++) {
		memcpy(name, QPS_EMU_SHM_PREFIX, sizeof(QPS_EMU_SHM_PREFIX));
		strcat(name, g_wires[i]);
		shm_unlink(name);
	}
}

/* A UD context; @rx_depth and @num_txq 0 leave the defaults. */
static struct qps_ctx *ud_ctx_opts(const char *wire, const char *ip,
				   uint32_t rx_depth, uint32_t num_txq)
{
	struct qps_ctx_attr attr = t_emu_attr(wire, ip);
	struct qps_ctx *ctx = NULL;

	attr.comp_mask |= QPS_CTX_ATTR_TRANSPORT;
	attr.transport = QPS_TRANSPORT_UD;
	if (rx_depth) {
		attr.comp_mask |= QPS_CTX_ATTR_RX_DEPTH;
		attr.rx_depth = rx_depth;
	}
	if (num_txq) {
		attr.comp_mask |= QPS_CTX_ATTR_NUM_TXQ;
		attr.num_txq = num_txq;
	}
	CU_ASSERT_FATAL(t_suite_ctxs.n < T_CTX_MAX);
	EQ_FATAL(qps_ctx_create(&attr, &ctx), 0);
	t_ctxs_add(&t_suite_ctxs, ctx);
	return ctx;
}

static struct qps_ctx *ud_ctx(const char *wire, const char *ip)
{
	return ud_ctx_opts(wire, ip, 0, 0);
}

static void peer_set(struct qps_ctx *ctx, struct qps_ctx *peer)
{
	struct qps_ud_addr a;

	EQ_FATAL(qps_ud_local(peer, &a), 0);
	EQ_FATAL(qps_ud_peer_set(ctx, &a), 0);
}

/* A wire for @tag with UD contexts on IP_A (@a) and IP_B (@b). */
static void ud_pair(const char *tag, struct qps_ctx **a, struct qps_ctx **b)
{
	char wire[64];

	ud_wire(wire, sizeof(wire), tag);
	*a = ud_ctx(wire, IP_A);
	*b = ud_ctx(wire, IP_B);
}

/* ud_pair, A's sender on IP_A:PORT_TX (@ea), B's receiver on IP_B:PORT_RX
 * (@eb), and A knowing B's QPN. */
static void ud_link(const char *tag, struct qps_ctx **a, struct qps_ctx **b,
		    struct qps_ep **ea, struct qps_ep **eb)
{
	ud_pair(tag, a, b);
	*ea = t_mkep(*a, IP_A, PORT_TX, 0);
	*eb = t_mkep(*b, IP_B, PORT_RX, 0);
	peer_set(*a, *b);
}

/* ------------------------------------------------------------------ */
/* Unicast.                                                             */

/* A knows B's QPN from qps_ud_peer_set; B learns A's from A's first
 * datagram and answers without being told. */
static void test_unicast_learn(void)
{
	char buf[64];
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb;
	struct sockaddr_in src, dst;
	socklen_t sl;
	struct qps_stats sa, sb;
	struct qps_ud_addr la, lb;
	ssize_t r;
	int i;

	t_suite_begin();
	ud_pair("ud-uc", &a, &b);
	ea = t_mkep(a, IP_A, PORT_TX, 0);
	eb = t_mkep(b, IP_B, PORT_RX, 0);
	EQ(qps_ud_local(a, &la), 0);
	EQ(qps_ud_local(b, &lb), 0);
	EQ(la.addr.s_addr, t_ip4(IP_A));
	EQ(la.qkey, QPS_UD_QKEY);
	CU_ASSERT(la.qpn != lb.qpn);

	/* B does not know A yet: no QPN, nothing sent. */
	dst = t_sin(IP_A, PORT_TX);
	EQ(qps_sendto(eb, "x", 1, 0, (struct sockaddr *)&dst, sizeof(dst)),
	   -EHOSTUNREACH);
	EQ(t_ctx_stats(b).ud_tx_no_peer, 1);

	peer_set(a, b);
	dst = t_sin(IP_B, PORT_RX);
	for (i = 0; i < 10; i++) {
		snprintf(buf, sizeof(buf), "hello %d", i);
		EQ(qps_sendto(ea, buf, strlen(buf), 0,
			      (struct sockaddr *)&dst, sizeof(dst)),
		   (ssize_t)strlen(buf));
	}
	T_WAIT_STAT(b, rx_packets, 10);
	for (i = 0; i < 10; i++) {
		char want[64];

		snprintf(want, sizeof(want), "hello %d", i);
		sl = sizeof(src);
		memset(&src, 0, sizeof(src));
		r = qps_recvfrom(eb, buf, sizeof(buf), 0,
				 (struct sockaddr *)&src, &sl);
		EQ(r, (ssize_t)strlen(want));
		CU_ASSERT(r > 0 && !memcmp(buf, want, (size_t)r));
		EQ(src.sin_family, AF_INET);
		EQ(src.sin_addr.s_addr, t_ip4(IP_A));
		EQ(ntohs(src.sin_port), PORT_TX);
	}
	sb = t_ctx_stats(b);
	EQ(sb.ud_peers_learned, 1);
	EQ(sb.rx_ud_bad_grh, 0);
	EQ(sb.rx_ud_bad_hdr, 0);

	/* B answers from what it learned. */
	dst = t_sin(IP_A, PORT_TX);
	EQ(qps_sendto(eb, "pong", 4, 0, (struct sockaddr *)&dst, sizeof(dst)),
	   4);
	T_WAIT_STAT(a, rx_packets, 1);
	sl = sizeof(src);
	EQ(qps_recvfrom(ea, buf, sizeof(buf), 0, (struct sockaddr *)&src,
			&sl), 4);
	CU_ASSERT(!memcmp(buf, "pong", 4));
	EQ(src.sin_addr.s_addr, t_ip4(IP_B));
	EQ(ntohs(src.sin_port), PORT_RX);

	T_WAIT_STAT(a, tx_packets, 10);
	T_WAIT_STAT(b, tx_packets, 1);
	sa = t_ctx_stats(a);
	sb = t_ctx_stats(b);
	/* A's entry was set, and the datagram agreed with it. */
	EQ(sa.ud_peers_learned, 0);
	EQ(sa.tx_packets, 10);
	EQ(sb.tx_packets, 1);
	EQ(sa.ud_ah_created, 1);
	EQ(sb.ud_ah_created, 1);
	EQ(sa.ud_ah_live, 1);
	t_partition_holds(&sb);
	t_all_buffers_home(a);
	t_all_buffers_home(b);
	t_suite_end();
}

/* Requests leave A on several send QPs; each names A's receiving QP, so
 * B learns one QPN and every reply reaches an endpoint of A. */
#define MQ_PORTS 8

static void test_send_qps(void)
{
	char wire[64];
	struct qps_ctx *a, *b;
	struct qps_ep *ea[MQ_PORTS], *eb;
	struct qps_ud_addr la;
	struct sockaddr_in d, src;
	socklen_t sl;
	struct t_pkt p;
	uint32_t i, used = 0;

	t_suite_begin();
	ud_wire(wire, sizeof(wire), "ud-mq");
	a = ud_ctx_opts(wire, IP_A, 0, 4);
	b = ud_ctx(wire, IP_B);
	EQ_FATAL(a->nsq, 4);
	eb = t_mkep(b, IP_B, PORT_RX, 0);
	peer_set(a, b);
	EQ(qps_ud_local(a, &la), 0);
	d = t_sin(IP_B, PORT_RX);
	for (i = 0; i < MQ_PORTS; i++) {
		ea[i] = t_mkep(a, IP_A, (unsigned short)(PORT_TX + i), 0);
		p.tag = 2;
		p.seq = i;
		EQ(qps_sendto(ea[i], &p, sizeof(p), 0, (struct sockaddr *)&d,
			      sizeof(d)), sizeof(p));
	}
	T_WAIT_STAT(a, tx_packets, MQ_PORTS);
	for (i = 0; i < a->nsq; i++) {
		qps_alock_lock(&a->sq[i].lock);
		used += a->sq[i].st->packets != 0;
		qps_alock_unlock(&a->sq[i].lock);
	}
	/* Eight flows hashed over four QPs land on more than one. */
	T_GE(used, 2);
	T_WAIT_STAT(b, rx_packets, MQ_PORTS);
	EQ(t_ctx_stats(b).ud_peers_learned, 1);

	/* B answers each request where it came from. */
	for (i = 0; i < MQ_PORTS; i++) {
		sl = sizeof(src);
		EQ(qps_recvfrom(eb, &p, sizeof(p), 0, (struct sockaddr *)&src,
				&sl), sizeof(p));
		EQ(src.sin_addr.s_addr, la.addr.s_addr);
		EQ(qps_sendto(eb, &p, sizeof(p), 0, (struct sockaddr *)&src,
			      sizeof(src)), sizeof(p));
	}
	T_WAIT_STAT(a, rx_packets, MQ_PORTS);
	for (i = 0; i < MQ_PORTS; i++) {
		memset(&p, 0xff, sizeof(p));
		EQ(qps_recv(ea[i], &p, sizeof(p), 0), sizeof(p));
		EQ(p.seq, i);
	}
	EQ(t_ctx_stats(b).ud_peers_learned, 1);
	EQ(t_ctx_stats(b).ud_ah_created, 1);
	t_all_buffers_home(a);
	t_all_buffers_home(b);
	t_suite_end();
}

/* 1000 datagrams in bursts (MORE, then a flush): none lost, every
 * counter agrees with what was sent. */
#define BURST_N 1000u
#define BURST_CHUNK 100u

static void test_burst(void)
{
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb;
	struct qps_stats sa, sb;
	struct sockaddr_in d;
	static uint8_t seen[BURST_N];
	struct t_pkt p = { .tag = 5 };
	uint32_t i, got = 0;

	t_suite_begin();
	ud_link("ud-burst", &a, &b, &ea, &eb);
	d = t_sin(IP_B, PORT_RX);
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < BURST_N; i++) {
		ssize_t r;

		p.seq = i;
		while ((r = qps_sendto(ea, &p, sizeof(p), QPS_MSG_MORE,
				       (struct sockaddr *)&d,
				       sizeof(d))) == -EAGAIN)
			qps_ctx_progress(a);
		EQ(r, sizeof(p));
		if ((i + 1) % BURST_CHUNK)
			continue;
		T_GE(qps_flush(ea), 0);
		T_WAIT_STAT(b, rx_packets, i + 1);
		got += (uint32_t)t_drain(eb, 5, seen, BURST_N);
	}
	EQ(got, BURST_N);
	t_all_once(seen, BURST_N);
	/* Let the last send completions come back. */
	T_WAIT_STAT(a, tx_packets, BURST_N);

	sa = t_ctx_stats(a);
	sb = t_ctx_stats(b);
	EQ(t_check_delivery(a, b, BURST_N, BURST_N, &sa, &sb), 0);
	EQ(sa.tx_packets, BURST_N);
	EQ(sa.tx_errors, 0);
	EQ(sb.rx_packets, BURST_N);
	EQ(sb.rx_bytes, BURST_N * sizeof(p));
	EQ(sb.rx_bad[QPS_RX_OK], BURST_N);
	/* One destination: one AH, every other send reused it. */
	EQ(sa.ud_ah_created, 1);
	EQ(sa.ud_ah_live, 1);
	EQ(sa.ud_ah_created + sa.ud_ah_reused, BURST_N);
	/* Bursts ring less than once per datagram. */
	T_LE(sa.tx_doorbells, BURST_N / 2);
	t_partition_holds(&sb);
	t_all_buffers_home(b);
	t_suite_end();
}

/* The largest payload is the UD MTU less the header; one more byte is
 * refused before anything is posted. */
static void test_max_payload(void)
{
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb;
	struct qps_ctx_info ia, ib;
	struct sockaddr_in d;
	uint8_t *tx, *rx;
	uint32_t i, max;

	t_suite_begin();
	ud_pair("ud-max", &a, &b);
	EQ_FATAL(qps_ctx_query(a, &ia), 0);
	EQ_FATAL(qps_ctx_query(b, &ib), 0);
	max = ia.max_payload;
	EQ(ib.max_payload, max);
	/* A UD message is a power-of-two IB MTU, at least 256 bytes. */
	T_GE(max + QPS_UD_HDR_LEN, 256);
	EQ((max + QPS_UD_HDR_LEN) & (max + QPS_UD_HDR_LEN - 1), 0);
	T_LE(max, ia.mtu);
	ea = t_mkep(a, IP_A, PORT_TX, 0);
	eb = t_mkep(b, IP_B, PORT_RX, 0);
	peer_set(a, b);
	tx = malloc(max + 1);
	rx = malloc(max + 1);
	CU_ASSERT_FATAL(tx && rx);
	for (i = 0; i <= max; i++)
		tx[i] = (uint8_t)(i * 7 + 3);
	d = t_sin(IP_B, PORT_RX);
	EQ(qps_sendto(ea, tx, max + 1, 0, (struct sockaddr *)&d, sizeof(d)),
	   -EMSGSIZE);
	EQ(qps_sendto(ea, tx, max, 0, (struct sockaddr *)&d, sizeof(d)),
	   max);
	EQ(qps_sendto(ea, tx, 0, 0, (struct sockaddr *)&d, sizeof(d)), 0);
	T_WAIT_STAT(b, rx_packets, 2);
	memset(rx, 0, max + 1);
	EQ(qps_recv(eb, rx, max + 1, 0), max);
	CU_ASSERT(!memcmp(rx, tx, max));
	EQ(qps_recv(eb, rx, max + 1, 0), 0);
	T_WAIT_STAT(a, tx_packets, 2);
	EQ(t_ctx_stats(a).tx_errors, 0);
	free(tx);
	free(rx);
	t_all_buffers_home(b);
	t_suite_end();
}

/* qps_sendmmsg, and a connected pair with send/recv. */
static void test_mmsg_connect(void)
{
	struct qps_ctx *a, *b;
	struct qps_ep *ea, *eb, *ec;
	struct qps_msg m[16];
	struct t_pkt p[16], q;
	struct sockaddr_in d, s;
	int i;

	t_suite_begin();
	ud_link("ud-mmsg", &a, &b, &ea, &eb);
	d = t_sin(IP_B, PORT_RX);
	memset(m, 0, sizeof(m));
	for (i = 0; i < 16; i++) {
		p[i].tag = 9;
		p[i].seq = (uint32_t)i;
		m[i].buf = &p[i];
		m[i].len = sizeof(p[i]);
		m[i].dest = (struct sockaddr *)&d;
		m[i].dest_len = sizeof(d);
		m[i].priority = -1;
	}
	EQ(qps_sendmmsg(ea, m, 16, 0), 16);
	for (i = 0; i < 16; i++)
		EQ(m[i].result, sizeof(p[i]));
	T_WAIT_STAT(b, rx_packets, 16);
	t_drain_all_once(eb, 9, 16);

	/* A batch to a peer with no QPN stops at its first message. */
	s = t_sin(IP_C, PORT_RX);
	m[0].dest = (struct sockaddr *)&s;
	EQ(qps_sendmmsg(ea, m, 2, 0), -EHOSTUNREACH);
	EQ(m[0].result, -EHOSTUNREACH);
	EQ(m[1].result, -ECANCELED);

	/* Connected both ways: B learned A above. */
	EQ(qps_connect(ea, (struct sockaddr *)&d, sizeof(d)), 0);
	s = t_sin(IP_A, PORT_TX);
	EQ(qps_connect(eb, (struct sockaddr *)&s, sizeof(s)), 0);
	q.tag = 1;
	q.seq = 42;
	EQ(qps_send(ea, &q, sizeof(q), 0), sizeof(q));
	T_WAIT_STAT(b, rx_packets, 17);
	memset(&q, 0, sizeof(q));
	EQ(qps_recv(eb, &q, sizeof(q), 0), sizeof(q));
	EQ(q.seq, 42);
	q.seq = 43;
	EQ(qps_send(eb, &q, sizeof(q), 0), sizeof(q));
	T_WAIT_STAT(a, rx_packets, 1);
	memset(&q, 0, sizeof(q));
	EQ(qps_recv(ea, &q, sizeof(q), 0), sizeof(q));
	EQ(q.seq, 43);
	EQ(t_ctx_stats(b).rx_demux_connected, 1);

	/* Connecting to an address with no QPN known fails up front. */
	ec = t_mkep(a, IP_A, PORT_TX + 1, 0);
	s = t_sin(IP_D, PORT_RX);
	EQ(qps_connect(ec, (struct sockaddr *)&s, sizeof(s)), -EHOSTUNREACH);
	t_all_buffers_home(a);
	t_all_buffers_home(b);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Multicast.                                                           */

#define MC_N 20u

/* A and B join a group on one port, C sends: each member gets every
 * datagram once, C (no member) nothing; a leave stops delivery. */
static void test_mcast(void)
{
	char wire[64];
	struct qps_ctx *a, *b, *c;
	struct qps_ep *ma, *ma2, *mb, *nc, *tc;
	struct qps_stats sa, sb, sc;
	uint8_t seen[MC_N], seen2[2 * MC_N];

	t_suite_begin();
	ud_wire(wire, sizeof(wire), "ud-mc");
	a = ud_ctx(wire, IP_A);
	b = ud_ctx(wire, IP_B);
	c = ud_ctx(wire, IP_C);
	ma = t_mkep(a, "0.0.0.0", PORT_RX, 1);
	ma2 = t_mkep(a, "0.0.0.0", PORT_RX + 1, 1);
	mb = t_mkep(b, "0.0.0.0", PORT_RX, 1);
	nc = t_mkep(c, "0.0.0.0", PORT_RX, 1);
	tc = t_mkep(c, IP_C, PORT_TX, 0);
	EQ(t_join(ma, GRP1, NULL), 0);
	EQ(t_join(mb, GRP1, NULL), 0);

	/* No peer table entry is needed for a group. */
	t_send_seq(tc, GRP1, PORT_RX, 3, 0, MC_N, 1);
	T_WAIT_STAT(a, rx_packets, MC_N);
	T_WAIT_STAT(b, rx_packets, MC_N);
	t_drain_all_once(ma, 3, MC_N);
	t_drain_all_once(mb, 3, MC_N);
	memset(seen, 0, sizeof(seen));
	EQ(t_drain(nc, 3, seen, MC_N), 0);
	sc = t_ctx_stats(c);
	EQ(sc.rx_bad[QPS_RX_OK], 0);
	EQ(sc.ud_ah_created, 1);
	EQ(sc.ud_tx_no_peer, 0);
	/* The members learned C from its group datagrams. */
	EQ(t_ctx_stats(a).ud_peers_learned, 1);

	/* A second port on the same group: no second attachment; the
	 * other port's endpoint gets nothing of the first port's. */
	EQ(t_join(ma2, GRP1, NULL), 0);
	sa = t_ctx_stats(a);
	EQ(sa.mc_rules, 1);
	EQ(sa.mc_rules_created, 1);
	EQ(sa.mc_rule_refs, 2);
	t_send_seq(tc, GRP1, PORT_RX + 1, 4, 0, MC_N, 1);
	T_WAIT_STAT(a, rx_packets, 2 * MC_N);
	t_drain_all_once(ma2, 4, MC_N);
	EQ(t_drain(ma, 4, seen, MC_N), 0);
	/* B is attached to the group: the other port reaches its QP and
	 * nobody there. */
	T_WAIT_STAT(b, rx_no_endpoint, MC_N);

	/* B leaves: its QP leaves the group, nothing more arrives. */
	EQ(t_leave(mb, GRP1, NULL), 0);
	sb = t_ctx_stats(b);
	EQ(sb.mc_rules, 0);
	EQ(sb.mc_rules_created, 1);
	EQ(sb.mc_rule_refs, 0);
	t_send_seq(tc, GRP1, PORT_RX, 3, MC_N, MC_N, 1);
	T_WAIT_STAT(a, rx_packets, 3 * MC_N);
	memset(seen2, 0, sizeof(seen2));
	EQ(t_drain(ma, 3, seen2, 2 * MC_N), MC_N);
	t_all_once(seen2 + MC_N, MC_N);
	t_sleep_ms(50);
	qps_ctx_progress(b);
	EQ(t_ctx_stats(b).rx_bad[QPS_RX_OK], sb.rx_bad[QPS_RX_OK]);
	EQ(t_drain(mb, 3, seen, MC_N), 0);

	/* A's last leave of the group detaches it. */
	EQ(t_leave(ma, GRP1, NULL), 0);
	EQ(t_ctx_stats(a).mc_rules, 1);
	EQ(t_leave(ma2, GRP1, NULL), 0);
	sa = t_ctx_stats(a);
	EQ(sa.mc_rules, 0);
	EQ(sa.mc_rule_refs, 0);
	EQ(sa.mc_joins, 2);
	EQ(sa.mc_leaves, 2);
	t_partition_holds(&sa);
	sb = t_ctx_stats(b);
	t_partition_holds(&sb);
	t_all_buffers_home(a);
	t_all_buffers_home(b);
	t_suite_end();
}

/*
 * More groups than the device attaches to a QP: the join that finds no
 * room fails with -ENOBUFS and leaves nothing behind. The groups share
 * three MACs (the top five bits of a group do not reach its MAC), so the
 * QP's group table fills before the port's MAC filter.
 */
#define FULL_MAX 200

static void test_mcast_full(void)
{
	char wire[64], g[32];
	struct qps_ctx *a;
	struct qps_ep *ep;
	struct qps_stats st;
	int i, n = 0, ret = 0;
	bool emu = t_provider_is("emu");

	t_suite_begin();
	ud_wire(wire, sizeof(wire), "ud-full");
	a = ud_ctx(wire, IP_A);
	ep = t_mkep(a, "0.0.0.0", PORT_RX, 1);
	for (i = 0; i < FULL_MAX; i++) {
		snprintf(g, sizeof(g), "%d.%d.1.%d", 224 + i % 16,
			 i / 16 % 2 ? 129 : 1, 1 + i / 32);
		ret = t_join(ep, g, NULL);
		if (ret < 0)
			break;
		n++;
	}
	EQ(ret, -ENOBUFS);
	if (emu)
		EQ(n, QPS_EMU_MAX_MCG);
	else
		T_GE(n, 16);
	st = t_ctx_stats(a);
	EQ(st.mc_rules, n);
	EQ(st.mc_rule_refs, n);
	EQ(st.mc_joins, n);
	/* Per group: the join's own membership, the attachment's, and the
	 * one emu's attach_mcast takes: the failed join undid all of its. */
	if (emu)
		EQ(t_emu_mac_refs(a), 3 * n);
	EQ(qps_ep_close(ep), 0);
	st = t_ctx_stats(a);
	EQ(st.mc_rules, 0);
	EQ(st.mc_rule_refs, 0);
	if (emu)
		EQ(t_emu_mac_refs(a), 0);
	/* Room again. */
	ep = t_mkep(a, "0.0.0.0", PORT_RX, 1);
	EQ(t_join(ep, g, NULL), 0);
	EQ(t_ctx_stats(a).mc_rules, 1);
	t_suite_end();
}

/* A member that sends to its own group gets its datagram back, as on the
 * raw path (the device loops group traffic back to attached QPs). */
static void test_mcast_self(void)
{
	struct qps_ctx *a, *b;
	struct qps_ep *ma, *ta, *mb;

	t_suite_begin();
	ud_pair("ud-mcself", &a, &b);
	ma = t_mkep(a, "0.0.0.0", PORT_RX, 1);
	ta = t_mkep(a, IP_A, PORT_TX, 0);
	mb = t_mkep(b, "0.0.0.0", PORT_RX, 1);
	EQ(t_join(ma, GRP2, NULL), 0);
	EQ(t_join(mb, GRP2, NULL), 0);
	t_send_seq(ta, GRP2, PORT_RX, 1, 0, MC_N, 1);
	T_WAIT_STAT(b, rx_packets, MC_N);
	T_WAIT_STAT(a, rx_packets, MC_N);
	t_drain_all_once(mb, 1, MC_N);
	t_drain_all_once(ma, 1, MC_N);
	t_all_buffers_home(a);
	t_suite_end();
}

/* Source-specific membership: filtered in software, per subscriber. */
static void test_mcast_ssm(void)
{
	char wire[64];
	struct qps_ctx *a, *b, *c;
	struct qps_ep *ta, *tc, *ssm, *asm_ep;
	struct qps_stats st;

	t_suite_begin();
	ud_wire(wire, sizeof(wire), "ud-ssm");
	a = ud_ctx(wire, IP_A);
	b = ud_ctx(wire, IP_B);
	c = ud_ctx(wire, IP_C);
	ta = t_mkep(a, IP_A, PORT_TX, 0);
	tc = t_mkep(c, IP_C, PORT_TX, 0);
	ssm = t_mkep(b, "0.0.0.0", PORT_RX, 1);
	asm_ep = t_mkep(b, "0.0.0.0", PORT_RX, 1);
	EQ(t_join(ssm, GRP1, IP_A), 0);
	t_send_seq(ta, GRP1, PORT_RX, 1, 0, MC_N, 1);
	t_send_seq(tc, GRP1, PORT_RX, 3, 0, MC_N, 1);
	T_WAIT_STAT(b, rx_bad[QPS_RX_OK], 2 * MC_N);
	t_drain_all_once(ssm, 1, MC_N);
	st = t_ctx_stats(b);
	EQ(st.rx_mc_filtered, MC_N);
	EQ(st.rx_no_endpoint, MC_N);

	EQ(t_join(asm_ep, GRP1, NULL), 0);
	EQ(t_ctx_stats(b).mc_rules, 1);
	t_send_seq(ta, GRP1, PORT_RX, 1, 0, MC_N, 1);
	t_send_seq(tc, GRP1, PORT_RX, 3, 0, MC_N, 1);
	T_WAIT_STAT(b, rx_bad[QPS_RX_OK], 4 * MC_N);
	t_drain_all_once(ssm, 1, MC_N);
	t_drain_two_once(asm_ep, 1, 3, MC_N);
	st = t_ctx_stats(b);
	EQ(st.rx_mc_filtered, 2 * MC_N);
	t_partition_holds(&st);
	t_all_buffers_home(b);
	t_suite_end();
}

/* PKTINFO on UD: the destination from the GRH and the UD header, the
 * group for a group datagram. */
static void test_pktinfo(void)
{
	struct qps_ctx *a, *b;
	struct qps_ep *ta, *u, *m;
	struct qps_rxmsg msg;
	struct t_pkt p;
	int on = 1;

	t_suite_begin();
	ud_pair("ud-info", &a, &b);
	ta = t_mkep(a, IP_A, PORT_TX, 0);
	u = t_mkep(b, IP_B, PORT_RX, 0);
	m = t_mkep(b, "0.0.0.0", PORT_RX + 2, 1);
	EQ(qps_setopt(u, QPS_OPT_PKTINFO, &on, sizeof(on)), 0);
	EQ(qps_setopt(m, QPS_OPT_PKTINFO, &on, sizeof(on)), 0);
	EQ(t_join(m, GRP2, NULL), 0);
	peer_set(a, b);

	t_send_seq(ta, IP_B, PORT_RX, 1, 0, 1, 1);
	t_send_seq(ta, GRP2, PORT_RX + 2, 1, 1, 1, 1);
	T_WAIT_STAT(b, rx_pktinfo, 2);

	memset(&msg, 0, sizeof(msg));
	msg.buf = &p;
	msg.len = sizeof(p);
	EQ(qps_recvmsg(u, &msg, 0), sizeof(p));
	EQ(p.seq, 0);
	EQ(msg.flags, QPS_RXMSG_PKTINFO);
	EQ(msg.ifindex, QPS_IFINDEX);
	EQ(msg.dst.sin_addr.s_addr, t_ip4(IP_B));
	EQ(ntohs(msg.dst.sin_port), PORT_RX);
	EQ(msg.src.sin_addr.s_addr, t_ip4(IP_A));
	EQ(ntohs(msg.src.sin_port), PORT_TX);
	CU_ASSERT(msg.ts_ns != 0);

	memset(&msg, 0, sizeof(msg));
	msg.buf = &p;
	msg.len = sizeof(p);
	EQ(qps_recvmsg(m, &msg, 0), sizeof(p));
	EQ(p.seq, 1);
	EQ(msg.flags, QPS_RXMSG_PKTINFO);
	EQ(msg.dst.sin_addr.s_addr, t_ip4(GRP2));
	EQ(ntohs(msg.dst.sin_port), PORT_RX + 2);
	EQ(msg.src.sin_addr.s_addr, t_ip4(IP_A));
	t_all_buffers_home(b);
	t_suite_end();
}

/* ------------------------------------------------------------------ */
/* Malformed messages from a bare UD QP.                                */

#define RAW_BUF 512u
#define RX_SMALL 32u

/* A UD QP of the test's own on emu, sending from @buf. */
struct bare {
	struct qps_dev *dev;
	struct qps_cq *cq;
	struct qps_qp *qp;
	struct qps_mr *mr;
	struct qps_ah *ah;
	uint8_t *buf;
};

static const struct qps_provider_ops *E = &qps_emu_ops;

static void bare_open(struct bare *n, const char *wire, const char *ip,
		      uint32_t dip)
{
	struct qps_dev_attr da = { .dev = wire, .addr_set = true };
	struct qps_qp_init_attr qa = {
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 64, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = { .pkey_index = 0, .port_num = 1,
				 .qkey = QPS_UD_QKEY, .sq_psn = 1 };
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	void *b = NULL;

	memset(n, 0, sizeof(*n));
	da.addr.s_addr = t_ip4(ip);
	EQ_FATAL(E->open(&da, &n->dev), 0);
	CU_ASSERT_FATAL(posix_memalign(&b, 64, RAW_BUF) == 0);
	n->buf = b;
	EQ_FATAL(E->reg_mr(n->dev, n->buf, RAW_BUF, &n->mr), 0);
	EQ_FATAL(E->create_cq(n->dev, 128, &n->cq), 0);
	qa.send_cq = n->cq;
	qa.recv_cq = n->cq;
	EQ_FATAL(E->create_qp(n->dev, &qa, &n->qp), 0);
	a.qp_state = IBV_QPS_INIT;
	EQ_FATAL(E->modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			      IBV_QP_PORT | IBV_QP_QKEY), 0);
	a.qp_state = IBV_QPS_RTR;
	EQ_FATAL(E->modify_qp(n->qp, &a, IBV_QP_STATE), 0);
	a.qp_state = IBV_QPS_RTS;
	EQ_FATAL(E->modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
	aa.grh.sgid_index = QPS_GID_ROCE_V2_IPV4;
	aa.grh.hop_limit = 64;
	aa.grh.dgid.raw[10] = 0xff;
	aa.grh.dgid.raw[11] = 0xff;
	memcpy(aa.grh.dgid.raw + 12, &dip, 4);
	EQ_FATAL(E->create_ah(n->dev, &aa, &n->ah), 0);
}

static void bare_close(struct bare *n)
{
	if (!n->dev)
		return;
	EQ(E->destroy_ah(n->ah), 0);
	EQ(E->destroy_qp(n->qp), 0);
	EQ(E->destroy_cq(n->cq), 0);
	EQ(E->dereg_mr(n->mr), 0);
	EQ(E->close(n->dev), 0);
	free(n->buf);
	memset(n, 0, sizeof(*n));
}

/* Send the first @len bytes of n->buf to @qpn and wait for the send
 * completion. */
static void bare_send(struct bare *n, uint32_t qpn, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)n->buf, .length = len,
			       .lkey = n->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	uint64_t end = t_now_ms() + T_WAIT_MS;
	int r;

	wr.wr.ud.ah = n->ah->ibv;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = QPS_UD_QKEY;
	EQ_FATAL(E->post_send(n->qp, &wr, &bad), 0);
	while ((r = E->poll_cq(n->cq, 1, &wc)) == 0 && t_now_ms() < end)
		usleep(100);
	EQ_FATAL(r, 1);
	EQ(wc.status, IBV_WC_SUCCESS);
}

/* A valid qpsock datagram (tag 7, @seq) into n->buf; returns its length. */
static uint32_t bare_valid(struct bare *n, uint32_t seq)
{
	struct qps_ud_hdr_info h = {
		.sport = htons(PORT_TX), .dport = htons(PORT_RX),
		.src_qpn = n->qp->qp_num,
	};
	struct t_pkt p = { .tag = 7, .seq = seq };

	memcpy(n->buf + QPS_UD_HDR_LEN, &p, sizeof(p));
	return (uint32_t)qps_ud_hdr_build(n->buf, &h, sizeof(p));
}

static void test_malformed_e2e(void)
{
	char wire[64];
	struct qps_ctx *b;
	struct qps_ep *eb;
	struct qps_ud_addr lb;
	struct qps_stats st;
	struct bare n;
	static uint8_t seen[4 * RX_SMALL];
	uint32_t i, len, bad = 0, got = 0, nvalid = 4 * RX_SMALL;

	t_suite_begin();
	ud_wire(wire, sizeof(wire), "ud-bad");
	b = ud_ctx_opts(wire, IP_B, RX_SMALL, 0);
	eb = t_mkep(b, IP_B, PORT_RX, 0);
	EQ_FATAL(qps_ud_local(b, &lb), 0);
	bare_open(&n, wire, IP_D, t_ip4(IP_B));

	/* More bad ones than there are receive buffers: each must come back
	 * to the device, or the valid ones after them would find none. */
	for (i = 0; i < 2 * RX_SMALL; i++) {
		len = bare_valid(&n, i);
		switch (i % 5) {
		case 0:
			n.buf[0] = 0x52;	/* magic */
			break;
		case 1:
			n.buf[1] = 1;		/* flags */
			break;
		case 2:
			len -= 1;		/* length says one more */
			break;
		case 3:
			len = QPS_UD_HDR_LEN - 2;	/* short header */
			break;
		case 4:
			len = 0;		/* no header at all */
			break;
		}
		bare_send(&n, lb.qpn, len);
		bad++;
		if (i % 8 == 7)
			qps_ctx_progress(b);
	}
	T_WAIT_STAT(b, rx_ud_bad_hdr, bad);
	st = t_ctx_stats(b);
	EQ(st.rx_ud_bad_hdr, bad);
	EQ(st.rx_ud_bad_grh, 0);
	EQ(st.rx_bad[QPS_RX_OK], 0);
	EQ(st.rx_packets, 0);
	EQ(st.ud_peers_learned, 0);
	t_all_buffers_home(b);

	/* Then valid ones, several times rx_depth, in batches the receive
	 * queue holds. */
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < nvalid; i++) {
		bare_send(&n, lb.qpn, bare_valid(&n, i));
		if (i % (RX_SMALL / 2) != RX_SMALL / 2 - 1)
			continue;
		T_WAIT_STAT(b, rx_packets, i + 1);
		got += (uint32_t)t_drain(eb, 7, seen, nvalid);
	}
	EQ(got, nvalid);
	t_all_once(seen, nvalid);
	st = t_ctx_stats(b);
	EQ(st.rx_ud_bad_hdr, bad);
	EQ(st.rx_packets, nvalid);
	/* The bare QP's address was learned from its first valid one. */
	EQ(st.ud_peers_learned, 1);
	t_all_buffers_home(b);
	bare_close(&n);
	t_suite_end();
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "parse: valid, both GRH formats", test_parse_valid },
		{ "parse: build limits, 24-bit QPN", test_parse_build_limits },
		{ "parse: every truncation", test_parse_truncated },
		{ "parse: each malformed field", test_parse_malformed },
		{ "unicast: peer_set one way, learned back",
		  test_unicast_learn },
		{ "replies reach QP 0 from any send QP", test_send_qps },
		{ "1000 datagrams with MORE + flush", test_burst },
		{ "max payload, +1 -EMSGSIZE", test_max_payload },
		{ "sendmmsg and connected send/recv", test_mmsg_connect },
		{ "multicast: members, non-member sender, leave", test_mcast },
		{ "multicast: own datagrams loop back", test_mcast_self },
		{ "multicast: device full -ENOBUFS, undone", test_mcast_full },
		{ "multicast: source-specific joins", test_mcast_ssm },
		{ "PKTINFO: unicast and group destination", test_pktinfo },
		{ "malformed UD messages end to end", test_malformed_e2e },
		CU_TEST_INFO_NULL,
	};

	/* atexit runs last-registered first: contexts go, then wires. */
	atexit(wires_unlink);
	atexit(t_suite_cleanup);
	signal(SIGPIPE, SIG_IGN);
	return t_run("ud", tests);
}
