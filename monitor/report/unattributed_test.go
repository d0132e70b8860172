package report

import (
	"context"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// A task's claims on unattributed use (MONITOR.md 20.2), by hand: it
// declared a T4 whole for an hour its node's reports covered; 1800 s were
// attributed to it, and its GPU had 1800 s of use by a host process
// (namespace "") and 900 s by a pod of team-a, nobody's. Without a
// namespace mapping it pays 1800 + 1800 + 900 s = 1.25 GPU-hours; with
// team-a mapped to project a, the pod's 900 s are a's undeclared use (in
// the store's undeclared list) and the task pays 1 GPU-hour.
func TestBilledUseClaims(t *testing.T) {
	k := key("project", "p", "owner", "o")
	gk := key("project", "p", "owner", "o", "model", "T4")
	declared := facts.GPUSums{Key: gk, InstanceSeconds: 3600, GPUSeconds: 3600}
	obs := &facts.Observations{Covered: true, Tasks: []facts.ObservedTask{{Key: k, CountedSeconds: 3600, CoveredSeconds: 3600,
		CoveredDeclared: []facts.GPUSums{declared}, Observed: []facts.InstanceUse{{Model: "T4", Seconds: 1800}},
		Unattributed: []facts.UndeclaredUse{{Namespace: "", Use: facts.InstanceUse{Model: "T4", Seconds: 1800}},
			{Namespace: "team-a", Use: facts.InstanceUse{Model: "T4", Seconds: 900}}}}}}
	src := &observingSource{fakeSource: fakeSource{tasks: []facts.TaskSums{{Key: k, Tasks: 1, Completed: 1}}, gpus: []facts.GPUSums{declared}}, obs: obs}
	src.totalTasks = src.tasks
	ns := func(namespace string) (string, bool) { return "a", namespace == "team-a" }
	for _, c := range []struct {
		name string
		ns   func(string) (string, bool)
		gpu  float64
	}{{"no mapping", nil, 1.25}, {"team-a mapped", ns, 1}} {
		rep, err := Compute(context.Background(), src, Query{Window: nov, Namespaces: c.ns})
		if err != nil {
			t.Fatal(err)
		}
		var p *Row
		for i := range rep.Rows {
			if rep.Rows[i].Key["project"] == "p" {
				p = &rep.Rows[i]
			}
		}
		if p == nil || p.GPUHours != c.gpu || *p.ObservedGPUHours != c.gpu || p.BillingBasis != facts.BasisObserved {
			t.Errorf("%s: p's row %+v, want %v GPU-hours observed", c.name, p, c.gpu)
		}
	}
}
