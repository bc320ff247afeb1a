package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/testutil"
)

// mirrored names, for each command a user is told to run that this package does not run itself,
// the test that runs it or why none can. A new command in an sh block must match one of these, or
// TestShellBlocks fails until someone says how it is kept working.
var mirrored = []struct{ pattern, how string }{
	{`^go run \./cmd/reaper serve`, "TestQuickStart runs the Quick start's first command"},
	{`^go test -race -count=1 \./\.\.\. && go -C deploy/kubernetes test -race -count=1 \./\.\.\.$`, ".ci/run runs it; TestQuickStart checks that both say the same"},
	{`^go test `, "a test command of docs/tests.md: its packages exist (checked here)"},
	{`^CGO_ENABLED=0 go install github\.com/cgreaper/reaper/cmd/reaper@latest$`, "needs the module proxy; the module path is go.mod's (checked here)"},
	{`^CGO_ENABLED=0 go build -o /usr/local/bin/reaper \./cmd/reaper$`, "test/e2e builds the binary the same way (staticBin); .ci/run checks it is static"},
	{`^CGO_ENABLED=0 go build -trimpath -o bin/reaper \./cmd/reaper$`, "test/container TestPrebuiltRecipe runs it"},
	{`^reaper version$`, "TestShellBlocks runs it"},
	{`^podman build -f deploy/Containerfile`, "test/container builds the image (TestBuildFromSource, TestPrebuiltRecipe)"},
	{`^podman run -i --rm`, "test/container TestStdio"},
	{`^podman run -d --pod agent`, "test/container TestSidecarInPod"},
	{`^podman run -d -p 8765:8765`, "test/container TestImageConfig checks the refusal without a token; publishing a port is podman's"},
	{`^kubectl apply -k deploy/kubernetes/`, "deploy/kubernetes's tests build every kustomization; test/container TestKubePlay plays them"},
	{`^\(cd deploy/kubernetes/base && kustomize edit set image `, "TestKustomizeImages checks that it names the base's images; kustomize is the operator's"},
	{`^kubectl create secret generic reaper-token --from-literal=token=.* --from-literal=admin-token=`, "test/container TestKubePlay gives the pod a Secret with these two keys (in podman's form)"},
	{`^install -m 0644 deploy/systemd/`, "test/e2e TestSystemdUnitVerifies and TestSystemdSysusers; installing into /etc is the operator's"},
	{`^systemctl enable --now reaper`, "the operator's; test/e2e TestSystemdUnitVerifies checks the unit"},
	{`^sudo -u reaper reaper (ps|sweep) --state-dir /run/reaper --cgroup-root /sys/fs/cgroup/system\.slice/reaper\.service/reaper$`, "test/e2e TestSystemdOperatorFindsSessions runs the unit's ps in a cgroup named as the unit's; the flags are checked here"},
	{`^\.ci/run$`, "CI itself"},
	{`^test/vm/run( [ab])?$`, ".ci/run runs the VM lane (both guests)"},
	{`^test/vm/boot [ab] `, "test/vm/run boots each guest with it"},
	{`^test/vm/density( [0-9,]+( --[a-z-]+ [0-9.A-Z]+)*)?$`, "a measurement (a minute in guest a), its figures in BENCHMARKS.md's Density; not run by the tests"},
	{`^(COUNT=\d+ )?(RACE=1 )?\.ci/stress (alone|beside)$`, "the stress run (an hour and more): run by hand, its figures in issue 24's note"},
	{`^(REAPER_BASELINE=\S+ )?go run \./test/bench( -rounds \d+)?$`, "the benchmarks (8 minutes a round); not run by the tests"},
	{`^claude mcp add `, "Claude Code is not installed here; the reaper command and flags it starts are checked"},
	{`^codex mcp add `, "Codex is not installed here; the reaper command it starts is checked"},
	{`^npx @modelcontextprotocol/inspector --cli `, "TestInspector runs it where the Inspector is installed (Node 22.19 or later)"},
	{`^npx @modelcontextprotocol/inspector `, "the web UI needs a browser; the reaper command it starts is checked"},
}

