// SPDX-License-Identifier: MIT
#include "t_util.h"

#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int t_run(const char *suite, CU_TestInfo *tests)
{
	CU_SuiteInfo suites[] = {
		{ .pName = suite, .pTests = tests },
		CU_SUITE_INFO_NULL,
	};
	unsigned int failed;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	if (CU_register_suites(suites) != CUE_SUCCESS) {
		CU_cleanup_registry();
		return 1;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures() +
		 CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}

void t_wire_name(char *buf, size_t len, const char *tag)
{
	snprintf(buf, len, "t-%s-%d", tag, (int)getpid());
}

int t_ctx_emu(const char *wire, const char *ip, struct qps_ctx **out)
{
	struct qps_ctx_attr attr = {
		.comp_mask = QPS_CTX_ATTR_PROVIDER | QPS_CTX_ATTR_DEV,
		.provider = "emu",
		.dev = wire,
	};

	if (ip) {
		attr.comp_mask |= QPS_CTX_ATTR_ADDR;
		inet_pton(AF_INET, ip, &attr.addr);
	}
	return qps_ctx_create(&attr, out);
}

struct sockaddr_in t_sin(const char *ip, unsigned short port)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	inet_pton(AF_INET, ip, &sin.sin_addr);
	return sin;
}
