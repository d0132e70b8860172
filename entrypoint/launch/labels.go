package launch

import (
	"context"
	"os"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/logging"
)

// Labels is `paddle-entrypoint labels`: it prints the labels a start would
// write, as key=value lines, after running the same checks and GPU probe.
// It returns ExitRejected when the labels are rejected (enforce mode) or
// the policy file is unusable, so platform teams can vet job specs in CI.
func Labels(cfg *config.Config, environ []string, version string) int {
	t := New(cfg, environ, version)
	log := t.log
	logging.Settings(log, cfg.Warnings)
	pol, err := cfg.Policy, cfg.PolicyErr
	if err != nil {
		log.Error("label policy unusable", "err", err)
		return ExitRejected
	}
	probe := gpu.Start(context.Background(), t.gpuOptions())
	defer probe.Stop()
	if rejected := t.checkLabels(pol); rejected {
		return ExitRejected
	}
	inv := probe.Wait()
	t.set.SetGPUs(len(inv.Devices), inv.UUIDs())
	os.Stdout.Write(t.set.Format())
	return 0
}
