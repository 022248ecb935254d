// SPDX-License-Identifier: MIT
/*
 * Frames: build/parse round trips, one table row per way a frame can be
 * malformed, and bounds: every parse runs on a heap buffer of exactly the
 * frame's length so that ASan reports any read past it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "t_util.h"

#define ETH 0
#define IP QPS_ETH_HLEN
#define UDP (QPS_ETH_HLEN + QPS_IP_HLEN)
#define BUF_MAX (QPS_HDRS_LEN + 65535)

static const uint8_t t_dmac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x02 };
static const uint8_t t_smac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 };

static uint16_t be16_at(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void set_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* The reference: RFC 1071 written the obvious way, big-endian pairs. */
static uint32_t ref_sum(const uint8_t *p, size_t len, uint32_t sum)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

static uint16_t ref_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static uint16_t ref_ip_csum(const uint8_t *f)
{
	uint8_t hdr[60];
	size_t ihl = (size_t)(f[IP] & 0x0f) * 4;

	memcpy(hdr, f + IP, ihl);
	hdr[10] = hdr[11] = 0;
	return ref_fold(ref_sum(hdr, ihl, 0));
}

/* UDP checksum as it should be on the wire (0 replaced by 0xffff). */
static uint16_t ref_udp_csum(const uint8_t *f)
{
	size_t ihl = (size_t)(f[IP] & 0x0f) * 4;
	const uint8_t *udp = f + IP + ihl;
	uint16_t ulen = be16_at(udp + 4);
	uint8_t ph[12];
	uint32_t sum;
	uint16_t c;

	memcpy(ph, f + IP + 12, 8);
	ph[8] = 0;
	ph[9] = 17;
	set_be16(ph + 10, ulen);
	sum = ref_sum(ph, sizeof(ph), 0);
	sum = ref_sum(udp, 6, sum);
	sum = ref_sum(udp + 8, ulen - 8u, sum);
	c = ref_fold(sum);
	return c ? c : 0xffff;
}

static void fix_ip(uint8_t *f)
{
	set_be16(f + IP + 10, ref_ip_csum(f));
}

static void fix_udp(uint8_t *f)
{
	size_t ihl = (size_t)(f[IP] & 0x0f) * 4;

	set_be16(f + IP + ihl + 6, ref_udp_csum(f));
}

static struct qps_frame_hdr t_hdr(void)
{
	struct qps_frame_hdr h;

	memset(&h, 0, sizeof(h));
	memcpy(h.dst_mac, t_dmac, 6);
	memcpy(h.src_mac, t_smac, 6);
	inet_pton(AF_INET, "198.18.0.1", &h.saddr);
	inet_pton(AF_INET, "198.18.0.2", &h.daddr);
	h.sport = htons(40000);
	h.dport = htons(5001);
	h.ip_id = htons(0x1234);
	h.ttl = 0;
	h.tos = 0x10;
	return h;
}

static int build(uint8_t *f, size_t payload_len)
{
	struct qps_frame_hdr h = t_hdr();
	size_t i;

	for (i = 0; i < payload_len; i++)
		f[QPS_HDRS_LEN + i] = (uint8_t)(i * 7 + 3);
	return qps_frame_build(f, &h, payload_len);
}

/* Insert @n option words after the fixed IPv4 header: NOPs and a final
 * EOL. The UDP checksum is unaffected (options are not in the pseudo
 * header); the IPv4 checksum is recomputed. Returns the new length. */
static size_t add_options(uint8_t *f, size_t len, unsigned int n)
{
	size_t olen = n * 4u, i;

	memmove(f + UDP + olen, f + UDP, len - UDP);
	for (i = 0; i < olen; i++)
		f[UDP + i] = i + 1 == olen ? 0 : 1;
	f[IP] = (uint8_t)(0x40 | (5 + n));
	set_be16(f + IP + 2, (uint16_t)(be16_at(f + IP + 2) + olen));
	fix_ip(f);
	return len + olen;
}

/* Parse a copy of @f in a heap buffer of exactly @len bytes. */
static enum qps_rx_reason parse_exact(const uint8_t *f, size_t len,
				      struct qps_frame_info *info)
{
	uint8_t *copy = malloc(len ? len : 1);
	enum qps_rx_reason r;

