package deploy

// The pieces agree: the monitor's Service (kubernetes/paddle-monitor.yaml)
// is the one address Prometheus scrapes, the node agents report to, the
// tasks' policy file names and every page of the documentation uses.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// monitorURL is the in-cluster URL of the Service of paddle-monitor.yaml,
// and the container port it leads to.
func monitorURL(t *testing.T) (url string, targetPort int32, listen string) {
	t.Helper()
	b, err := os.ReadFile("kubernetes/paddle-monitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	var svc corev1.Service
	for _, part := range bytes.Split(b, []byte("\n---\n")) {
		var tm struct{ Kind string }
		if err := yaml.Unmarshal(part, &tm); err != nil {
			t.Fatal(err)
		}
		switch tm.Kind {
		case "Deployment":
			err = yaml.Unmarshal(part, &d)
		case "Service":
			err = yaml.Unmarshal(part, &svc)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(svc.Spec.Ports) != 1 || len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("Service ports %+v, %d containers", svc.Spec.Ports, len(d.Spec.Template.Spec.Containers))
	}
	c := d.Spec.Template.Spec.Containers[0]
	for _, p := range c.Ports {
		if p.Name == svc.Spec.Ports[0].TargetPort.String() {
			targetPort = p.ContainerPort
		}
	}
	for _, e := range c.Env {
		if e.Name == "PADDLE_MONITOR_LISTEN" {
			listen = e.Value
		}
	}
	return fmt.Sprintf("http://%s.%s.svc:%d", svc.Name, svc.Namespace, svc.Spec.Ports[0].Port), targetPort, listen
}

func TestOneMonitorAddress(t *testing.T) {
	url, targetPort, listen := monitorURL(t)
	if url != "http://paddle-monitor.paddle.svc:8080" {
		t.Errorf("the Service is %s; the documents below name http://paddle-monitor.paddle.svc:8080", url)
	}
	if _, port, err := net.SplitHostPort(listen); err != nil || port != fmt.Sprint(targetPort) {
		t.Errorf("the monitor listens on %q, the Service's target port is %d", listen, targetPort)
	}
	host := strings.TrimPrefix(url, "http://")

	// Prometheus scrapes the Service.
	for _, sc := range loadPromConfig(t).ScrapeConfigs {
		if sc.JobName == "paddle-monitor" && (len(sc.StaticConfigs) != 1 || len(sc.StaticConfigs[0].Targets) != 1 || sc.StaticConfigs[0].Targets[0] != host) {
			t.Errorf("prometheus.yml scrapes the monitor at %+v, want %s", sc.StaticConfigs, host)
		}
	}
	// The node agents report to it.
	_, ds := loadNodeAgent(t)
	found := false
	for _, e := range ds.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "PADDLE_MONITOR_URL" {
			found = e.Value == url
		}
	}
	if !found {
		t.Errorf("paddle-node.yaml does not report to %s", url)
	}

	// Every monitor URL of the documentation: an in-cluster one is this
	// one. Public examples (example.com) and a log line's bare "monitor"
	// are other hosts on purpose.
	files, _ := filepath.Glob("../docs/*.md")
	files = append(files, "../README.md", "../docs/openapi.yaml")
	urlRe := regexp.MustCompile("https?://([A-Za-z0-9.-]+)(:[0-9]+)?")
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range urlRe.FindAllStringSubmatch(string(b), -1) {
			h := m[1]
			if !strings.Contains(h, "monitor") || h == "monitor" || strings.HasSuffix(h, "example.com") || strings.HasSuffix(h, ".example.internal") {
				continue
			}
			seen++
			if m[0] != url {
				t.Errorf("%s names the monitor %s, want %s (deploy/kubernetes/paddle-monitor.yaml's Service)", f, m[0], url)
			}
		}
	}
	if seen < 5 {
		t.Errorf("found the monitor's URL %d times in the documentation: the pattern no longer matches it", seen)
	}
}
