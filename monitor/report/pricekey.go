package report

import "path"

// The price keys a price comes from, for exports that name them (the FOCUS
// export's SkuPriceId).

// keyOf is the key lookup matches: the exact name, else the pattern of
// the first matching glob (lookup's order).
func (n *names[V]) keyOf(name string) (string, bool) {
	if _, ok := n.exact[name]; ok {
		return name, true
	}
	for _, g := range n.globs {
		if m, _ := path.Match(g.pattern, name); m {
			return g.pattern, true
		}
	}
	return "", false
}

// PriceKey is the prices file's key Price(model) uses: the models key
// ("NVIDIA H200", "*A100*") or "default"; ok false when nothing prices it.
func (p *Prices) PriceKey(model string) (string, bool) {
	if model != "" {
		if k, ok := p.models.keyOf(model); ok {
			return k, true
		}
	}
	if p.Default != nil {
		return "default", true
	}
	return "", false
}

// ProfilePriceKey is the key ProfilePrice(model, profile) uses.
func (p *Prices) ProfilePriceKey(model, profile string) (string, bool) {
	if profile == "" {
		return "", false
	}
	return p.profiles.keyOf(model + " " + profile)
}

// NamesProfile reports whether a model key's last word is a MIG profile
// ("NVIDIA H200 3g.71gb"), as the report keys MIG instances by model.
func NamesProfile(key string) bool { return namesProfile(key) }
