/* SPDX-License-Identifier: MIT */
/*
 * libqpsock-preload.so internals (docs/preload.md). One job per file:
 *   pl_sym.c    the next definitions of the interposed calls
 *   pl_conf.c   configuration from the environment
 *   pl_ctx.c    the process's context: init, fork, exit, stats lines
 *   pl_fdtab.c  fd -> offloaded socket, reference counted
 *   pl_sock.c   making, falling back and freeing an offloaded socket
 *   pl_policy.c which sockets stay offloaded: the decision at bind,
 *               connect, first send or first join
 *   pl_socket.c socket, bind, connect, close, shutdown, dup, fcntl, ioctl,
 *               getsockname, getpeername
 *   pl_close.c  close_range, closefrom, fclose, freopen: the other ways
 *               an fd is closed
 *   pl_opts.c   setsockopt, getsockopt
 *   pl_mcast.c  memberships and source filters, every form
 *   pl_send.c   send family; pl_recv.c receive family
 *   pl_poll.c   poll, ppoll, select, pselect
 *   pl_epoll.c  epoll_ctl, epoll_wait, epoll_pwait
 *   pl_wait.c   how those two wait: spin, then sleep armed
 *   pl_signal.c sigaction, signal: SA_RESTART for blocking calls
 *   pl_exec.c   exec*: offloaded fds left open are offloaded again in
 *               the new image
 *   pl_fork.c   fork: one process at a time serves a shared socket; it
 *               moves, with its queued datagrams, to the one that uses it
 *   pl_syscall.c syscall(): the same numbers to the calls above
 *   pl_unsup.c  what qpsock cannot honour: a fresh socket falls back,
 *               one that moved data refuses it
 *   pl_splice.c sendfile, splice: a datagram from or into another fd
 *
 * The qpsock core returns -errno and never touches errno; the interposed
 * calls are the one place errno is set (pl_ret).
 */
#ifndef QPS_PRELOAD_H
#define QPS_PRELOAD_H

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include <qpsock/qpsock.h>

#define PL_EXPORT __attribute__((visibility("default")))

/* pl_sym.c. Each pointer is the definition after ours (libc's). */
struct pl_real {
	int (*socket)(int, int, int);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*close)(int);
	int (*close_range)(unsigned int, unsigned int, int);
	void (*closefrom)(int);
	int (*fclose)(FILE *);
	FILE *(*freopen)(const char *, const char *, FILE *);
	FILE *(*freopen64)(const char *, const char *, FILE *);
	int (*shutdown)(int, int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	int (*fcntl64)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int,
			  const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*sendmmsg)(int, struct mmsghdr *, unsigned int, int);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *,
			    socklen_t *);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	int (*recvmmsg)(int, struct mmsghdr *, unsigned int, int,
			struct timespec *);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	ssize_t (*sendfile64)(int, int, off64_t *, size_t);
	ssize_t (*splice)(int, off64_t *, int, off64_t *, size_t,
			  unsigned int);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *,
		     const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *,
		       const struct timespec *, const sigset_t *);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_pwait)(int, struct epoll_event *, int, int,
			   const sigset_t *);
	int (*sigaction)(int, const struct sigaction *, struct sigaction *);
	int (*epoll_pwait2)(int, struct epoll_event *, int,
			    const struct timespec *, const sigset_t *);
	long (*syscall)(long, ...);
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	int (*fexecve)(int, char *const[], char *const[]);
};

extern struct pl_real pl_real;
/* Resolves pl_real once. False only on the thread that is resolving
 * (dlsym may allocate, and an allocator may read or open files): its
 * calls must then go to the kernel without pl_real. */
bool pl_sym_ready(void);

/* pl_conf.c */
enum pl_offload_mode {
	PL_OFFLOAD_ALL,
	PL_OFFLOAD_MULTICAST,
	PL_OFFLOAD_NONE,
};

#define PL_GROUPS_MAX 32

struct pl_conf {
	bool offload;		/* QPS_PRELOAD_OFFLOAD is not "none" */
	int mode;		/* enum pl_offload_mode */
	int nports;		/* QPS_PRELOAD_PORTS: how many listed */
	uint8_t ports[65536 / 8];	/* bit per port */
	int ngroups;		/* QPS_PRELOAD_GROUPS */
	struct {
		uint32_t net, mask;	/* host order */
	} groups[PL_GROUPS_MAX];
	bool stats;		/* QPS_PRELOAD_STATS=1 */
	bool debug;		/* QPS_PRELOAD_DEBUG=1 */
	struct in_addr addr;	/* QPS_ADDR, or INADDR_ANY */
	int rmem_max;		/* net.core.rmem_max, bytes */
};

