//go:build tools

// Package tools keeps the virtualization API in the module graph: controller-gen loads its
// packages to generate the CRDs.
package tools

import (
	_ "github.com/deckhouse/virtualization/api/core/v1alpha2"
)
