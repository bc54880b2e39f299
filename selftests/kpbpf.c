// SPDX-License-Identifier: GPL-2.0
/*
 * kpbpf - count the calls of a kernel function with BPF fentry and fexit
 * programs, for the kpatch selftests (test-bpf.sh).
 *
 * Usage: kpbpf hold FUNC PROG [PROG]
 *        kpbpf count MAP_ID
 *
 * hold finds FUNC (a function of vmlinux) in /sys/kernel/btf/vmlinux and
 * makes an array map of two counters.  For each PROG, in the order
 * given, it loads a BPF_PROG_TYPE_TRACING program -- PROG "fentry": for
 * BPF_TRACE_FENTRY, adding one to counter 0; "fexit": for
 * BPF_TRACE_FEXIT, adding one to counter 1 -- and attaches it with
 * BPF_LINK_CREATE.  Then it prints "OK MAP_ID" and holds the links until
 * SIGUSR1, then closes them, which detaches the programs before close(2)
 * returns, prints "detached" and holds the map until it is killed.  On
 * failure it prints the step and the errno's name ("link fentry: EBUSY")
 * and exits 1 (2: bad usage, or FUNC not found in BTF).
 *
 * count prints the two counters of map MAP_ID: "fentry N fexit M".
 *
 * Built static (gcc -static) for the test guest, with the raw bpf(2)
 * system call instead of libbpf.
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/types.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ERRNO_NAME(e) { e, #e }

#define BTF_VMLINUX	"/sys/kernel/btf/vmlinux"
#define BTF_MAGIC_LE	0xeb9f
#define BTF_FUNC_KIND	12
#define ENOTSUPP_KERNEL	524	/* the kernel's ENOTSUPP, which bpf(2) can return */

static const struct {
	int err;
	const char *name;
} errno_names[] = {
	ERRNO_NAME(EPERM), ERRNO_NAME(ENOENT), ERRNO_NAME(ESRCH),
	ERRNO_NAME(EINTR), ERRNO_NAME(EIO), ERRNO_NAME(E2BIG),
	ERRNO_NAME(EBADF), ERRNO_NAME(EAGAIN), ERRNO_NAME(ENOMEM),
	ERRNO_NAME(EACCES), ERRNO_NAME(EFAULT), ERRNO_NAME(EBUSY),
	ERRNO_NAME(EEXIST), ERRNO_NAME(ENODEV), ERRNO_NAME(EINVAL),
	ERRNO_NAME(ENOSPC), ERRNO_NAME(ERANGE),
	ERRNO_NAME(EOPNOTSUPP), { ENOTSUPP_KERNEL, "ENOTSUPP" },
};

static const char *errno_name(int err)
{
	static char num[16];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(errno_names); i++)
		if (errno_names[i].err == err)
			return errno_names[i].name;
	snprintf(num, sizeof(num), "%d", err);
	return num;
}

/* A pointer as bpf(2) takes it. */
static __u64 ptr_u64(const void *p)
{
	return (unsigned long)p;
}

static int sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

/* ------------------------------------------------------------------ BTF */

