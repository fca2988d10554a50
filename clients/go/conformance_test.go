package liverelay

// The shared conformance scenarios (clients/conformance/scenarios.json)
// through the Go client. The Python and Swift clients run the same file;
// clients/conformance/README.md describes its format. Each scenario is a
// subtest, in the file's order, against one `liverelay serve` set up as the
// file's "setup" says (apps, keys and a slow mock APNs made through the
// admin API).

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/liverelay/liverelay/clients/go/adminpb"
	pb "github.com/liverelay/liverelay/clients/go/liverelaypb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

const conformanceEventually = 30 * time.Second

type conformanceFile struct {
	Setup struct {
		Apps []struct {
			AppID    string          `json:"app_id"`
			BundleID string          `json:"bundle_id"`
			Quotas   json.RawMessage `json:"quotas"`
			SlowAPNs *struct {
				TeamID    string `json:"team_id"`
				KeyID     string `json:"key_id"`
				LatencyMS int    `json:"latency_ms"`
			} `json:"slow_apns"`
		} `json:"apps"`
		Keys map[string]struct {
			AppIDs         []string `json:"app_ids"`
			AllApps        bool     `json:"all_apps"`
			AllowedMethods []string `json:"allowed_methods"`
			Label          string   `json:"label"`
		} `json:"keys"`
		FixedKeys map[string]string `json:"fixed_keys"`
	} `json:"setup"`
	Vars      map[string]string     `json:"vars"`
	Scenarios []conformanceScenario `json:"scenarios"`
}

type conformanceScenario struct {
	Name          string `json:"name"`
	Key           string `json:"key"`
	KnownMismatch *struct {
		Note    string   `json:"note"`
		Clients []string `json:"clients"`
	} `json:"known_mismatch"`
	Steps []map[string]json.RawMessage `json:"steps"`
}

type conformanceStep struct {
	RPC        string                     `json:"rpc"`
	Request    map[string]interface{}     `json:"request"`
	Key        string                     `json:"key"`
	Eventually bool                       `json:"eventually"`
	TimeoutMS  int                        `json:"timeout_ms"`
	Save       map[string]string          `json:"save"`
	Expect     map[string]json.RawMessage `json:"expect"`
}

type conformanceError struct {
	Status     string  `json:"status"`
	Reason     *string `json:"reason"`
	Field      *string `json:"field"`
	RetryAfter *bool   `json:"retry_after"`
}

var conformanceStepKeys = map[string]bool{
	"rpc": true, "request": true, "expect": true, "key": true, "eventually": true, "timeout_ms": true, "save": true,
}

type conformanceEnv struct {
	server *serverProcess
	keys   map[string]string
}

