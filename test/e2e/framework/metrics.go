package framework

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Sample is one series of a metric in the Prometheus text format.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Metrics maps metric names (including _bucket/_sum/_count suffixes) to their samples.
type Metrics map[string][]Sample

// Value returns the value of the first sample of name whose labels include labels.
func (m Metrics) Value(name string, labels map[string]string) (float64, bool) {
	for _, s := range m[name] {
		if matches(s.Labels, labels) {
			return s.Value, true
		}
	}
	return 0, false
}

// Names returns the metric names that start with prefix, sorted, for failure messages.
func (m Metrics) Names(prefix string) []string {
	var names []string
	for name := range m {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// ParseMetrics parses the Prometheus text exposition format: enough of it for the
// assertions of e2e tests, without a dependency on a Prometheus library.
func ParseMetrics(text string) (Metrics, error) {
	m := Metrics{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, labels, rest, err := splitSeries(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %w", i+1, line, err)
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics line %d %q: no value", i+1, line)
		}
		value, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %w", i+1, line, err)
		}
		m[name] = append(m[name], Sample{Labels: labels, Value: value})
	}
	return m, nil
}

// splitSeries splits `name{a="x",b="y"} rest` into its parts.
func splitSeries(line string) (string, map[string]string, string, error) {
	labels := map[string]string{}
	brace := strings.IndexByte(line, '{')
	space := strings.IndexByte(line, ' ')
	if brace < 0 || (space >= 0 && space < brace) {
		if space < 0 {
			return "", nil, "", fmt.Errorf("no value")
		}
		return line[:space], labels, line[space+1:], nil
	}
	name := line[:brace]
	s := line[brace+1:]
	for {
		s = strings.TrimLeft(s, ", ")
		if strings.HasPrefix(s, "}") {
			return name, labels, s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 || len(s) < eq+2 || s[eq+1] != '"' {
			return "", nil, "", fmt.Errorf("malformed labels")
		}
		key := s[:eq]
		s = s[eq+2:]
		var value strings.Builder
		closed := false
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					value.WriteByte('\n')
				default:
					value.WriteByte(s[i])
				}
				continue
			}
			if c == '"' {
				s = s[i+1:]
				closed = true
				break
			}
			value.WriteByte(c)
		}
		if !closed {
			return "", nil, "", fmt.Errorf("unterminated label value")
		}
		labels[key] = value.String()
	}
}
