package shell

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bash returns bash's path, or skips the test where there is none.
func bash(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("skipped: no bash in PATH to run the loader")
	}
	return p
}

// loaded starts bash running Loader with script+NUL (if send) in a regular file at CommandFD, and the
// read end of a pipe at GateFD; it returns the command, a file its combined output goes to, and the
// gate's write end.
func loaded(t *testing.T, script string, send bool) (*exec.Cmd, *output, *os.File) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "command")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if send {
		if _, err := f.WriteString(script + "\x00"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Seek(0, 0); err != nil {
			t.Fatal(err)
		}
	}
	gr, gw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer gr.Close()
	t.Cleanup(func() { gw.Close() })
	cmd := exec.Command(bash(t), "-c", Loader)
	of, err := os.Create(t.TempDir() + "/output")
	if err != nil {
		t.Fatal(err)
	}
	defer of.Close()
	cmd.Stdout, cmd.Stderr = of, of
	cmd.ExtraFiles = make([]*os.File, GateFD-2) // descriptors 3 to GateFD; nil ones are closed
	cmd.ExtraFiles[CommandFD-3], cmd.ExtraFiles[GateFD-3] = f, gr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &output{of.Name()}, gw
}

// output is what a loaded shell wrote, in a file.
type output struct{ path string }

func (o *output) String() string {
	b, _ := os.ReadFile(o.path)
	return string(b)
}

// exitCode is the exit status of a command that has been waited for.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// TestLoader: the loader runs the script it is sent, exactly, as bash -c would (its text, its exit
// status, the names of syntax errors' sources aside); not before its gate is closed; and nothing when
// the gate closes with no script sent.
func TestLoader(t *testing.T) {
	for _, script := range []string{
		"echo hi",
		"echo a \\",
		"printf '%s|' \"$0\" $# $LINENO; echo",
		"echo x\nexit 3",
		"set -e; false; echo not",
		"cat <<EOF\nkept\n\nEOF\n\n",
		"echo ${" + LoaderVar + "-unset}; [[ -e /proc/$$/fd/95 || -e /proc/$$/fd/96 ]] && echo open || echo closed",
		strings.Repeat("#", 70<<10) + "\necho long",
	} {
		want, err := exec.Command(bash(t), "-c", script).CombinedOutput()
		wantCode := exitCode(err)
		cmd, out, gate := loaded(t, script, true)
		gate.Close()
		code := exitCode(cmd.Wait())
		if out.String() != string(want) || code != wantCode {
			t.Errorf("%.40q: the loader ran it as %q (exit %d), bash -c as %q (exit %d)", script, out.String(), code, want, wantCode)
		}
	}

	// What is written into the gate does not let the shell go; the end of the gate does.
	cmd, out, gate := loaded(t, "echo ran", true)
	if _, err := gate.WriteString("a line\npart"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !sleeping(cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("the loader never waited for its gate")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if out.String() != "" {
		t.Errorf("the loader ran its script before the gate was closed: %q", out.String())
	}
	gate.Close()
	if err := cmd.Wait(); err != nil || out.String() != "ran\n" {
		t.Errorf("after the gate closed: %q, %v", out.String(), err)
	}

	cmd, out, gate = loaded(t, "echo ran", false)
	gate.Close()
	if err := cmd.Wait(); exitCode(err) != 1 || out.String() != "" {
		t.Errorf("with nothing sent the loader printed %q and ended with %v, want nothing and status 1", out.String(), err)
	}
}

// sleeping reports whether the process sleeps (S in /proc/<pid>/stat).
func sleeping(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'S'
}
