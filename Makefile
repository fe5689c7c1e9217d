# Tollgate — the two commands a new user runs are `make run` and `make test`.
GO      ?= go
BIN     := bin/tollgate
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
PKGS    := ./...
FUZZTIME ?= 20s

.PHONY: build run check test test-deps test-race test-times test-allocs bench chaos lint fuzz proto clean

# Root installs directly; anyone else through sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/tollgate

## run: start the gateway; with no TOLLGATE_CONFIG it serves the built-in demo.
run: build
	./$(BIN) run $(if $(TOLLGATE_CONFIG),-c $(TOLLGATE_CONFIG),)

## check: the inner loop, under a minute: vet, then the tests in -short
## mode (slow ones skip themselves) without the race detector. The socket
## tests mostly wait on timers, peers and the servers they start, so more
## packages and tests run at once than there are cores. make test stays the
## full run, and the one CI runs.
check:
	$(GO) vet $(PKGS)
	$(GO) test -short -count=1 -p 4 -parallel 8 $(PKGS)

## test: vet, every test under the race detector, then the allocation gates
## (which must run without -race: the detector allocates).
## The three run side by side: the race run's end is the end-to-end tests
## waiting on timers and processes, time the vet and the allocation gates
## fill.
test: test-deps
	@$(MAKE) --no-print-directory -j3 lint test-race test-allocs

## test-deps: what the tests need beyond Go: a redis-server binary (each
## test starts its own on a free loopback port and stops it), chromium
## (the dashboard test drives it headless), curl (an HTTP/2 client) and
## etcd (the etcd discovery tests start their own, as with redis-server).
test-deps:
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "installing redis-server"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }
	@redis-server --version
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
		echo "installing chromium"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@command -v curl >/dev/null 2>&1 || { \
		echo "installing curl"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null; }
	@# etcd for the discovery/etcd tests. Debian's package would start a
	@# service after install; a policy-rc.d that says no keeps it from
	@# trying where nothing runs services (a container), and is removed after.
	@command -v etcd >/dev/null 2>&1 || { \
		echo "installing etcd-server"; \
		if [ ! -e /usr/sbin/policy-rc.d ]; then \
			printf '#!/bin/sh\nexit 101\n' | $(SUDO) tee /usr/sbin/policy-rc.d >/dev/null && \
			$(SUDO) chmod +x /usr/sbin/policy-rc.d && trap '$(SUDO) rm -f /usr/sbin/policy-rc.d' EXIT; \
		fi; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null; }
	@etcd --version | head -1
	@# The Dubbo provider the dubbo tests start is built from a module of
	@# its own (test/dubboprovider); its modules are fetched here.
	cd test/dubboprovider && $(GO) mod download
	@command -v dnsmasq >/dev/null 2>&1 || test -x /usr/sbin/dnsmasq || { \
		echo "installing dnsmasq-base"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dnsmasq-base >/dev/null; }
	@# Jaeger for the tracing tests: built once from its Go module, at the
	@# version test/tools/go.mod pins, into the user's cache; a cold build
	@# (download and compile) takes several minutes, later runs none.
	@test -x "$(JAEGER_BIN)" || { \
		echo "building jaeger $(JAEGER_VERSION) for the tracing tests (once)"; \
		cd test/tools && $(GO) build -o "$(JAEGER_BIN)" github.com/jaegertracing/jaeger/cmd/jaeger; }
	@# grpcurl, the gRPC client the h2c tests call the cleartext port with,
	@# the same way from a module of its own (test/tools/grpcurl).
	@test -x "$(GRPCURL_BIN)" || { \
		echo "building grpcurl $(GRPCURL_VERSION) for the h2c tests (once)"; \
		cd test/tools/grpcurl && $(GO) build -o "$(GRPCURL_BIN)" github.com/fullstorydev/grpcurl/cmd/grpcurl; }

# The tracing tests' Jaeger and the h2c tests' grpcurl
# (internal/testutil/tools.go finds them there).
JAEGER_VERSION  := $(shell awk '$$1 == "github.com/jaegertracing/jaeger" {print $$2}' test/tools/go.mod)
JAEGER_BIN      := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/tollgate/tools/jaeger-$(JAEGER_VERSION)
GRPCURL_VERSION := $(shell awk '$$1 == "github.com/fullstorydev/grpcurl" {print $$2}' test/tools/grpcurl/go.mod)
GRPCURL_BIN     := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/tollgate/tools/grpcurl-$(GRPCURL_VERSION)

## test-race prints what go test would and keeps every test's time in
## .test-times/ for make test-times. The end-to-end package (build tag
## e2e) runs in a go test of its own, started first and beside the other
## packages: its tests mostly wait (for nodes, Redis outages, timers), and
## it is the longest, so it should not wait for the others to be built.
test-race: bin/testtimes
	@mkdir -p .test-times
	@bin/testtimes -record .test-times/e2e.jsonl -- $(GO) test -json -race -count=1 -timeout 15m -tags e2e ./test/e2e/ & e2e=$$!; \
	bin/testtimes -record .test-times/race.jsonl -- $(GO) test -json -race -shuffle=on -count=1 -timeout 15m $(PKGS); unit=$$?; \
	wait $$e2e; e2e=$$?; \
	if [ $$unit != 0 ] || [ $$e2e != 0 ]; then echo "test-race: failed (packages: exit $$unit, e2e: exit $$e2e)"; exit 1; fi

## test-times: the slowest packages and tests of the last make test.
test-times: bin/testtimes
	@bin/testtimes -n 25 -show .test-times/race.jsonl .test-times/e2e.jsonl

bin/testtimes: tools/testtimes/main.go
	cd tools/testtimes && $(GO) build -o ../../bin/testtimes .

## test-allocs builds the tests of the packages that have allocation
## gates only (a second, race-free build of every package's tests cost
## make test a link per package for nothing).
ALLOC_PKGS = $(shell grep -rlE --include='*_test.go' 'func (Test|Example)[A-Za-z0-9_]*Alloc' . | grep -v /testdata/ | xargs -rn1 dirname | sort -u)
test-allocs:
	$(GO) test -count=1 -run 'Alloc' $(if $(filter ./...,$(PKGS)),$(ALLOC_PKGS),$(PKGS))

## bench: gateway vs nginx on the same upstream with wrk and an open-loop generator.
bench:
	bash bench/run.sh
	bash bench/chain.sh
	bash bench/tls.sh
	bash bench/grpc.sh
	bash bench/grpcpass.sh

## chaos: reloads, a killed instance and a hanging upstream under wrk load.
chaos:
	bash bench/chaos.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags e2e ./test/e2e/
	cd tools/testtimes && $(GO) vet . && $(GO) test -count=1 .

## fuzz: every fuzz target for FUZZTIME each (parsers, decoders, the
## signing agreement, the differential fidelity fuzzer, …), found with
## go test -list, so a new target needs no line here.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

## proto: rebuild the test order service's descriptor set (checked in, so
## nothing else needs protoc) after changing its .proto files.
proto:
	@command -v protoc >/dev/null 2>&1 || { echo "installing protobuf-compiler"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >/dev/null; }
	cd internal/testutil/grpcorders/proto && protoc -I . -I /usr/include --include_imports \
		--descriptor_set_out=../orders.pb orders.proto

clean:
	rm -rf bin
