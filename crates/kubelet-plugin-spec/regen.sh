#!/usr/bin/env bash
# Regenerates src/pluginregistration.rs from pkg/apis/pluginregistration/v1/api.proto of the Go
# module k8s.io/kubelet (fetched with `go mod download` into $STRATUS_CACHE; the .proto is not
# committed). Needs Go and cargo only: protox parses the proto, no system protoc.
set -euo pipefail
KUBELET_VERSION="${KUBELET_VERSION:-v0.34.4}"
MODULE=k8s.io/kubelet
here="$(cd "$(dirname "$0")" && pwd)"
cache="${STRATUS_CACHE:-$HOME/.cache/stratus}/go-kubelet-plugin"
mkdir -p "$cache"
module_dir="$(cd "$cache" && GOMODCACHE="$cache/mod" GOFLAGS=-modcacherw \
  go mod download -json "$MODULE@$KUBELET_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
proto="$module_dir/pkg/apis/pluginregistration/v1/api.proto"
test -f "$proto" || { echo "api.proto not found at $proto" >&2; exit 1; }
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/target}" \
  cargo run -q --manifest-path "$here/../csi-spec/codegen/Cargo.toml" -- "$proto" pluginregistration.rs \
  "$here/src/pluginregistration.rs" "pkg/apis/pluginregistration/v1/api.proto of the Go module $MODULE $KUBELET_VERSION by crates/kubelet-plugin-spec/regen.sh"
rustfmt --edition 2021 "$here/src/pluginregistration.rs"
