package ledger_test

// Property test of MONITOR.md section 17's third invariant, a statement
// equals what the serving monitor answered for its month at the instant
// it closed, on random fleets (propFleet) spread over eight calendar
// months, on both engines. Month after month: the month's fleets and late
// data of the month closed before it (a late registration, a late node
// report of use nobody declared) are stored; the report by project and by
// project and owner and the chargeback by task are asked for as a serving
// monitor answers them (books.Report, books.Chargeback: adjustments of the
// closed months included); the month is closed with the same inputs; then
// the same questions get the same bytes (the statement's mark and hash
// aside), by the statement's groupings and by others (owner, model,
// node, …: summed from the task facts it froze), and the month closed
// before keeps its bytes whatever arrived
// for it after its close (a late task is billed once, as an adjustment of
// the month that carries it, never in its own month's lines).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// statementMonths is how many months the fleets are spread over, from
// January 2026 (all over before t0).
const statementMonths = 8

// monthAnswers are a month's answers as the serving monitor gives them:
// the report by project and by project and owner as JSON, and the
// chargeback by task as JSON, to the admin and to a reader of the
// projects *_0 only.
type monthAnswers struct {
	byProject, byProjectOwner, chargeback []byte
	// scopedProject is the scoped reader's rows and adjustments, its
	// total apart: a statement sums a scoped total from the rows it
	// froze, each rounded to 1e-6 (within (n+1) × 5e-7 of the live sum),
	// and leaves the means (utilisation, waste share, queue wait) null.
	scopedProject, scopedChargeback []byte
	scopedTotal                     report.Figures
	scopedRows                      int
	// others are the reports by the other groupings (otherGroupings), as
	// JSON: a closed month's are summed from the task facts its
	// statement froze (MONITOR.md 20.10), so they are the open month's
	// bytes too, and move no more than the statement when late data
	// arrives.
	others [][]byte
}

// otherGroupings are the groupings besides the statement's two that
// serving asks for; the last is asked by the scoped reader too.
var otherGroupings = [][]string{{"owner"}, {"model"}, {"node"}, {"project", "model"}, {"env", "step"}, {"label:team"}, {"owner"}}

// statementScope is the scoped reader's: the projects ending in _0 (of
// the fleets and of the late tasks).
func statementScope(project, _ string) bool { return strings.HasSuffix(project, "_0") }

func TestBooksPropertyStatement(t *testing.T) {
	seed := propertySeed(t)
	fleets := propertyFleets(t)
	t.Logf("PADDLE_PROPERTY_SEED=%d (%d fleets per engine over %d months)", seed, fleets, statementMonths)
	prices, err := report.ParsePrices(strings.NewReader(propPrices))
	if err != nil {
		t.Fatal(err)
	}
	in := books.Inputs{Prices: prices, PricesJSON: []byte(propPrices), Namespaces: propNamespaces,
		NamespacesJSON: []byte(`{"ns-<i>":"u<i>"}`)}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		rng := rand.New(rand.NewPCG(seed, 3))
		perMonth := (fleets + statementMonths - 1) / statementMonths
		var closed []string
		kept := map[string]monthAnswers{}
		for m := range statementMonths {
			start := time.Date(2026, time.Month(1+m), 1, 0, 0, 0, 0, time.UTC)
			month := start.Format("2006-01")
			where := fmt.Sprintf("month %s (PADDLE_PROPERTY_SEED=%d)", month, seed)
			for i := m * perMonth; i < min(fleets, (m+1)*perMonth); i++ {
				propFleet(t, s, rng, i, start.Unix()+int64(i-m*perMonth)%27*86400+3600)
			}
			if m > 0 {
				prev := closed[len(closed)-1]
				lateData(t, s, rng, m, prev)
				// The month closed before answers as it closed, late
				// data or not.
				again := serving(t, where+", "+prev+" after late data", s, prices, prev)
				sameAnswers(t, where+": "+prev+" after its late data", kept[prev], again)
			}
			live := serving(t, where+", open", s, prices, month)
			c, created, err := books.Close(ctx, s, month, "prop", in, time.Now())
			if err != nil || !created {
				t.Fatalf("%s: close: %v (created %v)", where, err, created)
			}
			answered := serving(t, where+", closed", s, prices, month)
			sameAnswers(t, where+": closed (version "+fmt.Sprint(c.Version)+") against open", live, answered)
			closed = append(closed, month)
			kept[month] = answered
			if t.Failed() {
				return
			}
		}
	})
}

