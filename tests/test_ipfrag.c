// SPDX-License-Identifier: MIT
/*
 * IPv4 reassembly (ipfrag.c) fed frames directly: every order, duplicates,
 * overlaps, holes that time out, malformed fragments, a flood against the
 * memory cap and random fragments; then whole datagrams above the MTU
 * between two emu contexts, through the send path's fragmentation.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "ipfrag.h"
#include "t_util.h"

#define EQ T_EQ
#define EQ_FATAL T_EQ_FATAL
#define LE T_LE
#define GE T_GE

#define MS 1000000ull
#define T_TIME (30000 * MS)
#define T_MEM (4u << 20)
#define NF_MAX 160
#define FRAME_MAX 1600

/* One datagram cut into fragments, as a sender would put them on the
 * wire. */
struct t_dgram {
	uint8_t payload[QPS_UDP_MAX_PAYLOAD];
	size_t len;
	uint8_t frame[NF_MAX][FRAME_MAX];
	size_t flen[NF_MAX];
	unsigned int n;
};

static struct t_dgram dg;
static const char *t_dst = "10.1.0.2";	/* the datagrams' destination */

static void t_hdr(struct qps_frame_hdr *h, uint16_t id)
{
	static const uint8_t smac[6] = { 2, 0, 0, 0, 0, 1 };
	static const uint8_t dmac[6] = { 2, 0, 0, 0, 0, 2 };

	memset(h, 0, sizeof(*h));
	memcpy(h->src_mac, smac, 6);
	memcpy(h->dst_mac, dmac, 6);
	h->saddr = t_ip4("10.1.0.1");
	h->daddr = t_ip4(t_dst);
	h->sport = htons(1111);
	h->dport = htons(2222);
	h->ip_id = htons(id);
	h->ttl = 64;
}

/* @len payload bytes in fragments of @unit IP payload bytes. */
static void t_cut(size_t len, size_t unit, uint16_t id, unsigned int seed)
{
	struct qps_frame_hdr h;
	size_t total = QPS_UDP_HLEN + len, off;
	uint8_t whole[QPS_UDP_HLEN + QPS_UDP_MAX_PAYLOAD];

	dg.len = len;
	srand(seed);
	for (off = 0; off < len; off++)
		dg.payload[off] = (uint8_t)rand();
	t_hdr(&h, id);
	qps_udp_hdr_build(whole, &h, len, qps_csum_partial(dg.payload, len, 0));
	memcpy(whole + QPS_UDP_HLEN, dg.payload, len);
	dg.n = 0;
	for (off = 0; off < total && dg.n < NF_MAX; off += unit) {
		size_t n = total - off < unit ? total - off : unit;
		uint8_t *f = dg.frame[dg.n];

		memcpy(f + QPS_ETH_HLEN + QPS_IP_HLEN, whole + off, n);
		dg.flen[dg.n] = (size_t)qps_frame_build_frag(f, &h, n, off,
							     off + n < total);
		dg.n++;
	}
}

struct t_out {
	int got;		/* datagrams completed */
	bool ok;		/* each parsed and matched dg.payload */
};

static void t_feed(struct qps_ipfrag *f, struct qps_stats *st,
		   unsigned int i, uint64_t now, struct t_out *o)
{
	struct qps_frame_info fi;
	uint8_t *out = NULL;
	int len;

	EQ_FATAL(qps_frame_parse(dg.frame[i], dg.flen[i], NULL),
		 QPS_RX_FRAGMENT);
	len = qps_ipfrag_input(f, st, dg.frame[i], now, &out);
	if (len <= 0)
		return;
	o->got++;
	o->ok = qps_frame_parse(out, (size_t)len, &fi) == QPS_RX_OK &&
		fi.payload_len == dg.len &&
		!memcmp(fi.payload, dg.payload, dg.len);
	free(out);
}

static void t_setup(struct qps_ipfrag *f, struct qps_stats *st, uint64_t mem)
{
	qps_ipfrag_init(f, mem, T_TIME);
	memset(st, 0, sizeof(*st));
}

