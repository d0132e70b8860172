package supervise

// Unit tests of Run with fake hooks: the init alone, without any monitor.
// Real children, a real reaper; signals are handed to the forwarder
// directly rather than caught from the OS.

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	reaperOnce sync.Once
	reaper     *Reaper
)

// testReaper is the test binary's one reaper: two would take each other's
// children.
func testReaper() *Reaper {
	reaperOnce.Do(func() {
		reaper = NewReaper(slog.New(slog.DiscardHandler))
		reaper.Catch()
	})
	return reaper
}

// uncaught is a forwarder that catches nothing from the OS: the test sends
// it signals itself.
func uncaught() *Signals {
	s := NewSignals()
	close(s.caught)
	return s
}

func shTask(script string) Task {
	return Task{Command: Command{Path: "/bin/sh", Argv: []string{"/bin/sh", "-c", script}, Env: os.Environ()},
		Signals: uncaught(), EndBudget: 2 * time.Second, Log: slog.New(slog.DiscardHandler)}
}

// event is one hook call as the fake saw it.
type event struct {
	kind string // start, beat, end
	at   time.Time
	tick Tick
	end  End
	// deadline of Ended's context; whether Beat's context had ended when
	// Beat returned.
	deadline time.Time
	ctxDone  bool
}

// fakeHooks records the hook calls; beat, when set, is what each Beat does.
type fakeHooks struct {
	mu       sync.Mutex
	events   []event
	inBeat   int
	maxBeats int // most Beats in flight at once
	afterEnd bool
	beat     func(ctx context.Context)
	status   int
}

func (f *fakeHooks) add(e event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e.at = time.Now()
	f.events = append(f.events, e)
}

func (f *fakeHooks) Started(at time.Time) { f.add(event{kind: "start", tick: Tick{Time: at}}) }

func (f *fakeHooks) Beat(ctx context.Context, t Tick) {
	f.mu.Lock()
	f.inBeat++
	f.maxBeats = max(f.maxBeats, f.inBeat)
	if f.afterEnd {
		f.mu.Unlock()
		panic("Beat after Ended")
	}
	f.mu.Unlock()
	if f.beat != nil {
		f.beat(ctx)
	}
	f.mu.Lock()
	f.inBeat--
	f.mu.Unlock()
	f.add(event{kind: "beat", tick: t, ctxDone: ctx.Err() != nil})
}

func (f *fakeHooks) Ended(ctx context.Context, e End) int {
	f.mu.Lock()
	f.afterEnd = true
	running := f.inBeat
	f.mu.Unlock()
	dl, _ := ctx.Deadline()
	f.add(event{kind: "end", end: e, deadline: dl, ctxDone: running > 0})
	return f.status
}

func (f *fakeHooks) kinds() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var k []string
	for _, e := range f.events {
		if len(k) > 0 && k[len(k)-1] == "beat" && e.kind == "beat" {
			continue
		}
		k = append(k, e.kind)
	}
	return strings.Join(k, ",")
}

func (f *fakeHooks) hooked(t Task) Task {
	t.OnStart, t.OnBeat, t.OnEnd = f, f, f
	return t
}

func TestRunHookOrder(t *testing.T) {
	f := &fakeHooks{status: 42}
	task := f.hooked(shTask("sleep 0.5; exit 3"))
	task.Heartbeat = 50 * time.Millisecond
	before := time.Now()
	if got := Run(testReaper(), task); got != 42 {
		t.Errorf("Run returned %d, want Ended's 42", got)
	}
	after := time.Now()
	if k := f.kinds(); k != "start,beat,end" {
		t.Fatalf("hooks %s, want start, beats, end", k)
	}
	ev := f.events
	start, end := ev[0], ev[len(ev)-1]
	beats := ev[1 : len(ev)-1]
	// At most one a tick of the run as it lasted: on a loaded machine the
	// 0.5 s sleep lasts longer (CI once counted 12).
	if n, most := len(beats), int(after.Sub(before)/task.Heartbeat)+1; n < 3 || n > most {
		t.Errorf("%d beats in a %v run every 50 ms, want 3 to %d", n, after.Sub(before), most)
	}
	if f.maxBeats != 1 {
		t.Errorf("%d Beats at once", f.maxBeats)
	}
	// Each tick's interval begins where the previous one ended, the first
	// at the command's start.
	since := start.tick.Time
	for i, b := range beats {
		if !b.tick.Since.Equal(since) || !b.tick.Time.After(since) {
			t.Errorf("beat %d: since %v, time %v; want since %v", i, b.tick.Since, b.tick.Time, since)
		}
		since = b.tick.Time
	}
	e := end.end
	if !e.Ran || e.Code != 3 || e.Signal != "" || !e.Started.Equal(start.tick.Time) ||
		e.Started.Before(before) || e.Ended.After(after) || e.Duration() < 500*time.Millisecond {
		t.Errorf("Ended got %+v (run from %v to %v)", e, before, after)
	}
	if !e.Ended.After(since) {
		t.Errorf("last tick %v not before the end %v", since, e.Ended)
	}
	if !end.deadline.Equal(e.Ended.Add(task.EndBudget)) {
		t.Errorf("Ended's deadline %v, want the end %v plus the budget", end.deadline, e.Ended)
	}
}

