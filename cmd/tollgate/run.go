package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	path := fs.String("c", os.Getenv("TOLLGATE_CONFIG"), "configuration `FILE` (default TOLLGATE_CONFIG, else the built-in demo)")
	usage := flagUsage(fs, "tollgate [run] [-c FILE]",
		"Serves the gateway until SIGTERM or SIGINT (drain, then stop); SIGHUP reloads\nthe file. Without a file, a built-in demo configuration and upstream.\nThe environment overrides the file: tollgate help lists its variables.")
	pos, code, done := parseFlags(fs, args, usage, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 0 {
		return badArgs(stderr, "run", fmt.Sprintf("unexpected argument %q (the file goes after -c)", pos[0]), usage)
	}
	if err := serve(*path, stderr); err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	return 0
}

// newLogger returns the operational logger; its level can be changed after
// the configuration is read.
func newLogger(w io.Writer) (*zap.Logger, zap.AtomicLevel) {
	lvl := zap.NewAtomicLevelAt(zapcore.InfoLevel)
	if v := os.Getenv("TOLLGATE_LOG_LEVEL"); v != "" {
		_ = lvl.UnmarshalText([]byte(v))
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	enc.TimeKey = "time"
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), lvl)), lvl
}

// serve runs the gateway process until a signal stops it (see
// process.wait) or a listener fails.
func serve(path string, stderr io.Writer) error {
	log, level := newLogger(stderr)
	defer log.Sync() //nolint:errcheck
	p, err := startProcess(path, log, level)
	if err != nil {
		return err
	}
	defer p.close()
	p.serve()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	return p.wait(sigs)
}
