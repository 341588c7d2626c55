# msr: build, test, benchmark. Every target that needs packages installs
# them first (scripts/deps.sh is idempotent).
GO      ?= go
BIN     := bin/msr
GOFLAGS ?=
# msr version names what it was built from (GOFLAGS may say -buildvcs=false).
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
COMMIT  := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: deb all deps build generate check-generated lint test test-stress bench study compare lb-table scale sim controlplane soak soak-large demo fuzz clean hooks

all: build

deps:
	@scripts/deps.sh

# hooks installs the repository's git hooks (commit-msg: the subject's form).
hooks:
	install -D -m 755 scripts/hooks/commit-msg "$$(git rev-parse --git-path hooks)/commit-msg"

build: deps
	$(GO) build $(GOFLAGS) -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/msr

# generate compiles bpf/*.c with clang through bpf2go (pinned in go.mod as a
# tool) into Go files and objects that are committed.
generate: deps
	$(GO) generate ./...

# check-generated fails when the committed BPF objects are not what the
# sources compile to.
check-generated: generate
	@git diff --exit-code --stat -- '*_bpfel.go' '*_bpfel.o' || \
		{ echo "generated BPF code is stale: run make generate and commit"; exit 1; }

lint: deps
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

# test: unit, BPF fixture (prog.Run) and privileged lab tests; needs root.
# testsum prints what plain go test would and ends with the outcome in
# one line: N passed, M failed, K skipped.
# The lab packages run one at a time (-p 1): the benchmark tests load
# both cores and would starve the other packages' lab tests. The packages
# that build no lab and load no XDP program (UNIT_PKGS; a package not
# named there counts as a lab one) run first, two at a time.
# A run cut short (a machine restarted mid-test) leaves its labs up; the
# tests' labs (t-*) and the benchmarks' (bench-*) are theirs alone, so the
# next run removes them first rather than failing on "already up", with
# the BPF pins and back-end state files those tests name.
test: deps check-generated lint build
	@rm -f bin/test-summary
	@for l in $$($(BIN) lab list | grep -E '^(t|bench)-'); do echo "removing leftover lab $$l"; $(BIN) lab down $$l; done
	@rm -rf /sys/fs/bpf/msr-test-* /run/msr/router-t-* /run/msr/router-bench-*
	$(GO) build -o bin/testsum ./scripts/testsum
	@bash -o pipefail -c '{ $(GO) test -count=1 -p 2 -timeout 10m -json $(UNIT_PKGS); \
		$(GO) test -count=1 -p 1 -timeout 30m -json $$($(GO) list ./... | grep -vxF "$$(printf "%s\n" $(UNIT_PKGS:./%=$(MODULE)/%))"); } | bin/testsum -summary bin/test-summary'

MODULE    := github.com/msr-router/msr
UNIT_PKGS := ./cmd/msr ./demo ./deploy ./deploy/grafana ./internal/acl ./internal/agentx \
	./internal/api ./internal/config ./internal/element ./internal/flow ./internal/inet \
	./internal/ipfix ./internal/logging ./internal/report ./internal/routetable ./internal/sflow \
	./internal/trace ./scripts/hooks ./scripts/testsum ./sim

# test-stress: make test with one core kept half busy by a CPU hog at the
# lowest priority (stress-ng), as a machine with light background work
# would be; a test that fails only so measures the machine, not msr.
test-stress: deps
	@nice -n 19 stress-ng --cpu 1 --cpu-load 50 --quiet & hog=$$!; \
		$(MAKE) test; rc=$$?; kill $$hog; wait $$hog 2>/dev/null; exit $$rc

# deb: the Debian package (a static msr, the units, docs, examples,
# completion) into deb/; TestDebPackage (deploy/) installs it.
deb: deps
	scripts/deb.sh deb

# bench: the forwarding benchmarks of docs/benchmarks.md, every DUT beside
# the instrument's ceiling and the Linux baseline, in one run.
bench: build
	@for round in 1 2; do for dut in none linux lb; do for f in 1 1000; do \
		$(BIN) bench fwd --dut $$dut --size 64 --flows $$f --duration 5s || exit 1; \
	done; done; done
	@for dut in none linux lb; do $(BIN) bench fwd --dut $$dut --size 1518 --flows 1000 --duration 5s || exit 1; done
	$(BIN) bench rfc2544 --dut linux,msr --sizes 64,1518 --report bench-rfc2544
	$(BIN) bench prog --repeat 1000000 --rounds 5
	$(BIN) bench flat --tables 10,pyasn,1000000 --duts router,xdp-fib,linux --rounds 7
	$(BIN) bench fwd --dut linux --size 64 --flows 1000 --duration 5s --fib pyasn
	$(GO) test -run '^$$' -bench . ./router
	$(BIN) bench rib --routes pyasn --backends 3 --changes 20
	$(BIN) bench rib --routes pyasn --backends 1 --changes 20
	$(BIN) bench rib --routes 1000000 --backends 3 --changes 20
	@for args in "--size 64 --flows 1000" "--size 1518 --flows 1000" "--size 64 --flows 1"; do \
		for dut in linux msr; do $(BIN) bench fwd --dut $$dut $$args --duration 5s --prog-stats || exit 1; done; done
	@for dut in msr msr-switch msr-xdpswitch; do $(BIN) bench fwd --dut $$dut --size 64 --flows 1000 --duration 4s --prog-stats || exit 1; done

