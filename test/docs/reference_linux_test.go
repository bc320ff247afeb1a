package docs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// notFlags are the REAPER_* names the documents may use that are no flag's variable.
var notFlags = []string{
	"REAPER_SESSION",   // the marker every task inherits
	"REAPER_VM_DIR",    // the VM lane's work directory (test/vm)
	"REAPER_TEST_SLOW", // the tests' deadline factor (internal/testutil.Slow)
	"REAPER_BASELINE",  // an earlier reaper binary the benchmarks compare with (test/e2e BenchmarkBaseline)
}

// TestFlagsAndVariables checks that the flag table of docs/operations.md names every flag of reaper
// serve and no other, and that every REAPER_* variable the documents name is a flag's.
func TestFlagsAndVariables(t *testing.T) {
	flags, vars := helpOf(t, "serve")
	for _, sub := range []string{"run", "ps", "sweep"} {
		_, v := helpOf(t, sub)
		for k := range v {
			vars[k] = true
		}
	}
	ops := read(t, "docs/operations.md")
	table := ops[strings.Index(ops, "## Flags and environment"):strings.Index(ops, "## Bounds")]
	inTable := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\| (.*?) \|`).FindAllStringSubmatch(table, -1) {
		for _, f := range regexp.MustCompile("`--([a-z][a-z-]*)").FindAllStringSubmatch(m[1], -1) {
			inTable[f[1]] = true
			if !flags[f[1]] {
				t.Errorf("docs/operations.md's table names --%s, which reaper serve does not have", f[1])
			}
		}
	}
	for f := range flags {
		if !inTable[f] && f != "help" {
			t.Errorf("reaper serve --%s is missing from docs/operations.md's flag table", f)
		}
	}
	for _, doc := range documents(t) {
		for _, v := range regexp.MustCompile(`REAPER_[A-Z_]+[A-Z]`).FindAllString(read(t, doc), -1) {
			if !vars[v] && !slices.Contains(notFlags, v) {
				t.Errorf("%s names %s, which is no flag's variable (reaper serve --help)", doc, v)
			}
		}
	}
}

// TestJSONExamples checks that every JSON block parses, and that a client configuration that starts
// reaper gives it flags it has.
func TestJSONExamples(t *testing.T) {
	for _, doc := range documents(t) {
		for _, b := range blocks(t, doc) {
			if b.lang != "json" {
				continue
			}
			var v any
			if err := json.Unmarshal([]byte(b.text), &v); err != nil {
				t.Errorf("%s: not JSON: %v", b.where, err)
				continue
			}
			walkServers(t, b.where, v)
		}
	}
}

// walkServers finds the objects with a command and args in a parsed configuration and checks the
// reaper invocations among them.
func walkServers(t *testing.T, where string, v any) {
	switch v := v.(type) {
	case map[string]any:
		if cmd, ok := v["command"].(string); ok {
			ws := []string{cmd}
			args, _ := v["args"].([]any)
			for _, a := range args {
				s, _ := a.(string)
				ws = append(ws, s)
			}
			checkInvocations(t, where, ws)
		}
		for _, x := range v {
			walkServers(t, where, x)
		}
	case []any:
		for _, x := range v {
			walkServers(t, where, x)
		}
	}
}

var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// outside is a path of the machine the project is developed on, which a reader does not have.
var outside = regexp.MustCompile(`(^|[\s(\x60])/work/\S*`)

// TestLinks checks every relative link of the documents: its file exists and, where it names a
// heading, the heading does (as GitHub makes anchors of headings). No document cites a path of the
// development machine.
func TestLinks(t *testing.T) {
	for _, doc := range documents(t) {
		for _, m := range outside.FindAllString(read(t, doc), -1) {
			t.Errorf("%s cites %s, a path of the development machine that readers do not have: cite the public source, or the repository's file", doc, strings.TrimSpace(m))
		}
		for _, m := range link.FindAllStringSubmatch(read(t, doc), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
			}
			if _, err := os.Stat(filepath.Join(repo, path)); err != nil {
				t.Errorf("%s links to %s, which does not exist", doc, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !slices.Contains(anchors(t, path), anchor) {
				t.Errorf("%s links to %s, which has no heading #%s", doc, path, anchor)
			}
		}
	}
}

// anchors returns the anchors GitHub gives a document's headings: lower case, punctuation but
// hyphens dropped, spaces made hyphens.
func anchors(t *testing.T, doc string) []string {
	var out []string
	inCode := false
	for _, line := range strings.Split(read(t, doc), "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// TestKustomizeImages checks that the images a document sets with `kustomize edit set image` in
// deploy/kubernetes/base are the ones its Deployment names: a name it does not have would leave
// the placeholder in place, and the pod would pull an image no registry holds.
func TestKustomizeImages(t *testing.T) {
	deployment := read(t, "deploy/kubernetes/base/deployment.yaml")
	set := 0
	for _, doc := range documents(t) {
		for _, b := range blocks(t, doc) {
			for _, cmd := range commands(b.text) {
				_, images, ok := strings.Cut(cmd, "kustomize edit set image ")
				if !ok {
					continue
				}
				if !strings.Contains(cmd, "deploy/kubernetes/base") {
					t.Errorf("%s: %q sets images outside deploy/kubernetes/base, whose Deployment names them", b.where, cmd)
				}
				for _, w := range strings.Fields(strings.TrimSuffix(images, ")")) {
					name, _, _ := strings.Cut(w, "=")
					set++
					if !regexp.MustCompile(`(?m)^\s+image: ` + regexp.QuoteMeta(name) + `$`).MatchString(deployment) {
						t.Errorf("%s: %q sets the image %s, which deploy/kubernetes/base/deployment.yaml does not name", b.where, cmd, name)
					}
				}
			}
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^\s+image: (\S+)$`).FindAllStringSubmatch(deployment, -1) {
		if !strings.Contains(read(t, "docs/deploy.md"), m[1]+"=") {
			t.Errorf("docs/deploy.md does not set the image %s of deploy/kubernetes/base: kubectl apply would deploy the placeholder", m[1])
		}
	}
	if set == 0 {
		t.Error("no document sets the images of deploy/kubernetes/base")
	}
}
