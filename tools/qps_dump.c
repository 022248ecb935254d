// SPDX-License-Identifier: MIT
/*
 * qps_dump - capture a running process's qpsock traffic, as it is on the
 * wire, to pcap or pcapng (docs/dump.md).
 *
 *   qps_dump -p PID [-c CTX] [-w FILE|-] [-s SNAPLEN] [-n COUNT]
 *            [--rx|--tx] [--pcapng] [-B KIB] [--wait] [FILTER...]
 *
 * For each context of the process (its stats segments, found as qps_stat
 * finds them) it makes a capture ring, names it in the segment's request
 * word and waits until the context takes it; then it merges what the
 * receive side and the send queues write into their sub-rings by time,
 * fills in the checksums a device would have, keeps what the filter (a
 * tcpdump expression, compiled by libpcap) accepts, and writes it. The
 * ring is held under an open file description lock for the whole run, so
 * a context that finds it unlocked knows its dumper is gone.
 *
 * Opening a segment read-write is the permission check: only its owner
 * (the process's user) and root can.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pcap/pcap.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dump_frame.h"
#include "dump_roce.h"
#include "dump_pcap.h"
#include "dump_read.h"
#include "dump_shm.h"
#include "stat_proc.h"
#include "stat_read.h"

#define DEF_SNAPLEN 65535u
#define DEF_RING_KIB 1024u
/* How long a context has to take its ring: a few stats ticks. */
#define ATTACH_MS (QPS_STAT_PERIOD_MS * 30)
#define MAX_CTX 256

struct dctx {
	char seg_name[64];
	unsigned int ctx_id;
	uint64_t seg_dev, seg_ino;
	uid_t seg_uid;			/* the process's user */
	int seg_fd;
	struct qps_stat_hdr *sh;	/* the segment's header, mapped */
	char ring_name[96];
	int ring_fd;
	void *ring;
	size_t ring_size;
	uint64_t id;
	uint32_t nring;
	uint64_t ring_bytes;
	uint64_t *tail;			/* per sub-ring, ours */
	uint8_t *data;
	struct qps_dump_sub *subs;
	uint64_t attach_by;		/* monotonic ms */
	bool attached;
	bool closing;			/* its context is gone: drain, drop */
	bool faulted;			/* its ring was truncated */
	bool done;			/* detached: counted, files gone */
	uint64_t drops;
	uint64_t bad;			/* records that made no sense */
	char label[400];
};

struct prec {
	uint64_t ts;
	uint64_t seq;
	size_t off;			/* in the pass's arena */
	uint32_t caplen, origlen;
	uint16_t flags;
	uint8_t dir;
};

static volatile sig_atomic_t stop_flag;
/* The process may truncate a ring it can write (root capturing another
 * user's): reading it then faults, which ends that context's capture,
 * not qps_dump. */
static sigjmp_buf bus_jmp;
static volatile sig_atomic_t in_drain;

static struct {
	int pid;
	int ctx;			/* -1: every one */
	const char *out;
	uint32_t snaplen;
	uint64_t count;
	int dir;			/* -1 both, QPS_DUMP_RX, _TX */
	bool ng;
	bool wait;
	uint32_t ring_kib;
	char *filter;
} opt = { .ctx = -1, .out = "-", .snaplen = DEF_SNAPLEN, .dir = -1,
	  .ring_kib = DEF_RING_KIB };

static struct dctx ctxs[MAX_CTX];
static unsigned int nctx;
static struct prec *recs;
static size_t nrecs, cap_recs;
static uint8_t *arena;
static size_t arena_len, arena_cap;
static uint64_t seq_next, captured, filtered_out;
/* UD records that made no sense, and the frame one is rebuilt into. */
static uint64_t ud_bad;
static uint8_t ud_frame[DR_ROCE_MAX_FRAME];

