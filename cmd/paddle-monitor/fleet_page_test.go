package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// TestFleetPageInBrowser: with node reports, the page has a "Fleet"
// section: for the admin the stacked bar per GPU model with its figures,
// the undeclared use and the discrepancies; for a team its undeclared
// GPU-hours and its discrepancies. In a real headless browser, without a
// console error or another request.
func TestFleetPageInBrowser(t *testing.T) {
	browser := harness.Tool(t, "chromium")
	dir := t.TempDir()
	ns := dir + "/namespaces.json"
	writeFile(t, ns, `{"team-b":"ads_x"}`)
	s := startServer(t, storetest.SQLiteDSN(t), "--tokens", nodeTokens(t), "--namespace-projects", ns)
	h := time.Now().Unix()/3600*3600 - 3*3600
	ledgerFleet(t, s, h)
	// An idle GPU whose model's name is longer than the chart's old label
	// column (162 px): its label must not be clipped.
	expect(t, s.do(t, post("/v1/nodes/report", fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-1","time":%d,"interval_seconds":3600,"samples":60,
		"gpus":[{"uuid":"GPU-long","energy_joules":null}],
		"instances":[{"uuid":"GPU-long","gpu_instance_id":null,"name":"NVIDIA RTX PRO 6000 Blackwell Server Edition","samples":60,
		 "busy_share":0,"busy_basis":"utilization","occupied_share":0,"users":[]}]}`, h+2*3600), "n-secret")), 201, "")
	month := time.Unix(h, 0).UTC().Format("2006-01")
	if a := s.do(t, request{Method: "GET", Path: "/?month=" + month, Token: "a-secret", NoSpecCheck: true}); a.Status != 200 {
		t.Fatalf("the page: %d %s", a.Status, a.Body)
	}

	actx, cancel := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.Headless,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1100, 900))
	defer cancel()
	var mu sync.Mutex
	var problems []string
	listen := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				problems = append(problems, "console "+string(e.Type))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				problems = append(problems, "log: "+e.Entry.Text+" "+e.Entry.URL)
			}
		}
	}
	for _, tc := range []struct {
		who, secret string
		want        []string
		notWant     []string
	}{
		{"finance", "a-secret", []string{"Fleet", "NVIDIA H200", "Capacity", "attributed 0.667", "undeclared 0.333", "unallocated 0.786",
			"Use nobody declared", "undeclared: charged to a project by its namespace; unattributed: nobody to charge",
			"sneaky", "ads_x", "UID 1000", "Discrepancies", "Money at stake", "t-pod", "0.667", "share or duration",
			"NVIDIA RTX PRO 6000 Blackwell Server Edition"}, nil},
		{"search", "s-secret", []string{"Fleet", "undeclared use this month", "Discrepancies", "t-pod"},
			[]string{"sneaky", "UID 1000", "Capacity"}},
	} {
		t.Run(tc.who, func(t *testing.T) {
			ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(listen))
			defer cancel()
			ctx, cancel = context.WithTimeout(ctx, 45*time.Second)
			defer cancel()
			page := strings.Replace(s.URL, "http://", "http://"+tc.who+":"+tc.secret+"@", 1) + "/?month=" + month
			if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
				t.Fatalf("browser: %v", err)
			}
			if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("h1"))); err != nil {
				t.Fatalf("browser: %v\nserver log:\n%s", err, s.Log())
			}
			text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
			if err != nil {
				t.Fatal(err)
			}
			// No label of the fleet's chart starts left of the chart.
			clipped, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('svg[aria-label^="The fleet"] text')].filter(e => e.getBBox().x < 0).map(e => e.textContent)`))
			if err != nil {
				t.Fatal(err)
			}
			if len(clipped) > 0 {
				t.Errorf("the fleet chart clips the labels %q", clipped)
			}
			requests, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`performance.getEntriesByType("resource").map(e => e.name)`))
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(problems) > 0 {
				t.Errorf("the page logged problems: %q", problems)
			}
			if len(requests) > 0 {
				t.Errorf("the page loaded other resources: %q", requests)
			}
			for _, want := range tc.want {
				if !strings.Contains(text, want) {
					t.Errorf("the page does not show %q:\n%s", want, text)
				}
			}
			for _, no := range tc.notWant {
				if strings.Contains(text, no) {
					t.Errorf("a team's page shows %q:\n%s", no, text)
				}
			}
		})
	}
}
