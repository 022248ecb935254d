// SPDX-License-Identifier: MIT
/*
 * Provider registry and boundary helpers: lookup, the stub filling that
 * lets dispatch skip NULL checks, the verbs provider's no-device path, and
 * the steering-rule layout every provider parses.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdalign.h>
#include <stdio.h>
#include <string.h>

#include "prov_sw.h"
#include "provider.h"
#include "t_util.h"

/* Every op of struct qps_provider_ops, in order. */
#define T_FOR_EACH_OP(X)                                                     \
	X(open) X(close) X(query) X(counters) X(alloc_buf) X(free_buf)       \
	X(reg_mr) X(dereg_mr) X(create_cq) X(destroy_cq) X(poll_cq)          \
	X(req_notify_cq) X(get_event_fd) X(ack_events) X(create_qp)          \
	X(destroy_qp) X(post_send) X(post_recv) X(mlx4_sq) X(create_flow)    \
	X(destroy_flow) X(mcast_attach) X(mcast_detach) X(resolve)           \
	X(route_gen) X(modify_qp) X(query_gid) X(create_ah) X(destroy_ah)    \
	X(attach_mcast) X(detach_mcast) X(hold_port) X(get_cq_event_fd)      \
	X(poll_cq_ts) X(read_clock) X(resolve_nowait) X(release_port)

#define T_COUNT_OP(op) +1
#define T_NUM_OPS (0 T_FOR_EACH_OP(T_COUNT_OP))

/* A new op added to the struct but not to the list above fails here. */
_Static_assert(offsetof(struct qps_provider_ops, open) +
	       T_NUM_OPS * sizeof(void (*)(void)) ==
	       sizeof(struct qps_provider_ops),
	       "T_FOR_EACH_OP misses an op of struct qps_provider_ops");

