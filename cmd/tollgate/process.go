package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/tollgate/tollgate/admin"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/edgetls"
	"github.com/tollgate/tollgate/internal/clock"
	"github.com/tollgate/tollgate/observe"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/server/h2"
	"go.uber.org/zap"
)

// process is one running gateway: what `tollgate run` starts, reloads,
// reports on and drains. startProcess builds it, serve opens it to
// clients, wait runs it until a signal stops it, close releases what is
// left.
type process struct {
	path string // "" for the built-in demo
	log  *zap.Logger

	compiler *config.Compiler
	follower *config.Follower // nil unless config.source is redis
	demo     *demoUpstream    // nil with a configuration file
	// load compiles the configuration to run next; swapped is told when a
	// reloaded snapshot has been swapped in.
	load    func() (*config.Snapshot, error)
	swapped func()
	// reloadMu serialises reloads: SIGHUP, the admin API, the file watch
	// and the follower may ask at once.
	reloadMu sync.Mutex

	file      *config.File // the configuration read at start
	op        *ops
	gw        *server.Gateway
	accessLog *observe.AccessLog
	transport server.Transport
	h2c       *h2.Server // the cleartext listener's HTTP/2; nil with client.h2c off
	ln        net.Listener
	secure    *tlsListener // nil without a tls block
	admin     *admin.Server
	adminLn   net.Listener // nil with admin.listen: off

	serveErr chan error    // a listener's transport stopped
	stop     chan struct{} // closed by close: stops the watchers
	closers  []func()      // run by close, last first
}

// startProcess loads the configuration (the file at path, the built-in
// demo, or the cluster's through Redis) and sets the gateway up on its
// listeners, not yet serving.
func startProcess(path string, log *zap.Logger, level zap.AtomicLevel) (_ *process, err error) {
	p := &process{path: path, log: log, serveErr: make(chan error, 2), stop: make(chan struct{})}
	defer func() {
		if err != nil {
			p.close() // what it made so far: the compiler, the demo, the certificates
		}
	}()
	snap, err := p.loadFirst()
	if err != nil {
		return nil, err
	}
	f := snap.File
	p.file = f
	_ = level.UnmarshalText([]byte(f.LogLevel))
	runtime.GOMAXPROCS(server.ProcsFor(f))
	if err := p.startGateway(snap); err != nil {
		return nil, err
	}
	if err := p.listen(snap); err != nil {
		return nil, err
	}
	if f.Admin.Listen != "off" {
		if err := p.startAdmin(); err != nil {
			return nil, err
		}
	}
	p.watch()
	return p, nil
}

// loadFirst makes the compiler and reads the first configuration: from
// Redis for a follower, else the file, else the demo with its upstream.
func (p *process) loadFirst() (*config.Snapshot, error) {
	log := p.log
	p.compiler = config.NewCompiler()
	p.compiler.Logger = log
	p.compiler.Clock = clock.New(nil, func(by time.Duration) {
		log.Warn("the host clock stepped back; gateway time holds until it catches up, so no replay window opens",
			zap.Duration("by", by))
	})
	p.closers = append(p.closers, p.compiler.Close)
	lookup := os.LookupEnv
	if p.path == "" {
		demo, err := startDemoUpstream()
		if err != nil {
			return nil, err
		}
		p.demo = demo
		p.closers = append(p.closers, demo.Close)
		lookup = func(k string) (string, bool) {
			if k == "TOLLGATE_DEMO_UPSTREAM" {
				return demo.Addr(), true
			}
			return os.LookupEnv(k)
		}
	}
	p.load = func() (*config.Snapshot, error) { return p.compiler.Load(p.path, []byte(config.Demo), lookup) }
	p.swapped = func() {}
	first := p.load
	follower, err := redisFollower(p.compiler, p.path, lookup)
	if err != nil {
		return nil, err
	}
	if follower != nil {
		p.follower = follower
		p.load, first, p.swapped = follower.Load, follower.Start, follower.Swapped
	}
	return first()
}

