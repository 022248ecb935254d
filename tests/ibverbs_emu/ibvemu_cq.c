// SPDX-License-Identifier: MIT
/*
 * Completion queues and completion channels.
 *
 * A channel's fd is the context's emu event socket (dup'ed): emu writes
 * one byte to it each time it disarms an armed CQ, from whichever process
 * wrote the CQE. The byte does not name the CQ, so get_cq_event reads one
 * byte and then looks for the CQ of the channel that we armed and emu has
 * disarmed since. All channels of a context share that socket.
 */
#include "ibvemu.h"
#include "emu/emu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	struct qps_ibvemu_ctx *c;
	struct ibv_comp_channel *ch;
	int fd, fl;

	if (!qps_ibvemu_is_ours(ctx)) {
		errno = EINVAL;
		return NULL;
	}
	c = qps_ibvemu_ctx(ctx);
	fd = c->ops->get_event_fd(c->dev);
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	/* A channel blocks until the application asks otherwise; emu itself
	 * always passes MSG_DONTWAIT, so clearing the shared flag is safe. */
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		goto err;
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		errno = ENOMEM;
		goto err;
	}
	ch->context = ctx;
	ch->fd = fd;
	return ch;
err:
	close(fd);
	return NULL;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	struct qps_ibvemu_ctx *c;

	if (!ch || !qps_ibvemu_is_ours(ch->context))
		return EINVAL;
	c = qps_ibvemu_ctx(ch->context);
	pthread_mutex_lock(&c->lock);
	if (ch->refcnt) {
		pthread_mutex_unlock(&c->lock);
		return EBUSY;
	}
	pthread_mutex_unlock(&c->lock);
	close(ch->fd);
	free(ch);
	return 0;
}

/*
 * $QPS_IBV_EMU_CQE_MAX caps the entries of every CQ created while it is
 * set (a device that grants fewer than asked, as verbs allows): how tests
 * of the verbs provider make a CQ overrun, which a CQ sized to its queue
 * never does.
 */
static int cqe_cap(int cqe)
{
	const char *v = getenv("QPS_IBV_EMU_CQE_MAX");
	char *end;
	long n;

	if (!v || !*v)
		return cqe;
	n = strtol(v, &end, 10);
	return !*end && n > 0 && n < cqe ? (int)n : cqe;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe,
			     void *cq_context, struct ibv_comp_channel *channel,
			     int comp_vector)
{
	struct qps_ibvemu_ctx *c;
	struct qps_ibvemu_cq *cq;
	int r;

	if (!qps_ibvemu_is_ours(ctx) || cqe <= 0 || comp_vector < 0 ||
	    comp_vector >= ctx->num_comp_vectors ||
	    (channel && channel->context != ctx)) {
		errno = EINVAL;
		return NULL;
	}
	c = qps_ibvemu_ctx(ctx);
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	r = c->ops->create_cq(c->dev, cqe_cap(cqe), &cq->qcq);
	if (r < 0) {
		free(cq);
		errno = -r;
		return NULL;
	}
	cq->ibv.context = ctx;
	cq->ibv.channel = channel;
	cq->ibv.cq_context = cq_context;
	cq->ibv.cqe = cq->qcq->cqe;
	pthread_mutex_init(&cq->ibv.mutex, NULL);
	pthread_cond_init(&cq->ibv.cond, NULL);
	pthread_mutex_init(&cq->poll_lock, NULL);

	pthread_mutex_lock(&c->lock);
	if (channel)
		channel->refcnt++;
	cq->next = c->cqs;
	c->cqs = cq;
	pthread_mutex_unlock(&c->lock);
	return &cq->ibv;
}
QPS_IBVEMU_DEFAULT(create_cq);

int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct qps_ibvemu_cq *cq = qps_ibvemu_cq(ibcq);
	struct qps_ibvemu_ctx *c = qps_ibvemu_ctx(ibcq->context);
	struct qps_ibvemu_cq **p;
	int r;

	pthread_mutex_lock(&c->lock);
	r = c->ops->destroy_cq(cq->qcq);
	if (r < 0) {
		pthread_mutex_unlock(&c->lock);
		return -r;
	}
	for (p = &c->cqs; *p; p = &(*p)->next)
		if (*p == cq) {
			*p = cq->next;
			break;
		}
	if (ibcq->channel)
		ibcq->channel->refcnt--;
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_destroy(&cq->poll_lock);
	pthread_mutex_destroy(&ibcq->mutex);
	pthread_cond_destroy(&ibcq->cond);
	free(cq);
	return 0;
}
QPS_IBVEMU_DEFAULT(destroy_cq);

int qps_ibvemu_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct qps_ibvemu_cq *cq = qps_ibvemu_cq(ibcq);
	struct qps_ibvemu_ctx *c = qps_ibvemu_ctx(ibcq->context);

	(void)solicited_only;	/* every completion is solicited here */
	/* Seq-cst: ordered before emu's arm, which pairs with the disarm
	 * in qps_emu_cq_write(); get_cq_event reads both. */
	__atomic_store_n(&cq->armed, 1, __ATOMIC_SEQ_CST);
	return -c->ops->req_notify_cq(cq->qcq);
}

