//go:build tools

// Package tools pins the binaries the Stratus test environment builds: etcd and the Kubernetes
// components of one release, built together in one `go build` so they share compiled packages.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
