# SPDX-License-Identifier: GPL-2.0-or-later
#
# make                  build kpatch.ko for the running kernel
# make KDIR=<dir>       build it against another kernel's build directory
# make demo             show a live patch in a VM (installs what it needs)
# make check            run the whole test suite in VMs on every test kernel
# make clean

KVER ?= $(shell uname -r)
KDIR ?= /lib/modules/$(KVER)/build

all: modules

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean

demo:
	selftests/testbed.sh setup
	selftests/testbed.sh demo

check:
	selftests/testbed.sh setup
	selftests/testbed.sh run

.PHONY: all modules clean demo check
