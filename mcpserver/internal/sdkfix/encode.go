package sdkfix

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EncodeOnce is receiving middleware that hands the SDK tools/call results in a form it encodes
// with one pass less per layer (see wireResult). Results of another shape go out as they are.
//
// A tool result of reaper's carries a command's output twice, in its text and its structured
// content. The SDK encodes a result in layers (the text content's MarshalJSON, CallToolResult's, the
// response's json.RawMessage, the JSON-RPC message), and encoding/json re-reads and compacts the
// output of each: four passes over the text, three over the structured content, most of the
// server's CPU for 1 MB results. A result with 24 KB of output took 0.78 ms to encode, 0.32 ms
// through EncodeOnce; of 1 MB, 22.9 and 9.2 ms (BenchmarkResultEncoding, go-sdk v1.8.0). Waits for:
// the SDK's results encoding themselves without a MarshalJSON per layer (json/v2's MarshalJSONTo
// would do); nothing is filed. Delete this file and its middleware when it lands.
func EncodeOnce(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.CallToolResult); ok && err == nil {
			if w := newWireResult(r); w != nil {
				return w, nil
			}
		}
		return res, err
	}
}

// wireResult is a CallToolResult that encoding/json encodes by reflection rather than through
// CallToolResult.MarshalJSON: the same object, key for key and in order, but for the strings, written
// without escaping <, > and & for HTML (as the message around them is).
//
// The embedded CallToolResult gives it the methods of mcp.Result, and the SDK's unexported ones it
// calls after the handler (the result type, _meta), which change the embedded result that _meta and
// resultType read when encoded. noMarshal, embedded at the same depth, makes MarshalJSON ambiguous,
// which keeps CallToolResult's out of wireResult's method set.
type wireResult struct {
	*mcp.CallToolResult `json:"-"`
	//lint:ignore U1000 embedded for its effect on the method set, never read (see above)
	noMarshal `json:"-"`

	MetaField       metaOf      `json:"_meta,omitzero"`
	ContentField    []textBlock `json:"content"`
	StructuredField any         `json:"structuredContent,omitempty"`
	IsErrorField    bool        `json:"isError,omitempty"`
	ResultTypeField resultType  `json:"resultType,omitzero"`
}

// newWireResult returns r as a wireResult, or nil when r has anything wireResult does not encode as
// the SDK would: content other than one plain text block, no structured content, input requests.
func newWireResult(r *mcp.CallToolResult) *wireResult {
	if len(r.Content) != 1 || r.StructuredContent == nil || r.InputRequests != nil {
		return nil
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok || tc.Meta != nil || tc.Annotations != nil {
		return nil
	}
	return &wireResult{
		CallToolResult:  r,
		MetaField:       metaOf{r},
		ContentField:    []textBlock{{Type: "text", Text: tc.Text}},
		StructuredField: r.StructuredContent,
		IsErrorField:    r.IsError,
		ResultTypeField: resultType{r: r, read: &readType{}},
	}
}

// noMarshal only hides CallToolResult.MarshalJSON (see wireResult); it is never called.
//
//lint:ignore U1000 its method's name makes wireResult's promoted MarshalJSON ambiguous
type noMarshal struct{}

//lint:ignore U1000 never called: its name hides CallToolResult's (see wireResult)
func (noMarshal) MarshalJSON() ([]byte, error) { panic("noMarshal.MarshalJSON called") }

// textBlock is mcp.TextContent as the SDK writes it when it has neither _meta nor annotations.
type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// metaOf writes the result's _meta as it is when the result is encoded (the SDK may add to it after
// the handler returns).
type metaOf struct{ r *mcp.CallToolResult }

func (m metaOf) IsZero() bool                 { return len(m.r.Meta) == 0 }
func (m metaOf) MarshalJSON() ([]byte, error) { return json.Marshal(map[string]any(m.r.Meta)) }

// resultType writes the result's resultType, which the SDK sets in an unexported field after the
// handler returns (protocol 2026-07-28), as read back from its encoding of the result without its
// content, once: encoding/json asks IsZero and then MarshalJSON, and the first read is kept in read.
type resultType struct {
	r    *mcp.CallToolResult
	read *readType // shared by the copies encoding/json makes of the field
}

type readType struct {
	done  bool
	value string
}

func (t resultType) IsZero() bool { return t.value() == "" }

func (t resultType) MarshalJSON() ([]byte, error) { return json.Marshal(t.value()) }

func (t resultType) value() string {
	if t.read.done {
		return t.read.value
	}
	t.read.done = true
	bare := *t.r
	bare.Meta, bare.Content, bare.StructuredContent = nil, nil, nil
	b, err := bare.MarshalJSON()
	if err != nil {
		return ""
	}
	var v struct {
		ResultType string `json:"resultType"`
	}
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	t.read.value = v.ResultType
	return v.ResultType
}
