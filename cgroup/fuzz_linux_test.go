package cgroup

import (
	"bytes"
	"encoding/binary"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzParsePids: any bytes give pids in the kernel's range only, and a list of pids, one per line,
// comes back as it was.
func FuzzParsePids(f *testing.F) {
	f.Add([]byte("1\n23\n4194304\n"), uint32(1), uint32(2))
	f.Add([]byte("0\n0\n"), uint32(0), uint32(0))
	f.Add([]byte("99999999999999999999999\n12"), uint32(7), uint32(4194304))
	f.Fuzz(func(t *testing.T, b []byte, a, c uint32) {
		for _, p := range parsePids(b, nil) {
			if p <= 0 || p > maxPid {
				t.Errorf("parsePids(%q) gave %d", b, p)
			}
		}
		var want []int
		var file strings.Builder
		for _, p := range []uint32{a, c} {
			if p > 0 && p <= maxPid {
				want = append(want, int(p))
			}
			file.WriteString(strconv.FormatUint(uint64(p), 10) + "\n")
		}
		if got := parsePids([]byte(file.String()), nil); !slices.Equal(got, want) {
			t.Errorf("parsePids(%q) = %v, want %v", file.String(), got, want)
		}
	})
}

// FuzzEventValue: any bytes and key; a value found is the one on the key's line.
func FuzzEventValue(f *testing.F) {
	f.Add([]byte("populated 1\nfrozen 0\n"), "populated")
	f.Add([]byte("populated 0\nfrozen 1"), "frozen")
	f.Add([]byte("populated\n"), "populated")
	f.Fuzz(func(t *testing.T, b []byte, key string) {
		v, found := eventValue(b, key)
		if !found {
			return
		}
		ok := false
		for _, line := range bytes.Split(b, []byte{'\n'}) {
			k, val, cut := bytes.Cut(line, []byte{' '})
			if cut && string(k) == key {
				ok = (string(bytes.TrimSpace(val)) == "1") == v
				break
			}
		}
		if !ok {
			t.Errorf("eventValue(%q, %q) = %v, not what the key's line says", b, key, v)
		}
	})
}

// FuzzAppendDirs: a getdents64 buffer of any bytes (a reclen too short or too long included) never
// makes appendDirs panic or report "." and ".."; directory entries written as the kernel writes them
// come back.
func FuzzAppendDirs(f *testing.F) {
	f.Add([]byte{}, "a", "b.c")
	f.Add(bytes.Repeat([]byte{0xff}, 40), ".", "..")
	f.Fuzz(func(t *testing.T, raw []byte, n1, n2 string) {
		for _, n := range appendDirs(nil, raw) {
			if n == "." || n == ".." || strings.IndexByte(n, 0) >= 0 {
				t.Errorf("appendDirs gave %q", n)
			}
		}
		var buf []byte
		var want []string
		for i, n := range []string{n1, n2} {
			if n == "" || strings.IndexByte(n, 0) >= 0 || len(n) > 255 {
				continue
			}
			typ := byte(unix.DT_DIR)
			if i == 1 {
				typ = unix.DT_REG // a file is not a cgroup
			}
			reclen := (19 + len(n) + 1 + 7) &^ 7
			rec := make([]byte, reclen)
			binary.NativeEndian.PutUint16(rec[16:18], uint16(reclen))
			rec[18] = typ
			copy(rec[19:], n)
			buf = append(buf, rec...)
			if typ == unix.DT_DIR && n != "." && n != ".." {
				want = append(want, n)
			}
		}
		if got := appendDirs(nil, buf); strings.Join(got, "/") != strings.Join(want, "/") {
			t.Errorf("appendDirs = %q, want %q", got, want)
		}
	})
}

// FuzzParseOwnCgroup: any bytes; a cgroup found is an absolute path, not a deleted one.
func FuzzParseOwnCgroup(f *testing.F) {
	f.Add([]byte("12:pids:/a\n0::/user.slice/x.scope\n"))
	f.Add([]byte("0::/gone (deleted)\n"))
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseOwnCgroup(b, "cgroup")
		if err == nil && (!strings.HasPrefix(s, "/") || strings.HasSuffix(s, " (deleted)")) {
			t.Errorf("parseOwnCgroup(%q) = %q", b, s)
		}
	})
}

// FuzzParseMounts: any bytes never make the mountinfo parser panic, and a path escaped as the kernel
// escapes it comes back as it was.
func FuzzParseMounts(f *testing.F) {
	f.Add([]byte("40 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"), "/a b\\c")
	f.Add([]byte("83 76 0:38 /../.. /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n1 2 3"), "\t\n")
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		f.Add(b, "/mnt/with space")
	}
	f.Fuzz(func(t *testing.T, b []byte, point string) {
		parseMounts(b)
		if point == "" || strings.ContainsAny(point, "\x00") {
			return
		}
		esc := strings.NewReplacer(`\`, `\134`, " ", `\040`, "\t", `\011`, "\n", `\012`).Replace(point)
		ms, err := parseMounts([]byte("9 1 0:1 / " + esc + " rw - cgroup2 cgroup2 rw\n"))
		if err != nil || len(ms) != 1 || ms[0].point != point || ms[0].fstype != "cgroup2" {
			t.Errorf("parseMounts of the point %q = %+v, %v", point, ms, err)
		}
	})
}
