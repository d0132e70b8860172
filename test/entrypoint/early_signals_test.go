package entrypoint

// Black-box tests of a SIGTERM at the very start (docs/supervise.md):
// at any moment after the program's own start, in both modes and as
// PID 1 of a PID namespace, it ends the task with 143, never Go's exit 2,
// never lost. The windows that remain are measured and logged (the figures
// in docs/supervise.md come from TestEarlySignalWindows).

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sigCaught reports whether pid has a handler for sig (SigCgt in its
// /proc status): from the Go runtime's initsig on, before any package init.
func sigCaught(pid int, sig syscall.Signal) (caught, alive bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "SigCgt:"); ok {
			mask, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return mask&(1<<(uint(sig)-1)) != 0, true
		}
	}
	return false, true
}

// waitHandlers spins until pid's Go runtime has installed its signal
// handlers, and returns how long after since that was seen.
func waitHandlers(pid int, since time.Time) (time.Duration, bool) {
	for time.Since(since) < 5*time.Second {
		caught, alive := sigCaught(pid, syscall.SIGTERM)
		if caught {
			return time.Since(since), true
		}
		if !alive {
			return 0, false
		}
	}
	return 0, false
}

func TestEarlySIGTERM(t *testing.T) {
	delays := []time.Duration{0, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
		time.Millisecond, 1500 * time.Microsecond, 2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond,
		5 * time.Millisecond, 6 * time.Millisecond, 7 * time.Millisecond, 8 * time.Millisecond, 10 * time.Millisecond}
	for _, mode := range []string{"exec", "supervise"} {
		for _, pid1 := range []bool{false, true} {
			name := mode
			if pid1 {
				name += "/pid1"
				if os.Geteuid() != 0 {
					t.Run(name, func(t *testing.T) { t.Skip("a PID namespace needs root") })
					continue
				}
			}
			t.Run(name, func(t *testing.T) {
				outcomes := map[string]int{}
				for _, delay := range delays {
					for rep := range 2 {
						k := newTask(t)
						marker := filepath.Join(k.Dir, "ran")
						k.Args = []string{"/bin/sh", "-c", "echo ran > " + marker + "; sleep 0.3"}
						k.Setenv("PADDLE_ENTRYPOINT_MODE", mode)
						k.Setenv("PADDLE_SPOOL_PATH", "off")
						if pid1 {
							k.Setenv("GODEBUG", "inittrace=1") // says when earlysignal's init has run
						}
						ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
						c := k.Command(ctx)
						pipe, err := c.StderrPipe()
						if err != nil {
							t.Fatal(err)
						}
						if pid1 {
							c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
						}
						if err := c.Start(); err != nil {
							cancel()
							t.Fatal(err)
						}
						from := time.Now()
						var stderr strings.Builder
						caught, read := make(chan struct{}), make(chan struct{})
						go func() {
							defer close(read)
							sc := bufio.NewScanner(pipe)
							for sc.Scan() {
								stderr.WriteString(sc.Text() + "\n")
								if strings.HasPrefix(sc.Text(), "init github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/earlysignal ") {
									close(caught)
								}
							}
						}()
						if pid1 {
							// As PID 1 a signal with its default action is
							// dropped by the kernel, and one the Go runtime's
							// handler gets before the program asked for it
							// ends in the runtime's exit 2: the window before
							// earlysignal's init, which nothing in a Go
							// program can close (TestEarlySignalWindows
							// measures it). Here the delays count from the
							// end of that init (its trace line).
							select {
							case <-caught:
							case <-time.After(10 * time.Second):
								t.Fatal("no trace of earlysignal's init")
							}
							from = time.Now()
						}
						for time.Since(from) < delay {
						}
						c.Process.Signal(syscall.SIGTERM)
						<-read
						code := exitCode(c.Wait())
						cancel()
						_, err = os.Stat(marker)
						ran := err == nil
						outcomes[fmt.Sprintf("exit %d, ran %v", code, ran)]++
						switch {
						case code == 143:
						case code == 2:
							t.Errorf("SIGTERM %v after the start (run %d): exit 2, Go's own\n%s", delay, rep, stderr.String())
						case mode == "exec" && pid1 && ran:
							// The command itself got it as PID 1 (a shell
							// ignores it there): exec mode's known caveat.
						default:
							t.Errorf("SIGTERM %v after the start (run %d): exit %d, command ran %v; want 143\n%s", delay, rep, code, ran, stderr.String())
						}
					}
				}
				t.Logf("outcomes: %v", outcomes)
			})
		}
	}
}

// TestEarlySignalWindows measures what remains: the time from exec to the
// Go runtime's signal handlers (a SIGTERM there gets the kernel's default:
// the process dies, or as PID 1 the signal is dropped), and the time from
// the runtime's start to the init of package earlysignal, where SIGTERM is
// caught for good (before it, the Go runtime's handler exits 2 as PID 1).
// It checks that earlysignal is initialised before every package of the
// product.
func TestEarlySignalWindows(t *testing.T) {
	var toHandlers, toEarly, toMain []time.Duration
	for range 20 {
		c := exec.Command(bin.entrypoint, "--version")
		c.Env = []string{"GODEBUG=inittrace=1"}
		var errb strings.Builder
		c.Stderr = &errb
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if d, ok := waitHandlers(c.Process.Pid, start); ok {
			toHandlers = append(toHandlers, d)
		}
		c.Wait()
		var order []string
		for _, line := range strings.Split(errb.String(), "\n") {
			f := strings.Fields(line)
			if len(f) < 3 || f[0] != "init" {
				continue
			}
			order = append(order, f[1])
			ms, err := strconv.ParseFloat(strings.TrimPrefix(f[2], "@"), 64)
			if err != nil {
				continue
			}
			d := time.Duration(ms * float64(time.Millisecond))
			switch f[1] {
			case "github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/earlysignal":
				toEarly = append(toEarly, d)
			case "main":
				toMain = append(toMain, d)
			}
		}
		i := slices.Index(order, "github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/earlysignal")
		if i < 0 {
			t.Fatalf("no init of earlysignal in the trace:\n%s", errb.String())
		}
		for _, p := range order[:i] {
			if strings.HasPrefix(p, "github.com/paddle-entrypoint/") {
				t.Errorf("%s is initialised before earlysignal", p)
			}
		}
	}
	// Package main has an init line only while it has package-level
	// state to initialise (its help tables moved to entrypoint/help), so
	// only the first two are required.
	if len(toHandlers) == 0 || len(toEarly) == 0 {
		t.Fatalf("nothing measured: %v %v", toHandlers, toEarly)
	}
	t.Logf("exec to the Go runtime's handlers (seen through /proc, a poll of ~10 µs): median %v, max %v", median(toHandlers), slices.Max(toHandlers))
	t.Logf("runtime start to earlysignal's init (GODEBUG=inittrace): median %v, max %v", median(toEarly), slices.Max(toEarly))
	if len(toMain) > 0 {
		t.Logf("runtime start to package main's init (where catching began before): median %v, max %v", median(toMain), slices.Max(toMain))
	}
}
