// SPDX-License-Identifier: MIT
/*
 * Statistics and output of the perftest-style tools, computed as perftest
 * computes them (perftest_parameters.c: print_report_bw, print_report_lat,
 * print_report_lat_duration), printed in its 6.06 table formats so the
 * lines can be put next to ib_send_bw / ib_send_lat output. Timestamps
 * are nanoseconds of CLOCK_MONOTONIC instead of TSC cycles.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf_common.h"

#define PERF_MB 1048576.0		/* perftest's MB: 2^20 bytes */
#define PERF_GB 125000000.0		/* and its Gb: 1.25e8 bytes */

uint64_t perf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int perf_bw_from_span(uint64_t n, uint64_t size, uint64_t ns, bool gbits,
		      struct perf_bw_result *r)
{
	double secs, unit = gbits ? PERF_GB : PERF_MB;

	if (!r)
		return -EFAULT;
	memset(r, 0, sizeof(*r));
	r->size = size;
	r->iters = n;
	if (!n || !ns)
		return 0;
	secs = (double)ns / 1e9;
	r->bw_avg = (double)size * (double)n / secs / unit;
	r->msg_rate = (double)n / secs / 1e6;
	return 0;
}

/* Per-message time of the window [i, j]; INFINITY if the stamps are out
 * of order (never the best window). */
static double perf_window(const uint64_t *tposted, const uint64_t *tcompleted,
			  uint64_t i, uint64_t j)
{
	if (tcompleted[j] < tposted[i])
		return INFINITY;
	return (double)(tcompleted[j] - tposted[i]) / (double)(j - i + 1);
}

int perf_bw_compute(const uint64_t *tposted, const uint64_t *tcompleted,
		    uint64_t n, unsigned int post_list, unsigned int cq_mod,
		    uint64_t size, bool no_peak, bool gbits,
		    struct perf_bw_result *r)
{
	double best, t, unit = gbits ? PERF_GB : PERF_MB;
	uint64_t i, j, first;
	int ret;

	if (!tposted || !tcompleted || !r)
		return -EFAULT;
	if (!n || !post_list || !cq_mod)
		return -EINVAL;
	if (tcompleted[n - 1] < tposted[0])
		return -ERANGE;
	ret = perf_bw_from_span(n, size, tcompleted[n - 1] - tposted[0],
				gbits, r);
	if (ret < 0 || no_peak)
		return ret;

	/*
	 * The best per-message time over every window that starts at a
	 * post (a multiple of post_list) and ends at a completion (each
	 * cq_mod-th message, and the last): perftest's BW peak.
	 */
	best = perf_window(tposted, tcompleted, 0, n - 1);
	for (i = 0; i < n; i += post_list) {
		first = ((i + 1 + cq_mod - 1) / cq_mod) * cq_mod - 1;
		for (j = first; j < n; j += cq_mod) {
			t = perf_window(tposted, tcompleted, i, j);
			if (t < best)
				best = t;
		}
		if (n % cq_mod) {
			t = perf_window(tposted, tcompleted, i, n - 1);
			if (t < best)
				best = t;
		}
	}
	if (best > 0)
		r->bw_peak = (double)size * 1e9 / best / unit;
	return 0;
}

static int perf_u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

double perf_percentile_sorted(const uint64_t *sorted, uint64_t kept,
			      double p)
{
	/* perftest: delta[ceil(kept * p)], the array still holding the two
	 * dropped samples beyond kept, so the index stays in bounds. */
	return (double)sorted[(uint64_t)ceil((double)kept * p)];
}

int perf_lat_compute(const uint64_t *tposted, uint64_t iters, uint64_t size,
		     uint64_t *scratch, struct perf_lat_result *r)
{
	const double half_us = 2000.0;	/* ns of a round trip -> usec / 2 */
	uint64_t i, cnt, kept;
	double med, sum = 0, var = 0, d;

	if (!tposted || !scratch || !r)
		return -EFAULT;
	if (iters < PERF_MIN_ITERS)
		return -EINVAL;
	cnt = iters - 1;
	for (i = 0; i < cnt; i++) {
		if (tposted[i + 1] < tposted[i])
			return -ERANGE;
		scratch[i] = tposted[i + 1] - tposted[i];
	}
	qsort(scratch, cnt, sizeof(*scratch), perf_u64_cmp);
	kept = cnt - PERF_LAT_TAIL;

	/* get_median(): mean of the middle two for an even count. */
	if (kept % 2 == 0)
		med = ((double)scratch[kept / 2] + (double)scratch[kept / 2 - 1]) / 2;
	else
		med = (double)scratch[kept / 2];
	for (i = 0; i < kept; i++)
		sum += (double)scratch[i] / half_us;
	for (i = 0; i < kept; i++) {
		d = (double)scratch[i] / half_us - sum / (double)kept;
		var += d * d;
	}

	memset(r, 0, sizeof(*r));
	r->size = size;
	r->iters = iters;
	r->t_min = (double)scratch[0] / half_us;
	r->t_max = (double)scratch[kept] / half_us;
	r->t_typical = med / half_us;
	r->t_avg = sum / (double)kept;
	r->t_stdev = sqrt(var / (double)kept);
	r->p99 = perf_percentile_sorted(scratch, kept, 0.99) / half_us;
	r->p999 = perf_percentile_sorted(scratch, kept, 0.999) / half_us;
	return 0;
}

