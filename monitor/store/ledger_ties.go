package store

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"sort"
	"strings"
)

// Tie is a registration a user of a node report may be tied to.
type Tie struct {
	Key                    int64 // tasks.id
	TaskID, Project, Owner string
	StartTime              int64
}

// TieCandidates returns the registrations the user of node may be tied to
// (docs/cost.md, "The ledger"), oldest first: on Kubernetes (a pod UID)
// those whose k8s_pod_uid is the user's and whose k8s_node is the node or
// empty, whatever it declared; for a Slurm job the node's registrations of
// that job; for another container with a declaration, the declared task of
// that project (and owner, when declared) whose hostname is the
// container's default host name (the first 12 characters of its ID) or
// whose k8s_node is the node. A user without a pod UID never ties to a
// registration that names one (NODE.md 11: a plain container on a
// Kubernetes node cannot take a pod's registration). None for host users.
func (s *Store) TieCandidates(ctx context.Context, node string, u *UserIdentity) ([]Tie, error) {
	return s.tieCandidates(ctx, s.r, node, u)
}

func (s *Store) tieCandidates(ctx context.Context, q querier, node string, u *UserIdentity) ([]Tie, error) {
	var st *stmt
	var args []any
	switch {
	case u.PodUID != "":
		st, args = stmtTiePod, []any{u.PodUID, strings.ToLower(node)}
	case u.SlurmJob != "":
		st, args = stmtTieSlurm, []any{u.SlurmJob, node, strings.ToLower(node)}
	case u.ContainerID != "" && u.Declared && u.DeclaredTaskID != "":
		host := u.ContainerID
		if len(host) > 12 {
			host = host[:12]
		}
		st, args = stmtTieContainer, []any{u.DeclaredTaskID, u.DeclaredProject, u.DeclaredOwner, u.DeclaredOwner, host, strings.ToLower(node)}
	default:
		return nil, nil
	}
	out, err := s.ties(ctx, q, st, args...)
	if err != nil || st != stmtTieSlurm {
		return out, err
	}
	// A registration without slurm_job names its job as pipeline_run.
	more, err := s.ties(ctx, q, stmtTieSlurmRun, args...)
	if err != nil {
		return nil, err
	}
	seen := map[int64]bool{}
	for _, t := range out {
		seen[t.Key] = true
	}
	for _, t := range more {
		if !seen[t.Key] {
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, compareTies)
	return out, nil
}

// compareTies orders ties oldest first: by start time, then tasks.id.
func compareTies(a, b Tie) int {
	return cmp.Or(cmp.Compare(a.StartTime, b.StartTime), cmp.Compare(a.Key, b.Key))
}

// TieKey is the key of LedgerTies' answer: a user of a node.
func TieKey(node string, u *UserIdentity) string { return node + "\x1e" + u.Key() }

// LedgerTies returns, for each user of users (by TieKey), what
// TieCandidates returns for it, in one statement per tie rule for them
// all; and besides, a pod UID that users of two nodes carry over
// overlapping times (users are a window's sums: from Hour to LastTime)
// ties on neither node to a registration without k8s_node (NODE.md 12.1:
// one of them forges it, and the monitor cannot tell which).
func (s *Store) LedgerTies(ctx context.Context, users []UserHour) (map[string][]Tie, error) {
	read := func(st *stmt, keys any) ([]tieRow, error) {
		return stmtRows(ctx, s, s.r, "ledger ties", st, scanTieRow, keyListArg(keys))
	}
	// The keys of each rule, as tieCandidates chooses the rule.
	pods, jobs, decls := map[string]bool{}, map[string]bool{}, map[[2]string]bool{}
	for i := range users {
		u := &users[i].User
		switch {
		case u.PodUID != "":
			pods[u.PodUID] = true
		case u.SlurmJob != "":
			jobs[u.SlurmJob] = true
		case u.ContainerID != "" && u.Declared && u.DeclaredTaskID != "":
			decls[[2]string{u.DeclaredTaskID, u.DeclaredProject}] = true
		}
	}
	ix := tieIndex{byPod: map[string][]tieRow{}, byJob: map[string][]tieRow{}, byDecl: map[[2]string][]tieRow{}}
	byPod, byJob, byDecl := ix.byPod, ix.byJob, ix.byDecl
	if len(pods) > 0 {
		rows, err := read(stmtTiesPod, sortedKeys(pods))
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			byPod[r.key] = append(byPod[r.key], r)
		}
	}
	if len(jobs) > 0 {
		keys := sortedKeys(jobs)
		rows, err := read(stmtTiesSlurm, keys)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			byJob[r.key] = append(byJob[r.key], r)
		}
		if rows, err = read(stmtTiesSlurmRun, keys); err != nil {
			return nil, err
		}
		for _, r := range rows {
			byJob[r.key] = append(byJob[r.key], r) // after the job's slurm_job rows
		}
	}
	if len(decls) > 0 {
		keys := make([][2]string, 0, len(decls))
		for k := range decls {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"\x1f"+keys[i][1] < keys[j][0]+"\x1f"+keys[j][1] })
		rows, err := read(stmtTiesContainer, keys)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			k := [2]string{r.tie.TaskID, r.tie.Project}
			byDecl[k] = append(byDecl[k], r)
		}
	}
	twoNodes := podsOnTwoNodes(users)
	// A window's sums are mostly one row per user (a month's are), so
	// the answer is sized for them all at once rather than grown.
	out := make(map[string][]Tie, len(users))
	for i := range users {
		node, u := users[i].Node, &users[i].User
		key := users[i].TieKey()
		if _, ok := out[key]; ok {
			continue
		}
		out[key] = ix.ties(u, node, twoNodes[u.PodUID])
	}
	return out, nil
}