/* The CQ of @ch that we armed and that emu has disarmed since; clears
 * our arm. */
static struct qps_ibvemu_cq *fired_cq(struct qps_ibvemu_ctx *c,
				      struct ibv_comp_channel *ch)
{
	struct qps_ibvemu_cq *cq;

	pthread_mutex_lock(&c->lock);
	for (cq = c->cqs; cq; cq = cq->next) {
		struct qps_emu_shm_cq *scq;

		if (cq->ibv.channel != ch ||
		    !__atomic_load_n(&cq->armed, __ATOMIC_SEQ_CST))
			continue;
		scq = qps_emu_test_shm_cq(cq->qcq);
		/* Seq-cst: pairs with emu's disarm before its event byte,
		 * which we have read. */
		if (!__atomic_load_n(&scq->armed, __ATOMIC_SEQ_CST) &&
		    __atomic_exchange_n(&cq->armed, 0, __ATOMIC_SEQ_CST))
			break;
	}
	pthread_mutex_unlock(&c->lock);
	return cq;
}

int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq_out,
		     void **cq_context)
{
	struct qps_ibvemu_ctx *c;
	struct qps_ibvemu_cq *cq;
	char b;

	if (!ch || !cq_out || !cq_context || !qps_ibvemu_is_ours(ch->context)) {
		errno = EINVAL;
		return -1;
	}
	c = qps_ibvemu_ctx(ch->context);
	for (;;) {
		/* One byte per disarm; honours the fd's O_NONBLOCK. A byte
		 * for a CQ destroyed meanwhile, or of another channel, is
		 * consumed and we wait for the next. */
		if (recv(ch->fd, &b, 1, 0) < 0)
			return -1;
		cq = fired_cq(c, ch);
		if (cq)
			break;
	}
	*cq_out = &cq->ibv;
	*cq_context = cq->ibv.cq_context;
	return 0;
}
QPS_IBVEMU_DEFAULT(get_cq_event);

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}
QPS_IBVEMU_DEFAULT(ack_cq_events);

/* @ts, when not NULL: each completion's device clock stamp. */
static int cq_poll(struct ibv_cq *ibcq, int num, struct ibv_wc *wc,
		   struct qps_wc_ts *ts)
{
	struct qps_ibvemu_cq *cq = qps_ibvemu_cq(ibcq);
	struct qps_ibvemu_ctx *c = qps_ibvemu_ctx(ibcq->context);
	struct qps_ibvemu_qp *fatal[8];
	int nfatal = 0, got, i, n = 0;

	if (num < 0 || (num && !wc))
		return -EINVAL;
	pthread_mutex_lock(&cq->poll_lock);
	got = ts ? c->ops->poll_cq_ts(cq->qcq, num, wc, ts) :
		   c->ops->poll_cq(cq->qcq, num, wc);
	if (got < 0) {
		pthread_mutex_unlock(&cq->poll_lock);
		/* -EIO: the CQ overran (emu dropped a CQE) and is drained
		 * now. The HCA raises CQ_ERR; poll_cq fails as well, so a
		 * caller that ignores async events still sees it. */
		if (got == -EIO)
			qps_ibvemu_async(c, IBV_EVENT_CQ_ERR, ibcq);
		return got;
	}
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < got; i++) {
		struct qps_ibvemu_qp *qp = qps_ibvemu_qp_by_num(c,
							      wc[i].qp_num);

		if (!qp)
			continue;	/* its QP was destroyed */
		if (wc[i].opcode == IBV_WC_RECV &&
		    !qps_ibvemu_recv_done(qp, &wc[i]))
			continue;
		if (wc[i].status != IBV_WC_SUCCESS &&
		    wc[i].status != IBV_WC_WR_FLUSH_ERR &&
		    nfatal < (int)(sizeof(fatal) / sizeof(fatal[0])))
			fatal[nfatal++] = qp;
		if (n != i) {
			wc[n] = wc[i];
			if (ts)
				ts[n] = ts[i];
		}
		n++;
	}
	/* A failed WQE moves its QP to the error state, as on the HCA; the
	 * flushes follow in later polls. */
	for (i = 0; i < nfatal; i++)
		qps_ibvemu_qp_fatal(fatal[i]);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&cq->poll_lock);
	return n;
}

int qps_ibvemu_poll_cq(struct ibv_cq *ibcq, int num, struct ibv_wc *wc)
{
	return cq_poll(ibcq, num, wc, NULL);
}

/*
 * Extended CQs, for completion timestamps (IBV_WC_EX_WITH_COMPLETION_TS):
 * a plain CQ polled one completion at a time, whose fields the read_*
 * calls return; the stamp is emu's device clock (docs/emu.md).
 */
