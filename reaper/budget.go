package reaper

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Budget caps the output one call returns by what it costs the caller to carry, rather than by its
// length alone. Output that is cheap to carry is unaffected; output whose characters are expensive
// (control characters, which JSON escapes as six bytes each) is cut further, from the middle for a
// foreground command's whole output, at the end for an incremental read, and the cut is counted like
// any other drop. The zero Budget caps nothing.
type Budget struct {
	// Cost prices one character of output. A byte that is not part of valid UTF-8 is priced as
	// utf8.RuneError, which is what it becomes (a run of them becomes one).
	Cost func(r rune) int
	// Max is the most the returned output may cost; zero means no cap.
	Max int
}

func (b Budget) on() bool { return b.Max > 0 && b.Cost != nil }

// cost returns what p costs.
func (b Budget) cost(p []byte) int {
	n := 0
	for len(p) > 0 {
		r, size := utf8.DecodeRune(p)
		n += b.Cost(r)
		p = p[size:]
	}
	return n
}

// prefix returns the length of the longest prefix of p, cut between characters, that costs at most
// max, and its cost.
func (b Budget) prefix(p []byte, max int) (n, cost int) {
	for n < len(p) {
		r, size := utf8.DecodeRune(p[n:])
		c := b.Cost(r)
		if cost+c > max {
			break
		}
		cost += c
		n += size
	}
	return n, cost
}

// suffix returns the length of the longest suffix of p, cut between characters, that costs at most
// max, and its cost.
func (b Budget) suffix(p []byte, max int) (n, cost int) {
	for n < len(p) {
		r, size := utf8.DecodeLastRune(p[:len(p)-n])
		c := b.Cost(r)
		if cost+c > max {
			break
		}
		cost += c
		n += size
	}
	return n, cost
}

// fit returns the kept output, head and tail with gap bytes dropped between them (gap is 0 where they
// are contiguous), as text within the budget: if it costs more, about half the budget goes to its
// start and the rest to its end, and what lies between is dropped. dropped counts every byte
// between the two, gap included.
func (b Budget) fit(head, tail []byte, gap int64) (text string, dropped int64) {
	if !b.on() || b.cost(head)+b.cost(tail) <= b.Max {
		if gap > 0 {
			return joinText(head, []byte(dropNotice(gap)), tail), gap
		}
		return joinText(head, tail), 0
	}
	if gap == 0 {
		// One stream: cut it as one (a character may straddle head and tail).
		kept := make([]byte, 0, len(head)+len(tail))
		kept = append(append(kept, head...), tail...)
		head, tail = kept, nil
	}
	n1, c1 := b.prefix(head, b.Max/2)
	front, rest := head[:n1], head[n1:]
	if len(tail) > 0 {
		n2, _ := b.suffix(tail, b.Max-c1)
		dropped = gap + int64(len(rest)) + int64(len(tail)-n2)
		return joinText(front, []byte(dropNotice(dropped)), tail[len(tail)-n2:]), dropped
	}
	n2, _ := b.suffix(rest, b.Max-c1)
	dropped = int64(len(rest) - n2)
	return joinText(front, []byte(dropNotice(dropped)), rest[len(rest)-n2:]), dropped
}

// joinText returns the parts, joined, as valid UTF-8 (see validText), copying them once. A character
// cut at the end of one part and the start of the next becomes U+FFFD on each side, as it would in
// each part alone; whole characters split across parts are kept whole.
func joinText(parts ...[]byte) string {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, p := range parts {
		sb.Write(p)
	}
	if s := sb.String(); utf8.ValidString(s) { // see validText
		return s
	}
	return strings.ToValidUTF8(sb.String(), "\uFFFD")
}

// dropNotice is the line that stands in the output for n dropped bytes.
func dropNotice(n int64) string {
	return fmt.Sprintf("\n[... %d bytes of output dropped ...]\n", n)
}
