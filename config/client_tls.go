package config

import "github.com/tollgate/tollgate/internal/clienttls"

// ClientTLS is how the gateway reaches a server over TLS as its client:
// cluster.tls here, a gRPC service's tls in package upstream. Setting any
// field turns TLS on.
type ClientTLS = clienttls.Settings
