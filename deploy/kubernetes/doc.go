// Package kubernetes holds reaper's Kubernetes manifests (a native sidecar pod, and overlays for
// cgroup containment) and the test that decodes them strictly into the Kubernetes API types.
//
// It is a module of its own so that the Kubernetes and kustomize libraries the test needs stay out
// of reaper's module. Run its test from this directory: go test ./...
package kubernetes
