// SPDX-License-Identifier: MIT
/*
 * Capture for qps_dump: take the ring a dumper names in the stats
 * segment, copy the frames of the receive side and of each send queue
 * into their sub-rings (layout: dump_shm.h), let the ring go when the
 * dumper asks or dies. The protocol and its costs are in docs/dump.md.
 *
 * The ring file comes from another process, so it is hostile input:
 * opened without following a link, taken only when regular, owned by us
 * or root, and exactly of the layout this build writes, all checked on a
 * private copy of its header; from then on nothing is read back from it
 * but the reader's tail, and a tail that makes no sense drops records,
 * never writes outside a sub-ring. Only who can open our stats segment
 * read-write (its owner, root) can name a ring at all; such a user could
 * also ptrace us, so a ring truncated under us (SIGBUS) is not guarded
 * against.
 *
 * The writers never wait for the dumper: a record that does not fit is
 * counted in its sub-ring's drops and the frame goes out regardless.
 */
#define _GNU_SOURCE	/* F_OFD_GETLK */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dump.h"
#include "dump_shm.h"
#include "sq.h"
#include "ud.h"

/* $QPS_DUMP_WAIT_MS is capped at this. */
#define QPS_DUMP_WAIT_MAX_MS 60000ul

/* One sub-ring as its writer sees it: its position kept here, never
 * taken back from the file. */
struct qps_dump_w {
	uint64_t head;
	uint64_t drops;
	uint64_t records;
	struct qps_dump_sub *sub;
	uint8_t *data;
};

struct qps_dump {
	void *base;
	size_t size;
	int fd;				/* for the dumper's lock, and unlink */
	uint64_t id;
	uint64_t mask;			/* ring_bytes - 1 */
	uint32_t snaplen;
	uint32_t nring;
	char name[64];
	struct qps_dump_w w[];
};

/*
 * One record into sub-ring @w: @alen bytes at @a then @blen at @b, cut to
 * the snap length. Its writer's lock held.
 */
static void qps_dump_put(struct qps_dump *d, struct qps_dump_w *w,
			 const struct qps_dump_rec *r0, const void *a,
			 uint32_t alen, const void *b, uint32_t blen)
{
	uint64_t ring = d->mask + 1, used, pos, end, need, total, tail;
	struct qps_dump_rec r = *r0;
	uint8_t *p;
	uint32_t ca;

	r.origlen = alen + blen;
	r.caplen = r.origlen < d->snaplen ? r.origlen : d->snaplen;
	need = qps_dump_align8(sizeof(r) + r.caplen);
	r.len = (uint32_t)need;
	/* Acquire: pairs with the reader's release of tail, after which the
	 * bytes before it are ours again. */
	tail = atomic_load_explicit(&w->sub->tail, memory_order_acquire);
	used = w->head - tail;
	pos = w->head & d->mask;
	end = ring - pos;
	total = need > end ? end + need : need;
	if (used > ring || ring - used < total) {
		w->drops++;
		atomic_store_explicit(&w->sub->drops, w->drops,
				      memory_order_relaxed);
		return;
	}
	if (need > end) {
		const uint32_t pad[2] = { (uint32_t)end, QPS_DUMP_PAD };

		memcpy(w->data + pos, pad, sizeof(pad));
		w->head += end;
		pos = 0;
	}
	p = w->data + pos;
	memcpy(p, &r, sizeof(r));
	p += sizeof(r);
	ca = alen < r.caplen ? alen : r.caplen;
	if (ca)
		memcpy(p, a, ca);
	if (r.caplen > ca)
		memcpy(p + ca, b, r.caplen - ca);
	w->head += need;
	w->records++;
	atomic_store_explicit(&w->sub->records, w->records,
			      memory_order_relaxed);
	/* Release: the record's bytes before the head that covers them;
	 * pairs with the reader's acquire load of head. */
	atomic_store_explicit(&w->sub->head, w->head, memory_order_release);
}

