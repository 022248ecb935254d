// SPDX-License-Identifier: MIT
/*
 * Multicast memberships, every form a program may use: ip_mreq, ip_mreqn
 * and ip_mreq_source (IP_ADD/DROP_MEMBERSHIP, IP_ADD/DROP_SOURCE_MEMBERSHIP,
 * IP_BLOCK/UNBLOCK_SOURCE), the protocol-independent group_req,
 * group_source_req and group_filter (MCAST_*), IP_MSFILTER, and glibc's
 * setsourcefilter() family, which calls setsockopt inside libc where we
 * cannot see it.
 *
 * They are the endpoint's alone: on packet the core's joins make the
 * kernel send IGMP (common/igmp.c); on emu a kernel join would send IGMP
 * on a real link. Each request becomes an operation on one membership's
 * source filter (RFC 3678: INCLUDE sources, or EXCLUDE sources), read and
 * written through qps_getfilter/qps_setfilter once bound, or in s->pending
 * and s->pblock before (the core needs a port), and is checked the way the
 * kernel checks it, errno included.
 */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "preload.h"

/* The request, in the core's terms. */
enum pl_mc_op {
	PL_MC_JOIN,		/* any source */
	PL_MC_LEAVE,
	PL_MC_JOIN_SRC,
	PL_MC_LEAVE_SRC,
	PL_MC_BLOCK,
	PL_MC_UNBLOCK,
};

struct pl_filter {
	uint32_t fmode;		/* QPS_MCAST_* */
	uint32_t n;
	struct in_addr src[QPS_MSFILTER_MAX];
};

/* A context is one interface: its index, QPS_IFINDEX to the core; any
 * other index is foreign (-1: the core's -ENODEV). */
static int ifindex_of(int ifindex)
{
	if (ifindex == 0)
		return 0;
	return ifindex == pl_ctx_info.ifindex ? QPS_IFINDEX : -1;
}

/* ip_mreq, ip_mreqn or ip_mreq_source to the core's form. */
static int mreq_of(int opt, const void *val, socklen_t len,
		   struct qps_mreq *m)
{
	memset(m, 0, sizeof(*m));
	if (!val)
		return -EFAULT;
	if (opt == IP_ADD_SOURCE_MEMBERSHIP ||
	    opt == IP_DROP_SOURCE_MEMBERSHIP || opt == IP_BLOCK_SOURCE ||
	    opt == IP_UNBLOCK_SOURCE) {
		struct ip_mreq_source r;

		if (len != sizeof(r))
			return -EINVAL;
		memcpy(&r, val, sizeof(r));
		m->group = r.imr_multiaddr;
		m->iface = r.imr_interface;
		m->source = r.imr_sourceaddr;
		return 0;
	}
	if (len >= sizeof(struct ip_mreqn)) {
		struct ip_mreqn r;

		memcpy(&r, val, sizeof(r));
		m->group = r.imr_multiaddr;
		m->iface = r.imr_address;
		m->ifindex = ifindex_of(r.imr_ifindex);
		return 0;
	}
	if (len < sizeof(struct ip_mreq))
		return -EINVAL;
	{
		struct ip_mreq r;

		memcpy(&r, val, sizeof(r));
		m->group = r.imr_multiaddr;
		m->iface = r.imr_interface;
	}
	return 0;
}

/* group_req (MCAST_JOIN/LEAVE_GROUP), group_source_req (the others). */
static int greq_of(int opt, const void *val, socklen_t len,
		   struct qps_mreq *m)
{
	const struct sockaddr_in *g, *src;

	memset(m, 0, sizeof(*m));
	if (!val)
		return -EFAULT;
	if (opt == MCAST_JOIN_GROUP || opt == MCAST_LEAVE_GROUP) {
		struct group_req r;

		if (len < sizeof(r))
			return -EINVAL;
		memcpy(&r, val, sizeof(r));
		g = (const struct sockaddr_in *)&r.gr_group;
		if (g->sin_family != AF_INET)
			return -EINVAL;
		m->group = g->sin_addr;
		m->ifindex = ifindex_of((int)r.gr_interface);
		return 0;
	}
	{
		struct group_source_req r;

		if (len != sizeof(r))
			return -EINVAL;
		memcpy(&r, val, sizeof(r));
		g = (const struct sockaddr_in *)&r.gsr_group;
		src = (const struct sockaddr_in *)&r.gsr_source;
		if (g->sin_family != AF_INET || src->sin_family != AF_INET)
			return -EADDRNOTAVAIL;
		m->group = g->sin_addr;
		m->source = src->sin_addr;
		m->ifindex = ifindex_of((int)r.gsr_interface);
	}
	return 0;
}

