package main

import (
	"os"
	"testing"

	"github.com/koala-emu/koala-emu/internal/cachetest"
)

func TestMain(m *testing.M) { os.Exit(cachetest.Run(m)) }
