/* SPDX-License-Identifier: MIT */
/*
 * dump_roce - the RoCE v2 frame of a UD record (QPS_DUMP_F_UD): the
 * device builds a UD datagram's frame from the work request, so the
 * context records what the frame is made of and qps_dump builds it here.
 */
#ifndef QPS_DUMP_ROCE_H
#define QPS_DUMP_ROCE_H

#include <stdint.h>

/* The longest frame a UD record rebuilds into. */
#define DR_ROCE_MAX_FRAME (14u + 65535u)

/*
 * The frame of the UD record whose @caplen bytes (of @origlen) are at
 * @rec: at most @cap bytes of it into @out, *@wire its whole length.
 * Returns the bytes written, or -EINVAL for a record no context writes
 * (the ring's writer is not trusted).
 */
int dr_roce_build(const uint8_t *rec, uint32_t caplen, uint32_t origlen,
		  uint8_t *out, uint32_t cap, uint32_t *wire);

/* CRC-32 (IEEE 802.3) state @c run over @len bytes: start at
 * 0xffffffff, complement at the end. */
uint32_t dr_crc32(uint32_t c, const uint8_t *p, uint32_t len);

#endif /* QPS_DUMP_ROCE_H */
