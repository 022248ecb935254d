// SPDX-License-Identifier: MIT
/*
 * SA_RESTART. A blocking receive or send in the core returns -EINTR when a
 * signal handler ran while it slept, whatever the handler's flags (the
 * core cannot know them). The kernel restarts such a socket call when the
 * handler has SA_RESTART and the socket has no timeout for it. To know
 * which signal interrupted, the handlers the program installs are
 * wrapped: a trampoline notes the signal in a thread-local variable and
 * calls the program's handler; sigaction() reads back the program's own
 * action. A handler installed before the library loaded, or with a raw
 * syscall, is not wrapped, and its signal gives EINTR.
 */
#include <string.h>

#include "preload.h"

/* The program's actions for wrapped signals. Written by sigaction(),
 * read by the trampoline: a signal that arrives while its action is being
 * changed may run the old handler, as with the kernel's own update. */
static struct sigaction app_act[NSIG];
static bool wrapped[NSIG];
static __thread int last_sig __attribute__((tls_model("initial-exec")));

static void trampoline(int sig, siginfo_t *info, void *uctx)
{
	const struct sigaction *a = &app_act[sig];

	last_sig = sig;
	if (a->sa_flags & SA_SIGINFO)
		a->sa_sigaction(sig, info, uctx);
	else
		a->sa_handler(sig);
}

static bool is_handler(const struct sigaction *act)
{
	return !(act->sa_flags & SA_SIGINFO) ?
	       act->sa_handler != SIG_IGN && act->sa_handler != SIG_DFL :
	       act->sa_sigaction != NULL;
}

/* Faults are not wrapped: they never interrupt a socket call, and
 * sanitizers and JITs want their handlers called directly. */
static bool wrappable(int sig, const struct sigaction *act)
{
	if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL ||
	    sig == SIGFPE || sig == SIGTRAP)
		return false;
	return act && is_handler(act);
}

PL_EXPORT int sigaction(int sig, const struct sigaction *act,
			struct sigaction *old)
{
	struct sigaction mine, prev, prev_app;
	bool wrap, was;
	int r;

	if (!pl_sym_ready()) {
		errno = EAGAIN;
		return -1;
	}
	if (sig <= 0 || sig >= NSIG)
		return pl_real.sigaction(sig, act, old);
	wrap = wrappable(sig, act);
	was = wrapped[sig];
	prev_app = app_act[sig];
	if (wrap) {
		mine = *act;
		mine.sa_flags |= SA_SIGINFO;
		mine.sa_sigaction = trampoline;
		/* The program's action is in place before the kernel can
		 * call the trampoline for it. */
		app_act[sig] = *act;
	}
	r = pl_real.sigaction(sig, wrap ? &mine : act, &prev);
	if (r < 0) {
		app_act[sig] = prev_app;
		return r;
	}
	if (old)
		*old = was && prev.sa_sigaction == trampoline ? prev_app : prev;
	if (act)
		wrapped[sig] = wrap;
	return 0;
}

/* glibc's signal() has BSD semantics, and calls its own sigaction
 * directly, past ours: the same here, through ours. */
PL_EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	struct sigaction a, o;

	memset(&a, 0, sizeof(a));
	a.sa_handler = h;
	sigemptyset(&a.sa_mask);
	if (sig > 0 && sig < NSIG)
		sigaddset(&a.sa_mask, sig);
	a.sa_flags = SA_RESTART;
	if (sigaction(sig, &a, &o) < 0)
		return SIG_ERR;
	return o.sa_handler;
}

/* glibc's siginterrupt() also calls its own sigaction past ours, and
 * would change the trampoline's flags, not the program's action that
 * pl_sig_restart() reads. */
PL_EXPORT int siginterrupt(int sig, int interrupt)
{
	struct sigaction a;

	if (sigaction(sig, NULL, &a) < 0)
		return -1;
	if (interrupt)
		a.sa_flags &= ~SA_RESTART;
	else
		a.sa_flags |= SA_RESTART;
	return sigaction(sig, &a, NULL);
}

void pl_sig_clear(void)
{
	last_sig = 0;
}

bool pl_sig_restart(void)
{
	int sig = last_sig;

	return sig > 0 && sig < NSIG && wrapped[sig] &&
	       (app_act[sig].sa_flags & SA_RESTART);
}
