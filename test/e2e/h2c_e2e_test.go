//go:build e2e

package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/testutil"
)

// TestH2CAgainstTheBinary: the binary's cleartext port, beside a TLS
// listener, serves curl speaking h2 with prior knowledge; a rapid-reset
// flood over h2c is cut off and counted under h2c in /admin/stats, apart
// from the TLS listener's http2.
func TestH2CAgainstTheBinary(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is needed (make test-deps installs it)")
	}
	e := startTLSProc(t)
	out, err := exec.Command(curl, "-sS", "-i", "--http2-prior-knowledge", "http://"+e.p.addr+"/hello").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "HTTP/2 200") {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	sent, cut, err := testutil.H2RapidReset(e.p.addr, nil, "api.test", "/flood", 20_000)
	if err != nil || !cut {
		t.Fatalf("flood of %d streams: cut %v, %v", sent, cut, err)
	}
	var st struct {
		H2C   *struct{ Refused map[string]int64 } `json:"h2c"`
		HTTP2 *struct{ Refused map[string]int64 } `json:"http2"`
	}
	if err := json.Unmarshal(adminGet(t, e.p.admin, "/admin/stats"), &st); err != nil {
		t.Fatal(err)
	}
	if st.H2C == nil || st.HTTP2 == nil {
		t.Fatalf("/admin/stats: h2c %v, http2 %v", st.H2C, st.HTTP2)
	}
	counted := int64(0)
	for reason, n := range st.H2C.Refused {
		if strings.HasSuffix(reason, "early_resets") {
			counted += n
		}
	}
	if counted == 0 || len(st.HTTP2.Refused) != 0 {
		t.Fatalf("refusals: h2c %v, http2 %v", st.H2C.Refused, st.HTTP2.Refused)
	}
	if out, err := exec.Command(curl, "-sS", "-i", "--http2-prior-knowledge", "http://"+e.p.addr+"/after").CombinedOutput(); err != nil ||
		!strings.HasPrefix(string(out), "HTTP/2 200") {
		t.Fatalf("after the flood: %v\n%s", err, out)
	}
}
