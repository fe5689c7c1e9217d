package main

import (
	"fmt"
	"os"
	"syscall"

	"go.uber.org/zap"
)

// wait runs the process until it stops: SIGTERM or SIGINT drain it (see
// drain), SIGHUP reloads the configuration and the certificates, SIGUSR1
// reopens the access log; a transport that stops by itself ends it with
// its error.
func (p *process) wait(sigs <-chan os.Signal) error {
	for {
		select {
		case err := <-p.serveErr:
			if err != nil {
				return fmt.Errorf("serving: %w", err)
			}
			return nil
		case sig := <-sigs:
			switch sig {
			case syscall.SIGUSR1: // logrotate moved the access log away
				p.reopenAccessLog()
			case syscall.SIGHUP:
				p.hangup()
			default:
				p.drain(sig, sigs)
				return nil
			}
		}
	}
}

func (p *process) reopenAccessLog() {
	if err := p.accessLog.Reopen(); err != nil {
		p.log.Error("access log not reopened", zap.Error(err))
	} else {
		p.log.Info("access log reopened")
	}
}

// hangup is SIGHUP: the file again, and the certificate files.
func (p *process) hangup() {
	if p.path == "" {
		p.log.Warn("SIGHUP: the built-in demo configuration has no file to re-read")
		return
	}
	_, _ = p.reload("SIGHUP")
	if p.secure != nil {
		p.secure.reloadCerts("SIGHUP")
	}
}
