package monitor_test

import (
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
)

// descParts are the name, help and label names of a Desc as its String
// says them.
var descParts = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", help: "((?:[^"\\]|\\.)*)", unit: "", constLabels: \{\}, variableLabels: \{([^}]*)\}\}$`)

// Families() is every family the API's registry and the two collectors
// serve, no more, with the same help and label names (in the collectors'
// order), and by name.
func TestFamiliesDeclared(t *testing.T) {
	got := map[string]string{}
	ch := make(chan *prometheus.Desc, 64)
	monitor.NewTaskCollector(nil, time.Hour, nil).Describe(ch)
	monitor.NewProjectCollector(nil, nil, nil, nil, nil).Describe(ch)
	monitor.NewFleetCollector(monitor.FleetConfig{}).Describe(ch)
	monitor.NewNodeCollector(nil, nil).Describe(ch)
	monitor.NewRollupCollector(nil).Describe(ch)
	close(ch)
	for d := range ch {
		m := descParts.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("a Desc not as expected: %s", d)
		}
		got[m[1]] = m[2] + " {" + m[3] + "}"
	}
	reg := prometheus.NewRegistry()
	// One request, so that the requests counter has a series.
	monitor.New(monitor.Config{Registry: reg}).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/nothing", nil))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		var labels []string
		for _, l := range mf.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		got[mf.GetName()] = mf.GetHelp() + " {" + strings.Join(labels, ",") + "}"
	}

	fams := monitor.Families()
	if !slices.IsSortedFunc(fams, func(a, b monitor.Family) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("Families() not by name")
	}
	for _, f := range fams {
		labels := f.Labels
		if f.Type == prometheus.CounterValue {
			// A gathered family's labels come sorted by name.
			labels = slices.Sorted(slices.Values(labels))
		}
		want := strings.ReplaceAll(f.Help, `"`, `\"`) + " {" + strings.Join(labels, ",") + "}"
		if got[f.Name] != want {
			t.Errorf("%s: served as %q, declared %q", f.Name, got[f.Name], want)
		}
		delete(got, f.Name)
	}
	if len(got) > 0 {
		t.Errorf("served but not declared: %v", got)
	}
}

// docs/monitor.md names every family with its labels: name{l1, l2, ...}
// (the set of the declaration) or the name alone for a family without
// labels.
func TestFamiliesDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/monitor.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := regexp.MustCompile(`\s+`).ReplaceAllString(string(b), " ")
	for _, f := range monitor.Families() {
		if len(f.Labels) == 0 {
			if !strings.Contains(doc, "`"+f.Name+"`") {
				t.Errorf("docs/monitor.md does not name %s", f.Name)
			}
			continue
		}
		m := regexp.MustCompile("`" + f.Name + `\{([^}]*)\}`).FindStringSubmatch(doc)
		if m == nil {
			t.Errorf("docs/monitor.md does not name %s{%s}", f.Name, strings.Join(f.Labels, ", "))
			continue
		}
		documented := strings.Split(strings.ReplaceAll(m[1], " ", ""), ",")
		slices.Sort(documented)
		if declared := slices.Sorted(slices.Values(f.Labels)); !slices.Equal(documented, declared) {
			t.Errorf("docs/monitor.md gives %s the labels %v, it has %v", f.Name, documented, declared)
		}
	}
}