extern struct pl_conf pl_conf;
void pl_conf_load(void);
void pl_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* pl_ctx.c */
enum pl_state { PL_BEFORE, PL_RUNNING, PL_AFTER };
extern int pl_state;		/* enum pl_state, atomic */
/* This process's pid, kept by the fork child handler (getpid() is a
 * system call). */
extern pid_t pl_self;
/* True in a vfork child: it shares our memory (the fd table too) but has
 * its own fds, so its close/dup must not touch the table. */
bool pl_vforked(void);
struct qps_ctx *pl_ctx_get(void);
/* As pl_ctx_get, opening it only at @at (NULL while another context has
 * it): emu, where a socket moves between processes with its address. */
struct qps_ctx *pl_ctx_get_at(struct in_addr at);
/* The context if it is open, without opening it. */
struct qps_ctx *pl_ctx_peek(void);
/* What the open context is: address, PKTINFO interface, emu or not. */
struct pl_ctx_info {
	struct in_addr addr;
	int ifindex;
	bool emu;
};
extern struct pl_ctx_info pl_ctx_info;
void pl_stats_keep(const char *line);
bool pl_ctx_open(void);
/* Everything offloaded goes, as at exit: every fd unmapped (the kernel
 * socket behind it from now on), endpoints closed, the context
 * destroyed, stats lines printed. At exit and before an exec. */
void pl_ctx_teardown(void);

/* pl_exec.c: sockets a previous image left open across exec
 * (QPS_PRELOAD_EXEC_FDS), offloaded again; from the constructor. */
void pl_exec_restore_env(void);

/* pl_fdtab.c */
#define PL_PENDING_JOINS 8

struct pl_sock {
	int refs;		/* atomic: table entries + calls inside; first */
	int fd;			/* the fd it was made on, for messages */
	pid_t pid;		/* the process whose context holds it */
	uint64_t id;		/* unique in the process: names it weakly */
	int kfd;		/* our duplicate of the kernel socket */
	struct qps_ep *ep;
	bool fresh;		/* unbound, unconnected: may fall back */
	bool fell_back;		/* left on the kernel: no stats line */
	bool mcast;		/* bound, joined or sent to a group */
	bool pktinfo;		/* IP_PKTINFO */
	bool ts, tsns;		/* SO_TIMESTAMP, SO_TIMESTAMPNS */
	bool rcvtimeo, sndtimeo;	/* a timeout is set: no restart */
	int rcvbuf;		/* SO_RCVBUF as getsockopt reads it */
	/* Memberships asked before bind (the kernel takes them, the core
	 * needs a port): joined by pl_joins_apply() once bound. */
	struct qps_mreq pending[PL_PENDING_JOINS];
	int npending;
	/* The sources those of them that are any-source block. */
	struct qps_mreq pblock[PL_PENDING_JOINS];
	int npblock;
	/* Made at the first fork that saw it (pl_fork.c): who serves it. */
	struct pl_share *share;
	/* Calls refused once data moved (pl_unsup.c), and the first. */
	int refused;		/* atomic */
	const char *refused_what;
	struct pl_sock *next, *prev;	/* pl_live list */
	int tab_refs;		/* pl_fdtab_fork_refs() scratch */
};

int pl_fdtab_init(void);
/* Type-stable socket memory (pl_fdtab.c): one reference, the caller's. */
struct pl_sock *pl_sock_alloc(void);
void pl_sock_release(struct pl_sock *s);
/* A reference for a call on @fd's socket, counted in pl_inside until
 * pl_put() gives it back. A socket shared across fork that another
 * process serves is the kernel socket's (NULL) on packet and verbs. */
struct pl_sock *pl_get(int fd);
/* As pl_get, whoever serves it: for dup and exec, which pass it on. */
struct pl_sock *pl_ref(int fd);
/* Calls of this thread inside an offloaded socket or the core (pl_get,
 * pl_wait.c, making a socket): an exit() from a signal handler that
 * interrupted one must not wait for it, nor take the core's locks. */
extern __thread int pl_inside __attribute__((tls_model("initial-exec")));
/* Gives back a reference that is not a call's (the table's, the maker's). */
void pl_unref(struct pl_sock *s);
/* Whether @fd is offloaded now (no reference: a hint). */
bool pl_mapped(int fd);
void pl_put(struct pl_sock *s);
/* pl_put() as a cancellation cleanup handler (pthread_cleanup_push): a
 * thread cancelled in a blocking call gives its reference back too. */
