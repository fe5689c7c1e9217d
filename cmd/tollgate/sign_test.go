package main

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sign"
)

func runSign(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = signCommand(args, &out, &errb)
	return code, out.String(), errb.String()
}

// parseHeaderLines reads "Name: value" lines.
func parseHeaderLines(t *testing.T, s string) map[string]string {
	t.Helper()
	h := make(map[string]string)
	for line := range strings.Lines(s) {
		k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), ": ")
		if !ok {
			t.Fatalf("not a header line: %q", line)
		}
		h[k] = v
	}
	return h
}

func TestSignCommandHeaders(t *testing.T) {
	t.Setenv("TOLLGATE_TEST_SECRET", "env-s3cr3t")
	cases := []struct {
		name               string
		args               []string
		secret, query, frm string
	}{
		{
			name:   "GET query",
			args:   []string{"--app-key", "app-1", "--secret", "s3cr3t", "--nonce", "n1", "--timestamp", "1700000000", "https://api.example.com/v1/order?b=2&a=x+y&b=2"},
			secret: "s3cr3t", query: "b=2&a=x+y&b=2",
		},
		{
			name:   "POST form after URL, secret from env",
			args:   []string{"--app-key", "app-1", "--secret-env", "TOLLGATE_TEST_SECRET", "--nonce", "n1", "--timestamp", "1700000000", "http://gw/pay?a=q", "-d", "a=q&msg=hi+there", "--data", "z=26"},
			secret: "env-s3cr3t", query: "a=q", frm: "a=q&msg=hi+there&z=26",
		},
		{
			name:   "relative URL, explicit POST without body",
			args:   []string{"-app-key=app-1", "-secret=s3cr3t", "--method", "post", "--nonce=n1", "--timestamp=1700000000", "/p?%E5%90%8D=1"},
			secret: "s3cr3t", query: "%E5%90%8D=1",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runSign(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			want, err := sign.Sign(tc.secret, tc.query, tc.frm, "1700000000", "n1")
			if err != nil {
				t.Fatal(err)
			}
			h := parseHeaderLines(t, out)
			if len(h) != 4 || h["X-App-Key"] != "app-1" || h["X-Timestamp"] != "1700000000" || h["X-Nonce"] != "n1" || h["X-Sign"] != want {
				t.Errorf("output:\n%s\nwant X-Sign: %s", out, want)
			}
			if !strings.HasPrefix(out, "X-App-Key: ") {
				t.Errorf("headers out of order:\n%s", out)
			}
		})
	}
}

func TestSignCommandDefaults(t *testing.T) {
	code, out, errOut := runSign(t, "--app-key", "app-1", "--secret", "s3cr3t", "http://gw/p?a=1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	h := parseHeaderLines(t, out)
	if len(h["X-Nonce"]) != 32 || h["X-Timestamp"] == "" {
		t.Fatalf("output:\n%s", out)
	}
	want, _ := sign.Sign("s3cr3t", "a=1", "", h["X-Timestamp"], h["X-Nonce"])
	if h["X-Sign"] != want {
		t.Errorf("X-Sign = %s; want %s", h["X-Sign"], want)
	}
}

// TestSignCommandCurl checks the curl line word by word as a POSIX shell
// splits it, so the quoting is tested too.
func TestSignCommandCurl(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	const u = "https://api.example.com/v1/it's?q=a+b&arr[0]=1"
	form := "msg=it's+%26+more&x=$HOME"
	code, out, errOut := runSign(t, "--curl", "--app-key", "app-1", "--secret", "s3cr3t",
		"--nonce", "n1", "--timestamp", "1700000000", u, "-d", form)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "curl ") {
		t.Fatalf("want one curl line, got:\n%s", out)
	}
	words, err := exec.Command(sh, "-c", `printf '%s\n' `+strings.TrimPrefix(out, "curl ")).Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(words), "\n"), "\n")
	sig, _ := sign.Sign("s3cr3t", "q=a+b&arr[0]=1", form, "1700000000", "n1")
	want := []string{
		"--globoff", "-X", "POST",
		"-H", "X-App-Key: app-1",
		"-H", "X-Timestamp: 1700000000",
		"-H", "X-Nonce: n1",
		"-H", "X-Sign: " + sig,
		"-H", "Content-Type: application/x-www-form-urlencoded",
		"--data-raw", form,
		u,
	}
	if !slices.Equal(got, want) {
		t.Errorf("curl words:\n%q\nwant\n%q\nline: %s", got, want, out)
	}

	code, out, _ = runSign(t, "--curl", "--app-key", "app-1", "--secret", "s3cr3t", "--nonce", "n1", "--timestamp", "1700000000", "http://gw/p")
	sig, _ = sign.Sign("s3cr3t", "", "", "1700000000", "n1")
	wantLine := "curl -X GET -H 'X-App-Key: app-1' -H 'X-Timestamp: 1700000000' -H 'X-Nonce: n1' -H 'X-Sign: " + sig + "' http://gw/p\n"
	if code != 0 || out != wantLine {
		t.Errorf("GET curl line:\n%s\nwant\n%s", out, wantLine)
	}
}

