package client_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/config"
)

func residency(t *testing.T, c *client.Client, path string) *client.FileInfo {
	t.Helper()
	fi, err := c.Stat(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// The first acceptance test: a file of a disk → tape class is
// migrated, purged, then recalled on read, with identical bytes and
// checksums, on the emulated library in instant time.
func TestMigratePurgeRecall(t *testing.T) {
	c, dataDir := newClient(t, func(cfg *config.Config) { cfg.ReclaimEvery = "100ms" })
	data := randBytes(31, 5*64<<10+12345) // several stripes
	roundTrip(t, c, "/cold.dat", data, client.PutOptions{})
	before := residency(t, c, "/cold.dat")
	if before.Residency != api.ResidencyDisk {
		t.Fatalf("residency after put: %q", before.Residency)
	}

	res, err := c.Migrate(ctx, "/cold.dat")
	if err != nil || res.Files != 1 || res.Bytes != int64(len(data)) {
		t.Fatalf("migrate: %+v, %v", res, err)
	}
	fi := residency(t, c, "/cold.dat")
	if fi.Residency != api.ResidencyBoth || len(fi.Layout.Tapes) != 1 || fi.Layout.Tapes[0].Length != int64(len(data)) {
		t.Fatalf("after migrate: %q %+v", fi.Residency, fi.Layout)
	}
	if res, err := c.Migrate(ctx, "/cold.dat"); err != nil || res.Files != 0 {
		t.Fatalf("second migrate copied again: %+v, %v", res, err)
	}

	if _, err := c.Purge(ctx, "/cold.dat"); err != nil {
		t.Fatal(err)
	}
	fi = residency(t, c, "/cold.dat")
	if fi.Residency != api.ResidencyTape || len(fi.Layout.Segments) != 0 {
		t.Fatalf("after purge: %q %+v", fi.Residency, fi.Layout)
	}
	// The purged objects are deleted by the reclaimer, and only then.
	waitFor(t, func() bool { return len(objects(t, dataDir)) == 0 }, "purged objects deleted")

	var out bytes.Buffer
	if _, err := c.Get(ctx, "/cold.dat", &out, client.GetOptions{NoWait: true}); !errors.Is(err, client.ErrOffline) {
		t.Fatalf("get --no-wait of a file on tape: %v", err)
	}
	out.Reset()
	var states []string
	got, err := c.Get(ctx, "/cold.dat", &out, client.GetOptions{VerifyFixity: true, Staging: func(s client.StageStatus) { states = append(states, s.State) }})
	if err != nil {
		t.Fatalf("get with recall: %v", err)
	}
	if !bytes.Equal(out.Bytes(), data) || got.Fixity != before.Fixity {
		t.Fatalf("recalled %d bytes differ (fixity %s, was %s)", out.Len(), got.Fixity, before.Fixity)
	}
	if len(states) == 0 {
		t.Fatal("the get did not report the recall")
	}
	fi = residency(t, c, "/cold.dat")
	if fi.Residency != api.ResidencyBoth || len(fi.Layout.Segments) != 1 {
		t.Fatalf("after recall: %q %+v", fi.Residency, fi.Layout)
	}
	// Purge and recall again: a new disk copy under new object names.
	c.Purge(ctx, "/cold.dat")
	sts, err := c.Stage(ctx, []string{"/cold.dat"}, 0)
	if err != nil || len(sts) != 1 || sts[0].State == api.StageFailed {
		t.Fatalf("stage: %+v, %v", sts, err)
	}
	out.Reset()
	if _, err := c.Get(ctx, "/cold.dat", &out, client.GetOptions{VerifyFixity: true}); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("second recall: %v", err)
	}
}

func TestPurgeNeverDropsTheLastCopy(t *testing.T) {
	c, _ := newClient(t, nil)
	roundTrip(t, c, "/only", []byte("the only copy"), client.PutOptions{})
	if _, err := c.Purge(ctx, "/only"); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("purge of a file without a tape copy: %v", err)
	}
	roundTrip(t, c, "/only", []byte("the only copy"), client.PutOptions{Overwrite: true})
}

// A tape-only class keeps no disk copy once the tape copy is verified.
func TestTapeOnlyClass(t *testing.T) {
	c, _ := newClient(t, nil)
	data := randBytes(32, 70000)
	if _, err := c.Put(ctx, "/a", bytes.NewReader(data), int64(len(data)), client.PutOptions{COS: "archive"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if fi := residency(t, c, "/a"); fi.Residency != api.ResidencyTape {
		t.Fatalf("archive file after migration: %q", fi.Residency)
	}
	var out bytes.Buffer
	if _, err := c.Get(ctx, "/a", &out, client.GetOptions{}); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("recall of an archive file: %v", err)
	}
}
