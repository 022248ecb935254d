/* SPDX-License-Identifier: MIT */
/*
 * stat_fields - every field of struct qps_stats by name and group (the
 * groups of the struct's comments in qpsock.h and of docs/api.md), for
 * qps_stat's views and JSON and for the tests that compare them.
 */
#ifndef QPS_STAT_FIELDS_H
#define QPS_STAT_FIELDS_H

#include <stddef.h>
#include <stdint.h>
#include <qpsock/qpsock.h>

struct sf_field {
	const char *group;
	const char *name;
	size_t off;		/* in struct qps_stats */
	unsigned int n;		/* 1, or the length of an array */
};

extern const struct sf_field sf_fields[];
extern const unsigned int sf_nfields;

/* Element @i of @f in @st. */
static inline uint64_t sf_get(const struct qps_stats *st,
			      const struct sf_field *f, unsigned int i)
{
	const uint64_t *p = (const uint64_t *)((const char *)st + f->off);

	return p[i];
}

#endif /* QPS_STAT_FIELDS_H */