static void test_orders(void)
{
	static const size_t lens[] = { 1473, 3000, 8972, 65507 };
	struct qps_ipfrag f;
	struct qps_stats st;
	unsigned int l, i;

	for (l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		struct t_out o = { 0 };
		unsigned int perm[NF_MAX];

		t_cut(lens[l], 1480, (uint16_t)l, l);
		t_setup(&f, &st, T_MEM);
		/* In order. */
		for (i = 0; i < dg.n; i++)
			t_feed(&f, &st, i, 0, &o);
		EQ(o.got, 1);
		CU_ASSERT(o.ok);
		/* Reversed: the last fragment first. */
		o = (struct t_out){ 0 };
		for (i = dg.n; i-- > 0;)
			t_feed(&f, &st, i, 0, &o);
		EQ(o.got, 1);
		CU_ASSERT(o.ok);
		/* Shuffled. */
		for (i = 0; i < dg.n; i++)
			perm[i] = i;
		srand(l + 7);
		for (i = dg.n; i > 1; i--) {
			unsigned int j = (unsigned int)rand() % i, t = perm[j];

			perm[j] = perm[i - 1];
			perm[i - 1] = t;
		}
		o = (struct t_out){ 0 };
		for (i = 0; i < dg.n; i++)
			t_feed(&f, &st, perm[i], 0, &o);
		EQ(o.got, 1);
		CU_ASSERT(o.ok);
		EQ(st.rx_reasm_ok, 3);
		EQ(f.nq, 0);
		EQ(f.mem, 0);
		EQ(st.rx_reasm_bytes, 0);
		qps_ipfrag_fini(&f);
	}
}

static void test_dup_overlap(void)
{
	struct qps_ipfrag f;
	struct qps_stats st;
	struct t_out o = { 0 };
	uint8_t keep[FRAME_MAX];
	size_t keep_len;
	unsigned int i;

	t_cut(8000, 1480, 42, 1);
	t_setup(&f, &st, T_MEM);
	/* A duplicate is ignored, the datagram kept. */
	t_feed(&f, &st, 0, 0, &o);
	t_feed(&f, &st, 1, 0, &o);
	t_feed(&f, &st, 1, 0, &o);
	EQ(st.rx_reasm_dup, 1);
	for (i = 2; i < dg.n; i++)
		t_feed(&f, &st, i, 0, &o);
	EQ(o.got, 1);
	CU_ASSERT(o.ok);

	/* An overlap drops the whole datagram: a fragment starting 8 bytes
	 * before fragment 1 ends. */
	o = (struct t_out){ 0 };
	t_feed(&f, &st, 0, 0, &o);
	t_feed(&f, &st, 1, 0, &o);
	memcpy(keep, dg.frame[2], dg.flen[2]);
	keep_len = dg.flen[2];
	t_cut(8000, 1480, 42, 1);
	{
		struct qps_frame_hdr h;
		uint8_t *fr = dg.frame[2];

		t_hdr(&h, 42);
		dg.flen[2] = (size_t)qps_frame_build_frag(fr, &h, 1480,
							  2 * 1480 - 8, true);
	}
	t_feed(&f, &st, 2, 0, &o);
	EQ(st.rx_reasm_overlap, 1);
	EQ(f.nq, 0);
	EQ(f.mem, 0);
	/* What follows starts a new datagram that never completes. */
	memcpy(dg.frame[2], keep, keep_len);
	dg.flen[2] = keep_len;
	for (i = 2; i < dg.n; i++)
		t_feed(&f, &st, i, 0, &o);
	EQ(o.got, 0);
	EQ(f.nq, 1);
	qps_ipfrag_expire(&f, &st, T_TIME + 1);
	EQ(st.rx_reasm_timeout, 1);
	EQ(f.nq, 0);
	EQ(st.rx_reasm_bytes, 0);
	qps_ipfrag_fini(&f);
}

static void test_timeout(void)
{
	struct qps_ipfrag f;
	struct qps_stats st;
	struct t_out o = { 0 };
	unsigned int i;

	t_cut(5000, 1480, 7, 3);
	t_setup(&f, &st, T_MEM);
	/* A hole: the middle fragment never comes. */
	for (i = 0; i < dg.n; i++)
		if (i != 1)
			t_feed(&f, &st, i, 10 * MS, &o);
	EQ(o.got, 0);
	GE(st.rx_reasm_bytes, 5000 - 1480);
	/* Not yet: the lifetime counts from the first fragment. */
	qps_ipfrag_expire(&f, &st, T_TIME);
	EQ(st.rx_reasm_timeout, 0);
	/* The late fragment would have completed it; after the lifetime it
	 * starts a datagram of its own, which later times out too. */
	t_feed(&f, &st, 1, T_TIME + 10 * MS, &o);
	EQ(st.rx_reasm_timeout, 1);
	EQ(o.got, 0);
	EQ(f.nq, 1);
	qps_ipfrag_expire(&f, &st, 2 * T_TIME + 10 * MS);
	EQ(st.rx_reasm_timeout, 2);
	EQ(f.mem, 0);
	qps_ipfrag_fini(&f);
}

