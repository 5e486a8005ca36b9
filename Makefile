# Stratus — build, test, demo and benchmarks. Caches live outside the clone (STRATUS_CACHE).
SHELL := /bin/bash
export STRATUS_CACHE ?= $(HOME)/.cache/stratus
export CARGO_TARGET_DIR ?= $(STRATUS_CACHE)/target
# No incremental caches: a clean clone (CI) gains nothing from them and they cost gigabytes.
export CARGO_INCREMENTAL ?= 0
CARGO ?= cargo
# Tests running at once in `make test` (each test its own process, across all test binaries).
TEST_JOBS ?= 4
NODES ?= 1000
# Idle window of bench-nodes in seconds (also STRATUS_BENCH_IDLE_SECONDS); ≥ 6 minutes covers a
# full re-list period.
IDLE ?= $(or $(STRATUS_BENCH_IDLE_SECONDS),390)
SERVICES ?= 100
LB_NODES ?= 100
CHURN ?= 20
SERVICE_SYNCS ?= 8
FAULT_NODES ?= 1000
FAULT_SERVICES ?= 50
THROTTLE ?= 0.3
THROTTLE_SECONDS ?= 30
OUTAGE_SECONDS ?= 60
# More stratus-bench-lb flags, e.g. LB_FLAGS="--ccm-log /tmp/ccm.log --node-churn-quiet-period 2s"
LB_FLAGS ?=
ECR_RUNS ?= 200
NTH_NOTICES ?= 50
NTH_NODES ?= 1000
OS_REFRESH ?= 20
OS_IDLE_PERIODS ?= 3

.PHONY: all install tools build lint unit test docs docs-check docs-tools demo bench bench-nodes bench-tagging bench-lb bench-openstack-lb bench-faults bench-ecr bench-nth bench-openstack-nodes bench-discoverer bench-dvp bench-capdvp bench-albc bench-csi bench-module bench-sidecars env-up env-down clean-env images e2e

all: test

## install: build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy (one Go build) and helm from their Go modules and the moto venv; apt-get xfsprogs when mkfs.xfs is missing (idempotent)
install:
	$(CARGO) run -q -p stratus-testenv --bin testenv -- install

## tools: also every tool only some suites use (Cluster API, csi-sanity, the CSI sidecars, Keystone,
## the virtualization CRDs, amazon-ec2-metadata-mock, crane, OpenTofu, machine-controller-manager), each one's build time printed
tools: install
	$(CARGO_TARGET_DIR)/debug/testenv install --all

build:
	$(CARGO) build --workspace --all-targets

## lint: rustfmt, clippy with warnings as errors, and the CCM library names no provider (no
## stratus-aws, no AWS SDK crate; aws-lc-rs is rustls's crypto, not AWS), and every application of a
## cloud uses its API crate, never its CCM provider (scripts/check-api-layers.sh); modules laid out
## and named by the conventions (scripts/check-layout.sh)
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	@if $(CARGO) tree -p stratus-ccm -e normal --prefix none | grep -E '^(stratus-aws |stratus-aws-api |aws-(sdk|config|types|smithy|runtime|sigv4|credential))'; then \
		echo "lint: stratus-ccm must not depend on a provider or an AWS SDK crate (see above)"; exit 1; fi
	@CARGO="$(CARGO)" scripts/check-api-layers.sh
	@scripts/check-layout.sh

## test: everything on a fresh machine — tools, lint, the docs' checks, unit, integration (real apiserver + moto),
## TEST_JOBS tests at once, the slowest of the last run first (testenv test)
## (the tools only some suites use build in the background, at low priority, while Rust compiles;
## a suite that needs one before it is ready waits for its lock; their log is tools.log in the cache)
test: install
	@set -e; \
	nice -n 10 $(CARGO_TARGET_DIR)/debug/testenv install --all > $(STRATUS_CACHE)/tools.log 2>&1 & tools=$$!; \
	trap 'kill $$tools 2>/dev/null || true' EXIT; \
	echo "test: on-demand tools building in the background (pid $$tools, log $(STRATUS_CACHE)/tools.log)"; \
	$(MAKE) --no-print-directory lint docs-check; \
	$(CARGO) build --workspace --bins; \
	status=0; $(CARGO_TARGET_DIR)/debug/testenv test --jobs $(TEST_JOBS) || status=$$?; \
	if wait $$tools; then echo "test: on-demand tools: $$(grep -c 'ready after' $(STRATUS_CACHE)/tools.log) ready"; \
	else echo "test: some on-demand tool failed to build:"; tail -20 $(STRATUS_CACHE)/tools.log; status=1; fi; \
	trap - EXIT; exit $$status

