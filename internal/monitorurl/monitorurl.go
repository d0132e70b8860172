// Package monitorurl checks a monitor base URL, for every program that
// takes one (the entrypoint's settings, the register client, the node
// agent): http or https, a host, a port from 1 to 65535, no control
// character. Its errors name the rule broken, never the URL, which may
// carry credentials.
package monitorurl

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// ErrBad marks a monitor URL that can never work: no attempt is made
// with it (a registration is spooled at once, for a process configured
// with a good one to send).
var ErrBad = errors.New("monitor URL (PADDLE_MONITOR_URL) cannot work")

// Parse checks a monitor base URL: http or https, a host, a port (when
// given) from 1 to 65535, and no control character anywhere. The error
// names the rule broken, never the URL (it may carry credentials). A
// fragment is ignored: it is never sent.
func Parse(raw string) (*url.URL, error) {
	for i := 0; i < len(raw); i++ {
		if b := raw[i]; b < 0x20 || b == 0x7f {
			return nil, fmt.Errorf("%w: control character at byte %d", ErrBad, i)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the url.Error repeats the URL
		}
		return nil, fmt.Errorf("%w: %v", ErrBad, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return nil, fmt.Errorf("%w: no scheme (want http:// or https://)", ErrBad)
	default:
		return nil, fmt.Errorf("%w: scheme %q is not http or https", ErrBad, u.Scheme)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%w: no host", ErrBad)
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: port %q is not 1 to 65535", ErrBad, p)
		}
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}
