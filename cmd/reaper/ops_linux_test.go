package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1048576": 1 << 20, "512M": 512 << 20, "512Mi": 512 << 20, "512MiB": 512 << 20, "2G": 2 << 30,
		"2g": 2 << 30, "1.5G": 3 << 29, "64K": 64 << 10, "1T": 1 << 40, " 8M ": 8 << 20,
	} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1M", "lots", "5X", "M", "1e30T", "NaN"} {
		if got, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", bad, got)
		}
	}
}

func TestLimitFlags(t *testing.T) {
	env := map[string]string{"REAPER_MEMORY_MAX": "256M", "REAPER_CPU_MAX": "1.5"}
	c, err := parseServe([]string{"--pids-max", "100"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.memoryMax != 256<<20 || c.pidsMax != 100 || c.cpuMax != 1.5 {
		t.Errorf("limits %v %v %v", c.memoryMax, c.pidsMax, c.cpuMax)
	}
	for _, bad := range [][]string{{"--memory-max", "-5"}, {"--pids-max", "-1"}, {"--cpu-max", "-1"}, {"--cpu-max", "0.001"}, {"--cpu-max", "two"}} {
		if _, err := parseServe(bad, func(string) string { return "" }); err == nil {
			t.Errorf("parseServe(%q) accepted", bad)
		}
	}
}

func TestLogSettings(t *testing.T) {
	for _, bad := range [][]string{{"--log-format", "xml"}, {"--log-level", "loud"}} {
		if _, err := parseServe(bad, func(string) string { return "" }); err == nil {
			t.Errorf("parseServe(%q) accepted", bad)
		}
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		json bool
		warn bool // info is dropped
	}{
		{nil, nil, false, false},
		{[]string{"--log-format", "json"}, nil, true, false},
		{[]string{"--http", "--log-format=json", "--log-level=warn"}, nil, true, true},
		{nil, map[string]string{"REAPER_LOG_FORMAT": "json", "REAPER_LOG_LEVEL": "warn"}, true, true},
		{[]string{"-log-format", "text"}, map[string]string{"REAPER_LOG_FORMAT": "json"}, false, false},
		{[]string{"--log-format", "xml"}, nil, false, false}, // unusable: the default; the parser reports it
		{[]string{"--", "--log-format", "json"}, nil, false, false},
	} {
		var b bytes.Buffer
		log := earlyLogger(&b, tc.args, func(k string) string { return tc.env[k] })
		log.Info("hello", "n", 1)
		log.Warn("careful")
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if tc.warn != (len(lines) == 1) {
			t.Errorf("%q %v: lines %q", tc.args, tc.env, lines)
		}
		isJSON := json.Valid([]byte(lines[0]))
		if isJSON != tc.json {
			t.Errorf("%q %v: JSON %v, want %v: %q", tc.args, tc.env, isJSON, tc.json, lines[0])
		}
	}
}

func TestAdminAddress(t *testing.T) {
	var stderr bytes.Buffer
	c := serveConfig{admin: "0.0.0.0:0"}
	if _, status := startOps(c, nil, &stderr); status != 2 || !strings.Contains(stderr.String(), "without an admin token") {
		t.Errorf("a non-loopback admin address without a token: status %d, %q", status, stderr.String())
	}
	file := filepath.Join(t.TempDir(), "admin-token")
	os.WriteFile(file, []byte("s3cret\nignored\n"), 0o600)
	c = serveConfig{admin: "0.0.0.0:0", adminTokenFile: file}
	if tok, err := c.adminTokenValue(); err != nil || tok != "s3cret" {
		t.Errorf("admin token from a file: %q, %v", tok, err)
	}
	o, status := startOps(c, nil, &stderr)
	if status != 0 || o.admin == nil {
		t.Fatalf("a non-loopback admin address with a token: status %d, %q", status, stderr.String())
	}
	o.close()
	c = serveConfig{admin: "127.0.0.1:0"}
	o, status = startOps(c, nil, &stderr)
	if status != 0 || o.admin == nil {
		t.Fatalf("a loopback admin address: status %d, %q", status, stderr.String())
	}
	o.close()
	(&ops{}).close() // without --admin, nothing to do
}
