// SPDX-License-Identifier: MIT
/*
 * The netdev name given to the kernel-route helper (src/nl_neigh.c): it
 * goes to SO_BINDTODEVICE, so a name that does not fit IF_NAMESIZE must
 * fail with -ENAMETOOLONG rather than be cut to another interface's name;
 * the longest name that fits is kept whole.
 */
#include <errno.h>
#include <net/if.h>
#include <pthread.h>
#include <string.h>

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

static CU_TestInfo nl_tests[] = {
	{ "ifname too long: -ENAMETOOLONG", test_ifname_too_long },
	{ "ifname of IF_NAMESIZE - 1 kept whole", test_ifname_longest },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	return t_run("nl_neigh", nl_tests);
}