	CU_ASSERT_FATAL(copy != NULL);
	memcpy(copy, f, len);
	/* A zero-length frame: any read is past the end. */
	r = qps_frame_parse(len ? copy : copy + 1, len, info);
	free(copy);
	return r;
}

static void check_round_trip(size_t payload_len, unsigned int nopts)
{
	static uint8_t f[BUF_MAX];
	struct qps_frame_hdr h = t_hdr();
	struct qps_frame_info info;
	uint8_t *copy;
	int len;
	size_t i, ihl = QPS_IP_HLEN + nopts * 4u;

	len = build(f, payload_len);
	CU_ASSERT_EQUAL_FATAL(len, (int)(QPS_HDRS_LEN + payload_len));
	CU_ASSERT_EQUAL(be16_at(f + 12), 0x0800);
	CU_ASSERT_EQUAL(f[IP], 0x45);
	CU_ASSERT_EQUAL(be16_at(f + IP + 6), 0x4000); /* DF, no offset */
	CU_ASSERT_EQUAL(f[IP + 8], 64);
	CU_ASSERT_EQUAL(f[IP + 9], 17);
	CU_ASSERT_EQUAL(be16_at(f + IP + 2), QPS_IP_HLEN + QPS_UDP_HLEN +
			payload_len);
	CU_ASSERT_EQUAL(be16_at(f + IP + 10), ref_ip_csum(f));
	CU_ASSERT_EQUAL(be16_at(f + UDP + 6), ref_udp_csum(f));
	if (nopts)
		len = (int)add_options(f, (size_t)len, nopts);

	/* Parse in place, on an exact heap copy, then check the fields. */
	copy = malloc((size_t)len);
	CU_ASSERT_FATAL(copy != NULL);
	memcpy(copy, f, (size_t)len);
	memset(&info, 0, sizeof(info));
	CU_ASSERT_EQUAL_FATAL(qps_frame_parse(copy, (size_t)len, &info),
			      QPS_RX_OK);
	CU_ASSERT(!memcmp(info.hdr.dst_mac, h.dst_mac, 6));
	CU_ASSERT(!memcmp(info.hdr.src_mac, h.src_mac, 6));
	CU_ASSERT_EQUAL(info.hdr.saddr, h.saddr);
	CU_ASSERT_EQUAL(info.hdr.daddr, h.daddr);
	CU_ASSERT_EQUAL(info.hdr.sport, h.sport);
	CU_ASSERT_EQUAL(info.hdr.dport, h.dport);
	CU_ASSERT_EQUAL(info.hdr.ip_id, h.ip_id);
	CU_ASSERT_EQUAL(info.hdr.ttl, 64);
	CU_ASSERT_EQUAL(info.hdr.tos, h.tos);
	CU_ASSERT_EQUAL(info.payload_len, payload_len);
	CU_ASSERT_PTR_EQUAL(info.payload, copy + QPS_ETH_HLEN + ihl +
			    QPS_UDP_HLEN);
	for (i = 0; i < payload_len; i++)
		if (info.payload[i] != (uint8_t)(i * 7 + 3))
			break;
	CU_ASSERT_EQUAL(i, payload_len);
	free(copy);
}

static void test_round_trip(void)
{
	static const size_t sizes[] = { 0, 1, 2, 3, 7, 33, 64, 255, 1472 };
	size_t i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		check_round_trip(sizes[i], 0);
		check_round_trip(sizes[i], 1);
		check_round_trip(sizes[i], 10); /* IHL 15 */
	}
}

static void test_max_size(void)
{
	uint8_t *f = malloc(BUF_MAX);
	struct qps_frame_info info;
	struct qps_frame_hdr h = t_hdr();

	CU_ASSERT_FATAL(f != NULL);
	memset(f, 0xa5, BUF_MAX);
	CU_ASSERT_EQUAL(qps_frame_build(f, &h, 65507), QPS_HDRS_LEN + 65507);
	CU_ASSERT_EQUAL(qps_frame_parse(f, QPS_HDRS_LEN + 65507, &info),
			QPS_RX_OK);
	CU_ASSERT_EQUAL(info.payload_len, 65507);
	CU_ASSERT_EQUAL(be16_at(f + UDP + 6), ref_udp_csum(f));
	CU_ASSERT_EQUAL(qps_frame_build(f, &h, 65508), -EMSGSIZE);
	CU_ASSERT_EQUAL(qps_frame_build(f, &h, (size_t)1 << 20), -EMSGSIZE);
	free(f);
}

