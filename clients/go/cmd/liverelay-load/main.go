// Command liverelay-load drives a running LiveRelay server with RegisterToken
// calls through this package's client, closed loop, and prints calls/s, the
// latency percentiles and the CPU each call cost this process (and the
// server, given its pid). scripts/bench/clients.sh runs it beside the Swift
// and Python clients against one null-service server (docs/BENCHMARKS.md,
// "Client libraries").
//
//	liverelay-load -addr 127.0.0.1:7443 -ca-file cert.pem [-connections 4] [-depth 32]
//	    [-warmup 2] [-duration 10] [-server-pid PID] [-json]
//
// Each connection is a Client of one connection with depth goroutines, each
// sending its next call when the previous one returns. The requests are
// those of `liverelay bench --mix register`: a new push-to-start token per
// call. Retries are off. A call is measured when it starts inside the window.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	liverelay "github.com/liverelay/liverelay/clients/go"
	pb "github.com/liverelay/liverelay/clients/go/liverelaypb"
)

// tokenTail ends every token after its index and run tag: kind 04 (liverelay bench's
// registered push-to-start tokens), then filler up to 64 hex digits.
var tokenTail = "04" + "5a1e" + strings.Repeat("c3", 17)

const (
	warmingUp int32 = iota
	measuring
	stopping
)

// result is the one line a run prints with -json; scripts/bench/clients.sh reads it.
type result struct {
	Client             string   `json:"client"`
	Connections        int      `json:"connections"`
	Depth              int      `json:"depth"`
	Seconds            float64  `json:"seconds"`
	Calls              int      `json:"calls"`
	Errors             int      `json:"errors"`
	CallsPerSecond     float64  `json:"calls_per_second"`
	P50Us              float64  `json:"p50_us"`
	P99Us              float64  `json:"p99_us"`
	ClientCPUUsPerCall *float64 `json:"client_cpu_us_per_call"`
	ServerCPUUsPerCall *float64 `json:"server_cpu_us_per_call"`
	FirstError         string   `json:"first_error,omitempty"`
}

type worker struct {
	latencies []int64 // ns, measured calls that succeeded
	errors    int
	firstErr  error
}

