// SPDX-License-Identifier: GPL-2.0
/*
 * kpmove - user tasks for the kpatch selftests of moving tasks out of an
 * update's way (test-moving.sh, test-holds.sh) and for make bench.
 *
 * Usage:
 *   kpmove read FILE         read FILE once; print what it returned, or
 *                            "error NAME" (EINTR, ...), and the
 *                            milliseconds it took: "old 12"
 *   kpmove readpoll FILE MS  read FILE once, as "read" does, then
 *                            epoll_wait(2) MS milliseconds on an empty
 *                            epoll (made before the read); print both:
 *                            "read old 12", then "epoll_wait 0 1001" or
 *                            "epoll_wait error EINTR 40"
 *   kpmove poll MS           poll(2) no file for MS milliseconds; print
 *                            what it returned, or "error NAME", and the
 *                            milliseconds it took: "0 2001"
 *   kpmove now               print the monotonic clock, in milliseconds
 *   kpmove write FILE STRING write STRING to FILE in one write(2); print
 *                            "OK" or the errno's name, and the
 *                            milliseconds the write(2) took: "OK 310"
 *   kpmove hot N STOPFILE [NICE]
 *                            N processes (at NICE, default 0) call
 *                            getpid(2) in a loop, each
 *                            checking the answer against its own pid,
 *                            until STOPFILE exists; then print "calls=C
 *                            wrong=W" (W answers that were not the pid)
 *   kpmove nap STOPFILE      named "kpnap": poll(2) no file for 1 ms in a
 *                            loop until STOPFILE exists; then print
 *                            "naps=N"
 *   kpmove pipe STOPFILE     a bystander: call getpid(2), then write 1 MiB
 *                            in one write(2) to a pipe that a child drains
 *                            16 KiB a millisecond, in a loop until
 *                            STOPFILE exists; then print "writes=N
 *                            short=S eintr=E" (S writes that wrote less)
 *   kpmove epoll STOPFILE    a bystander: call getpid(2), then
 *                            epoll_wait(2) 50 ms on an empty epoll, in a
 *                            loop until STOPFILE exists; then print
 *                            "waits=N eintr=E"
 *
 * Built static (gcc -static) for the test guest.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *errname(int e)
{
	switch (e) {
	case EINTR:	return "EINTR";
	case EAGAIN:	return "EAGAIN";
	case ENOENT:	return "ENOENT";
	case EBUSY:	return "EBUSY";
	default:	return strerror(e);
	}
}

static int do_read(const char *file)
{
	char buf[64];
	long t0 = now_ms();
	ssize_t n;
	int fd;

	fd = open(file, O_RDONLY);
	if (fd < 0) {
		printf("open: %s\n", errname(errno));
		return 2;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0) {
		printf("error %s %ld\n", errname(errno), now_ms() - t0);
		return 1;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	printf("%s %ld\n", buf, now_ms() - t0);
	return 0;
}

static int do_write(const char *file, const char *str)
{
	long t0, t1;
	ssize_t n;
	int fd;

	fd = open(file, O_WRONLY);
	if (fd < 0) {
		printf("open: %s\n", errname(errno));
		return 2;
	}
	t0 = now_ms();
	n = write(fd, str, strlen(str));
	t1 = now_ms();
	if (n < 0) {
		printf("%s %ld\n", errname(errno), t1 - t0);
		return 1;
	}
	printf("OK %ld\n", t1 - t0);
	return 0;
}

static int do_readpoll(const char *file, const char *ms)
{
	int ep = epoll_create1(0);
	struct epoll_event ev;
	long t0;
	int n, ret;

	if (ep < 0) {
		perror("epoll_create1");
		return 2;
	}
	printf("read ");
	ret = do_read(file);
	if (ret == 2)
		return ret;
	t0 = now_ms();
	n = epoll_wait(ep, &ev, 1, atoi(ms));
	if (n < 0) {
		printf("epoll_wait error %s %ld\n", errname(errno),
		       now_ms() - t0);
		return 1;
	}
	printf("epoll_wait %d %ld\n", n, now_ms() - t0);
	return ret;
}

static int do_poll(const char *ms)
{
	long t0 = now_ms();
	int n = poll(NULL, 0, atoi(ms));

	if (n < 0) {
		printf("error %s %ld\n", errname(errno), now_ms() - t0);
		return 1;
	}
	printf("%d %ld\n", n, now_ms() - t0);
	return 0;
}

/* The counts of the hot processes, shared with the parent. */
struct hot {
	long calls, wrong;
};

