// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_api - a patch module that uses kpatch's in-kernel API.
 *
 * On load it registers, with kpatch_register(), a patch that redirects
 * kpatch_test_target's kpatch_test_value_a() (returns 1) to
 * kpatch_test_api_value_a() (returns 31) and, with which=ab or which=b,
 * kpatch_test_value_b() (returns 2) to kpatch_test_api_value_b() (32).
 * With replace=1 every other enabled patch is removed in the same step.
 *
 * With fail_init=1 the init fails (-EINVAL) after kpatch_register() has
 * succeeded: the module is freed right away, and kpatch must take the
 * patch out as the module goes, or the patch points into freed memory.
 *
 * With check_intact=1 the init registers a two-function patch whose first
 * function is good and whose second one makes kpatch_register() fail late:
 * its old address is intact_old, by default one byte into
 * kpatch_test_value_b() (not a function start: -EINVAL once the first
 * function has been resolved); the test also passes the address of a
 * function that is on a task's stack (-EBUSY from the stack check).  The
 * init copies the struct kpatch_module and its funcs array before the
 * call, compares them after it, and logs either "structures intact after
 * failed register (err N)" or "structures changed after failed register
 * (err N):" and the fields that changed.  It returns 0 if they are intact
 * (nothing is patched then), else -EINVAL.
 *
 * With own_kobj=1 the init first creates /sys/kernel/kpatch/patches/<its
 * module name> itself, as the 2014 kpatch patch modules did, then calls
 * kpatch_register(), which must refuse that with -EEXIST.  The init logs
 * "kpatch_register() failed: N", removes its directory again and fails.
 * With no_register=1 as well, the init makes the directory and keeps it
 * until the module is removed, without calling kpatch_register(): a
 * directory of that name that kpatch did not make, for a patch of the
 * same name that waits between tries.
 *
 * With mem=WHERE the init registers a patch of kpatch_test_value_a()
 * from structures in other memory, and returns what kpatch_register()
 * returned.  kpatch keeps a pointer to the struct kpatch_module and
 * writes to it while the patch is enabled, so it must refuse (-EINVAL)
 * one that is const (mem=const: read-only from before the init),
 * __ro_after_init (mem=ro_after_init: read-only once the init has
 * returned) or on the stack of the init (mem=stack: gone once it has
 * returned).  The funcs array it only reads, in kpatch_register(), so it
 * must accept one there (mem=const_funcs, mem=ro_after_init_funcs,
 * mem=stack_funcs: the struct kpatch_module in module data), and both
 * from kmalloc() or vmalloc() (mem=kmalloc, mem=vmalloc; the module frees
 * them at exit).  The new function of the patches accepted is
 * kpatch_test_api_value_a().  The init logs which memory it passes.
 * After a refusal it compares the structures with copies made before the
 * call and logs "structures intact after failed register (err N)" or
 * "structures changed ...".  Should kpatch accept a structure it must
 * refuse, the init says so and unregisters the patch again before it
 * returns, while the memory is still there and writable: a patch left
 * enabled on it would make kpatch fault later.  So that this works, the
 * new function of those patches is kpatch_test_value_b(), in the module
 * of the old one: with a new function in this module, the unregister
 * would not pass the stack check, the init being on insmod's stack in
 * this module's code.
 *
 * kpatch pins this module while the patch is enabled; remove it with
 * "echo unpatch kpatch_test_api > /sys/kernel/debug/kpatch/control",
 * then rmmod.  Module exit unregisters the patch only if it is still
 * enabled.
 *
 * Needs kpatch.ko and kpatch_test_target.ko loaded first.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compiler.h>
#include <linux/kernel.h>
#include <linux/kobject.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/vmalloc.h>

#include "kpatch.h"
#include "kpatch_test.h"

static bool replace;
module_param(replace, bool, 0444);
MODULE_PARM_DESC(replace, "replace all other enabled patches (default 0)");

static char *which = "a";
module_param(which, charp, 0444);
MODULE_PARM_DESC(which, "functions to patch: a, b or ab (default a)");

static bool fail_init;
module_param(fail_init, bool, 0444);
MODULE_PARM_DESC(fail_init, "fail the init after a successful kpatch_register() (default 0)");

