// SPDX-License-Identifier: GPL-2.0
/*
 * kpfuzz - seeded, reproducible hostile input for kpatch's control file,
 * for the kpatch selftests (test-fuzz.sh, whose header lists what is
 * written and checked).
 *
 * Usage: kpfuzz [--seed S] [--cases N] [--min-cases N] [--check-every K]
 *               [--only I | --from I] [--nocap N] [--going MODULE]
 *               [--min-going N] [--verdicts FILE] [--verbose]
 *
 * Writes N commands (default 10000), one write(2) each, to
 * /sys/kernel/debug/kpatch/control.  Case I comes from one row of gens[],
 * drawn with a generator state derived from S and I only, so `kpfuzz
 * --seed S --only I` replays it on the same kernel.  A row builds a
 * command whose result it knows by construction: the one errno (or OK)
 * Documentation.txt's grammar gives, taking its checks in their
 * documented order (shape of the write, verb, name, number and syntax of
 * the addresses, whether NAME exists, what the addresses point to).  A
 * word HOOK=ADDR, which once gave a patch a hook, is no address: hooks
 * come from kpatch_register() only, and "check", once a dry run, is no
 * verb.  A command refused for what an address points to holds one that
 * cannot be a function start for it (checked against /proc/kallsyms); a
 * command built to be accepted only pairs test functions of one
 * prototype.  Random bytes and token soups are judged by a few rules (a
 * NUL or an inner newline, the first word, a word no address can be); a
 * draw they cannot judge, or whose echo in the log could look like a
 * splat, is drawn again from the next state.
 *
 * Every result must be exactly the expected one, and a refusal must log a
 * "kpatch: " line.  A patch "base" stays enabled throughout.  The state
 * (patches file, /sys/kernel/kpatch, ftrace's enabled_functions, the
 * kpatch* modules' reference counts) is compared with the baseline after
 * every K refused commands (default 20) and before every command expected
 * to be accepted.  An accepted command must be in effect (patches file,
 * what the patched functions return); it is undone and the state must be
 * the baseline again.  No command may call a hook: the calls of
 * kpatch_test_shadow's hooks, whose addresses the HOOK=ADDR words carry,
 * are compared with those before the run along with the state.
 * /dev/kmsg is read as it grows and must show no splat.
 *
 * Then --nocap N commands (default 200) from a child without
 * CAP_SYS_MODULE, half through a file descriptor opened with it, must
 * fail with EPERM; writes from unreadable buffers with EFAULT (or EINVAL
 * for their length).  With --going MODULE (kpatch_test_going, whose exit
 * function sleeps), a child unloads MODULE, and while it is going and
 * after it is gone, commands naming its functions must fail with EINVAL
 * and change nothing.
 *
 * Output: "# " lines (results per generator, the errno histogram, each
 * failing case hex-escaped with the command that replays it); with
 * --verdicts FILE, one "ok DESC" or "not ok DESC" line per assertion.
 * Exit status 0 if every assertion held, 1 if one failed, 2 if the run
 * could not be set up.  Built static for the test guest.
 */

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

#define CONTROL		"/sys/kernel/debug/kpatch/control"
#define PATCHES		"/sys/kernel/debug/kpatch/patches"
#define SYSFS_DIR	"/sys/kernel/kpatch"
#define VALUES		"/sys/module/kpatch_test_target/parameters/values"
#define HOOK_MOD	"kpatch_test_shadow"
#define HOOK_CALLS	"/sys/module/kpatch_test_shadow/parameters/hooks"
#define BASE		"base"		/* the patch enabled throughout */

#define CMD_MAX		4096		/* longest command (Documentation.txt) */
#define NAME_MAX_LEN	63		/* longest patch name */
#define MAX_PAIRS	300
#define BUF_MAX		(1024 * 1024)	/* longest write */
#define MAX_ATTEMPTS	16		/* draws of one case */
#define MAX_REPORTS	25		/* failing cases shown in full */
#define NR_HOOKS	8
#define OK		0
#define REDRAW		1		/* a generator's "draw again" */

/* ------------------------------------------------------------------ */
/* Generator (splitmix64, one state per case), buffers, output         */

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

static unsigned int rnd(struct rng *r, unsigned int n)
{
	return n ? rnext(r) % n : 0;
}

static bool chance(struct rng *r, unsigned int percent)
{
	return rnd(r, 100) < percent;
}

static unsigned long long seed = 1;

/* The state for case @index of @stream, draw @attempt. */
static void rng_init(struct rng *r, unsigned int stream,
		     unsigned long long index, unsigned int attempt)
{
	r->s = seed;
	r->s = rnext(r) ^ (index * 0xd1b54a32d192ed03ULL);
	r->s = rnext(r) ^ ((unsigned long long)stream << 32 | attempt);
	rnext(r);
}

struct buf {
	unsigned char *p;
	size_t len, cap;
};

static void binit(struct buf *b, size_t cap)
{
	b->p = malloc(cap + 1);
	if (!b->p) {
		printf("# kpfuzz: out of memory\n");
		exit(2);
	}
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
	bput(b, tmp, n < (int)sizeof(tmp) ? n : (int)sizeof(tmp) - 1);
}

static char *bstr(struct buf *b)
{
	b->p[b->len] = '\0';
	return (char *)b->p;
}

static void binsert(struct buf *b, size_t pos, const void *s, size_t n)
{
	if (n > b->cap - b->len)
		n = b->cap - b->len;
	memmove(b->p + pos + n, b->p + pos, b->len - pos);
	memcpy(b->p + pos, s, n);
	b->len += n;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

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
	nfailed += !good;
}

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

static const char *errname(int err)
{
	static const char * const names[] = {
		[0] = "OK", [EPERM] = "EPERM", [ENOENT] = "ENOENT",
		[ENOMEM] = "ENOMEM", [EBUSY] = "EBUSY", [EEXIST] = "EEXIST",
		[EINVAL] = "EINVAL", [EFAULT] = "EFAULT",
	};
	static char tmp[32];

	if (err < 0)
		return "a short write";
	if ((size_t)err < ARRAY_SIZE(names) && names[err])
		return names[err];
	snprintf(tmp, sizeof(tmp), "errno %d", err);
	return tmp;
}

/* The errnos Documentation.txt lists for the control file. */
static bool documented(int err)
{
	return err == EPERM || err == EINVAL || err == EEXIST ||
	       err == ENOENT || err == EBUSY || err == ENOMEM;
}

/* ------------------------------------------------------------------ */
/* Files                                                               */

static void cat_file(struct buf *b, const char *path)
{
	char tmp[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0) {
		bprintf(b, "(open: %s)\n", errname(errno));
		return;
	}
	while ((n = read(fd, tmp, sizeof(tmp))) > 0)
		bput(b, tmp, n);
	close(fd);
}

static void read_line(const char *path, char *out, size_t size)
{
	ssize_t n = -1;
	int fd = open(path, O_RDONLY);

	if (fd >= 0) {
		n = read(fd, out, size - 1);
		close(fd);
	}
	out[n > 0 ? n : 0] = '\0';
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

/* A sorted recursive listing of @dir, one path a line. */
static void list_dir(struct buf *b, const char *dir, int depth)
{
	char *names[256], path[512];
	unsigned int n = 0, i;
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d) {
		bprintf(b, "%s: (%s)\n", dir, errname(errno));
		return;
	}
	while ((de = readdir(d)) && n < ARRAY_SIZE(names))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			names[n++] = strdup(de->d_name);
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
/* Symbols, from /proc/kallsyms and /proc/modules                      */

struct sym {
	unsigned long addr;
	const char *name;
	const char *mod;	/* NULL: vmlinux */
	char type;
};

static struct sym *syms;
static size_t nsyms;
static char loaded[512][64];
static unsigned int nloaded;
static const char *going_mod;	/* --going MODULE */
static int going_state;		/* 0 live, 1 going, 2 gone */
static unsigned long k_text, k_etext, k_sinittext, k_einittext, k_sdata;
static unsigned long k_end;

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int read_kallsyms(void)
{
	size_t cap = 1 << 18, n;
	char *line = NULL, *p, *end;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		return -1;
	syms = malloc(cap * sizeof(*syms));
	while (syms && getline(&line, &n, f) > 0) {
		struct sym *s;

		if (nsyms == cap)
			syms = realloc(syms, (cap *= 2) * sizeof(*syms));
		if (!syms)
			break;
		s = &syms[nsyms];
		s->addr = strtoul(line, &p, 16);
		if (*p != ' ' || !p[1] || p[2] != ' ')
			continue;
		s->type = p[1];
		p += 3;
		end = p + strcspn(p, " \t\n");
		s->mod = strchr(end, '[') ?
			 strndup(strchr(end, '[') + 1, strcspn(strchr(end, '[') + 1, "]")) :
			 NULL;
		*end = '\0';
		s->name = strdup(p);
		nsyms++;
	}
	free(line);
	fclose(f);
	if (!syms)
		return -1;
	qsort(syms, nsyms, sizeof(*syms), cmp_sym);
	return nsyms ? 0 : -1;
}

static void read_modules(void)
{
	char line[512];
	FILE *f = fopen("/proc/modules", "r");

	nloaded = 0;
	while (f && fgets(line, sizeof(line), f) && nloaded < 512)
		snprintf(loaded[nloaded++], sizeof(loaded[0]), "%.*s",
			 (int)strcspn(line, " "), line);
	if (f)
		fclose(f);
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
		if (strcmp(syms[i].name, name) ||
		    (mod ? !syms[i].mod || strcmp(syms[i].mod, mod) : !!syms[i].mod))
			continue;
		if (addr && addr != syms[i].addr)
			return 0;
		addr = syms[i].addr;
	}
	return addr;
}

