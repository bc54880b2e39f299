// SPDX-License-Identifier: GPL-2.0
/*
 * kpfuzz - seeded, reproducible hostile input for kpatch's control file,
 * for the kpatch selftests (test-fuzz.sh).
 *
 * Usage: kpfuzz [--seed S] [--cases N] [--min-cases N] [--check-every K]
 *               [--only I | --from I] [--nocap N] [--going MODULE]
 *               [--min-going N] [--verdicts FILE] [--verbose]
 *
 * Writes N commands (default 10000), one write(2) each, to
 * /sys/kernel/debug/kpatch/control: random bytes, random token soups,
 * over-long writes, truncated and mutated valid commands, boundary
 * addresses (0, -1, non-canonical and user addresses, one byte past a
 * function start, the last byte of a function, data, read-only data,
 * per-cpu, init text, ftrace and BPF trampolines), names at and past the
 * length limit and with bad bytes, commands with many pairs, hook words
 * (HOOK=ADDR: the hooks of kpatch_test_shadow, unknown hook names, the
 * same hook twice, '=' at the edges, vmlinux, data and junk addresses,
 * other modules' functions) and dry runs (check VERB ...).  Case I
 * is made from its own generator state, derived from S and I only, so
 * `kpfuzz --seed S --only I` replays it on the same kernel.
 *
 * Each case is judged before it is written by a model of the grammar in
 * Documentation.txt, fed with /proc/kallsyms: the set of results it
 * allows (OK or an errno).  A command the model cannot judge without
 * risking the kernel (a real kernel function redirected to something else)
 * is not written; it is generated again from the next state.  A command
 * the model accepts only pairs test functions of the same prototype
 * (kpatch_test_target, kpatch_test_new, the --going module, and
 * cmdline_proc_show with its replacements).
 *
 * Checked for every case: the result is OK or a documented errno (EPERM,
 * EINVAL, EEXIST, ENOENT, EBUSY, ENOMEM), it is one the model allows, and
 * a refusal logged a "kpatch: " line.  A patch "base" stays enabled
 * throughout.  The state (the patches file, the listing of
 * /sys/kernel/kpatch, ftrace's enabled_functions, the reference counts of
 * the kpatch* modules) is compared with the baseline after every K refused
 * commands (default 20) and before every command the model may accept.  An
 * accepted command must have changed the patches file exactly as the model
 * says and made the patched functions return what their replacements
 * return, its hooks must have been called once each (pre, stop and post
 * of its direction); it is then undone and the state must be the
 * baseline again.  A dry run must call no hook, change nothing (it is
 * checked like a refused command) and leave "VERB NAME ERRNO" in the
 * check file.
 * The kernel log is read as it grows (it overflows the ring buffer long
 * before the end) and must show no splat.
 *
 * Then --nocap N commands (default 200) from a child without
 * CAP_SYS_MODULE, half through a file descriptor opened with it: every one
 * must fail with EPERM.  Writes from unreadable buffers must fail with
 * EFAULT (or EINVAL for their length).  With --going MODULE
 * (kpatch_test_going, whose exit function sleeps), a child unloads
 * MODULE, and while the module is going and after it is gone, commands
 * naming its functions as old or new functions must fail with EINVAL and
 * change nothing.
 *
 * Output: "# " lines (cases per category with their results, the total
 * errno histogram, and each failing case, hex-escaped, with the command
 * that replays it).  With --verdicts FILE, one "ok DESC" or "not ok DESC"
 * line per assertion goes to FILE.  Exit status 0 if every assertion
 * held, 1 if one failed, 2 if the run could not be set up.
 *
 * Built static (gcc -static) for the test guest.
 */

#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define BIT(n)		(1u << (n))

#define CONTROL		"/sys/kernel/debug/kpatch/control"
#define PATCHES		"/sys/kernel/debug/kpatch/patches"
#define SYSFS_DIR	"/sys/kernel/kpatch"
#define SYSFS_PATCHES	"/sys/kernel/kpatch/patches"
#define VALUES		"/sys/module/kpatch_test_target/parameters/values"
#define CHECKFILE	"/sys/kernel/debug/kpatch/check"
#define HOOK_MOD	"kpatch_test_shadow"
#define HOOK_CALLS	"/sys/module/kpatch_test_shadow/parameters/hooks"

#define CMD_MAX		4096		/* longest command (Documentation.txt) */
#define NAME_LEN_MAX	63		/* longest patch name */
#define MAX_TOKENS	(CMD_MAX / 2 + 2)
#define MAX_PAIRS	(MAX_TOKENS / 2)
#define BUF_MAX		(1024 * 1024)	/* longest write */
#define MAX_ATTEMPTS	16		/* generations of one case */
#define MAX_REPORTS	25		/* failing cases shown in full */

/* ------------------------------------------------------------------ */
/* Generator: splitmix64, one state per case                           */

struct rng {
	unsigned long long s;
};

static unsigned long long rnext(struct rng *r)
{
	unsigned long long z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A number in [0, n) */
static unsigned int rnd(struct rng *r, unsigned int n)
{
	return n ? rnext(r) % n : 0;
}

static bool chance(struct rng *r, unsigned int percent)
{
	return rnd(r, 100) < percent;
}

/* The state for case @index of stream @stream, generation @attempt. */
static void rng_init(struct rng *r, unsigned long long seed,
		     unsigned int stream, unsigned long long index,
		     unsigned int attempt)
{
	r->s = seed;
	r->s = rnext(r) ^ (index * 0xd1b54a32d192ed03ULL);
	r->s = rnext(r) ^ ((unsigned long long)stream << 32 | attempt);
	rnext(r);
}

/* ------------------------------------------------------------------ */
/* Byte buffers                                                        */

struct buf {
	unsigned char *p;
	size_t len;
	size_t cap;
};

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	if (!p) {
		printf("# kpfuzz: out of memory\n");
		exit(2);
	}
	return p;
}

static void binit(struct buf *b, size_t cap)
{
	b->p = xmalloc(cap + 1);
	b->len = 0;
	b->cap = cap;
}

static void bput(struct buf *b, const void *s, size_t n)
{
	if (n > b->cap - b->len)
		n = b->cap - b->len;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void bputs(struct buf *b, const char *s)
{
	bput(b, s, strlen(s));
}

static void bputc(struct buf *b, int c)
{
	unsigned char ch = c;

	bput(b, &ch, 1);
}

static void bprintf(struct buf *b, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		bput(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* NUL-terminate (there is always room: binit() keeps one byte spare). */
static char *bstr(struct buf *b)
{
	b->p[b->len] = '\0';
	return (char *)b->p;
}

/* Insert @n bytes of @s at @pos. */
static void binsert(struct buf *b, size_t pos, const void *s, size_t n)
{
	if (pos > b->len)
		pos = b->len;
	if (n > b->cap - b->len)
		n = b->cap - b->len;
	memmove(b->p + pos + n, b->p + pos, b->len - pos);
	memcpy(b->p + pos, s, n);
	b->len += n;
}

static void bdelete(struct buf *b, size_t pos, size_t n)
{
	if (pos >= b->len)
		return;
	if (n > b->len - pos)
		n = b->len - pos;
	memmove(b->p + pos, b->p + pos + n, b->len - pos - n);
	b->len -= n;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------------ */
/* Output                                                              */

static FILE *verdicts;
static unsigned int nfailed;

static void verdict(bool good, const char *fmt, ...)
{
	char desc[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(desc, sizeof(desc), fmt, ap);
	va_end(ap);
	printf("# kpfuzz: %s: %s\n", good ? "ok" : "NOT OK", desc);
	if (verdicts)
		fprintf(verdicts, "%s %s\n", good ? "ok" : "not ok", desc);
	if (!good)
		nfailed++;
}

/* Print @len bytes of @p, escaped: printable ASCII as is, the rest \xNN. */
static void print_escaped(const unsigned char *p, size_t len, size_t max)
{
	size_t i;

	for (i = 0; i < len && i < max; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
			putchar(p[i]);
		else
			printf("\\x%02x", p[i]);
	}
	if (len > max)
		printf("...(%zu bytes in all)", len);
}

static const struct {
	int err;
	const char *name;
} errno_names[] = {
	{ 0, "OK" }, { EPERM, "EPERM" }, { ENOENT, "ENOENT" },
	{ ENOMEM, "ENOMEM" }, { EBUSY, "EBUSY" }, { EEXIST, "EEXIST" },
	{ EINVAL, "EINVAL" }, { EFAULT, "EFAULT" }, { ENODEV, "ENODEV" },
	{ ENOSPC, "ENOSPC" }, { E2BIG, "E2BIG" }, { ERANGE, "ERANGE" },
	{ EIO, "EIO" }, { EAGAIN, "EAGAIN" }, { EACCES, "EACCES" },
	{ ENAMETOOLONG, "ENAMETOOLONG" }, { EOVERFLOW, "EOVERFLOW" },
	{ EILSEQ, "EILSEQ" }, { EBADF, "EBADF" },
};

static const char *errname(int err)
{
	static char tmp[32];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(errno_names); i++)
		if (errno_names[i].err == err)
			return errno_names[i].name;
	snprintf(tmp, sizeof(tmp), "errno %d", err);
	return tmp;
}

/* Results as a bit mask: what the model allows. */
#define M_OK		BIT(0)
#define M_EPERM		BIT(1)
#define M_ENOENT	BIT(2)
#define M_ENOMEM	BIT(3)
#define M_EBUSY		BIT(4)
#define M_EEXIST	BIT(5)
#define M_EINVAL	BIT(6)
#define M_OTHER		BIT(7)

static unsigned int rbit(int err)
{
	switch (err) {
	case 0:
		return M_OK;
	case EPERM:
		return M_EPERM;
	case ENOENT:
		return M_ENOENT;
	case ENOMEM:
		return M_ENOMEM;
	case EBUSY:
		return M_EBUSY;
	case EEXIST:
		return M_EEXIST;
	case EINVAL:
		return M_EINVAL;
	}
	return M_OTHER;
}

/* The errnos Documentation.txt lists for the control file. */
static bool documented(int err)
{
	return err == EPERM || err == EINVAL || err == EEXIST ||
	       err == ENOENT || err == EBUSY || err == ENOMEM;
}

static void print_mask(unsigned int mask)
{
	static const int errs[] = { 0, EPERM, ENOENT, ENOMEM, EBUSY, EEXIST,
				    EINVAL };
	const char *sep = "";
	size_t i;

	for (i = 0; i < ARRAY_SIZE(errs); i++) {
		if (mask & rbit(errs[i])) {
			printf("%s%s", sep, errname(errs[i]));
			sep = "|";
		}
	}
	if (!*sep)
		printf("nothing");
}

/* ------------------------------------------------------------------ */
/* Small file helpers                                                  */

/* Append the contents of @path to @b, or a line saying why not. */
static void cat_file(struct buf *b, const char *path)
{
	char tmp[4096];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY);
	if (fd < 0) {
		bprintf(b, "(open: %s)\n", errname(errno));
		return;
	}
	while ((n = read(fd, tmp, sizeof(tmp))) > 0)
		bput(b, tmp, n);
	if (n < 0)
		bprintf(b, "(read: %s)\n", errname(errno));
	close(fd);
}

/* First line of @path into @out (empty if it cannot be read). */
static void read_line(const char *path, char *out, size_t size)
{
	ssize_t n;
	int fd;

	out[0] = '\0';
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	n = read(fd, out, size - 1);
	close(fd);
	if (n < 0)
		n = 0;
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

static bool is_dir(const char *path)
{
	struct stat st;

	return !lstat(path, &st) && S_ISDIR(st.st_mode);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char * const *)a, *(char * const *)b);
}

/* Append a sorted recursive listing of @dir to @b, one path a line. */
static void list_dir(struct buf *b, const char *dir, int depth)
{
	char *names[256], path[512];
	struct dirent *de;
	unsigned int n = 0, i;
	DIR *d;

	d = opendir(dir);
	if (!d) {
		bprintf(b, "%s: (%s)\n", dir, errname(errno));
		return;
	}
	while ((de = readdir(d)) && n < ARRAY_SIZE(names)) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		names[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(names[0]), cmp_str);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		bprintf(b, "%s\n", path);
		if (depth < 8 && is_dir(path))
			list_dir(b, path, depth + 1);
		free(names[i]);
	}
}

/* ------------------------------------------------------------------ */
/* Symbols, from /proc/kallsyms                                        */

struct sym {
	unsigned long addr;
	const char *name;
	const char *mod;	/* NULL: vmlinux */
	char type;
};

static struct sym *syms;
static size_t nsyms;

static const char *modnames[512];	/* interned module names */
static unsigned int nmodnames;
static char loaded[512][64];		/* /proc/modules */
static unsigned int nloaded;

static const char *going_mod;		/* --going MODULE */
static int going_state;			/* 0 live, 1 going, 2 gone */

static const char *intern_mod(const char *m, size_t len)
{
	unsigned int i;
	char *s;

	for (i = 0; i < nmodnames; i++)
		if (strlen(modnames[i]) == len && !memcmp(modnames[i], m, len))
			return modnames[i];
	s = xmalloc(len + 1);
	memcpy(s, m, len);
	s[len] = '\0';
	if (nmodnames < ARRAY_SIZE(modnames))
		modnames[nmodnames++] = s;
	return s;
}

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name;
}

static int read_kallsyms(void)
{
	size_t cap = 1 << 18, n;
	char *line = NULL, *p, *name, *end;
	FILE *f;

	f = fopen("/proc/kallsyms", "r");
	if (!f)
		return -1;
	syms = xmalloc(cap * sizeof(*syms));
	while (getline(&line, &n, f) > 0) {
		struct sym *s;

		if (nsyms == cap) {
			cap *= 2;
			syms = realloc(syms, cap * sizeof(*syms));
			if (!syms)
				return -1;
		}
		s = &syms[nsyms];
		s->addr = strtoul(line, &p, 16);
		if (*p != ' ' || !p[1] || p[2] != ' ')
			continue;
		s->type = p[1];
		name = p + 3;
		end = name + strcspn(name, " \t\n");
		s->mod = NULL;
		p = strchr(end, '[');
		if (p) {
			size_t len = strcspn(p + 1, "]");

			s->mod = intern_mod(p + 1, len);
		}
		*end = '\0';
		s->name = strdup(name);
		nsyms++;
	}
	free(line);
	fclose(f);
	qsort(syms, nsyms, sizeof(*syms), cmp_sym);
	return nsyms ? 0 : -1;
}

static int read_modules(void)
{
	char line[512];
	FILE *f;

	f = fopen("/proc/modules", "r");
	if (!f)
		return -1;
	nloaded = 0;
	while (fgets(line, sizeof(line), f) && nloaded < ARRAY_SIZE(loaded)) {
		snprintf(loaded[nloaded++], sizeof(loaded[0]), "%.*s",
			 (int)strcspn(line, " "), line);
	}
	fclose(f);
	return 0;
}

static bool module_loaded(const char *mod)
{
	unsigned int i;

	for (i = 0; i < nloaded; i++)
		if (!strcmp(loaded[i], mod))
			return true;
	return false;
}

/* Loaded, and not the --going module once it started to go. */
static bool module_usable(const char *mod)
{
	if (going_mod && going_state && !strcmp(mod, going_mod))
		return false;
	return module_loaded(mod);
}

