package cgroupowner

import (
	"strings"
	"testing"
)

// FuzzClassify: any path gives one owner of a known kind, whose container
// ID and pod UID are taken from the path itself.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		"/kubepods.slice/kubepods-pod7c1e5d2a_4b3f_4e6d_9a8b_1c2d3e4f5a6b.slice/cri-containerd-" + cid + ".scope",
		"/kubepods/burstable/pod" + fixturePod + "/" + cid,
		"/docker/" + cid, "/slurm/uid_1/job_2/step_3", "/", "", "/kubepods/pod/x", "/..//../docker-.scope",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		o := Classify(path)
		switch o.Kind {
		case KindHost:
			if o.Cgroup != path {
				t.Fatalf("host user's cgroup %q, want %q", o.Cgroup, path)
			}
		case KindContainer:
			if !strings.Contains(path, o.ContainerID) || o.PodUID != "" && !strings.Contains(strings.ReplaceAll(path, "_", "-"), o.PodUID) {
				t.Fatalf("owner %+v not from %q", o, path)
			}
		case KindSlurm:
			if !strings.Contains(path, "job_"+o.SlurmJob) {
				t.Fatalf("owner %+v not from %q", o, path)
			}
		default:
			t.Fatalf("kind %q", o.Kind)
		}
	})
}
