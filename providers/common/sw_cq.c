// SPDX-License-Identifier: MIT
/*
 * CQ of a software provider. No device writes CQEs: polling a CQ does the
 * device's work for the QPs that report to it and returns those
 * completions directly, so the CQ holds nothing between polls and only
 * counts its QPs, which keep it from being destroyed.
 */
#include "prov_sw.h"

#include <errno.h>
#include <stdlib.h>

int qps_sw_cq_create(struct qps_dev *dev, int cqe, int max_cqe,
		     struct qps_cq **cq_out)
{
	struct qps_sw_cq *cq;

	if (cqe < 1 || cqe > max_cqe || !cq_out)
		return -EINVAL;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	pthread_mutex_init(&cq->lock, NULL);
	cq->base.dev = dev;
	cq->base.cqe = cqe;
	*cq_out = &cq->base;
	return 0;
}

int qps_sw_cq_destroy(struct qps_cq *c, pthread_mutex_t *dev_lock)
{
	struct qps_sw_cq *cq = qps_sw_cq(c);
	unsigned int users;

	pthread_mutex_lock(dev_lock);
	users = cq->users;
	pthread_mutex_unlock(dev_lock);
	if (users)
		return -EBUSY;
	pthread_mutex_destroy(&cq->lock);
	free(cq);
	return 0;
}

int qps_sw_cq_req_notify(struct qps_cq *c)
{
	(void)c;
	return 0;
}
