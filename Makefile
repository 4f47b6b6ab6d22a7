# simccl — see README.md. Every target installs what it needs (Go modules come through the module proxy).
GO       ?= go
PKGS     := ./...
STATICCHECK_VERSION := 2025.1.1

.PHONY: all build run test test-race fmt vet lint bench fuzz clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -o bin/simccl ./cmd/simccl
	$(GO) build -o bin/runccl ./cmd/runccl

## run: a simulation on the embedded default topology (8x H100 NVSwitch node), printing a real table.
run: build
	./bin/simccl run -c allreduce -b 8 -e 1G -f 4

## test: everything CI runs (no GPU needed; GPU tests skip with a message).
test: vet
	$(GO) test -count=1 $(PKGS)

test-race:
	$(GO) test -race -count=1 $(PKGS)

fmt:
	gofmt -l -w $$(git ls-files '*.go')

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

lint: vet
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

bench:
	$(GO) run ./bench/...

fuzz:
	$(GO) test ./topo/xml -run '^$$' -fuzz FuzzParse -fuzztime 5m

clean:
	rm -rf bin
