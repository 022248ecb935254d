// SPDX-License-Identifier: MIT
/*
 * An offloaded fd left open across exec (docs/preload.md "exec"), run by
 * ctest on the kernel and under the preload with the same assertions: a
 * UDP socket bound, non-blocking and with SO_RCVTIMEO survives a failed
 * exec and an exec of this program, and in the new image it still has
 * its address, its flags and options, and receives; a close-on-exec
 * socket does not survive. (execl for the failed exec, execvp for the
 * other: two of the wrappers.)
 *
 * Environment: PL_TEST_ADDR, as test_preload_calls (127.0.0.1 unset).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int fails;

#define CHECK(cond) do { \
	if (!(cond)) { \
		printf("test_preload_exec: FAIL: %s (line %d, errno %d)\n", \
		       #cond, __LINE__, errno); \
		fails++; \
	} \
} while (0)

/* A datagram from a new socket to @fd's address, received on @fd. */
static void exchange(int fd)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	char buf[8];

	CHECK(getsockname(fd, (struct sockaddr *)&a, &l) == 0);
	CHECK(sendto(s, "exec", 4, 0, (struct sockaddr *)&a, sizeof(a)) == 4);
	CHECK(poll(&p, 1, 2000) == 1);
	CHECK(recv(fd, buf, sizeof(buf), MSG_DONTWAIT) == 4);
	close(s);
}

static int child(char **argv)
{
	int fd = atoi(argv[2]), cfd = atoi(argv[4]);
	struct sockaddr_in a;
	struct timeval tv;
	socklen_t l = sizeof(a);
	struct stat st;
	char buf[8];

	CHECK(getsockname(fd, (struct sockaddr *)&a, &l) == 0);
	CHECK(a.sin_port == htons((unsigned short)atoi(argv[3])));
	CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
	errno = 0;
	CHECK(recv(fd, buf, sizeof(buf), 0) == -1 && errno == EAGAIN);
	l = sizeof(tv);
	CHECK(getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &l) == 0);
	CHECK(tv.tv_sec == 2);
	exchange(fd);
	/* Closed by the exec; the number may be another file's now. */
	CHECK(fstat(cfd, &st) < 0 ||
	      st.st_ino != (ino_t)strtoull(argv[5], NULL, 10));
	CHECK(close(fd) == 0);
	if (fails)
		return 1;
	printf("test_preload_exec: the socket works after exec\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *addr = getenv("PL_TEST_ADDR") ? getenv("PL_TEST_ADDR") :
			   "127.0.0.1";
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct timeval tv = { 2, 0 };
	socklen_t l = sizeof(a);
	char sfd[16], sport[16], scfd[16], sino[32];
	struct stat st;
	int fd, cfd;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 6 && strcmp(argv[1], "child") == 0)
		return child(argv);
	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
		printf("test_preload_exec: PL_TEST_ADDR: not an IPv4 address\n");
		return 2;
	}
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	cfd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || cfd < 0 || bind(fd, (struct sockaddr *)&a, l) < 0 ||
	    bind(cfd, (struct sockaddr *)&a, l) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &l) < 0 ||
	    fstat(cfd, &st) < 0) {
		printf("test_preload_exec: FAIL: setup (errno %d)\n", errno);
		return 1;
	}
	CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	exchange(fd);
	/* A failed exec leaves both sockets working. */
	errno = 0;
	CHECK(execl("/nonexistent/test_preload_exec", "x", (char *)NULL) ==
	      -1 && errno == ENOENT);
	exchange(fd);
	exchange(cfd);
	if (fails)
		return 1;
	printf("test_preload_exec: the socket works after a failed exec\n");
	snprintf(sfd, sizeof(sfd), "%d", fd);
	snprintf(sport, sizeof(sport), "%u", ntohs(a.sin_port));
	snprintf(scfd, sizeof(scfd), "%d", cfd);
	snprintf(sino, sizeof(sino), "%llu", (unsigned long long)st.st_ino);
	/* argv[0], not /proc/self/exe: under valgrind that is the tool. */
	execvp(argv[0], (char *[]){ argv[0], "child", sfd, sport, scfd, sino,
				    NULL });
	printf("test_preload_exec: FAIL: exec (errno %d)\n", errno);
	return 1;
}
