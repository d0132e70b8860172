package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// rawHead sends a write's request line and headers on a new connection,
// and no body.
func rawHead(t *testing.T, s *server, path string, headers ...string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: monitor\r\nContent-Type: application/json\r\n%s\r\n", path,
		strings.Join(append(headers, ""), "\r\n"))
	return conn
}

// readAnswer reads one answer from conn within 5 s.
func readAnswer(t *testing.T, conn net.Conn) (*http.Response, []byte, *bufio.Reader) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b, br
}

// closed checks that the server closed conn after its answer.
func closed(t *testing.T, br *bufio.Reader) {
	t.Helper()
	if _, err := br.ReadByte(); err == nil {
		t.Error("the connection stays open after the answer")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("the connection stays open after the answer (read timed out)")
	}
}

// TestAdmission: a write without a valid token is 401 before its body is
// read, and the connection is closed; a Content-Length over 1 MiB is 413
// before the body is read; a chunked body is cut at 1 MiB; with
// --max-in-flight writes in flight a write waits 2 s, then gets 503 with
// Retry-After, while /healthz and /metrics still answer.
func TestAdmission(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, "--tokens", teamTokens(t), "--max-in-flight", "1")
		for _, tc := range []struct {
			name, path string
			headers    []string
			status     int
			errPart    string
		}{
			{"no token", "/v1/task/register", []string{"Content-Length: 1048576"}, 401, "token is required"},
			{"wrong token", "/v1/task/complete", []string{"Content-Length: 1000", "Authorization: Bearer nope"}, 401, "not valid"},
			{"heartbeat, no token", "/v1/task/heartbeat", []string{"Content-Length: 500000"}, 401, "token is required"},
			{"over 1 MiB by Content-Length", "/v1/task/register", []string{"Content-Length: 2097152", "Authorization: Bearer s-secret"}, 413, "over 1 MiB"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, body, br := readAnswer(t, rawHead(t, s, tc.path, tc.headers...))
				if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.errPart) {
					t.Fatalf("%d %s, want %d saying %q", resp.StatusCode, body, tc.status, tc.errPart)
				}
				if !resp.Close {
					t.Errorf("the answer does not close the connection (Connection: %q)", resp.Header.Get("Connection"))
				}
				closed(t, br)
			})
		}
		// A chunked body is cut at 1 MiB while read.
		req, _ := http.NewRequest("POST", s.URL+"/v1/task/register",
			io.MultiReader(strings.NewReader(`{"pad":"`), strings.NewReader(strings.Repeat("a", 3<<19)), strings.NewReader(`"}`)))
		req.Header.Set("Authorization", "Bearer s-secret")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 413 || req.ContentLength != 0 {
			t.Errorf("a chunked body of 1.5 MiB: %d (Content-Length %d), want 413", resp.StatusCode, req.ContentLength)
		}

		// One write in flight (its body still coming) holds the only slot.
		body := teamReg("slow", "search_rank", "ann@example.com", time.Now().Unix(), "GPU-slow")
		slow := rawHead(t, s, "/v1/task/register", "Content-Length: "+strconv.Itoa(len(body)), "Authorization: Bearer s-secret")
		io.WriteString(slow, body[:10])
		time.Sleep(300 * time.Millisecond) // the server takes the slot
		start := time.Now()
		var busy answer
		done := make(chan struct{})
		go func() {
			defer close(done)
			busy, _ = send(s.URL, registerReq(teamReg("second", "search_rank", "ann@example.com", time.Now().Unix(), "GPU-2"), "s-secret"))
		}()
		// Meanwhile health and metrics answer at once.
		for _, path := range []string{"/healthz", "/metrics"} {
			t0 := time.Now()
			if a := s.do(t, get(path, "")); a.Status != 200 || time.Since(t0) > time.Second {
				t.Errorf("%s answered %d after %v while the writes were full", path, a.Status, time.Since(t0))
			}
		}
		<-done
		waited := time.Since(start)
		if busy.Status != 503 || busy.Header.Get("Retry-After") != "1" || waited < 1900*time.Millisecond || waited > 4*time.Second {
			t.Errorf("a write with no slot: %d Retry-After %q after %v, want 503 with Retry-After 1 after 2 s: %s",
				busy.Status, busy.Header.Get("Retry-After"), waited, busy.Body)
		}
		checkSpec(t, s.URL, registerReq(teamReg("second", "search_rank", "ann@example.com", 1, "GPU-2"), "s-secret"), busy)
		// The write in flight completes; then the slot is free again.
		io.WriteString(slow, body[10:])
		if resp, b, _ := readAnswer(t, slow); resp.StatusCode != 201 {
			t.Fatalf("the write in flight: %d %s", resp.StatusCode, b)
		}
		expect(t, s.do(t, registerReq(teamReg("second", "search_rank", "ann@example.com", time.Now().Unix(), "GPU-2"), "s-secret")), 201, "")
	})
}

// peakRSS reads the process's peak and current resident set (kB) from
// /proc.
func peakRSS(t *testing.T, pid int) (hwm, rss int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && (f[0] == "VmHWM:" || f[0] == "VmRSS:") {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			if f[0] == "VmHWM:" {
				hwm = n
			} else {
				rss = n
			}
		}
	}
	return hwm, rss
}

// TestUnauthenticatedFlood: 1,000 clients without a token each sending a
// 1 MiB registration at once leave the monitor's peak RSS under 200 MB,
// and /healthz answers throughout. (The HTTP layer is the same on both
// stores; SQLite here.)
func TestUnauthenticatedFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 connections of 1 MiB")
	}
	s := startServer(t, storetest.SQLiteDSN(t), "--tokens", teamTokens(t))
	const senders = 1000
	payload := []byte(`{"pad":"` + strings.Repeat("a", 1<<20-10) + `"}`)
	var wg sync.WaitGroup
	var answered401, failedHealth atomic.Int64
	stop := make(chan struct{})
	healthDone := make(chan struct{})
	go func() {
		defer close(healthDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			c := &http.Client{Timeout: 5 * time.Second}
			resp, err := c.Get(s.URL + "/healthz")
			if err != nil || resp.StatusCode != 200 {
				failedHealth.Add(1)
			}
			if resp != nil {
				resp.Body.Close()
			}
		}
	}()
	gate := make(chan struct{})
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			conn, err := net.DialTimeout("tcp", strings.TrimPrefix(s.URL, "http://"), 10*time.Second)
			if err != nil {
				return
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			go func() {
				fmt.Fprintf(conn, "POST /v1/task/register HTTP/1.1\r\nHost: monitor\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(payload))
				conn.Write(payload) // cut short when the server closes
			}()
			if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
				if resp.StatusCode == 401 {
					answered401.Add(1)
				}
				resp.Body.Close()
			}
		}()
	}
	close(gate)
	wg.Wait()
	close(stop)
	<-healthDone
	hwm, rss := peakRSS(t, s.Cmd.Process.Pid)
	t.Logf("%d of %d senders read their 401; monitor peak RSS %d kB, now %d kB", answered401.Load(), senders, hwm, rss)
	if hwm >= 200*1024 {
		t.Errorf("peak RSS %d kB, want under 200 MB", hwm)
	}
	if n := failedHealth.Load(); n > 0 {
		t.Errorf("/healthz failed %d times during the flood", n)
	}
	if answered401.Load() == 0 {
		t.Error("no sender got its 401")
	}
	expect(t, s.do(t, get("/healthz", "")), 200, "")
}
