/* SPDX-License-Identifier: MIT */
/*
 * dump_frame - what qps_dump does to a captured frame before writing it:
 * the checksums a device would have computed, filled in.
 */
#ifndef QPS_DUMP_FRAME_H
#define QPS_DUMP_FRAME_H

#include <stddef.h>
#include <stdint.h>

/* @frame (@caplen bytes of an Ethernet frame) left its context with its
 * IPv4 header and UDP checksums for the device to compute: compute them
 * as the device would (UDP only for a datagram that is not fragmented
 * and is there whole). Anything else is left as it is. */
void df_fill_csums(uint8_t *frame, size_t caplen);

/* The Internet checksum (RFC 1071) of @len bytes added to @sum, folded
 * and complemented, in network order as stored in a header. */
uint16_t df_csum(const uint8_t *p, size_t len, uint32_t sum);

#endif /* QPS_DUMP_FRAME_H */
