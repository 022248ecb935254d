// SPDX-License-Identifier: MIT
/*
 * qps_stat - look inside running qpsock processes, as vma_stats and ss do:
 * the counters each context publishes in /dev/shm (docs/stat.md).
 *
 *   qps_stat                       every process and context, one line each
 *   qps_stat -p PID [-c CTX]       one process: counters by group, endpoints
 *   -i SECONDS [-n COUNT]          repeat with per-second rates
 *   --json                         JSON (JSON lines with -i)
 *   --record FILE -i SECONDS       also append a JSON line per interval
 *
 * Segments whose process is verifiably gone are reported stale and
 * removed. Whatever else sits under a segment's name is refused with a
 * reason (stat_read.h), and every string from a file is printed escaped.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stat_fields.h"
#include "stat_read.h"

struct opts {
	int pid;		/* 0: every process */
	long ctx;		/* -1: every context */
	double interval;	/* 0: once */
	long count;		/* intervals, 0: until interrupted */
	int json;
	const char *record;
};

/* One context being watched, by file name: its segment and the last two
 * readings. */
struct view {
	struct sr_seg seg;
	struct sr_snap now;
	struct qps_stats prev;
	int have_prev;
	int seen;		/* found in the latest listing */
};

struct rates {
	double dt;		/* seconds since the previous reading */
	double rx_pps, rx_bps, tx_pps, tx_bps, drops_ps;
	double db_per_wqe;	/* doorbells per WQE over the interval */
};

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: qps_stat [-p PID [-c CTX]] [-i SECONDS [-n COUNT]] "
		"[--json] [--record FILE]\n"
		"  (none)        list processes and contexts that publish "
		"qpsock counters\n"
		"  -p PID        one process: counters by group, then its "
		"endpoints\n"
		"  -c CTX        only context CTX of that process\n"
		"  -i SECONDS    repeat every SECONDS with per-second rates\n"
		"  -n COUNT      stop after COUNT intervals\n"
		"  --json        JSON; one object per line with -i\n"
		"  --record FILE append one JSON line per interval to FILE "
		"(needs -i)\n"
		"Segments of processes that are gone are reported stale and "
		"removed.\n");
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Linux's prio2band, as src/prio_bands.c: the band of a priority. */
static const unsigned char prio2band[16] = {
	1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1 };

static int ep_prio(const struct qps_stat_ep *b)
{
	return atomic_load_explicit(&((struct qps_stat_ep *)b)->priority,
				    memory_order_relaxed);
}

/* What the list calls drops: datagrams lost on the way, either side. */
static uint64_t drops(const struct qps_stats *s)
{
	return s->rx_queue_full + s->rx_errors + s->tx_errors +
	       s->tx_band_drops[0] + s->tx_band_drops[1] +
	       s->tx_band_drops[2] + s->dev_tx_drops + s->dev_rx_drops;
}

static void rates_of(const struct view *v, double dt, struct rates *r)
{
	const struct qps_stats *a = &v->prev, *b = &v->now.all;
	uint64_t dw = b->tx_wqes - a->tx_wqes;

	memset(r, 0, sizeof(*r));
	r->dt = dt;
	if (dt <= 0 || !v->have_prev)
		return;
	r->rx_pps = (double)(b->rx_packets - a->rx_packets) / dt;
	r->rx_bps = (double)(b->rx_bytes - a->rx_bytes) / dt;
	r->tx_pps = (double)(b->tx_packets - a->tx_packets) / dt;
	r->tx_bps = (double)(b->tx_bytes - a->tx_bytes) / dt;
	r->drops_ps = (double)(drops(b) - drops(a)) / dt;
	r->db_per_wqe = dw ? (double)(b->tx_doorbells - a->tx_doorbells) /
			     (double)dw : 0;
}

