// Package pidwire is the protocol between reaper's server and the init of a session's PID namespace
// (internal/pidns on the server's side, internal/pidinit in the init): how the init is started, the
// messages on the socket they share, and their encoding.
//
// So that the init, which uses it, runs before the program's other libraries initialise (see
// cmd/reaper/internal/nsinit), it imports only packages that Go's initialisation order reaches
// early: package syscall and the standard library's most basic ones. Go initialises packages in
// lexical order of import path among those whose imports are done, so a dependency on fmt,
// encoding/binary, strings or x/sys/unix (each done only after reflection, or after the
// cryptography packages, whose paths sort before this module's) would put the init behind about
// forty packages' initialisation. TestEarlyInitialisation in test/layout checks where it lands.
//
// The package is Linux-only; elsewhere it is empty.
package pidwire
