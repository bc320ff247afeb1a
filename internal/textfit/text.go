package textfit

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"
)

// Ring keeps the most recent bytes written to it, up to its capacity, in memory allocated once.
type Ring struct {
	buf []byte
	pos int // where the next byte goes
	n   int // valid bytes
}

// NewRing returns a Ring that keeps the last size bytes.
func NewRing(size int) Ring { return Ring{buf: make([]byte, size)} }

// Write appends p, dropping the oldest bytes beyond the capacity.
func (r *Ring) Write(p []byte) {
	if len(r.buf) == 0 {
		return
	}
	if len(p) > len(r.buf) {
		p = p[len(p)-len(r.buf):]
	}
	for len(p) > 0 {
		k := copy(r.buf[r.pos:], p)
		p = p[k:]
		r.pos = (r.pos + k) % len(r.buf)
		r.n = min(r.n+k, len(r.buf))
	}
}

// Len returns how many bytes the ring holds.
func (r *Ring) Len() int { return r.n }

// View returns the valid bytes in stream order, in the ring's own memory: it first rotates the ring in
// place, if need be, so that they start at its beginning. A read then copies them once, and a ring
// that is no longer written is rotated at most once.
func (r *Ring) View() []byte {
	if r.n == 0 {
		return nil
	}
	if start := (r.pos - r.n + len(r.buf)) % len(r.buf); start != 0 {
		slices.Reverse(r.buf[:start])
		slices.Reverse(r.buf[start:])
		slices.Reverse(r.buf)
		r.pos = r.n % len(r.buf)
	}
	return r.buf[:r.n]
}

// CountChars returns how many characters p holds as output counts them (see Budget): every byte that
// is not a UTF-8 continuation byte (10xxxxxx). That is exact for valid UTF-8; for other bytes it is
// close to what the text returned holds (a run of invalid bytes becomes one U+FFFD there). Eight bytes
// at a time: it runs over everything a task writes.
func CountChars(p []byte) int64 {
	total, cont := len(p), 0
	for len(p) >= 8 {
		w := binary.LittleEndian.Uint64(p)
		// A byte's bit 7 set and bit 6 clear, moved to the byte's bit 0.
		cont += bits.OnesCount64((w >> 7) & ^(w >> 6) & 0x0101010101010101)
		p = p[8:]
	}
	for _, c := range p {
		if c&0xC0 == 0x80 {
			cont++
		}
	}
	return int64(total - cont)
}

// IncompleteSuffix returns the length of a UTF-8 sequence cut off at the end of b (0 to 3 bytes).
func IncompleteSuffix(b []byte) int {
	for i := 1; i <= 3 && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) { // ASCII too, which is a full rune
			if !utf8.FullRune(b[len(b)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}

// ValidText converts output bytes to valid UTF-8: each run of invalid bytes becomes one U+FFFD.
func ValidText(b []byte) string {
	if utf8.Valid(b) { // far faster than ToValidUTF8's own scan, which finds nothing to replace
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// ByteSize writes n bytes in the largest binary unit that divides it: "64 MiB", "1536 KiB", "100
// bytes".
func ByteSize(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
