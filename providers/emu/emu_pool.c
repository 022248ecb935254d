// SPDX-License-Identifier: MIT
/*
 * Heaps over a port's two shared areas: the buffer pool (receive buffers,
 * handed out by alloc_buf) and the queue area (RQ and CQ rings). Only the
 * owning process allocates from its port, so the free list is private; a
 * peer only ever sees offsets, which it checks against the area size.
 */
#include "emu.h"

#include <errno.h>
#include <string.h>

#define EMU_BUF_ALIGN 64u

uint32_t qps_emu_roundup_pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v && p < (1u << 31))
		p <<= 1;
	return p;
}

void qps_emu_heap_init(struct qps_emu_heap *h, uint64_t size)
{
	memset(h, 0, sizeof(*h));
	h->size = size;
	h->n = 1;
	h->ext[0].off = 0;
	h->ext[0].len = size;
}

static int heap_insert(struct qps_emu_heap *h, unsigned int at, uint64_t off,
		       uint64_t len)
{
	if (h->n == QPS_EMU_HEAP_EXT)
		return -ENOMEM;
	memmove(&h->ext[at + 1], &h->ext[at], (h->n - at) * sizeof(h->ext[0]));
	h->ext[at].off = off;
	h->ext[at].len = len;
	h->n++;
	return 0;
}

static void heap_remove(struct qps_emu_heap *h, unsigned int at)
{
	memmove(&h->ext[at], &h->ext[at + 1],
		(h->n - at - 1) * sizeof(h->ext[0]));
	h->n--;
}

/* First fit; @align is a power of two. The free list stays sorted. */
int qps_emu_heap_alloc(struct qps_emu_heap *h, uint64_t len, uint64_t align,
		       uint64_t *off_out)
{
	unsigned int i;

	if (!len || len > h->size)
		return -ENOMEM;
	len = (len + EMU_BUF_ALIGN - 1) & ~(uint64_t)(EMU_BUF_ALIGN - 1);
	for (i = 0; i < h->n; i++) {
		uint64_t off = h->ext[i].off, end = off + h->ext[i].len;
		uint64_t start = (off + align - 1) & ~(align - 1);

		if (start > end || end - start < len)
			continue;
		if (start > off && start + len < end) {
			/* A hole on both sides: one more extent. */
			if (heap_insert(h, i + 1, start + len,
					end - start - len))
				return -ENOMEM;
			h->ext[i].len = start - off;
		} else if (start > off) {
			h->ext[i].len = start - off;
		} else if (start + len < end) {
			h->ext[i].off = start + len;
			h->ext[i].len = end - start - len;
		} else {
			heap_remove(h, i);
		}
		*off_out = start;
		return 0;
	}
	return -ENOMEM;
}

int qps_emu_heap_free(struct qps_emu_heap *h, uint64_t off, uint64_t len)
{
	unsigned int i;

	len = (len + EMU_BUF_ALIGN - 1) & ~(uint64_t)(EMU_BUF_ALIGN - 1);
	if (!len || off > h->size || len > h->size - off)
		return -EINVAL;
	for (i = 0; i < h->n && h->ext[i].off < off; i++)
		;
	/* Overlap with a free neighbour: a double or a bogus free. */
	if (i > 0 && h->ext[i - 1].off + h->ext[i - 1].len > off)
		return -EINVAL;
	if (i < h->n && off + len > h->ext[i].off)
		return -EINVAL;
	if (i > 0 && h->ext[i - 1].off + h->ext[i - 1].len == off) {
		h->ext[i - 1].len += len;
		if (i < h->n && off + len == h->ext[i].off) {
			h->ext[i - 1].len += h->ext[i].len;
			heap_remove(h, i);
		}
		return 0;
	}
	if (i < h->n && off + len == h->ext[i].off) {
		h->ext[i].off = off;
		h->ext[i].len += len;
		return 0;
	}
	return heap_insert(h, i, off, len);
}

int qps_emu_alloc_buf(struct qps_dev *d, size_t len, void **addr_out)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);
	uint64_t off;
	int r;

	if (!len || !addr_out)
		return -EINVAL;
	pthread_mutex_lock(&dev->lock);
	r = qps_emu_heap_alloc(&dev->pool_heap, len, EMU_BUF_ALIGN, &off);
	pthread_mutex_unlock(&dev->lock);
	if (r)
		return r;
	*addr_out = dev->pool + off;
	return 0;
}

int qps_emu_free_buf(struct qps_dev *d, void *addr, size_t len)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);
	uint8_t *p = addr;
	int r;

	if (p < dev->pool || p >= dev->pool + dev->pool_heap.size)
		return -EINVAL;
	pthread_mutex_lock(&dev->lock);
	r = qps_emu_heap_free(&dev->pool_heap, (uint64_t)(p - dev->pool), len);
	pthread_mutex_unlock(&dev->lock);
	return r;
}
