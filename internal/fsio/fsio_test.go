package fsio_test

import (
	"testing"

	"github.com/strata-storage/strata/internal/fsio"
	"github.com/strata-storage/strata/internal/fsio/faultfs"
	"github.com/strata-storage/strata/internal/fsio/fsiotest"
)

func TestOS(t *testing.T) {
	fsiotest.Run(t, func(*testing.T) fsio.FS { return fsio.OS })
}

// faultfs with no rules is a file system like any other.
func TestFaultFS(t *testing.T) {
	fsiotest.Run(t, func(*testing.T) fsio.FS { return faultfs.New(fsio.OS) })
}
