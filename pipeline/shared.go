package pipeline

// Keys of the objects config builds from top-level sections for limits
// (other packages define their own: cluster.EnvKey, …).
var (
	// QuotasKey holds the consumers' request quotas.
	QuotasKey = NewKey[*Quotas]("pipeline.quotas")
	// LimitStatusKey holds the statuses of rate-limit refusals.
	LimitStatusKey = NewKey[LimitStatus]("pipeline.limit_status")
)

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

// LimitStatus are the statuses rate-limit refusals answer with
// (top-level `status`): local limits (911) and cluster limits and tenant
// quotas (919).
type LimitStatus struct {
	Local, Cluster int
}
