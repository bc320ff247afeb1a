package taskout

import "testing"

// A cost above what a byte holds must not wrap: the budget's Max is a size bound.
func TestNewBudgetCostAboveByte(t *testing.T) {
	cost := func(r rune) int {
		if r == 'a' {
			return 300
		}
		return 1
	}
	b := NewBudget(0, 1000, cost)
	if got := b.Measure([]byte("aaab")).Cost; got != 901 {
		t.Errorf("Measure(aaab).Cost = %d, want 901", got)
	}
	if n, used := b.Prefix([]byte("aaaa"), b.All()); n != 3 || used.Cost != 900 {
		t.Errorf("Prefix(aaaa) = %d bytes costing %d, want 3 costing 900", n, used.Cost)
	}
}
