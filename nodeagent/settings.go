package nodeagent

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// Config is the agent's settings (docs/node.md, "Settings").
type Config struct {
	MonitorURL         string
	TokenFile          string
	CAFile             string
	NodeName           string
	Interval           time.Duration
	Sample             time.Duration
	Proc               string
	PodResourcesSocket string
	CRISocket          string
	DockerSocket       string
	LabelsPath         string
	ReportSpool        string
	MaxReportAge       time.Duration
	Probe              string
	Listen             string
	Final              bool // PADDLE_NODE_FINAL=1: the report sent at SIGTERM is final
}

// ErrUsage: a bad setting; the message names the flag and its variable.
var ErrUsage = errors.New("usage")

// setting is one flag and its variable.
type setting struct {
	flag, env, kind, def, help string
	set                        func(c *Config, v string) error
}

func durationSetting(dst func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("not a duration (like 60s or 5m)")
		}
		*dst(c) = d
		return nil
	}
}

func stringSetting(dst func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *dst(c) = v; return nil }
}

func settings() []setting {
	return []setting{
		{"monitor-url", "PADDLE_MONITOR_URL", "URL", "", "the monitor's base URL (required in run mode)", stringSetting(func(c *Config) *string { return &c.MonitorURL })},
		{"token-file", "PADDLE_NODE_TOKEN_FILE", "file", "", "the node token (paddle-monitor token NAME --node GLOB), sent as a bearer token", stringSetting(func(c *Config) *string { return &c.TokenFile })},
		{"monitor-ca", "PADDLE_MONITOR_CA", "file", "", "extra CA bundle for an https monitor", stringSetting(func(c *Config) *string { return &c.CAFile })},
		{"node-name", "PADDLE_NODE_NAME", "name", "$NODE_NAME, else the host name", "the node's name in reports", stringSetting(func(c *Config) *string { return &c.NodeName })},
		{"interval", "PADDLE_NODE_INTERVAL", "duration", "60s", "report interval (at least 5s); reports end on its wall-clock multiples", durationSetting(func(c *Config) *time.Duration { return &c.Interval })},
		{"sample", "PADDLE_NODE_SAMPLE", "duration", "5s", "sampling period (at most the interval)", durationSetting(func(c *Config) *time.Duration { return &c.Sample })},
		{"proc", "PADDLE_NODE_PROC", "dir", "/proc", "the host's proc file system", stringSetting(func(c *Config) *string { return &c.Proc })},
		{"pod-resources-socket", "PADDLE_NODE_POD_RESOURCES_SOCKET", "socket", "/var/lib/kubelet/pod-resources/kubelet.sock", "the kubelet's pod-resources API", stringSetting(func(c *Config) *string { return &c.PodResourcesSocket })},
		{"cri-socket", "PADDLE_NODE_CRI_SOCKET", "socket", "/run/containerd/containerd.sock or /var/run/crio/crio.sock", "the container runtime's CRI API", stringSetting(func(c *Config) *string { return &c.CRISocket })},
		{"docker-socket", "PADDLE_NODE_DOCKER_SOCKET", "socket", "/var/run/docker.sock when it exists", "a Docker-compatible API (Docker, podman) for allocations outside Kubernetes", stringSetting(func(c *Config) *string { return &c.DockerSocket })},
		{"labels-path", "PADDLE_NODE_LABELS_PATH", "path", "/var/run/paddle-task.labels", "the labels file's path inside a container", stringSetting(func(c *Config) *string { return &c.LabelsPath })},
		{"report-spool", "PADDLE_NODE_REPORT_SPOOL", "file", "/var/lib/paddle-node/reports.db", "the report spool (bbolt)", stringSetting(func(c *Config) *string { return &c.ReportSpool })},
		{"max-report-age", "PADDLE_NODE_MAX_REPORT_AGE", "duration", "168h", "spooled reports older than this are dropped", durationSetting(func(c *Config) *time.Duration { return &c.MaxReportAge })},
		{"probe", "PADDLE_NODE_PROBE", "file", "paddle-gpu-probe beside paddle-node", "the GPU probe executable", stringSetting(func(c *Config) *string { return &c.Probe })},
		{"listen", "PADDLE_NODE_LISTEN", "host:port", "off", "serve /metrics and /healthz", stringSetting(func(c *Config) *string { return &c.Listen })},
	}
}

const usageHead = `usage: paddle-node [flags]            observe the node's GPUs and report to the monitor until SIGTERM
       paddle-node once [flags]       observe for one --interval (0: one sample) and print the report (JSON); sends nothing
       paddle-node version            print the version

Each setting is a flag or a variable; the flag wins.
PADDLE_NODE_FINAL=1 at SIGTERM marks the last report final (the node is going away).

`

