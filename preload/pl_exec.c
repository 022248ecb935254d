// SPDX-License-Identifier: MIT
/*
 * exec. The new image runs no destructor or exit handler of the old one,
 * and keeps its pid. On emu a wire port is freed when its pid dies, so
 * the old image's port (its address, its bound ports, its queues nobody
 * reads any more) would be held as long as the new image lives, and its
 * stats segment would look alive: the new image could not take the same
 * QPS_ADDR, and an offloaded fd left open would be an unbound kernel
 * socket that receives nothing. On packet, the kernel socket keeps the
 * port, with a filter that accepts nothing.
 *
 * So each exec wrapper first writes down every offloaded socket of this
 * process (fd, whether close-on-exec, bound address, peer, memberships,
 * SO_RCVBUF), tears everything down as at exit (stats lines printed,
 * context destroyed), and passes the list in QPS_PRELOAD_EXEC_FDS. The
 * new image's constructor makes each fd left open (still an IPv4 UDP
 * socket) a fresh kernel socket with the old one's options, offloads
 * it, and binds, connects and joins as before. If the exec fails, this
 * image does the same with the whole list.
 *
 * Not in a vfork child (it shares our memory, the parent's sockets are
 * not its own), and not for sockets a fork shared with other processes
 * (pl_fork.c): those stay the plain kernel socket.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

#define PL_EXEC_ENV "QPS_PRELOAD_EXEC_FDS"
#define PL_EXEC_ENTRY_MAX 512

struct pl_buf {
	char *p;
	size_t len, size;
};

static void buf_add(struct pl_buf *b, const char *s)
{
	size_t n = strlen(s);
	char *p;

	if (b->len + n + 1 > b->size) {
		size_t size = (b->len + n + 1) * 2;

		p = realloc(b->p, size);
		if (!p)
			return;
		b->p = p;
		b->size = size;
	}
	memcpy(b->p + b->len, s, n + 1);
	b->len += n;
}

static void addr_port(char *out, size_t n, const struct sockaddr_in *a)
{
	char ip[INET_ADDRSTRLEN] = "0.0.0.0";
	unsigned int port = 0;

	if (a->sin_family == AF_INET) {
		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		port = ntohs(a->sin_port);
	}
	(void)snprintf(out, n, "%s:%u", ip, port);
}

/* Appends to the entry @e (PL_EXEC_ENTRY_MAX bytes, @len used) what fits
 * whole; returns the length now. */
