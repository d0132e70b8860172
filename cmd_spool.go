package main

import "errors"

// spoolCmd runs `paddle-entrypoint spool list|stats|flush|requeue|purge`.
// CONTRACT PLACEHOLDER: implemented by the registration work.
func spoolCmd(args, environ []string) int {
	return usage(errors.New("spool: not implemented yet"))
}