## e2e: the end-to-end suites alone (crates/e2e): each module's charts installed from images of this build
## on a real one-node cluster (kubelet, containerd, kube-proxy) inside a network namespace the test creates;
## `make test` runs them too
e2e: install
	$(CARGO) build --workspace --bins
	$(CARGO_TARGET_DIR)/debug/testenv test -p stratus-e2e --jobs 2

## demo: local control plane + emulated AWS, nodes initialised and retired by the CCM;
## CLOUD=openstack: real Keystone + the OpenStack simulators instead;
## MODULE=aws|openstack|dvp: the module chart installed, the module controller's StorageClasses and registration
## (OpenStack: Keystone and the simulators, expansion probed from Cinder; DVP: a parent cluster, a node group scaled to VMs through Cluster API)
demo: install
	$(CARGO) build -q -p cloud-controller-manager -p module-controller -p cloud-data-discoverer -p capdvp-controller-manager -p ebs-csi-driver -p cinder-csi-plugin -p dvp-csi-driver -p stratus-scenarios
	$(CARGO_TARGET_DIR)/debug/$(if $(MODULE),stratus-demo-module $(MODULE),$(if $(filter openstack,$(CLOUD)),stratus-demo-openstack,stratus-demo))

## bench-nodes: NODES uninitialised nodes (default 1000) kept Ready, IDLE idle seconds after init, JSON report (release build)
bench-nodes: install
	$(CARGO) build -q --release -p cloud-controller-manager -p stratus-bench --bin cloud-controller-manager --bin stratus-bench-nodes
	mkdir -p bench/results
	set -o pipefail; $(CARGO_TARGET_DIR)/release/stratus-bench-nodes --nodes $(NODES) --idle-seconds $(IDLE) | tee bench/results/bench-nodes.json

## bench-tagging: bench-nodes with the tagging controller on (TAGS): CreateTags/DeleteTags calls of NODES joining nodes and of TAG_IDLE idle seconds (JSON, release build)
TAGS ?= team=platform,cost-center=1234
TAG_IDLE ?= 120
bench-tagging: install
	$(CARGO) build -q --release -p cloud-controller-manager -p stratus-bench --bin cloud-controller-manager --bin stratus-bench-nodes
	mkdir -p bench/results
	set -o pipefail; $(CARGO_TARGET_DIR)/release/stratus-bench-nodes --nodes $(NODES) --idle-seconds $(TAG_IDLE) --tags $(TAGS) | tee bench/results/bench-tagging.json

## bench-lb: SERVICES LoadBalancer Services on LB_NODES ready nodes, then CHURN nodes join (JSON, release build)
bench-lb: install
	$(CARGO) build -q --release -p cloud-controller-manager -p stratus-bench --bin cloud-controller-manager --bin stratus-bench-lb
	mkdir -p bench/results
	set -o pipefail; $(CARGO_TARGET_DIR)/release/stratus-bench-lb --services $(SERVICES) --nodes $(LB_NODES) --churn $(CHURN) --concurrent-service-syncs $(SERVICE_SYNCS) $(LB_FLAGS) | tee bench/results/bench-lb.json

## bench-openstack-lb: OS_SERVICES Octavia load balancers on OS_NODES nodes, OS_DELAY_MS per provisioning transition, then one node joins (JSON, release build)
OS_SERVICES ?= 100
OS_NODES ?= 50
OS_DELAY_MS ?= 2000
bench-openstack-lb: install
	$(CARGO) build -q --release -p cloud-controller-manager -p stratus-bench --bin stratus-bench-openstack-lb --bin cloud-controller-manager
	mkdir -p bench/results
	set -o pipefail; $(CARGO_TARGET_DIR)/release/stratus-bench-openstack-lb --services $(OS_SERVICES) --nodes $(OS_NODES) --transition-ms $(OS_DELAY_MS) | tee bench/results/bench-openstack-lb.json

