/* SPDX-License-Identifier: MIT */
/*
 * Helpers for software providers (not installed): the pieces emu, packet
 * and xdp would otherwise each carry, since they do in software what a
 * NIC does in hardware.
 *
 *   flow_parse.c  struct ibv_flow_attr -> one normalized match
 *   sw_mr.c       MR table: slot array, lkey = generation << 8 | slot
 *   sw_rq.c       receive queue: a ring of posted buffers
 *   sw_cq.c       CQ that holds nothing: polling it does the device's work
 *   sw_qp.c       raw-packet QP attributes, numbers and CQ references
 *   sw_send.c     send WR checks, the copy into a frame, the completion,
 *                 the send counters
 */
#ifndef QPS_PROV_SW_H
#define QPS_PROV_SW_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "provider.h"

#define qps_sw_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* A counter with one writer at a time (under the lock of its queue) and
 * lock-free readers: relaxed atomics, never torn. */
static inline void qps_sw_count(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n,
			 __ATOMIC_RELAXED);
}

static inline uint64_t qps_sw_read(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

static inline uint32_t qps_sw_pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

/* The Internet checksum (RFC 1071) as a NIC computes it: @len bytes at
 * @p as big-endian 16-bit words (an odd last byte padded), added to @sum,
 * not folded. Plain on purpose: the devices' reference, not a fast path. */
static inline uint32_t qps_sw_csum_add(uint32_t sum, const uint8_t *p,
				       size_t len)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

/* @sum folded to 16 bits, not complemented. */
static inline uint16_t qps_sw_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* Lower tier wins before priority, as under mlx4 flow steering. */
enum qps_flow_tier {
	QPS_FLOW_TIER_NORMAL = 0,
	QPS_FLOW_TIER_MC_DEFAULT = 1,
	QPS_FLOW_TIER_ALL_DEFAULT = 2,
};

/*
 * A parsed steering rule. Values are pre-masked; addresses and ports stay
 * in network order. Only the destination MAC is kept from the ETH spec (mlx4
 * ignores src_mac); ether_type and vlan_tag are kept raw for the provider
 * to accept or refuse, since what it can honour differs.
 */
struct qps_flow_rule {
	enum qps_flow_tier tier;
	uint16_t prio;
	uint32_t seq;			/* creation order, set by the provider */
	uint8_t mac[6], mac_mask[6];	/* destination MAC */
	uint16_t ether_type, ether_type_mask;	/* network order */
	uint16_t vlan_mask;
	bool need_ip, need_udp;		/* an IPv4 / UDP spec was given */
	uint32_t sip, sip_mask, dip, dip_mask;
	uint16_t sport, sport_mask, dport, dport_mask;
};

/* 0; -EINVAL for a bad comp_mask, size, priority above @max_prio, a
 * duplicate spec or a spec of the wrong size; -EOPNOTSUPP for flags, an
 * unknown rule type or a spec other than ETH, IPv4, UDP. */
int qps_flow_parse(const struct ibv_flow_attr *attr, uint16_t max_prio,
		   struct qps_flow_rule *out);
/* Whether @a takes a frame both match before @b: the lower tier, then the
 * lower priority value, then the older rule. */
bool qps_flow_rule_before(const struct qps_flow_rule *a,
			  const struct qps_flow_rule *b);

/* The lkey's low byte is the slot, so a table has at most 256. */
#define QPS_SW_MR_SLOTS 256u

struct qps_sw_mr_table {
	pthread_mutex_t lock;
	unsigned int max;		/* slots in use: <= QPS_SW_MR_SLOTS */
	uint32_t gen;			/* next lkey generation */
	struct qps_mr *slot[QPS_SW_MR_SLOTS];
};

void qps_sw_mr_init(struct qps_sw_mr_table *t, unsigned int max);
/* Frees the MRs still registered. */
void qps_sw_mr_fini(struct qps_sw_mr_table *t);
/* 0, -EINVAL (NULL, empty or wrapping range) or -ENOMEM (table full). */
int qps_sw_mr_reg(struct qps_sw_mr_table *t, struct qps_dev *dev, void *addr,
		  size_t len, struct qps_mr **mr_out);
int qps_sw_mr_dereg(struct qps_sw_mr_table *t, struct qps_mr *mr);
/* Copy out the lkey's range; 0 or -EINVAL. */
int qps_sw_mr_lookup(struct qps_sw_mr_table *t, uint32_t lkey,
		     uintptr_t *addr, size_t *len);
/* 0 when [addr, addr + len) lies in the lkey's MR, else -EINVAL. */
int qps_sw_mr_check(struct qps_sw_mr_table *t, uint32_t lkey, uintptr_t addr,
		    uint64_t len);

struct qps_sw_rwqe {
	uint64_t wr_id;
	uintptr_t addr;
	uint32_t len;
};

/* Posted receive buffers, taken in post order by the provider's poll. */
struct qps_sw_rq {
	pthread_mutex_t lock;		/* the owner may guard more with it */
	struct qps_sw_rwqe *wqe;
	uint32_t cnt;			/* power of two; 0: no receive side */
	uint32_t head, tail;		/* free-running */
};

/* Room for @max_wr buffers (none for 0); 0 or -ENOMEM. The lock is made
 * either way, so that qps_sw_rq_fini always applies. */
int qps_sw_rq_init(struct qps_sw_rq *rq, uint32_t max_wr);
void qps_sw_rq_fini(struct qps_sw_rq *rq);
/* The post_recv op on @rq: one SGE a WR, in an MR of @mrs. 0, -ENOMEM
 * (full) or -EINVAL, with *@bad_wr the WR that was not posted. */
int qps_sw_rq_post(struct qps_sw_rq *rq, struct qps_sw_mr_table *mrs,
		   struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);

/* A CQ of a provider whose poll does the device's work: it holds no
 * CQEs, so it only counts the QPs that report to it. */
struct qps_sw_cq {
	struct qps_cq base;
	pthread_mutex_t lock;	/* one poller at a time */
	unsigned int users;	/* QPs reporting to it, under the device lock */
};

static inline struct qps_sw_cq *qps_sw_cq(struct qps_cq *c)
{
	return qps_sw_container_of(c, struct qps_sw_cq, base);
}

/* 0, -EINVAL (@cqe outside 1..@max_cqe) or -ENOMEM. */
int qps_sw_cq_create(struct qps_dev *dev, int cqe, int max_cqe,
		     struct qps_cq **cq_out);
/* 0, or -EBUSY while a QP reports to it; @dev_lock guards users. */
int qps_sw_cq_destroy(struct qps_cq *cq, pthread_mutex_t *dev_lock);
/* Nothing to arm: the providers' event fds are level triggered. */
int qps_sw_cq_req_notify(struct qps_cq *cq);

/* 0, -EOPNOTSUPP (not a raw-packet QP) or -EINVAL (no CQs, no send
 * queue, or a capability above @max_wr, @max_sge, one receive SGE). */
int qps_sw_qp_check(const struct qps_qp_init_attr *a, uint32_t max_wr,
		    uint32_t max_sge);
/* The QP's handle as made: capabilities are what was allocated. */
void qps_sw_qp_fill(struct qps_qp *q, struct qps_dev *dev,
		    const struct qps_qp_init_attr *attr, uint32_t sq_cnt,
		    uint32_t rq_cnt, uint32_t max_sge, uint32_t max_inline);
/* Give @q a number from @seq and count it on its CQs (link), or uncount
 * it (unlink). Called under the device lock, which guards the CQs' users. */
void qps_sw_qp_link(struct qps_qp *q, uint32_t *seq);
void qps_sw_qp_unlink(struct qps_qp *q);

/* What a software send queue counts; each written as qps_sw_count does. */
struct qps_sw_sq_stats {
	uint64_t wqes;		/* WRs handed to the device */
	uint64_t doorbells;
	uint64_t tx_cqes;
	uint64_t tx_drops;	/* WRs completed in error */
	uint64_t tx_len_err;
};

/* A posted WR: handed over (@st success) or completed in error. */
void qps_sw_sq_count(struct qps_sw_sq_stats *s, enum ibv_wc_status st);
/* Add the counters @s has for the device's to @c. */
void qps_sw_sq_stats_add(struct qps_dev_counters *c,
			 const struct qps_sw_sq_stats *s);

/* 0, or -EINVAL for a WR the QP cannot take (not a SEND, bad SGE list). */
int qps_sw_send_wr_check(const struct qps_qp *q, const struct ibv_send_wr *wr);
/* The WR's frame length into *@len_out, and its completion status: an
 * Ethernet header to @max_len bytes, each SGE in an MR of @mrs unless
 * the WR is inline. */
enum ibv_wc_status qps_sw_send_wr_len(struct qps_sw_mr_table *mrs,
				      const struct ibv_send_wr *wr,
				      uint32_t max_len, uint32_t *len_out);
/* The completion of a finished send WR into @wc: 1, or 0 (nothing
 * written) for a successful WR that asked for none. */
int qps_sw_send_wc(struct ibv_wc *wc, const struct qps_qp *q, uint64_t wr_id,
		   uint32_t byte_len, enum ibv_wc_status st, bool signaled);
/* Gather the WR's SGEs to @dst, which holds its length. */
void qps_sw_send_wr_copy(uint8_t *dst, const struct ibv_send_wr *wr);

#endif
