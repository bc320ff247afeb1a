package main

// The init of a session's PID namespace runs from the initialisation of package nsinit, and a
// guard's first part (its server's start, and as a rule its whole life) from package early's, before
// main.
import (
	_ "github.com/cgreaper/reaper/cmd/reaper/internal/early"
	_ "github.com/cgreaper/reaper/cmd/reaper/internal/nsinit"
)
