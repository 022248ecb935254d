// SPDX-License-Identifier: MIT
/*
 * Queue pairs (raw packet and UD), posting, the state machine, steering
 * rules, address handles, multicast attach.
 *
 * emu keeps the verbs state machine itself (validation, flushes in ERR,
 * RESET emptying the queues); a raw-packet QP, which emu creates in RTS
 * for the core, is put back to RESET at creation so that the application
 * walks RESET -> INIT -> RTR -> RTS as on hardware. What is kept here is
 * what query_qp reports and the receive bounce slots.
 */
#include "ibvemu.h"
#include "emu/emu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct qps_ibvemu_qp *qps_ibvemu_qp_by_num(struct qps_ibvemu_ctx *c,
					   uint32_t qpn)
{
	unsigned int i;

	for (i = 0; i < QPS_IBVEMU_MAX_QP; i++)
		if (c->qp[i] && c->qp[i]->ibv.qp_num == qpn)
			return c->qp[i];
	return NULL;
}

static uint32_t roundup_pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

/* The bounce slots of a QP with a receive queue, in emu's pool. */
static int rq_alloc(struct qps_ibvemu_ctx *c, struct qps_ibvemu_qp *qp,
		    uint32_t max_recv_wr)
{
	void *buf;
	int r;

	if (!max_recv_wr)
		return 0;
	qp->nslots = roundup_pow2(max_recv_wr);
	/* The largest frame the wire carries, or a UD payload + GRH. */
	qp->slot_size = (c->info.mtu + 14 + QPS_IBVEMU_GRH_LEN + 63) & ~63u;
	qp->rslot = calloc(qp->nslots, sizeof(*qp->rslot));
	if (!qp->rslot)
		return -ENOMEM;
	r = c->ops->alloc_buf(c->dev, (size_t)qp->nslots * qp->slot_size,
			      &buf);
	if (r < 0) {
		free(qp->rslot);
		return r;
	}
	qp->bounce = buf;
	return 0;
}

static void rq_free(struct qps_ibvemu_ctx *c, struct qps_ibvemu_qp *qp)
{
	if (qp->bounce)
		c->ops->free_buf(c->dev, qp->bounce,
				 (size_t)qp->nslots * qp->slot_size);
	free(qp->rslot);
}

static struct ibv_qp *create_qp(struct ibv_context *ctx, struct ibv_pd *pd,
				struct ibv_qp_init_attr *ia)
{
	struct qps_ibvemu_ctx *c = qps_ibvemu_ctx(ctx);
	struct qps_qp_init_attr qa = { 0 };
	struct qps_ibvemu_qp *qp;
	unsigned int slot;
	int r;

	if (!ia->send_cq || !ia->recv_cq || ia->send_cq->context != ctx ||
	    ia->recv_cq->context != ctx ||
	    ia->cap.max_recv_sge > QPS_IBVEMU_MAX_RECV_SGE) {
		errno = EINVAL;
		return NULL;
	}
	if (ia->srq || (ia->qp_type != IBV_QPT_RAW_PACKET &&
			ia->qp_type != IBV_QPT_UD) ||
	    (ia->qp_type == IBV_QPT_UD && !(c->info.caps & QPS_DEV_CAP_UD))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qa.qp_type = ia->qp_type;
	qa.send_cq = qps_ibvemu_cq(ia->send_cq)->qcq;
	qa.recv_cq = qps_ibvemu_cq(ia->recv_cq)->qcq;
	qa.cap = ia->cap;
	qa.cap.max_recv_sge = 1;	/* the bounce slot */
	qa.sq_sig_all = ia->sq_sig_all;
	r = c->ops->create_qp(c->dev, &qa, &qp->qqp);
	if (r < 0)
		goto err_free;
	if (ia->qp_type == IBV_QPT_RAW_PACKET) {
		struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };

		r = c->ops->modify_qp(qp->qqp, &reset, IBV_QP_STATE);
		if (r < 0)
			goto err_qp;
	}
	r = rq_alloc(c, qp, qp->qqp->cap.max_recv_wr);
	if (r < 0)
		goto err_qp;

