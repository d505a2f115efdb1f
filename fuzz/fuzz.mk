# SPDX-License-Identifier: Apache-2.0
# fuzz/fuzz.mk - libFuzzer harnesses (fuzz/fuzz_NAME.c), included by the
# Makefile after its variables.
#
# `make fuzz-build` builds build/fuzz/fuzz_NAME; `make fuzz FUZZ_SECONDS=N`
# (default 60) runs each for N seconds over build/fuzz/corpus-NAME, a copy
# of its seeds in fuzz/corpus/NAME (the repository keeps only the seeds),
# and fails if an input crashes, leaks, hangs (-timeout) or runs out of
# memory; that input is left as build/fuzz/NAME-crash-* (or -leak-,
# -timeout-, -oom-), the run's log as build/fuzz/NAME.log.  `make
# fuzz-NAME` runs one harness; `make -j2 fuzz` two at a time.
#
# Decision: the library and the daemon are compiled a second time, with
# clang, into build/fuzz/ (-fsanitize=fuzzer-no-link,address,undefined,
# every UBSan report fatal) and archived there as plain objects (harnesses
# reach internals: nothing is localized), so that a harness that includes a
# .c to reach its static functions (send.c, http_xfer.c, http.c) makes the
# linker leave that member out instead of clashing with it.

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_FLAGS   ?= -timeout=10 -rss_limit_mb=2048 -close_fd_mask=2 \
		-print_final_stats=1
FUZZ_PKGS    := clang libclang-rt-14-dev
FUZZ_BUILD   := $(BUILD)/fuzz
FUZZ_CFLAGS  := -O1 -g -fno-omit-frame-pointer -std=gnu11 -Wall -Wextra \
		-pthread -Iinclude -Isrc -I$(BUILD)/gen -MMD -MP \
		-fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_NAMES   := $(patsubst fuzz/fuzz_%.c,%,$(sort $(wildcard fuzz/fuzz_*.c)))
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o) $(FUZZ_BUILD)/gen/criu_images.pb-c.o \
		$(DAEMON_SRC:%.c=$(FUZZ_BUILD)/%.o)

.PHONY: fuzz fuzz-build fuzz-deps $(FUZZ_NAMES:%=fuzz-%)

fuzz-build: $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz_%)
fuzz: $(FUZZ_NAMES:%=fuzz-%)

# clang and its libFuzzer runtime, as deps installs the rest.
fuzz-deps:
	@missing=$$(for p in $(FUZZ_PKGS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
		grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ]; then \
		echo "installing: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq $$missing >/dev/null; \
	elif [ -n "$$missing" ]; then \
		echo "fuzzing needs: sudo apt-get install -y $$missing"; \
		exit 1; \
	fi

$(FUZZ_BUILD)/src/%.o: src/%.c | deps fuzz-deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

# CRIU's images: the protoc-c output the main build generates.
$(FUZZ_BUILD)/gen/criu_images.pb-c.o: $(CRIU_PBC).c | fuzz-deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<
$(FUZZ_BUILD)/src/format/criu.o: $(CRIU_PBC).h

$(FUZZ_BUILD)/libfaultline.a: $(FUZZ_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c $(FUZZ_BUILD)/libfaultline.a | fuzz-deps
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< \
		$(FUZZ_BUILD)/libfaultline.a $(LDLIBS)

$(FUZZ_NAMES:%=fuzz-%): fuzz-%: $(FUZZ_BUILD)/fuzz_%
	@mkdir -p $(FUZZ_BUILD)/corpus-$*
	@cp fuzz/corpus/$*/* $(FUZZ_BUILD)/corpus-$*/
	@echo "fuzz $*: $(FUZZ_SECONDS) s"
	@$(FUZZ_BUILD)/fuzz_$* $(FUZZ_FLAGS) -max_total_time=$(FUZZ_SECONDS) \
		-artifact_prefix=$(FUZZ_BUILD)/$*- $(FUZZ_BUILD)/corpus-$* \
		> $(FUZZ_BUILD)/$*.log 2>&1 || \
		{ tail -n 40 $(FUZZ_BUILD)/$*.log; \
		  echo "fuzz $*: FAILED, input in $(FUZZ_BUILD)/$*-*"; exit 1; }
	@sed -n 's/^#[0-9]*[[:space:]]*DONE */fuzz $*: /p' $(FUZZ_BUILD)/$*.log
