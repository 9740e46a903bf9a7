package mcp

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/internal/setting"
)

// TestOpenHTTP: every configuration OpenHTTP refuses is a usage error
// naming the field by its key, and opens nothing (no socket file is left);
// stdio opens nothing and refuses nothing; a good one listens.
func TestOpenHTTP(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(strings.Repeat("t", MinTokenLen)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	ok := HTTPConfig{Listen: "unix:" + sock, TokenFile: token, MaxSessions: 1}
	with := func(f func(*HTTPConfig)) HTTPConfig { c := ok; f(&c); return c }
	cases := []struct {
		name string
		c    HTTPConfig
		key  string
		want string // the error as a command line words it
	}{
		{"no session bound", with(func(c *HTTPConfig) { c.MaxSessions = 0 }), KeyMaxSessions, "mcp: --max-sessions 0: must be at least 1"},
		{"negative idle", with(func(c *HTTPConfig) { c.SessionIdle = -1 }), KeySessionIdle, "mcp: --session-idle -1ns: must not be negative"},
		{"token for stdio", HTTPConfig{TokenFile: token, MaxSessions: 1}, KeyTokenFile, "mcp: --token-file is only for HTTP"},
		{"key for stdio", HTTPConfig{TLSKey: token, MaxSessions: 1}, KeyTLSKey, "mcp: --tls-key is only for HTTP"},
		{"no token", with(func(c *HTTPConfig) { c.TokenFile = "" }), KeyTokenFile, "mcp: --token-file is needed to serve HTTP"},
		{"cert alone", with(func(c *HTTPConfig) { c.TLSCert = token }), KeyTLSKey, "mcp: --tls-key is needed with the certificate"},
		{"key alone", with(func(c *HTTPConfig) { c.TLSKey = token }), KeyTLSCert, "mcp: --tls-cert is needed with the key"},
		{"token missing", with(func(c *HTTPConfig) { c.TokenFile = filepath.Join(dir, "nope") }), "", "mcp: token file: open "},
		{"not a certificate", with(func(c *HTTPConfig) { c.TLSCert, c.TLSKey = token, token }), KeyTLSCert, "mcp: --tls-cert " + token + ": tls: "},
		{"every interface", with(func(c *HTTPConfig) { c.Listen = "0.0.0.0:0" }), KeyListen, "mcp: --listen 0.0.0.0:0: 0.0.0.0 is not a loopback address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ln, tok, err := tc.c.OpenHTTP()
			if ln != nil {
				ln.Close()
			}
			var se *setting.Error
			if !errors.As(err, &se) || !se.Usage || se.Key != tc.key || ln != nil || tok != nil {
				t.Fatalf("OpenHTTP() = %v, %q, %v; want a usage *setting.Error keyed %q and nothing opened", ln, tok, err, tc.key)
			}
			if got := setting.Flagged(err).Error(); !strings.HasPrefix(got, tc.want) {
				t.Errorf("worded for a command line: %q, want it to start %q", got, tc.want)
			}
			if _, err := os.Lstat(sock); !os.IsNotExist(err) {
				t.Errorf("a refused configuration left the socket: %v", err)
			}
		})
	}
	if _, _, err := with(func(c *HTTPConfig) { c.Listen = "192.0.2.1:80" }).OpenHTTP(); !errors.Is(err, ErrNeedsTLS) {
		t.Errorf("an address beyond this machine without TLS: %v, want it to match ErrNeedsTLS", err)
	}
	if ln, tok, err := (HTTPConfig{MaxSessions: 1}).OpenHTTP(); ln != nil || tok != nil || err != nil {
		t.Errorf("stdio: OpenHTTP() = %v, %q, %v; want nothing", ln, tok, err)
	}
	// (A Unix socket's reaper is a re-run of the binary: cmd's tests serve
	// one; here, loopback TCP.)
	ln, tok, err := with(func(c *HTTPConfig) { c.Listen = "127.0.0.1:0" }).OpenHTTP()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if string(tok) != strings.Repeat("t", MinTokenLen) {
		t.Errorf("token %q, want the file's without its newline", tok)
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Errorf("the listener does not accept: %v", err)
	} else {
		c.Close()
	}
}
