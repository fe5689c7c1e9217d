package record

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Entry is one line of a recording file: a request as the client sent it
// to the gateway (the routed Host, the canonical target, the header fields
// in order) and the answer it got, secrets masked. Bodies are text, or
// base64 in the _b64 field when they are not UTF-8; a body cut at the
// rule's max_body says so, and one not kept says why.
type Entry struct {
	Time      time.Time `json:"time"`
	Route     string    `json:"route"`
	Consumer  string    `json:"consumer,omitempty"`
	TraceID   string    `json:"trace_id,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
	Service   string    `json:"service,omitempty"`

	Method     string      `json:"method"`
	Host       string      `json:"host"`
	Target     string      `json:"target"`
	ReqHeaders [][2]string `json:"req_headers"`
	ReqBody    string      `json:"req_body,omitempty"`
	ReqBodyB64 []byte      `json:"req_body_b64,omitempty"`
	// ReqBodyCut: longer than max_body, only the start was kept;
	// ReqBodyOmitted: not kept ("streamed", "encoded", "unreadable json", "multipart");
	// ReqBodyDecoded: kept decoded from its Content-Encoding.
	ReqBodyCut     bool   `json:"req_body_cut,omitempty"`
	ReqBodyOmitted string `json:"req_body_omitted,omitempty"`
	ReqBodyDecoded bool   `json:"req_body_decoded,omitempty"`

	Status          int         `json:"status"`
	RespHeaders     [][2]string `json:"resp_headers"`
	RespBody        string      `json:"resp_body,omitempty"`
	RespBodyB64     []byte      `json:"resp_body_b64,omitempty"`
	RespBodyCut     bool        `json:"resp_body_cut,omitempty"`
	RespBodyOmitted string      `json:"resp_body_omitted,omitempty"`
	RespBodyDecoded bool        `json:"resp_body_decoded,omitempty"`

	// LatencyUS is the gateway's time for the whole request, UpstreamUS
	// the upstream exchange's, in microseconds.
	LatencyUS  int64 `json:"latency_us"`
	UpstreamUS int64 `json:"upstream_us"`
}

// RequestBody returns the recorded request body.
func (e *Entry) RequestBody() []byte {
	if e.ReqBodyB64 != nil {
		return e.ReqBodyB64
	}
	return []byte(e.ReqBody)
}

// ResponseBody returns the recorded answer's body.
func (e *Entry) ResponseBody() []byte {
	if e.RespBodyB64 != nil {
		return e.RespBodyB64
	}
	return []byte(e.RespBody)
}

// RequestWhole reports whether the request was kept whole, so that it can
// be sent again as it was.
func (e *Entry) RequestWhole() bool { return !e.ReqBodyCut && e.ReqBodyOmitted == "" }

// ResponseWhole reports whether the answer's body was kept whole, so that
// it can be compared.
func (e *Entry) ResponseWhole() bool { return !e.RespBodyCut && e.RespBodyOmitted == "" }

// Latency returns the gateway's recorded time for the request.
func (e *Entry) Latency() time.Duration { return time.Duration(e.LatencyUS) * time.Microsecond }

// RequestHeader returns the first value of a request header field (names
// compared case-insensitively), "" when absent.
func (e *Entry) RequestHeader(name string) string { return first(e.ReqHeaders, name) }

// ResponseHeader returns the first value of an answer's header field.
func (e *Entry) ResponseHeader(name string) string { return first(e.RespHeaders, name) }

func first(hs [][2]string, name string) string {
	for _, h := range hs {
		if strings.EqualFold(h[0], name) {
			return h[1]
		}
	}
	return ""
}

// MaxLine bounds one line of a recording file: two bodies at the largest
// max_body, base64, and their headers.
const MaxLine = 64 << 20

// Scan reads a recording file line by line and calls visit with each
// entry (line numbers from 1), or with the error that line has (a line cut
// short by a crash, say); visit's error stops the scan and is returned.
func Scan(r io.Reader, visit func(line int, e *Entry, err error) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e Entry
		err := json.Unmarshal(sc.Bytes(), &e)
		if err != nil {
			err = fmt.Errorf("line %d: %w", n, err)
		}
		if err := visit(n, &e, err); err != nil {
			return err
		}
	}
	return sc.Err()
}
