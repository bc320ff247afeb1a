package instance

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// FuzzParseInstance: a record that parses names an instance whose name agrees with its pid and start
// time, in a known mode, with a slice that is empty or clean and absolute; a record reaper writes
// parses back unchanged.
func FuzzParseInstance(f *testing.F) {
	good, _ := json.Marshal(Record{Name: "r12-34", Pid: 12, Start: 34, Slice: "/sys/fs/cgroup/reaper/r12-34",
		StateDir: "/run/reaper/reaper-r12-34", Containment: "cgroup", Started: time.Unix(1, 0).UTC()})
	for _, s := range []string{string(good), `{}`, `{"name":"r1-1","pid":1,"start":1,"containment":"process"}`,
		`{"name":"r1-1","pid":2,"start":1,"containment":"process"}`, `{"name":"r01-1","pid":1,"start":1,"containment":"process"}`,
		`{"name":"r1-1","pid":1,"start":1,"containment":"cgroup","slice":"/"}`, `{"name":"r1-1","pid":1,"start":1,"containment":"cgroup","slice":"/a/../b"}`,
		`{"name":"r1-1","pid":1,"start":1,"containment":"cgroup","slice":"relative"}`, `[`, `null`,
		`{"name":"r1-1","pid":1,"start":1,"containment":"cgroup","root_made":["/sys/fs/cgroup/a","/sys/fs/cgroup/a/b"]}`,
		`{"name":"r1-1","pid":1,"start":1,"containment":"cgroup","root_made":["a/../b"]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := parseInstance(b)
		if err != nil {
			return
		}
		if pid, start, ok := ParseName(in.Name); !ok || pid != in.Pid || start != in.Start || Name(pid, start) != in.Name {
			t.Errorf("parseInstance(%q) = %+v: the name does not agree", b, in)
		}
		if in.Slice != "" && (!filepath.IsAbs(in.Slice) || filepath.Clean(in.Slice) != in.Slice) {
			t.Errorf("parseInstance(%q): slice %q", b, in.Slice)
		}
		for _, d := range in.RootMade {
			if !filepath.IsAbs(d) || filepath.Clean(d) != d {
				t.Errorf("parseInstance(%q): a cgroup made for the root, %q", b, d)
			}
		}
		again, _ := json.Marshal(in)
		if back, err := parseInstance(again); err != nil || !reflect.DeepEqual(back, in) {
			t.Errorf("%+v does not survive a round trip: %+v, %v", in, back, err)
		}
	})
}

// FuzzParseSessionRecord: a session record that parses has a session's name, an id of printable
// ASCII, and clean absolute paths.
func FuzzParseSessionRecord(f *testing.F) {
	good, _ := json.Marshal(SessionRecord{ID: "mcp-1", Name: "s-3", Slice: "/sys/fs/cgroup/reaper/r1-2/s-3",
		Tasks: []TaskView{{ID: "t-0123456789abcdef", Command: "sleep 1", Leaf: "/sys/fs/cgroup/reaper/r1-2/s-3/l-1"}}})
	for _, s := range []string{string(good), `{}`, `{"name":"s-0","id":"x"}`, `{"name":"s-1","id":"a b"}`, `{"name":"s-1","id":"x","slice":"/../x"}`,
		`{"name":"s-1","id":"x","tasks":[{"id":"nope"}]}`, `{"name":"s-01","id":"x"}`, `{"name":"s-1","id":"\u001b[2J"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := parseSessionRecord(b)
		if err != nil {
			return
		}
		if !ValidSessionName(rec.Name) || CheckSessionID(rec.ID) != nil || !cleanPath(rec.Slice) || rec.Tasks == nil {
			t.Errorf("parseSessionRecord(%q) = %+v", b, rec)
		}
		for _, tv := range rec.Tasks {
			if len(tv.ID) > maxRecordTaskID || !cleanPath(tv.Leaf) {
				t.Errorf("parseSessionRecord(%q): task %+v", b, tv)
			}
		}
	})
}

// FuzzParseName: a name that parses is exactly the name of the instance it parses to.
func FuzzParseName(f *testing.F) {
	for _, s := range []string{"r1-2", "r0-1", "r-1-2", "r+1-2", "r01-2", "r1-02", "r1-", "r4194305-1", "x1-2", "r1-2/..", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if pid, start, ok := ParseName(s); ok && Name(pid, start) != s {
			t.Errorf("ParseName(%q) = %d, %d", s, pid, start)
		}
	})
}
