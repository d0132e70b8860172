package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
)

// token mints a token: the secret alone on the first line, the tokens-file
// entry (one JSON object, the secret's SHA-256 only) on the second. With
// --add-to FILE the entry is also appended to that tokens file (created
// 0600), so nobody edits JSON by hand; a running serve picks it up on
// SIGHUP.
func token(args []string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("token", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	projects := fs.StringArray("project", nil, "project glob this token may write and read (repeatable)")
	owners := fs.StringArray("owner", nil, "owner glob (repeatable; none: any owner)")
	admin := fs.Bool("admin", false, "the token may write and read every project")
	nodes := fs.StringArray("node", nil, "node name (one, exact, compared in lower case): a node token, that may send node reports for that node and nothing else (on Kubernetes use --kube-tokenreview)")
	role := fs.String("role", "", "viewer: a read-only token, which reads its --project/--owner globs (none: every project) and writes nothing")
	addTo := fs.String("add-to", "", "tokens file to append the entry to (created with mode 0600; a name already there is refused); then send serve SIGHUP")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: token takes one NAME", errUsage)
	}
	var secret string
	var entry *access.Token
	var err error
	switch {
	case *role != "" && *role != access.RoleViewer:
		return fmt.Errorf("%w: token: --role %q: the only role is viewer (a read-only token)", errUsage, *role)
	case *role == access.RoleViewer:
		if *admin || len(*nodes) > 0 {
			return fmt.Errorf("%w: token: --role viewer does not combine with --admin or --node (a viewer writes nothing)", errUsage)
		}
		secret, entry, err = access.MintViewer(fs.Arg(0), *projects, *owners)
	case len(*nodes) > 0:
		if len(*projects) > 0 || len(*owners) > 0 || *admin {
			return fmt.Errorf("%w: token: --node does not combine with --project, --owner or --admin (a node token sends node reports only)", errUsage)
		}
		secret, entry, err = access.MintNode(fs.Arg(0), *nodes)
	default:
		secret, entry, err = access.Mint(fs.Arg(0), *projects, *owners, *admin)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	b, err := json.Marshal(entry)
	if err != nil {
		return err
	}
	if *addTo != "" {
		if err := access.Add(*addTo, entry); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(stdout, "%s\n%s\n", secret, b)
	return err
}