static struct qps_ibvemu_cq *cqx_of(struct ibv_cq_ex *cqx)
{
	return qps_ibvemu_cq(ibv_cq_ex_to_cq(cqx));
}

static int cqx_take(struct ibv_cq_ex *cqx)
{
	struct qps_ibvemu_cq *cq = cqx_of(cqx);
	struct qps_wc_ts ts = { 0 };
	int n = cq_poll(&cq->ibv, 1, &cq->cur, &ts);

	if (n < 0)
		return n == -EIO ? EIO : -n;
	if (!n)
		return ENOENT;
	cq->cur_ts = ts.clock == QPS_WC_TS_DEV ? ts.val : 0;
	cqx->wr_id = cq->cur.wr_id;
	cqx->status = cq->cur.status;
	return 0;
}

static int cqx_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	if (!attr || attr->comp_mask)
		return EINVAL;
	return cqx_take(cqx);
}

static int cqx_next_poll(struct ibv_cq_ex *cqx)
{
	return cqx_take(cqx);
}

static void cqx_end_poll(struct ibv_cq_ex *cqx)
{
	(void)cqx;
}

static enum ibv_wc_opcode cqx_opcode(struct ibv_cq_ex *cqx)
{
	return cqx_of(cqx)->cur.opcode;
}

static uint32_t cqx_vendor_err(struct ibv_cq_ex *cqx)
{
	return cqx_of(cqx)->cur.vendor_err;
}

static uint32_t cqx_byte_len(struct ibv_cq_ex *cqx)
{
	return cqx_of(cqx)->cur.byte_len;
}

static __be32 cqx_imm_data(struct ibv_cq_ex *cqx)
{
	return cqx_of(cqx)->cur.imm_data;
}

static uint32_t cqx_qp_num(struct ibv_cq_ex *cqx)
{
	return cqx_of(cqx)->cur.qp_num;
}

static uint32_t cqx_src_qp(struct ibv_cq_ex *cqx)
{
	return cqx_of(cqx)->cur.src_qp;
}

static unsigned int cqx_wc_flags(struct ibv_cq_ex *cqx)
{
	return cqx_of(cqx)->cur.wc_flags;
}

static uint32_t cqx_slid(struct ibv_cq_ex *cqx)
{
	return cqx_of(cqx)->cur.slid;
}

static uint8_t cqx_sl(struct ibv_cq_ex *cqx)
{
	return cqx_of(cqx)->cur.sl;
}

static uint8_t cqx_dlid_path_bits(struct ibv_cq_ex *cqx)
{
	return cqx_of(cqx)->cur.dlid_path_bits;
}

static uint64_t cqx_completion_ts(struct ibv_cq_ex *cqx)
{
	return cqx_of(cqx)->cur_ts;
}

struct ibv_cq_ex *qps_ibvemu_create_cq_ex(struct ibv_context *ctx,
					  struct ibv_cq_init_attr_ex *attr)
{
	const uint64_t flags = IBV_WC_STANDARD_FLAGS |
			       IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	struct ibv_cq_ex *cqx;
	struct ibv_cq *ibcq;

	if (!attr || attr->comp_mask || attr->cqe > INT32_MAX) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->wc_flags & ~flags) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	ibcq = ibv_create_cq(ctx, (int)attr->cqe, attr->cq_context,
			     attr->channel, (int)attr->comp_vector);
	if (!ibcq)
		return NULL;
	cqx = &qps_ibvemu_cq(ibcq)->ibvx;
	cqx->start_poll = cqx_start_poll;
	cqx->next_poll = cqx_next_poll;
	cqx->end_poll = cqx_end_poll;
	cqx->read_opcode = cqx_opcode;
	cqx->read_vendor_err = cqx_vendor_err;
	cqx->read_byte_len = cqx_byte_len;
	cqx->read_imm_data = cqx_imm_data;
	cqx->read_qp_num = cqx_qp_num;
	cqx->read_src_qp = cqx_src_qp;
	cqx->read_wc_flags = cqx_wc_flags;
	cqx->read_slid = cqx_slid;
	cqx->read_sl = cqx_sl;
	cqx->read_dlid_path_bits = cqx_dlid_path_bits;
	if (attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		cqx->read_completion_ts = cqx_completion_ts;
	return cqx;
}

/* The device clock now, in raw_clock.tv_nsec as mlx4 and mlx5 put it. */
int qps_ibvemu_query_rt_values(struct ibv_context *ctx,
			       struct ibv_values_ex *values)
{
	struct qps_ibvemu_ctx *c;
	uint64_t cycles;
	int r;

	if (!qps_ibvemu_is_ours(ctx) || !values ||
	    (values->comp_mask & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK))
		return EINVAL;
	c = qps_ibvemu_ctx(ctx);
	if (!(values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK))
		return 0;
	r = c->ops->read_clock(c->dev, &cycles);
	if (r < 0)
		return -r;
	values->raw_clock.tv_sec = 0;
	values->raw_clock.tv_nsec = (long)cycles;
	return 0;
}
