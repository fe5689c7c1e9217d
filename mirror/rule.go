package mirror

// Rule is a route's `mirror` setting: a copy of a share of the
// route's requests goes to a second service, and its answers are ignored
// or only compared.
//
//	mirror: {service: order-v2, sample: 0.01, compare: true, ignore: [json.ts]}
type Rule struct {
	Service string `yaml:"service"`
	// Sample is the share of requests mirrored, in (0, 1]; default 1.
	Sample float64 `yaml:"sample"`
	// Compare counts, in metrics, the mirror's answers that differ from
	// the primary's (status, and body: JSON compared structurally).
	Compare bool `yaml:"compare"`
	// Ignore names JSON paths left out of the comparison (json.ts,
	// json.items.*.id).
	Ignore []string `yaml:"ignore"`
	// MaxBody: requests with a longer body are not mirrored (nor answers
	// compared past it); default 1 MiB.
	MaxBody int `yaml:"max_body"`
	// Queue is how many copies may wait to be sent before new ones are
	// dropped (and counted); default 1024. Concurrency is how many are
	// sent at once; default 16.
	Queue       int `yaml:"queue"`
	Concurrency int `yaml:"concurrency"`
}

const (
	defaultMaxBody     = 1 << 20
	defaultQueue       = 1024
	defaultConcurrency = 16
	maxMaxBody         = 8 << 20
	maxQueue           = 1 << 20
	maxConcurrency     = 1024
)