static bool is_text(char t)
{
	return t == 't' || t == 'T';
}

static bool is_data(char t)
{
	return t && strchr("dDbBrR", t);
}

/*
 * Could kpatch take @addr as a function?  A function start in vmlinux text
 * (not init text) or in a usable module's text.  Everything else must be
 * refused with EINVAL.
 */
static bool maybe_function(unsigned long addr)
{
	size_t i;

	for (i = sym_lower(addr); i < nsyms && syms[i].addr == addr; i++) {
		const struct sym *s = &syms[i];

		if (s->mod ? module_usable(s->mod) && !is_data(s->type) :
		    addr >= k_text && addr < k_etext &&
		    (addr < k_sinittext || addr >= k_einittext))
			return true;
	}
	return false;
}

/*
 * The test functions a command meant to be accepted may patch: every pair
 * of one group has compatible prototypes.  ret is what a group 1 function
 * returns, or the version a group 2 function prints.
 */
enum {
	S_A, S_B, S_NOTRACE, S_A1, S_A2, S_A3, S_B1, S_B2, S_GOING,
	S_GOING_NEW, S_CMDLINE, S_CMDLINE1, S_CMDLINE2, S_CMDLINE3, S_COUNT
};

static struct safe {
	const char *name;
	const char *mod;	/* NULL: vmlinux; "going": the --going module */
	int group;		/* 1: int (void); 2: a seq_file show function */
	bool old;		/* may be an old function (ftrace traces it) */
	int ret;
	unsigned long addr;	/* 0: not loaded */
} safe[S_COUNT] = {
	[S_A] = { "kpatch_test_value_a", "kpatch_test_target", 1, true, 1 },
	[S_B] = { "kpatch_test_value_b", "kpatch_test_target", 1, true, 2 },
	[S_NOTRACE] = { "kpatch_test_value_notrace", "kpatch_test_target",
			1, false, 3 },
	[S_A1] = { "kpatch_test_value_a_v1", "kpatch_test_new", 1, false, 11 },
	[S_A2] = { "kpatch_test_value_a_v2", "kpatch_test_new", 1, false, 12 },
	[S_A3] = { "kpatch_test_value_a_v3", "kpatch_test_new", 1, false, 13 },
	[S_B1] = { "kpatch_test_value_b_v1", "kpatch_test_new", 1, false, 21 },
	[S_B2] = { "kpatch_test_value_b_v2", "kpatch_test_new", 1, false, 22 },
	[S_GOING] = { "kpatch_test_going_fn", "going", 1, true, 31 },
	[S_GOING_NEW] = { "kpatch_test_going_fn_new", "going", 1, false, 32 },
	[S_CMDLINE] = { "cmdline_proc_show", NULL, 2, true, 0 },
	[S_CMDLINE1] = { "kpatch_test_cmdline_v1", "kpatch_test_new", 2, false, 1 },
	[S_CMDLINE2] = { "kpatch_test_cmdline_v2", "kpatch_test_new", 2, false, 2 },
	[S_CMDLINE3] = { "kpatch_test_cmdline_v3", "kpatch_test_new", 2, false, 3 },
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
	return safe[i].addr && (!going_state || !safe[i].mod ||
				strcmp(safe[i].mod, "going"));
}

/*
 * The hooks, as the control file once took them (HOOK=ADDR), and two
 * functions of kpatch_test_shadow that were given there as hooks: words
 * that are no address now, and must call no hook.
 */
static const char * const hook_names[NR_HOOKS] = {
	"pre-patch", "stop-patch", "undo-patch", "post-patch",
	"pre-unpatch", "stop-unpatch", "undo-unpatch", "post-unpatch",
};

static const char * const hookfn_names[2] = {
	"kpatch_test_shadow_hook_nop", "kpatch_test_shadow_hook_veto",
};

static unsigned long hookfn[2];		/* nop, veto */

/* Pools of symbols, as indexes into syms[] */
struct pool {
	size_t *idx, n;
};

enum { P_VTEXT, P_VINIT, P_VDATA, P_VLOW, P_MTEXT, P_MDATA, P_OTHER, P_COUNT };
static struct pool pools[P_COUNT];

static void build_pools(void)
{
	size_t i;
	int p;

	for (i = 0; i < nsyms; i++) {
		const struct sym *s = &syms[i];
		unsigned long a = s->addr;

		if (s->mod)
			p = !module_usable(s->mod) ? P_OTHER : is_text(s->type) ?
			    P_MTEXT : is_data(s->type) ? P_MDATA : -1;
		else if (a >= k_sinittext && a < k_einittext)
			p = is_text(s->type) ? P_VINIT : -1;
		else if (a >= k_text && a < k_etext)
			p = is_text(s->type) ? P_VTEXT : -1;
		else
			p = a < k_text ? P_VLOW : a >= k_sdata && a < k_end ?
			    P_VDATA : -1;
		if (p < 0)
			continue;
		if (!(pools[p].n & (pools[p].n + 1)))
			pools[p].idx = realloc(pools[p].idx, (2 * pools[p].n + 2) *
					       sizeof(size_t));
		pools[p].idx[pools[p].n++] = i;
	}
}

/* A symbol of @pool, by random value @x. */
static unsigned long pick(int pool, unsigned long x)
{
	const struct pool *p = &pools[pool];

	return p->n ? syms[p->idx[x % p->n]].addr : 0;
}

/* ------------------------------------------------------------------ */
/* Splat-like log lines                                                */

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
 * words of a refused command are printed, next to each other or before a
 * colon, and so are the names of the symbols its addresses fall in.
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

/* Is @addr in a symbol with such a name? */
static bool addr_has_stem(unsigned long addr)
{
	size_t i = addr == ~0UL ? nsyms : sym_lower(addr + 1);
	unsigned long at;

	if (!i)
		return false;
	for (at = syms[i - 1].addr; i && syms[i - 1].addr == at; i--)
		if (has_stem(syms[i - 1].name))
			return true;
	return false;
}

/* ------------------------------------------------------------------ */
/* Cases                                                               */

enum { V_PATCH, V_REPLACE, V_UNPATCH };
static const char * const verbs[] = { "patch", "replace", "unpatch" };

/* A command as built, before it is written out. */
struct cmd {
	int verb;
	char name[256];
	size_t name_len;
	unsigned int npairs;
	unsigned long old[MAX_PAIRS], new[MAX_PAIRS];
};

/* One case: the bytes written and what must come of them. */
struct tcase {
	struct buf b;
	int want;			/* OK or the errno */
	bool accept;			/* in effect after it: check, undo */
	struct cmd c;
	unsigned long addrs[2 * MAX_PAIRS + 4];	/* for has_stem */
	unsigned int naddrs;
	size_t wstart[2 * MAX_PAIRS + 4];	/* words: starts */
	size_t wend[2 * MAX_PAIRS + 4];
	int wkind[2 * MAX_PAIRS + 4];
	unsigned int nwords;
};

enum { W_VERB, W_NAME, W_ADDR };

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

/* @a in one of the forms the grammar accepts. */
static void put_addr(struct rng *r, struct buf *b, unsigned long a)
{
	static const char * const forms[] = {
		"0x%016lx", "%lx", "%016lX", "0x%lx", "0X%016lx", "0X%lX",
	};
	unsigned int f = rnd(r, 16);

	if (f < ARRAY_SIZE(forms))
		bprintf(b, forms[f], a);
	else if (f == ARRAY_SIZE(forms))
		bprintf(b, "%0*lx", 17 + rnd(r, 24), a);
	else
		bprintf(b, "%016lx", a);
}

static void word(struct tcase *t, int kind, size_t start)
{
	t->wstart[t->nwords] = start;
	t->wend[t->nwords] = t->b.len;
	t->wkind[t->nwords++] = kind;
}

static void use_addr(struct tcase *t, unsigned long a)
{
	if (t->naddrs < ARRAY_SIZE(t->addrs))
		t->addrs[t->naddrs++] = a;
}

/* Write out @t->c, separators and address forms drawn from @r. */
static void render(struct rng *r, struct tcase *t)
{
	const struct cmd *c = &t->c;
	struct buf *b = &t->b;
	unsigned int i;
	size_t s;

	b->len = 0;
	t->nwords = 0;
	t->naddrs = 0;
	if (chance(r, 3))
		put_sep(r, b);
	s = b->len;
	bprintf(b, "%s", verbs[c->verb]);
	word(t, W_VERB, s);
	put_sep(r, b);
	s = b->len;
	bput(b, c->name, c->name_len);
	word(t, W_NAME, s);
	for (i = 0; i < c->npairs; i++) {
		put_sep(r, b);
		s = b->len;
		put_addr(r, b, c->old[i]);
		use_addr(t, c->old[i]);
		word(t, W_ADDR, s);
		put_sep(r, b);
		s = b->len;
		put_addr(r, b, c->new[i]);
		use_addr(t, c->new[i]);
		word(t, W_ADDR, s);
	}
	if (chance(r, 3))
		put_sep(r, b);
	if (chance(r, 30))
		bputc(b, '\n');
}