// usage writes --help.
func usage(w io.Writer) {
	fmt.Fprint(w, usageHead)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FLAG\tTYPE\tVARIABLE\tDEFAULT\tMEANING")
	for _, s := range settings() {
		def := s.def
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "--%s\t%s\t%s\t%s\t%s\n", s.flag, s.kind, s.env, def, s.help)
	}
	tw.Flush()
}

// errHelp: --help was asked for.
var errHelp = errors.New("help")

// parse reads the settings from args (after the subcommand) and environ.
func parse(args []string, env func(string) string, once bool) (Config, error) {
	c := Config{}
	all := settings()
	values := map[string]string{}
	from := map[string]string{}
	for _, s := range all {
		if v := env(s.env); v != "" {
			values[s.flag] = v
			from[s.flag] = s.env
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-h" || a == "--help" {
			return c, errHelp
		}
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			return c, fmt.Errorf("%w: unexpected argument %q", ErrUsage, a)
		}
		name, val, hasVal := strings.Cut(name, "=")
		idx := -1
		for k, s := range all {
			if s.flag == name {
				idx = k
			}
		}
		if idx < 0 {
			return c, fmt.Errorf("%w: unknown flag --%s", ErrUsage, name)
		}
		if !hasVal {
			if i+1 >= len(args) {
				return c, fmt.Errorf("%w: --%s needs a value", ErrUsage, name)
			}
			i++
			val = args[i]
		}
		values[name] = val
		from[name] = "--" + name
	}
	// Defaults, then the values given.
	c.Interval, c.Sample, c.MaxReportAge = 60*time.Second, 5*time.Second, 168*time.Hour
	c.Proc, c.LabelsPath, c.ReportSpool = "/proc", "/var/run/paddle-task.labels", "/var/lib/paddle-node/reports.db"
	c.PodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"
	for _, s := range all {
		v, ok := values[s.flag]
		if !ok {
			continue
		}
		if err := s.set(&c, v); err != nil {
			return c, fmt.Errorf("%w: %s (%s=%q): %v", ErrUsage, from[s.flag], s.env, v, err)
		}
	}
	if c.NodeName == "" {
		c.NodeName = env("NODE_NAME")
	}
	if c.NodeName == "" {
		c.NodeName, _ = os.Hostname()
	}
	if c.CRISocket == "" {
		for _, p := range []string{"/run/containerd/containerd.sock", "/var/run/crio/crio.sock"} {
			if _, err := os.Stat(p); err == nil {
				c.CRISocket = p
				break
			}
		}
	}
	if c.DockerSocket == "" {
		if _, err := os.Stat("/var/run/docker.sock"); err == nil {
			c.DockerSocket = "/var/run/docker.sock"
		}
	}
	if c.Probe == "" {
		if self, err := os.Executable(); err == nil {
			c.Probe = filepath.Join(filepath.Dir(self), "paddle-gpu-probe")
		}
	}
	if c.Listen == "off" {
		c.Listen = ""
	}
	c.Final = env("PADDLE_NODE_FINAL") == "1"
	bad := func(flag, rule string) error {
		for _, s := range all {
			if s.flag == flag {
				return fmt.Errorf("%w: --%s (%s): %s", ErrUsage, flag, s.env, rule)
			}
		}
		return fmt.Errorf("%w: --%s: %s", ErrUsage, flag, rule)
	}
	switch {
	case once && c.Interval < 0:
		return c, bad("interval", "must not be negative")
	case !once && c.Interval < 5*time.Second:
		return c, bad("interval", "must be at least 5s")
	case !once && c.Interval%time.Second != 0:
		return c, bad("interval", "must be a whole number of seconds")
	case c.Sample <= 0:
		return c, bad("sample", "must be positive")
	case c.Interval > 0 && c.Sample > c.Interval:
		return c, bad("sample", "must be at most --interval")
	case c.MaxReportAge <= 0:
		return c, bad("max-report-age", "must be positive")
	case !once && c.MonitorURL == "":
		return c, bad("monitor-url", "required (the monitor's base URL)")
	case c.NodeName == "" || len(c.NodeName) > 253:
		return c, bad("node-name", "must be a host name of 1 to 253 bytes")
	}
	if c.MonitorURL != "" {
		u, err := url.Parse(c.MonitorURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, bad("monitor-url", "must be an http:// or https:// URL with a host")
		}
	}
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return c, bad("listen", "must be host:port")
		}
	}
	return c, nil
}
