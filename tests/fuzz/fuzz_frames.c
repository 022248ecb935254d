// SPDX-License-Identifier: MIT
/*
 * fuzz_frames: the receive-side parsers, of Ethernet frames (src/frames.c)
 * and of UD receive buffers (src/ud_frame.c).
 *
 * Input: one mode byte, then the frame. Bit 0x80 picks the parser: clear
 * (every seed from before the UD parser) the frame parser, set the UD one.
 *
 * Frame parser: mode bits let the fuzzer get past the checksums it cannot
 * guess: 1 fixes the IPv4 header checksum, 2 the UDP checksum, 4 forces
 * EtherType IPv4 and version 4; 8 also checks qps_csum_partial against a
 * plain big-endian sum over the raw input.
 *
 * UD parser (the buffer is GRH + UD header + payload): 1 makes the GRH a
 * well-formed RoCE v2 one (20 zero bytes, IPv4 version/IHL and protocol),
 * 2 gives it the IPv6 version instead (1 wins if both are set), 16 and 32
 * make its source and destination GIDs IPv4-mapped (each on its own, so
 * one good GID with one bad is a bit flip away), 4 writes the magic and a
 * payload length that matches the buffer, 8 clears the flags. What the
 * bits do not touch stays the fuzzer's.
 *
 * Checked for every input: the parser reads nothing outside the frame
 * (an exact-size heap copy under ASan), its verdict equals the one of an
 * independent reference classifier written from the rules in frames.h,
 * and an accepted frame's fields and payload lie inside the buffer and
 * match its bytes; a frame rebuilt from them parses back identically.
 */
#include "fuzz_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "ud.h"

#define MODE_FIX_IP 1u
#define MODE_FIX_UDP 2u
#define MODE_FORCE_IP4 4u
#define MODE_CSUM 8u

#define MODE_UD 0x80u
#define MODE_UD_ROCE2 1u
#define MODE_UD_GRH6 2u
#define MODE_UD_LEN 4u
#define MODE_UD_FLAGS 8u
#define MODE_UD_SGID 16u
#define MODE_UD_DGID 32u

static unsigned int be16(const uint8_t *p)
{
	return (unsigned int)p[0] << 8 | p[1];
}

/* One's complement sum of big-endian words, odd byte padded: the textbook
 * form of RFC 1071, deliberately unlike the library's word-at-a-time one. */
static uint32_t ref_sum(const uint8_t *p, size_t len, uint32_t sum)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += be16(p + i);
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

static uint32_t ref_pseudo(const uint8_t *ip, unsigned int udp_len)
{
	uint32_t sum = 0;

	sum += be16(ip + 12) + be16(ip + 14) + be16(ip + 16) + be16(ip + 18);
	sum += 17 + udp_len;
	return sum;
}

static int ref_bad_saddr(const uint8_t *a)
{
	return (a[0] & 0xf0) == 0xe0 ||
	       (a[0] == 0 && a[1] == 0 && a[2] == 0 && a[3] == 0) ||
	       (a[0] == 255 && a[1] == 255 && a[2] == 255 && a[3] == 255);
}

/* The documented checks in the documented order (frames.c). */
static enum qps_rx_reason ref_classify(const uint8_t *f, size_t len)
{
	const uint8_t *ip = f + 14, *udp;
	size_t ihl, tot, ulen;

	if (len < 14)
		return QPS_RX_SHORT_ETH;
	if (be16(f + 12) != 0x0800)
		return QPS_RX_NOT_IPV4;
	if (len - 14 < 20)
		return QPS_RX_SHORT_IP;
	if (ip[0] >> 4 != 4)
		return QPS_RX_BAD_VERSION;
	ihl = (size_t)(ip[0] & 15) * 4;
	if (ihl < 20 || ihl > len - 14)
		return QPS_RX_BAD_IHL;
	if (ref_sum(ip, ihl, 0) != 0xffff)
		return QPS_RX_BAD_IP_CSUM;
	tot = be16(ip + 2);
	if (tot < ihl || tot > len - 14)
		return QPS_RX_BAD_TOTLEN;
	if (ref_bad_saddr(ip + 12))
		return QPS_RX_BAD_SADDR;
	if (ip[9] != 17)
		return QPS_RX_NOT_UDP;
	if (be16(ip + 6) & 0x3fff)
		return QPS_RX_FRAGMENT;
	if (tot - ihl < 8)
		return QPS_RX_SHORT_UDP;
	udp = ip + ihl;
	ulen = be16(udp + 4);
	if (ulen < 8 || ulen != tot - ihl)
		return QPS_RX_BAD_UDP_LEN;
	if (be16(udp + 6) != 0 &&
	    ref_sum(udp, ulen, ref_pseudo(ip, (unsigned int)ulen)) != 0xffff)
		return QPS_RX_BAD_UDP_CSUM;
	return QPS_RX_OK;
}

