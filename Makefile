# b10x-harness. `make test` is the test command CI runs (.ci/run); it must
# fail when anything fails. `make demo` is the main job on a fresh machine.

export CGO_ENABLED := 0
GO ?= go
BIN := bin/b10x-harness

# The run helper as a small program of its own (decision 0043): built first,
# embedded into every binary built after it, and used only by binaries whose
# link stamps in its SHA-256 (HELPER_LDFLAGS): the harness, the host test
# binaries, the VM's test binaries. A binary built without make re-executes
# itself as the helper instead.
HELPER_ARCH := $(shell $(GO) env GOARCH)
HELPER := confine/spawn/internal/helperimage/bin/helper-$(HELPER_ARCH)
HELPER_LDFLAGS = -X=github.com/b10x/harness/confine/spawn/internal/helperimage.stamp=$(shell sha256sum $(HELPER) | cut -d' ' -f1)

.PHONY: all build build-debug install man helper helper-ldflags test hosttest lint lint-unsafe vmtest vmtest-ci k8stest mutate demo demo-calls bench bench-spawn clean
.PHONY: image containertest

all: build

helper:
	$(GO) build -trimpath -ldflags='-s -w' -o $(HELPER) ./confine/spawn/internal/helperbin

# helper-ldflags prints the linker flags that stamp the image in, for
# scripts that build test binaries themselves (bench/spawn.sh).
helper-ldflags: helper
	@echo '$(HELPER_LDFLAGS)'

# build makes the release binary: without the symbol table and DWARF
# (-s -w) and without build paths (-trimpath), 21.5 MB -> 15.4 MB (decision
# 0066; 106 MB -> 74 MB while the provider SDKs were linked, decision 0068). Nothing reads the binary's symbols: the helper image is found
# through its embed and its -X stamp, both kept by -s -w; panics still
# print function names and lines (from the runtime's own tables).
# build-debug makes the same binary with symbols and DWARF, for a debugger
# or perf; it writes the same path.
build: helper
	$(GO) build -trimpath -ldflags='-s -w $(HELPER_LDFLAGS)' -o $(BIN) ./cmd/b10x-harness

build-debug: helper
	$(GO) build -ldflags='$(HELPER_LDFLAGS)' -o $(BIN) ./cmd/b10x-harness

# man writes the manual page, section 1, which the binary makes from its
# own commands and flags (the hidden `b10x-harness man`).
MAN := bin/b10x-harness.1
man: build
	./$(BIN) man > $(MAN).tmp || { rm -f $(MAN).tmp; exit 1; }
	mv $(MAN).tmp $(MAN)

# install copies the release binary (with its embedded helper image) to
# $(PREFIX)/bin and its manual page to $(PREFIX)/share/man/man1, as root
# typically PREFIX=/usr/local.
PREFIX ?= /usr/local
install: build man
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/b10x-harness
	install -D -m 0644 $(MAN) $(DESTDIR)$(PREFIX)/share/man/man1/b10x-harness.1

# lint runs go vet, go mod tidy -diff, gofmt, lint-unsafe and
# staticcheck's default checks. staticcheck is pinned (decision 0084) and
# is not a dependency of the module: `go install` builds it once into
# .cache/tools (ignored), in a directory named by its version and the Go
# that built it, so a new pin or a new Go builds it again.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := .cache/tools/staticcheck-$(STATICCHECK_VERSION)-$(shell $(GO) env GOVERSION)/staticcheck

$(STATICCHECK):
	GOBIN=$(CURDIR)/$(@D) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# lint-unsafe fails when a Go file that is not a test imports "unsafe" and