/* The multicast MAC of group @addr (network order), RFC 1112. */
static void qps_dump_mcast_mac(uint32_t addr, uint8_t mac[6])
{
	const uint8_t *a = (const uint8_t *)&addr;

	mac[0] = 0x01;
	mac[1] = 0x00;
	mac[2] = 0x5e;
	mac[3] = a[1] & 0x7f;
	mac[4] = a[2];
	mac[5] = a[3];
}

static bool qps_dump_is_mcast(uint32_t addr)
{
	return (ntohl(addr) >> 28) == 0xe;
}

/* ::ffff:a.b.c.d into @v4 (network order). */
static bool qps_dump_gid_v4(const uint8_t *gid, uint32_t *v4)
{
	static const uint8_t prefix[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
	};

	if (memcmp(gid, prefix, sizeof(prefix)) != 0)
		return false;
	memcpy(v4, gid + 12, 4);
	return true;
}

/*
 * The addresses, TTL and TOS of a received UD message from its GRH: RoCE
 * v2 puts the packet's IPv4 header in its last 20 bytes (the first 20
 * zero), IB and RoCE v1 an IPv6-format GRH with IPv4-mapped GIDs.
 */
static int qps_dump_grh(const uint8_t *grh, struct qps_dump_ud *u)
{
	static const uint8_t zero[20];
	const uint8_t *ip = grh + 20;

	if (!memcmp(grh, zero, sizeof(zero))) {
		if (ip[0] != 0x45)
			return -EPROTO;
		memcpy(&u->saddr, ip + 12, 4);
		memcpy(&u->daddr, ip + 16, 4);
		u->tos = ip[1];
		u->ttl = ip[8];
		return 0;
	}
	if ((grh[0] >> 4) != 6 || !qps_dump_gid_v4(grh + 8, &u->saddr) ||
	    !qps_dump_gid_v4(grh + 24, &u->daddr))
		return -EPROTO;
	u->tos = (uint8_t)((grh[0] << 4) | (grh[1] >> 4));
	u->ttl = grh[7];
	return 0;
}

/*
 * A UD receive completion as a UD record: the GRH, the completion and
 * what the context knows of itself. The sender's MAC is in neither, so
 * it stays zero; the PSN is not reported, so it is 0.
 */
static void qps_dump_rx_ud(struct qps_ctx *ctx, struct qps_dump *d,
			   const struct qps_dump_rec *r, const struct ibv_wc *wc)
{
	const uint8_t *buf = ctx->rx.buf + (size_t)wc->wr_id * ctx->rx.buf_size;
	struct qps_dump_ud u;

	if (wc->byte_len < QPS_UD_GRH_LEN)
		return;
	memset(&u, 0, sizeof(u));
	if (qps_dump_grh(buf, &u) < 0)
		return;
	if (qps_dump_is_mcast(u.daddr)) {
		qps_dump_mcast_mac(u.daddr, u.dmac);
		u.dqpn = QPS_UD_MCAST_QPN;
	} else {
		memcpy(u.dmac, ctx->info.mac, 6);
		u.dqpn = ctx->qp->qp_num & QPS_UD_QPN_MASK;
	}
	u.sqpn = wc->src_qp & QPS_UD_QPN_MASK;
	u.qkey = QPS_UD_QKEY;
	if (wc->wc_flags & IBV_WC_WITH_IMM) {
		u.opcode = QPS_DUMP_BTH_UD_SEND_IMM;
		u.imm = wc->imm_data;
	} else {
		u.opcode = QPS_DUMP_BTH_UD_SEND;
	}
	u.len = wc->byte_len - QPS_UD_GRH_LEN;
	qps_dump_put(d, &d->w[0], r, &u, sizeof(u), buf + QPS_UD_GRH_LEN,
		     u.len);
}

