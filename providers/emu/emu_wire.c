// SPDX-License-Identifier: MIT
/*
 * The wire: one named POSIX shared-memory segment per wire name. The first
 * process creates and initialises it, then publishes the magic; others
 * attach and check version and geometry. Each device handle owns one port
 * slot (MAC, IPv4 address, receive side). The last port to leave unlinks
 * the name under the wire lock; an attacher that lost that race sees
 * hdr->unlinked and starts over.
 */
#include "emu.h"

#include <arpa/inet.h>
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

#define EMU_PAGE 4096u
#define EMU_ATTACH_WAIT_MS 2000
#define EMU_ATTACH_TRIES 8

#define EMU_ROUND_UP(v, a) (((uint64_t)(v) + (a) - 1) / (a) * (a))

/*
 * The layout this build computes. The header carries a copy that attach
 * compares (geometry_ok); addressing never reads it back, because any
 * peer can rewrite the header at any time.
 */
#define EMU_HDR_SIZE EMU_ROUND_UP(sizeof(struct qps_emu_wire_hdr), EMU_PAGE)
#define EMU_CTL_SIZE EMU_ROUND_UP(sizeof(struct qps_emu_shm_port), EMU_PAGE)
#define EMU_PORT_STRIDE \
	(EMU_CTL_SIZE + QPS_EMU_QAREA_SIZE + QPS_EMU_POOL_SIZE)

int qps_emu_mutex_init_shared(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	int r;

	r = pthread_mutexattr_init(&a);
	if (r)
		return -r;
	r = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	if (!r)
		r = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	if (!r)
		r = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return -r;
}

/* A CQ ring as delivery checks it (emu_cq.c), each field read once. */
struct repair_ring {
	struct qps_emu_shm_cq *scq;
	uint32_t cnt;
	uint64_t off;
};

static bool repair_cq(struct qps_emu_shm_port *sp, uint32_t slot,
		      struct repair_ring *r)
{
	if (slot >= QPS_EMU_MAX_CQ)
		return false;
	r->scq = &sp->cq[slot];
	r->cnt = __atomic_load_n(&r->scq->cqe_cnt, __ATOMIC_RELAXED);
	r->off = __atomic_load_n(&r->scq->ring_off, __ATOMIC_RELAXED);
	return r->scq->state == QPS_EMU_SLOT_ACTIVE &&
	       qps_emu_is_pow2(r->cnt) && r->cnt <= QPS_EMU_MAX_CQE &&
	       r->off % sizeof(struct mlx4_cqe) == 0 &&
	       r->off <= QPS_EMU_QAREA_SIZE &&
	       (uint64_t)r->cnt * sizeof(struct mlx4_cqe) <=
	       QPS_EMU_QAREA_SIZE - r->off;
}

/* CQE @idx of @r, and whether its owner byte makes it valid for the pass
 * @idx belongs to (i.e. it was written for @idx). */
static const struct mlx4_cqe *repair_cqe(const struct repair_ring *r,
					 uint8_t *qarea, uint32_t idx,
					 bool *valid)
{
	const struct mlx4_cqe *cqe =
		(const struct mlx4_cqe *)(const void *)(qarea + r->off) +
		(idx & (r->cnt - 1));
	/* Acquire: pairs with the owner-byte store in qps_emu_cq_write();
	 * a valid owner byte means the body before it is written. */
	uint8_t own = __atomic_load_n(&cqe->owner_sr_opcode, __ATOMIC_ACQUIRE);

	*valid = !!(own & MLX4_CQE_OWNER_MASK) == !!(idx & r->cnt);
	return cqe;
}

/*
 * A process that died holding a port's rx_lock may have stopped inside a
 * delivery, whose shared writes are, in order: the CQE body, its owner
 * byte, the CQ's prod, the RQ's tail (qps_emu_rq_deliver,
 * qps_emu_cq_write). Roll that delivery forward so that the indices
 * agree with what the owner can already see:
 *  - a CQE valid at prod was written: advance prod (otherwise the owner
 *    consumes it, cons passes prod, and producers find the CQ corrupt
 *    from then on);
 *  - a receive CQE just below prod for the WQE at an RQ's tail consumed
 *    that WQE: advance tail (otherwise the next frame lands in the same
 *    buffer, which the owner may already have handed on).
 * Both tests are false on a consistent port, so a port that needs no
 * repair is left as it is. Indices and geometry are checked as delivery
 * checks them: the dead holder may as well have been hostile. rx_lock
 * held.
 */
