package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/config"
)

// defaultKeep is how many configuration versions Redis keeps.
const defaultKeep = 20

// configCommand runs `tollgate config push|status|rollback|show`: the
// operators' side of the configuration every node follows through Redis.
func configCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		w, code := stdout, 0
		if len(args) == 0 {
			w, code = stderr, 2
		}
		configUsage(w)
		return code
	}
	sub, args := args[0], args[1:]
	c, ok := configSubcommands()[sub]
	if !ok {
		fmt.Fprintf(stderr, "tollgate config: unknown command %q\n\n", sub)
		configUsage(stderr)
		return 2
	}
	fs := flag.NewFlagSet("config "+sub, flag.ContinueOnError)
	redis := fs.String("redis", os.Getenv("TOLLGATE_REDIS"), "the cluster's Redis `ADDR` (host:port; several comma-separated; default TOLLGATE_REDIS)")
	o := &configOpts{}
	if c.changes {
		fs.StringVar(&o.author, "author", defaultAuthor(), "who changes the configuration, recorded with the version")
		fs.IntVar(&o.keep, "keep", defaultKeep, "versions Redis keeps")
	}
	if sub == "push" {
		fs.BoolVar(&o.plain, "allow-plain-secrets", false, "store secrets written in clear (else refused: use ${NAME} or secret_file)")
	}
	if sub == "rollback" {
		fs.Uint64Var(&o.to, "to", 0, "the `VERSION` to run again (required)")
	}
	usage := flagUsage(fs, "tollgate config "+c.synopsis, c.summary)
	pos, code, done := parseFlags(fs, args, usage, stdout, stderr)
	if done {
		return code
	}
	o.args = pos
	if err := c.check(o); err != nil {
		return badArgs(stderr, "config "+sub, err.Error(), usage)
	}
	if *redis == "" {
		return badArgs(stderr, "config "+sub, "give --redis or TOLLGATE_REDIS", usage)
	}
	cl, err := dialCluster(*redis)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate config:", err)
		return 1
	}
	defer cl.Close()
	if err := c.run(cl, o, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// configOpts is a config command line, read.
type configOpts struct {
	author string
	keep   int
	plain  bool
	to     uint64
	args   []string
}

// configSub is one config command: its usage, a check of its command
// line made before Redis is dialled, and the work.
type configSub struct {
	synopsis, summary string
	changes           bool // makes a version: --author, --keep
	check             func(o *configOpts) error
	run               func(cl *cluster.Client, o *configOpts, stdout, stderr io.Writer) error
}

func configSubcommands() map[string]configSub {
	noArgs := func(o *configOpts) error {
		if len(o.args) != 0 {
			return fmt.Errorf("unexpected argument %q", o.args[0])
		}
		return nil
	}
	return map[string]configSub{
		"push": {
			synopsis: "push FILE [--redis ADDR] [--author NAME] [--keep N] [--allow-plain-secrets]",
			summary:  "Validates FILE as a node would compile it and stores it in Redis as the\nversion every node with config.source redis runs.",
			changes:  true,
			check: func(o *configOpts) error {
				if len(o.args) != 1 {
					return errors.New("give one FILE")
				}
				return nil
			},
			run: func(cl *cluster.Client, o *configOpts, stdout, stderr io.Writer) error {
				return pushFile(cl, o.args[0], o.author, o.keep, o.plain, stdout, stderr)
			},
		},
		"status": {
			synopsis: "status [--redis ADDR]",
			summary:  "Lists the live nodes, the configuration version each runs and the last one\neach refused.",
			check:    noArgs,
			run: func(cl *cluster.Client, _ *configOpts, stdout, _ io.Writer) error {
				return configStatus(cl, stdout)
			},
		},
		"rollback": {
			synopsis: "rollback --to VERSION [--redis ADDR] [--author NAME] [--keep N]",
			summary:  "Makes a stored version the current one again (as a new version), which\nevery node then runs.",
			changes:  true,
			check: func(o *configOpts) error {
				if o.to == 0 {
					return errors.New("give --to VERSION")
				}
				return noArgs(o)
			},
			run: func(cl *cluster.Client, o *configOpts, stdout, _ io.Writer) error {
				return rollback(cl, o.to, o.author, o.keep, stdout)
			},
		},
		"show": {
			synopsis: "show [VERSION] [--redis ADDR]",
			summary:  "Prints a stored version's document (the current one without VERSION).",
			check: func(o *configOpts) error {
				switch len(o.args) {
				case 0:
					return nil
				case 1:
					if _, err := strconv.ParseUint(strings.TrimPrefix(o.args[0], "v"), 10, 64); err != nil {
						return fmt.Errorf("VERSION %q: want a number", o.args[0])
					}
					return nil
				}
				return fmt.Errorf("unexpected argument %q", o.args[1])
			},
			run: func(cl *cluster.Client, o *configOpts, stdout, _ io.Writer) error {
				var v uint64
				if len(o.args) == 1 {
					v, _ = strconv.ParseUint(strings.TrimPrefix(o.args[0], "v"), 10, 64)
				}
				return showVersion(cl, v, stdout)
			},
		},
	}
}

// configUsage lists the config commands.
func configUsage(w io.Writer) {
	fmt.Fprint(w, "Usage: tollgate config COMMAND [flags and arguments, in any order]\n\n"+
		"The configuration a cluster follows through Redis (nodes with config.source redis).\n\nCommands:\n")
	subs := configSubcommands()
	for _, name := range []string{"push", "status", "show", "rollback"} {
		fmt.Fprintf(w, "  %s\n", subs[name].synopsis)
	}
	fmt.Fprint(w, "\ntollgate config COMMAND --help prints a command's usage and flags.\n")
}

// dialCluster connects the way nodes do (TOLLGATE_REDIS_PASSWORD, the
// TOLLGATE_REDIS_TLS_* settings) and fails at once when Redis does not
// answer.
func dialCluster(addrs string) (*cluster.Client, error) {
	host, _ := os.Hostname()
	tlsCfg, err := config.ClientTLS{
		CAFile:     os.Getenv("TOLLGATE_REDIS_TLS_CA"),
		CertFile:   os.Getenv("TOLLGATE_REDIS_TLS_CERT"),
		KeyFile:    os.Getenv("TOLLGATE_REDIS_TLS_KEY"),
		ServerName: os.Getenv("TOLLGATE_REDIS_TLS_SERVER_NAME"),
	}.Config()
	if err != nil {
		return nil, fmt.Errorf("redis tls: %w", err)
	}
	cl, err := cluster.New(cluster.Options{
		Addrs:    strings.Split(addrs, ","),
		Password: os.Getenv("TOLLGATE_REDIS_PASSWORD"),
		TLS:      tlsCfg,
		NodeID:   "config-cli-" + host + "-" + strconv.Itoa(os.Getpid()),
	})
	if err != nil {
		return nil, err
	}
	if !cl.Healthy() {
		cl.Close()
		return nil, fmt.Errorf("redis at %s does not answer", addrs)
	}
	return cl, nil
}

func defaultAuthor() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

// pushFile validates path as a node would and stores it as the next
// version.
func pushFile(cl *cluster.Client, path, author string, keep int, allowPlain bool, stdout, stderr io.Writer) error {
	text, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if plain := config.PlainSecrets(path, text); len(plain) > 0 && !allowPlain {
		msgs := make([]string, len(plain))
		for i, e := range plain {
			msgs[i] = e.Error()
		}
		return fmt.Errorf("%s\nrefused: secrets in clear would be stored in redis (--allow-plain-secrets to store them anyway)", strings.Join(msgs, "\n"))
	}
	notes, err := config.CheckDocument(path, text, placeholderEnv(stderr))
	for _, n := range notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	if err != nil {
		return err
	}
	v, err := push(cl, text, author, keep)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: pushed as version %d\n", path, v)
	return nil
}

// placeholderEnv resolves ${NAME} from this host's environment; a name
// this host does not have (a node's secret) resolves to a placeholder long
// enough for a secret, and is noted: each node expands it from its own.
func placeholderEnv(stderr io.Writer) func(string) (string, bool) {
	seen := map[string]bool{}
	return func(k string) (string, bool) {
		if v, ok := os.LookupEnv(k); ok {
			return v, true
		}
		if !seen[k] {
			seen[k] = true
			fmt.Fprintf(stderr, "note: %s is not set here; each node expands it from its own environment\n", k)
		}
		return "unset-" + k + "-placeholder-0123456789", true
	}
}

func push(cl *cluster.Client, text []byte, author string, keep int) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Above what any live node runs: a Redis that lost its data must not
	// number versions from 1 again under nodes running a later one.
	var floor uint64
	if nodes, err := cl.NodeStatuses(ctx); err == nil {
		for _, n := range nodes {
			floor = max(floor, n.ConfigVersion)
		}
	}
	sum := sha256.Sum256(text)
	doc := config.StoredConfig{StoredVersion: config.StoredVersion{Digest: hex.EncodeToString(sum[:])},
		Author: author, At: time.Now(), Text: text}
	return config.NewStore(cl).Push(ctx, doc, keep, floor)
}

