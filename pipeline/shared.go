package pipeline

// ListenersKey holds where the gateway listens for clients, which config
// reads from listen and tls.listen, for features that send clients
// from one to the other (redirect_https).
var ListenersKey = NewKey[Listeners]("pipeline.listeners")

// Listeners are the gateway's client listen addresses.
type Listeners struct {
	// Plain is the cleartext listener's address (listen).
	Plain string
	// TLS is the TLS listener's address (tls.listen); "" without one.
	TLS string
}

// QuotasKey holds the consumers' request quotas, which config builds from
// the top-level consumers and tiers sections for limits.
var QuotasKey = NewKey[*Quotas]("pipeline.quotas")

// Quota is one consumer's request quota.
type Quota struct {
	// Tier names the consumer's tier; "custom" for its own qps.
	Tier string
	// QPS is the quota in requests per second.
	QPS int
}

// Quotas are the consumers' quotas by consumer (as Ctx.Consumer names
// them) and the tiers by name. Immutable once built.
type Quotas struct {
	Consumers map[string]Quota
	Tiers     map[string]int
}
