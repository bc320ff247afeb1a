package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestEarlyInitialisation: reaper's package early (which runs a PID namespace's init and starts a
// guard's server from its initialisation) initialises before the libraries that take most of a
// start-up, as GODEBUG=inittrace=1 shows on the binary. An import that pulled one of them under
// early would silently put them back on the path of every session's start.
func TestEarlyInitialisation(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("package early is Linux-only")
	}
	bin := filepath.Join(t.TempDir(), "reaper")
	build := exec.Command("go", "build", "-o", bin, "./cmd/reaper")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("reaper --version: %v\n%s", err, out)
	}
	var order []string // packages in the order they initialised (those with work to do)
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "init" {
			order = append(order, f[1])
		}
	}
	early := slices.Index(order, module+"/cmd/reaper/internal/early")
	if early < 0 {
		t.Fatalf("package early did not initialise:\n%s", out)
	}
	for _, slow := range []string{
		"github.com/modelcontextprotocol/go-sdk/mcp",
		"github.com/google/jsonschema-go/jsonschema",
		"github.com/prometheus/client_golang/prometheus",
		"github.com/prometheus/procfs",
	} {
		if i := slices.Index(order, slow); i < 0 {
			t.Errorf("%s did not initialise (or has nothing to initialise any more): update this list", slow)
		} else if i < early {
			t.Errorf("%s initialises before package early", slow)
		}
	}
	t.Logf("package early initialises %d of %d", early+1, len(order))
}
