# b10x-harness. `make test` is the test command CI runs (.ci/run); it must
# fail when anything fails. `make demo` is the main job on a fresh machine.

export CGO_ENABLED := 0
GO ?= go
BIN := bin/b10x-harness

# The run helper as a small program of its own, embedded into every binary
# built after it (the harness, test binaries, the VM's test binaries); see
# confine/spawn/internal/helperimage/bin/README.md and decision 0043.
HELPER_ARCH := $(shell $(GO) env GOARCH)
HELPER := confine/spawn/internal/helperimage/bin/helper-$(HELPER_ARCH)

.PHONY: all build helper test hosttest lint vmtest vmtest-ci demo demo-calls bench bench-spawn clean

all: build

helper:
	$(GO) build -trimpath -ldflags='-s -w' -o $(HELPER) ./confine/spawn/internal/helperbin
	$(GO) run ./confine/spawn/internal/helperimage/sum > $(HELPER).sum.tmp
	mv $(HELPER).sum.tmp $(HELPER).sum

build: helper
	$(GO) build -o $(BIN) ./cmd/b10x-harness

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

hosttest: lint build
	@./$(BIN) doctor | grep -q '^run helper: *embedded helper image' || { echo "make: $(BIN) does not use its embedded helper image:"; ./$(BIN) doctor | grep '^run helper'; exit 1; }
	$(GO) test -count=1 ./...

test: hosttest vmtest-ci

# vmtest boots the VM shapes (see vmtest/README.md); it installs qemu and
# fetches Debian's kernel itself when they are missing. -selftest first
# proves on a guest of known outcomes that a failing shape would be caught.
vmtest: helper
	$(GO) run ./vmtest -selftest -shapes all

# vmtest-ci is what `make test` (and so CI) runs: every VM shape
# (debian-6.1, no-landlock, no-userns, cgroup-v1) with every package that
# has kernel-facing tests. The host shape is `hosttest`.
VM_CI_SHAPES := debian-6.1,no-landlock,no-userns,cgroup-v1
VM_CI_PKGS := ./confine/...,./cgroup/...,./gate/...,./surface/...,./tools/...,./agent/...,./cmd/...
vmtest-ci: helper
	$(GO) run ./vmtest -selftest -shapes $(VM_CI_SHAPES) -pkgs $(VM_CI_PKGS)

demo: build
	./scripts/demo-run.sh

demo-calls: build
	./scripts/demo.sh

bench: build
	./bench/search.sh

bench-spawn: build
	./bench/spawn.sh

clean:
	rm -rf bin $(HELPER) $(HELPER).sum
