// Package guard starts the server of a guard process and forwards signals to it: the half of
// instance.Guard that must run before anything else, kept apart so that it needs no package that
// takes long to initialise (cmd/reaper starts the server from its earliest package initialisation).
// What the guard does when its server has ended lives in internal/instance.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package guard
