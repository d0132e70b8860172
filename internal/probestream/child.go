package probestream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"
)

// Event is what the child gave for one sample: a decoded line, or Failed
// samples (the probe missed them, could not start, or wrote garbage).
type Event struct {
	Line   *Line
	Failed int    // samples lost (Line nil)
	Err    string // why, for the log and /healthz
}

// Child runs `PROBE node --interval Sample --proc Proc` and keeps it running.
type Child struct {
	Path   string        // the probe executable
	Sample time.Duration // the sampling period
	Proc   string        // the host's proc file system
	Env    []string      // the probe's environment (nil: this process's, without LD_BIND_NOW)
	Log    *slog.Logger
	// MaxBackoff bounds the wait before a restart (default 1 minute).
	MaxBackoff time.Duration

	restarts atomic.Int64
}

// Restarts is how many times the probe was started again.
func (c *Child) Restarts() int64 { return c.restarts.Load() }

// ErrMissed: the probe wrote no line for two samples and was killed.
var ErrMissed = errors.New("the GPU probe missed two samples")

// Run starts the probe and sends an Event per sample on events until ctx
// ends; then it closes the probe's stdin (it exits) and kills it if it
// has not exited within a second.
func (c *Child) Run(ctx context.Context, events chan<- Event) {
	backoff := time.Second
	maxBackoff := c.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = time.Minute
	}
	first := true
	for ctx.Err() == nil {
		if !first {
			c.restarts.Add(1)
		}
		first = false
		good, err := c.once(ctx, events)
		if ctx.Err() != nil {
			return
		}
		if good {
			backoff = time.Second
		}
		c.Log.Warn("GPU probe stopped; restarting", "probe", c.Path, "error", err, "after", backoff)
		// The samples the wait costs count as failed, one per period.
		wait := time.NewTimer(backoff)
		tick := time.NewTicker(c.Sample)
	waiting:
		for {
			select {
			case <-ctx.Done():
				wait.Stop()
				tick.Stop()
				return
			case <-tick.C:
				send(ctx, events, Event{Failed: 1, Err: fmt.Sprintf("GPU probe restarting: %v", err)})
			case <-wait.C:
				break waiting
			}
		}
		tick.Stop()
		backoff = min(backoff*2, maxBackoff)
	}
}

func send(ctx context.Context, events chan<- Event, e Event) {
	select {
	case events <- e:
	case <-ctx.Done():
	}
}

// once runs one probe process until it fails; good says whether it gave a
// line.
func (c *Child) once(ctx context.Context, events chan<- Event) (good bool, err error) {
	cmd := exec.Command(c.Path, "node", "--interval", c.Sample.String(), "--proc", c.Proc)
	cmd.Env = c.Env
	if cmd.Env == nil {
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "LD_BIND_NOW=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return false, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return false, err
	}
	cmd.Stderr = &logWriter{log: c.Log}
	if err := cmd.Start(); err != nil {
		send(ctx, events, Event{Failed: 1, Err: fmt.Sprintf("GPU probe %s: %v", c.Path, err)})
		return false, err
	}
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	gone := make(chan struct{}) // this run is over: the reader stops sending
	defer close(gone)
	go func() {
		r := bufio.NewReaderSize(stdout, 64<<10)
		for {
			b, err := r.ReadBytes('\n')
			if len(b) > 0 && err == nil {
				select {
				case lines <- b:
				case <-gone:
					return
				}
				continue
			}
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			readErr <- err
			return
		}
	}()
	stop := func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	// Two missed samples: the first line may take NVML's start too.
	deadline := 2*c.Sample + c.Sample/2
	watchdog := time.NewTimer(deadline + 2*time.Second)
	defer watchdog.Stop()
	for {
		select {
		case <-ctx.Done():
			stop()
			return good, ctx.Err()
		case b := <-lines:
			var l Line
			if err := json.Unmarshal(b, &l); err != nil {
				send(ctx, events, Event{Failed: 1, Err: fmt.Sprintf("GPU probe wrote a line that is not JSON: %v", err)})
				continue
			}
			watchdog.Reset(deadline)
			if l.Error != "" {
				send(ctx, events, Event{Failed: 1, Err: "NVML: " + l.Error})
				continue
			}
			good = true
			send(ctx, events, Event{Line: &l})
		case <-watchdog.C:
			cmd.Process.Kill()
			stop()
			send(ctx, events, Event{Failed: 2, Err: ErrMissed.Error()})
			return good, ErrMissed
		case err := <-readErr:
			stop()
			msg := fmt.Sprintf("GPU probe exited: %v", cmd.ProcessState)
			if cmd.ProcessState == nil {
				msg = fmt.Sprintf("GPU probe: %v", err)
			}
			send(ctx, events, Event{Failed: 1, Err: msg})
			return good, errors.New(msg)
		}
	}
}

// logWriter logs the probe's stderr, a line at a time.
type logWriter struct {
	log *slog.Logger
	buf []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			break
		}
		w.log.Warn("GPU probe", "message", string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 4096 {
		w.log.Warn("GPU probe", "message", string(w.buf))
		w.buf = w.buf[:0]
	}
	return len(p), nil
}
