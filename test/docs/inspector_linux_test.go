package docs

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/testutil"
)

// inspectorCLI is how docs/clients/mcp-inspector.md starts the Inspector's CLI.
const inspectorCLI = "npx @modelcontextprotocol/inspector --cli "

// inspector returns the Inspector's command (mcp-inspector, the package's, as `npm i -g
// @modelcontextprotocol/inspector` installs it) or skips the test where it is missing or where
// Node is older than the Inspector v2 needs. The tests do not install it: npx would fetch it from
// the registry.
func inspector(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("mcp-inspector")
	if err != nil {
		t.Skip("skipped: the MCP Inspector is not installed (npm i -g @modelcontextprotocol/inspector, with Node 22.19 or later)")
	}
	out, err := exec.Command("node", "--version").Output()
	m := regexp.MustCompile(`^v(\d+)\.(\d+)`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Skipf("skipped: the MCP Inspector is installed, but node --version says %q (%v)", out, err)
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	if major < 22 || major == 22 && minor < 19 {
		t.Skipf("skipped: the MCP Inspector v2 needs Node 22.19 or later; node is %s", strings.TrimSpace(string(out)))
	}
	return path
}

// TestInspector runs the CLI commands of docs/clients/mcp-inspector.md as written, with the binary
// under test as reaper, against its stdio server and an HTTP server of its own, and checks the
// answers: the tools listed, `echo hello` run, a workspace opened.
func TestInspector(t *testing.T) {
	cli := inspector(t)
	testutil.RemoveIfNew(t, instance.DefaultStateDir()) // the stdio commands run reaper with its defaults
	const token = "docs-inspector-token"
	url := startHTTP(t, token)
	path := filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")
	ran := 0
	for _, b := range blocks(t, "docs/clients/mcp-inspector.md") {
		if b.lang != "sh" {
			continue
		}
		for _, cmd := range commands(b.text) {
			if !strings.HasPrefix(cmd, inspectorCLI) {
				continue
			}
			line := strings.Replace(cmd, "npx @modelcontextprotocol/inspector", `"$INSPECTOR"`, 1)
			line = strings.ReplaceAll(line, "http://127.0.0.1:8765/mcp", url)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			c := exec.CommandContext(ctx, "sh", "-c", line+" --format json")
			c.Env = append(os.Environ(), "PATH="+path, "INSPECTOR="+cli, "REAPER_TOKEN="+token)
			c.Dir = t.TempDir()
			out, err := c.Output()
			cancel()
			ran++
			var res map[string]any
			if err != nil || json.Unmarshal(out, &res) != nil || res["error"] != nil {
				t.Errorf("%s: %q: %v\n%s", b.where, cmd, err, out)
				continue
			}
			want := map[string]string{"tools/list": `"name":"write_stdin"`, "bash": `hello\n[exit code 0]`, "workspace_open": `"workspace":"ws_`}
			for what, w := range want {
				if strings.Contains(cmd, what) && !strings.Contains(compact(out), w) {
					t.Errorf("%s: %q answered without %s:\n%s", b.where, cmd, w, out)
				}
			}
		}
	}
	if ran < 4 {
		t.Errorf("docs/clients/mcp-inspector.md has %d commands of the Inspector's CLI; this test expects them all (stdio and HTTP, both eras)", ran)
	}
}

// compact returns JSON text without the spaces between its tokens.
func compact(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}
