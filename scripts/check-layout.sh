#!/usr/bin/env bash
# check-layout.sh: the module layout and the role names of the conventions
# (docs/src/development/adding.md#conventions). A module with children is `dir/mod.rs`, never
# `dir.rs` beside `dir/`; the pure decision is `plan`, the I/O that executes it `driver` (not
# `model`, `apply` or `reconcile`; `controller` only for a CSI driver's Controller service).
# Simulators (crates/sims) keep `model` for the state they simulate. Run by `make lint`.
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
fail() {
    echo "lint: $*" >&2
    status=1
}

while IFS= read -r dir; do
    if [ -f "$dir.rs" ]; then
        fail "$dir.rs beside $dir/: move it to $dir/mod.rs"
    fi
done < <(find crates bins -name target -prune -o -type d -print)

while IFS= read -r file; do
    fail "$file: name the pure decision plan.rs and the I/O that executes it driver.rs"
done < <(find crates bins -name target -prune -o -type f \
    \( -name model.rs -o -name apply.rs -o -name reconcile.rs \) -print | grep -v '^crates/sims/' || true)

while IFS= read -r file; do
    fail "$file: controller.rs is the CSI Controller service only; name a controller loop driver.rs"
done < <(find crates bins -name target -prune -o -type f -name controller.rs -print |
    grep -v '^crates/csi[^/]*/' || true)

if [ "$status" -eq 0 ]; then
    echo "lint: module layout and role names clean"
fi
exit "$status"
