package main

// Waste while it happens: a running task's idle hours so far count in
// its project's idle_gpu_hours and wasted share for the current month,
// the same hours "Idle now" shows.

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

func TestRunningIdleCountsAsWaste(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--open-ttl", "200000h")
		now := time.Now().UTC()
		month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).Unix()
		start := now.Add(-2 * time.Hour).Unix()
		expect(t, s.do(t, registerReq(regBody("idle-1", "idleproj", "o@example.com", start), "")), 201, "")
		// Two idle heartbeats: the first's interval begins 91 minutes
		// ago (idle_since), the second ends 10 minutes ago (last seen).
		beat := func(at int64) {
			b := fmt.Sprintf(`{"task_id":"idle-1","time":%d,"interval_seconds":60,"gpus":[{"uuid":"GPU-idle-1","samples":6,"util_mean":0}]}`, at)
			expect(t, s.do(t, post("/v1/task/heartbeat", b, "")), 200, "")
		}
		t1, t2 := now.Add(-90*time.Minute).Unix(), now.Add(-10*time.Minute).Unix()
		beat(t1)
		beat(t2)
		idleSince := t1 - 60
		// By hand (the report writes 6 decimals of hours), clipped to this month: counted from the start (or the
		// 1st) to the last heartbeat; idle from idle_since (or the 1st).
		gpuHours := float64(t2-max(start, month)) / 3600
		idleHours := float64(t2-max(idleSince, month)) / 3600

		var rep struct {
			Rows []struct {
				Key        map[string]string `json:"key"`
				GPUHours   float64           `json:"gpu_hours"`
				IdleHours  float64           `json:"idle_gpu_hours"`
				WasteShare *float64          `json:"waste_share"`
			} `json:"rows"`
		}
		a := s.do(t, get("/v1/report", ""))
		if err := json.Unmarshal(a.Body, &rep); err != nil || len(rep.Rows) != 1 {
			t.Fatalf("GET /v1/report: %d %s", a.Status, a.Body)
		}
		r := rep.Rows[0]
		if math.Abs(r.GPUHours-gpuHours) > 1e-6 || math.Abs(r.IdleHours-idleHours) > 1e-6 || r.WasteShare == nil ||
			math.Abs(*r.WasteShare-idleHours/gpuHours) > 1e-6 {
			t.Errorf("row %+v (waste %v), want gpu_hours %v, idle_gpu_hours %v, waste_share %v", r, *r.WasteShare, gpuHours, idleHours, idleHours/gpuHours)
		}

		page := string(s.do(t, request{Method: "GET", Path: "/", NoSpecCheck: true}).Body)
		idleFor := time.Duration(t2-idleSince) * time.Second
		wantIdle := fmt.Sprintf("<td>%d h %02d min</td>", int(idleFor.Hours()), int(idleFor.Minutes())%60)
		wantWaste := "<td>" + strconv.FormatFloat(idleHours/gpuHours*100, 'f', 0, 64) + " %</td>"
		idleNow, rest, _ := strings.Cut(page, "<h2>GPU-hours and cost per project</h2>")
		if !strings.Contains(idleNow, wantIdle) {
			t.Errorf("Idle now does not show %s:\n%s", wantIdle, idleNow)
		}
		main, _, _ := strings.Cut(rest, "</table>")
		if !strings.Contains(main, `<td class="key">idleproj</td>`) || !strings.Contains(main, wantWaste) {
			t.Errorf("the project's Wasted is not %s (the idle hours Idle now shows over its GPU-hours):\n%s", wantWaste, main)
		}
	})
}
