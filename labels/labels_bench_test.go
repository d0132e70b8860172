package labels_test

// Benchmarks of the labels work on every container start. Results are
// reported in docs/benchmarks.md: go test -run XXX -bench . -benchmem ./labels/

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
)

// containerEnv is the environment of a PaddlePaddle GPU training container
// as a Kubernetes pod sees it: the image's variables, the cluster's service
// links, Paddle's launcher variables, and the task's labels.
var containerEnv = []string{
	"PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOSTNAME=resnet50-imagenet-worker-0",
	"HOME=/root",
	"LANG=C.UTF-8",
	"LC_ALL=C.UTF-8",
	"NVIDIA_VISIBLE_DEVICES=all",
	"NVIDIA_DRIVER_CAPABILITIES=compute,utility",
	"NVIDIA_REQUIRE_CUDA=cuda>=12.0 brand=tesla,driver>=470,driver<471",
	"CUDA_VERSION=12.0.1",
	"CUDA_VISIBLE_DEVICES=0,1",
	"CUDNN_VERSION=8.9.1.23",
	"NCCL_VERSION=2.18.1",
	"LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/nvidia/lib:/usr/local/nvidia/lib64",
	"PYTHONPATH=/workspace",
	"PYTHONUNBUFFERED=1",
	"OMP_NUM_THREADS=8",
	"KUBERNETES_SERVICE_HOST=10.96.0.1",
	"KUBERNETES_SERVICE_PORT=443",
	"KUBERNETES_SERVICE_PORT_HTTPS=443",
	"KUBERNETES_PORT=tcp://10.96.0.1:443",
	"KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443",
	"KUBERNETES_PORT_443_TCP_PROTO=tcp",
	"KUBERNETES_PORT_443_TCP_PORT=443",
	"KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1",
	"PADDLE_JOB_ID=resnet50-imagenet",
	"PADDLE_MASTER=10.244.1.17:8090",
	"PADDLE_NNODES=2",
	"PADDLE_RANK=0",
	"PADDLE_TRAINER_ID=0",
	"PADDLE_TRAINERS_NUM=16",
	"PADDLE_TRAINER_ENDPOINTS=10.244.1.17:6070,10.244.2.9:6070",
	"PADDLE_CURRENT_ENDPOINT=10.244.1.17:6070",
	"PADDLE_LOG_DIR=/workspace/log",
	"PADDLE_MONITOR_URL=http://monitor-api.monitoring.svc:8080",
	"PADDLE_REGISTER_BUDGET=5s",
	"PADDLE_TASK_NAME=resnet50-imagenet-run-1732950000007",
	"PADDLE_PROJECT=search_ranking",
	"PADDLE_OWNER=alice@example.com",
	"PADDLE_PRIORITY=high",
	"PADDLE_ENV=prod",
	"PADDLE_DURATION_EST=2h",
	"PADDLE_TASK_ID=3f2b9c1e-7a4d-4e8b-9c2f-1a2b3c4d5e6f",
	"PADDLE_LABEL_COST_CENTER=cc-1024",
	"PADDLE_LABEL_TEAM=vision",
	"PADDLE_LABEL_DATASET=imagenet-1k",
	"PADDLE_LABEL_MODEL=resnet50_vd",
}

// withProblems adds what warn mode drops: a bad priority, a value broken
// across lines, a sensitive value and a secret-named extra label.
var withProblems = append(append([]string{}, containerEnv...),
	"PADDLE_LABEL_NOTE=line1\nproject=admin",
	"PADDLE_LABEL_DB_PASSWORD=hunter2",
	"PADDLE_LABEL_CONTACT=110101199003074514",
	"PADDLE_PRIORITY=urgent",
)

func BenchmarkParse(b *testing.B) {
	opts := labels.Options{Hostname: "resnet50-imagenet-worker-0", Now: time.Unix(1732950000, 0)}
	for _, bc := range []struct {
		name     string
		env      []string
		problems bool
	}{
		{"clean", containerEnv, false},
		{"problems", withProblems, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, problems := labels.Parse(bc.env, opts)
				if (len(problems) > 0) != bc.problems {
					b.Fatalf("problems: %v", problems)
				}
			}
		})
	}
}

// BenchmarkWriteFile writes the labels file atomically (temporary file,
// fsync, rename, directory fsync): on tmpfs, as /var/run is in a container,
// and in the test's temporary directory (usually a disk).
func BenchmarkWriteFile(b *testing.B) {
	set, _ := labels.Parse(containerEnv, labels.Options{Hostname: "resnet50-imagenet-worker-0", Now: time.Unix(1732950000, 0)})
	set.SetGPUs(2, []string{"GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00", "GPU-a1b2c301-8f2d-4c1b-9a3e-1c2d3e4f5a01"})
	dirs := []struct{ name, dir string }{{"tmpdir", b.TempDir()}}
	if shm, err := os.MkdirTemp("/dev/shm", "labels-bench-"); err == nil {
		b.Cleanup(func() { os.RemoveAll(shm) })
		dirs = append([]struct{ name, dir string }{{"tmpfs", shm}}, dirs...)
	}
	for _, d := range dirs {
		b.Run(d.name, func(b *testing.B) {
			path := filepath.Join(d.dir, "paddle-task.labels")
			b.ReportAllocs()
			for b.Loop() {
				if err := labels.WriteFile(path, set); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