static int op_of(int opt)
{
	switch (opt) {
	case IP_ADD_MEMBERSHIP:
	case MCAST_JOIN_GROUP:
		return PL_MC_JOIN;
	case IP_DROP_MEMBERSHIP:
	case MCAST_LEAVE_GROUP:
		return PL_MC_LEAVE;
	case IP_ADD_SOURCE_MEMBERSHIP:
	case MCAST_JOIN_SOURCE_GROUP:
		return PL_MC_JOIN_SRC;
	case IP_DROP_SOURCE_MEMBERSHIP:
	case MCAST_LEAVE_SOURCE_GROUP:
		return PL_MC_LEAVE_SRC;
	case IP_BLOCK_SOURCE:
	case MCAST_BLOCK_SOURCE:
		return PL_MC_BLOCK;
	default:
		return PL_MC_UNBLOCK;
	}
}

static bool is_greq(int opt)
{
	return opt == MCAST_JOIN_GROUP || opt == MCAST_LEAVE_GROUP ||
	       opt == MCAST_JOIN_SOURCE_GROUP ||
	       opt == MCAST_LEAVE_SOURCE_GROUP || opt == MCAST_BLOCK_SOURCE ||
	       opt == MCAST_UNBLOCK_SOURCE;
}

static int request_of(int opt, const void *val, socklen_t len,
		      struct qps_mreq *m)
{
	int ret = is_greq(opt) ? greq_of(opt, val, len, m) :
		  mreq_of(opt, val, len, m);

	if (ret < 0)
		return ret;
	/* The interface given by the application's address for it. */
	if (m->iface.s_addr == pl_ctx_info.addr.s_addr)
		m->iface.s_addr = INADDR_ANY;
	return 0;
}

static bool unbound(struct pl_sock *s)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);

	return qps_getsockname(s->ep, (struct sockaddr *)&a, &l) == 0 &&
	       a.sin_port == 0;
}

/* Before bind: @m's group's filter from the memberships kept. */
static int pending_get(struct pl_sock *s, const struct qps_mreq *m,
		       struct pl_filter *f)
{
	bool member = false;
	int i;

	f->fmode = QPS_MCAST_INCLUDE;
	f->n = 0;
	for (i = 0; i < s->npending; i++) {
		if (s->pending[i].group.s_addr != m->group.s_addr)
			continue;
		member = true;
		if (s->pending[i].source.s_addr == INADDR_ANY)
			f->fmode = QPS_MCAST_EXCLUDE;
		else
			f->src[f->n++] = s->pending[i].source;
	}
	for (i = 0; i < s->npblock; i++)
		if (s->pblock[i].group.s_addr == m->group.s_addr)
			f->src[f->n++] = s->pblock[i].source;
	return member ? 0 : -EADDRNOTAVAIL;
}

static int pending_count(const struct qps_mreq *a, int n, uint32_t group)
{
	int i, c = 0;

	for (i = 0; i < n; i++)
		c += a[i].group.s_addr == group;
	return c;
}

static int pending_drop(struct qps_mreq *a, int n, uint32_t group)
{
	int i, j;

	for (i = 0, j = 0; i < n; i++)
		if (a[i].group.s_addr != group)
			a[j++] = a[i];
	return j;
}

