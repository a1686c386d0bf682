# The two commands that set up a fresh Debian machine with Swift:
#   make run    installs what is missing, builds in release mode, serves config.json's address
#   make test   installs what is missing and runs every test (Swift unit and integration, browser)
export PATH := /opt/swift/usr/bin:$(PATH)
SWIFT_BUILD_FLAGS ?=

.PHONY: run test build release example test-swift test-browser test-sanitize bench bench-publish clean

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
	$(MAKE) test-swift test-browser

# Examples/etl is a user's package that depends on this one by path, built in its own .build;
# ExampleTests runs its executables against a real server and fails when they were not built.
example: build
	swift build --package-path Examples/etl $(SWIFT_BUILD_FLAGS)

test-swift: build example
	swift build --build-tests $(SWIFT_BUILD_FLAGS)
	swift test --skip-build
	# The server's tests again on one service thread (the run above used one per core).
	RINGCAST_TEST_THREADS=1 swift test --skip-build --filter 'RingcastTests|RingcastClientTests'

test-browser: build
	RINGCAST_BIN=.build/debug/ringcast SE_OFFLINE=true python3 -m pytest -q Tests/browser

# The Swift tests again under AddressSanitizer (with LeakSanitizer) and ThreadSanitizer, each built
# in a directory of its own (.build/asan, .build/tsan), the `ringcast` servers they start included.
# What they skip and suppress, and why: Tests/sanitizers/. About 4 + 4 minutes from clean on 2 cores.
test-sanitize:
	scripts/deps.sh test
	SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)" Tests/sanitizers/run address
	SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)" Tests/sanitizers/run thread

# Publish throughput beside the raw libwebsockets reference server (release builds; about 1.5 min).
bench-publish:
	scripts/deps.sh build
	Benchmarks/publish.sh

# Ringcast beside the raw libwebsockets reference under the same `ringcast load` scenarios; writes
# Benchmarks/RESULTS.md (about 10 minutes; Benchmarks/run --quick for about 1).
bench:
	scripts/deps.sh build
	Benchmarks/run

clean:
	rm -rf .build Examples/etl/.build
