package main

import (
	"github.com/paddle-entrypoint/paddle-entrypoint/command"
	"github.com/paddle-entrypoint/paddle-entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/otelresource"
)

// commandEnv is the command's environment: the caller's, plus
// PADDLE_TASK_ID and, unless PADDLE_OTEL=off, the task's identity merged
// into OTEL_RESOURCE_ATTRIBUTES (the caller's attributes win).
func commandEnv(cfg config.Config, environ []string, set *labels.Set) []string {
	env := command.Env(environ, set.TaskID)
	if !cfg.OTel {
		return env
	}
	caller := lookupEnv(environ, otelresource.Var)
	return command.Setenv(env, otelresource.Var, otelresource.Merge(caller, otelresource.Attributes(set)))
}