static __u32 get32(const unsigned char *p)
{
	__u32 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/*
 * Bytes that follow a struct btf_type of @kind with @vlen elements, from
 * the BTF's layout section (@layout, @nr_layout kinds) if it has one,
 * else from the kinds of include/uapi/linux/btf.h; -1 for a kind neither
 * knows.
 */
static long btf_extra(unsigned int kind, unsigned int vlen,
		      const unsigned char *layout, unsigned int nr_layout)
{
	static const signed char info[] = {
		[1] = 4, [3] = 12, [14] = 4, [17] = 4,	/* int, array, var, decl_tag */
	};
	static const signed char elem[] = {
		[4] = 12, [5] = 12, [6] = 8, [13] = 8,	/* struct, union, enum, proto */
		[15] = 12, [19] = 12,			/* datasec, enum64 */
	};

	if (kind < nr_layout)
		return layout[4 * kind] + (long)vlen * layout[4 * kind + 1];
	if (kind > 19)
		return -1;
	return (kind < ARRAY_SIZE(info) ? info[kind] : 0) +
	       (long)vlen * (kind < ARRAY_SIZE(elem) ? elem[kind] : 0);
}

static unsigned char *read_file(const char *path, size_t *size)
{
	unsigned char *buf = NULL, *p;
	size_t len = 0, cap = 0;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	for (;;) {
		if (len == cap) {
			cap = cap ? 2 * cap : 1 << 22;
			p = realloc(buf, cap);
			if (!p)
				break;
			buf = p;
		}
		n = read(fd, buf + len, cap - len);
		if (n <= 0) {
			if (!n) {
				close(fd);
				*size = len;
				return buf;
			}
			break;
		}
		len += n;
	}
	close(fd);
	free(buf);
	return NULL;
}

/*
 * The BTF type id of the function @name in vmlinux's BTF, or -1 after
 * printing why not.
 */
static long btf_func_id(const char *name)
{
	const unsigned char *types, *strs, *layout = NULL, *p, *end;
	unsigned int kind, vlen, nr_layout = 0;
	__u32 hdr_len, name_off, info;
	long id, found = -1, extra;
	unsigned char *btf;
	size_t size;

	btf = read_file(BTF_VMLINUX, &size);
	if (!btf) {
		printf("btf: %s\n", errno_name(errno));
		return -1;
	}
	hdr_len = size >= 24 ? get32(btf + 4) : 0;
	if (size < 24 || (btf[0] | btf[1] << 8) != BTF_MAGIC_LE ||
	    hdr_len < 24 || hdr_len > size ||
	    hdr_len + (__u64)get32(btf + 8) + get32(btf + 12) > size ||
	    hdr_len + (__u64)get32(btf + 16) + get32(btf + 20) > size) {
		printf("btf: %s is not little-endian BTF\n", BTF_VMLINUX);
		goto out;
	}
	types = btf + hdr_len + get32(btf + 8);
	end = types + get32(btf + 12);
	strs = btf + hdr_len + get32(btf + 16);
	/* a layout section (newer BTF): the sizes of every kind */
	if (hdr_len >= 32 && get32(btf + 28) &&
	    hdr_len + (__u64)get32(btf + 24) + get32(btf + 28) <= size) {
		layout = btf + hdr_len + get32(btf + 24);
		nr_layout = get32(btf + 28) / 4;
	}

	for (p = types, id = 1; p + 12 <= end; id++) {
		name_off = get32(p);
		info = get32(p + 4);
		kind = (info >> 24) & 0x7f;
		vlen = info & 0xffffff;
		if (kind == BTF_FUNC_KIND && name_off < get32(btf + 20) &&
		    !strcmp((const char *)strs + name_off, name)) {
			if (found >= 0) {
				printf("btf: %s: two functions of that name, %ld and %ld\n",
				       name, found, id);
				found = -1;
				goto out;
			}
			found = id;
		}
		extra = btf_extra(kind, vlen, layout, nr_layout);
		if (extra < 0) {
			printf("btf: type %ld has kind %u, unknown here\n", id, kind);
			found = -1;
			goto out;
		}
		p += 12 + extra;
	}
	if (found < 0)
		printf("btf: no function %s in %s\n", name, BTF_VMLINUX);
out:
	free(btf);
	return found;
}

/* ------------------------------------------------------------------ BPF */

#define INSN(c, d, s, o, i) \
	((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), \
			    .off = (o), .imm = (i) })

/*
 * The program: counter @key of map @map_fd += 1, atomically; return 0.
 *
 *	*(u32 *)(r10 - 4) = key
 *	r2 = r10 - 4
 *	r1 = map
 *	r0 = bpf_map_lookup_elem(r1, r2)
 *	if r0 == 0 goto out
 *	lock *(u64 *)(r0 + 0) += 1
 * out:	return 0
 */
static int load_prog(int map_fd, int key, enum bpf_attach_type type,
		     long btf_id, const char *what)
{
	struct bpf_insn prog[] = {
		INSN(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -4, key),
		INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_10, 0, 0),
		INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, -4),
		INSN(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, map_fd),
		INSN(0, 0, 0, 0, 0),
		INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem),
		INSN(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 2, 0),
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_1, 0, 0, 1),
		INSN(BPF_STX | BPF_ATOMIC | BPF_DW, BPF_REG_0, BPF_REG_1, 0, BPF_ADD),
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0),
		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};
	static char log[65536];
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_TRACING;
	attr.expected_attach_type = type;
	attr.insns = ptr_u64(prog);
	attr.insn_cnt = ARRAY_SIZE(prog);
	attr.license = ptr_u64("GPL");
	attr.attach_btf_id = btf_id;
	attr.log_buf = ptr_u64(log);
	attr.log_size = sizeof(log);
	attr.log_level = 1;
	log[0] = '\0';
	fd = sys_bpf(BPF_PROG_LOAD, &attr);
	if (fd < 0) {
		printf("load %s: %s\n", what, errno_name(errno));
		fprintf(stderr, "%s", log);
	}
	return fd;
}