static void fix_checksums(uint8_t *f, size_t len, unsigned int mode)
{
	uint8_t *ip = f + 14, *udp;
	size_t ihl, ulen;
	uint16_t c;

	if (len < 14 + 20)
		return;
	if (mode & MODE_FORCE_IP4) {
		f[12] = 0x08;
		f[13] = 0x00;
		ip[0] = (uint8_t)(0x40 | (ip[0] & 15));
	}
	ihl = (size_t)(ip[0] & 15) * 4;
	if (ihl < 20 || ihl > len - 14)
		return;
	if (mode & MODE_FIX_IP) {
		ip[10] = ip[11] = 0;
		c = (uint16_t)~ref_sum(ip, ihl, 0);
		ip[10] = (uint8_t)(c >> 8);
		ip[11] = (uint8_t)c;
	}
	if (!(mode & MODE_FIX_UDP) || len - 14 - ihl < 8)
		return;
	udp = ip + ihl;
	ulen = be16(udp + 4);
	if (ulen < 8 || ulen > len - 14 - ihl)
		return;
	udp[6] = udp[7] = 0;
	c = (uint16_t)~ref_sum(udp, ulen, ref_pseudo(ip, (unsigned int)ulen));
	if (c == 0)
		c = 0xffff;
	udp[6] = (uint8_t)(c >> 8);
	udp[7] = (uint8_t)c;
}

static void check_accepted(const uint8_t *f, size_t len,
			   const struct qps_frame_info *fi)
{
	const uint8_t *ip = f + 14;
	size_t ihl = (size_t)(ip[0] & 15) * 4;
	const uint8_t *udp = ip + ihl;
	const struct qps_frame_hdr *h = &fi->hdr;
	struct qps_frame_info again;
	struct qps_frame_hdr want;
	uint8_t *rebuilt;
	int n;

	/* Payload inside the buffer, where the headers say. */
	FUZZ_CHECK(fi->payload == udp + 8);
	FUZZ_CHECK(fi->payload_len == be16(udp + 4) - 8u);
	FUZZ_CHECK((size_t)(fi->payload - f) + fi->payload_len <= len);
	FUZZ_CHECK(14 + (size_t)be16(ip + 2) <= len);
	/* Fields are the frame's bytes. */
	FUZZ_CHECK(!memcmp(h->dst_mac, f, 6) && !memcmp(h->src_mac, f + 6, 6));
	FUZZ_CHECK(!memcmp(&h->saddr, ip + 12, 4) &&
		   !memcmp(&h->daddr, ip + 16, 4));
	FUZZ_CHECK(!memcmp(&h->sport, udp, 2) && !memcmp(&h->dport, udp + 2, 2));
	FUZZ_CHECK(!memcmp(&h->ip_id, ip + 4, 2));
	FUZZ_CHECK(h->ttl == ip[8] && h->tos == ip[1]);

	/* Build the same datagram again: it parses back to the same fields
	 * (a TTL of 0 is sent as the default 64). */
	rebuilt = malloc(QPS_HDRS_LEN + fi->payload_len);
	if (!rebuilt)
		abort();
	memcpy(rebuilt + QPS_HDRS_LEN, fi->payload, fi->payload_len);
	n = qps_frame_build(rebuilt, h, fi->payload_len);
	FUZZ_CHECK(n == (int)(QPS_HDRS_LEN + fi->payload_len));
	FUZZ_CHECK(qps_frame_parse(rebuilt, (size_t)n, &again) == QPS_RX_OK);
	want = *h;
	if (!want.ttl)
		want.ttl = 64;
	FUZZ_CHECK(!memcmp(&again.hdr, &want, sizeof(want)));
	FUZZ_CHECK(again.payload_len == fi->payload_len);
	FUZZ_CHECK(!memcmp(again.payload, fi->payload, fi->payload_len));
	FUZZ_CHECK(ref_classify(rebuilt, (size_t)n) == QPS_RX_OK);
	free(rebuilt);
}

