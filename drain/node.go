package drain

import (
	"log/slog"

	"github.com/paddle-entrypoint/paddle-entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/policy"
)

// payloadCheck returns the check every stored payload passes before it is
// sent (a start's backlog, spool flush, the node's drainer): the name rule,
// the sensitive-data check and the node's label policy, as a start applies
// them, and its task_id as the Idempotency-Key. The policy is the node's
// (/etc/paddle-entrypoint/policy.json, or the one this process was given),
// read once, when the first payload needs it.
func payloadCheck(cfg config.Config, log *slog.Logger) func([]byte) (string, error) {
	var pol *policy.Policy
	loaded := false
	return func(payload []byte) (string, error) {
		if !loaded {
			loaded = true
			var err error
			if pol, err = policy.Resolve(policy.SystemPath, cfg.PolicyFile); err != nil {
				log.Error("label policy unusable; stored payloads are checked by the built-in rules", "err", err)
			}
		}
		return labels.CheckPayload(payload, pol)
	}
}
