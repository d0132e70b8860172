package monitor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// labelRow is one row of the page's table by an extra label: the label's
// value, GPU-hours and cost as the page prints them.
var labelRow = regexp.MustCompile(`<tr><td class="key">([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td>`)

// The page's table by an extra label is the report by that label, the
// namespace mapping included (9a0e765): undeclared use --namespace-projects
// charges to a project is billed there as in the report, in the row of
// tasks without the label. By hand, November 2026 (testdata's prices: a
// Tesla T4 at 2 EUR an hour; mapping team-c → c): search's task labelled
// team=red held a Tesla T4 on a node that sends no reports for 2 h (2.00
// GPU-hours, 4 EUR); node n1 saw an unregistered pod of namespace team-c
// hold its Tesla T4 over Nov 20 10:00–11:00 (1.00 GPU-hour, 2 EUR, charged
// to c, no label: "(none)").
func TestPageByLabelChargesNamespaces(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	prices, err := report.LoadPrices(filepath.Join("testdata", "prices.json"))
	if err != nil {
		t.Fatal(err)
	}
	nj, err := os.ReadFile(filepath.Join("testdata", "namespaces.json"))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := ledger.ParseNamespaceProjects(nj)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		st := storetest.OpenWith(t, dsn, store.Options{Now: func() time.Time { return now }})
		start, end, count, share := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC).Unix(), time.Date(2026, 11, 2, 12, 0, 0, 0, time.UTC).Unix(), int64(1), 1.0
		reg := &wire.Registration{TaskID: "red-1", TaskName: "train", Project: "search", Owner: "ann", StartTime: &start,
			K8sPodUID: "pod-red-1", K8sNode: "decl-1", Hostname: "red-1-0", GPUCount: &count, Labels: wire.Labels{"team": "red"},
			GPUs: []wire.RegisteredGPU{{UUID: "GPU-red-1", Name: "Tesla T4", MemoryTotalBytes: 1, Share: &share}}}
		if _, err := st.Register(ctx, reg, []byte(`{"task_id":"red-1"}`), store.Sender{}); err != nil {
			t.Fatal(err)
		}
		duration, exit := float64(end-start), int64(0)
		if _, err := st.Complete(ctx, &wire.Completion{TaskID: "red-1", EndTime: &end, DurationSeconds: &duration, ExitCode: &exit},
			[]byte(fmt.Sprintf(`{"task_id":"red-1","end_time":%d}`, end)), store.Sender{}); err != nil {
			t.Fatal(err)
		}
		r := &wire.NodeReport{SchemaVersion: 1, Node: "n1", Time: time.Date(2026, 11, 20, 11, 0, 0, 0, time.UTC).Unix(), IntervalSeconds: 3600,
			Samples: 10, Instances: []wire.NodeInstance{{UUID: "GPU-n1", Name: "Tesla T4", Samples: 10, BusyShare: 1,
				BusyBasis: wire.BusyBasisUtilization, OccupiedShare: 1, Users: []wire.NodeUser{{Runtime: "containerd",
					ContainerID: "c-nb", PodUID: "pod-nb", Namespace: "team-c", Pod: "nb-0", Container: "jupyter",
					AllocatedShare: 1, SeenShare: 1, BusyShare: 1}}}}}
		if _, err := st.StoreNodeReport(ctx, r, store.DefaultNodeRetire); err != nil {
			t.Fatal(err)
		}
		api := monitor.New(monitor.Config{Store: st, Now: func() time.Time { return now }})
		monitor.MountReport(api, monitor.ReportConfig{Source: st, Books: st, Prices: prices, Namespaces: ns.Project,
			OpenTTL: 168 * time.Hour, Now: func() time.Time { return now }})
		rec := get(t, api, "/?month=2026-11&by=label:team", "")
		if rec.Code != 200 {
			t.Fatalf("GET /?month=2026-11&by=label:team: %d %s", rec.Code, rec.Body)
		}
		page := rec.Body.String()
		i := strings.Index(page, `<table class="label">`)
		if i < 0 {
			t.Fatalf("the page has no table by label:\n%s", page)
		}
		table := page[i : i+strings.Index(page[i:], "</table>")]
		var got []string
		for _, m := range labelRow.FindAllStringSubmatch(table, -1) {
			got = append(got, strings.Join(m[1:], " "))
		}
		want := []string{"red 2.00 4.00", "(none) 1.00 2.00"}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Errorf("the table by label:team: %q, want %q\n%s", got, want, table)
		}
	})
}
