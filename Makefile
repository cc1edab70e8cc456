# metaroce build, test and benchmark entry points. `make help` lists them.
GO        ?= go
BUILD     ?= build
FUZZTIME  ?= 3s
MRBENCH_FLAGS ?=
BENCHTIME ?= 1x
PREFIX    ?= /usr/local
DURATION  ?= 30m
SOAKFLAGS ?=
PEERSFLAGS ?=

.PHONY: plugin harness install all build test vet unit race fuzz bench run help clean conformance conformance-iut bench-peers soak mpirun-check figures-core

all: build ## The same as build

build: ## Build every Go package, mrbench, mrconform, mrpeer, the net plugin and its harness into build/
	$(GO) build ./...
	@mkdir -p $(BUILD)
	$(GO) build -o $(BUILD)/mrbench ./cmd/mrbench
	$(GO) build -o $(BUILD)/mrconform ./cmd/mrconform
	$(GO) build -o $(BUILD)/mrpeer ./cmd/mrpeer
	@if [ "$$($(GO) env CGO_ENABLED)" = 1 ]; then \
		$(MAKE) --no-print-directory plugin harness; \
	else \
		echo "build: cgo is off (no C compiler, or CGO_ENABLED=0): the net plugin and its harness are not built" >&2; \
	fi

