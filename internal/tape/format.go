package tape

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"
)

// A tape file is self-describing, so the catalog can be rebuilt from the
// cartridges alone (as HPSS and CTA can from their tape labels):
//
//	header  | data of every entry, back to back | trailer
//
// Header and trailer are labels: an 8-byte magic, the JSON body's length
// and CRC32C, and the body. The header names the volume, the tape file's
// sequence number and every file aggregated in it (path, size, checksums,
// attributes, offset in the data); the trailer records the data's length and
// CRC32C, so a tape file cut short by a crash is recognised and discarded.

const (
	headerMagic  = "STRATAH1"
	trailerMagic = "STRATAT1"
	labelFixed   = 16 // magic + length + crc
	maxLabel     = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Entry is one file inside a tape file.
type Entry struct {
	Path    string `json:"path"`
	Bitfile int64  `json:"bitfile"`
	Offset  int64  `json:"offset"` // in the tape file's data
	Size    int64  `json:"size"`
	CRC32C  uint32 `json:"crc32c"`
	// Fixity is the file's whole-file hash as recorded at put,
	// "ALGORITHM:HEX" (blake3 or sha256).
	Fixity string `json:"fixity,omitempty"`
	// LegacySHA256 is where labels written before fixity algorithms were
	// named kept the same string ("sha256:HEX"); DecodeHeader moves it to
	// Fixity.
	LegacySHA256 string `json:"sha256,omitempty"`
	Mode         uint32 `json:"mode"`
	UID          uint32 `json:"uid"`
	GID          uint32 `json:"gid"`
	Mtime        int64  `json:"mtime"` // unix nanoseconds
	COS          string `json:"cos,omitempty"`
	// A striped copy keeps stripe Stripe of Stripes (of the file's
	// StripeUnit-wide round-robin layout, FileSize bytes in all) in this
	// entry; its stripes share CopyID. Unstriped entries leave these zero.
	Stripe     int    `json:"stripe,omitempty"`
	Stripes    int    `json:"stripes,omitempty"`
	StripeUnit int64  `json:"stripe_unit,omitempty"`
	FileSize   int64  `json:"file_size,omitempty"`
	CopyID     string `json:"copy_id,omitempty"`
}

// Header is the label written before a tape file's data.
type Header struct {
	Volume  string    `json:"volume"`
	Seq     int       `json:"seq"`   // tape file number on the volume, from 1
	Start   int64     `json:"start"` // where it begins: bytes from the beginning of tape
	Written time.Time `json:"written"`
	Entries []Entry   `json:"entries"`
}

// DataLen is the length of the data the header describes.
func (h *Header) DataLen() int64 {
	var n int64
	for _, e := range h.Entries {
		n = max(n, e.Offset+e.Size)
	}
	return n
}

// Trailer is the label written after a tape file's data.
type Trailer struct {
	DataLen int64  `json:"data_len"`
	DataCRC uint32 `json:"data_crc32c"`
	// Entries are the CRC32C of each entry's bytes, in header order.
	Entries []uint32 `json:"entries_crc32c"`
}

// ErrLabel reports a damaged or missing label.
var ErrLabel = errors.New("tape: bad label")

func encodeLabel(magic string, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b := make([]byte, labelFixed+len(body))
	copy(b, magic)
	binary.BigEndian.PutUint32(b[8:], uint32(len(body)))
	binary.BigEndian.PutUint32(b[12:], crc32.Checksum(body, castagnoli))
	copy(b[labelFixed:], body)
	return b, nil
}

// decodeLabel reads one label from r into v and returns its encoded size.
func decodeLabel(r io.Reader, magic string, v any) (int64, error) {
	var fixed [labelFixed]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrLabel, err)
	}
	if string(fixed[:8]) != magic {
		return 0, fmt.Errorf("%w: magic %q, want %q", ErrLabel, fixed[:8], magic)
	}
	n := binary.BigEndian.Uint32(fixed[8:])
	if n > maxLabel {
		return 0, fmt.Errorf("%w: length %d", ErrLabel, n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrLabel, err)
	}
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(fixed[12:]) {
		return 0, fmt.Errorf("%w: checksum", ErrLabel)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrLabel, err)
	}
	return int64(labelFixed + n), nil
}

// EncodeHeader returns h as a label.
func EncodeHeader(h *Header) ([]byte, error) { return encodeLabel(headerMagic, h) }

// DecodeHeader reads a header label and returns it with its size.
func DecodeHeader(r io.Reader) (*Header, int64, error) {
	var h Header
	n, err := decodeLabel(r, headerMagic, &h)
	if err != nil {
		return nil, 0, err
	}
	var end int64
	for i, e := range h.Entries {
		if e.Fixity == "" {
			h.Entries[i].Fixity, h.Entries[i].LegacySHA256 = e.LegacySHA256, ""
		}
		if e.Offset < end || e.Size < 0 {
			return nil, 0, fmt.Errorf("%w: entries overlap or out of order", ErrLabel)
		}
		end = e.Offset + e.Size
	}
	return &h, n, nil
}