	ia->cap.max_send_wr = qp->qqp->cap.max_send_wr;
	ia->cap.max_send_sge = qp->qqp->cap.max_send_sge;
	ia->cap.max_inline_data = qp->qqp->cap.max_inline_data;
	ia->cap.max_recv_wr = qp->qqp->cap.max_recv_wr;
	if (ia->cap.max_recv_wr && !ia->cap.max_recv_sge)
		ia->cap.max_recv_sge = 1;
	qp->sq_sig_all = ia->sq_sig_all;
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.cap = ia->cap;
	qp->attr.port_num = 1;
	pthread_mutex_init(&qp->lock, NULL);

	qp->ibv.context = ctx;
	qp->ibv.qp_context = ia->qp_context;
	qp->ibv.pd = pd;
	qp->ibv.send_cq = ia->send_cq;
	qp->ibv.recv_cq = ia->recv_cq;
	qp->ibv.qp_num = qp->qqp->qp_num;
	qp->ibv.handle = qp->qqp->qp_num;
	qp->ibv.state = IBV_QPS_RESET;
	qp->ibv.qp_type = ia->qp_type;
	pthread_mutex_init(&qp->ibv.mutex, NULL);
	pthread_cond_init(&qp->ibv.cond, NULL);

	pthread_mutex_lock(&c->lock);
	for (slot = 0; slot < QPS_IBVEMU_MAX_QP && c->qp[slot]; slot++)
		;
	if (slot < QPS_IBVEMU_MAX_QP)
		c->qp[slot] = qp;
	pthread_mutex_unlock(&c->lock);
	if (slot == QPS_IBVEMU_MAX_QP) {
		r = -ENOMEM;
		rq_free(c, qp);
		goto err_qp;
	}
	return &qp->ibv;

err_qp:
	c->ops->destroy_qp(qp->qqp);
err_free:
	free(qp);
	errno = -r;
	return NULL;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	if (!pd || !ia || !qps_ibvemu_is_ours(pd->context)) {
		errno = EINVAL;
		return NULL;
	}
	return create_qp(pd->context, pd, ia);
}
QPS_IBVEMU_DEFAULT(create_qp);

struct ibv_qp *qps_ibvemu_create_qp_ex(struct ibv_context *ctx,
				       struct ibv_qp_init_attr_ex *ax)
{
	struct ibv_qp_init_attr ia;

	if (!(ax->comp_mask & IBV_QP_INIT_ATTR_PD) || !ax->pd) {
		errno = EINVAL;
		return NULL;
	}
	/* Only what ibv_create_qp can express: no send ops, no flags. */
	if ((ax->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD |
					 IBV_QP_INIT_ATTR_CREATE_FLAGS)) ||
	    ax->create_flags) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	memset(&ia, 0, sizeof(ia));
	ia.qp_context = ax->qp_context;
	ia.send_cq = ax->send_cq;
	ia.recv_cq = ax->recv_cq;
	ia.srq = ax->srq;
	ia.cap = ax->cap;
	ia.qp_type = ax->qp_type;
	ia.sq_sig_all = ax->sq_sig_all;
	return create_qp(ctx, ax->pd, &ia);
}

int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct qps_ibvemu_qp *qp = qps_ibvemu_qp(ibqp);
	struct qps_ibvemu_ctx *c = qps_ibvemu_ctx(ibqp->context);
	unsigned int i;
	int r;

	pthread_mutex_lock(&c->lock);
	r = c->ops->destroy_qp(qp->qqp);
	if (r < 0) {
		pthread_mutex_unlock(&c->lock);
		return -r;	/* EBUSY while steering rules point here */
	}
	for (i = 0; i < QPS_IBVEMU_MAX_QP; i++)
		if (c->qp[i] == qp)
			c->qp[i] = NULL;
	pthread_mutex_unlock(&c->lock);
	rq_free(c, qp);
	pthread_mutex_destroy(&qp->lock);
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_cond_destroy(&ibqp->cond);
	free(qp);
	return 0;
}
QPS_IBVEMU_DEFAULT(destroy_qp);

