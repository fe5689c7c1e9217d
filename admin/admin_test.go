package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
)

func startAdmin(t *testing.T, token string, reload func() (*config.Snapshot, error)) string {
	t.Helper()
	snap := &config.Snapshot{Version: 7, Source: "x.yaml", File: &config.File{NodeID: "n1"}}
	s := New(Deps{
		Token:    token,
		Snapshot: func() *config.Snapshot { return snap },
		Reload:   reload,
		Stats:    func() any { return map[string]int{"requests": 3} },
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { ln.Close() })
	return "http://" + ln.Addr().String()
}

func do(t *testing.T, method, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestReloadNeedsToken(t *testing.T) {
	reloads := 0
	base := startAdmin(t, "s3cret", func() (*config.Snapshot, error) {
		reloads++
		if reloads == 2 {
			return nil, errors.New("test.yaml:3: bad")
		}
		return &config.Snapshot{Version: 8, File: &config.File{}}, nil
	})
	if st, _ := do(t, "POST", base+"/admin/reload", ""); st != 401 {
		t.Fatalf("no token: %d", st)
	}
	if st, _ := do(t, "POST", base+"/admin/reload", "wrong"); st != 401 {
		t.Fatalf("wrong token: %d", st)
	}
	if st, body := do(t, "POST", base+"/admin/reload", "s3cret"); st != 200 || !strings.Contains(body, `"version":8`) {
		t.Fatalf("reload: %d %s", st, body)
	}
	if st, body := do(t, "POST", base+"/admin/reload", "s3cret"); st != 422 || !strings.Contains(body, "test.yaml:3: bad") {
		t.Fatalf("failed reload: %d %s", st, body)
	}
	// With a token set, reads need it too.
	if st, _ := do(t, "GET", base+"/admin/config", ""); st != 401 {
		t.Fatalf("config without the token: %d", st)
	}
	if st, body := do(t, "GET", base+"/admin/config", "s3cret"); st != 200 || !strings.Contains(body, `"version":7`) {
		t.Fatalf("config: %d %s", st, body)
	}
	if st, _ := do(t, "GET", base+"/debug/pprof/", ""); st != 401 {
		t.Fatalf("profiles without the token: %d", st)
	}
}

func TestChangesOffWithoutToken(t *testing.T) {
	base := startAdmin(t, "", func() (*config.Snapshot, error) { t.Fatal("reloaded"); return nil, nil })
	if st, body := do(t, "POST", base+"/admin/reload", "anything"); st != 403 || !strings.Contains(body, "token not configured") {
		t.Fatalf("reload without configured token: %d %s", st, body)
	}
	if st, body := do(t, "GET", base+"/admin/stats", ""); st != 200 || !strings.Contains(body, `"requests":3`) {
		t.Fatalf("stats: %d %s", st, body)
	}
}

func TestRevoke(t *testing.T) {
	var got []string
	snap := &config.Snapshot{Version: 1, File: &config.File{}}
	s := New(Deps{Token: "t", Snapshot: func() *config.Snapshot { return snap }, Stats: func() any { return nil },
		Revoke: func(member string, ttl time.Duration) error { got = append(got, member+" "+ttl.String()); return nil }})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { ln.Close() })
	post := func(token, body string) int {
		req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/admin/revoke", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post("t", `{"jti":"abc","ttl":"1h"}`); st != 200 {
		t.Fatalf("revoke jti: %d", st)
	}
	if st := post("t", `{"sub":"user-7"}`); st != 200 {
		t.Fatalf("revoke sub: %d", st)
	}
	for _, bad := range []string{`{}`, `{"jti":"a","sub":"b"}`, `{"jti":"a","ttl":"-1h"}`, `nope`} {
		if st := post("t", bad); st != 400 {
			t.Fatalf("%s: %d, want 400", bad, st)
		}
	}
	if st := post("wrong", `{"jti":"x"}`); st != 401 {
		t.Fatalf("wrong token: %d", st)
	}
	if strings.Join(got, ",") != "jti:abc 1h0m0s,sub:user-7 24h0m0s" {
		t.Fatalf("revocations %v", got)
	}
}

// TestRevokeLongIDs: an id of any length a token can carry is stored
// whole, as the JWT filter looks it up; none is cut or refused for its
// length alone.
func TestRevokeLongIDs(t *testing.T) {
	var got []string
	snap := &config.Snapshot{Version: 1, File: &config.File{}}
	s := New(Deps{Token: "t", Snapshot: func() *config.Snapshot { return snap }, Stats: func() any { return nil },
		Revoke: func(member string, ttl time.Duration) error { got = append(got, member); return nil }})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { ln.Close() })
	post := func(body map[string]string) int {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/admin/revoke", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer t")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	jti := strings.Repeat("j", 253)
	escaped := strings.Repeat("\x01", 12<<10/4) // 6 bytes each in JSON
	sub := strings.Repeat("s", 16<<10)
	for _, tc := range []struct{ kind, id string }{{"jti", jti}, {"jti", escaped}, {"sub", sub}} {
		got = nil
		if st := post(map[string]string{tc.kind: tc.id}); st != 200 || len(got) != 1 || got[0] != tc.kind+":"+tc.id {
			t.Fatalf("%s of %d bytes: status %d, stored %d members", tc.kind, len(tc.id), st, len(got))
		}
	}
	if st := post(map[string]string{"sub": sub + "x"}); st != 400 {
		t.Fatalf("an id longer than any token: %d, want 400", st)
	}
}
