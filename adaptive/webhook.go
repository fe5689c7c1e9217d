package adaptive

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// webhookSender posts alerts, one at a time, from a bounded queue: a slow
// or dead receiver costs dropped alerts (counted), never memory or the
// sampler's time.
type webhookSender struct {
	url      string
	client   *http.Client
	queue    chan Alert
	failures atomic.Uint64
	logger   *zap.Logger
}

const (
	webhookQueue   = 64
	webhookTimeout = 5 * time.Second
	// webhookReadMax bounds what is read of a receiver's answer.
	webhookReadMax = 4 << 10
)

func newWebhookSender(url string, logger *zap.Logger) *webhookSender {
	return &webhookSender{url: url, logger: logger, queue: make(chan Alert, webhookQueue),
		client: &http.Client{Timeout: webhookTimeout, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a receiver that moved is told by its status, not followed
		}}}
}

func (s *webhookSender) enqueue(a Alert) {
	select {
	case s.queue <- a:
	default:
		s.failures.Add(1)
	}
}

func (s *webhookSender) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case a := <-s.queue:
			if err := s.post(a); err != nil {
				s.failures.Add(1)
				s.logger.Warn("alert webhook failed", zap.String("route", a.Route), zap.Error(err))
			}
		}
	}
}

type statusError int

func (e statusError) Error() string { return "webhook answered " + http.StatusText(int(e)) }

func (s *webhookSender) post(a Alert) error {
	body, err := json.Marshal(a)
	if err != nil {
		return err
	}
	resp, err := s.client.Post(s.url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, webhookReadMax))
	if resp.StatusCode >= 300 {
		return statusError(resp.StatusCode)
	}
	return nil
}