static void port_repair(struct qps_emu_shm_port *sp)
{
	uint8_t *qarea = (uint8_t *)sp + EMU_CTL_SIZE;
	const struct mlx4_cqe *cqe;
	struct repair_ring r;
	unsigned int i, n;
	uint32_t prod, tail;
	bool valid;

	for (i = 0; i < QPS_EMU_MAX_CQ; i++) {
		if (!repair_cq(sp, i, &r))
			continue;
		prod = r.scq->prod;
		for (n = 0; n < r.cnt; n++) {
			repair_cqe(&r, qarea, prod, &valid);
			if (!valid)
				break;
			prod++;
		}
		r.scq->prod = prod;
	}
	for (i = 0; i < QPS_EMU_MAX_RQ; i++) {
		struct qps_emu_shm_rq *srq = qps_emu_rq_checked(sp, (int)i);

		if (!srq || !repair_cq(sp, srq->cq, &r))
			continue;
		tail = srq->tail;
		if (__atomic_load_n(&srq->head, __ATOMIC_ACQUIRE) == tail)
			continue;
		cqe = repair_cqe(&r, qarea, r.scq->prod - 1, &valid);
		if (valid && !(cqe->owner_sr_opcode & MLX4_CQE_IS_SEND_MASK) &&
		    srq->qpn &&
		    (be32toh(cqe->vlan_my_qpn) & MLX4_CQE_QPN_MASK) ==
		    (srq->qpn & MLX4_CQE_QPN_MASK) &&
		    be16toh(cqe->wqe_index) == (uint16_t)tail)
			srq->tail = tail + 1;
	}
}

/*
 * Lock a port's rx_lock (every caller outside this file passes one; the
 * wire header's lock goes through wire_lock()). Returns 0, 1 when the
 * lock was taken over from a holder that died, or -errno. After a
 * takeover the port is repaired (port_repair); whatever else the holder
 * left half-written is tolerable because every reader of shared state
 * validates it.
 */
int qps_emu_lock(pthread_mutex_t *m)
{
	int r = pthread_mutex_lock(m);

	if (r == EOWNERDEAD) {
		port_repair(qps_emu_container_of(m, struct qps_emu_shm_port,
						 rx_lock));
		pthread_mutex_consistent(m);
		return 1;
	}
	return -r;
}

void qps_emu_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
}

/* The wire header's lock: what it guards (slots, addresses, nports,
 * unlinked) is re-derived by every holder (reclaim_dead), so a takeover
 * needs no repair. 0 or -errno. */
static int wire_lock(struct qps_emu_wire_hdr *h)
{
	int r = pthread_mutex_lock(&h->lock);

	if (r == EOWNERDEAD) {
		pthread_mutex_consistent(&h->lock);
		return 0;
	}
	return -r;
}

static void wire_unlock(struct qps_emu_wire_hdr *h)
{
	pthread_mutex_unlock(&h->lock);
}

static void wire_geometry(struct qps_emu_wire_hdr *g)
{
	memset(g, 0, sizeof(*g));
	g->version = QPS_EMU_VERSION;
	g->max_ports = QPS_EMU_MAX_PORTS;
	g->hdr_size = (uint32_t)EMU_HDR_SIZE;
	g->port_ctl_size = (uint32_t)EMU_CTL_SIZE;
	g->qarea_size = QPS_EMU_QAREA_SIZE;
	g->pool_size = QPS_EMU_POOL_SIZE;
	g->port_stride = EMU_PORT_STRIDE;
	g->size = g->hdr_size + g->max_ports * g->port_stride;
}

static bool geometry_ok(const struct qps_emu_wire_hdr *h,
			const struct qps_emu_wire_hdr *g)
{
	return h->version == g->version && h->max_ports == g->max_ports &&
	       h->hdr_size == g->hdr_size &&
	       h->port_ctl_size == g->port_ctl_size &&
	       h->qarea_size == g->qarea_size &&
	       h->pool_size == g->pool_size &&
	       h->port_stride == g->port_stride && h->size == g->size &&
	       h->mtu >= QPS_EMU_MTU_MIN && h->mtu <= QPS_EMU_MTU_MAX;
}

