# Hermod: every target works from a fresh clone. `make deps` installs what
# the others need; `make test` is what CI runs.

SHELL        := /bin/bash
.SHELLFLAGS  := -eu -o pipefail -c
GO           ?= go
BIN          := $(CURDIR)/bin
export PATH  := $(BIN):$(PATH)

# Debian packages the build and the tests need.
APT_PACKAGES := libzmq3-dev pkg-config redis-server
SUDO         := $(if $(filter 0,$(shell id -u)),,sudo)

# Every module of the workspace (go.work), in a stable order, and each as
# a package pattern (./libs/...): one go or golangci-lint command covers them
# all, sharing its loading and its build graph.
MODULES      = $(shell $(GO) list -m -f '{{.Dir}}' | sort)
MODULE_PKGS  = $(patsubst $(CURDIR)/%,./%/...,$(MODULES))
# The tests `make unit` runs: every package but the e2e suite (e2e-tls);
# and the packages with tests that skip under -race (TestTiming*, TestNoRace*).
E2E_PKG      := github.com/hermod/hermod/e2e
UNIT_PKGS    = $(filter-out $(E2E_PKG),$(shell $(GO) list $(MODULE_PKGS)))
TIMING_PKGS  = $(sort $(dir $(shell git grep -lE '^func (TestTiming|TestNoRace)' -- '*_test.go')))
# Test binaries run at once in `make unit`: most tests wait on servers and
# processes more than they compute, so a few more than the cores.
TEST_P       ?= $(shell echo $$(( $$(nproc) + 2 )))

# Fuzz budget per target in `make test`: an execution count (20000x) or a
# duration (make fuzz FUZZTIME=5m for a longer search).
FUZZTIME     ?= 20000x
# Go benchmarks: make microbench BENCH=ScheduleCycle BENCHTIME=2s COUNT=5
BENCH        ?= .
BENCHTIME    ?= 1s
COUNT        ?= 1
# make flake-hunt PKG='libs/bus services/indexer/internal/app' COUNT=20
PKG          ?=
FLAKE_COUNT   = $(if $(filter command line environment,$(origin COUNT)),$(COUNT),10)

TOOLS_STAMP  := $(BIN)/.tools-$(shell cat tools/go.sum tools/go.mod | sha256sum | cut -c1-16)

.PHONY: chaos kube-apiserver test-cluster images images-test containerfiles mongotest all deps apt-deps tools proto proto-check build binaries run test unit e2e e2e-tls vet lint fmt fuzz-smoke fuzz flake-hunt ci bench bench-prefix bench-multi bench-peers bench-overhead microbench chart clean help

all: build

help:
	@echo "make run          run Hermod on this machine: embedded NATS and etcd, every service, a vllm-sim fleet"
	@echo "                  (RUN_ARGS='--pods 8 --pickers 2' passes flags to hermod-devstack)"
	@echo "make deps         install Debian packages and the pinned Go tools (bin/)"
	@echo "make test         lint (with go vet), proto check, build, unit + integration tests, the e2e suite under --tls, fuzz smoke"
	@echo "make ci           make deps and make test as .ci/run runs them, with each phase's time at the end"
	@echo "make flake-hunt   every server- or process-starting package's tests 10 times (PKG='libs/bus ...' COUNT=20)"
	@echo "make test-cluster NATS (R3 streams) and etcd clusters of 3 with nodes and leaders restarted under load"
	@echo "make e2e-tls      the e2e suite with every devstack under --tls (mutual TLS, etcd and NATS users)"
	@echo "make build        build every module and the binaries into bin/"
	@echo "make proto        regenerate libs/api from proto/"
	@echo "make lint         golangci-lint over every module"
	@echo "make bench        the routing benchmark: round-robin, load-aware and predicted-latency over five arrival"
	@echo "                  orders and three fleets (about 35 min; report in bench-out/routing;"
	@echo "                  BENCH_ARGS='--orders 2' passes flags to hermod-bench)"
	@echo "make bench-prefix the prefix benchmark: random, load-only, approximate and precise prefix routing (noisy neighbour on)"
	@echo "make bench-multi  20 gateways, 20 pods: per-gateway least-request against the events and Valkey global views"
	@echo "make bench-peers  Hermod's picker beside the llm-d router's EPP (LLMD_ROUTER_SRC=<checkout> or LLMD_EPP=<binary>)"
	@echo "make bench-overhead what the gateway + picker add to a request beside nginx, and the Pick RPC (COUNT=5 runs)"
	@echo "make microbench   go test -bench over every module (BENCH=regexp BENCHTIME= COUNT=)"
	@echo "make chaos        the fault matrix under load (every kill, node, leader and network fault; writes bench-out/chaos/report.md)"
	@echo "make fuzz         run every fuzz target for FUZZTIME (default 20000x; e.g. FUZZTIME=5m)"
	@echo "make kube-apiserver  build bin/kube-apiserver (k8s.io/kubernetes, tools/kubeapiserver) for the tests; make deps builds it"
	@echo "make chart        helm lint and template the chart deployments/helm/hermod (default and ci/values-full.yaml)"
	@echo "make images       OCI images of the services, hermodctl, hermod-loadgen and vllm-sim into bin/images, no engine"
	@echo "                  needed (IMAGES=a,b  VERSION=  REGISTRY=localhost:5000 pushes  PODMAN=1 loads into podman)"
	@echo "make images-test  make images, then unpack each image and run its binary's --version"