static bool check_intact;
module_param(check_intact, bool, 0444);
MODULE_PARM_DESC(check_intact,
		 "register a patch whose second function fails and check that the structures are unchanged (default 0)");

static unsigned long intact_old;
module_param(intact_old, ulong, 0444);
MODULE_PARM_DESC(intact_old,
		 "with check_intact: old address of the second function (default: kpatch_test_value_b + 1)");

static bool own_kobj;
module_param(own_kobj, bool, 0444);
MODULE_PARM_DESC(own_kobj,
		 "create /sys/kernel/kpatch/patches/<module name> before kpatch_register(), as 2014 patch modules did (default 0)");

static bool no_register;
module_param(no_register, bool, 0444);
MODULE_PARM_DESC(no_register,
		 "with own_kobj=1: keep the directory until module exit and do not call kpatch_register() (default 0)");

static char *mem = "";
module_param(mem, charp, 0444);
MODULE_PARM_DESC(mem,
		 "register from const, ro_after_init, stack (all refused), const_funcs, ro_after_init_funcs, stack_funcs, kmalloc or vmalloc memory (default: module data)");

static noinline int kpatch_test_api_value_a(void)
{
	barrier();
	return 31;
}

static noinline int kpatch_test_api_value_b(void)
{
	barrier();
	return 32;
}

static struct kpatch_func kpatch_test_api_funcs[2];

static struct kpatch_module kpatch_test_api_kpmod = {
	.mod = THIS_MODULE,
	.funcs = kpatch_test_api_funcs,
};

/* The patch kpatch_register() accepted, for the module exit. */
static struct kpatch_module *kpatch_test_api_registered = &kpatch_test_api_kpmod;

/* no_register=1: the directory the module made, until its exit */
static struct kobject *kpatch_test_api_kobj;

/* mem=kmalloc, mem=vmalloc: the structures, freed at module exit */
static struct kpatch_module *kpatch_test_api_heap_kpmod;
static struct kpatch_func *kpatch_test_api_heap_funcs;

/* The fields that differ between two copies, for the log. */
struct kpatch_test_api_diff {
	char buf[512];
	size_t len;
};

static void kpatch_test_api_cmp(struct kpatch_test_api_diff *d, int func,
				const char *field, const void *before,
				const void *after, size_t size)
{
	if (!memcmp(before, after, size))
		return;
	if (func < 0)
		d->len += scnprintf(d->buf + d->len, sizeof(d->buf) - d->len,
				    " %s", field);
	else
		d->len += scnprintf(d->buf + d->len, sizeof(d->buf) - d->len,
				    " funcs[%d].%s", func, field);
}

static void kpatch_test_api_cmp_func(struct kpatch_test_api_diff *d, int i,
				     const struct kpatch_func *b,
				     const struct kpatch_func *a)
{
	kpatch_test_api_cmp(d, i, "new_addr", &b->new_addr, &a->new_addr,
			    sizeof(a->new_addr));
	kpatch_test_api_cmp(d, i, "new_size", &b->new_size, &a->new_size,
			    sizeof(a->new_size));
	kpatch_test_api_cmp(d, i, "old_addr", &b->old_addr, &a->old_addr,
			    sizeof(a->old_addr));
	kpatch_test_api_cmp(d, i, "old_size", &b->old_size, &a->old_size,
			    sizeof(a->old_size));
}

static void kpatch_test_api_cmp_kpmod(struct kpatch_test_api_diff *d,
				      const struct kpatch_module *b,
				      const struct kpatch_module *a)
{
	kpatch_test_api_cmp(d, -1, "mod", &b->mod, &a->mod, sizeof(a->mod));
	kpatch_test_api_cmp(d, -1, "funcs", &b->funcs, &a->funcs,
			    sizeof(a->funcs));
	kpatch_test_api_cmp(d, -1, "num_funcs", &b->num_funcs, &a->num_funcs,
			    sizeof(a->num_funcs));
	kpatch_test_api_cmp(d, -1, "enabled", &b->enabled, &a->enabled,
			    sizeof(a->enabled));
	kpatch_test_api_cmp(d, -1, "hooks", &b->hooks, &a->hooks,
			    sizeof(a->hooks));
	kpatch_test_api_cmp(d, -1, "name", &b->name, &a->name, sizeof(a->name));
}

