// Package early is the first part of a guard (reaper serve and reaper run as a user starts them),
// run from its package initialisation before the program's other packages initialise: it starts
// the server, forwards signals to it, waits for it and, when the server ended cleanly and left
// nothing behind, exits with its status. Most guards thus never initialise the MCP, JSON schema and
// other libraries at all, and the server, which the client waits for, starts within a millisecond
// of the guard. A server that crashed or left something comes back to main, which cleans up (see
// Ended). It also marks inherited descriptors close-on-exec, in the guard and in the server. Import it
// for its side effect from the main package, and nowhere else.
//
// Go initialises a program's packages in dependency order, at each step the first one ready by import
// path (the specification's "Package initialization"): this one runs once its few imports are ready,
// and imports only packages that are ready early (see internal/guard).
//
// The package is Linux-only; elsewhere it holds only this documentation.
package early
