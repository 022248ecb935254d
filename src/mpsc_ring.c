// SPDX-License-Identifier: MIT
/*
 * mpsc_ring.c - set-up and tear-down of the MPSC ring; the fast path is
 * inline in mpsc_ring.h. All memory is allocated here, none afterwards.
 */
#include <stdlib.h>

#include "mpsc_ring.h"

int qps_mpsc_init(struct qps_mpsc *r, uint32_t cap)
{
	size_t len;
	uint32_t i;

	if (cap < 2 || cap > QPS_MPSC_MAX_CAP || (cap & (cap - 1)))
		return -EINVAL;
	len = (size_t)cap * sizeof(*r->cells);
	/* Whole guard-sized blocks, so no other data shares the cells'
	 * first or last cache line. */
	len = (len + QPS_MPSC_GUARD - 1) & ~(size_t)(QPS_MPSC_GUARD - 1);
	r->cells = aligned_alloc(QPS_MPSC_GUARD, len);
	if (!r->cells)
		return -ENOMEM;
	/* Every cell starts as if it held position i - cap, the lap before
	 * its first use, so it reads "not ready" at position i. */
	for (i = 0; i < cap; i++) {
		atomic_init(&r->cells[i].item, NULL);
		atomic_init(&r->cells[i].aux, 0);
		atomic_init(&r->cells[i].seq, i - cap);
	}
	r->cap = cap;
	r->mask = cap - 1;
	atomic_init(&r->head, 0);
	atomic_init(&r->cons_cache, 0);
	atomic_init(&r->cons, 0);
	return 0;
}

void qps_mpsc_fini(struct qps_mpsc *r)
{
	free(r->cells);
	r->cells = NULL;
	r->cap = 0;
}
