package main

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// commandLines returns the `koala-emu ...` lines of the sh blocks of a
// markdown file, without their comments.
func commandLines(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	inSh := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "```sh":
			inSh = true
		case strings.HasPrefix(line, "```"):
			inSh = false
		case inSh && strings.HasPrefix(line, "koala-emu "):
			if i := strings.Index(line, "#"); i >= 0 {
				line = line[:i]
			}
			out = append(out, strings.Fields(line)[1:])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// tempOut points an --out DIR of a command line into a temporary directory.
func tempOut(t *testing.T, args []string) []string {
	out := slices.Clone(args)
	for i := range len(out) - 1 {
		if out[i] == "--out" {
			out[i+1] = filepath.Join(t.TempDir(), out[i+1])
		}
	}
	return out
}

// Every command line of the README's and docs' examples is accepted: it
// parses, its scenario expands with its overrides, and it reaches the
// backend or clean (recorded here instead of run) or runs for real
// (validate, scenarios).
func TestDocumentedCommandLines(t *testing.T) {
	t.Chdir("../..") // the repository's root, where the examples run
	files := []string{"README.md", "docs/docker-netns.md", "docs/cli.md", "docs/malleability.md"}
	n := 0
	for _, file := range files {
		for _, args := range commandLines(t, file) {
			n++
			ta := newTestApp()
			ta.setBackends("inproc", "netns", "docker")
			args = tempOut(t, args)
			if code := ta.exec(args...); code != exitOK {
				t.Errorf("%s: koala-emu %s: exit %d\n%s", filepath.Base(file), strings.Join(args, " "), code, ta.errOut.String())
			}
		}
	}
	t.Logf("%d documented command lines ran", n)
	if n < 10 {
		t.Fatalf("found %d command lines in %v, want at least 10", n, files)
	}
}