# study: seed 001's experiments (docs/rfc2544.md): a single Linux router,
# a star of four and msr, two sources and two sinks, forwarded against
# offered load per frame size, table size and flow set; report and plots
# in bench-study/.
study: build
	$(BIN) bench study --topology single,star,multistage --sizes 64,576,1470 --fib 1000,167000 --flows 1,2,many --report bench-study

# compare: seed 002's comparison, msr against a Linux router: RFC 2544's
# throughput, loss, overload, reset and single frame, then real transfers
# (HTTP, FTP: 100 MB × 10 each); reports and plots in bench-compare/.
compare: build
	$(BIN) bench rfc2544 --dut linux,msr --sizes 64,512,1518 --tests throughput,loss,overload,reset,single --confirmations 1 --overload-time 10s --report bench-compare/rfc2544
	$(BIN) bench transfers --dut linux,msr --protocols http,ftp --size-mb 100 --count 10 --report bench-compare/transfers

# lb-table: seed 000's Table 3, the LB alone from outside in, from a
# back-end out, and both at once (docs/rfc2544.md).
lb-table: build
	$(BIN) bench rfc2544 --dut lb,lb-int-ext,lb-both --sizes 64,128,256,512,1518 --tests throughput,latency --confirmations 1 --report bench-lb-table

# scale: seed 003's scale-out (docs/scaling.md): the aggregate zero-loss
# rate of N1 LBs and N2 back-ends, each capped, beside rho_min; the LBs'
# side (their caps, and DTX-n's internal ports); back-ends of capacities
# 2:2:1 in WRR and in flowlet mode; reports in bench-scale/.
scale: build
	$(BIN) bench scale --lbs 1,2 --backends 1,2,4 --cap-backend 50000 --report bench-scale/backends
	$(BIN) bench scale --lbs 1,2,3 --backends 4 --cap-lb 60000 --cap-backend 50000 --report bench-scale/lbs
	$(BIN) bench scale --lbs 1 --backends 4 --internal-ports 1,2,4 --cap-port 40000 --cap-backend 50000 --report bench-scale/dtx
	$(BIN) bench scale --lbs 1 --backends 3 --cap-backend 40000,40000,20000 --report bench-scale/uneven-wrr
	$(BIN) bench scale --lbs 1 --backends 3 --cap-backend 40000,40000,20000 --mode flowlet --report bench-scale/uneven-flowlet
	$(BIN) bench scale --lbs 1 --backends 2,4,8 --cap-backend 100000 --report bench-scale/machine

# sim: the model past one machine (docs/scaling.md): the lab's reports
# predicted with the lab's caps, then N1 up to 64 and N2 up to 512 with
# this machine's costs, heavy-tailed flows, every balancing mode; reports
# in bench-sim/.
SCALE_REPORTS = bench-scale/backends/report.json,bench-scale/lbs/report.json,bench-scale/dtx/report.json,bench-scale/uneven-wrr/report.json,bench-scale/uneven-flowlet/report.json,bench-scale/machine/report.json
sim: build
	$(BIN) sim --validate $(SCALE_REPORTS)
	$(BIN) sim --lbs 16,64 --backends 8,32,128,512 --report bench-sim/websearch
	$(BIN) sim --lbs 64 --backends 64,128,256,512 --lb-ns 40 --report bench-sim/backend-bound
	$(BIN) sim --lbs 64 --backends 16,64,512 --flows 1000 --flow-sizes pareto:1.2 --report bench-sim/elephants
	$(BIN) sim --lbs 8 --backends 256,512 --internal-ports 1,2 --modes maglev,wrr

# controlplane: the VCP at scale (docs/scaling.md): 500 back-ends' and 8
# LBs' hellos from the DIST load generator, one back-end's death; the
# VCP's BIRD reflecting a full table to 100 receive-only clients.
controlplane: build
	$(BIN) bench vcp --backends 500 --lbs 8 --duration 30s
	$(BIN) bench rib --routes pyasn --backends 1 --changes 0 --clients 100

# soak: the whole router for 10 minutes under accounted traffic, every
# fault drawn in turn (docs/reliability.md); make test runs 2 minutes of it
# (bench's TestSoak).
soak: build
	$(BIN) soak --duration 10m --seed 1 --report soak-report

# soak-large: the large lab (16 LBs × 4 ports) for 10 minutes, its LBs'
# hosts dying and coming back (docs/reliability.md).
soak-large: build
	$(BIN) soak --size large --duration 10m --seed 1 --report soak-large-report

# demo: the main job: the default lab (labs/default.yaml) up, converged,
# real traffic through it with a live view, a summary, torn down.
demo: build
	$(BIN) demo

clean:
	rm -rf bin

# fuzz: run each fuzz target for FUZZTIME (the tests run their seeds only).
FUZZTIME ?= 60s
fuzz: deps
	$(GO) test ./dist -run '^$$' -fuzz FuzzUnmarshal -fuzztime $(FUZZTIME)
	$(GO) test ./lab -run '^$$' -fuzz FuzzLoad -fuzztime $(FUZZTIME)
	$(GO) test ./vcp -run '^$$' -fuzz FuzzLoadConfig -fuzztime $(FUZZTIME)
	$(GO) test ./vcp -run '^$$' -fuzz FuzzBirdcParsers -fuzztime $(FUZZTIME)
	$(GO) test ./lb -run '^$$' -fuzz FuzzLoadConfig -fuzztime $(FUZZTIME)
	$(GO) test ./router -run '^$$' -fuzz FuzzLoadConfig -fuzztime $(FUZZTIME)
	$(GO) test ./router -run '^$$' -fuzz FuzzRIBMessage -fuzztime $(FUZZTIME)
