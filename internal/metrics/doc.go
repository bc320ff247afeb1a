// Package metrics keeps reaper's Prometheus metrics: it counts the events it is told of, reads the
// sessions' usage at scrape time, and serves the lot in the Prometheus text format.
//
// It knows neither reaper nor mcpserver: its methods take plain values, and cmd/reaper adapts the
// Reaper's and the MCP server's Observer events to them from above. reaper and mcpserver know nothing
// of Prometheus; this package is the only one that imports its client library. Label values are
// bounded: no session or task id is ever a label, and what clients send (method and tool names)
// arrives already bounded by mcpserver.
//
// The package holds no lock of its own (the client library's are its own).
//
// The package is Linux-only, as reaper is; elsewhere it holds only this documentation.
package metrics
