package launch

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/paddle-entrypoint/paddle-entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/policy"
)

// labelsCmd prints the labels a start would write, as key=value lines, after
// running the same checks and GPU probe. It exits 65 when the labels are
// rejected (enforce mode) or the policy file is unusable, so platform teams
// can vet job specs in CI.
func labelsCmd(args, environ []string) int {
	flags := config.NewFlagSet("paddle-entrypoint labels", true)
	if err := flags.Parse(args); err != nil {
		return flagError(err, func(w io.Writer) { labelsHelp(w, flags) })
	}
	if rest := flags.Args(); len(rest) != 1 {
		return usage(fmt.Errorf("labels takes no arguments, got %q", rest[1:]))
	}
	cfg, err := config.Build(flags, environ, os.Geteuid())
	if err != nil {
		return usage(err)
	}
	log := newLogger(os.Stderr, cfg)
	reportSettings(log, cfg)
	pol, err := policy.Resolve(policy.SystemPath, cfg.PolicyFile)
	if err != nil {
		log.Error("label policy unusable", "err", err)
		return exitRejected
	}
	probe := gpu.Start(context.Background(), gpuOptions(cfg, environ, log))
	defer probe.Stop()
	set, rejected := checkLabels(cfg, pol, environ, log)
	if rejected {
		return exitRejected
	}
	inv := probe.Wait()
	set.SetGPUs(len(inv.Devices), inv.UUIDs())
	os.Stdout.Write(set.Format())
	return 0
}
