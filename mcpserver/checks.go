package mcpserver

import (
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The checks the SDK's handler makes before it acts on a request are made again in front of the
// session front (see HTTPHandler): the front acts first (a DELETE's teardown, a request counted as
// activity on the idle lease), so a request the SDK would refuse must not get that far. Host and
// Origin are checked by httpguard.CheckHost and httpguard.CheckOrigin, as the admin endpoint's are.

const protocolVersionHeader = "Mcp-Protocol-Version"

// firstSessionlessVersion is the protocol version from which the SDK lets any version through its
// header check (it answers those requests itself).
const firstSessionlessVersion = "2026-07-28"

// publishedVersions are the protocol versions the SDK speaks, read once: the SDK copies its list on
// every call, and every request looks at it. Never modified.
var publishedVersions = mcp.SupportedProtocolVersions()

// supportedVersion reports whether the SDK accepts a request's MCP-Protocol-Version header.
func supportedVersion(v string) bool {
	return v == "" || v >= firstSessionlessVersion || slices.Contains(publishedVersions, v)
}
