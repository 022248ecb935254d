// SPDX-License-Identifier: MIT
/*
 * dump_read - one sub-ring's records, checked before they are followed
 * (dump_read.h). tests/fuzz/fuzz_dump.c feeds it arbitrary rings.
 */
#include <string.h>

#include "dump_read.h"

int dr_drain(const uint8_t *area, uint64_t ring_bytes, uint64_t *tail,
	     uint64_t head, dr_rec_fn fn, void *arg, uint64_t *bad)
{
	uint64_t mask = ring_bytes - 1, t = *tail;
	int ret = 0;

	/* More than a ring's worth unread: the writer's head is not one. */
	if (head - t > ring_bytes) {
		(*bad)++;
		t = head;
	}
	while (t != head && !ret) {
		uint64_t pos = t & mask, room = ring_bytes - pos;
		struct qps_dump_rec r;
		uint32_t w[2];

		/* pos is 8-aligned, ring_bytes a multiple of 8: the first
		 * two words are always inside the area. */
		if (pos & 7)
			goto bad;
		memcpy(w, area + pos, sizeof(w));
		if (w[1] == QPS_DUMP_PAD) {
			if (w[0] != room || head - t < room)
				goto bad;
			t += room;
			continue;
		}
		if (room < sizeof(r) || head - t < sizeof(r))
			goto bad;
		memcpy(&r, area + pos, sizeof(r));
		if (r.len < sizeof(r) || r.len > room || r.len > head - t ||
		    (r.len & 7) || r.caplen > r.len - sizeof(r) ||
		    r.caplen > r.origlen)
			goto bad;
		ret = fn(arg, &r, area + pos + sizeof(r));
		t += r.len;
		continue;
bad:
		(*bad)++;
		t = head;
	}
	*tail = t;
	return ret;
}