func TestRunEndStatus(t *testing.T) {
	for _, tt := range []struct {
		name, script string
		code         int
		signal       string
	}{
		{"exit", "exit 5", 5, ""},
		{"killed", "kill -9 $$", 137, "SIGKILL"},
		{"terminated", "kill -TERM $$", 143, "SIGTERM"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// No hooks: the command's status.
			if got := Run(testReaper(), shTask(tt.script)); got != tt.code {
				t.Errorf("without hooks: %d, want %d", got, tt.code)
			}
			f := &fakeHooks{status: 9}
			if got := Run(testReaper(), f.hooked(shTask(tt.script))); got != 9 {
				t.Errorf("Run returned %d, want Ended's", got)
			}
			if k := f.kinds(); k != "start,end" {
				t.Fatalf("hooks %s, want start, end (no heartbeat)", k)
			}
			if e := f.events[1].end; !e.Ran || e.Code != tt.code || e.Signal != tt.signal {
				t.Errorf("Ended got %+v, want code %d signal %q", e, tt.code, tt.signal)
			}
		})
	}
}

func TestRunCannotStart(t *testing.T) {
	f := &fakeHooks{status: 127}
	task := f.hooked(shTask(""))
	task.Command.Path = filepath.Join(t.TempDir(), "missing")
	task.Command.Argv = []string{task.Command.Path}
	task.Heartbeat = 10 * time.Millisecond
	if got := Run(testReaper(), task); got != 127 {
		t.Errorf("Run returned %d", got)
	}
	if k := f.kinds(); k != "end" {
		t.Fatalf("hooks %s, want Ended alone", k)
	}
	if e := f.events[0].end; e.Ran || e.Code != 127 || !e.Started.IsZero() {
		t.Errorf("Ended got %+v, want not ran, 127", e)
	}
}

func TestRunSlowBeatEndsWithTheCommand(t *testing.T) {
	// A Beat that waits for its context (a monitor that never answers):
	// ticks meanwhile are dropped, and the command's end ends it before
	// Ended runs.
	f := &fakeHooks{beat: func(ctx context.Context) { <-ctx.Done() }}
	task := f.hooked(shTask("sleep 0.4"))
	task.Heartbeat = 50 * time.Millisecond
	Run(testReaper(), task)
	if k := f.kinds(); k != "start,beat,end" {
		t.Fatalf("hooks %s", k)
	}
	if n := len(f.events); n != 3 {
		t.Errorf("%d Beats, want 1: ticks during a Beat are dropped", n-2)
	}
	if b, e := f.events[1], f.events[2]; !b.ctxDone || e.ctxDone {
		t.Errorf("Beat's context done %v, Beat still running at Ended %v", b.ctxDone, e.ctxDone)
	}
	if d := f.events[2].at.Sub(f.events[2].end.Ended); d > time.Second {
		t.Errorf("Ended ran %v after the command's end", d)
	}
}

func TestRunHungBeatBoundedByBudget(t *testing.T) {
	// A Beat that ignores its context: the end waits for it no longer than
	// the budget, and says so.
	release := make(chan struct{})
	defer close(release)
	f := &fakeHooks{beat: func(context.Context) { <-release }}
	var logs bytes.Buffer
	var mu sync.Mutex
	task := f.hooked(shTask("sleep 0.2"))
	task.Heartbeat = 20 * time.Millisecond
	task.EndBudget = 300 * time.Millisecond
	task.Log = slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	Run(testReaper(), task)
	f.mu.Lock()
	ev := f.events
	f.mu.Unlock()
	if len(ev) != 2 || ev[1].kind != "end" {
		t.Fatalf("events %+v, want start then end (the Beat never returned)", ev)
	}
	if d := ev[1].at.Sub(ev[1].end.Ended); d < task.EndBudget || d > task.EndBudget+time.Second {
		t.Errorf("Ended ran %v after the command's end, want just after the %v budget", d, task.EndBudget)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "a heartbeat outlived the command's end budget") {
		t.Errorf("logs:\n%s", logs.String())
	}
}

func TestRunForwardsWhileBeatRuns(t *testing.T) {
	// The loop forwards a signal while a Beat hangs: the command traps
	// SIGUSR1 and exits 7 on it.
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	beating := make(chan struct{})
	var once sync.Once
	f := &fakeHooks{status: -1, beat: func(ctx context.Context) {
		once.Do(func() { close(beating) })
		<-ctx.Done()
	}}
	task := f.hooked(shTask(`trap "exit 7" USR1; : > "$0"; while :; do sleep 0.02; done`))
	task.Command.Argv = append(task.Command.Argv, ready)
	task.Heartbeat = 20 * time.Millisecond
	sigs := task.Signals
	go func() {
		<-beating
		for {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		sigs.ch <- syscall.SIGUSR1
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(testReaper(), task)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not end: the signal was not forwarded")
	}
	if e := f.events[len(f.events)-1].end; e.Code != 7 {
		t.Errorf("the command ended with %d, want 7 (its SIGUSR1 trap)", e.Code)
	}
}

func TestRunNoBeatWithoutInterval(t *testing.T) {
	f := &fakeHooks{}
	Run(testReaper(), f.hooked(shTask("sleep 0.2")))
	if k := f.kinds(); k != "start,end" {
		t.Errorf("hooks %s with Heartbeat 0", k)
	}
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }
