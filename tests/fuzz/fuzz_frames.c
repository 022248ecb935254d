// SPDX-License-Identifier: MIT
/*
 * fuzz_frames: the receive-side frame parser (src/frames.c).
 *
 * Input: one mode byte, then the frame. Mode bits let the fuzzer get past
 * the checksums it cannot guess: 1 fixes the IPv4 header checksum, 2 the
 * UDP checksum, 4 forces EtherType IPv4 and version 4; 8 also checks
 * qps_csum_partial against a plain big-endian sum over the raw input.
 *
 * Checked for every input: the parser reads nothing outside the frame
 * (an exact-size heap copy under ASan), its verdict equals the one of an
 * independent reference classifier written from the rules in frames.h,
 * and an accepted frame's fields and payload lie inside the buffer and
 * match its bytes; a frame rebuilt from them parses back identically.
 */
#include "fuzz_util.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"

#define MODE_FIX_IP 1u
#define MODE_FIX_UDP 2u
#define MODE_FORCE_IP4 4u
#define MODE_CSUM 8u

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
	if (be16(ip + 6) & 0x3fff)
		return QPS_RX_FRAGMENT;
	if (ref_bad_saddr(ip + 12))
		return QPS_RX_BAD_SADDR;
	if (ip[9] != 17)
		return QPS_RX_NOT_UDP;
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

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct qps_frame_info fi;
	enum qps_rx_reason r;
	unsigned int mode;
	uint8_t *f;
	size_t len;

	if (size < 1)
		return 0;
	mode = data[0];
	len = size - 1;
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

int fuzz_make_corpus(const char *dir)
{
	static const uint8_t short_eth[] = { 0, 1, 2, 3 };
	int r = 0;

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