// lateData stores, after month prev closed, a registration of a task that
// ran in prev (on a GPU no node reports: the declared basis) and a node
// report of prev's first fleet's node 0 with an unregistered pod of
// namespace ns-<m> (charged to project u<m> by propNamespaces): the month
// open now carries both as adjustments.
func lateData(t *testing.T, s *store.Store, rng *rand.Rand, m int, prev string) {
	t.Helper()
	w, err := facts.ParseMonth("month", prev)
	if err != nil {
		t.Fatal(err)
	}
	start := w.From.Unix() + 27*86400 + int64(rng.IntN(3600))
	end := start + 60 + int64(rng.IntN(7200))
	id := fmt.Sprintf("late-%d", m)
	count, share := int64(1), []float64{1, 0.5}[rng.IntN(2)]
	r := &wire.Registration{TaskID: id, TaskName: "train", Project: fmt.Sprintf("late_%d", m%2), Owner: propOwners[m%2], StartTime: &start,
		K8sPodUID: "pod-" + id, K8sNode: "late-node", Hostname: id + "-0", GPUCount: &count, Labels: wire.Labels{},
		GPUs: []wire.RegisteredGPU{{UUID: "GPU-" + id, Name: propModels[0], MemoryTotalBytes: 1, Share: &share}}}
	if _, err := s.Register(ctx, r, []byte(fmt.Sprintf(`{"task_id":%q}`, id)), store.Sender{}); err != nil {
		t.Fatal(err)
	}
	duration, exit := float64(end-start), int64(0)
	c := &wire.Completion{TaskID: id, EndTime: &end, DurationSeconds: &duration, ExitCode: &exit}
	if _, err := s.Complete(ctx, c, []byte(fmt.Sprintf(`{"task_id":%q,"end_time":%d}`, id, end)), store.Sender{}); err != nil {
		t.Fatal(err)
	}
	// Node 0 of the month's first fleet, after its own reports (which end
	// 4 h after the fleet's base at most): an hour nobody declared.
	first := (m - 1) * ((propertyFleets(t) + statementMonths - 1) / statementMonths)
	at := w.From.Unix() + 3600 + 5*3600
	node := fmt.Sprintf("f%d-node-0", first)
	rep := &wire.NodeReport{SchemaVersion: 1, Node: node, Time: at + 3600, IntervalSeconds: 3600, Samples: 10,
		Instances: []wire.NodeInstance{{UUID: fmt.Sprintf("GPU-f%d-0-0", first), Name: propModels[0], Samples: 10, BusyShare: 1,
			BusyBasis: "utilization", OccupiedShare: 1, Users: []wire.NodeUser{{Runtime: "containerd", ContainerID: "c-late",
				PodUID: fmt.Sprintf("late-pod-%d", m), Namespace: fmt.Sprintf("ns-%d", first), AllocatedShare: 1, SeenShare: 1, BusyShare: 1}}}}}
	if _, err := s.StoreNodeReport(ctx, rep, store.DefaultNodeRetire); err != nil {
		t.Fatal(err)
	}
}

