// Command lean is the baseline that reaper's benchmarks measure against: a lean MCP shell server on
// the same go-sdk, running commands with plain os/exec, as a careful person would write one in an
// afternoon. It has the tools the comparisons need and nothing more:
//
//   - bash: run a command (bash -c) in the foreground, with a timeout, or with run_in_background as
//     a task that returns its id at once;
//   - task_output: a task's status and the output it wrote since the previous read, all of it in
//     one read, optionally after waiting for the task to end.
//
// Results are plain text: the output once, then a bracketed line with the exit code or status. Each
// command runs in its own process group, killed on timeout; os/exec's WaitDelay keeps a background
// grandchild that holds the output pipe from hanging a call. Output is kept up to 1 MiB per command
// (the head; the rest is counted). It contains nothing else: what a command detaches outlives it, and
// only the process groups of tasks still running are killed when the server stops.
//
//	lean                          # MCP over stdio
//	lean -http 127.0.0.1:8766     # MCP over Streamable HTTP at http://127.0.0.1:8766/mcp
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// outputLimit is the output kept per command, as reaper's default.
const outputLimit = 1 << 20

func main() {
	addr := flag.String("http", "", "serve Streamable HTTP at http://ADDR/mcp instead of stdio")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	l := &lean{tasks: make(map[string]*task)}
	defer l.killAll()
	s := mcp.NewServer(&mcp.Implementation{Name: "lean", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "bash", Description: "Run a shell command (bash -c) and return its output and exit code; with run_in_background, start it as a task and return its id."}, l.bash)
	mcp.AddTool(s, &mcp.Tool{Name: "task_output", Description: "Return a background task's status and the output it wrote since the previous read; block=true waits for it to end first."}, l.taskOutput)
	if *addr == "" {
		if err := s.Run(ctx, &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "lean:", err)
		}
		return
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lean:", err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "lean:", err)
	}
}

type bashIn struct {
	Command         string `json:"command" jsonschema:"the shell command to run (bash -c)"`
	Timeout         int    `json:"timeout,omitempty" jsonschema:"milliseconds before the command is killed; default 120000"`
	RunInBackground bool   `json:"run_in_background,omitempty" jsonschema:"start the command as a background task and return its id"`
}

type taskOutputIn struct {
	TaskID  string `json:"task_id" jsonschema:"the id bash returned"`
	Block   bool   `json:"block,omitempty" jsonschema:"wait until the task ends (or the timeout passes) first"`
	Timeout int    `json:"timeout,omitempty" jsonschema:"milliseconds to wait when block is true; default 30000"`
}

// lean holds the background tasks of every session.
type lean struct {
	mu    sync.Mutex // guards the fields that follow
	seq   int
	tasks map[string]*task
}

// task is a background command.
type task struct {
	owner *mcp.ServerSession
	cmd   *exec.Cmd
	out   *capped
	done  chan struct{} // closed when the command has ended; code is set before
	code  int
	read  int // the output returned so far; guarded by out.mu
}

// capped keeps the first outputLimit bytes written to it and counts the rest.
type capped struct {
	mu      sync.Mutex
	b       []byte
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := min(len(p), outputLimit-len(c.b))
	c.b = append(c.b, p[:k]...)
	c.dropped += len(p) - k
	return len(p), nil
}

// command returns bash -c command in a process group of its own, killed as a group when ctx is done.
func command(ctx context.Context, command string, out *capped) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	cmd.Stdout, cmd.Stderr = out, out
	return cmd
}

func (l *lean) bash(ctx context.Context, req *mcp.CallToolRequest, in bashIn) (*mcp.CallToolResult, any, error) {
	out := &capped{}
	if in.RunInBackground {
		t := &task{owner: req.Session, out: out, done: make(chan struct{})}
		t.cmd = command(context.Background(), in.Command, out)
		if err := t.cmd.Start(); err != nil {
			return nil, nil, err
		}
		l.mu.Lock()
		l.seq++
		id := "t" + strconv.Itoa(l.seq)
		l.tasks[id] = t
		l.mu.Unlock()
		go func() {
			t.cmd.Wait()
			t.code = t.cmd.ProcessState.ExitCode()
			close(t.done)
		}()
		return text("started task " + id), nil, nil
	}
	timeout := 120 * time.Second
	if in.Timeout > 0 {
		timeout = time.Duration(in.Timeout) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := command(ctx, in.Command, out)
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return nil, nil, err
	}
	return text(result(out, nil, fmt.Sprintf("exit code %d", cmd.ProcessState.ExitCode()))), nil, nil
}

func (l *lean) taskOutput(ctx context.Context, req *mcp.CallToolRequest, in taskOutputIn) (*mcp.CallToolResult, any, error) {
	l.mu.Lock()
	t := l.tasks[in.TaskID]
	l.mu.Unlock()
	if t == nil || t.owner != req.Session {
		return nil, nil, fmt.Errorf("no task %q", in.TaskID)
	}
	if in.Block {
		wait := 30 * time.Second
		if in.Timeout > 0 {
			wait = time.Duration(in.Timeout) * time.Millisecond
		}
		select {
		case <-t.done:
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
	status := "running"
	select {
	case <-t.done:
		status = fmt.Sprintf("exited with code %d", t.code)
		l.mu.Lock()
		delete(l.tasks, in.TaskID) // t.code and the output are final; this read returns the rest
		l.mu.Unlock()
	default:
	}
	return text(result(t.out, &t.read, "task "+in.TaskID+" "+status)), nil, nil
}

// result is the output from *from (0 if from is nil) to its end, then note in brackets; it moves
// *from to the end.
func result(out *capped, from *int, note string) string {
	out.mu.Lock()
	defer out.mu.Unlock()
	start := 0
	if from != nil {
		start, *from = *from, len(out.b)
	}
	s := string(out.b[start:])
	if len(s) > 0 && s[len(s)-1] != '\n' {
		s += "\n"
	}
	if out.dropped > 0 {
		s += fmt.Sprintf("[%d bytes of output dropped]\n", out.dropped)
	}
	return s + "[" + note + "]\n"
}

// killAll kills the process groups of the tasks still running.
func (l *lean) killAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range l.tasks {
		select {
		case <-t.done:
		default:
			syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
