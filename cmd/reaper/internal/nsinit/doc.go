// Package nsinit makes this program the init of a session's PID namespace when it was started as
// one (see pidinit.Main), from its package initialisation: a session's first command waits for that
// init, which needs none of the program's other packages. Import it for its side effect from the
// main package, and nowhere else.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package nsinit
