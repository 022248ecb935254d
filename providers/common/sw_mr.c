// SPDX-License-Identifier: MIT
/*
 * MR table of a software provider. Nothing is pinned or translated: an MR
 * is the range it names, and the lkey finds it again. The slot is the
 * lkey's low byte and a generation sits above it, so a stale lkey of a
 * deregistered MR does not match the MR that reuses its slot.
 */
#include "prov_sw.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define QPS_SW_MR_GEN_MIN 2u	/* keeps lkeys clear of MLX4_INVALID_LKEY */

void qps_sw_mr_init(struct qps_sw_mr_table *t, unsigned int max)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	t->max = max < QPS_SW_MR_SLOTS ? max : QPS_SW_MR_SLOTS;
	t->gen = QPS_SW_MR_GEN_MIN;
}

void qps_sw_mr_fini(struct qps_sw_mr_table *t)
{
	unsigned int i;

	for (i = 0; i < t->max; i++) {
		free(t->slot[i]);
		t->slot[i] = NULL;
	}
	pthread_mutex_destroy(&t->lock);
}

int qps_sw_mr_reg(struct qps_sw_mr_table *t, struct qps_dev *dev, void *addr,
		  size_t len, struct qps_mr **mr_out)
{
	struct qps_mr *mr;
	unsigned int i;

	if (!addr || !len || (uintptr_t)addr + len < (uintptr_t)addr ||
	    !mr_out)
		return -EINVAL;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->max && t->slot[i]; i++)
		;
	if (i == t->max) {
		pthread_mutex_unlock(&t->lock);
		free(mr);
		return -ENOMEM;
	}
	mr->dev = dev;
	mr->addr = addr;
	mr->length = len;
	mr->lkey = (t->gen << 8) | i;
	if (++t->gen >= (1u << 24))
		t->gen = QPS_SW_MR_GEN_MIN;
	t->slot[i] = mr;
	pthread_mutex_unlock(&t->lock);
	*mr_out = mr;
	return 0;
}

int qps_sw_mr_dereg(struct qps_sw_mr_table *t, struct qps_mr *mr)
{
	unsigned int i = mr->lkey & 0xff;

	pthread_mutex_lock(&t->lock);
	if (i >= t->max || t->slot[i] != mr) {
		pthread_mutex_unlock(&t->lock);
		return -EINVAL;
	}
	t->slot[i] = NULL;
	pthread_mutex_unlock(&t->lock);
	free(mr);
	return 0;
}

int qps_sw_mr_lookup(struct qps_sw_mr_table *t, uint32_t lkey,
		     uintptr_t *addr, size_t *len)
{
	unsigned int i = lkey & 0xff;
	struct qps_mr *mr;
	int r = -EINVAL;

	pthread_mutex_lock(&t->lock);
	mr = i < t->max ? t->slot[i] : NULL;
	if (mr && mr->lkey == lkey) {
		*addr = (uintptr_t)mr->addr;
		*len = mr->length;
		r = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

int qps_sw_mr_check(struct qps_sw_mr_table *t, uint32_t lkey, uintptr_t addr,
		    uint64_t len)
{
	uintptr_t base;
	size_t size;

	if (qps_sw_mr_lookup(t, lkey, &base, &size) || addr < base ||
	    len > size || addr - base > size - len)
		return -EINVAL;
	return 0;
}
