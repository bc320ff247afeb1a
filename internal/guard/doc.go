// Package guard starts a guard's server, forwards signals to it and waits for it, with nothing but
// the operating system's interface, so that a guard can run from the program's earliest package
// initialisation and, as a rule, exit before the rest of the program initialises at all (see
// cmd/reaper/internal/early). What a guard does when its server left something behind lives in
// internal/instance (CleanUp).
//
// It imports package syscall and nothing that initialises after it (package os above all), so that
// a guard starts its server as soon as syscall is ready (cmd/reaper/internal/early/fork):
// TestEarlyInitialisation in test/layout checks where that lands.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package guard