/* Before bind: @m's group gets filter @f (INCLUDE nothing: no membership). */
static int pending_set(struct pl_sock *s, const struct qps_mreq *m,
		       const struct pl_filter *f)
{
	uint32_t g = m->group.s_addr, i;
	bool excl = f->fmode == QPS_MCAST_EXCLUDE;
	struct qps_mreq e = *m;
	int members = excl ? 1 : (int)f->n, blocks = excl ? (int)f->n : 0;

	if (s->npending - pending_count(s->pending, s->npending, g) + members >
	    PL_PENDING_JOINS ||
	    s->npblock - pending_count(s->pblock, s->npblock, g) + blocks >
	    PL_PENDING_JOINS)
		return -ENOBUFS;
	s->npending = pending_drop(s->pending, s->npending, g);
	s->npblock = pending_drop(s->pblock, s->npblock, g);
	e.source.s_addr = INADDR_ANY;
	if (excl)
		s->pending[s->npending++] = e;
	for (i = 0; i < f->n; i++) {
		e.source = f->src[i];
		if (excl)
			s->pblock[s->npblock++] = e;
		else
			s->pending[s->npending++] = e;
	}
	return 0;
}

/* The sources are copied through @b: @f declares one of them. */
union pl_msf {
	struct qps_msfilter f;
	char b[QPS_MSFILTER_SIZE(QPS_MSFILTER_MAX)];
};

#define PL_MSF_SLIST offsetof(struct qps_msfilter, slist)

static int filter_get(struct pl_sock *s, const struct qps_mreq *m,
		      struct pl_filter *f)
{
	union pl_msf u;
	socklen_t len = sizeof(u);
	int ret;

	if (unbound(s))
		return pending_get(s, m, f);
	memset(&u.f, 0, sizeof(u.f));
	u.f.group = m->group;
	u.f.iface = m->iface;
	u.f.ifindex = m->ifindex;
	u.f.numsrc = QPS_MSFILTER_MAX;
	ret = qps_getfilter(s->ep, &u.f, &len);
	if (ret < 0)
		return ret;
	f->fmode = u.f.fmode;
	f->n = u.f.numsrc < QPS_MSFILTER_MAX ? u.f.numsrc : QPS_MSFILTER_MAX;
	memcpy(f->src, u.b + PL_MSF_SLIST, f->n * sizeof(f->src[0]));
	return 0;
}

static int filter_set(struct pl_sock *s, const struct qps_mreq *m,
		      const struct pl_filter *f)
{
	union pl_msf u;

	if (unbound(s))
		return pending_set(s, m, f);
	memset(&u.f, 0, sizeof(u.f));
	u.f.group = m->group;
	u.f.iface = m->iface;
	u.f.ifindex = m->ifindex;
	u.f.fmode = f->fmode;
	u.f.numsrc = f->n;
	memcpy(u.b + PL_MSF_SLIST, f->src, f->n * sizeof(f->src[0]));
	return qps_setfilter(s->ep, &u.f,
			     (socklen_t)QPS_MSFILTER_SIZE(f->n));
}

static int src_find(const struct pl_filter *f, struct in_addr a)
{
	uint32_t i;

	for (i = 0; i < f->n; i++)
		if (f->src[i].s_addr == a.s_addr)
			return (int)i;
	return -1;
}

/* What the kernel checks before it looks at the socket's memberships. */
static int request_check(const struct qps_mreq *m)
{
	if (!IN_MULTICAST(ntohl(m->group.s_addr)))
		return -EINVAL;
	if (m->iface.s_addr != INADDR_ANY || m->ifindex < 0)
		return -ENODEV;
	return 0;
}

/* One request on the membership of @m->group, as ip_mc_join_group and
 * ip_mc_source decide it (net/ipv4/igmp.c). */