/* The number in $@name if it lies in [@lo, @hi], else @def. */
static unsigned long env_num(const char *name, unsigned long lo,
			     unsigned long hi, unsigned long def)
{
	const char *s = getenv(name);
	char *end;
	unsigned long v;

	if (!s || !*s)
		return def;
	v = strtoul(s, &end, 10);
	return *end || v < lo || v > hi ? def : v;
}

static uint32_t env_mtu(void)
{
	return (uint32_t)env_num("QPS_EMU_MTU", QPS_EMU_MTU_MIN,
				 QPS_EMU_MTU_MAX, QPS_EMU_MTU_DEFAULT);
}

/* How long an attacher waits for a creator to finish the wire. Tests that
 * corrupt the header on purpose (the wire fuzzer) set it to 0 so that an
 * unfinished wire fails at once instead of costing them the wait. */
static int attach_wait_ms(void)
{
	return (int)env_num("QPS_EMU_ATTACH_WAIT_MS", 0, EMU_ATTACH_WAIT_MS,
			    EMU_ATTACH_WAIT_MS);
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Gone, or a zombie its parent has not reaped yet: either way it will
 * never touch the wire again (its robust locks were released when its
 * threads exited). */
static bool pid_dead(int32_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	if (pid <= 0)
		return false;
	if (kill(pid, 0) < 0)
		return errno == ESRCH;
	if (snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid) >=
	    (int)sizeof(path))
		return false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	/* "pid (comm) S ...": comm may hold spaces and parentheses. */
	p = strrchr(buf, ')');
	return p && (p[1] == ' ') && (p[2] == 'Z' || p[2] == 'X');
}

