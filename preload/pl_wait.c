// SPDX-License-Identifier: MIT
/*
 * How poll, select and epoll (pl_poll.c, pl_epoll.c) wait on offloaded
 * fds. First they spin for the sockets' busy-poll budget
 * (QPS_OPT_BUSY_POLL: QPS_BUSY_POLL, or SO_BUSY_POLL per socket),
 * progressing the device and only looking at the kernel, as the kernel's
 * and Onload's busy polling do. Then they sleep in the kernel with the
 * device's event armed for that sleep alone (qps_ctx_arm): a program
 * that keeps up with its traffic thus costs its peers no wake-up message
 * and itself no event drain per datagram.
 */
#include <time.h>

#include "preload.h"

int64_t pl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int pl_busy_us(struct pl_sock *s)
{
	int v = 0;
	socklen_t len = sizeof(v);

	return qps_getopt(s->ep, QPS_OPT_BUSY_POLL, &v, &len) < 0 ? 0 : v;
}

int64_t pl_spin_end(int busy_us, int64_t deadline)
{
	int64_t end;

	if (busy_us <= 0)
		return 0;
	end = pl_now_ns() + (int64_t)busy_us * 1000;
	return deadline >= 0 && deadline < end ? deadline : end;
}

void pl_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* The core calls below hold its locks: counted in pl_inside. */
int pl_spin_progress(void)
{
	struct qps_ctx *c = pl_ctx_peek();
	int n;

	if (!c)
		return 0;
	pl_inside++;
	n = qps_ctx_progress(c);
	pl_inside--;
	return n;
}

bool pl_sleep_arm(void)
{
	struct qps_ctx *c = pl_ctx_peek();
	bool armed;

	if (!c)
		return false;
	pl_inside++;
	armed = qps_ctx_arm(c) >= 0;
	pl_inside--;
	return armed;
}

void pl_sleep_disarm(bool armed)
{
	struct qps_ctx *c = pl_ctx_peek();

	if (!armed || !c)
		return;
	pl_inside++;
	qps_ctx_disarm(c);
	pl_inside--;
}

void pl_sleep_disarm_cleanup(void *armed)
{
	pl_sleep_disarm(*(bool *)armed);
}
