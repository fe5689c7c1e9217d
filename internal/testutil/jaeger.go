package testutil

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Jaeger is a real Jaeger (the all-in-one binary of
// github.com/jaegertracing/jaeger/cmd/jaeger, in-memory storage) on
// 127.0.0.1, private to one test: OTLP over gRPC and HTTP in, the query
// API out, each on a free port, its own temporary directory. It is
// stopped when the test ends (thawed first if left frozen); Restart
// brings it back on the same ports, empty.
//
// `make test-deps` builds the binary once, at the version test/tools/
// go.mod pins, into the user's cache directory; TOLLGATE_JAEGER names
// another.
type Jaeger struct {
	// OTLPGRPC and OTLPHTTP are host:port of its OTLP receivers; Query
	// is host:port of its query API (HTTP).
	OTLPGRPC, OTLPHTTP, Query string

	serverProcess

	bin, dir, config string
}

// jaegerStartWait bounds how long Jaeger may take to answer: it starts
// its pipeline and the query service within a couple of seconds, more
// under the race detector and a loaded machine.
const jaegerStartWait = 60 * time.Second

// JaegerBinary returns the Jaeger binary the tests run: TOLLGATE_JAEGER,
// else the one `make test-deps` built into the cache.
func JaegerBinary() (string, error) {
	return toolBinary("TOLLGATE_JAEGER", "jaeger", "test/tools", "github.com/jaegertracing/jaeger")
}

// StartJaeger starts Jaeger on free loopback ports and waits until its
// receivers and query API answer. A missing binary fails the test (`make
// test` builds it) unless TOLLGATE_SKIP_JAEGER=1, which skips instead.
func StartJaeger(t testing.TB) *Jaeger {
	t.Helper()
	bin, err := JaegerBinary()
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		if os.Getenv("TOLLGATE_SKIP_JAEGER") == "1" {
			t.Skip("jaeger not built and TOLLGATE_SKIP_JAEGER=1")
		}
		t.Fatalf("jaeger binary: %v: `make test-deps` builds it (or set TOLLGATE_SKIP_JAEGER=1 to skip the tests that need it)", err)
	}
	j := &Jaeger{serverProcess: serverProcess{t: t, name: "jaeger"}, bin: bin, dir: t.TempDir()}
	j.serverProcess.start, j.where = j.start, func() string { return j.OTLPGRPC }
	t.Cleanup(j.Kill)
	var lastErr error
	for range 3 {
		port := func() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))) }
		j.OTLPGRPC, j.OTLPHTTP, j.Query = port(), port(), port()
		queryGRPC, health := port(), port()
		j.config = filepath.Join(j.dir, "jaeger.yaml")
		if err := os.WriteFile(j.config, []byte(jaegerConfig(j.OTLPGRPC, j.OTLPHTTP, j.Query, queryGRPC, health)), 0o600); err != nil {
			t.Fatal(err)
		}
		if lastErr = j.start(); lastErr == nil {
			return j
		}
	}
	t.Fatalf("starting jaeger: %v", lastErr)
	return nil
}

// jaegerConfig is the all-in-one pipeline with every port named (the
// defaults are fixed ports other tests would share) and no telemetry
// listener of its own.
func jaegerConfig(otlpGRPC, otlpHTTP, query, queryGRPC, health string) string {
	return fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics: {level: none}
    logs: {level: warn}
extensions:
  healthcheckv2:
    use_v2: true
    http: {endpoint: %q}
  jaeger_query:
    storage: {traces: memstore}
    http: {endpoint: %q}
    grpc: {endpoint: %q}
  jaeger_storage:
    backends:
      memstore:
        memory: {max_traces: 10000}
receivers:
  otlp:
    protocols:
      grpc: {endpoint: %q}
      http: {endpoint: %q}
processors:
  batch: {timeout: 50ms}
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, health, query, queryGRPC, otlpGRPC, otlpHTTP)
}

func (j *Jaeger) start() error {
	logFile := filepath.Join(j.dir, "jaeger.log")
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(j.bin, "--config", j.config)
	cmd.Dir, cmd.Stdout, cmd.Stderr = j.dir, out, out
	done, err := j.run(cmd)
	if err != nil {
		return err
	}
	return j.awaitReady(done, logFile, jaegerStartWait, j.ready)
}

// ready: the query API answers and both receivers accept connections.
func (j *Jaeger) ready() bool {
	for _, a := range []string{j.OTLPGRPC, j.OTLPHTTP} {
		c, err := net.DialTimeout("tcp", a, 200*time.Millisecond)
		if err != nil {
			return false
		}
		c.Close()
	}
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + j.Query + "/api/services")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode == http.StatusOK
}

// JaegerTrace is a trace as Jaeger's query API (/api/traces/{id}) gives
// it.
type JaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []JaegerSpan             `json:"spans"`
	Processes map[string]JaegerProcess `json:"processes"`
}

// JaegerSpan is one span of a JaegerTrace.
type JaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64       `json:"startTime"`
	Duration  int64       `json:"duration"`
	Tags      []JaegerTag `json:"tags"`
	Logs      []struct {
		Timestamp int64       `json:"timestamp"`
		Fields    []JaegerTag `json:"fields"`
	} `json:"logs"`
	ProcessID string `json:"processID"`
}

// JaegerTag is a span's tag or a log's field.
type JaegerTag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// JaegerProcess is the service a span came from.
type JaegerProcess struct {
	ServiceName string      `json:"serviceName"`
	Tags        []JaegerTag `json:"tags"`
}

// Tag returns the span's tag key as text ("" when it has none).
func (s *JaegerSpan) Tag(key string) string {
	for _, tg := range s.Tags {
		if tg.Key == key {
			return fmt.Sprint(tg.Value)
		}
	}
	return ""
}

// Parent returns the span id of the span's parent ("" for a root).
func (s *JaegerSpan) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Service names the service that sent span s.
func (tr *JaegerTrace) Service(s *JaegerSpan) string { return tr.Processes[s.ProcessID].ServiceName }

// Trace asks the query API for trace id (32 hex digits); nil when Jaeger
// has no such trace (yet).
func (j *Jaeger) Trace(t testing.TB, id string) *JaegerTrace {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + j.Query + "/api/traces/" + id)
	if err != nil {
		t.Fatalf("jaeger query: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("jaeger query %s: %d %s", id, resp.StatusCode, body)
	}
	var out struct {
		Data []JaegerTrace `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("jaeger query %s: %v", id, err)
	}
	if len(out.Data) == 0 {
		return nil
	}
	return &out.Data[0]
}

// WaitTrace polls the query API until trace id has at least spans spans,
// up to wait, and returns it; nil when it did not in time.
func (j *Jaeger) WaitTrace(t testing.TB, id string, spans int, wait time.Duration) *JaegerTrace {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		tr := j.Trace(t, id)
		if tr != nil && len(tr.Spans) >= spans {
			return tr
		}
		if time.Now().After(deadline) {
			return tr
		}
		time.Sleep(100 * time.Millisecond)
	}
}