/* A valid name (never "base"): mostly short, sometimes at the limit. */
static void valid_name(struct rng *r, struct cmd *c)
{
	unsigned int len = 1 + rnd(r, 12), i;

	if (chance(r, 10))
		len = NAME_MAX_LEN - (chance(r, 50) ? 0 : rnd(r, 5));
	/* Not hexadecimal: a name taken as an address is malformed. */
	c->name[0] = "ghijkmnopqrstuvwxyz_-GHKLMNPQZ"[rnd(r, 30)];
	for (i = 1; i < len; i++)
		c->name[i] = name_chars[rnd(r, sizeof(name_chars) - 1)];
	c->name_len = len;
}

/* A test function of @group: one that may be old (@old), or a new one. */
static int pick_safe(struct rng *r, int group, bool old)
{
	int cand[S_COUNT], n = 0, i;

	for (i = 0; i < S_COUNT; i++)
		if (safe_usable(i) && safe[i].group == group &&
		    safe[i].old == old)
			cand[n++] = i;
	return cand[rnd(r, n)];
}

/*
 * A command to be accepted as built: mostly patch, some replace and
 * unpatch; test functions of one group per pair, distinct old functions
 * (never a new one of the same command), and for patch none that chains
 * with "base" (S_A1 is only new; S_A is no new function).
 */
static void valid_cmd(struct rng *r, struct cmd *c)
{
	unsigned int want = 1 + (chance(r, 30) ? rnd(r, 3) : 0), i, k;

	c->npairs = 0;
	if (chance(r, 8)) {
		c->verb = V_UNPATCH;
		strcpy(c->name, BASE);
		c->name_len = strlen(BASE);
		return;
	}
	c->verb = chance(r, 20) ? V_REPLACE : V_PATCH;
	valid_name(r, c);
	for (k = 0; c->npairs < want && k < 20; k++) {
		int group = chance(r, 80) ? 1 : 2;
		int o = pick_safe(r, group, true), n = pick_safe(r, group, false);
		bool ok = true;

		for (i = 0; i < c->npairs; i++)
			ok &= c->old[i] != safe[o].addr;
		if (ok) {
			c->old[c->npairs] = safe[o].addr;
			c->new[c->npairs++] = safe[n].addr;
		}
	}
}

/* The result of the built command @c, if it is not changed. */
static int verdict_of(const struct cmd *c)
{
	if (c->verb == V_UNPATCH)
		return c->name_len == 4 && !memcmp(c->name, BASE, 4) ? OK : -ENOENT;
	return c->name_len == 4 && !memcmp(c->name, BASE, 4) ? -EEXIST : OK;
}

/*
 * Make @c one that is refused only once the whole of it has been parsed,
 * and that changes nothing: patch or replace of the name in use
 * (-EEXIST), or unpatch of a name not in use (-ENOENT); for the limits of
 * the parser, without the cost of an update.  @keep_name: @c's name (not
 * "base"), in an unpatch.
 */
static void refuse_late(struct rng *r, struct cmd *c, bool keep_name)
{
	if (keep_name || c->verb == V_UNPATCH || chance(r, 20)) {
		if (!keep_name)
			valid_name(r, c);
		c->verb = V_UNPATCH;
		c->npairs = 0;
	} else {
		memcpy(c->name, BASE, c->name_len = 4);
	}
}

/* --- the generators: each returns 0 or the -errno its case must get --- */

static int gen_valid(struct rng *r, struct tcase *t)
{
	valid_cmd(r, &t->c);
	render(r, t);
	return verdict_of(&t->c);
}

/* A name in use (patch, replace) or not enabled (unpatch). */
static int gen_exist(struct rng *r, struct tcase *t)
{
	struct cmd *c = &t->c;

	valid_cmd(r, c);
	if (c->verb == V_UNPATCH) {
		valid_name(r, c);
		if (chance(r, 20))
			memcpy(c->name, "BASE", c->name_len = 4);
	} else {
		memcpy(c->name, BASE, c->name_len = 4);
	}
	render(r, t);
	return verdict_of(c);
}

/*
 * An address that cannot be a function start: one of the forms below,
 * made from one random value and checked against /proc/kallsyms; 0 (no
 * function either) if none of 100 draws is.
 */
static unsigned long bad_addr(struct rng *r, bool old)
{
	static int on_stack;
	int tries;

	for (tries = 0; tries < 100; tries++) {
		unsigned long x = rnext(r), fn = safe[x % S_COUNT].addr, a;
		const unsigned long forms[] = {
			0, ~0UL, ~0UL - 1, k_text - 1, k_etext, k_end,
			k_sdata - 1 - x % 8, k_einittext + x % 64,
			/* non-canonical, user data and text, random */
			1UL << (47 + x % 17), 0xffff7fffffffffffUL,
			0x00007fffffffffffUL, (unsigned long)&on_stack,
			(unsigned long)bad_addr, 0x400000 + x % 0x100000, x,
			/* the direct map, the module area */
			0xffff888000000000UL + (x & 0xfffffff000UL),
			0xffffffffc0000000UL + (x & 0x3fffffff),
			/* inside a test, a vmlinux or a module function */
			fn + 1 + x % 9, sym_next(fn) - 1,
			pick(P_VTEXT, x) + 1 + x % 9,
			sym_next(pick(P_VTEXT, x)) - 1 - x % 4,
			pick(P_MTEXT, x) + 1 + x % 16,
			/* data, rodata, per-cpu, freed init, BPF, ftrace */
			pick(P_VDATA, x), pick(P_VDATA, x >> 32), pick(P_VLOW, x),
			pick(P_MDATA, x), pick(P_MDATA, x >> 32),
			pick(P_VINIT, x), pick(P_OTHER, x),
			old ? safe[S_NOTRACE].addr : 0,
		};

		a = forms[rnd(r, ARRAY_SIZE(forms))];
		if (!maybe_function(a) || (old && a == safe[S_NOTRACE].addr))
			return a;
	}
	return 0;
}

/* A function kpatch may well take: a test function or a real one. */
static unsigned long any_function(struct rng *r, bool old)
{
	switch (rnd(r, 4)) {
	case 0:
		return pick(P_VTEXT, rnext(r));
	case 1:
		return pick(P_MTEXT, rnext(r));
	default:
		return safe[pick_safe(r, 1 + chance(r, 20), old)].addr;
	}
}

/*
 * Something one address points to is wrong: a bad address as an old or a
 * new function; the same old twice; a function both old and new; a chain
 * with "base".  -EINVAL, or -EEXIST for the name "base".
 */
static int gen_addr(struct rng *r, struct tcase *t)
{
	struct cmd *c = &t->c;
	unsigned int i, n, extra = chance(r, 30) ? 1 + rnd(r, 6) : 0;

	do
		valid_cmd(r, c);
	while (c->verb == V_UNPATCH);
	for (i = 0; i < extra && c->npairs < MAX_PAIRS; i++) {
		c->old[c->npairs] = any_function(r, true);
		c->new[c->npairs++] = any_function(r, false);
	}
	n = rnd(r, c->npairs);
	switch (rnd(r, 8)) {
	case 0: case 1: case 2:
		c->old[n] = bad_addr(r, true);
		break;
	case 3: case 4: case 5:
		c->new[n] = bad_addr(r, false);
		break;
	case 6:		/* the same old twice, or a new that is an old */
		c->old[c->npairs] = chance(r, 50) ? c->old[n] : any_function(r, true);
		c->new[c->npairs] = chance(r, 50) ? c->old[n] : any_function(r, false);
		if (c->new[c->npairs] != c->old[n])
			c->old[c->npairs] = c->old[n];
		c->npairs++;
		break;
	default:	/* a chain with "base" */
		if (c->verb == V_REPLACE)
			return REDRAW;
		if (chance(r, 50))
			c->old[n] = safe[S_A1].addr;
		else
			c->new[n] = safe[S_A].addr;
		break;
	}
	if (chance(r, 10))
		memcpy(c->name, BASE, c->name_len = 4);
	render(r, t);
	return verdict_of(c) == OK ? -EINVAL : -EEXIST;
}

/* A name past the limit or with a bad byte; or one exactly at it. */
static int gen_name(struct rng *r, struct tcase *t)
{
	static const char bad[] = "!\"#$%&'()*+,./:;<=>?@[\\]^`{|}~\x01\x7f\x80\xff\xc3";
	struct cmd *c = &t->c;
	unsigned int i;

	valid_cmd(r, c);
	if (chance(r, 15)) {	/* mostly refused late, as in gen_long() */
		c->name_len = NAME_MAX_LEN;
		for (i = 0; i < NAME_MAX_LEN; i++)
			c->name[i] = name_chars[rnd(r, sizeof(name_chars) - 1)];
		if (chance(r, 75))
			refuse_late(r, c, true);
		render(r, t);
		return verdict_of(c);
	}
	if (chance(r, 40)) {
		c->name_len = NAME_MAX_LEN + 1 + (chance(r, 50) ? 0 : rnd(r, 190));
		for (i = 0; i < c->name_len; i++)
			c->name[i] = name_chars[rnd(r, sizeof(name_chars) - 1)];
	} else {
		c->name[rnd(r, c->name_len)] = bad[rnd(r, sizeof(bad) - 1)];
	}
	render(r, t);
	return -EINVAL;
}

