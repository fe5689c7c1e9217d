package config

import (
	"fmt"
	"net"
	"os"
	"time"
)

// Defaults fills every zero setting with its documented default.
func (f *File) Defaults() {
	if f.Listen == "" {
		f.Listen = ":8080"
	}
	if f.Transport == "" || IsReactor(f.Transport) {
		f.Transport = TransportReactor
	}
	if f.IOUring == "" {
		f.IOUring = "auto"
	}
	if f.LogLevel == "" {
		f.LogLevel = "info"
	}
	if f.DrainDelay == nil {
		d := Duration(2 * time.Second)
		f.DrainDelay = &d
	}
	if f.ShutdownTimeout == 0 {
		f.ShutdownTimeout = Duration(15 * time.Second)
	}
	if f.NodeID == "" {
		host, _ := os.Hostname()
		_, port, _ := net.SplitHostPort(f.Listen)
		f.NodeID = host + ":" + port
	}
	c := &f.Client
	setInt(&c.MaxHeaderBytes, 8192)
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 8 << 20
	}
	setInt(&c.MaxURIBytes, 8192)
	setInt(&c.MaxConns, 100000)
	setInt(&c.StreamBodyBytes, 1<<20)
	setDur(&c.HeaderTimeout, 5*time.Second)
	setDur(&c.IdleTimeout, 60*time.Second)
	setDur(&c.WriteTimeout, 10*time.Second)
	setDur(&c.BodyTimeout, 30*time.Second)
	if c.InternalHeaderPrefixes == nil {
		c.InternalHeaderPrefixes = &[]string{"X-Internal-"}
	}
	if c.H2C == nil {
		on := true
		c.H2C = &on
	}
	if c.InternalQueryPrefixes == nil {
		c.InternalQueryPrefixes = &[]string{"internal_"}
	}
	if f.Admin.Metrics == "" {
		f.Admin.Metrics = "on"
	}
	if f.Admin.Listen == "" {
		f.Admin.Listen = "127.0.0.1:9901"
	}
	if f.AccessLog.Path == "" {
		f.AccessLog.Path = "stdout"
	}
	setInt(&f.AccessLog.Buffer, 65536)
	if f.AccessLog.MaxFileBytes > 0 {
		setInt(&f.AccessLog.MaxBackups, 5)
	}
	if f.Cluster.Nodes == "" {
		f.Cluster.Nodes = "auto"
	}
	setDur(&f.Cluster.Budget, 20*time.Millisecond)
	f.Config.defaults(f.NodeID)
	if f.Watch == nil {
		on := true
		f.Watch = &on
	}
}

// Bounds of the access log's rotation: a smaller file would rotate every
// few lines; more backups than this is a job for logrotate.
const (
	minLogFileBytes = 4096
	maxLogBackups   = 1000
)

func setInt(p *int, v int) {
	if *p == 0 {
		*p = v
	}
}

func setDur(p *Duration, v time.Duration) {
	if *p == 0 {
		*p = Duration(v)
	}
}

// Validate checks settings that do not depend on other parts of the file;
// Compile checks the references between them. name is the file name for
// messages.
func (f *File) Validate(name string) error {
	bad := func(line int, format string, a ...any) error {
		return &Error{File: name, Line: line, Msg: fmt.Sprintf(format, a...)}
	}
	if _, _, err := net.SplitHostPort(f.Listen); err != nil {
		return bad(0, "listen %q: %v", f.Listen, err)
	}
	if err := f.validateTransport(bad); err != nil {
		return err
	}
	switch f.IOUring {
	case "auto", "on", "off":
	default:
		return bad(0, "io_uring %q: want auto, on or off", f.IOUring)
	}
	if f.Admin.Metrics != "on" && f.Admin.Metrics != "off" {
		return bad(0, "admin.metrics %q: want on or off", f.Admin.Metrics)
	}
	switch f.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return bad(0, "log_level %q: want debug, info, warn or error", f.LogLevel)
	}
	if f.Workers < 0 {
		return bad(0, "workers must not be negative")
	}
	if f.Cluster.Nodes != "auto" && f.Cluster.FixedNodes() == 0 {
		return bad(0, "cluster.nodes %q: want auto or a positive number", f.Cluster.Nodes)
	}
	if _, err := f.Cluster.TLS.Config(); err != nil {
		return bad(f.Cluster.TLS.Line, "cluster.tls: %v", err)
	}
	if err := f.Config.validate(f); err != nil {
		return bad(0, "%v", err)
	}
	c := f.Client
	if c.MaxHeaderBytes < 1024 {
		return bad(0, "client.max_header_bytes %d is below 1024", c.MaxHeaderBytes)
	}
	if c.MaxURIBytes < 256 {
		return bad(0, "client.max_uri_bytes %d is below 256", c.MaxURIBytes)
	}
	if c.MaxBodyBytes < 0 || c.StreamBodyBytes < 0 || c.MaxConns < 0 {
		return bad(0, "client limits must not be negative")
	}
	if al := f.AccessLog; al.MaxFileBytes < 0 || al.MaxFileBytes > 0 && al.MaxFileBytes < minLogFileBytes {
		return bad(al.maxBytesLine, "access_log.max_file_bytes %d: want 0 (no rotation by size) or at least %d", al.MaxFileBytes, minLogFileBytes)
	} else if al.MaxBackups < 0 || al.MaxBackups > maxLogBackups {
		return bad(al.maxBackupsLine, "access_log.max_backups %d: want 1..%d", al.MaxBackups, maxLogBackups)
	} else if al.MaxBackups > 0 && al.MaxFileBytes == 0 {
		return bad(al.maxBackupsLine, "access_log.max_backups applies only with max_file_bytes (rotation by size)")
	}
	for _, r := range f.Routes {
		if r == nil {
			return bad(0, "empty route")
		}
	}
	if nf := f.NotFound; nf != nil && nf.Status != 0 && (nf.Status < 100 || nf.Status > 999) {
		return bad(0, "not_found.status %d is not an HTTP status", nf.Status)
	}
	return nil
}
