// SPDX-License-Identifier: GPL-2.0
/*
 * kpctl - write a string to a file in one write(2), for the kpatch
 * selftests.
 *
 * Usage: kpctl [--nocap] [--fail-nth N] FILE STRING
 *
 * Writes STRING (without adding a newline) to FILE with a single write(2)
 * and prints "OK" if the whole string was accepted, or the name of the
 * errno write(2) failed with (EINVAL, EBUSY, ...; the plain number if the
 * name is not known).  Exit status: 0 on success, 1 if write(2) failed, 2
 * on any other problem (bad usage, open(2) or dropping the capability
 * failed; the output then starts with "open:", "capset:", ... so it never
 * looks like a write(2) result).
 *
 * --nocap first drops CAP_SYS_MODULE from the bounding, permitted,
 * effective and inheritable sets while staying uid 0, so the write is
 * made by root without CAP_SYS_MODULE.
 *
 * --fail-nth N makes the N-th fault-injectable allocation (slab or page)
 * of the write(2) fail, through /proc/thread-self/fail-nth (a kernel with
 * CONFIG_FAULT_INJECTION, see fault-injection.rst), and prints a second
 * line: "fail-nth: injected" if that allocation was reached and failed,
 * "fail-nth: not reached" if the write made fewer than N allocations.
 *
 * Built static (gcc -static) for the test guest, with raw syscalls
 * instead of libcap.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ERRNO_NAME(e) { e, #e }

static const struct {
	int err;
	const char *name;
} errno_names[] = {
	ERRNO_NAME(EPERM), ERRNO_NAME(ENOENT), ERRNO_NAME(ESRCH),
	ERRNO_NAME(EINTR), ERRNO_NAME(EIO), ERRNO_NAME(ENXIO),
	ERRNO_NAME(E2BIG), ERRNO_NAME(ENOEXEC), ERRNO_NAME(EBADF),
	ERRNO_NAME(EAGAIN), ERRNO_NAME(ENOMEM), ERRNO_NAME(EACCES),
	ERRNO_NAME(EFAULT), ERRNO_NAME(EBUSY), ERRNO_NAME(EEXIST),
	ERRNO_NAME(ENODEV), ERRNO_NAME(ENOTDIR), ERRNO_NAME(EISDIR),
	ERRNO_NAME(EINVAL), ERRNO_NAME(ENFILE), ERRNO_NAME(EMFILE),
	ERRNO_NAME(ENOSPC), ERRNO_NAME(ESPIPE), ERRNO_NAME(EROFS),
	ERRNO_NAME(EPIPE), ERRNO_NAME(ERANGE), ERRNO_NAME(EDEADLK),
	ERRNO_NAME(ENAMETOOLONG), ERRNO_NAME(ENOTEMPTY),
	ERRNO_NAME(ELOOP), ERRNO_NAME(ENODATA), ERRNO_NAME(EOVERFLOW),
	ERRNO_NAME(EILSEQ), ERRNO_NAME(EOPNOTSUPP), ERRNO_NAME(ETIMEDOUT),
	ERRNO_NAME(EALREADY), ERRNO_NAME(EINPROGRESS), ERRNO_NAME(ECANCELED),
	ERRNO_NAME(EKEYREJECTED),
};

static void print_errno(const char *prefix, int err)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(errno_names); i++) {
		if (errno_names[i].err == err) {
			printf("%s%s\n", prefix, errno_names[i].name);
			return;
		}
	}
	printf("%s%d\n", prefix, err);
}

static int drop_cap_sys_module(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
		.pid = 0,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	unsigned int idx = CAP_TO_INDEX(CAP_SYS_MODULE);
	unsigned int mask = CAP_TO_MASK(CAP_SYS_MODULE);

	if (prctl(PR_CAPBSET_DROP, CAP_SYS_MODULE, 0, 0, 0)) {
		print_errno("prctl: ", errno);
		return -1;
	}

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data)) {
		print_errno("capget: ", errno);
		return -1;
	}
	data[idx].effective &= ~mask;
	data[idx].permitted &= ~mask;
	data[idx].inheritable &= ~mask;
	if (syscall(SYS_capset, &hdr, data)) {
		print_errno("capset: ", errno);
		return -1;
	}

	/* Make sure it is really gone before claiming anything. */
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data)) {
		print_errno("capget: ", errno);
		return -1;
	}
	if ((data[idx].effective | data[idx].permitted) & mask ||
	    prctl(PR_CAPBSET_READ, CAP_SYS_MODULE, 0, 0, 0) != 0) {
		printf("capset: CAP_SYS_MODULE still set\n");
		return -1;
	}
	return 0;
}