static int membership(struct pl_sock *s, int op, const struct qps_mreq *m)
{
	struct pl_filter f;
	int ret = request_check(m), i;
	bool member;

	if (ret < 0)
		return ret;
	ret = filter_get(s, m, &f);
	if (ret < 0 && ret != -EADDRNOTAVAIL)
		return ret;
	member = ret == 0;
	switch (op) {
	case PL_MC_JOIN:
		/* Whatever its mode: the group is joined. */
		if (member)
			return -EADDRINUSE;
		f.fmode = QPS_MCAST_EXCLUDE;
		f.n = 0;
		if (unbound(s))
			return filter_set(s, m, &f);
		return qps_join(s->ep, m, sizeof(*m));
	case PL_MC_LEAVE:
		if (!member)
			return -EADDRNOTAVAIL;
		if (unbound(s)) {
			f.fmode = QPS_MCAST_INCLUDE;
			f.n = 0;
			return filter_set(s, m, &f);
		}
		{
			struct qps_mreq all = *m;

			all.source.s_addr = INADDR_ANY;
			return qps_leave(s->ep, &all, sizeof(all));
		}
	default:
		break;
	}
	if (op == PL_MC_JOIN_SRC && !member) {
		f.fmode = QPS_MCAST_INCLUDE;
		f.n = 0;
	} else if (!member) {
		return -EINVAL;		/* the rest need a prior join */
	}
	/* An empty filter takes the mode asked; a list keeps its own. */
	if (f.n == 0)
		f.fmode = op == PL_MC_BLOCK || op == PL_MC_UNBLOCK ?
			  QPS_MCAST_EXCLUDE : QPS_MCAST_INCLUDE;
	if (f.fmode != (op == PL_MC_BLOCK || op == PL_MC_UNBLOCK ?
			QPS_MCAST_EXCLUDE : QPS_MCAST_INCLUDE))
		return -EINVAL;
	i = src_find(&f, m->source);
	if (op == PL_MC_LEAVE_SRC || op == PL_MC_UNBLOCK) {
		if (i < 0)
			return -EADDRNOTAVAIL;
		f.src[i] = f.src[--f.n];
		return filter_set(s, m, &f);
	}
	if (i >= 0)
		return -EADDRNOTAVAIL;
	if (f.n == QPS_MSFILTER_MAX)
		return -ENOBUFS;
	f.src[f.n++] = m->source;
	if (op == PL_MC_JOIN_SRC && !member && !unbound(s))
		return qps_join(s->ep, m, sizeof(*m));
	return filter_set(s, m, &f);
}

void pl_joins_apply(struct pl_sock *s)
{
	struct pl_filter f;
	int i, ret;

	for (i = 0; i < s->npending; i++) {
		ret = qps_join(s->ep, &s->pending[i], sizeof(s->pending[i]));
		if (ret < 0)
			pl_log("fd %d: membership asked before bind: %s", s->fd,
			       strerrordesc_np(-ret));
	}
	/* Then the sources each any-source membership blocks, per group. */
	while (s->npblock) {
		struct qps_mreq m = s->pblock[0];

		f.fmode = QPS_MCAST_EXCLUDE;
		f.n = 0;
		for (i = 0; i < s->npblock; i++)
			if (s->pblock[i].group.s_addr == m.group.s_addr)
				f.src[f.n++] = s->pblock[i].source;
		s->npblock = pending_drop(s->pblock, s->npblock,
					  m.group.s_addr);
		ret = filter_set(s, &m, &f);
		if (ret < 0)
			pl_log("fd %d: sources blocked before bind: %s", s->fd,
			       strerrordesc_np(-ret));
	}
	s->npending = 0;
}

/* The kernel binds an unbound socket to port 0 at its first send or
 * connect, and memberships it holds then take effect on that port (a
 * sockperf multicast client joins, never binds, and gets its replies
 * sent to the group at its ephemeral port). The same here: bound now,
 * so the joins are made before the datagram leaves. */
void pl_joins_autobind(struct pl_sock *s)
{
	struct sockaddr_in any = { .sin_family = AF_INET };
	int ret;

	if (!unbound(s)) {
		pl_joins_apply(s);
		return;
	}
	ret = qps_bind(s->ep, (struct sockaddr *)&any, sizeof(any));
	if (ret < 0) {
		pl_log("fd %d: memberships asked before bind: no port (%s)",
		       s->fd, strerrordesc_np(-ret));
		s->npending = 0;
		s->npblock = 0;
		return;
	}
	pl_joins_apply(s);
}

/* A socket not yet decided decides at its first join (pl_policy.c); one
 * that goes to the kernel joins there. */
static bool join_falls_back(struct pl_sock *s, int fd, int name,
			    const void *val, socklen_t len)
{
	char why[PL_WHY_MAX];
	struct qps_mreq m;

	/* Malformed: the endpoint gives the kernel's answer. */
	if (request_of(name, val, len, &m) < 0 ||
	    !IN_MULTICAST(ntohl(m.group.s_addr)) ||
	    !pl_policy_join(s, m.group, why, sizeof(why)))
		return false;
	pl_sock_fallback(fd, s, why);
	return true;
}