static int do_hot(int n, const char *stop, int nice)
{
	struct hot *h = mmap(NULL, n * sizeof(*h), PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct stat st;
	long calls = 0, wrong = 0;
	int i;

	if (h == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	for (i = 0; i < n; i++) {
		if (fork() == 0) {
			pid_t self = getpid();
			long k;

			if (nice && setpriority(PRIO_PROCESS, 0, nice))
				perror("setpriority");

			for (k = 0; ; k++) {
				if (syscall(SYS_getpid) != self)
					h[i].wrong++;
				h[i].calls++;
				if (!(k & 0xfff) && !stat(stop, &st))
					_exit(0);
			}
		}
	}
	while (wait(NULL) > 0)
		;
	for (i = 0; i < n; i++) {
		calls += h[i].calls;
		wrong += h[i].wrong;
	}
	printf("calls=%ld wrong=%ld\n", calls, wrong);
	return 0;
}

static int do_nap(const char *stop)
{
	struct stat st;
	long naps = 0;

	prctl(PR_SET_NAME, "kpnap", 0, 0, 0);
	while (stat(stop, &st)) {
		poll(NULL, 0, 1);
		naps++;
	}
	printf("naps=%ld\n", naps);
	return 0;
}

#define KPMOVE_PIPE_WRITE	(1024 * 1024)

static int do_pipe(const char *stop)
{
	static char buf[KPMOVE_PIPE_WRITE];
	long writes = 0, shorts = 0, eintr = 0;
	struct stat st;
	int fd[2];
	pid_t drain;

	if (pipe(fd)) {
		perror("pipe");
		return 2;
	}
	drain = fork();
	if (drain == 0) {
		close(fd[1]);
		while (read(fd[0], buf, 16384) > 0)
			poll(NULL, 0, 1);
		_exit(0);
	}
	close(fd[0]);
	while (stat(stop, &st)) {
		ssize_t n;

		syscall(SYS_getpid);
		n = write(fd[1], buf, sizeof(buf));
		writes++;
		if (n < 0 && errno == EINTR)
			eintr++;
		else if (n != sizeof(buf))
			shorts++;
	}
	close(fd[1]);
	waitpid(drain, NULL, 0);
	printf("writes=%ld short=%ld eintr=%ld\n", writes, shorts, eintr);
	return 0;
}

static int do_epoll(const char *stop)
{
	struct epoll_event ev;
	long waits = 0, eintr = 0;
	struct stat st;
	int ep = epoll_create1(0);

	if (ep < 0) {
		perror("epoll_create1");
		return 2;
	}
	while (stat(stop, &st)) {
		syscall(SYS_getpid);
		if (epoll_wait(ep, &ev, 1, 50) < 0 && errno == EINTR)
			eintr++;
		waits++;
	}
	printf("waits=%ld eintr=%ld\n", waits, eintr);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 3 && !strcmp(argv[1], "read"))
		return do_read(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "readpoll"))
		return do_readpoll(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "poll"))
		return do_poll(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "now")) {
		printf("%ld\n", now_ms());
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "write"))
		return do_write(argv[2], argv[3]);
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "hot"))
		return do_hot(atoi(argv[2]), argv[3],
			      argc == 5 ? atoi(argv[4]) : 0);
	if (argc == 3 && !strcmp(argv[1], "nap"))
		return do_nap(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "pipe"))
		return do_pipe(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "epoll"))
		return do_epoll(argv[2]);
	fprintf(stderr, "usage: kpmove read FILE | readpoll FILE MS | poll MS | now\n"
		"       kpmove write FILE STRING\n"
		"       kpmove hot N STOPFILE [NICE] | nap STOPFILE\n"
		"       kpmove pipe STOPFILE | epoll STOPFILE\n");
	return 2;
}
