#!/usr/bin/env bash
# check-api-layers.sh: every application of a cloud depends on that cloud's API crate, never on
# its CCM provider crate (docs/src/architecture.md, "One API layer per cloud"). For each rule
# below, `cargo tree -e normal` of the application must not list the provider package.
# Run by `make lint`; CARGO overrides the cargo command.
set -euo pipefail

cargo_cmd=${CARGO:-cargo}

# application package  forbidden package (a CCM provider)  the API crate to use instead
rules=(
    "stratus-albc  stratus-aws  stratus-aws-api"
    "stratus-termination  stratus-aws  stratus-aws-api"
    "stratus-csi-ebs  stratus-aws  stratus-aws-api"
    "stratus-discoverer  stratus-aws  stratus-aws-api"
    "stratus-ecr  stratus-aws  stratus-aws-api"
    "ecr-credential-provider  stratus-aws  stratus-aws-api"
    "stratus-csi-cinder  stratus-openstack  stratus-openstack-api"
    "stratus-discoverer  stratus-openstack  stratus-openstack-api"
)

status=0
for rule in "${rules[@]}"; do
    read -r app forbidden instead <<<"$rule"
    tree=$($cargo_cmd tree -p "$app" -e normal --prefix none)
    # `--prefix none` prints "name vX.Y.Z (path)": the space keeps `stratus-openstack-api` apart.
    if grep -q "^$forbidden " <<<"$tree"; then
        echo "lint: $app depends on the provider crate $forbidden; depend on $instead" \
            "instead. The path to it:" >&2
        $cargo_cmd tree -p "$app" -e normal -i "$forbidden" >&2 || true
        status=1
    fi
done
if [ "$status" -eq 0 ]; then
    echo "lint: API layers clean (${#rules[@]} rules)"
fi
exit "$status"
