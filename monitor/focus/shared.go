package focus

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// sharing is what the chargeback's task lines of one row key say about its
// GPUs and labels: no figure, only the tags and the split columns.
type sharing struct {
	labels   map[string]string // extra labels every task of the key has, paddle/label/NAME
	mig      bool              // a MIG instance
	shared   bool              // a GPU declared with a share below 1
	shares   map[float64]bool  // the shares the key's GPUs were declared with
	profiles map[string]bool   // the MIG profiles ("" for whole GPUs)
	seen     bool
}

// profile is the one MIG profile of the key's GPUs ("" for whole GPUs,
// several kinds, or none known).
func (s *sharing) profile() string {
	if s == nil || len(s.profiles) != 1 {
		return ""
	}
	for p := range s.profiles {
		return p
	}
	return ""
}

// share is the one share the key's shared GPUs were declared with (nil:
// whole GPUs, or several shares).
func (s *sharing) share() *float64 {
	if !s.shared || len(s.shares) != 1 {
		return nil
	}
	for v := range s.shares {
		return &v
	}
	return nil
}

func shareKey(project, owner, model string) string {
	return project + "\x00" + owner + "\x00" + model
}

// sharing reads the day's chargeback lines (report.Chargeback) by
// (project, owner, model key).
func (g *gen) sharing(ctx context.Context, q report.Query) (map[string]*sharing, error) {
	st, err := report.Chargeback(ctx, g.cfg.Source, q)
	if err != nil {
		return nil, err
	}
	out := map[string]*sharing{}
	for _, l := range st.Lines {
		if l.Namespace != "" {
			continue
		}
		models := map[string][]facts.TaskGPU{}
		for _, gpu := range l.GPUs {
			models[gpu.Model] = append(models[gpu.Model], gpu)
		}
		if l.UnlistedGPUs > 0 {
			models[""] = append(models[""], facts.TaskGPU{Share: 1})
		}
		for _, m := range slices.Sorted(maps.Keys(models)) {
			k := shareKey(l.Project, l.Owner, m)
			s := out[k]
			if s == nil {
				s = &sharing{}
				out[k] = s
			}
			s.add(l.Labels, models[m])
		}
	}
	return out, nil
}

// add counts one task's GPUs of the key in.
func (s *sharing) add(labels map[string]string, gpus []facts.TaskGPU) {
	mine := map[string]string{}
	for k, v := range labels {
		mine["paddle/label/"+strings.ToLower(k)] = v
	}
	if !s.seen {
		s.labels = mine
	} else {
		for k, v := range s.labels {
			if mine[k] != v {
				delete(s.labels, k)
			}
		}
	}
	s.seen = true
	if s.shares == nil {
		s.shares, s.profiles = map[float64]bool{}, map[string]bool{}
	}
	for _, gpu := range gpus {
		profile := ""
		if gpu.MIG {
			profile = gpu.Profile
		}
		s.profiles[profile] = true
		s.mig = s.mig || gpu.MIG
		s.shared = s.shared || gpu.MIG || gpu.Share < 1
		s.shares[gpu.Share] = true
	}
}
