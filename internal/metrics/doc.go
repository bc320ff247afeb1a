// Package metrics keeps reaper's Prometheus metrics: it counts the events it is told of, reads the
// sessions' usage, the Go runtime's and the process's figures at scrape time, and serves the lot in
// the Prometheus text format or OpenMetrics.
//
// It knows neither reaper nor mcpserver: its methods take plain values, and cmd/reaper adapts the
// Reaper's and the MCP server's Observer events to them from above. reaper and mcpserver know nothing
// of Prometheus. Label values are bounded: no session or task id is ever a label, and what clients
// send (method and tool names, protocol versions) arrives already bounded by mcpserver.
//
// It writes both formats itself, rather than through Prometheus's Go client: that library's package
// initialisation (its default registry's collectors, procfs's regular expressions, protobuf
// descriptors) ran in every reaper process, and a session starts three (guard, server, init): 0.6-0.8
// ms of CPU each. Its tests check the output against that library's, byte for byte.
//
// Lock order: Metrics.mu and each family's mu are leaves; neither is held while taking another.
//
// The package is Linux-only, as reaper is; elsewhere it holds only this documentation.
package metrics
