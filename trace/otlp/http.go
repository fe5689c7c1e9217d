package otlp

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// HTTPSender posts export requests to an OTLP/HTTP endpoint as
// application/x-protobuf.
type HTTPSender struct {
	url     string
	headers http.Header
	client  *http.Client
}

// maxAnswerBytes bounds what is read of a backend's answer: a partial
// success or an error status is small, and a hostile or broken endpoint
// may send without end.
const maxAnswerBytes = 64 << 10

// NewHTTP returns a sender to endpoint (http:// or https://; without a
// path, /v1/traces), with headers on every request (an API key) and tlsc
// for https (nil: the system's roots).
func NewHTTP(endpoint string, headers map[string]string, tlsc *tls.Config) (*HTTPSender, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q: want http://host:port or https://host:port", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	h := http.Header{}
	for k, v := range headers {
		h.Set(k, v)
	}
	h.Set("Content-Type", "application/x-protobuf")
	tr := &http.Transport{
		DialContext:            (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:        tlsc,
		ForceAttemptHTTP2:      true,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		ResponseHeaderTimeout:  30 * time.Second,
		MaxResponseHeaderBytes: 16 << 10,
	}
	return &HTTPSender{url: u.String(), headers: h, client: &http.Client{Transport: tr,
		// An export is never redirected: the body would have to be sent again to
		// somewhere the operator did not name.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
}

// Send implements Sender.
func (s *HTTPSender) Send(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range s.headers {
		req.Header[k] = v
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return &RetryableError{Err: err}
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = fmt.Errorf("%s answered %d: %s", s.url, resp.StatusCode, printable(answer, 200))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return &RetryableError{Err: err, After: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	}
	return err
}

// Close closes the idle connections.
func (s *HTTPSender) Close() { s.client.CloseIdleConnections() }

// retryAfter reads a Retry-After value: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// printable is the start of a backend's answer fit for a log line.
func printable(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return '.'
		}
		return r
	}, string(b))
}
