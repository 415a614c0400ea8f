// Package integration holds the tests that need the real machinery: Docker
// Engine (the docker backend: every actor in its own container, kernel
// shaping inside the containers, memberlist across them) and root. They are
// built only with the integration tag (`make integration`, `.ci/run`):
//
//	go test -tags integration -count=1 ./integration/...
//
// Every test removes what it created and checks, with the docker CLI, that
// no container or network labelled with its run is left; TestMain removes
// the image tag it built.
package integration