/* Index of the first symbol at or above @addr. */
static size_t sym_lower(unsigned long addr)
{
	size_t lo = 0, hi = nsyms;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (syms[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The first symbol address above @addr, or @addr + 64 past the last. */
static unsigned long sym_next(unsigned long addr)
{
	size_t i = sym_lower(addr);

	while (i < nsyms && syms[i].addr <= addr)
		i++;
	return i < nsyms ? syms[i].addr : addr + 64;
}

/* Address of @name in @mod (NULL: vmlinux); 0 if missing or ambiguous. */
static unsigned long sym_addr(const char *name, const char *mod)
{
	unsigned long addr = 0;
	size_t i;

	for (i = 0; i < nsyms; i++) {
		if (strcmp(syms[i].name, name))
			continue;
		if (mod ? !syms[i].mod || strcmp(syms[i].mod, mod) : !!syms[i].mod)
			continue;
		if (addr && addr != syms[i].addr)
			return 0;
		addr = syms[i].addr;
	}
	return addr;
}

/* vmlinux layout, from linker symbols */
static unsigned long k_text, k_etext_page, k_sinittext, k_einittext;
static unsigned long k_sdata, k_end;

/*
 * The test functions the model lets a command patch for real: every pair
 * of one group has compatible prototypes.  ret is what a group 1
 * function returns, or the version a group 2 function prints.
 */
enum {
	S_A, S_B, S_NOTRACE, S_A1, S_A2, S_A3, S_B1, S_B2, S_GOING,
	S_GOING_NEW, S_CMDLINE, S_CMDLINE1, S_CMDLINE2, S_CMDLINE3, S_COUNT
};

static struct safe {
	const char *name;
	const char *mod;	/* NULL: vmlinux; "going": the --going module */
	int group;		/* 1: int (void); 2: a seq_file show function */
	bool trace;		/* ftrace can trace it */
	int ret;
	unsigned long addr;	/* 0: not loaded */
} safe[S_COUNT] = {
	[S_A] = { "kpatch_test_value_a", "kpatch_test_target", 1, true, 1 },
	[S_B] = { "kpatch_test_value_b", "kpatch_test_target", 1, true, 2 },
	[S_NOTRACE] = { "kpatch_test_value_notrace", "kpatch_test_target",
			1, false, 3 },
	[S_A1] = { "kpatch_test_value_a_v1", "kpatch_test_new", 1, true, 11 },
	[S_A2] = { "kpatch_test_value_a_v2", "kpatch_test_new", 1, true, 12 },
	[S_A3] = { "kpatch_test_value_a_v3", "kpatch_test_new", 1, true, 13 },
	[S_B1] = { "kpatch_test_value_b_v1", "kpatch_test_new", 1, true, 21 },
	[S_B2] = { "kpatch_test_value_b_v2", "kpatch_test_new", 1, true, 22 },
	[S_GOING] = { "kpatch_test_going_fn", "going", 1, true, 31 },
	[S_GOING_NEW] = { "kpatch_test_going_fn_new", "going", 1, true, 32 },
	[S_CMDLINE] = { "cmdline_proc_show", NULL, 2, true, 0 },
	[S_CMDLINE1] = { "kpatch_test_cmdline_v1", "kpatch_test_new",
			 2, true, 1 },
	[S_CMDLINE2] = { "kpatch_test_cmdline_v2", "kpatch_test_new",
			 2, true, 2 },
	[S_CMDLINE3] = { "kpatch_test_cmdline_v3", "kpatch_test_new",
			 2, true, 3 },
};

static int find_safe(unsigned long addr)
{
	int i;

	for (i = 0; i < S_COUNT; i++)
		if (safe[i].addr && safe[i].addr == addr)
			return i;
	return -1;
}

static bool safe_usable(int i)
{
	if (i == S_GOING || i == S_GOING_NEW)
		return safe[i].addr && !going_state;
	return safe[i].addr;
}

/*
 * Hooks (HOOK=ADDR words): the names, in the order of enum kpatch_hook,
 * and the two functions of kpatch_test_shadow a command the model accepts
 * may use as hooks: "nop" returns 0, "veto" -EINVAL.  A veto in a
 * pre-patch or stop-patch slot refuses the command with EINVAL; in a
 * post or undo slot its return is ignored; in a pre-unpatch or
 * stop-unpatch slot it would keep the patch from being undone, so such a
 * command is not written.  Both count their calls (HOOK_CALLS).
 */
#define NR_HOOKS	8
#define HOOK_PRE_UNPATCH 4	/* the first unpatch hook */

static const char * const hook_names[NR_HOOKS] = {
	"pre-patch", "stop-patch", "undo-patch", "post-patch",
	"pre-unpatch", "stop-unpatch", "undo-unpatch", "post-unpatch",
};

enum { H_NOP, H_VETO, H_COUNT };

static struct {
	const char *name;
	unsigned long addr;
} hookfn[H_COUNT] = {
	[H_NOP] = { "kpatch_test_shadow_hook_nop" },
	[H_VETO] = { "kpatch_test_shadow_hook_veto" },
};

static int find_hookfn(unsigned long addr)
{
	int i;

	for (i = 0; i < H_COUNT; i++)
		if (hookfn[i].addr && hookfn[i].addr == addr)
			return i;
	return -1;
}

/* Pools of symbols, as indexes into syms[] */
struct pool {
	size_t *idx;
	size_t n;
};

static struct pool p_vtext, p_vinit, p_vdata, p_vlow, p_mtext, p_mdata;
static struct pool p_mother;

static void pool_add(struct pool *p, size_t i)
{
	if (!(p->n & (p->n + 1)) || !p->idx) {
		p->idx = realloc(p->idx, (2 * p->n + 2) * sizeof(*p->idx));
		if (!p->idx) {
			printf("# kpfuzz: out of memory\n");
			exit(2);
		}
	}
	p->idx[p->n++] = i;
}

static bool is_text_type(char t)
{
	return t == 't' || t == 'T';
}

static bool is_data_type(char t)
{
	return t && strchr("dDbBrR", t);
}

static void build_pools(void)
{
	size_t i;

	for (i = 0; i < nsyms; i++) {
		const struct sym *s = &syms[i];

		if (s->mod) {
			if (!module_usable(s->mod))
				pool_add(&p_mother, i);
			else if (is_text_type(s->type))
				pool_add(&p_mtext, i);
			else if (is_data_type(s->type))
				pool_add(&p_mdata, i);
		} else if (s->addr >= k_sinittext && s->addr < k_einittext) {
			if (is_text_type(s->type))
				pool_add(&p_vinit, i);
		} else if (s->addr >= k_text && s->addr < k_etext_page) {
			if (is_text_type(s->type))
				pool_add(&p_vtext, i);
		} else if (s->addr < k_text) {
			pool_add(&p_vlow, i);
		} else if (s->addr >= k_sdata && s->addr < k_end) {
			pool_add(&p_vdata, i);
		}
	}
}

static unsigned long pool_pick(struct rng *r, const struct pool *p,
			       unsigned long fallback)
{
	return p->n ? syms[p->idx[rnd(r, p->n)]].addr : fallback;
}

/*
 * What kpatch must make of @addr as an old (@as_old) or new function:
 * A_BAD if it must refuse it (no symbol starts there; vmlinux data,
 * read-only data, per-cpu or freed init text; module data; a symbol of no
 * usable module; a test function that cannot be an old one), A_SAFE for a
 * test function (*@sidx), A_TEXT for any other text symbol: kpatch may
 * take it, so the model cannot judge a command that could be accepted
 * with it.
 */
enum aclass { A_BAD, A_SAFE, A_TEXT };

static enum aclass classify(unsigned long addr, bool as_old, int *sidx)
{
	enum aclass c = A_BAD;
	size_t i;
	int s;

	s = find_safe(addr);
	if (s >= 0) {
		if (!safe_usable(s) || (as_old && !safe[s].trace))
			return A_BAD;
		*sidx = s;
		return A_SAFE;
	}
	for (i = sym_lower(addr); i < nsyms && syms[i].addr == addr; i++) {
		const struct sym *sy = &syms[i];

		if (sy->mod) {
			if (module_usable(sy->mod) && !is_data_type(sy->type))
				c = A_TEXT;
		} else if (addr >= k_sinittext && addr < k_einittext) {
			continue;
		} else if (addr >= k_text && addr < k_etext_page) {
			c = A_TEXT;
		}
	}
	return c;
}

/*
 * What kpatch must make of @addr as a hook: HK_BAD if it must refuse it
 * (not a function start in the text of a live module: vmlinux, data, init
 * text, a going module, junk), HK_NOP or HK_VETO for the hooks of
 * kpatch_test_shadow, HK_TEXT for any other module function: kpatch may
 * take it (and, unless it lacks ENDBR on an IBT kernel, call it).
 */
enum hclass { HK_BAD, HK_NOP, HK_VETO, HK_TEXT };

static enum hclass classify_hook(unsigned long addr)
{
	size_t i;
	int h = find_hookfn(addr), s;

	if (h >= 0)
		return module_usable(HOOK_MOD) ? (h == H_NOP ? HK_NOP : HK_VETO) :
		       HK_BAD;
	s = find_safe(addr);
	if (s >= 0)
		return safe_usable(s) && safe[s].mod ? HK_TEXT : HK_BAD;
	for (i = sym_lower(addr); i < nsyms && syms[i].addr == addr; i++)
		if (syms[i].mod && module_usable(syms[i].mod) &&
		    !is_data_type(syms[i].type))
			return HK_TEXT;
	return HK_BAD;
}

/* ------------------------------------------------------------------ */
/* The model of the control file                                       */

enum { V_PATCH, V_REPLACE, V_UNPATCH };

struct cmd {
	int verb;
	bool check;			/* check VERB ...: a dry run */
	unsigned long hook[NR_HOOKS];	/* 0: none */
	char name[NAME_LEN_MAX + 1];
	unsigned int npairs;
	unsigned long old[MAX_PAIRS];
	unsigned long new[MAX_PAIRS];
};

/* The baseline: patch "base" redirects S_A to S_A1. */
#define BASE_NAME	"base"

struct judgement {
	unsigned int allowed;	/* M_* */
	unsigned int strict;	/* M_*, with neither 0X nor a final NUL */
	bool danger;		/* could be accepted, and cannot be judged */
	bool have_cmd;		/* cmd: the command, when OK is allowed */
	bool check;		/* a dry run (check VERB ...) */
	char check_line[NAME_LEN_MAX + 16];	/* "VERB NAME" for the check file */
	struct cmd cmd;
};

static struct judgement jcur;	/* the current case's */
static bool judging_strict;	/* judge_one() reads the write as it is */

static bool valid_name(const unsigned char *s, size_t n)
{
	size_t i;

	if (n < 1 || n > NAME_LEN_MAX)
		return false;
	for (i = 0; i < n; i++)
		if (!isascii(s[i]) || (!isalnum(s[i]) && s[i] != '_' &&
				       s[i] != '-'))
			return false;
	return true;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A hexadecimal address, with or without 0x (0X too if @upper_x). */
static int parse_addr(const unsigned char *t, size_t n, bool upper_x,
		      unsigned long *out)
{
	unsigned long v = 0;
	size_t i;

	if (n >= 2 && t[0] == '0' && (t[1] == 'x' || (upper_x && t[1] == 'X'))) {
		t += 2;
		n -= 2;
	}
	if (!n)
		return -1;
	for (i = 0; i < n; i++) {
		int d = hexval(t[i]);

		if (d < 0 || v > ULONG_MAX >> 4)
			return -1;
		v = v << 4 | d;
	}
	*out = v;
	return 0;
}

/*
 * The semantic checks of a patch or replace command whose syntax is fine:
 * M_OK or M_EINVAL, or both with *@danger set when the model cannot tell.
 */
static unsigned int judge_pairs(const struct cmd *c, bool *danger)
{
	bool bad = false, unknown = false, cross = false, veto = false;
	bool replace = c->verb == V_REPLACE;
	unsigned int i, j;

	for (i = 0; i < NR_HOOKS; i++) {
		enum hclass h;

		if (!c->hook[i])
			continue;
		h = classify_hook(c->hook[i]);
		if (h == HK_BAD)
			bad = true;
		else if (h == HK_TEXT)
			unknown = true;
		else if (h == HK_VETO && (i % 4 == 0 || i % 4 == 1))
			veto = true;	/* a pre or stop hook that refuses */
		if (h == HK_VETO && i >= HOOK_PRE_UNPATCH && i % 4 < 2 &&
		    !c->check)
			unknown = true;	/* the patch could not be undone */
	}

	for (i = 0; i < c->npairs; i++) {
		int so = -1, sn = -1;
		enum aclass co = classify(c->old[i], true, &so);
		enum aclass cn = classify(c->new[i], false, &sn);

		if (co == A_BAD || cn == A_BAD)
			bad = true;
		else if (co == A_SAFE && cn == A_SAFE)
			cross |= safe[so].group != safe[sn].group;
		else
			unknown = true;
	}
	if (bad)
		return M_EINVAL;
	for (i = 0; i < c->npairs; i++) {
		for (j = 0; j < c->npairs; j++) {
			if (j != i && c->old[j] == c->old[i])
				return M_EINVAL;	/* the same old twice */
			if (c->new[i] == c->old[j])
				return M_EINVAL;	/* new is also old */
		}
		if (!replace && (c->new[i] == safe[S_A].addr ||
				 c->old[i] == safe[S_A1].addr))
			return M_EINVAL;	/* chains with "base" */
	}
	/*
	 * A dry run runs no hook and changes nothing: any function is fine
	 * to name, it may only be refused or in use.
	 */
	if (c->check)
		return unknown ? M_OK | M_EINVAL | M_EBUSY : M_OK;
	if (unknown || cross) {
		*danger = true;
		return M_OK | M_EINVAL;
	}
	return veto ? M_EINVAL : M_OK;
}

/*
 * Take the hook words (with '=') out of tok[2..ntok): into @c, or -1 for
 * an unknown hook, one given twice, or a bad ADDR (hexadecimal as OLD and
 * NEW, not 0).  Returns the number of words left, moved up in place.
 */
static int take_hooks(const unsigned char **tok, size_t *tlen,
		      unsigned int ntok, bool upper_x, struct cmd *c)
{
	unsigned int i, n = 2, h;
	unsigned long addr;

	memset(c->hook, 0, sizeof(c->hook));
	for (i = 2; i < ntok; i++) {
		const unsigned char *eq = memchr(tok[i], '=', tlen[i]);
		size_t len = eq - tok[i];

		if (!eq) {
			tok[n] = tok[i];
			tlen[n++] = tlen[i];
			continue;
		}
		for (h = 0; h < NR_HOOKS; h++)
			if (strlen(hook_names[h]) == len &&
			    !memcmp(tok[i], hook_names[h], len))
				break;
		if (h == NR_HOOKS || c->hook[h] ||
		    parse_addr(eq + 1, tlen[i] - len - 1, upper_x, &addr) ||
		    !addr)
			return -1;
		c->hook[h] = addr;
	}
	return n;
}

/*
 * Judge @n bytes written as one command, read the strict way: an optional
 * trailing newline, no other newline and no NUL, tokens separated by
 * spaces or tabs.  @upper_x: take 0X as a prefix too.
 */
static void judge_one(const unsigned char *b, size_t n, bool upper_x,
		      struct judgement *j)
{
	static const unsigned char *tok[MAX_TOKENS];
	static size_t tlen[MAX_TOKENS];
	static struct cmd c;
	unsigned int ntok = 0, i;
	size_t k = 0;
	bool danger = false;
	int res;

	if (n && b[n - 1] == '\n')
		n--;
	if (memchr(b, '\n', n) || memchr(b, '\0', n)) {
		j->allowed |= M_EINVAL;
		return;
	}
	while (k < n) {
		size_t start;

		if (b[k] == ' ' || b[k] == '\t') {
			k++;
			continue;
		}
		start = k;
		while (k < n && b[k] != ' ' && b[k] != '\t')
			k++;
		if (ntok < MAX_TOKENS) {
			tok[ntok] = b + start;
			tlen[ntok] = k - start;
		}
		ntok++;
	}
	if (!ntok || ntok > MAX_TOKENS) {
		j->allowed |= M_EINVAL;
		return;
	}
	c.check = tlen[0] == 5 && !memcmp(tok[0], "check", 5);
	if (c.check) {
		j->check = true;
		memmove(tok, tok + 1, (ntok - 1) * sizeof(*tok));
		memmove(tlen, tlen + 1, (ntok - 1) * sizeof(*tlen));
		if (!--ntok) {
			j->allowed |= M_EINVAL;
			return;
		}
	}
	if (tlen[0] == 5 && !memcmp(tok[0], "patch", 5))
		c.verb = V_PATCH;
	else if (tlen[0] == 7 && !memcmp(tok[0], "replace", 7))
		c.verb = V_REPLACE;
	else if (tlen[0] == 7 && !memcmp(tok[0], "unpatch", 7))
		c.verb = V_UNPATCH;
	else
		ntok = 0;
	if (ntok < 2 || !valid_name(tok[1], tlen[1])) {
		j->allowed |= M_EINVAL;
		return;
	}
	memcpy(c.name, tok[1], tlen[1]);
	c.name[tlen[1]] = '\0';
	c.npairs = 0;
	memset(c.hook, 0, sizeof(c.hook));
	if (c.check && judging_strict)
		snprintf(j->check_line, sizeof(j->check_line), "%s %s",
			 c.verb == V_PATCH ? "patch" : c.verb == V_REPLACE ?
			 "replace" : "unpatch", c.name);

	if (c.verb == V_UNPATCH) {
		if (ntok != 2) {
			j->allowed |= M_EINVAL;
		} else if (strcmp(c.name, BASE_NAME)) {
			j->allowed |= M_ENOENT;
		} else {
			j->allowed |= M_OK;
			j->have_cmd = true;
			j->cmd = c;
		}
		return;
	}

	res = take_hooks(tok, tlen, ntok, upper_x, &c);
	if (res < 4 || res % 2) {
		j->allowed |= M_EINVAL;
		return;
	}
	ntok = res;
	for (i = 2; i < ntok; i += 2) {
		if (parse_addr(tok[i], tlen[i], upper_x, &c.old[c.npairs]) ||
		    parse_addr(tok[i + 1], tlen[i + 1], upper_x,
			       &c.new[c.npairs])) {
			j->allowed |= M_EINVAL;
			return;
		}
		c.npairs++;
	}
	res = judge_pairs(&c, &danger);
	j->danger |= danger;
	/* Documentation.txt does not say which check comes first. */
	if (!strcmp(c.name, BASE_NAME)) {
		j->allowed |= M_EEXIST | (res & M_EINVAL);
		return;
	}
	j->allowed |= res;
	if (res & M_OK) {
		j->have_cmd = true;
		j->cmd = c;
	}
}

/*
 * Judge the write of @b.  Documentation.txt leaves two readings open, and
 * both are allowed: "0x" may or may not include "0X"; and kpatch.c ends
 * a command at its first NUL, so a single trailing NUL (after no newline)
 * may be taken as the end of the command.
 */
static void judge(const struct buf *b, struct judgement *j)
{
	bool upper_x;

	j->allowed = 0;
	j->danger = false;
	j->have_cmd = false;
	j->check = false;
	j->check_line[0] = '\0';
	if (b->len > CMD_MAX) {
		j->allowed = M_EINVAL;
		j->strict = M_EINVAL;
		return;
	}
	upper_x = memmem(b->p, b->len, "0X", 2);
	judging_strict = true;
	judge_one(b->p, b->len, false, j);
	judging_strict = false;
	j->strict = j->allowed;
	if (upper_x)
		judge_one(b->p, b->len, true, j);
	if (b->len && !b->p[b->len - 1] && !memchr(b->p, 0, b->len - 1) &&
	    (b->len < 2 || b->p[b->len - 2] != '\n')) {
		judge_one(b->p, b->len - 1, false, j);
		if (upper_x)
			judge_one(b->p, b->len - 1, true, j);
	}
}

/*
 * What makes a kernel log line a splat: KP_SPLAT_RE, the extended regex
 * that splat.sh defines and exports for the test scripts (the host's
 * console scan and functions.sh use the same), compiled at setup.
 */
static regex_t splat_re;

static int splat_re_init(void)
{
	const char *re = getenv("KP_SPLAT_RE");
	char msg[256];
	int err;

	if (!re || !*re) {
		printf("# kpfuzz: KP_SPLAT_RE is not set (splat.sh exports it)\n");
		return -1;
	}
	err = regcomp(&splat_re, re, REG_EXTENDED | REG_NOSUB);
	if (err) {
		regerror(err, &splat_re, msg, sizeof(msg));
		printf("# kpfuzz: KP_SPLAT_RE: %s\n", msg);
		return -1;
	}
	return 0;
}

/*
 * Pieces of those patterns that kpatch's log lines must not contain: the
 * tokens of a refused command are printed, next to each other or before
 * a colon, and so are the kernel symbols its addresses fall in.
 */
static bool has_stem(const char *s)
{
	static const char * const stems[] = {
		"BUG", "Oops", "WARN", "UBSAN", "KASAN", "panic",
		"protection fault", "Unable to handle", "stall", "lockup",
		"LOCKUP", "blocked for more", "circular locking",
		"recursive locking", "inconsistent lock", "lock order",
		"lock inversion", "unlock balance", "lock freed", "wait context",
		"RCU usage", "function called", "while atomic", "DEBUG_LOCKS",
		"static key", "lockdep", "locking correctness", "lock debugging",
		"corruption",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(stems); i++)
		if (strstr(s, stems[i]))
			return true;
	return false;
}

/* Is @addr in a symbol (as kallsyms finds it) with such a name? */
static bool addr_has_stem(unsigned long addr)
{
	size_t i = addr == ULONG_MAX ? nsyms : sym_lower(addr + 1);
	unsigned long at;

	if (!i)
		return false;
	at = syms[i - 1].addr;
	while (i && syms[i - 1].addr == at) {
		if (has_stem(syms[i - 1].name))
			return true;
		i--;
	}
	return false;
}

static int parse_addr(const unsigned char *t, size_t n, bool upper_x,
		      unsigned long *out);

/* Could the kernel log about command @b look like a splat? */
static bool looks_like_splat(const struct buf *b)
{
	static char norm[CMD_MAX + 2];
	size_t i, n = 0, start;
	unsigned long addr;

	if (b->len > CMD_MAX)
		return false;	/* refused before anything is printed */
	for (i = 0; i < b->len; i++) {
		char c = b->p[i];

		if (c == '\t' || c == '\0' || c == '\n')
			c = ' ';
		if (c == ' ' && n && norm[n - 1] == ' ')
			continue;
		norm[n++] = c;
	}
	norm[n] = '\0';
	if (has_stem(norm))
		return true;
	for (i = 0; i < n; i = start + 1) {
		start = i + strcspn(norm + i, " ");
		if (!parse_addr((unsigned char *)norm + i, start - i, true,
				&addr) && addr_has_stem(addr))
			return true;
	}
	return false;
}

/* ------------------------------------------------------------------ */
/* Generators                                                          */

enum {
	C_BYTES, C_TOKENS, C_LONG, C_MUTATE, C_ADDR, C_NAME, C_PAIRS,
	C_VERB, C_HOOK, C_CHECK, C_NOCAP, C_FAULT, C_GOING, C_GONE, C_COUNT
};

static const char * const cat_names[C_COUNT] = {
	[C_BYTES] = "bytes", [C_TOKENS] = "tokens", [C_LONG] = "long",
	[C_MUTATE] = "mutate", [C_ADDR] = "addr", [C_NAME] = "name",
	[C_PAIRS] = "pairs", [C_VERB] = "verb", [C_HOOK] = "hook",
	[C_CHECK] = "check", [C_NOCAP] = "nocap", [C_FAULT] = "fault",
	[C_GOING] = "going", [C_GONE] = "gone",
};

/* Weights of the categories of the main run */
static const unsigned int cat_weight[C_NOCAP] = {
	[C_BYTES] = 10, [C_TOKENS] = 12, [C_LONG] = 5, [C_MUTATE] = 20,
	[C_ADDR] = 18, [C_NAME] = 12, [C_PAIRS] = 5, [C_VERB] = 4,
	[C_HOOK] = 10, [C_CHECK] = 10,
};

static const char name_chars[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

/* A space, mostly; sometimes tabs or several blanks. */
static void put_sep(struct rng *r, struct buf *b)
{
	unsigned int n;

	if (chance(r, 85)) {
		bputc(b, ' ');
		return;
	}
	for (n = 1 + rnd(r, 4); n; n--)
		bputc(b, chance(r, 50) ? '\t' : ' ');
}

static void put_name(struct rng *r, struct buf *b, unsigned int len)
{
	while (len--)
		bputc(b, name_chars[rnd(r, sizeof(name_chars) - 1)]);
}

/* A valid name other than "base": mostly short, sometimes at the limit. */
static void put_valid_name(struct rng *r, struct buf *b)
{
	unsigned int len;

	switch (rnd(r, 10)) {
	case 0:
		len = NAME_LEN_MAX;
		break;
	case 1:
		len = NAME_LEN_MAX - 1 - rnd(r, 4);
		break;
	default:
		len = 1 + rnd(r, 12);
		break;
	}
	bputc(b, 'f');
	put_name(r, b, len - 1);
}

/* Write @a as an address, in one of the forms kpatch should accept. */
static void put_addr(struct rng *r, struct buf *b, unsigned long a)
{
	switch (rnd(r, 24)) {
	case 0:
		bprintf(b, "0x%016lx", a);
		break;
	case 1:
		bprintf(b, "%lx", a);
		break;
	case 2:
		bprintf(b, "%016lX", a);
		break;
	case 3:
		bprintf(b, "0x%lx", a);
		break;
	case 4:
		bprintf(b, "%0*lx", 17 + rnd(r, 24), a);
		break;
	case 5:
		bprintf(b, "0X%016lx", a);	/* Documentation.txt: unclear */
		break;
	default:
		bprintf(b, "%016lx", a);
		break;
	}
}

static const char * const verbs[] = { "patch", "replace", "unpatch" };

/* A random usable test function of @group; @old: one that can be old. */
static int pick_safe(struct rng *r, int group, bool old)
{
	int cand[S_COUNT], n = 0, i;

	for (i = 0; i < S_COUNT; i++)
		if (safe_usable(i) && (!group || safe[i].group == group) &&
		    (!old || safe[i].trace))
			cand[n++] = i;
	return n ? cand[rnd(r, n)] : S_A;
}

/*
 * Pairs of test functions for a command meant to be accepted: one group,
 * distinct old functions, no new function among them, no chain with
 * "base" unless @replace.
 */
static unsigned int pick_valid_pairs(struct rng *r, bool replace,
				     unsigned long *old, unsigned long *new,
				     unsigned int want)
{
	unsigned int n = 0, tries, i;

	for (tries = 0; n < want && tries < 40; tries++) {
		int group = chance(r, 80) ? 1 : 2;
		int o = pick_safe(r, group, true), w = pick_safe(r, group, false);
		bool ok = o != w;

		if (!replace && (o == S_A1 || w == S_A))
			ok = false;
		for (i = 0; i < n && ok; i++)
			if (old[i] == safe[o].addr || old[i] == safe[w].addr ||
			    new[i] == safe[o].addr)
				ok = false;
		if (!ok)
			continue;
		old[n] = safe[o].addr;
		new[n] = safe[w].addr;
		n++;
	}
	return n;
}

static void put_hook(struct rng *r, struct buf *b, bool valid);

/*
 * A command the model accepts (mostly patch, some replace and unpatch;
 * some as a dry run, some with hooks).
 */
static void gen_valid(struct rng *r, struct buf *b)
{
	unsigned long old[4], new[4];
	unsigned int n, i, verb;

	if (chance(r, 10))
		bputs(b, "check ");
	if (chance(r, 8)) {
		bputs(b, "unpatch");
		put_sep(r, b);
		bputs(b, BASE_NAME);
	} else {
		verb = chance(r, 20) ? V_REPLACE : V_PATCH;
		bputs(b, verbs[verb]);
		put_sep(r, b);
		put_valid_name(r, b);
		n = pick_valid_pairs(r, verb == V_REPLACE, old, new,
				     1 + (chance(r, 30) ? rnd(r, 3) : 0));
		for (i = 0; i < n; i++) {
			put_sep(r, b);
			put_addr(r, b, old[i]);
			put_sep(r, b);
			put_addr(r, b, new[i]);
		}
		if (chance(r, 10)) {
			put_sep(r, b);
			put_hook(r, b, true);
		}
	}
	if (chance(r, 30))
		bputc(b, '\n');
}

/* Some address on or near a boundary, mostly not a function start. */
static unsigned long boundary_addr(struct rng *r)
{
	static int on_stack;
	unsigned long a, f;

	switch (rnd(r, 34)) {
	case 0:
		return 0;
	case 1:
		return ~0UL;
	case 2:
		return ~0UL - 1;
	case 3:
		return 1;
	case 4:
		return 0x8000000000000000UL;		/* non-canonical */
	case 5:
		return 0x0000800000000000UL;		/* non-canonical */
	case 6:
		return 0xffff7fffffffffffUL;		/* non-canonical */
	case 7:
		return 0x00007fffffffffffUL;		/* top of user space */
	case 8:
		return (unsigned long)&on_stack;	/* our data */
	case 9:
		return (unsigned long)boundary_addr;	/* our text */
	case 10:
		return (unsigned long)&a;		/* our stack */
	case 11:
		return 0x400000 + rnd(r, 0x100000);	/* user space */
	case 12:
		return k_text - 1;
	case 13:
		return k_etext_page;
	case 14:
		return k_end;
	case 15:
		return 0xffff888000000000UL + (rnext(r) & 0xfffffff000UL);
	case 16:
		return 0xffffffffc0000000UL + (rnext(r) & 0x3fffffff);
	case 17:
		return rnext(r);
	case 18:	/* one byte (or a few) past a test function start */
		f = safe[pick_safe(r, 0, false)].addr;
		return f + 1 + rnd(r, 9);
	case 19:	/* the last byte of a test function */
		f = safe[pick_safe(r, 0, false)].addr;
		return sym_next(f) - 1;
	case 20:	/* past a kernel function start: +1, the fentry site */
		f = pool_pick(r, &p_vtext, k_text);
		return f + 1 + rnd(r, 9);
	case 21:	/* the last byte of a kernel function */
		f = pool_pick(r, &p_vtext, k_text);
		return sym_next(f) - 1;
	case 22:	/* inside a module function */
		f = pool_pick(r, &p_mtext, k_text);
		return f + 1 + rnd(r, sym_next(f) - f > 1 ?
				      sym_next(f) - f - 1 : 1);
	case 23:
	case 24:
		return pool_pick(r, &p_vdata, k_end);	/* kernel data */
	case 25:
		return pool_pick(r, &p_vlow, 0);	/* per-cpu, absolute */
	case 26:
	case 27:
		return pool_pick(r, &p_mdata, 0);	/* module data */
	case 28:
		return pool_pick(r, &p_vinit, 0);	/* freed init text */
	case 29:
		return pool_pick(r, &p_mother, 0);	/* BPF, trampolines */
	case 30:
		return safe[S_NOTRACE].addr;		/* notrace */
	case 31:	/* between functions: end of one, aligned or not */
		f = pool_pick(r, &p_vtext, k_text);
		return sym_next(f) - 1 - rnd(r, 4);
	case 32:
		return k_sdata - 1 - rnd(r, 8);
	default:
		return k_einittext + rnd(r, 64);
	}
}

/* A function start kpatch may take: a test function or a real one. */
static unsigned long function_addr(struct rng *r, bool old)
{
	switch (rnd(r, 4)) {
	case 0:
		return pool_pick(r, &p_vtext, k_text);
	case 1:
		return pool_pick(r, &p_mtext, k_text);
	default:
		return safe[pick_safe(r, 0, old)].addr;
	}
}

/* A token of any kind, for token soups and replacements. */
static void put_token(struct rng *r, struct buf *b)
{
	static const char * const junk[] = {
		"0x", "0X", "-1", "+1", "0x0x1", "x", "g", "-", "_", "ffff",
		"0xffffffffffffffff", "10000000000000000", "patch", "replace",
		"unpatch", BASE_NAME, "PATCH", "Unpatch", "%s", "%n", "\\",
		"check", "=", "pre-patch=", "=0", "Check",
		"\"", "'", "..", "/", "\x7f", "\xff", "\x80", "\r", "\v", "\f",
	};
	unsigned int i, n;

	switch (rnd(r, 11)) {
	case 0:
		bputs(b, verbs[rnd(r, 3)]);
		break;
	case 1:
		put_valid_name(r, b);
		break;
	case 10:
		put_hook(r, b, chance(r, 50));
		break;
	case 2:
		put_addr(r, b, function_addr(r, chance(r, 50)));
		break;
	case 3:
		put_addr(r, b, boundary_addr(r));
		break;
	case 4:
		bputs(b, junk[rnd(r, ARRAY_SIZE(junk))]);
		break;
	case 5:
		n = 1 + rnd(r, 20);
		for (i = 0; i < n; i++)
			bputc(b, "0123456789abcdefABCDEFxX"[rnd(r, 24)]);
		break;
	case 6:
		n = 1 + rnd(r, 12);
		for (i = 0; i < n; i++)
			bputc(b, 0x21 + rnd(r, 0x5e));
		break;
	case 7:
		n = 1 + rnd(r, 6);
		for (i = 0; i < n; i++)
			bputc(b, 1 + rnd(r, 255));
		break;
	default:
		put_addr(r, b, safe[pick_safe(r, 0, false)].addr);
		break;
	}
}

/* random bytes */
static void gen_bytes(struct rng *r, struct buf *b)
{
	unsigned int len, i, kind = rnd(r, 4);

	switch (rnd(r, 10)) {
	case 0:
		len = 0;
		break;
	case 1:
	case 2:
	case 3:
	case 4:
		len = 1 + rnd(r, 64);
		break;
	case 9:
		len = 512 + rnd(r, CMD_MAX - 512 + 8);
		break;
	default:
		len = 1 + rnd(r, 512);
		break;
	}
	for (i = 0; i < len; i++) {
		switch (kind) {
		case 0:
			bputc(b, rnd(r, 256));
			break;
		case 1:
			bputc(b, 0x20 + rnd(r, 0x5f));
			break;
		case 2:
			bputc(b, " \t0123456789abcdefx\n"[rnd(r, 20)]);
			break;
		default:
			bputc(b, chance(r, 3) ? 0 : 1 + rnd(r, 255));
			break;
		}
	}
}

/* token soups: grammar-aware random commands */
static void gen_tokens(struct rng *r, struct buf *b)
{
	unsigned int n = 1 + rnd(r, chance(r, 80) ? 6 : 40), i;

	if (chance(r, 10))
		put_sep(r, b);
	if (chance(r, 80)) {
		bputs(b, verbs[rnd(r, 3)]);
		n--;
		put_sep(r, b);
	}
	for (i = 0; i < n; i++) {
		put_token(r, b);
		if (i + 1 < n)
			put_sep(r, b);
	}
	if (chance(r, 10))
		put_sep(r, b);
	if (chance(r, 30))
		bputc(b, '\n');
	if (chance(r, 3))
		bputc(b, '\0');
}

/* Pad the command in @b with blanks before its last token to @len. */
static void pad_to(struct rng *r, struct buf *b, size_t len)
{
	size_t pos = b->len, n, i;

	if (len <= b->len)
		return;
	if (pos && b->p[pos - 1] == '\n')
		pos--;
	while (pos && b->p[pos - 1] != ' ' && b->p[pos - 1] != '\t')
		pos--;
	n = len - b->len;
	if (n > b->cap - b->len)
		n = b->cap - b->len;
	memmove(b->p + pos + n, b->p + pos, b->len - pos);
	for (i = 0; i < n; i++)
		b->p[pos + i] = chance(r, 80) ? ' ' : '\t';
	b->len += n;
}

/* over-long writes, and long but valid ones */
static void gen_long(struct rng *r, struct buf *b)
{
	static const unsigned int lens[] = {
		CMD_MAX + 1, CMD_MAX + 2, CMD_MAX + 3, CMD_MAX + 64, 5000,
		8191, 8192, 65536, 65537, BUF_MAX,
	};
	unsigned int len, i, n;
	size_t at;

	switch (rnd(r, 20)) {
	case 0:		/* a valid command of 4095 to 4097 bytes */
		gen_valid(r, b);
		if (b->p[b->len - 1] == '\n')
			b->len--;
		pad_to(r, b, CMD_MAX - 1 + rnd(r, 3));
		if (chance(r, 50))
			bputc(b, '\n');
		break;
	case 1:		/* anything longer than 4096 bytes */
	case 2:
	case 3:
	case 4:
	case 5:
		len = lens[rnd(r, ARRAY_SIZE(lens))];
		if (chance(r, 50)) {
			gen_valid(r, b);
			pad_to(r, b, len);
		} else {
			for (i = 0; i < len; i++)
				bputc(b, rnd(r, 256));
		}
		break;
	case 6:		/* an address with thousands of digits */
		bputs(b, chance(r, 80) ? "patch " : "replace ");
		put_valid_name(r, b);
		bputc(b, ' ');
		at = b->len;
		n = 17 + rnd(r, CMD_MAX - 40 - at);
		for (i = 16; i < n; i++)
			bputc(b, '0');
		bprintf(b, "%016lx %016lx", safe[S_B].addr, safe[S_B1].addr);
		if (chance(r, 30))
			b->p[at] = '1';		/* now it overflows */
		break;
	case 7:		/* a name of thousands of characters */
	case 8:
		bputs(b, verbs[rnd(r, 3)]);
		bputc(b, ' ');
		put_name(r, b, 64 + rnd(r, 4000));
		bprintf(b, " %016lx %016lx", safe[S_B].addr, safe[S_B1].addr);
		if (b->len > CMD_MAX + 2)
			b->len = CMD_MAX + rnd(r, 3);
		break;
	case 9:		/* thousands of tokens */
	case 10:
	case 11:
		bputs(b, "patch ");
		put_valid_name(r, b);
		n = 100 + rnd(r, 1900);
		for (i = 0; i < n; i++)
			bputs(b, chance(r, 50) ? " 0" : " 1");
		if (b->len > CMD_MAX)
			b->len = CMD_MAX - rnd(r, 3);
		break;
	case 12:	/* blanks only */
	case 13:
		len = CMD_MAX - 1 + rnd(r, 3);
		for (i = 0; i < len; i++)
			bputc(b, chance(r, 50) ? ' ' : '\t');
		break;
	default:	/* several commands or lines in one write */
		n = 2 + rnd(r, 30);
		for (i = 0; i < n; i++) {
			gen_valid(r, b);
			if (b->p[b->len - 1] != '\n')
				bputc(b, '\n');
			if (chance(r, 20))
				bputc(b, '\n');
		}
		break;
	}
}

/* Token spans of @b (split on blanks and newlines): count, or -1. */
static int token_spans(const struct buf *b, size_t *start, size_t *len,
		       int max)
{
	size_t k = 0;
	int n = 0;

	while (k < b->len && n < max) {
		if (strchr(" \t\n", b->p[k]) && b->p[k]) {
			k++;
			continue;
		}
		start[n] = k;
		while (k < b->len && !(strchr(" \t\n", b->p[k]) && b->p[k]))
			k++;
		len[n] = k - start[n];
		n++;
	}
	return n;
}

/* One mutation of @b. */
static void mutate(struct rng *r, struct buf *b)
{
	static const unsigned char odd[] = {
		0, '\n', '\t', ' ', 0xff, 0x80, 'x', 'X', 'g', '0', 'f', 'F',
		'-', '_', '.', ':', '/', '\r', 0x7f, 'z', '1',
	};
	size_t start[64], len[64], pos = b->len ? rnd(r, b->len) : 0;
	int nt = token_spans(b, start, len, 64), t, u;
	unsigned char c, tmp[CMD_MAX];
	struct buf t2;

	switch (rnd(r, 15)) {
	case 0:		/* truncate */
		b->len = pos;
		break;
	case 1:		/* flip a bit */
		if (b->len)
			b->p[pos] ^= 1 << rnd(r, 8);
		break;
	case 2:		/* replace a byte */
		if (b->len)
			b->p[pos] = rnd(r, 256);
		break;
	case 3:
		if (b->len)
			b->p[pos] = odd[rnd(r, sizeof(odd))];
		break;
	case 4:		/* insert a byte */
		c = chance(r, 50) ? odd[rnd(r, sizeof(odd))] : rnd(r, 256);
		binsert(b, chance(r, 20) ? b->len : pos, &c, 1);
		break;
	case 5:		/* delete bytes */
		bdelete(b, pos, 1 + (chance(r, 20) ? rnd(r, 8) : 0));
		break;
	case 6:		/* duplicate a slice */
		if (b->len) {
			size_t n = 1 + rnd(r, b->len - pos);

			n = n > sizeof(tmp) ? sizeof(tmp) : n;
			memcpy(tmp, b->p + pos, n);
			binsert(b, rnd(r, b->len + 1), tmp, n);
		}
		break;
	case 7:		/* swap two tokens */
		if (nt >= 2) {
			t = rnd(r, nt);
			u = rnd(r, nt);
			if (t > u) {
				int x = t;

				t = u;
				u = x;
			}
			if (t != u && len[t] + len[u] <= sizeof(tmp)) {
				size_t lu = len[u], lt = len[t];

				memcpy(tmp, b->p + start[u], lu);
				memcpy(tmp + lu, b->p + start[t], lt);
				bdelete(b, start[u], lu);
				binsert(b, start[u], tmp + lu, lt);
				bdelete(b, start[t], lt);
				binsert(b, start[t], tmp, lu);
			}
		}
		break;
	case 8:		/* drop a token */
		if (nt) {
			t = rnd(r, nt);
			bdelete(b, start[t], len[t]);
		}
		break;
	case 9:		/* repeat a token */
		t = nt ? rnd(r, nt) : 0;
		if (nt && len[t] < sizeof(tmp) - 1) {
			tmp[0] = ' ';
			memcpy(tmp + 1, b->p + start[t], len[t]);
			binsert(b, start[t] + len[t], tmp, len[t] + 1);
		}
		break;
	case 10:	/* change the case of a token */
		if (nt) {
			size_t i;

			t = rnd(r, nt);
			for (i = start[t]; i < start[t] + len[t]; i++)
				b->p[i] = isupper(b->p[i]) ? tolower(b->p[i]) :
					  toupper(b->p[i]);
		}
		break;
	case 11:	/* replace a token */
		if (nt) {
			t = rnd(r, nt);
			binit(&t2, 256);
			put_token(r, &t2);
			bdelete(b, start[t], len[t]);
			binsert(b, start[t], t2.p, t2.len);
			free(t2.p);
		}
		break;
	case 12:	/* one hex digit up or down */
		if (nt > 2) {
			t = 2 + rnd(r, nt - 2);
			pos = start[t] + rnd(r, len[t]);
			if (hexval(b->p[pos]) >= 0)
				b->p[pos] += chance(r, 50) ? 1 : -1;
		}
		break;
	case 13:	/* append something */
		switch (rnd(r, 5)) {
		case 0:
			bputc(b, '\0');
			break;
		case 1:
			bputs(b, "\n\n");
			break;
		case 2:
			bputs(b, " 0");
			break;
		case 3:
			bputc(b, ' ');
			put_token(r, b);
			break;
		default:
			bputs(b, "\t\n");
			break;
		}
		break;
	default:	/* add a pair of anything */
		bputc(b, ' ');
		put_addr(r, b, chance(r, 50) ? function_addr(r, true) :
			 boundary_addr(r));
		bputc(b, ' ');
		put_addr(r, b, chance(r, 50) ? function_addr(r, false) :
			 boundary_addr(r));
		break;
	}
}

static void judge(const struct buf *b, struct judgement *j);

/*
 * truncated and mutated valid commands; most mutations that leave the
 * command valid are followed by another one
 */
static void gen_mutate(struct rng *r, struct buf *b)
{
	static struct judgement j;
	unsigned int n = 1 + (chance(r, 30) ? rnd(r, 4) : 0), more = 0;

	gen_valid(r, b);
	while (n--) {
		mutate(r, b);
		if (!n && more++ < 4 && chance(r, 90)) {
			judge(b, &j);
			if (j.allowed == M_OK)
				n++;
		}
	}
}

/* boundary addresses as old and new functions */
static void gen_addr(struct rng *r, struct buf *b)
{
	unsigned int n = chance(r, 75) ? 1 : 2 + rnd(r, 3), i;

	bputs(b, chance(r, 85) ? "patch" : "replace");
	put_sep(r, b);
	if (chance(r, 3))
		bputs(b, BASE_NAME);
	else
		put_valid_name(r, b);
	for (i = 0; i < n; i++) {
		unsigned long o, w;

		switch (rnd(r, 21) / 4) {
		case 0:
			o = boundary_addr(r);
			w = safe[pick_safe(r, 0, false)].addr;
			break;
		case 1:
			o = safe[pick_safe(r, 0, true)].addr;
			w = boundary_addr(r);
			break;
		case 2:		/* a real kernel function and a bad new one */
			o = function_addr(r, true);
			w = boundary_addr(r);
			break;
		case 3:
			o = boundary_addr(r);
			w = boundary_addr(r);
			break;
		case 4:
			o = boundary_addr(r);
			w = function_addr(r, false);
			break;
		default:	/* a test pair, valid or not */
			o = safe[pick_safe(r, 0, chance(r, 90))].addr;
			w = safe[pick_safe(r, 0, false)].addr;
			break;
		}
		put_sep(r, b);
		put_addr(r, b, o);
		put_sep(r, b);
		put_addr(r, b, w);
	}
	if (chance(r, 30))
		bputc(b, '\n');
}

/* names at and past the length limit, and with bad bytes */
static void gen_name(struct rng *r, struct buf *b)
{
	static const unsigned int lens[] = {
		1, 2, NAME_LEN_MAX - 1, NAME_LEN_MAX, NAME_LEN_MAX, 64, 64, 65,
		127, 128, 255, 256, 1000,
	};
	static const unsigned char bad[] = {
		'.', '/', ':', '%', '\\', '!', '"', '#', '$', '&', '\'', '(',
		')', '*', '+', ',', ';', '<', '=', '>', '?', '@', '[', ']',
		'^', '`', '{', '|', '}', '~', 0x7f, 0x80, 0xe9, 0xff, 0x01,
		0x1b, '\r', '\v', '\f', 0,
	};
	unsigned long old[4], new[4];
	unsigned int len = lens[rnd(r, ARRAY_SIZE(lens))], verb, n, i;
	size_t at;

	verb = rnd(r, 10) < 6 ? V_PATCH : chance(r, 50) ? V_REPLACE : V_UNPATCH;
	bputs(b, verbs[verb]);
	put_sep(r, b);
	at = b->len;
	switch (rnd(r, 8)) {
	case 0:
		bputs(b, BASE_NAME);
		break;
	case 1:
		bputs(b, verbs[rnd(r, 3)]);
		break;
	case 2:
		put_name(r, b, len);
		break;
	default:	/* with bad bytes */
		put_name(r, b, len);
		for (n = 1 + (chance(r, 20) ? rnd(r, 4) : 0); n; n--)
			b->p[at + rnd(r, len)] = bad[rnd(r, sizeof(bad))];
		break;
	}
	if (verb != V_UNPATCH || chance(r, 10)) {
		n = chance(r, 15) ?
		    pick_valid_pairs(r, verb == V_REPLACE, old, new, 1) : 0;
		for (i = 0; i < n; i++) {
			put_sep(r, b);
			put_addr(r, b, old[i]);
			put_sep(r, b);
			put_addr(r, b, new[i]);
		}
		if (!n) {
			put_sep(r, b);
			put_token(r, b);
		}
	}
	if (chance(r, 30))
		bputc(b, '\n');
}

/* many pairs */
static void gen_pairs(struct rng *r, struct buf *b)
{
	unsigned int n = 2 + rnd(r, chance(r, 50) ? 10 : 110), i, special;
	unsigned int kind = rnd(r, 21) / 4, verb = chance(r, 80) ? V_PATCH : V_REPLACE;
	unsigned long old[4], new[4], o, w, o0 = 0;

	bputs(b, verbs[verb]);
	put_sep(r, b);
	put_valid_name(r, b);
	if (kind == 5) {	/* a valid command of several pairs */
		n = pick_valid_pairs(r, verb == V_REPLACE, old, new,
				     2 + rnd(r, 3));
		for (i = 0; i < n; i++)
			bprintf(b, " %016lx %016lx", old[i], new[i]);
		return;
	}
	/*
	 * Old functions from modules (each one pins its module) and the
	 * kernel, new ones from the test modules, and one thing wrong.
	 */
	special = 1 + rnd(r, n - 1);
	for (i = 0; i < n && b->len < CMD_MAX - 80; i++) {
		o = chance(r, 50) ? pool_pick(r, &p_mtext, k_text) :
				    function_addr(r, true);
		w = safe[pick_safe(r, 0, false)].addr;
		if (!i)
			o0 = o;
		if (i == special) {
			if (kind == 0)		/* a bad pair */
				w = boundary_addr(r);
			else if (kind == 1)	/* the same old twice */
				o = o0;
			else if (kind == 2)	/* a new that is an old */
				w = o0;
		}
		bputc(b, ' ');
		put_addr(r, b, o);
		bputc(b, ' ');
		put_addr(r, b, w);
	}
	if (kind == 3)		/* an odd number of addresses */
		bprintf(b, " %016lx", safe[S_B].addr);
	if (kind == 4)		/* a chain with "base" */
		bprintf(b, " %016lx %016lx", safe[S_A1].addr, safe[S_A2].addr);
}

/* verbs and unpatch */
static void gen_verb(struct rng *r, struct buf *b)
{
	static const char * const bad[] = {
		"", "patc", "patchh", "Patch", "PATCH", "unpatc", "un", "re",
		"replac", "replaces", "REPLACE", "unpatch-", "-patch", "patch:",
		"patch\x01", "patch\r", "\xffpatch", "pa tch",
	};
	unsigned int c = rnd(r, 24);

	switch (c ? 1 + c % 11 : 0) {
	case 0:		/* unpatch base, valid */
		if (chance(r, 30))
			put_sep(r, b);
		bputs(b, "unpatch");
		put_sep(r, b);
		bputs(b, BASE_NAME);
		if (chance(r, 30))
			put_sep(r, b);
		break;
	case 1:		/* unpatch of an unknown name */
	case 2:
		bputs(b, "unpatch");
		put_sep(r, b);
		put_valid_name(r, b);
		break;
	case 3:		/* unpatch with a word too many or too few */
	case 4:
		bputs(b, "unpatch");
		if (chance(r, 70)) {
			put_sep(r, b);
			bputs(b, chance(r, 50) ? BASE_NAME : "x");
			put_sep(r, b);
			put_token(r, b);
		}
		break;
	case 5:		/* a verb alone */
	case 6:
		bputs(b, verbs[rnd(r, 3)]);
		if (chance(r, 50))
			put_sep(r, b);
		break;
	default:	/* a bad verb with good arguments */
		bputs(b, bad[rnd(r, ARRAY_SIZE(bad))]);
		put_sep(r, b);
		put_valid_name(r, b);
		bprintf(b, " %016lx %016lx", safe[S_B].addr, safe[S_B1].addr);
		break;
	}
	if (chance(r, 30))
		bputc(b, '\n');
}

/*
 * One hook word.  @valid: a hook of kpatch_test_shadow in a slot where the
 * model accepts it (nop anywhere, veto in a patch slot); else anything,
 * mostly hostile: an unknown hook name, a bad or missing ADDR, '=' at the
 * edges, an address in vmlinux, in data, past a function start, of another
 * module's function (may be accepted: only in a dry run then), of the
 * going module.
 */
static void put_hook(struct rng *r, struct buf *b, bool valid)
{
	static const char * const bad_names[] = {
		"", "pre", "patch", "pre_patch", "prepatch", "Pre-patch",
		"PRE-PATCH", "pre-patch-", "-pre-patch", "post-patched",
		"stop", "undo", "check", "pre-unpatc", "undo-unpatch2",
		"stop-patch\x01", "post\xffpatch", "pre--patch", "base",
	};
	static const char * const junk[] = {
		"pre-patch=", "=", "==", "=abc", "=0", "pre-patch==1",
		"pre-patch=0", "pre-patch=0x", "pre-patch=x1", "post-patch=-1",
		"stop-patch=0x0x1", "undo-patch=g", "pre-patch= ",
		"post-unpatch=10000000000000000", "stop-unpatch=+1",
		"pre-unpatch=0xffffffffffffffff=", "=pre-patch",
	};
	unsigned int h = rnd(r, NR_HOOKS), k = valid ? 0 : rnd(r, 12);
	unsigned long a = hookfn[H_NOP].addr;

	if (k < 4 && h % 4 < 2 && chance(r, 30) &&
	    (h < HOOK_PRE_UNPATCH || !valid))
		a = hookfn[H_VETO].addr;
	switch (k) {
	case 4:		/* vmlinux text */
		a = pool_pick(r, &p_vtext, k_text);
		break;
	case 5:
		a = boundary_addr(r);
		break;
	case 6:		/* another module's function */
		a = function_addr(r, false);
		break;
	case 7:		/* an unknown hook name */
		bprintf(b, "%s=", bad_names[rnd(r, ARRAY_SIZE(bad_names))]);
		put_addr(r, b, a);
		return;
	case 8:
		bputs(b, junk[rnd(r, ARRAY_SIZE(junk))]);
		return;
	case 9:		/* a test function (returns a value, not 0) */
		a = safe[pick_safe(r, 0, false)].addr;
		break;
	case 10:	/* past the start of a hook */
		a += 1 + rnd(r, 8);
		break;
	case 11:	/* the going module's function, or its data */
		a = safe[S_GOING].addr ? safe[S_GOING].addr : k_end;
		break;
	}
	bprintf(b, "%s=", hook_names[h]);
	put_addr(r, b, a);
}

/*
 * patch/replace (sometimes as a dry run) with hook words anywhere after
 * NAME: valid ones, the same hook twice, hostile ones
 */
static void gen_hook(struct rng *r, struct buf *b)
{
	unsigned long old[4], new[4];
	unsigned int n, nh = 1 + rnd(r, 4), i, verb;
	char words[4][80];
	struct buf w;
	bool twice = chance(r, 10);

	if (chance(r, 25))
		bputs(b, "check ");
	verb = chance(r, 20) ? V_REPLACE : V_PATCH;
	bputs(b, verbs[verb]);
	put_sep(r, b);
	if (chance(r, 4))
		bputs(b, BASE_NAME);
	else
		put_valid_name(r, b);
	n = pick_valid_pairs(r, verb == V_REPLACE, old, new,
			     1 + (chance(r, 20) ? 1 : 0));
	if (chance(r, 3))
		n = 0;		/* hooks only */
	for (i = 0; i < nh; i++) {
		if (twice && i) {	/* the same hook again */
			strcpy(words[i], words[0]);
			continue;
		}
		w.p = (unsigned char *)words[i];
		w.len = 0;
		w.cap = sizeof(words[i]) - 1;
		put_hook(r, &w, chance(r, 60));
		bstr(&w);
	}
	/* The hooks at random places among the address words. */
	for (i = 0; i < 2 * n || nh; ) {
		put_sep(r, b);
		if (nh && (i == 2 * n || chance(r, 35))) {
			bputs(b, words[--nh]);
			continue;
		}
		put_addr(r, b, i % 2 ? new[i / 2] : old[i / 2]);
		i++;
	}
	if (chance(r, 30))
		bputc(b, '\n');
}

/* check: its modes, and dry runs of every kind of command */
static void gen_check(struct rng *r, struct buf *b)
{
	static const char * const bad_modes[] = {
		"", "check", "Patch", "unpatchx", "patch\x01", "PATCH",
		"replac", "base", "=", "pre-patch=1",
	};

	switch (rnd(r, 12)) {
	case 0:		/* a bad mode, or none */
		bputs(b, "check");
		if (chance(r, 80)) {
			put_sep(r, b);
			bputs(b, bad_modes[rnd(r, ARRAY_SIZE(bad_modes))]);
		}
		if (chance(r, 50)) {
			put_sep(r, b);
			put_valid_name(r, b);
			bprintf(b, " %016lx %016lx", safe[S_B].addr,
				safe[S_B1].addr);
		}
		break;
	case 1:		/* check unpatch: base, unknown, words too many */
		bputs(b, "check unpatch");
		put_sep(r, b);
		if (chance(r, 50))
			bputs(b, BASE_NAME);
		else
			put_valid_name(r, b);
		if (chance(r, 30)) {
			put_sep(r, b);
			put_token(r, b);
		}
		break;
	case 2:
	case 3:
	case 4:
		bputs(b, "check ");
		gen_addr(r, b);
		break;
	case 5:		/* any kernel or module functions: kpatch decides */
	case 6:
		bprintf(b, "check %s f%u", chance(r, 80) ? "patch" : "replace",
			rnd(r, 1000));
		put_sep(r, b);
		put_addr(r, b, function_addr(r, true));
		put_sep(r, b);
		put_addr(r, b, function_addr(r, false));
		if (chance(r, 30)) {
			put_sep(r, b);
			put_hook(r, b, false);
		}
		break;
	case 7:
		bputs(b, "check ");
		gen_pairs(r, b);
		break;
	default:
		bputs(b, "check ");
		gen_valid(r, b);
		break;
	}
}

static unsigned long long seed = 1;

/* Make case @index, generation @attempt, of the main run; its category. */
static int gen_case(unsigned long long index, unsigned int attempt,
		    struct buf *b)
{
	unsigned int w = 0, total = 0, c;
	struct rng r;

	rng_init(&r, seed, 1, index, attempt);
	b->len = 0;
	for (c = 0; c < C_NOCAP; c++)
		total += cat_weight[c];
	w = rnd(&r, total);
	for (c = 0; c < C_NOCAP - 1 && w >= cat_weight[c]; c++)
		w -= cat_weight[c];
	switch (c) {
	case C_BYTES:
		gen_bytes(&r, b);
		break;
	case C_TOKENS:
		gen_tokens(&r, b);
		break;
	case C_LONG:
		gen_long(&r, b);
		break;
	case C_MUTATE:
		gen_mutate(&r, b);
		break;
	case C_ADDR:
		gen_addr(&r, b);
		break;
	case C_NAME:
		gen_name(&r, b);
		break;
	case C_PAIRS:
		gen_pairs(&r, b);
		break;
	case C_HOOK:
		gen_hook(&r, b);
		break;
	case C_CHECK:
		gen_check(&r, b);
		break;
	default:
		gen_verb(&r, b);
		break;
	}
	return c;
}

/* ------------------------------------------------------------------ */
/* The kernel log                                                      */

static int kmsg_fd = -1;
static unsigned int kmsg_lost, nsplats;

static void kmsg_open(void)
{
	kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (kmsg_fd >= 0)
		lseek(kmsg_fd, 0, SEEK_END);
}

/*
 * Read what the kernel logged since the last call; the number of records
 * that start with "kpatch: ".  Splats are counted and shown.
 */
static unsigned int kmsg_drain(void)
{
	char rec[8192], *msg;
	unsigned int nkp = 0;
	ssize_t n;

	if (kmsg_fd < 0)
		return 0;
	for (;;) {
		n = read(kmsg_fd, rec, sizeof(rec) - 1);
		if (n < 0) {
			if (errno == EPIPE) {
				kmsg_lost++;
				continue;
			}
			if (errno == EINTR)
				continue;
			break;
		}
		rec[n] = '\0';
		msg = strchr(rec, ';');
		if (!msg)
			continue;
		msg++;
		msg[strcspn(msg, "\n")] = '\0';
		if (!strncmp(msg, "kpatch: ", 8))
			nkp++;
		if (!regexec(&splat_re, msg, 0, NULL, 0) && nsplats++ < 20)
			printf("# kpfuzz: kernel log: %s\n", msg);
	}
	return nkp;
}

/*
 * The "kpatch: " records since the last call, for a refused command.  A
 * message longer than a log line loses its newline, and the kernel shows
 * such a record only once the next one begins: if none came, log one.
 * (Through a file opened for it: /dev/kmsg rate-limits each opener.)
 */
static unsigned int kmsg_refusal(void)
{
	static const char sync[] = "<7>kpfuzz: sync\n";
	unsigned int nkp = kmsg_drain();
	int fd;

	if (nkp || kmsg_fd < 0)
		return nkp;
	fd = open("/dev/kmsg", O_WRONLY);
	if (fd >= 0) {
		if (write(fd, sync, sizeof(sync) - 1) < 0)
			printf("# kpfuzz: cannot write /dev/kmsg\n");
		close(fd);
	}
	return kmsg_drain();
}

/* ------------------------------------------------------------------ */
/* State                                                               */

static char tracefs_enabled[128];
static struct buf st_base, st_now;	/* baseline, current */
static char cmdline_orig[4096];

/* The state a refused command must not change; without @skip's module. */
static void snapshot(struct buf *s, const char *skip)
{
	char line[512], *f[3];
	FILE *m;
	int i;

	s->len = 0;
	bputs(s, "== patches\n");
	cat_file(s, PATCHES);
	bputs(s, "== sysfs\n");
	list_dir(s, SYSFS_DIR, 0);
	bputs(s, "== enabled_functions\n");
	cat_file(s, tracefs_enabled);
	bputs(s, "== modules\n");
	m = fopen("/proc/modules", "r");
	if (!m) {
		bputs(s, "(no /proc/modules)\n");
		return;
	}
	while (fgets(line, sizeof(line), m)) {
		char *p = line;

		if (strncmp(line, "kpatch", 6))
			continue;
		for (i = 0; i < 3; i++) {
			f[i] = strsep(&p, "\n ");
			if (!f[i])
				f[i] = "";
		}
		if (skip && !strcmp(f[0], skip))
			continue;
		bprintf(s, "%s %s\n", f[0], f[2]);
	}
	fclose(m);
}

static bool same(const struct buf *a, const struct buf *b)
{
	return a->len == b->len && !memcmp(a->p, b->p, a->len);
}

static void print_lines(const char *what, struct buf *b)
{
	char *p = bstr(b), *line;

	printf("# kpfuzz: %s:\n", what);
	while ((line = strsep(&p, "\n")))
		if (*line)
			printf("#   %s\n", line);
}

static void show_state_diff(struct buf *expected, struct buf *actual)
{
	print_lines("expected state", expected);
	print_lines("actual state", actual);
}

/* ------------------------------------------------------------------ */
/* Writing commands                                                    */

static int control_fd = -1;
static bool verbose;

/* Write @b in one write(2) to @fd: 0, the errno, or -1 (short write). */
static int write_cmd(int fd, const struct buf *b)
{
	ssize_t n = write(fd, b->p, b->len);

	if (n < 0)
		return errno;
	return (size_t)n == b->len ? 0 : -1;
}

/* Write the string @s; retries EBUSY a while. */
static int write_str(const char *s)
{
	struct buf b = { .p = (unsigned char *)s, .len = strlen(s) };
	int ret, tries;

	for (tries = 0; tries < 50; tries++) {
		ret = write_cmd(control_fd, &b);
		if (ret != EBUSY)
			break;
		usleep(20000);
	}
	kmsg_drain();
	return ret;
}

static int patch_base(void)
{
	char s[128];

	snprintf(s, sizeof(s), "patch %s %016lx %016lx", BASE_NAME,
		 safe[S_A].addr, safe[S_A1].addr);
	return write_str(s);
}

/* ------------------------------------------------------------------ */
/* Per-category results                                                */

static struct stats {
	unsigned int cases, accepted, vetoed, undocumented, unexpected;
	unsigned int hist[256];		/* by errno; [0]: OK; [255]: other */
} stats[C_COUNT], total;

static unsigned int nstate_fail, naccept_fail, nnolog, nreports;

/* What Documentation.txt leaves open, and what kpatch did */
static unsigned int note_nul, note_upper_x, note_eexist, note_einval;
static unsigned int note_eperm_logs;
static bool aborted;

static void count(int cat, int res)
{
	unsigned int h = res >= 0 && res < 255 ? res : 255;

	stats[cat].cases++;
	stats[cat].hist[h]++;
	total.cases++;
	total.hist[h]++;
	if (!res) {
		stats[cat].accepted++;
		total.accepted++;
	}
}

static void print_hist(const char *what, const struct stats *s)
{
	unsigned int i;

	printf("# kpfuzz: %-7s %6u cases, %4u accepted, %4u regenerated:",
	       what, s->cases, s->accepted, s->vetoed);
	for (i = 0; i < 256; i++)
		if (s->hist[i])
			printf(" %s %u", i == 255 ? "short" : errname(i),
			       s->hist[i]);
	printf("\n");
}

/* Show a failing case and how to replay it. */
static void report(long long index, int cat, const struct buf *b,
		   const char *why, int res, unsigned int allowed)
{
	if (nreports++ >= MAX_REPORTS)
		return;
	printf("# kpfuzz: FAIL: %s case %lld: %s: got %s, allowed ",
	       cat_names[cat], index, why, res < 0 ? "a short write" :
	       errname(res));
	print_mask(allowed);
	printf("\n#   %zu bytes: \"", b->len);
	print_escaped(b->p, b->len, 600);
	printf("\"\n");
	if (index >= 0 && cat < C_NOCAP)
		printf("#   replay: kpfuzz --seed %llu --only %lld%s%s\n", seed,
		       index, going_mod ? " --going " : "",
		       going_mod ? going_mod : "");
}

/* ------------------------------------------------------------------ */
/* Accepted commands                                                   */

/* What calling the function at @addr shows, through the patch table. */
struct entry {
	const char *patch;
	unsigned long old, new;
};

static int model_table(const struct cmd *c, struct entry *e)
{
	unsigned int n = 0, i;

	if (c->verb == V_PATCH) {
		e[n].patch = BASE_NAME;
		e[n].old = safe[S_A].addr;
		e[n++].new = safe[S_A1].addr;
	}
	if (c->verb != V_UNPATCH) {
		for (i = 0; i < c->npairs; i++) {
			e[n].patch = c->name;
			e[n].old = c->old[i];
			e[n++].new = c->new[i];
		}
	}
	return n;
}

static int shown_by(const struct entry *e, int n, int fn)
{
	int i, s;

	for (i = n - 1; i >= 0; i--) {
		if (e[i].old == safe[fn].addr) {
			s = find_safe(e[i].new);
			return s >= 0 ? safe[s].ret : -1000;
		}
	}
	return safe[fn].ret;
}

static char *sym_label(unsigned long addr, char *out, size_t size)
{
	int s = find_safe(addr);

	if (s < 0)
		snprintf(out, size, "?");
	else if (safe[s].mod)
		snprintf(out, size, "%s:%s",
			 s == S_GOING || s == S_GOING_NEW ? going_mod :
			 safe[s].mod, safe[s].name);
	else
		snprintf(out, size, "%s", safe[s].name);
	return out;
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(*(char * const *)a, *(char * const *)b);
}

/*
 * What the order of the patches file fixes about line @l: its patch, and
 * for a hook line (4 fields) which hook.
 */
static const char *line_key(const char *l, char *out, size_t size)
{
	size_t n1 = strcspn(l, " "), n2 = 0, fields = 1;
	const char *p;

	for (p = l; (p = strchr(p, ' ')); p++)
		fields++;
	if (fields == 4)
		n2 = 1 + strcspn(l + n1 + 1, " ");
	snprintf(out, size, "%.*s", (int)(n1 + n2), l);
	return out;
}

/*
 * Is the patches file what the model says after accepted command @c?
 * Compares "NAME OLDSYM OLDADDR NEWSYM NEWADDR STATE" without the sizes,
 * the patches in order, the functions of a patch in any order.
 */
static bool check_patches_file(const struct cmd *c, struct entry *e, int n)
{
	static struct buf file, want;
	char *lines_a[MAX_PAIRS + 16], *lines_w[MAX_PAIRS + 16], *p, *line;
	char sym1[160], sym2[160];
	int na = 0, nw = 0, i, k;
	bool good = true;

	if (!file.p) {
		binit(&file, 1 << 18);
		binit(&want, 1 << 18);
	}
	file.len = 0;
	want.len = 0;
	cat_file(&file, PATCHES);
	p = bstr(&file);
	while ((line = strsep(&p, "\n")) && na < (int)ARRAY_SIZE(lines_a)) {
		char *q;

		if (!*line)
			continue;
		/* drop the +0xSIZE of both symbols */
		for (q = line; (q = strchr(q, '+')); ) {
			size_t sp = strcspn(q, " ");

			memmove(q, q + sp, strlen(q + sp) + 1);
		}
		lines_a[na++] = line;
	}
	for (i = 0; i < n; i++) {
		bool active = true;

		for (k = i + 1; k < n; k++)
			if (e[k].old == e[i].old)
				active = false;
		lines_w[nw++] = (char *)want.p + want.len;
		bprintf(&want, "%s %s %016lx %s %016lx %s", e[i].patch,
			sym_label(e[i].old, sym1, sizeof(sym1)), e[i].old,
			sym_label(e[i].new, sym2, sizeof(sym2)), e[i].new,
			active ? "active" : "shadowed");
		bputc(&want, '\0');
	}
	/* After the patch's functions, its hooks in enum order. */
	for (k = 0; c->verb != V_UNPATCH && k < NR_HOOKS; k++) {
		if (!c->hook[k] || find_hookfn(c->hook[k]) < 0)
			continue;
		lines_w[nw++] = (char *)want.p + want.len;
		bprintf(&want, "%s %s %s:%s %016lx", c->name, hook_names[k],
			HOOK_MOD, hookfn[find_hookfn(c->hook[k])].name,
			c->hook[k]);
		bputc(&want, '\0');
	}
	if (na != nw)
		good = false;
	for (i = 0; good && i < na; i++)
		if (strcmp(line_key(lines_a[i], sym1, sizeof(sym1)),
			   line_key(lines_w[i], sym2, sizeof(sym2))))
			good = false;
	if (good) {
		qsort(lines_a, na, sizeof(char *), cmp_line);
		qsort(lines_w, nw, sizeof(char *), cmp_line);
		for (i = 0; i < na; i++)
			if (strcmp(lines_a[i], lines_w[i]))
				good = false;
	}
	if (!good) {
		printf("# kpfuzz: patches file, expected (without sizes):\n");
		for (i = 0; i < nw; i++)
			printf("#   %s\n", lines_w[i]);
		printf("# kpfuzz: actual:\n");
		for (i = 0; i < na; i++)
			printf("#   %s\n", lines_a[i]);
	}
	return good;
}

/* Do the patched test functions return what the model says? */
static bool check_calls(const struct cmd *c, struct entry *e, int n)
{
	char got[4096], want[4096];
	bool good = true;
	unsigned int i;
	int v;

	read_line(VALUES, got, sizeof(got));
	snprintf(want, sizeof(want), "a=%d b=%d", shown_by(e, n, S_A),
		 shown_by(e, n, S_B));
	if (strcmp(got, want)) {
		printf("# kpfuzz: %s reads '%s', expected '%s'\n", VALUES,
		       got, want);
		good = false;
	}
	for (i = 0; i < c->npairs; i++)
		if (c->old[i] == safe[S_CMDLINE].addr)
			break;
	if (i == c->npairs)
		return good;
	read_line("/proc/cmdline", got, sizeof(got));
	v = shown_by(e, n, S_CMDLINE);
	if (v)
		snprintf(want, sizeof(want), "kpatch-test v%d", v);
	else
		snprintf(want, sizeof(want), "%s", cmdline_orig);
	if (strcmp(got, want)) {
		printf("# kpfuzz: /proc/cmdline reads '%s', expected '%s'\n",
		       got, want);
		good = false;
	}
	return good;
}

static bool check_sysfs(const struct cmd *c)
{
	char path[256];
	bool good = true, base;

	snprintf(path, sizeof(path), "%s/%s", SYSFS_PATCHES, c->name);
	if (c->verb != V_UNPATCH && !is_dir(path)) {
		printf("# kpfuzz: %s is missing\n", path);
		good = false;
	}
	snprintf(path, sizeof(path), "%s/%s", SYSFS_PATCHES, BASE_NAME);
	base = c->verb == V_PATCH;
	if (is_dir(path) != base) {
		printf("# kpfuzz: %s %s\n", path,
		       c->verb == V_PATCH ? "is missing" : "is still there");
		good = false;
	}
	return good;
}

/* Calls of kpatch_test_shadow's hooks so far (all four), or -1. */
static long hook_calls(void)
{
	char line[256];
	long a, b, c, d;

	read_line(HOOK_CALLS, line, sizeof(line));
	if (sscanf(line, "pre-patch=%ld post-unpatch=%ld nop=%ld veto=%ld",
		   &a, &b, &c, &d) != 4)
		return -1;
	return a + b + c + d;
}

/* How many hooks of @c run when it takes effect (@unpatch: is undone). */
static long hooks_run(const struct cmd *c, bool unpatch)
{
	static const unsigned int stages[] = { 0, 1, 3 };	/* pre, stop, post */
	long n = 0;
	size_t i;

	for (i = 0; c->verb != V_UNPATCH && i < ARRAY_SIZE(stages); i++)
		n += !!c->hook[stages[i] + (unpatch ? HOOK_PRE_UNPATCH : 0)];
	return n;
}

/* Undo an accepted command: back to the baseline, or abort the run. */
static bool undo(int verb, const char *name)
{
	static char s[CMD_MAX + 16];
	int ret;

	if (verb != V_UNPATCH) {
		snprintf(s, sizeof(s), "unpatch %s", name);
		ret = write_str(s);
		if (ret) {
			printf("# kpfuzz: undoing: '%.100s' failed: %s\n", s,
			       errname(ret));
			return false;
		}
	}
	if (verb != V_PATCH) {
		ret = patch_base();
		if (ret) {
			printf("# kpfuzz: undoing: patch %s failed: %s\n",
			       BASE_NAME, errname(ret));
			return false;
		}
	}
	return true;
}

/* Undo command @b, accepted against the model: its 2nd word as name. */
static bool undo_unexpected(const struct buf *b)
{
	static char name[CMD_MAX + 1];
	size_t start[2], len[2];
	struct buf t = *b;
	int verb;

	t.len = strnlen((char *)t.p, t.len);	/* kpatch stops at a NUL */
	if (token_spans(&t, start, len, 2) < 2)
		return false;
	if (len[0] == 5 && !memcmp(t.p + start[0], "check", 5))
		return true;	/* a dry run: the state check will tell */
	verb = !memcmp(t.p + start[0], "unpatch", 7) ? V_UNPATCH :
	       !memcmp(t.p + start[0], "replace", 7) ? V_REPLACE : V_PATCH;
	memcpy(name, t.p + start[1], len[1]);
	name[len[1]] = '\0';
	return undo(verb, name);
}

/* Check and undo the accepted case (judged @j), hooks called before: */
static long calls_before;

static void check_accepted(long long index, int cat, const struct buf *b,
			   const struct judgement *j)
{
	static struct entry e[MAX_PAIRS + 1];
	bool good = true;
	int n;

	if (!(j->allowed & M_OK) || !j->have_cmd) {
		/* Reported as unexpected already; try to get back. */
		if (!undo_unexpected(b)) {
			printf("# kpfuzz: cannot undo case %lld; giving up\n",
			       index);
			aborted = true;
			return;
		}
	} else {
		long calls = hook_calls(), want;

		n = model_table(&j->cmd, e);
		want = hooks_run(&j->cmd, false);
		if (calls - calls_before != want) {
			printf("# kpfuzz: %ld calls of the hooks, expected %ld\n",
			       calls - calls_before, want);
			good = false;
		}
		calls_before = calls;
		snapshot(&st_now, NULL);
		if (same(&st_now, &st_base)) {
			printf("# kpfuzz: the state did not change\n");
			good = false;
		}
		good &= check_patches_file(&j->cmd, e, n);
		good &= check_sysfs(&j->cmd);
		good &= check_calls(&j->cmd, e, n);
		if (!good) {
			naccept_fail++;
			report(index, cat, b, "accepted, but not as expected", 0,
			       j->allowed);
		}
		if (!undo(j->cmd.verb, j->cmd.name)) {
			naccept_fail++;
			report(index, cat, b, "cannot undo", 0, j->allowed);
			aborted = true;
			return;
		}
		want = hooks_run(&j->cmd, true);
		if (hook_calls() - calls_before != want) {
			naccept_fail++;
			report(index, cat, b, "undone, but not as many hook calls as hooks",
			       0, j->allowed);
			printf("# kpfuzz: %ld calls of the unpatch hooks, expected %ld\n",
			       hook_calls() - calls_before, want);
		}
	}
	snapshot(&st_now, NULL);
	if (!same(&st_now, &st_base)) {
		naccept_fail++;
		report(index, cat, b, "state not back to the baseline after undo",
		       0, j->allowed);
		show_state_diff(&st_base, &st_now);
		aborted = true;
	}
}

/* ------------------------------------------------------------------ */
/* The main run                                                        */

static unsigned int check_every = 20, pending;
static double t_write, t_accept, t_check;
static unsigned int n_check;
static long long pending_from = -1;

/*
 * A dry run (judged @j, result @res) ran no hook, and the check file's
 * first line is "VERB NAME ERRNO" for it.  Its state is compared with the
 * refused commands'.
 */
static unsigned int ndry, ndry_ok, ndry_hooks, ndry_file;

static void check_dry_run(long long index, int cat, const struct buf *b,
			  const struct judgement *j, int res)
{
	char line[256], want[256];

	ndry++;
	ndry_ok += !res;
	if (hook_calls() != calls_before) {
		ndry_hooks++;
		report(index, cat, b, "a dry run called hooks", res, j->allowed);
	}
	if (!j->check_line[0] || res < 0 || memchr(b->p, 0, b->len))
		return;
	read_line(CHECKFILE, line, sizeof(line));
	snprintf(want, sizeof(want), "%s %d", j->check_line, -res);
	if (strcmp(line, want)) {
		ndry_file++;
		report(index, cat, b, "check file", res, j->allowed);
		printf("# kpfuzz: %s reads '%s', expected '%s'\n", CHECKFILE,
		       line, want);
	}
}

/* Compare the state with the baseline after refused commands. */
static void check_pending(void)
{
	double t = now_s();

	if (!pending)
		return;
	n_check++;
	snapshot(&st_now, NULL);
	if (!same(&st_now, &st_base)) {
		nstate_fail++;
		printf("# kpfuzz: FAIL: state changed by one of %u cases from %lld\n",
		       pending, pending_from);
		printf("#   replay: kpfuzz --seed %llu --from %lld --cases %u --check-every 1\n",
		       seed, pending_from, pending);
		show_state_diff(&st_base, &st_now);
		aborted = true;
	}
	pending = 0;
	pending_from = -1;
	t_check += now_s() - t;
}

/* Write case @b (category @cat, judged @j) and check what it did. */
static int run_one(int fd, long long index, int cat, const struct buf *b,
		   const struct judgement *j)
{
	unsigned int nkp;
	double t;
	int res;

	if ((j->allowed & M_OK) && !j->check)
		check_pending();
	if (aborted)
		return -2;
	if ((j->allowed & M_OK) || j->check)
		calls_before = hook_calls();
	t = now_s();
	res = write_cmd(fd, b);
	t_write += now_s() - t;
	nkp = res > 0 ? kmsg_refusal() : kmsg_drain();
	count(cat, res);
	if (j->check)
		check_dry_run(index, cat, b, j, res);
	if (verbose) {
		printf("# case %lld %s: \"", index, cat_names[cat]);
		print_escaped(b->p, b->len, 200);
		printf("\" -> %s (allowed ", res < 0 ? "short" : errname(res));
		print_mask(j->allowed);
		printf(")\n");
	}
	if (res > 0 && !documented(res)) {
		stats[cat].undocumented++;
		report(index, cat, b, "undocumented errno", res, j->allowed);
	} else if (res < 0 || !(rbit(res) & j->allowed)) {
		stats[cat].unexpected++;
		report(index, cat, b, "not what Documentation.txt says", res,
		       j->allowed);
	}
	if (!res && !(j->strict & M_OK)) {
		if (b->len && !b->p[b->len - 1])
			note_nul++;
		else
			note_upper_x++;
	}
	if ((j->allowed & (M_EEXIST | M_EINVAL)) == (M_EEXIST | M_EINVAL)) {
		note_eexist += res == EEXIST;
		note_einval += res == EINVAL;
	}
	if (res > 0 && res != EPERM && !nkp) {
		nnolog++;
		report(index, cat, b, "refused without a 'kpatch: ' log line",
		       res, j->allowed);
	}
	if (!res && !j->check) {
		t = now_s();
		check_accepted(index, cat, b, j);
		t_accept += now_s() - t;
	} else {
		if (!pending)
			pending_from = index;
		if (++pending >= check_every)
			check_pending();
	}
	return res;
}

static void run_main(long long from, unsigned int ncases, bool only)
{
	static struct buf b;
	long long index;
	unsigned int written = 0, attempt;
	int cat = 0;

	binit(&b, BUF_MAX);
	for (index = from; written < ncases && !aborted; index++) {
		for (attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
			cat = gen_case(index, attempt, &b);
			judge(&b, &jcur);
			if (!jcur.danger && !looks_like_splat(&b))
				break;
			stats[cat].vetoed++;
			total.vetoed++;
		}
		if (attempt == MAX_ATTEMPTS)
			continue;
		if (only) {
			printf("# kpfuzz: case %lld (%s, generation %u): %zu bytes: \"",
			       index, cat_names[cat], attempt, b.len);
			print_escaped(b.p, b.len, 2 * CMD_MAX);
			printf("\"\n# kpfuzz: allowed: ");
			print_mask(jcur.allowed);
			printf("\n");
		}
		run_one(control_fd, index, cat, &b, &jcur);
		written++;
		if (only)
			break;
	}
	check_pending();
	printf("# kpfuzz: time: writes %.1f s, accepted commands %.1f s, %u state checks %.1f s\n",
	       t_write, t_accept, n_check, t_check);
	free(b.p);
}

/* ------------------------------------------------------------------ */
/* Without CAP_SYS_MODULE                                              */

static int drop_cap_sys_module(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	unsigned int idx = CAP_TO_INDEX(CAP_SYS_MODULE);
	unsigned int mask = CAP_TO_MASK(CAP_SYS_MODULE);

	if (prctl(PR_CAPBSET_DROP, CAP_SYS_MODULE, 0, 0, 0))
		return -1;
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data))
		return -1;
	data[idx].effective &= ~mask;
	data[idx].permitted &= ~mask;
	data[idx].inheritable &= ~mask;
	if (syscall(SYS_capset, &hdr, data))
		return -1;
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) ||
	    (data[idx].effective | data[idx].permitted) & mask)
		return -1;
	return 0;
}

/* Case @i of the nocap run: valid commands, some mutated. */
static void gen_nocap(unsigned int i, struct buf *b)
{
	struct rng r;

	rng_init(&r, seed, 2, i, 0);
	b->len = 0;
	gen_valid(&r, b);
	if (chance(&r, 30))
		mutate(&r, b);
}

#define NOCAP_NOCAP	(-1000)		/* the child kept CAP_SYS_MODULE */
#define NOCAP_OPEN	(-1001)		/* it could not open the file */

/*
 * A child without CAP_SYS_MODULE writes @n commands, the even ones
 * through the file descriptor opened by the parent (with the capability),
 * the odd ones through its own; it sends each result down a pipe.
 */
static void run_nocap(unsigned int n)
{
	static struct buf b;
	unsigned int i, bad = 0, got = 0;
	int pfd[2], res, status;
	pid_t pid;

	if (!n)
		return;
	binit(&b, BUF_MAX);
	if (pipe(pfd)) {
		verdict(false, "nocap: set up");
		return;
	}
	pid = fork();
	if (!pid) {
		close(pfd[0]);
		if (drop_cap_sys_module()) {
			res = NOCAP_NOCAP;
			(void)!write(pfd[1], &res, sizeof(res));
			_exit(1);
		}
		for (i = 0; i < n; i++) {
			int fd = i % 2 ? open(CONTROL, O_WRONLY) : control_fd;

			gen_nocap(i, &b);
			res = fd < 0 ? NOCAP_OPEN : write_cmd(fd, &b);
			if (fd >= 0 && fd != control_fd)
				close(fd);
			if (write(pfd[1], &res, sizeof(res)) != sizeof(res))
				_exit(1);
		}
		_exit(0);
	}
	close(pfd[1]);
	for (i = 0; read(pfd[0], &res, sizeof(res)) == sizeof(res); i++) {
		if (res <= NOCAP_NOCAP) {
			printf("# kpfuzz: nocap: %s\n", res == NOCAP_NOCAP ?
			       "cannot drop CAP_SYS_MODULE" :
			       "cannot open the control file");
			bad++;
			continue;
		}
		got++;
		gen_nocap(i, &b);
		count(C_NOCAP, res);
		if (res == EPERM)
			continue;
		bad++;
		if (res > 0 && !documented(res))
			stats[C_NOCAP].undocumented++;
		else
			stats[C_NOCAP].unexpected++;
		report(i, C_NOCAP, &b, "written without CAP_SYS_MODULE", res,
		       M_EPERM);
		if (!res && !undo_unexpected(&b))
			aborted = true;
	}
	close(pfd[0]);
	waitpid(pid, &status, 0);
	note_eperm_logs = kmsg_drain();
	printf("# kpfuzz: nocap: %u commands\n", got);
	verdict(!bad && got == n,
		"nocap: every write without CAP_SYS_MODULE refused with EPERM");
	snapshot(&st_now, NULL);
	if (!same(&st_now, &st_base))
		show_state_diff(&st_base, &st_now);
	verdict(same(&st_now, &st_base), "nocap: state unchanged");
	free(b.p);
}

/* ------------------------------------------------------------------ */
/* Unreadable buffers                                                  */

static unsigned int note_efault_logs;

/*
 * Writes from buffers the kernel cannot read fail with EFAULT (the errno
 * of write(2) for a bad buffer; Documentation.txt does not list it), or
 * with EINVAL where the length alone is refused, and change nothing.  The
 * command in the buffers would be accepted: "unpatch base".
 */
static void run_fault(void)
{
	static const char cmd[] = "unpatch " BASE_NAME;
	size_t page = sysconf(_SC_PAGESIZE), clen = sizeof(cmd) - 1;
	unsigned char *map;
	struct {
		const void *p;
		size_t len;
		unsigned int allowed;
	} cases[] = {
		{ NULL, 10, BIT(8) },
		{ (void *)1, 1, BIT(8) },
		{ NULL, 0, M_EINVAL },			/* empty */
		{ NULL, CMD_MAX + 1, M_EINVAL },	/* too long */
		{ (void *)k_text, 16, BIT(8) },		/* kernel memory */
		{ (void *)k_text, CMD_MAX + 1, BIT(8) | M_EINVAL },
		{ NULL, clen + 8, BIT(8) },		/* past a readable page */
		{ NULL, 16, BIT(8) },			/* an unreadable page */
	};
	unsigned int i, bad = 0, nkp = 0;

	map = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED || mprotect(map + page, page, PROT_NONE)) {
		verdict(false, "fault: set up");
		return;
	}
	memcpy(map + page - clen, cmd, clen);
	cases[6].p = map + page - clen;
	cases[7].p = map + page;
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		ssize_t n = write(control_fd, cases[i].p, cases[i].len);
		int res = n < 0 ? errno : 0;
		unsigned int got = res == EFAULT ? BIT(8) : rbit(res);

		if (res == EFAULT)
			nkp += kmsg_drain();
		else
			kmsg_drain();
		count(C_FAULT, res);
		if (got & cases[i].allowed)
			continue;
		bad++;
		printf("# kpfuzz: FAIL: fault case %u: write of %zu bytes at %p: %s\n",
		       i, cases[i].len, cases[i].p, errname(res));
		if (!res && !undo(V_UNPATCH, BASE_NAME))
			aborted = true;
	}
	munmap(map, 2 * page);
	note_efault_logs = nkp;
	verdict(!bad, "fault: unreadable buffers refused with EFAULT");
	snapshot(&st_now, NULL);
	if (!same(&st_now, &st_base))
		show_state_diff(&st_base, &st_now);
	verdict(same(&st_now, &st_base), "fault: state unchanged");
}

