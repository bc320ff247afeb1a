package testutil

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/pidns"
)

// HelperVar is the environment variable that names the helper a re-executed test binary runs (see
// Helper), for an init function that must prepare one. It does not start with REAPER_, which a
// reaper strips from its tasks' environment.
const HelperVar = "TESTUTIL_HELPER"

// Main is TestMain for packages with helpers: see RunHelperIfAsked; otherwise it runs the tests.
func Main(m *testing.M, helpers map[string]func() int) {
	RunHelperIfAsked(helpers)
	os.Exit(m.Run())
}

// RunHelperIfAsked returns at once unless the environment names one of helpers; then this process is a
// helper that a test started (see Helper): it runs that helper and exits with its status. A test binary
// run as the init of a session's PID namespace (a Reaper runs its own program as that) is that init
// instead. A TestMain that does more than run the tests calls it first.
func RunHelperIfAsked(helpers map[string]func() int) {
	if pidns.IsInit(os.Args) {
		os.Exit(pidns.RunInit())
	}
	name := os.Getenv(HelperVar)
	if name == "" {
		return
	}
	h, ok := helpers[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "testutil: no helper %q\n", name)
		os.Exit(2)
	}
	os.Exit(h())
}

// HelperEnv returns the environment entry that makes this test binary, run again, act as helper name.
func HelperEnv(name string) string { return HelperVar + "=" + name }

// Helper returns a command that runs this test binary as helper name, with env added to this
// process's environment. Wrap it (unshare, another user) by changing Path and Args: the binary is
// os.Args[0].
func Helper(name string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), HelperEnv(name)), env...)
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// Reply writes a helper's result as JSON to standard output and returns the exit status 0.
func Reply(v any) int {
	if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
		return 1
	}
	return 0
}

// RunHelper runs cmd (from Helper, possibly wrapped) to its end and decodes the JSON it printed into
// res, failing the test if it fails or prints something else.
func RunHelper(t testing.TB, cmd *exec.Cmd, res any) {
	t.Helper()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %v: %v\n%s", cmd.Args, err, out)
	}
	if err := json.Unmarshal(out, res); err != nil {
		t.Fatalf("helper %v printed %q: %v", cmd.Args, out, err)
	}
}

// UniqueName returns prefix followed by 10 random characters, for cgroups and files that concurrent
// test runs must never share.
func UniqueName(prefix string) string {
	return prefix + rand.Text()[:10]
}
