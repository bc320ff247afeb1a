package main

// The init of a session's PID namespace and a guard's start of its server run from the
// initialisation of package early, before main.
import _ "github.com/cgreaper/reaper/cmd/reaper/internal/early"
