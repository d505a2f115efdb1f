# SPDX-License-Identifier: Apache-2.0
# faultline — build, install and test.
#
# `make` builds build/libfaultline.{a,so} and build/faultline; it never
# installs a package: a missing build package stops it with one line
# naming the package (build-deps).  `make check` installs missing Debian
# packages, build and test (as root: deps), builds, and runs every
# tests/*.c program and tests/install.sh under prove (TAP); `make
# check-loaded` runs them the same way with a spinning process per CPU
# beside them.
#
# What goes where (layers in docs/architecture.md):
#   libfaultline.{a,so}  src/{kernel,util,format,store,source,send,author,
#                        engine}:
#                        the library (layers in that order, bottom up),
#                        shipped; nothing else
#   libfldaemon.a        src/daemon (faultline serve, lazy-pages)
#   libflutil.a          src/{kernel,util}: what the daemon may take
#                        besides libfaultline's API (tests/structure.pl)
#   libflvmm.a           vmm/ (faultline vmm, the Firecracker-style client,
#                        hugetlb)
#   faultline            tools/ (the CLI, tools/bench/) + libflvmm.a,
#                        libfldaemon.a, libfaultline-internal.a
#   libflcli.a           tools/ but main.o, for tests (the nginx helper)
#   libfltest.a          testlib/: tests only (TAP, serve_util, tcg); no
#                        product object includes or links it
#
# Decision: the shipped libfaultline.a is one object, the library's objects
# prelinked (ld -r) with every global not in src/libfaultline.map made local
# (objcopy --keep-global-symbols), as the .so's version script does, so no
# internal name (uffd_fill, open_regular) can clash with a user's program;
# this needs no change to the sources.  The daemon, the CLI and the tests
# call internals: they link libfaultline-internal.a, the plain objects,
# which is never installed.  tests/symbols checks both artifacts with nm.

CC      ?= cc
PREFIX  ?= /usr/local
DESTDIR ?=
# Where libfaultline.{a,so} and pkgconfig/faultline.pc go; Debian's
# multiarch: LIBDIR=/usr/lib/x86_64-linux-gnu (gcc -print-multiarch).
LIBDIR  ?= $(PREFIX)/lib
# systemd looks in /usr/local/lib/systemd/system and /usr/lib/systemd/system;
# for another PREFIX: SYSTEMD_UNIT_DIR=/etc/systemd/system
SYSTEMD_UNIT_DIR ?= $(PREFIX)/lib/systemd/system
SYSTEMD_UNITS := faultline.socket faultline.service faultline@.socket \
		 faultline@.service
BUILD   ?= build
VERSION := $(shell sed -n 's/^\#define FL_VERSION[\t ]*"\(.*\)"/\1/p' include/faultline.h)
# The shared object's ABI: bumped when a public struct changes layout (1:
# fl_stats.pages_gone, fl_source_opts.note, FL_ENGINE_ADOPT in 0.2.0).
# 2 (0.3.0), meant as the last: fl_engine_opts, fl_source_opts and
# fl_region_desc end in reserved space (new fields take it, same size),
# fl_stats has its counters last and is copied by the caller's size,
# client_pid -1 became FL_ENGINE_CLIENT_REMOTE; from here options and
# counters are added without a bump (include/faultline.h says how).
SOVERSION := 2

# Decision: `make` (all, install, demo) never runs apt: a build host may
# be offline, or apt busy elsewhere (the dpkg lock held), and a build
# should not need root.  build-deps checks the build packages below and
# stops with one line per missing one ("faultline: missing json-c
# headers: apt install libjson-c-dev"); `make deps` and the check targets
# install them and the test packages, as root.
# The library's pkg-config modules, each with the Debian package that
# ships it (its headers and .pc): PC_LIBS is the link line and
# faultline.pc's Requires.private.
PC_DEPS  := json-c:libjson-c-dev libzstd:libzstd-dev libxxhash:libxxhash-dev \
	    libcurl:libcurl4-openssl-dev libprotobuf-c:libprotobuf-c-dev \
	    libcrypto:libssl-dev