void qps_dump_rx(struct qps_ctx *ctx, const struct ibv_wc *wc, int n)
{
	/* Acquire: pairs with the release that published the ring
	 * (qps_dump_attach); rx.lock keeps it mapped while we use it. */
	struct qps_dump *d = __atomic_load_n(&ctx->dump, __ATOMIC_ACQUIRE);
	struct qps_dump_rec r;
	int i;

	if (!d)
		return;
	memset(&r, 0, sizeof(r));
	r.dir = QPS_DUMP_RX;
	r.flags = ctx->ud ? QPS_DUMP_F_UD : 0;
	r.ts_ns = qps_realtime_ns();
	for (i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS ||
		    wc[i].wr_id >= ctx->rx.depth ||
		    wc[i].byte_len > ctx->rx.buf_size)
			continue;
		if (ctx->ud) {
			qps_dump_rx_ud(ctx, d, &r, &wc[i]);
			continue;
		}
		qps_dump_put(d, &d->w[0], &r,
			     ctx->rx.buf + (size_t)wc[i].wr_id *
					   ctx->rx.buf_size,
			     wc[i].byte_len, NULL, 0);
	}
}

/*
 * A UD send as a UD record: the slot's message and the destination its
 * WR names (sq_generic.c), with what the AH was made with (ud_addr.c:
 * hop limit QPS_UD_HOP_LIMIT, traffic class 0) and the next hop's MAC
 * as the provider resolved it for the AH. The device numbers the
 * packets: the PSN is not known here and stays 0.
 */
static void qps_dump_tx_ud(struct qps_sq *sq, struct qps_dump *d,
			   struct qps_dump_w *w, const struct qps_dump_rec *r,
			   uint32_t slot)
{
	struct qps_ctx *ctx = sq->ctx;
	const struct qps_ud_dest *dst = &sq->ud_dest[slot];
	struct qps_dump_ud u;

	memset(&u, 0, sizeof(u));
	memcpy(u.smac, ctx->info.mac, 6);
	u.saddr = ctx->info.addr.s_addr;
	u.daddr = dst->daddr;
	if (qps_dump_is_mcast(u.daddr)) {
		qps_dump_mcast_mac(u.daddr, u.dmac);
	} else if (qps_route_resolve(ctx, NULL, u.daddr, u.dmac, true) < 0) {
		memset(u.dmac, 0, sizeof(u.dmac));
	}
	u.dqpn = dst->qpn & QPS_UD_QPN_MASK;
	u.sqpn = sq->qp->qp_num & QPS_UD_QPN_MASK;
	/* IB: a Q_Key with its high bit set stands for the QP's own. */
	u.qkey = (dst->qkey & 0x80000000u) ? QPS_UD_QKEY : dst->qkey;
	u.opcode = QPS_DUMP_BTH_UD_SEND;
	u.ttl = QPS_UD_HOP_LIMIT;
	u.len = sq->meta[slot].len;
	qps_dump_put(d, w, r, &u, sizeof(u),
		     sq->buf + (size_t)slot * ctx->tx_slot_size, u.len);
}

void qps_dump_tx(struct qps_sq *sq, void *const *items, unsigned int n,
		 const struct qps_tx_frame *f)
{
	struct qps_ctx *ctx = sq->ctx;
	/* Acquire: as in qps_dump_rx; the send queue's lock keeps it. */
	struct qps_dump *d = __atomic_load_n(&ctx->dump, __ATOMIC_ACQUIRE);
	struct qps_dump_w *w;
	struct qps_dump_rec r;
	unsigned int i;

	if (!d)
		return;
	w = &d->w[1 + sq->idx];
	memset(&r, 0, sizeof(r));
	r.dir = QPS_DUMP_TX;
	r.ts_ns = qps_realtime_ns();
	for (i = 0; i < n; i++) {
		uint32_t slot = (uint32_t)((uintptr_t)items[i] - 1);
		const struct qps_tx_meta *m = &sq->meta[slot];

		r.flags = (m->flags & QPS_TXM_CSUM) ? QPS_DUMP_F_CSUM : 0;
		if (sq->ud_dest) {
			r.flags = QPS_DUMP_F_UD;
			qps_dump_tx_ud(sq, d, w, &r, slot);
		} else if (i == 0 && f) {
			uint8_t hdrs[QPS_HDRS_LEN];

			qps_tx_frame_hdrs(hdrs, f);
			qps_dump_put(d, w, &r, hdrs, QPS_HDRS_LEN, f->payload,
				     f->plen);
		} else {
			qps_dump_put(d, w, &r,
				     sq->buf + (size_t)slot * ctx->tx_slot_size,
				     m->len, NULL, 0);
		}
	}
}

