// Command summary reads `go test -json` output and prints failures in full, then a closing summary:
// each package's result, every skipped test with its reason, and the totals. With -digest FILE it
// also writes the last lines of each failure's own output to FILE, for .ci/run to print last, where
// a reader of only the end of the log still sees why.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// digestLines is how many of a failure's last lines the digest keeps.
const digestLines = 12

func main() {
	digest := flag.String("digest", "", "also write the last lines of each failure's output to this file")
	flag.Parse()
	output := map[string]*strings.Builder{} // package/test -> output
	var failed, skipped []string
	pkgs := map[string]string{}
	var pass, fail, skip int
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Println(sc.Text()) // build errors and other plain lines
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			if output[key] == nil {
				output[key] = &strings.Builder{}
			}
			output[key].WriteString(e.Output)
		case "pass", "fail", "skip":
			if e.Test == "" {
				pkgs[e.Package] = fmt.Sprintf("%-4s %s (%.1fs)", strings.ToUpper(e.Action), e.Package, e.Elapsed)
				if e.Action == "fail" {
					failed = append(failed, key)
				}
				continue
			}
			switch e.Action {
			case "pass":
				pass++
			case "fail":
				fail++
				failed = append(failed, key)
			case "skip":
				skip++
				skipped = append(skipped, key)
			}
		}
	}
	var dg strings.Builder
	for _, k := range failed {
		fmt.Printf("=== output of %s\n%s\n", k, text(output[k]))
		if lines := said(text(output[k])); len(lines) > 0 {
			fmt.Fprintf(&dg, "failed: %s\n", k)
			for _, l := range lines[max(0, len(lines)-digestLines):] {
				fmt.Fprintf(&dg, "  %s\n", l)
			}
		}
	}
	if *digest != "" {
		if err := os.WriteFile(*digest, []byte(dg.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "summary:", err)
			os.Exit(1)
		}
	}
	fmt.Println("--- summary")
	var names []string
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		fmt.Println(pkgs[p])
	}
	for _, k := range skipped {
		// The reason is the test's own line (t.Skip's message), not the "--- SKIP" line after it.
		reason := ""
		for _, l := range strings.Split(text(output[k]), "\n") {
			l = strings.TrimSpace(l)
			if reason == "" && !strings.HasPrefix(l, "--- SKIP") && (strings.Contains(l, "skip") || strings.Contains(l, "SKIP")) {
				reason = l
			}
		}
		fmt.Printf("skipped %s: %s\n", k, reason)
	}
	fmt.Printf("tests: %d passed, %d failed, %d skipped\n", pass, fail, skip)
	if fail > 0 || len(failed) > 0 {
		os.Exit(1)
	}
}

// said returns the lines of a test's output other than go test's own (=== RUN, --- FAIL, ...): what
// the test said. A parent whose subtests failed says nothing of its own and is left out.
func said(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") || t == "FAIL" || t == "PASS" {
			continue
		}
		lines = append(lines, strings.TrimRight(l, " "))
	}
	return lines
}

func text(b *strings.Builder) string {
	if b == nil {
		return ""
	}
	return b.String()
}
