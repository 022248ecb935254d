// SPDX-License-Identifier: MIT
/*
 * qps_soak - several processes x threads x endpoints on one emu wire,
 * unicast (connected and not) and multicast with fan-out, mixed
 * priorities, single sends, QPS_MSG_MORE runs and qps_sendmmsg batches,
 * blocking and non-blocking endpoints, for --seconds; then every flow is
 * reconciled (sent = received + counted drops), duplicates, reordering
 * and corruption are counted, and the RSS growth of every process after
 * the warm-up is checked. Exit 0 only when all of it holds.
 *
 *   qps_soak [--seconds S] [--procs P] [--threads T] [--groups G]
 *            [--fanout K] [--rate N] [--max-len B] [--rx-depth D]
 *            [--rcvbuf N] [--warmup S] [--rss-limit-kb KB] [--seed X]
 *            [--wire NAME] [--json] [--inject loss|dup|reorder|corrupt]
 *
 * --inject makes process 0 commit one fault (self-test: the run must fail).
 *
 * The parent names the wire, forks the workers (qps_soak_worker.c) and
 * drives them through pipes: READY (ports attached) -> GO -> SENT (all
 * sends flushed) -> DRAIN -> results. It never touches the wire itself,
 * except to unlink it if a worker died before detaching.
 */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qps_soak.h"

static pid_t soak_pids[SOAK_MAX_PROCS];
static unsigned int soak_npids;
static char soak_shm[64];

/* All @len bytes through write(2) (@out) or read(2), across EINTR and
 * short transfers; -EPIPE on end of file or any other error. A write only
 * reads @b. */
static int io_all(int fd, char *b, size_t len, bool out)
{
	while (len) {
		ssize_t r = out ? write(fd, b, len) : read(fd, b, len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EPIPE;
		b += r;
		len -= (size_t)r;
	}
	return 0;
}

int soak_write_all(int fd, const void *buf, size_t len)
{
	return io_all(fd, (char *)buf, len, true);
}

int soak_read_all(int fd, void *buf, size_t len)
{
	return io_all(fd, buf, len, false);
}

static void kill_workers(void)
{
	unsigned int i;

	for (i = 0; i < soak_npids; i++)
		if (soak_pids[i] > 0)
			kill(soak_pids[i], SIGKILL);
}

/* A run that does not finish in time is a hang: end it, say so. */
static void on_alarm(int sig)
{
	static const char msg[] = "qps_soak: timed out: a worker hangs\n";

	(void)sig;
	kill_workers();
	shm_unlink(soak_shm);
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(2);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: qps_soak [--seconds S] [--procs P] [--threads T] "
		"[--groups G] [--fanout K]\n"
		"                [--rate N] [--max-len B] [--rx-depth D] "
		"[--rcvbuf N] [--warmup S]\n"
		"                [--rss-limit-kb KB] [--seed X] [--wire NAME] "
		"[--json]\n"
		"                [--inject loss|dup|reorder|corrupt]\n");
}

static int parse_uint(const char *s, unsigned int lo, unsigned int hi,
		      unsigned int *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || *end || end == s || v < lo || v > hi)
		return -EINVAL;
	*out = (unsigned int)v;
	return 0;
}

/* The numeric options: name, bounds, where the value goes. */
struct soak_uopt {
	const char *name;
	unsigned int lo, hi;
	size_t off;
};

#define SOAK_UOPT(n, lo, hi, field) \
	{ n, lo, hi, offsetof(struct soak_cfg, field) }

static const struct soak_uopt soak_uopts[] = {
	SOAK_UOPT("seconds", 1, 86400, seconds),
	SOAK_UOPT("procs", 2, SOAK_MAX_PROCS, procs),
	SOAK_UOPT("threads", 1, SOAK_MAX_THREADS, threads),
	SOAK_UOPT("groups", 1, SOAK_MAX_GROUPS, groups),
	SOAK_UOPT("fanout", 1, SOAK_MAX_FANOUT, fanout),
	SOAK_UOPT("rate", 0, 10000000, rate),
	SOAK_UOPT("max-len", 0, SOAK_MAX_LEN, max_len),
	SOAK_UOPT("rx-depth", 16, 4096, rx_depth),
	SOAK_UOPT("rcvbuf", 1, 4096, rcvbuf),
	SOAK_UOPT("warmup", 0, 86400, warmup),
	SOAK_UOPT("rss-limit-kb", 0, 1u << 30, rss_limit_kb),
};