void pl_put_cleanup(void *s);
/* Maps @fd to @s, taking a reference; replaces nothing (-EEXIST). */
int pl_install(int fd, struct pl_sock *s);
/* Unmaps @fd; returns the table's reference, or NULL. */
struct pl_sock *pl_remove(int fd);
/* Makes @newfd (a duplicate of @oldfd just made) name @oldfd's socket. */
void pl_dup_map(int oldfd, int newfd);
/* pl_get of the socket @id, at @fd or, closed there, at any other fd
 * (an epoll entry lives as long as its file, not its number). */
struct pl_sock *pl_get_id(int fd, uint64_t id);
/* How many fds name @s. */
int pl_fdtab_count(const struct pl_sock *s);
/* The first mapped fd from @fd on, or -1. */
int pl_fdtab_next(int fd);
/* Unmaps every fd, for the exit teardown. */
void pl_fdtab_clear(void);
/* Reinitialises the lock in a fork child. */
void pl_fdtab_atfork_child(void);
void pl_fdtab_fork_refs(void);

/* pl_sock.c */
void pl_sock_offload(int fd, int type);
void pl_sock_free(struct pl_sock *s);
/* @m joined (@add) or left on the kernel socket @fd, on the interface
 * @iface / @ifindex; -errno. */
int pl_kernel_join(int fd, const struct qps_mreq *m, struct in_addr iface,
		   int ifindex, bool add);
/* The kernel socket is the endpoint's second source: what reaches the
 * host through other interfaces (loopback). */
int pl_sock_host_rx(struct qps_ep *ep);
/* Leaves @fd on the kernel: its socket was never bound or connected. */
void pl_sock_fallback(int fd, struct pl_sock *s, const char *why);
void pl_sock_line(struct pl_sock *s, char *buf, size_t size);
void pl_sock_atfork_child(void);
/* Wakes every call inside a live socket, waiting for none. */
void pl_live_wake_all(void);
/* Closes @s's endpoint (a fork releasing it); the socket stays mapped. */
void pl_sock_release_ep(struct pl_sock *s);
/* @fn on every socket not yet freed, under the list's lock. */
void pl_live_each(void (*fn)(struct pl_sock *s, void *arg), void *arg);
void pl_live_forget(struct pl_sock *s);
int pl_live_count(void);

/* pl_fork.c */
struct pl_share;
void pl_fork_prepare(void);
/* After fork, in the child: whether it inherited sockets it may take. */
bool pl_fork_atfork_child(void);
/* Around closing the endpoint of a socket a fork shared, in its owner:
 * what a taker needs is written down, then nobody owns it. */
void pl_fork_release_begin(struct pl_sock *s);
void pl_fork_release_end(struct pl_sock *s);
void pl_fork_unmap(struct pl_sock *s);
/* Whether @s was shared by a fork and this process serves it now. */
bool pl_fork_owned(const struct pl_sock *s);
/* Makes this process serve @s if nobody else does; true when it does. */
bool pl_fork_claim(struct pl_sock *s);
/* After a data call's result @r: -ECHILD on a socket another process
 * serves (emu) makes a blocking call wait, in steps of PL_FORK_STEP_MS,
 * until this process takes it (true: call again) or the socket's
 * timeout (@rx: SO_RCVTIMEO, else SO_SNDTIMEO; @deadline starts 0)
 * passes; a non-blocking one gets -EAGAIN. */
#define PL_FORK_STEP_MS 10
bool pl_fork_wait(struct pl_sock *s, long *r, int flags, bool rx,
		  int64_t *deadline);
static inline bool pl_fork_served(const struct pl_sock *s)
{
	/* Acquire: pairs with the release of s->pid after s->ep when a
	 * process takes the socket (pl_fork.c). */
	return __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE) == pl_self && s->ep;
}

/* pl_policy.c: whether a fresh socket stays offloaded at its bind, its
 * connect or first send with a destination, or a membership asked
 * first. NULL: it stays; else the reason it goes to the kernel, written
 * into @why. */
const char *pl_policy_bind(struct pl_sock *s, const struct sockaddr *a,
			   socklen_t len, char *why, size_t n);
const char *pl_policy_dest(struct pl_sock *s, const struct sockaddr *a,
			   socklen_t len, char *why, size_t n);
const char *pl_policy_join(struct pl_sock *s, struct in_addr group,
			   char *why, size_t n);
#define PL_WHY_MAX 128