/* group_filter (MCAST_MSFILTER) or ip_msfilter (IP_MSFILTER) to @m, @f. */
static int msfilter_of(int name, const void *val, socklen_t len,
		       struct qps_mreq *m, struct pl_filter *f)
{
	uint32_t n;

	memset(m, 0, sizeof(*m));
	if (!val)
		return -EFAULT;
	if (name == MCAST_MSFILTER) {
		struct group_filter gf;
		const struct sockaddr_in *a;

		if (len < GROUP_FILTER_SIZE(0))
			return -EINVAL;
		memcpy(&gf, val, GROUP_FILTER_SIZE(0));
		n = gf.gf_numsrc;
		if (n > QPS_MSFILTER_MAX)
			return -ENOBUFS;
		if (GROUP_FILTER_SIZE(n) > len)
			return -EINVAL;
		a = (const struct sockaddr_in *)&gf.gf_group;
		if (a->sin_family != AF_INET)
			return -EADDRNOTAVAIL;
		m->group = a->sin_addr;
		m->ifindex = ifindex_of((int)gf.gf_interface);
		f->fmode = gf.gf_fmode;
		for (uint32_t i = 0; i < n; i++) {
			struct sockaddr_storage ss;

			memcpy(&ss, (const char *)val + GROUP_FILTER_SIZE(i),
			       sizeof(ss));
			a = (const struct sockaddr_in *)&ss;
			if (a->sin_family != AF_INET)
				return -EADDRNOTAVAIL;
			f->src[i] = a->sin_addr;
		}
	} else {
		struct ip_msfilter mf;

		if (len < IP_MSFILTER_SIZE(0))
			return -EINVAL;
		memcpy(&mf, val, IP_MSFILTER_SIZE(0));
		n = mf.imsf_numsrc;
		if (n > QPS_MSFILTER_MAX)
			return -ENOBUFS;
		if (IP_MSFILTER_SIZE(n) > len)
			return -EINVAL;
		m->group = mf.imsf_multiaddr;
		m->iface = mf.imsf_interface;
		if (m->iface.s_addr == pl_ctx_info.addr.s_addr)
			m->iface.s_addr = INADDR_ANY;
		f->fmode = mf.imsf_fmode;
		memcpy(f->src, (const char *)val + IP_MSFILTER_SIZE(0),
		       n * sizeof(f->src[0]));
	}
	f->n = n;
	return 0;
}

static int msfilter_set(struct pl_sock *s, int name, const void *val,
			socklen_t len)
{
	struct pl_filter f, cur;
	struct qps_mreq m;
	int ret = msfilter_of(name, val, len, &m, &f);

	if (ret < 0)
		return ret;
	if (!IN_MULTICAST(ntohl(m.group.s_addr)) ||
	    (f.fmode != QPS_MCAST_INCLUDE && f.fmode != QPS_MCAST_EXCLUDE))
		return -EINVAL;
	ret = request_check(&m);
	if (ret < 0)
		return ret;
	ret = filter_get(s, &m, &cur);
	if (ret == -EADDRNOTAVAIL && (f.fmode != QPS_MCAST_INCLUDE || f.n))
		return -EINVAL;	/* a filter needs a prior join */
	if (ret < 0)
		return ret;
	return filter_set(s, &m, &f);
}

int pl_mcast_setopt(struct pl_sock *s, int fd, int name, const void *val,
		    socklen_t len)
{
	struct qps_mreq m;
	int ret;

	if (name == MCAST_MSFILTER || name == IP_MSFILTER)
		return msfilter_set(s, name, val, len);
	if (s->fresh && (name == IP_ADD_MEMBERSHIP ||
			 name == IP_ADD_SOURCE_MEMBERSHIP ||
			 name == MCAST_JOIN_GROUP ||
			 name == MCAST_JOIN_SOURCE_GROUP) &&
	    join_falls_back(s, fd, name, val, len))
		return pl_real.setsockopt(fd, IPPROTO_IP, name, val, len) < 0 ?
		       -errno : 0;
	ret = request_of(name, val, len, &m);
	if (ret < 0)
		return ret;
	return membership(s, op_of(name), &m);
}

