package main

import (
	"context"
	"os"
	"time"

	"go.uber.org/zap"
)

// drain stops the process gracefully on sig: /readyz answers 503 and
// every answer closes its connection for drain_delay (a second SIGTERM or
// SIGINT on sigs cuts it short), then the listeners close and requests in
// flight get up to shutdown_timeout to finish.
func (p *process) drain(sig os.Signal, sigs <-chan os.Signal) {
	f := p.file
	drainStart := time.Now()
	p.op.draining.Store(true) // /readyz answers 503 from now on
	p.gw.Drain()              // and every answer closes its connection
	p.log.Info("draining", zap.String("signal", sig.String()), zap.Duration("delay", f.DrainDelay.D()),
		zap.Duration("limit", f.ShutdownTimeout.D()))
	waitDrainDelay(f.DrainDelay.D(), sigs)
	ctx, cancel := context.WithTimeout(context.Background(), f.ShutdownTimeout.D())
	err := p.transport.Shutdown(ctx)
	if p.secure != nil {
		if serr := p.secure.transport.Shutdown(ctx); err == nil {
			err = serr
		}
	}
	if p.admin != nil {
		_ = p.admin.Shutdown(ctx)
	}
	cancel()
	if l := p.gw.DetachLog(); l != nil {
		_ = l.Close()
	}
	if err != nil {
		p.log.Warn("drain limit reached with requests in flight", zap.Error(err), zap.Duration("took", time.Since(drainStart)))
	} else {
		p.log.Info("stopped cleanly", zap.Duration("took", time.Since(drainStart)))
	}
}
