// Package csvtest reads the CSV files the project writes, for its tests:
// Read returns every row of a file and fails the test when the file cannot
// be read or parsed. It is test support only; no production code imports
// it.
package csvtest

import (
	"encoding/csv"
	"os"
	"testing"
)

// Read returns every row of the CSV file at path, failing t with Fatal
// when it cannot be opened or is not CSV.
func Read(t testing.TB, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
