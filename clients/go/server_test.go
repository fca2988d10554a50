package liverelay

// The real server the tests run against: the `liverelay` binary built from
// this repository (LIVERELAY_BINARY, default ../../.build/debug/liverelay),
// started on 127.0.0.1 with port 0 (the kernel picks a free one, which the
// server prints) and a fresh temporary data directory, and always stopped.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/liverelay/liverelay/clients/go/adminpb"
)

// serverProcess is one running `liverelay serve`.
type serverProcess struct {
	cmd     *exec.Cmd
	dataDir string
	addr    string // 127.0.0.1:port
	apiKey  string // printed on the first start of a data directory only
	caFile  string

	mu     sync.Mutex
	output bytes.Buffer // stdout and stderr, for failure messages
	exited chan struct{}
	err    error
}

// shared is the server most tests use, started by TestMain.
var shared *serverProcess

// serverSkip says why the server tests cannot run (no binary and none asked for).
var serverSkip string

func TestMain(m *testing.M) {
	code := func() int {
		binary, explicit := serverBinary()
		if _, err := os.Stat(binary); err != nil {
			if explicit {
				fmt.Fprintf(os.Stderr, "LIVERELAY_BINARY=%s: %v\n", binary, err)
				return 1
			}
			serverSkip = fmt.Sprintf("no server binary at %s (build it with `swift build` at the repository root, or set LIVERELAY_BINARY)", binary)
			// The Example needs the server and cannot skip itself: run the tests only.
			flag.Parse()
			if run := flag.Lookup("test.run"); run != nil && run.Value.String() == "" {
				_ = flag.Set("test.run", "^Test")
			}
			fmt.Fprintln(os.Stderr, "note: the tests against a server are skipped:", serverSkip)
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "liverelay-go-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		shared, err = startServer(binary, filepath.Join(dir, "data"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer shared.stop()
		if shared.apiKey == "" {
			fmt.Fprintf(os.Stderr, "the server printed no API key:\n%s\n", shared.transcript())
			return 1
		}
		// The Example reads these, as a program would.
		os.Setenv("LIVERELAY_ADDRESS", shared.addr)
		os.Setenv("LIVERELAY_API_KEY", shared.apiKey)
		os.Setenv("LIVERELAY_CA_FILE", shared.caFile)
		code := m.Run()
		if code != 0 || os.Getenv("LIVERELAY_SERVER_LOG") == "1" {
			fmt.Fprintf(os.Stderr, "--- server output:\n%s\n", shared.transcript())
		}
		return code
	}()
	os.Exit(code)
}

func serverBinary() (string, bool) {
	if b := os.Getenv("LIVERELAY_BINARY"); b != "" {
		return b, true
	}
	return filepath.Join("..", "..", ".build", "debug", "liverelay"), false
}

// needServer skips a test when no server can run, and returns the shared one.
func needServer(t *testing.T) *serverProcess {
	t.Helper()
	if shared == nil {
		if serverSkip == "" {
			t.Fatal("the shared server is not running")
		}
		t.Skip(serverSkip)
	}
	return shared
}

var (
	listeningLine = regexp.MustCompile(`^listening on (\S+):(\d+)`)
	apiKeyLine    = regexp.MustCompile(`^export LIVERELAY_API_KEY=(\S+)$`)
)

// startServer starts `liverelay serve` on a free port with dataDir (made if
// missing) and waits, bounded, for its "listening on" line. Extra
// arguments follow the defaults.
func startServer(binary, dataDir string, extra ...string) (*serverProcess, error) {
	args := []string{"serve", "--host", "127.0.0.1", "--port", "0", "--no-ops"}
	if !hasFlag(extra, "--config") {
		args = append(args, "--data-dir", dataDir)
	}
	args = append(args, extra...)
	cmd := exec.Command(binary, args...)
	// The server dies with the test process, even when a test panics.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &serverProcess{cmd: cmd, dataDir: dataDir, caFile: filepath.Join(dataDir, "cert.pem"), exited: make(chan struct{})}
	cmd.Stderr = &lockedWriter{s}
	// ETXTBSY: the binary is being written (a build finishing); exec works a moment later.
	for tries := 0; ; tries++ {
		err = cmd.Start()
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ETXTBSY) || tries == 50 {
			return nil, fmt.Errorf("cannot start %s: %v", binary, err)
		}
		time.Sleep(100 * time.Millisecond)
		cmd = rebuild(cmd)
		if stdout, err = cmd.StdoutPipe(); err != nil {
			return nil, err
		}
		cmd.Stderr = &lockedWriter{s}
		s.cmd = cmd
	}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.output.WriteString(line + "\n")
			if m := apiKeyLine.FindStringSubmatch(line); m != nil && s.apiKey == "" {
				s.apiKey = m[1]
			}
			s.mu.Unlock()
			if m := listeningLine.FindStringSubmatch(line); m != nil && !found {
				found = true
				listening <- m[1] + ":" + m[2]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.exited)
	}()
	select {
	case addr := <-listening:
		s.addr = addr
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("the server exited before listening (%v):\n%s", s.exitErr(), s.transcript())
	case <-time.After(90 * time.Second):
		s.kill()
		return nil, fmt.Errorf("the server printed no \"listening on\" line within 90 s:\n%s", s.transcript())
	}
}

