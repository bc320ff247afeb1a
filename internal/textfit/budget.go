package textfit

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Budget caps the output one call returns: in characters, what a model reads, and in what it costs
// the caller to carry, which a character's length alone does not say (control characters, which
// JSON escapes as six bytes each, cost more). A whole output is cut from the middle (Fit: about half
// of each cap to its start, the rest to its end), an incremental read at its end (Prefix), and the
// cut is counted like any other drop. The zero Budget caps nothing.
//
// Characters are Unicode code points of the output read as UTF-8; a byte that is not part of valid
// UTF-8 counts as one (a run of them becomes one U+FFFD in the text returned).
type Budget struct {
	// Chars is the most characters the returned output may hold; zero means no cap.
	Chars int
	// Cost prices one character of output; it must be at least the character's length in UTF-8. A
	// byte that is not part of valid UTF-8 is priced as utf8.RuneError, which is what it becomes.
	Cost func(r rune) int
	// Max is the most the returned output may cost; zero (or a nil Cost) means no cap.
	Max int
	// ASCII, if set, holds Cost of each ASCII character (see CostTable), which the cuts then read
	// instead of calling Cost for each: most output is ASCII.
	ASCII *[utf8.RuneSelf]uint8
}

// CostTable returns cost's price of each ASCII character, for Budget.ASCII, or nil if cost prices
// one above 255 (more than a table entry holds): the cuts then call Cost for each, exactly.
func CostTable(cost func(rune) int) *[utf8.RuneSelf]uint8 {
	var t [utf8.RuneSelf]uint8
	for c := range t {
		p := cost(rune(c))
		if p < 0 || p > math.MaxUint8 {
			return nil
		}
		t[c] = uint8(p)
	}
	return &t
}

// On reports whether the budget caps anything.
func (b Budget) On() bool { return b.Chars > 0 || b.costly() }

func (b Budget) costly() bool { return b.Max > 0 && b.Cost != nil }

// Window returns the most bytes of output a read within the budget can return (a character is at most
// 4 bytes long and costs at least its length), or -1 for no cap: what a read need look at.
func (b Budget) Window() int {
	w := -1
	if b.Chars > 0 {
		w = 4 * b.Chars
	}
	if b.costly() && (w < 0 || b.Max < w) {
		w = b.Max
	}
	if w >= 0 {
		w = max(w, utf8.UTFMax) // room for one character whole: a read returns one at least
	}
	return w
}

// Spend is what part of a budget a piece of output takes.
type Spend struct{ Chars, Cost int }

// Half returns about half of what is left, for the head of a cut; the tail gets the rest.
func (b Budget) Half() Spend { return Spend{Chars: b.Chars / 2, Cost: b.Max / 2} }

// All returns the whole budget.
func (b Budget) All() Spend { return Spend{Chars: b.Chars, Cost: b.Max} }

// Rest returns what is left of the whole budget once used is spent.
func (b Budget) Rest(used Spend) Spend {
	return Spend{Chars: b.Chars - used.Chars, Cost: b.Max - used.Cost}
}

// take adds a character of cost c to used if it fits within left, and reports whether it did.
func (b Budget) take(used *Spend, left Spend, c int) bool {
	if b.Chars > 0 && used.Chars+1 > left.Chars || b.costly() && used.Cost+c > left.Cost {
		return false
	}
	used.Chars++
	used.Cost += c
	return true
}

func (b Budget) price(r rune) int {
	if b.Cost == nil {
		return 0
	}
	return b.Cost(r)
}

// Prefix returns the length of the longest prefix of p, cut between characters, that fits in left,
// and what it takes.
func (b Budget) Prefix(p []byte, left Spend) (n int, used Spend) {
	if !b.On() {
		return len(p), Spend{Chars: utf8.RuneCount(p)}
	}
	for n < len(p) {
		if c := p[n]; c < utf8.RuneSelf && (b.ASCII != nil || b.Cost == nil) {
			// An ASCII character, priced without a call (the common case).
			cost := 0
			if b.ASCII != nil {
				cost = int(b.ASCII[c])
			}
			if !b.take(&used, left, cost) {
				break
			}
			n++
			continue
		}
		r, size := utf8.DecodeRune(p[n:])
		if !b.take(&used, left, b.price(r)) {
			break
		}
		n += size
	}
	return n, used
}

// Suffix returns the length of the longest suffix of p, cut between characters, that fits in left,
// and what it takes.
func (b Budget) Suffix(p []byte, left Spend) (n int, used Spend) {
	if !b.On() {
		return len(p), Spend{Chars: utf8.RuneCount(p)}
	}
	for n < len(p) {
		r, size := utf8.DecodeLastRune(p[:len(p)-n])
		if !b.take(&used, left, b.price(r)) {
			break
		}
		n += size
	}
	return n, used
}

// Fit returns the parts of head and tail (with gap bytes dropped between them; 0 where they are
// contiguous) that the output within the budget keeps: all of both if they fit, else about half the
// budget's worth of the start and the rest's worth of the end, less room, which the caller puts
// between them (the line that says what was left out: with it, the output stays within the budget,
// unless the budget is smaller than room). dropped counts every byte between front and back, gap
// included.
func (b Budget) Fit(head, tail []byte, gap int64, room Spend) (front, back []byte, dropped int64) {
	if n, used := b.Prefix(head, b.All()); n == len(head) {
		if m, _ := b.Prefix(tail, b.Rest(used)); m == len(tail) {
			return head, tail, gap
		}
	}
	b = b.less(room)
	if gap == 0 {
		// One stream: cut it as one (a character may straddle head and tail).
		kept := make([]byte, 0, len(head)+len(tail))
		kept = append(append(kept, head...), tail...)
		head, tail = kept, nil
	}
	n1, used := b.Prefix(head, b.Half())
	front, rest := head[:n1], head[n1:]
	if len(tail) > 0 {
		n2, _ := b.Suffix(tail, b.Rest(used))
		return front, tail[len(tail)-n2:], gap + int64(len(rest)) + int64(len(tail)-n2)
	}
	n2, _ := b.Suffix(rest, b.Rest(used))
	return front, rest[len(rest)-n2:], int64(len(rest) - n2)
}

// less returns the budget with room taken out of each cap it has, keeping at least one character's
// worth of each.
func (b Budget) less(room Spend) Budget {
	if b.Chars > 0 {
		b.Chars = max(b.Chars-room.Chars, 1)
	}
	if b.costly() {
		b.Max = max(b.Max-room.Cost, utf8.UTFMax)
	}
	return b
}

// Measure returns what p takes of a budget, whole.
func (b Budget) Measure(p []byte) Spend {
	_, used := b.Prefix(p, Spend{Chars: len(p), Cost: math.MaxInt})
	return used
}

// JoinText returns the parts, joined, as valid UTF-8 (see ValidText), copying them once. A character
// cut at the end of one part and the start of the next becomes U+FFFD on each side, as it would in
// each part alone; whole characters split across parts are kept whole.
func JoinText(parts ...[]byte) string {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, p := range parts {
		sb.Write(p)
	}
	if s := sb.String(); utf8.ValidString(s) { // see ValidText
		return s
	}
	return strings.ToValidUTF8(sb.String(), "\uFFFD")
}

// DropNotice is the line that stands in the output for n dropped bytes.
func DropNotice(n int64) string {
	return fmt.Sprintf("\n[... %d bytes of output left out here ...]\n", n)
}