PC_LIBS  := $(foreach d,$(PC_DEPS),$(firstword $(subst :, ,$(d))))
# Commands the build runs, each with its package (perl: the symbol list
# below, and `make demo`'s JSON::PP; prove, for the tests, is perl's too).
CMD_DEPS := pkg-config:pkg-config protoc-c:protobuf-c-compiler perl:perl
BUILD_PKGS := gcc make $(foreach d,$(PC_DEPS) $(CMD_DEPS),$(lastword $(subst :, ,$(d))))
# What the tests need beside the build (HTTP tests, netns, bench plot,
# killing a server inside a read).
TEST_PKGS := nginx-light iproute2 gnuplot-nox strace curl
# The s3:// tests' S3-compatible server (tests/s3/server.js): the npm
# package @20minutes/s3rver, its exact version and every dependency's
# pinned by tests/s3/package.json and package-lock.json, installed by
# deps with `npm ci` into S3RVER_DIR (never globally), from npm's cache
# when it has been fetched once (--prefer-offline); Node.js and npm from
# Debian where the machine has none.  Not for BUILD=build-san: the
# sanitized tests use this one.  Why this server: docs/object-storage.md.
S3RVER_DIR := build/s3rver
S3_PKGS   := nodejs npm
# apt-get that waits for another apt or dpkg (a second clone's make deps,
# unattended-upgrades) to let go of its locks instead of failing at once.
APT := apt-get -o DPkg::Lock::Timeout=600

DEB_PKGS  := $(BUILD_PKGS) $(TEST_PKGS)
# A real KVM where /dev/kvm is missing: QEMU's TCG, Debian's 6.1 kernel
# (extracted from its package, not installed) and a busybox initramfs
# (testlib/tcg.c).  Without recommends: qemu's would pull in a desktop.
TCG_PKGS  := qemu-system-x86 busybox-static xz-utils
# CRIU >= 4.1 for the CRIU tests, built from Debian's source where none is
# installed (tests/criu/get-criu.sh): its build packages, tests only.
CRIU_PKGS := libprotobuf-dev libnl-3-dev libnet1-dev libcap-dev uuid-dev \
	     libbsd-dev libnftables-dev libgnutls28-dev
# The metrics tests: promtool and a real Prometheus server (tests only).
MON_PKGS  := prometheus
# In CI (CI=true, or FL_REQUIRE_ALL=1; FL_REQUIRE_ALL=0 overrides CI) every
# component the tests use is required: `make deps` or `make criu` that
# cannot get one fails, naming it, and a test that would skip for want of
# one fails (testlib/tap.h, skip_missing).  Elsewhere they are skipped,
# said.  $(call missing,WHAT): that line, and the exit status it needs.
, := ,
REQUIRE_ALL := $(filter-out 0 false no,$(or $(FL_REQUIRE_ALL),$(CI)))
missing = { echo "faultline: $(1)$(if $(REQUIRE_ALL),: required in CI (CI=true or FL_REQUIRE_ALL=1),)"; $(if $(REQUIRE_ALL),exit 1,:); }
TCG_KMODS := arch/x86/kvm/kvm.ko arch/x86/kvm/kvm-amd.ko \
	     virt/lib/irqbypass.ko drivers/crypto/ccp/ccp.ko

CFLAGS  ?= -O2 -g
OBJCOPY ?= objcopy
# `make check-sanitize` builds everything again in build-san/ with these.
SANITIZE ?=
CFLAGS  += $(SANITIZE) -std=gnu11 -Wall -Wextra -Werror=implicit-function-declaration \
	   -fPIC -pthread -Iinclude -Isrc -I$(BUILD)/gen -MMD -MP
