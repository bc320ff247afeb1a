// Package early does, from its package initialisation, what this program must do before its other
// packages are initialised (the MCP, JSON schema, metrics and cgroup libraries take most of a
// start-up): run as the init of a session's PID namespace, which a session's first command waits
// for, or, as the guard of reaper serve or reaper run, start the server, whose own start-up a client
// waits for. Import it for its side effect from the main package, and nowhere else.
//
// Go initialises a program's packages in dependency order, at each step the first one ready by import
// path (the specification's "Package initialization"): this one runs once its few imports are ready.
//
// The package is Linux-only; elsewhere it holds only this documentation.
package early