static void test_ttl_tos(void)
{
	uint8_t f[QPS_HDRS_LEN + 4] = { 0 };	/* payload: checksummed */
	struct qps_frame_hdr h = t_hdr();
	struct qps_frame_info info;

	h.ttl = 1;
	h.tos = 0xb8;
	CU_ASSERT_EQUAL(qps_frame_build(f, &h, 4), (int)sizeof(f));
	CU_ASSERT_EQUAL(f[IP + 8], 1);
	CU_ASSERT_EQUAL(f[IP + 1], 0xb8);
	CU_ASSERT_EQUAL(qps_frame_parse(f, sizeof(f), &info), QPS_RX_OK);
	CU_ASSERT_EQUAL(info.hdr.ttl, 1);
	CU_ASSERT_EQUAL(info.hdr.tos, 0xb8);
}

static void test_udp_csum_zero_accepted(void)
{
	uint8_t f[QPS_HDRS_LEN + 33];
	struct qps_frame_info info;

	build(f, 33);
	set_be16(f + UDP + 6, 0);
	CU_ASSERT_EQUAL(parse_exact(f, sizeof(f), &info), QPS_RX_OK);
	CU_ASSERT_EQUAL(info.payload_len, 33);
	/* Without a checksum, corrupt payload goes through (RFC 768). */
	f[QPS_HDRS_LEN] ^= 0xff;
	CU_ASSERT_EQUAL(parse_exact(f, sizeof(f), NULL), QPS_RX_OK);
}

/* A datagram whose checksum computes to 0 is sent as 0xffff. The payload
 * word is chosen to cancel the sum: with it equal to the checksum of the
 * frame built over a zero word, the new sum is all ones. */
static void test_udp_csum_ffff(void)
{
	uint8_t f[QPS_HDRS_LEN + 2];
	struct qps_frame_hdr h = t_hdr();
	uint16_t c;

	memset(f + QPS_HDRS_LEN, 0, 2);
	qps_frame_build(f, &h, 2);
	c = be16_at(f + UDP + 6);
	set_be16(f + QPS_HDRS_LEN, c);
	qps_frame_build(f, &h, 2);
	CU_ASSERT_EQUAL(be16_at(f + UDP + 6), 0xffff);
	CU_ASSERT_EQUAL(ref_udp_csum(f), 0xffff);
	CU_ASSERT_EQUAL(parse_exact(f, sizeof(f), NULL), QPS_RX_OK);
}

static void test_eth_padding(void)
{
	uint8_t f[60];
	struct qps_frame_info info;

	memset(f, 0xee, sizeof(f));
	CU_ASSERT_EQUAL(build(f, 1), QPS_HDRS_LEN + 1);
	CU_ASSERT_EQUAL(parse_exact(f, sizeof(f), &info), QPS_RX_OK);
	CU_ASSERT_EQUAL(info.payload_len, 1);
}

/* The fast checksum against the reference at every alignment and length,
 * and chained over even-length pieces. */
static void test_csum_reference(void)
{
	uint8_t buf[300];
	size_t off, len, cut, i;
	uint16_t v;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(rand() & 0xff);
	for (off = 0; off < 8; off++) {
		for (len = 0; len + off <= sizeof(buf) && len < 280; len++) {
			v = qps_csum_fold(qps_csum_partial(buf + off, len, 0));
			CU_ASSERT_EQUAL(be16_at((uint8_t *)&v),
					ref_fold(ref_sum(buf + off, len, 0)));
		}
	}
	for (cut = 0; cut <= 200; cut += 2) {
		uint32_t s = qps_csum_partial(buf, cut, 0);

		v = qps_csum_fold(qps_csum_partial(buf + cut, 201 - cut, s));
		CU_ASSERT_EQUAL(be16_at((uint8_t *)&v),
				ref_fold(ref_sum(buf, 201, 0)));
	}
	/* All-ones data: the 64-bit accumulator's carries must fold. */
	memset(buf, 0xff, sizeof(buf));
	v = qps_csum_fold(qps_csum_partial(buf, sizeof(buf), 0xffffffffu));
	CU_ASSERT_EQUAL(be16_at((uint8_t *)&v),
			ref_fold(ref_sum(buf, sizeof(buf), 0xffff) + 0xffff));
}

