// SPDX-License-Identifier: MIT
/*
 * Protection domains and memory regions. A PD is bookkeeping only; an MR
 * is an emu registration, whose lkey the engine checks on every send
 * SGE. Receive SGEs are copied into from the bounce slots, so their lkey
 * is not looked at (as a bad receive lkey is not fatal here, unlike on
 * the HCA).
 */
#include "ibvemu.h"

#include <errno.h>
#include <stdlib.h>

#undef ibv_reg_mr_iova

struct qps_ibvemu_mr {
	struct ibv_mr ibv;
	struct qps_mr *qmr;
};

struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd;

	if (!qps_ibvemu_is_ours(ctx)) {
		errno = EINVAL;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->context = ctx;
	return pd;
}
QPS_IBVEMU_DEFAULT(alloc_pd);

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	if (!pd || !qps_ibvemu_is_ours(pd->context))
		return EINVAL;
	free(pd);
	return 0;
}
QPS_IBVEMU_DEFAULT(dealloc_pd);

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	struct qps_ibvemu_ctx *c;
	struct qps_ibvemu_mr *mr;
	int r;

	if (!pd || !qps_ibvemu_is_ours(pd->context) || !length) {
		errno = EINVAL;
		return NULL;
	}
	/* SGEs carry addresses, so an MR seen at another iova would need a
	 * translation emu does not have; ODP needs page faults. */
	if (iova != (uintptr_t)addr || (access & IBV_ACCESS_ON_DEMAND)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	c = qps_ibvemu_ctx(pd->context);
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	r = c->ops->reg_mr(c->dev, addr, length, &mr->qmr);
	if (r < 0) {
		free(mr);
		errno = -r;
		return NULL;
	}
	mr->ibv.context = pd->context;
	mr->ibv.pd = pd;
	mr->ibv.addr = addr;
	mr->ibv.length = length;
	mr->ibv.handle = mr->qmr->lkey;
	mr->ibv.lkey = mr->qmr->lkey;
	mr->ibv.rkey = mr->qmr->lkey;
	return &mr->ibv;
}

struct ibv_mr *qps_ibvemu_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
				 int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr,
				(unsigned int)access);
}
QPS_IBVEMU_DEFAULT(reg_mr);

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
			       uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}

int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct qps_ibvemu_mr *mr;
	struct qps_ibvemu_ctx *c;
	int r;

	if (!ibmr || !qps_ibvemu_is_ours(ibmr->context))
		return EINVAL;
	mr = qps_ibvemu_of(ibmr, struct qps_ibvemu_mr, ibv);
	c = qps_ibvemu_ctx(ibmr->context);
	r = c->ops->dereg_mr(mr->qmr);
	if (r < 0)
		return -r;
	free(mr);
	return 0;
}
QPS_IBVEMU_DEFAULT(dereg_mr);
