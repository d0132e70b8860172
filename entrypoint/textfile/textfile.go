// Package textfile writes a task's identity for node_exporter's textfile
// collector: one file per task, paddle-task-<task_id>.prom, in a directory
// the collector reads, so node-level GPU metrics (dcgm-exporter's, keyed by
// UUID) can be joined with the task's project and owner in PromQL.
//
// Guarantees: the file is written atomically (a temporary name that does
// not end in .prom, fsynced, renamed into place), so the collector never
// reads half a file; it is rendered by Prometheus' own exposition encoder
// (prometheus/common/expfmt) with constant HELP texts and no timestamps,
// so `promtool check metrics` passes and node_exporter reads it without a
// scrape error; every series carries task_id; each family has a fixed set of
// label names in a file (a MIG task's GPU family adds GPU_I_ID and
// GPU_I_PROFILE), all valid under Prometheus' legacy naming rules. Each GPU
// (instance) also has its share of the physical GPU, labelled as the
// monitor's paddle_task_gpu_share, so a MIG instance or a time-sliced GPU
// counts at its share where Prometheus reads this file instead of the
// monitor (deploy/prometheus/paddle-rules.yml).
package textfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
)

// Prefix and Suffix frame every file name this package writes.
const (
	Prefix = "paddle-task-"
	Suffix = ".prom"
)

// maxRead bounds how much of another task's file is read when looking for
// stale claims: ours are well under a kilobyte per GPU.
const maxRead = 1 << 20

// Families. Each has a fixed set of label names: a series always carries
// the same labels, unset ones empty (which Prometheus reads as absent).
const (
	InfoName      = "paddle_task_info"
	GPUInfoName   = "paddle_task_gpu_info"
	StartTimeName = "paddle_task_start_time_seconds"
	GPUShareName  = "paddle_task_gpu_share"
)

var (
	infoLabels    = []string{"task_id", "task_name", "project", "owner", "priority", "env", "pipeline", "step", "hostname"}
	gpuInfoLabels = []string{"task_id", "project", "owner", "hostname", "UUID", "gpu_model"}
	// gpuInfoMIGLabels are a MIG task's: UUID is then the parent GPU's,
	// GPU_I_ID and GPU_I_PROFILE name the instance as dcgm-exporter does
	// (empty for a whole GPU of the same task). A whole-GPU task's file
	// keeps the shorter set, byte for byte as before MIG: node_exporter
	// serves series of one family with different label names without a
	// scrape error, and Prometheus reads an absent label as empty.
	gpuInfoMIGLabels = append(slices.Clone(gpuInfoLabels), "GPU_I_ID", "GPU_I_PROFILE")
	startLabels      = []string{"task_id"}
	// gpuShareLabels are the monitor's for the same series: GPU_I_ID is
	// empty for a whole GPU.
	gpuShareLabels = []string{"task_id", "project", "owner", "UUID", "GPU_I_ID"}
)

// HELP texts are constant: node_exporter drops a family whose HELP differs
// between files and raises node_textfile_scrape_error.
const (
	infoHelp    = "Labels of a task started by paddle-entrypoint; always 1."
	gpuInfoHelp = "One series per GPU of a task, by the GPU's UUID as dcgm-exporter labels it; always 1."
	startHelp   = "When the task started, in Unix seconds."
	shareHelp   = "The fraction of the physical GPU the task holds on this GPU (instance): 1 for a whole GPU, slices / total slices for a MIG instance, the platform's share for a time-sliced or MPS GPU."
)

// FileName returns the file name of the task.
func FileName(taskID string) string { return Prefix + taskID + Suffix }

// Render returns the exposition text of the task: its info series, one
// GPU info series and one share series per GPU with a UUID, and its start
// time.
func Render(s *labels.Set, gpus []gpu.Device) ([]byte, error) {
	fams := []*dto.MetricFamily{family(InfoName, infoHelp, gauge(1, infoLabels,
		s.TaskID, s.TaskName, s.Project, s.Owner, s.Priority, s.Env, s.Pipeline, s.Step, s.Hostname))}
	var perGPU, shares []*dto.Metric
	mig := slices.ContainsFunc(gpus, func(d gpu.Device) bool { return d.MIG != nil })
	for _, d := range gpus {
		if !wire.ValidName(d.UUID, "") {
			continue
		}
		instance := ""
		if d.MIG != nil {
			instance = strconv.Itoa(d.MIG.GPUInstanceID)
		}
		shares = append(shares, gauge(Share(d), gpuShareLabels, s.TaskID, s.Project, s.Owner, d.UUID, instance))
		if !mig {
			perGPU = append(perGPU, gauge(1, gpuInfoLabels, s.TaskID, s.Project, s.Owner, s.Hostname, d.UUID, d.Name))
			continue
		}
		id, profile := "", ""
		if d.MIG != nil {
			id, profile = strconv.Itoa(d.MIG.GPUInstanceID), d.MIG.Profile
		}
		perGPU = append(perGPU, gauge(1, gpuInfoMIGLabels, s.TaskID, s.Project, s.Owner, s.Hostname, d.UUID, d.Name, id, profile))
	}
	if len(perGPU) > 0 {
		fams = append(fams, family(GPUInfoName, gpuInfoHelp, perGPU...),
			family(GPUShareName, shareHelp, shares...))
	}
	fams = append(fams, family(StartTimeName, startHelp, gauge(float64(s.StartTime), startLabels, s.TaskID)))
	var buf bytes.Buffer
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&buf, f); err != nil {
			return nil, fmt.Errorf("textfile: rendering %s: %w", f.GetName(), err)
		}
	}
	return buf.Bytes(), nil
}

// Share is the fraction of its physical GPU that d stands for: a MIG
// instance's slices / total slices (whatever else was set), else the share
// the probe set (PADDLE_GPU_SHARE for a whole GPU) when it is in (0, 1],
// else 1.
func Share(d gpu.Device) float64 {
	if d.MIG != nil && d.MIG.Slices > 0 && d.MIG.TotalSlices >= d.MIG.Slices {
		return float64(d.MIG.Slices) / float64(d.MIG.TotalSlices)
	}
	if d.Share > 0 && d.Share <= 1 {
		return d.Share
	}
	return 1
}

func family(name, help string, ms ...*dto.Metric) *dto.MetricFamily {
	return &dto.MetricFamily{Name: &name, Help: &help, Type: dto.MetricType_GAUGE.Enum(), Metric: ms}
}

func gauge(v float64, names []string, values ...string) *dto.Metric {
	m := &dto.Metric{Gauge: &dto.Gauge{Value: &v}}
	for i := range names {
		m.Label = append(m.Label, &dto.LabelPair{Name: &names[i], Value: &values[i]})
	}
	return m
}

// Write writes the task's file into dir atomically and returns its path.
// A task_id that could name another directory is refused (the labels
// package never produces one).
func Write(dir string, s *labels.Set, gpus []gpu.Device) (string, error) {
	if !wire.ValidName(s.TaskID, "") {
		return "", fmt.Errorf("textfile: task id %q is not a valid file name part", s.TaskID)
	}
	data, err := Render(s, gpus)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, FileName(s.TaskID))
	// The temporary name does not end in .prom: the collector reads only
	// *.prom, so it never sees a partial file.
	tmp, err := os.CreateTemp(dir, "."+Prefix+s.TaskID+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("textfile: %w", err)
	}
	name := tmp.Name()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return "", fmt.Errorf("textfile %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		// Durability of the rename across a power loss only.
		d.Sync()
		d.Close()
	}
	return path, nil
}

// Remove deletes the task's file; one already gone is not an error.
func Remove(dir, taskID string) error {
	err := os.Remove(filepath.Join(dir, FileName(taskID)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("textfile: %w", err)
	}
	return nil
}

// Stale is another task's file that claims one of our GPUs.
type Stale struct {
	Path string
	UUID string // the GPU it claims (a MIG instance's MIG UUID)
	Err  error  // nil when removed
}

// RemoveStale removes the files of other tasks in dir that claim one of
// gpus: one GPU instance runs one task, so such a file is left over by a
// task that ended without removing it (exec mode, a killed supervisor). A
// whole GPU is claimed by every series of its UUID; a MIG instance by the
// series of its parent's UUID with its GPU_I_ID, or with none (a whole-GPU
// claim: the GPU was re-partitioned since), so the tasks on the other
// instances of its GPU keep their files. Files it cannot read or parse are
// left alone; a file it may not remove (another user's, in a sticky
// directory) is returned with its error.
func RemoveStale(dir, taskID string, gpus []gpu.Device) ([]Stale, error) {
	if !slices.ContainsFunc(gpus, func(d gpu.Device) bool { return d.UUID != "" }) {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("textfile: %w", err)
	}
	var out []Stale
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, Prefix) || !strings.HasSuffix(name, Suffix) || name == FileName(taskID) {
			continue
		}
		path := filepath.Join(dir, name)
		uuid := claim(path, gpus)
		if uuid == "" {
			continue
		}
		st := Stale{Path: path, UUID: uuid}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			st.Err = err
		}
		out = append(out, st)
	}
	return out, nil
}

// claim returns the key of the first of gpus that the file's GPU info
// series claim, or "" (also when the file cannot be read or parsed).
func claim(path string, gpus []gpu.Device) string {
	// Non-blocking: a FIFO put in place of a file must not hang the start.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(f, maxRead))
	if err != nil {
		return ""
	}
	for _, m := range fams[GPUInfoName].GetMetric() {
		var uuid, instance string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "UUID":
				uuid = l.GetValue()
			case "GPU_I_ID":
				instance = l.GetValue()
			}
		}
		for _, d := range gpus {
			if d.UUID == "" || d.UUID != uuid {
				continue
			}
			if d.MIG == nil || instance == "" || instance == strconv.Itoa(d.MIG.GPUInstanceID) {
				return d.Key()
			}
		}
	}
	return ""
}