/*
 * HOOK=ADDR words, which once gave a patch hooks, and words like them:
 * no address, so -EINVAL wherever they stand.  One or two after the name
 * or at the end (one: the pairs are odd; two: not a pair of addresses; in
 * an unpatch: more than a name), or one in the place of an address (not a
 * pair of addresses).  No hook may run.
 */
static int gen_hook(struct rng *r, struct tcase *t)
{
	static const char * const words[] = {
		"pre_patch=%lx", "PRE-PATCH=%lx", "pre-=%lx", "=%lx", "=",
		"prepatch=%lx", "post-patchx=%lx", "pre-patch=", "pre-patch==1",
		"pre-patch=0", "stop-unpatch=0x", "undo-patch=xyz",
		"post-unpatch=%lx=", "pre-patch=-%lx", "hook=%lx",
		"post-patch=0x0", "pre-unpatch= ",
	};
	struct cmd *c = &t->c;
	struct buf *b = &t->b;
	unsigned int n = 1 + chance(r, 40), i, k;
	char w[256];
	size_t pos, len = 0;
	unsigned long fn;

	valid_cmd(r, c);
	render(r, t);
	for (i = 0; i < n; i++) {
		fn = hookfn[rnd(r, 2)];
		w[len++] = ' ';
		if (chance(r, 60)) {	/* a word that gave a hook */
			snprintf(w + len, sizeof(w) - len, "%s=%lx",
				 hook_names[rnd(r, NR_HOOKS)], fn);
			use_addr(t, fn);
		} else {
			snprintf(w + len, sizeof(w) - len,
				 words[rnd(r, ARRAY_SIZE(words))], fn);
		}
		len += strcspn(w + len, " ");
	}
	w[len] = '\0';
	if (c->npairs && chance(r, 30)) {	/* in the place of an address */
		for (k = rnd(r, t->nwords); t->wkind[k] != W_ADDR; )
			k = (k + 1) % t->nwords;
		len = strcspn(w + 1, " ");
		memmove(b->p + t->wstart[k], b->p + t->wend[k],
			b->len - t->wend[k]);
		b->len -= t->wend[k] - t->wstart[k];
		binsert(b, t->wstart[k], w + 1, len);
		return -EINVAL;
	}
	pos = chance(r, 50) ? t->wend[1] : t->wend[t->nwords - 1];
	binsert(b, pos, w, len);
	return -EINVAL;
}

/* Pairs: none, an odd number, many (up to the length limit). */
static int gen_pairs(struct rng *r, struct tcase *t)
{
	struct cmd *c = &t->c;
	unsigned int i, n;
	unsigned long a;
	char w[32];

	do
		valid_cmd(r, c);
	while (c->verb == V_UNPATCH);
	switch (rnd(r, 4)) {
	case 0:		/* no pair, or one address */
		c->npairs = 0;
		render(r, t);
		if (chance(r, 50))
			return -EINVAL;
		a = safe[S_B].addr;
		break;
	case 1:		/* an odd number */
		render(r, t);
		a = any_function(r, chance(r, 50));
		break;
	default:	/* many pairs, one of them bad */
		n = 20 + rnd(r, 220);
		for (i = c->npairs; i < n; i++) {
			c->old[i] = any_function(r, true);
			c->new[i] = any_function(r, false);
		}
		c->npairs = n;
		c->old[rnd(r, n)] = bad_addr(r, true);
		render(r, t);
		return -EINVAL;
	}
	snprintf(w, sizeof(w), "\t%lx", a);
	binsert(&t->b, t->wend[t->nwords - 1], w, strlen(w));
	use_addr(t, a);
	return -EINVAL;
}

/*
 * "check", once the verb of a dry run ("check patch NAME OLD NEW"), now an
 * unknown command, with or without a command after it.
 */
static int gen_check(struct rng *r, struct tcase *t)
{
	static const char * const w[] = {
		"check", "check ", "check\t\n", "check check patch %s %lx %lx",
		"check PATCH %s %lx %lx", "check patc %s", "check unpatch",
		"check replace", "check  patch", "check %s %lx %lx",
		"check check", "CHECK patch %s %lx %lx", "check\tunpatches %s",
		"check patch %s %lx %lx", "check replace %s %lx %lx",
		"check unpatch %s", "check\tpatch\t%s\t%lx\t%lx\n",
	};

	valid_cmd(r, &t->c);
	t->c.name[t->c.name_len] = '\0';
	t->b.len = 0;
	bprintf(&t->b, w[rnd(r, ARRAY_SIZE(w))], t->c.name,
		safe[S_B].addr, safe[S_B1].addr);
	return -EINVAL;
}

/* A valid command padded to the limit (same result), or past it. */
static int gen_long(struct rng *r, struct tcase *t)
{
	struct buf *b = &t->b;
	int want;
	size_t len = CMD_MAX, nl;
	unsigned int i;

	/*
	 * Mostly refused once parsed: the limit is the parser's, and a
	 * switch is slow.
	 */
	valid_cmd(r, &t->c);
	if (chance(r, 75))
		refuse_late(r, &t->c, false);
	render(r, t);
	want = verdict_of(&t->c);
	nl = b->len && b->p[b->len - 1] == '\n';
	if (chance(r, 60)) {
		want = -EINVAL;
		len = chance(r, 50) ? CMD_MAX + 1 : CMD_MAX + 1 + rnd(r, BUF_MAX - CMD_MAX);
	} else if (chance(r, 50)) {
		len -= rnd(r, 100);
	}
	b->len -= nl;
	if (chance(r, 20) && want == -EINVAL) {	/* one huge word */
		bputc(b, ' ');
		while (b->len < len)
			bputc(b, "0123456789abcdef"[rnd(r, 16)]);
	}
	for (i = 0; b->len + nl < len; i++)
		bputc(b, chance(r, 80) ? ' ' : '\t');
	if (nl)
		bputc(b, '\n');
	return want;
}

/*
 * Change one valid command in a way that makes it -EINVAL: a NUL or an
 * inner newline anywhere, a byte of the verb, a bad byte in the name or
 * an address, a word dropped or repeated; or cut it short.
 */
static int gen_mutate(struct rng *r, struct tcase *t)
{
	static const char junk[] = "gGxz-+=.:/\\!\x01\x7f\x80\xff";
	struct buf *b = &t->b;
	struct cmd *c = &t->c;
	unsigned int w, k;
	size_t pos;
	char ch;

	valid_cmd(r, c);
	render(r, t);
	w = rnd(r, t->nwords);
	pos = t->wstart[w] + rnd(r, t->wend[w] - t->wstart[w]);
	switch (rnd(r, 7)) {
	case 0:
		binsert(b, rnd(r, b->len + 1), "", 1);
		return -EINVAL;
	case 1:
		binsert(b, rnd(r, b->len), "\n", 1);
		return -EINVAL;
	case 2:		/* a byte of a word */
		ch = junk[rnd(r, sizeof(junk) - 1)];
		if (t->wkind[w] <= W_NAME && strchr("gGxz-", ch))
			ch = '.';	/* no name or verb byte */
		if (ch == 'x' && pos > t->wstart[w] && b->p[pos - 1] == '0')
			ch = 'g';
		if (ch == b->p[pos])
			return REDRAW;
		b->p[pos] = ch;
		return -EINVAL;
	case 3:		/* a word dropped: the pairs become odd */
		if (t->wkind[w] == W_NAME && c->verb != V_UNPATCH &&
		    c->npairs < 1)
			return REDRAW;
		memmove(b->p + t->wstart[w], b->p + t->wend[w], b->len - t->wend[w]);
		b->len -= t->wend[w] - t->wstart[w];
		return -EINVAL;
	case 4:		/* a word repeated */
		if (t->wkind[w] == W_VERB)
			return REDRAW;
		binsert(b, t->wend[w], b->p + t->wstart[w], t->wend[w] - t->wstart[w]);
		binsert(b, t->wend[w], " ", 1);
		return -EINVAL;
	default:	/* cut short */
		b->len = pos;
		if (!pos)
			return -EINVAL;
		for (k = 0; k < t->nwords && t->wstart[k] < pos; k++)
			;
		/* words kept: k, the last one cut if it ends past pos */
		if (!k)		/* blanks only */
			return -EINVAL;
		if (t->wkind[k - 1] == W_NAME && t->wend[k - 1] > pos)
			/* a shorter name: no such patch, or no pairs */
			return c->verb == V_UNPATCH ? -ENOENT : -EINVAL;
		if (t->wkind[k - 1] == W_NAME && c->verb == V_UNPATCH)
			return REDRAW;	/* the whole command */
		if (t->wend[k - 1] <= pos) {
			unsigned int naddr = 0, i;

			for (i = 0; i < k; i++)
				naddr += t->wkind[i] == W_ADDR;
			if (naddr >= 2 && naddr % 2 == 0)
				return REDRAW;	/* a valid command again */
		}
		return -EINVAL;
	}
}

