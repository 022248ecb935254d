// SPDX-License-Identifier: MIT
/*
 * stat_read - the reading side of the stats segments (src/stat_shm.h).
 * Counter blocks are copied without a lock (a torn counter is accepted,
 * as ss does); the snapshot block and each endpoint's identity are
 * copied until their sequence count says the copy is whole.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proc_start.h"
#include "stat_read.h"

/* A writer stopped mid-update (killed) would keep a count odd forever. */
#define SR_SEQ_TRIES 1000

static int sr_cmp(const void *a, const void *b)
{
	const struct sr_seg *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->ctx_id < y->ctx_id ? -1 : x->ctx_id > y->ctx_id;
}

int sr_list(struct sr_seg **out)
{
	size_t plen = strlen(QPS_STAT_PREFIX);
	struct sr_seg *v = NULL, *nv;
	size_t n = 0, cap = 0;
	struct dirent *e;
	DIR *d;

	*out = NULL;
	d = opendir(QPS_STAT_DIR);
	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		unsigned int ctx;
		int pid, used = 0;

		if (strncmp(e->d_name, QPS_STAT_PREFIX, plen) != 0 ||
		    strlen(e->d_name) >= sizeof(v->name))
			continue;
		if (sscanf(e->d_name + plen, "%d.%u%n", &pid, &ctx, &used) != 2 ||
		    e->d_name[plen + (size_t)used] != '\0' || pid <= 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(v);
				closedir(d);
				return -ENOMEM;
			}
			v = nv;
		}
		memset(&v[n], 0, sizeof(v[n]));
		memcpy(v[n].name, e->d_name, strlen(e->d_name) + 1);
		v[n].pid = pid;
		v[n].ctx_id = ctx;
		n++;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), sr_cmp);
	*out = v;
	return (int)n;
}

static enum sr_status sr_check(struct sr_seg *s)
{
	const struct qps_stat_hdr *m = s->map;
	struct qps_stat_hdr *h = &s->h;
	size_t need;

	/* Acquire: pairs with the release store of magic in
	 * qps_stat_open (src/stat_seg.c): the header is complete. */
	if (atomic_load_explicit(&((struct qps_stat_hdr *)m)->magic,
				 memory_order_acquire) != QPS_STAT_MAGIC)
		return SR_BUSY;
	memcpy(h, m, sizeof(*h));
	if (h->layout != QPS_STAT_LAYOUT ||
	    h->hdr_size != sizeof(struct qps_stat_hdr) ||
	    h->stats_size != sizeof(struct qps_stats) ||
	    h->sq_size != sizeof(struct qps_sq_stats) ||
	    h->ep_size != sizeof(struct qps_stat_ep) ||
	    h->version != QPS_STAT_VERSION)
		return SR_MISMATCH;
	/* Everything below comes from another process: bound it. */
	if (h->size != s->size || h->nsq > 64 || h->max_ep > 65536)
		return SR_BAD;
	need = qps_stat_size(h->nsq, h->max_ep);
	if (need > s->size ||
	    h->off_rx + sizeof(struct qps_stats) > s->size ||
	    h->off_snap + sizeof(struct qps_stats) > s->size ||
	    h->off_sq + (size_t)h->nsq * sizeof(struct qps_sq_stats) > s->size ||
	    h->off_ep + (size_t)h->max_ep * sizeof(struct qps_stat_ep) >
		    s->size)
		return SR_BAD;
	h->comm[sizeof(h->comm) - 1] = '\0';
	h->provider[sizeof(h->provider) - 1] = '\0';
	h->dev[sizeof(h->dev) - 1] = '\0';
	return SR_OK;
}

enum sr_status sr_open(struct sr_seg *s)
{
	char path[sizeof(QPS_STAT_DIR) + sizeof(s->name) + 1];
	enum sr_status st;
	struct stat sb;
	void *p;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", QPS_STAT_DIR, s->name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == EACCES || errno == EPERM ? SR_PERM : SR_GONE;
	if (fstat(fd, &sb) < 0 ||
	    (size_t)sb.st_size < sizeof(struct qps_stat_hdr)) {
		close(fd);
		return sb.st_size == 0 ? SR_BUSY : SR_BAD;
	}
	p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return SR_BAD;
	s->map = p;
	s->size = (size_t)sb.st_size;
	st = sr_check(s);
	if (st != SR_OK)
		sr_close(s);
	return st;
}