/* The library's sum, whole and chained at an even split, against the
 * reference; both fold to the same 16 bits stored in memory order. */
static void check_csum(const uint8_t *data, size_t len)
{
	size_t split = len / 2 & ~(size_t)1;
	uint32_t ref = ref_sum(data, len, 0);
	uint16_t lib, chained, want;
	uint8_t w[2];

	lib = qps_csum_fold(qps_csum_partial(data, len, 0));
	chained = qps_csum_fold(qps_csum_partial(data + split, len - split,
				qps_csum_partial(data, split, 0)));
	want = (uint16_t)~ref;
	w[0] = (uint8_t)(want >> 8);
	w[1] = (uint8_t)want;
	FUZZ_CHECK(!memcmp(&lib, w, 2));
	FUZZ_CHECK(lib == chained);
}

/* --- the UD parser ------------------------------------------------------ */

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static int ref_mapped(const uint8_t *gid)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					 0xff, 0xff };

	return !memcmp(gid, pfx, sizeof(pfx));
}

/* The rules of ud.h / ud_frame.c, checked in their own order: the GRH
 * first (-EPROTO), then the UD header (-EBADMSG). @sa gets the source. */
static int ref_ud_classify(const uint8_t *b, size_t len, const uint8_t **sa)
{
	static const uint8_t zero[20];
	const uint8_t *ud = b + 40;
	size_t left;

	if (len < 40)
		return -EPROTO;
	if (!memcmp(b, zero, 20)) {
		if (b[20] != 0x45 || b[29] != 17)
			return -EPROTO;
		*sa = b + 32;
	} else if (b[0] >> 4 == 6) {
		if (!ref_mapped(b + 8) || !ref_mapped(b + 24))
			return -EPROTO;
		*sa = b + 20;
	} else {
		return -EPROTO;
	}
	if (ref_bad_saddr(*sa))
		return -EPROTO;
	left = len - 40;
	if (left < 12 || ud[0] != QPS_UD_MAGIC || ud[1] != 0 ||
	    be16(ud + 2) != left - 12 || ud[8] != 0)
		return -EBADMSG;
	return 0;
}

static void ud_fix(uint8_t *b, size_t len, unsigned int mode)
{
	if (len >= 40 && (mode & MODE_UD_ROCE2)) {
		memset(b, 0, 20);
		b[20] = 0x45;
		b[29] = 17;
	} else if (len >= 40 && (mode & MODE_UD_GRH6)) {
		b[0] = (uint8_t)(0x60 | (b[0] & 15));
	}
	if (len >= 40 && (mode & MODE_UD_SGID)) {
		memset(b + 8, 0, 10);
		b[18] = b[19] = 0xff;
	}
	if (len >= 40 && (mode & MODE_UD_DGID)) {
		memset(b + 24, 0, 10);
		b[34] = b[35] = 0xff;
	}
	if (len < 52)
		return;
	if (mode & MODE_UD_LEN) {
		b[40] = QPS_UD_MAGIC;
		b[42] = (uint8_t)((len - 52) >> 8);
		b[43] = (uint8_t)(len - 52);
	}
	if (mode & MODE_UD_FLAGS)
		b[41] = 0;
}

static void ud_check_accepted(const uint8_t *b, size_t len,
			      const struct qps_frame_info *fi, uint32_t qpn,
			      const uint8_t *sa)
{
	const uint8_t *ud = b + 40, *da = b + 36;
	struct qps_ud_hdr_info h;
	struct qps_frame_info again;
	uint32_t qpn2;
	uint8_t *rebuilt;
	int n;

	/* The destination is at byte 36 in both GRH formats (rx.c relies
	 * on it for PKTINFO). */
	FUZZ_CHECK(!memcmp(&fi->hdr.saddr, sa, 4));
	FUZZ_CHECK(!memcmp(&fi->hdr.daddr, da, 4));
	FUZZ_CHECK(!memcmp(&fi->hdr.sport, ud + 4, 2));
	FUZZ_CHECK(!memcmp(&fi->hdr.dport, ud + 6, 2));
	FUZZ_CHECK(qpn == be32(ud + 8) && qpn <= QPS_UD_QPN_MASK);
	FUZZ_CHECK(fi->payload == ud + 12);
	FUZZ_CHECK(fi->payload_len == len - 52);

	/* The same header built again, behind the same GRH, parses back
	 * to the same fields. */
	rebuilt = malloc(len);
	if (!rebuilt)
		abort();
	memcpy(rebuilt, b, len);
	h.sport = fi->hdr.sport;
	h.dport = fi->hdr.dport;
	h.src_qpn = qpn;
	n = qps_ud_hdr_build(rebuilt + 40, &h, fi->payload_len);
	FUZZ_CHECK(n == (int)(len - 40));
	FUZZ_CHECK(!memcmp(rebuilt, b, len));
	FUZZ_CHECK(qps_ud_parse(rebuilt, (uint32_t)len, &again, &qpn2) == 0);
	FUZZ_CHECK(qpn2 == qpn);
	FUZZ_CHECK(!memcmp(&again.hdr, &fi->hdr, sizeof(fi->hdr)));
	free(rebuilt);
}

