package config

import "github.com/tollgate/tollgate/pipeline"

// restartOnly names the settings of File a running gateway takes once, at
// start: its listeners, transport and client limits are set up with them.
var restartOnly = []string{
	"transport", "io_uring", "workers",
	"client.max_header_bytes", "client.max_uri_bytes", "client.max_body_bytes", "client.stream_body_bytes",
	"client.header_timeout", "client.body_timeout", "client.idle_timeout", "client.write_timeout", "client.max_conns",
	"admin", "access_log",
}

// RestartOnly names the settings a running gateway takes once, at start:
// listen, the sections their owners declare restart-only
// (pipeline.Section.RestartOnly), then File's own. A reload that changes
// one is applied except for these, and says so.
func RestartOnly() []string {
	out := []string{"listen"}
	out = append(out, restartOnlySections()...)
	return append(out, restartOnly...)
}

// restartOnlySections are the keys of the registered restart-only
// sections, in their provisioning order.
func restartOnlySections() []string {
	var out []string
	for _, s := range pipeline.Sections() {
		if s.RestartOnly {
			out = append(out, s.Key)
		}
	}
	return out
}

// RestartOnlyChanges lists the restart-only settings next changes from
// prev (empty when a reload applies whole). A section is compared as its
// owner provisioned it, defaults written in: only two compiled files
// (Compiler.Compile) show its changes.
func RestartOnlyChanges(prev, next *File) []string {
	var out []string
	diff := func(name string, changed bool) {
		if changed {
			out = append(out, name)
		}
	}
	p, n := prev.Client, next.Client
	diff("listen", prev.Listen != next.Listen)
	for _, key := range restartOnlySections() {
		was, wasProvisioned := prev.sections[key]
		is, isProvisioned := next.sections[key]
		diff(key, wasProvisioned && isProvisioned && pipeline.Digest(was) != pipeline.Digest(is))
	}
	diff("transport", prev.Transport != next.Transport)
	diff("io_uring", prev.IOUring != next.IOUring)
	diff("workers", prev.Workers != next.Workers)
	diff("client.max_header_bytes", p.MaxHeaderBytes != n.MaxHeaderBytes)
	diff("client.max_uri_bytes", p.MaxURIBytes != n.MaxURIBytes)
	diff("client.max_body_bytes", p.MaxBodyBytes != n.MaxBodyBytes)
	diff("client.stream_body_bytes", p.StreamBodyBytes != n.StreamBodyBytes)
	diff("client.header_timeout", p.HeaderTimeout != n.HeaderTimeout)
	diff("client.body_timeout", p.BodyTimeout != n.BodyTimeout)
	diff("client.idle_timeout", p.IdleTimeout != n.IdleTimeout)
	diff("client.write_timeout", p.WriteTimeout != n.WriteTimeout)
	diff("client.max_conns", p.MaxConns != n.MaxConns)
	diff("client.h2c", p.ServesH2C() != n.ServesH2C())
	diff("admin", !prev.Admin.equal(next.Admin))
	diff("access_log", prev.AccessLog.settings() != next.AccessLog.settings())
	diff("cluster.tls", prev.Cluster.TLS.WithoutPlace() != next.Cluster.TLS.WithoutPlace())
	return out
}
