//go:build integration

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/launch/docker"
	"github.com/koala-emu/koala-emu/results"
)

// EnvInterruptAt lists the fractions of a run's jobs completed at which
// TestInterruptLeavesNothing sends Ctrl-C, comma-separated (default 0.5;
// `KOALA_IT_INTERRUPT_AT=0.25,0.5,0.75` is the full measurement).
const EnvInterruptAt = "KOALA_IT_INTERRUPT_AT"

// EnvInterruptScenario is the scenario TestInterruptLeavesNothing
// interrupts (default the 16-host smallGrid; das3-smoke, 214 hosts, is the
// full measurement).
const EnvInterruptScenario = "KOALA_IT_INTERRUPT_SCENARIO"

// EnvInterruptBackends narrows TestInterruptLeavesNothing to some backends,
// comma-separated (default inproc,netns,docker).
const EnvInterruptBackends = "KOALA_IT_INTERRUPT_BACKENDS"

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

// cli builds the koala-emu command once, statically linked, so that the
// docker backend can put it in its image as it is.
func cli(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "koala-emu-it-cli-")
		if err != nil {
			cliErr = err
			return
		}
		cliPath = filepath.Join(dir, "koala-emu")
		cmd := exec.Command("go", "build", "-o", cliPath, "./cmd/koala-emu")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			cliErr = errors.New("go build: " + err.Error() + ": " + string(out))
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliPath
}

// hostState is what a run may leave on the machine: containers and networks
// of any koala-emu run, network namespaces, links and nftables rules.
func hostState(t *testing.T) map[string][]string {
	t.Helper()
	filter := "label=" + docker.LabelRun
	cmds := map[string][]string{
		"containers": {"docker", "ps", "-a", "-q", "--filter", filter},
		"networks":   {"docker", "network", "ls", "-q", "--filter", filter},
		"namespaces": {"ip", "netns", "list"},
		"links":      {"ip", "-o", "link", "show"},
		"nftables":   {"nft", "-s", "list", "ruleset"}, // -s: rules without their counters
	}
	state := map[string][]string{}
	for what, args := range cmds {
		out, err := exec.Command(args[0], args[1:]...).Output()
		if err != nil {
			t.Fatalf("%s: %v", strings.Join(args, " "), err)
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if what == "links" { // "N: name@peer: <FLAGS> ...": the name only
				if f := strings.Fields(l); len(f) > 1 {
					l = strings.TrimSuffix(f[1], ":")
				}
			}
			if l != "" {
				lines = append(lines, l)
			}
		}
		slices.Sort(lines)
		state[what] = lines
	}
	return state
}

// progressCompleted reads the completed count of a progress line.
var progressCompleted = regexp.MustCompile(`, (\d+) completed, (\d+) failed`)

// Ctrl-C during a run on each backend: a small grid (smallGrid, or the
// scenario EnvInterruptScenario names) is interrupted when its progress line first shows at least the
// given share of its jobs completed. The launcher exits with an error
// saying the run was interrupted, writes its results with the books
// balanced and the unfinished jobs counted as interrupted, and the machine
// holds afterwards exactly the containers, networks, namespaces, links and
// nftables rules it held before.
func TestInterruptLeavesNothing(t *testing.T) {
	fractions := []float64{0.5}
	if v := os.Getenv(EnvInterruptAt); v != "" {
		fractions = nil
		for _, f := range strings.Split(v, ",") {
			x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || x <= 0 || x >= 1 {
				t.Fatalf("%s: %q is not a fraction in (0, 1)", EnvInterruptAt, f)
			}
			fractions = append(fractions, x)
		}
	}
	bin := cli(t)
	removeNewCLIImages(t)
	scenario := os.Getenv(EnvInterruptScenario)
	var jobs int
	if scenario == "" {
		scenario = filepath.Join(t.TempDir(), "clean-small.yaml")
		if err := os.WriteFile(scenario, []byte(smallGrid), 0o644); err != nil {
			t.Fatal(err)
		}
		jobs = len(plan(t, "clean-small", []byte(smallGrid)).Jobs)
	} else {
		jobs = len(plan(t, scenario, nil).Jobs)
	}
	backends := []string{"inproc", "netns", "docker"}
	if v := os.Getenv(EnvInterruptBackends); v != "" {
		backends = strings.Split(v, ",")
	}
	for _, backend := range backends {
		for _, f := range fractions {
			t.Run(backend+"/"+strconv.FormatFloat(f, 'f', -1, 64), func(t *testing.T) {
				at := min(max(int(math.Round(f*float64(jobs))), 1), jobs-1)
				interruptRun(t, bin, scenario, backend, at, jobs)
			})
		}
	}
}

// removeNewCLIImages removes, when t ends, the images the docker runs of
// t built from the command's binary.
func removeNewCLIImages(t *testing.T) {
	images := cliImages(t)
	t.Cleanup(func() {
		for _, ref := range cliImages(t) {
			if !slices.Contains(images, ref) {
				if out, err := exec.Command("docker", "image", "rm", ref).CombinedOutput(); err != nil {
					t.Errorf("docker image rm %s: %v: %s", ref, err, out)
				}
			}
		}
	})
}