/* --- errors ---------------------------------------------------------- */

/* Move to ERR; qp->lock held. emu flushes both queues, and its flush
 * completions come back through poll_cq like any other. */
static int to_err(struct qps_ibvemu_ctx *c, struct qps_ibvemu_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	int r;

	if (qp->attr.qp_state == IBV_QPS_ERR)
		return 0;
	r = c->ops->modify_qp(qp->qqp, &a, IBV_QP_STATE);
	if (r < 0)
		return r;
	qp->attr.qp_state = IBV_QPS_ERR;
	qp->ibv.state = IBV_QPS_ERR;
	return 0;
}

void qps_ibvemu_qp_fatal(struct qps_ibvemu_qp *qp)
{
	struct qps_ibvemu_ctx *c = qps_ibvemu_ctx(qp->ibv.context);
	bool was_err;
	int r;

	pthread_mutex_lock(&qp->lock);
	was_err = qp->attr.qp_state == IBV_QPS_ERR;
	r = to_err(c, qp);
	pthread_mutex_unlock(&qp->lock);
	if (r < 0)
		fprintf(stderr, "ibvemu: QP %#x to ERR: %s\n", qp->ibv.qp_num,
			strerror(-r));
	if (!was_err)
		qps_ibvemu_async(c, IBV_EVENT_QP_FATAL, &qp->ibv);
}

/* --- state machine ---------------------------------------------------- */

int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct qps_ibvemu_qp *qp;
	struct qps_ibvemu_ctx *c;
	int r;

	if (!ibqp || !attr || !qps_ibvemu_is_ours(ibqp->context))
		return EINVAL;
	qp = qps_ibvemu_qp(ibqp);
	c = qps_ibvemu_ctx(ibqp->context);
	if ((mask & IBV_QP_PORT) && attr->port_num != 1)
		return EINVAL;
	pthread_mutex_lock(&qp->lock);
	if ((mask & IBV_QP_CUR_STATE) &&
	    attr->cur_qp_state != qp->attr.qp_state) {
		pthread_mutex_unlock(&qp->lock);
		return EINVAL;
	}
	r = c->ops->modify_qp(qp->qqp, attr, mask & ~IBV_QP_CUR_STATE);
	if (r < 0) {
		pthread_mutex_unlock(&qp->lock);
		return -r;
	}
	if (mask & IBV_QP_STATE) {
		/* RESET empties emu's receive queue without completions:
		 * every slot is free again. */
		if (attr->qp_state == IBV_QPS_RESET)
			qp->rtail = qp->rhead;
		qp->attr.qp_state = attr->qp_state;
		ibqp->state = attr->qp_state;
	}
	if (mask & IBV_QP_QKEY)
		qp->attr.qkey = attr->qkey;
	if (mask & IBV_QP_SQ_PSN)
		qp->attr.sq_psn = attr->sq_psn;
	if (mask & IBV_QP_PKEY_INDEX)
		qp->attr.pkey_index = attr->pkey_index;
	pthread_mutex_unlock(&qp->lock);
	return 0;
}
QPS_IBVEMU_DEFAULT(modify_qp);

int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		 struct ibv_qp_init_attr *init)
{
	struct qps_ibvemu_qp *qp;

	(void)mask;	/* everything is cheap to report */
	if (!ibqp || !attr || !init || !qps_ibvemu_is_ours(ibqp->context))
		return EINVAL;
	qp = qps_ibvemu_qp(ibqp);
	pthread_mutex_lock(&qp->lock);
	*attr = qp->attr;
	attr->cur_qp_state = qp->attr.qp_state;
	pthread_mutex_unlock(&qp->lock);
	memset(init, 0, sizeof(*init));
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->cap = attr->cap;
	init->qp_type = ibqp->qp_type;
	init->sq_sig_all = qp->sq_sig_all;
	return 0;
}
QPS_IBVEMU_DEFAULT(query_qp);

