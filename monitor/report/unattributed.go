package report

import "github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"

// billedUse is what the observed basis bills t on its covered part: its
// attributed use, and its claims on use nobody could be tied to
// (Unattributed, MONITOR.md 20.2) whose namespace ns does not charge to a
// project (that use is undeclared, billed to the project; nil ns: every
// claim). The claims stay unattributed in the ledger, and discrepancies
// list them.
func billedUse(t *facts.ObservedTask, ns func(namespace string) (string, bool)) []facts.InstanceUse {
	if len(t.Unattributed) == 0 {
		return t.Observed
	}
	out := append([]facts.InstanceUse(nil), t.Observed...)
	for _, c := range t.Unattributed {
		if ns != nil {
			if _, ok := ns(c.Namespace); ok {
				continue
			}
		}
		out = append(out, c.Use)
	}
	return out
}
