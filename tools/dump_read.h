/* SPDX-License-Identifier: MIT */
/*
 * dump_read - the records of one sub-ring of a capture ring (layout:
 * src/dump_shm.h), as qps_dump reads them. The ring is written by another
 * process, so every length is checked against the sub-ring and against
 * what its head says was written; a stretch that makes no sense is
 * skipped up to the head and counted, never followed.
 */
#ifndef QPS_DUMP_READ_H
#define QPS_DUMP_READ_H

#include <stdint.h>

#include "dump_shm.h"

/* One good record: its header (a copy) and its caplen bytes. 0, or
 * -errno to stop the drain. */
typedef int (*dr_rec_fn)(void *arg, const struct qps_dump_rec *r,
			 const uint8_t *data);

/*
 * The records of @area (@ring_bytes, a power of 2) from *@tail up to
 * @head (the writer's position, both counting bytes from 0): @fn for each
 * good one, *@tail moved past what was read, *@bad counting the malformed
 * stretches skipped. Returns 0 or @fn's error.
 */
int dr_drain(const uint8_t *area, uint64_t ring_bytes, uint64_t *tail,
	     uint64_t head, dr_rec_fn fn, void *arg, uint64_t *bad);

#endif /* QPS_DUMP_READ_H */
