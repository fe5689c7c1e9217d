// Package ipacl allows and denies clients by address. A list is CIDRs or
// single addresses, IPv4 and IPv6 (IPv4-mapped IPv6 addresses count as
// IPv4). Deny wins over allow; a non-empty allow list refuses everyone it
// does not name.
package ipacl

import (
	"fmt"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
)

// ACL is a compiled allow/deny pair; it is a pipeline.Filter.
type ACL struct {
	allow, deny codec.PrefixList
}

var errDenied = pipeline.NewCanned(403, "client address not allowed")

// New compiles the lists; it returns nil when both are empty.
func New(allow, deny []string) (*ACL, error) {
	a, err := codec.ParsePrefixes(allow)
	if err != nil {
		return nil, fmt.Errorf("ip_acl.allow: %w", err)
	}
	d, err := codec.ParsePrefixes(deny)
	if err != nil {
		return nil, fmt.Errorf("ip_acl.deny: %w", err)
	}
	if len(a) == 0 && len(d) == 0 {
		return nil, nil
	}
	return &ACL{allow: a, deny: d}, nil
}

// Handle implements pipeline.Filter: the client (c.ClientIP, which honours
// trusted proxies) must pass the lists, or the answer is 403.
func (l *ACL) Handle(c *pipeline.Ctx) pipeline.Verdict {
	ip := c.ClientIP
	if l.deny.Contains(ip) || (len(l.allow) > 0 && !l.allow.Contains(ip)) {
		return c.Reject(errDenied)
	}
	return pipeline.Continue
}
