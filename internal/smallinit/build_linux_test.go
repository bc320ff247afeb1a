package smallinit

import (
	"bytes"
	"debug/elf"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cgreaper/reaper/internal/pidwire"
	"golang.org/x/sys/unix"
)

var update = flag.Bool("update", false, "build init_linux_amd64.elf again from c/init.c")

// cflags are how c/init.c is built: small, static, with no C library, no start files and nothing
// the compiler would add on its own (a stack protector, unwind tables, CET notes, a build id).
var cflags = []string{
	"-Os", "-static", "-nostdlib", "-ffreestanding", "-fno-stack-protector", "-fno-asynchronous-unwind-tables",
	"-fno-unwind-tables", "-fcf-protection=none", "-fno-pie", "-no-pie", "-Wall", "-Wextra", "-Werror",
	"-Wl,--build-id=none", "-Wl,-z,norelro", "-Wl,-z,noexecstack", "-Wl,-s",
}

// TestBuild builds c/init.c with the C compiler at hand (CC, else gcc) and compares the result with the
// committed program; with -update it writes it. The committed program names the compiler that built
// it (its .comment section): a compiler of another version may build other bytes, and then the test
// skips, naming both.
func TestBuild(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("skipped: the program is built for amd64, and this is %s", runtime.GOARCH)
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("skipped: no C compiler (%s) to build c/init.c with: %v", cc, err)
	}
	out := filepath.Join(t.TempDir(), "init")
	cmd := exec.Command(cc, append(append([]string{}, cflags...), "-o", out, filepath.Join("c", "init.c"))...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, b)
	}
	built, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("init_linux_amd64.elf", built, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if bytes.Equal(built, image) {
		return
	}
	committed, here := compilerOf(t, image), compilerOf(t, built)
	if committed != here {
		t.Skipf("skipped: the committed program was built by %q, the compiler here is %q: their output cannot be compared", committed, here)
	}
	t.Errorf("c/init.c builds a program other than init_linux_amd64.elf with the same compiler (%s): build it again with -update", here)
}

// compilerOf returns what a program's .comment section says of the compiler that built it.
func compilerOf(t *testing.T, program []byte) string {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(program))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Section(".comment")
	if s == nil {
		return ""
	}
	b, err := s.Data()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Trim(string(b), "\x00")
}

// TestImage: the committed program is a static x86-64 executable of a few kilobytes, with no
// interpreter or dynamic section, no segment both writable and executable, and its entry in an
// executable segment.
func TestImage(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		if len(image) != 0 {
			t.Errorf("a program of %d bytes for %s, where none is built", len(image), runtime.GOARCH)
		}
		t.Skipf("skipped: no small init for %s", runtime.GOARCH)
	}
	if len(image) > 64<<10 {
		t.Errorf("the program has %d bytes, want a few kilobytes", len(image))
	}
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		t.Fatal(err)
	}
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC || f.OSABI != elf.ELFOSABI_NONE {
		t.Errorf("the program is %v %v %v %v, want a 64-bit x86-64 executable", f.Class, f.Machine, f.Type, f.OSABI)
	}
	entry := false
	for _, p := range f.Progs {
		switch {
		case p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC:
			t.Errorf("the program has a %v segment: it must be static", p.Type)
		case p.Type == elf.PT_LOAD && p.Flags&elf.PF_W != 0 && p.Flags&elf.PF_X != 0:
			t.Errorf("a segment at %#x is writable and executable", p.Vaddr)
		case p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && f.Entry >= p.Vaddr && f.Entry < p.Vaddr+p.Memsz:
			entry = true
		}
	}
	if !entry {
		t.Errorf("the entry %#x is in no executable segment", f.Entry)
	}
	if syms, _ := f.Symbols(); len(syms) > 0 {
		t.Errorf("the program has %d symbols: it is built stripped", len(syms))
	}
}

// TestConstants: the numbers c/init.c defines for the protocol are internal/pidwire's, and those a C
// library would give are the kernel's.
func TestConstants(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("c", "init.c"))
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]int64{}
	for _, m := range regexp.MustCompile(`(?m)^#define ([A-Z_]+) (0x[0-9a-f]+|[0-9]+)$`).FindAllStringSubmatch(string(src), -1) {
		v, err := strconv.ParseInt(m[2], 0, 64)
		if err != nil {
			t.Fatal(err)
		}
		defined[m[1]] = v
	}
	want := map[string]int64{
		"INIT_FD": pidwire.InitFD, "MSG_HELLO": pidwire.MsgHello, "MSG_SIGNAL": pidwire.MsgSignal,
		"MSG_SIGNALED": pidwire.MsgSignaled, "HELLO_PROC": pidwire.HelloProc, "MAX_SIGNALS": pidwire.MaxSignals,
		"SOL_SOCKET": unix.SOL_SOCKET, "SO_TYPE": unix.SO_TYPE, "SOCK_SEQPACKET": unix.SOCK_SEQPACKET,
		"MSG_TRUNC": unix.MSG_TRUNC, "MSG_CTRUNC": unix.MSG_CTRUNC, "MSG_NOSIGNAL": unix.MSG_NOSIGNAL, "SIGKILL": int64(unix.SIGKILL),
		"SIGSTOP": int64(unix.SIGSTOP), "NSIG": 64, "SIG_IGN": 1, "SIG_SETMASK": 2, "EINTR": int64(unix.EINTR),
		"ESRCH": int64(unix.ESRCH),
	}
	for name, v := range want {
		if got, ok := defined[name]; !ok || got != v {
			t.Errorf("c/init.c defines %s as %d (defined: %v), want %d", name, got, ok, v)
		}
	}
	for name := range defined {
		if _, ok := want[name]; !ok {
			t.Errorf("c/init.c defines %s, which this test does not check: add it", name)
		}
	}
}

// TestErrnoText: the names c/init.c gives errors in its hello's note are Go's, as the Go init's
// note has them.
func TestErrnoText(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("c", "init.c"))
	if err != nil {
		t.Fatal(err)
	}
	entries := regexp.MustCompile(`\[([0-9]+)\] = "([^"]*)",`).FindAllStringSubmatch(string(src), -1)
	if len(entries) < 10 {
		t.Fatalf("found %d names of errors in c/init.c: the pattern no longer matches", len(entries))
	}
	for _, m := range entries {
		n, _ := strconv.Atoi(m[1])
		if want := syscall.Errno(n).Error(); m[2] != want {
			t.Errorf("c/init.c names errno %d %q, Go %q", n, m[2], want)
		}
	}
}
