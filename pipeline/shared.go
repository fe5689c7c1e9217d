package pipeline

// ListenersKey holds where the gateway listens for clients, for features
// that send clients from one to the other (redirect_https): config sets
// listen, and the tls section's owner adds tls.listen.
var ListenersKey = NewKey[Listeners]("pipeline.listeners")

// Listeners are the gateway's client listen addresses.
type Listeners struct {
	// Plain is the cleartext listener's address (listen).
	Plain string
	// TLS is the TLS listener's address (tls.listen); "" without one.
	TLS string
}

// ConsumerQuotasKey holds the quota the consumers section declares for
// each consumer, by consumer (as Ctx.Consumer names it): a tier, whose
// requests per second the limiter's tiers section gives, or a qps of its
// own (tier "custom").
var ConsumerQuotasKey = NewKey[map[string]Quota]("pipeline.consumer_quotas")

// Quota is one consumer's request quota.
type Quota struct {
	// Tier names the consumer's tier; "custom" for its own qps.
	Tier string
	// QPS is the quota in requests per second (declared: a custom
	// quota's only).
	QPS int
}

// NodeKey holds this node's name (node_id: hostname:port by default), for
// what reports the node it ran on (a trace's spans).
var NodeKey = NewKey[string]("pipeline.node")