# its name does not end in _unsafe.go: every pointer handed to the kernel
# is in a small file named for it (decision 0086). UNSAFE_IMPORT matches
# the import alone, in a block, or renamed.
UNSAFE_IMPORT := ^[[:space:]]*(import[[:space:]]+)?([_.[:alnum:]]+[[:space:]]+)?"unsafe"[[:space:]]*(//.*)?$$

lint: $(STATICCHECK) lint-unsafe
	$(GO) vet ./...
	$(GO) mod tidy -diff
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(STATICCHECK) ./...

lint-unsafe:
	@out=$$(git ls-files '*.go' ':!:*_test.go' ':!:*_unsafe.go' | xargs -r grep -lE '$(UNSAFE_IMPORT)'); if [ -n "$$out" ]; then echo "unsafe imported outside a *_unsafe.go file:"; echo "$$out"; exit 1; fi

# hosttest runs every package on this host; the record report's tests
# render pages in headless Chromium, which scripts/chromium.sh installs.
hosttest: lint build
	@./$(BIN) doctor | grep -q '^run helper: *embedded helper image' || { echo "make: $(BIN) does not use its embedded helper image:"; ./$(BIN) doctor | grep '^run helper'; exit 1; }
	B10X_CHROMIUM=$$(./scripts/chromium.sh) B10X_REQUIRE_HELPER_IMAGE=1 $(GO) test -ldflags='$(HELPER_LDFLAGS)' -count=1 ./...

test: hosttest containertest mcptest interoptest vmtest-ci k8stest

# vmtest boots the VM shapes (see vmtest/README.md); it installs qemu and
# fetches Debian's kernel itself when they are missing. -selftest first
# proves on a guest of known outcomes that a failing shape would be caught.
vmtest: helper
	$(GO) run ./vmtest -ldflags='$(HELPER_LDFLAGS)' -env B10X_REQUIRE_HELPER_IMAGE=1 -timeout 15m -selftest -shapes all

# vmtest-ci is what `make test` (and so CI) runs: every VM shape
# (debian-6.1, debian-6.12 with Landlock ABI 6, debian-6.18 with Landlock
# ABI 7 and the kernel's audit on, no-landlock, no-userns, cgroup-v1) and
# `ordinary`, where the tests are told they run on the host
# (pure cgroup v2, another kernel; decisions 0048 and 0064). debian-6.1
# runs every package with kernel-facing tests; each other shape runs the
# packages whose outcome its difference can change (-pkgs-in, decision
# 0081; debian-6.18 the kernel denials' attribution, decision 0080): the layers, the tools' own confinement and the end-to-end suite
# everywhere, cgroup where the cgroup layout differs, and in `ordinary`
# the packages whose expectations come from probing the host. The host
# shape is `hosttest`. -timeout bounds each test binary: the cmd package's
# suite takes about 5 minutes in a guest under TCG with two shapes booted
# at once, past vmtest's default of 5.
VM_CI_SHAPES := debian-6.1,debian-6.12,debian-6.18,ordinary,cgroup-v1,no-landlock,no-userns
VM_CI_PKGS := ./confine/...,./cgroup/...,./gate/...,./surface/...,./tools/...,./workspace/...,./agent/...,./session/...,./cmd/...
VM_CI_PKGS_IN := \
	-pkgs-in debian-6.12=./confine/...,./cgroup/...,./tools/...,./workspace/...,./session/...,./cmd/... \
	-pkgs-in debian-6.18=./confine/audit/...,./confine/spawn/,./cmd/... \
	-pkgs-in no-landlock=./confine/...,./tools/...,./workspace/...,./session/...,./cmd/... \
	-pkgs-in no-userns=./confine/...,./session/...,./cmd/... \
	-pkgs-in cgroup-v1=./confine/...,./cgroup/...,./tools/...,./workspace/...,./session/...,./cmd/... \
	-pkgs-in ordinary=./confine/...,./cgroup/...,./session/...,./cmd/...
# In ordinary, the cmd suite's tests whose expectations come from probing
# the host (strict's missing layers, the limit controllers, doctor, the
# enclosing cgroup) and the exec contract; the rest ran in debian-6.1 on the
# same kernel. In cgroup-v1 and debian-6.12, the cmd tests of what those
# shapes change (run calls and exec, their attacks, limits, the network,
# doctor and strict); the MCP protocol, policy files, records and the
# tools' texts ran in debian-6.1.
VM_CI_KERNEL_TESTS := ^Test(Attack|Exec|Run|Doctor|Strict|Limit|Enclosing|Proxy|Net|Child|Kill|Call(Cancelled|Timeout)|Kernel|Container|Tmp|Nothing|Quiet)
VM_CI_RUN_IN := \
	-run-in 'ordinary:./cmd/...=^(TestDoctor|TestStrict|TestAttackExec(CPULimit|ForkBomb|MemoryBomb|StrictWhereAvailable)|TestEnclosingLimitsRecorded|TestMCPRecordFullDiskExits1|TestRecordOnAFullDisk|TestExec|TestChildUID|TestLimitsBestEffort)' \
	-run-in 'cgroup-v1:./cmd/...=$(VM_CI_KERNEL_TESTS)' \
	-run-in 'debian-6.12:./cmd/...=$(VM_CI_KERNEL_TESTS)' \
	-run-in 'debian-6.18:./confine/spawn/=^Test(ChildDenied|Denial|Landlock)' \
	-run-in 'debian-6.18:./cmd/...=^TestKernelDenials'
vmtest-ci: helper
	$(GO) run ./vmtest -ldflags='$(HELPER_LDFLAGS)' -env B10X_REQUIRE_HELPER_IMAGE=1 -timeout 15m -selftest -shapes $(VM_CI_SHAPES) -pkgs $(VM_CI_PKGS) $(VM_CI_PKGS_IN) $(VM_CI_RUN_IN)

# mutate applies each mutation of scripts/mutations.txt to a scratch copy
# of the tree and runs the tests that must catch it, on this host (decision
# 0044). Not part of `make test`: it takes tens of minutes. It fails unless
# every mutation is killed; MUTATE_ARGS passes options or ids, e.g.
# make mutate MUTATE_ARGS='-k nnp-skip'.
mutate:
	./scripts/mutate.sh $(MUTATE_ARGS)

demo: build
	./scripts/demo-run.sh

demo-calls: build
	./scripts/demo.sh

bench: build
	./bench/search.sh

bench-spawn: build
	./bench/spawn.sh

# image builds the container image (Containerfile, FROM scratch, no
# registry) with podman or docker, whichever is there (podman and runc are
# installed with apt-get when neither is); IMAGE names it.
IMAGE ?= localhost/b10x-harness:dev
image: build
	./deploy/build-image.sh $(IMAGE)

# containertest builds the image and checks, in containers under the
# runtime's default seccomp profile and the shipped one, as root and as
# uid 1000, that doctor's verdict matches what a run call and exec do
# (scripts/container-test.sh). Part of `make test`; it says SKIP only where
# no container engine can be run or installed.
containertest: image
	./scripts/container-test.sh $(IMAGE)

mcptest: build
	./scripts/mcp-inspector.sh

# interoptest drives `b10x-harness mcp` with Claude Code, Codex CLI, Gemini
# CLI and the MCP TypeScript SDK, pinned and installed from npm into a cache
# (scripts/interop.sh), each against a fake model API on loopback
# (interop/). Part of `make test`; it fails when a client cannot be
# installed or run.
.PHONY: interoptest
interoptest: build
	./scripts/interop.sh

# k8stest runs the evaluation fan-out and a CI step on a real single-node
# Kubernetes cluster in the k8s-node VM shape (scripts/k8stest.sh,
# decision 0088); the cluster's parts are built from source into
# ~/.cache/b10x-harness/k8s the first time.
k8stest: helper
	./scripts/k8stest.sh

clean:
	rm -rf bin confine/spawn/internal/helperimage/bin/helper-*
