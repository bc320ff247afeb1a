package main

// The init of a session's PID namespace runs from the initialisation of package nsinit, before main.
import _ "github.com/cgreaper/reaper/cmd/reaper/internal/nsinit"