/* Whether the dumper still holds its lock on the ring; a failure to ask
 * says yes, so a ring is never dropped on a doubt. */
static bool qps_dump_alive(int fd)
{
	struct flock fl;

	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return true;
	return fl.l_type != F_UNLCK;
}

static int qps_dump_name(char *out, size_t len, const struct qps_ctx *ctx,
			 uint64_t id)
{
	int n = snprintf(out, len, "/%s%d.%u.%016llx", QPS_DUMP_PREFIX,
			 (int)getpid(), ctx->stat.hdr->ctx_id,
			 (unsigned long long)id);

	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/* Exactly @len bytes at offset 0: 0 or -EIO. */
static int qps_dump_read_hdr(int fd, struct qps_dump_hdr *h)
{
	ssize_t n;

	do {
		n = pread(fd, h, sizeof(*h), 0);
	} while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(*h) ? 0 : -EIO;
}

/* The file behind @fd checked, its header copied into @h. */
static int qps_dump_check(const struct qps_ctx *ctx, int fd, uint64_t id,
			  struct qps_dump_hdr *h)
{
	struct stat st;
	uint64_t magic;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (st.st_uid != geteuid() && st.st_uid != 0)
		return -EPERM;
	if (st.st_size < (off_t)sizeof(*h) || qps_dump_read_hdr(fd, h) < 0)
		return -EINVAL;
	memcpy(&magic, &h->magic, sizeof(magic));
	if (magic != QPS_DUMP_MAGIC || h->id != id ||
	    h->pid != (int32_t)getpid() || h->ctx_id != ctx->stat.hdr->ctx_id)
		return -EINVAL;
	return qps_dump_hdr_check(h, (uint64_t)st.st_size, ctx->nsq);
}

static void qps_dump_free(struct qps_dump *d)
{
	if (d->base)
		munmap(d->base, d->size);
	if (d->fd >= 0)
		close(d->fd);
	free(d);
}

static int qps_dump_attach(struct qps_ctx *ctx, uint64_t id)
{
	struct qps_dump_geom g;
	struct qps_dump_hdr h;
	struct qps_dump *d;
	uint32_t i;
	int ret;

	d = calloc(1, sizeof(*d) + (ctx->nsq + 1) * sizeof(d->w[0]));
	if (!d)
		return -ENOMEM;
	d->fd = -1;
	memset(&h, 0, sizeof(h));
	ret = qps_dump_name(d->name, sizeof(d->name), ctx, id);
	if (ret < 0)
		goto err;
	d->fd = shm_open(d->name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
			 0);
	if (d->fd < 0) {
		ret = -errno;
		goto err;
	}
	ret = qps_dump_check(ctx, d->fd, id, &h);
	if (ret < 0)
		goto err;
	if (!qps_dump_alive(d->fd)) {
		ret = -ESRCH;
		goto err;
	}
	d->size = (size_t)h.size;
	d->base = mmap(NULL, d->size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       d->fd, 0);
	if (d->base == MAP_FAILED) {
		d->base = NULL;
		ret = -errno;
		goto err;
	}
	d->id = id;
	d->mask = h.ring_bytes - 1;
	d->snaplen = h.snaplen;
	d->nring = ctx->nsq + 1;
	qps_dump_geom(h.nring, h.ring_bytes, &g);
	for (i = 0; i < d->nring; i++) {
		d->w[i].sub = (struct qps_dump_sub *)((uint8_t *)d->base +
						      g.off_sub) + i;
		d->w[i].data = (uint8_t *)d->base + g.off_data +
			       (uint64_t)i * h.ring_bytes;
	}
	/* Release: the ring's state before its pointer; pairs with the
	 * writers' acquire loads (qps_dump_rx, qps_dump_tx). */
	__atomic_store_n(&ctx->dump, d, __ATOMIC_RELEASE);
	/* Release: the ring is being written from now on; pairs with the
	 * dumper's acquire load of state. */
	atomic_store_explicit(&((struct qps_dump_hdr *)d->base)->state,
			      QPS_DUMP_ST_ATTACHED, memory_order_release);
	return 0;
err:
	qps_dump_free(d);
	return ret;
}

/* Unpublish the ring, wait until no writer can hold it, drop it. A
 * writer reads ctx->dump inside its lock's section: once each lock was
 * taken after the store, every later section sees NULL. @dead: the
 * dumper died; its file and request are cleared for the next one. */
static void qps_dump_detach(struct qps_ctx *ctx, bool dead)
{
	struct qps_dump *d = ctx->dump;
	uint64_t id = d->id;
	uint32_t i;

	__atomic_store_n(&ctx->dump, NULL, __ATOMIC_RELAXED);
	for (i = 0; i < ctx->nsq; i++) {
		qps_alock_lock_lib(&ctx->sq[i].lock);
		qps_alock_unlock_lib(&ctx->sq[i].lock);
	}
	qps_mutex_lock(&ctx->rx.lock);
	qps_mutex_unlock(&ctx->rx.lock);
	if (dead) {
		shm_unlink(d->name);
		atomic_compare_exchange_strong_explicit(
			&ctx->stat.hdr->dump_req, &id, 0,
			memory_order_relaxed, memory_order_relaxed);
	}
	qps_dump_free(d);
}

void qps_dump_tick(struct qps_ctx *ctx)
{
	struct qps_stat *s = &ctx->stat;
	uint64_t req;

	if (!s->shm)
		return;
	/* Acquire: pairs with qps_dump's release store of the request,
	 * made once the ring file is complete. */
	req = atomic_load_explicit(&s->hdr->dump_req, memory_order_acquire);
	if (ctx->dump) {
		bool dead = !qps_dump_alive(ctx->dump->fd);

		if (req == ctx->dump->id && !dead)
			return;
		qps_dump_detach(ctx, dead);
		if (dead)
			return;
	}
	if (!req || req == s->dump_refused)
		return;
	if (qps_dump_attach(ctx, req) < 0)
		s->dump_refused = req;
}

void qps_dump_start_wait(struct qps_ctx *ctx)
{
	const char *env = getenv("QPS_DUMP_WAIT_MS");
	struct timespec nap = { 0, 1000000 };
	unsigned long ms, i;
	char *end;

	if (!env || !ctx->stat.shm)
		return;
	ms = strtoul(env, &end, 10);
	if (*end || !*env)
		return;
	if (ms > QPS_DUMP_WAIT_MAX_MS)
		ms = QPS_DUMP_WAIT_MAX_MS;
	for (i = 0; i < ms && !ctx->dump; i++) {
		qps_dump_tick(ctx);
		if (!ctx->dump)
			nanosleep(&nap, NULL);
	}
	if (!ctx->dump)
		qps_log_dbg("no dumper came in %s ms (QPS_DUMP_WAIT_MS)", env);
}

void qps_dump_close(struct qps_ctx *ctx)
{
	if (!ctx->dump)
		return;
	qps_dump_free(ctx->dump);
	ctx->dump = NULL;
}
