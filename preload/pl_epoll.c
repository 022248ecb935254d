// SPDX-License-Identifier: MIT
/*
 * epoll over kernel and offloaded fds mixed. An offloaded fd is entered
 * in the application's epoll set twice, both with the application's
 * event data: its endpoint's readiness descriptor (qps_ep_fd) for the
 * input events, and the kernel socket itself for the rest (EPOLLOUT,
 * errors). epoll_wait itself is untouched, so nothing is added to its
 * path; the price is the two limits docs/preload.md states: input and
 * output readiness come as two events, and an input event can be
 * spurious (a completion for another endpoint of the context), so a
 * non-blocking receive must follow it, as epoll users do anyway.
 */
#include <sys/syscall.h>

#include "preload.h"

#define PL_EP_IN (EPOLLIN | EPOLLRDNORM)
#define PL_EP_FLAGS (EPOLLET | EPOLLONESHOT | EPOLLWAKEUP | EPOLLEXCLUSIVE)

static int ctl(int epfd, int op, int fd, uint32_t events, epoll_data_t data)
{
	struct epoll_event ev = { .events = events, .data = data };

	return pl_real.epoll_ctl(epfd, op, fd, &ev) < 0 ? -errno : 0;
}

PL_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	uint32_t in, rest;
	struct pl_sock *s;
	epoll_data_t data = { 0 };
	int rfd, r, r2;

	if (!pl_sym_ready())
		return (int)syscall(SYS_epoll_ctl, epfd, op, fd, ev);
	s = pl_get(fd);
	if (!s)
		return pl_real.epoll_ctl(epfd, op, fd, ev);
	rfd = qps_ep_fd(s->ep);
	if (rfd < 0 || (op != EPOLL_CTL_DEL && !ev)) {
		pl_put(s);
		return pl_real.epoll_ctl(epfd, op, fd, ev);
	}
	if (ev) {
		in = (ev->events & PL_EP_IN) | (ev->events & PL_EP_FLAGS);
		rest = ev->events & ~PL_EP_IN;
		data = ev->data;
	} else {
		in = rest = 0;
	}
	switch (op) {
	case EPOLL_CTL_ADD:
		/* The kernel socket first: its answer (EEXIST, EPERM,
		 * EINVAL, ELOOP...) is the one the application expects. */
		r = ctl(epfd, op, fd, rest, data);
		if (!r) {
			r = ctl(epfd, op, rfd, in, data);
			if (r < 0)
				pl_real.epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
		}
		break;
	case EPOLL_CTL_MOD:
		r = ctl(epfd, op, fd, rest, data);
		if (!r)
			r = ctl(epfd, op, rfd, in, data);
		break;
	case EPOLL_CTL_DEL:
		r = ctl(epfd, op, fd, 0, data);
		r2 = ctl(epfd, op, rfd, 0, data);
		if (r == 0 || r2 == 0)
			r = 0;
		break;
	default:
		r = ctl(epfd, op, fd, rest, data);
		break;
	}
	pl_put(s);
	return (int)pl_ret(r);
}
