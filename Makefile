# ptwatch: two commands on a fresh Debian 12 machine.
#   make demo    install what is missing, build, trace the demo program
#   make check   the same, then the whole test suite
# The build itself is meson's (build/); this file only drives it.

BUILD ?= build
MESON_OPTS ?= -Dwerror=true

.PHONY: all deps build demo check check-asan bench clean

all: build

deps:
	@scripts/deps.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

demo: build
	$(BUILD)/ptwatch -- $(BUILD)/examples/demo

check: build
	meson test -C $(BUILD) --print-errorlogs

# The unit tests under AddressSanitizer and UBSan (fixtures never are), and
# the integration cases that take ptwatch through its endings and snapshots
# (a use-after-free in letting go was found this way).
ASAN_CASES = kill9-front kill9-tracer end-churner attach-churner attach-pipe-closed \
	attach-zombie-leader snapshot-sleepers snapshot-sleepers-mixed snapshot-deleted \
	snapshot-deadlock snapshot-running
check-asan: deps
	@[ -f build-asan/build.ninja ] || meson setup build-asan $(MESON_OPTS) -Db_sanitize=address,undefined -Db_lundef=false
	ninja -C build-asan
	meson test -C build-asan --suite unit --print-errorlogs
	meson test -C build-asan --print-errorlogs $(ASAN_CASES)

bench: deps
	@scripts/deps.sh bench
	$(MAKE) build
	bench/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) build-asan
