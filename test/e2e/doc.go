// Package e2e tests the reaper binary end to end: it builds cmd/reaper, starts it over stdio and over
// Streamable HTTP, and drives it with the MCP SDK's client, checking in /proc that every process a
// session started is gone when the session ends.
//
// The tests are Linux-only; elsewhere the package has none.
package e2e