void sr_close(struct sr_seg *s)
{
	if (s->map)
		munmap((void *)s->map, s->size);
	s->map = NULL;
}

int sr_alive(int pid, uint64_t start_ticks)
{
	char path[64];
	uint64_t now;

	if (kill(pid, 0) < 0 && errno != EPERM)
		return 0;
	if (!start_ticks)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	now = qps_proc_start_ticks(path);
	/* A zombie still has its /proc entry and start time. */
	return !now || now == start_ticks;
}

int sr_remove(const struct sr_seg *s)
{
	char path[sizeof(QPS_STAT_DIR) + sizeof(s->name) + 1];

	snprintf(path, sizeof(path), "%s/%s", QPS_STAT_DIR, s->name);
	return unlink(path) < 0 ? -errno : 0;
}

static uint64_t sr_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sr_read_snap(const struct sr_seg *s, struct qps_stats *snap)
{
	struct qps_stat_hdr *m = (struct qps_stat_hdr *)s->map;
	const char *base = s->map;
	int i;

	for (i = 0; i < SR_SEQ_TRIES; i++) {
		uint32_t seq = qps_stat_read_begin(&m->snap_seq);

		memcpy(snap, base + s->h.off_snap, sizeof(*snap));
		if (!qps_stat_read_retry(&m->snap_seq, seq))
			return;
	}
}

/* An endpoint slot: its identity whole, its counters as they are. */
static int sr_read_ep(const struct sr_seg *s, uint32_t slot,
		      struct qps_stat_ep *b)
{
	struct qps_stat_ep *m = (struct qps_stat_ep *)
		((const char *)s->map + s->h.off_ep) + slot;
	int i;

	for (i = 0; i < SR_SEQ_TRIES; i++) {
		uint32_t seq = qps_stat_read_begin(&m->seq);

		memcpy(b, m, sizeof(*b));
		if (!qps_stat_read_retry(&m->seq, seq))
			return b->state == QPS_STAT_EP_OPEN;
	}
	return 0;
}

int sr_read(const struct sr_seg *s, struct sr_snap *snap)
{
	const char *base = s->map;
	const struct qps_stat_hdr *m = s->map;
	struct qps_stats mods;
	struct qps_stat_ep b;
	uint64_t at, now;
	uint32_t i;

	memset(snap, 0, sizeof(*snap));
	memcpy(&snap->all, base + s->h.off_rx, sizeof(snap->all));
	for (i = 0; i < s->h.nsq; i++) {
		struct qps_sq_stats q;

		memcpy(&q, base + s->h.off_sq + i * sizeof(q), sizeof(q));
		qps_stat_sq_fold(&q, &snap->all);
	}
	sr_read_snap(s, &mods);
	qps_stat_merge(&snap->all, &mods);
	qps_stat_finish(&snap->all);
	at = atomic_load_explicit(&((struct qps_stat_hdr *)m)->snap_ns,
				  memory_order_relaxed);
	now = sr_now_ns();
	snap->snap_age_ns = at && now > at ? now - at : 0;

	for (i = 0; i < s->h.max_ep; i++) {
		struct sr_ep *nv;

		if (!sr_read_ep(s, i, &b))
			continue;
		if ((snap->neps & (snap->neps - 1)) == 0) {
			nv = realloc(snap->eps, (snap->neps ? snap->neps * 2 : 1) *
					       sizeof(*nv));
			if (!nv) {
				sr_snap_free(snap);
				return -ENOMEM;
			}
			snap->eps = nv;
		}
		snap->eps[snap->neps].slot = i;
		snap->eps[snap->neps].b = b;
		snap->neps++;
	}
	return 0;
}

void sr_snap_free(struct sr_snap *snap)
{
	free(snap->eps);
	snap->eps = NULL;
	snap->neps = 0;
}

const char *sr_strstatus(enum sr_status st)
{
	switch (st) {
	case SR_OK:
		return "ok";
	case SR_GONE:
		return "removed while being read";
	case SR_PERM:
		return "no permission to read it";
	case SR_BUSY:
		return "still being created";
	case SR_MISMATCH:
		return "written by another build of libqpsock (layout or "
		       "version differs): use that build's qps_stat";
	case SR_BAD:
		return "malformed";
	}
	return "unknown";
}
