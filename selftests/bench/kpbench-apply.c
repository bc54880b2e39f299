// SPDX-License-Identifier: GPL-2.0
/*
 * kpbench-apply - apply latency of a kpatch control-file command
 *
 * Usage: kpbench-apply CONTROL CMDFILE PROBE EXPECT
 *
 * Reads one command from CMDFILE, writes it to CONTROL in one write(2),
 * then reads PROBE until its first line is EXPECT (the patched function
 * returns the new value).  Prints "WRITE_NS ACTIVE_NS": CLOCK_MONOTONIC
 * nanoseconds from just before write(2) to its return, and to the first
 * read that showed the new value.  Exit 1 if anything fails.
 */

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	static char cmd[8192];
	char buf[64];
	long long t0, t1, t2;
	ssize_t n, len;
	int fd, pfd, tries;

	if (argc != 5) {
		fprintf(stderr, "usage: %s CONTROL CMDFILE PROBE EXPECT\n", argv[0]);
		return 1;
	}
	fd = open(argv[2], O_RDONLY);
	len = fd < 0 ? -1 : read(fd, cmd, sizeof(cmd) - 1);
	if (len <= 0) {
		perror(argv[2]);
		return 1;
	}
	close(fd);
	fd = open(argv[1], O_WRONLY);
	pfd = open(argv[3], O_RDONLY);
	if (fd < 0 || pfd < 0) {
		perror("open");
		return 1;
	}
	t0 = now();
	n = write(fd, cmd, len);
	t1 = now();
	if (n != len) {
		perror("write");
		return 1;
	}
	for (tries = 0; tries < 1000000; tries++) {
		n = pread(pfd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			break;
		buf[n] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		if (!strcmp(buf, argv[4])) {
			t2 = now();
			printf("%lld %lld\n", t1 - t0, t2 - t0);
			return 0;
		}
	}
	fprintf(stderr, "%s never read %s\n", argv[3], argv[4]);
	return 1;
}