func TestConformance(t *testing.T) {
	needServer(t)
	raw, err := os.ReadFile(filepath.Join("..", "conformance", "scenarios.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec conformanceFile
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatalf("scenarios.json: %v", err)
	}
	env := conformanceSetup(t, &spec)
	for _, scenario := range spec.Scenarios {
		scenario := scenario
		t.Run(scenario.Name, func(t *testing.T) {
			if m := scenario.KnownMismatch; m != nil && (len(m.Clients) == 0 || contains(m.Clients, "go")) {
				fmt.Printf("conformance: skipping %s, a known mismatch: %s\n", scenario.Name, m.Note)
				t.Skip("known mismatch: " + m.Note)
			}
			vars := map[string]string{}
			for k, v := range spec.Vars {
				vars[k] = v
			}
			for i, rawStep := range scenario.Steps {
				for k := range rawStep {
					if !conformanceStepKeys[k] {
						t.Fatalf("step %d: unknown step key %q", i+1, k)
					}
				}
				b, _ := json.Marshal(rawStep)
				var step conformanceStep
				if err := json.Unmarshal(b, &step); err != nil {
					t.Fatalf("step %d: %v", i+1, err)
				}
				env.runStep(t, scenario, step, vars)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// conformanceSetup starts a server in a fresh data directory and makes what
// the file's setup names through the admin API.
func conformanceSetup(t *testing.T, spec *conformanceFile) *conformanceEnv {
	t.Helper()
	binary, _ := serverBinary()
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Minted before the first start, so the server knows it from its first HELLO on.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "admin", "bootstrap", "--data-dir", dataDir, "--label", "go conformance").CombinedOutput()
	if err != nil {
		t.Fatalf("admin bootstrap: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^export LIVERELAY_ADMIN_KEY=(\S+)$`).FindSubmatch(out)
	if m == nil {
		t.Fatal("admin bootstrap printed no key")
	}
	s := startExtraServer(t, dataDir)
	if s.apiKey == "" {
		t.Fatalf("the server printed no API key:\n%s", s.transcript())
	}
	env := &conformanceEnv{server: s, keys: map[string]string{"dev": s.apiKey, "admin": string(m[1])}}
	for name, key := range spec.Setup.FixedKeys {
		env.keys[name] = key
	}
	admin := untilAccepted(t, s, env.keys["admin"], func(c *Client) error {
		_, err := c.ListApps(context.Background(), &adminpb.ListAppsRequest{})
		return err
	})
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p8Path := filepath.Join(dataDir, "apns-dev-key.p8")
	for _, app := range spec.Setup.Apps {
		req := &adminpb.CreateAppRequest{AppId: proto.String(app.AppID), BundleId: proto.String(app.BundleID)}
		if len(app.Quotas) > 0 {
			req.Quotas = &adminpb.Quotas{}
			if err := protojson.Unmarshal(app.Quotas, req.Quotas); err != nil {
				t.Fatalf("app %s quotas: %v", app.AppID, err)
			}
		}
		if _, err := admin.CreateApp(ctx, req); err != nil {
			t.Fatalf("create app %s: %v", app.AppID, err)
		}
		if slow := app.SlowAPNs; slow != nil {
			certFile := filepath.Join(t.TempDir(), "mock-apns.pem")
			port := startConformanceMock(t, binary, certFile, slow.LatencyMS,
				fmt.Sprintf("%s,%s,%s,%s", app.BundleID, slow.TeamID, slow.KeyID, p8Path))
			pem, err := os.ReadFile(p8Path)
			if err != nil {
				t.Fatal(err)
			}
			cert, err := os.ReadFile(certFile)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := admin.PutAPNsCredentials(ctx, &adminpb.PutAPNsCredentialsRequest{
				AppId: proto.String(app.AppID), TeamId: proto.String(slow.TeamID), KeyId: proto.String(slow.KeyID),
				PrivateKeyPem: pem, Endpoint: proto.String(fmt.Sprintf("127.0.0.1:%d", port)), TrustCertificatePem: cert,
			}); err != nil {
				t.Fatalf("credentials of %s: %v", app.AppID, err)
			}
		}
	}
	names := make([]string, 0, len(spec.Setup.Keys))
	for name := range spec.Setup.Keys {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		k := spec.Setup.Keys[name]
		req := &adminpb.CreateAPIKeyRequest{AppIds: k.AppIDs, AllowedMethods: k.AllowedMethods, Label: proto.String(k.Label)}
		if k.AllApps {
			req.AllApps = proto.Bool(true)
		}
		created, err := admin.CreateAPIKey(ctx, req)
		if err != nil {
			t.Fatalf("create key %s: %v", name, err)
		}
		env.keys[name] = created.GetSecret()
	}
	for _, name := range names {
		untilAccepted(t, s, env.keys[name], func(c *Client) error {
			_, err := c.Ping(context.Background(), &pb.PingRequest{})
			return err
		})
	}
	return env
}

// startConformanceMock starts `liverelay mock-apns` with a fixed latency for
// one app, stopped at the test's end, and returns its port once its
// certificate is written.
func startConformanceMock(t *testing.T, binary, certFile string, latencyMS int, app string) int {
	t.Helper()
	cmd := exec.Command(binary, "mock-apns", "--host", "127.0.0.1", "--port", "0", "--cert-out", certFile,
		"--latency-ms", strconv.Itoa(latencyMS), "--app", app)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	var mu sync.Mutex
	var transcript strings.Builder
	ready := make(chan int, 1)
	go func() {
		listening := regexp.MustCompile(`listening on \S*?:(\d+)`)
		port := 0
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			transcript.WriteString(line + "\n")
			mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil && port == 0 {
				port, _ = strconv.Atoi(m[1])
			}
			// The certificate is written after the listening line.
			if port != 0 && strings.HasPrefix(line, "certificate (self-signed") {
				ready <- port
				port = -1
			}
		}
	}()
	select {
	case port := <-ready:
		return port
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the mock APNs did not start:\n%s", transcript.String())
		return 0
	}
}

// expand replaces "$name" strings by the variable's value and
// {"$repeat": s, "times": n} by s repeated n times.
func expand(t *testing.T, v interface{}, vars map[string]string) interface{} {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, "$") {
			value, ok := vars[x[1:]]
			if !ok {
				t.Fatalf("unknown variable %s", x)
			}
			return value
		}
		return x
	case map[string]interface{}:
		if r, ok := x["$repeat"]; ok {
			return strings.Repeat(fmt.Sprint(r), int(x["times"].(float64)))
		}
		out := map[string]interface{}{}
		for k, e := range x {
			out[k] = expand(t, e, vars)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(x))
		for i, e := range x {
			out[i] = expand(t, e, vars)
		}
		return out
	default:
		return v
	}
}

// scalarText is the canonical text of a scenario's scalar: true/false,
// decimal integers, strings as they are.
func scalarText(v interface{}) string {
	switch x := v.(type) {
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}

type conformanceRPC struct {
	request func() proto.Message
	call    func(ctx context.Context, c *Client, req proto.Message) (proto.Message, error)
}

// conformanceRPCs maps each step's RPC name to the client's typed method.
var conformanceRPCs = map[string]conformanceRPC{
	"RegisterToken": {func() proto.Message { return &pb.RegisterTokenRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.RegisterToken(ctx, r.(*pb.RegisterTokenRequest))
	}},
	"StartActivity": {func() proto.Message { return &pb.StartActivityRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.StartActivity(ctx, r.(*pb.StartActivityRequest))
	}},
	"UpdateActivity": {func() proto.Message { return &pb.UpdateActivityRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.UpdateActivity(ctx, r.(*pb.UpdateActivityRequest))
	}},
	"EndActivity": {func() proto.Message { return &pb.EndActivityRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.EndActivity(ctx, r.(*pb.EndActivityRequest))
	}},
	"Ping": {func() proto.Message { return &pb.PingRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.Ping(ctx, r.(*pb.PingRequest))
	}},
	"CreateChannel": {func() proto.Message { return &pb.CreateChannelRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.CreateChannel(ctx, r.(*pb.CreateChannelRequest))
	}},
	"ListChannels": {func() proto.Message { return &pb.ListChannelsRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.ListChannels(ctx, r.(*pb.ListChannelsRequest))
	}},
	"DeleteChannel": {func() proto.Message { return &pb.DeleteChannelRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.DeleteChannel(ctx, r.(*pb.DeleteChannelRequest))
	}},
	"ListEvents": {func() proto.Message { return &pb.ListEventsRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.ListEvents(ctx, r.(*pb.ListEventsRequest))
	}},
	"CreateApp": {func() proto.Message { return &adminpb.CreateAppRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.CreateApp(ctx, r.(*adminpb.CreateAppRequest))
	}},
	"GetApp": {func() proto.Message { return &adminpb.GetAppRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.GetApp(ctx, r.(*adminpb.GetAppRequest))
	}},
	"DisableApp": {func() proto.Message { return &adminpb.DisableAppRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.DisableApp(ctx, r.(*adminpb.DisableAppRequest))
	}},
	"ListApps": {func() proto.Message { return &adminpb.ListAppsRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.ListApps(ctx, r.(*adminpb.ListAppsRequest))
	}},
	"GetAppStats": {func() proto.Message { return &adminpb.GetAppStatsRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.GetAppStats(ctx, r.(*adminpb.GetAppStatsRequest))
	}},
	"CreateAPIKey": {func() proto.Message { return &adminpb.CreateAPIKeyRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.CreateAPIKey(ctx, r.(*adminpb.CreateAPIKeyRequest))
	}},
	"ListAPIKeys": {func() proto.Message { return &adminpb.ListAPIKeysRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.ListAPIKeys(ctx, r.(*adminpb.ListAPIKeysRequest))
	}},
	"RevokeAPIKey": {func() proto.Message { return &adminpb.RevokeAPIKeyRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.RevokeAPIKey(ctx, r.(*adminpb.RevokeAPIKeyRequest))
	}},
	"PutWebhook": {func() proto.Message { return &adminpb.PutWebhookRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.PutWebhook(ctx, r.(*adminpb.PutWebhookRequest))
	}},
	"GetWebhook": {func() proto.Message { return &adminpb.GetWebhookRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.GetWebhook(ctx, r.(*adminpb.GetWebhookRequest))
	}},
	"DeleteWebhook": {func() proto.Message { return &adminpb.DeleteWebhookRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.DeleteWebhook(ctx, r.(*adminpb.DeleteWebhookRequest))
	}},
	"ResetWebhook": {func() proto.Message { return &adminpb.ResetWebhookRequest{} }, func(ctx context.Context, c *Client, r proto.Message) (proto.Message, error) {
		return c.ResetWebhook(ctx, r.(*adminpb.ResetWebhookRequest))
	}},
}

// buildRequest turns a step's request fields into the typed request: JSON
// fields given as objects are serialized, bytes given as text are UTF-8.
func buildRequest(t *testing.T, rpc conformanceRPC, fields map[string]interface{}) proto.Message {
	t.Helper()
	msg := rpc.request()
	desc := msg.ProtoReflect().Descriptor()
	prepared := map[string]interface{}{}
	for name, value := range fields {
		fd := desc.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			t.Fatalf("%s has no field %q", desc.FullName(), name)
		}
		switch {
		case strings.HasSuffix(name, "_json"):
			if _, isText := value.(string); !isText {
				b, err := json.Marshal(value)
				if err != nil {
					t.Fatal(err)
				}
				value = string(b)
			}
		case fd.Kind() == protoreflect.BytesKind:
			value = base64.StdEncoding.EncodeToString([]byte(fmt.Sprint(value)))
		}
		prepared[name] = value
	}
	b, err := json.Marshal(prepared)
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(b, msg); err != nil {
		t.Fatalf("%s from %s: %v", desc.FullName(), b, err)
	}
	return msg
}

// resolve is the values at a dotted path of the reply, "[*]" marking a
// repeated field (every element).
func resolve(t *testing.T, msg proto.Message, path string) []string {
	t.Helper()
	current := []protoreflect.Value{protoreflect.ValueOfMessage(msg.ProtoReflect())}
	var field protoreflect.FieldDescriptor
	for _, segment := range strings.Split(path, ".") {
		many := strings.HasSuffix(segment, "[*]")
		name := strings.TrimSuffix(segment, "[*]")
		var next []protoreflect.Value
		for _, v := range current {
			m, ok := v.Interface().(protoreflect.Message)
			if !ok {
				t.Fatalf("the reply %s has no field %q", msg.ProtoReflect().Descriptor().FullName(), path)
			}
			field = m.Descriptor().Fields().ByName(protoreflect.Name(name))
			if field == nil || field.IsList() != many {
				t.Fatalf("the reply %s has no field %q", msg.ProtoReflect().Descriptor().FullName(), path)
			}
			value := m.Get(field)
			if many {
				list := value.List()
				for i := 0; i < list.Len(); i++ {
					next = append(next, list.Get(i))
				}
			} else {
				next = append(next, value)
			}
		}
		current = next
	}
	out := make([]string, 0, len(current))
	for _, v := range current {
		switch {
		case field.Kind() == protoreflect.EnumKind:
			if ev := field.Enum().Values().ByNumber(v.Enum()); ev != nil {
				out = append(out, string(ev.Name()))
			} else {
				out = append(out, strconv.Itoa(int(v.Enum())))
			}
		case field.Kind() == protoreflect.BytesKind:
			out = append(out, string(v.Bytes()))
		case field.Kind() == protoreflect.MessageKind:
			t.Fatalf("reply field %q is a message, not a value", path)
		default:
			out = append(out, v.String())
		}
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func isSet(v string) bool {
	return v != "" && v != "0" && v != "false" && !strings.HasSuffix(v, "_UNSPECIFIED")
}

// check is "" when the outcome is the one the step expects, else what differs.
func check(t *testing.T, step conformanceStep, reply proto.Message, err error, vars map[string]string) string {
	t.Helper()
	if rawOK, ok := step.Expect["ok"]; ok {
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				return fmt.Sprintf("expected OK, got %s reason %q fields %v: %s", e.Status, e.Reason, e.FieldViolations, e.Message)
			}
			return fmt.Sprintf("expected OK, got %v", err)
		}
		var fields map[string]interface{}
		if err := json.Unmarshal(rawOK, &fields); err != nil {
			t.Fatalf("expect.ok: %v", err)
		}
		paths := make([]string, 0, len(fields))
		for p := range fields {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, path := range paths {
			values := resolve(t, reply, path)
			if list, isList := fields[path].([]interface{}); isList {
				// A list: exactly these values, in this order.
				wanted := make([]string, len(list))
				for i, v := range list {
					wanted[i] = scalarText(expand(t, v, vars))
				}
				if !equalStrings(wanted, values) {
					return fmt.Sprintf("reply field %s: expected %q, got %q", path, wanted, values)
				}
				continue
			}
			want := scalarText(expand(t, fields[path], vars))
			var good bool
			switch {
			case want == "<set>":
				good = len(values) > 0
				for _, v := range values {
					good = good && isSet(v)
				}
			case strings.Contains(path, "[*]"):
				good = contains(values, want)
			default:
				good = len(values) == 1 && values[0] == want
			}
			if !good {
				return fmt.Sprintf("reply field %s: expected %q, got %q", path, want, values)
			}
		}
		return ""
	}
	rawError, ok := step.Expect["error"]
	if !ok {
		t.Fatalf("a step expects neither ok nor error")
	}
	var want conformanceError
	if err := json.Unmarshal(rawError, &want); err != nil {
		t.Fatalf("expect.error: %v", err)
	}
	if err == nil {
		return fmt.Sprintf("expected %s, got OK: %v", want.Status, reply)
	}
	var e *Error
	if !errors.As(err, &e) {
		return fmt.Sprintf("expected %s, got a %T: %v", want.Status, err, err)
	}
	if e.Status.String() != want.Status {
		return fmt.Sprintf("expected %s, got %s reason %q: %s", want.Status, e.Status, e.Reason, e.Message)
	}
	if want.Reason != nil && e.Reason != *want.Reason {
		return fmt.Sprintf("expected reason %q, got %q: %s", *want.Reason, e.Reason, e.Message)
	}
	if want.Field != nil {
		found := false
		for _, v := range e.FieldViolations {
			found = found || v.Field == *want.Field
		}
		if !found {
			return fmt.Sprintf("expected a field violation of %q, got %v: %s", *want.Field, e.FieldViolations, e.Message)
		}
	}
	if want.RetryAfter != nil && (e.RetryAfter > 0) != *want.RetryAfter {
		return fmt.Sprintf("expected retry_after present=%v, got %v", *want.RetryAfter, e.RetryAfter)
	}
	return ""
}

func (env *conformanceEnv) runStep(t *testing.T, scenario conformanceScenario, step conformanceStep, vars map[string]string) {
	t.Helper()
	rpc, ok := conformanceRPCs[step.RPC]
	if !ok {
		t.Fatalf("this runner does not know the step %q: implement it in all three runners", step.RPC)
	}
	keyName := step.Key
	if keyName == "" {
		keyName = scenario.Key
	}
	var secret string
	if strings.HasPrefix(keyName, "$") {
		secret = fmt.Sprint(expand(t, keyName, vars))
	} else if secret, ok = env.keys[keyName]; !ok {
		t.Fatalf("unknown key %q", keyName)
	}
	fields, _ := expand(t, map[string]interface{}(step.Request), vars).(map[string]interface{})
	req := buildRequest(t, rpc, fields)
	deadline := time.Now()
	if step.Eventually {
		deadline = deadline.Add(conformanceEventually)
	}
	var reply proto.Message
	var problem string
	for {
		c, err := New(Config{Address: env.server.addr, APIKey: secret, CAFile: env.server.caFile})
		if err != nil {
			t.Fatal(err)
		}
		timeout := 30 * time.Second
		if step.TimeoutMS > 0 {
			timeout = time.Duration(step.TimeoutMS) * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		var callErr error
		reply, callErr = rpc.call(ctx, c, proto.Clone(req))
		cancel()
		_ = c.Close()
		problem = check(t, step, reply, callErr, vars)
		if problem == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if problem != "" {
		t.Fatalf("%s as %s: %s", step.RPC, keyName, problem)
	}
	names := make([]string, 0, len(step.Save))
	for name := range step.Save {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		values := resolve(t, reply, step.Save[name])
		if len(values) != 1 {
			t.Fatalf("save %s from %s: %q is not one value", name, step.Save[name], values)
		}
		vars[name] = values[0]
	}
}