/*
 * check_intact=1: a failed kpatch_register() must leave the caller's
 * struct kpatch_module and funcs array byte for byte as they were.
 */
static int kpatch_test_api_check_intact(void)
{
	static struct kpatch_func funcs_before[ARRAY_SIZE(kpatch_test_api_funcs)];
	static struct kpatch_module kpmod_before;
	struct kpatch_module *kpmod = &kpatch_test_api_kpmod;
	struct kpatch_func *funcs = kpatch_test_api_funcs;
	struct kpatch_test_api_diff d = { .len = 0 };
	unsigned int i;
	int ret;

	funcs[0].old_addr = (unsigned long)kpatch_test_value_a;
	funcs[0].new_addr = (unsigned long)kpatch_test_api_value_a;
	funcs[1].old_addr = intact_old ?: (unsigned long)kpatch_test_value_b + 1;
	funcs[1].new_addr = (unsigned long)kpatch_test_api_value_b;
	kpmod->num_funcs = ARRAY_SIZE(kpatch_test_api_funcs);
	pr_info("check_intact=1: second old function %pS\n",
		(void *)funcs[1].old_addr);

	memcpy(&kpmod_before, kpmod, sizeof(kpmod_before));
	memcpy(funcs_before, funcs, sizeof(funcs_before));
	ret = kpatch_register(kpmod, false);
	if (!ret) {
		pr_err("kpatch_register() succeeded, expected it to fail\n");
		kpatch_unregister(kpmod);
		return -EINVAL;
	}

	if (!memcmp(&kpmod_before, kpmod, sizeof(kpmod_before)) &&
	    !memcmp(funcs_before, funcs, sizeof(funcs_before))) {
		pr_info("structures intact after failed register (err %d)\n",
			ret);
		return 0;
	}
	kpatch_test_api_cmp_kpmod(&d, &kpmod_before, kpmod);
	for (i = 0; i < ARRAY_SIZE(funcs_before); i++)
		kpatch_test_api_cmp_func(&d, i, &funcs_before[i], &funcs[i]);
	pr_err("structures changed after failed register (err %d):%s\n", ret,
	       d.len ? d.buf : " (padding)");
	return -EINVAL;
}

enum kpatch_test_api_mem {
	KPATCH_TEST_API_CONST,
	KPATCH_TEST_API_CONST_FUNCS,
	KPATCH_TEST_API_RO_AFTER_INIT,
	KPATCH_TEST_API_RO_AFTER_INIT_FUNCS,
	KPATCH_TEST_API_STACK,
	KPATCH_TEST_API_STACK_FUNCS,
	KPATCH_TEST_API_KMALLOC,
	KPATCH_TEST_API_VMALLOC,
};

static const char *const kpatch_test_api_mems[] = {
	[KPATCH_TEST_API_CONST] = "const",
	[KPATCH_TEST_API_CONST_FUNCS] = "const_funcs",
	[KPATCH_TEST_API_RO_AFTER_INIT] = "ro_after_init",
	[KPATCH_TEST_API_RO_AFTER_INIT_FUNCS] = "ro_after_init_funcs",
	[KPATCH_TEST_API_STACK] = "stack",
	[KPATCH_TEST_API_STACK_FUNCS] = "stack_funcs",
	[KPATCH_TEST_API_KMALLOC] = "kmalloc",
	[KPATCH_TEST_API_VMALLOC] = "vmalloc",
};

/*
 * mem=const and mem=const_funcs: structures a patch module declared
 * const, as nothing in them seems to change.  The const struct points
 * to the module's ordinary funcs array, which the init fills in; the
 * const funcs array is used with the module's struct kpatch_module.
 */
static const struct kpatch_module kpatch_test_api_const_kpmod = {
	.mod = THIS_MODULE,
	.funcs = kpatch_test_api_funcs,
	.num_funcs = 1,
};

