package pipeline

// Keys of Env.Shared for objects config builds from top-level sections
// (other packages define their own: cluster.EnvKey, …).
type (
	// QuotasKey holds a *Quotas: the consumers' request quotas.
	QuotasKey struct{}
	// LimitStatusKey holds a LimitStatus.
	LimitStatusKey struct{}
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
