package main

import (
	"crypto/sha256"
	"os"
	"time"

	"github.com/tollgate/tollgate/config"
	"go.uber.org/zap"
)

// reload loads the configuration again and swaps it in; a configuration
// that does not load is refused and the running one stays. reason says
// who asked (SIGHUP, the admin API, the file watch, the follower).
func (p *process) reload(reason string) (*config.Snapshot, error) {
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	next, err := p.load()
	if err != nil {
		p.op.loaded(nil, err, reason, p.gw.Snapshot().Version)
		p.log.Error("reload refused; the running configuration stays",
			zap.String("reason", reason), logVersion("version", p.gw.Snapshot()), zap.Error(err))
		return nil, err
	}
	prev := p.gw.Swap(next)
	p.swapped()
	p.op.loaded(next, nil, reason, prev.Version) // after the swap, as the status
	p.compiler.Release(next)
	warnRestartOnly(p.log, prev.File, next.File)
	p.log.Info("configuration reloaded", zap.String("reason", reason),
		logVersion("version", next), logVersion("previous", prev))
	return next, nil
}

// logVersion names a snapshot's version in logs: a follower's is the
// version in Redis it runs, the number tollgate config status and config
// push show, not the count of this process's loads.
func logVersion(key string, s *config.Snapshot) zap.Field {
	if s.ClusterVersion != 0 {
		return zap.Uint64(key, s.ClusterVersion)
	}
	return zap.Uint64(key, s.Version)
}

// watch starts what reloads by itself until close: the follower of the
// cluster's configuration, or the watch of the file (watch: true).
func (p *process) watch() {
	if p.follower != nil {
		go p.follower.Follow(p.stop, func(reason string) { _, _ = p.reload(reason) })
	} else if p.path != "" && *p.file.Watch {
		go watchFile(p.path, time.Second, p.stop, func() [32]byte { return p.gw.Snapshot().Digest },
			func() { _, _ = p.reload("file changed") }, func() { p.op.settled(p.gw.Snapshot().Version) })
	}
}

// watchFile calls changed when the file at path differs from what is
// running (current reports the running snapshot's digest), checking every
// interval. Contents are compared, not times, so a touch, a save of the same
// text or a SIGHUP that already loaded the edit reloads nothing; a
// half-written file is refused and the next check loads the finished one.
// A file written back to what runs (a refused edit undone) calls same.
func watchFile(path string, interval time.Duration, stop <-chan struct{}, current func() [32]byte, changed, same func()) {
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
		} else {
			same()
		}
	}
}

// warnRestartOnly logs settings a reload read but cannot apply.
func warnRestartOnly(log *zap.Logger, prev, next *config.File) {
	if changed := config.RestartOnlyChanges(prev, next); len(changed) > 0 {
		log.Warn("these settings changed but take effect only after a restart; the running values stay",
			zap.Strings("settings", changed))
	}
}