/* ------------------------------------------------------------------ */
/* A module on its way out                                             */

static unsigned long going_data;
static unsigned int min_going = 20;

/* Case @i with the going module's addresses; all must fail (EINVAL). */
static void gen_going(unsigned int i, struct buf *b)
{
	unsigned long g = safe[S_GOING].addr, gn = safe[S_GOING_NEW].addr;
	unsigned long b0 = safe[S_B].addr, b1 = safe[S_B1].addr;
	struct rng r;
	bool k;

	rng_init(&r, seed, 3, i, 0);
	b->len = 0;
	switch (i % 11) {
	case 0:		/* its function as the old one */
		bprintf(b, "patch g%u %016lx %016lx", i, g, b1);
		break;
	case 1:		/* as the new one */
		bprintf(b, "patch g%u %016lx %016lx", i, b0, gn);
		break;
	case 2:		/* both */
		bprintf(b, "patch g%u %016lx %016lx", i, g, gn);
		break;
	case 3:		/* a valid pair first, then the module */
		bprintf(b, "patch g%u %016lx %016lx %016lx %016lx", i, b0, b1,
			g, safe[S_A2].addr);
		break;
	case 4:
		bprintf(b, "replace g%u %016lx %016lx", i, g, gn);
		break;
	case 5:		/* its data */
		bprintf(b, "patch g%u %016lx %016lx", i, b0, going_data);
		break;
	case 6:		/* past its function start */
		bprintf(b, "patch g%u %016lx %016lx", i, g + 1 + rnd(&r, 8), b1);
		break;
	case 7:		/* the module's new function, then a valid pair */
		bprintf(b, "patch g%u %016lx %016lx %016lx %016lx", i, b0, gn,
			safe[S_CMDLINE].addr, safe[S_CMDLINE1].addr);
		break;
	case 8:		/* its function as a hook */
		bprintf(b, "patch g%u %016lx %016lx %s=%016lx", i, b0, b1,
			hook_names[rnd(&r, NR_HOOKS)], g);
		break;
	case 9:		/* a dry run naming it, as new function or hook */
		k = chance(&r, 50);
		bprintf(b, "check patch g%u %016lx %016lx post-unpatch=%016lx",
			i, b0, k ? gn : b1, k ? hookfn[H_NOP].addr : gn);
		break;
	default:
		bprintf(b, "replace g%u %016lx %016lx %016lx %016lx", i,
			safe[S_A].addr, gn, b0, b1);
		break;
	}
	if (chance(&r, 30))
		bputc(b, '\n');
}

