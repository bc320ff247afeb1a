package textfit

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// jsonish prices a character as a JSON string carries it, roughly: control characters six bytes.
func jsonish(r rune) int {
	if r < 0x20 {
		return 6
	}
	return utf8.RuneLen(r)
}

// cost returns what p takes of b, counted character by character as Budget defines them.
func cost(b Budget, p []byte) Spend {
	var s Spend
	for len(p) > 0 {
		r, n := utf8.DecodeRune(p)
		s.Chars++
		if b.Cost != nil {
			s.Cost += b.Cost(r)
		}
		p = p[n:]
	}
	return s
}

func TestPrefixSuffix(t *testing.T) {
	p := []byte("aé\x01日b")
	for _, tc := range []struct {
		name         string
		b            Budget
		prefix, suff string
	}{
		{"none", Budget{}, "aé\x01日b", "aé\x01日b"},
		{"chars", Budget{Chars: 2}, "aé", "日b"},
		{"cost", Budget{Cost: jsonish, Max: 9}, "aé\x01", "日b"}, // 1+2+6; 3+1 (the \x01 would make 10)
		{"both", Budget{Chars: 4, Cost: jsonish, Max: 100}, "aé\x01日", "é\x01日b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, used := tc.b.Prefix(p, tc.b.All())
			if string(p[:n]) != tc.prefix || used != cost(tc.b, p[:n]) {
				t.Errorf("prefix %q using %+v, want %q", p[:n], used, tc.prefix)
			}
			m, used := tc.b.Suffix(p, tc.b.All())
			if string(p[len(p)-m:]) != tc.suff || used != cost(tc.b, p[len(p)-m:]) {
				t.Errorf("suffix %q using %+v, want %q", p[len(p)-m:], used, tc.suff)
			}
		})
	}
}

// TestFit: what fits stays whole; one stream over the budget keeps its head and tail, a character
// straddling head and tail included, and counts the bytes between; two parts with a gap count it.
func TestFit(t *testing.T) {
	b := Budget{Chars: 4}
	if f, k, d := b.Fit([]byte("ab"), []byte("cd"), 0, Spend{}); string(f)+string(k) != "abcd" || d != 0 {
		t.Errorf("fitting output cut: %q %q, %d dropped", f, k, d)
	}
	if f, k, d := b.Fit([]byte("ab"), []byte("cd"), 7, Spend{}); string(f) != "ab" || string(k) != "cd" || d != 7 {
		t.Errorf("fitting output with a gap: %q %q, %d dropped, want the gap's 7", f, k, d)
	}
	head, tail := []byte("0123\xe6"), []byte("\x97\xa5456789")
	f, k, d := b.Fit(head, tail, 0, Spend{})
	if string(f) != "01" || string(k) != "89" || d != int64(len(head)+len(tail)-4) {
		t.Errorf("one stream cut: %q %q, %d dropped", f, k, d)
	}
	f, k, d = b.Fit([]byte("abcdef"), []byte("uvwxyz"), 100, Spend{})
	if string(f) != "ab" || string(k) != "yz" || d != 100+4+4 {
		t.Errorf("two parts cut: %q %q, %d dropped, want 108", f, k, d)
	}
	f, k, d = (Budget{Chars: 10}).Fit([]byte("abcdefghijklmnop"), nil, 0, Spend{Chars: 4})
	if string(f) != "abc" || string(k) != "nop" || d != 10 {
		t.Errorf("a cut with room for 4 characters between: %q %q, %d dropped; want 6 characters kept", f, k, d)
	}
	if w := (Budget{}).Window(); w != -1 {
		t.Errorf("window of no budget %d, want -1", w)
	}
	if w := (Budget{Chars: 10, Cost: jsonish, Max: 30}).Window(); w != 30 {
		t.Errorf("window %d, want 30: the cost cap is the smaller", w)
	}
	if w := (Budget{Chars: 0, Cost: jsonish, Max: 1}).Window(); w != utf8.UTFMax {
		t.Errorf("window %d, want room for one character", w)
	}
}

func TestText(t *testing.T) {
	for _, s := range []string{"", "plain", "é日本語\U0001F600", "a\xffb\xe6\x97", strings.Repeat("ü", 100) + "x"} {
		want := int64(0)
		for _, c := range []byte(s) {
			if !(c&0xC0 == 0x80) {
				want++
			}
		}
		if got := CountChars([]byte(s)); got != want || utf8.ValidString(s) && got != int64(utf8.RuneCountInString(s)) {
			t.Errorf("CountChars(%q) = %d, want %d", s, got, want)
		}
	}
	for s, want := range map[string]int{"": 0, "abc": 0, "a\xe6": 1, "a\xe6\x97": 2, "\xf0\x9f\x98": 3, "日": 0, "\x97": 0} {
		if got := IncompleteSuffix([]byte(s)); got != want {
			t.Errorf("IncompleteSuffix(%q) = %d, want %d", s, got, want)
		}
	}
	if got := ValidText([]byte("a\xff\xfeb")); got != "a\uFFFDb" {
		t.Errorf("ValidText = %q", got)
	}
	if got := JoinText([]byte("a\xe6\x97"), []byte("\xa5b")); got != "a日b" {
		t.Errorf("JoinText kept %q, want the character split across parts whole", got)
	}
	if got := JoinText([]byte("a\xe6"), []byte(DropNotice(5)), []byte("b")); !strings.HasPrefix(got, "a\uFFFD\n[... 5 bytes") {
		t.Errorf("JoinText with a notice: %q", got)
	}
}

