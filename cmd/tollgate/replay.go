package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/record"
	"github.com/tollgate/tollgate/record/replay"
)

const replayUsageText = `Usage: tollgate replay FILE... --target URL [flags]
       tollgate replay --to-mock FILE... --route NAME [--max-responses N] [--out FILE]

Sends the requests recorded in FILE... (JSONL files a route's record rule
wrote) to URL, compares each answer with the recorded one (status, the
header fields named with --compare-header, and the body: JSON structurally,
other bodies byte for byte) and prints a summary. Exits 1 when more
requests differed or failed than --max-diff, 2 on bad arguments.

With --to-mock, prints the mock responses block for route NAME instead,
made of the distinct answers the route gave in the recording.

Flags (before or after the files):
  --target URL          where to send: http://host:port or https://host:port
  --host HOST           send this Host instead of each request's recorded one
  --route NAME          replay (or mock) only this route's records
  --rate N              requests per second; default: the recorded pace;
                        "max": as fast as --concurrency allows
  --concurrency C       requests in flight at once (default 8)
  --timeout D           per request (default 10s)
  --app-key K --secret S
                        re-sign signed requests (their signature was masked)
                        with a fresh timestamp and nonce; repeat the pair for
                        several consumers (a request signed by K uses K's
                        secret, others the first pair's)
  --secret-env NAME     read the secret from environment variable NAME
  --v2                  sign with scheme v2
  --jwt-secret S        give JWT callers (their token was masked) a fresh
                        HS256 token for the same subject; or --jwt-secret-env
  --jwt-kid K, --jwt-issuer I, --jwt-audience A
                        the token's key id and iss / aud claims
  --compare-header H    compare this answer header field too (repeatable)
  --ignore json.PATH    leave this JSON path out of body comparisons
                        (repeatable; * for any member: json.items.*.id)
  --max-diff N          requests allowed to differ or fail (default 0)
  --out FILE            write each differing or failed request as a JSON line
  --no-progress         no progress bar (it is drawn only on a terminal)
  --to-mock             print the route's mock responses block instead
  --max-responses N     with --to-mock: at most N distinct answers (default 20)
`

// replayCommand implements "tollgate replay".
func replayCommand(args []string, stdout, stderr io.Writer) int {
	var (
		opts                     replay.Options
		target, rate, out, route string
		jwtSecret, jwtSecretEnv  string
		jwt                      replay.JWTIssuer
		appKeys, secrets         []string
		maxDiff, maxResponses    int
		toMock, noProgress       bool
		ignores, headers         []string
		concurrency              int
		timeout                  time.Duration
		secretEnvErr             error
	)
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&target, "target", "", "")
	fs.StringVar(&opts.Host, "host", "", "")
	fs.StringVar(&route, "route", "", "")
	fs.StringVar(&rate, "rate", "", "")
	fs.IntVar(&concurrency, "concurrency", 8, "")
	fs.DurationVar(&timeout, "timeout", 10*time.Second, "")
	fs.Func("app-key", "", func(s string) error { appKeys = append(appKeys, s); return nil })
	fs.Func("secret", "", func(s string) error { secrets = append(secrets, s); return nil })
	fs.Func("secret-env", "", func(name string) error {
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			secretEnvErr = fmt.Errorf("environment variable %s is not set or empty", name)
		}
		secrets = append(secrets, v)
		return nil
	})
	fs.BoolVar(&opts.SignV2, "v2", false, "")
	fs.StringVar(&jwtSecret, "jwt-secret", "", "")
	fs.StringVar(&jwtSecretEnv, "jwt-secret-env", "", "")
	fs.StringVar(&jwt.KID, "jwt-kid", "", "")
	fs.StringVar(&jwt.Issuer, "jwt-issuer", "", "")
	fs.StringVar(&jwt.Audience, "jwt-audience", "", "")
	fs.Func("compare-header", "", func(s string) error { headers = append(headers, s); return nil })
	fs.Func("ignore", "", func(s string) error { ignores = append(ignores, s); return nil })
	fs.IntVar(&maxDiff, "max-diff", 0, "")
	fs.StringVar(&out, "out", "", "")
	fs.BoolVar(&noProgress, "no-progress", false, "")
	fs.BoolVar(&toMock, "to-mock", false, "")
	fs.IntVar(&maxResponses, "max-responses", 20, "")

	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "tollgate replay: "+format+"\n\n", a...)
		fmt.Fprint(stderr, replayUsageText)
		return 2
	}
	files, help, err := parseInterleaved(fs, args)
	switch {
	case help:
		fmt.Fprint(stdout, replayUsageText)
		return 0
	case err != nil:
		return bad("%v", err)
	case secretEnvErr != nil:
		return bad("%v", secretEnvErr)
	case len(files) == 0:
		return bad("give at least one recording file")
	}
	if toMock {
		if route == "" {
			return bad("--to-mock needs --route NAME")
		}
		return writeMock(files, route, maxResponses, out, stdout, stderr)
	}
	if target == "" {
		return bad("--target is required")
	}
	if len(appKeys) != len(secrets) {
		return bad("give --app-key and --secret (or --secret-env) in pairs: %d keys, %d secrets", len(appKeys), len(secrets))
	}
	for i := range appKeys {
		opts.Signers = append(opts.Signers, replay.Signer{AppKey: appKeys[i], Secret: secrets[i]})
	}
	switch {
	case jwtSecret != "" && jwtSecretEnv != "":
		return bad("give --jwt-secret or --jwt-secret-env, not both")
	case jwtSecretEnv != "":
		jwtSecret = os.Getenv(jwtSecretEnv)
		if jwtSecret == "" {
			return bad("environment variable %s is not set or empty", jwtSecretEnv)
		}
	}
	if jwtSecret != "" {
		jwt.Secret = []byte(jwtSecret)
		opts.JWT = &jwt
	}
	switch rate {
	case "":
	case "max":
		opts.Rate = -1
	default:
		r, err := strconv.ParseFloat(rate, 64)
		if err != nil || r <= 0 {
			return bad("--rate %q: want requests per second, or max", rate)
		}
		opts.Rate = r
	}
	if concurrency < 1 {
		return bad("--concurrency must be at least 1")
	}
	if opts.Ignore, err = record.ParseIgnores(ignores); err != nil {
		return bad("%v", err)
	}
	opts.Files, opts.Target, opts.Route, opts.Concurrency, opts.Timeout, opts.CompareHeaders =
		files, target, route, concurrency, timeout, headers
	return runReplay(opts, out, noProgress, maxDiff, stdout, stderr)
}

