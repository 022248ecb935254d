// SPDX-License-Identifier: MIT
/*
 * Ethernet II / IPv4 / UDP frames. Every multi-byte field is read and
 * written through memcpy: frames sit in receive buffers at any offset, and
 * this keeps the code free of alignment and strict-aliasing assumptions.
 */
#include "frames.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/*
 * The one's complement sum is the same whatever the byte order as long as
 * words are loaded and the result stored in the same (memory) order
 * (RFC 1071, 2.B), so words are summed as they lie in memory and the folded
 * result is stored back with memcpy. It is also the same whatever the word
 * width, as long as every carry out of the top is added back in (2^64 and
 * 2^32 are both 1 modulo 2^16 - 1): 64-bit words with the end-around carry,
 * folded to 32 bits at the end. Chained calls must pass even lengths except
 * for the last chunk.
 */
static inline uint64_t qps_csum_add64(uint64_t acc, uint64_t w)
{
	acc += w;
	return acc + (acc < w);
}

/* The words after the last whole 64-bit one, as qps_csum_partial adds
 * them; @n < 8. */
static uint64_t qps_csum_tail(uint64_t acc, const uint8_t *p, size_t n)
{
	uint32_t w;
	uint16_t h;

	if (n >= 4) {
		memcpy(&w, p, 4);
		acc = qps_csum_add64(acc, w);
		p += 4;
		n -= 4;
	}
	if (n >= 2) {
		memcpy(&h, p, 2);
		acc = qps_csum_add64(acc, h);
		p += 2;
		n -= 2;
	}
	if (n) {
		/* The odd byte is the first byte of a zero-padded word. */
		uint8_t tail[2] = { p[0], 0 };

		memcpy(&h, tail, 2);
		acc = qps_csum_add64(acc, h);
	}
	return acc;
}

static uint32_t qps_csum_fold64(uint64_t acc)
{
	acc = (acc & 0xffffffffu) + (acc >> 32);
	acc = (acc & 0xffffffffu) + (acc >> 32);
	return (uint32_t)acc;
}

uint32_t qps_csum_partial(const void *buf, size_t len, uint32_t sum)
{
	const uint8_t *p = buf;
	uint64_t acc = sum, w;

	while (len >= sizeof(w)) {
		memcpy(&w, p, sizeof(w));
		acc = qps_csum_add64(acc, w);
		p += sizeof(w);
		len -= sizeof(w);
	}
	return qps_csum_fold64(qps_csum_tail(acc, p, len));
}

uint32_t qps_csum_copy(void *dst, const void *src, size_t len, uint32_t sum)
{
	const uint8_t *s = src;
	uint8_t *d = dst;
	uint64_t acc = sum, w;

	while (len >= sizeof(w)) {
		memcpy(&w, s, sizeof(w));
		memcpy(d, &w, sizeof(w));
		acc = qps_csum_add64(acc, w);
		s += sizeof(w);
		d += sizeof(w);
		len -= sizeof(w);
	}
	/* A zero-length datagram may come with a NULL buffer. */
	if (len)
		memcpy(d, s, len);
	return qps_csum_fold64(qps_csum_tail(acc, d, len));
}

/* Fold to 16 bits and complement: the value to store, in memory order. A
 * buffer that includes a correct checksum folds to 0. */