static void on_stop(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void on_bus(int sig)
{
	static const char msg[] = "qps_dump: a segment or ring was truncated "
				  "under us: stopping\n";

	(void)sig;
	if (in_drain)
		siglongjmp(bus_jmp, 1);
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: qps_dump -p PID [-c CTX] [-w FILE|-] [-s SNAPLEN] [-n COUNT]\n"
"                [--rx|--tx] [--pcapng] [-B KIB] [--wait] [FILTER...]\n"
"  -p PID      the process whose contexts to capture\n"
"  -c CTX      only its context CTX (as qps_stat lists them)\n"
"  -w FILE     write to FILE, - for stdout (the default)\n"
"  -s SNAPLEN  bytes kept of each frame (default %u)\n"
"  -n COUNT    stop after COUNT frames written\n"
"  --rx, --tx  only what the process receives, or sends\n"
"  --pcapng    pcapng rather than pcap (nanosecond stamps either way)\n"
"  -B KIB      each sub-ring's size, KiB (default %u, a power of 2)\n"
"  --wait      wait for the process's contexts, take each new one, run\n"
"              until the process ends (qpsock-run --dump)\n"
"  FILTER      a tcpdump expression (pcap-filter(7))\n",
		DEF_SNAPLEN, DEF_RING_KIB);
}

static int parse_u(const char *s, unsigned long long max,
		   unsigned long long *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || end == s || *end || *v > max || s[0] == '-' ? -1 : 0;
}

static char *join_args(int argc, char **argv)
{
	size_t len = 1;
	char *s;
	int i;

	for (i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	s = calloc(1, len);
	if (!s)
		return NULL;
	for (i = 0; i < argc; i++) {
		if (i)
			strcat(s, " ");
		strcat(s, argv[i]);
	}
	return s;
}

static int parse_args(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "rx", no_argument, NULL, 'R' },
		{ "tx", no_argument, NULL, 'T' },
		{ "pcapng", no_argument, NULL, 'G' },
		{ "wait", no_argument, NULL, 'W' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long long v;
	int c;

	while ((c = getopt_long(argc, argv, "+p:c:w:s:n:B:h", lo, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_u(optarg, INT32_MAX, &v) || !v)
				goto bad;
			opt.pid = (int)v;
			break;
		case 'c':
			if (parse_u(optarg, UINT32_MAX >> 1, &v))
				goto bad;
			opt.ctx = (int)v;
			break;
		case 'w':
			opt.out = optarg;
			break;
		case 's':
			if (parse_u(optarg, UINT32_MAX, &v))
				goto bad;
			/* 0 means "all", as for tcpdump. */
			opt.snaplen = v == 0 || v > QPS_DUMP_MAX_SNAP ?
				      QPS_DUMP_MAX_SNAP : (uint32_t)v;
			if (opt.snaplen < QPS_DUMP_MIN_SNAP)
				opt.snaplen = QPS_DUMP_MIN_SNAP;
			break;
		case 'n':
			if (parse_u(optarg, UINT64_MAX, &v) || !v)
				goto bad;
			opt.count = v;
			break;
		case 'B':
			if (parse_u(optarg, QPS_DUMP_MAX_RING / 1024, &v) ||
			    v < QPS_DUMP_MIN_RING / 1024 || (v & (v - 1)))
				goto bad;
			opt.ring_kib = (uint32_t)v;
			break;
		case 'R':
			opt.dir = QPS_DUMP_RX;
			break;
		case 'T':
			opt.dir = QPS_DUMP_TX;
			break;
		case 'G':
			opt.ng = true;
			break;
		case 'W':
			opt.wait = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			goto bad;
		}
	}
	if (!opt.pid)
		goto bad;
	if (optind < argc) {
		opt.filter = join_args(argc - optind, argv + optind);
		if (!opt.filter)
			return -1;
	}
	return 0;
bad:
	usage(stderr);
	return -1;
}

/* A random ring id, never 0 (0 means "no request"). */
static uint64_t ring_id(void)
{
	uint64_t v = 0;
	struct timespec ts;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		v = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^
		    (uint64_t)getpid();
	}
	return v ? v : 1;
}