## bench-faults: FAULT_NODES nodes join and FAULT_SERVICES ELBs are made while THROTTLE of EC2/ELB requests are throttled for THROTTLE_SECONDS, then AWS is unreachable for OUTAGE_SECONDS (JSON + SVG)
bench-faults: install
	$(CARGO) build -q --release -p cloud-controller-manager -p stratus-bench --bin cloud-controller-manager --bin stratus-bench-faults
	mkdir -p bench/results
	set -o pipefail; $(CARGO_TARGET_DIR)/release/stratus-bench-faults --nodes $(FAULT_NODES) --services $(FAULT_SERVICES) --throttle-rate $(THROTTLE) --throttle-seconds $(THROTTLE_SECONDS) --outage-seconds $(OUTAGE_SECONDS) --svg bench/results/bench-faults.svg | tee bench/results/bench-faults.json

## bench: every benchmark (nodes, load balancers, faults, ECR credential provider); JSON and SVG in bench/results/
bench: bench-nodes bench-tagging bench-lb bench-faults bench-ecr bench-nth bench-openstack-nodes bench-openstack-lb bench-discoverer bench-csi bench-module bench-sidecars

## bench-ecr: ecr-credential-provider cold and cached invocation latency and peak RSS, ECR_RUNS per phase (JSON, release build)
# (no install prerequisite: the benchmark installs moto on demand; only the two binaries are built)
bench-ecr:
	$(CARGO) build -q --release -p ecr-credential-provider -p stratus-bench --bin ecr-credential-provider --bin stratus-bench-ecr
	mkdir -p bench/results
	set -o pipefail; $(CARGO_TARGET_DIR)/release/stratus-bench-ecr --runs $(ECR_RUNS) | tee bench/results/bench-ecr.json

## bench-nth: node-termination-handler: IMDS notice-to-cordon latency over NTH_NOTICES notices (real AEMM), queue mode with NTH_NODES messages and nodes, idle RSS (JSON, release build)
bench-nth: install
	$(CARGO) build -q --release -p node-termination-handler -p stratus-bench --bin node-termination-handler --bin stratus-bench-nth
	mkdir -p bench/results
	set -o pipefail; $(CARGO_TARGET_DIR)/release/stratus-bench-nth --notices $(NTH_NOTICES) --nodes $(NTH_NODES) | tee bench/results/bench-nth.json

## bench-albc: aws-load-balancer-controller (ALBC_SCENARIO ingress|tgb|both): ALBC_INGRESSES Ingresses in ALBC_GROUPS groups, and/or ALBC_BINDINGS TargetGroupBindings, over ALBC_ENDPOINTS pod endpoints, then ALBC_CHANGES endpoint changes in 10 s; hostnames, ELBv2 requests and peak RSS (JSON, release build)
ALBC_SCENARIO ?= both
ALBC_INGRESSES ?= 50
ALBC_GROUPS ?= 10
ALBC_BINDINGS ?= 10
ALBC_ENDPOINTS ?= 200
ALBC_CHANGES ?= 500
bench-albc: install
	$(CARGO) build -q --release -p aws-load-balancer-controller -p stratus-bench --bin aws-load-balancer-controller --bin stratus-bench-albc
	mkdir -p bench/results
	set -o pipefail; $(CARGO_TARGET_DIR)/release/stratus-bench-albc --scenario $(ALBC_SCENARIO) --ingresses $(ALBC_INGRESSES) --groups $(ALBC_GROUPS) --bindings $(ALBC_BINDINGS) --endpoints $(ALBC_ENDPOINTS) --changes $(ALBC_CHANGES) | tee bench/results/bench-albc.json

## bench-csi: CSI_VOLUMES PVCs per backend (CSI_BACKEND ebs|cinder|both) provisioned and attached through the real external-provisioner and external-attacher: seconds, cloud requests per volume, controller, sidecar and node plugin RSS, deletion (JSON, release build)
CSI_VOLUMES ?= 200
CSI_BACKEND ?= both
bench-csi: install
	$(CARGO) build -q --release -p ebs-csi-driver -p cinder-csi-plugin -p stratus-bench --bin ebs-csi-driver --bin cinder-csi-plugin --bin stratus-bench-csi
	mkdir -p bench/results
	set -o pipefail; $(CARGO_TARGET_DIR)/release/stratus-bench-csi --volumes $(CSI_VOLUMES) --backend $(CSI_BACKEND) | tee bench/results/bench-csi.json

