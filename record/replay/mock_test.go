package replay

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/record"
	"gopkg.in/yaml.v3"
)

func TestToMock(t *testing.T) {
	answer := func(body string, extra ...[2]string) record.Entry {
		return record.Entry{Time: t0, Route: "coupons", Method: "GET", Host: "h", Target: "/c", Status: 200,
			RespHeaders: append([][2]string{{"Content-Type", "application/json"}, {"Date", "x"}, {"Set-Cookie", "***"}}, extra...),
			RespBody:    body}
	}
	cut := answer(`{"coupons":[`)
	cut.RespBodyCut = true
	other := answer(`{"x":1}`)
	other.Route = "other"
	file := recording(t, answer(`{"coupons":[]}`), answer(`{"coupons":[{"id":1}]}`, [2]string{"X-Shard", "3"}),
		answer(`{"coupons":[{"id":1}]}`, [2]string{"X-Shard", "3"}), cut, other)
	m, err := ToMock([]string{file}, "coupons", 20)
	if err != nil {
		t.Fatal(err)
	}
	if m.Recorded != 4 || m.Unusable != 1 || len(m.Answers) != 2 || m.Counts[0] != 2 {
		t.Fatalf("mock %+v", m)
	}
	y, err := m.YAML("coupons")
	if err != nil {
		t.Fatal(err)
	}
	// It reads back as a route's mock block: the most frequent answer
	// first, with the headers worth repeating.
	var doc struct {
		Mock struct {
			Pick      string
			Responses []struct {
				Status      int
				ContentType string `yaml:"content_type"`
				Headers     map[string]string
				Body        string
			}
		}
	}
	if err := yaml.Unmarshal(y, &doc); err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	r := doc.Mock.Responses
	if doc.Mock.Pick != "round_robin" || len(r) != 2 || r[0].Body != `{"coupons":[{"id":1}]}` || r[0].Headers["X-Shard"] != "3" ||
		len(r[0].Headers) != 1 || r[1].ContentType != "application/json" || r[1].Status != 200 {
		t.Fatalf("YAML:\n%s", y)
	}
	if !strings.HasPrefix(string(y), `# route "coupons": 2 distinct answers of 4 recorded`) {
		t.Fatalf("header line: %s", y)
	}
	if m, _ = ToMock([]string{file}, "coupons", 1); len(m.Answers) != 1 {
		t.Fatalf("max 1: %d answers", len(m.Answers))
	}
	if m, _ = ToMock([]string{file}, "none", 5); m.Recorded != 0 {
		t.Fatal("answers of another route")
	} else if _, err := m.YAML("none"); err == nil {
		t.Fatal("an empty mock rendered")
	}
}