/* Malformed frames: each row mutates a valid frame (33-byte payload) and
 * fixes the checksums it does not mean to break, so that exactly one
 * check can reject it. */
enum mut_op { CUT, SET8, SET16, SET32, XOR8 };
enum { FIX_IP = 1, FIX_UDP = 2 };

struct bad_case {
	const char *what;
	enum mut_op op;
	size_t off;
	uint32_t val;		/* SET*: big-endian value; XOR8: mask */
	long len_delta;		/* added to the frame length */
	int fix;
	enum qps_rx_reason want;
};

#define BASE_PAYLOAD 33
#define BASE_LEN (QPS_HDRS_LEN + BASE_PAYLOAD)
#define IP_PAYLOAD (QPS_UDP_HLEN + BASE_PAYLOAD)

static const struct bad_case bad_cases[] = {
	{ "empty", CUT, 0, 0, -BASE_LEN, 0, QPS_RX_SHORT_ETH },
	{ "13 bytes", CUT, 0, 0, 13 - BASE_LEN, 0, QPS_RX_SHORT_ETH },
	{ "ipv6 ethertype", SET16, 12, 0x86dd, 0, 0, QPS_RX_NOT_IPV4 },
	{ "vlan ethertype", SET16, 12, 0x8100, 0, 0, QPS_RX_NOT_IPV4 },
	{ "arp ethertype", SET16, 12, 0x0806, 0, 0, QPS_RX_NOT_IPV4 },
	{ "ip header cut", CUT, 0, 0, IP + 19 - BASE_LEN, 0,
	  QPS_RX_SHORT_IP },
	{ "version 6", SET8, IP, 0x65, 0, FIX_IP, QPS_RX_BAD_VERSION },
	{ "version 0", SET8, IP, 0x05, 0, FIX_IP, QPS_RX_BAD_VERSION },
	{ "ihl 0", SET8, IP, 0x40, 0, 0, QPS_RX_BAD_IHL },
	{ "ihl 4", SET8, IP, 0x44, 0, 0, QPS_RX_BAD_IHL },
	{ "ihl 15 beyond frame", SET8, IP, 0x4f, IP + 59 - BASE_LEN, 0,
	  QPS_RX_BAD_IHL },
	{ "ip csum wrong", XOR8, IP + 10, 0xff, 0, 0, QPS_RX_BAD_IP_CSUM },
	{ "ttl changed, csum stale", SET8, IP + 8, 3, 0, 0,
	  QPS_RX_BAD_IP_CSUM },
	{ "total length < ihl", SET16, IP + 2, 19, 0, FIX_IP,
	  QPS_RX_BAD_TOTLEN },
	{ "total length 0", SET16, IP + 2, 0, 0, FIX_IP, QPS_RX_BAD_TOTLEN },
	{ "total length beyond frame", SET16, IP + 2,
	  QPS_IP_HLEN + IP_PAYLOAD + 1, 0, FIX_IP, QPS_RX_BAD_TOTLEN },
	{ "frame cut by one byte", CUT, 0, 0, -1, 0, QPS_RX_BAD_TOTLEN },
	{ "more fragments", SET16, IP + 6, 0x2000, 0, FIX_IP,
	  QPS_RX_FRAGMENT },
	{ "middle fragment", SET16, IP + 6, 0x2000 | 185, 0, FIX_IP,
	  QPS_RX_FRAGMENT },
	{ "last fragment", SET16, IP + 6, 185, 0, FIX_IP, QPS_RX_FRAGMENT },
	{ "source 0.0.0.0", SET32, IP + 12, 0, 0, FIX_IP | FIX_UDP,
	  QPS_RX_BAD_SADDR },
	{ "source 255.255.255.255", SET32, IP + 12, 0xffffffff, 0,
	  FIX_IP | FIX_UDP, QPS_RX_BAD_SADDR },
	{ "source 224.18.0.1", SET8, IP + 12, 224, 0, FIX_IP | FIX_UDP,
	  QPS_RX_BAD_SADDR },
	{ "source 239.18.0.1", SET8, IP + 12, 239, 0, FIX_IP | FIX_UDP,
	  QPS_RX_BAD_SADDR },
	{ "tcp", SET8, IP + 9, 6, 0, FIX_IP, QPS_RX_NOT_UDP },
	{ "icmp", SET8, IP + 9, 1, 0, FIX_IP, QPS_RX_NOT_UDP },
	{ "no udp header", SET16, IP + 2, QPS_IP_HLEN, 0, FIX_IP,
	  QPS_RX_SHORT_UDP },
	{ "7-byte udp header", SET16, IP + 2, QPS_IP_HLEN + 7, 0, FIX_IP,
	  QPS_RX_SHORT_UDP },
	{ "udp length 7", SET16, UDP + 4, 7, 0, 0, QPS_RX_BAD_UDP_LEN },
	{ "udp length 0", SET16, UDP + 4, 0, 0, 0, QPS_RX_BAD_UDP_LEN },
	{ "udp length > ip payload", SET16, UDP + 4, IP_PAYLOAD + 1, 0, 0,
	  QPS_RX_BAD_UDP_LEN },
	{ "udp length < ip payload", SET16, UDP + 4, IP_PAYLOAD - 1, 0,
	  FIX_UDP, QPS_RX_BAD_UDP_LEN },
	{ "udp csum wrong", XOR8, UDP + 7, 0x01, 0, 0, QPS_RX_BAD_UDP_CSUM },
	{ "payload corrupted", XOR8, QPS_HDRS_LEN + 5, 0xff, 0, 0,
	  QPS_RX_BAD_UDP_CSUM },
	{ "destination changed", SET8, IP + 16, 10, 0, FIX_IP,
	  QPS_RX_BAD_UDP_CSUM },
	{ "source port changed", SET16, UDP, 1, 0, 0, QPS_RX_BAD_UDP_CSUM },
};

