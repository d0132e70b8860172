package labels

import (
	"fmt"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/sensitive"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// Identity is where a task sits in a pipeline, in Kubernetes and in Slurm. Values
// that come from an orchestrator's own environment (CI variables, the
// downward API) were not written by the task's author: one that breaks a
// rule is dropped with a notice, never a rejection.
type Identity struct {
	Pipeline, PipelineRun, Step string
	// Orchestrator names the source that filled a pipeline key: "gitlab",
	// "github" or "slurm"; "" when none did.
	Orchestrator                             string
	K8sNamespace, K8sPod, K8sNode, K8sPodUID string
	K8sJobIndex                              string // decimal digits
	// SlurmJob is the Slurm job the task runs in (SLURM_JOB_ID), so that
	// the node's observations of a Slurm job are tied to it.
	SlurmJob string // decimal digits
}

// identityField is one built-in key added with the pipeline and Kubernetes
// identity. An extra label of the same name (PADDLE_LABEL_STEP) was accepted
// before these keys existed: it still fills the key, with a notice.
type identityField struct {
	key  string
	own  string // the variable that sets it; "" for orchestrator
	k8s  bool   // own is set for the task (Kubernetes' downward API, Slurm), not the task's PADDLE_*
	dst  func(*Identity) *string
	nums bool // digits only (a Job's completion index)
}

var identityKeys = []identityField{
	{key: "pipeline", own: "PADDLE_PIPELINE", dst: func(i *Identity) *string { return &i.Pipeline }},
	{key: "pipeline_run", own: "PADDLE_PIPELINE_RUN", dst: func(i *Identity) *string { return &i.PipelineRun }},
	{key: "step", own: "PADDLE_STEP", dst: func(i *Identity) *string { return &i.Step }},
	{key: "orchestrator", dst: func(i *Identity) *string { return &i.Orchestrator }},
	{key: "k8s_namespace", own: "POD_NAMESPACE", k8s: true, dst: func(i *Identity) *string { return &i.K8sNamespace }},
	{key: "k8s_pod", own: "POD_NAME", k8s: true, dst: func(i *Identity) *string { return &i.K8sPod }},
	{key: "k8s_node", own: "NODE_NAME", k8s: true, dst: func(i *Identity) *string { return &i.K8sNode }},
	{key: "k8s_pod_uid", own: "POD_UID", k8s: true, dst: func(i *Identity) *string { return &i.K8sPodUID }},
	{key: "k8s_job_index", own: "JOB_COMPLETION_INDEX", k8s: true, nums: true, dst: func(i *Identity) *string { return &i.K8sJobIndex }},
	{key: "slurm_job", own: "SLURM_JOB_ID", k8s: true, nums: true, dst: func(i *Identity) *string { return &i.SlurmJob }},
}

// IdentityKeys are the keys of Identity in labels file order.
func IdentityKeys() []string {
	out := make([]string, len(identityKeys))
	for i, k := range identityKeys {
		out[i] = k.key
	}
	return out
}

// orchestrator is a CI system or batch scheduler whose own variables name
// the pipeline, the run and the step. Each variable is documented by its
// system (docs/pipelines.md cites the pages).
type orchestrator struct {
	name string
	vars map[string]string // pipeline key -> the orchestrator's variable
}

// orchestrators are tried in this order; the first with any of its three
// variables set fills the pipeline keys the task did not set itself.
var orchestrators = []orchestrator{
	{"gitlab", map[string]string{"pipeline": "CI_PROJECT_NAME", "pipeline_run": "CI_PIPELINE_ID", "step": "CI_JOB_NAME"}},
	{"github", map[string]string{"pipeline": "GITHUB_WORKFLOW", "pipeline_run": "GITHUB_RUN_ID", "step": "GITHUB_JOB"}},
	{"slurm", map[string]string{"pipeline": "SLURM_JOB_NAME", "pipeline_run": "SLURM_JOB_ID", "step": "SLURM_STEP_ID"}},
}

// foreignVars are the variables outside PADDLE_* that Parse reads.
var foreignVars = func() map[string]bool {
	m := map[string]bool{}
	for _, o := range orchestrators {
		for _, v := range o.vars {
			m[v] = true
		}
	}
	for _, k := range identityKeys {
		if k.k8s {
			m[k.own] = true
		}
	}
	return m
}()

// legacyValue is an extra label that names an identity key.
type legacyValue struct{ v, value string }

// identity fills s.Identity. A pipeline key comes from the task's own
// variable (PADDLE_PIPELINE, ...), else from an old extra label of the same
// name, else from the first orchestrator found; orchestrator says which one
// filled any. A Kubernetes key comes from its downward-API variable, else
// from an old extra label.
func (p *parser) identity(s *Set) {
	id := &s.Identity
	src := p.orchestrator()
	for _, k := range identityKeys {
		dst := k.dst(id)
		old, isOld := p.legacy[k.key]
		switch {
		case k.own != "" && p.env[k.own] != "":
			if k.k8s {
				*dst = p.foreign(k.own, k.key, k.nums)
			} else {
				*dst = p.name(k.own, k.key, "", "")
			}
			if isOld {
				p.notice(old.v, k.key, fmt.Sprintf("%s is now a built-in key set by %s; this label is dropped: remove it", k.key, k.own), "")
			}
		case k.key == "orchestrator" && id.Orchestrator != "":
			if isOld {
				p.notice(old.v, k.key, fmt.Sprintf("orchestrator is now a built-in key (here %s); this label is dropped: remove it", id.Orchestrator), "")
			}
		case isOld:
			*dst = old.value
			p.notice(old.v, k.key, fmt.Sprintf("%s is now a built-in key: rename %s to %s", k.key, old.v, renameTo(k)), "")
		case src != nil && !k.k8s && k.own != "":
			if *dst = p.foreign(src.vars[k.key], k.key, false); *dst != "" {
				id.Orchestrator = src.name
			}
		}
	}
}

func renameTo(k identityField) string {
	if k.own == "" {
		return "nothing: it is computed (remove it)"
	}
	return k.own
}

// orchestrator returns the first orchestrator with any of its variables set.
func (p *parser) orchestrator() *orchestrator {
	for i, o := range orchestrators {
		for _, v := range o.vars {
			if p.env[v] != "" {
				return &orchestrators[i]
			}
		}
	}
	return nil
}

// foreign reads a value the orchestrator set: every rule applies, but a
// value that breaks one is dropped with a notice, never recorded in
// invalid_labels and never a reason to refuse the start.
func (p *parser) foreign(v, key string, nums bool) string {
	raw := p.env[v]
	if raw == "" {
		return ""
	}
	if kind, found := sensitive.Scan(raw); found {
		p.notice(v, key, "value holds sensitive data ("+string(kind)+"); dropped, never written, sent or logged", kind)
		return ""
	}
	if nums && (!isDigits(raw) || len(raw) > 9) {
		p.notice(v, key, fmt.Sprintf("value %s is not a non-negative integer; dropped", quote(raw)), "")
		return ""
	}
	if !wire.ValidName(raw, "") {
		p.notice(v, key, fmt.Sprintf("value %s from the orchestrator breaks the name rule (1-%d letters, digits, '.', '_', '-', starting with a letter or digit); dropped", quote(raw), wire.MaxNameLen), "")
		return ""
	}
	if err := p.policy.CheckValue(key, raw); err != nil {
		p.notice(v, key, fmt.Sprintf("value %s from the orchestrator: %v; dropped", quote(raw), err), "")
		return ""
	}
	if p.given == nil {
		p.given = map[string]bool{}
	}
	p.given[key] = true
	return raw
}

// notice records a problem that never rejects a start and is not listed in
// invalid_labels: the value was not the task author's, or an old name
// still works.
func (p *parser) notice(v, key, rule string, kind sensitive.Kind) {
	p.problems = append(p.problems, Problem{Var: v, Key: key, Rule: rule, Sensitive: kind, Notice: true})
}

// identityPairs returns the identity keys in labels file order.
func (id Identity) pairs() []Pair {
	ps := make([]Pair, len(identityKeys))
	for i, k := range identityKeys {
		ps[i] = Pair{k.key, *k.dst(&id)}
	}
	return ps
}

// identityKey is the set of Identity's keys.
var identityKey = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range identityKeys {
		m[k.key] = true
	}
	return m
}()