/*
 * Random bytes or a soup of words, judged by a few rules: a NUL or an
 * inner newline, or a first word that is no verb ("check" included):
 * -EINVAL.  Anything else is drawn again.
 */
static int judge_soup(struct tcase *t)
{
	char *s = bstr(&t->b), *w[3];
	size_t n = t->b.len, nw = 0;
	char *p, *save = NULL;

	if (n && s[n - 1] == '\n')
		n--;
	if (memchr(s, '\0', t->b.len) || memchr(s, '\n', n))
		return -EINVAL;
	s = strndup(s, n);
	for (p = strtok_r(s, " \t", &save); p && nw < 3; p = strtok_r(NULL, " \t", &save))
		w[nw++] = p;
	if (!nw || (strcmp(w[0], "patch") && strcmp(w[0], "replace") &&
		    strcmp(w[0], "unpatch"))) {
		free(s);
		return -EINVAL;
	}
	free(s);
	return REDRAW;
}

static int gen_bytes(struct rng *r, struct tcase *t)
{
	static const char alpha[] = " \t\n=x0123456789abcdefpatchreplaceunpatch";
	unsigned int n = rnd(r, 300), i, mode = rnd(r, 3);

	t->b.len = 0;
	for (i = 0; i < n; i++)
		bputc(&t->b, mode ? alpha[rnd(r, sizeof(alpha) - 1)] : rnd(r, 256));
	if (chance(r, 20)) {
		const char *v = chance(r, 50) ? "check patch" : "patch";

		binsert(&t->b, 0, v, strlen(v));
	}
	return judge_soup(t);
}

static void put_fn(struct rng *r, struct tcase *t)
{
	unsigned long a = any_function(r, chance(r, 50));

	put_addr(r, &t->b, a);
	use_addr(t, a);
}

/*
 * A verb (or "check" and a verb: no verb), a valid name and words among
 * which one no address can be: -EINVAL (a word such as "pre-patch=" is no
 * address either, and every address is checked after the words are).
 * Or a soup, judged as random bytes are.
 */
static int gen_tokens(struct rng *r, struct tcase *t)
{
	static const char * const vocab[] = {
		"patch", "replace", "unpatch", "check", BASE, "fix1", "=",
		"pre-patch=", "0x", "0", "-1", "ffffffffffffffffff", "PATCH",
		"\xff", "0x0x1", "zz", "pre-patch=1",
	};
	struct cmd *c = &t->c;
	unsigned int n = 1 + rnd(r, 12), i;

	t->b.len = 0;
	if (chance(r, 40)) {	/* a verb, a name, then one word that is nothing */
		valid_cmd(r, c);
		bprintf(&t->b, "%s%s %.*s", chance(r, 20) ? "check " : "",
			verbs[rnd(r, 3)], (int)c->name_len, c->name);
		n++;
		for (i = 0; i < n; i++) {
			put_sep(r, &t->b);
			if (i == n / 2)
				bprintf(&t->b, "%s", vocab[15 - 2 * rnd(r, 2)]);
			else if (chance(r, 50))
				put_fn(r, t);
			else
				bprintf(&t->b, "%s", vocab[rnd(r, ARRAY_SIZE(vocab))]);
		}
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		if (i)
			put_sep(r, &t->b);
		if (chance(r, 20))
			put_fn(r, t);
		else
			bprintf(&t->b, "%s", vocab[rnd(r, ARRAY_SIZE(vocab))]);
	}
	return judge_soup(t);
}

/*
 * Weights, per hundred cases.  A refusal by the parser costs a fraction
 * of a millisecond in the guest; an accepted command (applied, checked,
 * undone) costs a hundred times that.  "valid" is weighed to keep the run
 * within its time, and the other generators that may build an accepted
 * command make most of those refused once parsed (refuse_late()).
 */
static const struct gen {
	const char *name;
	int (*fn)(struct rng *r, struct tcase *t);
	unsigned int weight;
} gens[] = {
	{ "bytes", gen_bytes, 8 }, { "tokens", gen_tokens, 9 },
	{ "long", gen_long, 3 }, { "mutate", gen_mutate, 19 },
	{ "addr", gen_addr, 18 }, { "name", gen_name, 9 },
	{ "pairs", gen_pairs, 6 }, { "hook", gen_hook, 12 },
	{ "check", gen_check, 5 }, { "exist", gen_exist, 8 },
	{ "valid", gen_valid, 3 },
};

enum { G_NOCAP = ARRAY_SIZE(gens), G_FAULT, G_GOING, G_GONE, G_COUNT };
static const char * const extra_names[] = { "nocap", "fault", "going", "gone" };

static const char *gen_name_of(int g)
{
	return g < G_NOCAP ? gens[g].name : extra_names[g - G_NOCAP];
}

/* Case @index, draw @attempt; its generator, or -1 to draw again. */
static int make_case(unsigned long long index, unsigned int attempt,
		     struct tcase *t)
{
	unsigned int total = 0, w, g, i;
	struct rng r;
	char *s;

	for (g = 0; g < G_NOCAP; g++)
		total += gens[g].weight;
	rng_init(&r, 1, index, attempt);
	w = rnd(&r, total);
	for (g = 0; w >= gens[g].weight; g++)
		w -= gens[g].weight;
	t->naddrs = 0;
	t->want = -gens[g].fn(&r, t);
	if (t->want == -REDRAW)
		return -1;
	t->c.name[t->c.name_len] = '\0';
	/* Only a command built to be valid can be OK. */
	t->accept = t->want == OK;
	/* Could its echo in the log look like a splat? */
	if (t->b.len <= CMD_MAX) {
		s = strndup(bstr(&t->b), t->b.len);
		for (i = 0; s[i]; i++)
			if (s[i] == '\t' || s[i] == '\n')
				s[i] = ' ';
		w = has_stem(s);
		free(s);
		for (i = 0; i < t->naddrs && !w; i++)
			w = addr_has_stem(t->addrs[i]);
		if (w)
			return -1;
	}
	return g;
}

/* ------------------------------------------------------------------ */
/* The kernel log                                                      */

static int kmsg_fd = -1;
static unsigned int kmsg_lost, nsplats;

/* Read what the kernel logged since; the records that start "kpatch: ". */
static unsigned int kmsg_drain(void)
{
	char rec[8192], *msg;
	unsigned int nkp = 0;
	ssize_t n;

	while (kmsg_fd >= 0) {
		n = read(kmsg_fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE) {
			kmsg_lost++;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		rec[n] = '\0';
		msg = strchr(rec, ';');
		if (!msg++)
			continue;
		msg[strcspn(msg, "\n")] = '\0';
		nkp += !strncmp(msg, "kpatch: ", 8);
		if (!regexec(&splat_re, msg, 0, NULL, 0) && nsplats++ < 20)
			printf("# kpfuzz: kernel log: %s\n", msg);
	}
	return nkp;
}

/*
 * The "kpatch: " records of a refusal.  A message longer than a log line
 * loses its newline, and the kernel shows such a record only once the
 * next one begins: if none came, log one (through a file opened for it:
 * /dev/kmsg rate-limits each opener).
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

static char tracefs_enabled[128], cmdline_orig[4096];
static struct buf st_base, st_now;
static int control_fd = -1;
static bool verbose, aborted;
static char skipped[256];	/* @skip's "NAME REFCOUNT" in the last snapshot */

/* The state a refused command must not change; without @skip's module. */
static void snapshot(struct buf *s, const char *skip)
{
	char line[512], *p, *name, *refs;
	FILE *m;

	s->len = 0;
	skipped[0] = '\0';
	bprintf(s, "== patches\n");
	cat_file(s, PATCHES);
	bprintf(s, "== sysfs\n");
	list_dir(s, SYSFS_DIR, 0);
	bprintf(s, "== enabled_functions\n");
	cat_file(s, tracefs_enabled);
	bprintf(s, "== modules\n");
	m = fopen("/proc/modules", "r");
	while (m && fgets(line, sizeof(line), m)) {
		p = line;
		name = strsep(&p, " ");
		strsep(&p, " ");
		refs = p ? strsep(&p, " ") : "";
		if (skip && !strcmp(name, skip))
			snprintf(skipped, sizeof(skipped), "%s %s", name, refs);
		else if (!strncmp(name, "kpatch", 6))
			bprintf(s, "%s %s\n", name, refs);
	}
	if (m)
		fclose(m);
}

static bool same(const struct buf *a, const struct buf *b)
{
	return a->len == b->len && !memcmp(a->p, b->p, a->len);
}

static void show_state_diff(struct buf *want, struct buf *got)
{
	printf("# kpfuzz: expected state:\n%s# kpfuzz: actual state:\n%s",
	       bstr(want), bstr(got));
}

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

	snprintf(s, sizeof(s), "patch " BASE " %016lx %016lx", safe[S_A].addr,
		 safe[S_A1].addr);
	return write_str(s);
}

/* ------------------------------------------------------------------ */
/* Results                                                             */

static struct stats {
	unsigned int cases, redrawn, wrong, undocumented;
	unsigned int hist[256];		/* by errno; [0]: OK; [255]: other */
	double secs;			/* written, checked and undone */
} stats[G_COUNT], total;