/* --- posting ----------------------------------------------------------- */

int qps_ibvemu_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr)
{
	struct qps_ibvemu_qp *qp = qps_ibvemu_qp(ibqp);
	struct qps_ibvemu_ctx *c = qps_ibvemu_ctx(ibqp->context);
	struct ibv_send_wr *bad = NULL;
	int r;

	/* The WR goes to emu unchanged: lkeys are emu's, a UD WR's AH is
	 * emu's own struct ibv_ah; emu refuses it before RTS and flushes
	 * it in ERR. */
	r = c->ops->post_send(qp->qqp, wr, &bad);
	if (r < 0 && bad_wr)
		*bad_wr = bad ? bad : wr;
	return -r;
}

static int post_one_recv(struct qps_ibvemu_ctx *c, struct qps_ibvemu_qp *qp,
			 struct ibv_recv_wr *wr)
{
	struct qps_ibvemu_rslot *s;
	struct ibv_recv_wr ewr = { 0 };
	struct ibv_recv_wr *bad;
	struct ibv_sge esge;
	uint64_t total = 0;
	uint32_t idx = qp->rhead;
	int i, r;

	if (wr->num_sge < 1 || wr->num_sge > (int)QPS_IBVEMU_MAX_RECV_SGE ||
	    !wr->sg_list)
		return -EINVAL;
	if (idx - qp->rtail >= qp->nslots)
		return -ENOMEM;
	s = &qp->rslot[idx & (qp->nslots - 1)];
	for (i = 0; i < wr->num_sge; i++) {
		s->sge[i] = wr->sg_list[i];
		total += wr->sg_list[i].length;
	}
	if (!total)
		return -EINVAL;
	s->num_sge = (uint32_t)wr->num_sge;
	s->wr_id = wr->wr_id;
	esge.addr = (uintptr_t)(qp->bounce +
				(size_t)(idx & (qp->nslots - 1)) * qp->slot_size);
	esge.length = total < qp->slot_size ? (uint32_t)total : qp->slot_size;
	esge.lkey = 0;
	ewr.wr_id = idx;
	ewr.sg_list = &esge;
	ewr.num_sge = 1;
	r = c->ops->post_recv(qp->qqp, &ewr, &bad);
	if (r < 0)
		return r;
	qp->rhead = idx + 1;
	return 0;
}

int qps_ibvemu_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr)
{
	struct qps_ibvemu_qp *qp = qps_ibvemu_qp(ibqp);
	struct qps_ibvemu_ctx *c = qps_ibvemu_ctx(ibqp->context);
	int r = 0;

	pthread_mutex_lock(&qp->lock);
	if (!qp->nslots || qp->attr.qp_state == IBV_QPS_RESET) {
		r = -EINVAL;
	} else {
		for (; wr; wr = wr->next) {
			r = post_one_recv(c, qp, wr);
			if (r < 0)
				break;
		}
	}
	pthread_mutex_unlock(&qp->lock);
	if (r < 0 && bad_wr)
		*bad_wr = wr;
	return -r;
}

bool qps_ibvemu_recv_done(struct qps_ibvemu_qp *qp, struct ibv_wc *wc)
{
	uint32_t idx = (uint32_t)wc->wr_id;
	struct qps_ibvemu_rslot *s;
	const uint8_t *src;
	uint32_t left, i;

	pthread_mutex_lock(&qp->lock);
	if (!qp->nslots || idx - qp->rtail >= qp->rhead - qp->rtail) {
		/* Not a slot we posted (emu reset the ring): drop it. */
		pthread_mutex_unlock(&qp->lock);
		return false;
	}
	s = &qp->rslot[idx & (qp->nslots - 1)];
	if (wc->status == IBV_WC_SUCCESS) {
		src = qp->bounce + (size_t)(idx & (qp->nslots - 1)) *
				   qp->slot_size;
		left = wc->byte_len;
		for (i = 0; i < s->num_sge && left; i++) {
			uint32_t n = s->sge[i].length < left ?
				     s->sge[i].length : left;

			memcpy((void *)(uintptr_t)s->sge[i].addr, src, n);
			src += n;
			left -= n;
		}
	}
	wc->wr_id = s->wr_id;
	/* emu completes receives in posting order. */
	qp->rtail = idx + 1;
	pthread_mutex_unlock(&qp->lock);
	return true;
}

