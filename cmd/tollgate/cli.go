package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// Every subcommand behaves the same way: -h/--help prints its usage on
// stdout and exits 0; flags and arguments come in any order ("--" ends
// the flags); a flag it does not have prints the error and its usage on
// stderr and exits 2. Exit codes: 0 done, 1 the work failed (a refused
// configuration, an unreachable Redis), 2 a wrong command line.

// subcommand is one entry of `tollgate help`.
type subcommand struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}

// subcommands lists every subcommand in the order help shows them.
func subcommands() []subcommand {
	return []subcommand{
		{"run", "serve the gateway (the default command); without a file, a built-in demo config and upstream", run},
		{"validate", "check a configuration file: every mistake at file:line:col", validate},
		{"sign", "print the signature headers (or a curl line) for a request", signCommand},
		{"replay", "send recorded requests to a gateway and report what answers differently", replayCommand},
		{"config", "push, show and roll back the configuration a cluster follows through Redis", configCommand},
		{"limits", "print a rate limit per route from the traffic it carried (limits suggest)", limitsCommand},
		{"demo-upstream", "serve the demo backend alone: it answers each request with what it received, as JSON", demoUpstreamCommand},
		{"cert", "write a self-signed certificate and key for trying TLS and HTTP/2 on a development machine", certCommand},
		{"version", "print the version", versionCommand},
		{"help", "print the usage of tollgate or of one command", helpCommand},
	}
}

func findSubcommand(name string) (subcommand, bool) {
	for _, c := range subcommands() {
		if c.name == name {
			return c, true
		}
	}
	return subcommand{}, false
}

// parseFlags parses args into fs, flags before, between or after the
// arguments, which it returns. done says the command line was answered
// already (help, or a wrong flag) and exits with code.
func parseFlags(fs *flag.FlagSet, args []string, usage func(io.Writer), stdout, stderr io.Writer) (positional []string, code int, done bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	positional, help, err := parseInterleaved(fs, args)
	switch {
	case help:
		usage(stdout)
		return nil, 0, true
	case err != nil:
		fmt.Fprintf(stderr, "tollgate %s: %v\n\n", fs.Name(), err)
		usage(stderr)
		return nil, 2, true
	}
	return positional, 0, false
}

// badArgs reports a wrong command line: the problem, then the usage, on
// stderr; exit code 2.
func badArgs(stderr io.Writer, name, problem string, usage func(io.Writer)) int {
	fmt.Fprintf(stderr, "tollgate %s: %s\n\n", name, problem)
	usage(stderr)
	return 2
}

// flagUsage writes a command's usage: its synopsis, what it does, and
// its own flags.
func flagUsage(fs *flag.FlagSet, synopsis, summary string) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintf(w, "Usage: %s\n\n%s\n", synopsis, summary)
		var flags strings.Builder
		fs.SetOutput(&flags)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		if flags.Len() > 0 {
			fmt.Fprintf(w, "\nFlags (before or after the arguments):\n%s", flags.String())
		}
	}
}

func versionCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	usage := flagUsage(fs, "tollgate version", "Prints the version of this tollgate.")
	pos, code, done := parseFlags(fs, args, usage, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 0 {
		return badArgs(stderr, "version", "takes no arguments", usage)
	}
	fmt.Fprintln(stdout, "tollgate", version)
	return 0
}

// helpCommand prints the usage of tollgate, or of the command named.
func helpCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("help", flag.ContinueOnError)
	usage := flagUsage(fs, "tollgate help [COMMAND...]", "Prints the usage of tollgate, or of COMMAND (help config push: of a config command).")
	pos, code, done := parseFlags(fs, args, usage, stdout, stderr)
	if done {
		return code
	}
	if len(pos) == 0 {
		mainUsage(stdout)
		return 0
	}
	c, ok := findSubcommand(pos[0])
	if !ok {
		fmt.Fprintf(stderr, "tollgate help: unknown command %q\n\n", pos[0])
		mainUsage(stderr)
		return 2
	}
	return c.run(append(append([]string(nil), pos[1:]...), "--help"), stdout, stderr)
}
