//go:build tools

// Package tools pins the helm CLI the Stratus chart tests run.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