static unsigned int nstate_fail, naccept_fail, nnolog, nreports;
static unsigned int nhooked;

static void count(int g, int res)
{
	unsigned int h = res >= 0 && res < 255 ? res : 255;

	stats[g].cases++;
	stats[g].hist[h]++;
	total.cases++;
	total.hist[h]++;
}

static void print_hist(const char *what, const struct stats *s)
{
	unsigned int i;

	printf("# kpfuzz: %-7s %6u cases, %4u redrawn", what, s->cases,
	       s->redrawn);
	printf(s->secs ? ", %5.1f s:" : ":", s->secs);
	for (i = 0; i < 256; i++)
		if (s->hist[i])
			printf(" %s %u", i == 255 ? "short" : errname(i),
			       s->hist[i]);
	printf("\n");
}

/* Show a failing case and how to replay it. */
static void report(long long index, int g, const struct buf *b,
		   const char *why, int res, int want)
{
	if (nreports++ >= MAX_REPORTS)
		return;
	printf("# kpfuzz: FAIL: %s case %lld: %s: got %s, ", gen_name_of(g),
	       index, why, errname(res));
	printf("expected %s\n#   %zu bytes: \"", errname(want), b->len);
	print_escaped(b->p, b->len, 600);
	printf("\"\n");
	if (g < G_NOCAP)
		printf("#   replay: kpfuzz --seed %llu --only %lld%s%s\n", seed,
		       index, going_mod ? " --going " : "",
		       going_mod ? going_mod : "");
}

/* ------------------------------------------------------------------ */
/* Accepted commands                                                   */

/* One line of the patches file, as a test function maps to another. */
struct entry {
	const char *patch;
	unsigned long old, new;
};

/* What the patches file holds after @c: "base" (unless replaced), @c. */
static int model_table(const struct cmd *c, struct entry *e)
{
	unsigned int n = 0, i;

	if (c->verb == V_PATCH)
		e[n++] = (struct entry){ BASE, safe[S_A].addr, safe[S_A1].addr };
	for (i = 0; c->verb != V_UNPATCH && i < c->npairs; i++)
		e[n++] = (struct entry){ c->name, c->old[i], c->new[i] };
	return n;
}

/* What test function @fn returns (or prints) through table @e. */
static int shown_by(const struct entry *e, int n, int fn)
{
	int i;

	for (i = n - 1; i >= 0; i--)
		if (e[i].old == safe[fn].addr)
			return safe[find_safe(e[i].new)].ret;
	return safe[fn].ret;
}

static char *sym_label(unsigned long addr, char *out, size_t size)
{
	int s = find_safe(addr);
	const char *mod = !safe[s].mod ? NULL : strcmp(safe[s].mod, "going") ?
			  safe[s].mod : going_mod;

	snprintf(out, size, "%s%s%s", mod ? mod : "", mod ? ":" : "",
		 safe[s].name);
	return out;
}

/*
 * The patches file as table @e (@n entries) has it, without the sizes: the
 * patches oldest first, each with its functions in the order given (and
 * no hooks: no patch from the control file has any).
 */
static bool check_patches_file(struct entry *e, int n)
{
	static struct buf got, want;
	char s1[160], s2[160], *q;
	int i, k;

	if (!got.p) {
		binit(&got, 1 << 18);
		binit(&want, 1 << 18);
	}
	got.len = 0;
	want.len = 0;
	cat_file(&got, PATCHES);
	for (q = bstr(&got); (q = strchr(q, '+')); got.len = strlen(bstr(&got)))
		memmove(q, q + strcspn(q, " "), strlen(q + strcspn(q, " ")) + 1);
	for (i = 0; i < n; i++) {
		bool active = true;

		for (k = i + 1; k < n; k++)
			active &= e[k].old != e[i].old;
		bprintf(&want, "%s %s %016lx %s %016lx %s\n", e[i].patch,
			sym_label(e[i].old, s1, sizeof(s1)), e[i].old,
			sym_label(e[i].new, s2, sizeof(s2)), e[i].new,
			active ? "active" : "shadowed");
	}
	if (same(&got, &want))
		return true;
	printf("# kpfuzz: patches file, expected (without sizes):\n%s", bstr(&want));
	printf("# kpfuzz: actual:\n%s", bstr(&got));
	return false;
}

