package monitor

import (
	"bufio"
	"cmp"
	"context"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// TaskText is one scrape's open tasks, ready to be written in the text
// exposition format (0.0.4) without building a prometheus.Metric per
// series: with 20,000 tasks of 8 GPUs each the const metrics, Gather's
// sorting and the encoder cost seconds and hundreds of MiB. What it writes
// is, byte for byte, what the registry and expfmt write for the collector's
// Collect: families by name, HELP and TYPE lines, series ordered by their
// label values in label-name order, label values escaped as expfmt escapes
// them, values formatted as expfmt formats them, families without series
// left out.
type TaskText struct {
	failed bool
	tasks  []store.OpenTask
	now    int64
	gpus   []taskGPU // the GPU series, one per (task, UUID, GPU_I_ID)

	// The series' orders, sorted once (in parallel) by sort.
	sorted   bool
	identity []*store.OpenTask // (owner, project, task_id): start, estimate
	info     []*store.OpenTask // paddle_task_info's labels
	idleOnes []*store.OpenTask // the tasks with an idle series, its labels
	gpuInfo  []taskGPU         // paddle_task_gpu_info's labels
	gpuOrder []taskGPU         // (GPU_I_ID, UUID, owner, project, task_id): share, utilisation
}

type taskGPU struct {
	t  *store.OpenTask
	g  *store.OpenGPU
	gi string
}

// Read reads the open tasks for one scrape (the store's failure is kept,
// and written as paddle_monitor_task_scrape_error 1).
func (c *TaskCollector) Read() *TaskText {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	tasks, err := c.src.OpenTasks(ctx, c.now().Add(-c.ttl).Unix(), 0)
	if err != nil {
		return &TaskText{failed: true}
	}
	tasks = alive(tasks, c.execTTL, c.now())
	s := &TaskText{tasks: tasks, now: c.now().Unix()}
	n := 0
	for i := range tasks {
		n += len(tasks[i].GPUs)
	}
	s.gpus = make([]taskGPU, 0, n)
	for i := range tasks {
		t := &tasks[i]
		first := len(s.gpus)
		var seen map[[2]string]bool // only for tasks of many GPUs
		for j := range t.GPUs {
			g := &t.GPUs[j]
			gi := ""
			if g.GPUInstanceID != nil {
				gi = strconv.FormatInt(*g.GPUInstanceID, 10)
			}
			// A GPU (instance) listed twice by one task: one series,
			// the first (as Collect serves it). Tasks under one task_id
			// differ in project or owner (the store's identity), so
			// series of different tasks differ too.
			dup := false
			if len(t.GPUs) > 16 {
				if seen == nil {
					seen = make(map[[2]string]bool, len(t.GPUs))
				}
				k := [2]string{g.UUID, gi}
				dup = seen[k]
				seen[k] = true
			} else {
				for _, o := range s.gpus[first:] {
					if o.g.UUID == g.UUID && o.gi == gi {
						dup = true
						break
					}
				}
			}
			if !dup {
				s.gpus = append(s.gpus, taskGPU{t: t, g: g, gi: gi})
			}
		}
	}
	return s
}

// families returns the families s writes, by name (those with at least
// one series).
func (s *TaskText) families() []*Family {
	if s.failed {
		return []*Family{&famTaskScrapeError}
	}
	var out []*Family
	for _, f := range taskFamilies {
		if s.count(f) > 0 {
			out = append(out, f)
		}
	}
	return out
}

func (s *TaskText) count(f *Family) int {
	n := 0
	switch f {
	case &famTaskScrapeError:
		return 1
	case &famTaskEstimate:
		for i := range s.tasks {
			if s.tasks[i].DurationEst != nil {
				n++
			}
		}
	case &famTaskGPUInfo, &famTaskGPUShare:
		return len(s.gpus)
	case &famTaskGPUUtil:
		for _, g := range s.gpus {
			if g.g.LatestUtilMean != nil {
				n++
			}
		}
	case &famTaskIdle:
		for i := range s.tasks {
			if s.idle(&s.tasks[i]) {
				n++
			}
		}
	case &famTaskInfo, &famTaskStart:
		return len(s.tasks)
	}
	return n
}

func (s *TaskText) idle(t *store.OpenTask) bool { return t.Sampled && !lost(*t, s.now) }

// WriteTo writes every family of s, by name.
func (s *TaskText) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 64<<10)
	for _, f := range s.families() {
		if err := s.writeFamily(bw, f); err != nil {
			return cw.n, err
		}
	}
	err := bw.Flush()
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeFamily writes the family f (one of families) with its HELP and
// TYPE lines. The label values go in the order of f.Labels, as Collect
// passes them.
func (s *TaskText) writeFamily(w *bufio.Writer, f *Family) error {
	l := &lineWriter{w: w}
	l.header(f)
	switch f {
	case &famTaskScrapeError:
		v := 0.0
		if s.failed {
			v = 1
		}
		l.series(v)
	case &famTaskEstimate, &famTaskStart:
		s.sort()
		for _, t := range s.identity {
			if f == &famTaskStart {
				l.series(float64(t.StartTime), t.TaskID, t.Project, t.Owner)
			} else if t.DurationEst != nil {
				l.series(float64(*t.DurationEst), t.TaskID, t.Project, t.Owner)
			}
		}
	case &famTaskGPUInfo:
		s.sort()
		for _, g := range s.gpuInfo {
			l.series(1, g.t.TaskID, g.t.Project, g.t.Owner, g.t.Hostname, g.g.UUID, g.gi, g.g.Profile, g.g.Model)
		}
	case &famTaskGPUShare, &famTaskGPUUtil:
		s.sort()
		for _, g := range s.gpuOrder {
			v := g.g.Share
			if f == &famTaskGPUUtil {
				if g.g.LatestUtilMean == nil {
					continue
				}
				v = *g.g.LatestUtilMean
			}
			l.series(v, g.t.TaskID, g.t.Project, g.t.Owner, g.g.UUID, g.gi)
		}
	case &famTaskIdle:
		s.sort()
		for _, t := range s.idleOnes {
			l.series(idleSeconds(t), t.TaskID, t.TaskName, t.Project, t.Owner, t.Hostname)
		}
	case &famTaskInfo:
		s.sort()
		for _, t := range s.info {
			l.series(1, t.TaskID, t.TaskName, t.Project, t.Owner, t.Priority, t.Env, t.Pipeline, t.Step, t.Hostname, t.K8sPodUID)
		}
	}
	return l.flush()
}

