package main

// Black-box tests of the statement page per team (docs/cost.md, "A
// statement to send each team"): 404 for a month not closed, 403 for
// another team's project, and headless Chromium's --print-to-pdf of it,
// whose text (pdftotext) holds the figures.

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// pdftotext is the poppler tool's path, or a skip naming it.
func pdftotext(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("pdftotext"); err == nil {
		return p
	}
	if os.Getenv("PADDLE_TEST_REQUIRE_TOOLS") == "1" {
		t.Fatal("pdftotext is required (PADDLE_TEST_REQUIRE_TOOLS=1; Debian package poppler-utils)")
	}
	t.Skip("pdftotext not installed (Debian package poppler-utils)")
	return ""
}

func TestStatementPage(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		budgets := filepath.Join(dir, "budgets.json")
		writeFile(t, budgets, `{"currency":"CNY","budgets":[{"project":"search_ranking","monthly_cost":100}]}`)
		s := startServer(t, dsn, "--tokens", teamTokens(t), "--prices", fixtureFile(t, "prices.json"), "--budgets", budgets)
		// search_ranking: s-1, 2 × T4 for 3 h in November at 2 = 12;
		// s-2 on one T4 for 1 h = 2: 7 GPU-h, 14.
		start := time.Date(2025, 11, 10, 8, 0, 0, 0, time.UTC).Unix()
		two := `{"schema_version":1,"task_id":"s-1","task_name":"train","project":"search_ranking","owner":"ann@example.com","start_time":%d,
			"hostname":"node-1","labels":{},"gpu_count":2,"gpus":[{"index":0,"uuid":"GPU-1","name":"Tesla T4","memory_total_bytes":1,"share":1},
			{"index":1,"uuid":"GPU-2","name":"Tesla T4","memory_total_bytes":1,"share":1}]}`
		expect(t, s.do(t, registerReq(strings.Replace(two, "%d", itoa(start), 1), "s-secret")), 201, "")
		expect(t, s.do(t, post("/v1/task/complete", doneBody("s-1", start, 3*3600), "s-secret")), 200, "")
		one := strings.Replace(strings.Replace(two, `"s-1"`, `"s-2"`, 1), "%d", itoa(start), 1)
		one = strings.Replace(one, `"gpu_count":2`, `"gpu_count":1`, 1)
		one = strings.Replace(one, `,
			{"index":1,"uuid":"GPU-2","name":"Tesla T4","memory_total_bytes":1,"share":1}`, "", 1)
		expect(t, s.do(t, registerReq(one, "s-secret")), 201, "")
		expect(t, s.do(t, post("/v1/task/complete", doneBody("s-2", start, 3600), "s-secret")), 200, "")
		expect(t, s.do(t, registerReq(teamReg("a-1", "ads_x", "bob", start, "GPU-9"), "ads-secret")), 201, "")

		page := func(path, token string) answer {
			return s.do(t, request{Method: "GET", Path: path, Token: token, NoSpecCheck: true})
		}
		if a := page("/statements/2025-11/search_ranking", "a-secret"); a.Status != 404 || !strings.Contains(string(a.Body), "not closed") {
			t.Errorf("an open month's statement: %d %s", a.Status, a.Body)
		}
		a := s.do(t, post("/v1/statements/2025-11/close", `{"reason":"November billed"}`, "a-secret"))
		if a.Status != 201 {
			t.Fatalf("close: %d %s", a.Status, a.Body)
		}
		sha := a.JSON(t)["sha256"].(string)
		if a := page("/statements/2025-11/ads_x", "s-secret"); a.Status != 403 {
			t.Errorf("another team's statement: %d %s", a.Status, a.Body)
		}
		if a := page("/statements/2025-13/search_ranking", "s-secret"); a.Status != 400 {
			t.Errorf("month 13: %d", a.Status)
		}
		if a := page("/statements/2025-11/search_ranking", ""); a.Status != 401 || !strings.HasPrefix(a.Header.Get("WWW-Authenticate"), "Basic") {
			t.Errorf("no token: %d %v", a.Status, a.Header)
		}
		html := page("/statements/2025-11/search_ranking", "s-secret")
		body := string(html.Body)
		if html.Status != 200 || !strings.Contains(body, "@page { size: A4") || strings.Contains(body, "<nav") || strings.Contains(body, "<script") {
			t.Fatalf("statement page: %d\n%s", html.Status, body)
		}
		// The page links to it, for the closed month.
		main := page("/?month=2025-11", "a-secret")
		if !strings.Contains(string(main.Body), `href="/statements/2025-11/search_ranking"`) || !strings.Contains(string(main.Body), "by finance (November billed)") {
			t.Errorf("the page has no statement link or who closed it")
		}

		// The project's own lines: the chargeback CSV's header and the
		// project's lines, hashed as the team can.
		csvBody := string(s.do(t, get("/v1/report?month=2025-11&by=task&format=csv", "s-secret")).Body)
		recs, _ := csv.NewReader(strings.NewReader(csvBody)).ReadAll()
		var mine strings.Builder
		w := csv.NewWriter(&mine)
		for i, r := range recs {
			if i == 0 || r[2] == "search_ranking" {
				w.Write(r)
			}
		}
		w.Flush()
		sum := sha256.Sum256([]byte(mine.String()))
		lines := hex.EncodeToString(sum[:])

		// Printed by the real browser to PDF; its text holds the figures.
		browser := chromium(t)
		tool := pdftotext(t)
		pdf := filepath.Join(dir, "statement.pdf")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		u := strings.Replace(s.URL, "://", "://finance:s-secret@", 1) + "/statements/2025-11/search_ranking"
		cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
			"--no-pdf-header-footer", "--user-data-dir="+filepath.Join(dir, "profile"), "--print-to-pdf="+pdf, u)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("chromium --print-to-pdf: %v\n%s", err, out)
		}
		out, err := exec.CommandContext(ctx, tool, "-layout", pdf, "-").Output()
		if err != nil {
			t.Fatalf("pdftotext: %v", err)
		}
		text := regexp.MustCompile(`\s+`).ReplaceAllString(string(out), " ")
		for _, want := range []string{
			"GPU statement — search_ranking — November 2025",
			"closed", "by finance (November billed)",
			"7", "14.00", // totals: 7 GPU-hours, 14 CNY
			"Monthly budget 100.00 CNY: used 14.00 (14.00 %)",
			"s-1", "s-2", "ann@example.com", "2 × Tesla", "12.00", "2.00",
			sha, lines,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("the PDF's text lacks %q:\n%s", want, text)
			}
		}
		if strings.Contains(text, "ads_x") || strings.Contains(text, "a-1") {
			t.Errorf("another team's figures are in the PDF")
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// doneBody is a completion of id that started at start and ran seconds.
func doneBody(id string, start, seconds int64) string {
	return fmt.Sprintf(`{"schema_version":1,"task_id":%q,"start_time":%d,"end_time":%d,"duration_seconds":%d,"exit_code":0,"gpu_count":1}`,
		id, start, start+seconds, seconds)
}
