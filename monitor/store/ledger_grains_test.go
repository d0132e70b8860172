package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestLedgerDataUserKeys: the ledger reads each user's identity back from
// its user_key, and from its columns where the key does not split back
// into them; the same for one hour's rows, two hours' sums and one day's
// facts.
func TestLedgerDataUserKeys(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		if err := s.CreatePartitions(ctx, time.Unix(hourT0-3600, 0), time.Unix(hourT0+7200, 0), time.Unix(hourT0+7200, 0)); err != nil {
			t.Fatal(err)
		}
		a := store.UserIdentity{Runtime: "containerd", ContainerID: "c-a", PodUID: "pod-a", Namespace: "team-a", Pod: "job", Container: "paddle",
			UID: ptrOf(int64(1000))}
		day := hourT0 - hourT0%86400
		var qs []string
		// a's key is its columns' (as the write path stores it); b's,
		// "odd-key", splits back into no identity.
		for _, u := range []struct {
			key, pod, ns, uid, decl, task string
			equal                         [2]int
		}{
			{a.Key(), "pod-a", "team-a", "1000", "0", "", [2]int{1800, 900}},
			{"odd-key", "pod-b", "team-b", "NULL", "1", "t-b", [2]int{600, 600}},
		} {
			cols := fmt.Sprintf(`'n1', 'GPU-1', -1, '%s', 'NVIDIA H200', 'containerd', 'c-%s', '%s', '%s', 'job', 'paddle', %s, %s, '%s'`,
				u.key, u.pod[4:], u.pod, u.ns, u.uid, u.decl, u.task)
			for h, e := range u.equal {
				qs = append(qs, fmt.Sprintf(`INSERT INTO node_user_hours (hour, node, uuid, gpu_instance_id, user_key, model, runtime, container_id,
					pod_uid, namespace, pod, container, uid, declared, declared_task_id, last_time, equal_s)
					VALUES (%d, %s, %d, %d)`, hourT0+int64(h)*3600, cols, hourT0+int64(h)*3600+3000, e))
			}
			qs = append(qs, fmt.Sprintf(`INSERT INTO node_user_days (day, node, uuid, gpu_instance_id, user_key, model, runtime, container_id,
				pod_uid, namespace, pod, container, uid, declared, declared_task_id, first_time, last_time, equal_s)
				VALUES (%d, %s, %d, %d, %d)`, day, cols, hourT0+3000, hourT0+6600, u.equal[0]+u.equal[1]))
		}
		for _, q := range qs {
			if _, err := store.DBForTest(s).Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		for _, c := range []struct {
			name     string
			from, to int64
			equal    [2]float64
		}{
			{"one hour's rows", hourT0, hourT0 + 3600, [2]float64{1800, 600}},
			{"two hours' sums", hourT0, hourT0 + 7200, [2]float64{2700, 1200}},
			{"one day's facts", day, day + 86400, [2]float64{2700, 1200}},
		} {
			d, err := s.LedgerData(ctx, c.from, c.to, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Users) != 2 {
				t.Fatalf("%s: %d users, want 2: %+v", c.name, len(d.Users), d.Users)
			}
			byPod := map[string]store.UserHour{}
			for _, u := range d.Users {
				byPod[u.User.PodUID] = u
			}
			ua, ub := byPod["pod-a"], byPod["pod-b"]
			if ua.User.Key() != a.Key() || ua.UserKey() != a.Key() || ua.Equal != c.equal[0] {
				t.Errorf("%s: a is %q (%v s), want %q (%v s)", c.name, ua.User.Key(), ua.Equal, a.Key(), c.equal[0])
			}
			b := ub.User
			if b.Namespace != "team-b" || b.ContainerID != "c-b" || b.UID != nil || !b.Declared || b.DeclaredTaskID != "t-b" ||
				ub.UserKey() != b.Key() || ub.Equal != c.equal[1] {
				t.Errorf("%s: b is %q (%v s), want its columns' identity (%v s)", c.name, strings.ReplaceAll(b.Key(), "\x1f", "|"), ub.Equal, c.equal[1])
			}
		}
	})
}