/* getsockopt MCAST_MSFILTER, IP_MSFILTER: the endpoint's filter, laid
 * out and truncated as the kernel does (ip_mc_gsfget, ip_mc_msfget). */
int pl_mcast_getopt(struct pl_sock *s, int name, void *val, socklen_t *len)
{
	struct pl_filter f;
	struct qps_mreq m;
	uint32_t room;
	int ret;

	memset(&m, 0, sizeof(m));
	if (!val || !len)
		return -EFAULT;
	if (name == MCAST_MSFILTER) {
		struct group_filter gf;
		struct sockaddr_in *a = (struct sockaddr_in *)&gf.gf_group;

		if (*len < GROUP_FILTER_SIZE(0))
			return -EINVAL;
		memcpy(&gf, val, GROUP_FILTER_SIZE(0));
		if (a->sin_family != AF_INET ||
		    !IN_MULTICAST(ntohl(a->sin_addr.s_addr)))
			return -EINVAL;
		/* The membership's own interface: no 0 for any. */
		if ((int)gf.gf_interface != pl_ctx_info.ifindex)
			return -EADDRNOTAVAIL;
		m.group = a->sin_addr;
		ret = filter_get(s, &m, &f);
		if (ret < 0)
			return ret;
		room = (*len - GROUP_FILTER_SIZE(0)) /
		       sizeof(struct sockaddr_storage);
		if (room > gf.gf_numsrc)
			room = gf.gf_numsrc;
		if (room > f.n)
			room = f.n;
		gf.gf_fmode = f.fmode;
		gf.gf_numsrc = f.n;
		memcpy(val, &gf, GROUP_FILTER_SIZE(0));
		for (uint32_t i = 0; i < room; i++) {
			struct sockaddr_storage ss;
			struct sockaddr_in *sa = (struct sockaddr_in *)&ss;

			memset(&ss, 0, sizeof(ss));
			sa->sin_family = AF_INET;
			sa->sin_addr = f.src[i];
			memcpy((char *)val + GROUP_FILTER_SIZE(i), &ss,
			       sizeof(ss));
		}
		*len = GROUP_FILTER_SIZE(room);
		return 0;
	}
	{
		struct ip_msfilter mf;

		if (*len < IP_MSFILTER_SIZE(0))
			return -EINVAL;
		memcpy(&mf, val, IP_MSFILTER_SIZE(0));
		if (!IN_MULTICAST(ntohl(mf.imsf_multiaddr.s_addr)))
			return -EINVAL;
		m.group = mf.imsf_multiaddr;
		if (mf.imsf_interface.s_addr != INADDR_ANY &&
		    mf.imsf_interface.s_addr != pl_ctx_info.addr.s_addr)
			return -ENODEV;
		ret = filter_get(s, &m, &f);
		if (ret < 0)
			return ret;
		room = (*len - IP_MSFILTER_SIZE(0)) / sizeof(f.src[0]);
		if (room > mf.imsf_numsrc)
			room = mf.imsf_numsrc;
		if (room > f.n)
			room = f.n;
		mf.imsf_fmode = f.fmode;
		mf.imsf_numsrc = f.n;
		memcpy(val, &mf, IP_MSFILTER_SIZE(0));
		memcpy((char *)val + IP_MSFILTER_SIZE(0), f.src,
		       room * sizeof(f.src[0]));
		*len = IP_MSFILTER_SIZE(room);
		return 0;
	}
}

/* glibc's setsourcefilter family sets MCAST_MSFILTER or IP_MSFILTER with
 * an internal setsockopt no preload sees: the same calls, made with ours. */
static int sol_of(const struct sockaddr *group, socklen_t grouplen)
{
	if (grouplen > sizeof(struct sockaddr_storage))
		return -1;
	if (group->sa_family == AF_INET &&
	    grouplen >= sizeof(struct sockaddr_in))
		return SOL_IP;
	if (group->sa_family == AF_INET6 &&
	    grouplen >= sizeof(struct sockaddr_in6))
		return SOL_IPV6;
	return -1;
}

