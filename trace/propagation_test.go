package trace

import (
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/codec"
)

const (
	tp      = "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"
	tpTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
)

var readBoth = []Formats{W3C, B3Single | B3Multi}

// TestReadFormats: requests as raw bytes off the wire, each read with the
// formats asked for: the caller's trace joined when its context is valid,
// a new trace started (never a crash) when it is not.
func TestReadFormats(t *testing.T) {
	for _, tc := range []struct {
		name, fields string
		read         []Formats
		trace        string // "" : a new trace
		parent       string
		decided      bool
		sampled      bool
	}{
		{"w3c", tp, readBoth, tpTrace, "00f067aa0ba902b7", true, true},
		{"b3 single", "b3: 80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90\r\n", readBoth,
			"80f198ee56343ba864fe8b2a57d3eff7", "e457b5a2e4d86bd1", true, true},
		{"b3 single, no decision", "b3: 80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1\r\n", readBoth,
			"80f198ee56343ba864fe8b2a57d3eff7", "e457b5a2e4d86bd1", false, false},
		{"b3 single, debug", "b3: 80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-d\r\n", readBoth,
			"80f198ee56343ba864fe8b2a57d3eff7", "e457b5a2e4d86bd1", true, true},
		{"b3 64-bit trace id, padded", "b3: 64fe8b2a57d3eff7-e457b5a2e4d86bd1-0\r\n", readBoth,
			"000000000000000064fe8b2a57d3eff7", "e457b5a2e4d86bd1", true, false},
		{"b3 multi", "X-B3-TraceId: 463ac35c9f6413ad48485a3953bb6124\r\nX-B3-SpanId: a2fb4a1d1a96d312\r\n" +
			"X-B3-ParentSpanId: 0020000000000001\r\nX-B3-Sampled: 1\r\n", readBoth,
			"463ac35c9f6413ad48485a3953bb6124", "a2fb4a1d1a96d312", true, true},
		{"b3 multi 64-bit, debug flag", "x-b3-traceid: 48485a3953bb6124\r\nx-b3-spanid: a2fb4a1d1a96d312\r\nx-b3-flags: 1\r\n", readBoth,
			"000000000000000048485a3953bb6124", "a2fb4a1d1a96d312", true, true},
		{"b3 lone deny: new trace, caller's decision", "b3: 0\r\n", readBoth, "", "", true, false},
		{"w3c first wins over b3", tp + "b3: 80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1\r\n", readBoth, tpTrace, "00f067aa0ba902b7", true, true},
		{"b3 read first when asked", tp + "b3: 80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1\r\n",
			[]Formats{B3Single | B3Multi, W3C}, "80f198ee56343ba864fe8b2a57d3eff7", "e457b5a2e4d86bd1", true, true},
		{"bad w3c, good b3", "traceparent: 00-00000000000000000000000000000000-00f067aa0ba902b7-01\r\nb3: 64fe8b2a57d3eff7-e457b5a2e4d86bd1\r\n",
			readBoth, "000000000000000064fe8b2a57d3eff7", "e457b5a2e4d86bd1", false, false},
		{"b3 not read unless asked", "b3: 80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1\r\n", []Formats{W3C}, "", "", false, false},
		{"b3 all-zero trace id", "b3: 00000000000000000000000000000000-e457b5a2e4d86bd1-1\r\n", readBoth, "", "", false, false},
		{"b3 all-zero span id", "b3: 80f198ee56343ba864fe8b2a57d3eff7-0000000000000000-1\r\n", readBoth, "", "", false, false},
		{"b3 upper case", "b3: 80F198EE56343BA864FE8B2A57D3EFF7-E457B5A2E4D86BD1-1\r\n", readBoth, "", "", false, false},
		{"b3 oversized", "b3: 80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90" + strings.Repeat("0", 2000) + "\r\n", readBoth, "", "", false, false},
		{"b3 48-bit trace id", "b3: 8b2a57d3eff7-e457b5a2e4d86bd1-1\r\n", readBoth, "", "", false, false},
		{"b3 bad sampling", "b3: 80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-x\r\n", readBoth, "", "", false, false},
		{"b3 bad parent", "b3: 80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-zz\r\n", readBoth, "", "", false, false},
		{"b3 trailing dash", "b3: 80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-\r\n", readBoth, "", "", false, false},
		{"b3 multi without span", "X-B3-TraceId: 463ac35c9f6413ad48485a3953bb6124\r\n", readBoth, "", "", false, false},
		{"b3 multi bad sampled", "X-B3-TraceId: 463ac35c9f6413ad48485a3953bb6124\r\nX-B3-SpanId: a2fb4a1d1a96d312\r\nX-B3-Sampled: yes\r\n", readBoth, "", "", false, false},
		{"b3 multi legacy true", "X-B3-TraceId: 463ac35c9f6413ad48485a3953bb6124\r\nX-B3-SpanId: a2fb4a1d1a96d312\r\nX-B3-Sampled: true\r\n", readBoth,
			"463ac35c9f6413ad48485a3953bb6124", "a2fb4a1d1a96d312", true, true},
		{"w3c oversized future version", "traceparent: 01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + strings.Repeat("a", 600) + "\r\n", readBoth, "", "", false, false},
		{"w3c binary junk", "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e47\xc3\xa9-00f067aa0ba902b7-01\r\n", readBoth, "", "", false, false},
		{"nothing read", tp, []Formats{}, "", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, r := checked(t, "GET / HTTP/1.1\r\nHost: a\r\n"+tc.fields+"\r\n")
			var c Context
			BeginWith(&c, r, &req.Header, tc.read, W3C)
			if tc.trace == "" {
				if c.ParentID != [8]byte{} || c.TraceID == [16]byte{} {
					t.Fatalf("want a new trace: trace %x parent %x", c.TraceID, c.ParentID)
				}
				for _, known := range []string{tpTrace, "80f198ee56343ba864fe8b2a57d3eff7", "463ac35c9f6413ad48485a3953bb6124"} {
					if string(c.TraceHex[:]) == known {
						t.Fatalf("a refused context's trace id was kept: %s", known)
					}
				}
			} else if string(c.TraceHex[:]) != tc.trace || hex.EncodeToString(c.ParentID[:]) != tc.parent {
				t.Fatalf("trace %s parent %x, want %s %s", c.TraceHex[:], c.ParentID, tc.trace, tc.parent)
			}
			if c.Decided != tc.decided || (c.Flags&FlagSampled != 0) != tc.sampled {
				t.Fatalf("decided %v flags %d, want %v sampled %v", c.Decided, c.Flags, tc.decided, tc.sampled)
			}
			if c.SpanID == c.ParentID || c.SpanID == [8]byte{} {
				t.Fatalf("gateway span %x", c.SpanID)
			}
		})
	}
}

