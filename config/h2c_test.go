package config

import (
	"strings"
	"testing"
)

// TestClientH2C: h2c is on by default, off by the file or TOLLGATE_H2C
// (which overrides the file), a value that is not a boolean is refused,
// and turning it off or on is a restart-only change.
func TestClientH2C(t *testing.T) {
	load := func(src string, vars map[string]string) (*File, error) {
		f, err := Parse("t", []byte(src), env(vars))
		if err != nil {
			return nil, err
		}
		if err := ApplyEnv(f, env(vars)); err != nil {
			return nil, err
		}
		f.Defaults()
		return f, nil
	}
	for _, tc := range []struct {
		src  string
		vars map[string]string
		want bool
	}{
		{"listen: \":1\"\n", nil, true},
		{"client: {h2c: false}\n", nil, false},
		{"client: {h2c: true}\n", map[string]string{"TOLLGATE_H2C": "false"}, false},
		{"client: {h2c: false}\n", map[string]string{"TOLLGATE_H2C": "1"}, true},
	} {
		f, err := load(tc.src, tc.vars)
		if err != nil {
			t.Fatalf("%q %v: %v", tc.src, tc.vars, err)
		}
		if f.Client.ServesH2C() != tc.want {
			t.Fatalf("%q %v: h2c %v, want %v", tc.src, tc.vars, f.Client.ServesH2C(), tc.want)
		}
	}
	if _, err := load("listen: \":1\"\n", map[string]string{"TOLLGATE_H2C": "sometimes"}); err == nil || !strings.Contains(err.Error(), "TOLLGATE_H2C") {
		t.Fatalf("TOLLGATE_H2C=sometimes: %v", err)
	}
	if _, err := load("client: {h2c: maybe}\n", nil); err == nil {
		t.Fatal("client.h2c: maybe was taken")
	}
	on, _ := load("listen: \":1\"\n", nil)
	off, _ := load("listen: \":1\"\nclient: {h2c: false}\n", nil)
	if got := RestartOnlyChanges(on, off); strings.Join(got, ",") != "client.h2c" {
		t.Fatalf("restart-only changes %q", got)
	}
}