/* Overwrite fragment @i's IP header fields and fix its checksum. */
static void t_refrag(unsigned int i, size_t ip_len, size_t off, bool more)
{
	struct qps_frame_hdr h;

	t_hdr(&h, 9);
	dg.flen[i] = (size_t)qps_frame_build_frag(dg.frame[i], &h, ip_len,
						  off, more);
}

/* Malformed on their own: built here without qps_frame_build_frag's
 * checks, which refuse them. */
static void t_raw_frag(unsigned int i, size_t ip_len, uint16_t frag_field)
{
	uint8_t *ip = dg.frame[i] + QPS_ETH_HLEN;
	uint16_t csum;

	qps_be16_put(ip + QPS_IPOFF_TOTLEN, (uint16_t)(QPS_IP_HLEN + ip_len));
	qps_be16_put(ip + QPS_IPOFF_FRAG, frag_field);
	memset(ip + QPS_IPOFF_CSUM, 0, 2);
	csum = qps_csum_fold(qps_csum_partial(ip, QPS_IP_HLEN, 0));
	memcpy(ip + QPS_IPOFF_CSUM, &csum, 2);
	dg.flen[i] = QPS_ETH_HLEN + QPS_IP_HLEN + ip_len;
}

static void test_malformed(void)
{
	struct qps_ipfrag f;
	struct qps_stats st;
	struct t_out o = { 0 };

	t_setup(&f, &st, T_MEM);
	/* The builder refuses what the parser must refuse. */
	t_cut(3000, 1480, 9, 4);
	EQ(qps_frame_build_frag(dg.frame[0], &(struct qps_frame_hdr){ 0 },
				12, 0, true), -EINVAL);
	EQ(qps_frame_build_frag(dg.frame[0], &(struct qps_frame_hdr){ 0 },
				16, 65528, false), -EINVAL);

	/* A tiny first fragment: 4 bytes, no room for the UDP header. */
	t_raw_frag(0, 4, QPS_IP_MF);
	t_feed(&f, &st, 0, 0, &o);
	EQ(st.rx_reasm_bad, 1);
	/* A ragged middle fragment: 12 bytes with MF. */
	t_raw_frag(0, 12, QPS_IP_MF | 10);
	t_feed(&f, &st, 0, 0, &o);
	EQ(st.rx_reasm_bad, 2);
	/* An end beyond 65535. */
	t_raw_frag(0, 16, 65528 / 8);
	t_feed(&f, &st, 0, 0, &o);
	EQ(st.rx_reasm_bad, 3);
	EQ(f.nq, 0);

	/* Two different ends: the datagram is dropped. */
	t_cut(3000, 1480, 9, 4);
	t_feed(&f, &st, 2, 0, &o);
	t_refrag(1, 1480, 1480, false);
	t_feed(&f, &st, 1, 0, &o);
	EQ(st.rx_reasm_bad, 4);
	EQ(f.nq, 0);
	/* A non-final fragment beyond a known end: dropped too. */
	t_cut(3000, 1480, 9, 4);
	t_feed(&f, &st, 2, 0, &o);
	t_refrag(0, 3200, 0, true);
	t_feed(&f, &st, 0, 0, &o);
	EQ(st.rx_reasm_bad, 5);
	EQ(f.nq, 0);
	EQ(f.mem, 0);
	EQ(o.got, 0);
	qps_ipfrag_fini(&f);
}

