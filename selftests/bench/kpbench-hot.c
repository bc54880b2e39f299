// SPDX-License-Identifier: GPL-2.0
/*
 * kpbench-hot - how long kpatch and livepatch take to switch a function,
 * for make bench's hot function (guest-bench.sh, hot_guest)
 *
 * Usage:
 *   kpbench-hot write FILE STRING
 *	write STRING to FILE (kpatch's control file) in one write(2);
 *	print "OK NS" or "ERRNO NS": the nanoseconds the write(2) took
 *   kpbench-hot enable KO DIR [PARAMS]
 *	load the livepatch module KO with PARAMS (finit_module(2)), then
 *	read DIR/transition every millisecond until it reads 0; print
 *	"OK NS END": NS from before finit_module(2) to that read, END the
 *	clock then
 *   kpbench-hot disable DIR
 *	write 0 to DIR/enabled, then as above; DIR gone also ends the wait
 *	(the kernel frees a disabled patch once its transition is over)
 *
 * CLOCK_MONOTONIC, guest ns.  kpatch's write(2) returns once the patch is
 * in effect for every task; livepatch's patch is in effect for every task
 * once the transition is over, which its sysfs file tells.  Exit 1 if
 * anything fails (the first word then says what).
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* How long livepatch's transition may take: 300 s of guest time. */
#define WAIT_NS		300000000000LL

static long long now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static const char *errname(int e)
{
	switch (e) {
	case EBUSY:	return "EBUSY";
	case EAGAIN:	return "EAGAIN";
	case EINTR:	return "EINTR";
	case EINVAL:	return "EINVAL";
	case EEXIST:	return "EEXIST";
	case ENOENT:	return "ENOENT";
	case ENOMEM:	return "ENOMEM";
	default:	return "ERROR";
	}
}

static int write_file(const char *file, const char *str, long long *ns)
{
	long long t0;
	ssize_t n;
	int fd, e;

	fd = open(file, O_WRONLY);
	if (fd < 0)
		return errno;
	t0 = now();
	n = write(fd, str, strlen(str));
	e = errno;
	*ns = now() - t0;
	close(fd);
	return n < 0 ? e : 0;
}

/*
 * Wait until DIR/transition reads 0, or, if @gone_ok, DIR is gone; return
 * the time then, or -1 once WAIT_NS have passed since @t0.
 */
static long long transition_over(const char *dir, int gone_ok, long long t0)
{
	const struct timespec ms = { 0, 1000000 };
	char path[512], buf[8];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/transition", dir);
	while (now() - t0 < WAIT_NS) {
		fd = open(path, O_RDONLY);
		if (fd < 0 && errno == ENOENT && gone_ok)
			return now();
		n = fd < 0 ? -1 : read(fd, buf, sizeof(buf));
		if (fd >= 0)
			close(fd);
		if (n > 0 && buf[0] == '0')
			return now();
		nanosleep(&ms, NULL);
	}
	return -1;
}

int main(int argc, char **argv)
{
	const char *dir;
	char path[512];
	long long t0, t1, ns;
	int fd, e, disable = 0;

	if (argc == 4 && !strcmp(argv[1], "write")) {
		e = write_file(argv[2], argv[3], &ns);
		printf("%s %lld\n", e ? errname(e) : "OK", ns);
		return !!e;
	}
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "enable")) {
		fd = open(argv[2], O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			printf("open %s\n", errname(errno));
			return 1;
		}
		dir = argv[3];
		t0 = now();
		if (syscall(SYS_finit_module, fd, argc == 5 ? argv[4] : "", 0)) {
			printf("%s %lld\n", errname(errno), now() - t0);
			return 1;
		}
		close(fd);
	} else if (argc == 3 && !strcmp(argv[1], "disable")) {
		dir = argv[2];
		disable = 1;
		snprintf(path, sizeof(path), "%s/enabled", dir);
		t0 = now();
		e = write_file(path, "0", &ns);
		if (e) {
			printf("%s %lld\n", errname(e), ns);
			return 1;
		}
	} else {
		fprintf(stderr, "usage: kpbench-hot write FILE STRING | %s\n",
			"enable KO DIR [PARAMS] | disable DIR");
		return 2;
	}
	t1 = transition_over(dir, disable, t0);
	if (t1 < 0) {
		printf("TIMEOUT %lld\n", now() - t0);
		return 1;
	}
	printf("OK %lld %lld\n", t1 - t0, t1);
	return 0;
}
