# paddle-entrypoint. `make build` writes every shipped executable to bin/.
GO       ?= go
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
GOFLAGS_BUILD := -trimpath -ldflags "$(LDFLAGS)"
# go-nvml's C wrappers call NVML entry points that NVIDIA's header marks
# deprecated; a cold build would print a wall of warnings about them. Only
# the probe compiles C, so only its build is told (.ci/run checks that a
# cold `make build` prints nothing on stderr).
PROBE_CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: build test demo try e2e bench fuzz clean screenshot gpu-check

build: bin/paddle-entrypoint bin/paddle-gpu-probe bin/paddle-monitor bin/paddle-node

# The entrypoint is static and cgo-free: immune to LD_BIND_NOW and to the
# image's glibc. Only the GPU probe links go-nvml (cgo), see README.
bin/paddle-entrypoint: FORCE
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o $@ .

# The monitor is static and cgo-free too (SQLite through modernc.org/sqlite).
bin/paddle-monitor: FORCE
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o $@ ./cmd/paddle-monitor

# The node agent is static and cgo-free too: NVML is read by its child,
# paddle-gpu-probe (docs/node.md).
bin/paddle-node: FORCE
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o $@ ./cmd/paddle-node

bin/paddle-gpu-probe: FORCE
	CGO_ENABLED=1 CGO_CFLAGS="$(PROBE_CGO_CFLAGS)" $(GO) build $(GOFLAGS_BUILD) -o $@ ./cmd/paddle-gpu-probe

# A test that needs a tool this machine lacks (promtool, chromium, etcd,
# PostgreSQL...) skips, naming the tool and its Debian package
# (test/harness/tools.go); after `go test`, one summary of those skips.
# PADDLE_TEST_REQUIRE_TOOLS=1 / PADDLE_TEST_REQUIRE_POSTGRES=1 (CI) make
# them failures. `make test` fails when `go test` does, summary or not.
TEST_SKIPS := $(abspath .cache/skips)
test:
	$(GO) vet ./...
	@mkdir -p $(dir $(TEST_SKIPS)) && rm -f $(TEST_SKIPS)
	PADDLE_TEST_SKIPS=$(TEST_SKIPS) $(GO) test -count=1 -timeout 20m ./...; rc=$$?; \
		./scripts/test-skips.sh $(TEST_SKIPS); exit $$rc

demo: build
	$(GO) run ./test/demo

# One machine, a node's whole path: the monitor, the node agent on the fake
# NVML and two teams' supervised tasks as Slurm jobs the agent ties; then
# it prints how to start a task of your own and where to see it, and runs
# until Ctrl-C (docs/node.md, first section). As root; needs gcc.
# TRY_OWN_TASK=1 runs your task itself and stops once it is in the ledger.
try: build
	$(GO) run ./test/try

# The start-up benchmark against the shell entrypoint (docs/benchmarks.md).
# It rewrites the generated section of docs/benchmarks.md (BENCH_DOC= to leave
# it alone); BENCHFLAGS="-iterations 10 -slow-iterations 2" for a quick run.
# Then the monitor's benchmark (test/bench/monitorbench: SQLite and PostgreSQL side
# by side) writes its own section; MONITORBENCHFLAGS="-rounds 1" for a quick run.
# Then the node agent's cost (test/bench/nodebench: 8 GPUs, 200 processes, two
# default intervals); NODEBENCHFLAGS="-duration 30s" for a quick run.
BENCH_DOC ?= docs/benchmarks.md
bench: build
	$(GO) run ./test/bench -entrypoint bin/paddle-entrypoint -doc "$(BENCH_DOC)" $(BENCHFLAGS)
	$(GO) run ./test/bench/monitorbench -monitor bin/paddle-monitor -doc "$(BENCH_DOC)" $(MONITORBENCHFLAGS)
	$(GO) run ./test/bench/nodebench -node bin/paddle-node -doc "$(BENCH_DOC)" $(NODEBENCHFLAGS)

# The image built from Dockerfile.paddle and run under podman, and the
# shipped executables in a glibc-2.31 root (docs/image.md). Needs root; it
# installs what it needs (scripts/e2e-setup.sh). The executables the image
# ships are built inside that root, as the Dockerfile's builder stage does.
e2e:
	./scripts/e2e-setup.sh
	PADDLE_E2E_VERSION=$(VERSION) $(GO) test -tags e2e -count=1 -timeout 15m -v ./test/e2e/

# On a machine with NVIDIA GPUs: the probe, its sampling mode (MIG and
# energy where present) and a supervised task against the real driver, with
# what each saw (docs/gpu.md); under a minute, changes nothing.
gpu-check: build
	./scripts/gpu-check.sh bin

# Every fuzz test for FUZZTIME each (the seeds alone run in `make test`).
FUZZTIME ?= 10s
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "$$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

# docs/report-page.png, from the browser test of the page (needs chromium).
screenshot:
	$(GO) test -count=1 -run TestPageInBrowser ./cmd/paddle-monitor -args -screenshot

clean:
	rm -rf bin

FORCE:
