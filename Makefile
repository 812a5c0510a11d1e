# ptwatch: two commands on a fresh Debian 12 machine.
#   make demo    install what is missing, build, trace the demo program
#   make check   the same, then the whole test suite
# The build itself is meson's (build/); this file only drives it.

BUILD ?= build
MESON_OPTS ?= -Dwerror=true

.PHONY: all deps build demo check check-asan fuzz bench clean

all: build

deps:
	@scripts/deps.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

demo: build
	$(BUILD)/ptwatch -- $(BUILD)/examples/demo

# (with the short seeded run of the report reader's fuzz target, 'fuzz-load',
# where clang links libFuzzer: tests/fuzz)
# (then the tests that did not run here, and why: scripts/test-skips.py;
# with PTW_NO_SKIPS=1, as .ci/run sets, a skip fails the check)
check: build
	meson test -C $(BUILD) --print-errorlogs
	@scripts/test-skips.py $(BUILD)

# The unit tests under AddressSanitizer and UBSan (fixtures never are), and
# the integration cases that take ptwatch through its endings and snapshots
# (a use-after-free in letting go was found this way) and a recording
# replayed in the live table (qsort of no rows from NULL was found so).
ASAN_CASES = kill9-front kill9-tracer end-churner attach-churner attach-pipe-closed live-report \
	attach-zombie-leader snapshot-sleepers snapshot-sleepers-mixed snapshot-deleted \
	snapshot-deadlock snapshot-running report-errors report-document report-snapshot \
	report-rule-lifecycle report-rule-trace report-rule-locks report-rule-follow \
	report-rule-open-timeout report-rule-snapshot report-rule-tracer-killed report-hostile \
	report-lost-output frames-cxx@kernel frames-tail-return@kernel frames-sig-pingpong@kernel \
	frames-cxx-land frames-recursion@kernel pipe-end@kernel ctrlc-late-copy@kernel \
	follow-foreign@kernel kernel-follow-late-workers kernel-follow-sh kernel-follow-late-sh \
	attach-zombie-leader@kernel kernel-attach-listed-late-churner locks-under-way locks-under-way@kernel \
	kernel-locks-formed-deadlock locks-under-way-follow@kernel kernel-locks-fork-held \
	follow-locks-fork-held@kernel snapshot-deadlock-no-debug-files@kernel fork-shared@kernel \
	kernel-snapshot-past-uretprobes kernel-frames-follow-gap fork-kinds fork-kinds@kernel \
	test_kframes_convert kernel-locks-formed-woken kernel-locks-fork-held-woken frames-spin \
	frames-spin@kernel frames-lib-late@kernel frames-starts frames-starts@kernel
check-asan: deps
	@[ -f build-asan/build.ninja ] || meson setup build-asan $(MESON_OPTS) -Db_sanitize=address,undefined -Db_lundef=false
	ninja -C build-asan
	meson test -C build-asan --suite unit --print-errorlogs
	@scripts/test-skips.py build-asan
	meson test -C build-asan --print-errorlogs $(ASAN_CASES)
	@scripts/test-skips.py build-asan

# The report reader's fuzz target for as long as you like (FUZZ_TIME seconds,
# default an hour): new inputs in build/fuzz-long/new, crashes and leaks as
# build/fuzz-long/crash-*, leak-*, timeout-*, oom-*.
FUZZ_TIME ?= 3600
fuzz: build
	@[ -x $(BUILD)/tests/fuzz/fuzz_load ] || { echo "ptwatch: no fuzz target (clang with libFuzzer: scripts/deps.sh)" >&2; exit 1; }
	mkdir -p $(BUILD)/fuzz-long/new
	ASAN_OPTIONS=detect_leaks=1 $(BUILD)/tests/fuzz/fuzz_load -max_total_time=$(FUZZ_TIME) \
		-timeout=10 -rss_limit_mb=2048 -error_exitcode=1 -timeout_exitcode=1 \
		-print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz-long/ \
		$(BUILD)/fuzz-long/new tests/fuzz/corpus

bench: deps
	@scripts/deps.sh bench
	$(MAKE) build
	bench/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) build-asan