func TestSignCommandBadArgs(t *testing.T) {
	t.Setenv("TOLLGATE_TEST_EMPTY", "")
	base := []string{"--app-key", "app-1", "--secret", "s3cr3t"}
	cases := map[string][]string{
		"no URL":             base,
		"two URLs":           append(slices.Clone(base), "http://a/", "http://b/"),
		"no app key":         {"--secret", "s", "http://gw/"},
		"no secret":          {"--app-key", "app-1", "http://gw/"},
		"both secrets":       append(slices.Clone(base), "--secret-env", "HOME", "http://gw/"),
		"unset secret env":   {"--app-key", "app-1", "--secret-env", "TOLLGATE_TEST_NOT_SET_ANYWHERE", "http://gw/"},
		"empty secret env":   {"--app-key", "app-1", "--secret-env", "TOLLGATE_TEST_EMPTY", "http://gw/"},
		"unknown flag":       append(slices.Clone(base), "--bogus", "http://gw/"),
		"bad timestamp":      append(slices.Clone(base), "--timestamp", "yesterday", "http://gw/"),
		"bad nonce":          append(slices.Clone(base), "--nonce", "a b", "http://gw/"),
		"bad app key":        {"--app-key", "app\n1", "--secret", "s", "http://gw/"},
		"bad method":         append(slices.Clone(base), "--method", "GE T", "http://gw/"),
		"form with GET":      append(slices.Clone(base), "--method", "GET", "http://gw/", "-d", "a=1"),
		"bad URL":            append(slices.Clone(base), "http://gw/%zz"),
		"bad query encoding": append(slices.Clone(base), "http://gw/p?a=%zz"),
		"bad form encoding":  append(slices.Clone(base), "http://gw/p", "-d", "a=%FF"),
		"curl relative URL":  append(slices.Clone(base), "--curl", "/p?a=1"),
		"missing flag value": append(slices.Clone(base), "http://gw/", "-d"),
		"repeated parameter": append(slices.Clone(base), "http://gw/p?amount=1&amount=1000"),
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runSign(t, args...)
			if code != 2 || out != "" || !strings.Contains(errOut, "Usage: tollgate sign") {
				t.Errorf("exit %d, stdout %q, stderr:\n%s", code, out, errOut)
			}
		})
	}
}

func TestSignCommandHelp(t *testing.T) {
	code, out, _ := runSign(t, "--help")
	if code != 0 || !strings.Contains(out, "Usage: tollgate sign") {
		t.Errorf("exit %d, stdout:\n%s", code, out)
	}
}

