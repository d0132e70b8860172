package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestPageLastMonthNotNew (issue 36): a project billed last month only for
// a namespace-mapped pod's use is not "new" this month; the page shows its
// last month's figure, the report's (1 GPU-hour, 10 CNY at 10/h), and
// says the current month's change is partial.
func TestPageLastMonthNotNew(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		prices := filepath.Join(dir, "prices.json")
		writeFile(t, prices, `{"currency":"CNY","models":{"NVIDIA H200":10}}`)
		ns := filepath.Join(dir, "namespaces.json")
		writeFile(t, ns, `{"team-b":"ads_x"}`)
		s := startServer(t, dsn, "--tokens", nodeTokens(t), "--prices", prices, "--namespace-projects", ns)
		now := time.Now().UTC()
		thisMonth := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		// One hour of the team-b pod on a whole GPU, last month and this
		// month (the hour before now's, so always inside the month
		// unless the month began under an hour ago).
		for _, end := range []time.Time{thisMonth.AddDate(0, 0, -1).Add(2 * time.Hour), now.Truncate(time.Hour)} {
			if end.Before(thisMonth.Add(time.Hour)) && end.After(thisMonth) {
				t.Skip("the month began under an hour ago")
			}
			report := fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-1","time":%d,"interval_seconds":3600,"samples":60,
				"gpus":[{"uuid":"GPU-a","energy_joules":null}],
				"instances":[{"uuid":"GPU-a","gpu_instance_id":null,"name":"NVIDIA H200","samples":60,"busy_share":1,"busy_basis":"utilization","occupied_share":1,
				 "users":[{"runtime":"containerd","container_id":"c2","pod_uid":"pod-b","namespace":"team-b","pod":"sneaky","container":"x",
				   "allocated_share":1,"seen_share":1,"busy_share":1}]}]}`, end.Unix())
			expect(t, s.do(t, post("/v1/nodes/report", report, "n-secret")), 201, "")
		}
		last := thisMonth.AddDate(0, -1, 0).Format("2006-01")
		r := runMonitor(t, "report", "--db", dsn, "--prices", prices, "--namespace-projects", ns, "--month", last, "--format", "csv")
		if !strings.Contains(r.stdout, "\nads_x,0,0,0,0,0,1,0,0,,0,0,0,,,10,") {
			t.Fatalf("report --month %s does not bill ads_x 1 GPU-h, 10 CNY:\n%s%s", last, r.stdout, r.stderr)
		}
		a := s.do(t, request{Method: "GET", Path: "/", Token: "a-secret", NoSpecCheck: true})
		body := string(a.Body)
		row := `<td class="key">ads_x</td><td>1.00</td><td>10.00</td><td>10.00</td><td>0 %</td>`
		if !strings.Contains(body, row) {
			t.Errorf("the page (%d) does not show %s:\n%s", a.Status, row, body)
		}
		partial := fmt.Sprintf("<th>Change (partial: day %d of %d, against all of %s)</th>", now.Day(),
			thisMonth.AddDate(0, 1, -1).Day(), thisMonth.AddDate(0, -1, 0).Format("January"))
		if !strings.Contains(body, partial) {
			t.Errorf("the page does not say %s", partial)
		}
	})
}
