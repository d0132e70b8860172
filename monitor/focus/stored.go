package focus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// ExportStore keeps a closed month's export (a *store.Store).
type ExportStore interface {
	StatementExport(ctx context.Context, month string, version int, format string) (body []byte, sha string, ok bool, err error)
	PutStatementExport(ctx context.Context, month string, version int, format string, body []byte, sha string) ([]byte, string, error)
}

// StoreClosed generates the whole export (every project and the platform)
// of a month just closed as version, and keeps it with its SHA-256 unless
// one is kept already; it returns the CSV kept. Every later export of that
// version is these bytes.
func StoreClosed(ctx context.Context, cfg Config, es ExportStore, month string, version int) ([]byte, error) {
	e, err := Generate(ctx, cfg, month, nil)
	if err != nil {
		return nil, err
	}
	if e.Version != version {
		return nil, fmt.Errorf("focus: %s: version %d is in force, not %d", month, e.Version, version)
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, e, cfg.Settings); err != nil {
		return nil, err
	}
	// The chargeback lines are kept with the export: both are the month
	// as it closed.
	if ks, ok := es.(books.KeptExports); ok {
		q := report.Query{Window: e.Window, By: []string{report.TaskKey}, Prices: cfg.Prices}
		if cfg.Namespaces != nil {
			q.Namespaces = cfg.Namespaces.Project
		}
		if _, err := books.KeepChargeback(ctx, ks, cfg.Source, q, month, version); err != nil {
			return nil, err
		}
	}
	sum := sha256.Sum256(b.Bytes())
	body, _, err := es.PutStatementExport(ctx, month, version, FormatCSV, b.Bytes(), hex.EncodeToString(sum[:]))
	return body, err
}

// Bytes is month's export in format for scope (nil: everything): a closed
// month's from the CSV kept with its statement (kept now if it was closed
// before exports were), filtered to the scope's projects; an open month's
// computed now.
func Bytes(ctx context.Context, cfg Config, es ExportStore, month, format string, scope *access.Scope) ([]byte, error) {
	if err := CheckPrices(cfg.Prices); err != nil {
		return nil, err
	}
	cfg.Settings = cfg.Settings.WithDefaults()
	var body []byte
	if cfg.Books != nil && es != nil {
		c, err := cfg.Books.Statement(ctx, month)
		if err != nil {
			return nil, err
		}
		if c != nil {
			kept, _, ok, err := es.StatementExport(ctx, month, c.Version, FormatCSV)
			if err != nil {
				return nil, err
			}
			if !ok {
				if kept, err = StoreClosed(ctx, cfg, es, month, c.Version); err != nil {
					return nil, err
				}
			}
			body = kept
			if scope != nil {
				if body, err = filterCSV(kept, scope, cfg.PlatformAccount); err != nil {
					return nil, err
				}
			}
		}
	}
	if body == nil {
		e, err := Generate(ctx, cfg, month, scope)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := WriteCSV(&b, e, cfg.Settings); err != nil {
			return nil, err
		}
		body = b.Bytes()
	}
	if format != FormatCSVGz {
		return body, nil
	}
	var z bytes.Buffer
	if err := Gzip(&z, body); err != nil {
		return nil, err
	}
	return z.Bytes(), nil
}

// filterCSV keeps the rows of a kept export a scoped reader may see: its
// projects' (SubAccountId) with its owners (Tags' paddle/owner), never the
// platform's. Cells are written back as they were.
func filterCSV(body []byte, scope *access.Scope, platform string) ([]byte, error) {
	recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
	if err != nil || len(recs) == 0 {
		return nil, fmt.Errorf("focus: the kept export does not read: %v", err)
	}
	sub, tags := slices.Index(recs[0], "SubAccountId"), slices.Index(recs[0], "Tags")
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	cw.Write(recs[0])
	for _, r := range recs[1:] {
		project := uncell(r[sub])
		var t map[string]string
		if r[tags] != "" {
			_ = json.Unmarshal([]byte(r[tags]), &t)
		}
		if project == platform || !scope.Allows(project, t["paddle/owner"]) {
			continue
		}
		cw.Write(r)
	}
	cw.Flush()
	return b.Bytes(), cw.Error()
}

// uncell undoes csvout.Cell.
func uncell(s string) string {
	if len(s) > 1 && s[0] == '\'' && strings.ContainsRune("=+-@\t\r", rune(s[1])) {
		return s[1:]
	}
	return s
}
