// Package benchdoc writes a benchmark's generated section into
// docs/benchmarks.md and names the machine it ran on. A section lies between
// two marker lines; the text between them is replaced, the rest of the file
// is kept byte for byte.
package benchdoc

import (
	"errors"
	"os"
	"strings"
)

// Section is one program's generated part of a doc: its two markers, and the
// heading and introduction written above them when the doc has neither yet.
type Section struct {
	Name         string // the program, for the error about broken markers
	Begin, End   string
	Heading      string
	Introduction string
}

// Write replaces the text between s's markers in doc with body, or appends
// the section (heading, introduction, markers) when doc has no marker.
func (s Section) Write(doc, body string) error {
	b, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	text := string(b)
	i, j := strings.Index(text, s.Begin), strings.Index(text, s.End)
	switch {
	case i < 0 && j < 0:
		text = strings.TrimRight(text, "\n") + "\n\n## " + s.Heading + "\n\n" + s.Introduction + "\n\n" +
			s.Begin + "\n\n" + body + "\n" + s.End + "\n"
	case i >= 0 && j > i:
		text = text[:i+len(s.Begin)] + "\n\n" + body + "\n" + text[j:]
	default:
		return errors.New(doc + ": the " + s.Name + " markers are broken")
	}
	return os.WriteFile(doc, []byte(text), 0o644)
}

// CPUModel is the first "model name" of /proc/cpuinfo.
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// LoadAverage is the machine's 1, 5 and 15 minute load averages from
// /proc/loadavg, "unknown" where it cannot be read: a figure measured on a
// busy machine says so beside it.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
