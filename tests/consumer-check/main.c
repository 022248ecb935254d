// SPDX-License-Identifier: MIT
/*
 * An installed-library consumer: built by scripts/run-tests.sh against
 * `cmake --install` output, once through find_package(qpsock) and once
 * through pkg-config. It must compile and link; at run time it opens and
 * closes an emu context on the wire named by argv[1] (or prints the header
 * version and still succeeds when no context can be opened here).
 */
#include <stdio.h>
#include <string.h>

#include <qpsock/qpsock.h>

int main(int argc, char **argv)
{
	struct qps_ctx_attr attr;
	struct qps_ctx_info info;
	struct qps_ctx_info_ex ix;
	struct qps_stats st;
	struct qps_ctx *ctx = NULL;
	int ret;

	memset(&attr, 0, sizeof(attr));
	attr.comp_mask = QPS_CTX_ATTR_PROVIDER;
	attr.provider = "emu";
	if (argc > 1) {
		attr.comp_mask |= QPS_CTX_ATTR_DEV;
		attr.dev = argv[1];
	}

	ret = qps_ctx_create(&attr, &ctx);
	if (ret < 0) {
		printf("consumer: qpsock %d.%d linked; qps_ctx_create: %s\n",
		       QPS_VERSION_MAJOR, QPS_VERSION_MINOR, strerror(-ret));
		return 0;
	}
	memset(&info, 0, sizeof(info));
	ret = qps_ctx_query(ctx, &info);
	if (ret < 0) {
		printf("consumer: qps_ctx_query: %s\n", strerror(-ret));
		qps_ctx_destroy(ctx);
		return 1;
	}
	/* The newest symbol version links, and reports what the base
	 * call did. */
	ret = qps_ctx_query_ex(ctx, &ix, sizeof(ix));
	if (ret != (int)sizeof(ix) ||
	    memcmp(&ix.base, &info, sizeof(info)) != 0) {
		printf("consumer: qps_ctx_query_ex: %d\n", ret);
		qps_ctx_destroy(ctx);
		return 1;
	}
	ret = qps_ctx_stats(ctx, &st, sizeof(st));
	if (ret < 0) {
		printf("consumer: qps_ctx_stats: %s\n", strerror(-ret));
		qps_ctx_destroy(ctx);
		return 1;
	}
	ret = qps_ctx_destroy(ctx);
	if (ret < 0) {
		printf("consumer: qps_ctx_destroy: %s\n", strerror(-ret));
		return 1;
	}
	printf("consumer: qpsock %d.%d: context on %s dev %s opened and closed\n",
	       QPS_VERSION_MAJOR, QPS_VERSION_MINOR, info.provider, info.dev);
	return 0;
}
