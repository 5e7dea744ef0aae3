# Spotter: build, test and verify. Every target installs what it needs.
SHELL := /usr/bin/env bash -o pipefail
GO ?= go
LINT := $(GO) tool -modfile=hack/tools/lint/go.mod golangci-lint
# Modules whose go.mod/go.sum `go mod tidy` must leave unchanged.
MODULES := . hack/tools/kube hack/tools/kube-oldest hack/tools/etcd hack/tools/capi hack/tools/helm hack/tools/lint hack/tools/promrules

.PHONY: all build kube-bin capi-bin helm-bin chromium test unit verify fmt lint tidy golden lab lab-down clean simulate image bench-summary

all: build

build: ## Build bin/spotter and bin/spotter-agent (-v: each package as it compiles, the first build's progress).
	$(GO) build -v -o bin/ ./cmd/spotter ./cmd/spotter-agent

kube-bin: ## Build the Kubernetes binaries the tests use, of today's minor and of the oldest the chart supports (cached; see hack/kube-bin.sh).
	bash hack/kube-bin.sh >/dev/null
	bash hack/kube-bin.sh --oldest >/dev/null

capi-bin: ## Build the Cluster API manager and CRDs the lab's Cluster API tests use (cached; see hack/capi-bin.sh).
	bash hack/capi-bin.sh >/dev/null

helm-bin: ## Build the helm command the chart tests use, from Helm's Go module (cached; see hack/helm-bin.sh).
	bash hack/helm-bin.sh >/dev/null

chromium: ## Install Debian's chromium for the report test of spotter simulate, if missing.
	bash hack/chromium.sh >/dev/null

empty :=
space := $(empty) $(empty)

# The packages with concurrency (drain, planner, controllers, coop) run their
# tests under the race detector, and only so.
RACE_PACKAGES := drain plan controller coop
TEST_ENV = SPOTTER_KUBE_BIN_DIR=$$(bash hack/kube-bin.sh --dir) SPOTTER_KUBE_OLDEST_BIN_DIR=$$(bash hack/kube-bin.sh --oldest --dir) SPOTTER_CAPI_BIN_DIR=$$(bash hack/capi-bin.sh --dir) SPOTTER_HELM_BIN_DIR=$$(bash hack/helm-bin.sh --dir)

test: kube-bin capi-bin helm-bin chromium ## Unit, integration and e2e tests, on real Kubernetes binaries and a headless browser; the race detector on the packages with concurrency.
	$(TEST_ENV) $(GO) test -count=1 -timeout 60m $$($(GO) list ./... | grep -v -E '^spotter.dev/spotter/internal/($(subst $(space),|,$(RACE_PACKAGES)))(/|$$)')
	$(TEST_ENV) $(GO) test -race -count=1 -timeout 30m $(foreach p,$(RACE_PACKAGES),./internal/$(p)/...)

bench-summary: ## Re-run the cheap rows of BENCHMARKS.md and print them beside the file's figures.
	$(GO) run ./hack/benchsummary

unit: ## Unit tests only (no apiserver).
	$(GO) test -short ./...

verify: fmt tidy ## Format, vet, lint and tidy checks; fails on a dirty tree.
	$(GO) vet ./...
	$(LINT) run ./...

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

tidy:
	@for m in $(MODULES); do \
		(cd $$m && $(GO) mod tidy -diff) || { echo "go mod tidy needed in $$m"; exit 1; }; \
	done

golden: helm-bin ## Rewrite golden files from the code (and the chart's schema, values reference and rendered manifests).
	UPDATE_GOLDEN=1 $(GO) test ./pkg/apis/config/... ./internal/sim/... ./internal/reference/... ./hack/chartschema/...
	UPDATE_GOLDEN=1 SPOTTER_HELM_BIN_DIR=$$(bash hack/helm-bin.sh --dir) $(GO) test ./test/e2e/ -run '^TestChartRender$$' -count=1

lab: build kube-bin ## Start a local lab (real control plane, kwok nodes).
	SPOTTER_KUBE_BIN_DIR=$$(bash hack/kube-bin.sh --dir) bin/spotter lab up

lab-down: build ## Stop the lab started by `make lab`.
	bin/spotter lab down

# `make image`: IMAGE_SOURCE is the images' org.opencontainers.image.source label
# (default: the git remote, else the module path); VERSION overrides git describe;
# SOURCE_DATE_EPOCH (from the environment) overrides the commit time.
IMAGE_SOURCE ?= $(shell git remote get-url origin 2>/dev/null || $(GO) list -m)

image: ## Build the OCI images of spotter and spotter-agent (linux/amd64 and linux/arm64) into bin/oci, without a container engine; PUSH=REPO pushes them to REPO/spotter and REPO/spotter-agent.
	$(GO) run ./hack/image --source '$(IMAGE_SOURCE)' $(if $(VERSION),--version '$(VERSION)') $(if $(PUSH),--push '$(PUSH)')

simulate: ## Run spotter simulate on the built-in scenario (report in spotter-report/).
	$(GO) run ./cmd/spotter simulate

clean:
	rm -rf bin/
