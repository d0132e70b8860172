package main

// What finance sees first fits the screen: at 1400 px the page's main
// table (project, GPU-hours, cost, the previous month's cost and the
// change, wasted share, budget used, forecast) is visible without
// horizontal scrolling, the other columns behind a <details> toggle that
// works without script; the twelve months' chart shows cost; a budget of
// 0.05 GPU-hours reads 0.0500, a forecast past 999 % ">999 %".
// PADDLE_PAGE_SCREENSHOT=FILE saves the page as the test saw it (PNG).

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

func TestPageFitsAt1400(t *testing.T) {
	browser := harness.Tool(t, "chromium")
	dir := t.TempDir()
	budgets := filepath.Join(dir, "budgets.json")
	writeFile(t, budgets, `{"currency": "CNY", "budgets": [{"project": "search", "monthly_cost": 500},
		{"project": "vision", "monthly_gpu_hours": 0.05}, {"project": "*", "monthly_gpu_hours": 10}]}`)
	s := startServer(t, storetest.SQLiteDSN(t), "--prices", fixtureFile(t, "prices.json"), "--budgets", budgets, "--open-ttl", "200000h", "--exec-ttl", "200000h")
	postFixture(t, s, "")

	actx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000))
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/?month=2025-11"), chromedp.WaitVisible(chromedp.CSS("table.main"))); err != nil {
		t.Fatalf("browser: %v\nserver log:\n%s", err, s.Log())
	}
	// The main table's right edge, the window's width and the page's
	// scrolling width, as the browser laid them out.
	geometry, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`[
		document.querySelector("table.main").getBoundingClientRect().right,
		window.innerWidth,
		document.documentElement.scrollWidth,
		document.querySelector("details").open ? 1 : 0,
		document.querySelector("details table").checkVisibility() ? 1 : 0,
		document.querySelectorAll("script").length]`))
	if err != nil {
		t.Fatal(err)
	}
	right, inner, scroll := geometry[0], geometry[1], geometry[2]
	t.Logf("main table right edge %.0f px, window %.0f px, page scroll width %.0f px", right, inner, scroll)
	if inner != 1400 || right > inner || scroll > inner {
		t.Errorf("at a 1400 px window the main table ends at %.0f px and the page scrolls to %.0f px: want both within %.0f", right, scroll, inner)
	}
	if geometry[3] != 0 || geometry[4] != 0 || geometry[5] != 0 {
		t.Errorf("the details toggle: open %v, table visible %v, scripts %v; want closed, hidden, no script", geometry[3], geometry[4], geometry[5])
	}
	heads, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.main th")].map(e => e.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(heads, "|"); got != "Project|GPU-hours|Cost (CNY)|October cost|Change|Wasted|Budget used|Forecast" {
		t.Errorf("main table columns %q", got)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.main tbody tr")].map(e => [...e.cells].map(c => c.textContent).join("|"))`))
	if err != nil {
		t.Fatal(err)
	}
	// By hand (monitor/report/testdata/README.md): search 36 GPU-h, 401 in
	// November; in October t01's first 2 hours × 2 T4 and t10's 5 hours
	// × 1 T4, at 2: 18.00, so +2128 %, past 999. vision in October: t11's
	// 96 hours × 1 T4 at 2 = 192.00, then 230: +20 %; its 30.5 GPU-h
	// against 0.05: far past 999 %.
	for _, want := range []string{
		"search|36.0|401.00|18.00|>+999 %|84 %|80 % (401.00 of 500.00)|80 % (401.00)",
		"vision|30.5|230.00|192.00|+20 %|0 %|>999 % (30.5 GPU-h of 0.0500 GPU-h)|>999 % (30.5 GPU-h)",
		"nlp|12.5|25.00|–|new|12 %|125 % (12.5 GPU-h of 10.0 GPU-h)|125 % (12.5 GPU-h)",
	} {
		if !strings.Contains("\n"+strings.Join(rows, "\n")+"\n", "\n"+want+"\n") {
			t.Errorf("main table lacks the row %q:\n%s", want, strings.Join(rows, "\n"))
		}
	}
	// The twelve months' chart: cost, December 2024 to November 2025.
	chart, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[document.querySelector("svg.trend title").textContent,
		...[...document.querySelectorAll("svg.trend g.bar > text:last-of-type")].map(e => e.textContent)]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(chart) != 13 || chart[0] != "Monthly cost (CNY) per project, the last 12 months" || chart[1] != "Dec ’24" || chart[2] != "Jan ’25" || chart[12] != "Nov" {
		t.Errorf("trend chart %q", chart)
	}
	if path := os.Getenv("PADDLE_PAGE_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The toggle opens without script.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("summary"))); err != nil {
		t.Fatal(err)
	}
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("details table").checkVisibility()`))
	if err != nil || !shown {
		t.Errorf("the details table after a click: visible %v (%v)", shown, err)
	}
}

// The page's running tasks show what each holds of its GPUs: s04-shared-
// open of the MIG fixture holds a quarter of an H100 (monitor/report/testdata's
// README), shown as 0.25, not 1.
func TestPageRunningTaskShare(t *testing.T) {
	s := startServer(t, storetest.SQLiteDSN(t), "--open-ttl", "200000h", "--exec-ttl", "200000h")
	postFixtureFile(t, s, "", "fixture-mig.json")
	a := s.do(t, request{Method: "GET", Path: "/?month=2025-12", NoSpecCheck: true})
	body := string(a.Body)
	i := strings.Index(body, "<h2>Running tasks</h2>")
	if a.Status != 200 || i < 0 {
		t.Fatalf("GET /: %d\n%s", a.Status, body)
	}
	running := body[i:]
	if !strings.Contains(running, `<td class="key">cho</td><td class="key">`) || !strings.Contains(running, "<td>0.25</td>") {
		t.Errorf("the running shared task is not shown with its share 0.25:\n%s", running)
	}
}
