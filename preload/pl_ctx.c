// SPDX-License-Identifier: MIT
/*
 * The process's qpsock context and the library's life: the constructor
 * reads the configuration and makes the fd table; the context opens on
 * the first socket to offload (a program that never makes a UDP socket
 * never touches the device); the teardown at exit prints the stats
 * lines and destroys the context, so no emu wire port or stats segment
 * outlives the process.
 *
 * The teardown is not a destructor. glibc finalises a preloaded library
 * before the libraries loaded after it (dlopen'ed ones) and those the
 * program links, so their destructors would find every offloaded socket
 * gone. The constructor registers it with __cxa_atexit instead, with no
 * DSO handle (our own fini would run it otherwise): library constructors
 * run before __libc_start_main registers the loader's fini, so exit()
 * runs the teardown after the loader's fini, hence after every library's
 * destructor. The library is linked nodelete, so the handler stays
 * mapped.
 *
 * Before the constructor and after the teardown every call goes to the
 * kernel: a socket made then is never offloaded, and an offloaded fd used
 * after the teardown is the plain kernel socket behind it.
 *
 * fork(): the core answers -ECHILD for a context inherited by a child
 * (api.md); the child's own sockets open a context of their own, and an
 * inherited socket moves to the process that uses it (pl_fork.c).
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

int pl_state = PL_BEFORE;
pid_t pl_self;	/* ours; a vfork child runs no atfork handler */
struct pl_ctx_info pl_ctx_info;

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct qps_ctx *ctx;
static bool ctx_failed;
static struct in_addr inherit_addr;	/* a fork parent's, on emu */
static bool open_early;		/* atfork_child -> atfork_child_late */
static pthread_once_t late_once = PTHREAD_ONCE_INIT;
static void late_register(void);

/* Stats lines of sockets already closed, printed at exit. */
struct pl_line {
	struct pl_line *next;
	char text[];
};
static pthread_mutex_t lines_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pl_line *lines_head, **lines_tail = &lines_head;

static void ctx_info_fill(struct qps_ctx *c)
{
	struct qps_ctx_info info;

	memset(&pl_ctx_info, 0, sizeof(pl_ctx_info));
	pl_ctx_info.ifindex = QPS_IFINDEX;
	if (qps_ctx_query(c, &info) < 0)
		return;
	pl_ctx_info.addr = info.addr;
	pl_ctx_info.emu = strcmp(info.provider, "emu") == 0;
	/* IP_PKTINFO names the netdev the host knows, where there is one;
	 * the kernel socket's joins are made on it too. */
	if (strcmp(info.provider, "packet") == 0 ||
	    strcmp(info.provider, "xdp") == 0) {
		unsigned int i = if_nametoindex(info.dev);

		if (i)
			pl_ctx_info.ifindex = (int)i;
	}
}

struct qps_ctx *pl_ctx_peek(void)
{
	/* Acquire: pairs with the release that publishes the context. */
	return __atomic_load_n(&ctx, __ATOMIC_ACQUIRE);
}

bool pl_ctx_open(void)
{
	return pl_ctx_peek() != NULL;
}

static bool provider_is(const char *name)
{
	const char *p = getenv("QPS_PROVIDER");

	return p && strcmp(p, name) == 0;
}

/* Opens the context under ctx_lock: at @at if given (and nowhere else),
 * else at QPS_ADDR or the fork parent's address, else the wire's first
 * free one. */
static struct qps_ctx *ctx_open_locked(const struct in_addr *at)
{
	struct qps_ctx_attr attr = { 0 };
	struct qps_ctx *c;
	int ret;

	if (ctx || ctx_failed)
		return ctx;
	if (at) {
		attr.comp_mask |= QPS_CTX_ATTR_ADDR;
		attr.addr = *at;
	} else if (pl_conf.addr.s_addr != INADDR_ANY) {
		attr.comp_mask |= QPS_CTX_ATTR_ADDR;
		attr.addr = pl_conf.addr;
	} else if (inherit_addr.s_addr != INADDR_ANY) {
		attr.comp_mask |= QPS_CTX_ATTR_ADDR;
		attr.addr = inherit_addr;
	}
	ret = qps_ctx_create(&attr, &c);
	/* Still another process's (one that is exiting, say): try later. */
	if (ret == -EADDRINUSE && at)
		return NULL;
	/* The address is another context's on this wire: this is a child
	 * (fork, exec) of the process that took it. */
	if (ret == -EADDRINUSE && attr.comp_mask) {
		if (pl_conf.debug)
			pl_log("QPS_ADDR is taken: the wire's first free "
			       "address instead");
		attr.comp_mask = 0;
		ret = qps_ctx_create(&attr, &c);
	}
	if (ret == -EBUSY && provider_is("xdp")) {
		/* One XDP program per interface, and another context has it:
		 * a fork child's parent, most often. packet serves the same
		 * interface beside it (docs/preload.md "fork"). */
		pl_log("the interface is another context's (xdp: one per "
		       "interface): this process uses the packet provider");
		attr.comp_mask |= QPS_CTX_ATTR_PROVIDER;
		attr.provider = "packet";
		ret = qps_ctx_create(&attr, &c);
	}
	if (ret < 0) {
		/* Said once, whatever the debug setting: every socket of
		 * the process stays on the kernel. */
		pl_log("cannot open the qpsock context (%s): UDP sockets stay "
		       "on the kernel", strerrordesc_np(-ret));
		ctx_failed = true;
		return NULL;
	}
	ctx_info_fill(c);
	__atomic_store_n(&ctx, c, __ATOMIC_RELEASE);
	pthread_once(&late_once, late_register);
	return c;
}