## bench-sidecars: the release csi-node-driver-registrar and csi-livenessprobe against a fake CSI driver, registered as the kubelet does, SIDECAR_PROBES /healthz requests each: seconds and peak RSS (JSON); the CSI charts size the sidecars from it
SIDECAR_PROBES ?= 2000
bench-sidecars:
	$(CARGO) build -q --release -p csi-node-driver-registrar -p csi-livenessprobe --bin csi-node-driver-registrar --bin csi-livenessprobe
	$(CARGO) build -q --release -p stratus-bench --bin stratus-bench-sidecars
	mkdir -p bench/results
	set -o pipefail; $(CARGO_TARGET_DIR)/release/stratus-bench-sidecars --probes $(SIDECAR_PROBES) --registrar $(CARGO_TARGET_DIR)/release/csi-node-driver-registrar --livenessprobe $(CARGO_TARGET_DIR)/release/csi-livenessprobe | tee bench/results/bench-sidecars.json

## bench-openstack-nodes: NODES servers and uninitialised Nodes with --cloud-provider=openstack, then OS_IDLE_PERIODS idle cache refreshes of OS_REFRESH seconds (JSON, release build)
bench-openstack-nodes: install
	$(CARGO) build -q --release -p cloud-controller-manager -p stratus-bench --bin cloud-controller-manager --bin stratus-bench-openstack-nodes
	mkdir -p bench/results
	set -o pipefail; $(CARGO_TARGET_DIR)/release/stratus-bench-openstack-nodes --nodes $(NODES) --refresh-seconds $(OS_REFRESH) --idle-periods $(OS_IDLE_PERIODS) | tee bench/results/bench-openstack-nodes.json

## bench-dvp: DVP_NODES VMs in the parent cluster and uninitialised Nodes with --cloud-provider=dvp (seconds, parent VM requests, RSS), then DVP_LB_SERVICES LoadBalancer Services (lag from parent to tenant ingress) (JSON, release build)
DVP_NODES ?= 500
DVP_LB_SERVICES ?= 50
bench-dvp: install
	$(CARGO) build -q --release -p cloud-controller-manager -p stratus-bench --bin cloud-controller-manager --bin stratus-bench-dvp
	mkdir -p bench/results
	set -o pipefail; $(CARGO_TARGET_DIR)/release/stratus-bench-dvp --nodes $(DVP_NODES) --lb-services $(DVP_LB_SERVICES) | tee bench/results/bench-dvp.json

## bench-capdvp: a MachineDeployment scaled 0 -> CAPDVP_MACHINES under the real Cluster API manager: seconds to all machines ready, capdvp's parent requests per machine, peak RSS (JSON, release build)
CAPDVP_MACHINES ?= 100
bench-capdvp: install
	$(CARGO) build -q --release -p capdvp-controller-manager -p stratus-bench --bin capdvp-controller-manager --bin stratus-bench-capdvp
	mkdir -p bench/results
	set -o pipefail; $(CARGO_TARGET_DIR)/release/stratus-bench-capdvp --machines $(CAPDVP_MACHINES) --binary $(CARGO_TARGET_DIR)/release/capdvp-controller-manager | tee bench/results/bench-capdvp.json

## bench-module: module-controller (release) over a real apiserver with MODULE_NODES Nodes, MODULE_SPOT of them spot-tainted: seconds to every class, registration and mark, Kubernetes writes (first pass, then MODULE_IDLE idle seconds), peak RSS (JSON)
MODULE_NODES ?= 1000
MODULE_SPOT ?= 100
MODULE_IDLE ?= 60
bench-module: install
	$(CARGO) build -q --release -p module-controller -p stratus-bench --bin module-controller --bin stratus-bench-module
	mkdir -p bench/results
	set -o pipefail; $(CARGO_TARGET_DIR)/release/stratus-bench-module --nodes $(MODULE_NODES) --spot $(MODULE_SPOT) --idle-seconds $(MODULE_IDLE) --binary $(CARGO_TARGET_DIR)/release/module-controller | tee bench/results/bench-module.json