void perf_print_lat_samples(FILE *f, const uint64_t *sorted, uint64_t kept)
{
	uint64_t i;

	/* perftest's -H: a header, then "index, usec" per half round trip. */
	fprintf(f, "#, usec\n");
	for (i = 0; i < kept; i++)
		fprintf(f, "%llu, %.3f\n", (unsigned long long)(i + 1),
			(double)sorted[i] / 2000.0);
}

int perf_lat_dur_compute(uint64_t iters, uint64_t size, uint64_t ns,
			 struct perf_lat_dur_result *r)
{
	if (!r)
		return -EFAULT;
	memset(r, 0, sizeof(*r));
	r->size = size;
	r->iters = iters;
	if (!iters || !ns)
		return 0;
	r->t_avg = (double)ns / 1000.0 / 2.0 / (double)iters;
	r->tps = (double)iters / ((double)ns / 1e9);
	return 0;
}

void perf_print_line(FILE *f)
{
	fprintf(f, "---------------------------------------------------------"
		   "------------------------------\n");
}

void perf_print_bw_head(FILE *f, bool gbits)
{
	fprintf(f, " #bytes     #iterations    BW peak[%s]    BW average[%s]"
		   "   MsgRate[Mpps]\n",
		gbits ? "Gb/sec" : "MB/sec", gbits ? "Gb/sec" : "MB/sec");
}

void perf_print_bw_row(FILE *f, const struct perf_bw_result *r, bool gbits)
{
	/* perftest switches to 6 decimals when Gb/s would read 0.0x. */
	if (gbits && r->bw_avg < 0.1)
		fprintf(f, " %-7" PRIu64 "    %" PRIu64 "           %-7.6lf"
			   "            %-7.6lf            %-7.6lf\n",
			r->size, r->iters, r->bw_peak, r->bw_avg, r->msg_rate);
	else
		fprintf(f, " %-7" PRIu64 "    %-10" PRIu64 "       %-7.2lf"
			   "            %-7.2lf\t\t   %-7.6lf\n",
			r->size, r->iters, r->bw_peak, r->bw_avg, r->msg_rate);
}

void perf_print_lat_head(FILE *f, bool duration)
{
	if (duration)
		fprintf(f, " #bytes        #iterations       t_avg[usec]"
			   "    tps average\n");
	else
		fprintf(f, " #bytes #iterations    t_min[usec]    t_max[usec]"
			   "  t_typical[usec]    t_avg[usec]    t_stdev[usec]"
			   "   99%% percentile[usec]   99.9%% percentile[usec] \n");
}

void perf_print_lat_row(FILE *f, const struct perf_lat_result *r)
{
	fprintf(f, " %-7" PRIu64 " %" PRIu64 "          %-7.2f        %-7.2f"
		   "      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f"
		   " \t\t%-7.2f\n",
		r->size, r->iters, r->t_min, r->t_max, r->t_typical, r->t_avg,
		r->t_stdev, r->p99, r->p999);
}

void perf_print_lat_dur_row(FILE *f, const struct perf_lat_dur_result *r)
{
	fprintf(f, " %-7" PRIu64 "       %" PRIu64 "            %-7.2f"
		   "        %-7.2f\n", r->size, r->iters, r->t_avg, r->tps);
}

/* JSON, one object per line. */

static void perf_json_put(struct perf_json *j, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void perf_json_put(struct perf_json *j, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (j->overflow)
		return;
	va_start(ap, fmt);
	n = vsnprintf(j->buf + j->len, j->cap - j->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= j->cap - j->len) {
		j->overflow = true;
		j->buf[j->len] = '\0';
		return;
	}
	j->len += (size_t)n;
}

static void perf_json_key(struct perf_json *j, const char *key)
{
	perf_json_put(j, "%s\"%s\":", j->first ? "" : ",", key);
	j->first = false;
}

void perf_json_begin(struct perf_json *j, char *buf, size_t cap)
{
	j->buf = buf;
	j->cap = cap;
	j->len = 0;
	j->first = true;
	j->overflow = cap < 2;
	if (cap)
		buf[0] = '\0';
	perf_json_put(j, "{");
}

void perf_json_str(struct perf_json *j, const char *key, const char *val)
{
	const unsigned char *s = (const unsigned char *)(val ? val : "");

	perf_json_key(j, key);
	perf_json_put(j, "\"");
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			perf_json_put(j, "\\%c", *s);
		else if (*s < 0x20)
			perf_json_put(j, "\\u%04x", *s);
		else
			perf_json_put(j, "%c", *s);
	}
	perf_json_put(j, "\"");
}

void perf_json_u64(struct perf_json *j, const char *key, uint64_t val)
{
	perf_json_key(j, key);
	perf_json_put(j, "%" PRIu64, val);
}

void perf_json_dbl(struct perf_json *j, const char *key, double val)
{
	perf_json_key(j, key);
	if (isfinite(val))
		perf_json_put(j, "%.6f", val);
	else
		perf_json_put(j, "null");
}

void perf_json_obj(struct perf_json *j, const char *key)
{
	perf_json_key(j, key);
	perf_json_put(j, "{");
	j->first = true;
}

void perf_json_close(struct perf_json *j)
{
	perf_json_put(j, "}");
	j->first = false;
}

int perf_json_end(struct perf_json *j)
{
	perf_json_put(j, "}");
	return j->overflow ? -ENOSPC : (int)j->len;
}