struct qps_ctx *pl_ctx_get(void)
{
	struct qps_ctx *c = __atomic_load_n(&ctx, __ATOMIC_ACQUIRE);

	if (c || __atomic_load_n(&ctx_failed, __ATOMIC_RELAXED))
		return c;
	pthread_mutex_lock(&ctx_lock);
	c = ctx_open_locked(NULL);
	pthread_mutex_unlock(&ctx_lock);
	return c;
}

struct qps_ctx *pl_ctx_get_at(struct in_addr at)
{
	struct qps_ctx *c = __atomic_load_n(&ctx, __ATOMIC_ACQUIRE);

	if (c || __atomic_load_n(&ctx_failed, __ATOMIC_RELAXED))
		return c;
	pthread_mutex_lock(&ctx_lock);
	c = ctx_open_locked(&at);
	pthread_mutex_unlock(&ctx_lock);
	return c;
}

void pl_stats_keep(const char *line)
{
	size_t n = strlen(line) + 1;
	struct pl_line *l = malloc(sizeof(*l) + n);

	if (!l)
		return;
	memcpy(l->text, line, n);
	l->next = NULL;
	pthread_mutex_lock(&lines_lock);
	*lines_tail = l;
	lines_tail = &l->next;
	pthread_mutex_unlock(&lines_lock);
}

bool pl_vforked(void)
{
	return getpid() != __atomic_load_n(&pl_self, __ATOMIC_RELAXED);
}

static void atfork_child(void)
{
	bool took_ctx = ctx != NULL, shared;

	__atomic_store_n(&pl_self, getpid(), __ATOMIC_RELAXED);
	/* Every lock a parent thread may have held at the fork. */
	pl_fdtab_atfork_child();
	pl_sock_atfork_child();
	pl_fdtab_fork_refs();
	pl_epoll_atfork_child();
	shared = pl_fork_atfork_child();
	pthread_mutex_init(&ctx_lock, NULL);
	pthread_mutex_init(&lines_lock, NULL);
	/* The parent's context stays the parent's (the core leaves it
	 * alone here); the child opens its own when it needs one, at the
	 * parent's address where it can (emu: the address a socket it
	 * takes over was served at, pl_fork.c). */
	if (ctx && pl_ctx_info.emu)
		inherit_addr = pl_ctx_info.addr;
	ctx = NULL;
	ctx_failed = false;
	lines_head = NULL;
	lines_tail = &lines_head;
	/* A daemon takes its sockets after it dropped its privileges, and
	 * opening a context on a host netdev needs them (CAP_NET_RAW): the
	 * child of a privileged process that may take inherited sockets
	 * opens its own at once (atfork_child_late), while it has them. */
	open_early = took_ctx && shared && !pl_ctx_info.emu && geteuid() == 0;
}

/* Registered after the core's own fork handler (at the first context),
 * so it runs after it: a context made before the core's handler ran
 * would count as the parent's. */
static void atfork_child_late(void)
{
	if (open_early)
		(void)pl_ctx_get();
	open_early = false;
}

static void late_register(void)
{
	(void)pthread_atfork(NULL, NULL, atfork_child_late);
}

/* glibc's, declared by no header. No DSO handle: atexit() would tie the
 * handler to this library's own destructor pass; this one runs after
 * every library's. NOLINTNEXTLINE(bugprone-reserved-identifier) */
int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);
static void pl_fini(void *unused);

__attribute__((constructor)) static void pl_init(void)
{
	pl_sym_ready();
	pl_self = getpid();
	pl_conf_load();
	if (pl_fdtab_init() < 0) {
		pl_log("cannot allocate the fd table: nothing is offloaded");
		return;
	}
	pthread_atfork(pl_fork_prepare, NULL, atfork_child);
	if (__cxa_atexit(pl_fini, NULL, NULL) != 0) {
		pl_log("cannot register the exit teardown: nothing is "
		       "offloaded");
		return;
	}
	__atomic_store_n(&pl_state, PL_RUNNING, __ATOMIC_RELEASE);
	pl_exec_restore_env();
}

/* The context's own line: datagrams the device could not place (no
 * receive buffer posted, no steering rule) belong to no socket, so the
 * socket lines alone would leave a loss unaccounted for. */
