package main

// Black-box tests of the built paddle-monitor. TestMain builds it as `make
// build` does (static, cgo-free) and the entrypoint beside it; every test
// starts real serve processes on 127.0.0.1 and talks HTTP to them. Every
// request and every answer of the suite is checked against
// docs/openapi.yaml (kin-openapi), so the document and the server cannot
// drift apart — those of the bursts after the burst; the only exceptions
// are the paths and methods the document does not have (404, 405) and a
// request written by hand on a raw connection (SIGTERM in flight).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/monitorproc"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

var bin struct {
	monitor, entrypoint string
}

var spec struct {
	doc    *openapi3.T
	router routers.Router
}

func TestMain(m *testing.M) {
	code := 1
	dir, err := os.MkdirTemp("", "paddle-monitor-test-")
	if err == nil {
		err = setup(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "setting up:", err)
	} else {
		code = m.Run()
	}
	storetest.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

func setup(dir string) error {
	bin.monitor = filepath.Join(dir, "paddle-monitor")
	bin.entrypoint = filepath.Join(dir, "paddle-entrypoint")
	for _, b := range []struct{ out, pkg string }{{bin.monitor, "."}, {bin.entrypoint, "../.."}} {
		c := exec.Command("go", "build", "-trimpath", "-o", b.out, b.pkg)
		c.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("../../docs/openapi.yaml")
	if err != nil {
		return fmt.Errorf("docs/openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return fmt.Errorf("docs/openapi.yaml is not a valid OpenAPI document: %w", err)
	}
	// The document's server is a placeholder (PADDLE_MONITOR_URL); the
	// tests' servers listen on random ports of 127.0.0.1.
	doc.Servers = openapi3.Servers{{URL: "/"}}
	spec.doc = doc
	spec.router, err = gorillamux.NewRouter(doc)
	return err
}

// server is one running `paddle-monitor serve`.
type server struct {
	*monitorproc.Proc
}

// startServer runs serve on db (a SQLite path or a postgres URL) with extra
// arguments, on a random port, and waits until it listens.
func startServer(t *testing.T, db string, args ...string) *server {
	t.Helper()
	return startServerEnv(t, nil, db, args...)
}

// startServerEnv is startServer with environment variables.
func startServerEnv(t *testing.T, env []string, db string, args ...string) *server {
	t.Helper()
	p, err := monitorproc.Start(bin.monitor,
		append([]string{"--listen", "127.0.0.1:0", "--db", db, "--log-format", "json"}, args...),
		monitorproc.Options{Env: append([]string{"PATH=/usr/bin:/bin"}, env...), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return &server{p}
}

// wait waits for the server to exit and returns its status.
func (s *server) wait(t *testing.T) int {
	t.Helper()
	code, ok := s.Wait(30 * time.Second)
	if !ok {
		t.Fatalf("the server did not exit within 30s:\n%s", s.Log())
	}
	return code
}

// waitLog polls the server's log until it holds want.
func (s *server) waitLog(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(s.Log(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %q:\n%s", want, s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// execCommand is exec.Command killed after a minute at most.
func execCommand(name string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	c := exec.CommandContext(ctx, name, args...)
	c.Cancel = func() error { cancel(); return c.Process.Kill() }
	return c
}

// answer is one HTTP answer.
type answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the answer's body.
func (a answer) JSON(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.Body, &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v\n%s", a.Status, err, a.Body)
	}
	return m
}

// Error is the "error" of a JSON error answer.
func (a answer) Error(t *testing.T) string {
	t.Helper()
	e, _ := a.JSON(t)["error"].(string)
	return e
}

var client = &http.Client{Timeout: 30 * time.Second}

// request is one call of the API.
type request struct {
	Method, Path string
	Body         string
	Token        string // sent as Bearer
	Header       map[string]string
	// NoSpecCheck leaves the exchange unchecked against the OpenAPI
	// document (raw protocol tests: oversized bodies, unknown paths).
	NoSpecCheck bool
}

// do sends r to s and checks the exchange against docs/openapi.yaml: the
// answer must be documented and match its schema; a request the document
// says is invalid must not have been accepted.
func (s *server) do(t *testing.T, r request) answer {
	t.Helper()
	a, err := send(s.URL, r)
	if err != nil {
		t.Fatalf("%s %s: %v", r.Method, r.Path, err)
	}
	if !r.NoSpecCheck {
		checkSpec(t, s.URL, r, a)
	}
	return a
}

func newHTTPRequest(base string, r request) (*http.Request, error) {
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req, err := http.NewRequest(r.Method, base+r.Path, body)
	if err != nil {
		return nil, err
	}
	if r.Body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	return req, nil
}

// exchanges records what concurrent senders saw, to be checked against the
// document after the timed part of a test (the check costs CPU the burst
// should not share).
type exchanges struct {
	mu   sync.Mutex
	list []exchange
}

type exchange struct {
	base string
	r    request
	a    answer
}

// send is send, recorded.
func (x *exchanges) send(base string, r request) (answer, error) {
	a, err := send(base, r)
	if err == nil {
		x.mu.Lock()
		x.list = append(x.list, exchange{base, r, a})
		x.mu.Unlock()
	}
	return a, err
}

// check checks every recorded exchange against docs/openapi.yaml.
func (x *exchanges) check(t *testing.T) {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range x.list {
		checkSpec(t, e.base, e.r, e.a)
	}
}

func send(base string, r request) (answer, error) {
	req, err := newHTTPRequest(base, r)
	if err != nil {
		return answer{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}, err
}

func checkSpec(t *testing.T, base string, r request, a answer) {
	t.Helper()
	req, err := newHTTPRequest(base, r)
	if err != nil {
		t.Fatal(err)
	}
	route, params, err := spec.router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s is not in docs/openapi.yaml: %v", r.Method, r.Path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil && a.Status < 400 {
		t.Errorf("%s %s: the server answered %d to a request docs/openapi.yaml calls invalid: %v\nbody: %s",
			r.Method, r.Path, a.Status, err, r.Body)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: a.Status, Header: a.Header,
		Body: io.NopCloser(bytes.NewReader(a.Body)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s: the answer %d does not match docs/openapi.yaml: %v\nbody: %s", r.Method, r.Path, a.Status, err, a.Body)
	}
}
