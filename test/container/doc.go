// Package container tests reaper's container image in a real container runtime: it builds
// deploy/Containerfile with podman against base images made from scratch, runs the image over stdio
// and as an HTTP sidecar in a pod, in every containment mode a container can give it, plays
// deploy/kubernetes's Deployments with podman kube play, and checks from the host's /proc that
// nothing a session started survives its end.
//
// The tests need root, podman, runc, catatonit and busybox-static (.ci/run installs them); elsewhere
// they skip and say why. podman is configured only through CONTAINERS_CONF and
// CONTAINERS_STORAGE_CONF, pointing at files and storage in a temporary directory, so the machine's
// own podman setup is neither read nor changed.
//
// The tests are Linux-only; elsewhere the package has none.
package container