static size_t make_bad(const struct bad_case *c, uint8_t *f)
{
	size_t len = (size_t)build(f, BASE_PAYLOAD);

	switch (c->op) {
	case CUT:
		break;
	case SET8:
		f[c->off] = (uint8_t)c->val;
		break;
	case SET16:
		set_be16(f + c->off, (uint16_t)c->val);
		break;
	case SET32:
		set_be16(f + c->off, (uint16_t)(c->val >> 16));
		set_be16(f + c->off + 2, (uint16_t)c->val);
		break;
	case XOR8:
		f[c->off] ^= (uint8_t)c->val;
		break;
	}
	if (c->fix & FIX_IP)
		fix_ip(f);
	if (c->fix & FIX_UDP)
		fix_udp(f);
	return (size_t)((long)len + c->len_delta);
}

static void test_malformed_table(void)
{
	uint8_t f[BASE_LEN + 64];
	unsigned int seen = 0;
	size_t i, n = sizeof(bad_cases) / sizeof(bad_cases[0]);
	enum qps_rx_reason r;

	CU_ASSERT(n >= 15);
	for (i = 0; i < n; i++) {
		const struct bad_case *c = &bad_cases[i];
		size_t len = make_bad(c, f);

		r = parse_exact(f, len, NULL);
		if (r != c->want)
			fprintf(stderr, "\n  case \"%s\": got %s, want %s",
				c->what, qps_rx_reason_str(r),
				qps_rx_reason_str(c->want));
		CU_ASSERT_EQUAL(r, c->want);
		seen |= 1u << c->want;
	}
	/* Every reason is exercised by at least one row. */
	CU_ASSERT_EQUAL(seen, ((1u << QPS_RX_REASON_MAX) - 1) & ~1u);
}

