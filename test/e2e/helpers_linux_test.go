package e2e

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// staticBin is the reaper binary as the README builds it: static (CGO_ENABLED=0), so that nothing
// in libc stands between it and a seccomp profile. bin is the binary the tests run: staticBin, or,
// when the tests run with the race detector, a build with it (which needs cgo, so it links libc).
var bin, staticBin string

func TestMain(m *testing.M) {
	testutil.RunHelperIfAsked(helpers)
	dir, err := os.MkdirTemp("", "reaper-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// E2E_PREBUILT_BIN names a static binary built beforehand, for a machine without a Go toolchain
	// (the VM lane's guests): the tests run it, with or without the race detector.
	prebuilt := os.Getenv("E2E_PREBUILT_BIN")
	staticBin = cmp.Or(prebuilt, filepath.Join(dir, "reaper"))
	if prebuilt == "" {
		err = build(staticBin, "CGO_ENABLED=0")
	}
	bin = staticBin
	if err == nil && raceEnabled && prebuilt == "" {
		bin = filepath.Join(dir, "reaper-race")
		err = build(bin, "CGO_ENABLED=1", "-race")
		// A race-built program sleeps a second at exit by default, to let other goroutines report;
		// reaper's exit times are part of what the tests check.
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "building reaper:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build builds the reaper command into out with cgo set as given ("CGO_ENABLED=0") and flags.
func build(out, cgo string, flags ...string) error {
	return buildPackage("github.com/cgreaper/reaper/cmd/reaper", out, cgo, flags...)
}

// buildPackage builds the command pkg into out, as build does.
func buildPackage(pkg, out, cgo string, flags ...string) error {
	args := append(append([]string{"build", "-o", out}, flags...), pkg)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), cgo)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// reaperProc is a running reaper binary.
type reaperProc struct {
	cmd    *exec.Cmd
	stderr *testutil.Buffer
	url    string // the MCP endpoint, for HTTP
	admin  string // the admin endpoint's base URL, with --admin
	done   chan struct{}
	err    error  // the exit error, once done is closed
	token  string // the bearer token its HTTP clients send, where the test gave it none (see withToken)
}

// placement is where one test's reaper instances keep their slices and state: a unique cgroup root
// (cgroup containment) and a unique state directory, so that a sweep at start-up only ever sees the
// test's own instances.
type placement struct {
	root     string // empty in process containment
	stateDir string
}

// place returns a placement for containment mode ("cgroup", "process", or "" for whatever the host
// offers), skipping the test where cgroup containment was asked for and is impossible. Cleanup checks
// that the instances left neither a slice nor a state directory.
func place(t testing.TB, mode string) placement {
	t.Helper()
	p := placement{stateDir: t.TempDir()}
	info := cgroup.Detect(cgroup.Options{})
	usable := os.Geteuid() == 0 && info.Usable()
	switch {
	case mode == "process":
	case !usable && mode == "cgroup":
		t.Skipf("skipped: cgroup containment needs root and a writable cgroup2 hierarchy: %s", info)
	case !usable:
		t.Logf("no writable cgroup2 here (%s): reaper runs in process containment", info)
	default:
		p.root = filepath.Join(info.Mountpoint, testutil.UniqueName("reaper-e2e-"))
	}
	t.Cleanup(func() {
		if entries, _ := os.ReadDir(p.stateDir); len(entries) > 0 {
			t.Errorf("cleanup: state left in %s: %v", p.stateDir, entries)
		}
		if p.root != "" {
			testutil.RemoveCgroup(t, p.root)
		}
	})
	return p
}

// args returns the flags that put an instance there.
func (p placement) args() []string {
	a := []string{"--state-dir", p.stateDir}
	if p.root != "" {
		return append(a, "--cgroup-root", p.root)
	}
	return append(a, "--containment", "process")
}

// cgroupArgs returns the flags of a fresh placement in whatever containment the host offers.
func cgroupArgs(t testing.TB) []string {
	t.Helper()
	return place(t, "").args()
}

// startHTTP starts `reaper serve --http 127.0.0.1:0` with args and waits until it serves.
func startHTTP(t testing.TB, args ...string) *reaperProc {
	t.Helper()
	p := start(t, append([]string{"serve", "--http", "127.0.0.1:0"}, args...), nil, nil)
	p.awaitServing(t)
	return p
}

// awaitServing waits until reaper's stderr holds its start-up line for HTTP, and takes the endpoints
// from it. reaper chose the ports (it listens on port 0): another test's server may take any port a
// test picks beforehand, but not one reaper holds. It fails the test if reaper exits first.
func (p *reaperProc) awaitServing(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(testutil.Slow(time.Minute))
	for {
		if line, ok := testutil.LogLine(p.stderr.String(), testutil.ServingHTTP); ok {
			p.url, p.admin = line["url"], line["admin"]
			if p.url == "" {
				t.Fatalf("reaper's start-up line names no endpoint: %v", line)
			}
			return
		}
		select {
		case <-p.done:
			t.Fatalf("reaper exited before it served: %v\n%s", p.err, p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("reaper has not logged %q after a minute:\n%s", testutil.ServingHTTP, p.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// listeningPorts returns the TCP ports pid listens on, as /proc shows its sockets: the inodes of its
// descriptors that are sockets, matched with the listening entries of its network namespace.
func listeningPorts(t testing.TB, pid int) []string {
	t.Helper()
	inodes := map[string]bool{}
	links, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, l := range links {
		target, _ := os.Readlink(l)
		if ino, ok := strings.CutPrefix(target, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	var ports []string
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] { // 0A: TCP_LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			if port, err := strconv.ParseUint(hexPort, 16, 16); err == nil {
				ports = append(ports, strconv.FormatUint(port, 10))
			}
		}
	}
	return ports
}

// readUntil reads r, a pipe reaper writes its log to, until a line with the message msg has come,
// and returns what it read; it fails the test if none comes within a minute.
func readUntil(t testing.TB, r *os.File, msg string) *testutil.Buffer {
	t.Helper()
	if err := r.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var read testutil.Buffer
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		read.Write(append(sc.Bytes(), '\n'))
		if _, ok := testutil.LogLine(sc.Text(), msg); ok {
			return &read
		}
	}
	t.Fatalf("reading reaper's log for %q: %v\n%s", msg, sc.Err(), &read)
	return nil
}

// reaperCmd is the binary with args. Its WaitDelay bounds the wait for its output pipes after it
// exits: a process it left behind may hold them, and Wait would wait for that process too.
func reaperCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// runOnce runs the binary with args and env added to the test's environment, for a command that
// must end by itself (a refusal, --help, ps, sweep), and returns its combined output and exit code;
// it is killed after a minute, so that one that serves instead fails the test rather than hanging it.
func runOnce(t testing.TB, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("reaper %v did not end within a minute\n%s", args, out)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("reaper %v: %v", args, err)
	}
	return string(out), 0
}

// start runs the binary, with its stderr going to f or, if f is nil, to a buffer the test reads;
// cleanup stops it (SIGTERM, then SIGKILL) and waits for it.
func start(t testing.TB, args []string, stdin io.Reader, f *os.File) *reaperProc {
	t.Helper()
	return startCmd(t, reaperCmd(args...), stdin, f)
}

// startCmd is start for a command made elsewhere: with descriptors of its own, or a helper that
// becomes the binary.
func startCmd(t testing.TB, cmd *exec.Cmd, stdin io.Reader, f *os.File) *reaperProc {
	t.Helper()
	p := &reaperProc{cmd: cmd, stderr: &testutil.Buffer{}, done: make(chan struct{}), token: withToken(cmd)}
	p.cmd.Stdin = stdin
	p.cmd.Stderr = p.stderr
	if f != nil {
		p.cmd.Stderr = f
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop ends the reaper gracefully and waits, failing the test if it does not exit in time.
func (p *reaperProc) stop(t testing.TB) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(testutil.Slow(30 * time.Second)):
		p.cmd.Process.Kill()
		<-p.done
		t.Errorf("reaper did not exit within 30s of SIGTERM\n%s", p.stderr)
	}
}

// connectStdio starts `reaper serve` with args and connects the SDK's client to it over stdio.
func connectStdio(t testing.TB, args ...string) (*mcp.ClientSession, *exec.Cmd, *testutil.Buffer) {
	t.Helper()
	cmd := reaperCmd(append([]string{"serve"}, args...)...)
	stderr := &testutil.Buffer{}
	cmd.Stderr = stderr
	return connectCommand(t, cmd), cmd, stderr
}

// connectCommand starts cmd, which must end up serving MCP over stdio, and connects the SDK's client
// to it. Cleanup closes the session, which ends the command.
func connectCommand(t testing.TB, cmd *exec.Cmd) *mcp.ClientSession {
	t.Helper()
	return mcptest.ConnectCommand(t, cmd, mcptest.Options{})
}

// withToken gives an HTTP server that cmd starts a bearer token of the test's in its environment, and
// returns it, unless the test configured authentication itself (a token flag or variable, a token
// file, --insecure-no-auth): reaper serve requires a token over HTTP, and would otherwise make its
// own in the state directory.
func withToken(cmd *exec.Cmd) string {
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	args := cmd.Args
	for _, e := range env {
		if strings.HasPrefix(e, "REAPER_TOKEN") || strings.HasPrefix(e, "REAPER_INSECURE_NO_AUTH=") {
			return ""
		}
		if a, ok := strings.CutPrefix(e, "E2E_ARGS="); ok { // a helper that runs the binary with them
			args = append(args, strings.Fields(a)...)
		}
	}
	if !slices.Contains(args, "serve") || !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--http") }) {
		return ""
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--token") || strings.HasPrefix(a, "--insecure-no-auth") {
			return ""
		}
	}
	token := "e2e-" + rand.Text()
	cmd.Env = append(env, "REAPER_TOKEN="+token)
	return token
}

// connect connects the SDK's client to p as a session (protocol 2025-11-25), with the token p was
// given by withToken.
func (p *reaperProc) connect(t testing.TB) *mcp.ClientSession {
	t.Helper()
	return connectHTTP(t, p.url, p.token)
}

// connectHTTP connects the SDK's client to url as a session (protocol 2025-11-25), with a bearer
// token if token is set.
func connectHTTP(t testing.TB, url, token string) *mcp.ClientSession {
	t.Helper()
	return mcptest.ConnectHTTP(t, url, mcptest.Options{Token: token})
}

// The MCP client helpers live in internal/mcptest; these are the short names the tests use.
var (
	callTool   = mcptest.Call
	bash       = mcptest.Bash
	decode     = mcptest.Decode
	textOf     = mcptest.Text
	taskOutput = mcptest.TaskOutput
	escapees   = mcptest.Escapees
)

type bashResult = mcptest.BashResult

// pidFromFile polls until path holds a pid (and the PID namespace it is in, as testutil.ShowNS prints
// it, if not the test's) and returns that process.
func pidFromFile(t testing.TB, path string) testutil.Proc {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			return testutil.PidsIn(t, string(b))[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lineReader reads lines from a reader in the background.
func lineReader(r io.Reader) <-chan string {
	ch := make(chan string, 100)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

// startClient runs this binary as the "client" helper against p: a separate process that starts a
// background task with a setsid escapee and then waits. It returns the client and the task's
// processes; cleanup kills the client.
func startClient(t testing.TB, p *reaperProc, env ...string) (*exec.Cmd, []testutil.Proc) {
	t.Helper()
	client := testutil.Helper("client", append([]string{"E2E_URL=" + p.url, "E2E_TOKEN=" + p.token}, env...)...)
	client.Stderr = nil
	out, _ := client.StdoutPipe()
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Process.Kill(); client.Wait() })
	line := helperLine(t, out, "the client's task")
	if !strings.HasPrefix(line, "PIDS ") {
		t.Fatalf("client: %s", line)
	}
	return client, testutil.PidsIn(t, strings.TrimPrefix(line, "PIDS "))
}

// helperDeadline bounds what a client helper does before it reports: it always says something
// (its result, or ERR and why) before the test stops waiting for it.
const helperDeadline = 2 * time.Minute

// helperLine returns the first line a client helper prints on out, its report on what: it fails
// the test if the helper exits without one, or has said nothing a minute past its own deadline.
func helperLine(t testing.TB, out io.Reader, what string) string {
	t.Helper()
	select {
	case line, ok := <-lineReader(out):
		if !ok {
			t.Fatalf("%s: the helper exited without a word", what)
		}
		return line
	case <-time.After(helperDeadline + time.Minute):
		t.Fatalf("%s: the helper said nothing in %v, a minute past its own deadline", what, helperDeadline+time.Minute)
	}
	return ""
}

// adoptedByReaper reports whether pid's parent is the server, or the init of one of its sessions' PID
// namespaces (which adopts the session's orphans).
func adoptedByReaper(pid, server int) bool {
	ppid := parentOf(pid)
	if ppid == server {
		return true
	}
	return parentOf(ppid) == server && testutil.IsInit(ppid)
}

// parentOf returns pid's parent as /proc/<pid>/status names it, or 0.
func parentOf(pid int) int {
	st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for line := range strings.Lines(string(st)) {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// pidNamespaces tells, once, whether the binary can give sessions PID namespaces here, and why not.
var pidNamespaces = sync.OnceValue(func() string {
	dir, err := os.MkdirTemp("", "reaper-e2e-pidns-")
	if err != nil {
		return err.Error()
	}
	defer os.RemoveAll(dir)
	out, err := exec.Command(bin, "run", "--pid-namespace", "on", "--state-dir", dir, "--containment", "process", "--", "true").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%v: %s", err, out)
	}
	return ""
})

// needPIDNamespaces skips the test where the binary cannot make PID namespaces.
func needPIDNamespaces(t testing.TB) {
	t.Helper()
	if why := pidNamespaces(); why != "" {
		t.Skipf("skipped: no PID namespaces here: %s", why)
	}
}

// eachModeAndNamespace runs f as a subtest in each containment mode (see place), with reaper's PID
// namespaces off and on ("off", "on": the value of --pid-namespace); "on" is skipped where the binary
// cannot make them.
func eachModeAndNamespace(t *testing.T, f func(t *testing.T, pl placement, ns string)) {
	for _, mode := range []string{"cgroup", "process"} {
		for _, ns := range []string{"off", "on"} {
			t.Run(mode+"/pid-namespace-"+ns, func(t *testing.T) {
				if ns == "on" {
					needPIDNamespaces(t)
				}
				f(t, place(t, mode), ns)
			})
		}
	}
}

// deleteSession sends a DELETE of session id to p by hand, with its token (the go-sdk client's Close waits for its
// calls in flight, where a client that ends a session during a call does not) and returns the
// answer's status and how long it took.
func (p *reaperProc) deleteSession(t testing.TB, id string) (int, time.Duration) {
	t.Helper()
	code, took, err := p.sendDelete(id)
	if err != nil {
		t.Fatal(err)
	}
	return code, took
}

// sendDelete is deleteSession for any goroutine: it returns what failed instead of failing the test.
func (p *reaperProc) sendDelete(id string) (int, time.Duration, error) {
	req, _ := http.NewRequest(http.MethodDelete, p.url, nil)
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Authorization", "Bearer "+p.token)
	start := time.Now()
	resp, err := testutil.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("DELETE session %s: %w", id, err)
	}
	resp.Body.Close()
	return resp.StatusCode, time.Since(start), nil
}
