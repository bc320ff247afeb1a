// Package kubernetes holds reaper's Kubernetes manifests (an agent Deployment with reaper as its
// native sidecar, and overlays for cgroup containment), the test that decodes them strictly into the
// Kubernetes API types, and render, which prints what kustomize builds from them for the test that
// plays them in podman (test/container).
//
// It is a module of its own so that the Kubernetes and kustomize libraries stay out of reaper's
// module. Run its test from this directory: go test ./...
package kubernetes
