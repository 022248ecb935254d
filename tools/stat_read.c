// SPDX-License-Identifier: MIT
/*
 * stat_read - the reading side of the stats segments (src/stat_shm.h,
 * stat_read.h). A segment is copied into private memory with pread, so a
 * file truncated meanwhile reads short instead of faulting. Counter
 * blocks are taken as copied (a torn counter is accepted, as ss does);
 * the snapshot block and each endpoint's identity are taken from a copy
 * whose sequence counts held across it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "stat_proc.h"
#include "stat_read.h"

/* A writer stopped mid-update (killed) would keep a count odd forever. */
#ifndef SR_SEQ_TRIES
#define SR_SEQ_TRIES 100
#endif

static int sr_cmp(const void *a, const void *b)
{
	const struct sr_seg *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->ctx_id != y->ctx_id)
		return x->ctx_id < y->ctx_id ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* A decimal of 1..@max digits at *p, no sign or leading zero. */
static int sr_dec(const char **p, unsigned long long max,
		  unsigned long long *v)
{
	const char *s = *p;

	*v = 0;
	if (*s < '0' || *s > '9' || (*s == '0' && s[1] >= '0' && s[1] <= '9'))
		return -EINVAL;
	while (*s >= '0' && *s <= '9') {
		*v = *v * 10 + (unsigned long long)(*s++ - '0');
		if (*v > max)
			return -EINVAL;
	}
	*p = s;
	return 0;
}

int sr_parse_name(const char *name, int *pid, unsigned int *ctx)
{
	size_t plen = strlen(QPS_STAT_PREFIX);
	unsigned long long p, c;
	const char *s = name;
	int n;

	if (strncmp(s, QPS_STAT_PREFIX, plen) != 0)
		return -EINVAL;
	s += plen;
	if (sr_dec(&s, INT32_MAX, &p) || p == 0 || *s++ != '.' ||
	    sr_dec(&s, UINT32_MAX, &c))
		return -EINVAL;
	if (*s == '.') {
		for (n = 0, s++; (*s >= '0' && *s <= '9') ||
				 (*s >= 'a' && *s <= 'f'); s++)
			n++;
		if (n < 1 || n > 8)
			return -EINVAL;
	}
	if (*s)
		return -EINVAL;
	*pid = (int)p;
	*ctx = (unsigned int)c;
	return 0;
}

int sr_list(struct sr_seg **out)
{
	struct sr_seg *v = NULL, *nv;
	size_t n = 0, cap = 0;
	struct dirent *e;
	unsigned int ctx;
	int pid;
	DIR *d;

	*out = NULL;
	d = opendir(QPS_STAT_DIR);
	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		if (strlen(e->d_name) >= sizeof(v->name) ||
		    sr_parse_name(e->d_name, &pid, &ctx) != 0)
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
		v[n].fd = -1;
		n++;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), sr_cmp);
	*out = v;
	return (int)n;
}

/* Exactly @len bytes at @off: 0, -ENODATA at an early end, or -errno. */
static int sr_pread(int fd, void *buf, size_t len, off_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got,
				  off + (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENODATA;
		got += (size_t)n;
	}
	return 0;
}

/*
 * The header @h (copied from the file) against what this build writes
 * for its own counts: every size and offset equal, nothing computed from
 * the file's numbers but through qps_stat_geom within its bounds, so no
 * sum can wrap.
 */
static enum sr_status sr_check_hdr(const struct qps_stat_hdr *h,
				   uint64_t file_size)
{
	struct qps_stat_geom g;

	if (h->layout != QPS_STAT_LAYOUT ||
	    h->hdr_size != sizeof(struct qps_stat_hdr) ||
	    h->stats_size != sizeof(struct qps_stats) ||
	    h->sq_size != sizeof(struct qps_sq_stats) ||
	    h->ep_size != sizeof(struct qps_stat_ep) ||
	    h->version != QPS_STAT_VERSION)
		return SR_MISMATCH;
	if (h->nsq < 1 || h->nsq > QPS_STAT_MAX_SQ || h->max_ep < 1 ||
	    h->max_ep > QPS_STAT_MAX_EP)
		return SR_BAD;
	qps_stat_geom(h->nsq, h->max_ep, &g);
	if (h->off_rx != g.off_rx || h->off_snap != g.off_snap ||
	    h->off_sq != g.off_sq || h->off_ep != g.off_ep ||
	    h->size != g.size || file_size != g.size)
		return SR_BAD;
	return SR_OK;
}

static void sr_strings(struct sr_seg *s)
{
	sr_escape(s->comm, sizeof(s->comm), s->h.comm, sizeof(s->h.comm));
	sr_escape(s->provider, sizeof(s->provider), s->h.provider,
		  sizeof(s->h.provider));
	sr_escape(s->devname, sizeof(s->devname), s->h.dev, sizeof(s->h.dev));
}