// writeMock prints (or writes to out) the route's mock block.
func writeMock(files []string, route string, max int, out string, stdout, stderr io.Writer) int {
	if max < 1 {
		fmt.Fprintln(stderr, "tollgate replay: --max-responses must be at least 1")
		return 2
	}
	m, err := replay.ToMock(files, route, max)
	if err == nil {
		var y []byte
		if y, err = m.YAML(route); err == nil {
			if out != "" {
				err = os.WriteFile(out, y, 0o644)
			} else {
				_, err = stdout.Write(y)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "tollgate replay:", err)
		return 2
	}
	return 0
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments, which it returns ("--" ends the flags).
func parseInterleaved(fs *flag.FlagSet, args []string) (positional []string, help bool, err error) {
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, true, nil
			}
			return nil, false, err
		}
		left := fs.Args()
		if len(left) == 0 {
			return positional, false, nil
		}
		if n := len(rest) - len(left); n > 0 && rest[n-1] == "--" {
			return append(positional, left...), false, nil
		}
		positional = append(positional, left[0])
		rest = left[1:]
	}
}

// runReplay replays opts, writes the differences to out ("" for none),
// and reports: 0 when at most maxDiff requests differ, 1 beyond, 2 when
// the replay could not run or was interrupted.
func runReplay(opts replay.Options, out string, noProgress bool, maxDiff int, stdout, stderr io.Writer) int {
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			fmt.Fprintln(stderr, "tollgate replay:", err)
			return 2
		}
		defer f.Close()
		opts.Diffs = f
	}
	drawn := false
	if !noProgress && replay.IsTerminal(os.Stderr) {
		bar := replay.Bar(stderr)
		opts.Progress = func(done, total int, s *replay.Summary) {
			drawn = done < total
			bar(done, total, s)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	sum, err := replay.Run(ctx, opts)
	if drawn {
		fmt.Fprintln(stderr)
	}
	if sum != nil {
		sum.Print(stdout, opts.Target, time.Since(start))
		if out != "" && sum.Differing+sum.Errors > 0 {
			fmt.Fprintf(stdout, "differences written to %s\n", out)
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "tollgate replay: interrupted")
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "tollgate replay:", err)
		return 2
	case sum.Exceeds(maxDiff):
		return 1
	}
	return 0
}
