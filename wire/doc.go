// Package wire defines the JSON bodies the programs exchange with the
// monitor — the entrypoint's registration, completion and heartbeat, and the
// node agent's report — as typed Go values, with their limits in one place
// and a Validate method each. Senders encode these types with encoding/json;
// the monitor decodes into them and answers a bad body with a 400 naming the
// field's path (docs/contract.md, docs/openapi.yaml).
package wire
