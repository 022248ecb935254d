// SPDX-License-Identifier: MIT
/*
 * Everything of libibverbs that needs no device object: strings, rates,
 * fork support, sysfs helpers, kernel-ABI copies, address handles from a
 * received completion, L2 resolution of a GID.
 */
#include "ibvemu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

/* Not in the installed headers (driver.h, marshall.h are private). */
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst,
				struct ib_uverbs_qp_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst,
				struct ib_uverbs_ah_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
				 struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
			       struct ibv_sa_path_rec *src);

#define STR(tab, i) \
	((unsigned int)(i) < sizeof(tab) / sizeof(tab[0]) && tab[i] ? \
	 tab[i] : "unknown")

const char *ibv_node_type_str(enum ibv_node_type t)
{
	static const char *const s[] = {
		[IBV_NODE_CA] = "InfiniBand channel adapter",
		[IBV_NODE_SWITCH] = "InfiniBand switch",
		[IBV_NODE_ROUTER] = "InfiniBand router",
		[IBV_NODE_RNIC] = "iWARP NIC",
		[IBV_NODE_USNIC] = "usNIC",
		[IBV_NODE_USNIC_UDP] = "usNIC UDP",
		[IBV_NODE_UNSPECIFIED] = "unspecified",
	};

	return STR(s, t);
}

const char *ibv_port_state_str(enum ibv_port_state st)
{
	static const char *const s[] = {
		[IBV_PORT_NOP] = "no state change (NOP)",
		[IBV_PORT_DOWN] = "down",
		[IBV_PORT_INIT] = "init",
		[IBV_PORT_ARMED] = "armed",
		[IBV_PORT_ACTIVE] = "active",
		[IBV_PORT_ACTIVE_DEFER] = "active defer",
	};

	return STR(s, st);
}

const char *ibv_event_type_str(enum ibv_event_type e)
{
	static const char *const s[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue "
					 "error",
		[IBV_EVENT_QP_ACCESS_ERR] = "local access violation work "
					    "queue error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID change",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
		[IBV_EVENT_SM_CHANGE] = "SM change",
		[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[IBV_EVENT_GID_CHANGE] = "GID table change",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};

	return STR(s, e);
}

const char *ibv_wc_status_str(enum ibv_wc_status st)
{
	static const char *const s[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};

	return STR(s, st);
}

/* --- rates ------------------------------------------------------------- */

/* enum ibv_rate in order: the rate, as a multiple of 2.5 Gb/s, in Mb/s. */
enum { COL_RATE, COL_MULT, COL_MBPS };
static const int rates[][3] = {
	{ IBV_RATE_2_5_GBPS, 1, 2500 },     { IBV_RATE_5_GBPS, 2, 5000 },
	{ IBV_RATE_10_GBPS, 4, 10000 },     { IBV_RATE_20_GBPS, 8, 20000 },
	{ IBV_RATE_30_GBPS, 12, 30000 },    { IBV_RATE_40_GBPS, 16, 40000 },
	{ IBV_RATE_60_GBPS, 24, 60000 },    { IBV_RATE_80_GBPS, 32, 80000 },
	{ IBV_RATE_120_GBPS, 48, 120000 },  { IBV_RATE_14_GBPS, 5, 14062 },
	{ IBV_RATE_56_GBPS, 22, 56250 },    { IBV_RATE_112_GBPS, 45, 112500 },
	{ IBV_RATE_168_GBPS, 67, 168750 },  { IBV_RATE_25_GBPS, 10, 25781 },
	{ IBV_RATE_100_GBPS, 40, 103125 },  { IBV_RATE_200_GBPS, 80, 206250 },
	{ IBV_RATE_300_GBPS, 120, 309375 }, { IBV_RATE_28_GBPS, 11, 28125 },
	{ IBV_RATE_50_GBPS, 20, 53125 },    { IBV_RATE_400_GBPS, 160, 425000 },
	{ IBV_RATE_600_GBPS, 240, 637500 },
};
#define NRATES (sizeof(rates) / sizeof(rates[0]))

/* The @to column of the first row whose @from column is @v, else @none. */
static int rate_map(int from, int v, int to, int none)
{
	unsigned int i;

	for (i = 0; i < NRATES; i++)
		if (rates[i][from] == v)
			return rates[i][to];
	return none;
}

int ibv_rate_to_mult(enum ibv_rate rate)
{
	return rate_map(COL_RATE, (int)rate, COL_MULT, -1);
}

enum ibv_rate mult_to_ibv_rate(int mult)
{
	return (enum ibv_rate)rate_map(COL_MULT, mult, COL_RATE,
				       IBV_RATE_MAX);
}

int ibv_rate_to_mbps(enum ibv_rate rate)
{
	return rate_map(COL_RATE, (int)rate, COL_MBPS, -1);
}

enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	return (enum ibv_rate)rate_map(COL_MBPS, mbps, COL_RATE,
				       IBV_RATE_MAX);
}

/* --- fork -------------------------------------------------------------- */

