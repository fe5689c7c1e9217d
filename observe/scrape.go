package observe

import (
	"bytes"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Scrape collects figures read at scrape time (gauges of the live
// snapshot, counters other parts keep) and writes them in the Prometheus
// text format, grouped by family with HELP and TYPE lines. It is for the
// metrics writer, never for the request path; it is not safe for
// concurrent use.
type Scrape struct {
	fams  map[string]*family
	names []string
}

type family struct {
	help, typ string
	nlabels   int
	buf       bytes.Buffer
}

// Gauge adds a sample of gauge name. labels are name, value pairs.
func (s *Scrape) Gauge(name, help string, v float64, labels ...string) {
	s.add(name, help, "gauge", v, labels)
}

// Counter adds a sample of counter name (name ends in _total). labels are
// name, value pairs.
func (s *Scrape) Counter(name, help string, v float64, labels ...string) {
	s.add(name, help, "counter", v, labels)
}

// Histogram adds one series of histogram name: bounds are the buckets'
// upper bounds in seconds, counts the count per bucket (one more than
// bounds: the last is +Inf), sum the total in seconds. labels are name,
// value pairs.
func (s *Scrape) Histogram(name, help string, bounds []float64, counts []uint64, sum float64, labels ...string) {
	if s.fams == nil {
		s.fams = map[string]*family{}
	}
	f := s.fams[name]
	if f == nil {
		f = &family{help: help, typ: "histogram", nlabels: len(labels)}
		s.fams[name] = f
		s.names = append(s.names, name)
	} else if f.typ != "histogram" || f.nlabels != len(labels) {
		return
	}
	b := f.buf.AvailableBuffer()
	var cum uint64
	le := append(append([]string(nil), labels...), "le", "")
	for i, c := range counts {
		cum += c
		if i < len(bounds) {
			le[len(le)-1] = strconv.FormatFloat(bounds[i], 'g', -1, 64)
		} else {
			le[len(le)-1] = "+Inf"
		}
		b = AppendSample(b, name, "_bucket", float64(cum), le...)
	}
	b = AppendSample(b, name, "_sum", sum, labels...)
	b = AppendSample(b, name, "_count", float64(cum), labels...)
	f.buf.Write(b)
}

func (s *Scrape) add(name, help, typ string, v float64, labels []string) {
	if s.fams == nil {
		s.fams = map[string]*family{}
	}
	f := s.fams[name]
	if f == nil {
		f = &family{help: help, typ: typ, nlabels: len(labels)}
		s.fams[name] = f
		s.names = append(s.names, name)
	} else if f.typ != typ || f.nlabels != len(labels) {
		return // a family keeps one type and one label set
	}
	b := f.buf.AvailableBuffer()
	b = AppendSample(b, name, "", v, labels...)
	f.buf.Write(b)
}

// WriteTo writes every family, sorted by name.
func (s *Scrape) WriteTo(w io.Writer) (int64, error) {
	sort.Strings(s.names)
	var out bytes.Buffer
	for _, name := range s.names {
		f := s.fams[name]
		out.WriteString("# HELP ")
		out.WriteString(name)
		out.WriteByte(' ')
		out.WriteString(escapeHelp(f.help))
		out.WriteString("\n# TYPE ")
		out.WriteString(name)
		out.WriteByte(' ')
		out.WriteString(f.typ)
		out.WriteByte('\n')
		out.Write(f.buf.Bytes())
	}
	n, err := w.Write(out.Bytes())
	return int64(n), err
}

// AppendSample appends one sample line: name+suffix{labels} value. labels
// are name, value pairs; values are escaped.
func AppendSample(b []byte, name, suffix string, v float64, labels ...string) []byte {
	b = append(b, name...)
	b = append(b, suffix...)
	if len(labels) >= 2 {
		b = append(b, '{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, labels[i]...)
			b = append(b, '=', '"')
			b = appendLabelValue(b, labels[i+1])
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendValue(b, v)
	return append(b, '\n')
}

func appendValue(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case v == math.Trunc(v) && math.Abs(v) < 1<<53:
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// appendLabelValue escapes a label value as the text format wants:
// backslash, double quote and newline.
func appendLabelValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// LabelValue returns v escaped for a label value.
func LabelValue(v string) string { return string(appendLabelValue(nil, v)) }

func escapeHelp(h string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(h)
}