/* A device that checked the sums (IBV_WC_IP_CSUM_OK): every row fails
 * as before, except those whose only fault is a checksum. */
static void test_malformed_dev_ok(void)
{
	uint8_t f[BASE_LEN + 64];
	size_t i, n = sizeof(bad_cases) / sizeof(bad_cases[0]);

	for (i = 0; i < n; i++) {
		const struct bad_case *c = &bad_cases[i];
		size_t len = make_bad(c, f);
		enum qps_rx_reason want = c->want, r;
		uint8_t *copy = malloc(len ? len : 1);

		CU_ASSERT_FATAL(copy != NULL);
		memcpy(copy, f, len);
		if (want == QPS_RX_BAD_IP_CSUM || want == QPS_RX_BAD_UDP_CSUM)
			want = QPS_RX_OK;
		r = qps_frame_parse_dev_ok(len ? copy : copy + 1, len, NULL);
		if (r != want)
			fprintf(stderr, "\n  case \"%s\": got %s, want %s",
				c->what, qps_rx_reason_str(r),
				qps_rx_reason_str(want));
		CU_ASSERT_EQUAL(r, want);
		free(copy);
	}
}

/* qps_frame_build_hw: the frame qps_frame_build makes, with both checksum
 * fields 0 for the device; qpsock's own parse refuses it as it is, and
 * takes it once the device has checked it. */
static void test_build_hw(void)
{
	static const size_t sizes[] = { 0, 1, 3, 64, 1472, 65507 };
	static uint8_t f[BUF_MAX], g[BUF_MAX];
	struct qps_frame_hdr h = t_hdr();
	struct qps_frame_info info;
	size_t i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int len = build(f, sizes[i]);

		memcpy(g, f, (size_t)len);
		memset(g, 0xee, QPS_HDRS_LEN);
		CU_ASSERT_EQUAL_FATAL(qps_frame_build_hw(g, &h, sizes[i]),
				      len);
		CU_ASSERT_EQUAL(be16_at(g + IP + 10), 0);
		CU_ASSERT_EQUAL(be16_at(g + UDP + 6), 0);
		fix_ip(g);
		fix_udp(g);
		CU_ASSERT_EQUAL(memcmp(g, f, (size_t)len), 0);
		memset(g + IP + 10, 0, 2);
		memset(g + UDP + 6, 0, 2);
		CU_ASSERT_EQUAL(parse_exact(g, (size_t)len, NULL),
				QPS_RX_BAD_IP_CSUM);
		memset(&info, 0, sizeof(info));
		CU_ASSERT_EQUAL(qps_frame_parse_dev_ok(g, (size_t)len, &info),
				QPS_RX_OK);
		CU_ASSERT_EQUAL(info.payload_len, sizes[i]);
		CU_ASSERT_EQUAL(info.hdr.dport, h.dport);
	}
	CU_ASSERT_EQUAL(qps_frame_build_hw(g, &h, QPS_UDP_MAX_PAYLOAD + 1),
			-EMSGSIZE);
}

/* The frame before each mutation parses: a row fails for its own reason. */
static void test_malformed_base_valid(void)
{
	uint8_t f[BASE_LEN];

	CU_ASSERT_EQUAL(build(f, BASE_PAYLOAD), BASE_LEN);
	CU_ASSERT_EQUAL(parse_exact(f, BASE_LEN, NULL), QPS_RX_OK);
}

static void check_truncations(size_t payload_len, unsigned int nopts)
{
	static uint8_t f[QPS_HDRS_LEN + 1472 + 40];
	size_t len, cut, ihl = QPS_IP_HLEN + nopts * 4u;
	enum qps_rx_reason want;

	len = (size_t)build(f, payload_len);
	if (nopts)
		len = add_options(f, len, nopts);
	for (cut = 0; cut <= len; cut++) {
		if (cut == len)
			want = QPS_RX_OK;
		else if (cut < QPS_ETH_HLEN)
			want = QPS_RX_SHORT_ETH;
		else if (cut < QPS_ETH_HLEN + QPS_IP_HLEN)
			want = QPS_RX_SHORT_IP;
		else if (cut < QPS_ETH_HLEN + ihl)
			want = QPS_RX_BAD_IHL;
		else
			want = QPS_RX_BAD_TOTLEN;
		CU_ASSERT_EQUAL(parse_exact(f, cut, NULL), want);
	}
}