// TestShellBlocks checks every sh block of the documents: bash parses it, every command is run here
// or named in mirrored, every reaper invocation uses flags reaper has, and every repository path it
// names exists.
func TestShellBlocks(t *testing.T) {
	for _, doc := range documents(t) {
		for _, b := range blocks(t, doc) {
			if b.lang != "sh" {
				continue
			}
			if out, err := exec.Command("bash", "-n", "-c", b.text).CombinedOutput(); err != nil {
				t.Errorf("%s: bash -n: %v\n%s", b.where, err, out)
			}
			for _, cmd := range commands(b.text) {
				checkCommand(t, b.where, cmd)
			}
		}
	}
}

func checkCommand(t *testing.T, where, cmd string) {
	t.Helper()
	ws := words(cmd)
	checkInvocations(t, where, ws)
	for _, w := range ws {
		if strings.HasPrefix(w, "./") || strings.HasPrefix(w, "deploy/") {
			path := strings.TrimSuffix(strings.TrimSuffix(w, "..."), "/")
			if _, err := os.Stat(filepath.Join(repo, path)); err != nil {
				t.Errorf("%s: %q names %s, which the repository does not have", where, cmd, w)
			}
		}
	}
	if cmd == "reaper version" {
		out, err := exec.Command(bin, "version").CombinedOutput()
		if err != nil || !regexp.MustCompile(`^reaper \S+ go1\.\d+`).Match(out) {
			t.Errorf("%s: reaper version printed %q, %v", where, out, err)
		}
		return
	}
	if strings.Contains(cmd, "github.com/cgreaper/reaper/") && !strings.Contains(read(t, "go.mod"), "module github.com/cgreaper/reaper\n") {
		t.Errorf("%s: %q installs a module path that go.mod does not declare", where, cmd)
	}
	for _, m := range mirrored {
		if regexp.MustCompile(m.pattern).MatchString(cmd) {
			return
		}
	}
	t.Errorf("%s: nothing runs or checks %q: run it in test/docs, or add it to mirrored with the test that runs it", where, cmd)
}

// TestConsoleExamples runs each reaper command of the console examples ($ lines) with the binary
// under test, and checks what the example shows: the start of its stderr and, where a `$ echo $?`
// follows, its exit status.
func TestConsoleExamples(t *testing.T) {
	testutil.RemoveIfNew(t, instance.DefaultStateDir()) // the examples run reaper with its defaults
	ran := 0
	for _, doc := range documents(t) {
		for _, b := range blocks(t, doc) {
			if b.lang != "console" {
				continue
			}
			ran += runConsole(t, b)
		}
	}
	if ran == 0 {
		t.Error("no console example ran: docs/run.md's example of reaper run is gone")
	}
}

func runConsole(t *testing.T, b block) int {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(b.text, "\n"), "\n")
	ran := 0
	for i := 0; i < len(lines); i++ {
		cmd, ok := strings.CutPrefix(lines[i], "$ reaper ")
		if !ok {
			continue
		}
		var shown []string
		for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "$ ") {
			i++
			shown = append(shown, lines[i])
		}
		var status string
		if i+2 < len(lines) && lines[i+1] == "$ echo $?" {
			status = lines[i+2]
			i += 2
		}
		c := exec.Command("sh", "-c", `"$0" `+cmd, bin)
		c.Dir = t.TempDir()
		out, _ := c.CombinedOutput()
		if got := c.ProcessState.ExitCode(); status != "" && status != strconv.Itoa(got) {
			t.Errorf("%s: reaper %s exited %d, the example says %s\n%s", b.where, cmd, got, status, out)
		}
		for _, want := range shown {
			// Counts, pids, ages and names differ from run to run: compare up to the first digit.
			prefix := want
			if i := strings.IndexAny(want, "0123456789"); i >= 0 {
				prefix = want[:i]
			}
			if !strings.Contains(string(out), prefix) {
				t.Errorf("%s: reaper %s printed %q, the example shows %q", b.where, cmd, out, want)
			}
		}
		ran++
	}
	return ran
}
