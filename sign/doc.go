// Package sign computes and checks Tollgate request signatures. It depends on
// the standard library only, so third-party Go clients can import it; the
// gateway uses the same package to verify.
//
// # The signing string
//
// A signed request carries four headers: X-App-Key, X-Timestamp (unix
// seconds), X-Nonce and X-Sign. X-Sign is the lowercase hex HMAC-SHA256,
// keyed with the app secret's UTF-8 bytes, of this signing string:
//
//  1. Collect the request parameters: the query string and, for a POST whose
//     Content-Type is application/x-www-form-urlencoded (see [IsForm]), the
//     form body. Parameters are separated by '&' only (';' is an ordinary
//     character); a parameter is split at its first '=' into key and value.
//  2. Percent-decode keys and values, with '+' meaning a space in both the
//     query and the form. The decoded bytes must be valid UTF-8.
//  3. For a key that appears more than once keep its first value; query
//     parameters come before form parameters, so a key present in both takes
//     the query's value.
//  4. Sort by key the way Java's TreeMap<String, String> sorts: by UTF-16 code
//     units of the decoded key. For ASCII keys this is byte order ("B" < "a");
//     it differs from UTF-8 byte order only in that characters above U+FFFF
//     sort before U+E000–U+FFFF.
//  5. Concatenate key + value for each parameter, with no separator, then
//     "timestamp" + X-Timestamp + "nonce" + X-Nonce.
//
// For example, the query "b=2&a=x+y&b=3", timestamp 1700000000 and nonce
// "n1" give the signing string "ax yb2timestamp1700000000noncen1".
//
// The path, method, host and non-form bodies (JSON, for instance) are not
// signed.
//
// # Edge cases
//
//   - "a=" and "a" both mean key "a" with an empty value and contribute "a".
//   - A parameter with an empty key ("=x", "=") is skipped, whatever its value;
//     so are empty segments ("a=1&&b=2", a trailing '&').
//   - Invalid percent-encoding ("%zz", "%4", a trailing "%") in a parameter
//     that is not skipped is an error ([ErrEncoding]): the request is refused
//     rather than signed over bytes the backend might read differently.
//   - A decoded key or value that is not valid UTF-8 ("%FF", an encoded
//     surrogate) is an error ([ErrUTF8]): there is no Java string, hence no
//     TreeMap order, for it.
//   - At most [MaxParams] parameters (counting repeats) and [MaxInput] bytes of
//     query, form, timestamp and nonce together; beyond that, [ErrTooManyParams]
//     or [ErrTooLarge].
//
// The client functions ([StringToSign], [Sign], [Headers], [SignRequest]) and
// the [Verifier] apply the same rules and return the same errors for the
// same input.
package sign
