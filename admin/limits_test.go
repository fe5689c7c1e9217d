package admin

import (
	"net"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/config"
)

func TestLimitsNeedTokenAndListRules(t *testing.T) {
	snap := &config.Snapshot{Version: 4, File: &config.File{}}
	s := New(Deps{
		Token:    "s3cret",
		Snapshot: func() *config.Snapshot { return snap },
		Limits:   func() any { return []map[string]any{{"rule": "api.ip", "mode": "local"}} },
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { ln.Close() })
	base := "http://" + ln.Addr().String()
	if st, _ := do(t, "GET", base+"/admin/limits", ""); st != 401 {
		t.Fatalf("no token: %d", st)
	}
	st, body := do(t, "GET", base+"/admin/limits", "s3cret")
	if st != 200 || !strings.Contains(body, `"version":4`) || !strings.Contains(body, `"rule":"api.ip"`) {
		t.Fatalf("%d %s", st, body)
	}
}