func (s *TaskText) pointers() []*store.OpenTask {
	out := make([]*store.OpenTask, len(s.tasks))
	for i := range s.tasks {
		out[i] = &s.tasks[i]
	}
	return out
}

// sort orders the series of every family, the five sorts in parallel.
func (s *TaskText) sort() {
	if s.sorted {
		return
	}
	s.sorted = true
	var wg sync.WaitGroup
	run := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	run(func() {
		s.gpuInfo = slices.Clone(s.gpus)
		slices.SortFunc(s.gpuInfo, func(a, b taskGPU) int {
			return cmpStrings(a.gi, b.gi, a.g.Profile, b.g.Profile, a.g.UUID, b.g.UUID, a.g.Model, b.g.Model,
				a.t.Hostname, b.t.Hostname, a.t.Owner, b.t.Owner, a.t.Project, b.t.Project, a.t.TaskID, b.t.TaskID)
		})
	})
	run(func() {
		s.gpuOrder = slices.Clone(s.gpus)
		slices.SortFunc(s.gpuOrder, func(a, b taskGPU) int {
			return cmpStrings(a.gi, b.gi, a.g.UUID, b.g.UUID, a.t.Owner, b.t.Owner, a.t.Project, b.t.Project, a.t.TaskID, b.t.TaskID)
		})
	})
	run(func() {
		s.identity = s.pointers()
		slices.SortFunc(s.identity, func(a, b *store.OpenTask) int {
			return cmpStrings(a.Owner, b.Owner, a.Project, b.Project, a.TaskID, b.TaskID)
		})
	})
	run(func() {
		s.info = s.pointers()
		slices.SortFunc(s.info, func(a, b *store.OpenTask) int {
			return cmpStrings(a.Env, b.Env, a.Hostname, b.Hostname, a.K8sPodUID, b.K8sPodUID, a.Owner, b.Owner,
				a.Pipeline, b.Pipeline, a.Priority, b.Priority, a.Project, b.Project, a.Step, b.Step,
				a.TaskID, b.TaskID, a.TaskName, b.TaskName)
		})
	})
	run(func() {
		for i := range s.tasks {
			if s.idle(&s.tasks[i]) {
				s.idleOnes = append(s.idleOnes, &s.tasks[i])
			}
		}
		slices.SortFunc(s.idleOnes, func(a, b *store.OpenTask) int {
			return cmpStrings(a.Hostname, b.Hostname, a.Owner, b.Owner, a.Project, b.Project, a.TaskID, b.TaskID, a.TaskName, b.TaskName)
		})
	})
	wg.Wait()
}

