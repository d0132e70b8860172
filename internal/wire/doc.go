// Package wire defines the JSON bodies the programs exchange with the
// monitor — the entrypoint's registration, completion and heartbeat, and the
// node agent's report — as typed Go values, with their limits in one place
// and a Validate method each. Senders encode these types with encoding/json;
// the monitor decodes into them and answers a bad body with a 400 naming the
// field's path (docs/contract.md, docs/openapi.yaml).
//
// Decoding (DecodeRegistration, DecodeCompletion, DecodeHeartbeat)
// guarantees: a body that is not one JSON object is a *BodyError; a value
// of the wrong type or past a rule is a *FieldError whose Path names the
// field as the body spells it, list entries by index (gpus[2].mig.uuid);
// null reads as absent; fields this version does not know are ignored, and
// names are case-sensitive (a key that differs from a field's name only in
// case is one it does not know). A decoded value passed Validate, and
// encodes back to a body that decodes to the same value.
package wire
