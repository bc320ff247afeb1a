// Package testutil holds what reaper's tests share: identifying the processes a test started, waiting
// for them to die, polling with generous deadlines, and running the test binary itself as a helper
// process in another namespace, under a seccomp filter or as another user.
//
// Only tests import it. It imports nothing of reaper's but internal/proc and internal/pidns (which
// imports internal/reap), so that every other package, cgroup included, can use it from its in-package
// tests. Its one lock, Buffer.mu, is a leaf.
//
// The package is Linux-only; elsewhere it is empty.
package testutil
