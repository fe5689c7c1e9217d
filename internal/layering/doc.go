// Package layering holds the test of the rule docs/architecture.md
// states: the packages every feature builds on (config, pipeline, codec)
// import no feature package.
package layering
