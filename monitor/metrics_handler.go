package monitor

import (
	"bufio"
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// ServeTasks serves c's open tasks on /metrics (with the registry's own
// families), written directly in the text format (TaskText) rather than
// gathered: the same bytes, in a fraction of the time and memory. A scrape
// that negotiates protobuf gets the collector gathered as any other. c must
// not also be registered with the Registry.
func (a *API) ServeTasks(c *TaskCollector) {
	a.tasks = c
	if a.cfg.Registry == nil {
		return
	}
	taskReg := prometheus.NewRegistry()
	taskReg.MustRegister(c)
	a.gathered = promhttp.HandlerFor(prometheus.Gatherers{a.cfg.Registry, taskReg}, promhttp.HandlerOpts{})
}

// serveMetrics answers GET /metrics as promhttp.HandlerFor(Registry) would
// (its content negotiation, gzip, name[] filter, a 500 when gathering
// fails), with the open tasks' families written by TaskText in their place
// among the registry's, by name.
func (a *API) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if a.tasks == nil {
		a.metrics.ServeHTTP(w, r)
		return
	}
	format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)
	if format.FormatType() != expfmt.TypeTextPlain {
		a.gathered.ServeHTTP(w, r)
		return
	}
	tasks := a.tasks.Read()
	mfs, err := a.cfg.Registry.Gather()
	if err != nil {
		http.Error(w, "An error has occurred while serving metrics:\n\n"+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Add("Vary", "Accept")
	h.Add("Vary", "Accept-Encoding")
	h.Set("Content-Type", string(format))
	var out *bufio.Writer
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		// BestSpeed: the default level costs more than the rest of
		// the scrape for tens of MiB of series.
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		defer gz.Close()
		out = bufio.NewWriterSize(gz, 64<<10)
	} else {
		out = bufio.NewWriterSize(w, 64<<10)
	}
	defer out.Flush()

	var filter map[string]bool
	if names := r.URL.Query()["name[]"]; len(names) > 0 {
		filter = map[string]bool{}
		for _, n := range names {
			filter[n] = true
		}
	}
	enc := expfmt.NewEncoder(out, format)
	own := tasks.families()
	writeOwn := func(before string) error {
		for len(own) > 0 && (before == "" || own[0].Name < before) {
			f := own[0]
			own = own[1:]
			if filter != nil && !filter[f.Name] {
				continue
			}
			if err := tasks.writeFamily(out, f); err != nil {
				return err
			}
		}
		return nil
	}
	for _, mf := range mfs {
		if err := writeOwn(mf.GetName()); err != nil {
			return
		}
		if filter != nil && !filter[mf.GetName()] {
			continue
		}
		if err := enc.Encode(mf); err != nil {
			return
		}
	}
	_ = writeOwn("")
}

// acceptsGzip says whether an Accept-Encoding header takes gzip (q > 0).
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			continue
		}
		for _, p := range strings.Split(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				return err == nil && q > 0
			}
		}
		return true
	}
	return false
}
