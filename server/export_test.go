package server

// Hooks for the external tests (package server_test), which start whole
// gateways through internal/gatewaytest and so cannot be in package server.
var (
	DefaultProcs = defaultProcs
	CannedFor    = cannedFor
)
