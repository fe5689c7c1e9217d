package config

import (
	"net/netip"
	"testing"

	"github.com/tollgate/tollgate/upstream"
)

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// servicesOf returns the services the snapshot's services section built.
func servicesOf(s *Snapshot) map[string]*upstream.Service { return upstream.ServicesOf(s.Env()) }

// writtenServices decodes the services section as the file wrote it.
func writtenServices(t *testing.T, f *File) map[string]*upstream.ServiceSettings {
	t.Helper()
	var services map[string]*upstream.ServiceSettings
	node := f.Features["services"]
	if err := node.Decode(&services); err != nil {
		t.Fatal(err)
	}
	return services
}