static const char *ip_str(uint32_t addr, char *buf, size_t len)
{
	struct in_addr a = { .s_addr = addr };

	if (!inet_ntop(AF_INET, &a, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

static const char *sin_str(uint32_t addr, uint16_t port, char *buf,
			   size_t len)
{
	char ip[INET_ADDRSTRLEN];

	snprintf(buf, len, "%s:%u", ip_str(addr, ip, sizeof(ip)),
		 ntohs(port));
	return buf;
}

/* --- text views ------------------------------------------------------ */

static void print_list_head(void)
{
	printf("%-8s %-16s %3s %-8s %-12s %-15s %5s %12s %12s %10s\n", "PID",
	       "COMMAND", "CTX", "PROVIDER", "DEVICE", "ADDRESS", "EPS",
	       "RX_DGRAMS", "TX_DGRAMS", "DROPS");
}

/* Another PID namespace's pid is not one of ours: marked. */
static const char *pid_str(const struct sr_seg *g, char *buf, size_t len)
{
	snprintf(buf, len, "%d%s", g->pid, g->other_ns ? "*" : "");
	return buf;
}

static void print_list_row(const struct view *v)
{
	const struct qps_stat_hdr *h = &v->seg.h;
	const struct qps_stats *s = &v->now.all;
	char ip[INET_ADDRSTRLEN], pid[16];

	printf("%-8s %-16s %3u %-8s %-12s %-15s %5u %12" PRIu64 " %12" PRIu64
	       " %10" PRIu64 "\n", pid_str(&v->seg, pid, sizeof(pid)),
	       v->seg.comm, h->ctx_id, v->seg.provider, v->seg.devname,
	       ip_str(h->addr, ip, sizeof(ip)), v->now.neps, s->rx_packets,
	       s->tx_packets, drops(s));
}

static void print_counters(const struct qps_stats *s, int transport_ud)
{
	const char *group = NULL;
	unsigned int i, k, col = 0;

	for (i = 0; i < sf_nfields; i++) {
		const struct sf_field *f = &sf_fields[i];

		if (!transport_ud && !strcmp(f->group, "UD transport"))
			continue;
		if (!group || strcmp(group, f->group)) {
			group = f->group;
			printf("%s%s\n", col ? "\n" : "", group);
			col = 0;
		}
		if (f->n == 1) {
			printf("  %-22s %14" PRIu64, f->name, sf_get(s, f, 0));
		} else {
			/* Arrays: rx_bad by reason index, bands 0..2. */
			char buf[256];
			int len = 0;

			for (k = 0; k < f->n && len < (int)sizeof(buf) - 24;
			     k++)
				len += snprintf(buf + len, sizeof(buf) -
						(size_t)len, "%s%" PRIu64,
						k ? "/" : "", sf_get(s, f, k));
			printf("  %-22s %14s", f->name, buf);
		}
		if (++col == 3 || f->n > 3) {
			printf("\n");
			col = 0;
		}
	}
	if (col)
		printf("\n");
}

static void groups_str(const struct qps_stat_ep *b, char *buf, size_t len)
{
	size_t off = 0;
	uint32_t i, n = b->ngroups < QPS_STAT_EP_GROUPS ? b->ngroups :
						    QPS_STAT_EP_GROUPS;

	buf[0] = '\0';
	for (i = 0; i < n && off < len; i++) {
		char g[INET_ADDRSTRLEN], src[INET_ADDRSTRLEN];

		ip_str(b->mc[i].group, g, sizeof(g));
		if (b->mc[i].source)
			off += (size_t)snprintf(buf + off, len - off,
						"%s%s(src %s)", i ? "," : "", g,
						ip_str(b->mc[i].source, src,
						       sizeof(src)));
		else
			off += (size_t)snprintf(buf + off, len - off, "%s%s",
						i ? "," : "", g);
	}
	if (b->ngroups > n && off < len)
		snprintf(buf + off, len - off, ",+%u", b->ngroups - n);
	if (!b->ngroups)
		snprintf(buf, len, "-");
}

static void print_eps(const struct sr_snap *sn)
{
	uint32_t i;

	printf("endpoints: %u open\n", sn->neps);
	if (!sn->neps)
		return;
	printf("%5s %-21s %-21s %4s %4s %3s %5s %5s %6s %10s %12s %10s %12s "
	       "%6s %6s %6s %6s %s\n", "SLOT", "LOCAL", "PEER", "PRIO", "BAND",
	       "TXQ", "RXQ", "HWM", "RCVBUF", "RX_DGRAMS", "RX_BYTES",
	       "TX_DGRAMS", "TX_BYTES", "QFULL", "TRUNC", "FILT", "TXDROP",
	       "GROUPS");
	for (i = 0; i < sn->neps; i++) {
		const struct qps_stat_ep *b = &sn->eps[i].b;
		char l[32] = "-", p[32] = "-", g[512], txq[16] = "-";
		int prio = ep_prio(b);

		if (b->flags & QPS_STAT_EP_BOUND)
			sin_str(b->laddr, b->lport, l, sizeof(l));
		if (b->flags & QPS_STAT_EP_CONNECTED)
			sin_str(b->paddr, b->pport, p, sizeof(p));
		if (b->txq >= 0)
			snprintf(txq, sizeof(txq), "%d", b->txq);
		groups_str(b, g, sizeof(g));
		printf("%5u %-21s %-21s %4d %4u %3s %5u %5u %6u %10" PRIu64
		       " %12" PRIu64 " %10" PRIu64 " %12" PRIu64 " %6" PRIu64
		       " %6" PRIu64 " %6" PRIu64 " %6" PRIu64 " %s\n",
		       sn->eps[i].slot, l, p, prio, prio2band[prio & 15], txq,
		       b->rxq_depth, b->rxq_hwm, b->rcvbuf, b->rx_packets,
		       b->rx_bytes, b->tx_packets, b->tx_bytes,
		       b->rx_queue_full, b->rx_truncated, b->rx_filtered,
		       b->tx_drops, g);
	}
}

static void print_rates(const struct view *v, const struct rates *r)
{
	const struct qps_stats *s = &v->now.all;

	printf("rates: rx %.0f dgram/s %.0f B/s, tx %.0f dgram/s %.0f B/s, "
	       "drops %.0f/s, doorbells/WQE %.3f, band depth %" PRIu64
	       "/%" PRIu64 "/%" PRIu64 "\n", r->rx_pps, r->rx_bps, r->tx_pps,
	       r->tx_bps, r->drops_ps, r->db_per_wqe, s->tx_band_depth[0],
	       s->tx_band_depth[1], s->tx_band_depth[2]);
}

static void print_detail(const struct view *v, const struct rates *r)
{
	const struct qps_stat_hdr *h = &v->seg.h;
	char ip[INET_ADDRSTRLEN];

	printf("pid %d%s (%s) context %u: %s %s %s "
	       "%02x:%02x:%02x:%02x:%02x:%02x, %s, %s path, %u send "
	       "queue%s, max %u endpoints, snapshot %.2f s old\n",
	       h->pid, v->seg.other_ns ? " of another PID namespace" : "",
	       v->seg.comm, h->ctx_id, v->seg.provider, v->seg.devname,
	       ip_str(h->addr, ip, sizeof(ip)), h->mac[0], h->mac[1],
	       h->mac[2], h->mac[3], h->mac[4], h->mac[5],
	       h->transport == QPS_TRANSPORT_UD ? "UD" : "raw",
	       h->tx_path == QPS_TX_PATH_DIRECT ? "direct" : "generic",
	       h->nsq, h->nsq == 1 ? "" : "s", h->max_ep,
	       (double)v->now.snap_age_ns / 1e9);
	if (r)
		print_rates(v, r);
	print_counters(&v->now.all, h->transport == QPS_TRANSPORT_UD);
	print_eps(&v->now);
}

static void print_line_head(void)
{
	printf("%-8s %-8s %3s %10s %12s %10s %12s %9s %7s %s\n", "TIME", "PID",
	       "CTX", "RX_DGRAM/S", "RX_B/S", "TX_DGRAM/S", "TX_B/S",
	       "DROPS/S", "DB/WQE", "BAND_DEPTH");
}

static void print_line(const struct view *v, const struct rates *r)
{
	const struct qps_stats *s = &v->now.all;
	char t[16];
	time_t now = time(NULL);
	struct tm tm;

	strftime(t, sizeof(t), "%H:%M:%S", localtime_r(&now, &tm));
	printf("%-8s %-8d %3u %10.0f %12.0f %10.0f %12.0f %9.0f %7.3f "
	       "%" PRIu64 "/%" PRIu64 "/%" PRIu64 "\n", t, v->seg.h.pid,
	       v->seg.h.ctx_id, r->rx_pps, r->rx_bps, r->tx_pps, r->tx_bps,
	       r->drops_ps, r->db_per_wqe, s->tx_band_depth[0],
	       s->tx_band_depth[1], s->tx_band_depth[2]);
}

/* --- JSON ------------------------------------------------------------ */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_counters(FILE *f, const struct qps_stats *s)
{
	unsigned int i, k;

	fputc('{', f);
	for (i = 0; i < sf_nfields; i++) {
		const struct sf_field *fl = &sf_fields[i];

		fprintf(f, "%s\"%s\":", i ? "," : "", fl->name);
		if (fl->n == 1) {
			fprintf(f, "%" PRIu64, sf_get(s, fl, 0));
			continue;
		}
		fputc('[', f);
		for (k = 0; k < fl->n; k++)
			fprintf(f, "%s%" PRIu64, k ? "," : "", sf_get(s, fl, k));
		fputc(']', f);
	}
	fputc('}', f);
}

static void json_sin(FILE *f, const char *key, int set, uint32_t a,
		     uint16_t p)
{
	char buf[32];

	fprintf(f, ",\"%s\":", key);
	if (set)
		json_str(f, sin_str(a, p, buf, sizeof(buf)));
	else
		fputs("null", f);
}

static void json_eps(FILE *f, const struct sr_snap *sn)
{
	uint32_t i, k;

	fputc('[', f);
	for (i = 0; i < sn->neps; i++) {
		const struct qps_stat_ep *b = &sn->eps[i].b;
		uint32_t n = b->ngroups < QPS_STAT_EP_GROUPS ? b->ngroups :
							   QPS_STAT_EP_GROUPS;
		char g[INET_ADDRSTRLEN];

		fprintf(f, "%s{\"slot\":%u", i ? "," : "", sn->eps[i].slot);
		json_sin(f, "local", b->flags & QPS_STAT_EP_BOUND, b->laddr,
			 b->lport);
		json_sin(f, "peer", b->flags & QPS_STAT_EP_CONNECTED, b->paddr,
			 b->pport);
		fprintf(f, ",\"priority\":%d,\"band\":%u,\"txq\":%d,\"rcvbuf\":%u,"
			"\"rxq_depth\":%u,\"rxq_hwm\":%u,\"rx_packets\":%" PRIu64
			",\"rx_bytes\":%" PRIu64 ",\"rx_queue_full\":%" PRIu64
			",\"rx_truncated\":%" PRIu64 ",\"rx_filtered\":%" PRIu64
			",\"tx_packets\":%" PRIu64 ",\"tx_bytes\":%" PRIu64
			",\"tx_drops\":%" PRIu64 ",\"ngroups\":%u,\"groups\":[",
			ep_prio(b), prio2band[ep_prio(b) & 15], b->txq, b->rcvbuf, b->rxq_depth, b->rxq_hwm,
			b->rx_packets, b->rx_bytes, b->rx_queue_full,
			b->rx_truncated, b->rx_filtered, b->tx_packets,
			b->tx_bytes, b->tx_drops, b->ngroups);
		for (k = 0; k < n; k++) {
			fprintf(f, "%s{\"group\":", k ? "," : "");
			json_str(f, ip_str(b->mc[k].group, g, sizeof(g)));
			fputs(",\"source\":", f);
			json_str(f, ip_str(b->mc[k].source, g, sizeof(g)));
			fputc('}', f);
		}
		fputs("]}", f);
	}
	fputc(']', f);
}

static void json_ctx(FILE *f, const struct view *v, const struct rates *r,
		     int with_eps)
{
	const struct qps_stat_hdr *h = &v->seg.h;
	char ip[INET_ADDRSTRLEN];

	fprintf(f, "{\"pid\":%d,\"other_pid_namespace\":%s,\"command\":",
		h->pid, v->seg.other_ns ? "true" : "false");
	json_str(f, v->seg.comm);
	fprintf(f, ",\"ctx\":%u,\"provider\":", h->ctx_id);
	json_str(f, v->seg.provider);
	fputs(",\"device\":", f);
	json_str(f, v->seg.devname);
	fputs(",\"address\":", f);
	json_str(f, ip_str(h->addr, ip, sizeof(ip)));
	fprintf(f, ",\"transport\":\"%s\",\"tx_path\":\"%s\",\"send_queues\":%u,"
		"\"max_ep\":%u,\"endpoints_open\":%u,\"snapshot_age_ms\":%.1f,"
		"\"drops\":%" PRIu64, h->transport == QPS_TRANSPORT_UD ? "ud" :
		"raw", h->tx_path == QPS_TX_PATH_DIRECT ? "direct" : "generic",
		h->nsq, h->max_ep, v->now.neps,
		(double)v->now.snap_age_ns / 1e6, drops(&v->now.all));
	if (r)
		fprintf(f, ",\"rates\":{\"interval_s\":%.3f,\"rx_pps\":%.1f,"
			"\"rx_Bps\":%.1f,\"tx_pps\":%.1f,\"tx_Bps\":%.1f,"
			"\"drops_ps\":%.1f,\"doorbells_per_wqe\":%.4f}",
			r->dt, r->rx_pps, r->rx_bps, r->tx_pps, r->tx_bps,
			r->drops_ps, r->db_per_wqe);
	fputs(",\"counters\":", f);
	json_counters(f, &v->now.all);
	if (with_eps) {
		fputs(",\"endpoints\":", f);
		json_eps(f, &v->now);
	}
	fputc('}', f);
}

/* --- gathering ------------------------------------------------------- */

struct watch {
	struct view *v;
	size_t n, cap;
	int stale;		/* stale segments removed so far */
	int failed;		/* unreadable segments of the asked pid */
	int noperm;		/* other users' segments, list view */
	int said_noperm;
};

static struct view *watch_find(struct watch *w, const char *name)
{
	size_t i;

	for (i = 0; i < w->n; i++)
		if (!strcmp(w->v[i].seg.name, name))
			return &w->v[i];
	return NULL;
}

static struct view *watch_add(struct watch *w, const struct sr_seg *s)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 8;
		struct view *nv = realloc(w->v, cap * sizeof(*nv));

		if (!nv)
			return NULL;
		w->v = nv;
		w->cap = cap;
	}
	memset(&w->v[w->n], 0, sizeof(w->v[w->n]));
	w->v[w->n].seg = *s;
	return &w->v[w->n++];
}

static void watch_drop_unseen(struct watch *w)
{
	size_t i = 0;

	while (i < w->n) {
		if (w->v[i].seen) {
			i++;
			continue;
		}
		sr_snap_free(&w->v[i].now);
		w->v[i] = w->v[--w->n];
	}
}

/* A segment whose process sr_open found gone: removed, and said. */
static void remove_stale(struct watch *w, const struct opts *o,
			 const struct sr_seg *s)
{
	int r = sr_remove(s);

	if (r == 0) {
		w->stale++;
		fprintf(stderr, "qps_stat: %s/%s: process %d is gone: stale, "
			"removed\n", QPS_STAT_DIR, s->name, s->pid);
	} else if (r != -ENOENT && r != -ESTALE) {
		fprintf(stderr, "qps_stat: %s/%s: process %d is gone: stale, "
			"not removed: %s\n", QPS_STAT_DIR, s->name, s->pid,
			strerror(-r));
		if (o->pid)
			w->failed++;
	}
}

/* A segment that cannot be shown: why, unless the list view meets
 * another user's (mode 0600: summed up once) or one being created. */
static void refused(struct watch *w, const struct opts *o,
		    const struct sr_seg *s, enum sr_status st, int err)
{
	if (st == SR_GONE)
		return;	/* its context closed meanwhile */
	if (st == SR_PERM && !o->pid) {
		w->noperm++;
		return;
	}
	if (st != SR_BUSY || o->pid) {
		if (err)
			fprintf(stderr, "qps_stat: %s/%s: %s: %s\n",
				QPS_STAT_DIR, s->name, sr_strstatus(st),
				strerror(err));
		else
			fprintf(stderr, "qps_stat: %s/%s: %s\n", QPS_STAT_DIR,
				s->name, sr_strstatus(st));
	}
	if (o->pid && st != SR_BUSY)
		w->failed++;
}

/* Open, check and read @s into its view. -ENOMEM, else 0. */
static int gather_one(struct watch *w, const struct opts *o,
		      struct sr_seg *s)
{
	enum sr_status st = sr_open(s);
	struct sr_snap now;
	struct view *v;
	int r;

	if (st == SR_STALE) {
		remove_stale(w, o, s);
		return 0;
	}
	if (st != SR_OK) {
		refused(w, o, s, st, st == SR_IO ? s->err : 0);
		return 0;
	}
	r = sr_read(s, &now);
	sr_close(s);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		refused(w, o, s, r == -ENODATA ? SR_SHORT : SR_IO,
			r == -ENODATA ? 0 : -r);
		return 0;
	}
	v = watch_find(w, s->name);
	/* Another file under the same name (a reused pid): no rate
	 * across two processes. */
	if (v && (v->seg.dev != s->dev || v->seg.ino != s->ino))
		v->have_prev = 0;
	if (!v) {
		v = watch_add(w, s);
		if (!v) {
			sr_snap_free(&now);
			return -ENOMEM;
		}
	}
	v->seg = *s;
	sr_snap_free(&v->now);
	v->now = now;
	v->seen = 1;
	return 0;
}