#define SOAK_NUOPT (sizeof(soak_uopts) / sizeof(soak_uopts[0]))
enum {
	SOAK_OPT_SEED = SOAK_NUOPT, SOAK_OPT_WIRE, SOAK_OPT_JSON,
	SOAK_OPT_INJECT
};

static const char *const soak_inject_names[] = {
	"none", "loss", "dup", "reorder", "corrupt",
};

static int parse_args(int argc, char **argv, struct soak_cfg *cfg)
{
	struct option opts[SOAK_NUOPT + 5];
	bool warm_set = false;
	unsigned int i, v;
	int c;

	memset(opts, 0, sizeof(opts));
	for (i = 0; i < SOAK_NUOPT; i++)
		opts[i] = (struct option){ soak_uopts[i].name,
					   required_argument, NULL, (int)i };
	opts[i++] = (struct option){ "seed", required_argument, NULL,
				     SOAK_OPT_SEED };
	opts[i++] = (struct option){ "wire", required_argument, NULL,
				     SOAK_OPT_WIRE };
	opts[i++] = (struct option){ "json", no_argument, NULL,
				     SOAK_OPT_JSON };
	opts[i] = (struct option){ "inject", required_argument, NULL,
				   SOAK_OPT_INJECT };

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c >= 0 && (unsigned int)c < SOAK_NUOPT) {
			const struct soak_uopt *u = &soak_uopts[c];

			if (parse_uint(optarg, u->lo, u->hi, &v) < 0) {
				fprintf(stderr, "qps_soak: --%s wants %u..%u\n",
					u->name, u->lo, u->hi);
				return -EINVAL;
			}
			*(unsigned int *)((char *)cfg + u->off) = v;
			warm_set |= !strcmp(u->name, "warmup");
		} else if (c == SOAK_OPT_SEED) {
			if (parse_uint(optarg, 0, 0xffffffffu, &v) < 0)
				return -EINVAL;
			cfg->seed = v;
		} else if (c == SOAK_OPT_WIRE) {
			if (strlen(optarg) >= sizeof(cfg->wire))
				return -EINVAL;
			snprintf(cfg->wire, sizeof(cfg->wire), "%s", optarg);
		} else if (c == SOAK_OPT_JSON) {
			cfg->json = true;
		} else if (c == SOAK_OPT_INJECT) {
			for (v = 0; v <= SOAK_INJ_CORRUPT; v++)
				if (!strcmp(optarg, soak_inject_names[v]))
					break;
			if (v > SOAK_INJ_CORRUPT)
				return -EINVAL;
			cfg->inject = v;
		} else {
			return -EINVAL;
		}
	}
	if (optind != argc)
		return -EINVAL;
	if (cfg->procs * (1 + cfg->groups) > 16) {
		fprintf(stderr, "qps_soak: procs x (1 + groups) must be <= 16 "
			"(emu ports per wire)\n");
		return -EINVAL;
	}
	if (cfg->fanout > 1 && cfg->groups < 1)
		return -EINVAL;
	/* A quarter of the run, 1 to 30 s; a 1 s run has none. */
	if (!warm_set)
		cfg->warmup = cfg->seconds < 2 ? 0 :
			      cfg->seconds < 8 ? 1 :
			      cfg->seconds / 4 < 30 ? cfg->seconds / 4 : 30;
	if (cfg->warmup >= cfg->seconds) {
		fprintf(stderr, "qps_soak: --warmup must be below --seconds\n");
		return -EINVAL;
	}
	return 0;
}

struct soak_pipes {
	int cmd[2];
	int res[2];
};

static int fork_workers(const struct soak_cfg *cfg,
			const struct soak_topo *topo, struct soak_pipes *pp)
{
	unsigned int p, q;

	for (p = 0; p < cfg->procs; p++) {
		pid_t pid;

		if (pipe(pp[p].cmd) < 0 || pipe(pp[p].res) < 0)
			return -errno;
		fflush(NULL);
		pid = fork();
		if (pid < 0)
			return -errno;
		if (pid == 0) {
			for (q = 0; q < p; q++) {
				close(pp[q].cmd[1]);
				close(pp[q].res[0]);
			}
			close(pp[p].cmd[1]);
			close(pp[p].res[0]);
			soak_worker(cfg, topo, p, pp[p].cmd[0], pp[p].res[1]);
		}
		soak_pids[soak_npids++] = pid;
		close(pp[p].cmd[0]);
		close(pp[p].res[1]);
	}
	return 0;
}

