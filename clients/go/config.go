package liverelay

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/liverelay/liverelay/clients/go/internal/wire"
)

// Config is everything a Client needs to reach one LiveRelay server and to
// decide, without asking the caller, when a failed call may be sent again.
// Zero fields take the defaults documented on each.
type Config struct {
	// Address is the server's "host:port". Required.
	Address string
	// APIKey is sent once per connection in HELLO (1 to 512 bytes). Required.
	// It is never logged nor put into an error message.
	APIKey string

	// CAFile is a PEM file of the certificates to trust instead of the
	// system's roots, e.g. a development server's <data dir>/cert.pem.
	CAFile string
	// ClientCertFile and ClientKeyFile are a PEM certificate chain and its
	// private key, presented to a server that asks for one (mTLS).
	ClientCertFile, ClientKeyFile string
	// TLSConfig, when set, is the base of the TLS configuration (cloned;
	// CAFile and the client certificate are added to it). ServerName
	// defaults to Address's host.
	TLSConfig *tls.Config
	// Plaintext speaks the protocol over plain TCP, without TLS. For tests
	// only: the API key would cross the network in the clear.
	Plaintext bool

	// ClientName shows in the server's logs (at most 255 bytes). Default "liverelay-go".
	ClientName string
	// Connections is the size of the pool. One pipelined connection carries
	// thousands of calls per second; more spread the work over the server's
	// event loops and survive one connection's loss better. Default 2.
	Connections int
	// DefaultTimeout bounds calls whose context has no deadline. Default
	// 10s; negative: such calls have no deadline.
	DefaultTimeout time.Duration
	// MaxAttempts is how many times a call is sent at most, the first
	// included, when its failures allow resending (see Client). Default 5; 1
	// disables retries.
	MaxAttempts int
	// BackoffInitial and BackoffMax bound the wait before a retry and before
	// a reconnect: capped exponential back-off with jitter, so that clients
	// that lost the same server do not come back in lock step. Defaults
	// 100ms and 10s.
	BackoffInitial, BackoffMax time.Duration
	// ConnectTimeout bounds TCP connect and TLS handshake. Default 10s.
	ConnectTimeout time.Duration
	// KeepaliveInterval: a PING goes after this long with calls outstanding
	// and nothing received, and the connection is declared dead when no PONG
	// comes within KeepaliveTimeout. Defaults 30s and 10s; negative interval
	// disables it. Keep it at 10s or more: servers punish PING floods.
	KeepaliveInterval, KeepaliveTimeout time.Duration
	// MaxFrameSize is the largest frame payload the client accepts (its
	// MAX_FRAME_SIZE in HELLO), 16,384 to 16,777,215. Default 1 MiB.
	MaxFrameSize uint32
	// MaxPendingCalls bounds the calls the client holds at once (sent or
	// waiting for a connection); beyond it calls fail at once with
	// RESOURCE_EXHAUSTED, so an unreachable server cannot grow the client's
	// memory without bound. Default 10,000.
	MaxPendingCalls int
	// WriteTimeout bounds one write to the socket; a connection whose
	// writes stall that long (at least 3/4 of it) is closed. Default 30s.
	WriteTimeout time.Duration
	// CloseTimeout is how long Close lets outstanding calls finish. Default 10s.
	CloseTimeout time.Duration
	// DialContext opens the TCP connection (the TLS handshake is the
	// client's). Default: a net.Dialer. Tests and proxies replace it.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
}

// DefaultClientName is sent in HELLO when Config.ClientName is empty.
const DefaultClientName = "liverelay-go"

// settings is a Config with its defaults applied and its TLS built.
type settings struct {
	Config
	tls   *tls.Config
	hello []byte // preface and HELLO: holds the API key, never logged
}

func (cfg Config) resolve() (*settings, error) {
	s := &settings{Config: cfg}
	if s.Address == "" {
		return nil, errors.New("liverelay: Config.Address is required")
	}
	host, _, err := net.SplitHostPort(s.Address)
	if err != nil {
		return nil, fmt.Errorf("liverelay: Config.Address %q is not host:port: %v", s.Address, err)
	}
	if s.ClientName == "" {
		s.ClientName = DefaultClientName
	}
	if s.Connections <= 0 {
		s.Connections = 2
	}
	if s.DefaultTimeout == 0 {
		s.DefaultTimeout = 10 * time.Second
	}
	if s.MaxAttempts <= 0 {
		s.MaxAttempts = 5
	}
	if s.BackoffInitial <= 0 {
		s.BackoffInitial = 100 * time.Millisecond
	}
	if s.BackoffMax <= 0 {
		s.BackoffMax = 10 * time.Second
	}
	if s.BackoffMax < s.BackoffInitial {
		s.BackoffMax = s.BackoffInitial
	}
	if s.ConnectTimeout <= 0 {
		s.ConnectTimeout = 10 * time.Second
	}
	if s.KeepaliveInterval == 0 {
		s.KeepaliveInterval = 30 * time.Second
	}
	if s.KeepaliveTimeout <= 0 {
		s.KeepaliveTimeout = 10 * time.Second
	}
	if s.MaxFrameSize == 0 {
		s.MaxFrameSize = wire.DefaultMaxFrameSize
	}
	if s.MaxFrameSize < wire.MinMaxFrameSize || s.MaxFrameSize > wire.MaxMaxFrameSize {
		return nil, fmt.Errorf("liverelay: Config.MaxFrameSize %d is not in %d...%d", s.MaxFrameSize, wire.MinMaxFrameSize, wire.MaxMaxFrameSize)
	}
	if s.MaxPendingCalls <= 0 {
		s.MaxPendingCalls = 10_000
	}
	if s.WriteTimeout <= 0 {
		s.WriteTimeout = 30 * time.Second
	}
	if s.CloseTimeout <= 0 {
		s.CloseTimeout = 10 * time.Second
	}
	if s.DialContext == nil {
		s.DialContext = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	hello, err := wire.AppendHello(wire.Magic[:], wire.HelloFields{
		MinVersion: wire.Version,
		MaxVersion: wire.Version,
		APIKey:     []byte(s.APIKey),
		ClientName: s.ClientName,
		Settings:   []wire.SettingPair{{ID: wire.SettingMaxFrameSize, Value: s.MaxFrameSize}},
	})
	if err != nil {
		return nil, fmt.Errorf("liverelay: %v", err)
	}
	s.hello = hello
	if !s.Plaintext {
		if s.tls, err = s.buildTLS(host); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *settings) buildTLS(host string) (*tls.Config, error) {
	var t *tls.Config
	if s.TLSConfig != nil {
		t = s.TLSConfig.Clone()
	} else {
		t = &tls.Config{}
	}
	if t.MinVersion == 0 {
		t.MinVersion = tls.VersionTLS12
	}
	if t.ServerName == "" {
		t.ServerName = host
	}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("liverelay: Config.CAFile: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("liverelay: Config.CAFile %s holds no PEM certificate", s.CAFile)
		}
		t.RootCAs = pool
	}
	if s.ClientCertFile != "" || s.ClientKeyFile != "" {
		if s.ClientCertFile == "" || s.ClientKeyFile == "" {
			return nil, errors.New("liverelay: Config.ClientCertFile and Config.ClientKeyFile go together")
		}
		pair, err := tls.LoadX509KeyPair(s.ClientCertFile, s.ClientKeyFile)
		if err != nil {
			return nil, fmt.Errorf("liverelay: client certificate: %v", err)
		}
		t.Certificates = append(t.Certificates, pair)
	}
	return t, nil
}