// TestSignCommandV2 checks --v2 against signatures computed outside Go (see
// package sign's v2 vectors), and that it refuses what it cannot sign as
// it will be sent.
func TestSignCommandV2(t *testing.T) {
	cases := []struct {
		name string
		args []string
		sig  string
	}{
		{
			name: "GET with a query",
			args: []string{"--v2", "--app-key", "app-1", "--secret", "s3cr3t", "--nonce", "n1", "--timestamp", "1700000000", "http://gw/v1/order?b=2&a=x+y"},
			sig:  "3bdb9e9d3cc039318cdfb460aabf70c74ec7c9fbae8f01ab128772fc4508b68d",
		},
		{
			name: "JSON PUT",
			args: []string{"--v2", "--app-key", "app-1", "--secret", "s3cr3t", "--nonce", "n1", "--timestamp", "1700000000",
				"--method", "PUT", "--content-type", "application/json", "http://gw/api/orders/42", "-d", `{"sku":"A/1","qty":2}`},
			sig: "1d71769910a56e1774a544fc77ccaf2c0a088dfa3acbded71bbcce5e54ff34b5",
		},
		{
			name: "form POST",
			args: []string{"--v2", "--app-key", "app-1", "--secret", "s3cr3t", "--nonce", "n1", "--timestamp", "1700000000",
				"http://gw/api/pay?channel=app", "-d", "amount=19.90&note=gift+wrap", "-d", "to=%40bob"},
			// The body's Content-Type is the form's by default; the vector
			// names a charset, which does not change the signature.
			sig: "57da988f72f278d30fb544a75f2561411e094e844585b69c22558908a4d5b3ae",
		},
		{
			name: "reserved escape in the path",
			args: []string{"--v2", "--app-key", "app-1", "--secret", "s3cr3t", "--nonce", "n1", "--timestamp", "1700000000",
				"http://gw/files/a%2Fb;v=1?q=%E5%90%8D&k%3D=v%26&t=~-._*"},
			sig: "cb1c4ca520b63aa86092884eef3ed66b3aa21e079fdaa1dc31d589e843a7bfaa",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runSign(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if h := parseHeaderLines(t, out); h["X-Sign"] != tc.sig || h["X-App-Key"] != "app-1" {
				t.Errorf("output:\n%s\nwant X-Sign: %s", out, tc.sig)
			}
		})
	}

	code, out, _ := runSign(t, "--v2", "--curl", "--app-key", "app-1", "--secret", "s3cr3t", "--nonce", "n1", "--timestamp", "1700000000",
		"--method", "PUT", "--content-type", "application/json", "http://gw/api/orders/42", "-d", `{"sku":"A/1","qty":2}`)
	want := "curl -X PUT -H 'X-App-Key: app-1' -H 'X-Timestamp: 1700000000' -H 'X-Nonce: n1' " +
		"-H 'X-Sign: 1d71769910a56e1774a544fc77ccaf2c0a088dfa3acbded71bbcce5e54ff34b5' " +
		`-H 'Content-Type: application/json' --data-raw '{"sku":"A/1","qty":2}' http://gw/api/orders/42` + "\n"
	if code != 0 || out != want {
		t.Errorf("curl line:\n%s\nwant\n%s", out, want)
	}

	base := []string{"--v2", "--app-key", "app-1", "--secret", "s3cr3t"}
	for name, args := range map[string][]string{
		"dot segment":               {"http://gw/a/../b"},
		"escaped unreserved":        {"http://gw/%7Euser"},
		"lowercase escape":          {"http://gw/a%2fb"},
		"double slash":              {"http://gw//a"},
		"path not sent as written":  {"http://gw/a b"},
		"content type without body": {"--content-type", "application/json", "http://gw/a"},
		"content type with a break": {"--content-type", "a\nb", "http://gw/a", "-d", "x"},
		"repeated parameter":        {"http://gw/pay?amount=1&amount=1000"},
		"query and form disagree":   {"http://gw/pay?amount=1", "-d", "amount=1000"},
		"content type without --v2": nil,
	} {
		t.Run(name, func(t *testing.T) {
			a := append(slices.Clone(base), args...)
			if args == nil {
				a = []string{"--app-key", "app-1", "--secret", "s3cr3t", "--content-type", "application/json", "http://gw/a", "-d", "{}"}
			}
			code, out, errOut := runSign(t, a...)
			if code != 2 || out != "" || !strings.Contains(errOut, "Usage: tollgate sign") {
				t.Errorf("exit %d, stdout %q, stderr:\n%s", code, out, errOut)
			}
		})
	}
}
