package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

var burstScenario = scenario{
	name:   "burst",
	title:  "Burst of concurrent registrations",
	header: []string{"registrations", "throughput (reg/s, median round)", "p50 latency", "p99 latency", "all 201 and stored", "RSS at rest", "peak RSS (burst)"},
	run:    runBurst,
}

func runBurst(e *env) ([][]string, error) {
	srv, err := e.startEmpty()
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	time.Sleep(time.Second) // let the runtime settle before reading RSS at rest
	rest, err := procStatus(srv.Cmd.Process.Pid, "VmRSS")
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		MaxIdleConns: e.opts.n, MaxIdleConnsPerHost: e.opts.n, MaxConnsPerHost: 0}}
	var lat []time.Duration
	var rates []float64
	allOK := true
	for round := range e.opts.rounds {
		l, wall, ok := burstRound(client, srv.URL, fmt.Sprintf("r%d", round), e.opts.n)
		lat = append(lat, l...)
		rates = append(rates, float64(e.opts.n)/wall.Seconds())
		allOK = allOK && ok
	}
	peak, err := procStatus(srv.Cmd.Process.Pid, "VmHWM")
	if err != nil {
		return nil, err
	}
	stored, err := countTasks(client, srv.URL)
	if err != nil {
		return nil, err
	}
	want := e.opts.n * e.opts.rounds
	verdict := fmt.Sprintf("yes (%d of %d)", stored, want)
	if !allOK || stored != want {
		verdict = fmt.Sprintf("**NO** (%d of %d stored)", stored, want)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	sort.Float64s(rates)
	e.result("burst.p99", lat[len(lat)*99/100].Seconds())
	if !allOK || stored != want {
		e.result("burst.lost", 1)
	}
	return [][]string{{
		fmt.Sprintf("%d × %d rounds", e.opts.n, e.opts.rounds),
		fmt.Sprintf("%.0f", rates[len(rates)/2]),
		ms(lat[len(lat)/2]),
		ms(lat[len(lat)*99/100]),
		verdict,
		mib(rest),
		mib(peak),
	}}, nil
}

// burstRound releases n registrations at once and returns each one's
// latency, the round's wall time, and whether every one was answered 201.
func burstRound(client *http.Client, url, prefix string, n int) ([]time.Duration, time.Duration, bool) {
	lat := make([]time.Duration, n)
	ok := make([]bool, n)
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			id := fmt.Sprintf("%s-%05d", prefix, i)
			body := fmt.Sprintf(`{"task_name":"bench","project":"bench","owner":"ann@example.com","gpu_count":1,"schema_version":1,`+
				`"task_id":%q,"start_time":%d,"hostname":"worker-%d","labels":{},`+
				`"gpus":[{"index":0,"uuid":"GPU-%s","name":"NVIDIA A100-SXM4-80GB","memory_total_bytes":85899345920}]}`,
				id, 1794700000+i, i, id)
			req, _ := http.NewRequest("POST", url+"/v1/task/register", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", id)
			ready.Done()
			<-gate
			t0 := time.Now()
			resp, err := client.Do(req)
			lat[i] = time.Since(t0)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				ok[i] = resp.StatusCode == http.StatusCreated
			}
		}()
	}
	ready.Wait()
	start := time.Now()
	close(gate)
	done.Wait()
	wall := time.Since(start)
	all := true
	for _, o := range ok {
		all = all && o
	}
	return lat, wall, all
}

func countTasks(client *http.Client, url string) (int, error) {
	n := 0
	path := "/v1/tasks?limit=1000"
	for {
		resp, err := client.Get(url + path)
		if err != nil {
			return 0, err
		}
		var page struct {
			Tasks []json.RawMessage `json:"tasks"`
			Next  *string           `json:"next_cursor"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		n += len(page.Tasks)
		if page.Next == nil {
			return n, nil
		}
		path = "/v1/tasks?limit=1000&cursor=" + *page.Next
	}
}

// procStatus reads a kB field of /proc/PID/status, in bytes.
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

func version(bin string) string {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// percentiles returns the p50 and p99 of lat (sorted in place).
func percentiles(lat []time.Duration) (p50, p99 time.Duration) {
	if len(lat) == 0 {
		return 0, 0
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], lat[len(lat)*99/100]
}
