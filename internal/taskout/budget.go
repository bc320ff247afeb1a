package taskout

import "github.com/cgreaper/reaper/internal/textfit"

// Budget caps the output one call returns, in characters and in what they cost the caller to carry
// (see textfit.Budget). A foreground command's whole output is cut from the middle (about half of
// each cap to its start, the rest to its end), an incremental read at its end, and the cut is
// counted like any other drop. Whatever its Budget, a read holds at most 16 MiB (a foreground
// command's whole output: 16 MiB of each end); a zero Budget caps nothing else.
type Budget = textfit.Budget

// NewBudget returns a Budget of chars characters costing at most max (see textfit.Budget), with the
// cost of each ASCII character read once: most output is ASCII, and the cuts then read a table
// instead of calling cost for each.
func NewBudget(chars, max int, cost func(rune) int) Budget {
	b := Budget{Chars: chars, Cost: cost, Max: max}
	if cost != nil && max > 0 {
		b.ASCII = textfit.CostTable(cost)
	}
	return b
}
