package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var (
	writeClients  = flag.Int("write-clients", 50, "writes: keep-alive clients")
	writeDuration = flag.Duration("write-duration", 10*time.Second, "writes: how long each client posts, per measurement")
	floorServe    = flag.String("floor-serve", "", "internal: serve the floor on this address (the benchmark starts itself so)")
)

var writesScenario = scenario{
	name:  "writes",
	title: "Sustained writes beside the floor",
	header: []string{"floor: registrations/s", "registrations/s (empty store)", "vs floor", "p50 / p99",
		"floor: heartbeats/s", "heartbeats/s", "vs floor", "registrations/s, 1,000,000 stored (100,000 open)", "vs empty", "errors"},
	run: runWrites,
}

// serveFloor is the floor: net/http decoding the request body into a map
// and answering 201, storing nothing.
func serveFloor(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	return http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&m); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "{}\n")
	}))
}

// startFloor runs the floor as a process of its own (this program, with
// -floor-serve), as the monitor is: the client's and the server's CPU are
// spent the same way in both measurements.
func startFloor() (url string, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(self, "-floor-serve", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	var addr [64]byte
	n, err := out.Read(addr[:])
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return "", nil, fmt.Errorf("the floor server: %w", err)
	}
	return "http://" + strings.TrimSpace(string(addr[:n])), func() { cmd.Process.Kill(); cmd.Wait() }, nil
}

// writeLoad is what one measurement of sustained writes returns.
type writeLoad struct {
	rate     float64
	p50, p99 time.Duration
	errors   int64
	ids      [][]string // per client, the task_ids it registered
}

// regBody is a registration of two GPUs, on the GPUs of one of 200 nodes
// (so claims of older tasks end as on a real cluster).
func regBody(id string, n int) string {
	node := n % 200
	return fmt.Sprintf(`{"schema_version":1,"task_id":%q,"task_name":"bench","project":"project-%02d","owner":"user%03d@example.com",`+
		`"priority":"normal","env":"prod","hostname":"node-%03d","start_time":%d,"gpu_count":2,"labels":{"team":"search"},`+
		`"gpus":[{"index":0,"uuid":"GPU-node-%03d-%d","name":"NVIDIA A100-SXM4-80GB","memory_total_bytes":85899345920},`+
		`{"index":1,"uuid":"GPU-node-%03d-%d","name":"NVIDIA A100-SXM4-80GB","memory_total_bytes":85899345920}]}`,
		id, n%50, n%500, node, time.Now().Unix(), node, (n/200)%4*2, node, (n/200)%4*2+1)
}

// sustain runs clients keep-alive clients against url for d, each posting
// what body returns, one request after the other, and counts the answers
// with status want.
func sustain(url string, clients int, d time.Duration, want int, body func(client, n int) (path, body, id string)) writeLoad {
	tr := &http.Transport{MaxIdleConns: clients, MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var ok, bad atomic.Int64
	lat := make([][]time.Duration, clients)
	ids := make([][]string, clients)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(deadline); n++ {
				path, b, id := body(c, n)
				t0 := time.Now()
				resp, err := hc.Post(url+path, "application/json", strings.NewReader(b))
				if err != nil {
					bad.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[c] = append(lat[c], time.Since(t0))
				if resp.StatusCode != want {
					bad.Add(1)
					continue
				}
				ok.Add(1)
				ids[c] = append(ids[c], id)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	p50, p99 := percentiles(all)
	return writeLoad{rate: float64(ok.Load()) / wall.Seconds(), p50: p50, p99: p99, errors: bad.Load(), ids: ids}
}

// registrations posts registrations of fresh task_ids; the load's ids are
// those answered 201.
// againstFloor is a table's first four cells: the floor's rate, this
// load's, this one as a share of the floor's, and its p50 / p99 latency.
func (l writeLoad) againstFloor(floor writeLoad) []string {
	return []string{
		fmt.Sprintf("%.0f", floor.rate),
		fmt.Sprintf("%.0f", l.rate),
		fmt.Sprintf("%.0f %%", l.rate/floor.rate*100),
		ms(l.p50) + " / " + ms(l.p99),
	}
}

func registrations(url, prefix string) writeLoad {
	return sustain(url, *writeClients, *writeDuration, http.StatusCreated, func(c, n int) (string, string, string) {
		id := fmt.Sprintf("%s-%02d-%07d", prefix, c, n)
		return "/v1/task/register", regBody(id, c*100003+n), id
	})
}

// heartbeats sends each client's tasks' heartbeats round robin.
func heartbeats(url string, ids [][]string, want int) writeLoad {
	return sustain(url, *writeClients, *writeDuration, want, func(c, n int) (string, string, string) {
		id := fmt.Sprintf("floor-%d-%d", c, n)
		if len(ids[c]) > 0 {
			id = ids[c][n%len(ids[c])]
		}
		return "/v1/task/heartbeat", fmt.Sprintf(`{"task_id":%q,"time":%d}`, id, time.Now().Unix()), id
	})
}

func runWrites(e *env) ([][]string, error) {
	floorURL, stopFloor, err := startFloor()
	if err != nil {
		return nil, err
	}
	floorReg := registrations(floorURL, "floor")
	floorHB := heartbeats(floorURL, floorReg.ids, http.StatusCreated)
	stopFloor()

	srv, err := e.startEmpty()
	if err != nil {
		return nil, err
	}
	reg := registrations(srv.URL, "empty")
	hb := heartbeats(srv.URL, reg.ids, http.StatusOK)
	srv.Stop()

	full := "not run (-report-tasks 0)"
	vsEmpty := ""
	fullErrors := int64(0)
	if *reportTasks > 0 {
		bulk, err := e.bulkStore()
		if err != nil {
			return nil, err
		}
		srv, err := e.startMonitor(bulk)
		if err != nil {
			return nil, err
		}
		l := registrations(srv.URL, "full")
		srv.Stop()
		full = fmt.Sprintf("%.0f (p50 %s, p99 %s)", l.rate, ms(l.p50), ms(l.p99))
		vsEmpty = fmt.Sprintf("%+.0f %%", (l.rate/reg.rate-1)*100)
		fullErrors = l.errors
		e.result("writes.full", l.rate)
	}
	e.result("writes.floor.reg", floorReg.rate)
	e.result("writes.reg", reg.rate)
	e.result("writes.floor.hb", floorHB.rate)
	e.result("writes.hb", hb.rate)
	return [][]string{append(reg.againstFloor(floorReg),
		fmt.Sprintf("%.0f", floorHB.rate),
		fmt.Sprintf("%.0f", hb.rate),
		fmt.Sprintf("%.0f %%", hb.rate/floorHB.rate*100),
		full,
		vsEmpty,
		fmt.Sprint(reg.errors+hb.errors+fullErrors),
	)}, nil
}
