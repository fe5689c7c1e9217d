package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReplayArguments(t *testing.T) {
	file := filepath.Join(t.TempDir(), "record-1.jsonl")
	line := `{"time":"2026-01-01T00:00:00Z","route":"coupons","method":"GET","host":"h","target":"/c","req_headers":[],"status":200,"resp_headers":[["Content-Type","application/json"]],"resp_body":"{\"coupons\":[]}","latency_us":1,"upstream_us":1}`
	if err := os.WriteFile(file, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"replay"}, 2, "give at least one recording file"},
		{[]string{"replay", file}, 2, "--target is required"},
		{[]string{"replay", file, "--target", "ftp://x"}, 2, "target \"ftp://x\""},
		{[]string{"replay", file, "--target", "http://127.0.0.1:1", "--app-key", "a"}, 2, "in pairs: 1 keys, 0 secrets"},
		{[]string{"replay", file, "--target", "http://127.0.0.1:1", "--rate", "fast"}, 2, "--rate \"fast\""},
		{[]string{"replay", file, "--target", "http://127.0.0.1:1", "--ignore", "ts"}, 2, "ignore \"ts\""},
		{[]string{"replay", file, "--target", "http://127.0.0.1:1", "--secret-env", "TOLLGATE_TEST_UNSET", "--app-key", "a"}, 2, "TOLLGATE_TEST_UNSET is not set"},
		{[]string{"replay", "--to-mock", file}, 2, "--to-mock needs --route"},
		{[]string{"replay", "--to-mock", file, "--route", "coupons"}, 0, "- status: 200"},
		{[]string{"replay", "--to-mock", file, "--route", "none"}, 2, "no usable answers"},
		{[]string{"replay", "--help"}, 0, "Usage: tollgate replay"},
		// The target refuses connections: one error, beyond --max-diff 0.
		{[]string{"replay", file, "--target", "http://127.0.0.1:1", "--rate", "max", "--timeout", "1s"}, 1, "errors            1"},
		{[]string{"replay", file, "--target", "http://127.0.0.1:1", "--max-diff", "1"}, 0, "errors            1"},
	} {
		var out, errOut bytes.Buffer
		code := mainWithArgs(tc.args, &out, &errOut)
		if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.want) {
			t.Errorf("%q: exit %d, want %d with %q\n%s%s", tc.args, code, tc.code, tc.want, out.String(), errOut.String())
		}
	}
}
