package docs

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
)

// quickStart returns the two commands of the README's Quick start.
func quickStart(t *testing.T) (serve, test string) {
	t.Helper()
	for _, b := range blocks(t, "README.md") {
		if b.lang == "sh" && strings.Contains(b.text, "serve") {
			cmds := commands(b.text)
			if len(cmds) != 2 {
				t.Fatalf("%s: the Quick start has %d commands, want 2 (run reaper, run the tests): %q", b.where, len(cmds), cmds)
			}
			return cmds[0], cmds[1]
		}
	}
	t.Fatal("README.md has no Quick start block")
	return "", ""
}

// TestQuickStart runs the README's first command as written, in the repository's root, waits for
// its start-up line, runs a command through the server it started with the go-sdk client, and stops
// it with SIGTERM as Ctrl-C would. It also checks that the second command is the one .ci/run runs.
func TestQuickStart(t *testing.T) {
	serve, test := quickStart(t)
	ci := read(t, ".ci/run")
	if !strings.Contains(ci, "#   "+test+"\n") {
		t.Errorf(".ci/run no longer names the README's test command %q", test)
	}
	for _, part := range strings.Split(test, " && ") {
		if json := strings.Replace(part, "-count=1 ", "-count=1 -json ", 1); !strings.Contains(ci, json) {
			t.Errorf(".ci/run does not run %q (the README's %q with -json)", json, part)
		}
	}
	if l, err := net.Listen("tcp", "127.0.0.1:8765"); err != nil {
		t.Skipf("127.0.0.1:8765, where the Quick start serves, is taken on this machine (%v): another reaper runs", err)
	} else {
		l.Close()
	}
	testutil.RemoveIfNew(t, instance.DefaultStateDir()) // the command runs reaper with its defaults
	cmd := exec.Command("sh", "-c", serve)
	cmd.Dir = repo
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	lines := make(chan string, 64)
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the test's own process group, if still there
		for range lines {
		}
		<-done
	})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stderr)
		done <- cmd.Wait()
	}()
	url := awaitStart(t, lines)
	// As the README says: the token reaper keeps in its state directory.
	token, err := os.ReadFile(filepath.Join(instance.DefaultStateDir(), instance.TokenFile))
	if err != nil {
		t.Fatalf("the Quick start's server keeps no token where the README says: %v", err)
	}
	if _, err := mcptest.DialHTTP(t.Context(), url, mcptest.Options{}); err == nil {
		t.Error("the Quick start's server let a client without its token in")
	}
	cs := mcptest.ConnectHTTP(t, url, mcptest.Options{Token: strings.TrimSpace(string(token))})
	if got := mcptest.Bash(t, cs, "echo quick start").Output; got != "quick start\n" {
		t.Errorf("bash through the Quick start's server returned %q", got)
	}
	cs.Close()
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	stopped := awaitStop(t, lines)
	if !stopped {
		t.Error("the Quick start's server did not log its shutdown after SIGTERM")
	}
}

// awaitStart waits for reaper's start-up line and returns the URL it serves.
func awaitStart(t *testing.T, lines <-chan string) string {
	t.Helper()
	deadline := time.After(3 * time.Minute) // go run compiles first
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the Quick start's command ended before reaper served")
			}
			if attrs, ok := testutil.LogLine(line, testutil.ServingHTTP); ok {
				if attrs["url"] != "http://127.0.0.1:8765/mcp" {
					t.Errorf("the Quick start serves at %q; the README says http://127.0.0.1:8765/mcp", attrs["url"])
				}
				return attrs["url"]
			}
		case <-deadline:
			t.Fatal("no start-up line from the Quick start's command within 3 minutes")
		}
	}
}

// awaitStop reads the log to its end (the process has exited) and tells whether reaper said it was
// shutting down.
func awaitStop(t *testing.T, lines <-chan string) bool {
	t.Helper()
	stopped := false
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return stopped
			}
			if _, ok := testutil.LogLine(line, "shutting down: every session's processes are being killed"); ok {
				stopped = true
			}
		case <-deadline:
			t.Error("the Quick start's server did not exit within 30 s of SIGTERM")
			return stopped
		}
	}
}