static void check_no_null_op(const struct qps_provider_ops *ops)
{
#define T_CHECK_OP(op)                                                       \
	if (!ops->op)                                                        \
		fprintf(stderr, "\n  %s: op %s is NULL", ops->name, #op);   \
	CU_ASSERT_PTR_NOT_NULL(ops->op);
	T_FOR_EACH_OP(T_CHECK_OP)
#undef T_CHECK_OP
	CU_ASSERT_EQUAL(ops->size, sizeof(struct qps_provider_ops));
}

/* Call every op of a table that holds nothing but stubs. */
static void check_all_stubs(const struct qps_provider_ops *o)
{
	struct ibv_send_wr swr, *sbad = NULL;
	struct ibv_recv_wr rwr, *rbad = NULL;
	struct in_addr a = { 0 };
	uint8_t mac[6];
	uint16_t port = 0;

	CU_ASSERT_EQUAL(o->open(NULL, NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->close(NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->query(NULL, NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->counters(NULL, NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->alloc_buf(NULL, 0, NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->free_buf(NULL, NULL, 0), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->reg_mr(NULL, NULL, 0, NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->dereg_mr(NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->create_cq(NULL, 1, NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->destroy_cq(NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->poll_cq(NULL, 1, NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->req_notify_cq(NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->get_event_fd(NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->ack_events(NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->create_qp(NULL, NULL, NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->destroy_qp(NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->post_send(NULL, &swr, &sbad), -EOPNOTSUPP);
	CU_ASSERT_PTR_EQUAL(sbad, &swr);
	CU_ASSERT_EQUAL(o->post_recv(NULL, &rwr, &rbad), -EOPNOTSUPP);
	CU_ASSERT_PTR_EQUAL(rbad, &rwr);
	CU_ASSERT_EQUAL(o->mlx4_sq(NULL, NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->create_flow(NULL, NULL, NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->destroy_flow(NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->mcast_attach(NULL, a, a), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->mcast_detach(NULL, a, a), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->resolve(NULL, a, mac), -EOPNOTSUPP);
	/* No route changes: cached destinations never go stale. */
	CU_ASSERT_EQUAL(o->route_gen(NULL), 0);
	CU_ASSERT_EQUAL(o->modify_qp(NULL, NULL, 0), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->query_gid(NULL, 0, NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->create_ah(NULL, NULL, NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->destroy_ah(NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->attach_mcast(NULL, NULL, 0), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->detach_mcast(NULL, NULL, 0), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->hold_port(NULL, -1, a, &port, 0), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->get_cq_event_fd(NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->poll_cq_ts(NULL, 1, NULL, NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(o->read_clock(NULL, NULL), -EOPNOTSUPP);
	/* Nothing to undo: a socket the stub never held is left alone. */
	o->release_port(NULL, -1);
}

static void test_find_emu(void)
{
	const struct qps_provider_ops *ops = NULL, *again = NULL;

	CU_ASSERT_EQUAL_FATAL(qps_provider_find("emu", &ops), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ops);
	CU_ASSERT_STRING_EQUAL(ops->name, "emu");
	check_no_null_op(ops);
	/* One filled table per provider, not a copy per call. */
	CU_ASSERT_EQUAL(qps_provider_find("emu", &again), 0);
	CU_ASSERT_PTR_EQUAL(again, ops);
}

static void test_find_errors(void)
{
	const struct qps_provider_ops *ops = NULL;

	CU_ASSERT_EQUAL(qps_provider_find("nonexistent", &ops), -ENOENT);
	CU_ASSERT_EQUAL(qps_provider_find("", &ops), -ENOENT);
	CU_ASSERT_EQUAL(qps_provider_find("EMU", &ops), -ENOENT);
	CU_ASSERT_EQUAL(qps_provider_find("emu2", &ops), -ENOENT);
	CU_ASSERT_EQUAL(qps_provider_find(NULL, &ops), -ENOENT);
	CU_ASSERT_PTR_NULL(ops);
	CU_ASSERT_EQUAL(qps_provider_find("emu", NULL), -EINVAL);
}

static int fake_open(const struct qps_dev_attr *attr, struct qps_dev **dev_out)
{
	(void)attr;
	(void)dev_out;
	return 11;
}

static int fake_close(struct qps_dev *dev)
{
	(void)dev;
	return 12;
}

static int fake_query(struct qps_dev *dev, struct qps_dev_info *info)
{
	(void)dev;
	(void)info;
	return 13;
}

static void test_fill_all_null(void)
{
	struct qps_provider_ops raw = {
		.size = sizeof(raw),
		.name = "fake",
	}, out;

	memset(&out, 0, sizeof(out));
	CU_ASSERT_EQUAL_FATAL(qps_provider_fill(&raw, &out), 0);
	CU_ASSERT_STRING_EQUAL(out.name, "fake");
	check_no_null_op(&out);
	check_all_stubs(&out);
}

/* A table from a provider built against an older, shorter struct: what
 * lies beyond its size is not its own, even if the memory is not NULL. */
static void test_fill_short_table(void)
{
	struct qps_provider_ops raw = {
		.size = offsetof(struct qps_provider_ops, query),
		.name = "old",
		.open = fake_open,
		.close = fake_close,
		.query = fake_query,
	}, out;

	CU_ASSERT_EQUAL_FATAL(qps_provider_fill(&raw, &out), 0);
	check_no_null_op(&out);
	CU_ASSERT_PTR_EQUAL(out.open, fake_open);
	CU_ASSERT_PTR_EQUAL(out.close, fake_close);
	CU_ASSERT_PTR_NOT_EQUAL(out.query, fake_query);
	CU_ASSERT_EQUAL(out.open(NULL, NULL), 11);
	CU_ASSERT_EQUAL(out.close(NULL), 12);
	CU_ASSERT_EQUAL(out.query(NULL, NULL), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(out.route_gen(NULL), 0);

	/* A size that ends inside a pointer: that op is not usable. */
	raw.size = offsetof(struct qps_provider_ops, close) + 4;
	CU_ASSERT_EQUAL_FATAL(qps_provider_fill(&raw, &out), 0);
	CU_ASSERT_PTR_EQUAL(out.open, fake_open);
	CU_ASSERT_EQUAL(out.close(NULL), -EOPNOTSUPP);

	/* Only size and name: every op is a stub. */
	raw.size = offsetof(struct qps_provider_ops, open);
	CU_ASSERT_EQUAL_FATAL(qps_provider_fill(&raw, &out), 0);
	check_no_null_op(&out);
	check_all_stubs(&out);
}

/* A provider built against a newer, longer struct: ops we know are kept,
 * the unknown tail is ignored. */
static void test_fill_long_table(void)
{
	struct {
		struct qps_provider_ops ops;
		void (*future_op)(void);
	} raw = {
		.ops = {
			.size = sizeof(raw),
			.name = "new",
			.query = fake_query,
		},
	};
	struct qps_provider_ops out;

	CU_ASSERT_EQUAL_FATAL(qps_provider_fill(&raw.ops, &out), 0);
	CU_ASSERT_EQUAL(out.size, sizeof(out));
	CU_ASSERT_PTR_EQUAL(out.query, fake_query);
	CU_ASSERT_EQUAL(out.open(NULL, NULL), -EOPNOTSUPP);
}

static void test_fill_invalid(void)
{
	struct qps_provider_ops raw = { .size = sizeof(raw), .name = NULL };
	struct qps_provider_ops out;

	CU_ASSERT_EQUAL(qps_provider_fill(&raw, &out), -EINVAL);
	raw.name = "x";
	raw.size = sizeof(size_t);
	CU_ASSERT_EQUAL(qps_provider_fill(&raw, &out), -EINVAL);
	CU_ASSERT_EQUAL(qps_provider_fill(NULL, &out), -EINVAL);
	CU_ASSERT_EQUAL(qps_provider_fill(&raw, NULL), -EINVAL);
	/* qps_ctx_query reports the name whole: 15 characters fit. */
	raw.size = sizeof(raw);
	raw.name = "0123456789abcdef";
	CU_ASSERT_EQUAL(qps_provider_fill(&raw, &out), -EINVAL);
	raw.name = "0123456789abcde";
	CU_ASSERT_EQUAL(qps_provider_fill(&raw, &out), 0);
}

/* Without RDMA hardware (the usual test machine) open fails with -ENODEV
 * after one message on stderr; with a device it must work. */
static void test_verbs_open(void)
{
	const struct qps_provider_ops *ops;
	struct qps_dev_info info;
	struct qps_dev *dev = NULL;
	int ret;

	ret = qps_provider_find("verbs", &ops);
	if (ret == -ENOENT) {
		fprintf(stderr, "\n  verbs provider not built: skipped ");
		return;
	}
	CU_ASSERT_EQUAL_FATAL(ret, 0);
	check_no_null_op(ops);
	/* An op verbs leaves unset (no special receive memory): a stub,
	 * not a crash. */
	CU_ASSERT_EQUAL(ops->alloc_buf(NULL, 0, NULL), -EOPNOTSUPP);

	ret = ops->open(NULL, &dev);
	CU_ASSERT(ret == 0 || ret == -ENODEV);
	if (ret == 0) {
		dev->ops = ops;
		CU_ASSERT_EQUAL(ops->query(dev, &info), 0);
		CU_ASSERT(info.name[0] != '\0');
		CU_ASSERT_EQUAL(ops->close(dev), 0);
	}
	{
		struct qps_dev_attr attr = { .dev = "no-such-rdma-device" };

		CU_ASSERT_EQUAL(ops->open(&attr, &dev), -ENODEV);
	}
}

/* The specs after the attr, walked as a consumer does: by their size.
 * Specs sit at 4-byte offsets, so the 8-byte aligned union struct
 * ibv_flow_spec is never used to reach them; each type is 4-aligned. */
struct t_specs {
	int n;
	const struct ibv_flow_spec_eth *eth;
	const struct ibv_flow_spec_ipv4 *ipv4;
	const struct ibv_flow_spec_tcp_udp *udp;
	uint32_t types[8];
};

struct t_spec_hdr {
	enum ibv_flow_spec_type type;
	uint16_t size;
};

static void walk_specs(const struct ibv_flow_attr *attr, struct t_specs *s)
{
	const uint8_t *p = (const uint8_t *)(attr + 1);
	size_t off = sizeof(*attr);
	struct t_spec_hdr h;
	int i;

	memset(s, 0, sizeof(*s));
	for (i = 0; i < attr->num_of_specs && i < 8; i++) {
		memcpy(&h, p, sizeof(h));
		CU_ASSERT_FATAL(h.size >= sizeof(h));
		CU_ASSERT_EQUAL(off % 4, 0);
		s->types[i] = h.type;
		switch (h.type) {
		case IBV_FLOW_SPEC_ETH:
			CU_ASSERT_EQUAL(h.size,
					sizeof(struct ibv_flow_spec_eth));
			s->eth = (const void *)p;
			break;
		case IBV_FLOW_SPEC_IPV4:
			CU_ASSERT_EQUAL(h.size,
					sizeof(struct ibv_flow_spec_ipv4));
			s->ipv4 = (const void *)p;
			break;
		case IBV_FLOW_SPEC_UDP:
			CU_ASSERT_EQUAL(h.size,
					sizeof(struct ibv_flow_spec_tcp_udp));
			s->udp = (const void *)p;
			break;
		default:
			CU_FAIL("unexpected spec type");
		}
		p += h.size;
		off += h.size;
		s->n++;
	}
	CU_ASSERT_EQUAL(off, attr->size);
	CU_ASSERT(off <= QPS_FLOW_ATTR_MAX);
}

static const uint8_t zero6[6];
static const uint8_t ones6[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

static void test_flow_attr_eth_only(void)
{
	alignas(struct ibv_flow_attr) uint8_t buf[QPS_FLOW_ATTR_MAX];
	struct qps_flow_match m = {
		.dst_mac = { 0x01, 0x00, 0x5e, 0x01, 0x02, 0x03 },
		.match_mac = true,
		.priority = 3,
		.type = IBV_FLOW_ATTR_NORMAL,
	};
	struct ibv_flow_attr *attr;
	struct t_specs s;

	memset(buf, 0xcc, sizeof(buf));
	attr = qps_flow_attr_build(buf, &m);
	CU_ASSERT_PTR_EQUAL(attr, (void *)buf);
	CU_ASSERT_EQUAL(attr->comp_mask, 0);
	CU_ASSERT_EQUAL(attr->flags, 0);
	CU_ASSERT_EQUAL(attr->type, IBV_FLOW_ATTR_NORMAL);
	CU_ASSERT_EQUAL(attr->priority, 3);
	CU_ASSERT_EQUAL(attr->port, 1);
	CU_ASSERT_EQUAL(attr->num_of_specs, 1);
	CU_ASSERT_EQUAL(attr->size, sizeof(struct ibv_flow_attr) +
			sizeof(struct ibv_flow_spec_eth));
	walk_specs(attr, &s);
	CU_ASSERT_EQUAL(s.n, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s.eth);
	CU_ASSERT(!memcmp(s.eth->val.dst_mac, m.dst_mac, 6));
	CU_ASSERT(!memcmp(s.eth->mask.dst_mac, ones6, 6));
	CU_ASSERT(!memcmp(s.eth->mask.src_mac, zero6, 6));
	CU_ASSERT_EQUAL(s.eth->mask.ether_type, 0);
	CU_ASSERT_EQUAL(s.eth->mask.vlan_tag, 0);

	/* No MAC match: the ETH spec stays, fully wildcarded. */
	m.match_mac = false;
	m.type = IBV_FLOW_ATTR_MC_DEFAULT;
	attr = qps_flow_attr_build(buf, &m);
	walk_specs(attr, &s);
	CU_ASSERT_EQUAL(attr->type, IBV_FLOW_ATTR_MC_DEFAULT);
	CU_ASSERT_EQUAL(s.n, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s.eth);
	CU_ASSERT(!memcmp(s.eth->mask.dst_mac, zero6, 6));
	CU_ASSERT(!memcmp(s.eth->val.dst_mac, zero6, 6));
}

static void test_flow_attr_ip(void)
{
	alignas(struct ibv_flow_attr) uint8_t buf[QPS_FLOW_ATTR_MAX];
	struct qps_flow_match m = {
		.dst_ip = htonl(0xef010203),
		.type = IBV_FLOW_ATTR_NORMAL,
	};
	struct ibv_flow_attr *attr;
	struct t_specs s;

	attr = qps_flow_attr_build(buf, &m);
	walk_specs(attr, &s);
	CU_ASSERT_EQUAL(attr->num_of_specs, 2);
	CU_ASSERT_EQUAL(s.types[0], IBV_FLOW_SPEC_ETH);
	CU_ASSERT_EQUAL(s.types[1], IBV_FLOW_SPEC_IPV4);
	CU_ASSERT_PTR_NULL(s.udp);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s.ipv4);
	CU_ASSERT_EQUAL(s.ipv4->val.dst_ip, m.dst_ip);
	CU_ASSERT_EQUAL(s.ipv4->mask.dst_ip, 0xffffffffu);
	CU_ASSERT_EQUAL(s.ipv4->val.src_ip, 0);
	CU_ASSERT_EQUAL(s.ipv4->mask.src_ip, 0);
	CU_ASSERT_EQUAL(attr->size, sizeof(struct ibv_flow_attr) +
			sizeof(struct ibv_flow_spec_eth) +
			sizeof(struct ibv_flow_spec_ipv4));

	m.src_ip = htonl(0xc6120001);
	attr = qps_flow_attr_build(buf, &m);
	walk_specs(attr, &s);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s.ipv4);
	CU_ASSERT_EQUAL(s.ipv4->val.src_ip, m.src_ip);
	CU_ASSERT_EQUAL(s.ipv4->mask.src_ip, 0xffffffffu);
}

static void test_flow_attr_udp(void)
{
	alignas(struct ibv_flow_attr) uint8_t buf[QPS_FLOW_ATTR_MAX];
	struct qps_flow_match m = {
		.dst_mac = { 0x01, 0x00, 0x5e, 0x01, 0x02, 0x03 },
		.match_mac = true,
		.dst_ip = htonl(0xef010203),
		.dst_port = htons(5001),
		.priority = 1,
		.type = IBV_FLOW_ATTR_NORMAL,
	};
	struct ibv_flow_attr *attr;
	struct t_specs s;

	attr = qps_flow_attr_build(buf, &m);
	walk_specs(attr, &s);
	CU_ASSERT_EQUAL(attr->num_of_specs, 3);
	CU_ASSERT_EQUAL(s.types[0], IBV_FLOW_SPEC_ETH);
	CU_ASSERT_EQUAL(s.types[1], IBV_FLOW_SPEC_IPV4);
	CU_ASSERT_EQUAL(s.types[2], IBV_FLOW_SPEC_UDP);
	CU_ASSERT_EQUAL(attr->size, sizeof(struct ibv_flow_attr) +
			sizeof(struct ibv_flow_spec_eth) +
			sizeof(struct ibv_flow_spec_ipv4) +
			sizeof(struct ibv_flow_spec_tcp_udp));
	CU_ASSERT_PTR_NOT_NULL_FATAL(s.udp);
	CU_ASSERT_EQUAL(s.udp->val.dst_port, m.dst_port);
	CU_ASSERT_EQUAL(s.udp->mask.dst_port, 0xffff);
	CU_ASSERT_EQUAL(s.udp->val.src_port, 0);
	CU_ASSERT_EQUAL(s.udp->mask.src_port, 0);

	/* A port alone still brings an (empty) IPv4 spec: UDP over IPv4. */
	memset(&m, 0, sizeof(m));
	m.src_port = htons(40000);
	attr = qps_flow_attr_build(buf, &m);
	walk_specs(attr, &s);
	CU_ASSERT_EQUAL(attr->num_of_specs, 3);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s.ipv4);
	CU_ASSERT_EQUAL(s.ipv4->mask.dst_ip, 0);
	CU_ASSERT_EQUAL(s.ipv4->mask.src_ip, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s.udp);
	CU_ASSERT_EQUAL(s.udp->mask.src_port, 0xffff);
	CU_ASSERT_EQUAL(s.udp->mask.dst_port, 0);
	CU_ASSERT_EQUAL(s.udp->val.src_port, m.src_port);
}

/* The shared parser of software providers, on the core's own layout. */
static void test_flow_parse_valid(void)
{
	alignas(struct ibv_flow_attr) uint8_t buf[QPS_FLOW_ATTR_MAX];
	struct qps_flow_match m = {
		.dst_mac = { 0x01, 0x00, 0x5e, 0x01, 0x02, 0x03 },
		.match_mac = true,
		.dst_ip = htonl(0xef010203),
		.dst_port = htons(5001),
		.priority = 9,
		.type = IBV_FLOW_ATTR_NORMAL,
	};
	struct qps_flow_rule r;

	memset(&r, 0xcc, sizeof(r));
	CU_ASSERT_EQUAL_FATAL(qps_flow_parse(qps_flow_attr_build(buf, &m),
					     0xfff, &r), 0);
	CU_ASSERT_EQUAL(r.tier, QPS_FLOW_TIER_NORMAL);
	CU_ASSERT_EQUAL(r.prio, 9);
	CU_ASSERT_EQUAL(r.seq, 0);
	CU_ASSERT(!memcmp(r.mac, m.dst_mac, 6));
	CU_ASSERT(!memcmp(r.mac_mask, ones6, 6));
	CU_ASSERT(r.need_ip);
	CU_ASSERT(r.need_udp);
	CU_ASSERT_EQUAL(r.dip, m.dst_ip);
	CU_ASSERT_EQUAL(r.dip_mask, 0xffffffffu);
	CU_ASSERT_EQUAL(r.sip_mask, 0);
	CU_ASSERT_EQUAL(r.dport, m.dst_port);
	CU_ASSERT_EQUAL(r.dport_mask, 0xffff);
	CU_ASSERT_EQUAL(r.sport_mask, 0);
	CU_ASSERT_EQUAL(r.vlan_mask, 0);
	CU_ASSERT_EQUAL(r.ether_type_mask, 0);

	/* ETH only, wildcarded: no L3 requirement; the default tiers. */
	memset(&m, 0, sizeof(m));
	m.type = IBV_FLOW_ATTR_MC_DEFAULT;
	CU_ASSERT_EQUAL_FATAL(qps_flow_parse(qps_flow_attr_build(buf, &m),
					     0xfff, &r), 0);
	CU_ASSERT_EQUAL(r.tier, QPS_FLOW_TIER_MC_DEFAULT);
	CU_ASSERT(!memcmp(r.mac_mask, zero6, 6));
	CU_ASSERT(!r.need_ip);
	CU_ASSERT(!r.need_udp);
	m.type = IBV_FLOW_ATTR_ALL_DEFAULT;
	CU_ASSERT_EQUAL(qps_flow_parse(qps_flow_attr_build(buf, &m), 0xfff,
				       &r), 0);
	CU_ASSERT_EQUAL(r.tier, QPS_FLOW_TIER_ALL_DEFAULT);
}

/* A valid ETH+IPv4+UDP rule in @buf, with its ETH spec at @eth. */
static struct ibv_flow_attr *t_rule3(uint8_t *buf,
				     struct ibv_flow_spec_eth **eth)
{
	struct qps_flow_match m = {
		.dst_ip = htonl(0x0a000001),
		.dst_port = htons(7000),
		.type = IBV_FLOW_ATTR_NORMAL,
	};
	struct ibv_flow_attr *a = qps_flow_attr_build(buf, &m);

	*eth = (void *)(buf + sizeof(*a));
	return a;
}

static void test_flow_parse_errors(void)
{
	alignas(struct ibv_flow_attr) uint8_t buf[QPS_FLOW_ATTR_MAX];
	struct ibv_flow_spec_eth *eth;
	struct ibv_flow_spec_ipv4 *ip;
	struct ibv_flow_attr *a;
	struct qps_flow_rule r;

	a = t_rule3(buf, &eth);
	a->comp_mask = 1;
	CU_ASSERT_EQUAL(qps_flow_parse(a, 0xfff, &r), -EINVAL);
	a = t_rule3(buf, &eth);
	a->size = sizeof(*a) - 1;
	CU_ASSERT_EQUAL(qps_flow_parse(a, 0xfff, &r), -EINVAL);
	a = t_rule3(buf, &eth);
	a->size = sizeof(*a) + 20;	/* specs run past the end */
	CU_ASSERT_EQUAL(qps_flow_parse(a, 0xfff, &r), -EINVAL);
	a = t_rule3(buf, &eth);
	a->priority = 0x1000;
	CU_ASSERT_EQUAL(qps_flow_parse(a, 0xfff, &r), -EINVAL);
	a->priority = 0x10;
	CU_ASSERT_EQUAL(qps_flow_parse(a, 0x0f, &r), -EINVAL);
	a = t_rule3(buf, &eth);
	a->flags = IBV_FLOW_ATTR_FLAGS_DONT_TRAP;
	CU_ASSERT_EQUAL(qps_flow_parse(a, 0xfff, &r), -EOPNOTSUPP);
	a = t_rule3(buf, &eth);
	a->type = IBV_FLOW_ATTR_SNIFFER;
	CU_ASSERT_EQUAL(qps_flow_parse(a, 0xfff, &r), -EOPNOTSUPP);
	a = t_rule3(buf, &eth);
	eth->type = IBV_FLOW_SPEC_IPV6;
	CU_ASSERT_EQUAL(qps_flow_parse(a, 0xfff, &r), -EOPNOTSUPP);
	a = t_rule3(buf, &eth);
	eth->size = 12;
	CU_ASSERT_EQUAL(qps_flow_parse(a, 0xfff, &r), -EINVAL);
	/* IPv4 twice. */
	a = t_rule3(buf, &eth);
	ip = (void *)((uint8_t *)eth + sizeof(*eth));
	ip[1].type = IBV_FLOW_SPEC_IPV4;
	ip[1].size = sizeof(*ip);
	a->size = sizeof(*a) + sizeof(*eth) + 2 * sizeof(*ip);
	CU_ASSERT_EQUAL(qps_flow_parse(a, 0xfff, &r), -EINVAL);
	/* Provider matters, not the parser's: kept raw. */
	a = t_rule3(buf, &eth);
	eth->mask.vlan_tag = htons(0x0fff);
	eth->val.ether_type = htons(0x86dd);
	eth->mask.ether_type = 0xffff;
	CU_ASSERT_EQUAL_FATAL(qps_flow_parse(a, 0xfff, &r), 0);
	CU_ASSERT_EQUAL(r.vlan_mask, htons(0x0fff));
	CU_ASSERT_EQUAL(r.ether_type, htons(0x86dd));
}

static CU_TestInfo provider_tests[] = {
	{ "find emu", test_find_emu },
	{ "find errors", test_find_errors },
	{ "fill: all NULL -> stubs", test_fill_all_null },
	{ "fill: ops beyond size -> stubs", test_fill_short_table },
	{ "fill: longer table", test_fill_long_table },
	{ "fill: invalid tables", test_fill_invalid },
	{ "verbs open without device", test_verbs_open },
	{ "flow attr: eth", test_flow_attr_eth_only },
	{ "flow attr: ipv4", test_flow_attr_ip },
	{ "flow attr: udp", test_flow_attr_udp },
	{ "flow parse: eth+ipv4+udp", test_flow_parse_valid },
	{ "flow parse: errors", test_flow_parse_errors },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	return t_run("provider", provider_tests);
}
