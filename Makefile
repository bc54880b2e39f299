# SPDX-License-Identifier: GPL-2.0-or-later
#
# make                  build kpatch.ko for the running kernel
# make KDIR=<dir>       build it against another kernel's build directory
# make KVER=<version>   the same, for /lib/modules/<version>/build
# make install          install kpatch.ko into /lib/modules/<version>/extra
# make uninstall        remove it again
# make demo             show a live patch in a VM (installs what it needs:
#                       only the demo's kernel)
# make check            run the whole test suite in VMs on every test kernel
# make lint             review gates: checkpatch, sparse, W=1, shellcheck
# make bench            measure kpatch under icount in VMs on every test kernel
# make clean

ifdef KDIR
KVER ?= $(shell cat $(KDIR)/include/config/kernel.release)
else
KVER ?= $(shell uname -r)
KDIR := /lib/modules/$(KVER)/build
endif

# Sign on install only when the kernel's signing key is there (distribution
# headers ship without it).
MODSIGN ?= $(if $(wildcard $(KDIR)/certs/signing_key.pem \
			   $(KDIR)/output/signing_key.pem),,CONFIG_MODULE_SIG_ALL=)

all: modules

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

install: modules
	$(MAKE) -C $(KDIR) M=$(CURDIR) INSTALL_MOD_DIR=extra $(MODSIGN) \
		modules_install
	depmod -a $(KVER)

uninstall:
	rm -f /lib/modules/$(KVER)/extra/kpatch.ko*
	depmod -a $(KVER)

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean

demo:
	selftests/testbed.sh setup --demo
	selftests/testbed.sh demo

check:
	selftests/testbed.sh setup
	selftests/testbed.sh run

lint:
	selftests/testbed.sh setup
	selftests/lint.sh

bench:
	selftests/testbed.sh setup
	selftests/testbed.sh bench

.PHONY: all modules install uninstall clean demo check lint bench
