// SPDX-License-Identifier: MIT
/*
 * Steering rules: ibv_create_flow with the ETH/IPv4/UDP specs the core
 * builds (flow_attr.c). The failures a first run on real hardware hits
 * are named: mlx4 returns ENXIO or EINVAL when device-managed flow
 * steering is off, ENOMEM when the steering table is full.
 */
#include <stdlib.h>

#include "verbs.h"

static const char *why(int err)
{
	switch (err) {
	case ENXIO:
		return "device-managed flow steering disabled (load mlx4_core "
		       "with log_num_mgm_entry_size=-1)";
	case EINVAL:
		return "device-managed flow steering disabled (mlx4_core "
		       "log_num_mgm_entry_size=-1), or a rule the device "
		       "cannot match";
	case ENOMEM:
	case ENOSPC:
		return "too many rules (the steering table is full; A0 static "
		       "mode, log_num_mgm_entry_size=-7, allows only 62)";
	case EPERM:
		return "needs CAP_NET_RAW";
	case EOPNOTSUPP:
	case ENOSYS:
		return "the device has no flow steering";
	default:
		return NULL;
	}
}

int qps_verbs_create_flow(struct qps_qp *qp, struct ibv_flow_attr *attr,
			  struct qps_flow **flow_out)
{
	struct qps_verbs_flow *vf;

	if (!attr || !flow_out)
		return -EINVAL;
	vf = calloc(1, sizeof(*vf));
	if (!vf)
		return -ENOMEM;
	/* The core builds rules for port 1; ours may be another. */
	attr->port = qps_verbs_dev(qp->dev)->port;
	vf->flow = ibv_create_flow(qps_verbs_qp(qp)->qp, attr);
	if (!vf->flow) {
		int ret = qps_verbs_errno();
		const char *reason = why(-ret);

		free(vf);
		if (reason)
			qps_verbs_log("ibv_create_flow on %s: %s",
				      qps_verbs_dev(qp->dev)->info.name,
				      reason);
		return ret;
	}
	vf->base.qp = qp;
	*flow_out = &vf->base;
	return 0;
}

int qps_verbs_destroy_flow(struct qps_flow *flow)
{
	struct qps_verbs_flow *vf;
	int ret;

	vf = qps_verbs_container_of(flow, struct qps_verbs_flow, base);
	ret = ibv_destroy_flow(vf->flow);
	if (ret)
		return qps_verbs_ret(ret);
	free(vf);
	return 0;
}
