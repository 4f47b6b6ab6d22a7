# simccl — see README.md. Every target installs what it needs (Go modules come through the module proxy).
GO       ?= go
PKGS     := ./...
# v0.6.1 is the newest staticcheck the module proxy here serves (2025.1.x answers 403).
STATICCHECK_VERSION := v0.6.1

.PHONY: all build shim libnccl run test test-race test-long test-browser fmt vet lint bench pgo fuzz ptx clean

all: build

# simccl is built with cgo when a C compiler is there, so that `simccl topo dump` can reach NVML;
# every other command also works from a CGO_ENABLED=0 build.
build:
	$(GO) build -o bin/simccl ./cmd/simccl
	$(GO) build -o bin/runccl ./cmd/runccl

## shim: the preloadable NCCL shim (record and virtual modes; see intercept/README.md). Needs cgo.
shim:
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -o bin/libsimccl_nccl.so ./intercept/shim

## libnccl: NCCL's C API on the GPU engine, a drop-in libnccl.so.2 (see cuda/libnccl/README.md). Needs cgo.
libnccl:
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libnccl.so.2 -o bin/libnccl.so.2 ./cuda/libnccl

## run: a simulation on the embedded default topology (8x H100 NVSwitch node), printing a real table.
run: build
	./bin/simccl run -c allreduce -b 8 -e 1G -f 4

## test: everything CI runs (no GPU needed; GPU tests skip with a message).
test: lint
	$(GO) test -count=1 $(PKGS)

test-race:
	$(GO) test -race -count=1 $(PKGS)

## test-long: the long conformance and fault suites of the CPU engine (tens of thousands of cases;
## as root, also across network namespaces with SIMCCL_NETNS=1), the GPU engine's exhaustive matrix
## (on the CPU emulator without a GPU) and runccl's H200 trace replay on every transport.
test-long:
	SIMCCL_LONG=1 $(GO) test -count=1 -timeout 60m ./comm/ ./realnet/ ./cuda/engine/ ./cmd/runccl/ ./cmd/simccl/

fmt:
	gofmt -l -w $$(git ls-files '*.go')

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

lint: vet
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

## bench: the benchmark programs (each prints a table and JSON; figures in BENCHMARKS.md).
## bench/report needs Chromium (make test-browser installs it).
## bench/cpu also compares with Open MPI when mpicc is installed (apt-get install -y openmpi-bin libopenmpi-dev).
bench: build
	$(GO) run ./bench/tune
	$(GO) run ./bench/sim
	$(GO) run ./bench/sim/compare
	$(GO) run ./bench/shape -simccl bin/simccl
	$(GO) run ./bench/public -simccl bin/simccl
	$(GO) run ./bench/public -simccl bin/simccl -nccl-version csv
	$(GO) run ./bench/public -simccl bin/simccl -csv testdata/public/azure-nd/allreduce.csv
	$(GO) run ./bench/cpu
	$(GO) run ./bench/badinput
	$(GO) run ./bench/report

## pgo: rewrite cmd/simccl/default.pgo, the CPU profile that `go build` optimizes simccl with
## (profile-guided optimization, -pgo=auto: 3-5% fewer instructions on bench/sim's scenarios), from
## those scenarios and an exact all-to-all replay. It changes no simulated number.
pgo: build
	d=$$(mktemp -d) && \
	./bin/simccl run --nodes 128 -c allreduce -b 1G -e 1G --progress off --json --cpuprofile $$d/1.prof >/dev/null && \
	./bin/simccl run --nodes 64 --fabric examples/fabrics/fattree-3tier-2to1.fabric -c allreduce -b 1G -e 1G --progress off --json --cpuprofile $$d/2.prof >/dev/null && \
	./bin/simccl run --nodes 128 -c allreduce -b 8 -e 1G --progress off --json --cpuprofile $$d/3.prof >/dev/null && \
	./bin/simccl run --nodes 128 -c alltoall -b 1G -e 1G --progress off --json --cpuprofile $$d/4.prof >/dev/null && \
	./bin/simccl run --nodes 12 --fabric-set hosts_per_leaf=2 -c alltoall -b 2M -e 2M --exact --progress off --json --cpuprofile $$d/5.prof >/dev/null && \
	$(GO) tool pprof -proto $$d/*.prof > cmd/simccl/default.pgo && rm -r $$d

## test-browser: the HTML report in headless Chromium (installs Debian's chromium when absent; needs root).
test-browser:
	sh report/browser_test.sh

## ptx: regenerate the CUDA kernels' PTX (needs nvcc, CUDA >= 12; run on the GPU machine and commit the result).
ptx:
	sh cuda/kernels/gen.sh

## fuzz: each parser's fuzz test in turn (FUZZTIME per target, default 1m; the XML reader was run for 5m).
FUZZTIME ?= 1m
fuzz:
	$(GO) test ./topo/ncclxml -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tuning -run '^$$' -fuzz '^FuzzParseOverrides$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tuning -run '^$$' -fuzz '^FuzzEnableList$$' -fuzztime $(FUZZTIME)
	$(GO) test ./topo -run '^$$' -fuzz '^FuzzFromXML$$' -fuzztime $(FUZZTIME)
	$(GO) test ./search -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME)
	$(GO) test ./search -run '^$$' -fuzz '^FuzzSearch$$' -fuzztime $(FUZZTIME)
	$(GO) test ./simnet -run '^$$' -fuzz '^FuzzParseFabric$$' -fuzztime $(FUZZTIME)
	$(GO) test ./report -run '^$$' -fuzz '^FuzzReadMeasured$$' -fuzztime $(FUZZTIME)
	$(GO) test ./intercept -run '^$$' -fuzz '^FuzzReadTrace$$' -fuzztime $(FUZZTIME)
	$(GO) test ./intercept -run '^$$' -fuzz '^FuzzDecodeRecord$$' -fuzztime $(FUZZTIME)
	$(GO) test ./intercept -run '^$$' -fuzz '^FuzzParseLog$$' -fuzztime $(FUZZTIME)
	$(GO) test ./realnet -run '^$$' -fuzz '^FuzzReadMsg$$' -fuzztime $(FUZZTIME)
	$(GO) test ./realnet -run '^$$' -fuzz '^FuzzUniqueID$$' -fuzztime $(FUZZTIME)
	$(GO) test ./realnet -run '^$$' -fuzz '^FuzzBootstrapHandshake$$' -fuzztime $(FUZZTIME)
	$(GO) test ./coll -run '^$$' -fuzz '^FuzzReadJSON$$' -fuzztime $(FUZZTIME)
	$(GO) test ./topo/discover -run '^$$' -fuzz '^FuzzParseFakeNVML$$' -fuzztime $(FUZZTIME)
	$(GO) test ./topo/discover -run '^$$' -fuzz '^FuzzParseBusID$$' -fuzztime $(FUZZTIME)

clean:
	rm -rf bin
