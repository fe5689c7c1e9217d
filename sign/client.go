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
	params, err := collect(query, form)
	if err != nil {
		return "", err
	}
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

type kv struct{ key, val string }

// collect applies the parameter rules shared by both schemes: the decoded
// parameters of query and form, one per key (its first value, query before
// form), sorted by the UTF-16 code units of their keys; a key repeated
// with a different value is ErrRepeated.
func collect(query, form string) ([]kv, error) {
	var params []kv
	for _, part := range [2]struct{ name, raw string }{{"query", query}, {"form", form}} {
		for seg := range strings.SplitSeq(part.raw, "&") {
			rawKey, rawVal, _ := strings.Cut(seg, "=")
			if rawKey == "" {
				continue
			}
			if len(params) == MaxParams {
				return nil, ErrTooManyParams
			}
			key, err := decode(rawKey)
			if err != nil {
				return nil, fmt.Errorf("%s parameter %q: %w", part.name, rawKey, err)
			}
			val, err := decode(rawVal)
			if err != nil {
				return nil, fmt.Errorf("%s parameter %q: %w", part.name, rawKey, err)
			}
			params = append(params, kv{key, val})
		}
	}
	// Stable: the first value of a key stays first.
	slices.SortStableFunc(params, func(a, b kv) int {
		return slices.Compare(utf16.Encode([]rune(a.key)), utf16.Encode([]rune(b.key)))
	})
	out := params[:0]
	for _, p := range params {
		if n := len(out); n > 0 && out[n-1].key == p.key {
			if out[n-1].val != p.val {
				return nil, fmt.Errorf("parameter %q: %w", p.key, ErrRepeated)
			}
			continue
		}
		out = append(out, p)
	}
	return out, nil
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
	return signedHeaders(appKey, ts, nonce, sig), nil
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

// Request is a request as scheme v2 signs it, as the client sends it.
type Request struct {
	Method string // as sent, e.g. "POST"; case-sensitive
	// Path is the path exactly as sent, without the query, in canonical
	// form (IsCanonicalPath); with net/url it is URL.EscapedPath().
	Path  string
	Query string // the raw query string, without '?'
	// ContentType decides, with Method, whether Body is a form whose
	// parameters are signed too (IsForm).
	ContentType string
	Body        string // the raw body, "" for none; its SHA-256 is signed
	Timestamp   string // X-Timestamp
	Nonce       string // X-Nonce
}

// StringToSignV2 returns the scheme v2 signing string of r (see the package
// documentation).
func StringToSignV2(r Request) (string, error) {
	form := ""
	if IsForm(r.Method, r.ContentType) {
		form = r.Body
	}
	if len(r.Method)+len(r.Path)+len(r.Query)+len(form)+len(r.Timestamp)+len(r.Nonce) > MaxInput {
		return "", ErrTooLarge
	}
	if !validMethod(r.Method) || !visibleField(r.Timestamp) || !visibleField(r.Nonce) {
		return "", fmt.Errorf("method %q, timestamp %q, nonce %q: %w", r.Method, r.Timestamp, r.Nonce, ErrField)
	}
	if !IsCanonicalPath(r.Path) {
		return "", fmt.Errorf("%q: %w (unreserved characters unescaped, other escapes in uppercase hex, no dot segments, no \"//\")", r.Path, ErrPath)
	}
	params, err := collect(r.Query, form)
	if err != nil {
		return "", err
	}
	pairs := make([]string, len(params))
	for i, p := range params {
		pairs[i] = escapeV2(p.key) + "=" + escapeV2(p.val)
	}
	digest := sha256.Sum256([]byte(r.Body))
	return strings.Join([]string{
		"tollgate-sign-v2",
		r.Method,
		r.Path,
		strings.Join(pairs, "&"),
		r.Timestamp,
		r.Nonce,
		hex.EncodeToString(digest[:]),
	}, "\n"), nil
}

// escapeV2 percent-encodes every byte but the unreserved ones, with
// uppercase hex digits: url.QueryEscape does that but for writing a space
// as '+' (a '+' itself becomes "%2B", so every '+' it writes is a space).
func escapeV2(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// SignV2 returns the scheme v2 X-Sign value of r: the lowercase hex
// HMAC-SHA256, keyed with secret, of StringToSignV2(r).
func SignV2(secret string, r Request) (string, error) {
	s, err := StringToSignV2(r)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, []byte(secret))
	io.WriteString(m, s)
	return hex.EncodeToString(m.Sum(nil)), nil
}

// requestPath is the path a client sends for u, as net/http does: the
// escaped path, "/" when empty. An opaque URL has no path to sign.
func requestPath(u *url.URL) (string, error) {
	if u == nil {
		return "/", nil
	}
	if u.Opaque != "" {
		return "", fmt.Errorf("opaque URL: %w", ErrPath)
	}
	if p := u.EscapedPath(); p != "" {
		return p, nil
	}
	return "/", nil
}

// HeadersV2 returns the four signature headers of scheme v2 for a request to
// u with the given method, Content-Type and body (any method may carry
// one). The path signed is u.EscapedPath() ("/" when empty), which must be
// in canonical form (ErrPath otherwise). A zero now means time.Now(); an
// empty nonce means NewNonce().
func HeadersV2(appKey, secret, method string, u *url.URL, contentType, body string, now time.Time, nonce string) (http.Header, error) {
	if now.IsZero() {
		now = time.Now()
	}
	if nonce == "" {
		nonce = NewNonce()
	}
	path, err := requestPath(u)
	if err != nil {
		return nil, err
	}
	var query string
	if u != nil {
		query = u.RawQuery
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	sig, err := SignV2(secret, Request{Method: method, Path: path, Query: query, ContentType: contentType,
		Body: body, Timestamp: ts, Nonce: nonce})
	if err != nil {
		return nil, err
	}
	return signedHeaders(appKey, ts, nonce, sig), nil
}

// SignRequestV2 sets the four signature headers of scheme v2 on r. Its body,
// if any, is read whole, signed and put back (GetBody is set too, so the
// request can be retried); if that fails, the body may have been consumed.
// A zero now means time.Now(); an empty nonce means NewNonce().
func SignRequestV2(r *http.Request, appKey, secret string, now time.Time, nonce string) error {
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return fmt.Errorf("sign: reading the body: %w", err)
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		r.ContentLength = int64(len(b))
	}
	h, err := HeadersV2(appKey, secret, method, r.URL, r.Header.Get("Content-Type"), string(body), now, nonce)
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

// signedHeaders are the four signature headers of either scheme.
func signedHeaders(appKey, ts, nonce, sig string) http.Header {
	return http.Header{
		HeaderAppKey:    {appKey},
		HeaderTimestamp: {ts},
		HeaderNonce:     {nonce},
		HeaderSign:      {sig},
	}
}