/* --- steering rules ---------------------------------------------------- */

/* A rule for one multicast MAC also makes the port accept that MAC, as
 * mlx4's device-managed steering does; emu's filter takes an IPv4 group,
 * so the MAC's group is named by the rule's IPv4 destination or, without
 * one, by any address that maps to the MAC. */
static bool flow_group(const struct ibv_flow_attr *attr, struct in_addr *g)
{
	const uint8_t *p = (const uint8_t *)(attr + 1);
	const struct ibv_flow_spec_eth *eth = (const void *)p;
	static const uint8_t ones[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	const uint8_t *m;
	unsigned int i;

	if (!attr->num_of_specs || eth->type != IBV_FLOW_SPEC_ETH ||
	    eth->size < sizeof(*eth) || memcmp(eth->mask.dst_mac, ones, 6) ||
	    !(eth->val.dst_mac[0] & 1) || !memcmp(eth->val.dst_mac, ones, 6))
		return false;
	m = eth->val.dst_mac;
	g->s_addr = htonl(0xe0000000u | (uint32_t)(m[3] & 0x7f) << 16 |
			  (uint32_t)m[4] << 8 | m[5]);
	p += eth->size;
	for (i = 1; i < attr->num_of_specs; i++) {
		const struct ibv_flow_spec_ipv4 *ip = (const void *)p;

		if (ip->type == IBV_FLOW_SPEC_IPV4 && ip->size >= sizeof(*ip) &&
		    ip->mask.dst_ip == 0xffffffffu &&
		    IN_MULTICAST(ntohl(ip->val.dst_ip))) {
			g->s_addr = ip->val.dst_ip;
			break;
		}
		if (!ip->size)
			break;
		p += ip->size;
	}
	return true;
}

/*
 * $QPS_IBV_EMU_FLOW_ERR (an errno number, or one of the names below) makes
 * every ibv_create_flow fail with it, through emu's own injection hook
 * (the error surfaces from emu's create_flow, as a device error would):
 * how tests of the verbs provider reach a rule the device refuses.
 */
static int flow_err_env(void)
{
	static const struct { const char *name; int err; } names[] = {
		{ "ENOSPC", ENOSPC }, { "ENOMEM", ENOMEM },
		{ "EINVAL", EINVAL }, { "EPERM", EPERM },
		{ "EOPNOTSUPP", EOPNOTSUPP }, { "EBUSY", EBUSY },
	};
	const char *v = getenv("QPS_IBV_EMU_FLOW_ERR");
	unsigned int i;
	char *end;
	long n;

	if (!v || !*v)
		return 0;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(v, names[i].name))
			return names[i].err;
	n = strtol(v, &end, 10);
	return !*end && n > 0 && n < 4096 ? (int)n : EINVAL;
}

struct ibv_flow *qps_ibvemu_create_flow(struct ibv_qp *ibqp,
					struct ibv_flow_attr *attr)
{
	struct qps_ibvemu_ctx *c = qps_ibvemu_ctx(ibqp->context);
	struct qps_ibvemu_flow *f;
	struct in_addr any = { 0 };
	int r;