static void test_mem_cap(void)
{
	struct qps_ipfrag f;
	struct qps_stats st;
	struct t_out o = { 0 };
	const uint64_t cap = 64 * 1024;
	unsigned int id, held;

	t_setup(&f, &st, cap);
	/* First fragments of distinct datagrams: each is held until the cap
	 * is reached, then refused, and memory never passes it. */
	for (id = 0; id < 1000; id++) {
		t_cut(3000, 1480, (uint16_t)id, id);
		t_feed(&f, &st, 0, 0, &o);
		LE(f.mem, cap);
	}
	GE(st.rx_reasm_mem, 900);
	EQ(st.rx_reasm_mem + f.nq, 1000);
	EQ(st.rx_reasm_bytes, f.mem);
	/* A datagram whose next fragment does not fit is dropped whole.
	 * Expiry frees a bounded batch per call, the rest at the next. */
	held = f.nq;
	GE(held, QPS_IPFRAG_EXPIRE_BATCH + 1);
	qps_ipfrag_expire(&f, &st, T_TIME);
	EQ(f.nq, held - QPS_IPFRAG_EXPIRE_BATCH);
	for (id = 0; id < 1000 && f.nq; id++)
		qps_ipfrag_expire(&f, &st, T_TIME);
	EQ(f.mem, 0);
	EQ(st.rx_reasm_timeout, 1000 - st.rx_reasm_mem);

	/* 0 turns reassembly off: every fragment is dropped, counted. */
	qps_ipfrag_fini(&f);
	t_setup(&f, &st, 0);
	t_cut(3000, 1480, 1, 1);
	t_feed(&f, &st, 0, 0, &o);
	t_feed(&f, &st, 1, 0, &o);
	t_feed(&f, &st, 2, 0, &o);
	EQ(st.rx_reasm_mem, 3);
	EQ(o.got, 0);
	qps_ipfrag_fini(&f);
}

/*
 * What a hostile sender chooses: datagrams that share a bucket (found
 * with the context's own key, which an attacker does not have), one
 * datagram in more fragments than any MTU needs, and first fragments to
 * a group that never complete. Each is bounded, and a unicast datagram
 * still completes after each.
 */
static void test_hostile(void)
{
	struct qps_ipfrag f, g;
	struct qps_stats st;
	struct t_out o = { 0 };
	uint32_t s = t_ip4("10.1.0.1"), d = t_ip4("10.1.0.2"), b;
	unsigned int id, n = 0, i, same = 0;
	uint16_t ids[40];

	t_setup(&f, &st, T_MEM);
	/* IDs as the header carries them: network order. */
	b = qps_ipfrag_bucket(&f, s, d, 0);
	for (id = 0; id < 65536 && n < 40; id++)
		if (qps_ipfrag_bucket(&f, s, d, htons((uint16_t)id)) == b)
			ids[n++] = (uint16_t)id;
	EQ_FATAL(n, 40);
	for (i = 0; i < n; i++) {
		t_cut(3000, 1480, ids[i], i);
		t_feed(&f, &st, 0, 0, &o);
		LE(f.chain[b], QPS_IPFRAG_CHAIN);
	}
	EQ(f.chain[b], QPS_IPFRAG_CHAIN);
	EQ(st.rx_reasm_mem, n - QPS_IPFRAG_CHAIN);
	/* The newest of the bucket completes. */
	t_feed(&f, &st, 1, 0, &o);
	t_feed(&f, &st, 2, 0, &o);
	EQ(o.got, 1);
	CU_ASSERT(o.ok);
	/* Another context's key puts the same datagrams elsewhere, and
	 * numbers its fragmented datagrams from elsewhere: per destination
	 * a sequence, at an offset only the context knows (RFC 7739). */
	t_setup(&g, &st, T_MEM);
	for (i = 0; i < 16; i++)
		same += qps_ipfrag_bucket(&g, s, d, htons(ids[i])) == b;
	CU_ASSERT(same < 16);
	EQ((uint16_t)(qps_ipfrag_id(&f, d, 8) - qps_ipfrag_id(&f, d, 7)), 1);
	for (i = 0, same = 0; i < 16; i++)
		same += qps_ipfrag_id(&f, d + i + 1, 7) ==
			(uint16_t)(qps_ipfrag_id(&f, d, 7));
	LE(same, 1);
	CU_ASSERT(qps_ipfrag_id(&f, d, 7) != qps_ipfrag_id(&g, d, 7) ||
		  qps_ipfrag_id(&f, s, 7) != qps_ipfrag_id(&g, s, 7));
	qps_ipfrag_fini(&g);
	qps_ipfrag_fini(&f);

	/* 128 fragments of 8 bytes complete; 129 are refused at the 129th. */
	t_setup(&f, &st, T_MEM);
	o = (struct t_out){ 0 };
	t_cut(QPS_IPFRAG_MAX_FRAGS * 8 - 8, 8, 7, 7);
	EQ_FATAL(dg.n, QPS_IPFRAG_MAX_FRAGS);
	for (i = 0; i < dg.n; i++)
		t_feed(&f, &st, i, 0, &o);
	EQ(o.got, 1);
	CU_ASSERT(o.ok);
	t_cut(QPS_IPFRAG_MAX_FRAGS * 8, 8, 8, 8);
	EQ_FATAL(dg.n, QPS_IPFRAG_MAX_FRAGS + 1);
	for (i = 0; i < dg.n; i++)
		t_feed(&f, &st, i, 0, &o);
	EQ(o.got, 1);
	EQ(st.rx_reasm_bad, 1);
	EQ(f.nq, 0);
	qps_ipfrag_fini(&f);

	/* A group's first fragments take half the memory at most. */
	t_setup(&f, &st, 64 * 1024);
	o = (struct t_out){ 0 };
	t_dst = "239.1.1.1";
	for (id = 0; id < 200; id++) {
		t_cut(3000, 1480, (uint16_t)id, id);
		t_feed(&f, &st, 0, 0, &o);
		LE(f.mem_group, 32 * 1024);
	}
	GE(st.rx_reasm_mem, 150);
	t_dst = "10.1.0.2";
	t_cut(3000, 1480, 9, 9);
	for (i = 0; i < dg.n; i++)
		t_feed(&f, &st, i, 0, &o);
	EQ(o.got, 1);
	CU_ASSERT(o.ok);
	qps_ipfrag_fini(&f);
}