static size_t entry_add(char *e, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static size_t entry_add(char *e, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(e + len, PL_EXEC_ENTRY_MAX - len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= PL_EXEC_ENTRY_MAX - len) {
		e[len] = '\0';
		return len;
	}
	return len + (size_t)n;
}

static size_t group_add(char *e, size_t len, const struct qps_mreq *m)
{
	char gs[INET_ADDRSTRLEN], ss[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &m->group, gs, sizeof(gs));
	inet_ntop(AF_INET, &m->source, ss, sizeof(ss));
	return entry_add(e, len, ",%s/%s", gs, ss);
}

/* "fd,cloexec,laddr:lport,paddr:pport,rcvbuf[,group/source]..." */
static void record_one(struct pl_buf *b, int fd, struct pl_sock *s)
{
	struct qps_ep_counters c;
	char e[PL_EXEC_ENTRY_MAX], l[32], p[32];
	unsigned int i;
	int fl = pl_real.fcntl(fd, F_GETFD);
	size_t len;

	/* A socket a fork shared is one open file other processes hold:
	 * it is released by the teardown (pl_fork.c) and the new image
	 * gets the kernel socket, which queues until a process takes it. */
	if (s->share || s->pid != getpid() ||
	    qps_ep_stats(s->ep, &c, sizeof(c)) < 0)
		return;
	addr_port(l, sizeof(l), &c.local);
	addr_port(p, sizeof(p), &c.peer);
	len = entry_add(e, 0, "%s%d,%d,%s,%s,%d", b->len ? ";" : "", fd,
			fl >= 0 && (fl & FD_CLOEXEC), l, p, s->rcvbuf);
	for (i = 0; i < c.ngroups && i < QPS_EP_STATS_GROUPS; i++)
		len = group_add(e, len, &c.groups[i]);
	for (i = 0; i < (unsigned int)s->npending; i++)
		len = group_add(e, len, &s->pending[i]);
	buf_add(b, e);
}

/* The list, or NULL when this process offloaded nothing. */
static char *record(void)
{
	struct pl_buf b = { 0 };
	int fd;

	for (fd = pl_fdtab_next(0); fd >= 0; fd = pl_fdtab_next(fd + 1)) {
		struct pl_sock *s = pl_ref(fd);

		if (s) {
			record_one(&b, fd, s);
			pl_put(s);
		}
	}
	return b.p;
}

/* The options the endpoint mirrors, carried from the old kernel socket
 * to the new one through our setsockopt (kernel, then endpoint). */
static const struct {
	int level, name;
} carried[] = {
	{ SOL_SOCKET, SO_REUSEADDR },	{ SOL_SOCKET, SO_REUSEPORT },
	{ SOL_SOCKET, SO_PRIORITY },	{ SOL_SOCKET, SO_RCVTIMEO },
	{ SOL_SOCKET, SO_SNDTIMEO },	{ SOL_SOCKET, SO_TIMESTAMP },
	{ SOL_SOCKET, SO_TIMESTAMPNS },	{ IPPROTO_IP, IP_TTL },
	{ IPPROTO_IP, IP_TOS },		{ IPPROTO_IP, IP_MULTICAST_TTL },
	{ IPPROTO_IP, IP_MULTICAST_LOOP }, { IPPROTO_IP, IP_PKTINFO },
};

#define N_CARRIED (sizeof(carried) / sizeof(carried[0]))

static bool is_udp4(int fd)
{
	int dom = 0, type = 0;
	socklen_t l = sizeof(int);

	if (pl_real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0)
		return false;
	l = sizeof(int);
	if (pl_real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0)
		return false;
	return dom == AF_INET && type == SOCK_DGRAM;
}

static bool parse_int(const char *s, int *v)
{
	char *end;
	long n = strtol(s, &end, 10);

	if (end == s || *end || n < INT_MIN || n > INT_MAX)
		return false;
	*v = (int)n;
	return true;
}

static bool parse_addr(const char *s, struct sockaddr_in *a)
{
	char ip[INET_ADDRSTRLEN];
	const char *colon = strchr(s, ':');
	unsigned long port;
	char *end;

	memset(a, 0, sizeof(*a));
	if (!colon || (size_t)(colon - s) >= sizeof(ip))
		return false;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = '\0';
	port = strtoul(colon + 1, &end, 10);
	if (port > 65535 || inet_pton(AF_INET, ip, &a->sin_addr) != 1)
		return false;
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	return true;
}

/* The old kernel socket at @fd replaced by a fresh one with its options
 * and status flags (on packet the old one is bound, for an endpoint
 * that is gone), then offloaded. */
static int reoffload(int fd, int cloexec)
{
	struct {
		char v[sizeof(struct timeval)];
		socklen_t len;
		bool ok;
	} o[N_CARRIED];
	int fl = pl_real.fcntl(fd, F_GETFL), nfd, ret;
	size_t i;

	for (i = 0; i < N_CARRIED; i++) {
		o[i].len = sizeof(o[i].v);
		o[i].ok = pl_real.getsockopt(fd, carried[i].level,
					     carried[i].name, o[i].v,
					     &o[i].len) == 0;
	}
	nfd = pl_real.socket(AF_INET, SOCK_DGRAM, 0);
	if (nfd < 0)
		return -errno;
	ret = pl_real.dup3(nfd, fd, cloexec ? O_CLOEXEC : 0);
	pl_real.close(nfd);
	if (ret < 0)
		return -errno;
	if (fl >= 0 && (fl & O_NONBLOCK))
		(void)pl_real.fcntl(fd, F_SETFL, fl);
	pl_sock_offload(fd, fl >= 0 && (fl & O_NONBLOCK) ? SOCK_NONBLOCK : 0);
	if (!pl_mapped(fd))
		return -ENODEV;
	for (i = 0; i < N_CARRIED; i++)
		if (o[i].ok)
			(void)setsockopt(fd, carried[i].level, carried[i].name,
					 o[i].v, o[i].len);
	return 0;
}

static int now_rcvbuf(int fd)
{
	int v = 0;
	socklen_t l = sizeof(v);

	return getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &l) == 0 ? v : 0;
}

