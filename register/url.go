package register

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// ErrBadURL marks a monitor URL that can never work: no attempt is made
// with it (a registration is spooled at once, for a process configured
// with a good one to send).
var ErrBadURL = errors.New("monitor URL (PADDLE_MONITOR_URL) cannot work")

// ParseBase checks a monitor base URL: http or https, a host, a port (when
// given) from 1 to 65535, and no control character anywhere. The error
// names the rule broken, never the URL (it may carry credentials). A
// fragment is ignored: it is never sent.
func ParseBase(raw string) (*url.URL, error) {
	for i := 0; i < len(raw); i++ {
		if b := raw[i]; b < 0x20 || b == 0x7f {
			return nil, fmt.Errorf("%w: control character at byte %d", ErrBadURL, i)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the url.Error repeats the URL
		}
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return nil, fmt.Errorf("%w: no scheme (want http:// or https://)", ErrBadURL)
	default:
		return nil, fmt.Errorf("%w: scheme %q is not http or https", ErrBadURL, u.Scheme)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%w: no host", ErrBadURL)
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: port %q is not 1 to 65535", ErrBadURL, p)
		}
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// Endpoint returns the URL of an API path (such as /v1/task/register,
// /v1/task/complete or /v1/task/heartbeat) below a monitor base URL. The
// base's own path is a prefix and its query is kept:
// http://h/api?x=1 joined with /v1/task/register is
// http://h/api/v1/task/register?x=1.
func Endpoint(base, path string) (string, error) {
	u, err := ParseBase(base)
	if err != nil {
		return "", err
	}
	return u.JoinPath(path).String(), nil
}
