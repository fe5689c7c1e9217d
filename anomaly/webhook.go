package anomaly

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Webhook POSTs alerts as JSON, one at a time, from a bounded queue: a
// slow or dead receiver costs queued alerts (counted), never the engine's
// pace.
type Webhook struct {
	Client *http.Client
	Log    *zap.Logger

	queue   chan queued
	sent    atomic.Uint64
	failed  atomic.Uint64 // given up after the tries
	dropped atomic.Uint64 // the queue was full
}

type queued struct {
	alert Alert
	url   string
	hdr   map[string]string
	wait  time.Duration
}

// webhookQueue bounds the alerts waiting to be sent.
const webhookQueue = 256

// webhookTries is how many times one alert is POSTed before it is given
// up, a second apart.
const webhookTries = 3

// Send queues a for s's webhook (none set: nothing).
func (w *Webhook) Send(a Alert, s Settings) {
	if s.Webhook == "" {
		return
	}
	select {
	case w.queue <- queued{alert: a, url: s.Webhook, hdr: s.Headers, wait: s.Timeout}:
	default:
		w.dropped.Add(1)
	}
}

// Start makes the queue and sends from it until stop is closed.
func (w *Webhook) Start(stop <-chan struct{}) {
	w.queue = make(chan queued, webhookQueue)
	if w.Client == nil {
		w.Client = &http.Client{}
	}
	go func() {
		for {
			select {
			case <-stop:
				return
			case q := <-w.queue:
				w.post(q, stop)
			}
		}
	}()
}

func (w *Webhook) post(q queued, stop <-chan struct{}) {
	body, _ := json.Marshal(q.alert)
	for try := 1; ; try++ {
		err := w.postOnce(q, body)
		if err == nil {
			w.sent.Add(1)
			return
		}
		if try == webhookTries {
			w.failed.Add(1)
			if w.Log != nil {
				w.Log.Warn("anomaly: webhook not reached", zap.String("route", q.alert.Route), zap.String("state", q.alert.State), zap.Error(err))
			}
			return
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
	}
}

func (w *Webhook) postOnce(q queued, body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), q.wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, q.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tollgate-alerts")
	for k, v := range q.hdr {
		req.Header.Set(k, v)
	}
	resp, err := w.Client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return &statusError{resp.StatusCode}
	}
	return nil
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "webhook answered " + http.StatusText(e.code) }

// WebhookFigures are the webhook's counts for /metrics.
type WebhookFigures struct{ Sent, Failed, Dropped uint64 }

// Figures reads the webhook's counts.
func (w *Webhook) Figures() WebhookFigures {
	return WebhookFigures{Sent: w.sent.Load(), Failed: w.failed.Load(), Dropped: w.dropped.Load()}
}