func main() {
	addr := flag.String("addr", "127.0.0.1:7443", "the server's host:port")
	caFile := flag.String("ca-file", "", "PEM file of the CA to trust (default: the system's roots)")
	apiKey := flag.String("api-key", os.Getenv("LIVERELAY_API_KEY"), "the API key (default: $LIVERELAY_API_KEY)")
	appID := flag.String("app-id", "dev.app", "the app the tokens are registered for")
	connections := flag.Int("connections", 4, "connections, each a Client of its own")
	depth := flag.Int("depth", 32, "calls in flight per connection")
	warmup := flag.Float64("warmup", 2, "warm-up seconds, not measured")
	duration := flag.Float64("duration", 10, "measured seconds")
	timeout := flag.Duration("timeout", 10*time.Second, "per-call deadline")
	serverPID := flag.Int("server-pid", 0, "the server's pid, when on this machine: its CPU per call is reported")
	asJSON := flag.Bool("json", false, "print the result as JSON on stdout (the summary goes to stderr)")
	flag.Parse()
	if *apiKey == "" || *connections < 1 || *depth < 1 || *duration <= 0 || *warmup < 0 {
		fmt.Fprintln(os.Stderr, "liverelay-load: needs an API key, connections and depth >= 1, duration > 0, warmup >= 0")
		os.Exit(2)
	}

	clients := make([]*liverelay.Client, *connections)
	for i := range clients {
		c, err := liverelay.New(liverelay.Config{
			Address: *addr, APIKey: *apiKey, CAFile: *caFile, ClientName: "liverelay-load",
			Connections: 1, MaxAttempts: 1, DefaultTimeout: *timeout, MaxPendingCalls: 2**depth + 16,
		})
		if err != nil {
			fail(err)
		}
		defer c.Close()
		clients[i] = c
	}
	// Open every connection (TCP, TLS, HELLO) before any clock starts.
	for _, c := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.Ping(ctx, &pb.PingRequest{})
		cancel()
		if err != nil {
			fail(fmt.Errorf("cannot reach the server at %s: %v", *addr, err))
		}
	}

	runTag := hex(uint64(rand.New(rand.NewSource(time.Now().UnixNano())).Uint32()), 8)
	var phase atomic.Int32
	var next atomic.Uint64
	workers := make([]*worker, *connections**depth)
	var wg sync.WaitGroup
	for i := range workers {
		w := &worker{}
		workers[i] = w
		client := clients[i%*connections]
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for {
				p := phase.Load()
				if p == stopping {
					return
				}
				n := next.Add(1) - 1
				scattered := hex(scatter(n), 16)
				req := &pb.RegisterTokenRequest{
					AppId: *appID, Kind: pb.TokenKind_TOKEN_KIND_PUSH_TO_START,
					Token:       scattered + runTag + tokenTail,
					Environment: pb.Environment_ENVIRONMENT_SANDBOX, AttributesType: "BenchRegistered",
					DeviceId: "b" + runTag + "-r" + scattered,
				}
				start := time.Now()
				_, err := client.RegisterToken(ctx, req)
				elapsed := time.Since(start)
				if p != measuring {
					if err != nil {
						time.Sleep(time.Millisecond)
					}
					continue
				}
				if err != nil {
					w.errors++
					if w.firstErr == nil {
						w.firstErr = err
					}
					time.Sleep(time.Millisecond)
					continue
				}
				w.latencies = append(w.latencies, int64(elapsed))
			}
		}()
	}

	time.Sleep(time.Duration(*warmup * float64(time.Second)))
	cpu0, server0 := ownCPUSeconds(), processCPUSeconds(*serverPID)
	t0 := time.Now()
	phase.Store(measuring)
	time.Sleep(time.Duration(*duration * float64(time.Second)))
	phase.Store(stopping)
	window := time.Since(t0).Seconds()
	cpu1, server1 := ownCPUSeconds(), processCPUSeconds(*serverPID)
	wg.Wait()

	var all []int64
	r := result{Client: "go", Connections: *connections, Depth: *depth, Seconds: window}
	for _, w := range workers {
		all = append(all, w.latencies...)
		r.Errors += w.errors
		if w.firstErr != nil && r.FirstError == "" {
			r.FirstError = w.firstErr.Error()
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	r.Calls = len(all)
	r.CallsPerSecond = float64(r.Calls) / window
	r.P50Us, r.P99Us = percentile(all, 50)/1e3, percentile(all, 99)/1e3
	completed := float64(r.Calls + r.Errors)
	if completed > 0 {
		r.ClientCPUUsPerCall = perCall(cpu0, cpu1, completed)
		r.ServerCPUUsPerCall = perCall(server0, server1, completed)
	}
	line := fmt.Sprintf("go: %dx%d RegisterToken: %.0f calls/s, p50 %.0f µs, p99 %.0f µs, client CPU %s µs/call, server CPU %s µs/call (%d calls in %.2f s, %d errors)",
		r.Connections, r.Depth, r.CallsPerSecond, r.P50Us, r.P99Us, show(r.ClientCPUUsPerCall), show(r.ServerCPUUsPerCall), r.Calls, window, r.Errors)
	if r.FirstError != "" {
		line += "; first error: " + r.FirstError
	}
	if *asJSON {
		fmt.Fprintln(os.Stderr, line)
		out, _ := json.Marshal(r)
		fmt.Println(string(out))
	} else {
		fmt.Println(line)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "liverelay-load:", err)
	os.Exit(1)
}

// percentile of sorted values: the smallest value at or above p percent of them.
func percentile(sorted []int64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return float64(sorted[i])
}

func perCall(start, end *float64, calls float64) *float64 {
	if start == nil || end == nil {
		return nil
	}
	v := (*end - *start) * 1e6 / calls
	return &v
}

func show(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return strconv.FormatFloat(*v, 'f', 1, 64)
}

// ownCPUSeconds is the CPU time (user + system, all threads) this process used so far.
func ownCPUSeconds() *float64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return nil
	}
	v := float64(u.Utime.Sec+u.Stime.Sec) + float64(u.Utime.Usec+u.Stime.Usec)/1e6
	return &v
}

// processCPUSeconds reads another process's CPU time from /proc (Linux; nil elsewhere).
func processCPUSeconds(pid int) *float64 {
	if pid <= 0 {
		return nil
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	// "pid (comm) state ...": comm may hold spaces, so count from the last ')'.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return nil
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return nil
	}
	const ticksPerSecond = 100 // USER_HZ, 100 on every Linux architecture Go supports
	v := (utime + stime) / ticksPerSecond
	return &v
}

// scatter is the splitmix64 finalizer, as liverelay bench spreads its tokens over the key space.
func scatter(v uint64) uint64 {
	z := v + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// hex formats v as exactly digits lowercase hex digits.
func hex(v uint64, digits int) string {
	const alphabet = "0123456789abcdef"
	b := make([]byte, digits)
	for i := digits - 1; i >= 0; i-- {
		b[i] = alphabet[v&0xf]
		v >>= 4
	}
	return string(b)
}