// cliImages lists the tags of the images `koala-emu run --backend docker`
// builds from its own binary (repository koala-emu, one tag per binary).
func cliImages(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("docker", "images", "--format", "{{.Repository}}:{{.Tag}}", "koala-emu").Output()
	if err != nil {
		t.Fatalf("docker images: %v", err)
	}
	return strings.Fields(string(out))
}

// interruptRun runs scenario on backend, sends SIGINT once at least at
// jobs have completed, and checks the exit, the results and the host.
func interruptRun(t *testing.T, bin, scenario, backend string, at, jobs int) {
	before := hostState(t)
	out := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", scenario, "--backend", backend, "--out", out)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = nil
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var sent time.Time
	var tail []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		tail = append(tail, line)
		if len(tail) > 30 {
			tail = tail[1:]
		}
		m := progressCompleted.FindStringSubmatch(line)
		if m == nil || !sent.IsZero() {
			continue
		}
		if done, _ := strconv.Atoi(m[1]); done >= at {
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			sent = time.Now()
			t.Logf("%s: Ctrl-C after %.1f s at %q", backend, sent.Sub(start).Seconds(), line)
		}
	}
	err = cmd.Wait()
	if sent.IsZero() {
		t.Fatalf("the run ended (%v) before %d of %d jobs completed; its last lines:\n%s", err, at, jobs, strings.Join(tail, "\n"))
	}
	t.Logf("%s: the launcher exited %.1f s after Ctrl-C (%v)", backend, time.Since(sent).Seconds(), err)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(strings.Join(tail, "\n"), "run interrupted") {
		t.Errorf("want an exit status saying the run was interrupted, got %v; last lines:\n%s", err, strings.Join(tail, "\n"))
	}
	b := readBooks(t, out)
	t.Logf("%s: books %+v", backend, b)
	if !b.Balanced() || b.Submitted != b.Ended() {
		t.Errorf("books do not balance: %+v", b)
	}
	if b.Completed < at || b.Interrupted+b.NeverSubmitted == 0 {
		t.Errorf("want at least %d completed and some jobs interrupted or never submitted, got %+v", at, b)
	}
	assertState(t, "after the run", before)
}

// readBooks reads the books of the run whose results are in dir.
func readBooks(t *testing.T, dir string) results.Books {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatalf("results of the run: %v", err)
	}
	var res struct {
		Books results.Books `json:"books"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	return res.Books
}

// assertState checks that the machine holds what it held in want. A new
// network the Docker daemon refuses to remove for endpoints no container
// holds (staleNetwork: moby/moby#42119, which the run reports as a
// warning) is tolerated, with its bridge and the daemon's rules for it.
func assertState(t *testing.T, when string, want map[string][]string) {
	t.Helper()
	now := hostState(t)
	for _, id := range now["networks"] {
		if !slices.Contains(want["networks"], id) && staleNetwork(t, id) {
			now = withoutNetwork(now, id)
		}
	}
	for what := range want {
		if !slices.Equal(want[what], now[what]) {
			t.Errorf("%s: %s before:\n%s\nnow:\n%s", when, what, strings.Join(want[what], "\n"), strings.Join(now[what], "\n"))
		}
	}
}

// withoutNetwork is state without Docker network id: the network, its
// bridge (br- and the first 12 characters of the ID) and the nftables
// rules that name the bridge.
func withoutNetwork(state map[string][]string, id string) map[string][]string {
	bridge := "br-" + id[:min(12, len(id))]
	out := map[string][]string{}
	for what, lines := range state {
		out[what] = slices.DeleteFunc(slices.Clone(lines), func(l string) bool {
			switch what {
			case "networks":
				return l == id
			case "links":
				return l == bridge
			case "nftables":
				return strings.Contains(l, `"`+bridge+`"`)
			}
			return false
		})
	}
	return out
}

func mapsEqual(a, b map[string][]string) bool {
	return maps.EqualFunc(a, b, slices.Equal[[]string])
}

// withoutNetwork takes out a network, its bridge and the rules naming the
// bridge, and nothing else: not another network's bridge, not a rule of
// docker0.
func TestWithoutNetwork(t *testing.T) {
	id := "f1dc13f33efc2b0ff31fad801b234e3031ed717c224197b324a12981b64c9b40"
	state := map[string][]string{
		"networks":   {id, "0123456789ab"},
		"links":      {"br-f1dc13f33efc", "br-0123456789ab", "docker0"},
		"nftables":   {`iifname "br-f1dc13f33efc" counter return`, `iifname "br-0123456789ab" counter return`, `iifname "docker0" counter return`},
		"namespaces": {"br-f1dc13f33efc"},
	}
	got := withoutNetwork(state, id)
	want := map[string][]string{
		"networks":   {"0123456789ab"},
		"links":      {"br-0123456789ab", "docker0"},
		"nftables":   {`iifname "br-0123456789ab" counter return`, `iifname "docker0" counter return`},
		"namespaces": {"br-f1dc13f33efc"},
	}
	if !mapsEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if len(state["networks"]) != 2 {
		t.Fatalf("the state given was changed: %v", state)
	}
}