/* Random offsets, lengths and flags under one ID: whatever comes, no
 * crash, memory within the cap, nothing left after the lifetime. */
static void test_random(void)
{
	struct qps_ipfrag f;
	struct qps_stats st;
	const uint64_t cap = 256 * 1024;
	uint8_t *out;
	unsigned int k;

	t_setup(&f, &st, cap);
	t_cut(1400, 1480, 3, 3);
	srand(99);
	for (k = 0; k < 20000; k++) {
		size_t len = (size_t)(rand() % 180) * 8 + 8;
		size_t off = (size_t)(rand() % 8100) * 8;
		bool more = rand() & 1;
		struct qps_frame_hdr h;

		if (off + len > 65515)
			continue;
		t_hdr(&h, (uint16_t)(rand() % 4));
		dg.flen[0] = (size_t)qps_frame_build_frag(dg.frame[0], &h,
							  len, off, more);
		if (qps_ipfrag_input(&f, &st, dg.frame[0], k * MS, &out) > 0)
			free(out);
		LE(f.mem, cap);
	}
	qps_ipfrag_expire(&f, &st, 20000 * MS + T_TIME);
	EQ(f.nq, 0);
	EQ(f.mem, 0);
	qps_ipfrag_fini(&f);
}

/* ------------------------------------------------------------------ */
/* End to end on emu: the send path fragments, the receive path joins. */

#define IP_A "198.18.0.1"
#define IP_B "198.18.0.2"