static void restore_one(char *e, bool after_exec)
{
	struct sockaddr_in l, p;
	char *f[5], *save = NULL, *tok;
	int fd, cloexec, rcvbuf, i, ret;

	for (i = 0, tok = strtok_r(e, ",", &save); tok && i < 5;
	     tok = i < 5 ? strtok_r(NULL, ",", &save) : NULL)
		f[i++] = tok;
	if (i < 5 || !parse_addr(f[2], &l) || !parse_addr(f[3], &p))
		return;
	if (!parse_int(f[0], &fd) || !parse_int(f[1], &cloexec) ||
	    !parse_int(f[4], &rcvbuf))
		return;
	/* Closed by the exec (the number may be another file's now). */
	if ((after_exec && cloexec) || !is_udp4(fd))
		return;
	ret = reoffload(fd, cloexec);
	if (ret < 0) {
		pl_log("fd %d: not offloaded again after exec (%s): a plain "
		       "kernel socket", fd, strerrordesc_np(-ret));
		return;
	}
	if (rcvbuf > 0 && rcvbuf != now_rcvbuf(fd))
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &(int){ rcvbuf / 2 },
				 sizeof(int));
	while ((tok = strtok_r(NULL, ",", &save))) {
		struct ip_mreq_source m = { .imr_interface.s_addr = INADDR_ANY };
		char *slash = strchr(tok, '/');

		if (!slash)
			continue;
		*slash = '\0';
		if (inet_pton(AF_INET, tok, &m.imr_multiaddr) != 1 ||
		    inet_pton(AF_INET, slash + 1, &m.imr_sourceaddr) != 1)
			continue;
		if (m.imr_sourceaddr.s_addr != INADDR_ANY)
			ret = setsockopt(fd, IPPROTO_IP,
					 IP_ADD_SOURCE_MEMBERSHIP, &m,
					 sizeof(m));
		else
			ret = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP,
					 &(struct ip_mreq){ m.imr_multiaddr,
							    m.imr_interface },
					 sizeof(struct ip_mreq));
		if (ret < 0)
			pl_log("fd %d: membership of %s not taken again after "
			       "exec (%s)", fd, tok, strerrordesc_np(errno));
	}
	if (l.sin_port && bind(fd, (struct sockaddr *)&l, sizeof(l)) < 0)
		pl_log("fd %d: not bound again after exec to %s (%s)", fd,
		       f[2], strerrordesc_np(errno));
	if (p.sin_port && connect(fd, (struct sockaddr *)&p, sizeof(p)) < 0)
		pl_log("fd %d: not connected again after exec to %s (%s)", fd,
		       f[3], strerrordesc_np(errno));
	if (pl_conf.debug)
		pl_log("fd %d: offloaded again after %s (bound %s, peer %s)",
		       fd, after_exec ? "exec" : "a failed exec", f[2], f[3]);
}

static void restore(char *list, bool after_exec)
{
	char *save = NULL, *e;
	int e0 = errno;

	for (e = strtok_r(list, ";", &save); e; e = strtok_r(NULL, ";", &save))
		restore_one(e, after_exec);
	errno = e0;
}

void pl_exec_restore_env(void)
{
	const char *v = getenv(PL_EXEC_ENV);
	char *list;

	if (!v)
		return;
	list = strdup(v);
	/* Not for this image's own children. From the constructor, before
	 * the program has threads. NOLINTNEXTLINE(concurrency-mt-unsafe) */
	unsetenv(PL_EXEC_ENV);
	if (list && pl_conf.offload)
		restore(list, true);
	free(list);
}

struct pl_exec {
	char *list;		/* what to restore if the exec fails */
	char **envp;		/* the new image's environment */
};

/* Before an exec: the list, the teardown, the environment. False when
 * there is nothing of ours to hand on (the exec goes as asked). */