static int link_prog(int prog_fd, enum bpf_attach_type type, const char *what)
{
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.link_create.prog_fd = prog_fd;
	attr.link_create.attach_type = type;
	fd = sys_bpf(BPF_LINK_CREATE, &attr);
	if (fd < 0)
		printf("link %s: %s\n", what, errno_name(errno));
	return fd;
}

static const struct {
	const char *name;
	enum bpf_attach_type type;
} progs[] = {
	{ "fentry", BPF_TRACE_FENTRY },	/* counter 0 */
	{ "fexit", BPF_TRACE_FEXIT },	/* counter 1 */
};

/* The index in progs[] of PROG @name, or -1. */
static int prog_index(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(progs); i++)
		if (!strcmp(name, progs[i].name))
			return i;
	return -1;
}

/* Hold the programs progs[@which[0..@n - 1]] on @func (see the top). */
static int cmd_hold(const char *func, const int *which, int n)
{
	int links[ARRAY_SIZE(progs)];
	struct bpf_map_info info;
	sigset_t usr1;
	union bpf_attr attr;
	int map_fd, fd, sig, i, k;
	long id;

	/* SIGUSR1 is taken by sigwait() below, once the links are made. */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);

	id = btf_func_id(func);
	if (id < 0)
		return 2;

	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = sizeof(__u32);
	attr.value_size = sizeof(__u64);
	attr.max_entries = ARRAY_SIZE(progs);
	map_fd = sys_bpf(BPF_MAP_CREATE, &attr);
	if (map_fd < 0) {
		printf("map: %s\n", errno_name(errno));
		return 1;
	}
	memset(&info, 0, sizeof(info));
	memset(&attr, 0, sizeof(attr));
	attr.info.bpf_fd = map_fd;
	attr.info.info_len = sizeof(info);
	attr.info.info = ptr_u64(&info);
	if (sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &attr)) {
		printf("map info: %s\n", errno_name(errno));
		return 1;
	}

	for (i = 0; i < n; i++) {
		k = which[i];
		fd = load_prog(map_fd, k, progs[k].type, id, progs[k].name);
		if (fd < 0)
			return 1;
		links[i] = link_prog(fd, progs[k].type, progs[k].name);
		if (links[i] < 0)
			return 1;
	}
	printf("OK %u\n", info.id);
	fflush(stdout);

	while (sigwait(&usr1, &sig))
		;
	/* The last reference to a link: its release detaches the program. */
	for (i = 0; i < n; i++)
		close(links[i]);
	printf("detached\n");
	fflush(stdout);
	for (;;)
		pause();
}

static int cmd_count(const char *map_id)
{
	union bpf_attr attr;
	__u64 val[2];
	__u32 key;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.map_id = strtoul(map_id, NULL, 10);
	fd = sys_bpf(BPF_MAP_GET_FD_BY_ID, &attr);
	if (fd < 0) {
		printf("map %s: %s\n", map_id, errno_name(errno));
		return 1;
	}
	for (key = 0; key < ARRAY_SIZE(val); key++) {
		memset(&attr, 0, sizeof(attr));
		attr.map_fd = fd;
		attr.key = ptr_u64(&key);
		attr.value = ptr_u64(&val[key]);
		if (sys_bpf(BPF_MAP_LOOKUP_ELEM, &attr)) {
			printf("lookup %u: %s\n", key, errno_name(errno));
			return 1;
		}
	}
	printf("fentry %llu fexit %llu\n", (unsigned long long)val[0],
	       (unsigned long long)val[1]);
	return 0;
}

int main(int argc, char **argv)
{
	int which[ARRAY_SIZE(progs)];
	int i, n = argc - 3;

	if (argc == 3 && !strcmp(argv[1], "count"))
		return cmd_count(argv[2]);
	if (argc < 4 || strcmp(argv[1], "hold") || n > (int)ARRAY_SIZE(progs))
		goto usage;
	for (i = 0; i < n; i++) {
		which[i] = prog_index(argv[3 + i]);
		if (which[i] < 0 || (i && which[i] == which[0]))
			goto usage;
	}
	return cmd_hold(argv[2], which, n);
usage:
	fprintf(stderr, "usage: kpbpf hold FUNC fentry|fexit [fentry|fexit]\n"
			"       kpbpf count MAP_ID\n");
	return 2;
}
