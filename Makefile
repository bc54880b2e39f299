# SPDX-License-Identifier: GPL-2.0-or-later
#
# make                  build kpatch.ko for the running kernel
# make KDIR=<dir>       build it against another kernel's build directory
# make KVER=<version>   the same, for /lib/modules/<version>/build
# make install          install kpatch.ko into /lib/modules/<version>/extra,
#                       and what a patch module builds against: kpatch.h
#                       into /usr/src/kpatch-<kpatch version>/ and
#                       kpatch.ko's Module.symvers into its <version>/
# make install DESTDIR=<dir>  the same under <dir> (a staging root; no depmod)
# make uninstall        remove them again (KVER=, DESTDIR= as for install)
# make demo             show a live patch in a VM (sets up what it needs: the
#                       tools it runs, and only the demo's kernel)
# make testbed          set up the test bed: the tools it runs into the host,
#                       and into its cache the kernels, headers and the debug
#                       kernel; check, lint and bench do it first
# make testbed-purge    remove the test bed's cache and the packages it
#                       installed into the host (README.md, "Run the tests")
# make check            run the whole test suite in VMs on every test kernel
# make check-quick      the edit-test loop: build, and QUICK_TESTS on the
#                       demo's kernel only, no lockdown boot (README.md,
#                       "Run the tests")
# make lint             review gates: checkpatch, sparse, W=1, shellcheck
# make bench            measure kpatch under icount in VMs on the three generic
#                       Debian kernels (and, first, model its redirects on
#                       the host's CPU)
# make clean

# With KDIR, the release its modules are built for (what vermagic says).
# Not include/config/kernel.release: Debian 12's 6.1 headers have
# "6.1.192" there for 6.1.0-57-amd64.
ifdef KDIR
KVER ?= $(shell sed -n 's/.*UTS_RELEASE "\(.*\)"/\1/p' \
		$(KDIR)/include/generated/utsrelease.h)
else
KVER ?= $(shell uname -r)
KDIR := /lib/modules/$(KVER)/build
endif

# Sign on install only when the kernel's signing key is there (distribution
# headers ship without it).
MODSIGN ?= $(if $(wildcard $(KDIR)/certs/signing_key.pem \
			   $(KDIR)/output/signing_key.pem),,CONFIG_MODULE_SIG_ALL=)

# The kpatch version, from kpatch.c, and where patch modules find kpatch.h
# and, per kernel, kpatch.ko's Module.symvers (Documentation.txt, "Writing
# a patch module").  DKMS's builds install them there too (dkms.conf).
VERSION := $(shell sed -n 's/^MODULE_VERSION("\(.*\)");$$/\1/p' kpatch.c)
DEVDIR ?= /usr/src/kpatch-$(VERSION)
# INSTALL_MOD_PATH, the kernel's name for it, works as well.
DESTDIR ?= $(INSTALL_MOD_PATH)

all: modules

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

install: modules install-devel
	$(MAKE) -C $(KDIR) M=$(CURDIR) INSTALL_MOD_DIR=extra $(MODSIGN) \
		INSTALL_MOD_PATH=$(DESTDIR) modules_install
	$(if $(DESTDIR),,depmod -a $(KVER))

# kpatch.h and this build's Module.symvers, for patch modules (DKMS runs
# this after its build, see dkms.conf)
install-devel: modules
	install -D -m 644 kpatch.h $(DESTDIR)$(DEVDIR)/kpatch.h
	install -D -m 644 Module.symvers $(DESTDIR)$(DEVDIR)/$(KVER)/Module.symvers

# kpatch.h stays while anything else is left in its directory: another
# kernel's Module.symvers, or the DKMS source tree that is also there.
uninstall:
	rm -f $(DESTDIR)/lib/modules/$(KVER)/extra/kpatch.ko*
	rm -f $(DESTDIR)$(DEVDIR)/$(KVER)/Module.symvers
	rmdir $(DESTDIR)$(DEVDIR)/$(KVER) 2>/dev/null || true
	if [ "$$(ls -A $(DESTDIR)$(DEVDIR) 2>/dev/null)" = kpatch.h ]; then \
		rm -f $(DESTDIR)$(DEVDIR)/kpatch.h && \
		rmdir $(DESTDIR)$(DEVDIR); \
	fi
	$(if $(DESTDIR),,depmod -a $(KVER))

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean

demo:
	selftests/harness/testbed.sh setup --demo
	selftests/harness/testbed.sh demo

# The test bed: the host's packages, and its cache: kernels, headers, the
# debug kernel.  check, lint and bench need it; `make -j2 lint check`
# (.ci/run) sets it up once, then runs the two side by side.
testbed:
	selftests/harness/testbed.sh setup

testbed-purge:
	selftests/harness/testbed.sh purge

check: testbed
	selftests/harness/testbed.sh run

# The fastest scripts that cover the core: the module API, the redirect's
# ftrace sites, every refused command, replace, stacking, the stack
# check's waits and busy functions.  Override to choose others:
# make check-quick QUICK_TESTS='api nmi'.
QUICK_TESTS ?= 00-taint api busy errors replace sites stacking waiting

check-quick:
	selftests/harness/testbed.sh setup --demo
	KPATCH_TESTS='$(QUICK_TESTS)' selftests/harness/testbed.sh run demo

lint: testbed
	selftests/harness/lint.sh

bench: testbed
	selftests/harness/testbed.sh bench

.PHONY: all modules install install-devel uninstall clean demo testbed \
	testbed-purge check check-quick lint bench