/* The segment @s (checked by sr_open) opened again read-write, its header
 * mapped: the step only its owner and root pass. */
static int seg_map(struct dctx *d, const struct sr_seg *s)
{
	char path[sizeof(QPS_STAT_DIR) + sizeof(s->name) + 1];
	struct stat st;
	void *p;

	snprintf(path, sizeof(path), "%s/%s", QPS_STAT_DIR, s->name);
	d->seg_fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
				 O_CLOEXEC);
	if (d->seg_fd < 0)
		return -errno;
	if (fstat(d->seg_fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_dev != s->dev || (uint64_t)st.st_ino != s->ino)
		return -ESTALE;
	p = mmap(NULL, sizeof(struct qps_stat_hdr), PROT_READ | PROT_WRITE,
		 MAP_SHARED, d->seg_fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	d->sh = p;
	return 0;
}

static int ring_lock(int fd)
{
	struct flock fl;

	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	return fcntl(fd, F_OFD_SETLK, &fl) < 0 ? -errno : 0;
}

/* Whether the ring @id of @d's context still has a live dumper. */
static bool ring_held(const struct dctx *d, uint64_t id)
{
	char name[96];
	struct flock fl;
	int fd;
	bool held = true;

	snprintf(name, sizeof(name), "/%s%d.%u.%016" PRIx64, QPS_DUMP_PREFIX,
		 opt.pid, d->ctx_id, id);
	fd = shm_open(name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
	if (fd < 0)
		return errno != ENOENT;
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	if (fcntl(fd, F_OFD_GETLK, &fl) == 0)
		held = fl.l_type != F_UNLCK;
	close(fd);
	return held;
}

static int ring_make(struct dctx *d)
{
	struct qps_dump_geom g;
	struct qps_dump_hdr *h;
	int ret;

	d->id = ring_id();
	d->nring = d->sh->nsq + 1;
	d->ring_bytes = (uint64_t)opt.ring_kib * 1024;
	qps_dump_geom(d->nring, d->ring_bytes, &g);
	d->ring_size = (size_t)g.size;
	snprintf(d->ring_name, sizeof(d->ring_name), "/%s%d.%u.%016" PRIx64,
		 QPS_DUMP_PREFIX, opt.pid, d->ctx_id, d->id);
	d->ring_fd = shm_open(d->ring_name, O_RDWR | O_CREAT | O_EXCL |
				       O_NOFOLLOW | O_CLOEXEC, 0600);
	if (d->ring_fd < 0)
		return -errno;
	/* The umask cannot widen it, but say so plainly. */
	if (fchmod(d->ring_fd, 0600) < 0)
		return -errno;
	/* Root capturing another user's process: the ring is that user's,
	 * or the context could not open it. */
	if (geteuid() == 0 && d->seg_uid != 0 &&
	    fchown(d->ring_fd, d->seg_uid, (gid_t)-1) < 0)
		return -errno;
	ret = ring_lock(d->ring_fd);
	if (ret < 0)
		return ret;
	/* Reserved, not only sized: a page tmpfs cannot supply would fault
	 * in the context's data path. */
	ret = posix_fallocate(d->ring_fd, 0, (off_t)d->ring_size);
	if (ret)
		return -ret;
	d->ring = mmap(NULL, d->ring_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       d->ring_fd, 0);
	if (d->ring == MAP_FAILED) {
		d->ring = NULL;
		return -errno;
	}
	d->tail = calloc(d->nring, sizeof(*d->tail));
	if (!d->tail)
		return -ENOMEM;
	h = d->ring;
	h->layout = QPS_DUMP_LAYOUT;
	h->hdr_size = sizeof(*h);
	h->sub_size = sizeof(struct qps_dump_sub);
	h->nring = d->nring;
	h->snaplen = opt.snaplen;
	h->ring_bytes = d->ring_bytes;
	h->size = g.size;
	h->id = d->id;
	h->pid = opt.pid;
	h->ctx_id = d->ctx_id;
	d->subs = (struct qps_dump_sub *)((uint8_t *)d->ring + g.off_sub);
	d->data = (uint8_t *)d->ring + g.off_data;
	/* Release: the header before its magic; the context reads the file
	 * only after the request word (released after this). */
	atomic_store_explicit(&h->magic, QPS_DUMP_MAGIC, memory_order_release);
	return 0;
}

/* Name the ring in the segment: only where no live dumper has one. */
static int ring_request(struct dctx *d)
{
	uint64_t old = 0;

	for (;;) {
		/* Release: the ring file complete before its id; pairs
		 * with the context's acquire load (qps_dump_tick). */
		if (atomic_compare_exchange_strong_explicit(
			    &d->sh->dump_req, &old, d->id,
			    memory_order_release, memory_order_relaxed))
			return 0;
		if (ring_held(d, old))
			return -EBUSY;
	}
}

static void ctx_release(struct dctx *d)
{
	uint64_t id = d->id;

	if (d->sh && d->id)
		atomic_compare_exchange_strong_explicit(&d->sh->dump_req, &id,
							0, memory_order_release,
							memory_order_relaxed);
	if (d->ring_name[0] && d->ring_fd >= 0)
		shm_unlink(d->ring_name);
	if (d->ring) {
		unsigned int i;

		for (i = 0; i < d->nring && !d->faulted; i++)
			d->drops += atomic_load_explicit(&d->subs[i].drops,
							 memory_order_relaxed);
		munmap(d->ring, d->ring_size);
	}
	if (d->sh)
		munmap(d->sh, sizeof(*d->sh));
	if (d->ring_fd >= 0)
		close(d->ring_fd);
	if (d->seg_fd >= 0)
		close(d->seg_fd);
	free(d->tail);
	d->ring = NULL;
	d->sh = NULL;
	d->tail = NULL;
	d->ring_fd = d->seg_fd = -1;
	d->done = true;
}

static bool ctx_known(const struct sr_seg *s)
{
	unsigned int i;

	for (i = 0; i < nctx; i++)
		if (ctxs[i].seg_dev == s->dev && ctxs[i].seg_ino == s->ino)
			return true;
	return false;
}

/* Take the contexts of the process not taken yet; how many are new,
 * or -1 when one could not be taken for lack of permission. */
static int ctx_scan(bool quiet)
{
	struct sr_seg *v = NULL;
	int n, i, added = 0, denied = 0;

	n = sr_list(&v);
	for (i = 0; i < n; i++) {
		struct sr_seg *s = &v[i];
		struct dctx *d;
		enum sr_status st;
		int ret;

		if (s->pid != opt.pid ||
		    (opt.ctx >= 0 && s->ctx_id != (unsigned int)opt.ctx))
			continue;
		st = sr_open(s);
		if (st != SR_OK) {
			if (st == SR_PERM || st == SR_OWNER)
				denied++;
			if (!quiet && st != SR_BUSY && st != SR_GONE)
				fprintf(stderr, "qps_dump: %s: %s\n", s->name,
					sr_strstatus(st));
			continue;
		}
		if (ctx_known(s) || nctx == MAX_CTX) {
			sr_close(s);
			continue;
		}
		d = &ctxs[nctx];
		memset(d, 0, sizeof(*d));
		d->seg_fd = d->ring_fd = -1;
		snprintf(d->seg_name, sizeof(d->seg_name), "%s", s->name);
		d->ctx_id = s->ctx_id;
		d->seg_dev = s->dev;
		d->seg_ino = s->ino;
		d->seg_uid = s->uid;
		snprintf(d->label, sizeof(d->label), "pid %d ctx %u (%s %s)",
			 opt.pid, s->ctx_id, s->provider, s->devname);
		nctx++;
		ret = seg_map(d, s);
		sr_close(s);
		if (ret == -EACCES || ret == -EPERM) {
			denied++;
			fprintf(stderr, "qps_dump: %s: permission denied: only "
				"root or the process's user may capture\n",
				d->label);
			ctx_release(d);
			continue;
		}
		if (!ret)
			ret = ring_make(d);
		if (!ret)
			ret = ring_request(d);
		if (ret < 0) {
			fprintf(stderr, "qps_dump: %s: %s\n", d->label,
				ret == -EBUSY ? "another qps_dump is attached" :
				strerror(-ret));
			if (ret == -EBUSY)
				d->id = 0;
			ctx_release(d);
			continue;
		}
		d->attach_by = mono_ms() + ATTACH_MS;
		added++;
	}
	free(v);
	return denied && !added ? -1 : added;
}

static int arena_add(const uint8_t *p, size_t len, size_t *off)
{
	if (arena_len + len > arena_cap) {
		size_t nc = arena_cap ? arena_cap : 1 << 20;
		uint8_t *na;

		while (nc < arena_len + len)
			nc *= 2;
		na = realloc(arena, nc);
		if (!na)
			return -ENOMEM;
		arena = na;
		arena_cap = nc;
	}
	memcpy(arena + arena_len, p, len);
	*off = arena_len;
	arena_len += len;
	return 0;
}

static int rec_add(const struct qps_dump_rec *r, const uint8_t *data)
{
	struct prec *p;

	if (nrecs == cap_recs) {
		size_t nc = cap_recs ? cap_recs * 2 : 1024;
		struct prec *nr = realloc(recs, nc * sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		recs = nr;
		cap_recs = nc;
	}
	p = &recs[nrecs];
	if (arena_add(data, r->caplen, &p->off) < 0)
		return -ENOMEM;
	p->ts = r->ts_ns;
	p->seq = seq_next++;
	p->caplen = r->caplen;
	p->origlen = r->origlen;
	p->flags = r->flags;
	p->dir = r->dir;
	nrecs++;
	return 0;
}

static int rec_take(void *arg, const struct qps_dump_rec *r,
		    const uint8_t *data)
{
	(void)arg;
	return rec_add(r, data);
}

/* What sub-ring @i of @d holds now, into the pass's records. */
static int sub_drain(struct dctx *d, unsigned int i)
{
	struct qps_dump_sub *sub = &d->subs[i];
	uint64_t head;
	int ret;

	/* Acquire: pairs with the writer's release of head (dump.c
	 * qps_dump_put): the records before it are complete. */
	head = atomic_load_explicit(&sub->head, memory_order_acquire);
	ret = dr_drain(d->data + (uint64_t)i * d->ring_bytes, d->ring_bytes,
		       &d->tail[i], head, rec_take, NULL, &d->bad);
	/* Release: we are done with the bytes before it; pairs with the
	 * writer's acquire load of tail. */
	atomic_store_explicit(&sub->tail, d->tail[i], memory_order_release);
	return ret;
}

static int ctx_drain_all(struct dctx *d)
{
	unsigned int k;
	int ret = 0;

	for (k = 0; k < d->nring && !ret; k++)
		ret = sub_drain(d, k);
	return ret;
}

/* Every sub-ring of @d, a fault while reading it (a truncated ring)
 * ending its capture only. */
static int ctx_drain(struct dctx *d)
{
	int ret;

	if (sigsetjmp(bus_jmp, 1)) {
		in_drain = 0;
		d->bad++;
		d->faulted = true;
		fprintf(stderr, "qps_dump: %s: ring truncated under us: its "
			"capture ends\n", d->label);
		ctx_release(d);
		return 0;
	}
	in_drain = 1;
	ret = ctx_drain_all(d);
	in_drain = 0;
	return ret;
}

static int rec_cmp(const void *a, const void *b)
{
	const struct prec *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* One pass: everything the rings hold, merged by time, filtered,
 * written. Returns the frames written, or -errno. */
static int pass(struct dp_out *o, const struct bpf_program *prog)
{
	unsigned int i;
	int ret = 0, n = 0;
	size_t j;

	nrecs = 0;
	arena_len = 0;
	for (i = 0; i < nctx && !ret; i++)
		if (ctxs[i].attached && !ctxs[i].done)
			ret = ctx_drain(&ctxs[i]);
	if (ret < 0)
		return ret;
	if (nrecs > 1)
		qsort(recs, nrecs, sizeof(*recs), rec_cmp);
	for (j = 0; j < nrecs; j++) {
		const struct prec *p = &recs[j];
		uint8_t *data = arena + p->off;
		struct pcap_pkthdr ph;

		if (opt.count && captured >= opt.count)
			break;
		if (opt.dir >= 0 && p->dir != opt.dir) {
			filtered_out++;
			continue;
		}
		memset(&ph, 0, sizeof(ph));
		ph.caplen = p->caplen;
		ph.len = p->origlen;
		if (p->flags & QPS_DUMP_F_UD) {
			ret = dr_roce_build(data, p->caplen, p->origlen,
					    ud_frame, opt.snaplen, &ph.len);
			if (ret < 0) {
				ud_bad++;
				continue;
			}
			data = ud_frame;
			ph.caplen = (uint32_t)ret;
		} else if (p->flags & QPS_DUMP_F_CSUM) {
			df_fill_csums(data, p->caplen);
		}
		if (prog && !pcap_offline_filter(prog, &ph, data)) {
			filtered_out++;
			continue;
		}
		ret = dp_write(o, p->ts, data, ph.caplen, ph.len);
		if (ret < 0)
			return ret;
		captured++;
		n++;
	}
	if (n) {
		ret = dp_flush(o);
		if (ret < 0)
			return ret;
	}
	return n;
}

/* Contexts whose answer came, or whose time ran out, or that are gone;
 * whether any is still capturing. */
static bool ctx_progress(void)
{
	bool any = false;
	unsigned int i;

	for (i = 0; i < nctx; i++) {
		struct dctx *d = &ctxs[i];
		struct stat st;

		if (d->done)
			continue;
		if (!d->attached) {
			/* Acquire: pairs with the context's release of
			 * state (dump.c qps_dump_attach). */
			uint32_t s = atomic_load_explicit(
				&((struct qps_dump_hdr *)d->ring)->state,
				memory_order_acquire);

			if (s == QPS_DUMP_ST_ATTACHED) {
				d->attached = true;
				fprintf(stderr, "qps_dump: listening on %s, "
					"link-type EN10MB (Ethernet), snapshot "
					"length %u bytes\n", d->label,
					opt.snaplen);
			} else if (mono_ms() > d->attach_by) {
				fprintf(stderr, "qps_dump: %s did not take the "
					"capture ring (a library without "
					"capture)\n", d->label);
				ctx_release(d);
				continue;
			}
		}
		/* The context was destroyed: its segment's name is gone,
		 * after its last record; one more pass reads those. */
		if (fstat(d->seg_fd, &st) == 0 && st.st_nlink == 0)
			d->closing = true;
		any = true;
	}
	return any;
}

static int run(struct dp_out *o, const struct bpf_program *prog)
{
	const struct timespec nap = { 0, 1000000 };
	uint64_t next_scan = 0, start_ticks = 0;
	unsigned int i;
	int ret = 0;

	for (;;) {
		uint64_t now = mono_ms();
		bool any;

		if (opt.wait && now >= next_scan) {
			if (ctx_scan(true) < 0 && !nctx) {
				ret = -EACCES;
				break;
			}
			next_scan = now + 10;
		}
		any = ctx_progress();
		ret = pass(o, prog);
		if (ret < 0)
			break;
		for (i = 0; i < nctx; i++)
			if (ctxs[i].closing && !ctxs[i].done)
				ctx_release(&ctxs[i]);
		if (stop_flag || (opt.count && captured >= opt.count))
			break;
		if (!start_ticks && nctx && ctxs[0].sh)
			start_ticks = ctxs[0].sh->start_ticks;
		if (kill(opt.pid, 0) < 0 && errno == ESRCH)
			break;
		if (start_ticks &&
		    sr_proc_state(opt.pid, start_ticks) == SR_PROC_GONE)
			break;
		if (!any && !opt.wait)
			break;
		if (!ret)
			nanosleep(&nap, NULL);
	}
	if (ret >= 0 && !(opt.count && captured >= opt.count))
		ret = pass(o, prog);
	for (i = 0; i < nctx; i++)
		if (!ctxs[i].done)
			ctx_release(&ctxs[i]);
	return ret < 0 ? ret : 0;
}

/* Scan once (without --wait) and open the output: 0, or the exit
 * status with the reason said. */
static int start(struct dp_out *o)
{
	unsigned int i;
	int ret;

	if (!opt.wait) {
		ret = ctx_scan(false);
		if (ret < 0) {
			fprintf(stderr, "qps_dump: permission denied: only "
				"root or the process's user may capture\n");
			return 1;
		}
		if (!nctx) {
			fprintf(stderr, "qps_dump: no qpsock context of pid "
				"%d%s\n", opt.pid, opt.ctx >= 0 ?
				" with that number" : "");
			return 1;
		}
		if (!ret)
			return 1;	/* each one said why */
	}
	ret = dp_open(o, opt.out, opt.ng, opt.snaplen);
	if (ret < 0) {
		fprintf(stderr, "qps_dump: %s: %s\n", opt.out, strerror(-ret));
		if (o->own && o->f)
			fclose(o->f);
		for (i = 0; i < nctx; i++)
			if (!ctxs[i].done)
				ctx_release(&ctxs[i]);
		return 1;
	}
	return 0;
}

static void report(int ret)
{
	uint64_t drops = 0, bad = 0;
	unsigned int i;

	for (i = 0; i < nctx; i++) {
		drops += ctxs[i].drops;
		bad += ctxs[i].bad;
	}
	bad += ud_bad;
	fprintf(stderr, "%" PRIu64 " packets captured\n", captured);
	fprintf(stderr, "%" PRIu64 " packets received by filter\n",
		captured + filtered_out);
	fprintf(stderr, "%" PRIu64 " packets dropped by capture ring\n",
		drops);
	if (bad)
		fprintf(stderr, "qps_dump: %" PRIu64 " malformed records "
			"skipped\n", bad);
	if (ret == -EACCES)
		fprintf(stderr, "qps_dump: permission denied: only root or the "
			"process's user may capture\n");
	else if (ret < 0 && ret != -EPIPE)
		fprintf(stderr, "qps_dump: %s\n", strerror(-ret));
}

int main(int argc, char **argv)
{
	struct bpf_program prog, *progp = NULL;
	struct sigaction sa;
	struct dp_out o;
	pcap_t *pd;
	int ret, status;

	if (parse_args(argc, argv) < 0)
		return 2;
	pd = pcap_open_dead(DLT_EN10MB, (int)opt.snaplen);
	if (!pd) {
		fprintf(stderr, "qps_dump: libpcap: cannot open\n");
		free(opt.filter);
		return 1;
	}
	if (opt.filter) {
		if (pcap_compile(pd, &prog, opt.filter, 1,
				 PCAP_NETMASK_UNKNOWN) < 0) {
			fprintf(stderr, "qps_dump: filter: %s\n",
				pcap_geterr(pd));
			status = 2;
			goto out;
		}
		progp = &prog;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = on_bus;
	sigaction(SIGBUS, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	status = start(&o);
	if (status)
		goto out;
	ret = run(&o, progp);
	if (dp_close(&o) < 0 && !ret)
		ret = -EIO;
	report(ret);
	status = ret < 0 && ret != -EPIPE ? 1 : 0;
out:
	if (progp)
		pcap_freecode(progp);
	pcap_close(pd);
	free(opt.filter);
	free(recs);
	free(arena);
	return status;
}
