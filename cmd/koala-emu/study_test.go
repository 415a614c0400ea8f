package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func testCells(n int) []studyCell {
	cells := make([]studyCell, n)
	for i := range cells {
		cells[i] = studyCell{ic: "myri10g", app: "wave", combo: []string{string(rune('a' + i))}}
	}
	return cells
}

// Cells run side by side and their rows come back in the cells' order,
// whatever order they end in.
func TestRunCellsInOrder(t *testing.T) {
	cells := testCells(4)
	secondDone := make(chan struct{})
	rows, failures, err := runCells(context.Background(), cells, 2, func(_ context.Context, c studyCell) (StudyRow, error) {
		switch c.combo[0] {
		case "a":
			<-secondDone // ends only once the second cell has ended: they ran at once
		case "b":
			defer close(secondDone)
		}
		return StudyRow{Clusters: c.combo, Status: "completed"}, nil
	})
	if err != nil || len(failures) != 0 {
		t.Fatalf("err %v, failures %v", err, failures)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	for i, r := range rows {
		if r.Clusters[0] != cells[i].combo[0] {
			t.Errorf("row %d is cell %s, want %s", i, r.Clusters[0], cells[i].combo[0])
		}
	}
}

// A cell that started and failed keeps its row and is counted as a
// failure; any other error stops the cells not yet started.
func TestRunCellsFailures(t *testing.T) {
	cells := testCells(5)
	rows, failures, err := runCells(context.Background(), cells, 1, func(_ context.Context, c studyCell) (StudyRow, error) {
		if c.combo[0] == "b" {
			return StudyRow{Clusters: c.combo, Status: "error"}, &cellFailed{errors.New("rank 3 lost")}
		}
		return StudyRow{Clusters: c.combo, Status: "completed"}, nil
	})
	if err != nil || len(rows) != 5 || len(failures) != 1 || failures[0] != "rank 3 lost" || rows[1].Status != "error" {
		t.Fatalf("err %v, %d rows, failures %v", err, len(rows), failures)
	}

	var ran atomic.Int32
	rows, _, err = runCells(context.Background(), cells, 1, func(_ context.Context, c studyCell) (StudyRow, error) {
		ran.Add(1)
		if c.combo[0] == "b" {
			return StudyRow{}, errors.New("bad plan")
		}
		return StudyRow{Clusters: c.combo}, nil
	})
	if err == nil || err.Error() != "bad plan" {
		t.Fatalf("err %v, want bad plan", err)
	}
	if len(rows) != 1 || ran.Load() != 2 {
		t.Fatalf("%d rows and %d cells run after an error in the second, want 1 row and 2 cells run", len(rows), ran.Load())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := runCells(ctx, cells, 2, func(ctx context.Context, c studyCell) (StudyRow, error) {
		return StudyRow{}, ctx.Err()
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted study: err %v, want context.Canceled", err)
	}
}