// TestWriteFormats: what the backend gets in each format, one trace id
// throughout, the gateway's span as the parent; a client's own copies
// never pass (the fields are the gateway's), and tracestate goes on only
// with its traceparent.
func TestWriteFormats(t *testing.T) {
	req, r := checked(t, "GET / HTTP/1.1\r\nHost: a\r\n"+tp+"tracestate: vendor=abc\r\n"+
		"X-B3-TraceId: 463ac35c9f6413ad48485a3953bb6124\r\nX-B3-SpanId: a2fb4a1d1a96d312\r\n\r\n")
	var c Context
	BeginWith(&c, r, &req.Header, readBoth, W3C|B3Single|B3Multi)
	var l codec.FieldList
	Forward(&c, &l)
	got := map[string]string{}
	for i := range l.Len() {
		k, v := l.Field(i)
		got[strings.ToLower(string(k))] = string(v)
	}
	span := string(c.SpanHex[:])
	want := map[string]string{
		"traceparent":       "00-" + tpTrace + "-" + span + "-01",
		"tracestate":        "vendor=abc",
		"b3":                tpTrace + "-" + span + "-1-00f067aa0ba902b7",
		"x-b3-traceid":      tpTrace,
		"x-b3-spanid":       span,
		"x-b3-parentspanid": "00f067aa0ba902b7",
		"x-b3-sampled":      "1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want)+1 { // and X-Request-Id
		t.Errorf("fields %v", got)
	}
	for _, name := range []string{"traceparent", "tracestate", "b3", "X-B3-TraceId", "X-B3-SpanId", "X-B3-Sampled", "X-B3-Flags", "X-B3-ParentSpanId"} {
		var owned bool
		for _, o := range codec.GatewayOwned {
			owned = owned || strings.EqualFold(o, name)
		}
		if !owned {
			t.Errorf("%s is not the gateway's: a client's copy would be forwarded", name)
		}
	}

	// A recorded request's tries are spans of their own: each names its
	// try as the backend's parent, and B3 the gateway's span as the try's.
	c.Rec = NewRecording()
	for _, try := range [][8]byte{{0xaa, 1}, {0xbb, 2}} {
		l.Reset()
		Forward(&c, &l)
		c.ForwardAttempt(&l, &try)
		tryHex := hex.EncodeToString(try[:])
		for k, v := range map[string]string{
			"traceparent":       "00-" + tpTrace + "-" + tryHex + "-01",
			"b3":                tpTrace + "-" + tryHex + "-1-" + span,
			"x-b3-spanid":       tryHex,
			"x-b3-parentspanid": span,
		} {
			if got := string(l.Get(k)); got != v {
				t.Errorf("try %s: %s = %q, want %q", tryHex, k, got, v)
			}
		}
	}
	c.ForwardAttempt(&l, nil) // a try the recording had no room for
	if got := string(l.Get("traceparent")); got != "00-"+tpTrace+"-"+span+"-01" {
		t.Errorf("a try without a span: traceparent %q", got)
	}
	c.Rec.Release()
	c.Rec = nil

	// A refused traceparent takes its tracestate with it.
	req, r = checked(t, "GET / HTTP/1.1\r\nHost: a\r\ntraceparent: 00-zz\r\ntracestate: vendor=abc\r\n\r\n")
	BeginWith(&c, r, &req.Header, readBoth, W3C)
	l.Reset()
	Forward(&c, &l)
	for i := range l.Len() {
		if k, _ := l.Field(i); strings.EqualFold(string(k), "tracestate") || strings.EqualFold(string(k), "b3") {
			t.Fatalf("%s forwarded", k)
		}
	}
}

// TestHostileValuesNeverCrash: random bytes in every field read.
func TestHostileValuesNeverCrash(t *testing.T) {
	alphabet := []byte("0123456789abcdefABCDEF-xyz \t\x00\xff")
	value := func() string {
		n := rand.IntN(90)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rand.IntN(len(alphabet))]
		}
		return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", ""))
	}
	for range 3000 {
		raw := "GET / HTTP/1.1\r\nHost: a\r\n"
		for _, name := range []string{"traceparent", "b3", "X-B3-TraceId", "X-B3-SpanId", "X-B3-Sampled", "X-B3-Flags"} {
			if rand.IntN(2) == 0 {
				raw += name + ": " + value() + "\r\n"
			}
		}
		req, r := checked(t, raw+"\r\n")
		var c Context
		BeginWith(&c, r, &req.Header, readBoth, W3C|B3Single|B3Multi)
		var l codec.FieldList
		Forward(&c, &l)
		if c.TraceID == [16]byte{} {
			t.Fatalf("all-zero trace id from %q", raw)
		}
	}
}