/* Wait for message @want from every worker; a worker that sends its
 * results instead failed (they are read into @w). */
static int gather(const struct soak_cfg *cfg, struct soak_pipes *pp,
		  char want, struct soak_wres **w)
{
	unsigned int p;
	int ret = 0;

	for (p = 0; p < cfg->procs; p++) {
		char m = 0;

		if (soak_read_all(pp[p].res[0], &m, 1) < 0) {
			fprintf(stderr, "qps_soak: worker %u died\n", p);
			ret = -EPIPE;
			continue;
		}
		if (m == want && want != SOAK_MSG_RESULT)
			continue;
		if (m == SOAK_MSG_RESULT &&
		    soak_read_all(pp[p].res[0], w[p], sizeof(*w[p])) == 0) {
			if (want == SOAK_MSG_RESULT)
				continue;
			fprintf(stderr, "qps_soak: worker %u: %s\n", p,
				w[p]->why);
		}
		ret = -EPROTO;
	}
	return ret;
}

static int command(const struct soak_cfg *cfg, struct soak_pipes *pp, char c)
{
	unsigned int p;

	for (p = 0; p < cfg->procs; p++)
		if (soak_write_all(pp[p].cmd[1], &c, 1) < 0)
			return -EPIPE;
	return 0;
}

static int reap(void)
{
	unsigned int i;
	int bad = 0;

	for (i = 0; i < soak_npids; i++) {
		int st;

		if (waitpid(soak_pids[i], &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st)) {
			fprintf(stderr, "qps_soak: worker %u ended badly "
				"(status 0x%x)\n", i, st);
			bad = 1;
		}
		soak_pids[i] = 0;
	}
	return bad;
}

int main(int argc, char **argv)
{
	static struct soak_topo topo;
	struct soak_cfg cfg = {
		.procs = 3, .threads = 2, .groups = 2, .fanout = 2,
		.seconds = 60, .rate = 10000, .max_len = 512,
		.rx_depth = 512, .rcvbuf = 256, .rss_limit_kb = 2048,
		.seed = 1,
	};
	struct soak_pipes pp[SOAK_MAX_PROCS];
	struct soak_wres *w[SOAK_MAX_PROCS];
	unsigned int p;
	int ret, bad;
	bool pass;

	if (parse_args(argc, argv, &cfg) < 0) {
		usage();
		return 2;
	}
	if (!cfg.wire[0])
		snprintf(cfg.wire, sizeof(cfg.wire), "soak-%d", (int)getpid());
	snprintf(soak_shm, sizeof(soak_shm), "/qpsock-emu-%s", cfg.wire);
	soak_topo_build(&cfg, &topo);
	for (p = 0; p < cfg.procs; p++) {
		w[p] = calloc(1, sizeof(*w[p]));
		if (!w[p])
			return 2;
	}
	signal(SIGALRM, on_alarm);
	signal(SIGPIPE, SIG_IGN);
	alarm(cfg.seconds + 120);

	ret = fork_workers(&cfg, &topo, pp);
	if (!ret)
		ret = gather(&cfg, pp, SOAK_MSG_READY, w);
	if (!ret)
		ret = command(&cfg, pp, SOAK_CMD_GO);
	if (!ret)
		ret = gather(&cfg, pp, SOAK_MSG_SENT, w);
	if (!ret)
		ret = command(&cfg, pp, SOAK_CMD_DRAIN);
	if (!ret)
		ret = gather(&cfg, pp, SOAK_MSG_RESULT, w);
	if (ret)
		kill_workers();
	bad = reap();
	alarm(0);
	/* Normally the last port's detach unlinked it already. */
	shm_unlink(soak_shm);
	if (ret) {
		fprintf(stderr, "qps_soak: run failed (%s)\n", strerror(-ret));
		return 1;
	}
	for (p = 0; p < cfg.procs; p++)
		if (w[p]->status) {
			fprintf(stderr, "qps_soak: worker %u: %s\n", p,
				w[p]->why);
			bad = 1;
		}
	pass = soak_report(&cfg, &topo, (const struct soak_wres *const *)w);
	for (p = 0; p < cfg.procs; p++)
		free(w[p]);
	return pass && !bad ? 0 : 1;
}