/* Do the patched test functions return what they should, and sysfs? */
static bool check_effect(const struct cmd *c, struct entry *e, int n)
{
	char got[4096], want[4096], path[400];
	bool good = true, cmdline = false, base;
	unsigned int i;
	int v;

	read_line(VALUES, got, sizeof(got));
	snprintf(want, sizeof(want), "a=%d b=%d", shown_by(e, n, S_A),
		 shown_by(e, n, S_B));
	if (strcmp(got, want)) {
		printf("# kpfuzz: %s reads '%s', expected '%s'\n", VALUES, got, want);
		good = false;
	}
	for (i = 0; i < c->npairs; i++)
		cmdline |= c->old[i] == safe[S_CMDLINE].addr;
	if (cmdline) {
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
	}
	snprintf(path, sizeof(path), SYSFS_DIR "/patches/%.*s",
		 (int)c->name_len, c->name);
	if (c->verb != V_UNPATCH && !is_dir(path)) {
		printf("# kpfuzz: %s is missing\n", path);
		good = false;
	}
	base = c->verb == V_PATCH;
	if (is_dir(SYSFS_DIR "/patches/" BASE) != base) {
		printf("# kpfuzz: %s/patches/%s is %s\n", SYSFS_DIR, BASE,
		       c->verb == V_PATCH ? "missing" : "still there");
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

/* The calls of the hooks before the run: no command may add one. */
static long calls_before;

/* Did a command call a hook since the last look?  Says so if it did. */
static bool hooked(void)
{
	long calls = hook_calls();

	if (calls == calls_before)
		return false;
	printf("# kpfuzz: %ld calls of kpatch_test_shadow's hooks, %ld before\n",
	       calls, calls_before);
	calls_before = calls;
	nhooked++;
	return true;
}

/* Undo an accepted command: back to the baseline. */
static bool undo(int verb, const char *name, size_t len)
{
	char s[CMD_MAX + 16];
	int ret = 0;

	if (verb != V_UNPATCH) {
		snprintf(s, sizeof(s), "unpatch %.*s", (int)len, name);
		ret = write_str(s);
	}
	if (!ret && verb != V_PATCH)
		ret = patch_base();
	if (ret)
		printf("# kpfuzz: undoing: %s\n", errname(ret));
	return !ret;
}

/* Check and undo accepted case @t. */
static void check_accepted(long long index, int g, struct tcase *t)
{
	static struct entry e[MAX_PAIRS + 1];
	const struct cmd *c = &t->c;
	bool good = !hooked();
	int n = model_table(c, e);

	snapshot(&st_now, NULL);
	if (same(&st_now, &st_base)) {
		printf("# kpfuzz: the state did not change\n");
		good = false;
	}
	good &= check_patches_file(e, n);
	good &= check_effect(c, e, n);
	if (!good)
		report(index, g, &t->b, "accepted, but not as expected", 0, 0);
	if (!undo(c->verb, c->name, c->name_len)) {
		report(index, g, &t->b, "cannot undo", 0, 0);
		good = false;
		aborted = true;
	} else if (hooked()) {
		report(index, g, &t->b, "undone, but a hook was called", 0, 0);
		good = false;
	}
	snapshot(&st_now, NULL);
	if (!same(&st_now, &st_base)) {
		report(index, g, &t->b, "state not the baseline after undo", 0, 0);
		show_state_diff(&st_base, &st_now);
		good = false;
		aborted = true;
	}
	naccept_fail += !good;
}

/* Undo a command accepted though it should not have been. */
static void undo_unexpected(struct buf *b)
{
	char *s = strndup(bstr(b), b->len), *save = NULL, *v, *name;

	v = strtok_r(s, " \t\n", &save);
	name = strtok_r(NULL, " \t\n", &save);
	if (v && name && strcmp(v, "check") &&
	    !undo(!strcmp(v, "unpatch") ? V_UNPATCH : !strcmp(v, "replace") ?
		  V_REPLACE : V_PATCH, name, strlen(name)))
		aborted = true;
	free(s);
}

/* ------------------------------------------------------------------ */
/* The main run                                                        */

static unsigned int check_every = 20, pending;
static long long pending_from = -1;

/* Where the main run's time goes: see its "time:" line. */
static double t_gen, t_write, t_accept, t_check;
static unsigned int n_accept, n_check;

/* Compare the state with the baseline after refused commands. */
static void check_pending(void)
{
	double t = now_s();

	if (!pending)
		return;
	n_check++;
	snapshot(&st_now, NULL);
	t_check += now_s() - t;
	if (hooked())
		printf("# kpfuzz: FAIL: a hook was called by one of %u cases from %lld\n",
		       pending, pending_from);
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
}

/* Write case @t (generator @g) and check what it did. */
static void run_one(long long index, int g, struct tcase *t)
{
	unsigned int nkp;
	double t0;
	int res;

	if (t->accept)
		check_pending();
	if (aborted)
		return;
	t0 = now_s();
	res = write_cmd(control_fd, &t->b);
	nkp = res > 0 ? kmsg_refusal() : kmsg_drain();
	t_write += now_s() - t0;
	count(g, res);
	if (verbose) {
		printf("# case %lld %s: \"", index, gen_name_of(g));
		print_escaped(t->b.p, t->b.len, 200);
		printf("\" -> %s (expected %s)\n", errname(res), errname(t->want));
	}
	if (res > 0 && !documented(res)) {
		stats[g].undocumented++;
		report(index, g, &t->b, "undocumented errno", res, t->want);
	} else if (res != t->want) {
		stats[g].wrong++;
		report(index, g, &t->b, "not what Documentation.txt says", res,
		       t->want);
	}
	if (res > 0 && !nkp) {
		nnolog++;
		report(index, g, &t->b, "refused without a 'kpatch: ' log line",
		       res, t->want);
	}
	if (!res && t->accept) {
		t0 = now_s();
		check_accepted(index, g, t);
		t_accept += now_s() - t0;
		n_accept++;
	} else {
		if (!res)
			undo_unexpected(&t->b);
		if (!pending)
			pending_from = index;
		if (++pending >= check_every)
			check_pending();
	}
}

static void run_main(long long from, unsigned int ncases, bool only)
{
	static struct tcase t;
	unsigned int written = 0, attempt;
	long long index;
	int g = 0;

	binit(&t.b, BUF_MAX);
	for (index = from; written < ncases && !aborted; index++) {
		double t0 = now_s();

		for (attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
			g = make_case(index, attempt, &t);
			if (g >= 0)
				break;
			total.redrawn++;
		}
		t_gen += now_s() - t0;
		if (g < 0)
			continue;
		stats[g].redrawn += attempt;
		if (only) {
			printf("# kpfuzz: case %lld (%s, draw %u): %zu bytes: \"",
			       index, gen_name_of(g), attempt, t.b.len);
			print_escaped(t.b.p, t.b.len, 2 * CMD_MAX);
			printf("\"\n# kpfuzz: expected: %s\n", errname(t.want));
		}
		t0 = now_s();
		run_one(index, g, &t);
		stats[g].secs += now_s() - t0;
		total.secs += now_s() - t0;
		written++;
	}
	check_pending();
	free(t.b.p);
	printf("# kpfuzz: time: making cases %.1f s, writes %.1f s,", t_gen,
	       t_write);
	printf(" %u accepted checked and undone %.1f s, %u state checks %.1f s\n",
	       n_accept, t_accept, n_check, t_check);
}

/* ------------------------------------------------------------------ */
/* Without CAP_SYS_MODULE; unreadable buffers                          */

static int drop_cap_sys_module(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	unsigned int idx = CAP_TO_INDEX(CAP_SYS_MODULE);
	unsigned int mask = CAP_TO_MASK(CAP_SYS_MODULE);

	if (prctl(PR_CAPBSET_DROP, CAP_SYS_MODULE, 0, 0, 0) ||
	    syscall(SYS_capget, &hdr, data))
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

/* Nocap case @i: a valid command, or a mutated one. */
static void gen_nocap(unsigned int i, struct tcase *t)
{
	struct rng r;

	rng_init(&r, 2, i, 0);
	if (chance(&r, 30) && gen_mutate(&r, t) != REDRAW)
		return;
	gen_valid(&r, t);
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
	static struct tcase t;
	unsigned int i, bad = 0, got = 0;
	int pfd[2], res, status;
	pid_t pid;

	if (!n)
		return;
	binit(&t.b, BUF_MAX);
	if (pipe(pfd)) {
		verdict(false, "nocap: set up");
		return;
	}
	pid = fork();
	if (!pid) {
		close(pfd[0]);
		res = NOCAP_NOCAP;
		if (drop_cap_sys_module()) {
			(void)!write(pfd[1], &res, sizeof(res));
			_exit(1);
		}
		for (i = 0; i < n; i++) {
			int fd = i % 2 ? open(CONTROL, O_WRONLY) : control_fd;

			gen_nocap(i, &t);
			res = fd < 0 ? NOCAP_OPEN : write_cmd(fd, &t.b);
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
		gen_nocap(i, &t);
		count(G_NOCAP, res);
		if (res == EPERM)
			continue;
		bad++;
		stats[G_NOCAP].wrong++;
		report(i, G_NOCAP, &t.b, "written without CAP_SYS_MODULE", res,
		       EPERM);
		if (!res)
			undo_unexpected(&t.b);
	}
	close(pfd[0]);
	waitpid(pid, &status, 0);
	printf("# kpfuzz: nocap: %u commands, %u 'kpatch: ' log lines\n", got,
	       kmsg_drain());
	verdict(!bad && got == n,
		"nocap: every write without CAP_SYS_MODULE refused with EPERM");
	snapshot(&st_now, NULL);
	if (!same(&st_now, &st_base))
		show_state_diff(&st_base, &st_now);
	verdict(same(&st_now, &st_base), "nocap: state unchanged");
	free(t.b.p);
}

/*
 * Writes from buffers the kernel cannot read fail with EFAULT (the errno
 * of write(2) for a bad buffer; Documentation.txt does not list it), or
 * with EINVAL where the length alone is refused, and change nothing.  The
 * command in the buffers would be accepted: "unpatch base".
 */
static void run_fault(void)
{
	static const char cmd[] = "unpatch " BASE;
	size_t page = sysconf(_SC_PAGESIZE), clen = sizeof(cmd) - 1;
	unsigned char *map;
	struct {
		const void *p;
		size_t len;
		int want, or;
	} cases[] = {
		{ NULL, 10, EFAULT, EFAULT },
		{ (void *)1, 1, EFAULT, EFAULT },
		{ NULL, 0, EINVAL, EINVAL },			/* empty */
		{ NULL, CMD_MAX + 1, EINVAL, EINVAL },		/* too long */
		{ (void *)k_text, 16, EFAULT, EFAULT },		/* kernel memory */
		{ (void *)k_text, CMD_MAX + 1, EFAULT, EINVAL },
		{ NULL, clen + 8, EFAULT, EFAULT },		/* past a page */
		{ NULL, 16, EFAULT, EFAULT },			/* unreadable */
	};
	unsigned int i, bad = 0;
	struct buf b = { 0 };

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

		kmsg_drain();
		count(G_FAULT, res);
		if (res == cases[i].want || res == cases[i].or)
			continue;
		bad++;
		b.p = (unsigned char *)"(unreadable)";
		b.len = 12;
		report(i, G_FAULT, &b, "write from an unreadable buffer", res,
		       cases[i].want);
		if (!res && !undo(V_UNPATCH, BASE, 4))
			aborted = true;
	}
	munmap(map, 2 * page);
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

/*
 * Going case @i: a command naming the going module's function (g), its
 * new function (n), its data (d) or a byte past g (p), alone or next to
 * valid pairs (b c: kpatch_test_value_b and its v1, a: value_a's v2, m M:
 * cmdline_proc_show and its v1, A: kpatch_test_value_a).  EINVAL each.
 */
static void gen_going(unsigned int i, struct buf *b)
{
	static const char * const forms[] = {
		"patch gc", "patch bn", "patch gn", "patch bcga", "replace gn",
		"patch bd", "patch pc", "patch bnmM", "patch bcAg",
		"replace bcgn", "replace Anbc",
	};
	static const char letters[] = "gndbcaAmM";
	const char *f = forms[i % ARRAY_SIZE(forms)], *w = strrchr(f, ' ');
	unsigned long g = safe[S_GOING].addr;
	const unsigned long addr[] = {
		g, safe[S_GOING_NEW].addr, going_data, safe[S_B].addr, safe[S_B1].addr,
		safe[S_A2].addr, safe[S_A].addr, safe[S_CMDLINE].addr,
		safe[S_CMDLINE1].addr,
	};
	struct rng r;

	rng_init(&r, 3, i, 0);
	b->len = 0;
	bprintf(b, "%.*s g%u", (int)(w - f), f, i);
	while (*++w) {
		if (*w == 'p')
			bprintf(b, " %016lx", g + 1 + rnd(&r, 8));
		else
			bprintf(b, " %016lx", addr[strchr(letters, *w) - letters]);
	}
	if (chance(&r, 30))
		bputc(b, '\n');
}

/*
 * Going case @i must fail with EINVAL, log why and change nothing: the
 * state without the going module must be @base, and the module's own
 * line must be @modline or gone.
 */
static bool going_case(int g, unsigned int i, struct buf *b,
		       const struct buf *base, const char *modline)
{
	unsigned int nkp;
	bool good = true;
	int res;

	gen_going(i, b);
	res = write_cmd(control_fd, b);
	nkp = res > 0 ? kmsg_refusal() : kmsg_drain();
	count(g, res);
	if (res != EINVAL) {
		stats[g].wrong++;
		report(i, g, b, "naming a module being unloaded", res, EINVAL);
		good = false;
		if (!res)
			undo_unexpected(b);
	}
	if (res > 0 && !nkp) {
		nnolog++;
		report(i, g, b, "refused without a 'kpatch: ' log line", res,
		       EINVAL);
	}
	snapshot(&st_now, going_mod);
	if (!same(&st_now, base)) {
		report(i, g, b, "state changed", res, EINVAL);
		show_state_diff((struct buf *)base, &st_now);
		good = false;
	}
	if (modline && *skipped && strcmp(skipped, modline)) {
		printf("# kpfuzz: going case %u: /proc/modules: '%s' became '%s'\n",
		       i, modline, skipped);
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
	char modpath[256], state_path[300], st[64], modline[256] = "";
	static struct buf b, base;
	unsigned int i, in_window = 0, n = 0;
	bool good = true, seen;
	int status = -1;
	double t0;
	pid_t pid;

	binit(&b, BUF_MAX);
	binit(&base, 1 << 18);
	snprintf(modpath, sizeof(modpath), "/sys/module/%s", going_mod);
	snprintf(state_path, sizeof(state_path), "%s/initstate", modpath);
	read_line(state_path, st, sizeof(st));
	if (strcmp(st, "live")) {
		verdict(false, "going: %s is live before the test", going_mod);
		return;
	}
	snapshot(&base, going_mod);
	pid = fork();
	if (!pid)
		_exit(syscall(SYS_delete_module, going_mod, O_NONBLOCK) ?
		      errno & 0x7f : 0);
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
		snapshot(&st_now, going_mod);
		snprintf(modline, sizeof(modline), "%s", skipped);
		printf("# kpfuzz: going: %s is going ('%s'), %.0f ms after rmmod\n",
		       going_mod, modline, (now_s() - t0) * 1000);
	} else {
		printf("# kpfuzz: going: %s never seen going (initstate '%s')\n",
		       going_mod, st);
	}
	for (i = 0; seen && i < 4000 && !aborted; i++, n++) {
		read_line(state_path, st, sizeof(st));
		if (strcmp(st, "going"))
			break;
		good &= going_case(G_GOING, i, &b, &base, modline);
		read_line(state_path, st, sizeof(st));
		in_window += !strcmp(st, "going");
	}
	if (status == -1)
		waitpid(pid, &status, 0);
	printf("# kpfuzz: going: %u commands, %u of them entirely while %s was going, %.1f s\n",
	       n, in_window, going_mod, now_s() - t0);
	going_state = 2;
	read_modules();
	verdict(WIFEXITED(status) && !WEXITSTATUS(status) && !is_dir(modpath) &&
		!module_loaded(going_mod), "going: %s unloaded", going_mod);
	verdict(seen && in_window >= min_going,
		"going: at least %u commands while %s was going", min_going,
		going_mod);
	verdict(seen && good && n,
		"going: every command naming it refused with EINVAL, state unchanged");
	good = true;
	for (i = 0; i < 90 && !aborted; i++)
		good &= going_case(G_GONE, i, &b, &base, NULL);
	verdict(good,
		"gone: every command naming it refused with EINVAL, state unchanged");
	free(b.p);
	free(base.p);
}

/* ------------------------------------------------------------------ */
/* Setup and main                                                      */

static int setup(void)
{
	static const struct {
		const char *name;
		unsigned long *addr;
	} marks[] = {
		{ "_text", &k_text }, { "_etext", &k_etext },
		{ "_sinittext", &k_sinittext }, { "_einittext", &k_einittext },
		{ "_sdata", &k_sdata }, { "_end", &k_end },
	};
	char line[4096];
	size_t i;
	int s;

	read_modules();
	if (!nloaded || read_kallsyms()) {
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
	k_etext = (k_etext + 4095) & ~4095UL;
	for (s = 0; s < S_COUNT; s++) {
		const char *mod = safe[s].mod;

		if (mod && !strcmp(mod, "going"))
			mod = going_mod;
		if (safe[s].mod && !mod)
			continue;
		safe[s].addr = sym_addr(safe[s].name, mod);
		if (!safe[s].addr && (s <= S_B2 || s >= S_CMDLINE)) {
			printf("# kpfuzz: no %s: test modules not loaded?\n",
			       safe[s].name);
			return -1;
		}
	}
	for (s = 0; s < 2; s++) {
		hookfn[s] = sym_addr(hookfn_names[s], HOOK_MOD);
		if (!hookfn[s]) {
			printf("# kpfuzz: no %s: %s not loaded?\n",
			       hookfn_names[s], HOOK_MOD);
			return -1;
		}
	}
	calls_before = hook_calls();
	if (calls_before < 0) {
		printf("# kpfuzz: cannot read %s\n", HOOK_CALLS);
		return -1;
	}
	if (going_mod) {
		going_data = sym_addr("kpatch_test_going_data", going_mod);
		if (!safe[S_GOING].addr || !safe[S_GOING_NEW].addr || !going_data) {
			printf("# kpfuzz: %s: its functions are not in /proc/kallsyms\n",
			       going_mod);
			return -1;
		}
	}
	build_pools();
	printf("# kpfuzz: %zu symbols: kernel text %zu, init %zu, data %zu, low %zu;",
	       nsyms, pools[P_VTEXT].n, pools[P_VINIT].n, pools[P_VDATA].n,
	       pools[P_VLOW].n);
	printf(" module text %zu, data %zu; other %zu\n", pools[P_MTEXT].n,
	       pools[P_MDATA].n, pools[P_OTHER].n);
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
	kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (kmsg_fd >= 0)
		lseek(kmsg_fd, 0, SEEK_END);
	else
		printf("# kpfuzz: cannot read /dev/kmsg\n");
	return 0;
}

static void summary(unsigned int min_cases)
{
	int g;

	for (g = 0; g < G_COUNT; g++)
		if (stats[g].cases || stats[g].redrawn)
			print_hist(gen_name_of(g), &stats[g]);
	print_hist("total", &total);
	for (g = 0; g < G_NOCAP; g++) {
		if (!stats[g].cases)
			continue;
		verdict(!stats[g].undocumented,
			"%s: every refusal a documented errno", gens[g].name);
		verdict(!stats[g].wrong,
			"%s: every result as Documentation.txt says", gens[g].name);
	}
	if (min_cases)
		verdict(total.cases >= min_cases, "at least %u commands written",
			min_cases);
	verdict(!nstate_fail && !aborted, "state unchanged by every refused command");
	verdict(!naccept_fail && !aborted,
		"every accepted command valid, in effect as expected, and undone");
	verdict(!nnolog, "every refusal logged a 'kpatch: ' line");
	hooked();
	verdict(calls_before >= 0 && !nhooked && !aborted,
		"no command called a hook (a HOOK=ADDR word gives none)");
	verdict(!nsplats, "no kernel splat in the log");
	verdict(kmsg_fd >= 0 && !kmsg_lost, "kernel log read without losing records");
}

int main(int argc, char **argv)
{
	unsigned int ncases = 10000, min_cases = 0, nocap = 200;
	bool only = false;
	long long from = 0;
	struct buf before;
	double t0, t1;
	int i, ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = argv[i + 1];

		if (!strcmp(a, "--verbose")) {
			verbose = true;
			continue;
		}
		if (!v)
			a = "";
		i++;
		only |= !strcmp(a, "--only");
		if (!strcmp(a, "--seed")) {
			seed = strtoull(v, NULL, 0);
		} else if (!strcmp(a, "--cases")) {
			ncases = strtoul(v, NULL, 0);
		} else if (!strcmp(a, "--min-cases")) {
			min_cases = strtoul(v, NULL, 0);
		} else if (!strcmp(a, "--check-every")) {
			check_every = strtoul(v, NULL, 0) ?: 1;
		} else if (!strcmp(a, "--from") || !strcmp(a, "--only")) {
			from = strtoll(v, NULL, 0);
		} else if (!strcmp(a, "--nocap")) {
			nocap = strtoul(v, NULL, 0);
		} else if (!strcmp(a, "--going")) {
			going_mod = v;
		} else if (!strcmp(a, "--min-going")) {
			min_going = strtoul(v, NULL, 0);
		} else if (!strcmp(a, "--verdicts")) {
			verdicts = fopen(v, "w");
			if (!verdicts)
				return 2;
			setvbuf(verdicts, NULL, _IOLBF, 0);
		} else {
			fprintf(stderr, "kpfuzz: bad usage (see its source)\n");
			return 2;
		}
	}
	if (only) {
		ncases = 1;
		nocap = 0;
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
	verdict(!ret, "setup: patch %s enabled (%s)", BASE, errname(ret));
	if (ret)
		return 1;
	snapshot(&st_base, NULL);
	t1 = now_s();
	printf("# kpfuzz: seed %llu, %u cases from %lld, state checked every %u refused;",
	       seed, ncases, from, check_every);
	printf(" set up in %.1f s\n", t1 - t0);
	run_main(from, ncases, only);
	printf("# kpfuzz: %u cases written in %.1f s\n", total.cases, now_s() - t1);
	if (!aborted)
		run_nocap(nocap);
	if (!aborted && !only)
		run_fault();
	if (going_mod && !only && !aborted)
		run_going();
	kmsg_drain();
	summary(min_cases);
	ret = write_str("unpatch " BASE);
	snapshot(&st_now, going_mod);
	if (!same(&st_now, &before))
		show_state_diff(&before, &st_now);
	verdict(!ret && same(&st_now, &before),
		"teardown: patch %s removed, state as before", BASE);
	printf("# kpfuzz: %u cases in %.1f s\n", total.cases, now_s() - t0);
	return nfailed ? 1 : 0;
}
