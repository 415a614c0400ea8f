package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/moby/moby/client"
	tc "github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
)

// Logger receives progress and diagnostic lines; *log.Logger satisfies it.
type Logger interface {
	Printf(format string, args ...any)
}

// ErrDaemon marks errors caused by an unreachable Docker daemon.
var ErrDaemon = errors.New("docker backend: cannot reach the Docker daemon")

// reaperEnv is the testcontainers switch for its reaper container.
const reaperEnv = "TESTCONTAINERS_RYUK_DISABLED"

var setupOnce sync.Once

// DisableReaper turns testcontainers' reaper (Ryuk) off for this process by
// setting TESTCONTAINERS_RYUK_DISABLED=true unless the variable is already
// set, and silences testcontainers' process-wide default logger (messages
// of this package's calls go to the Logger of their options). Ryuk's image
// would have to be pulled, which is impossible without a registry; cleanup
// is done by labels instead (Run.Close, Clean).
//
// testcontainers reads its configuration once per process, so this must
// run before anything else in the process uses testcontainers. Every
// function of this package calls it first; call it yourself only if other
// code uses testcontainers before this package does.
func DisableReaper() {
	setupOnce.Do(func() {
		if _, set := os.LookupEnv(reaperEnv); !set {
			_ = os.Setenv(reaperEnv, "true") // cannot fail for a valid name
		}
		tclog.SetDefault(tclog.NewNoopLogger())
	})
}

// tcLogger adapts an optional Logger to testcontainers' logger.
func tcLogger(l Logger) tclog.Logger {
	if l == nil {
		return tclog.NewNoopLogger()
	}
	return l
}

// connect returns a testcontainers provider whose Docker client answered a
// ping. Errors wrap ErrDaemon.
func connect(ctx context.Context, l Logger) (*tc.DockerProvider, error) {
	DisableReaper()
	// Name Docker's default bridge explicitly: without it the provider
	// creates an unlabelled "reaper_default" network and attaches every
	// container to it as a second network.
	p, err := tc.NewDockerProvider(tc.WithLogger(tcLogger(l)), tc.WithDefaultBridgeNetwork("bridge"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDaemon, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := p.Client().Ping(pctx, client.PingOptions{}); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("%w: %w", ErrDaemon, err)
	}
	return p, nil
}