static void ctx_line(struct qps_ctx *c)
{
	struct qps_ctx_info_ex ix;
	const struct qps_ctx_info *info = &ix.base;
	struct qps_stats st;
	char line[384], ip[INET_ADDRSTRLEN], mode[64] = "";
	unsigned long long bad = 0, drops;
	int i;

	if (qps_ctx_query_ex(c, &ix, sizeof(ix)) < 0 ||
	    qps_ctx_stats(c, &st, sizeof(st)) < 0)
		return;
	/* xdp's modes decide what its numbers mean (docs/xdp.md). */
	if (strcmp(info->provider, "xdp") == 0)
		(void)snprintf(mode, sizeof(mode), ", %s XDP, %s%s",
			 ix.flags & QPS_CTX_INFO_F_XDP_NATIVE ? "native" :
								"generic",
			 ix.flags & QPS_CTX_INFO_F_XDP_ZEROCOPY ? "zero-copy" :
								  "copy mode",
			 ix.flags & QPS_CTX_INFO_F_XDP_BUSY_POLL ?
				", busy polling" : "");
	for (i = 1; i < QPS_RX_REASON_MAX; i++)
		if (i != QPS_RX_FRAGMENT)
			bad += st.rx_bad[i];
	drops = st.dev_rx_drops + st.rx_no_endpoint + st.rx_queue_full +
		bad + st.dev_tx_drops + st.tx_errors;
	if (!inet_ntop(AF_INET, &info->addr, ip, sizeof(ip)))
		ip[0] = '\0';
	(void)snprintf(line, sizeof(line),
		 "context %s (%s %s%s): rx %llu datagrams tx %llu datagrams "
		 "drops %llu (device rx %llu, no endpoint %llu, rx queue full "
		 "%llu, malformed %llu, device tx %llu, tx errors %llu) via "
		 "qpsock", ip, info->provider, info->dev, mode,
		 (unsigned long long)st.rx_packets,
		 (unsigned long long)st.tx_packets, drops,
		 (unsigned long long)st.dev_rx_drops,
		 (unsigned long long)st.rx_no_endpoint,
		 (unsigned long long)st.rx_queue_full, bad,
		 (unsigned long long)st.dev_tx_drops,
		 (unsigned long long)st.tx_errors);
	pl_stats_keep(line);
}

static void stats_print(void)
{
	struct pl_line *l;

	for (l = lines_head; l; l = l->next)
		pl_log("%s", l->text);
}

/* Up to @ms for calls still inside an offloaded socket to leave. */
static bool live_drain(int ms)
{
	struct timespec ts = { 0, 1000000 };
	int i;

	for (i = 0; i < ms && pl_live_count() > 0; i++)
		nanosleep(&ts, NULL);
	return pl_live_count() == 0;
}

void pl_ctx_teardown(void)
{
	struct qps_ctx *c;
	struct pl_line *l;

	/* Sockets still open get their line at the final put, below. */
	pl_fdtab_clear();
	/* What is left has a call inside. Woken without waiting for it: a
	 * call a handler left with siglongjmp never comes back, and an
	 * endpoint's close would wait for it forever. */
	pl_live_wake_all();
	c = __atomic_load_n(&ctx, __ATOMIC_ACQUIRE);
	if (c && pl_conf.stats)
		ctx_line(c);
	/* The last call out closes its endpoint. A call still inside after
	 * that is one that will never leave: nothing more is closed, and
	 * the process's end releases the rest, as after an exit from a
	 * handler (pl_fini). */
	if (live_drain(1000) && c) {
		/* Unpublished first: a waiter that peeks it now (pl_wait.c)
		 * finds none. */
		__atomic_store_n(&ctx, NULL, __ATOMIC_RELEASE);
		qps_ctx_destroy(c);
	} else if (c && pl_conf.stats) {
		pl_log("a call never left its socket (siglongjmp from a "
		       "handler?): %d sockets not reported", pl_live_count());
	}
	if (pl_conf.stats)
		stats_print();
	pthread_mutex_lock(&lines_lock);
	while ((l = lines_head)) {
		lines_head = l->next;
		free(l);
	}
	lines_tail = &lines_head;
	pthread_mutex_unlock(&lines_lock);
}

static void pl_fini(void *unused)
{
	(void)unused;
	if (__atomic_exchange_n(&pl_state, PL_AFTER, __ATOMIC_ACQ_REL) !=
	    PL_RUNNING)
		return;
	if (pl_inside > 0) {
		/* exit() from a signal handler that interrupted one of our
		 * calls on this thread: that call may hold the core's locks
		 * and will never leave, so nothing may be closed or waited
		 * for. The process's end releases the rest (emu reclaims a
		 * dead process's ports; the core's own destructor unlinks
		 * its stats segments). */
		if (pl_conf.stats) {
			stats_print();
			pl_log("exit inside a socket call (a signal handler): "
			       "open sockets not reported");
		}
		return;
	}
	pl_ctx_teardown();
}
