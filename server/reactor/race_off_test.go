//go:build !race

package reactor_test

const raceEnabled = false