	if (!attr) {
		errno = EINVAL;
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		errno = ENOMEM;
		return NULL;
	}
	r = flow_err_env();
	if (r)
		qps_emu_inject_flow_err(c->dev, -r);
	r = c->ops->create_flow(qps_ibvemu_qp(ibqp)->qqp, attr, &f->qf);
	if (r < 0)
		goto err;
	if (flow_group(attr, &f->group)) {
		r = c->ops->mcast_attach(c->dev, f->group, any);
		if (r < 0) {
			c->ops->destroy_flow(f->qf);
			goto err;
		}
		f->mc = true;
	}
	f->ibv.context = ibqp->context;
	return &f->ibv;
err:
	free(f);
	errno = -r;
	return NULL;
}

int qps_ibvemu_destroy_flow(struct ibv_flow *flow)
{
	struct qps_ibvemu_flow *f = qps_ibvemu_of(flow, struct qps_ibvemu_flow,
						  ibv);
	struct qps_ibvemu_ctx *c = qps_ibvemu_ctx(flow->context);
	struct in_addr any = { 0 };
	int r;

	r = c->ops->destroy_flow(f->qf);
	if (r < 0)
		return -r;
	if (f->mc)
		c->ops->mcast_detach(c->dev, f->group, any);
	free(f);
	return 0;
}

/* --- address handles, multicast ---------------------------------------- */

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct qps_ibvemu_ctx *c;
	struct qps_ibvemu_ah *a;
	int r;

	if (!pd || !attr || !qps_ibvemu_is_ours(pd->context)) {
		errno = EINVAL;
		return NULL;
	}
	c = qps_ibvemu_ctx(pd->context);
	a = calloc(1, sizeof(*a));
	if (!a) {
		errno = ENOMEM;
		return NULL;
	}
	r = c->ops->create_ah(c->dev, attr, &a->qah);
	if (r < 0) {
		free(a);
		errno = -r;
		return NULL;
	}
	/* The application holds emu's own struct ibv_ah, so a WR carrying
	 * it reaches emu unchanged. */
	a->qah->ibv->context = pd->context;
	a->qah->ibv->pd = pd;
	pthread_mutex_lock(&c->lock);
	a->next = c->ahs;
	c->ahs = a;
	pthread_mutex_unlock(&c->lock);
	return a->qah->ibv;
}
QPS_IBVEMU_DEFAULT(create_ah);

int ibv_destroy_ah(struct ibv_ah *ah)
{
	struct qps_ibvemu_ctx *c;
	struct qps_ibvemu_ah **p, *a = NULL;
	int r;

	if (!ah || !qps_ibvemu_is_ours(ah->context))
		return EINVAL;
	c = qps_ibvemu_ctx(ah->context);
	pthread_mutex_lock(&c->lock);
	for (p = &c->ahs; *p; p = &(*p)->next)
		if ((*p)->qah->ibv == ah) {
			a = *p;
			break;
		}
	if (!a) {
		pthread_mutex_unlock(&c->lock);
		return EINVAL;
	}
	r = c->ops->destroy_ah(a->qah);
	if (r < 0) {
		pthread_mutex_unlock(&c->lock);
		return -r;
	}
	*p = a->next;
	pthread_mutex_unlock(&c->lock);
	free(a);
	return 0;
}
QPS_IBVEMU_DEFAULT(destroy_ah);

int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
		     uint16_t lid)
{
	struct qps_ibvemu_ctx *c;

	if (!qp || !gid || !qps_ibvemu_is_ours(qp->context))
		return EINVAL;
	c = qps_ibvemu_ctx(qp->context);
	return -c->ops->attach_mcast(qps_ibvemu_qp(qp)->qqp, gid, lid);
}
QPS_IBVEMU_DEFAULT(attach_mcast);

int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
		     uint16_t lid)
{
	struct qps_ibvemu_ctx *c;

	if (!qp || !gid || !qps_ibvemu_is_ours(qp->context))
		return EINVAL;
	c = qps_ibvemu_ctx(qp->context);
	return -c->ops->detach_mcast(qps_ibvemu_qp(qp)->qqp, gid, lid);
}
QPS_IBVEMU_DEFAULT(detach_mcast);
