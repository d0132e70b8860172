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
	"time"

	"github.com/spf13/pflag"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/settings"
)

// Config is the agent's settings (docs/node.md, "Invocation").
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
	KubeletCgroupRoot  string
	ReportSpool        string
	MaxReportAge       time.Duration
	Probe              string
	Listen             string
	DrainSpools        string
	TokenDir           string
	Final              bool     // PADDLE_NODE_FINAL=1: the report sent at SIGTERM is final
	DRADrivers         []string // DRA drivers whose claims count (--dra-drivers); empty: none
	Kubeconfig         string   // the API server for ResourceSlices; "": in-cluster
}

// ErrUsage: a bad setting; the message names the flag or the variable
// (the programs' one usage error, exit 64 here).
var ErrUsage = settings.ErrUsage

func str(dst func(*Config) *string) func(*Config, string) error {
	return func(c *Config, s string) error { *dst(c) = s; return nil }
}

func dur(dst func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, s string) error {
		d, err := settings.Duration(s)
		*dst(c) = d
		return err
	}
}

// table is the agent's settings, read by the programs' one settings
// mechanism: a malformed variable is refused, naming it (the settings are
// the deployment's, not a task's). Defaults that depend on the machine
// ("" here) are filled in by parse.
var table = settings.Table[Config]{Policy: settings.Refuse, Entries: []settings.Entry[Config]{
	{Flag: "monitor-url", Var: "PADDLE_MONITOR_URL", Type: "URL", Doc: "the monitor's base URL (required in run mode)", Parse: str(func(c *Config) *string { return &c.MonitorURL })},
	{Flag: "token-file", Var: "PADDLE_NODE_TOKEN_FILE", Type: "file", Doc: "the node token (paddle-monitor token NAME --node NODE) or, on Kubernetes, the pod's projected ServiceAccount token (audience paddle-monitor), sent as a bearer token and read again at every send", Parse: str(func(c *Config) *string { return &c.TokenFile })},
	{Flag: "monitor-ca-file", Var: "PADDLE_MONITOR_CA_FILE", Type: "file", Doc: "PEM CA bundle added to the system roots for an https monitor (as the entrypoint's)", Parse: str(func(c *Config) *string { return &c.CAFile })},
	{Flag: "node-name", Var: "PADDLE_NODE_NAME", Type: "name", Doc: "the node's name in reports (default $NODE_NAME, else the host name)", Parse: str(func(c *Config) *string { return &c.NodeName })},
	{Flag: "interval", Var: "PADDLE_NODE_INTERVAL", Type: "duration", Default: "60s", Doc: "report interval, at least 5s; reports end on its wall-clock multiples", Parse: dur(func(c *Config) *time.Duration { return &c.Interval })},
	{Flag: "sample", Var: "PADDLE_NODE_SAMPLE", Type: "duration", Default: "5s", Doc: "sampling period, at most the interval", Parse: dur(func(c *Config) *time.Duration { return &c.Sample })},
	{Flag: "proc", Var: "PADDLE_NODE_PROC", Type: "dir", Default: "/proc", Doc: "the host's proc file system", Parse: str(func(c *Config) *string { return &c.Proc })},
	{Flag: "pod-resources-socket", Var: "PADDLE_NODE_POD_RESOURCES_SOCKET", Type: "socket", Default: "/var/lib/kubelet/pod-resources/kubelet.sock", Doc: "the kubelet's pod-resources API", Parse: str(func(c *Config) *string { return &c.PodResourcesSocket })},
	{Flag: "cri-socket", Var: "PADDLE_NODE_CRI_SOCKET", Type: "socket", Doc: "the runtime's CRI API (default the first of /run/containerd/containerd.sock, /var/run/crio/crio.sock that exists)", Parse: str(func(c *Config) *string { return &c.CRISocket })},
	{Flag: "docker-socket", Var: "PADDLE_NODE_DOCKER_SOCKET", Type: "socket", Doc: "a Docker-compatible API (Docker, podman) for allocations outside Kubernetes (default /var/run/docker.sock when it exists)", Parse: str(func(c *Config) *string { return &c.DockerSocket })},
	{Flag: "kubelet-cgroup-root", Var: "PADDLE_NODE_KUBELET_CGROUP_ROOT", Type: "path", Default: "/", Doc: "the kubelet's --cgroup-root (kind: /kubelet): its kubepods groups are recognised there as well as at the top", Parse: str(func(c *Config) *string { return &c.KubeletCgroupRoot })},
	{Flag: "labels-path", Var: "PADDLE_NODE_LABELS_PATH", Type: "path", Default: "/var/run/paddle-task.labels", Doc: "the labels file's path inside a container", Parse: str(func(c *Config) *string { return &c.LabelsPath })},
	{Flag: "report-spool", Var: "PADDLE_NODE_REPORT_SPOOL", Type: "file", Default: "/var/lib/paddle-node/reports.db", Doc: "the report spool (bbolt)", Parse: str(func(c *Config) *string { return &c.ReportSpool })},
	{Flag: "max-report-age", Var: "PADDLE_NODE_MAX_REPORT_AGE", Type: "duration", Default: "168h", Doc: "spooled reports older than this are dropped", Parse: dur(func(c *Config) *time.Duration { return &c.MaxReportAge })},
	{Flag: "probe", Var: "PADDLE_NODE_PROBE", Type: "file", Doc: "the GPU probe executable (default paddle-gpu-probe beside paddle-node)", Parse: str(func(c *Config) *string { return &c.Probe })},
	{Flag: "listen", Var: "PADDLE_NODE_LISTEN", Type: "host:port", Default: "off", Doc: "serve /metrics and /healthz", Parse: str(func(c *Config) *string { return &c.Listen })},
	{Flag: "drain-spools", Var: "PADDLE_NODE_DRAIN_SPOOLS", Type: "dir", Default: "off", Doc: "also drain the task spools of this directory every interval, as paddle-entrypoint spool flush --all does (needs --token-dir)", Parse: str(func(c *Config) *string { return &c.DrainSpools })},
	{Flag: "dra-drivers", Var: "PADDLE_NODE_DRA_DRIVERS", Type: "list", Default: "gpu.nvidia.com", Doc: "DRA drivers whose claims are GPU allocations, comma-separated (off: none); their devices are read from the node's ResourceSlices", Parse: func(c *Config, s string) error {
		c.DRADrivers = nil
		if s == "off" {
			return nil
		}
		for _, d := range strings.Split(s, ",") {
			if d = strings.TrimSpace(d); d != "" {
				c.DRADrivers = append(c.DRADrivers, d)
			}
		}
		return nil
	}},
	{Flag: "kubeconfig", Var: "PADDLE_NODE_KUBECONFIG", Type: "file", Doc: "a kubeconfig (JSON, with a token) for the API server's ResourceSlices and ResourceClaims (default in a pod: its ServiceAccount)", Parse: str(func(c *Config) *string { return &c.Kubeconfig })},
	{Flag: "token-dir", Var: "PADDLE_NODE_TOKEN_DIR", Type: "dir", Doc: "the teams' monitor tokens for --drain-spools, one per file", Parse: str(func(c *Config) *string { return &c.TokenDir })},
}}

