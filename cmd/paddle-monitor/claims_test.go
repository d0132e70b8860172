package main

import (
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// gpuClaims returns the task_ids /metrics attributes uuid to, in the
// exposition's order (by label values).
func gpuClaims(t *testing.T, s *server, uuid string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(string(s.do(t, get("/metrics", "")).Body), "\n") {
		if strings.HasPrefix(l, "paddle_task_gpu_info{") && strings.Contains(l, `UUID="`+uuid+`"`) {
			_, rest, _ := strings.Cut(l, `task_id="`)
			id, _, _ := strings.Cut(rest, `"`)
			out = append(out, id)
		}
	}
	return out
}

func scopedClaimEnded(t *testing.T, s *server, id, token string) any {
	t.Helper()
	return taskOf(t, s, "/v1/tasks/"+id, token)["gpus"].([]any)[0].(map[string]any)["claim_ended"]
}

// TestClaimsAcrossScopes: a registration ends an older open claim on the
// same GPU only when the older task is within the registering token's
// scope or has not been seen (registration or heartbeat, by the server's
// clock) for --claim-grace; meanwhile /metrics serves both claims. The
// same holds for a late registration against a later live claim.
func TestClaimsAcrossScopes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		// The steps before the first sleep must fit in grace/2: 8 s leaves
		// room on a loaded machine (at 4 s PostgreSQL under load missed it).
		const grace = 8 * time.Second
		s := startServer(t, dsn, "--tokens", teamTokens(t), "--claim-grace", grace.String())
		const a, b = "s-secret", "ads-secret"
		start := time.Now().Unix() - 3600
		begun := time.Now()

		// B registers a GPU A's live task runs on (UUIDs are on /metrics):
		// A keeps its claim, both are served.
		expect(t, s.do(t, registerReq(teamReg("a-1", "search_rank", "ann@example.com", start, "GPU-X"), a)), 201, "")
		expect(t, s.do(t, registerReq(teamReg("b-1", "ads_ctr", "bob", start+60, "GPU-X"), b)), 201, "")
		if got := gpuClaims(t, s, "GPU-X"); strings.Join(got, ",") != "a-1,b-1" {
			t.Errorf("GPU-X is attributed to %v, want both a-1 and b-1", got)
		}
		if c := scopedClaimEnded(t, s, "a-1", a); c != nil {
			t.Errorf("B's registration ended A's live claim at %v", c)
		}
		// Within one scope the older claim ends, as before.
		expect(t, s.do(t, registerReq(teamReg("a-2", "search_rank", "ann@example.com", start, "GPU-Y"), a)), 201, "")
		expect(t, s.do(t, registerReq(teamReg("a-3", "search_rank", "ann@example.com", start+60, "GPU-Y"), a)), 201, "")
		if got := gpuClaims(t, s, "GPU-Y"); strings.Join(got, ",") != "a-3" {
			t.Errorf("GPU-Y is attributed to %v, want a-3 alone", got)
		}
		if c := scopedClaimEnded(t, s, "a-2", a); c != float64(start+60) {
			t.Errorf("a-2's claim ended %v, want %d", c, start+60)
		}
		// The other way round: B's late registration (an older start, from
		// a spool) against A's later live claim keeps its own claim too.
		expect(t, s.do(t, registerReq(teamReg("a-4", "search_rank", "ann@example.com", start, "GPU-Z"), a)), 201, "")
		expect(t, s.do(t, registerReq(teamReg("b-late", "ads_ctr", "bob", start-600, "GPU-Z"), b)), 201, "")
		if got := gpuClaims(t, s, "GPU-Z"); strings.Join(got, ",") != "a-4,b-late" {
			t.Errorf("GPU-Z is attributed to %v, want b-late and a-4", got)
		}
		if c := scopedClaimEnded(t, s, "b-late", b); c != nil {
			t.Errorf("the late registration's claim ended at %v against a live claim of another scope", c)
		}
		// Within B's own scope, a late registration's claim ends at B's
		// later task's start.
		expect(t, s.do(t, registerReq(teamReg("b-late2", "ads_ctr", "bob", start-600, "GPU-X"), b)), 201, "")
		if c := scopedClaimEnded(t, s, "b-late2", b); c != float64(start+60) {
			t.Errorf("b-late2's claim ended %v, want b-1's start %d", c, start+60)
		}
		// A task to go stale on a GPU B registers after the grace.
		expect(t, s.do(t, registerReq(teamReg("a-5", "search_rank", "ann@example.com", start, "GPU-W"), a)), 201, "")

		// A heartbeat keeps a-1 live past the grace of its registration.
		time.Sleep(time.Until(begun.Add(grace / 2)))
		expect(t, s.do(t, post("/v1/task/heartbeat", `{"task_id":"a-1"}`, a)), 200, "")
		time.Sleep(time.Until(begun.Add(grace + time.Second)))
		if got := gpuClaims(t, s, "GPU-X"); strings.Join(got, ",") != "a-1,b-1" {
			t.Errorf("after a heartbeat within the grace GPU-X is attributed to %v, want a-1 and b-1", got)
		}
		// Not seen for the grace: the older claim leaves /metrics, the
		// newer stays; the late registration's claim, not seen either,
		// leaves too.
		time.Sleep(time.Until(begun.Add(grace/2 + grace + 2*time.Second)))
		if got := gpuClaims(t, s, "GPU-X"); strings.Join(got, ",") != "b-1" {
			t.Errorf("after the grace GPU-X is attributed to %v, want b-1 alone", got)
		}
		if got := gpuClaims(t, s, "GPU-Z"); strings.Join(got, ",") != "a-4" {
			t.Errorf("after the grace GPU-Z is attributed to %v, want a-4 alone", got)
		}
		// A registration from another scope now ends the stale claim.
		expect(t, s.do(t, registerReq(teamReg("b-2", "ads_ctr", "bob", start+120, "GPU-W"), b)), 201, "")
		if c := scopedClaimEnded(t, s, "a-5", a); c != float64(start+120) {
			t.Errorf("a-5, not seen for the grace, kept its claim against b-2: claim_ended %v", c)
		}
		if got := gpuClaims(t, s, "GPU-W"); strings.Join(got, ",") != "b-2" {
			t.Errorf("GPU-W is attributed to %v, want b-2", got)
		}
		// The admin's scope is every task: its registration ends any
		// older claim.
		expect(t, s.do(t, registerReq(teamReg("adm-1", "nlp_x", "cho", start+180, "GPU-X"), "a-secret")), 201, "")
		if got := gpuClaims(t, s, "GPU-X"); strings.Join(got, ",") != "adm-1" {
			t.Errorf("after the admin's registration GPU-X is attributed to %v, want adm-1", got)
		}
	})
}