#define FAIL_NTH "/proc/thread-self/fail-nth"

/*
 * fail-nth of this thread, through @fd (opened beforehand: once armed,
 * opening a file could use up the failure itself): arm it with @nth > 0,
 * disarm it with @nth == 0 after reading it, which gives 0 if the armed
 * allocation failed.  Returns the value read (or @nth), or -1 after
 * printing why it failed.
 */
static long fail_nth(int fd, long nth)
{
	char buf[32];
	ssize_t n;
	long val;

	if (nth) {
		n = snprintf(buf, sizeof(buf), "%ld", nth);
		if (pwrite(fd, buf, n, 0) < 0) {
			print_errno("fail-nth: ", errno);
			return -1;
		}
		return nth;
	}
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n < 0) {
		print_errno("fail-nth: ", errno);
		return -1;
	}
	buf[n] = '\0';
	val = strtol(buf, NULL, 10);
	if (val && pwrite(fd, "0", 1, 0) < 0) {
		print_errno("fail-nth: ", errno);
		return -1;
	}
	return val;
}

static void print_usage(void)
{
	fprintf(stderr, "usage: kpctl [--nocap] [--fail-nth N] FILE STRING\n");
}

int main(int argc, char **argv)
{
	const char *file, *str;
	long nth = 0;
	bool armed;
	size_t len;
	ssize_t ret;
	int argi = 1;
	int err = 0;
	int nfd = -1;
	int fd;

	for (; argi < argc && !strncmp(argv[argi], "--", 2); argi++) {
		if (!strcmp(argv[argi], "--nocap")) {
			if (drop_cap_sys_module())
				return 2;
		} else if (!strcmp(argv[argi], "--fail-nth") &&
			   argi + 1 < argc) {
			nth = strtol(argv[++argi], NULL, 10);
			if (nth <= 0) {
				print_usage();
				return 2;
			}
		} else {
			print_usage();
			return 2;
		}
	}
	if (argc - argi != 2) {
		print_usage();
		return 2;
	}
	file = argv[argi];
	str = argv[argi + 1];
	len = strlen(str);

	fd = open(file, O_WRONLY);
	if (fd < 0) {
		print_errno("open: ", errno);
		return 2;
	}

	/* Armed last, so that only the write(2) itself can use it up. */
	armed = nth > 0;
	if (armed) {
		nfd = open(FAIL_NTH, O_RDWR);
		if (nfd < 0 || fail_nth(nfd, nth) < 0) {
			if (nfd < 0)
				print_errno("fail-nth: ", errno);
			close(fd);
			return 2;
		}
	}
	ret = write(fd, str, len);
	if (ret < 0)
		err = errno;
	if (armed) {
		nth = fail_nth(nfd, 0);
		close(nfd);
	}
	close(fd);

	if (err)
		print_errno("", err);
	else if ((size_t)ret != len)
		printf("short write: %zd of %zu bytes\n", ret, len);
	else
		printf("OK\n");
	if (armed && nth == 0)
		printf("fail-nth: injected\n");
	else if (armed && nth > 0)
		printf("fail-nth: not reached\n");
	else if (armed)
		return 2;
	return err || (size_t)ret != len ? 1 : 0;
}
