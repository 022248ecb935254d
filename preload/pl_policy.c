// SPDX-License-Identifier: MIT
/*
 * Which sockets stay offloaded (docs/preload.md "What is offloaded").
 * Every UDP socket gets an endpoint at socket(); the decision comes at
 * the first call that gives it an address, while it is still fresh (never
 * bound or connected) and can fall back to its kernel socket: bind,
 * connect, the first send with a destination, or a membership asked
 * before any of those. Afterwards the endpoint holds the port (on packet
 * the kernel socket is bound for it, with a filter that accepts nothing)
 * and handing the socket back to the kernel is no longer possible.
 *
 * Each check returns NULL to keep the socket, or why it goes to the
 * kernel, written into the caller's buffer.
 */
#include <arpa/inet.h>
#include <stdio.h>

#include "preload.h"

static bool is_loopback(struct in_addr a)
{
	return (ntohl(a.s_addr) >> 24) == 127;
}

/* emu's wire is 198.18.0.0/24 inside the 198.18.0.0/15 benchmarking
 * range: anything else cannot be reached through it. */
static bool emu_reaches(struct in_addr a)
{
	return (ntohl(a.s_addr) & 0xfffe0000u) == 0xc6120000u;
}

static const struct sockaddr_in *sin_of(const struct sockaddr *a,
					socklen_t len)
{
	if (!a || len < sizeof(struct sockaddr_in) || a->sa_family != AF_INET)
		return NULL;
	return (const struct sockaddr_in *)a;
}

static bool port_listed(uint16_t port)
{
	return pl_conf.ports[port >> 3] & (1u << (port & 7));
}

static bool group_listed(struct in_addr g)
{
	uint32_t h = ntohl(g.s_addr);
	int i;

	for (i = 0; i < pl_conf.ngroups; i++)
		if ((h & pl_conf.groups[i].mask) == pl_conf.groups[i].net)
			return true;
	return false;
}

/* A group: in QPS_PRELOAD_GROUPS when there is one; then the socket is
 * a multicast one. */
static const char *group_check(struct pl_sock *s, struct in_addr g,
			       char *why, size_t n)
{
	if (pl_conf.ngroups && !group_listed(g)) {
		char ip[INET_ADDRSTRLEN];

		(void)snprintf(why, n, "group %s is not in QPS_PRELOAD_GROUPS",
			       inet_ntop(AF_INET, &g, ip, sizeof(ip)));
		return why;
	}
	s->mcast = true;
	return NULL;
}

/* The rest, once the address itself is acceptable. */
static const char *mode_port_check(struct pl_sock *s, uint16_t port,
				   const char *what, char *why, size_t n)
{
	if (pl_conf.mode == PL_OFFLOAD_MULTICAST && !s->mcast) {
		(void)snprintf(why, n, "not a multicast socket (no group "
			       "bound, joined or sent to; QPS_PRELOAD_OFFLOAD="
			       "multicast)");
		return why;
	}
	if (pl_conf.nports && !port_listed(port)) {
		(void)snprintf(why, n, "%s port %u is not in QPS_PRELOAD_PORTS",
			       what, port);
		return why;
	}
	return NULL;
}

const char *pl_policy_bind(struct pl_sock *s, const struct sockaddr *a,
			   socklen_t len, char *why, size_t n)
{
	const struct sockaddr_in *sin = sin_of(a, len);
	uint32_t h;

	/* Malformed: qpsock gives the kernel's answer. */
	if (!sin)
		return NULL;
	h = ntohl(sin->sin_addr.s_addr);
	/* qpsock receives only on its device's address (127.0.0.1 or
	 * another interface's address are the kernel's). */
	if (!(h == INADDR_ANY || h == INADDR_BROADCAST || IN_MULTICAST(h) ||
	      sin->sin_addr.s_addr == pl_ctx_info.addr.s_addr)) {
		(void)snprintf(why, n, "bound to an address qpsock does not "
			       "serve");
		return why;
	}
	if (IN_MULTICAST(h) && group_check(s, sin->sin_addr, why, n))
		return why;
	return mode_port_check(s, ntohs(sin->sin_port), "local", why, n);
}

const char *pl_policy_dest(struct pl_sock *s, const struct sockaddr *a,
			   socklen_t len, char *why, size_t n)
{
	const struct sockaddr_in *sin = sin_of(a, len);

	if (!sin)
		return NULL;
	if (IN_MULTICAST(ntohl(sin->sin_addr.s_addr))) {
		if (group_check(s, sin->sin_addr, why, n))
			return why;
	} else if (is_loopback(sin->sin_addr) ||
		   (pl_ctx_info.emu && !emu_reaches(sin->sin_addr))) {
		/* The local resolver at 127.0.0.53, a DNS server. */
		(void)snprintf(why, n, "destination qpsock does not reach");
		return why;
	}
	return mode_port_check(s, ntohs(sin->sin_port), "destination", why,
			       n);
}

const char *pl_policy_join(struct pl_sock *s, struct in_addr group,
			   char *why, size_t n)
{
	return group_check(s, group, why, n);
}