// serving is month's answers as the serving monitor gives them now.
func serving(t *testing.T, where string, s *store.Store, prices *report.Prices, month string) monthAnswers {
	t.Helper()
	w, err := facts.ParseMonth("month", month)
	if err != nil {
		t.Fatal(err)
	}
	q := report.Query{Window: w, Prices: prices, Namespaces: propNamespaces, Now: time.Now()}
	ask := func(by []string, scope func(project, owner string) bool) *report.Report {
		q.By, q.Scope = by, scope
		r, err := books.Report(ctx, s, q, false)
		if err != nil {
			t.Fatalf("%s: report --by %s: %v", where, strings.Join(by, ","), err)
		}
		r.Closed = nil // the statement's mark: absent while open
		return r
	}
	answer := func(by []string) []byte {
		var b bytes.Buffer
		if err := report.WriteJSON(&b, ask(by, nil)); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	chargeback := func(scope func(project, owner string) bool) []byte {
		q.By, q.Scope = []string{report.TaskKey}, scope
		st, err := books.Chargeback(ctx, s, s, q)
		if err != nil {
			t.Fatalf("%s: chargeback: %v", where, err)
		}
		st.SHA256 = "" // the statement's hash: empty while open
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mine := ask([]string{"project"}, statementScope)
	rows, err := json.MarshalIndent(struct {
		Rows        []report.Row
		Adjustments []report.Adjustment
	}{mine.Rows, mine.Adjustments}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	var others [][]byte
	for i, by := range otherGroupings {
		var scope func(project, owner string) bool
		if i == len(otherGroupings)-1 {
			scope = statementScope
		}
		var b bytes.Buffer
		if err := report.WriteJSON(&b, ask(by, scope)); err != nil {
			t.Fatal(err)
		}
		others = append(others, b.Bytes())
	}
	return monthAnswers{
		others:    others,
		byProject: answer([]string{"project"}), byProjectOwner: answer([]string{"project", "owner"}),
		chargeback:    chargeback(nil),
		scopedProject: rows, scopedChargeback: chargeback(statementScope),
		scopedTotal: mine.Total, scopedRows: len(mine.Rows),
	}
}

// sameAnswers fails naming the first answer whose bytes differ.
func sameAnswers(t *testing.T, where string, want, got monthAnswers) {
	t.Helper()
	for _, c := range []struct {
		name      string
		want, got []byte
	}{
		{"report --by project", want.byProject, got.byProject},
		{"report --by project,owner", want.byProjectOwner, got.byProjectOwner},
		{"chargeback by task", want.chargeback, got.chargeback},
		{"report --by project scoped to *_0 (rows and adjustments)", want.scopedProject, got.scopedProject},
		{"chargeback by task scoped to *_0", want.scopedChargeback, got.scopedChargeback},
	} {
		if !bytes.Equal(c.want, c.got) {
			t.Errorf("%s: %s differs at line %s", where, c.name, firstDifference(c.want, c.got))
		}
	}
	for i, by := range otherGroupings {
		name := "report --by " + strings.Join(by, ",")
		if i == len(otherGroupings)-1 {
			name += " scoped to *_0"
		}
		if !bytes.Equal(want.others[i], got.others[i]) {
			t.Errorf("%s: %s differs at line %s", where, name, firstDifference(want.others[i], got.others[i]))
		}
	}
	w, g, tol := want.scopedTotal, got.scopedTotal, microTol(got.scopedRows)
	if w.Tasks != g.Tasks || w.CompletedTasks != g.CompletedTasks || w.OpenTasks != g.OpenTasks || w.BillingBasis != g.BillingBasis {
		t.Errorf("%s: the scoped total's tasks or basis: %+v, want %+v", where, g, w)
	}
	for _, f := range []struct {
		name      string
		want, got *float64
	}{
		{"gpu_hours", &w.GPUHours, &g.GPUHours}, {"idle_gpu_hours", &w.IdleGPUHours, &g.IdleGPUHours},
		{"cost", w.Cost, g.Cost}, {"unpriced_gpu_hours", w.UnpricedGPUHours, g.UnpricedGPUHours},
		{"declared_gpu_hours", w.DeclaredGPUHours, g.DeclaredGPUHours},
		{"observed_gpu_hours", w.ObservedGPUHours, g.ObservedGPUHours},
		{"undeclared_gpu_hours", w.UndeclaredGPUHours, g.UndeclaredGPUHours},
	} {
		switch {
		case (f.want == nil) != (f.got == nil):
			t.Errorf("%s: the scoped total's %s is %v, want %v", where, f.name, f.got, f.want)
		case f.want != nil && math.Abs(*f.want-*f.got) > tol:
			t.Errorf("%s: the scoped total's %s is %v, want %v (within %v)", where, f.name, *f.got, *f.want, tol)
		}
	}
}

// firstDifference is the first line where got differs from want, with
// both lines.
func firstDifference(want, got []byte) string {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			// A long line (a chargeback's JSON is one): around the first
			// byte that differs.
			j := 0
			for j < min(len(wl), len(gl)) && wl[j] == gl[j] {
				j++
			}
			from := max(0, j-300)
			return fmt.Sprintf("%d, byte %d:\nwant …%s\ngot  …%s", i+1, j, wl[from:min(len(wl), j+300)], gl[from:min(len(gl), j+300)])
		}
	}
	return "none"
}
