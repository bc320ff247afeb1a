package main

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/reaper"
)

// TestHTTPFlag: --http takes its address as the next argument, or stands alone for the default one.
func TestHTTPFlag(t *testing.T) {
	for _, tc := range []struct {
		in    []string
		http  string
		grace time.Duration
	}{
		{[]string{"--http"}, defaultHTTPAddr, reaper.DefaultGrace},
		{[]string{"--http", "0.0.0.0:9000", "--grace", "1s"}, "0.0.0.0:9000", time.Second},
		{[]string{"--http", "--grace", "1s"}, defaultHTTPAddr, time.Second},
		{[]string{"-http=:1"}, ":1", reaper.DefaultGrace},
	} {
		c, err := parseServe(tc.in, func(string) string { return "" })
		if err != nil || c.http != tc.http || c.grace != tc.grace {
			t.Errorf("parseServe(%q): --http %q, --grace %v, %v; want %q, %v", tc.in, c.http, c.grace, err, tc.http, tc.grace)
		}
	}
	if _, err := parseServe([]string{"--", "--http"}, func(string) string { return "" }); err == nil {
		t.Error(`parseServe("--", "--http") took the operand "--http" for the flag`)
	}
}

func TestParseServeEnvironment(t *testing.T) {
	env := map[string]string{"REAPER_GRACE": "2s", "REAPER_MAX_TASKS": "4", "REAPER_HTTP": "true", "REAPER_IDLE_TIMEOUT": "1m", "REAPER_OUTPUT_BUDGET": "8M"}
	c, err := parseServe([]string{"--max-tasks", "6", "--max-output", "1000"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.grace != 2*time.Second || c.maxTasks != 6 || c.http != defaultHTTPAddr || c.idleTimeout != time.Minute || c.maxOutput != 1000 || c.outBudget != 8<<20 {
		t.Errorf("config %+v: want grace and the output budget from the environment, max-tasks and max-output from the flags", c)
	}
	if c, _ := parseServe(nil, func(string) string { return "" }); c.maxOutput != 30000 || c.outBudget != 64<<20 {
		t.Errorf("defaults: max-output %d, output budget %d", c.maxOutput, c.outBudget)
	}
	for _, bad := range [][]string{{"--max-tasks", "0"}, {"--idle-timeout", "0s"}, {"--grace", "-1s"}, {"--containment", "vm"}, {"extra"},
		{"--max-output", "0"}, {"--max-output", "2000000"}, {"--output-budget", "1K"}} {
		if _, err := parseServe(bad, func(string) string { return "" }); err == nil {
			t.Errorf("parseServe(%q) accepted", bad)
		}
	}
	if _, err := parseServe(nil, func(k string) string { return map[string]string{"REAPER_KEEPALIVE": "often"}[k] }); err == nil ||
		!strings.Contains(err.Error(), "REAPER_KEEPALIVE") {
		t.Errorf("a bad environment value: %v", err)
	}
}

func TestTokens(t *testing.T) {
	f := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(f, []byte("# comment\nalice secret-a\n\nsecret-b # anonymous\n"), 0o600)
	got, err := serveConfig{token: "secret-c", tokenFile: f}.tokens()
	want := map[string]string{"secret-a": "alice", "secret-b": "token-4", "secret-c": "token"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("tokens() = %v, %v; want %v", got, err, want)
	}
	os.WriteFile(f, []byte("a b c\n"), 0o600)
	if _, err := (serveConfig{tokenFile: f}).tokens(); err == nil {
		t.Error("a line with three fields was accepted")
	}
	os.WriteFile(f, []byte("# nothing\n"), 0o600)
	if _, err := (serveConfig{tokenFile: f}).tokens(); err == nil {
		t.Error("an empty token file was accepted")
	}
}

// TestPerIdentity: a per-identity cap is its flag, or all of its total where there is one identity,
// a quarter where there are more (several tokens' identities, or --insecure-no-auth's peers).
func TestPerIdentity(t *testing.T) {
	f := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(f, []byte("alice secret-a\nbob secret-b\nsecret-c\n"), 0o600)
	one := filepath.Join(t.TempDir(), "one")
	os.WriteFile(one, []byte("alice secret-a\nalice secret-a2\n"), 0o600)
	for _, tc := range []struct {
		name      string
		c         serveConfig
		flag, all int
		want      int
	}{
		{"one token", serveConfig{token: "t"}, 0, 40, 40},
		{"two tokens of one identity", serveConfig{tokenFile: one}, 0, 40, 40},
		{"three identities", serveConfig{tokenFile: f}, 0, 40, 10},
		{"peers", serveConfig{insecureNoAuth: true}, 0, 40, 10},
		{"at least one", serveConfig{tokenFile: f}, 0, 3, 1},
		{"the flag", serveConfig{tokenFile: f}, 7, 40, 7},
	} {
		tc.c.http = "127.0.0.1:0"
		a, err := tc.c.auth()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := a.perIdentity(tc.flag, tc.all); got != tc.want {
			t.Errorf("%s: perIdentity(%d, %d) = %d, want %d", tc.name, tc.flag, tc.all, got, tc.want)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8765": true, "[::1]:1": true, "localhost:80": true,
		"0.0.0.0:8765": false, ":8765": false, "10.1.2.3:1": false,
	} {
		if got, err := isLoopback(addr); err != nil || got != want {
			t.Errorf("isLoopback(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
}

func TestEndpointURL(t *testing.T) {
	for _, tc := range []struct{ asked, got, want string }{
		{"0.0.0.0:8765", "[::]:8765", "http://0.0.0.0:8765/mcp"},
		{"127.0.0.1:0", "127.0.0.1:41234", "http://127.0.0.1:41234/mcp"},
		{"localhost:8765", "127.0.0.1:8765", "http://localhost:8765/mcp"},
		{"[::1]:9", "[::1]:9", "http://[::1]:9/mcp"},
		{":8765", "[::]:8765", "http://0.0.0.0:8765/mcp"},
	} {
		got, err := net.ResolveTCPAddr("tcp", tc.got)
		if err != nil {
			t.Fatal(err)
		}
		if u := endpointURL(tc.asked, got); u != tc.want {
			t.Errorf("endpointURL(%q, %s) = %q, want %q", tc.asked, tc.got, u, tc.want)
		}
	}
}

func TestPsCommand(t *testing.T) {
	for _, tc := range []struct {
		self reaper.Instance
		want string
	}{
		{reaper.Instance{StateDir: "/run/reaper/reaper-r1-2", Slice: "/sys/fs/cgroup/system.slice/reaper.service/reaper/r1-2"},
			"reaper ps --state-dir /run/reaper --cgroup-root /sys/fs/cgroup/system.slice/reaper.service/reaper"},
		{reaper.Instance{StateDir: "/tmp/it's here/reaper-r1-2"}, `reaper ps --state-dir '/tmp/it'\''s here' --containment process`},
	} {
		if got := psCommand(tc.self); got != tc.want {
			t.Errorf("psCommand(%+v) = %q, want %q", tc.self, got, tc.want)
		}
	}
}

func TestVersionAndHelp(t *testing.T) {
	var out strings.Builder
	if code := run([]string{"version"}, os.Getenv, nil, &out, io.Discard, nil); code != 0 || !strings.HasPrefix(out.String(), "reaper ") {
		t.Errorf("version: %d %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"--help"}, os.Getenv, nil, &out, io.Discard, nil); code != 0 || !strings.Contains(out.String(), "reaper serve") {
		t.Errorf("--help: %d %q", code, out.String())
	}
	if code := run([]string{"frobnicate"}, os.Getenv, nil, io.Discard, io.Discard, nil); code != 2 {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
}

func TestTokenOnCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want bool
	}{
		{[]string{"--token", "x"}, "", true},
		{[]string{"-token=x"}, "", true},
		{[]string{"--http", "--token=x"}, "y", true},
		{nil, "x", false},
		{[]string{"--token-file", "/f"}, "", false},
	} {
		c, err := parseServe(tc.args, func(k string) string {
			if k == "REAPER_TOKEN" {
				return tc.env
			}
			return ""
		})
		if err != nil || c.tokenOnCommandLine != tc.want {
			t.Errorf("%v with REAPER_TOKEN=%q: on the command line %v (%v), want %v", tc.args, tc.env, c.tokenOnCommandLine, err, tc.want)
		}
	}
}