enum sr_status sr_open_fd(struct sr_seg *s, int fd)
{
	uint64_t magic = 0;
	enum sr_status st;
	struct stat sb;
	int r;

	s->fd = fd;
	if (fstat(fd, &sb) < 0) {
		s->err = errno;
		return SR_IO;
	}
	s->dev = sb.st_dev;
	s->ino = sb.st_ino;
	s->uid = sb.st_uid;
	if (!S_ISREG(sb.st_mode))
		return SR_NOTREG;
	if (sb.st_size == 0)
		return SR_BUSY;
	if ((uint64_t)sb.st_size < sizeof(struct qps_stat_hdr) ||
	    (uint64_t)sb.st_size > qps_stat_size(QPS_STAT_MAX_SQ,
						 QPS_STAT_MAX_EP))
		return SR_BAD;
	s->size = (size_t)sb.st_size;
	/* The writer stores magic last: the header copied after it is
	 * complete (one copy, magic first). */
	r = sr_pread(fd, &s->h, sizeof(s->h), 0);
	if (r < 0) {
		s->err = -r;
		return r == -ENODATA ? SR_SHORT : SR_IO;
	}
	memcpy(&magic, &s->h.magic, sizeof(magic));
	if (magic != QPS_STAT_MAGIC)
		return SR_BUSY;
	st = sr_check_hdr(&s->h, s->size);
	if (st != SR_OK)
		return st;
	if (s->h.pid != s->pid || s->h.ctx_id != s->ctx_id)
		return SR_BAD;
	s->h.comm[sizeof(s->h.comm) - 1] = '\0';
	s->h.provider[sizeof(s->h.provider) - 1] = '\0';
	s->h.dev[sizeof(s->h.dev) - 1] = '\0';
	sr_strings(s);
	return SR_OK;
}

/*
 * Whose file is it. A pid is only ours to look up when the segment was
 * written in our PID namespace; then the file must belong to that
 * process's user (or root, who may have made it before the process gave
 * up its privileges). Otherwise nothing ties the file to a process, and
 * only its owner and root are shown it.
 */
static enum sr_status sr_check_proc(struct sr_seg *s)
{
	uint64_t dev, ino;
	uid_t me = geteuid(), euid;

	s->other_ns = !sr_pidns_self(&dev, &ino) || s->h.pidns_ino == 0 ||
		      s->h.pidns_dev != dev || s->h.pidns_ino != ino;
	if (!s->other_ns) {
		switch (sr_proc_state(s->pid, s->h.start_ticks)) {
		case SR_PROC_GONE:
			return SR_STALE;
		case SR_PROC_ALIVE:
			if (sr_proc_euid(s->pid, &euid) == 0)
				return s->uid == euid || s->uid == 0 ?
				       SR_OK : SR_OWNER;
			break;
		case SR_PROC_UNKNOWN:
			break;
		}
	}
	return me == 0 || s->uid == me ? SR_OK : SR_OWNER;
}

enum sr_status sr_open(struct sr_seg *s)
{
	char path[sizeof(QPS_STAT_DIR) + sizeof(s->name) + 1];
	enum sr_status st;
	int fd;

	s->fd = -1;
	s->err = 0;
	snprintf(path, sizeof(path), "%s/%s", QPS_STAT_DIR, s->name);
	/* O_NONBLOCK: a FIFO under the name would wait for a writer. */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
			O_CLOEXEC);
	if (fd < 0) {
		s->err = errno;
		switch (errno) {
		case ENOENT:
			return SR_GONE;
		case EACCES:
		case EPERM:
			return SR_PERM;
		case ELOOP:
			return SR_LINK;
		case ENXIO:		/* a socket */
			return SR_NOTREG;
		default:
			return SR_IO;
		}
	}
	st = sr_open_fd(s, fd);
	if (st == SR_OK)
		st = sr_check_proc(s);
	if (st != SR_OK)
		sr_close(s);
	return st;
}