static const struct kpatch_func kpatch_test_api_const_funcs[] = {
	{
		.old_addr = (unsigned long)kpatch_test_value_a,
		.new_addr = (unsigned long)kpatch_test_api_value_a,
	},
};

/* mem=ro_after_init and mem=ro_after_init_funcs: filled in by the init */
static struct kpatch_module kpatch_test_api_roai_kpmod __ro_after_init;
static struct kpatch_func kpatch_test_api_roai_funcs[1] __ro_after_init;

/*
 * mem=...: register a patch of kpatch_test_value_a() from the structures
 * that WHERE names, and return what kpatch_register() returned; see the top of the
 * file.  The stack structures are this function's, on the stack of the
 * module's init.
 */
static int __init kpatch_test_api_mem(void)
{
	static struct kpatch_func funcs_before[1];
	static struct kpatch_module kpmod_before;
	struct kpatch_module *kpmod = &kpatch_test_api_kpmod;
	struct kpatch_func *funcs = kpatch_test_api_funcs;
	struct kpatch_module stack_kpmod = {};
	struct kpatch_func stack_funcs[1] = {};
	bool refuse = false, heap = false;
	int where, ret;

	where = match_string(kpatch_test_api_mems,
			     ARRAY_SIZE(kpatch_test_api_mems), mem);
	switch (where) {
	case KPATCH_TEST_API_CONST:
		kpmod = (struct kpatch_module *)&kpatch_test_api_const_kpmod;
		refuse = true;
		pr_info("mem=%s: a const struct kpatch_module\n", mem);
		break;
	case KPATCH_TEST_API_CONST_FUNCS:
		funcs = (struct kpatch_func *)kpatch_test_api_const_funcs;
		pr_info("mem=%s: a const funcs array\n", mem);
		break;
	case KPATCH_TEST_API_RO_AFTER_INIT:
		kpmod = &kpatch_test_api_roai_kpmod;
		refuse = true;
		pr_info("mem=%s: a struct kpatch_module in __ro_after_init\n",
			mem);
		break;
	case KPATCH_TEST_API_RO_AFTER_INIT_FUNCS:
		funcs = kpatch_test_api_roai_funcs;
		pr_info("mem=%s: a funcs array in __ro_after_init\n", mem);
		break;
	case KPATCH_TEST_API_STACK:
		kpmod = &stack_kpmod;
		refuse = true;
		pr_info("mem=%s: a struct kpatch_module on the init's stack\n",
			mem);
		break;
	case KPATCH_TEST_API_STACK_FUNCS:
		funcs = stack_funcs;
		pr_info("mem=%s: a funcs array on the init's stack\n", mem);
		break;
	case KPATCH_TEST_API_KMALLOC:
		kpmod = kzalloc(sizeof(*kpmod), GFP_KERNEL);
		funcs = kcalloc(1, sizeof(*funcs), GFP_KERNEL);
		heap = true;
		pr_info("mem=%s: struct kpatch_module and funcs array from kmalloc()\n",
			mem);
		break;
	case KPATCH_TEST_API_VMALLOC:
		kpmod = vzalloc(sizeof(*kpmod));
		funcs = vzalloc(sizeof(*funcs));
		heap = true;
		pr_info("mem=%s: struct kpatch_module and funcs array from vmalloc()\n",
			mem);
		break;
	default:
		pr_err("mem=%s: must be const, ro_after_init, stack, const_funcs, ro_after_init_funcs, stack_funcs, kmalloc or vmalloc\n",
		       mem);
		return -EINVAL;
	}
	if (heap && (!kpmod || !funcs)) {
		kvfree(kpmod);
		kvfree(funcs);
		return -ENOMEM;
	}

	/* Fill in what is writable now; the const structures are filled. */
	kpatch_test_api_funcs[0].old_addr = (unsigned long)kpatch_test_value_a;
	kpatch_test_api_funcs[0].new_addr = refuse ?
		(unsigned long)kpatch_test_value_b :
		(unsigned long)kpatch_test_api_value_a;
	if (where != KPATCH_TEST_API_CONST_FUNCS)
		funcs[0] = kpatch_test_api_funcs[0];
	if (where != KPATCH_TEST_API_CONST) {
		kpmod->mod = THIS_MODULE;
		kpmod->funcs = funcs;
		kpmod->num_funcs = 1;
	}

	memcpy(&kpmod_before, kpmod, sizeof(kpmod_before));
	memcpy(funcs_before, kpmod->funcs, sizeof(funcs_before));
	ret = kpatch_register(kpmod, false);
	if (!refuse) {
		if (ret) {
			pr_info("kpatch_register() failed: %d\n", ret);
			if (heap) {
				kvfree(kpmod);
				kvfree(funcs);
			}
			return ret;
		}
		kpatch_test_api_registered = kpmod;
		if (heap) {
			kpatch_test_api_heap_kpmod = kpmod;
			kpatch_test_api_heap_funcs = funcs;
		}
		return 0;
	}
	if (!ret) {
		/* Before the structures go away or become read-only. */
		pr_err("mem=%s: kpatch_register() accepted it; unregistering it before the init returns\n",
		       mem);
		ret = kpatch_unregister(kpmod);
		if (ret)
			pr_err("kpatch_unregister() failed: %d\n", ret);
		return 0;
	}
	if (!memcmp(&kpmod_before, kpmod, sizeof(kpmod_before)) &&
	    !memcmp(funcs_before, kpmod->funcs, sizeof(funcs_before)))
		pr_info("structures intact after failed register (err %d)\n",
			ret);
	else
		pr_err("structures changed after failed register (err %d)\n",
		       ret);
	return ret;
}