static void ud_one(const uint8_t *data, size_t len, unsigned int mode)
{
	struct qps_frame_info fi;
	const uint8_t *sa = NULL;
	uint32_t qpn = 0xa5a5a5a5u;
	uint8_t *b = fuzz_dup(data, len);
	int r, want;

	ud_fix(b, len, mode);
	memset(&fi, 0xa5, sizeof(fi));
	r = qps_ud_parse(b, (uint32_t)len, &fi, &qpn);
	want = ref_ud_classify(b, len, &sa);
	FUZZ_CHECK(r == want);
	FUZZ_CHECK(qps_ud_parse(b, (uint32_t)len, NULL, NULL) == r);
	if (r == 0)
		ud_check_accepted(b, len, &fi, qpn, sa);
	fuzz_free(b);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct qps_frame_info fi, fi2;
	enum qps_rx_reason r, r2;
	unsigned int mode;
	uint8_t *f;
	size_t len;

	if (size < 1)
		return 0;
	mode = data[0];
	len = size - 1;
	/* The UD parser takes a uint32_t length: bigger inputs are not
	 * buffers a device writes. */
	if (mode & MODE_UD) {
		if (len <= UINT32_MAX)
			ud_one(data + 1, len, mode);
		return 0;
	}
	if (mode & MODE_CSUM)
		check_csum(data + 1, len);
	f = fuzz_dup(data + 1, len);
	fix_checksums(f, len, mode);

	memset(&fi, 0xa5, sizeof(fi));
	r = qps_frame_parse(f, len, &fi);
	FUZZ_CHECK((unsigned int)r < QPS_RX_REASON_MAX);
	FUZZ_CHECK(strcmp(qps_rx_reason_str(r), "unknown") != 0);
	FUZZ_CHECK(r == ref_classify(f, len));
	FUZZ_CHECK(qps_frame_parse(f, len, NULL) == r);
	if (r == QPS_RX_OK)
		check_accepted(f, len, &fi);
	/* The parse for sums the device checked: the same verdict, except
	 * that a checksum is never what it rejects (it may then find a
	 * later fault the sum had hidden), and the same fields when both
	 * accept. Reads stay inside the exact buffer as well. */
	memset(&fi2, 0xa5, sizeof(fi2));
	r2 = qps_frame_parse_dev_ok(f, len, &fi2);
	FUZZ_CHECK((unsigned int)r2 < QPS_RX_REASON_MAX);
	FUZZ_CHECK(r2 != QPS_RX_BAD_IP_CSUM && r2 != QPS_RX_BAD_UDP_CSUM);
	if (r != QPS_RX_BAD_IP_CSUM && r != QPS_RX_BAD_UDP_CSUM)
		FUZZ_CHECK(r2 == r);
	if (r == QPS_RX_OK)
		FUZZ_CHECK(memcmp(&fi, &fi2, sizeof(fi)) == 0);
	fuzz_free(f);
	return 0;
}

/* --- seeds ------------------------------------------------------------- */

static int seed_frame(const char *dir, const char *name, unsigned int mode,
		      size_t payload, size_t pad, uint16_t frag, uint8_t proto)
{
	struct qps_frame_hdr h = {
		.dst_mac = { 0x02, 0x51, 0x50, 0, 0, 1 },
		.src_mac = { 0x02, 0x51, 0x50, 0, 0, 2 },
		.sport = htons(40000),
		.dport = htons(9000),
		.ip_id = htons(7),
	};
	uint8_t buf[1 + QPS_HDRS_LEN + 1500 + 16];
	size_t i;
	int n;

	h.saddr = htonl(0xc6120002);
	h.daddr = htonl(0xc6120001);
	for (i = 0; i < payload; i++)
		buf[1 + QPS_HDRS_LEN + i] = (uint8_t)(i * 31);
	n = qps_frame_build(buf + 1, &h, payload);
	if (n < 0)
		return n;
	buf[0] = (uint8_t)mode;
	buf[1 + 14 + 6] = (uint8_t)(frag >> 8);
	buf[1 + 14 + 7] = (uint8_t)frag;
	buf[1 + 14 + 9] = proto;
	memset(buf + 1 + n, 0, pad);
	return fuzz_write_seed(dir, name, buf, 1 + (size_t)n + pad);
}

