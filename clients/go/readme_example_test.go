package liverelay_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	liverelay "github.com/liverelay/liverelay/clients/go"
	"github.com/liverelay/liverelay/clients/go/liverelaypb"
	"google.golang.org/protobuf/proto"
)

// The repository README's Go example ("Calling LiveRelay", "From Go"), as
// written: the body below is the README's block, which
// TestReadmeExampleIsThisExample checks, and it runs against the server the
// tests start.
func Example_readme() {
	client, err := liverelay.New(liverelay.Config{
		Address: os.Getenv("LIVERELAY_ADDRESS"), // "localhost:7443"
		APIKey:  os.Getenv("LIVERELAY_API_KEY"),
		CAFile:  os.Getenv("LIVERELAY_CA_FILE"), // ".liverelay-dev/cert.pem"
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = client.UpdateActivity(ctx, &liverelaypb.UpdateActivityRequest{
		AppId:            proto.String("dev.app"),
		ActivityId:       proto.String("order-that-never-started"),
		ContentStateJson: proto.String(`{"status":"on the way"}`),
	})
	var e *liverelay.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Reason) // NOT_FOUND ActivityNotFound
	}
	// Output:
	// NOT_FOUND ActivityNotFound
}

func TestReadmeExampleIsThisExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) != 1 {
		t.Fatalf("README.md has %d Go examples, want 1", len(blocks))
	}
	lines := strings.Split(strings.TrimRight(blocks[0][1], "\n"), "\n")
	for i, line := range lines {
		if line != "" {
			lines[i] = "\t" + line
		}
	}
	source, err := os.ReadFile("readme_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(source), "func Example_readme() {\n"+strings.Join(lines, "\n")+"\n\t// Output:") {
		t.Fatal("README.md's Go example and Example_readme differ: copy the README's block into Example_readme")
	}
}
