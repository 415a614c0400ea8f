package csvtest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.csv")
	if err := os.WriteFile(path, []byte("a,b\n\"x,y\",2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := Read(t, path)
	if want := [][]string{{"a", "b"}, {"x,y", "2"}}; !slices.EqualFunc(rows, want, slices.Equal) {
		t.Fatalf("rows %q, want %q", rows, want)
	}
}