uint16_t qps_csum_fold(uint32_t sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* Sum of the UDP pseudo header (@saddr and @daddr in network order):
 * its words added as numbers, as they would lie in memory, instead of
 * being laid out and read back. */
static uint32_t udp_pseudo_sum(uint32_t saddr, uint32_t daddr,
			       uint16_t udp_len)
{
	uint8_t w[4];
	uint32_t proto_len;

	w[0] = 0;
	w[1] = QPS_IPPROTO_UDP;
	qps_be16_put(w + 2, udp_len);
	memcpy(&proto_len, w, 4);
	return qps_csum_fold64((uint64_t)saddr + daddr + proto_len);
}

static void eth_hdr_build(uint8_t *eth, const struct qps_frame_hdr *h)
{
	memcpy(eth, h->dst_mac, 6);
	memcpy(eth + 6, h->src_mac, 6);
	qps_be16_put(eth + 12, QPS_ETH_P_IP);
}

/* ip_id is stored as given: like the addresses, it is in network order.
 * @frag is the flags and offset field (host order). */
static inline __attribute__((always_inline)) void
ip_hdr_build(uint8_t *ip, const struct qps_frame_hdr *h, uint16_t tot_len,
	     uint16_t frag, bool sw_sum)
{
	uint8_t ttl = h->ttl ? h->ttl : QPS_IP_DEFAULT_TTL;
	uint16_t csum;
	uint64_t sum;

	ip[QPS_IPOFF_VHL] = 0x45;
	ip[QPS_IPOFF_TOS] = h->tos;
	qps_be16_put(ip + QPS_IPOFF_TOTLEN, tot_len);
	memcpy(ip + QPS_IPOFF_ID, &h->ip_id, 2);
	qps_be16_put(ip + QPS_IPOFF_FRAG, frag);
	ip[QPS_IPOFF_TTL] = ttl;
	ip[QPS_IPOFF_PROTO] = QPS_IPPROTO_UDP;
	memset(ip + QPS_IPOFF_CSUM, 0, 2);
	memcpy(ip + QPS_IPOFF_SADDR, &h->saddr, 4);
	memcpy(ip + QPS_IPOFF_DADDR, &h->daddr, 4);
	if (!sw_sum)
		return;
	/* The header's words from the values just stored, as they lie in
	 * memory (htons of a big-endian field), not read back: wide loads
	 * of bytes stored a moment ago would wait for the stores. */
	sum = (uint64_t)htons((uint16_t)(0x4500 | h->tos)) + htons(tot_len) +
	      h->ip_id + htons(frag) +
	      htons((uint16_t)(ttl << 8 | QPS_IPPROTO_UDP)) + h->saddr +
	      h->daddr;
	csum = qps_csum_fold(qps_csum_fold64(sum));
	memcpy(ip + QPS_IPOFF_CSUM, &csum, 2);
}

/* The UDP checksum covers the pseudo header, the UDP header and the
 * payload, whose sum the caller has; without @sw_sum the field stays 0
 * for the device. */
static inline __attribute__((always_inline)) void
udp_hdr_fill(uint8_t *udp, const struct qps_frame_hdr *h, size_t payload_len,
	     uint32_t payload_sum, bool sw_sum)
{
	uint16_t udp_len = (uint16_t)(QPS_UDP_HLEN + payload_len);
	uint16_t csum;
	uint64_t sum;

	memcpy(udp + QPS_UDPOFF_SPORT, &h->sport, 2);
	memcpy(udp + QPS_UDPOFF_DPORT, &h->dport, 2);
	qps_be16_put(udp + QPS_UDPOFF_LEN, udp_len);
	memset(udp + QPS_UDPOFF_CSUM, 0, 2);
	if (!sw_sum)
		return;
	/* Pseudo header, then the UDP header's words (checksum 0), from
	 * their values as above. */
	sum = (uint64_t)udp_pseudo_sum(h->saddr, h->daddr, udp_len) +
	      payload_sum + h->sport + h->dport + htons(udp_len);
	csum = qps_csum_fold(qps_csum_fold64(sum));
	/* 0 on the wire means "no checksum" (RFC 768). */
	if (csum == 0)
		csum = 0xffff;
	memcpy(udp + QPS_UDPOFF_CSUM, &csum, 2);
}

void qps_udp_hdr_build(void *udp_hdr, const struct qps_frame_hdr *h,
		       size_t payload_len, uint32_t payload_sum)
{
	udp_hdr_fill(udp_hdr, h, payload_len, payload_sum, true);
}

static inline __attribute__((always_inline)) int
frame_build(void *frame, const struct qps_frame_hdr *h, size_t payload_len,
	    uint32_t payload_sum, bool sw_sum)
{
	uint8_t *eth = frame;

	if (payload_len > QPS_UDP_MAX_PAYLOAD)
		return -EMSGSIZE;
	eth_hdr_build(eth, h);
	ip_hdr_build(eth + QPS_ETH_HLEN, h,
		     (uint16_t)(QPS_IP_HLEN + QPS_UDP_HLEN + payload_len),
		     QPS_IP_DF, sw_sum);
	udp_hdr_fill(eth + QPS_ETH_HLEN + QPS_IP_HLEN, h, payload_len,
		     payload_sum, sw_sum);
	return (int)(QPS_HDRS_LEN + payload_len);
}

int qps_frame_build_sum(void *frame, const struct qps_frame_hdr *h,
			size_t payload_len, uint32_t payload_sum)
{
	return frame_build(frame, h, payload_len, payload_sum, true);
}

int qps_frame_build_hw(void *frame, const struct qps_frame_hdr *h,
		       size_t payload_len)
{
	return frame_build(frame, h, payload_len, 0, false);
}

/* Fragments leave without DF, as the kernel's do: a router may split
 * them further. */
int qps_frame_build_frag(void *frame, const struct qps_frame_hdr *h,
			 size_t ip_len, size_t ip_off, bool more)
{
	uint8_t *eth = frame;

	if ((ip_off & 7) || (more && (ip_len & 7)) ||
	    ip_off + ip_len > QPS_IP_MAX_TOTLEN - QPS_IP_HLEN)
		return -EINVAL;
	eth_hdr_build(eth, h);
	ip_hdr_build(eth + QPS_ETH_HLEN, h, (uint16_t)(QPS_IP_HLEN + ip_len),
		     (uint16_t)((more ? QPS_IP_MF : 0) | ip_off >> 3), true);
	return (int)(QPS_ETH_HLEN + QPS_IP_HLEN + ip_len);
}

int qps_frame_build(void *frame, const struct qps_frame_hdr *h,
		    size_t payload_len)
{
	const uint8_t *payload = (const uint8_t *)frame + QPS_HDRS_LEN;

	if (payload_len > QPS_UDP_MAX_PAYLOAD)
		return -EMSGSIZE;
	return qps_frame_build_sum(frame, h, payload_len,
				   qps_csum_partial(payload, payload_len, 0));
}

static inline __attribute__((always_inline)) bool
bad_saddr(const uint8_t *a)
{
	static const uint8_t zero[4], bcast[4] = { 255, 255, 255, 255 };

	return (a[0] & 0xf0) == 0xe0 || !memcmp(a, zero, 4) ||
	       !memcmp(a, bcast, 4);
}

static inline uint32_t be32_load(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

/* The EtherType and the IPv4 version and header length of a frame with
 * no IPv4 options: 0x0800 then 0x45, as one big-endian 24-bit value. */
#define QPS_ETH_IP_VHL5 0x080045u

/* The headers up to the IPv4 header length, checked one by one: a frame
 * that is not plain IPv4 without options, or too short for it. */
static enum qps_rx_reason frame_parse_head(const uint8_t *eth, size_t len,
					   size_t *ihl)
{
	const uint8_t *ip = eth + QPS_ETH_HLEN;

	if (len < QPS_ETH_HLEN)
		return QPS_RX_SHORT_ETH;
	if (qps_be16_get(eth + 12) != QPS_ETH_P_IP)
		return QPS_RX_NOT_IPV4;
	len -= QPS_ETH_HLEN;
	if (len < QPS_IP_HLEN)
		return QPS_RX_SHORT_IP;
	if (ip[QPS_IPOFF_VHL] >> 4 != 4)
		return QPS_RX_BAD_VERSION;
	*ihl = (size_t)(ip[QPS_IPOFF_VHL] & 0x0f) * 4;
	if (*ihl < QPS_IP_HLEN || *ihl > len)
		return QPS_RX_BAD_IHL;
	return QPS_RX_OK;
}

/* Fields that lie next to each other in the frame and in the header, so
 * that each group is copied at once. */
_Static_assert(offsetof(struct qps_frame_hdr, src_mac) ==
		       offsetof(struct qps_frame_hdr, dst_mac) + 6 &&
	       offsetof(struct qps_frame_hdr, daddr) ==
		       offsetof(struct qps_frame_hdr, saddr) + 4 &&
	       offsetof(struct qps_frame_hdr, dport) ==
		       offsetof(struct qps_frame_hdr, sport) + 2,
	       "qps_frame_hdr no longer mirrors the frame's field order");

/*
 * Each check guards the reads of the next one, so no byte outside
 * [frame, frame + len) is ever read. The IPv4 header checksum is checked
 * as soon as the header is known to be inside the frame, so a corrupted
 * header is counted as such rather than by whichever field it broke; the
 * UDP checksum, which reads the whole payload, comes last. With
 * @dev_ok the device has checked both sums over this frame: the
 * structure is still checked, the sums are not taken again.
 *
 * Where two checks are taken at once (a plain IPv4 header; a UDP
 * datagram that is not a fragment), a frame that fails them is looked at
 * one check at a time, so it is rejected for the same reason as if each
 * had been made alone, in the order above.
 */
static inline __attribute__((always_inline)) enum qps_rx_reason
frame_parse(const void *frame, size_t len, bool dev_ok,
	    struct qps_frame_info *info)
{
	const uint8_t *eth = frame;
	const uint8_t *ip = eth + QPS_ETH_HLEN, *udp;
	size_t ihl, tot_len, udp_len;
	uint32_t frag_proto;
	uint16_t csum;

	if (len >= QPS_ETH_HLEN + QPS_IP_HLEN &&
	    be32_load(eth + 12) >> 8 == QPS_ETH_IP_VHL5) {
		ihl = QPS_IP_HLEN;
	} else {
		enum qps_rx_reason why = frame_parse_head(eth, len, &ihl);

		if (why != QPS_RX_OK)
			return why;
	}
	len -= QPS_ETH_HLEN;
	if (!dev_ok && qps_csum_fold(qps_csum_partial(ip, ihl, 0)) != 0)
		return QPS_RX_BAD_IP_CSUM;
	tot_len = qps_be16_get(ip + QPS_IPOFF_TOTLEN);
	if (tot_len < ihl || tot_len > len)
		return QPS_RX_BAD_TOTLEN;
	if (bad_saddr(ip + QPS_IPOFF_SADDR))
		return QPS_RX_BAD_SADDR;
	/* Flags and offset, TTL, protocol: UDP, and neither MF nor an
	 * offset (DF and the reserved bit may be anything). */
	frag_proto = be32_load(ip + QPS_IPOFF_FRAG);
	if ((frag_proto & ((uint32_t)(QPS_IP_MF | QPS_IP_OFFMASK) << 16 |
			   0xff)) != QPS_IPPROTO_UDP) {
		if (ip[QPS_IPOFF_PROTO] != QPS_IPPROTO_UDP)
			return QPS_RX_NOT_UDP;
		return QPS_RX_FRAGMENT;
	}

	udp = ip + ihl;
	if (tot_len - ihl < QPS_UDP_HLEN)
		return QPS_RX_SHORT_UDP;
	udp_len = qps_be16_get(udp + QPS_UDPOFF_LEN);
	if (udp_len < QPS_UDP_HLEN || udp_len != tot_len - ihl)
		return QPS_RX_BAD_UDP_LEN;
	memcpy(&csum, udp + QPS_UDPOFF_CSUM, 2);
	if (!dev_ok && csum != 0) {
		uint32_t saddr, daddr;

		memcpy(&saddr, ip + QPS_IPOFF_SADDR, 4);
		memcpy(&daddr, ip + QPS_IPOFF_DADDR, 4);
		if (qps_csum_fold(qps_csum_partial(udp, udp_len,
				  udp_pseudo_sum(saddr, daddr,
						 (uint16_t)udp_len))) != 0)
			return QPS_RX_BAD_UDP_CSUM;
	}

	if (info) {
		struct qps_frame_hdr *h = &info->hdr;
		uint8_t *hb = (uint8_t *)h;

		memcpy(hb + offsetof(struct qps_frame_hdr, dst_mac), eth, 12);
		memcpy(hb + offsetof(struct qps_frame_hdr, saddr),
		       ip + QPS_IPOFF_SADDR, 8);
		memcpy(hb + offsetof(struct qps_frame_hdr, sport),
		       udp + QPS_UDPOFF_SPORT, 4);
		memcpy(&h->ip_id, ip + QPS_IPOFF_ID, 2);
		h->ttl = ip[QPS_IPOFF_TTL];
		h->tos = ip[QPS_IPOFF_TOS];
		info->payload = udp + QPS_UDP_HLEN;
		info->payload_len = (uint32_t)(udp_len - QPS_UDP_HLEN);
	}
	return QPS_RX_OK;
}

enum qps_rx_reason qps_frame_parse(const void *frame, size_t len,
				   struct qps_frame_info *info)
{
	return frame_parse(frame, len, false, info);
}

enum qps_rx_reason qps_frame_parse_dev_ok(const void *frame, size_t len,
					  struct qps_frame_info *info)
{
	return frame_parse(frame, len, true, info);
}

void qps_frag_info_get(const void *frame, struct qps_frag_info *fi)
{
	const uint8_t *ip = (const uint8_t *)frame + QPS_ETH_HLEN;
	size_t ihl = (size_t)(ip[QPS_IPOFF_VHL] & 0x0f) * 4;
	uint16_t frag = qps_be16_get(ip + QPS_IPOFF_FRAG);

	memcpy(&fi->saddr, ip + QPS_IPOFF_SADDR, 4);
	memcpy(&fi->daddr, ip + QPS_IPOFF_DADDR, 4);
	memcpy(&fi->id, ip + QPS_IPOFF_ID, 2);
	fi->proto = ip[QPS_IPOFF_PROTO];
	fi->more = frag & QPS_IP_MF;
	fi->off = (uint32_t)(frag & QPS_IP_OFFMASK) * 8;
	fi->len = (uint32_t)(qps_be16_get(ip + QPS_IPOFF_TOTLEN) - ihl);
	fi->data = ip + ihl;
}

void qps_frame_reasm_hdr(void *frame, const void *first, size_t ip_len)
{
	const uint8_t *fip = (const uint8_t *)first + QPS_ETH_HLEN;
	uint8_t *ip = (uint8_t *)frame + QPS_ETH_HLEN;
	uint16_t csum;

	memcpy(frame, first, QPS_ETH_HLEN);
	memcpy(ip, fip, QPS_IP_HLEN);
	ip[QPS_IPOFF_VHL] = 0x45;
	qps_be16_put(ip + QPS_IPOFF_TOTLEN, (uint16_t)(QPS_IP_HLEN + ip_len));
	qps_be16_put(ip + QPS_IPOFF_FRAG, 0);
	memset(ip + QPS_IPOFF_CSUM, 0, 2);
	csum = qps_csum_fold(qps_csum_partial(ip, QPS_IP_HLEN, 0));
	memcpy(ip + QPS_IPOFF_CSUM, &csum, 2);
}

void qps_mcast_mac(uint32_t group, uint8_t mac[6])
{
	uint8_t g[4];

	memcpy(g, &group, 4);
	mac[0] = 0x01;
	mac[1] = 0x00;
	mac[2] = 0x5e;
	mac[3] = g[1] & 0x7f;
	mac[4] = g[2];
	mac[5] = g[3];
}

const char *qps_rx_reason_str(enum qps_rx_reason r)
{
	static const char *const names[QPS_RX_REASON_MAX] = {
		[QPS_RX_OK] = "ok",
		[QPS_RX_SHORT_ETH] = "short ethernet header",
		[QPS_RX_NOT_IPV4] = "not ipv4",
		[QPS_RX_SHORT_IP] = "short ipv4 header",
		[QPS_RX_BAD_VERSION] = "bad ip version",
		[QPS_RX_BAD_IHL] = "bad ipv4 header length",
		[QPS_RX_BAD_TOTLEN] = "bad ipv4 total length",
		[QPS_RX_FRAGMENT] = "ipv4 fragment",
		[QPS_RX_BAD_IP_CSUM] = "bad ipv4 header checksum",
		[QPS_RX_NOT_UDP] = "not udp",
		[QPS_RX_SHORT_UDP] = "short udp header",
		[QPS_RX_BAD_UDP_LEN] = "bad udp length",
		[QPS_RX_BAD_UDP_CSUM] = "bad udp checksum",
		[QPS_RX_BAD_SADDR] = "bad source address",
	};

	if ((unsigned int)r >= QPS_RX_REASON_MAX || !names[r])
		return "unknown";
	return names[r];
}