/* pl_unsup.c: what qpsock cannot honour (docs/preload.md "What falls
 * back, what is refused"). setsockopt: true when @name asks for such a
 * thing; *@r is then the call's result (-errno). */
bool pl_unsup_setopt(struct pl_sock *s, int fd, int level, int name,
		     const void *val, socklen_t len, long *r);
/* The UDP_SEGMENT size @msg's control messages ask for: 0 when none,
 * -EINVAL when malformed (as the kernel). */
int pl_unsup_gso(const struct msghdr *msg);
/* A call refused on @s once data moved: counted for the stats line,
 * said once per socket; returns -@err. */
long pl_unsup_refuse(struct pl_sock *s, const char *what, int err);
/* syscall(SYS_io_uring_register): files an io_uring would use behind
 * our back. Returns libc's convention, as syscall() does. */
long pl_unsup_uring_register(long *a);

/* pl_mcast.c: a membership option (IPPROTO_IP) on an offloaded socket;
 * getsockopt of MCAST_MSFILTER or IP_MSFILTER. */
int pl_mcast_setopt(struct pl_sock *s, int fd, int name, const void *val,
		    socklen_t len);
int pl_mcast_getopt(struct pl_sock *s, int name, void *val, socklen_t *len);
/* The memberships asked before bind, now that it is bound. */
void pl_joins_apply(struct pl_sock *s);
/* Before a send or connect: an unbound socket with memberships is bound
 * to port 0 and joins, as the kernel's automatic bind does. */
void pl_joins_autobind(struct pl_sock *s);
static inline void pl_joins_before_tx(struct pl_sock *s)
{
	if (__builtin_expect(s->npending != 0, 0))
		pl_joins_autobind(s);
}

/* pl_signal.c. Around a blocking core call: clear, then after -EINTR,
 * whether the handler that ran asked for SA_RESTART. */
void pl_sig_clear(void);
bool pl_sig_restart(void);

/* pl_epoll.c: forget what we know of an epoll fd being closed, or of
 * every one in [@first, @last]. */
void pl_epset_close(int epfd);
void pl_epset_close_range(unsigned int first, unsigned int last);
void pl_epoll_atfork_child(void);
/* pl_opts.c: SO_RCVBUF's bytes (as getsockopt reads them) onto @ep's
 * queue. */
int pl_rcvbuf_apply(struct qps_ep *ep, int rcvbuf);
/* pl_epoll.c: @fd's socket @id fell back; its epoll entries follow. */
void pl_epoll_fell(int fd, uint64_t id);

/* The return value of an interposed call from a core result. */
static inline long pl_ret(long r)
{
	if (r >= 0)
		return r;
	/* The core's answer for a socket inherited across fork. */
	errno = r == -ECHILD ? EBADFD : (int)-r;
	return -1;
}

/* pl_recv.c, shared by read/readv/recvmmsg. */
ssize_t pl_recvmsg_sock(struct pl_sock *s, struct msghdr *msg, int flags);
ssize_t pl_sendmsg_sock(struct pl_sock *s, const struct msghdr *msg,
			int flags);

/* Fortified entries, declared here since the preload builds without
 * _FORTIFY_SOURCE (its headers would inline the plain calls). */
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen,
		       int flags, struct sockaddr *from, socklen_t *fromlen);
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		const sigset_t *mask, size_t fdslen);
void __chk_fail(void) __attribute__((noreturn));
/* glibc 2.35; declared here for older headers. */
int epoll_pwait2(int epfd, struct epoll_event *ev, int max,
		 const struct timespec *ts, const sigset_t *mask);
int fcntl64(int fd, int cmd, ...);

/* pl_wait.c */
int64_t pl_now_ns(void);
/* @s's busy-poll budget, microseconds. */
int pl_busy_us(struct pl_sock *s);
/* When spinning for @busy_us ends, capped by @deadline (ns, < 0: none);
 * 0: no spinning. */
int64_t pl_spin_end(int busy_us, int64_t deadline);
/* Progress the context once (while spinning). */
int pl_spin_progress(void);
void pl_cpu_relax(void);
/* Bracket a sleep in the kernel on readiness descriptors: true when
 * armed (pass it to the disarm). */
bool pl_sleep_arm(void);
void pl_sleep_disarm(bool armed);
/* The disarm of *@armed as a cancellation cleanup handler: the kernel
 * wait after the arm is a cancellation point. */
void pl_sleep_disarm_cleanup(void *armed);

#endif /* QPS_PRELOAD_H */
