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
	}
	switch cmd {
	case "run":
		return run(args, stdout, stderr)
	case "validate":
		return validate(args, stdout, stderr)
	case "sign":
		return signCommand(args, stdout, stderr)
	case "replay":
		return replayCommand(args, stdout, stderr)
	case "config":
		return configCommand(args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "tollgate", version)
		return 0
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "tollgate: unknown command %q\n\n", cmd)
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Tollgate, an edge API gateway.

Usage:
  tollgate [run] [-c FILE]   serve; without a file, a built-in demo config and upstream
  tollgate validate FILE     check a configuration file (errors name their line)
  tollgate sign --app-key K --secret S [--method M] [--curl] URL [-d FORM]
                             print the signature headers (or a curl line) for a request
  tollgate replay FILE... --target URL [--rate N] [--app-key K --secret S] [--ignore json.PATH] ...
                             send recorded requests to URL and report what answers differently
  tollgate replay --to-mock FILE... --route NAME
                             print a route's mock responses block made from recorded answers
  tollgate config push [--redis ADDR] [--allow-plain-secrets] FILE
                             validate FILE and store it in Redis as the version every
                             node with config.source redis runs
  tollgate config status | show [V] | rollback --to V  [--redis ADDR]
                             live nodes and their versions; print a version; run one again
  tollgate version           print the version

Signals: SIGHUP reloads the configuration file; SIGTERM/SIGINT drain and stop.

Environment (overrides the file):
`)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  TOLLGATE_CONFIG\t(none)\tconfiguration file, when -c is not given\n")
	for _, f := range config.EnvFlags {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.Name, f.Default, f.Help)
	}
	tw.Flush()
}

func validate(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: tollgate validate FILE")
		return 2
	}
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
