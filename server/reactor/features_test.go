package reactor_test

// The gateways these tests start name every feature's filters.
import _ "github.com/tollgate/tollgate/features"
