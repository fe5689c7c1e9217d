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
	bad := func(err error) int {
		fmt.Fprintf(stderr, "tollgate sign: %v\n\n", err)
		fmt.Fprint(stderr, signUsageText)
		return 2
	}
	a, err := parseSignArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, signUsageText)
		return 0
	}
	if err == nil {
		err = a.check()
	}
	if err != nil {
		return bad(err)
	}
	h, err := a.headers()
	if err != nil {
		return bad(err)
	}
	names := [...]string{sign.HeaderAppKey, sign.HeaderTimestamp, sign.HeaderNonce, sign.HeaderSign}
	if !a.curl {
		for _, k := range names {
			fmt.Fprintf(stdout, "%s: %s\n", k, h.Get(k))
		}
		return 0
	}
	a.printCurl(stdout, h, names[:])
	return 0
}

// signArgs is a sign command line, read and then checked.
type signArgs struct {
	appKey, secret, secretEnv, method, nonce, timestamp, contentType string
	curl, haveData, v2                                               bool
	data                                                             []string
	rawURL                                                           string

	// set by check
	u    *url.URL
	body string
	now  time.Time
}

// parseSignArgs reads the flags and the one URL; flag.ErrHelp asks for
// the usage.
func parseSignArgs(args []string) (*signArgs, error) {
	a := &signArgs{}
	fs := flag.NewFlagSet("sign", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&a.appKey, "app-key", "", "")
	fs.StringVar(&a.secret, "secret", "", "")
	fs.StringVar(&a.secretEnv, "secret-env", "", "")
	fs.StringVar(&a.method, "method", "", "")
	fs.StringVar(&a.nonce, "nonce", "", "")
	fs.StringVar(&a.timestamp, "timestamp", "", "")
	fs.BoolVar(&a.curl, "curl", false, "")
	fs.BoolVar(&a.v2, "v2", false, "")
	fs.StringVar(&a.contentType, "content-type", "", "")
	addData := func(s string) error {
		a.data = append(a.data, s)
		a.haveData = true
		return nil
	}
	fs.Func("d", "", addData)
	fs.Func("data", "", addData)

	// The flag package stops at the first argument that is not a flag; keep
	// going so that flags may follow the URL ("URL -d DATA").
	var positional []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return nil, err
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
		return nil, fmt.Errorf("want exactly one URL, got %d arguments", len(positional))
	}
	a.rawURL = positional[0]
	return a, nil
}

// check validates the arguments and fills in the defaults: the secret
// from the environment, the method, the content type, the time and the
// parsed URL.
func (a *signArgs) check() error {
	if a.appKey == "" {
		return errors.New("--app-key is required")
	}
	if !visibleASCII(a.appKey) {
		return fmt.Errorf("invalid --app-key %q: want visible ASCII characters", a.appKey)
	}
	switch {
	case a.secret != "" && a.secretEnv != "":
		return errors.New("give --secret or --secret-env, not both")
	case a.secretEnv != "":
		v, ok := os.LookupEnv(a.secretEnv)
		if !ok || v == "" {
			return fmt.Errorf("environment variable %s is not set or empty", a.secretEnv)
		}
		a.secret = v
	case a.secret == "":
		return errors.New("--secret or --secret-env is required")
	}
	if err := a.checkRequest(); err != nil {
		return err
	}
	a.now = time.Now()
	if a.timestamp != "" {
		t, err := strconv.ParseInt(a.timestamp, 10, 64)
		if err != nil || t < 0 {
			return fmt.Errorf("invalid --timestamp %q: want unix seconds", a.timestamp)
		}
		a.now = time.Unix(t, 0)
	}
	if a.nonce != "" && !visibleASCII(a.nonce) {
		return fmt.Errorf("invalid --nonce %q: want visible ASCII characters", a.nonce)
	}
	u, err := url.Parse(a.rawURL)
	if err != nil {
		return fmt.Errorf("invalid URL: %v", err)
	}
	if a.curl && (u.Scheme != "http" && u.Scheme != "https" || u.Host == "") {
		return fmt.Errorf("--curl needs an absolute http:// or https:// URL, got %q", a.rawURL)
	}
	if a.v2 && u.RawPath != "" && u.EscapedPath() != u.RawPath {
		// The path was written with characters a client escapes: what is
		// signed must be what is sent.
		return fmt.Errorf("the path of %q would not be sent as written; write it as %q", a.rawURL, u.EscapedPath())
	}
	a.u = u
	return nil
}

// checkRequest checks the method, the body and its content type.
func (a *signArgs) checkRequest() error {
	if a.method == "" {
		a.method = "GET"
		if a.haveData {
			a.method = "POST"
		}
	}
	a.method = strings.ToUpper(a.method)
	if !isToken(a.method) {
		return fmt.Errorf("invalid --method %q", a.method)
	}
	a.body = strings.Join(a.data, "&")
	switch {
	case a.contentType != "" && !a.v2:
		return errors.New("--content-type needs --v2: scheme v1 signs only a form body")
	case a.contentType != "" && !a.haveData:
		return errors.New("--content-type needs a body (-d)")
	case a.contentType == "":
		a.contentType = sign.FormContentType
	case !visibleHeader(a.contentType):
		return fmt.Errorf("invalid --content-type %q", a.contentType)
	}
	if a.haveData && !a.v2 && a.method != "POST" {
		return fmt.Errorf("-d is signed only with POST, not %s (or use --v2)", a.method)
	}
	return nil
}

// headers signs the request.
func (a *signArgs) headers() (http.Header, error) {
	if a.v2 {
		contentType := a.contentType
		if !a.haveData {
			contentType = ""
		}
		return sign.HeadersV2(a.appKey, a.secret, a.method, a.u, contentType, a.body, a.now, a.nonce)
	}
	return sign.Headers(a.appKey, a.secret, a.method, a.u, a.body, a.now, a.nonce)
}

// printCurl writes the signed request as a curl command line.
func (a *signArgs) printCurl(stdout io.Writer, h http.Header, names []string) {
	cmd := []string{"curl"}
	if strings.ContainsAny(a.rawURL, "[]{}") {
		cmd = append(cmd, "--globoff") // curl would expand these as patterns
	}
	if a.method == "HEAD" {
		cmd = append(cmd, "--head") // -X HEAD makes curl wait for a body
	} else {
		cmd = append(cmd, "-X", a.method)
	}
	for _, k := range names {
		cmd = append(cmd, "-H", k+": "+h.Get(k))
	}
	if a.haveData {
		cmd = append(cmd, "-H", "Content-Type: "+a.contentType, "--data-raw", a.body)
	}
	cmd = append(cmd, a.rawURL)
	for i, arg := range cmd {
		if i > 0 {
			io.WriteString(stdout, " ")
		}
		io.WriteString(stdout, shellQuote(arg))
	}
	io.WriteString(stdout, "\n")
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
