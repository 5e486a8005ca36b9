#!/usr/bin/env bash
# Regenerates src/csi.v1.rs from csi.proto of the CSI specification's Go module (fetched with
# `go mod download` into $STRATUS_CACHE; the .proto is not committed). Needs Go and cargo only:
# protox parses the proto, no system protoc.
set -euo pipefail
SPEC_VERSION="${SPEC_VERSION:-v1.13.0}"
MODULE=github.com/container-storage-interface/spec
here="$(cd "$(dirname "$0")" && pwd)"
cache="${STRATUS_CACHE:-$HOME/.cache/stratus}/go-csi-spec"
mkdir -p "$cache"
spec_dir="$(cd "$cache" && GOMODCACHE="$cache/mod" GOFLAGS=-modcacherw \
  go mod download -json "$MODULE@$SPEC_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
test -f "$spec_dir/csi.proto" || { echo "csi.proto not found in $spec_dir" >&2; exit 1; }
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/target}" \
  cargo run -q --manifest-path "$here/codegen/Cargo.toml" -- "$spec_dir/csi.proto" csi.v1.rs \
  "$here/src/csi.v1.rs" "csi.proto of the Go module $MODULE $SPEC_VERSION (CSI spec $SPEC_VERSION) by crates/csi-spec/regen.sh"
rustfmt --edition 2021 "$here/src/csi.v1.rs"