/* Nothing the device owns is DMA-mapped: the emu wire is shared memory a
 * child would just inherit (and must not use: a device belongs to the
 * process that opened it), so fork needs no preparation. */
static int fork_inited;

int ibv_fork_init(void)
{
	__atomic_store_n(&fork_inited, 1, __ATOMIC_RELAXED);
	return 0;
}

enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return __atomic_load_n(&fork_inited, __ATOMIC_RELAXED) ?
	       IBV_FORK_ENABLED : IBV_FORK_DISABLED;
}

int ibv_dontfork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

int ibv_dofork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

/* --- sysfs ------------------------------------------------------------- */

const char *ibv_get_sysfs_path(void)
{
	const char *env = getenv("SYSFS_PATH");

	return env && *env ? env : "/sys";
}

int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size)
{
	char path[512];
	ssize_t n;
	int fd;

	if (!size || snprintf(path, sizeof(path), "%s/%s", dir, file) >=
		     (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size);
	close(fd);
	if (n < 0)
		return -1;
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	else if ((size_t)n < size)
		buf[n] = '\0';
	else
		buf[size - 1] = '\0';
	return (int)n;
}

/* --- kernel ABI copies ------------------------------------------------- */

void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst,
				struct ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst,
				struct ib_uverbs_qp_attr *src)
{
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags;
	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;
	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
				 struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
	dst->packet_life_time_selector = src->packet_life_time_selector;
}

void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
			       struct ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(src->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(src->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
	dst->packet_life_time_selector = src->packet_life_time_selector;
}

/* --- address handles from a completion --------------------------------- */

int ibv_init_ah_from_wc(struct ibv_context *ctx, uint8_t port_num,
			struct ibv_wc *wc, struct ibv_grh *grh,
			struct ibv_ah_attr *ah_attr)
{
	const uint8_t *raw = (const uint8_t *)grh;
	uint32_t flow;

	if (!qps_ibvemu_is_ours(ctx) || !wc || !ah_attr || port_num != 1)
		return EINVAL;
	/* RoCE: the peer is named by the GRH area, which every UD receive
	 * has. */
	if (!grh || !(wc->wc_flags & IBV_WC_GRH))
		return EINVAL;
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	ah_attr->is_global = 1;
	ah_attr->grh.hop_limit = 0xff;
	if (raw[20] == 0x45) {
		/* RoCE v2 over IPv4: as ConnectX places it, 20 bytes of
		 * zeroes and the IPv4 header; the peer is ::ffff:saddr. */
		ah_attr->grh.dgid.raw[10] = 0xff;
		ah_attr->grh.dgid.raw[11] = 0xff;
		memcpy(&ah_attr->grh.dgid.raw[12], raw + 20 + 12, 4);
		ah_attr->grh.traffic_class = raw[21];
		ah_attr->grh.sgid_index = QPS_GID_ROCE_V2_IPV4;
		return 0;
	}
	flow = be32toh(grh->version_tclass_flow);
	if (flow >> 28 != 6)
		return EINVAL;
	/* A GRH proper (RoCE v1, or v2 over IPv6). */
	ah_attr->grh.dgid = grh->sgid;
	ah_attr->grh.flow_label = flow & 0xfffff;
	ah_attr->grh.traffic_class = (uint8_t)(flow >> 20);
	ah_attr->grh.sgid_index = IN6_IS_ADDR_V4MAPPED(
		(const struct in6_addr *)grh->sgid.raw) ?
		QPS_GID_ROCE_V2_IPV4 : QPS_GID_ROCE_V1_LL;
	return 0;
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
				     struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr a;
	int r;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	r = ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a);
	if (r) {
		errno = r;
		return NULL;
	}
	return ibv_create_ah(pd, &a);
}

int ibv_resolve_eth_l2_from_gid(struct ibv_context *ctx,
				struct ibv_ah_attr *attr, uint8_t eth_mac[6],
				uint16_t *vid)
{
	struct qps_ibvemu_ctx *c;
	const struct in6_addr *g;
	struct in_addr dst;
	int r;

	if (!qps_ibvemu_is_ours(ctx) || !attr || !eth_mac || !attr->is_global)
		return EINVAL;
	c = qps_ibvemu_ctx(ctx);
	g = (const struct in6_addr *)attr->grh.dgid.raw;
	if (IN6_IS_ADDR_V4MAPPED(g)) {
		memcpy(&dst, &attr->grh.dgid.raw[12], 4);
		r = c->ops->resolve(c->dev, dst, eth_mac);
		if (r < 0)
			return -r;
	} else if (IN6_IS_ADDR_LINKLOCAL(g)) {
		/* fe80::EUI-64: the MAC is in the interface identifier. */
		const uint8_t *id = &attr->grh.dgid.raw[8];

		eth_mac[0] = id[0] ^ 2;
		eth_mac[1] = id[1];
		eth_mac[2] = id[2];
		eth_mac[3] = id[5];
		eth_mac[4] = id[6];
		eth_mac[5] = id[7];
	} else {
		return EINVAL;
	}
	if (vid)
		*vid = 0xffff;	/* no VLAN */
	return 0;
}
