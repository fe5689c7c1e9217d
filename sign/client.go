package sign

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// The client side favours plain code over speed; it is written independently
// of Verifier so that tests comparing the two check the rules, not one
// implementation against itself.

// StringToSign returns the signing string of a request: query is the raw
// query string (without '?'), form the urlencoded POST body or "" (see
// IsForm), ts the X-Timestamp value and nonce the X-Nonce value.
func StringToSign(query, form, ts, nonce string) (string, error) {
	if len(query)+len(form)+len(ts)+len(nonce) > MaxInput {
		return "", ErrTooLarge
	}
	type kv struct{ key, val string }
	var params []kv
	seen := make(map[string]bool)
	n := 0
	for _, part := range [2]struct{ name, raw string }{{"query", query}, {"form", form}} {
		for seg := range strings.SplitSeq(part.raw, "&") {
			rawKey, rawVal, _ := strings.Cut(seg, "=")
			if rawKey == "" {
				continue
			}
			if n == MaxParams {
				return "", ErrTooManyParams
			}
			n++
			key, err := decode(rawKey)
			if err != nil {
				return "", fmt.Errorf("%s parameter %q: %w", part.name, rawKey, err)
			}
			val, err := decode(rawVal)
			if err != nil {
				return "", fmt.Errorf("%s parameter %q: %w", part.name, rawKey, err)
			}
			if !seen[key] {
				seen[key] = true
				params = append(params, kv{key, val})
			}
		}
	}
	slices.SortFunc(params, func(a, b kv) int {
		return slices.Compare(utf16.Encode([]rune(a.key)), utf16.Encode([]rune(b.key)))
	})
	var sb strings.Builder
	for _, p := range params {
		sb.WriteString(p.key)
		sb.WriteString(p.val)
	}
	sb.WriteString("timestamp")
	sb.WriteString(ts)
	sb.WriteString("nonce")
	sb.WriteString(nonce)
	return sb.String(), nil
}

// decode percent-decodes a query component ('+' is a space) and requires the
// result to be valid UTF-8.
func decode(s string) (string, error) {
	d, err := url.QueryUnescape(s)
	if err != nil {
		return "", ErrEncoding
	}
	if !utf8.ValidString(d) {
		return "", ErrUTF8
	}
	return d, nil
}

// Sign returns the X-Sign value of a request: the lowercase hex HMAC-SHA256,
// keyed with secret, of StringToSign(query, form, ts, nonce).
func Sign(secret, query, form, ts, nonce string) (string, error) {
	s, err := StringToSign(query, form, ts, nonce)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, []byte(secret))
	io.WriteString(m, s)
	return hex.EncodeToString(m.Sum(nil)), nil
}

// NewNonce returns 32 random lowercase hex digits from crypto/rand.
func NewNonce() string {
	var b [16]byte
	rand.Read(b[:]) // never fails: crypto/rand aborts the program instead
	return hex.EncodeToString(b[:])
}

// Headers returns the four signature headers for a request to u with the
// given method. form is the urlencoded body to send; it is allowed only with
// POST (ErrFormMethod otherwise), and the request must then carry
// Content-Type: application/x-www-form-urlencoded. A zero now means
// time.Now(); an empty nonce means NewNonce().
func Headers(appKey, secret, method string, u *url.URL, form string, now time.Time, nonce string) (http.Header, error) {
	if form != "" && method != http.MethodPost {
		return nil, ErrFormMethod
	}
	if now.IsZero() {
		now = time.Now()
	}
	if nonce == "" {
		nonce = NewNonce()
	}
	var query string
	if u != nil {
		query = u.RawQuery
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	sig, err := Sign(secret, query, form, ts, nonce)
	if err != nil {
		return nil, err
	}
	return http.Header{
		HeaderAppKey:    {appKey},
		HeaderTimestamp: {ts},
		HeaderNonce:     {nonce},
		HeaderSign:      {sig},
	}, nil
}

// SignRequest sets the four signature headers on r. When r is a POST with a
// form Content-Type (see IsForm), its body is read, signed and put back
// (GetBody is set too, so the request can be retried); if that fails, the
// body may have been consumed. A zero now means time.Now(); an empty nonce
// means NewNonce().
func SignRequest(r *http.Request, appKey, secret string, now time.Time, nonce string) error {
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	var form string
	if r.Body != nil && r.Body != http.NoBody && IsForm(method, r.Header.Get("Content-Type")) {
		b, err := io.ReadAll(io.LimitReader(r.Body, MaxInput+1))
		r.Body.Close()
		if err != nil {
			return fmt.Errorf("sign: reading the form body: %w", err)
		}
		if len(b) > MaxInput {
			return ErrTooLarge
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		r.ContentLength = int64(len(b))
		form = string(b)
	}
	h, err := Headers(appKey, secret, method, r.URL, form, now, nonce)
	if err != nil {
		return err
	}
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	for k, v := range h {
		r.Header[k] = v
	}
	return nil
}
