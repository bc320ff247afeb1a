package proc

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

// FuzzParseStat formats a stat line from its fields, with any command name (which may hold spaces,
// parentheses, newlines), and checks that ParseStat gives the fields back; any bytes at all must not
// make it panic.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte("sleep"), byte('S'), uint32(1), uint32(42), uint32(42), uint64(4194560), uint32(1), uint64(123456))
	f.Add([]byte("a) b (c"), byte('Z'), uint32(0), uint32(0), uint32(0), uint64(0), uint32(200), uint64(0))
	f.Add([]byte(""), byte('T'), uint32(4194304), uint32(1), uint32(1), uint64(1<<63), uint32(1), uint64(1<<62))
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		f.Add(b, byte('R'), uint32(1), uint32(1), uint32(1), uint64(0), uint32(1), uint64(1))
	}
	f.Fuzz(func(t *testing.T, comm []byte, state byte, ppid, pgid, sid uint32, flags uint64, threads uint32, start uint64) {
		ParseStat(7, comm) // arbitrary bytes: must not panic
		if state == ' ' || state == ')' || state >= '0' && state <= '9' || state == '-' {
			state = 'S'
		}
		line := fmt.Sprintf("7 (%s) %s %d %d %d 0 -1 %d 0 0 0 0 0 0 0 0 20 0 %d 0 %d 1000 200 18446744073709551615 1",
			comm, []byte{state}, ppid, pgid, sid, flags, threads, start)
		st, ok := ParseStat(7, []byte(line))
		want := Stat{Pid: 7, PPid: int(ppid), Pgid: int(pgid), Sid: int(sid), Flags: flags, Threads: int(threads), Start: start, State: state}
		if !ok || st != want {
			t.Errorf("ParseStat(%q) = %+v, %v; want %+v", line, st, ok, want)
		}
	})
}

// FuzzEnvScanner splits an environment into chunks at arbitrary places and checks that the scanner
// reports exactly the entries a plain split gives, cut to keep bytes, and stops when asked to.
func FuzzEnvScanner(f *testing.F) {
	f.Add([]byte("A=1\x00REAPER_SESSION=r1-2/s-1\x00B=\x00"), uint16(64), []byte{3, 9}, uint8(255))
	f.Add([]byte("X="+string(bytes.Repeat([]byte("y"), 300))+"\x00Z=z"), uint16(16), []byte{1, 1, 200}, uint8(1))
	f.Add([]byte("\x00\x00"), uint16(0), []byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, env []byte, keep uint16, splits []byte, stopAfter uint8) {
		// What the scanner must report: the entries, each cut to keep bytes.
		var want []string
		var wantComplete []bool
		entries := bytes.Split(env, []byte{0})
		if len(entries[len(entries)-1]) == 0 {
			entries = entries[:len(entries)-1] // a trailing NUL ends the last entry; none starts after it
		}
		for _, e := range entries {
			n := min(len(e), int(keep))
			want = append(want, string(e[:n]))
			wantComplete = append(wantComplete, len(e) <= int(keep))
		}
		if int(stopAfter) < len(want) {
			want, wantComplete = want[:int(stopAfter)+1], wantComplete[:int(stopAfter)+1]
		}
		var got []string
		var gotComplete []bool
		sc := envScanner{keep: int(keep), fn: func(entry []byte, complete bool) bool {
			got = append(got, string(entry))
			gotComplete = append(gotComplete, complete)
			return len(got) <= int(stopAfter)
		}}
		rest := env
		more := true
		for _, s := range splits {
			if !more || len(rest) == 0 {
				break
			}
			n := min(int(s), len(rest))
			more = sc.feed(rest[:n])
			rest = rest[n:]
		}
		if more && len(rest) > 0 {
			more = sc.feed(rest)
		}
		if more {
			sc.end()
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(gotComplete) != fmt.Sprint(wantComplete) {
			t.Errorf("entries %q %v, want %q %v", got, gotComplete, want, wantComplete)
		}
	})
}
