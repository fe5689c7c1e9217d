package record

import (
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// Settings is the top-level `recording` section: where the routes' record
// rules write and how much of the disk they may take.
//
//	recording: {dir: /var/lib/tollgate/recordings, max_file_bytes: 104857600, max_files: 20}
type Settings struct {
	// Dir holds the JSONL files; it is created when the first record is
	// written. Required.
	Dir string `yaml:"dir"`
	// MaxFileBytes starts a new file before a line would take the current
	// one past it; default 100 MiB, at least 4096.
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// MaxFileAge starts a new file once the current one is this old;
	// default 1h.
	MaxFileAge time.Duration `yaml:"max_file_age"`
	// MaxFiles is how many files the directory keeps: the oldest are
	// deleted beyond it; default 20.
	MaxFiles int `yaml:"max_files"`
	// Queue is how many records may wait for the writer before new ones
	// are dropped (and counted); default 1024.
	Queue int `yaml:"queue"`
}

const (
	defaultFileBytes = 100 << 20
	minFileBytes     = 4096
	defaultFileAge   = time.Hour
	defaultFiles     = 20
	maxFiles         = 100000
	defaultQueue     = 1024
	maxQueue         = 1 << 20
)

func (s Settings) withDefaults() Settings {
	if s.MaxFileBytes == 0 {
		s.MaxFileBytes = defaultFileBytes
	}
	if s.MaxFileAge == 0 {
		s.MaxFileAge = defaultFileAge
	}
	if s.MaxFiles == 0 {
		s.MaxFiles = defaultFiles
	}
	if s.Queue == 0 {
		s.Queue = defaultQueue
	}
	return s
}

// Validate checks the settings (defaults applied).
func (s Settings) Validate() error {
	switch {
	case s.Dir == "":
		return errors.New("recording.dir is required")
	case s.MaxFileBytes < minFileBytes:
		return fmt.Errorf("recording.max_file_bytes %d: want at least %d", s.MaxFileBytes, minFileBytes)
	case s.MaxFileAge < time.Second:
		return fmt.Errorf("recording.max_file_age %v: want at least 1s", s.MaxFileAge)
	case s.MaxFiles < 1 || s.MaxFiles > maxFiles:
		return fmt.Errorf("recording.max_files %d: want 1..%d", s.MaxFiles, maxFiles)
	case s.Queue < 1 || s.Queue > maxQueue:
		return fmt.Errorf("recording.queue %d: want 1..%d", s.Queue, maxQueue)
	}
	return nil
}

// digest identifies the writer's settings (every field,
// pipeline.Digest): a writer is kept across a reload exactly when they
// did not change.
func (s Settings) digest() string {
	return pipeline.Digest(s)
}

// Rule is a route's `record` setting.
//
//	record: {sample: 0.05, max_body: 65536, mask: [header.X-Card, query.card_no, json.card.number]}
type Rule struct {
	// Sample is the share of the route's requests recorded, in (0, 1];
	// default 1 (every request).
	Sample float64 `yaml:"sample"`
	// MaxBody bounds what is kept of each body (request and answer); a
	// longer body is cut there and marked. Default 65536.
	MaxBody int `yaml:"max_body"`
	// Mask names more values to mask (header., cookie., query., form.,
	// json.), beyond the secrets always masked. header., query. and form.
	// names are matched whole, without case and separators (form.card_no
	// masks cardNo too); form. names apply to multipart fields as well.
	Mask []string `yaml:"mask"`
	// On is whether the rule records from the start (default true); the
	// admin API switches it at run time.
	On *bool `yaml:"on"`
}

const (
	defaultMaxBody = 64 << 10
	maxMaxBody     = 8 << 20
)

// CheckSample validates a rule's sample share (what names the rule in
// the error), 0 meaning the default 1.
func CheckSample(what string, v float64) (float64, error) {
	switch {
	case v == 0:
		return 1, nil
	case v < 0 || v > 1 || v != v:
		return 0, fmt.Errorf("%s.sample %v: want a share in (0, 1], e.g. 0.05", what, v)
	}
	return v, nil
}