# What `make deps` and `make test` run, in order; `make ci` (.ci/run) runs
# the same and prints each phase's time at the end.
DEPS_PHASES := apt-deps tools kube-apiserver
TEST_PHASES := lint proto-check build unit e2e-tls fuzz-smoke

deps: $(DEPS_PHASES)

# Installs only the packages that are missing.
apt-deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do dpkg -s "$$p" >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "apt: installing$$missing"; \
		$(SUDO) apt-get update -qq; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "apt: $(APT_PACKAGES) already installed"; fi

# The pinned tools (tools/go.mod) are rebuilt only when their pins change.
tools: $(TOOLS_STAMP)
$(TOOLS_STAMP): tools/go.mod tools/go.sum
	@echo "tools: building buf, protoc-gen-go, protoc-gen-go-grpc, golangci-lint, helm into bin/"
	@mkdir -p $(BIN)
	cd tools && GOWORK=off GOBIN=$(BIN) $(GO) install tool
	@rm -f $(BIN)/.tools-*
	@touch $@

proto: tools
	buf lint
	buf generate

# Fails when the committed generated code differs from what proto/ generates.
proto-check: proto
	@if [ -n "$$(git status --porcelain -- libs/api)" ]; then \
		echo "libs/api is not what proto/ generates; run make proto and commit:"; \
		git status --porcelain -- libs/api; git --no-pager diff --stat -- libs/api; exit 1; \
	fi

# Binaries: only vllm-sim and the indexer talk ZeroMQ (cgo, libzmq); every other binary
# must build with CGO_ENABLED=0.
PURE_BINARIES := ./services/gateway/cmd/hermod-gateway ./services/picker/cmd/hermod-picker \
                 ./services/collector/cmd/hermod-collector ./tools/devstack/cmd/hermod-devstack \
                 ./tools/hermodctl/cmd/hermodctl ./tools/loadgen/cmd/hermod-loadgen \
                 ./tools/loadgen/cmd/hermod-bench ./services/responses/cmd/hermod-responses \
                 ./services/autoscaler/cmd/hermod-autoscaler
CGO_BINARIES  := ./tools/vllm-sim/cmd/vllm-sim ./services/indexer/cmd/hermod-indexer

build: binaries
	$(GO) build $(MODULE_PKGS)

binaries: mongotest
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ $(PURE_BINARIES)
	CGO_ENABLED=1 $(GO) build -o $(BIN)/ $(CGO_BINARIES)

# The MongoDB wire-protocol server tests run (FerretDB, SQLite): a module
# outside the workspace, so that FerretDB's dependencies stay out of it.
mongotest:
	cd tools/ferretdb && GOWORK=off CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./cmd/hermod-mongotest

# The tests' real kube-apiserver (testkit/kubeapi), built from
# k8s.io/kubernetes by tools/kubeapiserver: a module outside the workspace, so
# that Kubernetes' dependency pins stay out of it. Rebuilt only when missing
# or when the module's pins change (Go's build cache does the rest: 12-14 min
# on 2 cores with an empty cache, about 7 s to relink with a warm one). It is
# part of `make deps`, as the pinned tools are.
KUBE_APISERVER := $(BIN)/kube-apiserver
KUBE_VERSION    = $(shell awk '$$1 == "k8s.io/kubernetes" { print $$2 }' tools/kubeapiserver/go.mod)
kube-apiserver: $(KUBE_APISERVER)
$(KUBE_APISERVER): tools/kubeapiserver/go.mod tools/kubeapiserver/go.sum
	@mkdir -p $(BIN)
	cd tools/kubeapiserver && GOWORK=off CGO_ENABLED=0 $(GO) build \
		-ldflags '-s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) -X k8s.io/component-base/version.gitTreeState=clean' \
		-o $@.tmp k8s.io/kubernetes/cmd/kube-apiserver
	mv -f $@.tmp $@