// tieRow is a registration a tie statement read, under the key it was
// looked up by (a pod UID, a Slurm job, a declared task and project).
type tieRow struct {
	key                       string
	tie                       Tie
	hostname, k8sNode, podUID string
}

// scanTieRow reads a tie statement's row: the key, the registration, its
// host name, Kubernetes node and pod UID.
func scanTieRow(rows *sql.Rows, r *tieRow) error {
	return rows.Scan(&r.key, &r.tie.Key, &r.tie.TaskID, &r.tie.Project, &r.tie.Owner, &r.tie.StartTime, &r.hostname, &r.k8sNode, &r.podUID)
}

// tieIndex is what a batch of tie statements read: the registrations by
// the key each rule looks a user up by (a Slurm job's slurm_job rows,
// then its pipeline_run rows).
type tieIndex struct {
	byPod, byJob map[string][]tieRow
	byDecl       map[[2]string][]tieRow
}

// ties are user u's (of node) candidate registrations in ix by the tie
// rules (MONITOR.md 13), oldest first, each once: for a pod, those of
// its node or of none (of none only while the pod is not seen on two
// nodes, twoNodes); for a Slurm job, those of the job on the node; for a
// declared container, its declared task's of its host or node. Shared
// by the ledger's ties and a node report's, so the two tie alike.
func (ix tieIndex) ties(u *UserIdentity, node string, twoNodes bool) []Tie {
	var list []Tie
	add := func(rows []tieRow, keep func(r *tieRow) bool) {
		for j := range rows {
			if r := &rows[j]; keep(r) {
				list = append(list, r.tie)
			}
		}
	}
	lnode := strings.ToLower(node)
	switch {
	case u.PodUID != "":
		add(ix.byPod[u.PodUID], func(r *tieRow) bool {
			if r.k8sNode == "" {
				return !twoNodes
			}
			return strings.ToLower(r.k8sNode) == lnode
		})
	case u.SlurmJob != "":
		add(ix.byJob[u.SlurmJob], func(r *tieRow) bool {
			return r.podUID == "" && (r.hostname == node || strings.ToLower(r.k8sNode) == lnode)
		})
	case u.ContainerID != "" && u.Declared && u.DeclaredTaskID != "":
		host := u.ContainerID
		if len(host) > 12 {
			host = host[:12]
		}
		add(ix.byDecl[[2]string{u.DeclaredTaskID, u.DeclaredProject}], func(r *tieRow) bool {
			return r.podUID == "" && (u.DeclaredOwner == "" || r.tie.Owner == u.DeclaredOwner) &&
				(r.hostname == host || strings.ToLower(r.k8sNode) == lnode)
		})
	}
	// Each rule's rows name a registration once, but a Slurm job's
	// registration may carry the job both as slurm_job and as
	// pipeline_run: sorted, its two rows are side by side, and one is
	// kept (no set of seen registrations made per user).
	slices.SortStableFunc(list, compareTies)
	return slices.CompactFunc(list, func(a, b Tie) bool { return a.Key == b.Key })
}

// podsOnTwoNodes returns the pod UIDs that users of two nodes carry over
// overlapping times: a user's sum spans [Hour, LastTime).
func podsOnTwoNodes(users []UserHour) map[string]bool {
	type seen struct {
		node     string
		from, to int64
	}
	byPod := map[string][]seen{}
	out := map[string]bool{}
	for i := range users {
		u := &users[i]
		if u.User.PodUID == "" {
			continue
		}
		me := seen{strings.ToLower(u.Node), u.Hour, max(u.LastTime, u.Hour+1)}
		for _, o := range byPod[u.User.PodUID] {
			if o.node != me.node && o.from < me.to && me.from < o.to {
				out[u.User.PodUID] = true
			}
		}
		byPod[u.User.PodUID] = append(byPod[u.User.PodUID], me)
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s *Store) ties(ctx context.Context, q querier, st *stmt, args ...any) ([]Tie, error) {
	return stmtRows(ctx, s, q, "ledger ties", st, func(rows *sql.Rows, t *Tie) error {
		return rows.Scan(&t.Key, &t.TaskID, &t.Project, &t.Owner, &t.StartTime)
	}, args...)
}
