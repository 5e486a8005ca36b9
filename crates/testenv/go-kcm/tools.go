//go:build tools

// Package tools pins kube-controller-manager, built by the Stratus test environment from the
// same k8s.io/kubernetes release as its kube-apiserver.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