func TestRing(t *testing.T) {
	r := NewRing(5)
	if r.View() != nil || r.Len() != 0 {
		t.Fatal("a new ring holds something")
	}
	var all []byte
	for _, p := range []string{"ab", "cde", "f", "ghijklm", "n"} {
		r.Write([]byte(p))
		all = append(all, p...)
		want := all[max(0, len(all)-5):]
		if got := r.View(); !bytes.Equal(got, want) || r.Len() != len(want) {
			t.Errorf("after %q: %q (%d), want %q", p, got, r.Len(), want)
		}
	}
	var none Ring
	none.Write([]byte("x"))
	if none.Len() != 0 {
		t.Error("a ring of no capacity kept a byte")
	}
}

// FuzzFit: whatever the bytes, the split and the budget, Fit keeps a prefix and a suffix of the
// stream within the budget and counts every byte it drops.
func FuzzFit(f *testing.F) {
	f.Add([]byte("hello, world"), 3, uint8(5), uint16(0), uint8(0))
	f.Add([]byte("日本語\x01\x02 text"), 5, uint8(0), uint16(20), uint8(3))
	f.Fuzz(func(t *testing.T, p []byte, split int, chars uint8, limit uint16, roomChars uint8) {
		b := Budget{Chars: int(chars), Cost: jsonish, Max: int(limit)}
		if split < 0 || split > len(p) {
			split = len(p) / 2
		}
		room := Spend{Chars: int(roomChars), Cost: 2 * int(roomChars)}
		front, back, dropped := b.Fit(p[:split], p[split:], 0, room)
		if !bytes.HasPrefix(p, front) || !bytes.HasSuffix(p, back) || int64(len(front)+len(back))+dropped != int64(len(p)) {
			t.Fatalf("kept %q and %q of %q, %d dropped", front, back, p, dropped)
		}
		if !b.On() {
			return
		}
		used := cost(b, append(append([]byte{}, front...), back...))
		if dropped > 0 {
			used.Chars += room.Chars
			used.Cost += room.Cost
		}
		over := b.Chars > 0 && used.Chars > b.Chars || b.Max > 0 && used.Cost > b.Max
		if small := b.Chars > 0 && room.Chars >= b.Chars || b.Max > 0 && room.Cost+utf8.UTFMax > b.Max; over && !small {
			t.Fatalf("kept %q and %q with room %+v between, %+v, over %+v", front, back, room, used, b)
		}
	})
}

// FuzzPrefixTable: a budget with its cost of ASCII characters in a table (Budget.ASCII) cuts where
// the same budget without it does, and counts the same.
func FuzzPrefixTable(f *testing.F) {
	f.Add([]byte("hello, \"world\"\n"), uint8(5), uint16(9))
	f.Add([]byte("日本語\x01\x02 text\xff"), uint8(0), uint16(20))
	f.Fuzz(func(t *testing.T, p []byte, chars uint8, limit uint16) {
		slow := Budget{Chars: int(chars), Cost: jsonish, Max: int(limit)}
		fast := slow
		fast.ASCII = CostTable(jsonish)
		for _, left := range []Spend{slow.All(), slow.Half()} {
			n1, u1 := slow.Prefix(p, left)
			n2, u2 := fast.Prefix(p, left)
			if n1 != n2 || u1 != u2 {
				t.Fatalf("Prefix(%q, %+v): %d, %+v without the table, %d, %+v with it", p, left, n1, u1, n2, u2)
			}
		}
		none := Budget{Chars: int(chars)}
		if n, used := none.Prefix(p, none.All()); used != cost(none, p[:n]) {
			t.Fatalf("Prefix(%q) without a cost: %d, %+v; the characters cost %+v", p, n, used, cost(none, p[:n]))
		}
	})
}

func TestByteSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 bytes", 100: "100 bytes", 1024: "1 KiB", 1536 << 10: "1536 KiB", 64 << 20: "64 MiB", 1 << 30: "1 GiB", 1<<30 + 1: "1073741825 bytes"} {
		if got := ByteSize(n); got != want {
			t.Errorf("ByteSize(%d) = %q, want %q", n, got, want)
		}
	}
}
