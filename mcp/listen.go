package mcp

import (
	"crypto/tls"
	"errors"
	"strconv"
	"time"

	"github.com/b10x/harness/internal/setting"
)

// HTTPConfig says how a server is reached over streamable HTTP. Its zero
// value is no HTTP at all (stdio) with sessions bounded by nothing, which
// OpenHTTP refuses: MaxSessions must be at least 1.
type HTTPConfig struct {
	// Listen is the address: "unix:/PATH" or "HOST:PORT" (see Listen); ""
	// serves stdio, and then none of the files below may be given.
	Listen string
	// TokenFile holds the bearer token every request must carry
	// (ReadToken); needed with Listen.
	TokenFile string
	// TLSCert and TLSKey are the PEM certificate and private key to serve
	// TLS with, both or neither; without them Listen must be a loopback
	// address or a Unix socket.
	TLSCert, TLSKey string
	// SessionIdle closes a session without a request for this long (0:
	// never); negative is refused.
	SessionIdle time.Duration
	// MaxSessions bounds the sessions open at once; below 1 is refused.
	MaxSessions int
}

// The keys HTTPConfig's errors name (setting.Error.Key): a command line
// words them as its flags.
const (
	KeyListen      = "listen"
	KeyTokenFile   = "token_file"
	KeyTLSCert     = "tls_cert"
	KeyTLSKey      = "tls_key"
	KeySessionIdle = "session_idle"
	KeyMaxSessions = "max_sessions"
)

// OpenHTTP checks c, reads the token and opens the listener: nil, nil, nil
// when c.Listen is empty. Call it before the harness confines itself, as
// Listen says. Every error is a *setting.Error with Usage set, In "mcp",
// naming the field by its key (KeyListen...; ReadToken's errors name the
// token file themselves): a configuration the caller must change, with
// nothing opened.
func (c HTTPConfig) OpenHTTP() (*Listener, []byte, error) {
	bad := func(key, value string, err error) error {
		return &setting.Error{In: "mcp", Key: key, Value: value, Err: err, Usage: true}
	}
	phrase := func(key, text string) error {
		return &setting.Error{In: "mcp", Key: key, Phrase: true, Err: errors.New(text), Usage: true}
	}
	if c.MaxSessions < 1 {
		return nil, nil, bad(KeyMaxSessions, strconv.Itoa(c.MaxSessions), errors.New("must be at least 1 (sessions are always bounded)"))
	}
	if c.SessionIdle < 0 {
		return nil, nil, bad(KeySessionIdle, c.SessionIdle.String(), errors.New("must not be negative (0: sessions never expire)"))
	}
	if c.Listen == "" {
		for _, f := range []struct{ key, v string }{{KeyTokenFile, c.TokenFile}, {KeyTLSCert, c.TLSCert}, {KeyTLSKey, c.TLSKey}} {
			if f.v != "" {
				return nil, nil, phrase(f.key, "is only for HTTP (the stdio transport needs no token and no TLS)")
			}
		}
		return nil, nil, nil
	}
	switch {
	case c.TokenFile == "":
		return nil, nil, phrase(KeyTokenFile, "is needed to serve HTTP: every HTTP request must carry the bearer token the file holds")
	case c.TLSCert != "" && c.TLSKey == "":
		return nil, nil, phrase(KeyTLSKey, "is needed with the certificate")
	case c.TLSKey != "" && c.TLSCert == "":
		return nil, nil, phrase(KeyTLSCert, "is needed with the key")
	}
	token, err := ReadToken(c.TokenFile)
	if err != nil {
		return nil, nil, &setting.Error{In: "mcp", Err: err, Usage: true} // it names the token file
	}
	var tlsConf *tls.Config
	if c.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return nil, nil, bad(KeyTLSCert, c.TLSCert, err)
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	}
	ln, err := Listen(c.Listen, tlsConf)
	if err != nil {
		// Listen's error starts with the address.
		return nil, nil, &setting.Error{In: "mcp", Key: KeyListen, Phrase: true, Err: err, Usage: true}
	}
	return ln, token, nil
}
