package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/admin"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/clock"
	"github.com/tollgate/tollgate/observe"
	"github.com/tollgate/tollgate/server"
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

func serve(path string, stderr io.Writer) error {
	log, level := newLogger(stderr)
	defer log.Sync() //nolint:errcheck
	compiler := config.NewCompiler()
	compiler.Logger = log
	compiler.Clock = clock.New(nil, func(by time.Duration) {
		log.Warn("the host clock stepped back; gateway time holds until it catches up, so no replay window opens",
			zap.Duration("by", by))
	})
	defer compiler.Close()
	lookup := os.LookupEnv
	var demo *demoUpstream
	if path == "" {
		var err error
		if demo, err = startDemoUpstream(); err != nil {
			return err
		}
		defer demo.Close()
		lookup = func(k string) (string, bool) {
			if k == "TOLLGATE_DEMO_UPSTREAM" {
				return demo.Addr(), true
			}
			return os.LookupEnv(k)
		}
	}
	load := func() (*config.Snapshot, error) { return compiler.Load(path, []byte(config.Demo), lookup) }
	first := load
	follower, err := redisFollower(compiler, path, lookup) // nil unless config.source is redis
	if err != nil {
		return err
	}
	swapped := func() {} // after a reloaded snapshot is swapped in
	if follower != nil {
		load, first, swapped = follower.Load, follower.Start, follower.Swapped
	}
	snap, err := first()
	if err != nil {
		return err
	}
	f := snap.File
	_ = level.UnmarshalText([]byte(f.LogLevel))
	runtime.GOMAXPROCS(server.ProcsFor(f))

	accessLog, err := observe.OpenAccessLog(observe.AccessLogOptions{
		Path: f.AccessLog.Path, Buffer: f.AccessLog.Buffer, Node: f.NodeID,
		MaxFileBytes: f.AccessLog.MaxFileBytes, MaxBackups: f.AccessLog.MaxBackups,
	})
	if err != nil {
		return err
	}
	op := newOps(f)
	op.loaded(snap, nil, "start", 0)
	gw := server.NewGateway(snap, accessLog)
	compiler.Release(snap)
	if cl := compiler.Cluster(); cl != nil && f.Cluster.FixedNodes() == 0 {
		reportStatus(cl, f.Listen, follower)
		join(cl, f.NodeID, gw) // membership: how many nodes share the cluster's limits
	}
	transport, err := server.NewTransport(f.Transport, gw, server.OptionsFor(f))
	if err != nil {
		return err
	}
	op.wire(gw, transport, accessLog, compiler)
	ln, err := net.Listen("tcp", f.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", f.Listen, err)
	}
	secure, err := startTLS(f, gw, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	if secure != nil {
		defer secure.certs.Close()
	}

	var reloadMu sync.Mutex
	reload := func(reason string) (*config.Snapshot, error) {
		reloadMu.Lock()
		defer reloadMu.Unlock()
		next, err := load()
		if err != nil {
			op.loaded(nil, err, reason, gw.Snapshot().Version)
			log.Error("reload refused; the running configuration stays",
				zap.String("reason", reason), zap.Uint64("version", gw.Snapshot().Version), zap.Error(err))
			return nil, err
		}
		prev := gw.Swap(next)
		swapped()
		op.loaded(next, nil, reason, prev.Version) // after the swap, as the status
		compiler.Release(next)
		warnRestartOnly(log, prev.File, next.File)
		log.Info("configuration reloaded", zap.String("reason", reason),
			zap.Uint64("version", next.Version), zap.Uint64("previous", prev.Version))
		return next, nil
	}

	var adminSrv *admin.Server
	if f.Admin.Listen != "off" {
		aln, err := net.Listen("tcp", f.Admin.Listen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("admin listener on %s: %w", f.Admin.Listen, err)
		}
		if err := admin.CheckListen(aln.Addr(), f.Admin.Token); err != nil {
			aln.Close()
			ln.Close()
			return err
		}
		adminSrv = admin.New(admin.Deps{
			Token:    f.Admin.Token,
			Listen:   f.Admin.Listen,
			Hosts:    f.Admin.Hosts,
			Snapshot: gw.Snapshot,
			Reload:   func() (*config.Snapshot, error) { return reload("admin API") },
			Revoke:   revoker(compiler, f),
			Logger:   log,
			Ops:      op.admin(compiler, gw),
			Limits:   func() any { return limitReports(gw.Snapshot()) },
			Stats: func() any {
				st := map[string]any{
					"requests":       gw.Stats.Read(),
					"conns":          transport.Conns(),
					"goroutines":     runtime.NumGoroutine(),
					"config_version": gw.Snapshot().Version,
				}
				if accessLog != nil {
					st["access_log_dropped"] = accessLog.Dropped()
				}
				replays, degraded := gw.Snapshot().NonceStats()
				st["nonces"] = map[string]uint64{"replays_refused": replays, "decided_without_redis": degraded}
				st["clock_back_steps"] = compiler.Clock.BackSteps()
				if cl := compiler.Cluster(); cl != nil {
					st["redis"] = map[string]any{"healthy": cl.Healthy(), "stats": cl.Stats()}
				}
				st["cluster_nodes"] = clusterNodes(compiler, gw.Snapshot().File)
				if follower != nil {
					st["cluster_config"] = follower.Status()
				}
				st["waf"] = wafCounts(gw.Snapshot())
				if secure != nil && secure.h2 != nil {
					st["http2"] = secure.h2.Stats()
				}
				return st
			},
		})
		go func() {
			if err := adminSrv.Serve(aln); err != nil {
				log.Error("admin listener stopped", zap.Error(err))
			}
		}()
		log.Info("admin listening", zap.String("addr", aln.Addr().String()))
	}

	if follower != nil {
		stopFollow := make(chan struct{})
		defer close(stopFollow)
		go follower.Follow(stopFollow, func(reason string) { _, _ = reload(reason) })
	} else if path != "" && *f.Watch {
		stopWatch := make(chan struct{})
		defer close(stopWatch)
		go watchFile(path, time.Second, stopWatch, func() [32]byte { return gw.Snapshot().Digest },
			func() { _, _ = reload("file changed") })
	}

	serveErr := make(chan error, 2)
	go func() { serveErr <- transport.Serve(ln) }()
	if secure != nil {
		go func() { serveErr <- secure.transport.Serve(secure.ln) }()
	}
	op.ready.Store(true)
	log.Info("tollgate listening", zap.String("addr", ln.Addr().String()), zap.String("transport", f.Transport),
		zap.String("socket_calls", socketCalls(transport)), zap.Int("gomaxprocs", runtime.GOMAXPROCS(0)), zap.Uint64("config_version", snap.Version),
		zap.String("config", snap.Source), zap.String("version", version))
	if demo != nil {
		log.Info("no configuration file given: serving the built-in demo; try: curl -i localhost" + portOf(f.Listen) + "/demo/echo")
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	for {
		select {
		case err := <-serveErr:
			if err != nil {
				return fmt.Errorf("serving: %w", err)
			}
			return nil
		case sig := <-sigs:
			if sig == syscall.SIGUSR1 { // logrotate moved the access log away
				if err := accessLog.Reopen(); err != nil {
					log.Error("access log not reopened", zap.Error(err))
				} else {
					log.Info("access log reopened")
				}
				continue
			}
			if sig == syscall.SIGHUP {
				if path == "" {
					log.Warn("SIGHUP: the built-in demo configuration has no file to re-read")
					continue
				}
				_, _ = reload("SIGHUP")
				if secure != nil {
					secure.reloadCerts("SIGHUP")
				}
				continue
			}
			drainStart := time.Now()
			op.draining.Store(true) // /readyz answers 503 from now on
			gw.Drain()              // and every answer closes its connection
			log.Info("draining", zap.String("signal", sig.String()), zap.Duration("delay", f.DrainDelay.D()),
				zap.Duration("limit", f.ShutdownTimeout.D()))
			waitDrainDelay(f.DrainDelay.D(), sigs)
			ctx, cancel := context.WithTimeout(context.Background(), f.ShutdownTimeout.D())
			err := transport.Shutdown(ctx)
			if secure != nil {
				if serr := secure.transport.Shutdown(ctx); err == nil {
					err = serr
				}
			}
			if adminSrv != nil {
				_ = adminSrv.Shutdown(ctx)
			}
			cancel()
			if l := gw.DetachLog(); l != nil {
				_ = l.Close()
			}
			if err != nil {
				log.Warn("drain limit reached with requests in flight", zap.Error(err), zap.Duration("took", time.Since(drainStart)))
			} else {
				log.Info("stopped cleanly", zap.Duration("took", time.Since(drainStart)))
			}
			return nil
		}
	}
}

// watchFile calls changed when the file at path differs from what is
// running (current reports the running snapshot's digest), checking every
// interval. Contents are compared, not times, so a touch, a save of the same
// text or a SIGHUP that already loaded the edit reloads nothing; a
// half-written file is refused and the next check loads the finished one.
func watchFile(path string, interval time.Duration, stop <-chan struct{}, current func() [32]byte, changed func()) {
	var lastMod time.Time
	var lastSize int64
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		st, err := os.Stat(path)
		if err != nil || (st.ModTime().Equal(lastMod) && st.Size() == lastSize) {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		lastMod, lastSize = st.ModTime(), st.Size()
		if sha256.Sum256(b) != current() {
			changed()
		}
	}
}

// revoker returns the admin API's way to revoke tokens, nil without a
// cluster or JWT section.
func revoker(compiler *config.Compiler, f *config.File) func(string, time.Duration) error {
	cl := compiler.Cluster()
	if cl == nil || f.JWT == nil {
		return nil
	}
	key := f.JWT.RevocationKey
	return func(member string, ttl time.Duration) error { return cl.AddToSet(key, member, ttl) }
}

// warnRestartOnly logs settings a reload read but cannot apply.
func warnRestartOnly(log *zap.Logger, prev, next *config.File) {
	if changed := config.RestartOnlyChanges(prev, next); len(changed) > 0 {
		log.Warn("these settings changed but take effect only after a restart; the running values stay",
			zap.Strings("settings", changed))
	}
}

func portOf(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return ""
	}
	return ":" + port
}

// clusterNodes is how many nodes share the cluster: the configured count,
// or the live membership seen through Redis (1 when standalone).
func clusterNodes(compiler *config.Compiler, f *config.File) int {
	if n := f.Cluster.FixedNodes(); n > 0 {
		return n
	}
	if cl := compiler.Cluster(); cl != nil {
		return cl.LiveNodes()
	}
	return 1
}

// wafCounts reports each WAF route's detections: sqli and xss found, how
// many requests were blocked (the rest were logged), and the bodies it
// could not read whole, in all and by reason.
func wafCounts(snap *config.Snapshot) map[string]any {
	return routeStates(snap, "waf")
}

// socketCalls says how a transport makes its socket calls, when it says.
func socketCalls(t server.Transport) string {
	if s, ok := t.(interface{ SocketCalls() string }); ok {
		return s.SocketCalls()
	}
	return "one syscall each"
}