// rebuild is a fresh copy of a command whose Start failed (an exec.Cmd runs once).
func rebuild(cmd *exec.Cmd) *exec.Cmd {
	again := exec.Command(cmd.Path, cmd.Args[1:]...)
	again.SysProcAttr = cmd.SysProcAttr
	return again
}

func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

type lockedWriter struct{ s *serverProcess }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.output.Write(p)
}

func (s *serverProcess) transcript() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.output.String()
	if s.apiKey != "" {
		out = strings.ReplaceAll(out, s.apiKey, "lrk_<redacted>")
	}
	if len(out) > 20000 {
		out = "...\n" + out[len(out)-20000:]
	}
	return out
}

func (s *serverProcess) exitErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// signal sends sig to the server.
func (s *serverProcess) signal(sig os.Signal) error { return s.cmd.Process.Signal(sig) }

// stop: SIGTERM (a graceful shutdown), then SIGKILL if it has not exited within 15 s.
func (s *serverProcess) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		s.kill()
	}
}

func (s *serverProcess) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// waitExit waits, bounded, for the server to exit.
func (s *serverProcess) waitExit(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case <-s.exited:
		return s.exitErr()
	case <-time.After(within):
		t.Fatalf("the server did not exit within %v:\n%s", within, s.transcript())
		return nil
	}
}

// startExtraServer starts another server for one test, stopped at its end.
func startExtraServer(t *testing.T, dataDir string, extra ...string) *serverProcess {
	t.Helper()
	needServer(t)
	binary, _ := serverBinary()
	s, err := startServer(binary, dataDir, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() || os.Getenv("LIVERELAY_SERVER_LOG") == "1" {
			t.Logf("server %s output:\n%s", s.addr, s.transcript())
		}
	})
	return s
}

// clientFor makes a client of s with cfg's other fields, closed at the test's end.
func clientFor(t *testing.T, s *serverProcess, cfg Config) *Client {
	t.Helper()
	cfg.Address = s.addr
	if cfg.APIKey == "" {
		cfg.APIKey = s.apiKey
	}
	if cfg.CAFile == "" {
		cfg.CAFile = s.caFile
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// bootstrapAdmin mints an admin key in s's registry with `liverelay admin bootstrap`.
func bootstrapAdmin(t *testing.T, s *serverProcess) string {
	t.Helper()
	binary, _ := serverBinary()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "admin", "bootstrap", "--data-dir", s.dataDir, "--label", "go client tests").CombinedOutput()
	if err != nil {
		t.Fatalf("admin bootstrap: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^export LIVERELAY_ADMIN_KEY=(\S+)$`).FindSubmatch(out)
	if m == nil {
		t.Fatal("admin bootstrap printed no key")
	}
	return string(m[1])
}

// untilAccepted calls f with fresh clients of key until the server accepts
// the key: a key minted while the server runs is accepted once the server
// reloads its registry (it polls every second). A refusal is final for a
// client, hence a new one each time.
func untilAccepted(t *testing.T, s *serverProcess, key string, f func(*Client) error) *Client {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c := clientFor(t, s, Config{APIKey: key, BackoffInitial: 10 * time.Millisecond})
		err := f(c)
		if err == nil {
			return c
		}
		if !errors.Is(err, ErrAPIKeyRefused) || time.Now().After(deadline) {
			t.Fatalf("the key was not accepted: %v", err)
		}
		_ = c.Close()
		// The registry is reloaded about every second; polling faster gains nothing.
		time.Sleep(100 * time.Millisecond)
	}
}

var (
	adminOnce sync.Once
	adminKey  string
)

// sharedAdmin is an admin client of the shared server.
func sharedAdmin(t *testing.T) *Client {
	t.Helper()
	s := needServer(t)
	adminOnce.Do(func() { adminKey = bootstrapAdmin(t, s) })
	if adminKey == "" {
		t.Fatal("no admin key")
	}
	return untilAccepted(t, s, adminKey, func(c *Client) error {
		_, err := c.ListApps(context.Background(), &adminpb.ListAppsRequest{})
		return err
	})
}