const usageHead = `usage: paddle-node [flags]            observe the node's GPUs and report to the monitor until SIGTERM
       paddle-node once [flags]       observe for one --interval (0: one sample) and print the report (JSON); sends nothing
       paddle-node final [flags]      mark the report sent at the next SIGTERM final: the node is going away (a preStop hook)
       paddle-node version            print the version

Each setting is a flag or a variable; the flag wins.
PADDLE_NODE_FINAL=1 in the agent's environment, or paddle-node final before SIGTERM,
marks the last report final.

`

func flagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("paddle-node", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	table.Define(fs)
	return fs
}

// usage writes --help.
func usage(w io.Writer) {
	fmt.Fprint(w, usageHead)
	fmt.Fprint(w, flagSet().FlagUsages())
}

// cgroupRoot says whether p is an absolute cgroup path without "." or
// ".." components (one that could not climb out of where it names).
func cgroupRoot(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	for _, c := range strings.Split(strings.Trim(p, "/"), "/") {
		if c == "." || c == ".." {
			return false
		}
	}
	return true
}

// errHelp: --help was asked for.
var errHelp = errors.New("help")

// parse reads the settings from args (after the subcommand) and the
// environment.
func parse(args []string, env func(string) string, once bool) (Config, error) {
	var c Config
	fs := flagSet()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return c, errHelp
		}
		return c, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	lookup := func(k string) (string, bool) { v := env(k); return v, v != "" }
	if _, err := table.Resolve(&c, fs, lookup); err != nil {
		if errors.Is(err, ErrUsage) {
			return c, err
		}
		return c, fmt.Errorf("%w: %w", ErrUsage, err)
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
	if c.DrainSpools == "off" {
		c.DrainSpools = ""
	}
	c.Final = env("PADDLE_NODE_FINAL") == "1"
	bad := func(flag, rule string) error {
		for _, e := range table.Entries {
			if e.Flag == flag {
				return fmt.Errorf("%w: --%s (%s): %s", ErrUsage, flag, e.Var, rule)
			}
		}
		return fmt.Errorf("%w: --%s: %s", ErrUsage, flag, rule)
	}
	switch {
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
	case !cgroupRoot(c.KubeletCgroupRoot):
		return c, bad("kubelet-cgroup-root", "must be an absolute cgroup path without . or .. components")
	case c.DrainSpools != "" && c.TokenDir == "":
		return c, bad("token-dir", "required with --drain-spools (the teams' tokens)")
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
