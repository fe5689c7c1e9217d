package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/codec"
	"gopkg.in/yaml.v3"
)

// UnmarshalYAML checks each admin host name where it is written.
func (a *Admin) UnmarshalYAML(n *yaml.Node) error {
	type plain Admin
	if err := n.Decode((*plain)(a)); err != nil {
		return err
	}
	hosts := mapValue(n, "hosts")
	for i, h := range a.Hosts {
		if err := checkAdminHost(h); err != nil {
			at := hosts
			if hosts != nil && i < len(hosts.Content) {
				at = hosts.Content[i]
			}
			return &lineError{at.Line, at.Column, "admin.hosts: " + err.Error()}
		}
	}
	return nil
}

// checkAdminHost accepts a host name or an IP address (IPv6 in
// brackets), without a port: the port of a request's Host is not compared.
func checkAdminHost(h string) error {
	if h == "" || !codec.ValidHost([]byte(h)) {
		return fmt.Errorf("%q is not a host name or address", h)
	}
	if strings.HasPrefix(h, "[") {
		if !strings.HasSuffix(h, "]") {
			return fmt.Errorf("%q: give the name without a port", h)
		}
	} else if strings.Contains(h, ":") {
		return fmt.Errorf("%q: give the name without a port", h)
	}
	return nil
}

// equal compares two admin sections (a reload cannot change them).
func (a Admin) equal(b Admin) bool {
	return a.Listen == b.Listen && a.Token == b.Token && a.Metrics == b.Metrics && slices.Equal(a.Hosts, b.Hosts)
}
