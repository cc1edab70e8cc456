# metaroce build, test and benchmark entry points. `make help` lists them.
GO        ?= go
BUILD     ?= build
FUZZTIME  ?= 3s
BENCHTIME ?= 1x
PREFIX    ?= /usr/local

.PHONY: all build test vet unit fuzz bench run help clean conformance mpirun-check figures-core

all: build ## Build every package and command

build: ## Build every Go package and binary into build/
	$(GO) build ./...
	@mkdir -p $(BUILD)
	@if [ -d cmd/mrbench ] && ls cmd/mrbench/*.go >/dev/null 2>&1; then $(GO) build -o $(BUILD)/mrbench ./cmd/mrbench; fi

test: vet unit fuzz ## Vet, unit tests, then each fuzz target for FUZZTIME

vet: ## go vet every package
	$(GO) vet ./...

unit: ## Unit and integration tests (netlab tests need root and nftables)
	$(GO) test -count=1 -timeout 20m ./...

fuzz: ## Every fuzz target for FUZZTIME (default 3s)
	scripts/fuzz.sh $(FUZZTIME)

bench: build ## Benchmarks, each printed beside its baseline (ours vs TCP, raw UDP, RoCEv2)
	$(GO) test -run '^$$' -bench . -benchtime 200ms ./transport/wire/
	$(GO) test -run '^$$' -bench SumVsCopy -count 2 ./collectives/reduce/
	$(GO) test -run '^$$' -bench 'UDPRaw|UDPGSO|TCP$$|PingPong' -benchtime 10x ./bench/baseline/
	$(GO) test -run '^$$' -bench . -benchtime 4x ./transport/udp/
	$(BUILD)/mrbench sim loss --smoke

figures-core: ## Print the protocol core's figures (goodput vs loss, blackhole, incast)
	METAROCE_FIGURES=1 $(GO) test -count=1 -run TestReportFigures -v ./transport/transporttest/

conformance: ## Run the conformance suite against our own datapath
	$(GO) run ./cmd/mrconform --self

mpirun-check: build ## mrbench as a 4-process Open MPI job (skips without mpirun)
	sh cmd/mrbench/testdata/mpirun.sh $(BUILD)/mrbench

run: build ## Build and run mrbench's default sweep
	$(BUILD)/mrbench

clean: ## Remove build outputs
	rm -rf $(BUILD)

help: ## List targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-zA-Z_-]+):.*## (.*)/\1\t\2/' | expand -t 12
