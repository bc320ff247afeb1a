package taskout

import (
	"fmt"
	"math/bits"
	"regexp"
	"regexp/syntax"
)

// A pattern's cost is checked before it runs. RE2 matches in time linear in the text, but each byte
// may step every instruction of the compiled program once, and a 4 KB pattern of nested optional
// repetitions compiles to over a million instructions. So a pattern is bounded by its length and by
// its program's cost: its instructions, a character class of k ranges counted 1 + log2(k)/4 times
// (a binary search over its ranges). Patterns built to be slow cost 2.8 to 5.9 ns per byte of text
// and unit of cost (BenchmarkPatternCost).
const (
	// MaxPatternBytes bounds a pattern's length.
	MaxPatternBytes = 4096
	// MaxPatternCost bounds a pattern's cost (see above): a line of maxLine bytes, whose match
	// cannot be stopped midway, then takes at most about 0.4 s of CPU (`(?i)error|warn|fail` costs 17).
	MaxPatternCost = 1000
)

// Pattern is a grep pattern whose cost was checked: see Compile.
type Pattern struct {
	re   *regexp.Regexp
	cost int64 // the program's cost (see above)
}

// Compile checks a grep pattern (RE2 syntax, as Go's regexp takes it) and its cost, and compiles it.
// Its errors say what to change.
func Compile(expr string) (*Pattern, error) {
	if len(expr) > MaxPatternBytes {
		return nil, fmt.Errorf("grep: a pattern of %d bytes, the limit is %d", len(expr), MaxPatternBytes)
	}
	tree, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("grep: not a regular expression in RE2 syntax (https://github.com/google/re2/wiki/Syntax): %v", err)
	}
	// Simplifying writes every repetition out (x{1000} becomes a thousand x): estimate first, so
	// that a pattern far over the limit takes no memory to refuse.
	if c := treeCost(tree, 4*MaxPatternCost); c > 4*MaxPatternCost {
		return nil, costError(4*MaxPatternCost, true)
	}
	prog, err := syntax.Compile(tree.Simplify())
	if err != nil {
		return nil, fmt.Errorf("grep: %v", err)
	}
	cost := progCost(prog)
	if cost > MaxPatternCost {
		return nil, costError(cost, false)
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("grep: not a regular expression in RE2 syntax (https://github.com/google/re2/wiki/Syntax): %v", err)
	}
	return &Pattern{re: re, cost: int64(cost)}, nil
}

func costError(cost int, atLeast bool) error {
	what := fmt.Sprint(cost)
	if atLeast {
		what = "over " + what
	}
	return fmt.Errorf("grep: the pattern is too costly to search with: it compiles to a program of cost %s (its instructions, large character classes counted by their size), the limit is %d: use a narrower pattern (fewer alternatives, smaller counts in {n,m})",
		what, MaxPatternCost)
}

// progCost returns a compiled program's cost.
func progCost(p *syntax.Prog) int {
	c := 0
	for _, in := range p.Inst {
		c++
		if in.Op == syntax.InstRune {
			c += classCost(in.Rune)
		}
	}
	return c
}

// classCost is what a class of ranges (pairs of runes) costs beyond an instruction: a quarter of the
// steps of a binary search over its ranges.
func classCost(ranges []rune) int {
	if len(ranges) <= 2 {
		return 0 // one rune or one range
	}
	return (bits.Len(uint(len(ranges)/2)) + 3) / 4
}

// treeCost estimates, from above, the cost of the program re compiles to, from its parse tree, up to
// limit (anything more is limit+1).
func treeCost(re *syntax.Regexp, limit int) int {
	sum := func(subs []*syntax.Regexp, extra int) int {
		c := extra
		for _, s := range subs {
			if c += treeCost(s, limit) + 1; c > limit {
				return limit + 1
			}
		}
		return c
	}
	var c int
	switch re.Op {
	case syntax.OpLiteral:
		c = len(re.Rune)
	case syntax.OpCharClass:
		c = 1 + classCost(re.Rune)
	case syntax.OpConcat, syntax.OpAlternate:
		c = sum(re.Sub, 0)
	case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		c = sum(re.Sub, 1)
	case syntax.OpRepeat:
		n := re.Max
		if n < 0 {
			n = re.Min + 1 // x{n,}: n copies and a star
		}
		c = sum(re.Sub, 1)
		if c > 0 && max(n, 1) > limit/c {
			return limit + 1
		}
		c *= max(n, 1)
	default:
		c = 1
	}
	return min(c, limit+1)
}
