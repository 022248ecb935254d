/* SPDX-License-Identifier: MIT */
/*
 * Ethernet II / IPv4 / UDP frames: build with valid checksums, parse
 * strictly. The parser never reads outside [frame, frame + len).
 */
#ifndef QPS_FRAMES_H
#define QPS_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <qpsock/qpsock.h>

#define QPS_ETH_HLEN 14
#define QPS_IP_HLEN 20
#define QPS_UDP_HLEN 8
#define QPS_HDRS_LEN (QPS_ETH_HLEN + QPS_IP_HLEN + QPS_UDP_HLEN)
#define QPS_ETH_P_IP 0x0800
#define QPS_IPPROTO_UDP 17
#define QPS_IP_DF 0x4000
#define QPS_IP_MF 0x2000
#define QPS_IP_OFFMASK 0x1fff
#define QPS_IP_DEFAULT_TTL 64
#define QPS_IP_MAX_TOTLEN 65535
/* The largest UDP payload IPv4 can carry (fragmented): 65,507 bytes. */
#define QPS_UDP_MAX_PAYLOAD (QPS_IP_MAX_TOTLEN - QPS_IP_HLEN - QPS_UDP_HLEN)

/* Offsets inside the IPv4 and UDP headers. */
#define QPS_IPOFF_VHL 0
#define QPS_IPOFF_TOS 1
#define QPS_IPOFF_TOTLEN 2
#define QPS_IPOFF_ID 4
#define QPS_IPOFF_FRAG 6
#define QPS_IPOFF_TTL 8
#define QPS_IPOFF_PROTO 9
#define QPS_IPOFF_CSUM 10
#define QPS_IPOFF_SADDR 12
#define QPS_IPOFF_DADDR 16
#define QPS_UDPOFF_SPORT 0
#define QPS_UDPOFF_DPORT 2
#define QPS_UDPOFF_LEN 4
#define QPS_UDPOFF_CSUM 6

/* Addresses and ports in network byte order, as on the wire. */
struct qps_frame_hdr {
	uint8_t dst_mac[6];
	uint8_t src_mac[6];
	uint32_t saddr;
	uint32_t daddr;
	uint16_t sport;
	uint16_t dport;
	uint16_t ip_id;
	uint8_t ttl;
	uint8_t tos;
};

/* A parsed datagram: points into the frame it was parsed from. */
struct qps_frame_info {
	struct qps_frame_hdr hdr;
	const uint8_t *payload;
	uint32_t payload_len;
};

/*
 * qps_frame_build - write the 42 header bytes for @payload_len bytes of
 * payload already placed at @frame + QPS_HDRS_LEN, computing the IPv4 header
 * and UDP checksums. Returns the frame length, or -EMSGSIZE when the IPv4
 * total length would exceed 65535.
 */
int qps_frame_build(void *frame, const struct qps_frame_hdr *h,
		    size_t payload_len);

/* As qps_frame_build, with the payload's qps_csum_partial already known
 * (@payload_sum: qps_csum_copy gives it while placing the payload). */
int qps_frame_build_sum(void *frame, const struct qps_frame_hdr *h,
			size_t payload_len, uint32_t payload_sum);

/* As qps_frame_build, for a device that computes both checksums
 * (QPS_DEV_CAP_CSUM): their fields are left 0 and no byte of the
 * payload is read. */
int qps_frame_build_hw(void *frame, const struct qps_frame_hdr *h,
		       size_t payload_len);

/* The UDP header of a datagram of @payload_len bytes whose
 * qps_csum_partial is @payload_sum, at @udp_hdr (8 bytes). */
void qps_udp_hdr_build(void *udp_hdr, const struct qps_frame_hdr *h,
		       size_t payload_len, uint32_t payload_sum);

/*
 * qps_frame_build_frag - the Ethernet and IPv4 headers of one fragment:
 * @ip_len bytes of the datagram's IP payload (UDP header included),
 * starting @ip_off bytes into it, already placed at
 * @frame + QPS_ETH_HLEN + QPS_IP_HLEN; MF set when @more. Returns the
 * frame length, or -EINVAL for an offset (or a non-final length) that is
 * not a multiple of 8 or an end beyond what IPv4 can carry.
 */
