package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Monitor behaviours, one per scenario.
const (
	monitorUp          = "up"          // 200 at once
	monitorRefused     = "refused"     // a closed port: connection refused
	monitorHang        = "hang"        // accepts, reads, never answers
	monitorUnavailable = "unavailable" // 503 for a while from the start of each run, then 200
)

// monitor is the local monitor API on 127.0.0.1. Runs are sequential, so it
// counts what each run sent between begin and end.
type monitor struct {
	web      *httptest.Server // up and unavailable
	hang     net.Listener     // accepts and never answers
	refused  string           // URL of a closed port
	unavail  time.Duration    // how long "unavailable" answers 503
	mu       sync.Mutex
	mode     string
	runStart time.Time
	requests int // requests to /v1/task/register during the run
	answered int // of which answered 2xx
	held     []net.Conn
}

func newMonitor(unavailableFor time.Duration) (*monitor, error) {
	m := &monitor{unavail: unavailableFor}
	m.web = httptest.NewServer(http.HandlerFunc(m.serve))

	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		m.web.Close()
		return nil, err
	}
	m.hang = hang
	go m.holdConnections()

	// A port that was just ours and is now closed refuses connections.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		m.close()
		return nil, err
	}
	m.refused = "http://" + closed.Addr().String()
	closed.Close()
	return m, nil
}

// url returns the monitor's base URL for a behaviour.
func (m *monitor) url(mode string) string {
	switch mode {
	case monitorRefused:
		return m.refused
	case monitorHang:
		return "http://" + m.hang.Addr().String()
	default:
		return m.web.URL
	}
}

// begin starts counting a run that talks to the monitor in mode.
func (m *monitor) begin(mode string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mode, m.runStart, m.requests, m.answered = mode, time.Now(), 0, 0
}

// end returns what the run sent and closes the connections it left hanging.
func (m *monitor) end() (requests, answered int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.held {
		c.Close()
	}
	m.held = nil
	return m.requests, m.answered
}

func (m *monitor) serve(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/task/register" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	m.mu.Lock()
	m.requests++
	down := m.mode == monitorUnavailable && time.Since(m.runStart) < m.unavail
	if !down {
		m.answered++
	}
	m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if down {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, `{"error":"unavailable"}`)
		return
	}
	fmt.Fprintln(w, `{"status":"registered"}`)
}

// holdConnections accepts and reads every connection and never answers, as a
// monitor behind a stuck proxy does.
func (m *monitor) holdConnections() {
	for {
		c, err := m.hang.Accept()
		if err != nil {
			return
		}
		m.mu.Lock()
		m.held = append(m.held, c)
		m.mu.Unlock()
		go io.Copy(io.Discard, c)
	}
}

func (m *monitor) close() {
	m.web.Close()
	if m.hang != nil {
		m.hang.Close()
	}
	m.end()
}
