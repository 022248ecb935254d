// SPDX-License-Identifier: MIT
/*
 * The netdev name given to the kernel-route helper
 * (providers/common/nl_neigh.c): it goes to SO_BINDTODEVICE, so a name
 * that does not fit IF_NAMESIZE must fail with -ENAMETOOLONG rather than
 * be cut to another interface's name; the longest name that fits is kept
 * whole. A refused destination is
 * reported once per destination and route generation, not on every send
 * (in a network namespace of its own; skipped without the right to make
 * one).
 */
#define _GNU_SOURCE	/* unshare */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nl_neigh.h"
#include "t_util.h"

static struct qps_nl_route route;

static void route_init(void)
{
	memset(&route, 0, sizeof(route));
	pthread_mutex_init(&route.lock, NULL);
}

static void route_fini(void)
{
	qps_nl_route_close(&route);
	pthread_mutex_destroy(&route.lock);
}

static void test_ifname_too_long(void)
{
	char name[IF_NAMESIZE + 1];

	memset(name, 'x', IF_NAMESIZE);
	name[IF_NAMESIZE] = '\0';
	route_init();
	T_EQ(qps_nl_route_open(&route, 1, name, "test", NULL), -ENAMETOOLONG);
	/* Nothing was set up, and closing what is there is still safe. */
	CU_ASSERT_PTR_NULL(route.cmd);
	CU_ASSERT_PTR_NULL(route.ev);
	route_fini();
}

static void test_ifname_longest(void)
{
	char name[IF_NAMESIZE];

	memset(name, 'y', IF_NAMESIZE - 1);
	name[IF_NAMESIZE - 1] = '\0';
	route_init();
	/* The name is not looked up here: only its length matters. */
	T_EQ(qps_nl_route_open(&route, 1, name, "test", NULL), 0);
	CU_ASSERT_STRING_EQUAL(route.ifname, name);
	route_fini();
}

/* Lines of @f holding @what. */
static int count_lines(FILE *f, const char *what)
{
	char line[256];
	int n = 0;

	rewind(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, what))
			n++;
	return n;
}

/* Resolve @ip @times times with stderr going to @cap; each is refused. */
static void resolve_refused(FILE *cap, const char *ip, int times)
{
	struct in_addr dst;
	uint8_t mac[6];
	int saved, i;

	CU_ASSERT_FATAL(inet_pton(AF_INET, ip, &dst) == 1);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	CU_ASSERT_FATAL(saved >= 0);
	CU_ASSERT_FATAL(dup2(fileno(cap), STDERR_FILENO) >= 0);
	for (i = 0; i < times; i++)
		T_EQ(qps_nl_resolve(&route, dst, mac), -EHOSTUNREACH);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
}

static int lo_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int ret = 0;

	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		ret = -errno;
	ifr.ifr_flags |= IFF_UP;
	if (!ret && ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static void test_refusal_said_once(void)
{
	FILE *cap;
	uint64_t gen;

	/* A namespace of our own: only lo, down, and no route anywhere. */
	if (unshare(CLONE_NEWNET) < 0) {
		printf("\n    SKIP: unshare(CLONE_NEWNET): %s (needs root) ",
		       strerror(errno));
		return;
	}
	route_init();
	T_EQ(qps_nl_route_open(&route, (int)if_nametoindex("lo"), "lo",
			       "test", NULL), 0);
	cap = tmpfile();
	CU_ASSERT_FATAL(cap != NULL);
	resolve_refused(cap, "10.9.9.9", 5);
	T_EQ(count_lines(cap, "no route to 10.9.9.9"), 1);
	/* Another destination has its own line. */
	resolve_refused(cap, "10.9.9.10", 2);
	T_EQ(count_lines(cap, "no route to 10.9.9.10"), 1);
	T_EQ(count_lines(cap, "no route to"), 2);
	/* A link change on our interface is a new generation: said again,
	 * once. */
	gen = route.gen;
	T_EQ(lo_up(), 0);
	resolve_refused(cap, "10.9.9.9", 3);
	CU_ASSERT(route.gen > gen);
	T_EQ(count_lines(cap, "no route to 10.9.9.9"), 2);
	fclose(cap);
	route_fini();
}

static CU_TestInfo nl_tests[] = {
	{ "ifname too long: -ENAMETOOLONG", test_ifname_too_long },
	{ "ifname of IF_NAMESIZE - 1 kept whole", test_ifname_longest },
	{ "refusal said once per destination and generation",
	  test_refusal_said_once },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	return t_run("nl_neigh", nl_tests);
}
