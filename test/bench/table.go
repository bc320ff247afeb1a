package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// printTable writes the table of rows for the groups that ran, in Markdown, with the machine and how
// busy it was above it, and how costs grow and the failures below.
func printTable(w io.Writer, r *results, info runInfo, ran []group) {
	plural := "s"
	if info.rounds == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "Machine: %s. %d round%s in %s", info.machine, info.rounds, plural, info.took)
	if info.cpu != "" {
		fmt.Fprintf(w, "; %s", info.cpu)
	}
	if len(info.loads) > 0 {
		s := slices.Clone(info.loads)
		med := median(s)
		fmt.Fprintf(w, "; 1-minute load average, sampled every 5 s: median %.2f, middle half %.2f to %.2f, at most %.2f",
			med, s[len(s)/4], s[len(s)*3/4], s[len(s)-1])
	}
	fmt.Fprintln(w, ".")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| path | reaper | baseline | ratio (range) | runs | goal | met |")
	fmt.Fprintln(w, "| --- | ---: | --- | --- | ---: | --- | --- |")
	for _, row := range rows {
		if !slices.ContainsFunc(ran, func(g group) bool { return strings.HasPrefix(row.bench+"/", g.bench+"/") }) {
			continue
		}
		fmt.Fprintln(w, "| "+strings.Join(cells(r, row), " | ")+" |")
	}
	printGrowth(w, r)
	if len(r.failed) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Failed:")
		for _, f := range r.failed {
			fmt.Fprintln(w, "- "+f)
		}
	}
}

// cells returns a row's cells: what, reaper's median, the baseline's median and name, the median
// ratio with its range over the runs, the number of runs, the goal, and whether it is met.
func cells(r *results, row row) []string {
	var figs, bases, ratios []float64
	for _, m := range r.runs[row.bench] {
		f, okf := m[row.figure]
		b, okb := m[row.base]
		if !okf || !okb {
			continue
		}
		figs, bases = append(figs, f), append(bases, b)
		ratio := f / b
		if row.inverse {
			ratio = b / f
		}
		if !math.IsInf(ratio, 0) && !math.IsNaN(ratio) {
			ratios = append(ratios, ratio)
		}
	}
	if len(figs) == 0 {
		why := "no result"
		if reason, ok := skipReason(r, row.bench); ok {
			why = reason
		}
		return []string{row.what, "–", row.baseline, why, "0", row.goal, ""}
	}
	fig, base := median(figs), median(bases)
	ratio, met := "–", ""
	if base == 0 {
		ratios = nil // a ratio to nothing (an idle server's CPU) says nothing
	}
	if len(ratios) > 0 {
		med := median(ratios)
		ratio = fmt.Sprintf("%.2f×", med)
		if len(ratios) > 1 {
			ratio += fmt.Sprintf(" (%.2f–%.2f)", ratios[0], ratios[len(ratios)-1])
		}
		if row.met != nil {
			met = "no"
			if row.met(fig, med) {
				met = "yes"
			}
		}
	} else if row.met != nil && row.met(fig, math.NaN()) {
		met = "yes"
	}
	return []string{row.what, value(fig, row.unit), value(base, row.unit) + " " + row.baseline, ratio,
		fmt.Sprint(len(figs)), row.goal, met}
}

// skipReason finds why the benchmark or one of its parents skipped.
func skipReason(r *results, bench string) (string, bool) {
	for name := bench; name != ""; {
		if reason, ok := r.skipped[name]; ok {
			return reason, true
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			break
		}
		name = name[:i]
	}
	return "", false
}

// value formats v in unit, switching µs to ms and ms to s where that reads better.
func value(v float64, unit string) string {
	switch {
	case unit == "µs" && v >= 1000:
		v, unit = v/1000, "ms"
	case unit == "ms" && v >= 1000:
		v, unit = v/1000, "s"
	case unit == "B" && v >= 10000:
		v, unit = v/1024, "KiB"
	}
	switch {
	case unit == "calls" && v == 1:
		return "1 call"
	case unit == "calls" && v == math.Trunc(v):
		return fmt.Sprintf("%.0f calls", v)
	case unit == "calls":
		return fmt.Sprintf("%.1f calls", v)
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, unit)
	default:
		return fmt.Sprintf("%.2f %s", v, unit)
	}
}

// printGrowth writes how each growth figure changed between its two sizes, as the ratio of the medians.
func printGrowth(w io.Writer, r *results) {
	med := func(bench, metric string) (float64, bool) {
		var vs []float64
		for _, m := range r.runs[bench] {
			if v, ok := m[metric]; ok {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			return 0, false
		}
		return median(vs), true
	}
	first := true
	for _, g := range growths {
		small, ok1 := med(g.small, g.metric)
		large, ok2 := med(g.large, g.metric)
		if !ok1 || !ok2 || small == 0 {
			continue
		}
		if first {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "How cost grows (medians):")
			first = false
		}
		unit := g.metric[strings.LastIndex(g.metric, "-")+1:] // "close-ms": ms; "reaper-KiB/session": KiB/session
		fmt.Fprintf(w, "- %s: ×%.1f for %s (%.3g → %.3g %s)\n", g.what, large/small, g.factor, small, large, unit)
	}
}