/*
 * Read every segment the options ask for into @w. Each is opened afresh
 * by name every time, so that what it is, and whether its process still
 * runs, is judged on the file there now. Stale ones are reported on
 * stderr and removed; unreadable ones are reported, and those of the
 * asked pid counted in failed. Returns -errno on a listing error.
 */
static int gather(struct watch *w, const struct opts *o)
{
	struct sr_seg *segs;
	int n, i, r = 0;
	size_t k;

	n = sr_list(&segs);
	if (n < 0)
		return n;
	for (k = 0; k < w->n; k++)
		w->v[k].seen = 0;
	w->noperm = 0;
	for (i = 0; i < n && !r; i++) {
		if (o->pid && segs[i].pid != o->pid)
			continue;
		if (o->ctx >= 0 && segs[i].ctx_id != (unsigned long)o->ctx)
			continue;
		r = gather_one(w, o, &segs[i]);
	}
	free(segs);
	if (r)
		return r;
	watch_drop_unseen(w);
	if (w->noperm && !w->said_noperm) {
		fprintf(stderr, "qps_stat: %d segment%s of other users not "
			"shown (readable by their user and root only)\n",
			w->noperm, w->noperm == 1 ? "" : "s");
		w->said_noperm = 1;
	}
	return 0;
}

/* -p PID found nothing: say why, as precisely as we can. */
static void explain_missing(const struct opts *o, const struct watch *w)
{
	char path[64], raw[64] = "", comm[SR_ESC_LEN(64)];
	FILE *f;

	if (w->failed || w->stale)
		return;	/* said already */
	if (kill(o->pid, 0) < 0 && errno == ESRCH) {
		fprintf(stderr, "qps_stat: no process %d\n", o->pid);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/comm", o->pid);
	f = fopen(path, "r");
	if (f) {
		if (!fgets(raw, sizeof(raw), f))
			raw[0] = '\0';
		fclose(f);
		raw[strcspn(raw, "\n")] = '\0';
	}
	sr_escape(comm, sizeof(comm), raw, sizeof(raw));
	if (o->ctx >= 0)
		fprintf(stderr, "qps_stat: process %d (%s) has no context %ld "
			"publishing counters\n", o->pid, comm, o->ctx);
	else
		fprintf(stderr, "qps_stat: process %d (%s) publishes no qpsock "
			"counters (no context open, or QPS_STATS=0)\n", o->pid,
			comm);
}

/* --- main ------------------------------------------------------------ */

static void show(struct watch *w, const struct opts *o, double dt,
		 int repeat, int tty, FILE *rec)
{
	size_t i;
	struct rates r;

	if (o->json) {
		if (repeat) {
			for (i = 0; i < w->n; i++) {
				rates_of(&w->v[i], dt, &r);
				json_ctx(stdout, &w->v[i], &r, o->pid != 0);
				fputc('\n', stdout);
			}
		} else {
			printf("{\"stale_removed\":%d,\"contexts\":[", w->stale);
			for (i = 0; i < w->n; i++) {
				if (i)
					fputc(',', stdout);
				json_ctx(stdout, &w->v[i], NULL, 1);
			}
			printf("]}\n");
		}
	} else if (!repeat) {
		if (o->pid) {
			for (i = 0; i < w->n; i++) {
				if (i)
					printf("\n");
				print_detail(&w->v[i], NULL);
			}
		} else {
			print_list_head();
			for (i = 0; i < w->n; i++)
				print_list_row(&w->v[i]);
			for (i = 0; i < w->n && !w->v[i].seg.other_ns; i++)
				;
			if (i < w->n)
				printf("* pid of another PID namespace "
				       "(a container's), not of this one\n");
		}
	} else if (tty) {
		/* As top: home, clear, redraw. */
		printf("\033[H\033[2J");
		printf("qps_stat: every %.1f s, %zu context%s\n", o->interval,
		       w->n, w->n == 1 ? "" : "s");
		for (i = 0; i < w->n; i++) {
			rates_of(&w->v[i], dt, &r);
			if (o->pid) {
				printf("\n");
				print_detail(&w->v[i], &r);
			} else {
				if (!i)
					print_list_head();
				print_list_row(&w->v[i]);
				printf("  ");
				print_rates(&w->v[i], &r);
			}
		}
	} else {
		for (i = 0; i < w->n; i++) {
			rates_of(&w->v[i], dt, &r);
			print_line(&w->v[i], &r);
		}
	}
	if (rec && repeat) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		for (i = 0; i < w->n; i++) {
			rates_of(&w->v[i], dt, &r);
			fprintf(rec, "{\"time\":%.3f,\"context\":",
				(double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
			json_ctx(rec, &w->v[i], &r, 0);
			fputs("}\n", rec);
		}
		fflush(rec);
	}
	fflush(stdout);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "record", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c;

	memset(o, 0, sizeof(*o));
	o->ctx = -1;
	while ((c = getopt_long(argc, argv, "p:c:i:n:h", lo, NULL)) != -1) {
		switch (c) {
		case 'p': {
			long v = strtol(optarg, &end, 10);

			if (*end || v <= 0 || v > INT32_MAX) {
				fprintf(stderr, "qps_stat: -p: not a pid: %s\n",
					optarg);
				return -1;
			}
			o->pid = (int)v;
			break;
		}
		case 'c':
			o->ctx = strtol(optarg, &end, 10);
			if (*end || o->ctx < 0) {
				fprintf(stderr, "qps_stat: -c: not a context "
					"number: %s\n", optarg);
				return -1;
			}
			break;
		case 'i':
			o->interval = strtod(optarg, &end);
			if (*end || !(o->interval >= 0.1) ||
			    o->interval > 86400) {
				fprintf(stderr, "qps_stat: -i: seconds from 0.1 "
					"to 86400: %s\n", optarg);
				return -1;
			}
			break;
		case 'n':
			o->count = strtol(optarg, &end, 10);
			if (*end || o->count <= 0) {
				fprintf(stderr, "qps_stat: -n: a positive "
					"count: %s\n", optarg);
				return -1;
			}
			break;
		case 'j':
			o->json = 1;
			break;
		case 'r':
			o->record = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "qps_stat: unexpected argument: %s\n",
			argv[optind]);
		return -1;
	}
	if (o->ctx >= 0 && !o->pid) {
		fprintf(stderr, "qps_stat: -c needs -p\n");
		return -1;
	}
	if ((o->record || o->count) && o->interval == 0) {
		fprintf(stderr, "qps_stat: %s needs -i\n",
			o->record ? "--record" : "-n");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct watch w = { 0 };
	struct sigaction sa;
	struct opts o;
	FILE *rec = NULL;
	double t_prev, t;
	long iter = 0;
	int ret, rc = 0, tty;
	size_t i;

	if (parse_opts(argc, argv, &o) < 0)
		return 2;
	if (o.record) {
		rec = fopen(o.record, "a");
		if (!rec) {
			fprintf(stderr, "qps_stat: %s: %s\n", o.record,
				strerror(errno));
			return 1;
		}
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	tty = isatty(STDOUT_FILENO);

	ret = gather(&w, &o);
	if (ret < 0) {
		fprintf(stderr, "qps_stat: %s: %s\n", QPS_STAT_DIR,
			strerror(-ret));
		rc = 1;
		goto out;
	}
	/* What could be read is shown even when something else under the
	 * pid's names was refused: a squatter must not hide the process. */
	if (o.pid && w.failed)
		rc = 1;
	if (o.pid && !w.n) {
		explain_missing(&o, &w);
		rc = 1;
		goto out;
	}
	t_prev = mono_s();
	if (o.interval == 0) {
		show(&w, &o, 0, 0, tty, NULL);
		goto out;
	}
	if (!tty && !o.json)
		print_line_head();
	while (!stop_flag && (!o.count || iter < o.count)) {
		for (i = 0; i < w.n; i++) {
			w.v[i].prev = w.v[i].now.all;
			w.v[i].have_prev = 1;
		}
		usleep((useconds_t)(o.interval * 1e6));
		if (stop_flag)
			break;
		ret = gather(&w, &o);
		if (ret < 0) {
			fprintf(stderr, "qps_stat: %s\n", strerror(-ret));
			rc = 1;
			break;
		}
		t = mono_s();
		show(&w, &o, t - t_prev, 1, tty, rec);
		t_prev = t;
		iter++;
		if (o.pid && !w.n) {
			fprintf(stderr, "qps_stat: process %d: no context "
				"left\n", o.pid);
			rc = 1;
			break;
		}
	}
out:
	for (i = 0; i < w.n; i++)
		sr_snap_free(&w.v[i].now);
	free(w.v);
	if (rec)
		fclose(rec);
	return rc;
}
