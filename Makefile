# koala-emu: the commands of the README.
GO        ?= go
SCENARIO  ?= scenarios/das3-smoke.yaml
OUT       ?= runs
BIN       := bin/koala-emu

.PHONY: run test fuzz integration nightly study calibrate bench-simgrid model build build-sim image proto lint clean

## run: the main job on the embedded backend (das3-smoke, under a minute)
run:
	$(GO) run ./cmd/koala-emu run $(SCENARIO) --out $(OUT)/$(notdir $(basename $(SCENARIO)))

## test: unit tests, policies, actors, scenario validation, an end-to-end das3-smoke run; with -race
## Packages run one at a time (-p 1): the kernel-shaping tests create network namespaces,
## and concurrent namespace churn interrupts netlink dumps. launch/grid runs without -race:
## protoactor-go's remote endpoint manager has a data race of its own under node failure.
test:
	$(GO) test -race -count=1 -p 1 $$($(GO) list ./... | grep -v /launch/grid)
	$(GO) test -count=1 ./launch/grid/...

## fuzz: short runs of the fuzzers of the scenario loader and the SWF trace reader (CI runs them)
## Budgets are execution counts (about 20 s each here), not durations: with a duration, Go 1.26's
## fuzz coordinator can report "context deadline exceeded" at the end of a clean run
## (golang/go#75804, fixed in Go 1.27). FUZZTIME=30s (say) overrides all three.
FUZZ_LOAD   ?= 100000x
FUZZ_FIELDS ?= 50000x
FUZZ_READ   ?= 300000x
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(or $(FUZZTIME),$(FUZZ_LOAD)) -parallel 1 ./scenarios
	$(GO) test -run '^$$' -fuzz '^FuzzFields$$' -fuzztime $(or $(FUZZTIME),$(FUZZ_FIELDS)) -parallel 1 ./scenarios
	$(GO) test -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(or $(FUZZTIME),$(FUZZ_READ)) -fuzzminimizetime 200x -parallel 1 ./scenarios/swf

## integration: tests against real containers (root, Docker Engine, no registry needed):
## the container lifecycle (launch/docker, with -race), then the docker backend end to end
## (integration/: das3-smoke with 214 containers, calibrate, a killed node; without -race for
## the same upstream protoactor race as launch/grid). Kernel shaping in network namespaces
## runs in `make test` already (root-gated).
integration:
	TESTCONTAINERS_RYUK_DISABLED=true $(GO) test -race -count=1 -tags integration -timeout 30m ./launch/docker/...
	TESTCONTAINERS_RYUK_DISABLED=true $(GO) test -count=1 -tags integration -timeout 45m ./integration/...

## nightly: the long emulations, each with auto dilation and its fidelity verdict: DAS-3
## co-allocation (SPEC section 7) for prime, poisson (with the 17-minute wall budget its dilation
## needs, scenarios/das3-coalloc.yaml) and wave under wf and fcm, wave under ca
## and with Delft, the cluster-count study, and a report of them all (runs/report/report.html)
NIGHTLY_APPS ?= prime poisson wave
nightly: build
	@for app in $(NIGHTLY_APPS); do for pol in wf fcm; do \
	  budget=; [ $$app = poisson ] && budget="--wall-budget 17m"; \
	  $(BIN) run scenarios/das3-coalloc.yaml --app $$app --policy $$pol $$budget --out $(OUT)/coalloc-$$app-$$pol || exit 1; \
	done; done
	$(BIN) run scenarios/das3-coalloc.yaml --policy ca --out $(OUT)/coalloc-wave-ca
	$(BIN) run scenarios/das3-coalloc-delft.yaml --out $(OUT)/coalloc-delft-wave-fcm
	$(BIN) study cluster-count --out $(OUT)/cluster-count
	$(BIN) report $(OUT)/coalloc-* $(OUT)/cluster-count --out $(OUT)/report

## study: the cluster-count study on the embedded backend
study: build
	$(BIN) study cluster-count --out $(OUT)/cluster-count

## calibrate: measure every link of das3-coalloc against its target
calibrate: build
	$(BIN) calibrate scenarios/das3-coalloc.yaml --backend inproc

## bench-simgrid: the sim backend against SimGrid 3.32 (Debian python3-simgrid, installed when
## missing) on 1,000 rigid jobs, FCFS, 256 hosts: the same schedule, then both timed by farm-bench
bench-simgrid:
	bench/simgrid/run.sh

## model: regenerate the sim backend's shipped model file, measured on inproc (about 6 minutes)
model: build
	$(BIN) model learn --backend inproc --out launch/sim/models/inproc.json \
	  --commit "$$(git rev-parse --short HEAD)$$(git diff --quiet HEAD -- . ':!launch/sim/models' || echo +dirty)"

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/koala-emu

## build-sim: bin/koala-sim, the same commands with the inproc and sim backends only (-tags simonly):
## no container or netlink library, so a simulation starts faster (for sweeps of thousands of runs)
build-sim:
	CGO_ENABLED=0 $(GO) build -tags simonly -o bin/koala-sim ./cmd/koala-emu

## image: the one scratch image of the docker backend
image: build
	docker build -q -t koala-emu:dev -f docker/Dockerfile bin

## proto: regenerate the wire contract (needs protoc and protoc-gen-go)
proto:
	protoc --proto_path=actors/msg --go_out=actors/msg --go_opt=paths=source_relative actors/msg/*.proto

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration ./...
	$(GO) vet -tags simonly ./...

clean:
	rm -rf bin $(OUT)