## bench-discoverer: cloud-data-discoverer's first run against moto with DISCOVERER_VOLUMES EBS volumes: cloud requests, seconds, peak RSS (JSON, the shipped release-min build);
## DISCOVERER_CLOUD=openstack: Keystone + the simulators with 500 more flavors, 200 more images and DISCOVERER_VOLUMES Cinder volumes
DISCOVERER_VOLUMES ?= 1000
DISCOVERER_CLOUD ?= aws
bench-discoverer: install
	$(CARGO) build -q --profile release-min -p cloud-data-discoverer --bin cloud-data-discoverer
	$(CARGO) build -q --release -p stratus-bench --bin stratus-bench-discoverer
	mkdir -p bench/results
	set -o pipefail; $(CARGO_TARGET_DIR)/release/stratus-bench-discoverer --cloud $(DISCOVERER_CLOUD) --binary $(CARGO_TARGET_DIR)/release-min/cloud-data-discoverer --volumes $(DISCOVERER_VOLUMES) | tee bench/results/bench-discoverer$(if $(filter openstack,$(DISCOVERER_CLOUD)),-openstack).json

## images: release binaries as OCI archives (server binaries) and tarballs (node binaries) with
## manifest.json in IMAGES_DIR, no Docker daemon; --version and the image labels carry the
## version, git revision and build date given here (the binary list is crates/images/src/table.rs)
IMAGES_DIR ?= dist/images
images:
	export STRATUS_GIT_REVISION=$$(git rev-parse HEAD 2>/dev/null || echo unknown) \
		STRATUS_BUILD_DATE=$$(date -u +%Y-%m-%dT%H:%M:%SZ) && \
	$(CARGO) build -q --release -p stratus-images --bin stratus-images && \
	$(CARGO) build --release --bins $$($(CARGO_TARGET_DIR)/release/stratus-images --print-cargo-packages release) && \
	$(CARGO) build --profile release-min --bins $$($(CARGO_TARGET_DIR)/release/stratus-images --print-cargo-packages release-min) && \
	$(CARGO_TARGET_DIR)/release/stratus-images --target-dir $(CARGO_TARGET_DIR) --out $(IMAGES_DIR)

## env-up / env-down: keep a test environment running for manual work (source .stratus/env/env);
## CLOUD=openstack starts Keystone and the OpenStack simulators instead of moto
CLOUD ?= aws
env-up: install
	$(CARGO) run -q -p stratus-testenv --bin testenv -- up --dir .stratus/env --cloud $(CLOUD)

env-down:
	$(CARGO) run -q -p stratus-testenv --bin testenv -- down --dir .stratus/env

## docs-tools: mdBook, built once from crates.io at an exact version into $(STRATUS_CACHE)/tools
## (the path carries the version: a warm run finds the binary and does nothing)
MDBOOK_VERSION := 0.5.4
MDBOOK_ROOT := $(STRATUS_CACHE)/tools/mdbook-$(MDBOOK_VERSION)
export STRATUS_MDBOOK := $(MDBOOK_ROOT)/bin/mdbook
docs-tools: $(STRATUS_MDBOOK)
$(STRATUS_MDBOOK):
	@mkdir -p $(STRATUS_CACHE)/tools && exec 9>$(STRATUS_CACHE)/tools/mdbook.lock && flock 9 || exit 1; \
	if [ -x $@ ]; then exit 0; fi; \
	echo "docs-tools: building mdbook $(MDBOOK_VERSION) from crates.io into $(MDBOOK_ROOT) (once; cargo prints each crate it compiles)"; \
	start=$$(date +%s); \
	rm -rf $(MDBOOK_ROOT).build && \
	$(CARGO) install mdbook --version =$(MDBOOK_VERSION) --locked --no-default-features --features search \
		--root $(MDBOOK_ROOT).build --target-dir $(STRATUS_CACHE)/tools/mdbook-target && \
	$(MDBOOK_ROOT).build/bin/mdbook --version | grep -qx "mdbook v$(MDBOOK_VERSION)" && \
	rm -rf $(MDBOOK_ROOT) && mv $(MDBOOK_ROOT).build $(MDBOOK_ROOT) && \
	rm -rf $(STRATUS_CACHE)/tools/mdbook-target && \
	echo "docs-tools: mdbook $(MDBOOK_VERSION) built in $$(( $$(date +%s) - start )) s"

## docs: regenerate docs/src/performance.md from bench/results/*.json, then render the book into docs/book
docs: docs-tools
	$(CARGO) run -q -p stratus-docs-check --bin docs-gen
	$(STRATUS_MDBOOK) build docs

## docs-check: the generated page is current, the crate table matches cargo metadata, every link and
## anchor resolves, the README stays a front door, and mdbook builds without a warning
docs-check: docs-tools
	$(CARGO) test -q -p stratus-docs-check