PL_EXPORT int setsourcefilter(int fd, uint32_t ifindex,
			      const struct sockaddr *group, socklen_t grouplen,
			      uint32_t fmode, uint32_t numsrc,
			      const struct sockaddr_storage *slist)
{
	size_t need = GROUP_FILTER_SIZE(numsrc);
	int sol = sol_of(group, grouplen), r;
	struct group_filter *gf;

	if (sol < 0) {
		errno = EINVAL;
		return -1;
	}
	gf = calloc(1, need);
	if (!gf)
		return -1;
	gf->gf_interface = ifindex;
	memcpy(&gf->gf_group, group, grouplen);
	gf->gf_fmode = fmode;
	gf->gf_numsrc = numsrc;
	memcpy((char *)gf + GROUP_FILTER_SIZE(0), slist,
	       numsrc * sizeof(*slist));
	r = setsockopt(fd, sol, MCAST_MSFILTER, gf, (socklen_t)need);
	free(gf);
	return r;
}

PL_EXPORT int getsourcefilter(int fd, uint32_t ifindex,
			      const struct sockaddr *group, socklen_t grouplen,
			      uint32_t *fmode, uint32_t *numsrc,
			      struct sockaddr_storage *slist)
{
	size_t need = GROUP_FILTER_SIZE(*numsrc);
	int sol = sol_of(group, grouplen), r;
	struct group_filter *gf;
	socklen_t len = (socklen_t)need;

	if (sol < 0) {
		errno = EINVAL;
		return -1;
	}
	gf = calloc(1, need);
	if (!gf)
		return -1;
	gf->gf_interface = ifindex;
	memcpy(&gf->gf_group, group, grouplen);
	gf->gf_numsrc = *numsrc;
	r = getsockopt(fd, sol, MCAST_MSFILTER, gf, &len);
	if (r == 0) {
		*fmode = gf->gf_fmode;
		memcpy(slist, (char *)gf + GROUP_FILTER_SIZE(0),
		       (*numsrc < gf->gf_numsrc ? *numsrc : gf->gf_numsrc) *
		       sizeof(*slist));
		*numsrc = gf->gf_numsrc;
	}
	free(gf);
	return r;
}

PL_EXPORT int setipv4sourcefilter(int fd, struct in_addr iface,
				  struct in_addr group, uint32_t fmode,
				  uint32_t numsrc, const struct in_addr *slist)
{
	size_t need = IP_MSFILTER_SIZE(numsrc);
	struct ip_msfilter *mf = calloc(1, need);
	int r;

	if (!mf)
		return -1;
	mf->imsf_multiaddr = group;
	mf->imsf_interface = iface;
	mf->imsf_fmode = fmode;
	mf->imsf_numsrc = numsrc;
	memcpy((char *)mf + IP_MSFILTER_SIZE(0), slist,
	       numsrc * sizeof(*slist));
	r = setsockopt(fd, SOL_IP, IP_MSFILTER, mf, (socklen_t)need);
	free(mf);
	return r;
}

PL_EXPORT int getipv4sourcefilter(int fd, struct in_addr iface,
				  struct in_addr group, uint32_t *fmode,
				  uint32_t *numsrc, struct in_addr *slist)
{
	size_t need = IP_MSFILTER_SIZE(*numsrc);
	struct ip_msfilter *mf = calloc(1, need);
	socklen_t len = (socklen_t)need;
	int r;

	if (!mf)
		return -1;
	mf->imsf_multiaddr = group;
	mf->imsf_interface = iface;
	mf->imsf_numsrc = *numsrc;
	r = getsockopt(fd, SOL_IP, IP_MSFILTER, mf, &len);
	if (r == 0) {
		*fmode = mf->imsf_fmode;
		memcpy(slist, (char *)mf + IP_MSFILTER_SIZE(0),
		       (*numsrc < mf->imsf_numsrc ? *numsrc : mf->imsf_numsrc) *
		       sizeof(*slist));
		*numsrc = mf->imsf_numsrc;
	}
	free(mf);
	return r;
}
