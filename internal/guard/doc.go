// Package guard starts a guard's server, forwards signals to it and waits for it, with nothing but
// the operating system's interface, so that a guard can run from the program's earliest package
// initialisation and, as a rule, exit before the rest of the program initialises at all (see
// cmd/reaper/internal/early). What a guard does when its server left something behind lives in
// internal/instance (CleanUp).
//
// It imports no package that sorts after the module's own in Go's initialisation order and has work
// to do at initialisation: TestEarlyInitialisation in test/layout checks where it lands.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package guard