void sr_close(struct sr_seg *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

int sr_remove(const struct sr_seg *s)
{
	char path[sizeof(QPS_STAT_DIR) + sizeof(s->name) + 1];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/%s", QPS_STAT_DIR, s->name);
	/* By name is all unlink offers: at least the name still holds the
	 * file that was judged stale. */
	if (lstat(path, &sb) < 0)
		return -errno;
	if (sb.st_dev != s->dev || sb.st_ino != s->ino)
		return -ESTALE;
	return unlink(path) < 0 ? -errno : 0;
}

static uint64_t sr_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t sr_u32(const char *img, uint64_t off)
{
	uint32_t v;

	memcpy(&v, img + off, sizeof(v));
	return v;
}

/* A sequence-counted part whose count was even and the same in copy @a
 * (taken first: the count ahead of the data) and copy @b (after). */
static bool sr_whole(const char *a, const char *b, uint64_t seq_off)
{
	uint32_t s = sr_u32(a, seq_off);

	return !(s & 1) && s == sr_u32(b, seq_off);
}

static uint64_t sr_ep_seq(const struct qps_stat_hdr *h, uint32_t i)
{
	return h->off_ep + (uint64_t)i * sizeof(struct qps_stat_ep) +
	       offsetof(struct qps_stat_ep, seq);
}

static bool sr_all_whole(const struct qps_stat_hdr *h, const char *a,
			 const char *b)
{
	uint32_t i;

	if (!sr_whole(a, b, offsetof(struct qps_stat_hdr, snap_seq)))
		return false;
	for (i = 0; i < h->max_ep; i++)
		if (!sr_whole(a, b, sr_ep_seq(h, i)))
			return false;
	return true;
}

static int sr_add_ep(struct sr_snap *snap, uint32_t slot,
		     const struct qps_stat_ep *b)
{
	struct sr_ep *nv;

	if ((snap->neps & (snap->neps - 1)) == 0) {
		nv = realloc(snap->eps, (snap->neps ? snap->neps * 2 : 1) *
				       sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		snap->eps = nv;
	}
	snap->eps[snap->neps].slot = slot;
	snap->eps[snap->neps].b = *b;
	snap->neps++;
	return 0;
}

/* The counters from copy @a, checked against the later copy @b: an
 * endpoint whose identity changed in between is left out this time. */
static int sr_parse(const struct qps_stat_hdr *h, const char *a,
		    const char *b, struct sr_snap *snap)
{
	struct qps_stats mods;
	struct qps_stat_ep ep;
	uint64_t at, now;
	uint32_t i;

	memcpy(&snap->all, a + h->off_rx, sizeof(snap->all));
	for (i = 0; i < h->nsq; i++) {
		struct qps_sq_stats q;

		memcpy(&q, a + h->off_sq + (uint64_t)i * sizeof(q), sizeof(q));
		qps_stat_sq_fold(&q, &snap->all);
	}
	memcpy(&mods, a + h->off_snap, sizeof(mods));
	qps_stat_merge(&snap->all, &mods);
	qps_stat_finish(&snap->all);
	memcpy(&at, a + offsetof(struct qps_stat_hdr, snap_ns), sizeof(at));
	now = sr_now_ns();
	snap->snap_age_ns = at && now > at ? now - at : 0;
	for (i = 0; i < h->max_ep; i++) {
		memcpy(&ep, a + h->off_ep + (uint64_t)i * sizeof(ep),
		       sizeof(ep));
		if (!sr_whole(a, b, sr_ep_seq(h, i)) ||
		    ep.state != QPS_STAT_EP_OPEN)
			continue;
		if (sr_add_ep(snap, i, &ep) < 0)
			return -ENOMEM;
	}
	return 0;
}

int sr_read(const struct sr_seg *s, struct sr_snap *snap)
{
	char *a = malloc(s->size), *b = malloc(s->size);
	int i, r = -ENOMEM;

	memset(snap, 0, sizeof(*snap));
	if (!a || !b)
		goto out;
	/*
	 * Two copies, one after the other: a sequence count read in the
	 * first (ahead of its data, at a lower offset) and again in the
	 * second brackets the data between. Each pread's page-cache lookup
	 * takes a page reference with a fully ordered atomic, so the second
	 * copy's loads follow the first's on any CPU; the writer's release
	 * fences (stat_shm.h) pair with that.
	 */
	for (i = 0; i < SR_SEQ_TRIES; i++) {
		r = sr_pread(s->fd, a, s->size, 0);
		if (!r)
			r = sr_pread(s->fd, b, s->size, 0);
		if (r || sr_all_whole(&s->h, a, b))
			break;
	}
	if (!r)
		r = sr_parse(&s->h, a, b, snap);
	if (r)
		sr_snap_free(snap);
out:
	free(a);
	free(b);
	return r;
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
		return "malformed: not a segment as this build writes it";
	case SR_LINK:
		return "a symbolic link: refused";
	case SR_NOTREG:
		return "not a regular file: refused";
	case SR_OWNER:
		return "owned by another user than its process's: refused";
	case SR_SHORT:
		return "truncated while being read";
	case SR_IO:
		return "cannot be read";
	case SR_STALE:
		return "its process is gone: stale";
	}
	return "unknown";
}