# The product (tools/, vmm/) sees the library's internals and itself, never
# testlib/; testlib/ and the tests see everything.
PRODUCT_CFLAGS := -Itools -Ivmm
TEST_CFLAGS    := -Itestlib $(PRODUCT_CFLAGS) -Itools/bench -Itests
# Expanded when a link runs, i.e. after build-deps has found pkg-config and
# the libraries.
PKG_LIBS = $(shell pkg-config --libs $(PC_LIBS) 2>/dev/null)
LDLIBS   = $(PKG_LIBS) -lpthread -lm

LIB_DIRS  := kernel util format store source send author engine
LIB_SRC   := $(sort $(wildcard $(LIB_DIRS:%=src/%/*.c)))
DAEMON_SRC := $(sort $(wildcard src/daemon/*.c))
TESTLIB_SRC := $(sort $(wildcard testlib/*.c))
VMM_SRC   := $(sort $(wildcard vmm/*.c))
CLI_SRC   := $(sort $(wildcard tools/*.c tools/bench/*.c))
TEST_SRC  := $(sort $(wildcard tests/*.c))
# CRIU's images (src/format/criu.c) through faultline's own .proto text,
# compiled by protoc-c into $(BUILD)/gen.
CRIU_PROTO := src/format/criu_images.proto
CRIU_PBC   := $(BUILD)/gen/criu_images.pb-c
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CRIU_PBC).o
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(BUILD)/%.o)
UTIL_OBJ  := $(filter $(BUILD)/src/kernel/% $(BUILD)/src/util/%,$(LIB_OBJ))
TESTLIB_OBJ := $(TESTLIB_SRC:%.c=$(BUILD)/%.o)
VMM_OBJ   := $(VMM_SRC:%.c=$(BUILD)/%.o) $(BUILD)/vmm/blob.o
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/%.o)
# The CLI's code but main(), for tests that reach it (the nginx helper).
CLILIB_OBJ := $(filter-out $(BUILD)/tools/main.o,$(CLI_OBJ))
# tests/soak*.c are make soak's, not make check's (their sizes: SOAK_*).
SOAK_BIN  := $(BUILD)/tests/soak $(BUILD)/tests/soak_criu
TEST_BIN  := $(filter-out $(SOAK_BIN),$(TEST_SRC:tests/%.c=$(BUILD)/tests/%))
# TAP scripts prove runs beside them, with the build directory in BUILD:
# install.sh installs into a temporary stage and builds a user's program
# against it through pkg-config (not under check-sanitize: it says why);
# text.sh checks that help, bench output and docs stand alone (no issue
# numbers, no paths outside the tree); docs.sh keeps the docs and
# `faultline help` in step (commands, options, the version shown).
TEST_SH   := tests/install.sh tests/text.sh tests/docs.sh tests/structure.pl
TEST_SH_ENV = BUILD=$(BUILD) MAKE="$(MAKE)"
# Concurrency tests run a second time with every CPU busy (tests/load.h).
LOAD_TESTS := serve_bad serve_stress engine_events engine_eexist engine_adaptive \
	      engine_client_exit engine_reset_state engine_reset engine_mem \
	      serve_reuse serve_takeover serve_layers serve_store vmm clones
# KVM tests run a third time inside QEMU's TCG with Debian's 6.1 kernel
# (what machines without /dev/kvm do), wherever they run.
TCG_TESTS := vmm

.PHONY: soak criu all build-deps deps check check-loaded check-reset check-sanitize check-tsan check-units tests demo install clean tcg-kernel
all: $(BUILD)/libfaultline.a $(BUILD)/libfaultline.so $(BUILD)/faultline \
     $(BUILD)/libflutil.a

# Are the build packages there?  An order-only prerequisite of every
# compile: never installs; stops the build with one line per missing
# package (pkg-config first: the modules are asked through it).
build-deps:
	@command -v $(firstword $(CC)) >/dev/null 2>&1 || \
		{ echo "faultline: missing C compiler $(CC): apt install gcc"; exit 1; }
	@command -v pkg-config >/dev/null 2>&1 || \
		{ echo "faultline: missing pkg-config: apt install pkg-config"; exit 1; }
	@fail=0; \
	for d in $(PC_DEPS); do \
		pkg-config --exists $${d%%:*} || { fail=1; \
		echo "faultline: missing $${d%%:*} headers: apt install $${d#*:}"; }; \
	done; \
	for d in $(CMD_DEPS); do \
		command -v $${d%%:*} >/dev/null 2>&1 || { fail=1; \
		echo "faultline: missing $${d%%:*}: apt install $${d#*:}"; }; \
	done; \
	exit $$fail

# Install build and test dependencies on a fresh Debian machine (as root;
# otherwise it says what to install): make check and its kin run it first.
deps:
	@missing=$$(for p in $(DEB_PKGS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
		grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing: $$missing"; \
			$(APT) update -qq && \
			DEBIAN_FRONTEND=noninteractive $(APT) install -y -qq $$missing >/dev/null; \
		else \
			echo "missing packages; run: sudo apt-get install -y $$missing"; exit 1; \
		fi; \
	fi
	@missing=$$(for p in $(TCG_PKGS) $(CRIU_PKGS) $(MON_PKGS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
		grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ]; then \
		echo "installing: $$missing"; \
		$(APT) update -qq && \
		DEBIAN_FRONTEND=noninteractive $(APT) install -y -qq \
			--no-install-recommends $$missing >/dev/null; \
	elif [ -n "$$missing" ]; then \
		$(call missing,KVM (without /dev/kvm)$(,) CRIU and metrics tests need: sudo apt-get install -y --no-install-recommends $$missing); \
	fi
	@if ! command -v node >/dev/null 2>&1 || \
	    ! command -v npm >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing: $(S3_PKGS)"; \
			$(APT) update -qq && DEBIAN_FRONTEND=noninteractive \
				$(APT) install -y -qq $(S3_PKGS) >/dev/null; \
		else \
			$(call missing,the s3:// tests need: sudo apt-get install -y $(S3_PKGS)); \
		fi; \
	fi
	@if command -v npm >/dev/null 2>&1 && \
	    ! cmp -s tests/s3/package-lock.json $(S3RVER_DIR)/installed.json; then \
		echo "installing the S3 test server into $(S3RVER_DIR)"; \
		rm -rf $(S3RVER_DIR) && mkdir -p $(S3RVER_DIR) && \
		cp tests/s3/package.json tests/s3/package-lock.json \
			$(S3RVER_DIR)/ && \
		(cd $(S3RVER_DIR) && npm ci --prefer-offline --no-audit \
			--no-fund --loglevel=error >/dev/null) && \
		cp tests/s3/package-lock.json $(S3RVER_DIR)/installed.json || \
		{ rm -rf $(S3RVER_DIR); \
		  $(call missing,no S3 test server (npm ci in $(S3RVER_DIR) failed): the s3:// tests $(if $(REQUIRE_ALL),cannot run,will be skipped)); }; \
	fi
	@command -v npm >/dev/null 2>&1 || [ -z "$(REQUIRE_ALL)" ] || \
		$(call missing,no npm: no S3 test server)

# The kernel and kvm modules for the TCG VM, from Debian's package, and
# the kernel decompressed (QEMU boots the ELF directly, 5 s sooner).
tcg-kernel: $(BUILD)/tcg/.done
$(BUILD)/tcg/.done: | deps
	rm -rf $(BUILD)/tcg && mkdir -p $(BUILD)/tcg
	[ "$$(id -u)" != 0 ] || $(APT) update -qq
	cd $(BUILD)/tcg && \
	pkg=$$(apt-cache depends linux-image-amd64 | \
	       sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$$/\1/p' | head -n1) && \
	$(APT) download -qq $$pkg && \
	dpkg-deb --fsys-tarfile $${pkg}_*.deb | tar -x --wildcards \
		'./boot/vmlinuz-*' $(TCG_KMODS:%='./lib/modules/*/kernel/%') && \
	rm -f $${pkg}_*.deb
	cd $(BUILD)/tcg/boot && for z in vmlinuz-*; do \
		off=$$(LC_ALL=C grep -abo -m1 "$$(printf '\3757zXZ')" $$z | \
		       head -n1 | cut -d: -f1); \
		tail -c +$$((off + 1)) $$z | xz -dc --single-stream \
			> vmlinux.tmp 2>/dev/null; \
		if [ "$$(head -c4 vmlinux.tmp | tail -c3)" = ELF ]; then \
			mv vmlinux.tmp vmlinux-$${z#vmlinuz-}; \
		else rm -f vmlinux.tmp; fi; \
	done
	touch $@

$(CRIU_PBC).c $(CRIU_PBC).h &: $(CRIU_PROTO) | build-deps
	@mkdir -p $(dir $@)
	protoc-c --proto_path=$(dir $<) --c_out=$(dir $@) $<
$(CRIU_PBC).o: $(CRIU_PBC).c
	$(CC) $(CFLAGS) -c -o $@ $<
$(BUILD)/src/format/criu.o: $(CRIU_PBC).h

$(BUILD)/src/%.o: src/%.c | build-deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/testlib/%.o: testlib/%.c | build-deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_CFLAGS) -c -o $@ $<

# The CLI and the VMM: product code, which cannot include testlib/.
$(BUILD)/%.o: %.c | build-deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PRODUCT_CFLAGS) -c -o $@ $<

# The map's global names, one a line (no wildcards in the map): comments
# out, then every word before a ';' between "global:" and "local:" or '}',
# each also as NAME@@NODE, the name a default version defined by .symver
# has in an object (fl_engine_create@@FAULTLINE_0.5), which a static link
# takes for NAME.
MAP_GLOBALS := s{/\*.*?\*/}{}gs; while (/([\w.]+)\s*\{\s*global:(.*?)(?:local:|\})/gs) { my ($$v, $$g) = ($$1, $$2); print "$$1\n$$1\@\@$$v\n" while $$g =~ /(\w+)\s*;/g }
$(BUILD)/libfaultline.syms: src/libfaultline.map
	@mkdir -p $(dir $@)
	perl -0777 -ne '$(MAP_GLOBALS)' $< > $@.tmp
	test -s $@.tmp && mv $@.tmp $@

# The shipped archive: one prelinked object, only the map's names global.
$(BUILD)/libfaultline.o: $(LIB_OBJ) $(BUILD)/libfaultline.syms
	$(LD) -r -o $@.tmp $(LIB_OBJ)
	$(OBJCOPY) --keep-global-symbols=$(BUILD)/libfaultline.syms $@.tmp $@
	rm -f $@.tmp

$(BUILD)/libfaultline.a: $(BUILD)/libfaultline.o
	rm -f $@ && ar rcs $@ $^

# The same objects as they are, for the daemon, the CLI and the tests.
$(BUILD)/libfaultline-internal.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libfldaemon.a: $(DAEMON_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libflutil.a: $(UTIL_OBJ)
	rm -f $@ && ar rcs $@ $^

# Only the public API (fl_*) is exported: src/libfaultline.map.
$(BUILD)/libfaultline.so: $(LIB_OBJ) src/libfaultline.map
	$(CC) -shared -Wl,-soname,libfaultline.so.$(SOVERSION) \
		-Wl,--version-script=src/libfaultline.map -o $@ $(LIB_OBJ) $(LDLIBS)

$(BUILD)/libfltest.a: $(TESTLIB_OBJ)
	rm -f $@ && ar rcs $@ $^

# The test VMM (vmm/): its guest is 32-bit code assembled by binutils and
# linked to run at GUEST_CODE, then carried as bytes by blob.S.
$(BUILD)/vmm/guest.bin: vmm/guest.S vmm/guest_abi.h | build-deps
	@mkdir -p $(dir $@)
	$(CC) -m32 -c -Ivmm -o $(BUILD)/vmm/guest32.o $<
	ld -m elf_i386 -Ttext=0x1000 -e _start --oformat binary \
		-o $@ $(BUILD)/vmm/guest32.o

$(BUILD)/vmm/blob.o: vmm/blob.S $(BUILD)/vmm/guest.bin
	$(CC) -c -DGUEST_BIN='"$(BUILD)/vmm/guest.bin"' -o $@ $<

$(BUILD)/libflvmm.a: $(VMM_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libflcli.a: $(CLILIB_OBJ)
	rm -f $@ && ar rcs $@ $^

# No testlib/ object: tests/symbols checks.
$(BUILD)/faultline: $(CLI_OBJ) $(BUILD)/libflvmm.a $(BUILD)/libfldaemon.a \
		    $(BUILD)/libfaultline-internal.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# Each tests/NAME.c is one TAP program; tests/tap.h and tests/*.h are shared.
# Archives in layer order: testlib uses vmm, the CLI uses vmm.
TEST_LIBS := $(BUILD)/libfltest.a $(BUILD)/libflcli.a $(BUILD)/libflvmm.a \
	     $(BUILD)/libfldaemon.a $(BUILD)/libfaultline-internal.a
$(BUILD)/tests/%: tests/%.c $(TEST_LIBS) \
		  $(wildcard tests/*.h testlib/*.h vmm/*.h tools/bench/*.h) | build-deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_CFLAGS) -o $@ $< $(TEST_LIBS) $(LDLIBS)

# This one links the shipped archive and reads the artifacts it checks.
$(BUILD)/tests/symbols: tests/symbols.c $(BUILD)/libfltest.a \
			$(BUILD)/libfaultline.a $(BUILD)/libfaultline.so \
			$(BUILD)/faultline | build-deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_CFLAGS) -o $@ $< $(BUILD)/libfltest.a \
		$(BUILD)/libfaultline.a $(LDLIBS)

# tests/abi calls the shared object's versions of fl_engine_create (dlvsym).
$(BUILD)/tests/abi: $(BUILD)/libfaultline.so

tests: $(TEST_BIN)

# The criu the CRIU tests run (tests/criu/get-criu.sh; cached in build/criu).
# Without one (offline, not Debian) those tests skip, saying so; in CI
# (REQUIRE_ALL) it fails here.
criu: deps
	@CRIU_DIR=$${CRIU_DIR:-build/criu} sh tests/criu/get-criu.sh >/dev/null || \
		$(call missing,no criu >= 4.1: the CRIU tests $(if $(REQUIRE_ALL),cannot run,will be skipped))

# Test programs run PROVE_JOBS at a time: most of a program's time is
# waiting (a daemon starting, a client's timeout, CRIU, nginx), and each
# must pass with the CPUs busy anyway; PROVE_JOBS=1 runs them one by one.
PROVE_JOBS ?= 3
PROVE := prove -f --timer -j$(PROVE_JOBS)

check: deps tcg-kernel criu
	$(MAKE) all $(TEST_BIN)
	$(TEST_SH_ENV) $(PROVE) $(TEST_BIN) $(TEST_SH)
	FL_LOAD=1 $(PROVE) $(LOAD_TESTS:%=$(BUILD)/tests/%)
	FL_FORCE_TCG=1 $(PROVE) $(TCG_TESTS:%=$(BUILD)/tests/%)

# The soak, with a spinning process per CPU beside it.  tests/soak.c:
# SOAK_SESSIONS Firecracker-style sessions through one `faultline serve`
# beside malformed clients (some handing over a real uffd); every byte
# right, no client hung, the daemon's descriptors back to their start,
# its RSS not growing.  tests/soak_criu.c: SOAK_CRIU_RESTORES restores of
# a SOAK_CRIU_TASKS-task tree (SOAK_CRIU_MIB each) by the real CRIU, each
# through a fresh `faultline lazy-pages`: exit 0, every page right, no
# descriptor left, its peak RSS bounded (SOAK_CRIU_HWM_MIB over the dump).
SOAK_SESSIONS ?= 10000
SOAK_CRIU_RESTORES ?= 20
SOAK_CRIU_TASKS ?= 4
SOAK_CRIU_MIB ?= 16
soak: all criu $(SOAK_BIN)
	SOAK_SESSIONS=$(SOAK_SESSIONS) SOAK_CRIU_RESTORES=$(SOAK_CRIU_RESTORES) \
	SOAK_CRIU_TASKS=$(SOAK_CRIU_TASKS) SOAK_CRIU_MIB=$(SOAK_CRIU_MIB) \
		sh tests/loaded.sh prove -v --timer $(SOAK_BIN)

# The whole suite as `check` runs it, with a spinning process per CPU
# beside it for the whole run (tests/loaded.sh): what it asserts must hold
# on a busy machine.
check-loaded: deps tcg-kernel criu
	$(MAKE) all $(TEST_BIN)
	$(TEST_SH_ENV) sh tests/loaded.sh $(PROVE) $(TEST_BIN) $(TEST_SH)
	FL_LOAD=1 sh tests/loaded.sh $(PROVE) $(LOAD_TESTS:%=$(BUILD)/tests/%)
	FL_FORCE_TCG=1 sh tests/loaded.sh $(PROVE) \
		$(TCG_TESTS:%=$(BUILD)/tests/%)
	$(MAKE) check-reset

# engine_reset's randomized case at 1,000 rounds (make check runs 200),
# with a spinning process per CPU beside it: check-loaded and CI run it.
RESET_ROUNDS ?= 1000
check-reset: $(BUILD)/tests/engine_reset
	FL_RESET_ROUNDS=$(RESET_ROUNDS) FL_CASE="random writers" \
		sh tests/loaded.sh prove -f --timer $(BUILD)/tests/engine_reset

# The whole suite built with AddressSanitizer and UndefinedBehaviorSanitizer
# (LeakSanitizer included) in build-san/, daemon and all.  Every process
# writes its reports to build-san/reports/ (a daemon's would be lost in its
# log otherwise), and any report fails the run.  The KVM tests run on this
# machine's KVM only (their TCG run is make check's).
SAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	     -fno-sanitize-recover=undefined
SAN_LOG   := $(CURDIR)/build-san/reports
SAN_ENV   := FAULTLINE_BIN=build-san/faultline FL_TCG_ROOT=$(BUILD)/tcg \
	     ASAN_OPTIONS=abort_on_error=1:detect_leaks=1:log_path=$(SAN_LOG)/asan \
	     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(SAN_LOG)/ubsan
check-sanitize: deps tcg-kernel criu
	$(MAKE) BUILD=build-san SANITIZE="$(SAN_FLAGS)" all tests
	rm -rf $(SAN_LOG) && mkdir -p $(SAN_LOG)
	$(SAN_ENV) prove -f --timer $(TEST_BIN:$(BUILD)/%=build-san/%)
	@$(call no_reports,$(SAN_LOG))

# The engine and daemon tests built with ThreadSanitizer in build-tsan/
# (the rest take minutes under it).  Thread "leaks" are not reported: a
# server hands its sessions over and exits with their threads running.
TSAN_TESTS := $(patsubst tests/%.c,%,$(wildcard tests/engine_*.c)) \
	      serve_basic serve_bad serve_reuse serve_layers serve_store
TSAN_LOG   := $(CURDIR)/build-tsan/reports
TSAN_ENV   := FAULTLINE_BIN=build-tsan/faultline \
	      TSAN_OPTIONS=report_thread_leaks=0:log_path=$(TSAN_LOG)/tsan
check-tsan: deps
	$(MAKE) BUILD=build-tsan SANITIZE="-O1 -g -fsanitize=thread" all tests
	rm -rf $(TSAN_LOG) && mkdir -p $(TSAN_LOG)
	$(TSAN_ENV) prove -f --timer $(TSAN_TESTS:%=build-tsan/tests/%)
	@$(call no_reports,$(TSAN_LOG))

# Fail, showing them, if a sanitized run left reports in $(1).
no_reports = if [ -n "$$(ls $(1))" ]; then head -n 60 $(1)/*; \
	echo "sanitizer reports in $(1)"; exit 1; fi

# The README's first command: restore a demo guest through faultline serve.
# Decision: no deps (no apt) here either: beside the build, the demo needs
# only perl's JSON::PP (package perl, a build package) and uses /dev/kvm
# where it works, threads where not.
demo: all
	@perl -MJSON::PP -e 1 2>/dev/null || \
		{ echo "faultline: missing perl's JSON::PP: apt install perl"; exit 1; }
	bash tools/demo.sh

# faultline.pc is relocatable: prefix and libdir are found from where the
# file lies (${pcfiledir}, pkg-config's own), so a staged install
# (DESTDIR) is compiled against through PKG_CONFIG_PATH alone, as is the
# tree moved anywhere: LIBDIR=PREFIX/lib gives prefix=${pcfiledir}/../..,
# multiarch PREFIX/lib/x86_64-linux-gnu ../../..; a LIBDIR outside PREFIX
# climbs to / and down to PREFIX (libdir is always ${pcfiledir}/..).
# Requires.private (not Libs.private flags): `pkg-config --static` then
# brings each dependency's own private libraries (libcurl's -lnghttp2 ...).
empty :=
space := $(empty) $(empty)
up_from    = $(subst $(space),/,$(patsubst %,..,$(subst /, ,$(1))))
LIBDIR_REL = $(patsubst $(PREFIX)/%,%,$(LIBDIR))
PC_PREFIX  = $${pcfiledir}/$(if $(filter /%,$(LIBDIR_REL)),$(call \
	     up_from,$(LIBDIR)/pkgconfig)$(PREFIX),$(call up_from,pkgconfig/$(LIBDIR_REL)))
PC_LIBDIR  = $(if $(filter /%,$(LIBDIR_REL)),$${pcfiledir}/..,$${prefix}/$(LIBDIR_REL))

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR) \
		$(DESTDIR)$(PREFIX)/include $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 755 $(BUILD)/faultline $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(BUILD)/libfaultline.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/libfaultline.so $(DESTDIR)$(LIBDIR)/libfaultline.so.$(SOVERSION)
	ln -sf libfaultline.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libfaultline.so
	install -m 644 include/faultline.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PC_PREFIX)|' -e 's|@LIBDIR@|$(PC_LIBDIR)|' \
		-e 's|@VERSION@|$(VERSION)|' -e 's|@REQUIRES@|$(PC_LIBS)|' \
		contrib/faultline.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/faultline.pc
	install -d $(DESTDIR)$(SYSTEMD_UNIT_DIR) $(DESTDIR)$(PREFIX)/share/faultline
	for u in $(SYSTEMD_UNITS); do \
		sed 's|/usr/local/bin/faultline|$(PREFIX)/bin/faultline|' contrib/$$u \
			> $(DESTDIR)$(SYSTEMD_UNIT_DIR)/$$u && \
		chmod 644 $(DESTDIR)$(SYSTEMD_UNIT_DIR)/$$u || exit 1; \
	done
	install -m 644 contrib/faultline-network.conf $(DESTDIR)$(PREFIX)/share/faultline/
	@# No rpath anywhere: a real install updates ld.so's cache; a staged
	@# one (DESTDIR) is the packager's (or LD_LIBRARY_PATH's) to find.
	if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig; fi

# The systemd units: systemd-analyze verify, the same hardening in both
# services, and their exposure (docs/systemd.md).
check-units: all
	sh contrib/check-units.sh $(BUILD)/faultline

clean:
	rm -rf $(BUILD) build-san build-tsan

# libFuzzer harnesses: make fuzz [FUZZ_SECONDS=N] (fuzz/fuzz.mk).
include fuzz/fuzz.mk

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