/*
 * Take the "NAME REFCOUNT" line of module @mod out of snapshot @s, into
 * @out ("" if there is none).
 */
static void take_module_line(struct buf *s, const char *mod, char *out,
			     size_t size)
{
	char *p = strstr(bstr(s), "== modules\n");
	size_t len = strlen(mod), n;

	out[0] = '\0';
	while (p && (p = strchr(p, '\n'))) {
		p++;
		if (!strncmp(p, mod, len) && p[len] == ' ') {
			n = strcspn(p, "\n");
			snprintf(out, size, "%.*s", (int)n, p);
			if (p[n])
				n++;
			bdelete(s, (unsigned char *)p - s->p, n);
			return;
		}
	}
}

/*
 * Going case @i: it must fail with EINVAL, log why and change nothing:
 * the state without the going module must be @base, and the module's
 * own line must be @modline or gone.
 */
static bool going_case(int cat, unsigned int i, struct buf *b,
		       const struct buf *base, const char *modline)
{
	char line[256];
	unsigned int nkp;
	bool good = true;
	int res;

	gen_going(i, b);
	judge(b, &jcur);
	if (jcur.allowed != M_EINVAL || jcur.danger) {
		printf("# kpfuzz: %s case %u: the model allows ", cat_names[cat],
		       i);
		print_mask(jcur.allowed);
		printf(" (a bug of kpfuzz)\n");
		return false;
	}
	res = write_cmd(control_fd, b);
	nkp = res > 0 ? kmsg_refusal() : kmsg_drain();
	count(cat, res);
	if (res != EINVAL) {
		if (res > 0 && !documented(res))
			stats[cat].undocumented++;
		else
			stats[cat].unexpected++;
		report(i, cat, b, "naming a module being unloaded", res,
		       M_EINVAL);
		good = false;
		if (!res && !undo_unexpected(b))
			aborted = true;
	}
	if (res > 0 && !nkp) {
		nnolog++;
		report(i, cat, b, "refused without a 'kpatch: ' log line", res,
		       M_EINVAL);
	}
	snapshot(&st_now, NULL);
	take_module_line(&st_now, going_mod, line, sizeof(line));
	if (!same(&st_now, base)) {
		report(i, cat, b, "state changed", res, M_EINVAL);
		show_state_diff((struct buf *)base, &st_now);
		good = false;
	}
	if (modline && *line && strcmp(line, modline)) {
		printf("# kpfuzz: %s case %u: /proc/modules: '%s' became '%s'\n",
		       cat_names[cat], i, modline, line);
		good = false;
	}
	return good;
}

