package metrics

import (
	"bytes"
	"cmp"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The two exposition formats the handler writes.
const (
	textType        = "text/plain; version=0.0.4; charset=utf-8"
	openMetricsType = "application/openmetrics-text; version=1.0.0; charset=utf-8"
)

// Handler serves the metrics in OpenMetrics 1.0 to a scraper whose Accept header prefers
// application/openmetrics-text (Prometheus does by default), and in the Prometheus text format
// 0.0.4 otherwise. No _created samples: they double the series of every counter and histogram for
// scrapers that keep them as series.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler(m.gather()).ServeHTTP(w, r) })
}

// handler serves the families gathered for one scrape.
func handler(fams []*family) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		om := wantsOpenMetrics(r.Header.Values("Accept"))
		var b bytes.Buffer
		writeFamilies(&b, fams, om)
		h := w.Header()
		h.Set("Content-Type", textType)
		if om {
			h.Set("Content-Type", openMetricsType)
		}
		h.Set("Content-Length", strconv.Itoa(b.Len()))
		w.Write(b.Bytes())
	})
}

// wantsOpenMetrics reports whether the media range of highest quality in Accept headers that either
// format satisfies is OpenMetrics (any version: 1.0.0 and 0.0.1 are read alike) rather than the
// text format (text/plain of version 0.0.4 or none, text/*, */*). Ranges of other types (the
// protobuf format) are passed over; ties go to the one listed first.
func wantsOpenMetrics(accept []string) bool {
	best, om := -1.0, false
	for _, h := range accept {
		for _, r := range strings.Split(h, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(r))
			if err != nil {
				continue
			}
			q := 1.0
			if s, ok := params["q"]; ok {
				if q, err = strconv.ParseFloat(s, 64); err != nil || q <= 0 {
					continue
				}
			}
			var isOM bool
			switch v := params["version"]; {
			case mt == "application/openmetrics-text":
				isOM = true
			case mt == "text/plain" && (v == "" || v == "0.0.4"), mt == "text/*", mt == "*/*":
			default:
				continue
			}
			if q > best {
				best, om = q, isOM
			}
		}
	}
	return om
}

// writeFamilies writes families, sorted by name, in OpenMetrics (om) or in the text format.
func writeFamilies(b *bytes.Buffer, fams []*family, om bool) {
	slices.SortFunc(fams, func(a, b *family) int { return cmp.Compare(a.name, b.name) })
	for _, f := range fams {
		if len(f.series) == 0 {
			continue // a labelled family with no series yet: the formats have nothing to show
		}
		name := f.name
		if om && f.kind == counter {
			name = strings.TrimSuffix(name, "_total") // OpenMetrics names the family, samples add _total
		}
		b.WriteString("# HELP " + name + " ")
		writeEscaped(b, f.help, om)
		b.WriteString("\n# TYPE " + name + " " + f.kind.String() + "\n")
		for _, s := range sortedSeries(f) {
			labels := sortedLabels(f, s)
			if f.kind != histogram {
				writeSample(b, f.name, labels, "", "", formatFloat(s.value, om))
				continue
			}
			var cum uint64
			for i, n := range s.counts {
				cum += n
				le := "+Inf"
				if i < len(f.buckets) {
					le = formatFloat(f.buckets[i], om)
				}
				writeSample(b, f.name+"_bucket", labels, "le", le, strconv.FormatUint(cum, 10))
			}
			writeSample(b, f.name+"_sum", labels, "", "", formatFloat(s.sum, om))
			writeSample(b, f.name+"_count", labels, "", "", strconv.FormatUint(cum, 10))
		}
	}
	if om {
		b.WriteString("# EOF\n")
	}
}

// label is one label of a sample.
type label struct{ name, value string }

// sortedLabels pairs a series' label names with its values, in the order of the names, as both
// formats' writers conventionally show them.
func sortedLabels(f *family, s *series) []label {
	ls := make([]label, len(f.byName))
	for i, j := range f.byName {
		ls[i] = label{f.labels[j], s.values[j]}
	}
	return ls
}

// sortedSeries returns a family's series ordered by their label values, taken in the order of the
// labels' names: every scrape lists them alike.
func sortedSeries(f *family) []*series {
	ss := make([]*series, 0, len(f.series))
	for _, s := range f.series {
		ss = append(ss, s)
	}
	slices.SortFunc(ss, func(a, b *series) int {
		for _, j := range f.byName {
			if c := cmp.Compare(a.values[j], b.values[j]); c != 0 {
				return c
			}
		}
		return 0
	})
	return ss
}

// writeSample writes one sample line; extra, if not empty, is one more label (a bucket's le).
func writeSample(b *bytes.Buffer, name string, labels []label, extra, extraValue, value string) {
	b.WriteString(name)
	if len(labels) > 0 || extra != "" {
		b.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l.name + `="`)
			writeEscaped(b, l.value, true)
			b.WriteByte('"')
		}
		if extra != "" {
			if len(labels) > 0 {
				b.WriteByte(',')
			}
			b.WriteString(extra + `="` + extraValue + `"`)
		}
		b.WriteByte('}')
	}
	b.WriteString(" " + value + "\n")
}

// writeEscaped writes s with backslashes and line feeds escaped, and double quotes too if quotes
// (label values in both formats, HELP text in OpenMetrics). Invalid UTF-8 is replaced: both formats
// are UTF-8, and a value a client sent must not break a scrape.
func writeEscaped(b *bytes.Buffer, s string, quotes bool) {
	s = strings.ToValidUTF8(s, "\uFFFD")
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '"' && quotes:
			b.WriteString(`\"`)
		default:
			b.WriteByte(c)
		}
	}
}

// formatFloat formats a sample value or a bucket bound: the shortest form that reads back exactly,
// +Inf, -Inf or NaN; in OpenMetrics an integral value gets ".0", the canonical form its bounds take.
func formatFloat(v float64, om bool) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if om && !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}
