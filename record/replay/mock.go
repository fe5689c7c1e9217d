package replay

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tollgate/tollgate/record"
	"gopkg.in/yaml.v3"
)

// MockAnswer is one response of a route's mock block (the shape of the
// configuration's mock.responses items).
type MockAnswer struct {
	Status      int               `yaml:"status"`
	ContentType string            `yaml:"content_type,omitempty"`
	Headers     map[string]string `yaml:"headers,omitempty"`
	Body        string            `yaml:"body"`
}

// Mock is what ToMock found: the distinct answers, most frequent first,
// and how many recorded answers there were and could not be used.
type Mock struct {
	Answers  []MockAnswer
	Counts   []int
	Recorded int
	// Unusable answers: a body not recorded whole, or not text.
	Unusable int
}

// notMocked are answer fields a mock does not repeat: the connection's,
// those the gateway sets itself, and those that describe one exchange.
var notMocked = map[string]bool{
	"content-type": true, "content-length": true, "content-encoding": true, "transfer-encoding": true,
	"connection": true, "keep-alive": true, "date": true, "server": true, "set-cookie": true,
	"traceparent": true, "x-request-id": true, "retry-after": true, "x-ratelimit-limit": true,
	"x-ratelimit-remaining": true, "x-ratelimit-reset": true, "etag": true, "last-modified": true, "age": true,
}

// ToMock collects the distinct answers route gave in the recording files,
// at most max of them (the most frequent).
func ToMock(files []string, route string, max int) (*Mock, error) {
	type seen struct {
		a     MockAnswer
		n     int
		first int
	}
	byKey := map[string]*seen{}
	m := &Mock{}
	order := 0
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		err = record.Scan(f, func(_ int, e *record.Entry, err error) error {
			if err != nil || e.Route != route {
				return nil
			}
			m.Recorded++
			body := e.ResponseBody()
			if !e.ResponseWhole() || !utf8.Valid(body) {
				m.Unusable++
				return nil
			}
			a := MockAnswer{Status: e.Status, ContentType: e.ResponseHeader("Content-Type"), Body: string(body)}
			var key strings.Builder
			fmt.Fprintf(&key, "%d\x00%s\x00%s", a.Status, a.ContentType, a.Body)
			for _, h := range e.RespHeaders {
				if notMocked[strings.ToLower(h[0])] || masked(h[1]) {
					continue
				}
				if a.Headers == nil {
					a.Headers = map[string]string{}
				}
				if _, dup := a.Headers[h[0]]; !dup {
					a.Headers[h[0]] = h[1]
					fmt.Fprintf(&key, "\x00%s:%s", h[0], h[1])
				}
			}
			if s := byKey[key.String()]; s != nil {
				s.n++
				return nil
			}
			byKey[key.String()] = &seen{a: a, n: 1, first: order}
			order++
			return nil
		})
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	all := make([]*seen, 0, len(byKey))
	for _, s := range byKey {
		all = append(all, s)
	}
	slices.SortFunc(all, func(a, b *seen) int { return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.first, b.first)) })
	for _, s := range all[:min(max, len(all))] {
		m.Answers = append(m.Answers, s.a)
		m.Counts = append(m.Counts, s.n)
	}
	return m, nil
}

// YAML renders the mock block for the route, ready to paste under it in
// place of its service (round robin over the answers: each comes back in
// turn, whatever its share of the recording).
func (m *Mock) YAML(route string) ([]byte, error) {
	if len(m.Answers) == 0 {
		return nil, fmt.Errorf("no usable answers of route %q in the recording (%d recorded, %d not whole or not text)",
			route, m.Recorded, m.Unusable)
	}
	pick := "first"
	if len(m.Answers) > 1 {
		pick = "round_robin"
	}
	var doc struct {
		Mock struct {
			Pick      string       `yaml:"pick"`
			Responses []MockAnswer `yaml:"responses"`
		} `yaml:"mock"`
	}
	doc.Mock.Pick, doc.Mock.Responses = pick, m.Answers
	body, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, err
	}
	head := fmt.Sprintf("# route %q: %d distinct answers of %d recorded", route, len(m.Answers), m.Recorded)
	if m.Unusable > 0 {
		head += fmt.Sprintf(" (%d not usable: cut, not kept or not text)", m.Unusable)
	}
	return append([]byte(head+"\n"), body...), nil
}