// TestSameIDSameGPUOnMetrics: another team registers a team's task id and
// its GPU, with an older start and a share of 0.01. /metrics still answers
// (every per-task series carries project and owner, so the two tasks'
// series differ) and each claim keeps its own share: the other team cannot
// set what the recording rules count for this team's task.
func TestSameIDSameGPUOnMetrics(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, "--tokens", teamTokens(t))
		start := time.Now().Unix() - 600
		expect(t, s.do(t, registerReq(teamReg("pod", "search_rank", "ann@example.com", start, "GPU-S"), "s-secret")), 201, "")
		squat := strings.Replace(teamReg("pod", "ads_ctr", "bob", start-60, "GPU-S"), `"share":1`, `"share":0.01`, 1)
		expect(t, s.do(t, registerReq(squat, "ads-secret")), 201, "")
		a := s.do(t, get("/metrics", ""))
		if a.Status != 200 {
			t.Fatalf("/metrics: %d %s", a.Status, a.Body)
		}
		body := string(a.Body)
		for _, want := range []string{
			`paddle_task_gpu_share{GPU_I_ID="",UUID="GPU-S",owner="ann@example.com",project="search_rank",task_id="pod"} 1`,
			`paddle_task_gpu_share{GPU_I_ID="",UUID="GPU-S",owner="bob",project="ads_ctr",task_id="pod"} 0.01`,
			`paddle_task_start_time_seconds{owner="ann@example.com",project="search_rank",task_id="pod"} `,
			`paddle_task_start_time_seconds{owner="bob",project="ads_ctr",task_id="pod"} `,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		if n := strings.Count(body, `paddle_task_gpu_info{`); n != 2 {
			t.Errorf("%d paddle_task_gpu_info series, want both claims", n)
		}
		promtoolCheck(t, body)
	})
}
