package deliver

import (
	"net/url"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/monitorurl"
)

// ErrBadURL marks a monitor URL that can never work: no attempt is made
// with it (a registration is spooled at once, for a process configured
// with a good one to send).
var ErrBadURL = monitorurl.ErrBad

// ParseBase checks a monitor base URL (package monitorurl has the rules).
func ParseBase(raw string) (*url.URL, error) { return monitorurl.Parse(raw) }

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
