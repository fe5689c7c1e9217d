package replay

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate/tollgate/record"
	"github.com/tollgate/tollgate/sign"
	"github.com/valyala/fasthttp"
)

// Signer is an app key and secret that re-signs recorded signed requests.
type Signer struct {
	AppKey, Secret string
}

// notReplayed are header fields never sent as recorded: the connection's
// own, the length of a body that masking may have changed, and Host,
// which is set from the record (or --host).
var notReplayed = map[string]bool{
	"host": true, "content-length": true, "transfer-encoding": true, "connection": true, "keep-alive": true,
	"te": true, "trailer": true, "upgrade": true, "proxy-connection": true,
}

// signHeaders are the fields a re-signed request gets afresh.
var signHeaders = map[string]bool{
	strings.ToLower(sign.HeaderAppKey): true, strings.ToLower(sign.HeaderTimestamp): true,
	strings.ToLower(sign.HeaderNonce): true, strings.ToLower(sign.HeaderSign): true,
}

// masked reports a value a recording masked (whole, or after its scheme).
func masked(v string) bool { return v == record.Masked || strings.HasSuffix(v, " "+record.Masked) }

// credentials says how a request was given credentials again.
type credentials uint8

const (
	asRecorded credentials = iota // it carried none, or they were kept
	resigned                      // signed again with a --secret
	reissued                      // a fresh JWT
	withheld                      // they were masked and nothing could replace them
)

// build fills req with the recorded request e, for the target's host (or
// the recorded Host when host is ""), with fresh signature headers or a
// fresh token when it was signed or carried one.
func (r *runner) build(req *fasthttp.Request, e *record.Entry, now time.Time) (credentials, error) {
	req.Reset()
	req.Header.DisableNormalizing()
	req.Header.SetMethod(e.Method)
	req.SetRequestURI(e.Target)
	req.URI().DisablePathNormalizing = true
	if r.tls {
		req.URI().SetScheme("https")
	}
	host := e.Host
	if r.opts.Host != "" {
		host = r.opts.Host
	}
	req.UseHostHeader = true
	req.Header.SetHost(host)

	signedAs := e.RequestHeader(sign.HeaderAppKey)
	wasSigned := masked(e.RequestHeader(sign.HeaderSign))
	signer := r.signerFor(signedAs)
	jwtSub, jwtCaller := strings.CutPrefix(e.Consumer, "jwt:")
	cred := asRecorded
	for _, h := range e.ReqHeaders {
		k := strings.ToLower(h[0])
		switch {
		case notReplayed[k]:
		case k == "content-encoding" && e.ReqBodyDecoded:
			// The body was kept decoded.
		case wasSigned && signer != nil && signHeaders[k]:
		case jwtCaller && r.opts.JWT != nil && k == "authorization":
		case masked(h[1]):
			cred = withheld
		default:
			req.Header.Add(h[0], h[1])
		}
	}
	body := e.RequestBody()
	if len(body) > 0 || e.Method == "POST" || e.Method == "PUT" || e.Method == "PATCH" {
		req.SetBody(body)
	}
	switch {
	case wasSigned && signer != nil:
		if err := r.sign(req, e, signer, body, now); err != nil {
			return cred, err
		}
		cred = resigned
	case jwtCaller && r.opts.JWT != nil:
		tok, err := r.opts.JWT.Token(jwtSub, now)
		if err != nil {
			return cred, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		cred = reissued
	}
	return cred, nil
}

// signerFor picks the signer for the app key a request was signed with:
// the one with that key, else the first given.
func (r *runner) signerFor(appKey string) *Signer {
	for i := range r.opts.Signers {
		if r.opts.Signers[i].AppKey == appKey {
			return &r.opts.Signers[i]
		}
	}
	if len(r.opts.Signers) > 0 {
		return &r.opts.Signers[0]
	}
	return nil
}

// sign puts fresh signature headers on req: a new timestamp and nonce, so
// the target's replay protection takes it as a new request.
func (r *runner) sign(req *fasthttp.Request, e *record.Entry, s *Signer, body []byte, now time.Time) error {
	u, err := url.Parse(e.Target)
	if err != nil {
		return fmt.Errorf("target %q: %w", e.Target, err)
	}
	ct := e.RequestHeader("Content-Type")
	var h map[string][]string
	if r.opts.SignV2 {
		if len(body) == 0 {
			ct = ""
		}
		h, err = sign.HeadersV2(s.AppKey, s.Secret, e.Method, u, ct, string(body), now, "")
	} else {
		form := ""
		if sign.IsForm(e.Method, ct) {
			form = string(body)
		}
		h, err = sign.Headers(s.AppKey, s.Secret, e.Method, u, form, now, "")
	}
	if err != nil {
		return fmt.Errorf("signing: %w", err)
	}
	for _, k := range [...]string{sign.HeaderAppKey, sign.HeaderTimestamp, sign.HeaderNonce, sign.HeaderSign} {
		req.Header.Set(k, h[k][0])
	}
	return nil
}