static int __init kpatch_test_api_init(void)
{
	struct kpatch_func *f = kpatch_test_api_funcs;
	struct kobject *kobj = NULL;
	int ret;

	if (check_intact)
		return kpatch_test_api_check_intact();
	if (*mem)
		return kpatch_test_api_mem();

	if (strcmp(which, "a") && strcmp(which, "b") && strcmp(which, "ab")) {
		pr_err("which=%s: must be a, b or ab\n", which);
		return -EINVAL;
	}

	if (strchr(which, 'a')) {
		f->old_addr = (unsigned long)kpatch_test_value_a;
		f->new_addr = (unsigned long)kpatch_test_api_value_a;
		f++;
	}
	if (strchr(which, 'b')) {
		f->old_addr = (unsigned long)kpatch_test_value_b;
		f->new_addr = (unsigned long)kpatch_test_api_value_b;
		f++;
	}
	kpatch_test_api_kpmod.num_funcs = f - kpatch_test_api_funcs;

	if (own_kobj) {
		kobj = kobject_create_and_add(THIS_MODULE->name,
					      kpatch_patches_kobj);
		if (!kobj)
			return -ENOMEM;
		pr_info("own_kobj=1: made its own directory patches/%s\n",
			THIS_MODULE->name);
		if (no_register) {
			pr_info("no_register=1: keeps it until it is removed\n");
			kpatch_test_api_kobj = kobj;
			return 0;
		}
	}

	ret = kpatch_register(&kpatch_test_api_kpmod, replace);
	if (ret) {
		pr_info("kpatch_register() failed: %d\n", ret);
		kobject_put(kobj);
		return ret;
	}
	/* kpatch must refuse a patch whose directory exists. */
	if (kobj) {
		pr_err("own_kobj=1: kpatch_register() succeeded, expected -EEXIST\n");
		kpatch_unregister(&kpatch_test_api_kpmod);
		kobject_put(kobj);
		return -EINVAL;
	}
	if (fail_init) {
		pr_info("fail_init=1: init fails after kpatch_register()\n");
		return -EINVAL;
	}
	return 0;
}

static void __exit kpatch_test_api_exit(void)
{
	int ret;

	kobject_put(kpatch_test_api_kobj);
	if (kpatch_test_api_registered->enabled) {
		ret = kpatch_unregister(kpatch_test_api_registered);
		if (ret) {
			/* kpatch still points to them: keep them */
			pr_err("kpatch_unregister() failed: %d\n", ret);
			return;
		}
	}
	kvfree(kpatch_test_api_heap_funcs);
	kvfree(kpatch_test_api_heap_kpmod);
}

module_init(kpatch_test_api_init);
module_exit(kpatch_test_api_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: patch module using kpatch_register()");
