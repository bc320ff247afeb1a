package taskout

import "github.com/cgreaper/reaper/internal/textfit"

// Budget caps the output one call returns (see textfit.Budget); reaper.Budget says how each read
// applies it, and the most any read holds (maxRead).
type Budget = textfit.Budget

// NewBudget returns a Budget of chars characters costing at most max (see textfit.Budget), with the
// cost of each ASCII character read once: most output is ASCII, and the cuts then read a table
// instead of calling cost for each (unless cost prices one above what the table holds; see
// textfit.CostTable).
func NewBudget(chars, max int, cost func(rune) int) Budget {
	b := Budget{Chars: chars, Cost: cost, Max: max}
	if cost != nil && max > 0 {
		b.ASCII = textfit.CostTable(cost)
	}
	return b
}
