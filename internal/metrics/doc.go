// Package metrics keeps reaper's Prometheus metrics: it counts the events it is told of, reads the
// sessions' usage at each scrape, and serves them with the Go runtime's and the process's own through
// Prometheus's Go client.
//
// It knows neither reaper nor mcpserver: its methods take plain values, and cmd/reaper adapts the
// Reaper's and the MCP server's Observer events to them from above. reaper and mcpserver know nothing
// of Prometheus. Label values are bounded: no session or task id is ever a label, and what clients
// send (method and tool names, protocol versions) arrives already bounded by mcpserver; what is not
// valid UTF-8 is mended here, since the client refuses such a label value.
//
// Lock order: usageCollector.mu is a leaf, never held while the usage is read; the client's locks
// are its own.
package metrics