/*
 * Unload the --going module in a child.  While its exit function sleeps
 * (initstate reads "going"), and after it is gone, write commands that
 * name its functions and data.
 */
static void run_going(void)
{
	char modpath[256], state_path[300], st[64], modline[256];
	static struct buf b, base, full;
	unsigned int i, in_window = 0, n = 0;
	bool good = true, seen, gone;
	int status = -1;
	double t0;
	pid_t pid;

	binit(&b, BUF_MAX);
	binit(&base, 1 << 18);
	binit(&full, 1 << 18);
	snprintf(modpath, sizeof(modpath), "/sys/module/%s", going_mod);
	snprintf(state_path, sizeof(state_path), "%s/initstate", modpath);
	read_line(state_path, st, sizeof(st));
	if (strcmp(st, "live")) {
		verdict(false, "going: %s is live before the test", going_mod);
		return;
	}
	snapshot(&base, going_mod);

	pid = fork();
	if (!pid) {
		if (syscall(SYS_delete_module, going_mod, O_NONBLOCK))
			_exit(errno & 0x7f);
		_exit(0);
	}
	t0 = now_s();
	while (now_s() - t0 < 30) {
		read_line(state_path, st, sizeof(st));
		if (strcmp(st, "live") || waitpid(pid, &status, WNOHANG))
			break;
		usleep(1000);
	}
	seen = !strcmp(st, "going");
	if (seen) {
		going_state = 1;
		/* Its line in the window: no reference may appear. */
		snapshot(&full, NULL);
		take_module_line(&full, going_mod, modline, sizeof(modline));
		printf("# kpfuzz: going: %s is going ('%s'), %.0f ms after rmmod\n",
		       going_mod, modline, (now_s() - t0) * 1000);
	} else {
		printf("# kpfuzz: going: %s never seen going (initstate '%s')\n",
		       going_mod, st);
	}
	for (i = 0; seen && i < 4000 && !aborted; i++) {
		read_line(state_path, st, sizeof(st));
		if (strcmp(st, "going"))
			break;
		good &= going_case(C_GOING, i, &b, &base, modline);
		read_line(state_path, st, sizeof(st));
		if (!strcmp(st, "going"))
			in_window++;
		n++;
	}
	if (status == -1)
		waitpid(pid, &status, 0);
	printf("# kpfuzz: going: %u commands, %u of them entirely while %s was going, %.1f s\n",
	       n, in_window, going_mod, now_s() - t0);
	going_state = 2;
	read_modules();
	gone = !is_dir(modpath) && !module_loaded(going_mod);
	verdict(WIFEXITED(status) && !WEXITSTATUS(status) && gone,
		"going: %s unloaded", going_mod);
	verdict(seen && in_window >= min_going,
		"going: at least %u commands while %s was going", min_going,
		going_mod);
	verdict(seen && good && n,
		"going: every command naming it refused with EINVAL, state unchanged");

	good = true;
	for (i = 0; i < 90 && !aborted; i++)
		good &= going_case(C_GONE, i, &b, &base, NULL);
	verdict(good,
		"gone: every command naming it refused with EINVAL, state unchanged");
	free(b.p);
	free(base.p);
	free(full.p);
}

