// Package fork is a guard's first step: from its package initialisation, as soon as package syscall
// is ready, it starts the guard's server (see internal/guard), before the time, os and os/signal
// packages and the rest of the guard's own initialise, which then run beside the server's start
// instead of before it. Package early takes the server it started (Server) and does the rest of a
// guard's work. Import it from early, and nowhere else.
//
// Package os, which holds os.Args, has not initialised when it runs, so it reads the command line
// from /proc/self/cmdline, which the kernel makes from the same arguments. It imports only packages
// that initialise before syscall does: TestEarlyInitialisation in test/layout checks where it lands.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package fork
