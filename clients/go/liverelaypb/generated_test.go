package liverelaypb_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// protocVersionLine is the one line of the generated header that names
// protoc's version; the generated code does not otherwise depend on it.
var protocVersionLine = regexp.MustCompile(`(?m)^// \tprotoc +v.*$`)

// TestGeneratedCodeIsCurrent regenerates the code of Protos/ into a
// temporary directory with scripts/generate.sh and fails when a committed
// .pb.go file differs, is missing or is left over: the contract changed
// and scripts/generate.sh was not run.
//
// Without protoc and the pinned protoc-gen-go it is skipped, unless
// LIVERELAY_REQUIRE_GENERATE=1 (scripts/test.sh sets it) makes that a failure.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", "generate.sh")
	for _, tool := range []string{"bash", "protoc", "protoc-gen-go"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("LIVERELAY_REQUIRE_GENERATE") == "1" {
				t.Fatalf("%s is not on PATH (LIVERELAY_REQUIRE_GENERATE=1)", tool)
			}
			t.Skipf("%s is not on PATH: cannot check the generated code", tool)
		}
	}
	out := t.TempDir()
	cmd := exec.Command("bash", script, out)
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/generate.sh failed: %v\n%s", err, output)
	}
	fresh := pbFiles(t, out)
	committed := pbFiles(t, root)
	if len(fresh) == 0 {
		t.Fatal("scripts/generate.sh made no .pb.go file")
	}
	for name, want := range fresh {
		got, ok := committed[name]
		if !ok {
			t.Errorf("%s is generated but not committed: run clients/go/scripts/generate.sh", name)
			continue
		}
		if !bytes.Equal(normalize(got), normalize(want)) {
			t.Errorf("%s is stale: run clients/go/scripts/generate.sh\n%s", name, firstDifference(got, want))
		}
	}
	for name := range committed {
		if _, ok := fresh[name]; !ok {
			t.Errorf("%s is committed but no longer generated from Protos/: delete it", name)
		}
	}
}

// pbFiles maps the .pb.go files under dir, by path relative to it, to their contents.
func pbFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != dir {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".pb.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = data
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func normalize(b []byte) []byte {
	return protocVersionLine.ReplaceAll(b, []byte("// \tprotoc (any)"))
}

func firstDifference(got, want []byte) string {
	g := strings.Split(string(got), "\n")
	w := strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "first difference at line " + strconv.Itoa(i+1) + ":\n  committed: " + gl + "\n  generated: " + wl
		}
	}
	return "no line differs (line endings?)"
}