/* ------------------------------------------------------------------ */
/* Setup                                                               */

static int setup(void)
{
	static const struct {
		const char *name;
		unsigned long *addr;
	} marks[] = {
		{ "_text", &k_text }, { "_etext", &k_etext_page },
		{ "_sinittext", &k_sinittext }, { "_einittext", &k_einittext },
		{ "_sdata", &k_sdata }, { "_end", &k_end },
	};
	char line[4096];
	size_t i;
	int s;

	if (read_modules() || read_kallsyms()) {
		printf("# kpfuzz: cannot read /proc/modules or /proc/kallsyms\n");
		return -1;
	}
	for (i = 0; i < ARRAY_SIZE(marks); i++) {
		*marks[i].addr = sym_addr(marks[i].name, NULL);
		if (!*marks[i].addr) {
			printf("# kpfuzz: %s not in /proc/kallsyms (not root?)\n",
			       marks[i].name);
			return -1;
		}
	}
	/* Text ends with the page that holds _etext. */
	k_etext_page = (k_etext_page + 4095) & ~4095UL;
	for (s = 0; s < S_COUNT; s++) {
		const char *mod = safe[s].mod;

		if (s == S_GOING || s == S_GOING_NEW) {
			if (!going_mod)
				continue;
			mod = going_mod;
		}
		safe[s].addr = sym_addr(safe[s].name, mod);
	}
	for (s = 0; s <= S_B2; s++) {
		if (!safe[s].addr) {
			printf("# kpfuzz: no %s: test modules not loaded?\n",
			       safe[s].name);
			return -1;
		}
	}
	for (s = 0; s < H_COUNT; s++) {
		hookfn[s].addr = sym_addr(hookfn[s].name, HOOK_MOD);
		if (!hookfn[s].addr) {
			printf("# kpfuzz: no %s: %s not loaded?\n",
			       hookfn[s].name, HOOK_MOD);
			return -1;
		}
	}
	if (going_mod) {
		going_data = sym_addr("kpatch_test_going_data", going_mod);
		if (!safe[S_GOING].addr || !safe[S_GOING_NEW].addr ||
		    !going_data) {
			printf("# kpfuzz: %s: its functions are not in /proc/kallsyms\n",
			       going_mod);
			return -1;
		}
	}
	build_pools();
	printf("# kpfuzz: %zu symbols: kernel text %zu, init %zu, data %zu, low %zu;",
	       nsyms, p_vtext.n, p_vinit.n, p_vdata.n, p_vlow.n);
	printf(" module text %zu, data %zu; other %zu\n", p_mtext.n, p_mdata.n,
	       p_mother.n);

	snprintf(tracefs_enabled, sizeof(tracefs_enabled), "%s",
		 "/sys/kernel/tracing/enabled_functions");
	if (access(tracefs_enabled, R_OK))
		snprintf(tracefs_enabled, sizeof(tracefs_enabled), "%s",
			 "/sys/kernel/debug/tracing/enabled_functions");
	read_line("/proc/cmdline", cmdline_orig, sizeof(cmdline_orig));
	read_line(PATCHES, line, sizeof(line));
	if (*line) {
		printf("# kpfuzz: patches are enabled already: %s\n", line);
		return -1;
	}
	control_fd = open(CONTROL, O_WRONLY);
	if (control_fd < 0) {
		printf("# kpfuzz: open %s: %s\n", CONTROL, errname(errno));
		return -1;
	}
	if (splat_re_init())
		return -1;
	kmsg_open();
	if (kmsg_fd < 0)
		printf("# kpfuzz: cannot read /dev/kmsg\n");
	return 0;
}

