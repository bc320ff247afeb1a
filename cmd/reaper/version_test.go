package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribeVersion(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name string
		set  string
		bi   *debug.BuildInfo
		want string
	}{
		{"ldflags wins", "v1.2.3", &debug.BuildInfo{GoVersion: "go1.26", Main: debug.Module{Version: "v0.9.0"}}, "v1.2.3"},
		{"go install @version", "", &debug.BuildInfo{GoVersion: "go1.26", Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3 go1.26"},
		{"pseudo-version from a checkout", "", &debug.BuildInfo{GoVersion: "go1.26", Main: debug.Module{Version: "v0.0.0-20261123050730-1473808e715c"},
			Settings: vcs("1473808e715c9724c687add7b5970e716c61528c", "false")}, "v0.0.0-20261123050730-1473808e715c go1.26"},
		{"devel with a revision", "", &debug.BuildInfo{GoVersion: "go1.23", Main: debug.Module{Version: "(devel)"},
			Settings: vcs("1473808e715c9724c687add7b5970e716c61528c", "false")}, "devel-1473808e715c go1.23"},
		{"devel, modified tree", "", &debug.BuildInfo{GoVersion: "go1.23", Main: debug.Module{Version: "(devel)"},
			Settings: vcs("1473808e715c9724c687add7b5970e716c61528c", "true")}, "devel-1473808e715c-dirty go1.23"},
		{"devel without VCS", "", &debug.BuildInfo{GoVersion: "go1.26", Main: debug.Module{Version: "(devel)"}}, "(devel) go1.26"},
		{"no build info", "", nil, "(unknown)"},
	} {
		if got := describeVersion(tc.set, tc.bi); got != tc.want {
			t.Errorf("%s: describeVersion = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// buildReaper builds this command into a temporary directory with the go command's extra args, in
// dir, and returns what `reaper version` prints.
func buildReaper(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "reaper")
	build := exec.Command("go", append(append([]string{"build", "-o", bin}, args...), ".")...)
	build.Dir = dir
	build.Env = append(os.Environ(), env...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v\n%s", args, err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("reaper version: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestVersionOfRealBuilds builds the binary as release tooling does (-ldflags -X) and as a developer
// does in a fresh git clone, and checks what `reaper version` says. (`go install …@v1.2.3` sets the
// module version the same way a clone's pseudo-version is set: TestDescribeVersion covers both.)
func TestVersionOfRealBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped: builds the binary (-short)")
	}
	if got := buildReaper(t, ".", nil, "-ldflags", "-X main.version=v1.2.3-test"); got != "reaper v1.2.3-test" {
		t.Errorf("built with -X main.version=v1.2.3-test, reaper version says %q", got)
	}

	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("skipped: the VCS case needs git and a git checkout of reaper: %v", err)
	}
	clone := filepath.Join(t.TempDir(), "reaper")
	if out, err := exec.Command("git", "clone", "--quiet", "--shared", strings.TrimSpace(string(root)), clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	rev, err := exec.Command("git", "-C", clone, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	// GOFLAGS may carry -buildvcs=false (it does on the development machines): ask for the stamp.
	got := buildReaper(t, filepath.Join(clone, "cmd", "reaper"), []string{"GOFLAGS=-buildvcs=true"})
	want := regexp.MustCompile(`^reaper v\S+-\d{14}-` + string(rev[:12]) + ` go1\.`)
	if !want.MatchString(got) {
		t.Errorf("built in a git clone at %s, reaper version says %q, want a pseudo-version with the revision", rev[:12], got)
	}
}
