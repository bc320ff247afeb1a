package fork

import (
	"os"
	"slices"
	"testing"
)

// TestCmdline: the command line read from /proc/self/cmdline is os.Args, empty arguments included.
func TestCmdline(t *testing.T) {
	got, err := cmdline()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, os.Args) {
		t.Errorf("cmdline() = %q, os.Args = %q", got, os.Args)
	}
}

func TestSplitNUL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"reaper\x00", []string{"reaper"}},
		{"reaper\x00serve\x00", []string{"reaper", "serve"}},
		{"reaper\x00\x00--x\x00", []string{"reaper", "", "--x"}},
		{"reaper\x00\x00", []string{"reaper", ""}},
		{"reaper\x00tail", []string{"reaper", "tail"}},
	} {
		if got := splitNUL([]byte(tc.in)); !slices.Equal(got, tc.want) {
			t.Errorf("splitNUL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestServerOptions: serve and run start under a guard, in a session or a process group of their
// own; every other command, and a command line without one, does not.
func TestServerOptions(t *testing.T) {
	for _, tc := range []struct {
		argv          []string
		ok, sid, pgid bool
	}{
		{[]string{"reaper", "serve", "--listen", ":0"}, true, true, false},
		{[]string{"reaper", "run", "--", "make"}, true, false, true},
		{[]string{"reaper", "version"}, false, false, false},
		{[]string{"reaper", "--", "serve"}, false, false, false},
		{[]string{"reaper"}, false, false, false},
		{nil, false, false, false},
	} {
		opts, ok := ServerOptions(tc.argv)
		if ok != tc.ok || opts.Setsid != tc.sid || opts.Setpgid != tc.pgid {
			t.Errorf("ServerOptions(%q) = %+v, %v", tc.argv, opts, ok)
		}
		if ok && !slices.Equal(opts.Argv, tc.argv) {
			t.Errorf("ServerOptions(%q) runs %q", tc.argv, opts.Argv)
		}
	}
}