// startGateway builds the access log, the gateway on snap, the cluster
// membership and the client transport.
func (p *process) startGateway(snap *config.Snapshot) error {
	f := snap.File
	accessLog, err := observe.OpenAccessLog(observe.AccessLogOptions{
		Path: f.AccessLog.Path, Buffer: f.AccessLog.Buffer, Node: f.NodeID,
		MaxFileBytes: f.AccessLog.MaxFileBytes, MaxBackups: f.AccessLog.MaxBackups,
	})
	if err != nil {
		return err
	}
	p.accessLog = accessLog
	p.op = newOps(f)
	p.op.loaded(snap, nil, "start", 0)
	p.gw = server.NewGateway(snap, accessLog)
	p.compiler.Release(snap)
	if cl := p.compiler.Cluster(); cl != nil && f.Cluster.FixedNodes() == 0 {
		reportStatus(cl, f.Listen, p.follower)
		join(cl, f.NodeID, p.gw) // membership: how many nodes share the cluster's limits
	}
	o := server.OptionsFor(f)
	tlsSettings, _ := edgetls.SettingsKey.Get(snap.Env())
	if p.h2c = server.HTTP2CleartextFor(f, tlsSettings); p.h2c != nil {
		o.HTTP2 = p.h2c
	}
	p.transport, err = server.NewTransport(f.Transport, p.gw, o)
	if err != nil {
		return err
	}
	p.op.wire(p.gw, p.transport, accessLog, p.compiler)
	p.op.recordHistory(p.compiler.Cluster(), p.log, p.stop)
	p.op.watchAnomalies(p.gw, f.NodeID, p.log, p.stop)
	return nil
}

// listen opens the client listeners of the configuration read at start
// (snap): cleartext, and TLS when configured.
func (p *process) listen(snap *config.Snapshot) error {
	f := p.file
	ln, err := net.Listen("tcp", f.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", f.Listen, err)
	}
	secure, err := startTLS(snap, p.gw, p.log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	p.ln = ln
	if secure != nil {
		p.secure = secure
		p.closers = append(p.closers, func() { secure.certs.Close() })
	}
	return nil
}

// startAdmin opens the admin listener and serves the admin API on it.
func (p *process) startAdmin() error {
	f := p.file
	aln, err := net.Listen("tcp", f.Admin.Listen)
	if err != nil {
		p.ln.Close()
		return fmt.Errorf("admin listener on %s: %w", f.Admin.Listen, err)
	}
	if err := admin.CheckListen(aln.Addr(), f.Admin.Token); err != nil {
		aln.Close()
		p.ln.Close()
		return err
	}
	p.adminLn = aln
	p.admin = admin.New(admin.Deps{
		Token:    f.Admin.Token,
		Listen:   f.Admin.Listen,
		Hosts:    f.Admin.Hosts,
		Snapshot: p.gw.Snapshot,
		Reload:   func() (*config.Snapshot, error) { return p.reload("admin API") },
		Revoke:   revoker(p.compiler, p.gw.Snapshot()),
		Logger:   p.log,
		Ops:      p.op.admin(p.compiler, p.gw),
		Limits:   func() any { return limitReports(p.gw.Snapshot()) },
		Stats:    p.stats,
	})
	go func() {
		if err := p.admin.Serve(aln); err != nil {
			p.log.Error("admin listener stopped", zap.Error(err))
		}
	}()
	p.log.Info("admin listening", zap.String("addr", aln.Addr().String()))
	return nil
}

// serve opens the gateway to clients: its transports serve the listeners,
// and /readyz says ready.
func (p *process) serve() {
	go func() { p.serveErr <- p.transport.Serve(p.ln) }()
	if p.secure != nil {
		go func() { p.serveErr <- p.secure.transport.Serve(p.secure.ln) }()
	}
	p.op.ready.Store(true)
	snap := p.gw.Snapshot()
	p.log.Info("tollgate listening", zap.String("addr", p.ln.Addr().String()), zap.String("transport", p.file.Transport),
		zap.String("socket_calls", socketCalls(p.transport)), zap.Int("gomaxprocs", runtime.GOMAXPROCS(0)), logVersion("config_version", snap),
		zap.String("config", snap.Source), zap.String("version", version))
	if p.demo != nil {
		p.log.Info("no configuration file given: serving the built-in demo; try: curl -i localhost" + portOf(p.file.Listen) + "/demo/echo")
	}
}

// close stops the watchers and releases what the process made, last
// made first. The listeners are the drain's (see drain).
func (p *process) close() {
	select {
	case <-p.stop:
		return
	default:
	}
	close(p.stop)
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
}

func portOf(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return ""
	}
	return ":" + port
}

// socketCalls says how a transport makes its socket calls, when it says.
func socketCalls(t server.Transport) string {
	if s, ok := t.(interface{ SocketCalls() string }); ok {
		return s.SocketCalls()
	}
	return "one syscall each"
}