/* A valid UD receive buffer behind either GRH, then @mode as given (so a
 * seed with no fix bits stays exactly as written). */
static int seed_ud(const char *dir, const char *name, unsigned int mode,
		   bool v6, size_t payload, int damage_off, uint8_t damage)
{
	struct qps_ud_hdr_info h = {
		.sport = htons(40000), .dport = htons(9000),
		.src_qpn = 0x10203,
	};
	uint8_t buf[1 + 40 + 12 + 256];
	uint8_t *b = buf + 1;
	size_t i;
	int n;

	memset(buf, 0, sizeof(buf));
	buf[0] = (uint8_t)(MODE_UD | mode);
	if (v6) {
		b[0] = 0x60;
		b[7] = 64;
		b[18] = b[19] = 0xff;
		b[34] = b[35] = 0xff;
		memcpy(b + 20, "\xc6\x12\x00\x02", 4);
		memcpy(b + 36, "\xef\x01\x01\x01", 4);
	} else {
		b[20] = 0x45;
		b[28] = 64;
		b[29] = 17;
		memcpy(b + 32, "\xc6\x12\x00\x02", 4);
		memcpy(b + 36, "\xc6\x12\x00\x01", 4);
	}
	for (i = 0; i < payload; i++)
		b[52 + i] = (uint8_t)(i * 13);
	n = qps_ud_hdr_build(b + 40, &h, payload);
	if (n < 0)
		return n;
	if (damage_off >= 0)
		b[damage_off] = damage;
	return fuzz_write_seed(dir, name, buf, 1 + 40 + (size_t)n);
}

int fuzz_make_corpus(const char *dir)
{
	static const uint8_t short_eth[] = { 0, 1, 2, 3 };
	int r = 0;

	r |= seed_ud(dir, "ud-roce2", 0, false, 18, -1, 0);
	r |= seed_ud(dir, "ud-grh6-mcast", 0, true, 33, -1, 0);
	r |= seed_ud(dir, "ud-empty-fixlen", MODE_UD_LEN | MODE_UD_ROCE2,
		     false, 0, -1, 0);
	r |= seed_ud(dir, "ud-256-fixall", MODE_UD_ROCE2 | MODE_UD_LEN |
		     MODE_UD_FLAGS, false, 256, -1, 0);
	r |= seed_ud(dir, "ud-bad-magic", 0, false, 8, 40, 0x52);
	r |= seed_ud(dir, "ud-bad-grh", 0, false, 8, 3, 1);
	r |= seed_ud(dir, "ud-grh6-fixall", MODE_UD_GRH6 | MODE_UD_SGID |
		     MODE_UD_DGID | MODE_UD_LEN | MODE_UD_FLAGS, true, 5,
		     -1, 0);

	r |= seed_frame(dir, "udp-empty", MODE_FIX_IP | MODE_FIX_UDP, 0, 0,
			0x4000, 17);
	r |= seed_frame(dir, "udp-18", MODE_FIX_IP | MODE_FIX_UDP, 18, 0,
			0x4000, 17);
	r |= seed_frame(dir, "udp-1472", MODE_FIX_IP | MODE_FIX_UDP, 1472, 0,
			0x4000, 17);
	r |= seed_frame(dir, "udp-padded", MODE_FIX_IP | MODE_FIX_UDP, 3, 16,
			0x4000, 17);
	r |= seed_frame(dir, "udp-nofix", 0, 33, 0, 0x4000, 17);
	r |= seed_frame(dir, "fragment", MODE_FIX_IP, 40, 0, 0x2000, 17);
	r |= seed_frame(dir, "not-udp", MODE_FIX_IP, 40, 0, 0x4000, 6);
	r |= seed_frame(dir, "csum-diff", MODE_CSUM | MODE_FIX_IP, 61, 0,
			0x4000, 17);
	r |= fuzz_write_seed(dir, "short-eth", short_eth, sizeof(short_eth));
	return r;
}
