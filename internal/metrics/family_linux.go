package metrics

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// kind is a metric family's type.
type kind int

const (
	counter kind = iota
	gauge
	histogram
)

func (k kind) String() string {
	switch k {
	case counter:
		return "counter"
	case gauge:
		return "gauge"
	}
	return "histogram"
}

// A family is one metric and its series, one per combination of label values.
type family struct {
	name, help string
	kind       kind
	labels     []string  // label names, in the order their values are given
	byName     []int     // indexes into labels, in the order of the names: how samples show them
	buckets    []float64 // upper bounds of a histogram's buckets, ascending, without +Inf

	// mu guards the field that follows.
	mu     sync.Mutex
	series map[string]*series // by label values joined with labelSep
}

// A series is one family's sample (a counter's or gauge's value) or samples (a histogram's) for one
// combination of label values.
type series struct {
	values []string // label values, in the family's order
	value  float64  // counter, gauge
	counts []uint64 // histogram: observations per bucket, the last for +Inf (not cumulative)
	sum    float64  // histogram
}

// labelSep joins label values into a series' key; it cannot occur in valid UTF-8.
const labelSep = "\xff"

// newFamily makes a family. Counters' names end in _total, as both exposition formats expect; a
// mistake here is the program's, found by the package's tests.
func newFamily(name, help string, k kind, labels []string, buckets []float64) *family {
	if k == counter && !strings.HasSuffix(name, "_total") {
		panic(fmt.Sprintf("metrics: counter %s does not end in _total", name))
	}
	if k == histogram && !slices.IsSorted(buckets) {
		panic(fmt.Sprintf("metrics: buckets of %s are not ascending", name))
	}
	byName := make([]int, len(labels))
	for i := range byName {
		byName[i] = i
	}
	slices.SortFunc(byName, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
	return &family{name: name, help: help, kind: k, labels: labels, byName: byName, buckets: buckets, series: make(map[string]*series)}
}

// get returns the series of the label values, made on first use. The caller holds f.mu.
func (f *family) get(values []string) *series {
	if len(values) != len(f.labels) {
		panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", f.name, len(f.labels), len(values)))
	}
	key := strings.Join(values, labelSep)
	s, ok := f.series[key]
	if !ok {
		s = &series{values: slices.Clone(values)}
		if f.kind == histogram {
			s.counts = make([]uint64, len(f.buckets)+1)
		}
		f.series[key] = s
	}
	return s
}

// add adds v (not negative, for a counter) to the series of the label values.
func (f *family) add(v float64, values ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.get(values).value += v
}

// set sets a gauge's series to v.
func (f *family) set(v float64, values ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.get(values).value = v
}

// touch makes the series of the label values, at 0, so that it is shown before anything happens.
func (f *family) touch(values ...string) { f.add(0, values...) }

// observe counts v in a histogram's series: in the first bucket whose bound is at least v.
func (f *family) observe(v float64, values ...string) {
	i, _ := slices.BinarySearch(f.buckets, v)
	if math.IsNaN(v) {
		i = len(f.buckets)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.get(values)
	s.counts[i]++
	s.sum += v
}

// reset drops every series.
func (f *family) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.series)
}

// snapshot returns a copy of the family with its series sorted by label values, taken under f.mu, for
// a scrape to write while events go on.
func (f *family) snapshot() *family {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := &family{name: f.name, help: f.help, kind: f.kind, labels: f.labels, byName: f.byName, buckets: f.buckets, series: make(map[string]*series, len(f.series))}
	for k, s := range f.series {
		cs := *s
		cs.counts = slices.Clone(s.counts)
		c.series[k] = &cs
	}
	return c
}

// constGauge and constCounter are families of one sample without labels, read at a scrape.
func constGauge(name, help string, v float64) *family { return constFamily(name, help, gauge, v) }

func constCounter(name, help string, v float64) *family { return constFamily(name, help, counter, v) }

func constFamily(name, help string, k kind, v float64) *family {
	f := newFamily(name, help, k, nil, nil)
	f.set(v)
	return f
}