static void test_truncations(void)
{
	check_truncations(0, 0);
	check_truncations(1, 0);
	check_truncations(33, 3);
	check_truncations(1472, 0);
	check_truncations(1472, 10);
}

/* Random byte corruption of valid frames, each parsed on an exact-size
 * heap copy: any result is fine as long as nothing is read out of bounds
 * and a result is an enum value. */
static void test_random_corruption(void)
{
	uint8_t f[QPS_HDRS_LEN + 100 + 40];
	struct qps_frame_info info;
	unsigned int iter, k;
	size_t len, base;
	enum qps_rx_reason r;

	srand(12345);
	base = (size_t)build(f, 100);
	base = add_options(f, base, 2);
	for (iter = 0; iter < 20000; iter++) {
		uint8_t g[sizeof(f)];

		memcpy(g, f, base);
		for (k = 0; k < 1 + iter % 4; k++)
			g[(size_t)rand() % (QPS_HDRS_LEN + 8)] =
				(uint8_t)rand();
		len = (size_t)rand() % (base + 1);
		r = parse_exact(g, len, &info);
		CU_ASSERT((unsigned int)r < QPS_RX_REASON_MAX);
		if (r == QPS_RX_OK)
			CU_ASSERT(info.payload_len <= len);
	}
}

static void test_mcast_mac(void)
{
	static const struct {
		const char *group;
		uint8_t mac[6];
	} rows[] = {
		{ "239.1.2.3", { 0x01, 0x00, 0x5e, 0x01, 0x02, 0x03 } },
		{ "224.128.0.1", { 0x01, 0x00, 0x5e, 0x00, 0x00, 0x01 } },
		{ "224.0.0.251", { 0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb } },
		{ "239.255.255.255", { 0x01, 0x00, 0x5e, 0x7f, 0xff, 0xff } },
	};
	uint8_t mac[6];
	uint32_t g;
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		CU_ASSERT_EQUAL_FATAL(inet_pton(AF_INET, rows[i].group, &g), 1);
		qps_mcast_mac(g, mac);
		CU_ASSERT(!memcmp(mac, rows[i].mac, 6));
	}
}

static void test_reason_str(void)
{
	const char *s[QPS_RX_REASON_MAX];
	int i, j;

	for (i = 0; i < QPS_RX_REASON_MAX; i++) {
		s[i] = qps_rx_reason_str((enum qps_rx_reason)i);
		CU_ASSERT_PTR_NOT_NULL_FATAL(s[i]);
		CU_ASSERT(strcmp(s[i], "unknown") != 0);
		for (j = 0; j < i; j++)
			CU_ASSERT(strcmp(s[i], s[j]) != 0);
	}
	CU_ASSERT_STRING_EQUAL(qps_rx_reason_str(QPS_RX_REASON_MAX),
			       "unknown");
	CU_ASSERT_STRING_EQUAL(qps_rx_reason_str((enum qps_rx_reason)-1),
			       "unknown");
}

static CU_TestInfo frames_tests[] = {
	{ "round trip (sizes, IP options)", test_round_trip },
	{ "largest datagram, -EMSGSIZE", test_max_size },
	{ "ttl and tos", test_ttl_tos },
	{ "udp checksum 0 accepted", test_udp_csum_zero_accepted },
	{ "udp checksum 0 sent as 0xffff", test_udp_csum_ffff },
	{ "ethernet padding", test_eth_padding },
	{ "checksum vs reference", test_csum_reference },
	{ "malformed base frame is valid", test_malformed_base_valid },
	{ "malformed frames table", test_malformed_table },
	{ "malformed frames, sums checked by the device",
	  test_malformed_dev_ok },
	{ "frames for a device that sums them", test_build_hw },
	{ "every truncation", test_truncations },
	{ "random corruption, exact buffers", test_random_corruption },
	{ "multicast mac", test_mcast_mac },
	{ "reason strings", test_reason_str },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	return t_run("frames", frames_tests);
}
