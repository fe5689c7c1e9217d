package main

import (
	"errors"
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
	fs.SetOutput(stderr)
	path := fs.String("c", os.Getenv("TOLLGATE_CONFIG"), "configuration file (default: built-in demo)")
	fs.Usage = func() { usage(stderr) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
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
