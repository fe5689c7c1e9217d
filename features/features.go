// Package features links the gateway's built-in features into a binary:
// importing it registers each of them with the pipeline's registry (one
// line each below). The command imports it; so do tests that compile
// configurations using them.
package features

import (
	_ "github.com/tollgate/tollgate/adaptive"       // concurrency, importance; overload
	_ "github.com/tollgate/tollgate/anomaly"        // alerts
	_ "github.com/tollgate/tollgate/auth"           // auth
	_ "github.com/tollgate/tollgate/breaker"        // breaker, degrade
	_ "github.com/tollgate/tollgate/discovery/dns"  // discovery: dns
	_ "github.com/tollgate/tollgate/discovery/etcd" // discovery: etcd
	_ "github.com/tollgate/tollgate/discovery/file" // discovery: file
	_ "github.com/tollgate/tollgate/dubbostep"      // dubbo
	_ "github.com/tollgate/tollgate/edgetls"        // redirect_https
	_ "github.com/tollgate/tollgate/ipacl"          // ip_acl
	_ "github.com/tollgate/tollgate/limiter"        // limits
	_ "github.com/tollgate/tollgate/mirror"         // mirror
	_ "github.com/tollgate/tollgate/record"         // recording, record
	_ "github.com/tollgate/tollgate/route"          // deprecated, rewrite
	_ "github.com/tollgate/tollgate/transcode"      // grpc
	_ "github.com/tollgate/tollgate/upstream"       // timeouts; upstream, services
	_ "github.com/tollgate/tollgate/waf"            // waf
)
