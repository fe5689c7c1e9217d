package source

import (
	"bytes"
	"io"
	"mime/multipart"
	"testing"
)

// FuzzMultipart checks the multipart scanner against Go's mime/multipart,
// as a backend would read the body: whenever the scanner says it read a
// body whole, every field name and every value of a field without a file
// name that mime/multipart reads was visited. Bodies mime/multipart reads
// and the scanner refuses are fine (they are refused at block); the
// other way round would be a side door.
func FuzzMultipart(f *testing.F) {
	f.Add([]byte("--XB\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XB--\r\n"))
	f.Add([]byte("pre\r\n--XB\r\nContent-Disposition: form-data; name=\"a\"; filename=\"f.txt\"\r\nContent-Type: text/plain\r\n\r\nx\r\n--XB\r\nContent-Disposition: form-data; name=b\r\n\r\n\r\n--XB--"))
	f.Add([]byte("--XB \r\ncontent-disposition: form-data; name=\"a\\\"b\"\r\n\r\n--XB\r\n\r\n--XB--\r\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		seen := map[string]bool{}
		_, _, unread := eachPart(nil, body, []byte("XB"), func(_ Kind, name, value []byte) bool {
			seen[string(value)] = true
			return true
		})
		if unread != ReadAll {
			return
		}
		mr := multipart.NewReader(bytes.NewReader(body), "XB")
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				return
			}
			name := p.FormName()
			if name != "" && !seen[name] {
				t.Fatalf("field name %q read by mime/multipart, not visited (%q)", name, body)
			}
			if p.FileName() != "" || name == "" {
				continue
			}
			v, err := io.ReadAll(p)
			if err != nil {
				return
			}
			if len(v) > 0 && !seen[string(v)] {
				t.Fatalf("value %q of %q read by mime/multipart, not visited (%q)", v, name, body)
			}
		}
	})
}
