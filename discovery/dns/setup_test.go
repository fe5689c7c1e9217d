package dns

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/tollgate/tollgate/discovery"
)

// node parses YAML text into the mapping a decoder reads.
func node(t *testing.T, text string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("%q: %v", text, err)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	return doc.Content[0]
}

// buildTarget builds the provider from its `discovery.dns` YAML and a
// target from a service's `discover` YAML, through the strict decoder
// the discovery package hands providers.
func buildTarget(t *testing.T, providerYAML, discoverYAML string) (discovery.Target, error) {
	t.Helper()
	p, err := newProvider(discovery.Decoder(node(t, providerYAML)), discovery.Env{})
	if err != nil {
		return nil, err
	}
	return p.Target("stock", discovery.Decoder(node(t, discoverYAML)))
}

func mustTarget(t *testing.T, providerYAML, discoverYAML string) discovery.Target {
	t.Helper()
	tg, err := buildTarget(t, providerYAML, discoverYAML)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// servers writes a provider section for addrs with short clamps, so that
// the tests see changes within a second or two.
func servers(addrs ...string) string {
	return fmt.Sprintf("{servers: [%s], min_ttl: 200ms, max_ttl: 1s, timeout: 300ms}", strings.Join(addrs, ", "))
}

// watcher runs a target's Watch and records what it reports.
type watcher struct {
	updates chan []discovery.Instance
	fails   chan error
	cancel  context.CancelFunc
	done    chan struct{}

	mu       sync.Mutex
	nUpdates int
	nFails   int
}

func startWatch(t *testing.T, tg discovery.Target) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{
		updates: make(chan []discovery.Instance, 100),
		fails:   make(chan error, 1000),
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	go func() {
		defer close(w.done)
		tg.Watch(ctx, func(set []discovery.Instance) {
			w.mu.Lock()
			w.nUpdates++
			w.mu.Unlock()
			w.updates <- set
		}, func(err error) {
			w.mu.Lock()
			w.nFails++
			w.mu.Unlock()
			select {
			case w.fails <- err:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-w.done:
		case <-time.After(5 * time.Second):
			t.Errorf("Watch did not return within 5s of its context's end")
		}
	})
	return w
}

// nextUpdate waits for the next update; a failure reported meanwhile
// fails the test when failOK is false. Waits across a server restart
// (DNSMasq.SetConfig) pass true: a query may land while it is down.
func (w *watcher) nextUpdate(t *testing.T, within time.Duration, failOK bool) []discovery.Instance {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case set := <-w.updates:
			return set
		case err := <-w.fails:
			if !failOK {
				t.Fatalf("fail(%v) while waiting for an update", err)
			}
		case <-timer.C:
			t.Fatalf("no update within %v", within)
		}
	}
}

// nextFail waits for a failure; an update meanwhile fails the test.
func (w *watcher) nextFail(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-w.fails:
		return err
	case set := <-w.updates:
		t.Fatalf("update(%v) while waiting for a failure", set)
	case <-time.After(within):
		t.Fatalf("no failure within %v", within)
	}
	return nil
}

// drainFails forgets the failures reported so far.
func (w *watcher) drainFails() {
	for {
		select {
		case <-w.fails:
		default:
			return
		}
	}
}

// counts returns how many updates and failures were reported so far.
func (w *watcher) counts() (updates, fails int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nUpdates, w.nFails
}

// addrs lists a set as "addr/weight/priority" strings, for comparison.
func addrs(set []discovery.Instance) string {
	parts := make([]string, 0, len(set))
	for _, in := range set {
		s := fmt.Sprintf("%s/%d", in.Addr, in.Weight)
		if p, ok := in.Meta["priority"]; ok {
			s += "/p" + p
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}
