package main

// TestDocsBooksExample: docs/cost.md's worked example of one set of books
// (MONITOR.md 17) is what the built monitor prints, on both stores: the
// fleet below is stored, closed, and given a late registration, and every
// block of the example's section is compared with the command's output
// (projected on the columns the block shows), byte for byte, so the doc
// cannot drift from the monitor.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// booksHeading is the example's section in docs/cost.md.
const booksHeading = "### A worked example of one set of books"

// booksUser is a node report's user: a pod (pod UID pod, namespace ns) at
// presence p, or with pod "" the host user UID 1000.
func booksUser(pod, ns string, p float64) string {
	if pod == "" {
		return fmt.Sprintf(`{"runtime":"","cgroup":"/user.slice/user-1000.slice","uid":1000,"allocated_share":0,"seen_share":%g,"busy_share":1}`, p)
	}
	return fmt.Sprintf(`{"runtime":"containerd","container_id":"c-%s","pod_uid":%q,"namespace":%q,"pod":%q,"container":"main",
		"allocated_share":%g,"seen_share":%g,"busy_share":1}`, pod, pod, ns, pod, p, p)
}

// booksReport is gpu-node-1's report of the hour ending at end: GPU-1
// shared by pod-ta and pod-tb, GPU-2 occupied at occ2 by users2.
func booksReport(end int64, final bool, occ2 float64, users2 string) string {
	inst := func(uuid string, occ float64, users string) string {
		return fmt.Sprintf(`{"uuid":%q,"gpu_instance_id":null,"name":"NVIDIA H200","samples":60,"busy_share":1,"busy_basis":"utilization",
			"occupied_share":%g,"energy_joules":null,"users":[%s]}`, uuid, occ, users)
	}
	return fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-1","time":%d,"interval_seconds":3600,"samples":60,"final":%t,
		"gpus":[],"instances":[%s,%s]}`, end, final,
		inst("GPU-1", 1, booksUser("pod-ta", "team-a", 0.5)+","+booksUser("pod-tb", "team-b", 0.5)), inst("GPU-2", occ2, users2))
}

// booksTask registers and completes a task of project on gpu-node-1 (pod
// UID pod; "" for other-node, which sends no reports) holding share of
// uuid over [start, end).
func booksTask(t *testing.T, s *server, id, project, pod, uuid string, share float64, start, end int64) {
	t.Helper()
	where := `"hostname":"other-node"`
	if pod != "" {
		where = fmt.Sprintf(`"hostname":%q,"k8s_pod_uid":%q,"k8s_node":"gpu-node-1"`, id, pod)
	}
	reg := fmt.Sprintf(`{"schema_version":1,"task_id":%q,"task_name":"train","project":%q,"owner":"ann@example.com",
		"start_time":%d,%s,"labels":{},"gpu_count":1,"gpus":[%s]}`, id, project, start, where, wholeGPU(uuid, share))
	expect(t, s.do(t, registerReq(reg, "a-secret")), 201, "")
	done := fmt.Sprintf(`{"schema_version":1,"task_id":%q,"start_time":%d,"end_time":%d,"duration_seconds":%d,"exit_code":0,"gpu_count":1}`,
		id, start, end, end-start)
	expect(t, s.do(t, post("/v1/task/complete", done, "a-secret")), 200, "")
}

// booksSection is the fenced blocks of docs/cost.md's example section.
func booksSection(t *testing.T) []codeBlock {
	t.Helper()
	b, err := os.ReadFile("../../docs/cost.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	first, last := 0, len(lines)
	for i, l := range lines {
		if l == booksHeading {
			first = i + 1
		} else if first > 0 && i >= first && strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "####") {
			last = i + 1
			break
		}
	}
	if first == 0 {
		t.Fatalf("docs/cost.md has no %q", booksHeading)
	}
	var out []codeBlock
	for _, c := range codeBlocks(t, "../../docs/cost.md") {
		if c.line > first && c.line < last {
			out = append(out, c)
		}
	}
	return out
}

func TestDocsBooksExample(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		prices := filepath.Join(dir, "prices.json")
		writeFile(t, prices, `{"currency":"CNY","models":{"NVIDIA H200":10}}`)
		ns := filepath.Join(dir, "namespaces.json")
		writeFile(t, ns, `{"team-c":"p_c"}`)
		s := startServer(t, dsn, "--tokens", nodeTokens(t), "--prices", prices, "--namespace-projects", ns)
		h := time.Date(2025, 9, 10, 0, 0, 0, 0, time.UTC).Unix()
		booksTask(t, s, "ta", "p_a", "pod-ta", "GPU-1", 0.5, h, h+3*3600)
		booksTask(t, s, "tb", "p_b", "pod-tb", "GPU-1", 0.5, h, h+3*3600)
		for _, r := range []string{
			booksReport(h+3600, false, 1, booksUser("pod-c", "team-c", 1)),
			booksReport(h+3*3600, true, 0.5, booksUser("", "", 1)),
		} {
			expect(t, s.do(t, post("/v1/nodes/report", r, "n-secret")), 201, "")
		}
		in := []string{"--db", dsn, "--prices", prices, "--namespace-projects", ns}
		run := func(args ...string) string {
			t.Helper()
			r := runMonitor(t, append(args, in...)...)
			if r.code != 0 {
				t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
			}
			return r.stdout
		}
		cols := func(s string, names ...string) string { return csvColumns(t, s, names) }
		got := []string{
			run("ledger", "--month", "2025-09", "--by", "state", "--format", "csv"),
			cols(run("report", "--month", "2025-09", "--format", "csv"),
				"project", "gpu_hours", "cost", "declared_gpu_hours", "observed_gpu_hours", "undeclared_gpu_hours", "billing_basis"),
			cols(run("report", "--month", "2025-09", "--by", "task", "--format", "csv"),
				"task_id", "project", "gpus", "gpu_hours", "cost", "billing_basis"),
		}
		run("close", "--month", "2025-09", "--as", "finance")
		// After the close the month is its statement: the same figures.
		closed := cols(run("report", "--month", "2025-09", "--format", "csv"),
			"project", "gpu_hours", "cost", "declared_gpu_hours", "observed_gpu_hours", "undeclared_gpu_hours", "billing_basis")
		if closed != got[1] {
			t.Errorf("the statement differs from the live report:\n%s\nwas\n%s", closed, got[1])
		}
		// A late registration of September: tl (p_a) held a GPU of
		// other-node (no reports) for an hour, registered after the close.
		booksTask(t, s, "tl", "p_a", "", "GPU-x", 1, h+4*3600, h+5*3600)
		got = append(got,
			cols(run("report", "--month", "2025-10", "--format", "csv"), "project", "gpu_hours", "cost", "adjustment_of", "adjustment_reason"),
			run("report", "--month", "2025-10"))
		blocks := booksSection(t)
		if len(blocks) != len(got) {
			for i, g := range got {
				t.Logf("output %d:\n%s", i, g)
			}
			t.Fatalf("docs/cost.md's %q has %d blocks, the test checks %d", booksHeading, len(blocks), len(got))
		}
		for i, b := range blocks {
			if b.text != got[i] {
				t.Errorf("docs/cost.md:%d shows\n%s\nthe monitor prints\n%s", b.line, b.text, got[i])
			}
		}
	})
}
