package entrypoint

// Black-box tests of starts during a monitor outage: after one start found
// the monitor unreachable, the next ones make one short attempt
// (PADDLE_OUTAGE_HOLD; docs/registration.md).

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Outage memory: during a monitor outage the first start spends its budget,
// the next ones within PADDLE_OUTAGE_HOLD make one short attempt and exec
// at once, nothing is lost, and the first start after the monitor comes
// back delivers (and clears the record, so the next failure gets the full
// budget again).
func TestOutageMemory(t *testing.T) {
	const budget = 2 * time.Second
	m := newRegMonitor(t, "hang")
	spoolPath := filepath.Join(t.TempDir(), "spool-1000.db")
	start := func(id string) result {
		t.Helper()
		k := regTask(t, m.URL, budget)
		k.Setenv("PADDLE_SPOOL_PATH", spoolPath)
		k.Setenv("PADDLE_TASK_ID", id)
		r := k.Run()
		if r.Code != 0 {
			t.Fatalf("%s: exit %d\n%s", id, r.Code, r.Stderr)
		}
		return r
	}
	r := start("outage-1")
	t.Logf("first start during the outage: exec after %v (budget %v)", r.Elapsed, budget)
	if r.Elapsed < budget-300*time.Millisecond || r.Elapsed > budget+regMargin {
		t.Errorf("first start: exec after %v, want about the budget %v", r.Elapsed, budget)
	}
	if !strings.Contains(r.Stderr, "monitor unreachable: starts within the hold make one short attempt") {
		t.Errorf("first start did not record the outage:\n%s", r.Stderr)
	}
	for i := 2; i <= 6; i++ {
		id := "outage-" + string(rune('0'+i))
		r := start(id)
		t.Logf("%s: exec after %v", id, r.Elapsed)
		if r.Elapsed > 900*time.Millisecond {
			t.Errorf("%s: exec after %v during a known outage, want well under a second", id, r.Elapsed)
		}
		if !strings.Contains(r.Stderr, "monitor outage known") || !strings.Contains(r.Stderr, "outcome=spooled attempts=1 ") {
			t.Errorf("%s: not one short attempt:\n%s", id, r.Stderr)
		}
	}
	k := newTask(t)
	k.Setenv("PADDLE_SPOOL_PATH", spoolPath)
	pending, _ := spoolList(t, k, false)
	if got := strings.Join(taskIDs(pending), " "); got != "outage-1 outage-2 outage-3 outage-4 outage-5 outage-6" {
		t.Errorf("pending %q, want all six starts", got)
	}

	m.SetScript("201")
	r = start("outage-7")
	if !strings.Contains(r.Stderr, "outcome=delivered") || !strings.Contains(r.Stderr, "older pending registrations sent") {
		t.Errorf("first start after recovery did not deliver:\n%s", r.Stderr)
	}
	if d := m.Delivered(); len(d) < 2 || d[0] != "outage-7" || d[1] != "outage-1" {
		t.Errorf("delivered %q, want outage-7, then the backlog oldest first", d)
	}
	// Nothing lost: what the start's backlog left (an entry attempted a
	// moment ago waits out its own backoff) the node's flush sends.
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	for deadline := time.Now().Add(30 * time.Second); spoolStats(t, k)["pending"] > 0 && time.Now().Before(deadline); {
		spoolRun(k, "flush")
		time.Sleep(100 * time.Millisecond)
	}
	delivered := map[string]bool{}
	for _, id := range m.Delivered() {
		delivered[id] = true
	}
	for i := 1; i <= 7; i++ {
		if id := "outage-" + string(rune('0'+i)); !delivered[id] {
			t.Errorf("%s never delivered (delivered %q)", id, m.Delivered())
		}
	}

	// The delivery cleared the record: a new outage gets the full budget.
	m.SetScript("503")
	r = start("outage-8")
	// Not its elapsed time: the backoff's jitter may leave a last wait that
	// does not fit, and the start then stops well before the budget.
	if strings.Contains(r.Stderr, "monitor outage known") || strings.Contains(r.Stderr, "outcome=spooled attempts=1 ") {
		t.Errorf("start after a delivery: exec after %v, still in the old outage?\n%s", r.Elapsed, r.Stderr)
	}
	if r = start("outage-9"); !strings.Contains(r.Stderr, "monitor outage known") {
		t.Errorf("503 for a whole budget did not record an outage:\n%s", r.Stderr)
	}

	// A flush that delivers clears it too.
	m.SetScript("201")
	for deadline := time.Now().Add(30 * time.Second); spoolStats(t, k)["pending"] > 0 && time.Now().Before(deadline); {
		spoolRun(k, "flush")
		time.Sleep(100 * time.Millisecond)
	}
	m.SetScript("503")
	if r = start("outage-10"); strings.Contains(r.Stderr, "monitor outage known") {
		t.Errorf("start after a flush delivered: still in the old outage\n%s", r.Stderr)
	}
}

// PADDLE_OUTAGE_HOLD=0 turns the memory off; an outage of one monitor URL
// says nothing about another.
func TestOutageMemoryOffAndPerURL(t *testing.T) {
	const budget = time.Second
	down := newRegMonitor(t, "503")
	other := newRegMonitor(t, "503")
	spoolPath := filepath.Join(t.TempDir(), "spool.db")
	start := func(url, hold string) result {
		t.Helper()
		k := regTask(t, url, budget)
		k.Setenv("PADDLE_SPOOL_PATH", spoolPath)
		k.Setenv("PADDLE_OUTAGE_HOLD", hold)
		return k.Run()
	}
	start(down.URL, "0")
	// A full-budget start, told by its attempts, not its time: the
	// backoff's jitter may leave a last wait that does not fit the budget,
	// and the start then stops well before it (as in TestOutageMemory).
	if r := start(down.URL, "0"); strings.Contains(r.Stderr, "outage") || strings.Contains(r.Stderr, "outcome=spooled attempts=1 ") ||
		!strings.Contains(r.Stderr, "outcome=spooled attempts=") {
		t.Errorf("PADDLE_OUTAGE_HOLD=0: exec after %v, not a full-budget start\n%s", r.Elapsed, r.Stderr)
	}
	start(down.URL, "60s")
	if r := start(other.URL, "60s"); strings.Contains(r.Stderr, "monitor outage known") {
		t.Errorf("outage of %s applied to %s:\n%s", down.URL, other.URL, r.Stderr)
	}
	if r := start(down.URL, "60s"); !strings.Contains(r.Stderr, "monitor outage known") {
		t.Errorf("outage not remembered:\n%s", r.Stderr)
	}
}
