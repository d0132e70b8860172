package report

import (
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
)

// Prices are the hourly prices of one GPU by model, as NVML names models
// ("Tesla T4", "NVIDIA A100-SXM4-80GB"), and of one MIG instance by model
// and profile ("NVIDIA H200 1g.18gb": a key whose last word is a MIG
// profile), with the optional energy factors.
type Prices struct {
	Currency string
	// Default prices a model nothing else matches, and GPUs counted
	// without a model (device nodes); without one they cost 0 and count as
	// unpriced.
	Default *float64
	models  names[float64]
	// The keys that name a MIG profile, apart: only they price an
	// instance-hour, and they never price a whole GPU.
	profiles names[float64]
	// PricePerKWh and CO2KgPerKWh turn energy into money and CO2 (nil
	// without them).
	PricePerKWh, CO2KgPerKWh *float64
}

// migProfile is the last word of a models key that names a MIG profile, as
// nvidia-smi spells it: "1g.18gb", "3g.71gb", "7g.141gb", with an optional
// "+me"-style suffix ("1g.10gb+me").
var migProfile = regexp.MustCompile(`^[0-9]+g\.[0-9]+gb(\+[a-z]+)?$`)

// namesProfile reports whether a models key's last word is a MIG profile.
func namesProfile(key string) bool {
	i := strings.LastIndexByte(key, ' ')
	return i > 0 && migProfile.MatchString(key[i+1:])
}

// ProfilePrice returns the hourly price of one MIG instance of profile on
// a GPU of model: the key "<model> <profile>" exactly, else the longest
// profile key whose glob matches it. Only keys naming a profile are tried;
// ok is false when none matches (the instance is then priced as its share
// of the GPU: Price(model) × share).
func (p *Prices) ProfilePrice(model, profile string) (price float64, ok bool) {
	if profile == "" {
		return 0, false
	}
	name := model + " " + profile
	return p.profiles.lookup(name)
}

// EntryPrice returns the hourly price of one GPU entry of a task: a MIG
// instance (mig) of profile at its profile's price, else any entry at
// Price(model) × share. ok is false when nothing prices it.
func (p *Prices) EntryPrice(model, profile string, mig bool, share float64) (price float64, ok bool) {
	if mig {
		if v, ok := p.ProfilePrice(model, profile); ok {
			return v, true
		}
	}
	v, ok := p.Price(model)
	return v * share, ok
}

// Price returns the hourly price of one GPU of model among the keys that
// name no MIG profile: an exact name wins, then the longest matching glob
// (path.Match; ties in byte order), then the default. ok is false when
// nothing prices it.
func (p *Prices) Price(model string) (price float64, ok bool) {
	if model != "" {
		if v, ok := p.models.lookup(model); ok {
			return v, true
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
	Energy   *struct {
		PricePerKWh *float64 `json:"price_per_kwh"`
		CO2KgPerKWh *float64 `json:"co2_kg_per_kwh"`
	} `json:"energy"`
}

// ErrBadPrices classifies every error about a prices file's content.
var ErrBadPrices = errors.New("bad prices file")

// ParsePrices reads a prices file's JSON: {"currency": "CNY", "default":
// 2.0, "models": {"Tesla T4": 2.0, "NVIDIA A100*": 12.0, "NVIDIA H200
// 1g.18gb": 2.5}, "energy": {"price_per_kwh": 0.8, "co2_kg_per_kwh":
// 0.55}}. Unknown fields, negative or missing prices and malformed globs
// are errors naming the field.
func ParsePrices(r io.Reader) (*Prices, error) {
	var f pricesFile
	if err := decodeFile(r, &f, ErrBadPrices); err != nil {
		return nil, err
	}
	p := &Prices{}
	if e := f.Energy; e != nil {
		for _, x := range []struct {
			field string
			v     *float64
			dst   **float64
		}{{"energy.price_per_kwh", e.PricePerKWh, &p.PricePerKWh}, {"energy.co2_kg_per_kwh", e.CO2KgPerKWh, &p.CO2KgPerKWh}} {
			if x.v == nil {
				continue
			}
			if err := checkPrice(x.field, *x.v); err != nil {
				return nil, err
			}
			v := *x.v
			*x.dst = &v
		}
	}
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
		table := &p.models
		if namesProfile(name) {
			table = &p.profiles
		}
		if err := table.add(name, *v); err != nil {
			return nil, fmt.Errorf("%w: %s: not a valid glob: %w", ErrBadPrices, field, err)
		}
	}
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
	return loadFile("prices file", name, ParsePrices)
}
