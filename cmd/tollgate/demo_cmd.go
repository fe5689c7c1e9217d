package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const demoUpstreamUsageText = `Usage: tollgate demo-upstream [--listen ADDR] [--name NAME]

Serves the demo backend alone: every request is answered 200 with what it
received (method, URI, header fields) as JSON, so a gateway in front of it
shows what it forwards. It runs until SIGINT or SIGTERM. The examples route
to 127.0.0.1:9001-9005; start one per address they name.

Flags (before or after the others):
  --listen ADDR   where to listen (default 127.0.0.1:9001)
  --name NAME     what the answers' "upstream" says (default "tollgate demo"),
                  to tell instances apart behind one service
`

// demoUpstreamCommand implements "tollgate demo-upstream": 0 once stopped
// by a signal, 1 when it cannot listen, 2 on bad arguments.
func demoUpstreamCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo-upstream", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	listen := fs.String("listen", "127.0.0.1:9001", "")
	name := fs.String("name", "tollgate demo", "")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, demoUpstreamUsageText)
			return 0
		}
		if err == nil {
			err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		fmt.Fprintf(stderr, "tollgate demo-upstream: %v\n\n%s", err, demoUpstreamUsageText)
		return 2
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	d, err := listenDemoUpstream(*listen, *name)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate demo-upstream: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "demo upstream %q listening on %s\n", *name, d.Addr())
	<-sigs
	d.Close()
	return 0
}
