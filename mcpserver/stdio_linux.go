package mcpserver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport returns the transport for serving one client over in and out (stdin and stdout):
// newline-delimited JSON-RPC, as mcp.IOTransport, except for a message longer than MaxRequestBytes.
// The SDK's transport ends the whole connection there; this one discards the message, answers it with
// a JSON-RPC error that names the limit (when the message is a request whose id can be read) and goes
// on, as the HTTP handler answers an oversized body with 413 and goes on serving. Closing the transport
// closes neither in nor out.
func (s *Server) StdioTransport(in io.Reader, out io.Writer) mcp.Transport {
	w := &lockedWriter{w: out}
	r := &lineReader{src: bufio.NewReaderSize(in, 64<<10), limit: MaxRequestBytes}
	r.refuse = func(size int64, id json.RawMessage) {
		s.log.Warn("stdio message over the size limit refused", "bytes", size, "limit", MaxRequestBytes, "id", string(id))
		if id == nil {
			return // a notification, or no id could be read: nothing to answer
		}
		msg, _ := json.Marshal(map[string]any{
			"jsonrpc": "2.0",
			"id":      id,
			"error": map[string]any{
				"code": codeInvalidRequest,
				"message": fmt.Sprintf("message of %d bytes refused: the limit is %d bytes (%s) per message; nothing of it was run. Put large inputs in files, with several smaller commands",
					size, MaxRequestBytes, byteString(MaxRequestBytes)),
			},
		})
		w.Write(append(msg, '\n'))
	}
	return &mcp.IOTransport{Reader: r, Writer: w, MaxLineLength: -1} // lineReader enforces the limit
}