# The embedded default: everything on this machine until Ctrl-C.
RUN_ARGS ?=
run: apt-deps binaries
	$(BIN)/hermod-devstack $(RUN_ARGS)

# go vet's analyzers also run in lint (govet), which `make test` runs.
vet:
	$(GO) vet $(MODULE_PKGS)

lint: tools
	golangci-lint run $(MODULE_PKGS)

fmt: tools
	golangci-lint fmt $(MODULE_PKGS)

# Unit and integration tests of every module, with the race detector; then
# without it the tests that skip under -race: the timing tests (TestTiming*)
# and TestNoRace*, single-goroutine checks too slow under the race detector
# (e.g. the large reference tokenizers; a representative slice of each runs
# under -race).
unit: mongotest tools kube-apiserver
	$(GO) test -race -count=1 -p $(TEST_P) $(UNIT_PKGS)
	$(GO) test -count=1 -run '^(TestTiming|TestNoRace)' $(addprefix ./,$(TIMING_PKGS))

# The e2e suite with every devstack under --tls: a generated CA, mutual TLS
# on gRPC, etcd (client certificates, RBAC) and NATS (client certificates,
# a user); the tests connect with the state file's security settings.
e2e-tls: binaries tools kube-apiserver
	cd e2e && HERMOD_E2E_BIN=$(BIN) HERMOD_E2E_TLS=1 $(GO) test -race -count=1 .

# The e2e suite with plain connections, as `make run` starts the stack.
e2e: binaries tools kube-apiserver
	cd e2e && HERMOD_E2E_BIN=$(BIN) $(GO) test -race -count=1 .

# The heavy cluster tests: a 3-node NATS cluster with R3 streams and a
# 3-member etcd cluster, a node, a member and the leaders stopped and
# restarted under load (libs/bus, libs/coord, testkit; about 2 minutes).
# `make test` runs only their quick part.
test-cluster:
	cd libs && HERMOD_CLUSTER_TESTS=1 $(GO) test -race -count=1 -v -run 'Cluster' ./bus/ ./coord/
	cd testkit && $(GO) test -race -count=1 -run 'Cluster' ./natsembed/ ./etcdembed/

# The whole fault matrix (e2e TestChaos): every component killed with
# kill -9 and restarted by the devstack, NATS and etcd nodes and leaders
# stopped, 10 s network faults through a TCP fault proxy, each under a
# steady mixed load, with the invariants asserted; writes the table to
# bench-out/chaos/report.md (about 10 minutes). `make test` runs its
# quick cases.
chaos: mongotest
	@mkdir -p bench-out/chaos
	cd e2e && HERMOD_CHAOS=full HERMOD_CHAOS_REPORT=$(CURDIR)/bench-out/chaos/report.md $(GO) test -count=1 -timeout 60m -run '^TestChaos$$' -v ./
	@cat bench-out/chaos/report.md

# Tests that fail only now and then: the packages COUNT times under -race
# (TEST_P binaries at once, as make unit), then their timing tests COUNT
# times without it; PKG lists package directories (default: every package
# whose tests start servers or processes). Logs and a summary in
# bench-out/flake-hunt.
flake-hunt: binaries tools kube-apiserver
	@PKG='$(PKG)' COUNT=$(FLAKE_COUNT) P=$(TEST_P) HERMOD_E2E_BIN=$(BIN) ./scripts/flake-hunt.sh

# Every fuzz target briefly, from its committed seed corpus.
fuzz-smoke:
	@FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

fuzz: fuzz-smoke

test: $(TEST_PHASES)

ci:
	@PHASES_OUT=$(PHASES_OUT) ./scripts/phases.sh $(DEPS_PHASES) $(TEST_PHASES)