static void bad_usage(void)
{
	fprintf(stderr, "%s%s%s",
		"usage: kpfuzz [--seed S] [--cases N] [--min-cases N] [--check-every K]\n",
		"              [--only I | --from I] [--nocap N] [--going MODULE]\n",
		"              [--min-going N] [--verdicts FILE] [--verbose]\n");
	exit(2);
}

static void summary(unsigned int min_cases)
{
	unsigned int c;

	if (note_nul)
		printf("# kpfuzz: note: %u accepted commands end in a NUL byte\n",
		       note_nul);
	if (note_upper_x)
		printf("# kpfuzz: note: %u accepted commands use a 0X prefix\n",
		       note_upper_x);
	if (note_eexist || note_einval)
		printf("# kpfuzz: note: name in use and a bad pair: EEXIST %u, EINVAL %u\n",
		       note_eexist, note_einval);
	if (stats[C_NOCAP].cases)
		printf("# kpfuzz: note: %u EPERM refusals logged %u 'kpatch: ' lines\n",
		       stats[C_NOCAP].cases, note_eperm_logs);
	if (stats[C_FAULT].hist[EFAULT])
		printf("# kpfuzz: note: %u EFAULT refusals logged %u 'kpatch: ' lines\n",
		       stats[C_FAULT].hist[EFAULT], note_efault_logs);

	for (c = 0; c < C_COUNT; c++)
		if (stats[c].cases || stats[c].vetoed)
			print_hist(cat_names[c], &stats[c]);
	print_hist("total", &total);

	for (c = 0; c < C_NOCAP; c++) {
		if (!stats[c].cases)
			continue;
		verdict(!stats[c].undocumented,
			"%s: every refusal a documented errno", cat_names[c]);
		verdict(!stats[c].unexpected,
			"%s: every result as Documentation.txt says",
			cat_names[c]);
	}
	if (min_cases)
		verdict(total.cases >= min_cases,
			"at least %u commands written", min_cases);
	verdict(!nstate_fail && !aborted,
		"state unchanged by every refused command");
	verdict(!naccept_fail && !aborted,
		"every accepted command valid, in effect as expected, and undone");
	verdict(!nnolog, "every refusal logged a 'kpatch: ' line");
	printf("# kpfuzz: %u dry runs, %u answered 0 (would apply)\n", ndry,
	       ndry_ok);
	verdict(ndry && !ndry_hooks && !aborted, "check: no dry run called a hook");
	verdict(ndry && !ndry_file && !aborted,
		"check: the check file names each dry run and its errno");
	verdict(!nsplats, "no kernel splat in the log");
	verdict(kmsg_fd >= 0 && !kmsg_lost,
		"kernel log read without losing records");
}

