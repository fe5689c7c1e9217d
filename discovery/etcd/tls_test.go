package etcd

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// etcd serving its clients over TLS with a certificate of a test CA: the
// provider trusts it through ca_file and server_name, and a provider
// that trusts another CA gets failures, never a set.
func TestWatchOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testutil.NewTestCA(t)
	certFile, keyFile := ca.Issue(t, dir, "etcd", "etcd", "localhost")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	other := testutil.NewTestCA(t)
	otherFile := filepath.Join(dir, "other.pem")
	if err := os.WriteFile(otherFile, other.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	e := testutil.StartEtcdTLS(t, certFile, keyFile)
	regTLS, err := ClientTLS{CAFile: caFile, ServerName: "localhost"}.config()
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, e, regTLS)
	reg.add("orders", "127.0.0.1:8001", nil)

	p, _ := newTestProvider(t, settingsFor(e, fmt.Sprintf("tls: {ca_file: %q, server_name: localhost}\n", caFile)))
	r := &recorder{}
	watch(t, p, "orders", r)
	r.waitFor(t, 5*time.Second, addrList(8001))
	reg.add("orders", "127.0.0.1:8002", nil)
	r.waitFor(t, 5*time.Second, addrList(8001, 8002))

	// Without server_name the certificate is checked for the endpoint's
	// host, 127.0.0.1, which it does not name.
	unnamed, _ := newTestProvider(t, settingsFor(e, fmt.Sprintf("tls: {ca_file: %q}\n", caFile)))
	mismatch := &recorder{}
	watch(t, unnamed, "orders", mismatch)
	testutil.Eventually(t, 5*time.Second, "fail with a certificate for another name", func() bool {
		_, fails := mismatch.counts()
		return fails > 0
	})
	if n, _ := mismatch.counts(); n != 0 {
		t.Errorf("a set reported through a certificate for another name: %q", mismatch.setsSince(0))
	}

	untrusting, _ := newTestProvider(t, settingsFor(e, fmt.Sprintf("tls: {ca_file: %q, server_name: localhost}\n", otherFile)))
	bad := &recorder{}
	watch(t, untrusting, "orders", bad)
	testutil.Eventually(t, 5*time.Second, "fail with a certificate of an unknown CA", func() bool {
		_, fails := bad.counts()
		return fails > 0
	})
	if n, _ := bad.counts(); n != 0 {
		t.Errorf("a set reported through an untrusted connection: %q", bad.setsSince(0))
	}
	bad.mu.Lock()
	t.Logf("untrusted: %v", bad.fails[0])
	bad.mu.Unlock()
}

// With auth enabled in etcd, the provider signs in with username and
// password; a wrong password is a failure Watch reports and retries.
func TestWatchWithUsernameAndPassword(t *testing.T) {
	t.Parallel()
	e := testutil.StartEtcd(t)
	reg := newRegistry(t, e, nil)
	reg.add("orders", "127.0.0.1:8001", nil)
	ctx := reg.ctx()
	if _, err := reg.client.UserAdd(ctx, "root", "s3cret"); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.client.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.client.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}

	wrong, _ := newTestProvider(t, settingsFor(e, "username: root\npassword: nope\n"))
	bad := &recorder{}
	watch(t, wrong, "orders", bad)
	testutil.Eventually(t, 5*time.Second, "fail with a wrong password", func() bool {
		_, fails := bad.counts()
		return fails > 0
	})
	if n, _ := bad.counts(); n != 0 {
		t.Errorf("a set reported with a wrong password: %q", bad.setsSince(0))
	}

	p, _ := newTestProvider(t, settingsFor(e, "username: root\npassword: s3cret\n"))
	r := &recorder{}
	watch(t, p, "orders", r)
	r.waitFor(t, 5*time.Second, addrList(8001))
	if _, fails := r.counts(); fails != 0 {
		t.Errorf("fail called with the right password: %v", r.fails)
	}
}
