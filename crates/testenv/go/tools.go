//go:build tools

// Package tools pins the binaries the Stratus test environment builds: etcd and the Kubernetes
// components of one release (the control plane, and the node's kubelet and kube-proxy for the
// real-cluster suites), built together in one `go build` so they share compiled packages.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
