// SPDX-License-Identifier: GPL-2.0
/*
 * kpbench-tasks - many user tasks, for make bench's busy tasks and many
 * tasks (guest-bench.sh)
 *
 * Usage:
 *   kpbench-tasks read FILE N
 *	N threads each read FILE once (pread(2) at offset 0 of one shared
 *	descriptor: a read(2) of a shared file would take its position
 *	lock, one reader at a time); once every one is done, print
 *	"new=A old=B error=E": how many read "new", how many "old", how
 *	many anything else.  For kpatch_test_move's read, which waits in
 *	kpatch_test_move_read_old() (or its replacement _new) while "hold"
 *	is 1.
 *   kpbench-tasks sleep N
 *	N threads each sleep in futex(2) until the process is killed;
 *	print "ready N" once every one is on its way into futex(2), and
 *	100 ms more have passed (on the guest's one CPU, the sleeps of the
 *	main thread let each run until it sleeps: none is left runnable,
 *	which kpatch's pre-walk would record).
 *
 * The threads are made with clone(2) (CLONE_THREAD, no pthreads), each
 * with a stack of KPBENCH_STACK bytes in one mapping, so that 100,000 of
 * them need no mapping each (vm.max_map_count) and little user memory.
 * They run nothing but a system call or two, and no signal handler: no
 * signal frame is ever pushed on those stacks (a fake signal, livepatch's
 * or kpatch's, pushes none).  Exit 1 and "error ..." if a thread cannot be
 * made; built static (gcc -static) for the guest.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define KPBENCH_STACK	2048
#define KPBENCH_FLAGS	(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | \
			 CLONE_THREAD | CLONE_SYSVSEM)

static int read_fd;
static unsigned int answers[3];	/* new, old, anything else */
static unsigned int done;
static unsigned int sleep_word, sleepers;

static int reader(void *arg)
{
	char buf[8];
	ssize_t n = pread(read_fd, buf, sizeof(buf), 0);
	int i = 2;

	if (n == 4 && !memcmp(buf, "new\n", 4))
		i = 0;
	else if (n == 4 && !memcmp(buf, "old\n", 4))
		i = 1;
	__atomic_fetch_add(&answers[i], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&done, 1, __ATOMIC_RELEASE);
	return 0;
}

static int sleeper(void *arg)
{
	__atomic_fetch_add(&sleepers, 1, __ATOMIC_RELEASE);
	for (;;)
		syscall(SYS_futex, &sleep_word, FUTEX_WAIT_PRIVATE, 0, NULL,
			NULL, 0);
	return 0;
}

/* Make @n threads running @fn; exit 1 if one cannot be made. */
static void spawn(unsigned int n, int (*fn)(void *))
{
	char *stacks;
	unsigned int i;

	stacks = mmap(NULL, (size_t)n * KPBENCH_STACK, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (stacks == MAP_FAILED) {
		printf("error mmap %s\n", strerror(errno));
		exit(1);
	}
	for (i = 0; i < n; i++) {
		if (clone(fn, stacks + (size_t)(i + 1) * KPBENCH_STACK,
			  KPBENCH_FLAGS, NULL) < 0) {
			printf("error clone %s after %u threads\n",
			       strerror(errno), i);
			fflush(stdout);
			exit(1);
		}
	}
}

int main(int argc, char **argv)
{
	const struct timespec tick = { 0, 10000000 };
	unsigned int n;

	if (argc == 4 && !strcmp(argv[1], "read")) {
		n = strtoul(argv[3], NULL, 0);
		read_fd = open(argv[2], O_RDONLY);
		if (read_fd < 0) {
			printf("error open %s\n", strerror(errno));
			return 1;
		}
		spawn(n, reader);
		while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) < n)
			nanosleep(&tick, NULL);
		printf("new=%u old=%u error=%u\n", answers[0], answers[1],
		       answers[2]);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "sleep")) {
		n = strtoul(argv[2], NULL, 0);
		spawn(n, sleeper);
		while (__atomic_load_n(&sleepers, __ATOMIC_ACQUIRE) < n)
			nanosleep(&tick, NULL);
		for (n = 0; n < 10; n++)
			nanosleep(&tick, NULL);
		printf("ready %u\n", sleepers);
		fflush(stdout);
		for (;;)
			pause();
	}
	fprintf(stderr, "usage: kpbench-tasks read FILE N | sleep N\n");
	return 2;
}
