# Thin front door over meson + ninja. Everything real lives in meson.build,
# tests/ and bench/.
BUILD ?= build
PYTHON ?= python3
FUZZ_SECONDS ?= 60

.PHONY: all deps check test unit e2e demo bench fuzz asan clean install uninstall

all: $(BUILD)/build.ninja
	ninja -C $(BUILD)

$(BUILD)/build.ninja:
	meson setup $(BUILD)

# Installs what a fresh Debian bookworm machine lacks (apt-get, needs root).
deps:
	bash scripts/install-deps.sh

unit: all
	meson test -C $(BUILD) --print-errorlogs

e2e: all
	$(PYTHON) -m pytest -q tests/e2e

# The fast tier for the edit loop (a few minutes): the unit tests, then the
# end-to-end tests but those pytest.ini marks slow or install and the runs
# on engines other than uring. `make test` runs everything.
check: all
	meson test -C $(BUILD) --print-errorlogs
	PASTE_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -m "not slow and not install and not engine_matrix" tests/e2e

# The README's test command: deps, build, unit tests, the sanitizer build
# (unit tests, then the end-to-end suite against its servers), a short run
# of every fuzzer, and the end-to-end tests.
test: deps
	$(MAKE) all
	meson test -C $(BUILD) --print-errorlogs
	$(MAKE) asan
	$(MAKE) fuzz FUZZ_SECONDS=10
	$(PYTHON) -m pytest -q tests/e2e

# AddressSanitizer + UndefinedBehaviorSanitizer build: the unit tests, then
# the end-to-end suite against its servers (leaks at exit fail the run).
asan:
	[ -f build-asan/build.ninja ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false
	ninja -C build-asan
	meson test -C build-asan --print-errorlogs
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 PASTE_BUILD=$(CURDIR)/build-asan $(PYTHON) -m pytest -q tests/e2e

demo: deps
	$(MAKE) all
	$(PYTHON) bench/demo.py

bench: all
	$(PYTHON) bench/rpc.py
	$(PYTHON) bench/wal.py

fuzz:
	[ -f build-fuzz/build.ninja ] || CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false
	ninja -C build-fuzz
	bash fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) build-asan build-fuzz

# As liburing: `make install PREFIX=/usr DESTDIR=/tmp/stage` (PREFIX: the
# build's prefix, /usr/local unless set; DESTDIR: a staging root, empty
# for the real one) installs libpaste.so.0 + libpaste.a, paste.h, paste.pc,
# phttpd, pkvs, paste-store, the man pages (1, 3, 7), sample config files
# and, where systemd is, its units. README, "Installing".
PREFIX ?=
DESTDIR ?=
install: all
	$(if $(PREFIX),meson configure $(BUILD) -Dprefix=$(PREFIX) && ninja -C $(BUILD))
	meson install -C $(BUILD) --no-rebuild $(if $(DESTDIR),--destdir $(DESTDIR))

# Removes what the last `make install` from $(BUILD) installed (meson's
# install log).
uninstall:
	ninja -C $(BUILD) uninstall
