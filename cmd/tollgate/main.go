// Command tollgate is the Tollgate edge API gateway.
//
//	tollgate [run] [-c FILE]   serve (the default; no file = built-in demo)
//	tollgate validate FILE     check a configuration file and exit
//	tollgate sign ...          sign a request for a consumer
//	tollgate replay ...        replay recorded traffic and compare answers
//	tollgate config ...        push, show, roll back the cluster's configuration
//	tollgate version           print the version
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/upstream"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(mainWithArgs(os.Args[1:], os.Stdout, os.Stderr))
}

func mainWithArgs(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	} else if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		mainUsage(stdout)
		return 0
	}
	if c, ok := findSubcommand(cmd); ok {
		return c.run(args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "tollgate: unknown command %q\n\n", cmd)
	mainUsage(stderr)
	return 2
}

// mainUsage writes tollgate's usage: the commands, then the environment.
func mainUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: tollgate [COMMAND] [flags and arguments, in any order]

Tollgate, an edge API gateway.

Commands:
`)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, c := range subcommands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprint(w, `
tollgate help COMMAND (or tollgate COMMAND --help) prints a command's usage
and flags. Exit codes: 0 done, 1 the work failed (a configuration refused,
Redis not answering, replay answers that differ), 2 a wrong command line.

Signals: SIGHUP reloads the configuration file; SIGTERM/SIGINT drain and stop.

Environment (overrides the file):
`)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  TOLLGATE_CONFIG\t(none)\tconfiguration file, when -c is not given\n")
	for _, f := range config.EnvFlags {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.Name, f.Default, f.Help)
	}
	tw.Flush()
}

func validate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	usage := flagUsage(fs, "tollgate validate FILE",
		"Checks a configuration file as tollgate run reads it, without serving or\nconnecting anywhere: every mistake is reported at file:line:col, in one\npass. Exit code 0: the file runs; 1: it does not.")
	pos, code, done := parseFlags(fs, args, usage, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 1 {
		return badArgs(stderr, "validate", "give one FILE", usage)
	}
	args = pos
	f, _, err := config.ReadFile(args[0], os.LookupEnv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if f.Config.FromRedis() {
		// A follower's file holds how to reach Redis and the node's own
		// settings; the routes come from the version pushed to Redis.
		if err := config.CheckNodeFile(f, args[0]); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprintf(stdout, "%s: ok (a node following the configuration in redis at %s; check the pushed document with tollgate config push)\n", args[0], f.Cluster.Redis)
		return 0
	}
	compiler := config.NewCompiler()
	compiler.Offline = true
	snap, err := compiler.Load(args[0], nil, os.LookupEnv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	compiler.Discard(snap)
	fmt.Fprintf(stdout, "%s: ok (%d routes, %d services)\n", args[0], len(snap.Routes), len(upstream.ServicesOf(snap.Env())))
	fmt.Fprintf(stdout, "note: a reload applies everything but %s, which take effect at start\n", strings.Join(config.RestartOnly(), ", "))
	return 0
}
