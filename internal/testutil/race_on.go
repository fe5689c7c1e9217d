//go:build race

package testutil

// Race reports a build with the race detector, which allocates on its own:
// allocation gates skip under it (make test runs them without it).
const Race = true
