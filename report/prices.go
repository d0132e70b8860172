package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"sort"
	"strings"
)

// Prices are the hourly prices of one GPU by model, as NVML names models
// ("Tesla T4", "NVIDIA A100-SXM4-80GB").
type Prices struct {
	Currency string
	// Default prices a model nothing else matches, and GPUs counted
	// without a model (device nodes); without one they cost 0 and count as
	// unpriced.
	Default *float64
	exact   map[string]float64
	globs   []glob // longest pattern first
}

type glob struct {
	pattern string
	price   float64
}

// Price returns the hourly price of one GPU of model: an exact name wins,
// then the longest matching glob (path.Match; ties in byte order), then the
// default. ok is false when nothing prices it.
func (p *Prices) Price(model string) (price float64, ok bool) {
	if model != "" {
		if v, ok := p.exact[model]; ok {
			return v, true
		}
		for _, g := range p.globs {
			if m, _ := path.Match(g.pattern, model); m {
				return g.price, true
			}
		}
	}
	if p.Default != nil {
		return *p.Default, true
	}
	return 0, false
}

// pricesFile is the JSON of a prices file.
type pricesFile struct {
	Currency *string             `json:"currency"`
	Default  *float64            `json:"default"`
	Models   map[string]*float64 `json:"models"`
}

// ErrBadPrices classifies every error about a prices file's content.
var ErrBadPrices = errors.New("bad prices file")

// ParsePrices reads a prices file's JSON: {"currency": "CNY", "default":
// 2.0, "models": {"Tesla T4": 2.0, "NVIDIA A100*": 12.0}}. Unknown fields,
// negative or missing prices and malformed globs are errors naming the
// field.
func ParsePrices(r io.Reader) (*Prices, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var f pricesFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPrices, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: more than one JSON value", ErrBadPrices)
	}
	p := &Prices{exact: map[string]float64{}}
	if f.Currency != nil {
		p.Currency = strings.TrimSpace(*f.Currency)
	}
	if f.Default != nil {
		if err := checkPrice("default", *f.Default); err != nil {
			return nil, err
		}
		d := *f.Default
		p.Default = &d
	}
	for name, v := range f.Models {
		field := fmt.Sprintf("models[%q]", name)
		if name == "" {
			return nil, fmt.Errorf("%w: models: an empty model name", ErrBadPrices)
		}
		if v == nil {
			return nil, fmt.Errorf("%w: %s: a price is a number, not null", ErrBadPrices, field)
		}
		if err := checkPrice(field, *v); err != nil {
			return nil, err
		}
		if !strings.ContainsAny(name, `*?[\`) {
			p.exact[name] = *v
			continue
		}
		if _, err := path.Match(name, ""); err != nil {
			return nil, fmt.Errorf("%w: %s: not a valid glob: %w", ErrBadPrices, field, err)
		}
		p.globs = append(p.globs, glob{name, *v})
	}
	sort.Slice(p.globs, func(i, j int) bool {
		a, b := p.globs[i].pattern, p.globs[j].pattern
		if len(a) != len(b) {
			return len(a) > len(b)
		}
		return a < b
	})
	return p, nil
}

func checkPrice(field string, v float64) error {
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%w: %s: a price is a number of at least 0, not %v", ErrBadPrices, field, v)
	}
	return nil
}

// LoadPrices reads the prices file at name; errors name the file.
func LoadPrices(name string) (*Prices, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("prices file: %w", err)
	}
	p, err := ParsePrices(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("prices file %s: %w", name, err)
	}
	return p, nil
}