# Every non-standard package the plugin links (transport included), so that
# a change anywhere below it rebuilds the library.
PLUGIN_SRC := $(shell $(GO) list -deps -f '{{if not .Standard}}{{range .GoFiles}}{{$$.Dir}}/{{.}} {{end}}{{range .CgoFiles}}{{$$.Dir}}/{{.}} {{end}}{{range .CFiles}}{{$$.Dir}}/{{.}} {{end}}{{range .HFiles}}{{$$.Dir}}/{{.}} {{end}}{{end}}' ./net-plugin 2>/dev/null) \
	$(wildcard include/metaroce/*.h) go.mod go.sum
# The plugin under the names NCCL_NET_PLUGIN=metaroce opens (NCCL:
# libnccl-net-metaroce.so, RCCL: librccl-net-metaroce.so), then under the
# names both open when NCCL_NET_PLUGIN is unset.
NAMED_PLUGINS   := $(BUILD)/libnccl-net-metaroce.so $(BUILD)/librccl-net-metaroce.so
DEFAULT_PLUGINS := $(BUILD)/libnccl-net.so $(BUILD)/librccl-net.so
PLUGINS := $(NAMED_PLUGINS) $(DEFAULT_PLUGINS)
# make install INSTALL_DEFAULT_NAMES=1 installs the default names too (1, yes
# or true in any case; empty, 0, no or false do not; anything else is an
# error rather than a guess).
INSTALL_DEFAULT_NAMES ?=
INSTALL_DEFAULTS_LC := $(shell printf '%s' '$(INSTALL_DEFAULT_NAMES)' | tr A-Z a-z)
INSTALL_DEFAULTS := $(filter 1 yes true,$(INSTALL_DEFAULTS_LC))

plugin: $(PLUGINS) ## The c-shared NCCL/RCCL net plugin, under each name NCCL and RCCL load

# Without cgo (no C compiler, or CGO_ENABLED=0) go build would only say that
# build constraints exclude every file of net-plugin; say what is missing.
$(PLUGINS): $(PLUGIN_SRC) net-plugin/exports.map
	@if [ "$$($(GO) env CGO_ENABLED)" != 1 ]; then \
		echo "the net plugin is a c-shared library and needs cgo: install gcc and build with CGO_ENABLED=1 (mrbench, mrconform and mrpeer build without it)" >&2; \
		exit 1; \
	fi
	@mkdir -p $(BUILD)
	$(GO) build -buildmode=c-shared -ldflags='-extldflags "-Wl,-soname,$(notdir $@) -Wl,--version-script=$(CURDIR)/net-plugin/exports.map"' -o $@ ./net-plugin
	rm -f $(basename $@).h

harness: $(BUILD)/nccl-net-harness ## The C harness that loads the plugin as NCCL does

$(BUILD)/nccl-net-harness: net-plugin/harness/harness.c include/metaroce/nccl_net.h
	@mkdir -p $(BUILD)
	gcc -O2 -Wall -Wextra -Iinclude -o $@ net-plugin/harness/harness.c -ldl

# Only the names that NCCL_NET_PLUGIN=metaroce selects, by default: NCCL and
# RCCL open libnccl-net.so / librccl-net.so whenever NCCL_NET_PLUGIN is unset,
# so those names in a directory the loader searches (/usr/local/lib is one)
# would put every job on the host on MetaRoCE.
install: plugin ## Install the plugin (NCCL_NET_PLUGIN=metaroce; INSTALL_DEFAULT_NAMES=1: every job's default too), header, pkg-config file under PREFIX
	$(if $(filter-out 1 yes true 0 no false,$(INSTALL_DEFAULTS_LC)),$(error INSTALL_DEFAULT_NAMES=$(INSTALL_DEFAULT_NAMES): want 1, yes or true (install libnccl-net.so and librccl-net.so too) or empty, 0, no or false))
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/metaroce $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(NAMED_PLUGINS) $(if $(INSTALL_DEFAULTS),$(DEFAULT_PLUGINS)) $(DESTDIR)$(PREFIX)/lib/
	@$(if $(INSTALL_DEFAULTS),true,for f in $(notdir $(DEFAULT_PLUGINS)); do \
		if [ -e "$(DESTDIR)$(PREFIX)/lib/$$f" ]; then \
			echo "install: $(DESTDIR)$(PREFIX)/lib/$$f is left from an earlier install and is not updated: jobs without NCCL_NET_PLUGIN still load it; remove it, or install with INSTALL_DEFAULT_NAMES=1" >&2; \
		fi; \
	done)
	install -m 644 include/metaroce/nccl_net.h $(DESTDIR)$(PREFIX)/include/metaroce/
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: metaroce-net\nDescription: MetaRoCE NCCL/RCCL net plugin\nVersion: 0.1.0\nLibs: -L$${libdir} -lnccl-net-metaroce\nCflags: -I$${includedir}\n' $(PREFIX) > $(DESTDIR)$(PREFIX)/lib/pkgconfig/metaroce-net.pc

# One after the other even under make -j: fuzzing beside the unit tests would
# load the machine under their timing-sensitive transport and netlab cases.
test: ## Vet, unit tests, the race detector's pass, then each fuzz target for FUZZTIME
	$(MAKE) --no-print-directory vet
	$(MAKE) --no-print-directory unit
	$(MAKE) --no-print-directory race
	$(MAKE) --no-print-directory fuzz

vet: ## go vet every package
	$(GO) vet ./...

unit: ## Unit and integration tests (netlab tests need root and nftables)
	$(GO) test -count=1 -timeout 20m ./...

# RACE_PKGS are the packages whose tests run goroutines against each other:
# the collectives, the UDP runtime, the plugin's backends, mrbench and the
# conformance suite's process IUT (the protocol core owns no goroutines).
RACE_PKGS = ./collectives/ ./transport/udp/ ./net-plugin/internal/... ./conformance/ ./cmd/mrbench/

race: ## The tests of RACE_PKGS under the race detector (needs cgo: a C compiler)
	@if [ "$$($(GO) env CGO_ENABLED)" = 1 ]; then \
		$(GO) test -race -count=1 -timeout 20m $(RACE_PKGS); \
	else \
		echo "race: skipped: the race detector needs cgo (a C compiler; CGO_ENABLED=1)"; \
	fi

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

conformance-iut: build ## Conformance suite against mrpeer as a separate process, JUnit in build/
	$(BUILD)/mrconform --iut $(BUILD)/mrpeer --format tap,human --junit $(BUILD)/conformance.xml

# Built, then run: `go run` reports any failure of the program as exit
# status 1 in its own message, which hid mrsoak's 130, 143 or 129
# (interrupted by SIGINT, SIGTERM or SIGHUP) and 2 (usage); make now names
# mrsoak's own status in its "Error N" line (make itself exits 2 for any
# failed recipe: run build/mrsoak directly where a script needs the status).
soak: ## Mixed collectives for DURATION under faults (SOAKFLAGS="--netlab --plugin": nftables faults on a netns fabric, plugin rounds); fails on corruption, missed failures or leaks
	@mkdir -p $(BUILD)
	$(GO) build -o $(BUILD)/mrsoak ./cmd/mrsoak
	$(BUILD)/mrsoak -duration $(DURATION) -v $(SOAKFLAGS)

bench-peers: build ## mrbench beside Open MPI (shm and TCP) and PyTorch gloo, one table (the one in docs/results.md); PEERSFLAGS=--install installs missing peers (root)
	bench/peers/run.sh --rounds 5 --iters 20 --warmup 5 $(PEERSFLAGS)

mpirun-check: build ## mrbench as a 4-process Open MPI job (skips without mpirun)
	sh cmd/mrbench/testdata/mpirun.sh $(BUILD)/mrbench

run: build ## Build and run mrbench's default sweep (flags: make run MRBENCH_FLAGS="-np 2 -e 16M")
	$(BUILD)/mrbench $(MRBENCH_FLAGS)

clean: ## Remove build outputs
	rm -rf $(BUILD)

help: ## List targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-zA-Z_-]+):.*## (.*)/\1\t\2/' | expand -t 17
