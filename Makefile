# Thin wrapper over CMake presets. Everything a new user needs on a fresh
# Debian 12 machine:
#   make run    install dependencies if missing, build, start the main job
#   make test   install dependencies if missing, build, run every test
#   make bench  build and run the benchmarks (figures: docs/PERFORMANCE.md)
PRESET ?= release
BUILD  := build/$(PRESET)
JOBS   ?= $(shell nproc)

.PHONY: all deps configure build run test bench format format-check clean

all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake --preset $(PRESET) >/dev/null

build: configure
	@cmake --build --preset $(PRESET) -j $(JOBS)

# The main job: primcached with its embedded defaults (configs/primcached.json,
# configs/workloads/default.json); it prints the console URL and the token
# file, and stops cleanly on Ctrl-C.
run: build
	@exec $(BUILD)/services/primcached/primcached

test: build
	@ctest --preset $(PRESET) -j $(JOBS)

bench: build
	@scripts/run-benchmarks $(BUILD)

format:
	@git ls-files '*.cpp' '*.hpp' '*.h' | xargs clang-format-15 -i

format-check: deps
	@git ls-files '*.cpp' '*.hpp' '*.h' | xargs clang-format-15 --dry-run --Werror

clean:
	rm -rf build
