package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/sign"
)

const signUsageText = `Usage: tollgate sign --app-key KEY (--secret SECRET | --secret-env NAME) [flags] URL [-d DATA]

Prints the signature headers (X-App-Key, X-Timestamp, X-Nonce, X-Sign) for a
request to URL, one per line, or with --curl a curl command that sends it.
Scheme v1 (the default) signs the query string of URL and, for a POST, the
form body DATA. Scheme v2 (--v2, for consumers configured with sign: v2) also
signs the method, the path of URL exactly as written, which must be in
canonical form (no dot segments, no "//", unreserved characters unescaped,
other escapes in uppercase hex), and the SHA-256 of DATA whatever its type.

Flags (before or after URL):
  --app-key KEY       the consumer's app key (required)
  --secret SECRET     the app secret; visible to other users in the process list
  --secret-env NAME   read the app secret from environment variable NAME instead
  --v2                sign with scheme v2
  --method METHOD     request method (default GET, or POST when -d is given);
                      in v1 only a POST form body is signed
  -d, --data DATA     body, sent as given; repeat to join with '&' as curl does
  --content-type CT   Content-Type of the body (default
                      application/x-www-form-urlencoded); other types need --v2
  --timestamp T       unix seconds to sign with (default now)
  --nonce N           nonce to sign with (default 32 random hex digits)
  --curl              print a curl command line instead of the headers
`

// signCommand implements "tollgate sign". It returns the exit code: 0 on
// success, 2 on bad arguments or a request that cannot be signed.
func signCommand(args []string, stdout, stderr io.Writer) int {
	var (
		appKey, secret, secretEnv, method, nonce, timestamp, contentType string
		curl, haveData, v2                                               bool
		data                                                             []string
	)
	fs := flag.NewFlagSet("sign", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&appKey, "app-key", "", "")
	fs.StringVar(&secret, "secret", "", "")
	fs.StringVar(&secretEnv, "secret-env", "", "")
	fs.StringVar(&method, "method", "", "")
	fs.StringVar(&nonce, "nonce", "", "")
	fs.StringVar(&timestamp, "timestamp", "", "")
	fs.BoolVar(&curl, "curl", false, "")
	fs.BoolVar(&v2, "v2", false, "")
	fs.StringVar(&contentType, "content-type", "", "")
	addData := func(s string) error {
		data = append(data, s)
		haveData = true
		return nil
	}
	fs.Func("d", "", addData)
	fs.Func("data", "", addData)

	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "tollgate sign: "+format+"\n\n", a...)
		fmt.Fprint(stderr, signUsageText)
		return 2
	}

	// The flag package stops at the first argument that is not a flag; keep
	// going so that flags may follow the URL ("URL -d DATA").
	var positional []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, signUsageText)
				return 0
			}
			return bad("%v", err)
		}
		left := fs.Args()
		if len(left) == 0 {
			break
		}
		if n := len(rest) - len(left); n > 0 && rest[n-1] == "--" {
			positional = append(positional, left...)
			break
		}
		positional = append(positional, left[0])
		rest = left[1:]
	}

	if len(positional) != 1 {
		return bad("want exactly one URL, got %d arguments", len(positional))
	}
	if appKey == "" {
		return bad("--app-key is required")
	}
	if !visibleASCII(appKey) {
		return bad("invalid --app-key %q: want visible ASCII characters", appKey)
	}
	switch {
	case secret != "" && secretEnv != "":
		return bad("give --secret or --secret-env, not both")
	case secretEnv != "":
		v, ok := os.LookupEnv(secretEnv)
		if !ok || v == "" {
			return bad("environment variable %s is not set or empty", secretEnv)
		}
		secret = v
	case secret == "":
		return bad("--secret or --secret-env is required")
	}

	if method == "" {
		method = "GET"
		if haveData {
			method = "POST"
		}
	}
	method = strings.ToUpper(method)
	if !isToken(method) {
		return bad("invalid --method %q", method)
	}
	body := strings.Join(data, "&")
	switch {
	case contentType != "" && !v2:
		return bad("--content-type needs --v2: scheme v1 signs only a form body")
	case contentType != "" && !haveData:
		return bad("--content-type needs a body (-d)")
	case contentType == "":
		contentType = sign.FormContentType
	case !visibleHeader(contentType):
		return bad("invalid --content-type %q", contentType)
	}
	if haveData && !v2 && method != "POST" {
		return bad("-d is signed only with POST, not %s (or use --v2)", method)
	}

	now := time.Now()
	if timestamp != "" {
		t, err := strconv.ParseInt(timestamp, 10, 64)
		if err != nil || t < 0 {
			return bad("invalid --timestamp %q: want unix seconds", timestamp)
		}
		now = time.Unix(t, 0)
	}
	if nonce != "" && !visibleASCII(nonce) {
		return bad("invalid --nonce %q: want visible ASCII characters", nonce)
	}

	rawURL := positional[0]
	u, err := url.Parse(rawURL)
	if err != nil {
		return bad("invalid URL: %v", err)
	}
	if curl && (u.Scheme != "http" && u.Scheme != "https" || u.Host == "") {
		return bad("--curl needs an absolute http:// or https:// URL, got %q", rawURL)
	}

	if v2 && u.RawPath != "" && u.EscapedPath() != u.RawPath {
		// The path was written with characters a client escapes: what is
		// signed must be what is sent.
		return bad("the path of %q would not be sent as written; write it as %q", rawURL, u.EscapedPath())
	}
	var h http.Header
	if v2 {
		if !haveData {
			contentType = ""
		}
		h, err = sign.HeadersV2(appKey, secret, method, u, contentType, body, now, nonce)
	} else {
		h, err = sign.Headers(appKey, secret, method, u, body, now, nonce)
	}
	if err != nil {
		return bad("%v", err)
	}
	names := [...]string{sign.HeaderAppKey, sign.HeaderTimestamp, sign.HeaderNonce, sign.HeaderSign}
	if !curl {
		for _, k := range names {
			fmt.Fprintf(stdout, "%s: %s\n", k, h.Get(k))
		}
		return 0
	}

	cmd := []string{"curl"}
	if strings.ContainsAny(rawURL, "[]{}") {
		cmd = append(cmd, "--globoff") // curl would expand these as patterns
	}
	if method == "HEAD" {
		cmd = append(cmd, "--head") // -X HEAD makes curl wait for a body
	} else {
		cmd = append(cmd, "-X", method)
	}
	for _, k := range names {
		cmd = append(cmd, "-H", k+": "+h.Get(k))
	}
	if haveData {
		cmd = append(cmd, "-H", "Content-Type: "+contentType, "--data-raw", body)
	}
	cmd = append(cmd, rawURL)
	for i, a := range cmd {
		if i > 0 {
			io.WriteString(stdout, " ")
		}
		io.WriteString(stdout, shellQuote(a))
	}
	io.WriteString(stdout, "\n")
	return 0
}

// shellQuote returns s as one POSIX shell word: unchanged when it holds only
// characters no shell treats specially, otherwise in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// visibleASCII reports whether s is non-empty printable ASCII without spaces,
// safe to send as a header value unchanged.
func visibleASCII(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// visibleHeader reports whether s is a non-empty header value of visible
// ASCII and inner spaces, safe to send as given.
func visibleHeader(s string) bool {
	if s == "" || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// isToken reports whether s is a non-empty HTTP token (RFC 9110 §5.6.2).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}