// rollback pushes version v's text again, as a new version: nodes move
// forward to it like to any push, and the history stays in order.
func rollback(cl *cluster.Client, v uint64, author string, keep int, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	doc, err := config.NewStore(cl).Get(ctx, v)
	if err != nil {
		return err
	}
	n, err := push(cl, doc.Text, author+" (rollback to "+strconv.FormatUint(v, 10)+")", keep)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "version %d pushed again as version %d\n", v, n)
	return nil
}

func showVersion(cl *cluster.Client, v uint64, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	doc, err := config.NewStore(cl).Get(ctx, v)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# version %d, pushed %s by %s, sha256 %s\n", doc.Version,
		doc.At.UTC().Format(time.RFC3339), doc.Author, doc.Digest)
	_, err = stdout.Write(doc.Text)
	return err
}

// configStatus prints the current version, the stored ones, and every
// live node with the version it runs and the last configuration error it
// hit.
func configStatus(cl *cluster.Client, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	store := config.NewStore(cl)
	cur, err := store.Current(ctx)
	if err != nil && !errors.Is(err, config.ErrNotStored) {
		return err
	}
	docs, err := store.Versions(ctx)
	if err != nil {
		return err
	}
	nodes, err := cl.NodeStatuses(ctx)
	if err != nil {
		return err
	}
	if cur.Version == 0 {
		fmt.Fprintln(stdout, "current version: none pushed")
	} else {
		fmt.Fprintf(stdout, "current version: %d (sha256 %.12s)\n", cur.Version, cur.Digest)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nVERSION\tPUSHED\tBY")
	for _, d := range docs {
		fmt.Fprintf(tw, "%d\t%s\t%s\n", d.Version, d.At.UTC().Format(time.RFC3339), d.Author)
	}
	fmt.Fprintln(tw, "\nNODE\tADDRESS\tVERSION\tUP SINCE\tLAST ERROR")
	for _, n := range nodes {
		v := nodeVersion(n.ConfigVersion, cur.Version)
		lastErr := n.LastError
		if lastErr == "" {
			lastErr = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Node, n.Addr, v, n.Started.UTC().Format(time.RFC3339), lastErr)
	}
	return tw.Flush()
}

// nodeVersion is a node's configuration version beside the current one in
// Redis: behind it, or ahead of a Redis that lost or was emptied of the
// versions nodes run (the next push is numbered above the nodes' own).
func nodeVersion(node, current uint64) string {
	v := strconv.FormatUint(node, 10)
	switch {
	case node < current:
		return v + " (behind)"
	case node > current && current == 0:
		return v + " (ahead: redis holds no version; the next push is numbered above it)"
	case node > current:
		return v + " (ahead of redis; the next push is numbered above it)"
	}
	return v
}