// cmpStrings compares pairs (a1, b1, a2, b2, ...) in order, as
// client_golang orders the series of a family by label values.
func cmpStrings(p ...string) int {
	for i := 0; i+1 < len(p); i += 2 {
		if c := cmp.Compare(p[i], p[i+1]); c != 0 {
			return c
		}
	}
	return 0
}

// lineWriter appends series lines to a buffer, and hands them to w in
// chunks.
type lineWriter struct {
	w   *bufio.Writer
	buf []byte
	err error
	// The family of the series written: its name, label names and their
	// indexes by name.
	name   string
	labels []string
	order  []int
}

// header writes f's HELP and TYPE lines, and makes f the family of the
// series that follow.
func (l *lineWriter) header(f *Family) {
	l.name = f.Name
	l.order = make([]int, len(f.Labels))
	for i := range l.order {
		l.order[i] = i
	}
	slices.SortFunc(l.order, func(a, b int) int { return cmp.Compare(f.Labels[a], f.Labels[b]) })
	l.labels = f.Labels
	l.buf = append(l.buf, "# HELP "...)
	l.buf = append(l.buf, f.Name...)
	l.buf = append(l.buf, ' ')
	l.buf = appendEscaped(l.buf, f.Help, false)
	l.buf = append(l.buf, "\n# TYPE "...)
	l.buf = append(l.buf, f.Name...)
	l.buf = append(l.buf, ' ')
	l.buf = append(l.buf, f.typeName()...)
	l.buf = append(l.buf, '\n')
}

// series writes one series of the header's family: its labels by name (as
// expfmt orders them) with vals, given in the family's label order, and v.
func (l *lineWriter) series(v float64, vals ...string) {
	l.buf = append(l.buf, l.name...)
	sep := byte('{')
	for _, i := range l.order {
		l.buf = append(l.buf, sep)
		l.buf = append(l.buf, l.labels[i]...)
		l.buf = append(l.buf, '=', '"')
		l.buf = appendEscaped(l.buf, vals[i], true)
		l.buf = append(l.buf, '"')
		sep = ','
	}
	if len(l.order) > 0 {
		l.buf = append(l.buf, '}')
	}
	l.value(v)
}

// value ends the line with v as expfmt's writeFloat writes it.
func (l *lineWriter) value(v float64) {
	l.buf = append(l.buf, ' ')
	switch {
	case v == 1:
		l.buf = append(l.buf, '1')
	case v == 0:
		l.buf = append(l.buf, '0')
	case v == -1:
		l.buf = append(l.buf, "-1"...)
	case math.IsNaN(v):
		l.buf = append(l.buf, "NaN"...)
	case math.IsInf(v, +1):
		l.buf = append(l.buf, "+Inf"...)
	case math.IsInf(v, -1):
		l.buf = append(l.buf, "-Inf"...)
	default:
		l.buf = strconv.AppendFloat(l.buf, v, 'g', -1, 64)
	}
	l.buf = append(l.buf, '\n')
	if len(l.buf) >= 32<<10 {
		l.flush()
	}
}

func (l *lineWriter) flush() error {
	if l.err == nil && len(l.buf) > 0 {
		_, l.err = l.w.Write(l.buf)
	}
	l.buf = l.buf[:0]
	return l.err
}

// appendEscaped appends v as expfmt writes it: backslash and newline
// escaped, and the double quote in a label value. A value that is not
// valid UTF-8 (which prometheus.NewConstMetric refuses) has its invalid
// bytes replaced by U+FFFD.
func appendEscaped(b []byte, v string, quoted bool) []byte {
	if !utf8.ValidString(v) {
		v = strings.ToValidUTF8(v, "\uFFFD")
	}
	if strings.IndexAny(v, "\\\n\"") < 0 {
		return append(b, v...)
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '"' && quoted:
			b = append(b, '\\', '"')
		default:
			b = append(b, c)
		}
	}
	return b
}
