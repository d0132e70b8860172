package main

// Who closed and reopened a month and why, as the statements list shows
// it (docs/monitor.md, "Closing a month").

import "strconv"

// because is a reason as the statements list shows it: ` (reason: "…")`,
// quoted so that a reason cannot forge the line's other fields.
func because(reason string) string {
	if reason == "" {
		return ""
	}
	return " (reason: " + strconv.Quote(reason) + ")"
}
