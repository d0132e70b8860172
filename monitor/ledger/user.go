package ledger

import (
	"context"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// Tier finds the registrations a user of a node report may be tied to (a
// *store.Store).
type Tier interface {
	TieCandidates(ctx context.Context, node string, u *store.UserIdentity) ([]store.Tie, error)
}

// UserState is the state the ledger gives a user of node's report of
// time at (the same rules as Compute): Attributed, with the registration
// it is tied to (the latest that started by at); else Undeclared, with
// the project its namespace is charged to; else Unattributed.
func UserState(ctx context.Context, src Tier, ns *NamespaceProjects, node string, at int64, u *store.UserIdentity) (state string, tie *store.Tie, project string, err error) {
	cands, err := src.TieCandidates(ctx, node, u)
	if err != nil {
		return "", nil, "", err
	}
	if t := latest(cands, at); t != nil {
		return Attributed, t, t.Project, nil
	}
	if p, ok := ns.Project(u.Namespace); ok {
		return Undeclared, nil, p, nil
	}
	return Unattributed, nil, "", nil
}