static bool exec_prepare(struct pl_exec *x, char *const envp[])
{
	size_t n = 0, i, j = 0;
	char *var = NULL;

	memset(x, 0, sizeof(*x));
	/* From a signal handler that interrupted one of our calls
	 * (pl_inside): the teardown would wait for that call forever. */
	if (__atomic_load_n(&pl_state, __ATOMIC_ACQUIRE) != PL_RUNNING ||
	    pl_vforked() || pl_inside > 0 ||
	    (!pl_ctx_open() && pl_live_count() == 0))
		return false;
	x->list = record();
	pl_ctx_teardown();
	if (x->list) {
		size_t size = strlen(PL_EXEC_ENV) + strlen(x->list) + 2;

		var = malloc(size);
		if (var)
			(void)snprintf(var, size, "%s=%s", PL_EXEC_ENV,
				       x->list);
	}
	while (envp && envp[n])
		n++;
	x->envp = malloc((n + 2) * sizeof(char *));
	if (!x->envp) {
		free(var);
		return true;
	}
	for (i = 0; i < n; i++)
		if (strncmp(envp[i], PL_EXEC_ENV "=",
			    strlen(PL_EXEC_ENV) + 1) != 0)
			x->envp[j++] = envp[i];
	if (var)
		x->envp[j++] = var;
	x->envp[j] = NULL;
	return true;
}

/* The exec failed: this image goes on with its sockets offloaded again. */
static void exec_failed(struct pl_exec *x, int e)
{
	if (x->envp) {
		size_t i;

		for (i = 0; x->envp[i]; i++)
			if (strncmp(x->envp[i], PL_EXEC_ENV "=",
				    strlen(PL_EXEC_ENV) + 1) == 0)
				free(x->envp[i]);
		free(x->envp);
	}
	if (x->list)
		restore(x->list, false);
	free(x->list);
	errno = e;
}

PL_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	struct pl_exec x;

	if (!pl_sym_ready())
		return (int)syscall(SYS_execve, path, argv, envp);
	if (!exec_prepare(&x, envp))
		return pl_real.execve(path, argv, envp);
	pl_real.execve(path, argv, x.envp ? x.envp : envp);
	exec_failed(&x, errno);
	return -1;
}

PL_EXPORT int execvpe(const char *file, char *const argv[],
		      char *const envp[])
{
	struct pl_exec x;

	if (!pl_sym_ready() || !exec_prepare(&x, envp))
		return pl_real.execvpe(file, argv, envp);
	pl_real.execvpe(file, argv, x.envp ? x.envp : envp);
	exec_failed(&x, errno);
	return -1;
}

PL_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	struct pl_exec x;

	if (!pl_sym_ready() || !exec_prepare(&x, envp))
		return pl_real.fexecve(fd, argv, envp);
	pl_real.fexecve(fd, argv, x.envp ? x.envp : envp);
	exec_failed(&x, errno);
	return -1;
}

PL_EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

PL_EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* execl, execlp, execle: the arguments up to the NULL, as an array. */
static char **list_args(const char *arg0, va_list ap, char ***envp_out)
{
	size_t n = 1, i;
	char **v;

	/* With no arguments at all, the NULL is arg0 itself. */
	if (!arg0) {
		n = 0;
	} else {
		va_list cp;

		va_copy(cp, ap);
		while (va_arg(cp, char *))
			n++;
		va_end(cp);
	}
	v = malloc((n + 1) * sizeof(char *));
	if (!v)
		return NULL;
	v[0] = (char *)arg0;
	for (i = 1; i <= n; i++)
		v[i] = va_arg(ap, char *);
	if (envp_out)
		*envp_out = va_arg(ap, char **);
	return v;
}

/* The array list_args() made (NULL: no memory), exec'd by @fn. */
static int exec_list(int (*fn)(const char *, char *const[], char *const[]),
		     const char *path, char **v, char *const envp[])
{
	int e;

	if (!v) {
		errno = ENOMEM;
		return -1;
	}
	fn(path, v, envp);
	e = errno;
	free(v);
	errno = e;
	return -1;
}

PL_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	char **v;

	va_start(ap, arg);
	v = list_args(arg, ap, NULL);
	va_end(ap);
	return exec_list(execve, path, v, environ);
}

PL_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	char **v;

	va_start(ap, arg);
	v = list_args(arg, ap, NULL);
	va_end(ap);
	return exec_list(execvpe, file, v, environ);
}

PL_EXPORT int execle(const char *path, const char *arg, ...)
{
	char **v, **envp = NULL;
	va_list ap;

	va_start(ap, arg);
	v = list_args(arg, ap, &envp);
	va_end(ap);
	return exec_list(execve, path, v, envp);
}