int main(int argc, char **argv)
{
	unsigned int ncases = 10000, min_cases = 0, nocap = 200;
	bool only = false, going = true;
	long long from = 0;
	struct buf before;
	double t0, t1;
	int i, ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--verbose")) {
			verbose = true;
			continue;
		}
		if (!v)
			bad_usage();
		i++;
		if (!strcmp(a, "--seed")) {
			seed = strtoull(v, NULL, 0);
		} else if (!strcmp(a, "--cases")) {
			ncases = strtoul(v, NULL, 0);
		} else if (!strcmp(a, "--min-cases")) {
			min_cases = strtoul(v, NULL, 0);
		} else if (!strcmp(a, "--check-every")) {
			check_every = strtoul(v, NULL, 0);
		} else if (!strcmp(a, "--from")) {
			from = strtoll(v, NULL, 0);
		} else if (!strcmp(a, "--only")) {
			from = strtoll(v, NULL, 0);
			only = true;
		} else if (!strcmp(a, "--nocap")) {
			nocap = strtoul(v, NULL, 0);
		} else if (!strcmp(a, "--going")) {
			going_mod = v;
		} else if (!strcmp(a, "--min-going")) {
			min_going = strtoul(v, NULL, 0);
		} else if (!strcmp(a, "--verdicts")) {
			verdicts = fopen(v, "w");
			if (!verdicts) {
				printf("# kpfuzz: cannot write %s\n", v);
				return 2;
			}
			setvbuf(verdicts, NULL, _IOLBF, 0);
		} else {
			bad_usage();
		}
	}
	if (!check_every)
		check_every = 1;
	if (only) {
		/* --going stays: it changes which functions cases pick. */
		ncases = 1;
		nocap = 0;
		going = false;
		verbose = true;
	}

	t0 = now_s();
	if (setup())
		return 2;
	binit(&st_base, 1 << 18);
	binit(&st_now, 1 << 18);
	binit(&before, 1 << 18);
	snapshot(&before, going_mod);
	ret = patch_base();
	if (ret)
		printf("# kpfuzz: patch %s: %s\n", BASE_NAME, errname(ret));
	verdict(!ret, "setup: patch %s enabled", BASE_NAME);
	if (ret)
		return 1;
	snapshot(&st_base, NULL);
	t1 = now_s();
	printf("# kpfuzz: seed %llu, %u cases from %lld, state checked every %u refused;",
	       seed, ncases, from, check_every);
	printf(" set up in %.1f s\n", t1 - t0);

	run_main(from, ncases, only);
	printf("# kpfuzz: %u cases written in %.1f s\n", total.cases,
	       now_s() - t1);
	if (!aborted)
		run_nocap(nocap);
	if (!aborted && !only)
		run_fault();
	if (going_mod && going && !aborted)
		run_going();
	kmsg_drain();
	summary(min_cases);

	ret = write_str("unpatch " BASE_NAME);
	snapshot(&st_now, going_mod);
	if (!same(&st_now, &before))
		show_state_diff(&before, &st_now);
	verdict(!ret && same(&st_now, &before),
		"teardown: patch %s removed, state as before", BASE_NAME);
	printf("# kpfuzz: %u cases in %.1f s\n", total.cases, now_s() - t0);
	return nfailed ? 1 : 0;
}
