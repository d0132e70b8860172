package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestFleetSectionMoney: with prices, the page's Fleet section shows each
// state's money beside its GPU-hours, the use nobody declared with its
// state and cost, and the discrepancies with their money at stake. By
// hand (ledgerByHand, H200 10/h, the 3g.71gb instance 5 per
// instance-hour): attributed 2/3 h = 6.67, undeclared 1/3 h = 3.33 (the
// sneaky pod, team-b so ads_x), unattributed the UID 1000 user's 3/14
// GPU-h = half an instance-hour of 3g.71gb = 2.50.
func TestFleetSectionMoney(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		prices := filepath.Join(dir, "prices.json")
		writeFile(t, prices, `{"currency":"CNY","models":{"NVIDIA H200":10,"NVIDIA H200 3g.71gb":5}}`)
		ns := filepath.Join(dir, "namespaces.json")
		writeFile(t, ns, `{"team-b":"ads_x"}`)
		s := startServer(t, dsn, "--tokens", nodeTokens(t), "--prices", prices, "--namespace-projects", ns)
		h := time.Now().Unix()/3600*3600 - 3*3600
		ledgerFleet(t, s, h)
		month := time.Unix(h, 0).UTC().Format("2006-01")
		a := s.do(t, request{Method: "GET", Path: "/?month=" + month, Token: "a-secret", NoSpecCheck: true})
		body := string(a.Body)
		for _, want := range []string{
			"States (GPU-hours, cost in CNY)",
			"attributed 0.667 (6.67 CNY), undeclared 0.333 (3.33 CNY)",
			"<h3>Use nobody declared</h3>",
			"<td class=\"key\">undeclared</td><td class=\"key\">ads_x</td><td class=\"key\">team-b</td><td class=\"key\">sneaky</td><td>0.333</td><td>3.33</td>",
			"<td class=\"key\">unattributed</td>",
			"<th>Money at stake</th>",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("the page (%d) does not show %q:\n%s", a.Status, want, body)
			}
		}
	})
}
