// Package metrics keeps reaper's Prometheus metrics: it hears what the Reaper and the MCP server do
// through their Observer interfaces, reads the sessions' usage at scrape time, and serves the lot in
// the Prometheus text format.
//
// reaper and mcpserver know nothing of Prometheus; this package is the only one that imports its
// client library. Label values are bounded: no session or task id is ever a label, and what clients
// send (method and tool names) arrives already bounded by mcpserver.
//
// The package is Linux-only, as reaper is; elsewhere it holds only this documentation.
package metrics