static void test_emu_sizes(void)
{
	static const size_t lens[] = { 1473, 3000, 8972, 65507 };
	static uint8_t out[65507 + 8], in[65600];
	struct qps_stats s0, s1, r0, r1;
	struct sockaddr_in to;
	struct qps_ctx *a, *b;
	struct qps_ep *tx, *rx;
	char wire[64];
	unsigned int i, k;
	size_t frags = 0;

	t_suite_begin();
	t_wire_name(wire, sizeof(wire), "ipfrag");
	a = t_suite_ctx(wire, IP_A);
	b = t_suite_ctx(wire, IP_B);
	CU_ASSERT_FATAL(a && b);
	tx = t_ep_bound(a, IP_A, 4000, 0);
	rx = t_ep_bound(b, IP_B, 5000, 3000);
	CU_ASSERT_FATAL(tx && rx);
	for (k = 0; k < sizeof(out); k++)
		out[k] = (uint8_t)(k * 7 + 1);
	to = t_sin(IP_B, 5000);
	s0 = t_ctx_stats(a);
	r0 = t_ctx_stats(b);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		size_t n = lens[i];

		EQ(qps_sendto(tx, out + i, n, 0, (struct sockaddr *)&to,
			      sizeof(to)), (ssize_t)n);
		frags += (QPS_UDP_HLEN + n + 1479) / 1480;
		memset(in, 0, sizeof(in));
		EQ(qps_recv(rx, in, sizeof(in), 0), (ssize_t)n);
		CU_ASSERT(memcmp(in, out + i, n) == 0);
	}
	s1 = t_ctx_stats(a);
	r1 = t_ctx_stats(b);
	EQ(s1.tx_packets - s0.tx_packets, 4);
	EQ(s1.tx_frags - s0.tx_frags, frags);
	EQ(s1.tx_frag_partial - s0.tx_frag_partial, 0);
	EQ(r1.rx_bad[QPS_RX_FRAGMENT] - r0.rx_bad[QPS_RX_FRAGMENT], frags);
	EQ(r1.rx_reasm_ok - r0.rx_reasm_ok, 4);
	EQ(r1.rx_packets - r0.rx_packets, 4);
	EQ(r1.rx_reasm_bytes, 0);

	/* A fragmented datagram is one transmit report, as one datagram. */
	{
		struct qps_txts rep[4];
		int f = QPS_TS_TX_SOFTWARE, got = 0, k2;

		EQ(qps_setopt(tx, QPS_OPT_TIMESTAMP, &f, sizeof(f)), 0);
		EQ(qps_sendto(tx, out, 8972, 0, (struct sockaddr *)&to,
			      sizeof(to)), 8972);
		EQ(qps_sendto(tx, out, 100, 0, (struct sockaddr *)&to,
			      sizeof(to)), 100);
		EQ(qps_recv(rx, in, sizeof(in), 0), 8972);
		EQ(qps_recv(rx, in, sizeof(in), 0), 100);
		for (k2 = 0; k2 < 200 && got < 2; k2++) {
			int r = qps_recv_txts(tx, rep + got, 4 - (unsigned)got,
					      0);

			if (r > 0)
				got += r;
			else
				t_sleep_ms(1);
		}
		EQ(got, 2);
		EQ(rep[0].id, 0);
		EQ(rep[1].id, 1);
		EQ(qps_recv_txts(tx, rep, 4, 0), -EAGAIN);
	}
	t_suite_end();
}

/* QPS_CTX_ATTR_IPFRAG: out of range is -EINVAL, as every attribute. */
static void test_attr(void)
{
	static const struct { uint32_t mem, ms; int want; } c[] = {
		{ QPS_IPFRAG_MEM_MAX + 1, 1000, -EINVAL },
		{ 1 << 20, 0, -EINVAL },
		{ 1 << 20, QPS_IPFRAG_TIME_MAX_MS + 1, -EINVAL },
		{ 0, 1, 0 },
		{ QPS_IPFRAG_MEM_MAX, QPS_IPFRAG_TIME_MAX_MS, 0 },
	};
	char wire[64];
	unsigned int i;

	t_wire_name(wire, sizeof(wire), "ipfrag-attr");
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct qps_ctx_attr a = t_emu_attr(wire, IP_A);
		struct qps_ctx *ctx = NULL;

		a.comp_mask |= QPS_CTX_ATTR_IPFRAG;
		a.ipfrag_mem = c[i].mem;
		a.ipfrag_time_ms = c[i].ms;
		EQ(qps_ctx_create(&a, &ctx), c[i].want);
		if (ctx)
			EQ(qps_ctx_destroy(ctx), 0);
	}
}

static CU_TestInfo tests[] = {
	{ "in order, reversed, shuffled", test_orders },
	{ "duplicates ignored, overlaps drop", test_dup_overlap },
	{ "holes time out", test_timeout },
	{ "malformed fragments", test_malformed },
	{ "memory cap", test_mem_cap },
	{ "hostile: shared buckets, many fragments, group floods",
	  test_hostile },
	{ "random fragments", test_random },
	{ "emu: 1473 to 65507 bytes", test_emu_sizes },
	{ "QPS_CTX_ATTR_IPFRAG limits", test_attr },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	atexit(t_suite_cleanup);
	return t_run("ipfrag", tests);
}
