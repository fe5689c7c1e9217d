package record

import (
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/config"
)

func TestRecordingConfigErrors(t *testing.T) {
	const route = "services:\n  s: {instances: [{addr: \"127.0.0.1:1\"}]}\nroutes:\n  - name: r\n    match: {prefix: /}\n    service: s\n"
	for yaml, want := range map[string]string{
		route + "    record: {sample: 0.5}\n":                                     "test.yaml:7:13: route \"r\": record needs the top-level recording section",
		"recording: {max_files: 3}\n" + route:                                     "test.yaml:1:12: recording.dir is required",
		"recording: {dir: recordings, max_file_bytes: 100}\n" + route:             "recording.max_file_bytes 100: want at least 4096",
		"recording: {dir: recordings, queue: -1}\n" + route:                       "recording.queue -1",
		"recording: {dir: recordings, max_file_age: 10ms}\n" + route:              "recording.max_file_age 10ms",
		"recording: {dir: recordings}\n" + route + "    record: {smaple: 1}\n":    "test.yaml:8:14: unknown setting \"routes[0].record.smaple\"",
		"recording: {dir: recordings}\n" + route + "    record: {mask: [path]}\n": "record.mask: path cannot be masked",
	} {
		if err := gatewaytest.CompileErr(yaml); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s\n got %v\nwant %q", yaml, err, want)
		}
	}
	if err := gatewaytest.CompileErr("recording: {dir: recordings}\n" + route + "    record: {sample: 0.05, max_body: 65536, mask: [json.card.number]}\n"); err != nil {
		t.Fatal(err)
	}
}

// TestRecordingSurvivesReload: an unchanged recording section keeps its
// writer (and queue) across a reload, and an operator's switch stays
// until the file says otherwise.
func TestRecordingSurvivesReload(t *testing.T) {
	comp := config.NewCompiler()
	defer comp.Close()
	dir := t.TempDir()
	load := func(on string) *config.Snapshot {
		yaml := "recording: {dir: \"" + dir + "\"}\nservices:\n  s: {instances: [{addr: \"127.0.0.1:1\"}]}\n" +
			"routes:\n  - name: r\n    match: {prefix: /}\n    record: {on: " + on + "}\n    service: s\n"
		f, err := config.Parse("test.yaml", []byte(yaml), nil)
		if err != nil {
			t.Fatal(err)
		}
		f.Defaults()
		snap, err := comp.Compile(f, "test.yaml")
		if err != nil {
			t.Fatal(err)
		}
		comp.Release(snap)
		return snap
	}
	rec := func(s *config.Snapshot) *Recorder {
		return s.Routes[0].Chain.Filters()[0].(*Recorder)
	}
	a := rec(load("true"))
	a.Switch(false)
	b := rec(load("true"))
	if b.Writer() != a.Writer() || b.On() {
		t.Fatal("a reload replaced the writer or undid the operator's switch")
	}
	if c := rec(load("false")); c.On() {
		t.Fatal("the file's new word did not win")
	}
}
