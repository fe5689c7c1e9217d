// Package sign computes and checks Tollgate request signatures. It depends on
// the standard library only, so third-party Go clients can import it; the
// gateway uses the same package to verify.
//
// There are two schemes. Scheme v1, the default, is the open platform's
// original one. Scheme v2 also signs the method, the path and the body, and
// separates what it signs unambiguously; a consumer opts in with `sign: v2`
// in the gateway's configuration, which then accepts only v2 signatures from
// it (the request says nothing about its scheme).
//
// A signed request carries four headers in both schemes: X-App-Key,
// X-Timestamp (unix seconds), X-Nonce and X-Sign. X-Sign is the lowercase hex
// HMAC-SHA256, keyed with the app secret's UTF-8 bytes, of the signing
// string.
//
// # The parameters
//
// Both schemes sign the request parameters, collected the same way:
//
//  1. Collect the request parameters: the query string and, for a POST whose
//     Content-Type is application/x-www-form-urlencoded (see [IsForm]), the
//     form body. Parameters are separated by '&' only (';' is an ordinary
//     character); a parameter is split at its first '=' into key and value.
//  2. Percent-decode keys and values, with '+' meaning a space in both the
//     query and the form. The decoded bytes must be valid UTF-8.
//  3. A key that appears more than once (in the query, in the form, or in
//     both) must have the same decoded value every time ("a=1&a=%31" is
//     fine); it is signed once. A key repeated with different values is an
//     error ([ErrRepeated]): only one value could be signed, and the backend
//     might read another ("amount=1&amount=1000"). Send a list as one value
//     or under distinct keys.
//  4. Sort by key the way Java's TreeMap<String, String> sorts: by UTF-16 code
//     units of the decoded key. For ASCII keys this is byte order ("B" < "a");
//     it differs from UTF-8 byte order only in that characters above U+FFFF
//     sort before U+E000–U+FFFF.
//
// # Scheme v1
//
// The signing string is key + value for each parameter in that order, with
// no separator, then "timestamp" + X-Timestamp + "nonce" + X-Nonce.
//
// For example, the query "b=2&a=x+y", timestamp 1700000000 and nonce "n1"
// give the signing string "ax yb2timestamp1700000000noncen1".
//
// The path, method, host and non-form bodies (JSON, for instance) are not
// signed, and since nothing separates keys from values, "a=1&b=2" and
// "a=1b2" sign alike.
//
// # Scheme v2
//
// The signing string is seven lines joined by "\n" (LF, no trailing LF):
//
//	tollgate-sign-v2
//	METHOD
//	PATH
//	PARAMETERS
//	X-Timestamp
//	X-Nonce
//	hex(SHA-256(body))
//
// Its lines are:
//
//   - METHOD is the request method as sent (case-sensitive, an HTTP token).
//   - PATH is the path in canonical form ([IsCanonicalPath], [ErrPath]
//     otherwise): starting with '/'; no "//" and no "." or ".." segments;
//     only RFC 3986 path characters, other bytes as %XX with uppercase hex
//     digits; unreserved characters (A–Z a–z 0–9 - . _ ~) never escaped.
//     The gateway checks the signature against the canonical path it routes
//     and forwards, so what is signed is what the backend gets. A client
//     signs the path exactly as it sends it, without the query, so it must
//     send it in canonical form: another spelling fails (the gateway then
//     answers "path not in canonical form"). With net/url, the path sent is
//     URL.EscapedPath() ("/" when empty).
//   - PARAMETERS are the parameters above, in their order, each written as
//     escape(key) + "=" + escape(value) and joined with "&"; escape writes
//     every byte of the decoded UTF-8 but the unreserved characters as %XX
//     with uppercase hex digits (a space is "%20"). A request without
//     parameters has an empty line here.
//   - X-Timestamp and X-Nonce are the header values; both must be non-empty
//     visible ASCII ([ErrField]).
//   - The last line is the lowercase hex SHA-256 of the raw body as sent,
//     whatever its type (of no bytes when there is no body:
//     "e3b0c442…b855"); a form body is signed both ways.
//
// For example, GET /v1/order?b=2&a=x+y without a body, timestamp 1700000000
// and nonce "n1" give
//
//	tollgate-sign-v2
//	GET
//	/v1/order
//	a=x%20y&b=2
//	1700000000
//	n1
//	e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
//
// The host is not signed in either scheme.
//
// # Edge cases
//
//   - "a=" and "a" both mean key "a" with an empty value and contribute "a"
//     (v1) or "a=" (v2).
//   - A parameter with an empty key ("=x", "=") is skipped, whatever its value;
//     so are empty segments ("a=1&&b=2", a trailing '&').
//   - Invalid percent-encoding ("%zz", "%4", a trailing "%") in a parameter
//     that is not skipped is an error ([ErrEncoding]): the request is refused
//     rather than signed over bytes the backend might read differently.
//   - A decoded key or value that is not valid UTF-8 ("%FF", an encoded
//     surrogate) is an error ([ErrUTF8]): there is no Java string, hence no
//     TreeMap order, for it.
//   - At most [MaxParams] parameters (counting repeats) and [MaxInput] bytes of
//     query, form, timestamp and nonce together (and, in v2, method and
//     path); beyond that, [ErrTooManyParams] or [ErrTooLarge]. The body's
//     digest in v2 has no limit of its own.
//   - When a request has several problems, the error reported is the first
//     of: too large; (v2) a bad method, timestamp or nonce; (v2) a path not
//     in canonical form; the parameters' own errors as they are read
//     (encoding, UTF-8, count); a repeated key.
//
// The client functions ([StringToSign], [Sign], [Headers], [SignRequest], and
// for v2 [StringToSignV2], [SignV2], [HeadersV2], [SignRequestV2]) and the
// [Verifier] apply the same rules and return the same errors for the same
// input.
package sign
