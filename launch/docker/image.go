package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	tc "github.com/testcontainers/testcontainers-go"
)

// DefaultRepo is the repository name of the koala-emu image.
const DefaultRepo = "koala-emu"

// Dockerfile is the image recipe, identical to docker/Dockerfile in the
// repository (a test keeps them equal). BuildImage uses it unless
// ImageOptions.Dockerfile names another file.
const Dockerfile = `# The one koala-emu image: every actor host of the docker backend (scheduler,
# information service, cluster managers, compute nodes, runners) runs
# ` + "`koala-emu node ...`" + ` from it. Nothing to pull: the base is empty and the
# binary is statically linked (CGO_ENABLED=0).
#
# Build context: a directory holding this file and the binary as
# ./koala-emu; launch/docker.BuildImage prepares it. By hand:
#   CGO_ENABLED=0 go build -o ctx/koala-emu ./cmd/koala-emu
#   cp docker/Dockerfile ctx/ && docker build -t koala-emu:dev ctx
FROM scratch
COPY koala-emu /koala-emu
ENTRYPOINT ["/koala-emu"]
`

// ImageOptions says what BuildImage puts into the image.
type ImageOptions struct {
	// Binary is a prebuilt, statically linked Linux binary (for instance
	// the running koala-emu, os.Executable). Empty: build Package.
	Binary string
	// Package is the Go package built with CGO_ENABLED=0 when Binary is
	// empty; default "./cmd/koala-emu". It is built for linux and the
	// Docker daemon's architecture.
	Package string
	// Dir is the directory `go build` runs in (inside the module); default
	// the working directory.
	Dir string
	// Repo is the image repository; default DefaultRepo.
	Repo string
	// Tag is the image tag; default the first 12 hex digits of the
	// binary's SHA-256, so an unchanged binary reuses its image.
	Tag string
	// Dockerfile is the path of a Dockerfile to use instead of the
	// built-in Dockerfile; it must COPY ./koala-emu.
	Dockerfile string
	// Force rebuilds even when an up-to-date image exists.
	Force bool
	// BuildLog receives the output of `go build` and `docker build`; nil
	// discards it.
	BuildLog io.Writer
	// Logger receives testcontainers' messages; nil discards them.
	Logger Logger
}

// BuildImage builds (or finds) the koala-emu image and returns its
// reference "repo:tag".
//
// The binary is Binary, or Package built with `go build -trimpath` and
// CGO_ENABLED=0 into a temporary build context. A binary that is not
// statically linked is refused: a FROM scratch image has no loader. The
// image is built through testcontainers (FromDockerfile, KeepImage) and
// labelled koala-emu.image=true. Nothing is rebuilt when the image exists
// and was created after the binary's modification time (with the default
// content-hash tag: when it exists at all). When a rebuild moves an
// explicit tag, the image it pointed to is removed unless still in use.
//
// Errors wrap ErrDaemon when Docker is not reachable.
func BuildImage(ctx context.Context, opts ImageOptions) (string, error) {
	p, err := connect(ctx, opts.Logger)
	if err != nil {
		return "", err
	}
	defer p.Close()
	cli := p.Client()

	dir, err := os.MkdirTemp("", "koala-emu-image-")
	if err != nil {
		return "", fmt.Errorf("docker backend: build context: %w", err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "koala-emu")
	modTime, sum, err := stageBinary(ctx, cli, opts, bin)
	if err != nil {
		return "", err
	}
	repo, tag := opts.Repo, opts.Tag
	if repo == "" {
		repo = DefaultRepo
	}
	hashTag := tag == ""
	if hashTag {
		tag = sum[:12]
	}
	ref := repo + ":" + tag

	var previous string // image the tag pointed to before, if any
	img, err := cli.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		previous = img.ID
		created, perr := time.Parse(time.RFC3339Nano, img.Created)
		if !opts.Force && (hashTag || (perr == nil && created.After(modTime))) {
			return ref, nil
		}
	case !cerrdefs.IsNotFound(err):
		return "", fmt.Errorf("docker backend: inspect image %s: %w", ref, err)
	}
	if err := buildContext(ctx, p, opts, dir, repo, tag); err != nil {
		return "", err
	}
	if previous != "" {
		// The tag moved: drop the image it left dangling. Docker refuses
		// while a container or another tag still uses it, which is fine.
		if now, err := cli.ImageInspect(ctx, ref); err == nil && now.ID != previous {
			_, _ = cli.ImageRemove(ctx, previous, client.ImageRemoveOptions{PruneChildren: true})
		}
	}
	return ref, nil
}