static int wire_create(int fd, struct qps_emu_wire *w,
		       const struct qps_emu_wire_hdr *g)
{
	struct qps_emu_wire_hdr *h;
	void *base;
	unsigned int i;
	int r;

	if (ftruncate(fd, (off_t)g->size) < 0)
		return -errno;
	base = mmap(NULL, g->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		return -errno;
	h = base;
	/* First, so that an attacher can tell a crashed creator. */
	__atomic_store_n(&h->creator_pid, (int32_t)getpid(), __ATOMIC_RELAXED);
	h->version = g->version;
	h->max_ports = g->max_ports;
	h->hdr_size = g->hdr_size;
	h->port_ctl_size = g->port_ctl_size;
	h->qarea_size = g->qarea_size;
	h->pool_size = g->pool_size;
	h->port_stride = g->port_stride;
	h->size = g->size;
	h->mtu = env_mtu();
	h->route_gen = 1;
	r = qps_emu_mutex_init_shared(&h->lock);
	for (i = 0; !r && i < g->max_ports; i++) {
		struct qps_emu_shm_port *sp = (void *)((uint8_t *)base +
			g->hdr_size + i * g->port_stride);

		r = qps_emu_mutex_init_shared(&sp->rx_lock);
	}
	if (r) {
		munmap(base, g->size);
		return r;
	}
	/* Release: pairs with the acquire load in wire_open_existing(); the
	 * header, locks and port slots are initialised before it shows. */
	__atomic_store_n(&h->magic, QPS_EMU_MAGIC, __ATOMIC_RELEASE);
	w->base = base;
	w->size = g->size;
	w->hdr = h;
	return 0;
}

/* 0 mapped and valid; -EAGAIN stale segment removed, retry; -errno. */
static int wire_open_existing(int fd, const char *shm_name,
			      struct qps_emu_wire *w,
			      const struct qps_emu_wire_hdr *g)
{
	struct qps_emu_wire_hdr *h;
	struct stat st;
	void *base;
	int wait_ms = attach_wait_ms();
	int waited = 0;

	for (;;) {
		if (fstat(fd, &st) < 0)
			return -errno;
		if ((uint64_t)st.st_size == g->size)
			break;
		if (st.st_size != 0)
			return -EPROTO;	/* another layout or version */
		if (waited >= wait_ms) {
			/* A live creator truncates within microseconds. */
			shm_unlink(shm_name);
			return -EAGAIN;
		}
		sleep_ms(1);
		waited++;
	}
	base = mmap(NULL, g->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		return -errno;
	h = base;
	/* Acquire: pairs with the creator's release store of the magic. */
	while (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != QPS_EMU_MAGIC) {
		int32_t pid = __atomic_load_n(&h->creator_pid,
					      __ATOMIC_RELAXED);

		uint64_t m = __atomic_load_n(&h->magic, __ATOMIC_RELAXED);

		if (m != 0 && m != QPS_EMU_MAGIC) {
			munmap(base, g->size);
			return -EPROTO;
		}
		if (waited >= wait_ms || pid_dead(pid)) {
			munmap(base, g->size);
			if (pid == 0 || pid_dead(pid)) {
				shm_unlink(shm_name);
				return -EAGAIN;
			}
			return -ETIMEDOUT;
		}
		sleep_ms(1);
		waited++;
	}
	if (!geometry_ok(h, g)) {
		munmap(base, g->size);
		return -EPROTO;
	}
	w->base = base;
	w->size = g->size;
	w->hdr = h;
	return 0;
}

static int shm_name_of(const char *name, char *buf, size_t len)
{
	size_t n = strlen(name);

	if (n == 0 || n >= QPS_EMU_NAME_MAX || strchr(name, '/'))
		return -EINVAL;
	if ((size_t)snprintf(buf, len, "%s%s", QPS_EMU_SHM_PREFIX, name) >= len)
		return -ENAMETOOLONG;
	return 0;
}

int qps_emu_wire_attach(const char *name, struct qps_emu_wire *w)
{
	char shm_name[QPS_EMU_NAME_MAX + sizeof(QPS_EMU_SHM_PREFIX)];
	struct qps_emu_wire_hdr g;
	int tries, r;

	r = shm_name_of(name, shm_name, sizeof(shm_name));
	if (r)
		return r;
	wire_geometry(&g);
	memset(w, 0, sizeof(*w));
	if ((size_t)snprintf(w->name, sizeof(w->name), "%s", name) >=
	    sizeof(w->name))
		return -ENAMETOOLONG;
	for (tries = 0; tries < EMU_ATTACH_TRIES; tries++) {
		int fd = shm_open(shm_name, O_RDWR | O_CREAT | O_EXCL, 0600);

		if (fd >= 0) {
			r = wire_create(fd, w, &g);
			close(fd);
			if (r)
				shm_unlink(shm_name);
			return r;
		}
		if (errno != EEXIST)
			return -errno;
		fd = shm_open(shm_name, O_RDWR, 0);
		if (fd < 0) {
			if (errno == ENOENT)
				continue;	/* unlinked meanwhile */
			return -errno;
		}
		r = wire_open_existing(fd, shm_name, w, &g);
		close(fd);
		if (r != -EAGAIN)
			return r;
	}
	return -EAGAIN;
}

void qps_emu_wire_detach(struct qps_emu_wire *w)
{
	if (w->base)
		munmap(w->base, w->size);
	w->base = NULL;
	w->hdr = NULL;
}

/* From this build's geometry (which attach checked the segment's size
 * against), never from the header: see EMU_HDR_SIZE. */
struct qps_emu_shm_port *qps_emu_port_ctl(const struct qps_emu_wire *w,
					  unsigned int port)
{
	return (void *)((uint8_t *)w->base + EMU_HDR_SIZE +
			port * EMU_PORT_STRIDE);
}

uint8_t *qps_emu_port_qarea(const struct qps_emu_wire *w, unsigned int port)
{
	return (uint8_t *)qps_emu_port_ctl(w, port) + EMU_CTL_SIZE;
}

uint8_t *qps_emu_port_pool(const struct qps_emu_wire *w, unsigned int port)
{
	return qps_emu_port_qarea(w, port) + QPS_EMU_QAREA_SIZE;
}

void qps_emu_port_mac(unsigned int port, uint8_t mac[6])
{
	mac[0] = QPS_EMU_MAC_OUI0;
	mac[1] = QPS_EMU_MAC_OUI1;
	mac[2] = QPS_EMU_MAC_OUI2;
	mac[3] = 0;
	mac[4] = 0;
	mac[5] = (uint8_t)port;
}

static uint32_t port_state(const struct qps_emu_shm_port *sp)
{
	/* Acquire: pairs with the release store in port_attach_slot(), so
	 * the MAC and address written before it are visible. */
	return __atomic_load_n(&sp->state, __ATOMIC_ACQUIRE);
}

static void bump_route_gen(struct qps_emu_wire_hdr *h)
{
	/* Release: pairs with the acquire load in qps_emu_route_gen(). */
	__atomic_fetch_add(&h->route_gen, 1, __ATOMIC_RELEASE);
}

/* Free the slots of dead owners; wire lock held. Returns ports active. */
static unsigned int reclaim_dead(struct qps_emu_wire *w)
{
	unsigned int i, active = 0;

	for (i = 0; i < QPS_EMU_MAX_PORTS; i++) {
		struct qps_emu_shm_port *sp = qps_emu_port_ctl(w, i);

		if (port_state(sp) != QPS_EMU_SLOT_ACTIVE)
			continue;
		if (!pid_dead(sp->pid)) {
			active++;
			continue;
		}
		if (qps_emu_lock(&sp->rx_lock) < 0)
			continue;
		/* Release: pairs with port_state(), like the attach. */
		__atomic_store_n(&sp->state, QPS_EMU_SLOT_FREE,
				 __ATOMIC_RELEASE);
		qps_emu_unlock(&sp->rx_lock);
		bump_route_gen(w->hdr);
	}
	w->hdr->nports = active;
	return active;
}

static bool addr_in_use(struct qps_emu_wire *w, uint32_t addr)
{
	unsigned int i;

	for (i = 0; i < QPS_EMU_MAX_PORTS; i++) {
		struct qps_emu_shm_port *sp = qps_emu_port_ctl(w, i);

		if (port_state(sp) == QPS_EMU_SLOT_ACTIVE && sp->addr == addr)
			return true;
	}
	return false;
}

static int pick_addr(struct qps_emu_wire *w, const struct qps_dev_attr *attr,
		     uint32_t *addr)
{
	uint32_t host;

	if (attr && attr->addr_set) {
		uint32_t a = ntohl(attr->addr.s_addr);

		if (a == 0 || a == 0xffffffffu || (a >> 28) == 0xe ||
		    a == (QPS_EMU_NET | 0xff))
			return -EINVAL;
		if (addr_in_use(w, attr->addr.s_addr))
			return -EADDRINUSE;
		*addr = attr->addr.s_addr;
		return 0;
	}
	for (host = 1; host < 255; host++) {
		uint32_t a = htonl(QPS_EMU_NET | host);

		if (!addr_in_use(w, a)) {
			*addr = a;
			return 0;
		}
	}
	return -EADDRNOTAVAIL;
}

/* Reset a free slot for a new owner and publish it; wire lock held. */
static int port_attach_slot(struct qps_emu_dev *dev, unsigned int slot,
			    uint32_t addr)
{
	struct qps_emu_shm_port *sp = qps_emu_port_ctl(&dev->wire, slot);
	int r, tries;

	r = qps_emu_lock(&sp->rx_lock);
	if (r < 0)
		return r;
	dev->gen = sp->gen + 1;
	qps_emu_unlock(&sp->rx_lock);
	dev->port = slot;
	/* The event socket's name carries the generation; a previous owner
	 * that still lives in a forked child may hold the old one. */
	for (tries = 0; tries < 16; tries++) {
		r = qps_emu_event_open(dev);
		if (r != -EADDRINUSE)
			break;
		dev->gen++;
	}
	if (r)
		return r;
	r = qps_emu_lock(&sp->rx_lock);
	if (r < 0)
		return r;
	memset((uint8_t *)sp + offsetof(struct qps_emu_shm_port, state), 0,
	       sizeof(*sp) - offsetof(struct qps_emu_shm_port, state));
	sp->pid = (int32_t)getpid();
	sp->gen = dev->gen;
	sp->addr = addr;
	qps_emu_port_mac(slot, sp->mac);
	/* Release: pairs with the acquire loads in port_state(). */
	__atomic_store_n(&sp->state, QPS_EMU_SLOT_ACTIVE, __ATOMIC_RELEASE);
	qps_emu_unlock(&sp->rx_lock);
	return 0;
}

int qps_emu_port_attach(struct qps_emu_dev *dev,
			const struct qps_dev_attr *attr)
{
	struct qps_emu_wire *w = &dev->wire;
	unsigned int slot;
	uint32_t addr;
	int r;

	r = wire_lock(w->hdr);
	if (r < 0)
		return r;
	if (w->hdr->unlinked) {
		wire_unlock(w->hdr);
		return -EAGAIN;
	}
	reclaim_dead(w);
	r = pick_addr(w, attr, &addr);
	if (r)
		goto out;
	r = -ENOSPC;
	for (slot = 0; slot < QPS_EMU_MAX_PORTS; slot++) {
		if (port_state(qps_emu_port_ctl(w, slot)) ==
		    QPS_EMU_SLOT_FREE) {
			r = 0;
			break;
		}
	}
	if (r)
		goto out;
	r = port_attach_slot(dev, slot, addr);
	if (r)
		goto out;
	dev->sp = qps_emu_port_ctl(w, slot);
	dev->qarea = qps_emu_port_qarea(w, slot);
	dev->pool = qps_emu_port_pool(w, slot);
	/* Read once and checked again: attach validated the header, but a
	 * peer may have rewritten it since. */
	dev->mtu = __atomic_load_n(&w->hdr->mtu, __ATOMIC_RELAXED);
	if (dev->mtu < QPS_EMU_MTU_MIN || dev->mtu > QPS_EMU_MTU_MAX)
		dev->mtu = QPS_EMU_MTU_DEFAULT;
	w->hdr->nports++;
	bump_route_gen(w->hdr);
out:
	wire_unlock(w->hdr);
	return r;
}

void qps_emu_port_detach(struct qps_emu_dev *dev)
{
	struct qps_emu_wire *w = &dev->wire;
	struct qps_emu_shm_port *sp = dev->sp;
	int locked;

	if (!qps_emu_owner(dev))
		return;
	locked = wire_lock(w->hdr);

	if (qps_emu_lock(&sp->rx_lock) >= 0) {
		/* Release: pairs with port_state(). Only our own slot: a
		 * forked child closing a copy of the handle frees nothing
		 * (see qps_emu_owner()). */
		if (sp->pid == (int32_t)getpid() && sp->gen == dev->gen)
			__atomic_store_n(&sp->state, QPS_EMU_SLOT_FREE,
					 __ATOMIC_RELEASE);
		qps_emu_unlock(&sp->rx_lock);
	}
	if (locked < 0)
		return;
	bump_route_gen(w->hdr);
	if (reclaim_dead(w) == 0) {
		char shm_name[QPS_EMU_NAME_MAX + sizeof(QPS_EMU_SHM_PREFIX)];

		/* Under the lock: an attacher that already mapped the
		 * segment sees unlinked once it gets the lock, and retries. */
		w->hdr->unlinked = 1;
		if (!shm_name_of(w->name, shm_name, sizeof(shm_name)))
			shm_unlink(shm_name);
	}
	wire_unlock(w->hdr);
}

unsigned int qps_emu_wire_tx(struct qps_emu_dev *dev, const uint8_t *frame,
			     uint32_t len)
{
	struct qps_emu_wire *w = &dev->wire;
	struct qps_emu_rx_result res;
	unsigned int i, n = 0;

	if (frame[0] & 1) {	/* group bit: broadcast or multicast */
		for (i = 0; i < QPS_EMU_MAX_PORTS; i++) {
			if (port_state(qps_emu_port_ctl(w, i)) !=
			    QPS_EMU_SLOT_ACTIVE)
				continue;
			if (qps_emu_port_rx(w, i, frame, len, &res))
				n++;
			if (res.notify)
				qps_emu_notify(dev, i, res.gen);
		}
		return n;
	}
	if (frame[0] != QPS_EMU_MAC_OUI0 || frame[1] != QPS_EMU_MAC_OUI1 ||
	    frame[2] != QPS_EMU_MAC_OUI2 || frame[3] || frame[4] ||
	    frame[5] >= QPS_EMU_MAX_PORTS)
		return 0;
	i = frame[5];
	if (qps_emu_port_rx(w, i, frame, len, &res))
		n++;
	if (res.notify)
		qps_emu_notify(dev, i, res.gen);
	return n;
}

static int group_mac(struct in_addr group, uint8_t mac[6])
{
	uint32_t g = ntohl(group.s_addr);

	if ((g >> 28) != 0xe)
		return -EINVAL;
	mac[0] = 0x01;
	mac[1] = 0x00;
	mac[2] = 0x5e;
	mac[3] = (uint8_t)((g >> 16) & 0x7f);
	mac[4] = (uint8_t)(g >> 8);
	mac[5] = (uint8_t)g;
	return 0;
}

/* The L2 filter only knows MACs: source-specific joins are the business
 * of the steering rule, so @source is not used here. */
int qps_emu_mcast_attach(struct qps_dev *d, struct in_addr group,
			 struct in_addr source)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);
	struct qps_emu_shm_port *sp = dev->sp;
	struct qps_emu_shm_mc *free_e = NULL;
	uint8_t mac[6];
	unsigned int i;
	int r;

	(void)source;
	r = group_mac(group, mac);
	if (r)
		return r;
	r = qps_emu_lock(&sp->rx_lock);
	if (r < 0)
		return r;
	r = -ENOSPC;
	for (i = 0; i < QPS_EMU_MAX_MC; i++) {
		struct qps_emu_shm_mc *e = &sp->mc[i];

		if (e->refcnt && !memcmp(e->mac, mac, 6)) {
			e->refcnt++;
			r = 0;
			break;
		}
		if (!e->refcnt && !free_e)
			free_e = e;
	}
	if (r && free_e) {
		memcpy(free_e->mac, mac, 6);
		free_e->refcnt = 1;
		r = 0;
	}
	qps_emu_unlock(&sp->rx_lock);
	return r;
}