int qps_frame_build_frag(void *frame, const struct qps_frame_hdr *h,
			 size_t ip_len, size_t ip_off, bool more);

/* A fragment as qps_frame_parse passed it on (QPS_RX_FRAGMENT): its
 * header is inside the frame, with a right checksum and total length. */
struct qps_frag_info {
	uint32_t saddr;		/* network order, as the header */
	uint32_t daddr;
	uint16_t id;
	uint8_t proto;
	bool more;
	uint32_t off;		/* bytes into the datagram's IP payload */
	uint32_t len;		/* IP payload bytes in this fragment */
	const uint8_t *data;
};

void qps_frag_info_get(const void *frame, struct qps_frag_info *fi);

/*
 * qps_frame_reasm_hdr - the Ethernet and IPv4 headers of a reassembled
 * datagram of @ip_len IP payload bytes at @frame, from its first
 * fragment's frame @first: addresses, TTL, TOS and ID as it had them, no
 * options and no fragment bits, so that qps_frame_parse reads it as one
 * datagram. @ip_len <= 65515.
 */
void qps_frame_reasm_hdr(void *frame, const void *first, size_t ip_len);

/*
 * qps_frame_parse - validate a received frame. Returns QPS_RX_OK (0) and
 * fills @info, or the enum qps_rx_reason that rejected it. Trailing bytes
 * beyond the IPv4 total length (Ethernet padding) are allowed.
 */
enum qps_rx_reason qps_frame_parse(const void *frame, size_t len,
				   struct qps_frame_info *info);

/* As qps_frame_parse, for a frame whose IPv4 header and UDP checksums the
 * device verified (IBV_WC_IP_CSUM_OK): everything but the two sums. */
enum qps_rx_reason qps_frame_parse_dev_ok(const void *frame, size_t len,
					  struct qps_frame_info *info);

/* Big-endian 16-bit fields at any alignment. */
static inline uint16_t qps_be16_get(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline void qps_be16_put(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* As qps_frame_build_hw, from @tmpl: what qps_frame_build_hw wrote for
 * the same headers and no payload. Only the lengths and the IP ID
 * (@ip_id, network order) differ. */
static inline int qps_frame_build_tmpl(void *frame,
				       const uint8_t tmpl[QPS_HDRS_LEN],
				       uint16_t ip_id, size_t payload_len)
{
	uint8_t *ip = (uint8_t *)frame + QPS_ETH_HLEN;

	memcpy(frame, tmpl, QPS_HDRS_LEN);
	qps_be16_put(ip + QPS_IPOFF_TOTLEN,
		     (uint16_t)(QPS_IP_HLEN + QPS_UDP_HLEN + payload_len));
	memcpy(ip + QPS_IPOFF_ID, &ip_id, 2);
	qps_be16_put(ip + QPS_IP_HLEN + QPS_UDPOFF_LEN,
		     (uint16_t)(QPS_UDP_HLEN + payload_len));
	return (int)(QPS_HDRS_LEN + payload_len);
}

/* Internet checksum helpers (RFC 1071), host-independent: words are summed
 * in memory order and qps_csum_fold returns the complemented 16-bit value
 * to store as is (memcpy) in a header; over data that includes a correct
 * checksum it returns 0. Chained partial sums need even lengths except for
 * the last chunk. */
uint32_t qps_csum_partial(const void *buf, size_t len, uint32_t sum);
/* Copy @len bytes and return their qps_csum_partial, in one pass. */
uint32_t qps_csum_copy(void *dst, const void *src, size_t len, uint32_t sum);
uint16_t qps_csum_fold(uint32_t sum);

/* 01:00:5e + low 23 bits of the group (network order). */
void qps_mcast_mac(uint32_t group, uint8_t mac[6]);

const char *qps_rx_reason_str(enum qps_rx_reason r);

#endif /* QPS_FRAMES_H */