// stageBinary puts the static koala-emu binary at bin (a copy of
// opts.Binary, or built for the daemon's architecture) and returns its
// modification time and content hash.
func stageBinary(ctx context.Context, cli client.APIClient, opts ImageOptions, bin string) (time.Time, string, error) {
	var modTime time.Time
	if opts.Binary != "" {
		st, err := os.Stat(opts.Binary)
		if err != nil {
			return modTime, "", fmt.Errorf("docker backend: image binary: %w", err)
		}
		modTime = st.ModTime()
		if err := copyFile(opts.Binary, bin); err != nil {
			return modTime, "", fmt.Errorf("docker backend: image binary: %w", err)
		}
	} else {
		arch := runtime.GOARCH
		if info, err := cli.Info(ctx, client.InfoOptions{}); err == nil {
			if a := goArch(info.Info.Architecture); a != "" {
				arch = a
			}
		}
		if err := goBuild(ctx, opts, arch, bin); err != nil {
			return modTime, "", err
		}
		modTime = time.Now()
	}
	if err := CheckStatic(bin); err != nil {
		return modTime, "", err
	}
	sum, err := fileHash(bin)
	if err != nil {
		return modTime, "", fmt.Errorf("docker backend: image binary: %w", err)
	}
	return modTime, sum, nil
}

// buildContext writes the Dockerfile into the build context dir and
// builds repo:tag from it, labelled koala-emu.image=true.
func buildContext(ctx context.Context, p *tc.DockerProvider, opts ImageOptions, dir, repo, tag string) (err error) {
	dockerfile := []byte(Dockerfile)
	if opts.Dockerfile != "" {
		if dockerfile, err = os.ReadFile(opts.Dockerfile); err != nil {
			return fmt.Errorf("docker backend: Dockerfile: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), dockerfile, 0o644); err != nil {
		return fmt.Errorf("docker backend: build context: %w", err)
	}
	buildLog := opts.BuildLog
	if buildLog == nil {
		buildLog = io.Discard
	}
	req := &tc.ContainerRequest{FromDockerfile: tc.FromDockerfile{
		Context:        dir,
		Dockerfile:     "Dockerfile",
		Repo:           repo,
		Tag:            tag,
		KeepImage:      true,
		BuildLogWriter: buildLog,
		BuildOptionsModifier: func(o *client.ImageBuildOptions) {
			o.Labels = map[string]string{LabelImage: "true"}
		},
	}}
	bctx, cancel := context.WithTimeout(ctx, 5*time.Minute) // the provider retries transient errors until then
	defer cancel()
	if _, err := p.BuildImage(bctx, req); err != nil {
		return fmt.Errorf("docker backend: build image %s:%s: %w", repo, tag, err)
	}
	return nil
}

// RemoveImage removes an image reference (a tag BuildImage returned). The
// image itself goes when no other tag or container uses it.
func RemoveImage(ctx context.Context, ref string) error {
	p, err := connect(ctx, nil)
	if err != nil {
		return err
	}
	defer p.Close()
	if _, err := p.Client().ImageRemove(ctx, ref, client.ImageRemoveOptions{PruneChildren: true}); err != nil {
		return fmt.Errorf("docker backend: remove image %s: %w", ref, err)
	}
	return nil
}

// CheckStatic returns an error unless path is a statically linked ELF
// executable (no program interpreter), as a FROM scratch image needs.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("docker backend: %s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("docker backend: %s is dynamically linked; a FROM scratch image needs a static binary (build with CGO_ENABLED=0)", path)
		}
	}
	return nil
}

// goArch maps a Docker daemon architecture to GOARCH ("" if unknown).
func goArch(dockerArch string) string {
	switch dockerArch {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	case "armv7l", "arm":
		return "arm"
	case "s390x", "ppc64le", "riscv64":
		return dockerArch
	}
	return ""
}

func goBuild(ctx context.Context, opts ImageOptions, arch, out string) error {
	pkg := opts.Package
	if pkg == "" {
		pkg = "./cmd/koala-emu"
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = opts.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	var outBuf bytes.Buffer
	cmd.Stdout = &outBuf
	cmd.Stderr = &outBuf
	err := cmd.Run()
	if opts.BuildLog != nil {
		_, _ = opts.BuildLog.Write(outBuf.Bytes())
	}
	if err != nil {
		msg := strings.TrimSpace(outBuf.String())
		if msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return fmt.Errorf("docker backend: go build %s: %w", pkg, err)
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

func fileHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