int qps_emu_mcast_detach(struct qps_dev *d, struct in_addr group,
			 struct in_addr source)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);
	struct qps_emu_shm_port *sp = dev->sp;
	uint8_t mac[6];
	unsigned int i;
	int r;

	(void)source;
	r = group_mac(group, mac);
	if (r)
		return r;
	r = qps_emu_lock(&sp->rx_lock);
	if (r < 0)
		return r;
	r = -ENOENT;
	for (i = 0; i < QPS_EMU_MAX_MC; i++) {
		struct qps_emu_shm_mc *e = &sp->mc[i];

		if (e->refcnt && !memcmp(e->mac, mac, 6)) {
			e->refcnt--;
			r = 0;
			break;
		}
	}
	qps_emu_unlock(&sp->rx_lock);
	return r;
}

int qps_emu_resolve(struct qps_dev *d, struct in_addr dst,
		    uint8_t mac_out[6])
{
	struct qps_emu_dev *dev = qps_emu_dev(d);
	struct qps_emu_wire *w = &dev->wire;
	unsigned int i;
	int r;

	/* The wire is one /24: its directed broadcast is a broadcast too. */
	if (dst.s_addr == INADDR_BROADCAST ||
	    dst.s_addr == htonl(QPS_EMU_NET | 0xff)) {
		memset(mac_out, 0xff, 6);
		return 0;
	}
	if (!group_mac(dst, mac_out))
		return 0;
	if (dst.s_addr == 0)
		return -EHOSTUNREACH;
	/* Under the wire lock: a slot being re-attached is never seen
	 * half-written. */
	r = wire_lock(w->hdr);
	if (r < 0)
		return r;
	r = -EHOSTUNREACH;
	for (i = 0; i < QPS_EMU_MAX_PORTS; i++) {
		struct qps_emu_shm_port *sp = qps_emu_port_ctl(w, i);

		if (port_state(sp) == QPS_EMU_SLOT_ACTIVE &&
		    sp->addr == dst.s_addr) {
			qps_emu_port_mac(i, mac_out);
			r = 0;
			break;
		}
	}
	wire_unlock(w->hdr);
	return r;
}

uint64_t qps_emu_route_gen(struct qps_dev *d)
{
	struct qps_emu_dev *dev = qps_emu_dev(d);

	/* Acquire: pairs with the release in bump_route_gen(). */
	return __atomic_load_n(&dev->wire.hdr->route_gen, __ATOMIC_ACQUIRE);
}