# The routing benchmark: round-robin, reference/000's load-aware and the
# recommended predicted-latency config, each on five arrival orders of
# reference/000's workload over four identical pods and over four with
# one at half speed, and on five seeds of a mixed-size Poisson workload
# over pods at speeds 1,1,0.5,2; writes the report, the results and the
# charts to bench-out/routing (about 35 minutes).
BENCH_ARGS ?=
bench: apt-deps binaries
	$(BIN)/hermod-bench routing --out bench-out/routing $(BENCH_ARGS)

# The prefix benchmark: random, load-only, approximate prefix + load and
# precise prefix + load on a shared-prefix chat workload over 8 pods,
# with a noisy neighbour burning a core beside the stack; writes to
# bench-out/prefix.
bench-prefix: apt-deps binaries
	$(BIN)/hermod-bench prefix --out bench-out/prefix --noisy-neighbour 1 $(BENCH_ARGS)

# The many-gateways benchmark: 20 gateways each with its own picker, 20
# pods serving one ~1 s request at a time, at 90% of capacity; per-gateway
# least-request against the events and Valkey global views.
bench-multi: apt-deps binaries
	$(BIN)/hermod-bench multi --out bench-out/multi $(BENCH_ARGS)

# Hermod's picker beside the llm-d router's EPP (llm-d/llm-d-router's
# cmd/epp), each behind the same ext_proc front (tools/loadgen/
# extprocfront), on the same fleets and workloads, with the router's own
# test/perf configs on both and Hermod's predicted-latency on Hermod;
# writes to bench-out/peers. The peer comes from LLMD_EPP=<binary> or
# LLMD_ROUTER_SRC=<checkout> (built from it, about 3 minutes).
LLMD_EPP ?=
LLMD_ROUTER_SRC ?=
bench-peers: apt-deps binaries
	LLMD_EPP="$(LLMD_EPP)" LLMD_ROUTER_SRC="$(LLMD_ROUTER_SRC)" $(BIN)/hermod-bench peers --out bench-out/peers $(BENCH_ARGS)

# What the gateway and the picker add to a request, beside what nginx
# (Debian's, installed here) adds as a plain reverse proxy, and the Pick
# RPC alone: one small non-streamed completion at a time against one pod
# at --speed 1000, each way in turn, $(COUNT) runs (about 10 s each).
bench-overhead: apt-deps binaries
	@command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || { $(SUDO) apt-get update -qq; $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx; }
	cd e2e && $(GO) test -run='^$$' -bench='^BenchmarkGatewayOverhead$$' -benchtime=1x -count=$(COUNT) .

microbench:
	@for m in $(MODULES); do (cd "$$m" && $(GO) test -run='^$$' -bench='$(BENCH)' -benchmem -benchtime=$(BENCHTIME) -count=$(COUNT) ./...); done

# The Helm chart, linted and rendered with its default and full values. `make
# test` needs no separate step: the chartcheck module's tests do this and
# validate every rendered object against the Kubernetes API types.
CHART := deployments/helm/hermod
chart: tools
	helm lint --strict $(CHART)
	helm lint --strict $(CHART) -f $(CHART)/ci/values-full.yaml
	helm template hermod $(CHART) > /dev/null
	helm template hermod $(CHART) -f $(CHART)/ci/values-full.yaml > /dev/null

# Container images without a container engine or a base image
# (tools/imagebuild): bin/images/<name> (OCI layout) and <name>.tar (OCI
# archive), named ghcr.io/hermod/<name>:<chart appVersion> as the chart
# expects. Two runs on one tree give the same digests (bin/images/images.txt).
IMAGES   ?=
VERSION  ?=
REGISTRY ?=
PODMAN   ?=
images: apt-deps
	$(GO) run ./tools/imagebuild/cmd/hermod-imagebuild --root $(CURDIR) --out $(BIN)/images \
		$(if $(IMAGES),--images $(IMAGES)) $(if $(VERSION),--version $(VERSION)) \
		$(if $(REGISTRY),--push $(REGISTRY)) $(if $(filter 1 true yes,$(PODMAN)),--podman)

images-test: images
	cd tools/imagebuild && HERMOD_IMAGES_DIR=$(BIN)/images HERMOD_IMAGES_VERSION=$(VERSION) \
		$(GO) test -count=1 -run '^TestBuiltImages$$' -v .

# deployments/images/<name>/Containerfile, generated from tools/imagebuild.
containerfiles:
	$(GO) run ./tools/imagebuild/cmd/hermod-imagebuild --containerfiles deployments/images

clean:
	rm -rf $(BIN)
